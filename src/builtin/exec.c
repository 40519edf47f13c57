/* exec.c — what commands.*, process.* and terminal.* share: turning an admitted call
 * (canonical argv, cwd, allowlisted env, the chosen statement's roots and limits) into
 * a confined process, and rendering process output for JSON and SSE. No handler
 * builds an argv or an environment any other way. */
#include "builtin/builtin.h"
#include "builtin/exec.h"
#include "sandbox/jail.h"
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct env_builder {
    char **v;
    size_t n;
} env_builder;

static void env_set(env_builder *e, const char *k, const char *val)
{
    size_t kl = strlen(k);
    for (size_t i = 0; i < e->n; i++)
        if (strncmp(e->v[i], k, kl) == 0 && e->v[i][kl] == '=') {
            abx_free(e->v[i]);
            e->v[i] = abx_asprintf("%s=%s", k, val);
            return;
        }
    char **g = abx_realloc(e->v, (e->n + 2) * sizeof *g);
    if (!g)
        return;
    e->v = g;
    e->v[e->n++] = abx_asprintf("%s=%s", k, val);
    e->v[e->n] = NULL;
}

static void env_set_cb(void *e, const char *k, const char *val) { env_set(e, k, val); }

static void env_free(env_builder *e)
{
    for (size_t i = 0; i < e->n; i++)
        abx_free(e->v[i]);
    abx_free(e->v);
}

/* HOME and the places programs derive from it: caches, configs, histories and Python's
 * bytecode stay in the principal's HOME, never in the workspace. */
static void home_env(env_builder *e, const char *home)
{
    static const char *const sub[][2] = {
        {"XDG_CACHE_HOME", ".cache"},         {"XDG_CONFIG_HOME", ".config"},
        {"XDG_DATA_HOME", ".local/share"},    {"XDG_STATE_HOME", ".local/state"},
        {"PYTHONPYCACHEPREFIX", ".cache/pycache"}, {"HISTFILE", ".bash_history"},
    };
    env_set(e, "HOME", home);
    for (size_t i = 0; i < ABX_ARRAY_LEN(sub); i++) {
        char *val = abx_asprintf("%s/%s", home, sub[i][1]);
        if (val)
            env_set(e, sub[i][0], val);
        abx_free(val);
    }
}

/* An execution attempt whose statement needs layers the tier lacks records them in its
 * ledger group before anything starts: "missing" (confine: required, the call is then
 * refused) or "not_enforced" (best_effort, it runs without them). The tier itself is in
 * the group's "admitted" event (dispatch.c). */
static void record_confinement(abx_ctx *ctx, const abx_confine *conf)
{
    abx_ledger *l = abx_ctx_ledger(ctx);
    abx_sandbox *sb = abx_procs_sandbox(abx_ctx_procs(ctx));
    uint64_t group = abx_ctx_ledger_group(ctx);
    if (!l || !group)
        return;
    abx_confine_plan plan;
    if (sb)
        abx_sandbox_plan(sb, conf, &plan);
    if (sb && !plan.missing[0])
        return;
    char at[32];
    abx_iso8601(abx_wall_ms(), at);
    json_t *e = json_pack("{s:s, s:s, s:s, s:s}", "kind", "confinement", "at", at, "mode",
                          conf->required ? "required" : "best_effort", "tier", sb ? plan.tier : "none");
    json_object_set_new(e, conf->required || (sb && plan.masks_unavailable) ? "missing" : "not_enforced",
                        json_string(sb ? plan.missing : "everything (the sandbox could not be built)"));
    json_t *events = json_pack("[o]", e);
    abx_ledger_append(l, group, events, true);
    json_decref(events);
}

/* The working directory: the admitted cwd (opened through the jail), else the session's,
 * else the scope root, else the workspace. An fd (O_PATH) or a negative errno. */
