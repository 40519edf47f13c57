// main.js — the shell: sign-in, navigation (hash routes) and the pages.
import './styles.css';
import '@xterm/xterm/css/xterm.css';
import { h, replace, errorBox } from './dom.js';
import { token, get, ApiError } from './api.js';
import * as ops from './ops.js';
import * as timeline from './timeline.js';
import * as approvals from './approvals.js';
import * as terminal from './terminal.js';
import * as kernels from './kernels.js';

const PAGES = [
  { id: 'ops', title: 'Operations', mod: ops },
  { id: 'timeline', title: 'Timeline', mod: timeline },
  { id: 'approvals', title: 'Approvals', mod: approvals },
  { id: 'terminal', title: 'Terminal', mod: terminal },
  { id: 'kernels', title: 'Kernels', mod: kernels },
];

const app = document.getElementById('app');
let session = null; // {catalog, principal, ops: Map}
let unmount = null;

async function load() {
  const catalog = await (await get('/ops')).json();
  let principal = null;
  try {
    principal = (await (await get('/capabilities')).json()).principal;
  } catch (e) {
    /* core.capabilities may not be mounted for this principal */
  }
  const byId = new Map(catalog.ops.map((o) => [o.id, o]));
  return { catalog, principal, ops: byId, has: (id) => byId.has(id) };
}

function signIn(message) {
  if (unmount) unmount();
  unmount = null;
  const input = h('input', { type: 'password', id: 'token', name: 'token', autocomplete: 'off', required: true,
    'aria-describedby': 'token-hint' });
  const status = h('div', { id: 'signin-status', 'aria-live': 'polite' },
    message ? errorBox(message.code, message.text) : null);
  const form = h('form', { class: 'signin', 'aria-labelledby': 'signin-title' },
    h('h1', { id: 'signin-title' }, 'abx console'),
    h('label', { for: 'token' }, 'Access token'),
    input,
    h('div', { class: 'hint', id: 'token-hint' },
      'Kept in this tab only (session storage) and sent as Authorization: Bearer. The console can do exactly what this token\u2019s principal may.'),
    h('button', { type: 'submit' }, 'Sign in'),
    status);
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    token.set(input.value.trim());
    replace(status, 'Checking\u2026');
    try {
      session = await load();
      route();
    } catch (e) {
      token.clear();
      replace(status, errorBox(e.code || 'error', e instanceof ApiError && e.status === 401
        ? 'That token was not accepted: ' + e.message + '.'
        : 'Could not sign in: ' + e.message));
      input.focus();
    }
  });
  replace(app, h('main', { class: 'center' }, form));
  input.focus();
}

function shell(current) {
  const nav = h('nav', { 'aria-label': 'Pages' }, h('ul', {},
    PAGES.map((p) => h('li', {}, h('a', { href: '#/' + p.id, 'aria-current': p.id === current ? 'page' : null }, p.title)))));
  const out = h('button', { type: 'button', class: 'link', onclick: () => { token.clear(); session = null; signIn(); } },
    'Sign out');
  const header = h('header', { class: 'top' },
    h('span', { class: 'brand' }, 'abx'), nav,
    h('span', { class: 'who' }, session.principal ? 'Signed in as ' : '', session.principal ? h('strong', {}, session.principal) : null, ' ', out));
  const main = h('main', { id: 'page', tabindex: '-1' });
  replace(app, header, main);
  return main;
}

function route() {
  if (!token.get()) return signIn();
  if (!session) {
    load().then((s) => { session = s; route(); }).catch((e) => {
      token.clear();
      signIn({ code: e.code || 'error', text: 'Please sign in again: ' + e.message });
    });
    return;
  }
  const id = (location.hash.match(/^#\/(\w+)/) || [])[1] || 'ops';
  const page = PAGES.find((p) => p.id === id) || PAGES[0];
  if (unmount) unmount();
  const main = shell(page.id);
  document.title = page.title + ' \u00b7 abx console';
  main.appendChild(h('h1', {}, page.title));
  unmount = page.mod.mount(main, session, (err) => {
    if (err instanceof ApiError && err.status === 401) {
      token.clear();
      session = null;
      signIn({ code: err.code, text: 'The token is no longer accepted: ' + err.message });
    }
  }) || null;
}

window.addEventListener('hashchange', route);
route();
