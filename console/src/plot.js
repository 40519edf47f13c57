// plot.js — calls per minute by decision as stacked SVG bars (no library: thirty rects).
const NS = 'http://www.w3.org/2000/svg';
const ORDER = ['ok', 'error', 'denied', 'held'];

function el(tag, attrs, text) {
  const e = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = text;
  return e;
}

export function plot(groups, minutes = 30) {
  const now = Math.floor(Date.now() / 60000);
  const bins = Array.from({ length: minutes }, () => ({ ok: 0, error: 0, denied: 0, held: 0 }));
  for (const g of groups) {
    if (!g.decision) continue;
    const t = Math.floor(Date.parse(g.finishedAt || g.at) / 60000);
    const i = minutes - 1 - (now - t);
    if (i >= 0 && i < minutes) bins[i][g.decision] += 1;
  }
  const max = Math.max(1, ...bins.map((b) => ORDER.reduce((s, k) => s + b[k], 0)));
  const W = 600;
  const H = 120;
  const bw = W / minutes;
  const svg = el('svg', { viewBox: `0 0 ${W} ${H + 20}`, role: 'img', class: 'plot',
    'aria-label': `Calls per minute over the last ${minutes} minutes; at most ${max} in one minute` });
  bins.forEach((b, i) => {
    let y = H;
    for (const k of ORDER) {
      if (!b[k]) continue;
      const hgt = (b[k] / max) * H;
      y -= hgt;
      const r = el('rect', { x: i * bw + 1, y, width: bw - 2, height: hgt, class: 'bar-' + k });
      r.appendChild(el('title', {}, `${b[k]} ${k}, ${minutes - 1 - i} min ago`));
      svg.appendChild(r);
    }
  });
  svg.appendChild(el('text', { x: 0, y: H + 15, class: 'axis' }, `-${minutes} min`));
  svg.appendChild(el('text', { x: W - 30, y: H + 15, class: 'axis' }, 'now'));
  ORDER.forEach((k, i) => {
    svg.appendChild(el('rect', { x: 120 + i * 90, y: H + 6, width: 10, height: 10, class: 'bar-' + k }));
    svg.appendChild(el('text', { x: 134 + i * 90, y: H + 15, class: 'axis' }, k));
  });
  return svg;
}
