// drive.mjs — one scenario of the console's end-to-end test in headless chromium
// (playwright-core driving Debian's /usr/bin/chromium). Run by test_console.py:
//   node drive.mjs SCENARIO   with ABX_URL, ABX_WS, ABX_ARTIFACTS and the tokens in the env.
// Prints one JSON line of findings; exits non-zero with the reason when a check fails.
import { chromium } from 'playwright-core';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';

const URL = process.env.ABX_URL;
const ART = process.env.ABX_ARTIFACTS;
const TOK = { alice: process.env.ALICE_TOKEN, ann: process.env.ANN_TOKEN, root: process.env.ROOT_TOKEN,
  val: process.env.VAL_TOKEN };
const XSS = process.env.XSS_NAME;
mkdirSync(ART, { recursive: true });

function check(cond, why) {
  if (!cond) throw new Error(why);
}

const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || '/usr/bin/chromium', headless: true,
  args: ['--no-sandbox', '--disable-gpu'] });
const problems = [];
const pages = [];

async function open(who, viewport = { width: 1280, height: 800 }) {
  const ctx = await browser.newContext({ viewport });
  const page = await ctx.newPage();
  pages.push(page);
  page.on('dialog', async (d) => { problems.push(`a dialog opened: ${d.message()}`); await d.dismiss(); });
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('console', (m) => { if (/Content Security Policy/.test(m.text())) problems.push('CSP: ' + m.text()); });
  await page.goto(URL + '/ui/');
  if (who) {
    await page.getByLabel('Access token').fill(TOK[who]);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.locator('nav').waitFor();
  }
  return page;
}

async function shot(page, name) {
  await page.screenshot({ path: join(ART, name + '.png'), fullPage: false });
}

async function noXss(page) {
  const fired = await page.evaluate(() => window.__xss === undefined && document.querySelectorAll('img[src="x"]').length === 0);
  check(fired, 'an injected element or handler ran');
}

async function runOp(page, op, args) {
  await page.goto(URL + '/ui/#/ops/' + op);
  await page.locator('#op-run').waitFor();
  for (const [k, v] of Object.entries(args || {})) {
    const c = page.locator(`[data-param="${k}"]`);
    if (await c.evaluate((el) => el.tagName) === 'SELECT') await c.selectOption(String(v));
    else await c.fill(String(v));
  }
  await page.locator('#op-run').click();
}

