"""A scripted model server on loopback for the agents end-to-end tests and bench/agents.py.

It speaks the streaming OpenAI Responses API (POST /v1/responses, what `codex exec` uses)
and the Anthropic Messages API (POST /v1/messages, what `claude -p` uses) and replays a
fixed conversation decided from the request alone: the last user message that carries
"TASK:" names the script,

    TASK: write     -> the model asks to run `echo hi > out.txt`, then finishes with a message
    TASK: shadow    -> `cat /etc/shadow`         (confinement must refuse it)
    TASK: connect   -> `curl ... http://unlisted.test/` (the egress proxy must refuse it)
    TASK: env       -> `env`                      (the API key must not be in it)
    TASK: remember W -> answers "noted" (no tool)
    TASK: recall    -> answers with the word an earlier "remember" turn gave, if it sees it

and once the request carries the tool's result, the model answers
"DONE: <the result, first 300 characters>". Every request is recorded (path, headers,
body) for the tests to inspect: the key that reached the server, what the model saw."""
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

COMMANDS = {
    "write": "echo hi > out.txt",
    "shadow": "cat /etc/shadow",
    "connect": "curl -sS -m 5 http://unlisted.test/ 2>&1 || true",
    "env": "env",
}


def _texts(content):
    if isinstance(content, str):
        return [content]
    out = []
    for c in content or []:
        if isinstance(c, dict):
            if isinstance(c.get("text"), str):
                out.append(c["text"])
            elif isinstance(c.get("content"), (str, list)):
                out.extend(_texts(c["content"]))
    return out


class Script:
    """What the model does next, from the conversation so far (a list of (role, kind, text))."""

    @staticmethod
    def decide(items):
        if items and items[-1][1] == "tool_result":
            return ("final", "DONE: " + items[-1][2][:300])
        tasks = [t for (role, kind, t) in items if role == "user" and kind == "text" and "TASK:" in t]
        if not tasks:
            return ("final", "DONE: nothing to do")
        m = re.search(r"TASK:\s*(\w+)\s*(\S*)", tasks[-1])
        verb, word = (m.group(1).lower(), m.group(2)) if m else ("write", "")
        if verb == "remember":
            return ("final", "noted")
        if verb == "recall":
            seen = [re.search(r"TASK:\s*remember\s+(\S+)", t) for t in tasks[:-1]]
            words = [x.group(1) for x in seen if x]
            return ("final", "you said " + words[-1] if words else "I do not remember anything")
        return ("tool", COMMANDS.get(verb, COMMANDS["write"]))


def responses_items(body):
    items = []
    for it in body.get("input") or []:
        t = it.get("type")
        if t == "function_call_output":
            out = it.get("output")
            items.append(("tool", "tool_result", out if isinstance(out, str) else json.dumps(out)))
        elif t == "message" or "role" in it:
            for x in _texts(it.get("content")):
                items.append((it.get("role"), "text", x))
    return items


def messages_items(body):
    items = []
    for m in body.get("messages") or []:
        content = m.get("content")
        if isinstance(content, str):
            items.append((m.get("role"), "text", content))
            continue
        for c in content or []:
            if c.get("type") == "tool_result":
                items.append(("tool", "tool_result", "\n".join(_texts(c.get("content")))))
            elif c.get("type") == "text":
                items.append((m.get("role"), "text", c.get("text", "")))
    return items


