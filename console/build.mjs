// build.mjs — bundles src/main.js (and the CSS it imports) into dist/app.js + dist/app.css and
// copies index.html and the libraries' licences: the files abx embeds at build time
// (scripts/console_embed.cmake). `npm run build` after changing src/, and commit dist/ with it.
import { build } from 'esbuild';
import { copyFileSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';

const out = process.env.OUT || 'dist'; // OUT=dir: build elsewhere (the test comparing with the committed dist)
rmSync(out, { recursive: true, force: true });
mkdirSync(out);
await build({
  entryPoints: { app: 'src/main.js' },
  bundle: true,
  minify: true,
  format: 'iife',
  target: ['es2020'],
  outdir: out,
  legalComments: 'none',
  logLevel: 'info',
});
copyFileSync('index.html', `${out}/index.html`);
// the bundled libraries' licences, served beside the console at /ui/LICENSES.txt
const lic = ['@xterm/xterm', '@xterm/addon-fit'].map((p) =>
  `${p}\n\n${readFileSync(`node_modules/${p}/LICENSE`, 'utf8')}`);
writeFileSync(`${out}/LICENSES.txt`, lic.join('\n----\n\n'));
