// bench/e2b.mjs — the E2B door's cost: the stock E2B SDK (tests/e2b's pinned e2b) against
// abx's own REST for the same two calls, interleaved in one run on one server:
//   commands.run('true')  vs  POST /commands/run {"argv": ["/bin/bash", "-l", "-c", "true"]}
//   files.read of 1 KiB   vs  GET /files/download?path=...
// Usage (bench/e2b.sh starts the server): node bench/e2b.mjs ENVD_URL ABX_URL TOKEN WORKSPACE [N]
// Prints one JSON line: medians in ms and the ratio SDK / REST for each.
const [envdUrl, abxUrl, token, ws, nArg] = process.argv.slice(2)
const N = Number(nArg || 200)
const { Sandbox } = await import(new URL('../tests/e2b/node_modules/e2b/dist/index.mjs', import.meta.url))
const sb = new Sandbox({ sandboxId: 'bench', envdVersion: '99.99.99', debug: true, envdAccessToken: token,
                         sandboxUrl: envdUrl })
const file = `${ws}/bench-1k.bin`
await sb.files.write(file, 'x'.repeat(1024))
const auth = { Authorization: `Bearer ${token}` }
const median = a => { const s = [...a].sort((x, y) => x - y); return s[Math.floor(s.length / 2)] }
async function time(fn) { const t = process.hrtime.bigint(); await fn(); return Number(process.hrtime.bigint() - t) / 1e6 }
const pairs = {
  run: [() => sb.commands.run('true', { cwd: ws }),
        async () => { const r = await fetch(`${abxUrl}/commands/run`, { method: 'POST', headers: { ...auth, 'Content-Type': 'application/json' },
                                                                          body: JSON.stringify({ argv: ['/bin/bash', '-l', '-c', 'true'], cwd: ws }) })
                      if (!r.ok) throw new Error(await r.text()); await r.json() }],
  read: [() => sb.files.read(file),
         async () => { const r = await fetch(`${abxUrl}/files/download?path=${encodeURIComponent(file)}`, { headers: auth })
                       if (!r.ok) throw new Error(await r.text()); await r.arrayBuffer() }],
}
const out = {}
for (const [name, [sdk, rest]] of Object.entries(pairs)) {
  for (let i = 0; i < 10; i++) { await sdk(); await rest() } // warm up both
  const a = [], b = []
  for (let i = 0; i < N; i++) { a.push(await time(sdk)); b.push(await time(rest)) }
  out[name] = { sdk_ms: +median(a).toFixed(3), rest_ms: +median(b).toFixed(3), ratio: +(median(a) / median(b)).toFixed(2) }
}
console.log(JSON.stringify({ n: N, ...out }))