const scenarios = {
  async signin() {
    const page = await open(null);
    await shot(page, 'signin');
    await page.getByLabel('Access token').fill('not-a-token-of-this-server-123');
    await page.getByRole('button', { name: 'Sign in' }).click();
    const alert = page.getByRole('alert');
    await alert.waitFor();
    const text = await alert.textContent();
    check(/auth\.invalid_token/.test(text) && /not accepted/.test(text), 'unclear error: ' + text);
    check(await page.evaluate(() => sessionStorage.getItem('abx.token')) === null, 'a refused token was kept');
    await shot(page, 'signin-wrong-token');
    await page.getByLabel('Access token').fill(TOK.alice);
    await page.keyboard.press('Enter'); // keyboard only
    await page.locator('#op-search').waitFor();
    check(await page.evaluate(() => sessionStorage.getItem('abx.token')) === TOK.alice, 'token not in sessionStorage');
    check(!page.url().includes(TOK.alice), 'the token is in the URL');
    return { error: text.trim() };
  },

  async ops_and_timeline() {
    const tl = await open('alice');
    await tl.goto(URL + '/ui/#/timeline');
    await tl.locator('#tl-live', { hasText: 'live' }).waitFor();
    const before = await tl.locator('#tl-rows tr').count();
    const page = await open('alice');
    await page.getByLabel('Search operations').fill('files.li');
    check(await page.locator('.opbtn').count() === 1, 'search did not narrow to files.list');
    await page.locator('[data-op="files.list"]').click();
    await page.locator('[data-param="path"]').fill('.');
    await page.locator('#op-run').click();
    const pre = page.locator('#op-result pre');
    await pre.waitFor();
    const listing = await pre.textContent();
    check(listing.includes('"entries"') && listing.includes('hello.txt'), 'files.list result missing: ' + listing);
    check(listing.includes(XSS), 'the XSS file name is not shown as text');
    await noXss(page);
    await shot(page, 'operations');
    // the call appears live in the timeline (no reload)
    const row = tl.locator('#tl-rows tr', { hasText: 'files.list' }).first();
    await row.waitFor({ timeout: 10000 });
    check(await tl.locator('#tl-rows tr').count() > before, 'no new row');
    // filters and a group opened to its events
    await tl.getByLabel('Operation').fill('files.list');
    await tl.getByLabel('Decision').selectOption('ok');
    const g = row.locator('button[data-group]');
    await g.click();
    await tl.locator('tr.detail', { hasText: 'Events' }).waitFor();
    const detail = await tl.locator('tr.detail').first().textContent();
    check(detail.includes('finished') && detail.includes('Attempts'), 'group detail: ' + detail);
    check(await tl.locator('#tl-chart svg rect.bar-ok').count() > 0, 'no bar in the plot');
    // paging back by cursor: the first page holds the latest 200 events; older ones on demand
    await tl.getByLabel('Operation').fill('');
    await tl.getByLabel('Decision').selectOption('');
    const older = tl.getByRole('button', { name: 'Load older' });
    await older.waitFor();
    const n0 = await tl.locator('#tl-rows tr:not(.detail)').count();
    await older.click();
    await tl.waitForFunction((n) => document.querySelectorAll('#tl-rows tr:not(.detail)').length > n, n0);
    await shot(tl, 'timeline');
    // an op argument with markup: the error shows it as text
    await runOp(page, 'files.read', { path: XSS + '-missing' });
    const err = page.locator('#op-result .error');
    await err.waitFor();
    const et = await err.textContent();
    check(et.includes('files.not_found') && et.includes(XSS), 'error not shown with code and text: ' + et);
    await noXss(page);
    await shot(page, 'operations-error');
    // a bytes answer is a download; an SSE answer streams live until stopped
    await runOp(page, 'core.metrics', {});
    const dl = page.locator('#op-result a[download]');
    await dl.waitFor();
    check((await dl.getAttribute('href')).startsWith('blob:'), 'no download link for bytes');
    await runOp(page, 'ledger.stream', { after_ordinal: 0 });
    await page.locator('#op-events li', { hasText: 'files.list' }).first().waitFor({ timeout: 10000 });
    await page.getByRole('button', { name: 'Stop' }).click();
    await page.locator('#op-result', { hasText: 'Stopped' }).waitFor();
    await shot(page, 'operations-stream');
    // admin: the chain status
    const adm = await open('root');
    await adm.goto(URL + '/ui/#/timeline');
    const chain = adm.locator('#tl-chain', { hasText: 'Chain intact' });
    await chain.waitFor();
    check(await tl.locator('#tl-chain').textContent() === '', 'alice sees the chain status');
    await shot(adm, 'timeline-admin');
    await noXss(adm);
    return { chain: (await chain.textContent()).trim() };
  },

  async approval() {
    const alice = await open('alice');
    await runOp(alice, 'files.mkdir', { path: 'held-' + XSS });
    await alice.locator('#op-pending').waitFor();
    const ann = await open('ann');
    await ann.goto(URL + '/ui/#/approvals');
    const card = ann.locator('article.card', { hasText: 'files.mkdir' }).first();
    await card.waitFor({ timeout: 10000 });
    const ct = await card.textContent();
    check(ct.includes('alice') && ct.includes('held-' + XSS), 'card lacks who asked or the args: ' + ct);
    await noXss(ann);
    await shot(ann, 'approvals');
    await card.getByLabel('Reason').fill('looks fine');
    await card.getByRole('button', { name: 'Approve' }).click();
    await alice.locator('#op-approved').waitFor({ timeout: 15000 });
    const done = await alice.locator('#op-result').textContent();
    check(/completed|succeeded|done|approved/i.test(done), 'the held call did not complete: ' + done);
    await shot(alice, 'operations-approved');
    // one's own call: the server refuses, the page says so
    const val = await open('val');
    await runOp(val, 'files.mkdir', { path: 'val-own' });
    await val.locator('#op-pending').waitFor();
    await val.goto(URL + '/ui/#/approvals');
    const own = val.locator('article.card', { hasText: 'val-own' }).first();
    await own.waitFor({ timeout: 10000 });
    await own.getByRole('button', { name: 'Approve' }).click();
    const refusal = own.getByRole('alert');
    await refusal.waitFor();
    const rt = await refusal.textContent();
    check(rt.includes('approval.self_approval'), 'self-approval not refused visibly: ' + rt);
    await shot(val, 'approvals-self');
    return { alice: done.slice(0, 80), self: rt.trim() };
  },

  async terminal() {
    const page = await open('alice');
    await page.goto(URL + '/ui/#/terminal');
    await page.getByRole('button', { name: 'New terminal' }).click();
    await page.locator('#term-status', { hasText: 'connected' }).waitFor({ timeout: 15000 });
    await page.locator('#term .xterm-rows', { hasText: '$' }).or(page.locator('#term .xterm-rows', { hasText: '#' }))
      .waitFor({ timeout: 10000 }); // the prompt
    await page.locator('#term').click();
    await page.keyboard.type('echo hi');
    await page.keyboard.press('Enter');
    const rows = page.locator('#term .xterm-rows');
    const readBack = async () => (await rows.evaluate((el) => [...el.children].map((r) => r.textContent.trimEnd())));
    let lines = [];
    for (let i = 0; i < 50 && !lines.includes('hi'); i++) {
      await page.waitForTimeout(200);
      lines = await readBack();
    }
    check(lines.includes('hi'), 'no "hi" line: ' + JSON.stringify(lines.filter(Boolean)));
    await shot(page, 'terminal');
    // a narrower window: the terminal refits (resize message) and keeps working
    await page.setViewportSize({ width: 700, height: 800 });
    await page.waitForTimeout(500);
    await page.getByRole('button', { name: 'Reconnect' }).click();
    await page.locator('#term-status', { hasText: 'connected' }).waitFor({ timeout: 15000 });
    let replay = [];
    for (let i = 0; i < 50 && !replay.some((l) => l.includes('echo hi')); i++) {
      await page.waitForTimeout(200);
      replay = await readBack();
    }
    check(replay.some((l) => l.includes('echo hi')), 'reconnect did not replay the output');
    await page.locator('#term').click();
    await page.keyboard.type('echo $COLUMNS');
    await page.keyboard.press('Enter');
    let after = [];
    for (let i = 0; i < 25 && !after.some((l) => /^\d+$/.test(l)); i++) {
      await page.waitForTimeout(200);
      after = (await readBack()).filter(Boolean);
    }
    const cols = Number(after.filter((l) => /^\d+$/.test(l)).pop());
    check(cols > 20 && cols < 100, 'the terminal was not resized to the narrower window: COLUMNS=' + cols);
    await shot(page, 'terminal-reconnected');
    return { cols };
  },

  async kernels() {
    const page = await open('alice');
    await page.goto(URL + '/ui/#/kernels');
    await page.getByRole('button', { name: 'New Python kernel' }).click();
    await page.locator('#k-pick option[value]:not([value=""])').first().waitFor({ state: 'attached', timeout: 30000 });
    const png = 'iVBORw0KGgoAAAANSUhEUgAAABAAAAAQCAIAAACQkWg2AAAAGklEQVR4nGP8z0AaYCJRPcOoBmIA4+gogAAAcHwBHxQzP3sAAAAASUVORK5CYII=';
    const code = [
      'from IPython.display import Image, HTML, display',
      'import base64',
      `display(Image(data=base64.b64decode("${png}")))`,
      'display(HTML("<b id=inner>bold</b><script>parent.window.__xss=1</script>"))',
      'print("cell ran")',
    ].join('\n');
    await page.getByRole('textbox', { name: 'Cell 1' }).fill(code);
    await page.getByRole('button', { name: 'Run cell' }).click();
    const img = page.locator('button.imgout img').first();
    await img.waitFor({ timeout: 60000 });
    const frame = page.locator('iframe.htmlout');
    check(await frame.getAttribute('sandbox') === '', 'the HTML output is not sandboxed');
    await page.getByRole('button', { name: /Open Output 1/ }).click();
    const viewer = page.getByRole('dialog', { name: 'Image output' });
    await viewer.waitFor();
    const big = await viewer.locator('img').evaluate((el) => ({ w: el.naturalWidth, ok: el.complete }));
    check(big.w === 16 && big.ok, 'the image did not open: ' + JSON.stringify(big));
    await shot(page, 'kernels');
    await page.keyboard.press('Escape');
    await noXss(page);
    return { image: big };
  },

  async narrow() {
    const page = await open('alice', { width: 390, height: 844 });
    for (const p of ['ops', 'timeline', 'approvals', 'terminal', 'kernels']) {
      await page.goto(URL + '/ui/#/' + p);
      await page.locator('main#page h1').waitFor();
      await page.waitForTimeout(400);
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
      check(overflow <= 2, `${p} overflows a narrow screen by ${overflow}px`);
      await shot(page, 'narrow-' + p);
      // every control has an accessible name
      const unnamed = await page.evaluate(() => [...document.querySelectorAll('input, select, textarea, button')]
        .filter((el) => !el.closest('.xterm') && !(el.labels && el.labels.length) && !el.getAttribute('aria-label')
          && !el.textContent.trim()).map((el) => el.outerHTML.slice(0, 80)));
      check(unnamed.length === 0, `${p}: controls without a label: ` + unnamed.join(' | '));
    }
    return {};
  },
};

let out;
try {
  out = await scenarios[process.argv[2]]();
  check(problems.length === 0, problems.join('; '));
  console.log(JSON.stringify({ ok: true, ...out }));
} catch (e) {
  for (const [i, p] of pages.entries()) await p.screenshot({ path: join(ART, `failed-${process.argv[2]}-${i}.png`) }).catch(() => {});
  console.log(JSON.stringify({ ok: false, error: String(e && e.stack || e), problems }));
  process.exitCode = 1;
} finally {
  await browser.close();
}
