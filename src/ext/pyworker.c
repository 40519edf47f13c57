/* pyworker.c — Python op workers: `load: ["python:pkg.mod"]`. The module declares ops
 * with abx_ops's @op decorator (python/abx_ops.py, compiled into abx and written to a
 * private folder next to which the worker runs).
 *
 * Life of a worker:
 *   load (before the registry freezes): the module is imported once by a short-lived
 *     confined process (read-only: the config's and abx_ops's folders and the system
 *     directories; no network) that prints the catalog of its ops and exits; abx
 *     registers them (same registry rules as every op).
 *   start / reload (after the policy is compiled): the serving process starts through
 *     the process manager, confined like every process abx starts, with Landlock roots
 *     = the union of the path roots of every allow statement that mounts one of its ops
 *     (plus the config folder and abx_ops's folder, read-only). A reload recomputes the
 *     roots (a new generation) and restarts an idle worker at once; a busy one is
 *     restarted by the next call (a reload never waits for a call).
 *   python_isolation: per_call: no long-lived process; each call starts its own,
 *     confined to that call's admitting statement, and it ends after the answer.
 *   call: one call at a time per worker (its mutex); the request is one JSON line on
 *     its stdin ({id, op, args, paths, argv, principal, request_id, deadline_ms, limits}),
 *     the answer one JSON line on its stdout ({id, result} | {id, error}); {log} lines
 *     in between go to abx's log. Handlers get the canonical admitted values.
 *   crash: a call in flight answers 502 op.worker_failed; the worker is restarted at
 *     once; only repeated crashes (3 within 30 s) back off (1 s doubling to 30 s).
 * States: STOPPED (proc NULL) → RUNNING (workers_start or a call's restart) → STOPPED
 * (exit seen by a call, kill on timeout/reload/stop). */
#include "ext/pyworker.h"
#include "builtin/exec.h"
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- the serving process ---- */

static void free_list(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        abx_free(v[i]);
    abx_free(v);
}

static bool list_add(char ***v, size_t *n, const char *s)
{
    for (size_t i = 0; i < *n; i++)
        if (strcmp((*v)[i], s) == 0)
            return true;
    char **g = abx_realloc(*v, (*n + 2) * sizeof *g);
    if (!g)
        return false;
    *v = g;
    g[*n] = abx_strdup(s);
    g[*n + 1] = NULL;
    return g[(*n)++] != NULL;
}

/* Stop a channel's process. */
static void chan_stop(chan *c)
{
    if (!c->proc)
        return;
    if (abx_proc_running(c->proc)) {
        abx_proc_kill(c->proc, SIGKILL, false);
        abx_proc_wait(c->proc, abx_now_ms() + 2000, NULL, NULL);
    }
    abx_proc_unref(c->proc);
    c->proc = NULL;
    c->line.len = 0;
}

static void worker_stop(abx_pyworker *w) { chan_stop(&w->ch); }

/* A worker's network: the host's (net), none, or an allowlist behind its own egress
 * proxy (allow: the resolver table, inject rules and the sink its connections go to). */
typedef struct pyw_net {
    bool net;
    const abx_egress_allow *allow;
    const abx_egress_resolver *resolve;
    const abx_egress_injects *inject;
    abx_egress_sink sink; /* taken by the spawn in every case */
} pyw_net;

typedef struct pyw_env {
    char *v[48];
    size_t n;
    bool oom;
} pyw_env;

static void penv_set(void *env, const char *k, const char *v)
{
    pyw_env *e = env;
    char *kv = e->n < 47 ? abx_asprintf("%s=%s", k, v) : NULL;
    if (kv)
        e->v[e->n++] = kv;
    else
        e->oom = true;
}

static void penv_free(pyw_env *e)
{
    for (size_t i = 0; i < e->n; i++)
        abx_free(e->v[i]);
}

