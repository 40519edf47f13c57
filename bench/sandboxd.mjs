// bench/sandboxd.mjs — the sandboxd door's cost, interleaved in one run on one server:
//   gRPC Execute(['/bin/true'])            vs  POST /commands/run {"argv": ["/bin/true"]}
//   gRPC Start(['/bin/true']) to its exit  vs  the same REST call
//   GET /v1/files/bench-1k.bin (1 KiB)     vs  GET /files/download?path=...
// Usage (bench/sandboxd.sh starts the server): node bench/sandboxd.mjs GRPC REST_URL ABX_URL TOKEN WS [N]
// Prints one JSON line: medians in ms and the ratio door / abx REST for each.
import fs from 'node:fs'
import { createRequire } from 'node:module'
const require = createRequire(new URL('../tests/e2e/sandboxd/package.json', import.meta.url))
const grpc = require('@grpc/grpc-js')
const protoLoader = require('@grpc/proto-loader')
const [grpcAddr, restUrl, abxUrl, token, ws, nArg] = process.argv.slice(2)
const N = Number(nArg || 200)
const def = protoLoader.loadSync('process/v1/process.proto',
  { includeDirs: [new URL('../third_party/agent-sandbox', import.meta.url).pathname], oneofs: true })
const proc = grpc.loadPackageDefinition(def).process.v1
const client = new proc.ProcessService(grpcAddr, grpc.credentials.createInsecure())
const md = new grpc.Metadata(); md.set('authorization', `Bearer ${token}`)
fs.writeFileSync(`${ws}/bench-1k.bin`, 'x'.repeat(1024))
const auth = { Authorization: `Bearer ${token}` }
const median = a => { const s = [...a].sort((x, y) => x - y); return s[Math.floor(s.length / 2)] }
async function time(fn) { const t = process.hrtime.bigint(); await fn(); return Number(process.hrtime.bigint() - t) / 1e6 }
const cfg = { config: { command: ['/bin/true'] } }
const execute = () => new Promise((res, rej) => client.Execute(cfg, md, (e, r) => e ? rej(e) : res(r)))
const start = () => new Promise((res, rej) => { const c = client.Start(cfg, md); c.on('data', () => {}); c.on('error', rej); c.on('end', res) })
const run = async () => { const r = await fetch(`${abxUrl}/commands/run`, { method: 'POST', headers: { ...auth, 'Content-Type': 'application/json' },
                                                                                body: JSON.stringify({ argv: ['/bin/true'] }) })
                          if (!r.ok) throw new Error(await r.text()); await r.json() }
const pairs = {
  execute: [execute, run],
  start: [start, run],
  read: [async () => { const r = await fetch(`${restUrl}/v1/files/bench-1k.bin`, { headers: auth }); if (!r.ok) throw new Error(r.status); await r.arrayBuffer() },
         async () => { const r = await fetch(`${abxUrl}/files/download?path=bench-1k.bin`, { headers: auth }); if (!r.ok) throw new Error(await r.text()); await r.arrayBuffer() }],
}
const out = {}
for (const [name, [door, rest]] of Object.entries(pairs)) {
  for (let i = 0; i < 10; i++) { await door(); await rest() } // warm up both
  const a = [], b = []
  for (let i = 0; i < N; i++) { a.push(await time(door)); b.push(await time(rest)) }
  out[name] = { door_ms: +median(a).toFixed(3), rest_ms: +median(b).toFixed(3), ratio: +(median(a) / median(b)).toFixed(2) }
}
console.log(JSON.stringify({ n: N, ...out }))
process.exit(0)