class ModelServer:
    def __init__(self):
        self.requests = []
        self.lock = threading.Lock()
        self.n = 0
        srv = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_GET(self):
                srv._record(self, None)
                self._send(404, b'{"error": "not here"}', "application/json")

            def do_HEAD(self):
                self._send(200, b"", "text/plain")

            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(n) if n else b""
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {}
                srv._record(self, body)
                if self.path.rstrip("/").endswith("/responses"):
                    return srv._responses(self, body)
                if "/messages" in self.path and "count_tokens" not in self.path:
                    return srv._messages(self, body)
                if "count_tokens" in self.path:
                    return self._send(200, b'{"input_tokens": 10}', "application/json")
                self._send(404, b'{"error": "not here"}', "application/json")

            def _send(self, code, data, ctype):
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()

    def _record(self, h, body):
        with self.lock:
            self.requests.append({"path": h.path, "headers": {k.lower(): v for k, v in h.headers.items()},
                                  "body": body})

    def _id(self, p):
        with self.lock:
            self.n += 1
            return "%s_%d" % (p, self.n)

    def tool_outputs(self):
        """Every tool result the model was shown (both APIs)."""
        out = []
        for r in self.requests:
            b = r["body"] or {}
            items = responses_items(b) if "input" in b else messages_items(b)
            out += [t for (_, k, t) in items if k == "tool_result"]
        return out

    # -- OpenAI Responses --------------------------------------------------------------
    def _responses(self, h, body):
        action, arg = Script.decide(responses_items(body))
        tools = [t.get("name") for t in body.get("tools") or []]
        rid = self._id("resp")
        if action == "tool":
            if "exec_command" in tools:
                name, args = "exec_command", {"cmd": arg}
            elif "shell_command" in tools:
                name, args = "shell_command", {"command": arg}
            else:
                name, args = "shell", {"command": ["bash", "-lc", arg]}
            item = {"type": "function_call", "id": self._id("fc"), "call_id": self._id("call"), "name": name,
                    "arguments": json.dumps(args), "status": "completed"}
        else:
            item = {"type": "message", "role": "assistant", "id": self._id("msg"), "status": "completed",
                    "content": [{"type": "output_text", "text": arg, "annotations": []}]}
        usage = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 5,
                 "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 15}
        events = [("response.created", {"type": "response.created", "response": {"id": rid, "status": "in_progress"}}),
                  ("response.output_item.added", {"type": "response.output_item.added", "output_index": 0,
                                                  "item": dict(item, status="in_progress")})]
        if action != "tool":
            events.append(("response.output_text.delta", {"type": "response.output_text.delta", "item_id": item["id"],
                                                          "output_index": 0, "content_index": 0, "delta": arg}))
        events += [("response.output_item.done", {"type": "response.output_item.done", "output_index": 0,
                                                  "item": item}),
                   ("response.completed", {"type": "response.completed",
                                           "response": {"id": rid, "status": "completed", "output": [item],
                                                        "usage": usage}})]
        self._sse(h, events)

    # -- Anthropic Messages --------------------------------------------------------------
    def _messages(self, h, body):
        action, arg = Script.decide(messages_items(body))
        mid = self._id("msg")
        if action == "tool":
            block = {"type": "tool_use", "id": self._id("toolu"), "name": "Bash", "input": {"command": arg}}
            stop = "tool_use"
        else:
            block = {"type": "text", "text": arg}
            stop = "end_turn"
        usage = {"input_tokens": 10, "output_tokens": 5}
        if not body.get("stream"):
            msg = {"id": mid, "type": "message", "role": "assistant", "model": body.get("model", "m"),
                   "content": [block], "stop_reason": stop, "stop_sequence": None, "usage": usage}
            return h._send(200, json.dumps(msg).encode(), "application/json")
        start = {"type": "content_block_start", "index": 0,
                 "content_block": dict(block, input={}) if action == "tool" else {"type": "text", "text": ""}}
        delta = ({"type": "input_json_delta", "partial_json": json.dumps(block["input"])} if action == "tool"
                 else {"type": "text_delta", "text": arg})
        events = [("message_start", {"type": "message_start", "message": {
                      "id": mid, "type": "message", "role": "assistant", "model": body.get("model", "m"),
                      "content": [], "stop_reason": None, "stop_sequence": None, "usage": usage}}),
                  ("content_block_start", start),
                  ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
                  ("content_block_stop", {"type": "content_block_stop", "index": 0}),
                  ("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                     "usage": {"output_tokens": 5}}),
                  ("message_stop", {"type": "message_stop"})]
        self._sse(h, events)

    @staticmethod
    def _sse(h, events):
        data = b"".join(("event: %s\ndata: %s\n\n" % (e, json.dumps(d))).encode() for e, d in events)
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Cache-Control", "no-cache")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)
        h.wfile.flush()
