// The stock E2B SDK (npm e2b, pinned in package-lock.json) against abx's E2B door, for
// tests/blackbox/doors/test_e2b.py. Debug mode (no control plane); the envd URL comes
// from E2B_SANDBOX_URL, the SDK's own override of debug mode's localhost:49983, so the
// test can use a free port. Prints one JSON report line; "failure" when a step threw.
//   node client.mjs <scenario> <workspace> <outside-path>
// ABX_E2B_TOKEN is the abx token the sandbox object carries as its envd access token.
import { Sandbox, NotFoundError, AuthenticationError, CommandExitError, NotEnoughSpaceError } from 'e2b'
import { Sandbox as CodeSandbox } from '@e2b/code-interpreter'

const [scenario, ws, outside] = process.argv.slice(2)
const token = process.env.ABX_E2B_TOKEN

function sandbox(withToken = true) {
  // what Sandbox.create() returns in debug mode, with the access token a control plane would hand out
  return new Sandbox({ sandboxId: 'debug_sandbox_id', envdVersion: '99.99.99', debug: true,
                       envdAccessToken: withToken ? token : undefined })
}

function errInfo(e) {
  return { name: e?.constructor?.name, message: String(e?.message ?? e).slice(0, 300),
           notFound: e instanceof NotFoundError, auth: e instanceof AuthenticationError }
}

async function files() {
  const sb = sandbox(), rep = {}
  const info = await sb.files.write(`${ws}/e2b/hello.txt`, 'hello from e2b\n')
  rep.written = { name: info.name, path: info.path, type: info.type }
  rep.read = await sb.files.read(`${ws}/e2b/hello.txt`)
  rep.bytes = Array.from(await sb.files.read(`${ws}/e2b/hello.txt`, { format: 'bytes' })).length
  rep.existsYes = await sb.files.exists(`${ws}/e2b/hello.txt`)
  rep.existsNo = await sb.files.exists(`${ws}/e2b/nope.txt`)
  rep.mkdir = await sb.files.makeDir(`${ws}/e2b/sub/deeper`)
  rep.mkdirAgain = await sb.files.makeDir(`${ws}/e2b/sub/deeper`)
  const moved = await sb.files.rename(`${ws}/e2b/hello.txt`, `${ws}/e2b/sub/renamed.txt`)
  rep.renamed = { name: moved.name, path: moved.path, type: moved.type }
  rep.list = (await sb.files.list(`${ws}/e2b`)).map(e => ({ name: e.name, type: e.type })).sort((a, b) => a.name.localeCompare(b.name))
  rep.listDeep = (await sb.files.list(`${ws}/e2b`, { depth: 3 })).map(e => e.path).sort()
  const st = await sb.files.getInfo(`${ws}/e2b/sub/renamed.txt`)
  rep.info = { name: st.name, type: st.type, size: st.size, mode: st.mode, permissions: st.permissions,
               modified: st.modifiedTime instanceof Date }
  await sb.files.remove(`${ws}/e2b/sub`)
  rep.afterRemove = await sb.files.exists(`${ws}/e2b/sub/renamed.txt`)
  try { await sb.files.read(outside); rep.outside = 'read' } catch (e) { rep.outside = errInfo(e) }
  return rep
}

