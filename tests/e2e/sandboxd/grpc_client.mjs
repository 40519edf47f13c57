// Drives abx's sandboxd gRPC listener with stock clients: @grpc/grpc-js and
// @grpc/proto-loader loading agent-sandbox's published process.proto unchanged
// (third_party/agent-sandbox) and abx's own proto/abx/sandboxd/v1 (contexts, watch).
// Prints one JSON report line; env: SBX_GRPC (host:port), SBX_TOKEN, SBX_WS.
import grpc from "@grpc/grpc-js";
import protoLoader from "@grpc/proto-loader";
import fs from "node:fs";
import http2 from "node:http2";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "../../..");
const opts = { keepCase: false, longs: Number, enums: String, defaults: true, oneofs: true,
               includeDirs: [path.join(root, "third_party/agent-sandbox"), path.join(root, "proto")] };
const procDef = protoLoader.loadSync("process/v1/process.proto", opts);
const abxDef = protoLoader.loadSync("abx/sandboxd/v1/sandboxd.proto", opts);
const proc = grpc.loadPackageDefinition(procDef).process.v1;
const abx = grpc.loadPackageDefinition(abxDef).abx.sandboxd.v1;

const addr = process.env.SBX_GRPC;
const token = process.env.SBX_TOKEN;
const trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
const creds = process.env.SBX_CA ? grpc.credentials.createSsl(fs.readFileSync(process.env.SBX_CA))
                                 : grpc.credentials.createInsecure();
const client = new proc.ProcessService(addr, creds);
const ctxClient = new abx.ContextService(addr, creds);
const watchClient = new abx.WatchService(addr, creds);

function md(tok = token) {
  const m = new grpc.Metadata();
  if (tok) m.set("authorization", "Bearer " + tok);
  m.set("traceparent", trace);
  return m;
}

function unary(c, method, req, tok) {
  return new Promise((resolve) => {
    c[method](req, md(tok), { deadline: Date.now() + 20000 }, (err, res) =>
      resolve(err ? { code: grpc.status[err.code], details: err.details } : { ok: res }));
  });
}

