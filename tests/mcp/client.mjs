// client.mjs — the official MCP TypeScript SDK client against abx, over Streamable HTTP
// or stdio (`abx mcp`). Run by tests/blackbox/test_mcp_sdk.py; prints one JSON report on
// stdout (what the client saw), and the test checks it.
//
//   node client.mjs http URL TOKEN READ_PATH DENIED_PATH
//   node client.mjs stdio ABX_BIN READ_PATH DENIED_PATH [abx mcp arguments...]
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [mode, ...rest] = process.argv.slice(2);
let transport, readPath, deniedPath;
if (mode === "http") {
  const [url, token, rp, dp] = rest;
  readPath = rp;
  deniedPath = dp;
  transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
} else if (mode === "stdio") {
  const [bin, rp, dp, ...args] = rest;
  readPath = rp;
  deniedPath = dp;
  transport = new StdioClientTransport({ command: bin, args: ["mcp", ...args], env: process.env, stderr: "pipe" });
} else {
  console.error("usage: node client.mjs http URL TOKEN READ_PATH DENIED_PATH | stdio ABX_BIN READ_PATH DENIED_PATH ...");
  process.exit(2);
}

const client = new Client({ name: "abx-sdk-test", version: "1.0.0" });
const report = {};
try {
  await client.connect(transport);
  report.server = client.getServerVersion();
  report.capabilities = client.getServerCapabilities();
  if (mode === "http") report.sessionId = transport.sessionId;
  const tools = [];
  let cursor;
  do {
    const page = await client.listTools(cursor ? { cursor } : {});
    tools.push(...page.tools);
    cursor = page.nextCursor;
  } while (cursor);
  report.tools = tools.map((t) => ({ name: t.name, title: t.title, annotations: t.annotations, meta: t._meta }));
  const list = await client.callTool({ name: "files__list", arguments: { path: readPath } });
  report.list = { isError: list.isError === true, text: list.content?.[0]?.text };
  const dotted = await client.callTool({ name: "files.stat", arguments: { path: readPath } });
  report.dotted = { isError: dotted.isError === true, text: dotted.content?.[0]?.text };
  const denied = await client.callTool({ name: "files__read", arguments: { path: deniedPath } });
  report.denied = { isError: denied.isError === true, text: denied.content?.[0]?.text };
  try {
    await client.callTool({ name: "no__such__tool", arguments: {} });
    report.unknown = { error: null };
  } catch (e) {
    report.unknown = { error: e.code ?? String(e) };
  }
  // typed results: the SDK validates structuredContent against each tool's outputSchema
  // (cached by listTools) and throws when it is missing or does not match
  report.outputSchemas = tools.filter((t) => t.outputSchema).map((t) => t.name);
  report.typed = {};
  const calls = [["files__list", { path: readPath }], ["files__stat", { path: readPath }],
                 ["files__read", { path: `${readPath}/a.txt` }], ["files__find", { path: readPath, pattern: "*.txt" }],
                 ["core__health", {}], ["core__capabilities", {}], ["core__ops__list", {}]];
  for (const [name, args] of calls) {
    const r = await client.callTool({ name, arguments: args });
    report.typed[name] = { validator: !!client.getToolOutputValidator(name), isError: r.isError === true,
                           same: JSON.stringify(r.structuredContent) === r.content?.[0]?.text };
  }
  // the validation is on: a tool whose cached schema says otherwise is refused
  client.cacheToolMetadata(tools.map((t) => t.name !== "files__stat" ? t :
    { ...t, outputSchema: { type: "object", properties: { path: { type: "integer" } }, required: ["path"] } }));
  try {
    await client.callTool({ name: "files__stat", arguments: { path: readPath } });
    report.mismatch = null;
  } catch (e) {
    report.mismatch = String(e.message ?? e);
  }
  client.cacheToolMetadata(tools);
  await client.ping();
  report.ping = true;
  if (mode === "http") await transport.terminateSession();
  await client.close();
  console.log(JSON.stringify(report));
} catch (e) {
  report.failure = String(e && e.stack ? e.stack : e);
  console.log(JSON.stringify(report));
  try {
    await client.close();
  } catch {}
  process.exit(1);
}
