// schemaform.js — an op's parameters (the catalog's params: type, choices, default,
// required, min/max, doc) as a labelled form, and the arguments it gives back.
import { h, field } from './dom.js';

const LONG = new Set(['content', 'code', 'command', 'script', 'input', 'data']);

function control(op, p) {
  const id = `arg-${op.id}-${p.name}`.replace(/[^\w-]/g, '_');
  const common = { id, name: p.name, 'data-param': p.name, required: p.required ? true : null };
  if (p.type === 'boolean') {
    return h('select', common,
      p.required ? null : h('option', { value: '' }, p.default !== undefined ? `(default: ${p.default})` : '(not set)'),
      h('option', { value: 'true' }, 'true'), h('option', { value: 'false' }, 'false'));
  }
  if (p.type === 'enum') {
    return h('select', common,
      p.required ? null : h('option', { value: '' }, p.default !== undefined ? `(default: ${p.default})` : '(not set)'),
      (p.choices || []).map((c) => h('option', { value: c }, c)));
  }
  if (p.type === 'integer' || p.type === 'number') {
    return h('input', { ...common, type: 'number', step: p.type === 'integer' ? '1' : 'any', min: p.min, max: p.max,
      placeholder: p.default !== undefined ? String(p.default) : '' });
  }
  if (p.type === 'list' || p.type === 'map') {
    return h('textarea', { ...common, rows: 3, spellcheck: 'false',
      placeholder: p.type === 'list' ? '["a", "b"]  (JSON list)' : '{"NAME": "value"}  (JSON object)' });
  }
  if (LONG.has(p.name)) return h('textarea', { ...common, rows: 4, spellcheck: 'false',
    placeholder: p.default !== undefined ? String(p.default) : '' });
  return h('input', { ...common, type: 'text', spellcheck: 'false', autocomplete: 'off',
    placeholder: p.default !== undefined ? String(p.default) : '' });
}

export function buildForm(op) {
  const controls = [];
  const fields = (op.params || []).map((p) => {
    const c = control(op, p);
    controls.push([p, c]);
    const label = [p.name, p.required ? ' (required)' : '', ` \u2014 ${p.type}`].join('');
    const limits = [p.min !== undefined ? `min ${p.min}` : null, p.max !== undefined ? `max ${p.max}` : null]
      .filter(Boolean).join(', ');
    return field(label, c, [p.doc || '', limits ? ` (${limits})` : ''].join(''));
  });
  function args() {
    const out = {};
    for (const [p, c] of controls) {
      const v = c.value;
      if (v === '') continue;
      if (p.type === 'boolean') out[p.name] = v === 'true';
      else if (p.type === 'integer') out[p.name] = Number.parseInt(v, 10);
      else if (p.type === 'number') out[p.name] = Number(v);
      else if (p.type === 'list' || p.type === 'map') {
        try {
          out[p.name] = JSON.parse(v);
        } catch (e) {
          throw new Error(`${p.name}: not valid JSON (${e.message})`);
        }
      } else out[p.name] = v;
    }
    return out;
  }
  return { fields, args };
}
