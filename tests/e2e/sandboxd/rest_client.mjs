// Every route of agent-sandbox's published filesystem.yaml (vendored unchanged in
// third_party/agent-sandbox) against abx's sandboxd REST listener, each response checked
// against that document with openapi-response-validator: the status must be one the
// operation declares and the body must match the schema of the media type it came as.
// Prints one JSON report line; env: SBX_REST (http://host:port), SBX_TOKEN.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import yaml from "js-yaml";
import validatorPkg from "openapi-response-validator";
const OpenAPIResponseValidator = validatorPkg.default || validatorPkg;

const here = path.dirname(fileURLToPath(import.meta.url));
const spec = yaml.load(fs.readFileSync(path.resolve(here, "../../../third_party/agent-sandbox/filesystem/v1/filesystem.yaml"), "utf8"));
const base = process.env.SBX_REST;
const auth = { authorization: "Bearer " + process.env.SBX_TOKEN,
               traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" };

const deref = (r) => (r && r.$ref ? spec.components.responses[r.$ref.split("/").pop()] : r);

// The operation's responses, with the answered status narrowed to the media type it came as.
function validate(specPath, method, status, contentType, body) {
  const op = spec.paths[specPath][method];
  const responses = {};
  for (const [code, r] of Object.entries(op.responses)) responses[code] = deref(r);
  const declared = responses[String(status)];
  if (!declared) return [`status ${status} is not declared for ${method.toUpperCase()} ${specPath}`];
  if (declared.content) {
    const mt = (contentType || "").split(";")[0].trim();
    if (!declared.content[mt]) return [`media type ${mt} is not declared for ${status}`];
    responses[String(status)] = { ...declared, content: { [mt]: declared.content[mt] } };
  }
  const v = new OpenAPIResponseValidator({ responses, components: spec.components });
  const err = v.validateResponse(status, body);
  return err ? err.errors.map((e) => `${e.path}: ${e.message}`) : [];
}

async function check(name, specPath, method, url, init = {}, want) {
  const res = await fetch(base + url, { method: method.toUpperCase(), ...init, headers: { ...auth, ...(init.headers || {}) } });
  const ct = res.headers.get("content-type");
  const raw = Buffer.from(await res.arrayBuffer());
  let body = null;
  if (raw.length && ct && ct.startsWith("application/json")) body = JSON.parse(raw.toString());
  else if (raw.length) body = raw.toString();
  const errors = method === "head" ? (raw.length ? ["HEAD answered a body"] : []).concat(
    spec.paths[specPath].get.responses[String(res.status)] ? [] : [`status ${res.status} not declared`])
    : validate(specPath, method, res.status, ct, body);
  if (want !== undefined && res.status !== want) errors.push(`want status ${want}, got ${res.status}`);
  return { name, status: res.status, contentType: ct, body, errors };
}

const F = "/files/{path}";
const oct = { "content-type": "application/octet-stream" };
const checks = [];
const run = async (...a) => checks.push(await check(...a));
await run("health", "/health", "get", "/v1/health", {}, 200);
await run("metadata", "/metadata", "get", "/v1/metadata", {}, 200);
await run("put", F, "put", "/v1/files/docs%2Fnote.txt?mode=0644", { body: "hello sandboxd\n", headers: oct }, 204);
const fd = new FormData();
fd.append("file", new Blob(["from multipart\n"]), "m.txt");
await run("put multipart", F, "put", "/v1/files/docs/multi.txt", { body: fd }, 204);
await run("put bad mode", F, "put", "/v1/files/docs/x.txt?mode=999", { body: "x", headers: oct }, 400);
await run("put denied", F, "put", "/v1/files/secret%2Fx.txt", { body: "x", headers: oct }, 403);
await run("get file", F, "get", "/v1/files/docs%2Fnote.txt", {}, 200);
await run("get dir", F, "get", "/v1/files/docs", {}, 200);
await run("get missing", F, "get", "/v1/files/docs/none.txt", {}, 404);
await run("get denied", F, "get", "/v1/files/secret/key.txt", {}, 403);
await run("head file", F, "head", "/v1/files/docs/note.txt", {}, 200);
await run("head missing", F, "head", "/v1/files/docs/none.txt", {}, 404);
await run("delete non-empty", F, "delete", "/v1/files/docs", {}, 409);
await run("delete file", F, "delete", "/v1/files/docs/multi.txt", {}, 204);
await run("delete recursive", F, "delete", "/v1/files/docs?recursive=true", {}, 204);
await run("delete missing", F, "delete", "/v1/files/docs", {}, 404);
await run("delete denied", F, "delete", "/v1/files/secret/key.txt", {}, 403);
console.log(JSON.stringify({ checks }));
