/* agents_turn.c — one turn of an agent CLI: started confined like any command (the
 * call's statement: its paths, its net allowlist behind the egress proxy, which injects
 * the model API key), its stdout read line by line, each JSON line mapped to abx events
 * (agents_cli.c), tool calls and results and the final message recorded in the call's
 * ledger group, and the result or an SSE stream of the events given back. */
#include "builtin/agents.h"
#include "builtin/exec.h"
#include <dirent.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

struct agents_turn {
    abx_proc *p;
    const agents_adapter *ad;
    abx_ledger *ledger;
    uint64_t group;
    char *session_id;
    char *cwd;
    int64_t t0_wall;
    uint64_t off;
    abx_buf line;
    json_t *events;
    size_t sent;
    char *final_text;
    char *thread;
    bool saw_final, ended;
    json_t *result;
};

static void record(agents_turn *t, const json_t *e)
{
    const char *type = json_string_value(json_object_get(e, "type"));
    if (!t->ledger || !t->group || !type || strcmp(type, "warning") == 0)
        return;
    char at[32];
    abx_iso8601(abx_wall_ms(), at);
    json_t *le = json_pack("{s:s, s:s, s:s, s:s?, s:O}", "kind", "agent", "at", at, "adapter", t->ad->id, "session",
                           t->session_id, "event", e);
    json_t *events = json_pack("[o]", le);
    abx_ledger_append(t->ledger, t->group, events, false);
    json_decref(events);
}

static void take_event(agents_turn *t, json_t *e)
{
    const char *type = json_string_value(json_object_get(e, "type"));
    if (type && strcmp(type, "session") == 0 && json_string_value(json_object_get(e, "thread"))) {
        abx_free(t->thread);
        t->thread = abx_strdup(json_string_value(json_object_get(e, "thread")));
    } else if (type && strcmp(type, "message") == 0 && json_string_value(json_object_get(e, "text"))) {
        abx_free(t->final_text);
        t->final_text = abx_strdup(json_string_value(json_object_get(e, "text")));
    } else if (type && strcmp(type, "final") == 0) {
        t->saw_final = true;
        if (json_string_value(json_object_get(e, "text"))) {
            abx_free(t->final_text);
            t->final_text = abx_strdup(json_string_value(json_object_get(e, "text")));
        } else if (t->final_text) {
            json_object_set_new(e, "text", json_string(t->final_text));
        }
    }
    record(t, e);
    json_array_append(t->events, e);
}

static void take_line(agents_turn *t, const char *s, size_t n)
{
    json_t *line = json_loadb(s, n, 0, NULL);
    if (!json_is_object(line)) {
        json_decref(line);
        return; /* not one of the CLI's JSON lines (a warning it printed) */
    }
    json_t *mapped = json_array();
    agents_map_line(t->ad, line, mapped);
    size_t i;
    json_t *e;
    json_array_foreach(mapped, i, e) take_event(t, e);
    json_decref(mapped);
    json_decref(line);
}

/* Files under the turn's folder modified since it started (a bounded walk). */
static void changed_files(const char *root, const char *rel, int depth, int64_t since_ms, json_t *out, int *budget)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s%s%s", root, rel[0] ? "/" : "", rel);
    DIR *d = opendir(path);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d)) && (*budget)-- > 0 && json_array_size(out) < 200) {
        if (de->d_name[0] == '.' && (de->d_name[1] == '\0' || strcmp(de->d_name, "..") == 0 ||
                                     strcmp(de->d_name, ".git") == 0))
            continue;
        char sub[PATH_MAX], full[PATH_MAX];
        snprintf(sub, sizeof sub, "%s%s%s", rel, rel[0] ? "/" : "", de->d_name);
        snprintf(full, sizeof full, "%s/%s", root, sub);
        struct stat st;
        if (lstat(full, &st) != 0)
            continue;
        if (S_ISDIR(st.st_mode) && depth > 0)
            changed_files(root, sub, depth - 1, since_ms, out, budget);
        else if (S_ISREG(st.st_mode) &&
                 (int64_t)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000 >= since_ms)
            json_array_append_new(out, json_string(sub));
    }
    closedir(d);
}

