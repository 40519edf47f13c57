"""abxschema: every JSON result the tests receive is checked against its op's declared
result schema (the catalog's `result.schema`), so a declaration cannot drift from what
the handler returns. abxtest.configure() installs the hook (`install()`): it wraps
requests' Session.send, maps each 200 application/json response to its op (POST /ops/ID,
or the op's HTTP binding) and validates the body with the small JSON Schema validator
below (the subset the registry emits: type, properties, required,
additionalProperties, items, enum, minimum, maximum, anyOf). A stream's events are
checked against the op's declared events (`result.events`): when the whole answer is
read here, or by abxtest.read_sse for a streamed one.

The catalog comes from `abx catalog` (the builtin ops, once per binary) and, for ids
it does not know (custom or plugin ops), from the server's own GET /ops, fetched once
per server with the request's token. ABX_SCHEMA_CHECK=0 turns the hook off;
ABX_SCHEMA_RECORD=FILE appends every (op, body) seen as JSON lines.
"""
import json
import os
import re
import subprocess
import threading

import requests


class SchemaDrift(AssertionError):
    pass


_lock = threading.Lock()
_tl = threading.local()
_base = {}          # op id -> catalog entry (from the binary)
_routes = []        # (method, regex, op id)
_servers = {}       # port -> {op id -> entry} fetched from the server (custom ops)
# streamed responses (stream=True) are checked by abxtest.read_sse once read
_bin = None
checked = {"responses": 0, "ops": set()}


def _type_ok(t, v):
    if t == "object":
        return isinstance(v, dict)
    if t == "array":
        return isinstance(v, list)
    if t == "string":
        return isinstance(v, str)
    if t == "integer":
        return isinstance(v, int) and not isinstance(v, bool)
    if t == "number":
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    if t == "boolean":
        return isinstance(v, bool)
    if t == "null":
        return v is None
    return True


def errors(schema, v, where="$"):
    """The list of ways v does not match schema (empty: it matches)."""
    out = []
    if not isinstance(schema, dict):
        return out
    if "anyOf" in schema:
        if all(errors(s, v, where) for s in schema["anyOf"]):
            out.append("%s: matches none of anyOf" % where)
    t = schema.get("type")
    if t is not None:
        ts = t if isinstance(t, list) else [t]
        if not any(_type_ok(x, v) for x in ts):
            return out + ["%s: %s is not of type %s" % (where, json.dumps(v)[:80], t)]
    if "enum" in schema and v not in schema["enum"]:
        out.append("%s: %r is not one of %s" % (where, v, schema["enum"]))
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        if "minimum" in schema and v < schema["minimum"]:
            out.append("%s: %r < minimum %r" % (where, v, schema["minimum"]))
        if "maximum" in schema and v > schema["maximum"]:
            out.append("%s: %r > maximum %r" % (where, v, schema["maximum"]))
    if isinstance(v, dict):
        props = schema.get("properties", {})
        for k in schema.get("required", []):
            if k not in v:
                out.append("%s: missing required %r" % (where, k))
        extra = schema.get("additionalProperties", True)
        for k, x in v.items():
            if k in props:
                out += errors(props[k], x, "%s.%s" % (where, k))
            elif extra is False:
                out.append("%s: undeclared field %r" % (where, k))
            elif isinstance(extra, dict):
                out += errors(extra, x, "%s.%s" % (where, k))
    if isinstance(v, list) and isinstance(schema.get("items"), dict):
        for i, x in enumerate(v):
            out += errors(schema["items"], x, "%s[%d]" % (where, i))
    return out


def _route(path):
    rx = re.sub(r"\\\{[a-z_]+\\\*\\\}", ".+", re.escape(path))
    rx = re.sub(r"\\\{[a-z_]+\\\}", "[^/]+", rx)
    return re.compile("^" + rx + "$")


def _load_base(binary):
    global _bin
    if _bin == binary:
        return
    _bin = binary
    try:
        out = subprocess.run([binary, "catalog"], capture_output=True, text=True, timeout=30).stdout
        ops = json.loads(out)["ops"]
    except (OSError, ValueError, KeyError, subprocess.SubprocessError):
        ops = []
    _base.clear()
    del _routes[:]
    for o in ops:
        _base[o["id"]] = o
        for b in o.get("http", []):
            _routes.append((b["method"], _route(b["path"]), o["id"]))
    # the most specific binding first: literal segments beat variables
    _routes.sort(key=lambda r: -len(r[1].pattern.replace("[^/]+", "").replace(".+", "")))


def forget(port):
    """A server (re)started on this port: its own catalog is fetched again when needed."""
    with _lock:
        _servers.pop(port, None)