async function commands() {
  const sb = sandbox(), rep = {}
  const out = [], err = []
  const r = await sb.commands.run('echo out-line; echo err-line >&2', { cwd: ws, onStdout: d => out.push(d), onStderr: d => err.push(d) })
  rep.run = { exitCode: r.exitCode, stdout: r.stdout, stderr: r.stderr, cbOut: out.join(''), cbErr: err.join('') }
  // the SDK starts commands with stdin: false: a reader of stdin sees its end at once
  rep.noStdin = (await sb.commands.run('cat; echo after-cat', { cwd: ws, timeoutMs: 15000 })).stdout
  try { await sb.commands.run('exit 7', { cwd: ws }); rep.fail = 'no error' } catch (e) {
    rep.fail = { exit: e instanceof CommandExitError, exitCode: e.exitCode }
  }
  const bg = await sb.commands.run('read line; echo got:$line', { cwd: ws, background: true, stdin: true })
  rep.bgPid = bg.pid > 0
  rep.listed = (await sb.commands.list()).some(p => p.pid === bg.pid)
  await sb.commands.sendStdin(bg.pid, 'abc\n')
  const done = await bg.wait()
  rep.stdin = { exitCode: done.exitCode, stdout: done.stdout }
  const sleeper = await sb.commands.run('sleep 30', { cwd: ws, background: true })
  rep.killed = await sleeper.kill()
  try { await sleeper.wait(); rep.afterKill = 'exited cleanly' } catch (e) { rep.afterKill = { exitCode: e.exitCode } }
  const late = await sb.commands.run('echo early; sleep 1; echo late', { cwd: ws, background: true })
  const again = await sb.commands.connect(late.pid)
  const lr = await again.wait()
  rep.connect = { stdout: lr.stdout, exitCode: lr.exitCode }
  try { await sb.commands.run('true', { cwd: '/etc' }); rep.refused = 'ran' } catch (e) { rep.refused = errInfo(e) }
  return rep
}

async function noToken() {
  const rep = {}
  try { await sandbox(false).files.list(ws); rep.list = 'listed' } catch (e) { rep.list = errInfo(e) }
  try { await sandbox(false).files.read(`${ws}/a.txt`); rep.read = 'read' } catch (e) { rep.read = errInfo(e) }
  try { await sandbox(false).commands.run('true', { cwd: ws }); rep.run = 'ran' } catch (e) { rep.run = errInfo(e) }
  return rep
}

// pre-signed URLs: fetched with no token at all, as a browser or curl would
async function signedUrls() {
  const sb = sandbox(), rep = {}
  const up = await sb.uploadUrl(`${ws}/signed/up.txt`)
  rep.uploadHasSignature = new URL(up).searchParams.get('signature')?.startsWith('v1_')
  const form = new FormData()
  form.append('file', new Blob(['signed upload\n']), 'up.txt')
  const u = await fetch(up, { method: 'POST', body: form })
  rep.upload = { status: u.status, body: await u.json() }
  const down = await sb.downloadUrl(`${ws}/signed/up.txt`)
  const d = await fetch(down)
  rep.download = { status: d.status, text: await d.text() }
  const timed = await sb.downloadUrl(`${ws}/signed/up.txt`, { useSignatureExpiration: 60 })
  rep.timedHasExpiration = new URL(timed).searchParams.has('signature_expiration')
  rep.timed = (await fetch(timed)).status
  // the read signature does not make a write, and another path is another signature
  rep.readSigPost = (await fetch(down, { method: 'POST', body: form })).status
  const other = new URL(down); other.searchParams.set('path', `${ws}/signed/other.txt`)
  rep.otherPath = (await fetch(other)).status
  const outside = await sb.downloadUrl(outside_path)
  rep.outside = (await fetch(outside)).status
  return rep
}
const outside_path = outside

// a write that does not fit: `outside` is the path on a small filesystem
async function fullDisk() {
  const sb = sandbox(), rep = {}
  try { await sb.files.write(outside, new Uint8Array(1 << 20)); rep.big = 'written' } catch (e) {
    rep.big = { ...errInfo(e), space: e instanceof NotEnoughSpaceError }
  }
  rep.small = (await sb.files.write(outside + '.small', 'fits')).name
  return rep
}

async function until(pred, ms = 10000) {
  const end = Date.now() + ms
  while (!pred()) {
    if (Date.now() > end) throw new Error('timed out waiting')
    await new Promise(r => setTimeout(r, 50))
  }
}

