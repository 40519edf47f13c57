// kernels.js — a minimal notebook: a kernel's cells (kernels.execute) with rich outputs:
// images as <img> from data: URLs (opened larger on click), HTML in an iframe with
// sandbox="" (no script, a unique origin), JSON pretty-printed, text as text.
import { h, replace, append, pretty, errorBox, field } from './dom.js';
import { call } from './api.js';

const ANSI = /\u001b\[[0-9;]*[A-Za-z]/g;

function b64utf8(s) {
  return btoa(String.fromCharCode(...new TextEncoder().encode(s)));
}

function viewer(src, alt) {
  const dlg = h('div', { class: 'viewer', role: 'dialog', 'aria-modal': 'true', 'aria-label': 'Image output', id: 'k-viewer' });
  const close = () => dlg.remove();
  append(dlg, [h('button', { type: 'button', onclick: close }, 'Close'), h('img', { src, alt })]);
  dlg.addEventListener('keydown', (e) => { if (e.key === 'Escape') close(); });
  document.body.appendChild(dlg);
  dlg.querySelector('button').focus();
}

function output(bundle, n) {
  const parts = [];
  for (const [type, enc] of [['image/png', 'png'], ['image/jpeg', 'jpeg'], ['image/gif', 'gif']]) {
    if (typeof bundle[type] === 'string') {
      const src = `data:${type};base64,${bundle[type].replace(/\s/g, '')}`;
      const alt = `Output ${n} (${enc} image)`;
      parts.push(h('button', { type: 'button', class: 'imgout', 'aria-label': 'Open ' + alt, onclick: () => viewer(src, alt) },
        h('img', { src, alt })));
    }
  }
  if (typeof bundle['image/svg+xml'] === 'string') {
    const src = 'data:image/svg+xml;base64,' + b64utf8(bundle['image/svg+xml']);
    parts.push(h('button', { type: 'button', class: 'imgout', onclick: () => viewer(src, `Output ${n} (svg)`) },
      h('img', { src, alt: `Output ${n} (svg image)` })));
  }
  if (!parts.length && typeof bundle['text/html'] === 'string') {
    const f = h('iframe', { sandbox: '', title: `Output ${n} (HTML, sandboxed)`, class: 'htmlout' });
    f.srcdoc = bundle['text/html'];
    parts.push(f);
  }
  if (!parts.length && bundle['application/json'] !== undefined) parts.push(pretty(bundle['application/json']));
  if (!parts.length && typeof bundle['text/plain'] === 'string') parts.push(h('pre', {}, bundle['text/plain']));
  return h('div', { class: 'out' }, parts);
}

export function mount(root, session, onError) {
  if (!session.has('kernels.execute')) {
    root.appendChild(h('p', { class: 'muted' }, 'Kernels are not mounted for this principal.'));
    return null;
  }
  const pick = h('select', { id: 'k-pick' });
  const msg = h('div', { id: 'k-msg' });
  const cells = h('div', { id: 'k-cells' });

  async function list() {
    try {
      const r = await call('kernels.list', {});
      const ks = r.kernels || [];
      replace(pick, ks.length ? ks.map((k) => h('option', { value: k.id }, `${k.id} (${k.language}, ${k.status})`))
        : h('option', { value: '' }, 'none yet'));
      return ks;
    } catch (e) {
      replace(msg, errorBox(e.code || 'error', e.message));
      onError(e);
      return [];
    }
  }

  async function create() {
    replace(msg, 'Starting a Python kernel\u2026');
    try {
      const k = await call('kernels.create', { language: 'python' });
      await list();
      pick.value = k.id;
      replace(msg);
    } catch (e) {
      replace(msg, errorBox(e.code || 'error', e.message));
      onError(e);
    }
  }

  function addCell() {
    const n = cells.children.length + 1;
    const code = h('textarea', { rows: 4, spellcheck: 'false', class: 'code', 'data-cell': n });
    const out = h('div', { class: 'cellout', 'aria-live': 'polite' });
    const run = h('button', { type: 'button', onclick: () => exec(code.value, out, run) }, 'Run cell');
    code.addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && (e.shiftKey || e.ctrlKey)) { e.preventDefault(); run.click(); }
    });
    const cell = h('section', { class: 'cell', 'aria-label': `Cell ${n}` }, field(`Cell ${n}`, code, 'Shift+Enter runs it'), run, out);
    cells.appendChild(cell);
    code.focus();
  }

  async function exec(code, out, run) {
    if (!pick.value) await create();
    replace(out, 'Running\u2026');
    run.disabled = true;
    try {
      const x = await call('kernels.execute', { id: pick.value, code });
      const logs = x.logs || {};
      replace(out,
        h('p', { class: 'muted' }, `[${x.execution_count ?? ''}]`, x.timed_out ? ' timed out' : ''),
        (logs.stdout || []).length ? h('pre', { class: 'stdout' }, logs.stdout.join('')) : null,
        (logs.stderr || []).length ? h('pre', { class: 'stderr' }, logs.stderr.join('')) : null,
        (x.results || []).map((b, i) => output(b, i + 1)),
        x.error ? h('div', { class: 'error', role: 'alert' }, h('strong', {}, x.error.name), ': ', x.error.value,
          h('pre', {}, (x.error.traceback || []).join('\n').replace(ANSI, ''))) : null);
    } catch (e) {
      replace(out, errorBox(e.code || 'error', e.message));
      onError(e);
    } finally {
      run.disabled = false;
    }
  }

  root.appendChild(h('div', { class: 'toolbar' },
    h('label', { for: 'k-pick' }, 'Kernel '), pick, ' ',
    h('button', { type: 'button', id: 'k-new', onclick: create }, 'New Python kernel'), ' ',
    h('button', { type: 'button', id: 'k-add', onclick: addCell }, 'Add cell')));
  root.appendChild(msg);
  root.appendChild(cells);
  list();
  addCell();
  return null;
}