/* the proxy variables, and with inject rules the CA (in the worker's TMPDIR); 0 or -1 */
static int egress_env(abx_procs *procs, const pyw_net *pn, const char *tmpdir, pyw_env *env, char *why,
                      size_t whylen)
{
    abx_exec_egress_env(penv_set, env, abx_procs_egress_port(procs));
    if (pn->inject && pn->inject->n) {
        abx_env_pair ca[ABX_EGRESS_CA_ENV];
        char bundle[PATH_MAX], cert[PATH_MAX];
        if (abx_procs_egress_ca_env(procs, tmpdir, bundle, cert, ca, why, whylen) != 0)
            return -1;
        for (size_t i = 0; i < ABX_EGRESS_CA_ENV; i++)
            penv_set(env, ca[i].name, ca[i].value);
    }
    if (env->oom)
        snprintf(why, whylen, "out of memory");
    return env->oom ? -1 : 0;
}

/* Start a process for w on channel c, confined to read roots ro (plus abx_ops's and the
 * config's folders), write roots rw and the masks, read-only paths and pins of view (a
 * call's view; NULL for none), with the network pn (the caller holds w->mu). */
static int chan_spawn_env(abx_pyworker *w, chan *c, char *const *ro_in, size_t n_ro_in, char *const *rw,
                          size_t n_rw, const abx_fs_view *view, pyw_net *pn, pyw_env *env, char *why,
                          size_t whylen);

static int chan_spawn(abx_pyworker *w, chan *c, char *const *ro_in, size_t n_ro_in, char *const *rw, size_t n_rw,
                      const abx_fs_view *view, pyw_net *pn, char *why, size_t whylen)
{
    pyw_env env = {0};
    int rc = chan_spawn_env(w, c, ro_in, n_ro_in, rw, n_rw, view, pn, &env, why, whylen);
    penv_free(&env);
    return rc;
}

