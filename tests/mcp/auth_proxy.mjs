// auth_proxy.mjs — a loopback HTTP proxy that adds `Authorization: Bearer TOKEN` to every
// request and forwards everything else (Host and Origin included) untouched. The MCP
// conformance runner cannot send a token; abx refuses unauthenticated /mcp calls.
//   node auth_proxy.mjs LISTEN_PORT TARGET_URL TOKEN     (prints "ready" when listening)
import http from "node:http";

const [listenPort, target, token] = process.argv.slice(2);
const t = new URL(target);
const server = http.createServer((req, res) => {
  const headers = { ...req.headers, authorization: `Bearer ${token}` };
  const up = http.request({ host: t.hostname, port: t.port, path: req.url, method: req.method, headers }, (r) => {
    res.writeHead(r.statusCode, r.headers);
    r.pipe(res);
  });
  up.on("error", (e) => {
    if (!res.headersSent) res.writeHead(502);
    res.end(String(e));
  });
  req.pipe(up);
  res.on("close", () => up.destroy());
});
server.listen(Number(listenPort), "127.0.0.1", () => console.log("ready"));
