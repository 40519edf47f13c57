// ops.js — the caller's catalog (/ops) with search, each op's form, and its answer:
// JSON pretty-printed, SSE live, bytes as a download, errors with code and message.
import { h, replace, append, pretty, errorBox } from './dom.js';
import { raw, errorOf, readSse } from './api.js';
import { buildForm } from './schemaform.js';

function matches(op, q) {
  if (!q) return true;
  const hay = [op.id, op.summary || '', (op.effects || []).join(' ')].join(' ').toLowerCase();
  return q.toLowerCase().split(/\s+/).every((w) => hay.includes(w));
}

export function mount(root, session, onError) {
  const ops = session.catalog.ops;
  const search = h('input', { type: 'search', id: 'op-search', placeholder: 'files, read, exec\u2026',
    'aria-controls': 'op-list' });
  const list = h('ul', { id: 'op-list', class: 'oplist', 'aria-label': 'Operations' });
  const detail = h('section', { class: 'opdetail', 'aria-live': 'polite', 'aria-label': 'Operation' },
    h('p', { class: 'muted' }, 'Choose an operation.'));
  let stopStream = null;

  function renderList() {
    const shown = ops.filter((o) => matches(o, search.value));
    replace(list, shown.map((o) => h('li', {},
      h('button', { type: 'button', class: 'opbtn', 'data-op': o.id, onclick: () => select(o) },
        h('span', { class: 'opid' }, o.id), ' ',
        h('span', { class: 'effects' }, (o.effects || []).join(', '))))));
    if (!shown.length) list.appendChild(h('li', { class: 'muted' }, 'No operation matches.'));
  }

  function select(op) {
    if (stopStream) stopStream();
    history.replaceState(null, '', '#/ops/' + op.id);
    const form = buildForm(op);
    const result = h('div', { class: 'result', id: 'op-result', 'aria-live': 'polite' });
    const run = h('button', { type: 'submit', id: 'op-run' }, 'Run ' + op.id);
    const f = h('form', { class: 'opform', 'aria-label': 'Arguments of ' + op.id }, form.fields, run);
    f.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      if (stopStream) stopStream();
      let args;
      try {
        args = form.args();
      } catch (e) {
        replace(result, errorBox('args', e.message));
        return;
      }
      replace(result, h('p', { class: 'muted' }, 'Running\u2026'));
      run.disabled = true;
      try {
        await answer(op, args, result);
      } catch (e) {
        replace(result, errorBox(e.code || 'error', e.message));
        onError(e);
      } finally {
        run.disabled = false;
      }
    });
    replace(detail,
      h('h2', {}, op.id),
      h('p', {}, op.summary || ''),
      h('p', { class: 'muted' }, 'Effects: ', (op.effects || []).join(', ') || 'none',
        op.stream && op.stream !== 'none' ? ` \u00b7 stream: ${op.stream}` : ''),
      f, result);
    const first = f.querySelector('input, select, textarea, button');
    if (first) first.focus();
  }

  async function answer(op, args, result) {
    const ac = new AbortController();
    const resp = await raw(op.id, args, { signal: ac.signal });
    if (!resp.ok) {
      const e = await errorOf(resp);
      replace(result, errorBox(e.code, e.message), e.details ? pretty(e.details) : null);
      onError(e);
      return;
    }
    const type = resp.headers.get('Content-Type') || '';
    if (type.startsWith('text/event-stream')) {
      const events = h('ol', { class: 'events', id: 'op-events' });
      const stop = h('button', { type: 'button', onclick: () => ac.abort() }, 'Stop');
      stopStream = () => ac.abort();
      replace(result, h('p', {}, 'Streaming ', stop), events);
      try {
        await readSse(resp, (ev) => {
          let data = ev.data;
          try { data = JSON.stringify(JSON.parse(ev.data), null, 2); } catch (e) { /* text */ }
          append(events, [h('li', {}, h('strong', {}, ev.event), ev.id ? ` #${ev.id}` : '', h('pre', {}, data))]);
        });
        append(result, [h('p', { class: 'muted' }, 'The stream ended.')]);
      } catch (e) {
        append(result, [h('p', { class: 'muted' }, 'Stopped.')]);
      }
      return;
    }
    if (type.startsWith('application/json')) {
      const body = await resp.json();
      if (resp.status === 202 && body.approval_id) return pending(body, result);
      replace(result, h('p', { class: 'ok' }, `${resp.status} OK`), pretty(body));
      return;
    }
    const blob = await resp.blob();
    const url = URL.createObjectURL(blob);
    const name = op.id.replace(/\./g, '-') + (type.startsWith('text/') ? '.txt' : '.bin');
    replace(result, h('p', {}, `${blob.size} bytes of ${type || 'data'}: `,
      h('a', { href: url, download: name }, 'download ' + name)));
  }

  // a held call: say so, then poll approvals.get until it is decided and show the outcome
  async function pending(body, result) {
    const state = h('p', { class: 'pending', id: 'op-pending' },
      'Held for approval (', h('code', {}, body.approval_id), '). Waiting for an approver\u2026');
    replace(result, state);
    let alive = true;
    stopStream = () => { alive = false; };
    while (alive) {
      await new Promise((r) => setTimeout(r, 1000));
      const resp = await raw('approvals.get', { id: body.approval_id });
      if (resp.status === 202) continue;
      const j = await resp.json().catch(() => ({}));
      if (!resp.ok) {
        replace(result, errorBox(j.error ? j.error.code : 'error', j.error ? j.error.message : 'failed'));
        return;
      }
      replace(result, h('p', { class: 'ok', id: 'op-approved' }, `Approved and run: the call answered ${resp.status}`),
        pretty(j));
      return;
    }
  }

  search.addEventListener('input', renderList);
  const layout = h('div', { class: 'split' },
    h('div', { class: 'side' }, h('label', { for: 'op-search' }, 'Search operations'), search, list), detail);
  root.appendChild(layout);
  renderList();
  const want = (location.hash.match(/^#\/ops\/(.+)$/) || [])[1];
  const op = want && ops.find((o) => o.id === decodeURIComponent(want));
  if (op) select(op);
  else search.focus();
  return () => { if (stopStream) stopStream(); };
}

