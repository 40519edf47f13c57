"""The zero-step client: everything it knows about the server's operations comes from
`GET /ops` (the caller's operations.json), fetched when the client is made. Calls go
through the RPC binding `POST /ops/{id}` (every op has one), or the op's own HTTP binding
for ops whose request body is their data (uploads). Arguments are checked against the
fetched schema before anything is sent."""
import base64
import http.client
import json
import os
import urllib.parse

from .errors import (AbxError, ArgumentError, ContractMismatchError, RateLimitError, TransportError,
                     error_class)

__version__ = "0.1.0"
CATALOG_VERSION = 1
DEFAULT_URL = "http://127.0.0.1:8080"


def abx_home():
    """$ABX_HOME, else ~/.abx: where `abx serve` (embedded default) keeps its url and token."""
    home = os.environ.get("ABX_HOME")
    return home if home else os.path.join(os.path.expanduser("~"), ".abx")


def _read_small(path):
    try:
        with open(path) as f:
            text = f.read(512).strip()
    except OSError:
        return None
    return text or None


def default_url():
    """ABX_URL, else the url file the local server wrote, else http://127.0.0.1:8080."""
    return os.environ.get("ABX_URL") or _read_small(os.path.join(abx_home(), "url")) or DEFAULT_URL


def default_token():
    """ABX_TOKEN, else the local server's token file ($ABX_HOME/token), else None."""
    return os.environ.get("ABX_TOKEN") or _read_small(os.path.join(abx_home(), "token"))


# -- argument checking against the catalog's parameter entries ------------------------------

_SCALAR = {
    "string": lambda v: isinstance(v, str),
    "bytes": lambda v: isinstance(v, str),
    "enum": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "object": lambda v: isinstance(v, dict),
    "any": lambda v: True,
}


def _bad(op, name, what):
    return ArgumentError("args.invalid", "argument '%s' %s" % (name, what), op=op)


def _check_scalar(op, p, t, v, name):
    test = _SCALAR.get(t)
    if test is None:
        return  # a type this client does not know: the server checks it
    if not test(v):
        raise _bad(op, name, "must be %s %s, not %s" % ("an" if t[0] in "aeiou" else "a", t, type(v).__name__))
    if t == "bytes":
        try:
            base64.b64decode(v, validate=True)
        except ValueError:
            raise _bad(op, name, "must be base64 (standard alphabet, padded)")
    if t == "enum" and "choices" in p and v not in p["choices"]:
        raise _bad(op, name, "must be one of %s" % ", ".join(p["choices"]))
    if t in ("integer", "number"):
        if "min" in p and v < p["min"]:
            raise _bad(op, name, "must be >= %s" % p["min"])
        if "max" in p and v > p["max"]:
            raise _bad(op, name, "must be <= %s" % p["max"])
    if t == "object" and "fields" in p:
        check_args(op, p["fields"], v, prefix=name)


def _check_value(op, p, v, name):
    t = p.get("type")
    if t == "list":
        if not isinstance(v, (list, tuple)):
            raise _bad(op, name, "must be a list of %s" % p.get("items", "values"))
        if p.get("items") not in ("integer", "number"):
            if "min" in p and len(v) < p["min"]:
                raise _bad(op, name, "needs at least %s items" % p["min"])
            if "max" in p and len(v) > p["max"]:
                raise _bad(op, name, "takes at most %s items" % p["max"])
        for i, it in enumerate(v):
            _check_scalar(op, dict(p, type=p.get("items")), p.get("items"), it, "%s[%d]" % (name, i))
        return
    if t == "map":
        if not isinstance(v, dict):
            raise _bad(op, name, "must be a map of string to %s" % p.get("items", "values"))
        for k, it in v.items():
            if not isinstance(k, str) or not k:
                raise _bad(op, name, "has an empty or non-string key")
            _check_scalar(op, dict(p, type=p.get("items")), p.get("items"), it, "%s.%s" % (name, k))
        return
    _check_scalar(op, p, t, v, name)


def check_args(op, params, args, prefix=None, one_of=None):
    """Raise ArgumentError (args.unknown / args.missing / args.invalid, the server's codes)
    when args do not fit the catalog's parameter entries."""
    full = (lambda n: "%s.%s" % (prefix, n)) if prefix else (lambda n: n)
    by_name = {p["name"]: p for p in params}
    for k in args:
        if k not in by_name:
            known = ", ".join(sorted(by_name)) or "none"
            raise ArgumentError("args.unknown", "unknown argument '%s' (known: %s)" % (full(k), known), op=op)
    for p in params:
        name = p["name"]
        if args.get(name) is None:  # None means "not given" (the server treats null the same way)
            if p.get("required"):
                raise ArgumentError("args.missing", "missing required argument '%s'" % full(name), op=op)
            continue
        _check_value(op, p, args[name], full(name))
    if one_of:
        given = [n for n in one_of if args.get(n) is not None]
        if len(given) != 1:
            raise ArgumentError("args.missing" if not given else "args.invalid",
                                "exactly one of %s must be given" % ", ".join(one_of), op=op)


