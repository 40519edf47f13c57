// approvals.js — held calls: the exact canonical arguments and who asked; approve or deny
// with a reason (approvals.decide: the server refuses one's own call and says why); the
// list updates live from approvals.stream (or, where that is not mounted, every 1.5 s).
import { h, replace, pretty, errorBox, field } from './dom.js';
import { call, follow } from './api.js';

export function mount(root, session, onError) {
  const canDecide = session.has('approvals.decide');
  const list = h('div', { id: 'ap-list', 'aria-live': 'polite' }, 'Loading\u2026');
  const recent = h('div', { id: 'ap-recent' });
  const status = h('div', { id: 'ap-status', role: 'status' });
  root.appendChild(h('p', { class: 'muted' }, canDecide
    ? 'Calls held by approval: required. Approving runs the call exactly once, as the principal who asked.'
    : 'You can see your own held calls; deciding needs approvals.decide and role approver.'));
  root.appendChild(status);
  root.appendChild(list);
  root.appendChild(h('h2', {}, 'Recently decided'));
  root.appendChild(recent);
  const reasons = new Map(); // keep typed reasons across refreshes
  let shownIds = '';
  let timer = null;

  function card(a) {
    const reasonId = `ap-reason-${a.id}`;
    const reason = h('input', { type: 'text', id: reasonId, value: reasons.get(a.id) || '', placeholder: 'why' });
    reason.addEventListener('input', () => reasons.set(a.id, reason.value));
    const out = h('div', { class: 'ap-out', role: 'status' });
    async function decide(decision) {
      replace(out, 'Sending\u2026');
      try {
        const r = await call('approvals.decide', { id: a.id, decision, reason: reason.value || undefined });
        replace(out, h('span', { class: 'ok' }, `${decision === 'approve' ? 'Approved' : 'Denied'}: ${r.status || ''}`));
        refresh(true);
      } catch (e) {
        replace(out, errorBox(e.code || 'error', e.message));
        onError(e);
      }
    }
    return h('article', { class: 'card', 'data-approval': a.id, 'aria-label': `Held call ${a.op} by ${a.principal}` },
      h('h3', {}, a.op, ' ', h('span', { class: 'muted' }, 'asked by '), h('strong', { class: 'asker' }, a.principal)),
      h('p', { class: 'muted' }, `${a.created_at || ''} \u00b7 id `, h('code', {}, a.id), ' \u00b7 args sha256 ',
        h('code', {}, (a.args_sha256 || '').slice(0, 16))),
      h('h4', {}, 'Arguments (canonical)'), pretty(a.args),
      a.files && a.files.length ? [h('h4', {}, 'Files'), pretty(a.files)] : null,
      canDecide ? h('div', { class: 'actions' }, field('Reason', reason),
        h('button', { type: 'button', class: 'approve', onclick: () => decide('approve') }, 'Approve'),
        h('button', { type: 'button', class: 'deny', onclick: () => decide('deny') }, 'Deny')) : null,
      out);
  }

  function show(all, force) {
    const pending = all.filter((a) => a.status === 'pending');
    const ids = pending.map((a) => a.id).join(',');
    if (force || ids !== shownIds) {
      shownIds = ids;
      replace(list, pending.length ? pending.map(card) : h('p', { class: 'muted', id: 'ap-none' }, 'Nothing is waiting.'));
    }
    replace(recent, h('ul', {}, all.filter((a) => a.status !== 'pending').slice(-20).reverse().map((a) =>
      h('li', { 'data-approval': a.id }, h('strong', {}, a.status), ` ${a.op} by ${a.principal}`,
        a.decided_by ? ` \u00b7 decided by ${a.decided_by}` : '', a.reason ? ` \u00b7 \u201c${a.reason}\u201d` : ''))));
  }

  async function refresh(force) {
    try {
      show((await call('approvals.list', {})).approvals || [], force);
      replace(status);
    } catch (e) {
      replace(status, errorBox(e.code || 'error', e.message));
      onError(e);
    }
  }

  let live = null;
  if (session.has('approvals.stream')) {
    let first = true;
    live = follow('/approvals/stream', (ev) => {
      if (ev.event !== 'approvals') return;
      show(JSON.parse(ev.data).approvals || [], first);
      first = false;
    }, (state, e) => replace(status, state === 'live' ? '' : errorBox(e && e.code || 'offline', 'reconnecting\u2026')));
  } else {
    refresh(true);
    timer = setInterval(() => refresh(false), 1500);
  }
  return () => { clearInterval(timer); if (live) live.stop(); };
}