def _server_entry(req, port, op_id):
    with _lock:
        known = _servers.get(port)
    if known is None:
        known = {}
        try:
            h = {k: v for k, v in req.headers.items() if k.lower() == "authorization"}
            _tl.skip = True
            try:
                r = requests.get("http://127.0.0.1:%d/ops" % port, headers=h, timeout=5)
            finally:
                _tl.skip = False
            if r.status_code == 200:
                known = {o["id"]: o for o in r.json().get("ops", [])}
        except (requests.RequestException, ValueError):
            pass
        with _lock:
            _servers[port] = known
    return known.get(op_id)


def op_for(method, path):
    if method == "POST" and path.startswith("/ops/"):
        return path[5:]
    for m, rx, op_id in _routes:
        if m == method and rx.match(path):
            return op_id
    return None


def check_events(req, url, events):
    """Validate a stream's parsed events ([{event, data}]) against its op's declared
    events: an undeclared event name or data that does not match is a drift."""
    u = requests.utils.urlparse(url)
    op_id = op_for(req.method, u.path)
    entry = (_base.get(op_id) or _server_entry(req, u.port, op_id)) if op_id else None
    declared = (entry or {}).get("result", {}).get("events")
    if not declared:
        return
    for ev in events:
        if ev["event"] not in declared:
            raise SchemaDrift("%s: the stream sent an undeclared event %r" % (op_id, ev["event"]))
        try:
            data = json.loads(ev["data"])
        except ValueError:
            data = ev["data"]
        errs = errors(declared[ev["event"]], data)
        checked["responses"] += 1
        if errs:
            raise SchemaDrift("%s: event %r does not match its declared schema:\n  %s\ndata: %s"
                              % (op_id, ev["event"], "\n  ".join(errs[:10]), ev["data"][:600]))


def check(req, resp):
    """Validate one response; raise SchemaDrift on a mismatch."""
    if resp.status_code == 200 and resp.headers.get("Content-Type", "").startswith("text/event-stream"):
        import abxtest  # the one SSE parser
        check_events(req, resp.url, abxtest.parse_sse(resp.text))
        return
    if resp.status_code != 200 or req.method == "HEAD" or \
            not resp.headers.get("Content-Type", "").startswith("application/json"):
        return
    u = requests.utils.urlparse(resp.url)
    if u.hostname not in ("127.0.0.1", "localhost") or not u.port:
        return
    host = req.headers.get("Host", "")
    if host[:1] in ("p", "P") and host[1:2].isdigit():
        return  # a port's own origin (docs/ports.md): every path is the agent's server's, not an op
    if req.method == "POST" and u.path == "/batch":
        try:
            results = resp.json().get("results", [])
        except (ValueError, AttributeError):
            return
        for item in results:  # each call of a batch is its op's answer
            if isinstance(item, dict) and item.get("status") == 200 and isinstance(item.get("op"), str):
                _check_body(req, u, item["op"], item.get("body"))
        return
    op_id = op_for(req.method, u.path)
    if not op_id:
        return
    try:
        body = resp.json()
    except ValueError:
        raise SchemaDrift("%s %s: a 200 application/json body that is not JSON" % (req.method, u.path))
    _check_body(req, u, op_id, body)


def _check_body(req, u, op_id, body):
    entry = _base.get(op_id) or _server_entry(req, u.port, op_id)
    if not entry:
        return
    if entry.get("result", {}).get("kind", "json") != "json" or entry.get("query") == "raw":
        return  # bytes, streams, and ports.proxy's relayed answers are not the op's JSON
    schema = entry.get("result", {}).get("schema")
    rec = os.environ.get("ABX_SCHEMA_RECORD")
    if rec:
        with _lock, open(rec, "a") as f:
            f.write(json.dumps({"op": op_id, "body": body}) + "\n")
    if not schema:
        return
    errs = errors(schema, body)
    checked["responses"] += 1
    checked["ops"].add(op_id)
    if errs:
        raise SchemaDrift("%s: the result does not match its declared schema:\n  %s\nbody: %s"
                          % (op_id, "\n  ".join(errs[:10]), json.dumps(body)[:600]))


def install(binary):
    """Wrap requests' Session.send once (idempotent)."""
    if os.environ.get("ABX_SCHEMA_CHECK", "1") == "0":
        return
    _load_base(binary)
    if getattr(requests.Session.send, "_abx_schema", False):
        return
    orig = requests.Session.send

    def send(self, request, **kw):
        resp = orig(self, request, **kw)
        if not getattr(_tl, "skip", False) and not kw.get("stream"):
            check(request, resp)
        elif kw.get("stream"):
            resp._abx_request = request  # read_sse checks the events it reads
        return resp

    send._abx_schema = True
    requests.Session.send = send