static int open_cwd(abx_ctx *ctx, const abx_exec_opts *o, const abx_fs_view *v, const char *workspace,
                    const char **path)
{
    if (abx_ctx_path(ctx, "cwd")) {
        *path = abx_ctx_path(ctx, "cwd");
        return abx_ctx_open(ctx, "cwd", O_PATH | O_DIRECTORY, 0);
    }
    if (o->cwd) {
        *path = o->cwd;
        return open(o->cwd, O_PATH | O_DIRECTORY | O_CLOEXEC);
    }
    *path = v->cwd_root ? v->cwd_root : workspace;
    return abx_jail_open_root(*path);
}

/* A process behind the egress proxy: the proxy variables, set last so a call cannot point
 * them elsewhere, and with inject rules the CA that intercepts (fails closed without it). */
static bool egress_env(abx_procs *procs, const abx_decision *d, const char *tmpdir, env_builder *env,
                       abx_reply *r, const char *argv0)
{
    abx_exec_egress_env(env_set_cb, env, abx_procs_egress_port(procs));
    if (!d->net_inject || !d->net_inject->n)
        return true;
    abx_env_pair ca[ABX_EGRESS_CA_ENV];
    char why[200], bundle[PATH_MAX], cert[PATH_MAX];
    if (abx_procs_egress_ca_env(procs, tmpdir, bundle, cert, ca, why, sizeof why) != 0) {
        abx_reply_error(r, ABX_E_SANDBOX_UNAVAILABLE, NULL, "cannot start '%s': %s", argv0, why);
        return false;
    }
    for (size_t i = 0; i < ABX_EGRESS_CA_ENV; i++)
        env_set(env, ca[i].name, ca[i].value);
    return true;
}

/* The environment: a small fixed base, the session's, then the call's allowlisted values,
 * then the egress proxy's; nothing of abx's own environment (tokens) leaks in. False with
 * the reply set. */
static bool build_env(abx_procs *procs, const abx_decision *d, const abx_exec_opts *o, const json_t *args,
                      const char *tmpdir, const char *home, env_builder *env, abx_reply *r, const char *argv0)
{
    env_set(env, "PATH", "/usr/local/bin:/usr/bin:/bin");
    env_set(env, "LANG", "C.UTF-8");
    home_env(env, home);
    env_set(env, "TMPDIR", tmpdir);
    if (o->pty)
        env_set(env, "TERM", "xterm-256color");
    const char *k;
    json_t *val;
    json_object_foreach((json_t *)o->base_env, k, val) env_set(env, k, json_string_value(val));
    json_object_foreach(json_object_get(args, "env"), k, val) env_set(env, k, json_string_value(val));
    if (d->net_allow && !d->net && !egress_env(procs, d, tmpdir, env, r, argv0))
        return false;
    if (!env->v) {
        abx_reply_error(r, ABX_E_SERVER_UNAVAILABLE, NULL, "out of memory");
        return false;
    }
    return true;
}

/* The call's file-system view (roots, masks) for the spawn; false with the reply set. */
static bool fs_view(abx_ctx *ctx, abx_fs_view *v, abx_reply *r)
{
    int vrc = abx_ctx_fs_view(ctx, v);
    if (vrc == -2) { /* the mask cannot follow the file: refuse rather than run unmasked */
        abx_reply_error(r, ABX_E_POLICY_PATH_DENIED, NULL,
                        "the denied path %s was moved or replaced outside abx and its file cannot be found; "
                        "restore it or reload the policy",
                        v->moved);
        abx_fs_view_release(v);
        return false;
    }
    if (vrc != 0) {
        abx_reply_error(r, ABX_E_SERVER_UNAVAILABLE, NULL, "out of memory");
        return false;
    }
    return true;
}

/* A private TMPDIR, granted read-write (/tmp itself is not): the caller's, one whose
 * confinement is prepared (sandbox/slots.c; not for a terminal's or a kernel's), or new.
 * 0, or -1 with the reply set. */
