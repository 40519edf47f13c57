"""The asyncio variant of the zero-step client (standard library only: asyncio streams).

    import asyncio, abx.aio

    async def main():
        async with await abx.aio.AsyncClient.connect() as c:   # GET /ops, like abx.Client()
            print(await c.files.list(path="."))
            async with await c.commands.stream(argv=["ls"]) as events:
                async for ev in events:
                    print(ev.event, ev.data)

    asyncio.run(main())

Everything but the transport is abx.Client's: the attribute tree, argument checks against
the fetched catalog, the error classes, results (JSON as Python values, bytes as bytes,
server-sent events as an async iterator of abx.Event). Each call is one HTTP/1.1
connection (`Connection: close`), so calls run concurrently with asyncio.gather."""
import asyncio
import json
import ssl as _ssl
import urllib.parse

from .client import Client, Event, EventStream, _SseLines, _query_text, check_args, default_token, default_url
from .errors import ArgumentError, ContractMismatchError, TransportError

_READ = 65536


class _Response:
    """Status, headers and a body reader over one connection (length, chunked or to EOF)."""

    def __init__(self, reader, writer, status, headers):
        self._r, self._w = reader, writer
        self.status, self.headers = status, headers
        te = headers.get("transfer-encoding", "").lower()
        self._chunked = "chunked" in te
        cl = headers.get("content-length")
        self._left = int(cl) if cl is not None and not self._chunked else None
        self._buf = b""
        self._eof = False

    def getheader(self, name, default=None):
        return self.headers.get(name.lower(), default)

    async def _more(self):
        """The next piece of the body, b"" at its end."""
        if self._eof:
            return b""
        if self._chunked:
            line = await self._r.readline()
            if not line:
                self._eof = True
                return b""
            size = int(line.split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while (await self._r.readline()) not in (b"\r\n", b"\n", b""):
                    pass  # trailers
                self._eof = True
                return b""
            data = await self._r.readexactly(size)
            await self._r.readline()
            return data
        if self._left is not None:
            if self._left == 0:
                self._eof = True
                return b""
            data = await self._r.read(min(_READ, self._left))
            if not data:
                raise TransportError("client.bad_reply", "the connection closed inside a body")
            self._left -= len(data)
            return data
        data = await self._r.read(_READ)
        if not data:
            self._eof = True
        return data

    async def read_all(self):
        parts = [self._buf]
        self._buf = b""
        while True:
            d = await self._more()
            if not d:
                break
            parts.append(d)
        self.close()
        return b"".join(parts)

    async def readline(self):
        while b"\n" not in self._buf:
            d = await self._more()
            if not d:
                line, self._buf = self._buf, b""
                return line
            self._buf += d
        i = self._buf.index(b"\n") + 1
        line, self._buf = self._buf[:i], self._buf[i:]
        return line

    def close(self):
        if self._w is not None:
            self._w.close()
            self._w = None


class _ErrorView:
    """What abx.Client._error reads from a response: status, read(), getheader()."""

    def __init__(self, resp, payload):
        self.status, self._payload, self.getheader = resp.status, payload, resp.getheader

    def read(self):
        return self._payload


class AsyncEventStream:
    """Async iterator over the events of an SSE answer, read as they arrive. Closing it
    (aclose(), or leaving an `async with` block) closes the connection: for
    commands.stream that ends the command."""

    def __init__(self, resp):
        self._resp = resp

    def __aiter__(self):
        return self

    async def __anext__(self):
        if self._resp is None:
            raise StopAsyncIteration
        parser = _SseLines()
        while True:
            line = await self._resp.readline()
            if not line:
                self.close()
                last = parser.end()
                if last is not None:
                    return last
                raise StopAsyncIteration
            ev = parser.feed(line)
            if ev is not None:
                return ev

    def close(self):
        if self._resp is not None:
            self._resp.close()
            self._resp = None

    async def aclose(self):
        self.close()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        self.close()


class AsyncClient(Client):
    """abx.aio.AsyncClient(url=None, token=None, timeout=60.0), found like abx.Client
    (ABX_URL / ABX_TOKEN, else $ABX_HOME/url and token). Make it with
    `await AsyncClient.connect(...)`, or construct it and `await client.refresh()` before
    the first call. `timeout` bounds connecting and waiting for a reply's headers; an
    event stream is read for as long as it lasts."""

    user_agent = Client.user_agent.replace("python/", "python-asyncio/", 1)

    def __init__(self, url=None, token=None, timeout=60.0):
        self.url = (url or default_url()).rstrip("/")
        self.token = token if token is not None else default_token()
        self.timeout = timeout
        u = urllib.parse.urlsplit(self.url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError("abx url must be http(s)://host[:port], got %r" % self.url)
        self._scheme, self._netloc, self._base = u.scheme, u.netloc, u.path.rstrip("/")
        self._host, self._port = u.hostname, u.port or (443 if u.scheme == "https" else 80)

    @classmethod
    async def connect(cls, url=None, token=None, timeout=60.0):
        c = cls(url, token, timeout)
        await c.refresh()
        return c

    async def __aenter__(self):
        if "ops" not in self.__dict__:
            await self.refresh()
        return self

    async def __aexit__(self, *exc):
        return None

    async def refresh(self):
        """Fetch GET /ops again (after a policy reload, say)."""
        catalog = await self._request("GET", "/ops", None, {})
        if not isinstance(catalog, dict) or not isinstance(catalog.get("ops"), list):
            raise TransportError("client.bad_catalog", "GET /ops did not answer an operations catalog")
        self.catalog_version = catalog.get("catalog_version")
        self.server_version = catalog.get("sdk_version")
        self.ops = {e["id"]: e for e in catalog["ops"]}
        self._alias = {a: e["id"] for e in catalog["ops"] for a in e.get("aliases") or ()}
        self._alias.update({e["id"].replace(".", "__"): e["id"] for e in catalog["ops"]})

    async def call(self, op, data=None, /, **args):
        """Like abx.Client.call, awaited; SSE results are an AsyncEventStream."""
        if "ops" not in self.__dict__:
            raise TransportError("client.not_connected", "await AsyncClient.connect() (or refresh()) first")
        op_id = self._resolve(op)
        entry = self.ops[op_id]
        check_args(op_id, entry.get("params", []), args, one_of=entry.get("one_of"))
        if entry.get("body") == "raw":
            if data is None:
                raise ArgumentError("args.missing", "%s needs the request body (bytes) as its positional argument"
                                    % op_id, op=op_id)
            b = next((h for h in entry.get("http", []) if h["method"] in ("PUT", "POST")), None)
            if b is None:
                raise ContractMismatchError(op_id, "%s takes a raw body but lists no HTTP binding" % op_id)
            if hasattr(data, "read"):
                data = data.read()
            query = urllib.parse.urlencode([(k, _query_text(v)) for k, v in args.items() if v is not None])
            return await self._request(b["method"], b["path"] + ("?" + query if query else ""), bytes(data), entry,
                                       content_type="application/octet-stream")
        if data is not None:
            raise ArgumentError("args.invalid", "%s takes keyword arguments only (no request body)" % op_id, op=op_id)
        body = json.dumps({k: v for k, v in args.items() if v is not None}).encode()
        return await self._request("POST", "/ops/" + op_id, body, entry)

    async def _open(self, method, path, body, content_type):
        ctx = _ssl.create_default_context() if self._scheme == "https" else None
        reader, writer = await asyncio.open_connection(self._host, self._port, ssl=ctx)
        lines = ["%s %s HTTP/1.1" % (method, self._base + path), "Host: " + self._netloc, "Connection: close",
                 "X-ABX-Client: " + self.user_agent, "Accept: application/json, text/event-stream, */*"]
        if self.token:
            lines.append("Authorization: Bearer " + self.token)
        if body is not None:
            lines += ["Content-Type: " + content_type, "Content-Length: %d" % len(body)]
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body or b""))
        await writer.drain()
        status_line = await reader.readline()
        parts = status_line.decode("latin-1").split(None, 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
            writer.close()
            raise TransportError("client.bad_reply", "not an HTTP answer: %r" % status_line[:100])
        headers = {}
        while True:
            h = await reader.readline()
            if h in (b"\r\n", b"\n", b""):
                break
            k, _, v = h.decode("latin-1").partition(":")
            headers[k.strip().lower()] = v.strip()
        return _Response(reader, writer, int(parts[1]), headers)

    async def _request(self, method, path, body, entry, content_type="application/json"):
        try:
            resp = await asyncio.wait_for(self._open(method, path, body, content_type), self.timeout)
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError) as e:
            raise TransportError("client.unreachable", "%s %s: %s" % (self.url, path, e or type(e).__name__),
                                 op=entry.get("id"))
        ctype = (resp.getheader("Content-Type") or "").split(";")[0].strip().lower()
        if resp.status >= 400:
            raise self._error(_ErrorView(resp, await resp.read_all()), entry)
        if ctype == "text/event-stream":
            return AsyncEventStream(resp)  # the stream owns the connection now
        payload = await resp.read_all()
        if ctype == "application/json":
            return json.loads(payload) if payload else None
        return payload

    def __repr__(self):
        return "<abx.aio.AsyncClient %s: %d operations>" % (self.url, len(self.__dict__.get("ops", ())))


__all__ = ["AsyncClient", "AsyncEventStream", "Event"]