async function pty() {
  const sb = sandbox(), rep = {}, chunks = []
  const text = () => chunks.join('')
  const enc = s => new TextEncoder().encode(s)
  const h = await sb.pty.create({ cols: 80, rows: 24, cwd: ws, onData: d => chunks.push(Buffer.from(d).toString()) })
  rep.pid = h.pid > 0
  await sb.pty.sendInput(h.pid, enc('stty size; echo pty-$((6*7))\n'))
  await until(() => text().includes('pty-42'))
  rep.size1 = /24 80/.test(text())
  await sb.pty.resize(h.pid, { cols: 100, rows: 30 })
  await sb.pty.sendInput(h.pid, enc('stty size; exit 5\n'))
  try { const r = await h.wait(); rep.exit = r.exitCode } catch (e) { rep.exit = e.exitCode }
  rep.size2 = /30 100/.test(text())
  return rep
}

async function watch() {
  const sb = sandbox(), rep = {}, events = []
  await sb.files.makeDir(`${ws}/watched`)
  const w = await sb.files.watchDir(`${ws}/watched`, e => events.push(e))
  await sb.files.write(`${ws}/watched/new.txt`, 'x')
  await until(() => events.some(e => e.name === 'new.txt'))
  rep.events = [...new Set(events.map(e => `${e.type}:${e.name}`))].sort()
  await w.stop()
  return rep
}

async function interpreter() {
  // the code interpreter SDK sends the access token on /execute and the traffic token on /contexts
  const sb = new CodeSandbox({ sandboxId: 'debug_sandbox_id', envdVersion: '99.99.99', debug: true,
                               envdAccessToken: token, trafficAccessToken: token })
  const rep = {}
  rep.sum = (await sb.runCode('1+1')).text
  const out = []
  const p = await sb.runCode('print("hi"); import sys; print("oops", file=sys.stderr)', { onStdout: m => out.push(m.line) })
  rep.print = { stdout: p.logs.stdout.join(''), stderr: p.logs.stderr.join(''), cb: out.join('') }
  const plot = await sb.runCode('import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()')
  rep.plotKeys = plot.results.map(r => r.formats()).flat()
  rep.png = plot.results.some(r => typeof r.png === 'string' && Buffer.from(r.png, 'base64').subarray(1, 4).toString() === 'PNG')
  const err = await sb.runCode('1/0')
  rep.error = { name: err.error?.name, value: err.error?.value, tb: (err.error?.traceback ?? '').includes('ZeroDivisionError') }
  const ctx = await sb.createCodeContext({ language: 'python' })
  await sb.runCode('x = 5', { context: ctx })
  rep.ctxValue = (await sb.runCode('x * 2', { context: ctx })).text
  rep.listed = (await sb.listCodeContexts()).some(c => c.id === ctx.id)
  await sb.restartCodeContext(ctx)
  rep.afterRestart = (await sb.runCode('x', { context: ctx })).error?.name
  await sb.removeCodeContext(ctx)
  rep.envs = { withEnvs: (await sb.runCode("import os; os.environ['CELL_VAR']", { envs: { CELL_VAR: 'y z' } })).text,
               after: (await sb.runCode("import os; str(os.environ.get('CELL_VAR'))")).text.replace(/'/g, '') }
  // (a refused runCode leaves the SDK's request timer running: a short one lets node exit)
  try { await sb.runCode('1', { envs: { NOT_LISTED: 'x' }, requestTimeoutMs: 2000 }); rep.envs.refused = false } catch (e) {
    rep.envs.refused = /403/.test(String(e?.message))
  }
  rep.afterRemove = (await sb.listCodeContexts()).some(c => c.id === ctx.id)
  return rep
}

const scenarios = { files, commands, noToken, pty, watch, interpreter, signedUrls, fullDisk }
try {
  const rep = await scenarios[scenario]()
  console.log(JSON.stringify(rep))
} catch (e) {
  console.log(JSON.stringify({ failure: String(e?.stack ?? e).slice(0, 2000) }))
  process.exit(1)
}
