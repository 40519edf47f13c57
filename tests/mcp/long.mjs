// long.mjs — long calls through the official MCP TypeScript SDK (issue 25): a command past
// the door's soft timeout answers status running and is waited for with process__wait; a
// plain call longer than the client's request timeout completes because abx sends
// notifications/progress and the client resets its timeout on them (resetTimeoutOnProgress).
// The SDK's default timeout is 60 s; the test configures short ones (a soft timeout of 2 s,
// a client timeout of 1.5 s) so that it runs in seconds. Prints one JSON report.
//
//   node long.mjs http URL TOKEN | stdio ABX_BIN [abx mcp arguments...]
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [mode, ...rest] = process.argv.slice(2);
let transport;
if (mode === "http") {
  const [url, token] = rest;
  transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
} else {
  const [bin, ...args] = rest;
  transport = new StdioClientTransport({ command: bin, args: ["mcp", ...args], env: process.env, stderr: "pipe" });
}

const text = (r) => JSON.parse(r.content?.[0]?.text ?? "null");
const client = new Client({ name: "abx-long-test", version: "1.0.0" });
const report = {};
try {
  await client.connect(transport);
  report.step = "soft timeout";
  // 1. past the soft timeout: status running, then poll with process__wait
  let t0 = Date.now();
  const first = text(await client.callTool({ name: "commands__run", arguments: { command: "sh -c 'sleep 4; echo built'" } }));
  report.first = { status: first.status, pid: first.pid, ms: Date.now() - t0 };
  let waited = first, polls = 0;
  while (waited.status === "running" && polls < 20) {
    waited = text(await client.callTool({ name: "process__wait", arguments: { pid: first.pid, timeout: 1 } }));
    polls++;
  }
  const out = text(await client.callTool({ name: "process__output", arguments: { pid: first.pid } }));
  report.waited = { status: waited.status, exit_code: waited.exit_code, polls, stdout: out.stdout };
  report.step = "progress";
  // 2. longer than the client's timeout, kept alive by progress
  const progress = [];
  t0 = Date.now();
  const kept = await client.callTool(
    { name: "commands__run", arguments: { command: "sh -c 'sleep 3; echo kept'", timeout: 0 } },
    undefined,
    { timeout: 1500, resetTimeoutOnProgress: true, onprogress: (p) => progress.push(p) },
  );
  report.kept = { isError: kept.isError === true, result: text(kept), progress: progress.length, ms: Date.now() - t0 };
  report.step = "control";
  // 3. the same without resetTimeoutOnProgress: the client gives up (the control)
  try {
    await client.callTool(
      { name: "commands__run", arguments: { command: "sh -c 'sleep 3'", timeout: 0 } },
      undefined,
      { timeout: 1500, onprogress: () => {} },
    );
    report.control = "answered";
  } catch (e) {
    report.control = String(e.code ?? e);
  }
  report.step = "close";
  await client.close();
  delete report.step;
  console.log(JSON.stringify(report));
} catch (e) {
  report.failure = String(e && e.stack ? e.stack : e);
  console.log(JSON.stringify(report));
  try {
    await client.close();
  } catch {}
  process.exit(1);
}