// Start and collect the stream; onInit(pid) may drive the process.
function start(req, onInit) {
  return new Promise((resolve) => {
    const out = { pid: 0, stdout: "", stdoutHex: "", stderr: "", exit: null, events: [] };
    const call = client.Start(req, md(), { deadline: Date.now() + 30000 });
    call.on("data", (ev) => {
      out.events.push(ev.event);
      if (ev.event === "init") { out.pid = ev.init.processId; if (onInit) onInit(out.pid, out); }
      else if (ev.event === "stdout") { out.stdout += Buffer.from(ev.stdout).toString(); out.stdoutHex += Buffer.from(ev.stdout).toString("hex"); }
      else if (ev.event === "stderr") out.stderr += Buffer.from(ev.stderr).toString();
      else if (ev.event === "exit") out.exit = ev.exit.exitCode;
    });
    call.on("error", (err) => resolve({ ...out, code: grpc.status[err.code], details: err.details }));
    call.on("end", () => resolve(out));
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// A method by path with raw request bytes (grpc-js's generic client).
function raw(methodPath, bytes) {
  return new Promise((resolve) => {
    const gc = new grpc.Client(addr, creds);
    gc.makeUnaryRequest(methodPath, (b) => b, (b) => b, bytes, md(), (err, res) =>
      resolve(err ? { code: grpc.status[err.code], details: err.details } : { ok: res.length }));
  });
}

// Below gRPC: Node's own HTTP/2 client with a body and content type of our choosing.
function h2(methodPath, contentType, body) {
  return new Promise((resolve) => {
    const s = http2.connect("http://" + addr);
    const req = s.request({ ":method": "POST", ":path": methodPath, "content-type": contentType, te: "trailers",
                            authorization: "Bearer " + token });
    const out = {};
    req.on("response", (h) => { out.status = h[":status"]; if (h["grpc-status"]) out.grpcStatus = h["grpc-status"]; });
    req.on("trailers", (t) => { out.grpcStatus = t["grpc-status"]; out.message = decodeURIComponent(t["grpc-message"] || ""); });
    req.on("data", () => {});
    req.on("end", () => { s.close(); resolve(out); });
    req.on("error", (e) => { s.close(); resolve({ error: String(e) }); });
    req.end(body);
  });
}

async function main() {
  const rep = {};
  if (process.argv[2] === "tls") { // one Execute over HTTP/2 with TLS
    rep.execute = await unary(client, "Execute", { config: { command: ["/bin/bash", "-c", "echo tls"] } });
    if (rep.execute.ok) rep.execute.ok = { exitCode: rep.execute.ok.exitCode, stdout: Buffer.from(rep.execute.ok.stdout).toString() };
    console.log(JSON.stringify(rep));
    process.exit(0);
  }
  if (process.argv[2] === "parallel") { // many streams and calls at once on one HTTP/2 connection
    const n = 24;
    const starts = Array.from({ length: n }, (_, i) =>
      start({ config: { command: ["/bin/bash", "-c", `for k in 1 2 3; do echo ${i}-$k; done; exit ${i % 5}`] } }));
    const execs = Array.from({ length: n }, (_, i) =>
      unary(client, "Execute", { config: { command: ["/bin/bash", "-c", `echo x${i}`] } }));
    const [s, e] = await Promise.all([Promise.all(starts), Promise.all(execs)]);
    rep.starts = s.map((r) => ({ stdout: r.stdout, exit: r.exit, code: r.code || null }));
    rep.execs = e.map((r) => (r.ok ? Buffer.from(r.ok.stdout).toString() : r.code));
    console.log(JSON.stringify(rep));
    process.exit(0);
  }
  if (process.argv[2] === "limit") { // failed tokens against abx's limiter
    rep.codes = [];
    for (let i = 0; i < 14; i++)
      rep.codes.push((await unary(client, "Execute", { config: { command: ["/bin/true"] } }, "guess-" + i + "-0123456789abcdef")).code);
    console.log(JSON.stringify(rep));
    process.exit(0);
  }
  rep.start = await start({ config: { command: ["/bin/bash", "-c", "echo out; echo err >&2; exit 3"] } });
  rep.execute = await unary(client, "Execute", { config: { command: ["/bin/bash", "-c", "echo $FOO; exit 7"], envVars: { FOO: "bar" } } });
  if (rep.execute.ok) rep.execute.ok = { exitCode: rep.execute.ok.exitCode, stdout: Buffer.from(rep.execute.ok.stdout).toString() };
  rep.stdin = await start({ config: { command: ["/bin/cat"] } }, async (pid, out) => {
    out.write = await unary(client, "WriteStdin", { processId: pid, input: Buffer.from("hello stdin\n") });
    out.raw = await unary(client, "WriteStdin", { processId: pid, input: Buffer.from([0xff, 0x00, 0xfe, 0x0a]) });
    out.eof = await unary(client, "WriteStdin", { processId: pid, eof: {} });
  });
  rep.signal = await start({ config: { command: ["/bin/sleep", "30"] } }, async (pid, out) => {
    await sleep(200);
    out.sent = await unary(client, "SendSignal", { processId: pid, signal: "SIGNAL_SIGTERM" });
  });
  rep.tty = await start({ config: { command: ["/bin/bash", "--norc", "--noprofile"], envVars: { TERM: "dumb" } }, pty: { cols: 80, rows: 24 } },
    async (pid, out) => {
      await sleep(300);
      out.resize = await unary(client, "ResizeTTY", { processId: pid, cols: 123, rows: 45 });
      out.write = await unary(client, "WriteStdin", { processId: pid, input: Buffer.from("stty size; exit\n") });
    });
  rep.tty.events = rep.tty.events.length;
  rep.denied = await unary(client, "Execute", { config: { command: ["/usr/bin/id"] } });
  rep.denied_path = await unary(client, "Execute", { config: { command: ["/bin/bash", "-c", "true"], cwd: "/etc" } });
  rep.not_found = await unary(client, "SendSignal", { processId: 999999, signal: "SIGNAL_SIGKILL" });
  rep.unauthenticated = await unary(client, "Execute", { config: { command: ["/bin/bash", "-c", "true"] } }, "not-the-token");
  rep.invalid = await unary(client, "Execute", { config: { command: [] } });
  rep.unimplemented = await raw("/process.v1.ProcessService/Nope", Buffer.alloc(0));
  rep.bad_message = await raw("/process.v1.ProcessService/Execute", Buffer.from([0x0a, 0xff, 0xff, 0xff, 0x0f]));
  rep.wrong_type = await h2("/process.v1.ProcessService/Execute", "application/json", "{}");
  rep.compressed = await h2("/process.v1.ProcessService/Execute", "application/grpc", Buffer.from([1, 0, 0, 0, 0]));
  rep.cut_short = await h2("/process.v1.ProcessService/Execute", "application/grpc", Buffer.from([0, 0, 0, 0, 9, 1]));
  const ctx = await unary(ctxClient, "CreateContext", { language: "python" });
  rep.context = ctx;
  if (ctx.ok) {
    rep.code = await unary(ctxClient, "ExecuteCode", { contextId: ctx.ok.contextId, code: "1+1" });
    rep.code_error = await unary(ctxClient, "ExecuteCode", { contextId: ctx.ok.contextId, code: "1/0" });
    rep.delete_context = await unary(ctxClient, "DeleteContext", { contextId: ctx.ok.contextId });
  }
  rep.no_context = await unary(ctxClient, "ExecuteCode", { contextId: "nope", code: "1+1" });
  if (process.env.SBX_WS) {
    rep.watch = await new Promise((resolve) => {
      const evs = [];
      const call = watchClient.Watch({ path: ".", recursive: true }, md(), { deadline: Date.now() + 15000 });
      call.on("data", (ev) => { evs.push(ev); if (evs.some((e) => e.path.endsWith("watched.txt"))) call.cancel(); });
      call.on("error", (err) => resolve({ events: evs, code: grpc.status[err.code] }));
      call.on("end", () => resolve({ events: evs }));
      setTimeout(() => unary(client, "Execute", { config: { command: ["/bin/bash", "-c", "echo x > watched.txt"] } }), 700);
    });
  }
  console.log(JSON.stringify(rep));
  process.exit(0);
}
main().catch((e) => { console.log(JSON.stringify({ failure: String(e && e.stack || e) })); process.exit(1); });
