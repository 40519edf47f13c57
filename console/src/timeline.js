// timeline.js — the redacted ledger timeline: the latest page, then live (ledger.stream,
// resumed by ordinal after a reconnect), older pages by cursor, filters, a group's events
// and attempts on demand, the chain's status (ledger.verify, when mounted) and a plot of
// calls per minute by decision.
import { h, replace, pretty, errorBox } from './dom.js';
import { call, get, follow } from './api.js';
import { plot } from './plot.js';

const DENIED = /^(policy|auth|op)\./;

// what a call's closing event says: ok, error, denied, held (null: not a closing event)
export function decisionOf(ev) {
  if (ev.kind === 'approval_requested') return 'held';
  if (ev.kind !== 'finished') return null;
  const code = ev.data && ev.data.code;
  if (ev.data && ev.data.status === 202) return 'held';
  if (!code) return 'ok';
  return DENIED.test(code) ? 'denied' : 'error';
}

export function mount(root, session, onError) {
  const groups = new Map(); // group_id -> {id, events: [], principal, op, door, decision, at}
  let before = null;
  let hasMore = false;
  let live = null;
  let scheduled = false;

  const fPrincipal = h('input', { type: 'text', id: 'tl-principal', placeholder: 'any' });
  const fOp = h('input', { type: 'text', id: 'tl-op', placeholder: 'any (prefix)' });
  const fDoor = h('select', { id: 'tl-door' }, ['', 'http', 'rpc', 'batch', 'mcp', 'tools', 'ws', 'e2b', 'legacy']
    .map((d) => h('option', { value: d }, d || 'any')));
  const fDecision = h('select', { id: 'tl-decision' }, ['', 'ok', 'error', 'denied', 'held']
    .map((d) => h('option', { value: d }, d || 'any')));
  const filters = h('form', { class: 'filters', 'aria-label': 'Filters', onsubmit: (e) => e.preventDefault() },
    [['Principal', fPrincipal], ['Operation', fOp], ['Door', fDoor], ['Decision', fDecision]].map(([l, c]) =>
      h('div', { class: 'field inline' }, h('label', { for: c.id }, l), c)));
  for (const c of [fPrincipal, fOp, fDoor, fDecision]) c.addEventListener('input', schedule);

  const status = h('span', { id: 'tl-live', class: 'badge', 'aria-live': 'polite' }, 'loading');
  const chain = h('div', { id: 'tl-chain', class: 'chain' });
  const chart = h('figure', { class: 'chart', id: 'tl-chart' });
  const rows = h('tbody', { id: 'tl-rows' });
  const older = h('button', { type: 'button', id: 'tl-older', onclick: loadOlder }, 'Load older');
  const table = h('table', { class: 'timeline', 'aria-label': 'Calls' },
    h('thead', {}, h('tr', {}, ['Time', 'Principal', 'Operation', 'Door', 'Decision', 'Group'].map((t) =>
      h('th', { scope: 'col' }, t)))),
    rows);
  root.appendChild(h('div', { class: 'toolbar' }, 'Live: ', status, chain));
  root.appendChild(filters);
  root.appendChild(chart);
  root.appendChild(h('div', { class: 'tablewrap' }, table));
  root.appendChild(h('p', {}, older));

  function add(ev) {
    let g = groups.get(ev.group_id);
    if (!g) {
      g = { id: ev.group_id, events: [], principal: ev.principal, op: ev.op, door: ev.door, decision: null,
        at: ev.at, open: false };
      groups.set(ev.group_id, g);
    }
    if (g.events.some((e) => e.ordinal === ev.ordinal)) return;
    g.events.push(ev);
    g.events.sort((a, b) => a.ordinal - b.ordinal);
    g.door = g.door || (ev.data && ev.data.door) || ev.door;
    const fin = g.events.filter((e) => e.kind === 'finished').pop();
    const ran = g.events.filter((e) => e.kind === 'approved_call_finished').pop(); // a held call, approved and run
    g.decision = ran ? (ran.data && ran.data.status < 400 ? 'ok' : 'error')
      : fin ? decisionOf(fin) : g.events.some((e) => e.kind === 'approval_requested') ? 'held' : null;
    if (fin) g.finishedAt = fin.at;
  }

  function shown(g) {
    const p = fPrincipal.value.trim();
    const o = fOp.value.trim();
    return (!p || g.principal === p) && (!o || (g.op || '').startsWith(o)) && (!fDoor.value || g.door === fDoor.value)
      && (!fDecision.value || g.decision === fDecision.value);
  }

  function schedule() {
    if (scheduled) return;
    scheduled = true;
    requestAnimationFrame(render);
  }

  function render() {
    scheduled = false;
    const list = [...groups.values()].filter(shown).sort((a, b) => b.id - a.id);
    replace(rows, list.slice(0, 500).map(row));
    older.hidden = !hasMore;
    replace(chart, plot([...groups.values()].filter(shown)), h('figcaption', {}, 'Calls per minute by decision (last 30 minutes)'));
  }

  function row(g) {
    const detailId = `tl-g-${g.id}`;
    const toggle = h('button', { type: 'button', class: 'link', 'aria-expanded': g.open ? 'true' : 'false',
      'aria-controls': detailId, 'data-group': g.id, onclick: () => expand(g) }, String(g.id));
    const tr = h('tr', { class: 'd-' + (g.decision || 'none') },
      h('td', {}, (g.at || '').replace('T', ' ').replace('Z', '')),
      h('td', {}, g.principal || '\u2014'), h('td', { class: 'opcell' }, g.op || '\u2014'), h('td', {}, g.door || ''),
      h('td', {}, h('span', { class: 'badge d-' + (g.decision || 'none') }, g.decision || '\u2026')),
      h('td', {}, toggle));
    if (!g.open) return tr;
    const frag = document.createDocumentFragment();
    frag.appendChild(tr);
    frag.appendChild(h('tr', { id: detailId, class: 'detail' }, h('td', { colspan: '6' }, g.detail || 'Loading\u2026')));
    return frag;
  }

  async function expand(g) {
    g.open = !g.open;
    schedule();
    if (!g.open) return;
    try {
      const full = await call('ledger.get', { group_id: g.id });
      g.detail = h('div', {},
        h('h3', {}, `Group ${g.id}: ${full.op || ''}`),
        h('p', {}, 'Request ', h('code', {}, String(full.request_id || '')), ` \u00b7 ${full.principal || ''} \u00b7 door ${full.door || ''}`),
        h('h4', {}, 'Events'),
        h('ol', {}, (full.events || []).map((e) => h('li', {}, h('strong', {}, e.kind), ` #${e.ordinal} ${e.at}`, pretty(e.data)))),
        h('h4', {}, 'Attempts'), pretty(full.attempts || []));
    } catch (e) {
      g.detail = errorBox(e.code || 'error', e.message);
      onError(e);
    }
    schedule();
  }

  async function loadOlder() {
    if (before === null) return;
    try {
      const page = await call('ledger.timeline', { limit: 200, before_ordinal: before });
      page.events.forEach(add);
      before = page.cursor.before_ordinal;
      hasMore = page.has_more_before;
      schedule();
    } catch (e) {
      onError(e);
    }
  }

  async function start() {
    try {
      const page = await call('ledger.timeline', { limit: 200 });
      page.events.forEach(add);
      before = page.cursor.before_ordinal;
      hasMore = page.has_more_before;
      schedule();
      const after = page.cursor.after_ordinal === null ? 0 : page.cursor.after_ordinal;
      if (session.has('ledger.stream')) {
        live = follow('/ledger/stream?after_ordinal=' + after, (ev) => {
          if (ev.event !== 'event') return;
          add(JSON.parse(ev.data));
          schedule();
        }, (state) => replace(status, state));
      } else replace(status, 'off (ledger.stream is not mounted)');
    } catch (e) {
      replace(status, 'error');
      root.appendChild(errorBox(e.code || 'error', e.message));
      onError(e);
    }
    if (session.has('ledger.verify')) {
      try {
        const v = await (await get('/ledger/verify')).json();
        replace(chain, h('span', { class: v.intact ? 'ok' : 'error' }, v.intact ? 'Chain intact' : 'Chain broken'),
          ` \u00b7 ${v.events} events`, v.head ? [' \u00b7 head ', h('code', { title: v.head.hash }, v.head.hash.slice(0, 16) + '\u2026'), ` at #${v.head.ordinal}`] : '',
          v.problem ? [' \u00b7 ', v.problem] : '');
      } catch (e) {
        replace(chain, errorBox(e.code || 'error', e.message));
      }
    }
  }
  start();
  return () => { if (live) live.stop(); };
}