# -- results --------------------------------------------------------------------------------

class Event:
    """One server-sent event: `event` (name), `data` (parsed JSON, or the text), `id`."""

    __slots__ = ("event", "data", "id")

    def __init__(self, event, data, id=None):
        self.event, self.data, self.id = event, data, id

    def __repr__(self):
        return "Event(%r, %r, id=%r)" % (self.event, self.data, self.id)

    def __eq__(self, other):
        return isinstance(other, Event) and (self.event, self.data, self.id) == (other.event, other.data, other.id)


class _SseLines:
    """One SSE event from lines (the sync and asyncio streams share it): feed() returns the
    event a blank line completes, end() what the stream's end completes, else None."""

    def __init__(self):
        self.event, self.data, self.eid = "message", [], None

    def feed(self, raw):
        line = raw.decode("utf-8", "replace").rstrip("\r\n")
        if not line:
            if self.data:
                return EventStream._make(self.event, self.data, self.eid)
            self.event, self.eid = "message", None
            return None
        if line.startswith(":"):
            return None
        field, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if field == "event":
            self.event = value
        elif field == "data":
            self.data.append(value)
        elif field == "id":
            self.eid = value
        return None

    def end(self):
        return EventStream._make(self.event, self.data, self.eid) if self.data else None


class EventStream:
    """Iterator over the events of an SSE answer, read as they arrive. Closing it (or
    leaving a `with` block) closes the connection: for commands.stream that ends the
    command. Comments (keepalives) are skipped."""

    def __init__(self, conn, resp):
        self._conn, self._resp = conn, resp

    def __iter__(self):
        return self

    def __next__(self):
        if self._resp is None:
            raise StopIteration
        parser = _SseLines()
        while True:
            line = self._resp.readline()
            if not line:
                self.close()
                last = parser.end()
                if last is not None:
                    return last
                raise StopIteration
            ev = parser.feed(line)
            if ev is not None:
                return ev

    @staticmethod
    def _make(event, data, eid):
        text = "\n".join(data)
        try:
            value = json.loads(text)
        except ValueError:
            value = text
        return Event(event, value, eid)

    def close(self):
        if self._resp is not None:
            self._resp.close()
            self._conn.close()
            self._resp = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()


# -- the attribute tree ---------------------------------------------------------------------

class Operation:
    """A callable op: `client.files.list(path=".")`. Keyword arguments only."""

    def __init__(self, client, entry):
        self._client = client
        self.id = entry["id"]
        self.entry = entry
        self.__doc__ = entry.get("summary") or entry["id"]

    def __call__(self, *body, **args):
        """Keyword arguments only; ops whose request body is their data (files.upload)
        take that body as the one positional argument."""
        if len(body) > 1 or (body and self.entry.get("body") != "raw"):
            raise ArgumentError("args.invalid", "%s takes keyword arguments only" % self.id, op=self.id)
        return self._client.call(self.id, *body, **args)

    def __repr__(self):
        return "<abx operation %s>" % self.id


class Namespace:
    """A node of the attribute tree (`client.files`, `client.commands.sessions`)."""

    def __init__(self, client, prefix):
        self._client = client
        self._prefix = prefix

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return self._client._node(self._prefix + "." + name)

    def __dir__(self):
        return self._client._children(self._prefix)

    def __repr__(self):
        return "<abx namespace %s: %s>" % (self._prefix, ", ".join(self.__dir__()))