static void finish_result(agents_turn *t)
{
    json_t *st = abx_proc_json(t->p);
    if (!t->saw_final) { /* the CLI ended without a final answer: say why */
        char *data = NULL;
        bool trunc;
        size_t n = abx_proc_head(t->p, ABX_STDERR, &data, &trunc);
        size_t keep = n > 600 ? 600 : n;
        json_t *e = json_pack("{s:s, s:o, s:O?}", "type", "error", "message",
                              abx_text_json(data ? data + n - keep : "", keep), "exit_code",
                              json_object_get(st, "exit_code"));
        abx_free(data);
        take_event(t, e);
        json_decref(e);
    }
    json_t *calls = json_array();
    size_t i;
    json_t *e;
    json_array_foreach(t->events, i, e) {
        const char *type = json_string_value(json_object_get(e, "type"));
        if (type && strcmp(type, "tool_call") == 0)
            json_array_append_new(calls, json_deep_copy(e));
        else if (type && strcmp(type, "tool_result") == 0) {
            size_t k;
            json_t *c;
            json_array_foreach(calls, k, c) if (json_equal(json_object_get(c, "id"), json_object_get(e, "id"))) {
                json_object_set(c, "output", json_object_get(e, "output"));
                json_object_set(c, "exit_code", json_object_get(e, "exit_code"));
                json_object_set(c, "error", json_object_get(e, "error"));
            }
        }
    }
    json_t *files = json_array();
    int budget = 5000;
    if (t->cwd)
        changed_files(t->cwd, "", 4, t->t0_wall, files, &budget);
    t->result = json_pack("{s:s, s:s?, s:s?, s:s?, s:o, s:o, s:O, s:O?, s:O, s:b}", "adapter", t->ad->id, "session",
                          t->session_id, "final", t->saw_final ? t->final_text : NULL, "thread", t->thread,
                          "tool_calls", calls, "files_changed", files, "events", t->events, "exit_code",
                          json_object_get(st, "exit_code"), "status", json_object_get(st, "status"), "ok",
                          t->saw_final);
    json_decref(st);
}

/* Read what the CLI wrote; true when there was something or the turn ended. */
static bool pump(agents_turn *t, int64_t wait_ms)
{
    if (t->ended)
        return false;
    char *data = NULL;
    uint64_t start, total;
    bool dropped;
    size_t n = abx_proc_read(t->p, ABX_STDOUT, t->off, 1 << 16, &data, &start, &dropped, &total);
    if (n) {
        t->off = start + n;
        abx_buf_append(&t->line, data, n);
        char *nl;
        while (t->line.len && (nl = memchr(t->line.data, '\n', t->line.len))) {
            size_t l = (size_t)(nl - t->line.data);
            take_line(t, t->line.data, l);
            memmove(t->line.data, nl + 1, t->line.len - l - 1);
            t->line.len -= l + 1;
        }
    }
    abx_free(data);
    if (n)
        return true;
    if (!abx_proc_running(t->p)) {
        /* one more read after the exit: the last lines may have come with it */
        n = abx_proc_read(t->p, ABX_STDOUT, t->off, 1, &data, &start, &dropped, &total);
        abx_free(data);
        if (n)
            return true;
        if (t->line.len)
            take_line(t, t->line.data, t->line.len);
        t->line.len = 0;
        t->ended = true;
        finish_result(t);
        return true;
    }
    abx_proc_wait_output(t->p, t->off, UINT64_MAX / 2, abx_now_ms() + wait_ms);
    return false;
}

static void turn_free(agents_turn *t)
{
    if (!t)
        return;
    if (t->p) {
        if (abx_proc_running(t->p))
            abx_proc_kill(t->p, SIGKILL, false);
        abx_proc_unref(t->p);
    }
    abx_free(t->session_id);
    abx_free(t->cwd);
    abx_buf_release(&t->line);
    json_decref(t->events);
    json_decref(t->result);
    abx_free(t->final_text);
    abx_free(t->thread);
    abx_free(t);
}

char *agents_default_cwd(abx_ctx *ctx)
{
    if (abx_ctx_path(ctx, "cwd"))
        return abx_strdup(abx_ctx_path(ctx, "cwd"));
    abx_fs_view v;
    char *out = NULL;
    if (abx_ctx_fs_view(ctx, &v) == 0) {
        abx_server_facts f;
        abx_ctx_server_facts(ctx, &f);
        out = abx_strdup(v.cwd_root ? v.cwd_root : f.workspace);
        abx_fs_view_release(&v);
    }
    return out;
}