static int pick_tmpdir(abx_procs *procs, const abx_exec_opts *o, const abx_confine *conf, const char *home,
                       char *tmpdir, size_t len, abx_slot **slot, abx_reply *r)
{
    char why[300];
    if (o->tmpdir) {
        snprintf(tmpdir, len, "%s", o->tmpdir);
        return 0;
    }
    if (!o->pty && !o->n_keep_fds && (*slot = abx_procs_slot_take(procs, conf, home, tmpdir, len)) != NULL)
        return 0;
    if (abx_procs_make_tmpdir(procs, tmpdir, len, why, sizeof why) == 0)
        return 0;
    abx_reply_error(r, ABX_E_PROCESS_SPAWN_FAILED, NULL, "%s", why);
    return -1;
}

abx_proc *abx_exec_start(abx_ctx *ctx, const json_t *args, const abx_exec_opts *o, abx_reply *r)
{
    abx_procs *procs = abx_ctx_procs(ctx);
    abx_server_facts s;
    abx_ctx_server_facts(ctx, &s);
    const abx_decision *d = abx_ctx_decision(ctx);
    abx_fs_view v;
    abx_proc *p = NULL;
    int cwd_fd = -1;
    const char *cwd_path = NULL;
    env_builder env = {0};
    char tmpdir[128] = "";
    char *const *argv = o->argv ? o->argv : (char *const *)d->argv.v;
    if (!argv || !argv[0]) {
        abx_reply_error(r, ABX_E_SERVER_INTERNAL, NULL, "no admitted argv");
        return NULL;
    }
    if (!fs_view(ctx, &v, r))
        return NULL;
    cwd_fd = open_cwd(ctx, o, &v, s.workspace, &cwd_path);
    if (cwd_fd < 0) {
        abx_reply_error(r, cwd_fd == -ENOTDIR ? ABX_E_FILES_NOT_A_DIRECTORY : abx_err_from_errno(-cwd_fd), NULL,
                        "the working directory cannot be opened: %s", strerror(-cwd_fd < 0 ? errno : -cwd_fd));
        goto out;
    }
    /* the principal's private HOME (homes.c), outside the workspace */
    char why[300], home[512];
    if (abx_procs_home(procs, abx_ctx_principal(ctx), home, sizeof home, why, sizeof why) != 0) {
        abx_reply_error(r, ABX_E_PROCESS_SPAWN_FAILED, NULL, "%s", why);
        goto out;
    }
    int64_t mem = d->limits[__builtin_ctz(ABX_LIM_MEMORY)], pids = d->limits[__builtin_ctz(ABX_LIM_PIDS)],
            cpu = d->limits[__builtin_ctz(ABX_LIM_CPU)], life = d->limits[__builtin_ctz(ABX_LIM_TIMEOUT)];
    const char **ro = abx_calloc(v.n_ro + 2, sizeof *ro); /* the view's, and o->extra_ro */
    if (!ro) {
        abx_reply_error(r, ABX_E_SERVER_UNAVAILABLE, NULL, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < v.n_ro; i++)
        ro[i] = v.ro[i];
    if (o->extra_ro)
        ro[v.n_ro] = o->extra_ro;
    abx_confine conf = {
        .read_roots = ro, .n_read = v.n_ro + (o->extra_ro ? 1 : 0),
        .write_roots = (const char *const *)v.rw, .n_write = v.n_rw,
        .masks = (const char *const *)v.masks, .n_masks = v.n_masks,
        .readonly = (const char *const *)v.readonly, .n_readonly = v.n_readonly,
        .pins = (const char *const *)v.pins, .n_pins = v.n_pins,
        .net = d->net, .pids_max = pids, .memory_max = mem, .cpu_milli = cpu,
        .set_ids = true, .required = abx_procs_confine_required(procs),
        .egress_port = d->net_allow && !d->net ? abx_procs_egress_port(procs) : 0,
    };
    int tports[ABX_EGRESS_TPORTS];
    if (conf.egress_port) { /* transparent mode: the resolver and listeners on 80, 443, named ports */
        conf.n_egress_tports = abx_egress_transparent_ports(d->net_allow, conf.egress_port, tports, ABX_EGRESS_TPORTS);
        conf.egress_tports = tports;
        conf.egress_dns = true;
    }
    abx_procs_run_ids(procs, &conf.uid, &conf.gid);
    abx_slot *slot = NULL;
    if (pick_tmpdir(procs, o, &conf, home, tmpdir, sizeof tmpdir, &slot, r) != 0) {
        abx_free(ro);
        goto out;
    }
    if (!build_env(procs, d, o, args, tmpdir, home, &env, r, argv[0])) {
        if (slot) { /* the slot keeps its directory */
            abx_sandbox_slot_put(slot);
            tmpdir[0] = '\0';
        }
        abx_free(ro);
        goto out;
    }
    int64_t kill_after = life > 0 && !o->persistent ? life : 0;
    if (o->hard_timeout_ms > 0 && (kill_after == 0 || o->hard_timeout_ms < kill_after))
        kill_after = o->hard_timeout_ms;
    abx_proc_spec spec = {
        .spawn = {.argv = argv, .envp = env.v, .cwd_fd = cwd_fd, .cwd_path = cwd_path, .confine = &conf,
                  .tmpdir = tmpdir, .home = home, .keep_fds = o->keep_fds, .n_keep_fds = o->n_keep_fds,
                  .slot = slot},
        .owner = abx_ctx_principal(ctx),
        .tag = o->tag,
        .kill_after_ms = kill_after,
        .head_bytes = o->head_bytes,
        .keep_stdin = o->keep_stdin,
        .pty = o->pty,
        .cols = o->cols,
        .rows = o->rows,
        .egress_allow = d->net_allow,
        .egress_resolve = d->net_resolve,
        .egress_sink = conf.egress_port ? abx_exec_egress_sink(ctx) : (abx_egress_sink){0},
        .egress_inject = conf.egress_port ? d->net_inject : NULL,
    };
    record_confinement(ctx, &conf);
    p = abx_proc_start(procs, &spec, why, sizeof why);
    abx_free(ro);
    if (!p) {
        if (slot) /* abx_proc_start gave it back: its directory is the slot's */
            tmpdir[0] = '\0';
        bool confine = strstr(why, "confinement required") != NULL;
        abx_reply_error(r, confine ? ABX_E_SANDBOX_UNAVAILABLE : ABX_E_PROCESS_SPAWN_FAILED, NULL,
                        "cannot start '%s': %s", argv[0], why);
        abx_ctx_log(ctx, "warn", "spawn failed: %s", why);
        goto out;
    }
    if (!slot) /* a slot's is emptied when the process is gone */
        abx_proc_set_tmpdir(p, tmpdir);
    tmpdir[0] = '\0'; /* removed when the process record goes */
out:
    if (tmpdir[0] && !o->tmpdir) { /* a caller's TMPDIR stays the caller's */
        abx_rm_tree(tmpdir);
    }
    if (cwd_fd >= 0)
        close(cwd_fd);
    env_free(&env);
    abx_fs_view_release(&v);
    return p;
}

abx_err abx_exec_start_failed(const abx_reply *r)
{
    abx_err e = abx_reply_err(r);
    return e ? e : ABX_E_PROCESS_SPAWN_FAILED;
}

#define RUN_DEFAULT_OUTPUT (1024 * 1024)

static bool ctx_cancelled(void *ud) { return abx_ctx_cancelled(ud); }

abx_err abx_exec_run(abx_ctx *ctx, const json_t *args, const abx_exec_opts *base, int64_t soft, abx_reply *r)
{
    int64_t cap = abx_ctx_limit(ctx, ABX_LIM_MAX_OUTPUT_BYTES);
    if (cap <= 0)
        cap = RUN_DEFAULT_OUTPUT;
    const json_t *stdin_v = json_object_get(args, "stdin");
    abx_exec_opts o = *base;
    o.head_bytes = (size_t)cap;
    o.keep_stdin = stdin_v != NULL;
    int64_t t0 = abx_now_ms();
    abx_proc *p = abx_exec_start(ctx, args, &o, r);
    if (!p)
        return abx_exec_start_failed(r);
    if (stdin_v) {
        const char *data = json_string_value(stdin_v);
        abx_proc_write_stdin(p, data, json_string_length(stdin_v), true, t0 + (soft > 0 ? soft : 30000));
    }
    int64_t deadline = soft > 0 ? t0 + soft : 0;
    int w = abx_proc_wait(p, deadline, ctx_cancelled, ctx);
    if (w < 0) { /* the client went away: the command is cancelled */
        abx_proc_kill(p, SIGKILL, false);
        abx_proc_wait(p, abx_now_ms() + 2000, NULL, NULL);
    }
    json_t *st = abx_proc_json(p);
    json_t *out = json_object();
    json_object_set(out, "status", json_object_get(st, "status"));
    json_object_set(out, "pid", json_object_get(st, "pid"));
    json_object_set(out, "exit_code", json_object_get(st, "exit_code"));
    json_object_set(out, "signal", json_object_get(st, "signal"));
    json_object_set_new(out, "running", json_boolean(w == 0));
    bool trunc_any = false;
    static const char *const names[] = {"stdout", "stderr"};
    for (int i = 0; i < 2; i++) {
        char *data;
        bool trunc;
        size_t n = abx_proc_head(p, (enum abx_stream_id)i, &data, &trunc);
        json_object_set_new(out, names[i], abx_text_json(data ? data : "", n));
        char key[32];
        snprintf(key, sizeof key, "%s_truncated", names[i]);
        json_object_set_new(out, key, json_boolean(trunc));
        trunc_any = trunc_any || trunc;
        abx_free(data);
    }
    json_object_set_new(out, "truncated", json_boolean(trunc_any));
    json_object_set_new(out, "duration_ms", json_integer(abx_now_ms() - t0));
    json_object_set(out, "argv", json_object_get(st, "argv"));
    json_decref(st);
    abx_proc_unref(p);
    abx_reply_json(r, out);
    return ABX_OK;
}


int abx_signal_by_name(const char *name)
{
    const char *n = strncmp(name, "SIG", 3) == 0 ? name + 3 : name;
    for (int s = 1; s < 32; s++) {
        const char *abbrev = sigabbrev_np(s);
        if (abbrev && strcmp(abbrev, n) == 0)
            return s;
    }
    char *end;
    long v = strtol(name, &end, 10);
    return (*name && !*end && v > 0 && v < 65) ? (int)v : -1;
}

/* ---- SSE over a process's output ---- */

typedef struct sse_state {
    abx_proc *proc;             /* one reference */
    uint64_t off[2];
    bool exit_sent, done;
    bool kill_on_close;         /* commands.stream: a client that leaves cancels the command */
    bool base64;                /* data as base64 of the raw bytes (encoding base64), else text */
    abx_buf pending;            /* frame bytes not handed out yet */
} sse_state;

static void frame_output(sse_state *st, int which, const char *data, size_t n, uint64_t start)
{
    json_t *d;
    if (st->base64) {
        size_t bl = 0;
        char *b = abx_base64_encode(data, n, &bl);
        d = json_pack("{s:s%, s:s, s:I}", "data", b ? b : "", b ? bl : 0, "encoding", "base64", "offset",
                      (json_int_t)start);
        free(b);
    } else {
        d = json_pack("{s:o, s:I}", "data", abx_text_json(data, n), "offset", (json_int_t)start);
    }
    char *js = json_dumps(d, JSON_COMPACT);
    json_decref(d);
    st->off[which] = start + n;
    abx_buf_printf(&st->pending, "event: %s\nid: %llu,%llu\ndata: %s\n\n", which ? "stderr" : "stdout",
                   (unsigned long long)st->off[0], (unsigned long long)st->off[1], js ? js : "{}");
    free(js);
}

static long sse_read(void *state, char *buf, size_t max)
{
    sse_state *st = state;
    for (;;) {
        if (st->pending.len) {
            size_t n = st->pending.len < max ? st->pending.len : max;
            memcpy(buf, st->pending.data, n);
            memmove(st->pending.data, st->pending.data + n, st->pending.len - n);
            st->pending.len -= n;
            return (long)n;
        }
        if (st->done)
            return 0;
        bool any = false;
        for (int i = 0; i < 2; i++) {
            char *data;
            uint64_t start, total;
            bool dropped;
            size_t n = abx_proc_read(st->proc, (enum abx_stream_id)i, st->off[i], 32768, &data, &start, &dropped,
                                     &total);
            /* text: a character split by the chunk's end waits for its other bytes (the next
             * frame starts with them) instead of becoming U+FFFD on both sides */
            size_t whole = !st->base64 && n ? abx_utf8_complete_prefix(data, n) : n;
            if (whole)
                n = whole;
            if (dropped) {
                abx_buf_printf(&st->pending, "event: dropped\ndata: {\"stream\": \"%s\", \"from\": %llu, \"to\": %llu}\n\n",
                               i ? "stderr" : "stdout", (unsigned long long)st->off[i], (unsigned long long)start);
                st->off[i] = start;
            }
            if (n) {
                frame_output(st, i, data, n, start);
                any = true;
            }
            abx_free(data);
        }
        if (any || st->pending.len)
            continue;
        if (!abx_proc_running(st->proc)) {
            /* drained after exit: the final event */
            json_t *j = abx_proc_json(st->proc);
            char *js = json_dumps(j, JSON_COMPACT);
            json_decref(j);
            abx_buf_printf(&st->pending, "event: exit\nid: %llu,%llu\ndata: %s\n\n", (unsigned long long)st->off[0],
                           (unsigned long long)st->off[1], js ? js : "{}");
            free(js);
            st->done = true;
            continue;
        }
        if (!abx_proc_wait_output(st->proc, st->off[0], st->off[1], abx_now_ms() + 2000))
            abx_buf_puts(&st->pending, ": keepalive\n\n");
    }
}

static void sse_free(void *state)
{
    sse_state *st = state;
    if (st->kill_on_close && abx_proc_running(st->proc))
        abx_proc_kill(st->proc, SIGKILL, false);
    abx_proc_unref(st->proc);
    abx_buf_release(&st->pending);
    abx_free(st);
}

void abx_exec_reply_sse(abx_reply *r, abx_proc *p, uint64_t out_off, uint64_t err_off, bool kill_on_close, bool base64)
{
    sse_state *st = abx_calloc(1, sizeof *st);
    if (!st) {
        if (kill_on_close)
            abx_proc_kill(p, SIGKILL, false);
        abx_proc_unref(p);
        abx_reply_error(r, ABX_E_SERVER_UNAVAILABLE, NULL, "out of memory");
        return;
    }
    st->proc = p;
    st->off[0] = out_off;
    st->off[1] = err_off;
    st->kill_on_close = kill_on_close;
    st->base64 = base64;
    abx_buf_init(&st->pending, 1 << 20);
    /* the first frame tells the client which process it is watching */
    abx_buf_printf(&st->pending, "event: start\ndata: {\"pid\": %d}\n\n", abx_proc_pid(p));
    abx_reply_stream(r, "text/event-stream", sse_read, st, sse_free);
}

/* "O,E" (our event ids) → offsets */
bool abx_parse_event_id(const char *id, uint64_t *o, uint64_t *e)
{
    unsigned long long a, b;
    char extra;
    if (!id || sscanf(id, "%llu,%llu%c", &a, &b, &extra) != 2)
        return false;
    *o = a;
    *e = b;
    return true;
}
