// api.js — every request the console makes: same origin, Authorization: Bearer with the
// token the operator typed (kept in sessionStorage, never in a URL or cookie).

const KEY = 'abx.token';

export const token = {
  get: () => sessionStorage.getItem(KEY),
  set: (t) => sessionStorage.setItem(KEY, t),
  clear: () => sessionStorage.removeItem(KEY),
};

export class ApiError extends Error {
  constructor(status, code, message, details) {
    super(message);
    this.status = status;
    this.code = code;
    this.details = details;
  }
}

function headers(extra) {
  const h = { Authorization: 'Bearer ' + (token.get() || ''), ...extra };
  return h;
}

async function errorOf(resp) {
  let body = null;
  try {
    body = await resp.json();
  } catch (e) {
    /* not JSON */
  }
  const err = body && body.error;
  if (err) return new ApiError(resp.status, err.code, err.message, err.details);
  return new ApiError(resp.status, 'http.' + resp.status, resp.statusText || 'request failed');
}

// call an op through its RPC binding; the raw Response for the caller to read
export async function raw(op, args, opts = {}) {
  const resp = await fetch('/ops/' + encodeURIComponent(op), {
    method: 'POST',
    headers: headers({ 'Content-Type': 'application/json', ...(opts.headers || {}) }),
    body: JSON.stringify(args || {}),
    signal: opts.signal,
  });
  return resp;
}

// call an op that answers JSON: its body (202 pending answers too), or throw ApiError
export async function call(op, args, opts) {
  const resp = await raw(op, args, opts);
  if (!resp.ok) throw await errorOf(resp);
  return resp.json();
}

export async function get(path, opts = {}) {
  const resp = await fetch(path, { headers: headers(opts.headers), signal: opts.signal });
  if (!resp.ok) throw await errorOf(resp);
  return resp;
}

export { errorOf };

// read a text/event-stream Response: onEvent({event, id, data}) per event
export async function readSse(resp, onEvent) {
  const reader = resp.body.getReader();
  const dec = new TextDecoder();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true }).replace(/\r\n/g, '\n');
    let i;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const block = buf.slice(0, i);
      buf = buf.slice(i + 2);
      const ev = { event: 'message', id: null, data: [] };
      for (const line of block.split('\n')) {
        if (!line || line.startsWith(':')) continue;
        const c = line.indexOf(':');
        const k = c < 0 ? line : line.slice(0, c);
        let v = c < 0 ? '' : line.slice(c + 1);
        if (v.startsWith(' ')) v = v.slice(1);
        if (k === 'event') ev.event = v;
        else if (k === 'id') ev.id = v;
        else if (k === 'data') ev.data.push(v);
      }
      if (ev.data.length) onEvent({ ...ev, data: ev.data.join('\n') });
    }
  }
}

// follow an SSE path with resume: reconnects with Last-Event-ID after a drop
export function follow(path, onEvent, onState) {
  const ctl = { stopped: false, last: null, abort: null };
  (async () => {
    let delay = 500;
    while (!ctl.stopped) {
      const ac = new AbortController();
      ctl.abort = ac;
      try {
        const extra = ctl.last !== null ? { 'Last-Event-ID': ctl.last } : {};
        const resp = await get(path, { headers: extra, signal: ac.signal });
        onState && onState('live');
        delay = 500;
        await readSse(resp, (ev) => {
          if (ev.id !== null) ctl.last = ev.id;
          onEvent(ev);
        });
      } catch (e) {
        if (ctl.stopped) break;
        onState && onState('reconnecting', e);
      }
      if (ctl.stopped) break;
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, 8000);
    }
  })();
  return {
    stop() {
      ctl.stopped = true;
      if (ctl.abort) ctl.abort.abort();
    },
    resumeFrom(id) {
      ctl.last = id === null || id === undefined ? null : String(id);
    },
  };
}
