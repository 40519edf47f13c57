/* agents_cli.c — the two adapters' command lines and the mapping of their JSON lines to
 * abx's one event schema (docs/agents.md):
 *
 *   {"type": "session", "thread": ID}                      the CLI's own session id
 *   {"type": "message", "text": T}                         the agent's text
 *   {"type": "tool_call", "id": I, "tool": NAME, "command": C?, "input": {...}?}
 *   {"type": "tool_result", "id": I, "output": O, "exit_code": N?, "error": BOOL}
 *   {"type": "file_change", "path": P, "kind": "add|update|delete"}
 *   {"type": "final", "text": T, "usage": {...}?}
 *   {"type": "error", "message": M}
 *
 * codex: `codex exec --json` (its JSONL: thread.started, item.started/completed with
 * command_execution, agent_message, file_change ..., turn.completed, turn.failed, error).
 * Claude Code: `claude -p --output-format stream-json --verbose` (system/init, assistant
 * and user messages with tool_use and tool_result blocks, result).
 * The CLIs' own sandboxes are off (codex --sandbox danger-full-access, Claude Code
 * --permission-mode bypassPermissions): the process runs inside abx's confinement,
 * which is the boundary; theirs would either fail inside it (nested namespaces) or ask
 * for approvals nobody can give in a non-interactive run. */
#include "builtin/agents.h"
#include <stdio.h>
#include <string.h>

const agents_adapter agents_adapters[2] = {
    {"codex", "codex", "codex-cli", "https://api.openai.com/v1", "gpt-5-codex"},
    {"claude_code", "claude-code", "claude-code", "https://api.anthropic.com", "claude-sonnet-4-5"},
};

const agents_adapter *agents_adapter_find(const char *name)
{
    if (!name)
        return NULL;
    for (size_t i = 0; i < ABX_ARRAY_LEN(agents_adapters); i++)
        if (strcmp(name, agents_adapters[i].id) == 0 || strcmp(name, agents_adapters[i].wire) == 0)
            return &agents_adapters[i];
    return NULL;
}

const char *agents_setting(const json_t *config, const agents_adapter *ad, const char *key)
{
    const json_t *a = json_object_get(config, ad->id);
    if (!a)
        a = json_object_get(config, ad->wire);
    return json_string_value(json_object_get(a, key));
}

typedef struct argv_b {
    char **v;
    size_t n, cap;
} argv_b;

static void add(argv_b *b, const char *s)
{
    if (b->n + 2 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 32;
        char **g = abx_realloc(b->v, cap * sizeof *g);
        if (!g)
            return;
        b->v = g;
        b->cap = cap;
    }
    b->v[b->n++] = abx_strdup(s);
    b->v[b->n] = NULL;
}

static const char *base_url(const agents_turn_in *in)
{
    const char *u = agents_setting(in->config, in->ad, "base_url");
    return u ? u : in->ad->base_url;
}

char **agents_argv(const agents_turn_in *in, const char *program)
{
    argv_b b = {0};
    const char *url = base_url(in);
    if (strpbrk(url, "\"\\\n"))
        return NULL; /* it goes into a TOML string */
    if (strcmp(in->ad->id, "codex") == 0) {
        add(&b, "/usr/bin/node");
        add(&b, program);
        add(&b, "exec");
        add(&b, "--json");
        add(&b, "--skip-git-repo-check");
        add(&b, "--sandbox");
        add(&b, "danger-full-access");
        add(&b, "-c");
        add(&b, "model_provider=\"abx\"");
        add(&b, "-c");
        char *prov = abx_asprintf("model_providers.abx={name=\"abx\",base_url=\"%s\",wire_api=\"responses\","
                                  "request_max_retries=0,stream_max_retries=0}",
                                  url);
        add(&b, prov);
        abx_free(prov);
        add(&b, "-m");
        add(&b, in->model);
        if (in->resume) {
            add(&b, "resume");
            add(&b, in->resume);
        }
        add(&b, in->prompt);
    } else {
        add(&b, program);
        add(&b, "-p");
        add(&b, "--output-format");
        add(&b, "stream-json");
        add(&b, "--verbose");
        add(&b, "--permission-mode");
        add(&b, "bypassPermissions");
        add(&b, "--model");
        add(&b, in->model);
        if (in->resume) {
            add(&b, "--resume");
            add(&b, in->resume);
        }
        add(&b, "--");
        add(&b, in->prompt);
    }
    return b.v;
}