agents_turn *agents_turn_start(abx_ctx *ctx, const agents_turn_in *in, abx_reply *r)
{
    char program[PATH_MAX], folder[PATH_MAX];
    if (!abx_ctx_installed(ctx, in->ad->requirement, program, sizeof program, folder, sizeof folder)) {
        abx_reply_error(r, ABX_E_INSTALL_FAILED, NULL, "'%s' is not installed", in->ad->requirement);
        return NULL;
    }
    char **argv = agents_argv(in, program);
    json_t *env = agents_env(in);
    agents_turn *t = abx_calloc(1, sizeof *t);
    if (!argv || !t) {
        agents_argv_free(argv);
        json_decref(env);
        abx_free(t);
        abx_reply_error(r, ABX_E_SERVER_UNAVAILABLE, NULL, "out of memory (or a base_url with quotes)");
        return NULL;
    }
    abx_exec_opts o = {.argv = argv, .cwd = in->cwd, .base_env = env, .extra_ro = folder,
                       .hard_timeout_ms = in->timeout_ms, .head_bytes = 64 * 1024, .tag = in->ad->id};
    t->ad = in->ad;
    t->events = json_array();
    t->session_id = in->session_id ? abx_strdup(in->session_id) : NULL;
    t->cwd = in->cwd && !abx_ctx_path(ctx, "cwd") ? abx_strdup(in->cwd) : agents_default_cwd(ctx);
    t->ledger = abx_ctx_ledger(ctx);
    t->group = abx_ctx_ledger_group(ctx);
    t->t0_wall = abx_wall_ms() - 1000;
    abx_buf_init(&t->line, 8 << 20);
    t->p = abx_exec_start(ctx, NULL, &o, r);
    agents_argv_free(argv);
    json_decref(env);
    if (!t->p) {
        turn_free(t);
        return NULL;
    }
    return t;
}

abx_err agents_turn_finish(abx_ctx *ctx, agents_turn *t, abx_reply *r, json_t **result)
{
    while (!t->ended) {
        if (abx_ctx_cancelled(ctx)) {
            abx_proc_kill(t->p, SIGKILL, false);
            abx_proc_wait(t->p, abx_now_ms() + 2000, NULL, NULL);
        }
        pump(t, 1000);
    }
    *result = json_incref(t->result);
    abx_reply_json(r, json_incref(t->result));
    turn_free(t);
    return ABX_OK;
}

typedef struct tstream {
    agents_turn *t;
    abx_buf pending;
    bool done;
    void (*on_end)(void *ud, const json_t *result);
    void *ud;
    void (*ud_free)(void *ud);
} tstream;

static long ts_read(void *state, char *buf, size_t max)
{
    tstream *s = state;
    for (;;) {
        if (s->pending.len) {
            size_t n = s->pending.len < max ? s->pending.len : max;
            memcpy(buf, s->pending.data, n);
            memmove(s->pending.data, s->pending.data + n, s->pending.len - n);
            s->pending.len -= n;
            return (long)n;
        }
        if (s->done)
            return 0;
        while (s->t->sent < json_array_size(s->t->events)) {
            const json_t *e = json_array_get(s->t->events, s->t->sent++);
            char *js = json_dumps(e, JSON_COMPACT);
            abx_buf_printf(&s->pending, "event: %s\ndata: %s\n\n", json_string_value(json_object_get(e, "type")),
                           js ? js : "{}");
            free(js);
        }
        if (s->pending.len)
            continue;
        if (s->t->ended) {
            json_t *res = json_deep_copy(s->t->result);
            json_object_del(res, "events");
            char *js = json_dumps(res, JSON_COMPACT);
            abx_buf_printf(&s->pending, "event: result\ndata: %s\n\n", js ? js : "{}");
            free(js);
            json_decref(res);
            if (s->on_end)
                s->on_end(s->ud, s->t->result);
            s->on_end = NULL;
            s->done = true;
            continue;
        }
        if (!pump(s->t, 2000) && s->t->sent == json_array_size(s->t->events))
            abx_buf_puts(&s->pending, ": keepalive\n\n");
    }
}

static void ts_free(void *state)
{
    tstream *s = state;
    if (s->on_end) { /* the client left before the end: the turn is cancelled */
        if (abx_proc_running(s->t->p))
            abx_proc_kill(s->t->p, SIGKILL, false);
        s->on_end(s->ud, NULL);
    }
    if (s->ud_free)
        s->ud_free(s->ud);
    turn_free(s->t);
    abx_buf_release(&s->pending);
    abx_free(s);
}

void agents_turn_stream(agents_turn *t, abx_reply *r, void (*on_end)(void *ud, const json_t *result), void *ud,
                        void (*ud_free)(void *ud))
{
    tstream *s = abx_calloc(1, sizeof *s);
    if (!s) {
        turn_free(t);
        abx_reply_error(r, ABX_E_SERVER_UNAVAILABLE, NULL, "out of memory");
        return;
    }
    s->t = t;
    s->on_end = on_end;
    s->ud = ud;
    s->ud_free = ud_free;
    abx_buf_init(&s->pending, 8 << 20);
    abx_buf_printf(&s->pending, "event: start\ndata: {\"pid\": %d}\n\n", abx_proc_pid(t->p));
    abx_reply_stream(r, "text/event-stream", ts_read, s, ts_free);
}