static int chan_spawn_env(abx_pyworker *w, chan *c, char *const *ro_in, size_t n_ro_in, char *const *rw,
                          size_t n_rw, const abx_fs_view *view, pyw_net *pn, pyw_env *env, char *why,
                          size_t whylen)
{
    bool egress = pn->allow && !pn->net;
    abx_egress_sink sink = pn->sink;
    why[0] = '\0';
    pn->sink = (abx_egress_sink){0};
    if (!egress && sink.ctx_free)
        sink.ctx_free(sink.ctx);
    abx_procs *procs = w->procs;
    if (!procs) {
        snprintf(why, whylen, "the server is not started");
        return -1;
    }
    char script[128], home[96], tmpdir[128], tmpenv[160];
    snprintf(script, sizeof script, "%s/abx_ops.py", w->ext->pydir);
    snprintf(home, sizeof home, "HOME=%s", w->ext->pydir);
    /* a private TMPDIR (tempfile works), granted read-write to this process only and
     * removed with its record, as for every process abx starts */
    if (abx_procs_make_tmpdir(procs, tmpdir, sizeof tmpdir, why, whylen) != 0) {
        if (egress && sink.ctx_free)
            sink.ctx_free(sink.ctx);
        return -1;
    }
    snprintf(tmpenv, sizeof tmpenv, "TMPDIR=%s", tmpdir);
    char *argv[] = {w->python, "-B", "-I", script, w->module, w->config_dir, NULL};
    static const char *const base[] = {"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8"};
    for (size_t i = 0; i < 2; i++)
        env->v[env->n++] = abx_strdup(base[i]);
    env->v[env->n++] = abx_strdup(home);
    env->v[env->n++] = abx_strdup(tmpenv);
    if (!env->v[0] || !env->v[1] || !env->v[2] || !env->v[3] ||
        (egress && egress_env(procs, pn, tmpdir, env, why, whylen) != 0)) {
        if (!why[0] || !egress)
            snprintf(why, whylen, "out of memory");
        if (egress && sink.ctx_free)
            sink.ctx_free(sink.ctx);
        abx_rm_tree(tmpdir);
        return -1;
    }
    char **envp = env->v;
    char **ro = NULL;
    size_t n_ro = 0;
    bool ok = list_add(&ro, &n_ro, w->ext->pydir) && list_add(&ro, &n_ro, w->config_dir);
    for (size_t i = 0; ok && i < n_ro_in; i++)
        ok = list_add(&ro, &n_ro, ro_in[i]);
    int cwd = open(w->config_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (!ok || cwd < 0) {
        free_list(ro, n_ro);
        if (cwd >= 0)
            close(cwd);
        snprintf(why, whylen, "cannot prepare the worker: %s", ok ? strerror(errno) : "out of memory");
        abx_rm_tree(tmpdir);
        if (egress && sink.ctx_free)
            sink.ctx_free(sink.ctx);
        return -1;
    }
    abx_confine conf = {
        .read_roots = (const char *const *)ro, .n_read = n_ro,
        .write_roots = (const char *const *)rw, .n_write = n_rw,
        .masks = view ? (const char *const *)view->masks : NULL, .n_masks = view ? view->n_masks : 0,
        .readonly = view ? (const char *const *)view->readonly : NULL, .n_readonly = view ? view->n_readonly : 0,
        .pins = view ? (const char *const *)view->pins : NULL, .n_pins = view ? view->n_pins : 0,
        .net = pn->net, .set_ids = true, .required = abx_procs_confine_required(procs),
        .egress_port = egress ? abx_procs_egress_port(procs) : 0,
    };
    int tports[ABX_EGRESS_TPORTS];
    if (egress) { /* transparent mode too (docs/egress.md) */
        conf.n_egress_tports = abx_egress_transparent_ports(pn->allow, conf.egress_port, tports, ABX_EGRESS_TPORTS);
        conf.egress_tports = tports;
        conf.egress_dns = true;
    }
    abx_procs_run_ids(procs, &conf.uid, &conf.gid);
    char tag[160];
    snprintf(tag, sizeof tag, "python worker %s", w->module);
    abx_proc_spec spec = {
        .spawn = {.argv = argv, .envp = envp, .cwd_fd = cwd, .cwd_path = w->config_dir, .confine = &conf,
                  .tmpdir = tmpdir},
        .owner = "abx:worker",
        .tag = tag,
        .keep_stdin = true,
        .egress_allow = egress ? pn->allow : NULL,
        .egress_resolve = egress ? pn->resolve : NULL,
        .egress_sink = egress ? sink : (abx_egress_sink){0},
        .egress_inject = egress ? pn->inject : NULL,
    };
    c->proc = abx_proc_start(procs, &spec, why, whylen);
    if (c->proc)
        abx_proc_set_tmpdir(c->proc, tmpdir);
    else
        abx_rm_tree(tmpdir);
    close(cwd);
    free_list(ro, n_ro);
    c->out_off = c->err_off = 0;
    c->line.len = 0;
    return c->proc ? 0 : -1;
}

/* a shared worker's egress: recorded in the log (it serves many calls, none owns it) */
static void log_egress(const abx_egress_record *rec, void *ctx)
{
    abx_log(rec->allowed ? "info" : "warn", NULL, "python:%s: egress %s %s:%d %s%s%s", (const char *)ctx, rec->proto,
            rec->host, rec->port, rec->allowed ? "allow" : "deny", rec->reason && rec->reason[0] ? ": " : "",
            rec->reason ? rec->reason : "");
}

static int worker_spawn(abx_pyworker *w, char *why, size_t whylen)
{
    pthread_mutex_lock(&w->roots_mu);
    w->ch_gen = w->roots_gen;
    pyw_net pn = {.net = w->net, .allow = w->allow, .resolve = w->resolve};
    if (w->allow && !w->net) /* no call to record under: the log keeps each connection */
        pn.sink = (abx_egress_sink){.fn = log_egress, .ctx = w->module};
    int rc = chan_spawn(w, &w->ch, w->ro, w->n_ro, w->rw, w->n_rw, NULL, &pn, why, whylen);
    pthread_mutex_unlock(&w->roots_mu);
    return rc;
}

enum { LINE_OK, LINE_EXITED, LINE_TIMEOUT, LINE_CANCELLED, LINE_TOO_LONG };

/* Drain the worker's stderr into the log (handlers' print() and tracebacks). */
static void drain_stderr(abx_pyworker *w, chan *c, const char *request_id)
{
    for (;;) {
        char *data = NULL;
        uint64_t start, total;
        bool dropped;
        size_t n = abx_proc_read(c->proc, ABX_STDERR, c->err_off, 16384, &data, &start, &dropped, &total);
        if (n)
            abx_log("info", request_id, "python:%s: %.*s", w->module,
                    (int)(n && data[n - 1] == '\n' ? n - 1 : n), data);
        abx_free(data);
        c->err_off = start + n;
        if (n == 0)
            return;
    }
}

/* The next stdout line (owned), waiting until deadline_ms. */
static int read_line(abx_pyworker *w, chan *c, int64_t deadline_ms, abx_ctx *ctx, char **out)
{
    *out = NULL;
    for (;;) {
        char *nl = c->line.len ? memchr(c->line.data, '\n', c->line.len) : NULL;
        if (nl) {
            size_t n = (size_t)(nl - c->line.data);
            *out = abx_strndup(c->line.data, n);
            memmove(c->line.data, nl + 1, c->line.len - n - 1);
            c->line.len -= n + 1;
            return LINE_OK;
        }
        char *data = NULL;
        uint64_t start, total;
        bool dropped;
        size_t n = abx_proc_read(c->proc, ABX_STDOUT, c->out_off, 65536, &data, &start, &dropped, &total);
        if (dropped) {
            abx_free(data);
            return LINE_TOO_LONG;
        }
        if (n) {
            bool fits = abx_buf_append(&c->line, data, n);
            abx_free(data);
            c->out_off = start + n;
            if (!fits || c->line.failed)
                return LINE_TOO_LONG;
            continue;
        }
        abx_free(data);
        drain_stderr(w, c, ctx ? abx_ctx_request_id(ctx) : NULL);
        if (!abx_proc_running(c->proc)) {
            /* exited: what it wrote before is in the ring; one more read, then stop */
            n = abx_proc_read(c->proc, ABX_STDOUT, c->out_off, 65536, &data, &start, &dropped, &total);
            if (n) {
                abx_buf_append(&c->line, data, n);
                c->out_off = start + n;
                abx_free(data);
                continue;
            }
            abx_free(data);
            return LINE_EXITED;
        }
        int64_t now = abx_now_ms();
        if (now >= deadline_ms)
            return LINE_TIMEOUT;
        if (ctx && abx_ctx_cancelled(ctx))
            return LINE_CANCELLED;
        abx_proc_wait_output(c->proc, c->out_off, c->err_off, now + 200 < deadline_ms ? now + 200 : deadline_ms);
    }
}

/* After a start: the first line is the catalog (or a fatal error). */
static int await_ready(abx_pyworker *w, chan *c, char *why, size_t whylen)
{
    char *line = NULL;
    int st = read_line(w, c, abx_now_ms() + DISCOVER_TIMEOUT_MS, NULL, &line);
    json_t *j = line ? json_loads(line, 0, NULL) : NULL;
    abx_free(line);
    int rc = 0;
    if (st != LINE_OK || !json_is_array(json_object_get(j, "catalog"))) {
        const char *fatal = json_string_value(json_object_get(j, "fatal"));
        snprintf(why, whylen, "the worker for python:%s did not start: %s", w->module,
                 fatal ? fatal : st == LINE_EXITED ? "it exited (see the log for its stderr)" : "no catalog line");
        drain_stderr(w, c, NULL);
        chan_stop(c);
        rc = -1;
    }
    json_decref(j);
    return rc;
}

static int worker_restart(abx_pyworker *w, char *why, size_t whylen)
{
    worker_stop(w);
    if (worker_spawn(w, why, whylen) != 0)
        return -1;
    return await_ready(w, &w->ch, why, whylen);
}

/* Record a crash; decide whether to restart now or wait (repeated crashes). */
static void note_crash(abx_pyworker *w)
{
    int64_t now = abx_now_ms();
    w->crashes[w->n_crashes++ % CRASH_BURST] = now;
    size_t recent = 0;
    for (size_t i = 0; i < CRASH_BURST && i < w->n_crashes; i++)
        recent += now - w->crashes[i] < CRASH_WINDOW_MS;
    if (recent >= CRASH_BURST) {
        w->backoff_ms = w->backoff_ms ? (w->backoff_ms * 2 > 30000 ? 30000 : w->backoff_ms * 2) : 1000;
        w->backoff_until_ms = now + w->backoff_ms;
    } else {
        w->backoff_ms = 0;
        w->backoff_until_ms = 0;
    }
}

/* Compute the union of the roots of the statements mounting any of w's ops under p,
 * and install it (a new generation) when it differs. */
static int compute_roots(abx_pyworker *w, const abx_registry *reg, const abx_policy *p)
{
    char **ro = NULL, **rw = NULL;
    size_t n_ro = 0, n_rw = 0;
    bool net = false;
    abx_egress_allow *allow = NULL;
    bool *seen = abx_calloc(p->n_allow + 1, sizeof *seen);
    if (!seen)
        return -1;
    for (size_t k = 0; k < w->n_ops; k++) {
        const abx_op *op = abx_registry_get(reg, w->op_ids[k]);
        if (!op)
            continue;
        size_t oi = abx_registry_index_of(reg, op);
        for (size_t slot = 0; slot <= p->n_principals; slot++) {
            size_t base = slot * p->n_ops + oi;
            for (uint32_t m = 0; m < p->mount_cnt[base]; m++)
                seen[p->mount_stmts[p->mount_off[base] + m]] = true;
        }
    }
    bool ok = true;
    for (size_t i = 0; i < p->n_allow && ok; i++) {
        if (!seen[i])
            continue;
        const abx_stmt *st = &p->allow[i];
        for (int a = 0; a < ABX_ACC_IDX__N && ok; a++)
            for (size_t j = 0; j < st->n_paths[a] && ok; j++)
                ok = a == ABX_ACC_IDX_READ ? list_add(&ro, &n_ro, p->roots[st->paths[a][j].root])
                                           : list_add(&rw, &n_rw, p->roots[st->paths[a][j].root]);
        if (st->has_net && st->net)
            net = true;
        for (size_t j = 0; ok && st->net_allow && j < st->net_allow->n; j++) {
            char e2[200];
            ok = (allow || (allow = abx_calloc(1, sizeof *allow))) &&
                 abx_egress_allow_add(allow, st->net_allow->rules[j].text, e2, sizeof e2) == 0;
        }
    }
    abx_free(seen);
    if (net && allow) { /* a statement with the host network: that wins, as before */
        abx_egress_allow_free(allow);
        abx_free(allow);
        allow = NULL;
    }
    if (!ok) {
        free_list(ro, n_ro);
        free_list(rw, n_rw);
        if (allow)
            abx_egress_allow_free(allow);
        abx_free(allow);
        return -1;
    }
    pthread_mutex_lock(&w->roots_mu);
    abx_egress_allow *old_allow = w->allow;
    w->allow = allow;
    w->resolve = &p->egress_resolve;
    char **old_ro = w->ro, **old_rw = w->rw;
    size_t old_n_ro = w->n_ro, old_n_rw = w->n_rw;
    w->ro = ro;
    w->rw = rw;
    w->n_ro = n_ro;
    w->n_rw = n_rw;
    w->net = net;
    w->roots_gen++;
    pthread_mutex_unlock(&w->roots_mu);
    free_list(old_ro, old_n_ro);
    free_list(old_rw, old_n_rw);
    if (old_allow)
        abx_egress_allow_free(old_allow);
    abx_free(old_allow);
    return 0;
}

static void log_started(abx_pyworker *w)
{
    pthread_mutex_lock(&w->roots_mu);
    abx_log("info", NULL, "python:%s: worker started (pid %d; %zu read and %zu write roots%s)", w->module,
            abx_proc_pid(w->ch.proc), w->n_ro, w->n_rw, w->net ? ", network" : w->allow ? ", egress allowlist" : "");
    pthread_mutex_unlock(&w->roots_mu);
}

/* At start: start every worker (an error fails the start). At reload: install the new
 * roots and restart idle workers now; a worker busy with a call is restarted by the next
 * call (a reload never waits for a call to finish). */
int abx_ext_workers_start(abx_ext *e, abx_procs *procs, const abx_registry *reg, const struct abx_policy *p,
                          char *err, size_t errlen)
{
    int rc = 0;
    for (size_t i = 0; e && i < e->n_workers && rc == 0; i++) {
        abx_pyworker *w = e->workers[i];
        if (w->per_call) { /* a process per call, confined to that call's statement */
            pthread_mutex_lock(&w->mu);
            w->procs = procs;
            pthread_mutex_unlock(&w->mu);
            continue;
        }
        bool first = !w->procs;
        if (compute_roots(w, reg, p) != 0) {
            snprintf(err, errlen, "out of memory");
            rc = -1;
            break;
        }
        if (first)
            pthread_mutex_lock(&w->mu);
        else if (pthread_mutex_trylock(&w->mu) != 0)
            continue; /* busy: py_call sees the new generation and restarts */
        w->procs = procs;
        if (worker_restart(w, err, errlen) != 0) {
            rc = -1;
        } else {
            w->n_crashes = 0;
            w->backoff_ms = w->backoff_until_ms = 0;
            log_started(w);
        }
        pthread_mutex_unlock(&w->mu);
    }
    return rc;
}

void abx_ext_workers_stop(abx_ext *e)
{
    for (size_t i = 0; e && i < e->n_workers; i++) {
        pthread_mutex_lock(&e->workers[i]->mu);
        worker_stop(e->workers[i]);
        pthread_mutex_unlock(&e->workers[i]->mu);
    }
}

void abx__pyworker_free(abx_pyworker *w)
{
    if (!w)
        return;
    worker_stop(w);
    abx_buf_release(&w->ch.line);
    free_list(w->ro, w->n_ro);
    free_list(w->rw, w->n_rw);
    if (w->allow)
        abx_egress_allow_free(w->allow);
    abx_free(w->allow);
    pthread_mutex_destroy(&w->roots_mu);
    abx_free(w->op_ids);
    abx_free(w->module);
    abx_free(w->python);
    abx_free(w->config_dir);
    pthread_mutex_destroy(&w->mu);
    abx_free(w);
}

/* ---- a call ---- */

static json_t *request_line(abx_pyworker *w, abx_ctx *ctx, const json_t *args, uint64_t id, int64_t deadline)
{
    const abx_decision *d = abx_ctx_decision(ctx);
    json_t *paths = json_object();
    for (size_t i = 0; i < d->n_paths; i++) {
        const abx_path_value *pv = &d->paths[i];
        const abx_param *pa = abx_op_param(abx_ctx_op(ctx), pv->param);
        if (pa->type == ABX_T_LIST) {
            json_t *arr = json_object_get(paths, pv->param);
            if (!arr)
                json_object_set_new(paths, pv->param, arr = json_array());
            json_array_append_new(arr, json_string(pv->canonical));
        } else {
            json_object_set_new(paths, pv->param, json_string(pv->canonical));
        }
    }
    json_t *argv = json_array();
    size_t n;
    char *const *av = abx_ctx_argv(ctx, &n);
    for (size_t i = 0; i < n; i++)
        json_array_append_new(argv, json_string(av[i]));
    json_t *limits = json_object();
    for (int b = 0; b < ABX_LIM__COUNT; b++)
        if (d->limits[b] >= 0)
            json_object_set_new(limits, abx_limit_name((enum abx_limit)(1u << b)), json_integer(d->limits[b]));
    (void)w;
    return json_pack("{s:I, s:s, s:O, s:o, s:o, s:s, s:s?, s:I, s:o}", "id", (json_int_t)id, "op", abx_ctx_op_id(ctx), "args",
                     args, "paths", paths, "argv", argv, "request_id", abx_ctx_request_id(ctx), "principal", abx_ctx_principal(ctx),
                     "deadline_ms", (json_int_t)deadline, "limits", limits);
}

/* A crash of the shared worker: note it, restart at once unless it keeps crashing. */
static abx_err worker_failed(abx_pyworker *w, abx_ctx *ctx, abx_reply *r, const char *what)
{
    if (!w->per_call) {
        note_crash(w);
        char why[300] = "";
        if (!w->backoff_until_ms && worker_restart(w, why, sizeof why) != 0)
            abx_ctx_log(ctx, "error", "python:%s: restart failed: %s", w->module, why);
        else if (w->backoff_until_ms)
            abx_ctx_log(ctx, "warn", "python:%s: crashed %d times in %d s; next restart in %lld ms", w->module,
                        CRASH_BURST, CRASH_WINDOW_MS / 1000, (long long)w->backoff_ms);
    }
    return abx_reply_error(r, ABX_E_OP_WORKER_FAILED, NULL, "the worker for python:%s %s", w->module, what);
}

/* Send one call on c and read its answer into r. */
static abx_err exchange(abx_pyworker *w, chan *c, abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    int64_t deadline = abx_ctx_deadline_ms(ctx);
    if (deadline <= 0)
        deadline = abx_now_ms() + CALL_DEFAULT_TIMEOUT_MS;
    uint64_t id = atomic_fetch_add(&w->next_id, 1) + 1;
    json_t *req = request_line(w, ctx, args, id, deadline);
    char *text = req ? json_dumps(req, JSON_COMPACT) : NULL;
    json_decref(req);
    if (!text)
        return abx_reply_error(r, ABX_E_SERVER_UNAVAILABLE, NULL, "out of memory");
    size_t len = strlen(text);
    abx_buf msg;
    abx_buf_init(&msg, len + 2);
    abx_buf_append(&msg, text, len);
    abx_buf_putc(&msg, '\n');
    free(text);
    /* per call: stdin ends after the one request, so the process exits after answering */
    long wrote = abx_proc_write_stdin(c->proc, msg.data, msg.len, w->per_call, deadline);
    bool sent = wrote == (long)msg.len;
    abx_buf_release(&msg);
    if (!sent)
        return worker_failed(w, ctx, r, "could not be sent the call (it exited)");
    for (;;) {
        char *line = NULL;
        int st = read_line(w, c, deadline, ctx, &line);
        if (st != LINE_OK) {
            abx_free(line);
            if (st == LINE_EXITED)
                return worker_failed(w, ctx, r, "exited during the call");
            if (st == LINE_TOO_LONG)
                return worker_failed(w, ctx, r, "answered more than 1 MiB at once");
            if (st == LINE_TIMEOUT)
                return worker_failed(w, ctx, r, "did not answer before the call's deadline");
            return worker_failed(w, ctx, r, "was interrupted: the caller went away");
        }
        json_t *j = json_loads(line, 0, NULL);
        abx_free(line);
        const json_t *log = json_object_get(j, "log");
        if (log) {
            const char *lv = json_string_value(json_object_get(log, "level"));
            const char *lm = json_string_value(json_object_get(log, "message"));
            abx_ctx_log(ctx, lv ? lv : "info", "%s", lm ? lm : "");
            json_decref(j);
            continue;
        }
        if (json_object_get(j, "catalog")) { /* the greeting of a fresh process */
            json_decref(j);
            continue;
        }
        if (!j || json_integer_value(json_object_get(j, "id")) != (json_int_t)id) {
            json_decref(j);
            continue; /* not this call's answer: skip */
        }
        abx_err rc = ABX_OK;
        const json_t *err = json_object_get(j, "error");
        if (err) {
            const char *code = json_string_value(json_object_get(err, "code"));
            const char *m = json_string_value(json_object_get(err, "message"));
            const char *trace = json_string_value(json_object_get(err, "trace"));
            int e = code ? abx_err_by_code(code) : -1;
            if (e <= 0 || e == ABX_E_SERVER_INTERNAL) {
                abx_ctx_log(ctx, "error", "python:%s: %s: %s%s%s", w->module, code ? code : "?", m ? m : "",
                            trace ? "\n" : "", trace ? trace : "");
                rc = abx_reply_error(r, ABX_E_SERVER_INTERNAL, NULL, "%s", m ? m : "handler failed");
            } else {
                const json_t *det = json_object_get(err, "details");
                json_t *details = json_is_object(det) && json_object_size(det) ? json_incref((json_t *)det) : NULL;
                rc = abx_reply_error(r, (abx_err)e, details, "%s", m ? m : abx_err_meaning((abx_err)e));
            }
        } else {
            json_t *res = json_object_get(j, "result");
            abx_reply_json(r, res ? json_incref(res) : json_null());
        }
        json_decref(j);
        return rc;
    }
}

/* python_isolation: per_call — a fresh process confined to this call's own view (the
 * admitting statement's roots, deny masks), which ends after the one answer. */
static abx_err call_per_process(abx_pyworker *w, abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    abx_fs_view v;
    int vrc = abx_ctx_fs_view(ctx, &v);
    if (vrc == -2) { /* a denied file moved where its mask cannot follow: do not run unmasked */
        abx_err e = abx_reply_error(r, ABX_E_POLICY_PATH_DENIED, NULL,
                                    "the denied path %s was moved or replaced outside abx and its file cannot be found",
                                    v.moved);
        abx_fs_view_release(&v);
        return e;
    }
    if (vrc != 0)
        return abx_reply_error(r, ABX_E_SERVER_UNAVAILABLE, NULL, "out of memory");
    chan c = {0};
    abx_buf_init(&c.line, LINE_MAX_BYTES);
    char why[300];
    abx_err rc;
    pthread_mutex_lock(&w->mu); /* the process manager pointer */
    abx_procs *procs = w->procs;
    pthread_mutex_unlock(&w->mu);
    const abx_decision *d = abx_ctx_decision(ctx);
    pyw_net pn = {.net = d->net, .allow = d->net_allow, .resolve = d->net_resolve, .inject = d->net_inject};
    if (d->net_allow && !d->net)
        pn.sink = abx_exec_egress_sink(ctx);
    if (d->net_allow && !d->net && !pn.sink.fn) /* a read-only call has no ledger group yet */
        pn.sink = (abx_egress_sink){.fn = log_egress, .ctx = w->module};
    why[0] = '\0';
    if (!procs || chan_spawn(w, &c, v.ro, v.n_ro, v.rw, v.n_rw, &v, &pn, why, sizeof why) != 0) {
        abx_ctx_log(ctx, "error", "python:%s: %s", w->module, procs ? why : "not started");
        rc = abx_reply_error(r, ABX_E_OP_WORKER_FAILED, NULL, "the worker for python:%s cannot be started", w->module);
    } else {
        rc = exchange(w, &c, ctx, args, r);
        drain_stderr(w, &c, abx_ctx_request_id(ctx));
    }
    chan_stop(&c);
    abx_buf_release(&c.line);
    abx_fs_view_release(&v);
    return rc;
}

abx_err abx__py_call(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    abx_pyworker *w = abx_ctx_udata(ctx);
    if (w->per_call)
        return call_per_process(w, ctx, args, r);
    pthread_mutex_lock(&w->mu);
    abx_err rc;
    char why[300];
    pthread_mutex_lock(&w->roots_mu);
    bool stale = w->ch_gen != w->roots_gen; /* a reload changed the roots while it was busy */
    pthread_mutex_unlock(&w->roots_mu);
    if (stale && w->ch.proc && abx_proc_running(w->ch.proc)) {
        if (worker_restart(w, why, sizeof why) != 0) {
            abx_ctx_log(ctx, "error", "%s", why);
            rc = abx_reply_error(r, ABX_E_OP_WORKER_FAILED, NULL, "the worker for python:%s cannot be started",
                                 w->module);
            goto out;
        }
        log_started(w);
    }
    if (!w->ch.proc || !abx_proc_running(w->ch.proc)) {
        int64_t now = abx_now_ms();
        if (w->backoff_until_ms > now) {
            rc = abx_reply_error(r, ABX_E_OP_WORKER_FAILED, NULL,
                                 "the worker for python:%s keeps crashing; it restarts in %lld ms", w->module,
                                 (long long)(w->backoff_until_ms - now));
            goto out;
        }
        if (w->ch.proc) /* it died between calls */
            note_crash(w);
        if (worker_restart(w, why, sizeof why) != 0) {
            abx_ctx_log(ctx, "error", "%s", why);
            rc = abx_reply_error(r, ABX_E_OP_WORKER_FAILED, NULL, "the worker for python:%s cannot be started",
                                 w->module);
            goto out;
        }
    }
    rc = exchange(w, &w->ch, ctx, args, r);
out:
    pthread_mutex_unlock(&w->mu);
    return rc;
}