class Client:
    """abx.Client(url=None, token=None): the local server and its token by default
    (ABX_URL / ABX_TOKEN, else $ABX_HOME/url and $ABX_HOME/token as `abx serve` writes
    them, else http://127.0.0.1:8080). Fetches GET /ops at once."""

    user_agent = "python/%s catalog=%d" % (__version__, CATALOG_VERSION)

    def __init__(self, url=None, token=None, timeout=60.0):
        self.url = (url or default_url()).rstrip("/")
        self.token = token if token is not None else default_token()
        self.timeout = timeout
        u = urllib.parse.urlsplit(self.url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError("abx url must be http(s)://host[:port], got %r" % self.url)
        self._scheme, self._netloc, self._base = u.scheme, u.netloc, u.path.rstrip("/")
        self.refresh()

    # -- discovery ------------------------------------------------------------------------
    def refresh(self):
        """Fetch GET /ops again (after a policy reload, say)."""
        catalog = self._request("GET", "/ops", None, {})
        if not isinstance(catalog, dict) or not isinstance(catalog.get("ops"), list):
            raise TransportError("client.bad_catalog", "GET /ops did not answer an operations catalog")
        self.catalog_version = catalog.get("catalog_version")
        self.server_version = catalog.get("sdk_version")
        self.ops = {e["id"]: e for e in catalog["ops"]}
        self._alias = {a: e["id"] for e in catalog["ops"] for a in e.get("aliases") or ()}
        self._alias.update({e["id"].replace(".", "__"): e["id"] for e in catalog["ops"]})

    def _node(self, path):
        if path in self.ops:
            return Operation(self, self.ops[path])
        if any(i.startswith(path + ".") for i in self.ops):
            return Namespace(self, path)
        raise ContractMismatchError(path, "the server lists no operation or namespace '%s' for this caller" % path)

    def _children(self, prefix):
        depth = prefix.count(".") + 1 if prefix else 0
        return sorted({i.split(".")[depth] for i in self.ops if not prefix or i.startswith(prefix + ".")})

    def __getattr__(self, name):
        if name.startswith("_") or "ops" not in self.__dict__:
            raise AttributeError(name)
        return self._node(name)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._children("")))

    def describe(self, op):
        """The catalog entry of an op the server lists (id, alias or tool name)."""
        return self.ops[self._resolve(op)]

    def _resolve(self, op):
        if op in self.ops:
            return op
        if op in self._alias:
            return self._alias[op]
        raise ContractMismatchError(op)

    # -- calls ----------------------------------------------------------------------------
    def call(self, op, data=None, /, **args):
        """Call op by id (or alias) with keyword arguments. JSON results come back as
        Python values, bytes results as bytes, SSE results as an EventStream. `data`
        (bytes or a file object, positional) is the request body of ops that take one
        (files.upload)."""
        op_id = self._resolve(op)
        entry = self.ops[op_id]
        check_args(op_id, entry.get("params", []), args, one_of=entry.get("one_of"))
        raw = entry.get("body") == "raw"
        if raw:
            if data is None:
                raise ArgumentError("args.missing", "%s needs the request body (bytes) as its positional argument"
                                    % op_id, op=op_id)
            b = next((h for h in entry.get("http", []) if h["method"] in ("PUT", "POST")), None)
            if b is None:
                raise ContractMismatchError(op_id, "%s takes a raw body but lists no HTTP binding" % op_id)
            query = urllib.parse.urlencode([(k, _query_text(v)) for k, v in args.items() if v is not None])
            return self._request(b["method"], b["path"] + ("?" + query if query else ""), data, entry,
                                 content_type="application/octet-stream")
        if data is not None:
            raise ArgumentError("args.invalid", "%s takes keyword arguments only (no request body)" % op_id, op=op_id)
        body = json.dumps({k: v for k, v in args.items() if v is not None}).encode()
        return self._request("POST", "/ops/" + op_id, body, entry)

    # -- transport ------------------------------------------------------------------------
    def _connect(self):
        cls = http.client.HTTPSConnection if self._scheme == "https" else http.client.HTTPConnection
        return cls(self._netloc, timeout=self.timeout)

    def _request(self, method, path, body, entry, content_type="application/json"):
        headers = {"X-ABX-Client": self.user_agent, "Accept": "application/json, text/event-stream, */*"}
        if self.token:
            headers["Authorization"] = "Bearer " + self.token
        if body is not None:
            headers["Content-Type"] = content_type
        conn = self._connect()
        try:
            conn.request(method, self._base + path, body=body, headers=headers)
            resp = conn.getresponse()
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            raise TransportError("client.unreachable", "%s %s: %s" % (self.url, path, e), op=entry.get("id"))
        ctype = (resp.getheader("Content-Type") or "").split(";")[0].strip().lower()
        if resp.status >= 400:
            try:
                raise self._error(resp, entry)
            finally:
                conn.close()
        if ctype == "text/event-stream":
            return EventStream(conn, resp)  # the stream owns the connection now
        try:
            payload = resp.read()
        finally:
            conn.close()
        if ctype == "application/json":
            return json.loads(payload) if payload else None
        return payload

    def _error(self, resp, entry):
        payload = resp.read()
        try:
            err = json.loads(payload)["error"]
            code, message = err["code"], err.get("message", "")
        except (ValueError, KeyError, TypeError):
            return TransportError("client.bad_reply", "HTTP %d that is not an abx error: %r" % (resp.status, payload[:200]),
                                  status=resp.status, op=entry.get("id"))
        cls = error_class(code, resp.status)
        e = cls(code, message, status=resp.status, details=err.get("details"),
                request_id=resp.getheader("X-Request-Id"), op=entry.get("id"))
        if isinstance(e, RateLimitError) and resp.getheader("Retry-After"):
            e.retry_after = int(resp.getheader("Retry-After"))
        return e

    def __repr__(self):
        return "<abx.Client %s: %d operations>" % (self.url, len(self.__dict__.get("ops", ())))


def _query_text(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


__all__ = ["Client", "Operation", "Namespace", "Event", "EventStream", "AbxError", "check_args", "default_url",
           "default_token"]
