// OpenAI's Agents SDK (pinned in package.json) converts every tool abx declares in the
// openai format to strict mode: reads the declarations (abx tools --format openai) on
// stdin, prints one JSON line per tool {name, strict, warnings}; anything the SDK logs
// while converting counts as a warning.

const logged = [];
for (const level of ['warn', 'error', 'log', 'info', 'debug']) {
  const orig = console[level];
  console[level] = (...args) => { logged.push(args.map(String).join(' ')); if (level === 'error') orig(...args); };
}
process.env.DEBUG = 'openai-agents*'; // the SDK's debug logger, on before it loads
const { mcpToFunctionTool } = await import('@openai/agents');

let input = '';
for await (const chunk of process.stdin) input += chunk;
const doc = JSON.parse(input);
const server = { name: 'abx', cacheToolsList: false, callTool: async () => [] };
for (const t of doc.tools) {
  const f = t.function;
  logged.length = 0;
  let strict = null, error = null, params = null;
  try {
    const ft = mcpToFunctionTool({ name: f.name, description: f.description, inputSchema: f.parameters }, server, true);
    strict = ft.strict;
    params = ft.parameters;
  } catch (e) {
    error = String(e && e.stack || e);
  }
  const same = JSON.stringify(params) === JSON.stringify(f.parameters);
  process.stdout.write(JSON.stringify({ name: f.name, declared_strict: f.strict, strict, same, error,
                                        warnings: [...logged] }) + '\n');
}