void agents_argv_free(char **argv)
{
    for (size_t i = 0; argv && argv[i]; i++)
        abx_free(argv[i]);
    abx_free(argv);
}

json_t *agents_env(const agents_turn_in *in)
{
    json_t *e = json_object();
    if (strcmp(in->ad->id, "claude_code") == 0) {
        json_object_set_new(e, "ANTHROPIC_BASE_URL", json_string(base_url(in)));
        /* a placeholder: the egress proxy replaces the header with the secret's value */
        json_object_set_new(e, "ANTHROPIC_API_KEY", json_string("abx-egress-injects-the-key"));
        json_object_set_new(e, "IS_SANDBOX", json_string("1"));
        json_object_set_new(e, "DISABLE_AUTOUPDATER", json_string("1"));
        json_object_set_new(e, "DISABLE_TELEMETRY", json_string("1"));
        json_object_set_new(e, "DISABLE_ERROR_REPORTING", json_string("1"));
        json_object_set_new(e, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", json_string("1"));
    } else {
        json_object_set_new(e, "NO_COLOR", json_string("1"));
    }
    return e;
}

static void ev(json_t *out, json_t *e) { json_array_append_new(out, e); }

static void map_codex_item(const json_t *item, bool done, json_t *out)
{
    const char *type = json_string_value(json_object_get(item, "type"));
    const char *id = json_string_value(json_object_get(item, "id"));
    if (!type)
        return;
    if (strcmp(type, "command_execution") == 0) {
        if (!done) {
            ev(out, json_pack("{s:s, s:s?, s:s, s:O?}", "type", "tool_call", "id", id, "tool", "command", "command",
                              json_object_get(item, "command")));
            return;
        }
        const json_t *code = json_object_get(item, "exit_code");
        ev(out, json_pack("{s:s, s:s?, s:O?, s:O?, s:b}", "type", "tool_result", "id", id, "output",
                          json_object_get(item, "aggregated_output"), "exit_code", code, "error",
                          !json_is_integer(code) || json_integer_value(code) != 0));
    } else if (strcmp(type, "agent_message") == 0 && done) {
        ev(out, json_pack("{s:s, s:O?}", "type", "message", "text", json_object_get(item, "text")));
    } else if (strcmp(type, "file_change") == 0 && done) {
        size_t i;
        json_t *c;
        json_array_foreach(json_object_get(item, "changes"), i, c)
            ev(out, json_pack("{s:s, s:O?, s:O?}", "type", "file_change", "path", json_object_get(c, "path"), "kind",
                              json_object_get(c, "kind")));
    } else if ((strcmp(type, "mcp_tool_call") == 0 || strcmp(type, "web_search") == 0) && done) {
        ev(out, json_pack("{s:s, s:s?, s:s, s:O}", "type", "tool_call", "id", id, "tool", type, "input", item));
    } else if (strcmp(type, "error") == 0 && done) {
        ev(out, json_pack("{s:s, s:O?}", "type", "warning", "message", json_object_get(item, "message")));
    }
}

static void map_codex(const json_t *line, json_t *out)
{
    const char *type = json_string_value(json_object_get(line, "type"));
    if (!type)
        return;
    if (strcmp(type, "thread.started") == 0)
        ev(out, json_pack("{s:s, s:O?}", "type", "session", "thread", json_object_get(line, "thread_id")));
    else if (strcmp(type, "item.started") == 0 || strcmp(type, "item.completed") == 0)
        map_codex_item(json_object_get(line, "item"), type[5] == 'c', out);
    else if (strcmp(type, "turn.completed") == 0)
        ev(out, json_pack("{s:s, s:O?}", "type", "final", "usage", json_object_get(line, "usage")));
    else if (strcmp(type, "turn.failed") == 0)
        ev(out, json_pack("{s:s, s:O?}", "type", "error", "message",
                          json_object_get(json_object_get(line, "error"), "message")));
    else if (strcmp(type, "error") == 0)
        ev(out, json_pack("{s:s, s:O?}", "type", "warning", "message", json_object_get(line, "message")));
}

static json_t *block_text(const json_t *content)
{
    if (json_is_string(content))
        return json_incref((json_t *)content);
    char *acc = abx_strdup("");
    size_t i;
    json_t *b;
    json_array_foreach(content, i, b) {
        const char *t = json_string_value(json_object_get(b, "text"));
        if (t) {
            char *n = abx_asprintf("%s%s", acc, t);
            abx_free(acc);
            acc = n;
        }
    }
    json_t *s = json_string(acc ? acc : "");
    abx_free(acc);
    return s;
}

static void map_claude_blocks(const json_t *msg, json_t *out)
{
    size_t i;
    json_t *b;
    json_array_foreach(json_object_get(msg, "content"), i, b) {
        const char *bt = json_string_value(json_object_get(b, "type"));
        if (!bt)
            continue;
        if (strcmp(bt, "text") == 0) {
            ev(out, json_pack("{s:s, s:O?}", "type", "message", "text", json_object_get(b, "text")));
        } else if (strcmp(bt, "tool_use") == 0) {
            const json_t *input = json_object_get(b, "input");
            const char *name = json_string_value(json_object_get(b, "name"));
            json_t *e = json_pack("{s:s, s:O?, s:s, s:O?}", "type", "tool_call", "id", json_object_get(b, "id"),
                                  "tool", name && strcmp(name, "Bash") == 0 ? "command" : (name ? name : "?"),
                                  "input", input);
            if (json_object_get(input, "command"))
                json_object_set(e, "command", json_object_get(input, "command"));
            ev(out, e);
            const json_t *fp = json_object_get(input, "file_path");
            if (name && fp && (strcmp(name, "Write") == 0 || strcmp(name, "Edit") == 0))
                ev(out, json_pack("{s:s, s:O, s:s}", "type", "file_change", "path", fp, "kind",
                                  strcmp(name, "Write") == 0 ? "add" : "update"));
        } else if (strcmp(bt, "tool_result") == 0) {
            ev(out, json_pack("{s:s, s:O?, s:o, s:b}", "type", "tool_result", "id", json_object_get(b, "tool_use_id"),
                              "output", block_text(json_object_get(b, "content")), "error",
                              json_is_true(json_object_get(b, "is_error"))));
        }
    }
}

static void map_claude(const json_t *line, json_t *out)
{
    const char *type = json_string_value(json_object_get(line, "type"));
    if (!type)
        return;
    if (strcmp(type, "system") == 0 && json_object_get(line, "session_id"))
        ev(out, json_pack("{s:s, s:O}", "type", "session", "thread", json_object_get(line, "session_id")));
    else if (strcmp(type, "assistant") == 0 || strcmp(type, "user") == 0)
        map_claude_blocks(json_object_get(line, "message"), out);
    else if (strcmp(type, "result") == 0) {
        if (json_is_true(json_object_get(line, "is_error")))
            ev(out, json_pack("{s:s, s:O?}", "type", "error", "message", json_object_get(line, "result")));
        else
            ev(out, json_pack("{s:s, s:O?, s:O?}", "type", "final", "text", json_object_get(line, "result"), "usage",
                              json_object_get(line, "usage")));
    }
}

void agents_map_line(const agents_adapter *ad, const json_t *line, json_t *out)
{
    if (strcmp(ad->id, "codex") == 0)
        map_codex(line, out);
    else
        map_claude(line, out);
}
