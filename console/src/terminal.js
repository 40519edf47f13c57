// terminal.js — xterm.js over the terminal WebSocket: a single-use ticket per connection
// (terminal.ticket; a browser's WebSocket cannot send Authorization), resize messages, and
// a reconnect that replays the terminal's recent output.
import { Terminal } from '@xterm/xterm';
import { FitAddon } from '@xterm/addon-fit';
import { h, replace, errorBox } from './dom.js';
import { call } from './api.js';

export function mount(root, session, onError) {
  const status = h('span', { id: 'term-status', class: 'badge', 'aria-live': 'polite' }, 'not connected');
  const pick = h('select', { id: 'term-pick' });
  const box = h('div', { id: 'term', class: 'term', 'aria-label': 'Terminal' });
  const msg = h('div', { id: 'term-msg' });
  let term = null;
  let fit = null;
  let ws = null;
  let current = null;
  let closing = false;
  let retry = null;

  async function list() {
    try {
      const r = await call('terminal.list', {});
      const ts = (r.terminals || r.processes || []).filter((t) => t.running !== false);
      replace(pick, ts.length ? ts.map((t) => h('option', { value: t.id || t.pid }, `#${t.id || t.pid} ${t.command || ''}`))
        : h('option', { value: '' }, 'none yet'));
      if (current) pick.value = String(current);
    } catch (e) {
      replace(msg, errorBox(e.code || 'error', e.message));
      onError(e);
    }
  }

  function ensureTerm() {
    if (term) return;
    term = new Terminal({ cursorBlink: true, convertEol: false, fontSize: 14, scrollback: 5000 });
    fit = new FitAddon();
    term.loadAddon(fit);
    term.open(box);
    fit.fit();
    term.onData((d) => {
      if (ws && ws.readyState === 1) ws.send(JSON.stringify({ type: 'input', data: d }));
    });
    term.onResize(({ cols, rows }) => {
      if (ws && ws.readyState === 1) ws.send(JSON.stringify({ type: 'resize', cols, rows }));
    });
  }

  async function connect(id) {
    ensureTerm();
    if (ws) { closing = true; ws.close(); }
    clearTimeout(retry);
    current = id;
    replace(status, 'connecting');
    try {
      const t = await call('terminal.ticket', { id: Number(id) });
      const url = (location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + t.ws_path;
      const sock = new WebSocket(url);
      sock.binaryType = 'arraybuffer';
      ws = sock;
      closing = false;
      term.reset();
      sock.onopen = () => {
        replace(status, `connected to #${id}`);
        sock.send(JSON.stringify({ type: 'resize', cols: term.cols, rows: term.rows }));
        term.focus();
      };
      sock.onmessage = (ev) => {
        if (typeof ev.data === 'string') return; // control messages (JSON) are not output
        term.write(new Uint8Array(ev.data));
      };
      sock.onclose = () => {
        if (ws !== sock) return;
        replace(status, 'disconnected');
        if (!closing) retry = setTimeout(() => connect(id), 1500); // reconnect: the output replays
      };
    } catch (e) {
      replace(status, 'error');
      replace(msg, errorBox(e.code || 'error', e.message));
      onError(e);
    }
  }

  async function create() {
    ensureTerm();
    try {
      const t = await call('terminal.create', { command: 'bash --norc --noprofile', cols: term.cols, rows: term.rows });
      await list();
      pick.value = String(t.id);
      connect(t.id);
    } catch (e) {
      replace(msg, errorBox(e.code || 'error', e.message));
      onError(e);
    }
  }

  const onWin = () => { if (fit) fit.fit(); };
  window.addEventListener('resize', onWin);
  root.appendChild(h('div', { class: 'toolbar' },
    h('button', { type: 'button', id: 'term-new', onclick: create }, 'New terminal'), ' ',
    h('label', { for: 'term-pick' }, 'Terminal '), pick, ' ',
    h('button', { type: 'button', id: 'term-connect', onclick: () => pick.value && connect(pick.value) }, 'Connect'), ' ',
    h('button', { type: 'button', id: 'term-reconnect', onclick: () => current && connect(current) }, 'Reconnect'), ' ',
    status));
  root.appendChild(msg);
  root.appendChild(box);
  list();
  return () => {
    window.removeEventListener('resize', onWin);
    clearTimeout(retry);
    closing = true;
    if (ws) ws.close();
    if (term) term.dispose();
  };
}
