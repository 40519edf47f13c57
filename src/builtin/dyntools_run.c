/* dyntools_run.c — a dynamic tool's code runs here: never inside abx, always in a fresh
 * Python process confined like commands.run (Landlock, namespaces, seccomp, cgroup,
 * run_as), with confinement required whatever the config says (fail closed: 503
 * sandbox.unavailable). Its roots are the intersection of the call's own view (the
 * admitting statement: the author's, or the caller's for a promoted tool) and the
 * definition's declared paths; write roots only with the effect write; the network only
 * when the definition says net (effect net) and the statement grants it.
 *
 * Protocol on the pipes: abx writes one line {code, args} or {code, tests}; the process
 * answers {result} | {error} | {tests}, and in between may ask {host: {op, args}}, which
 * abx runs through the whole pipeline as the principal it was given (door "kernel", as
 * kernels' host.* calls) and answers with one line {status, body}. */
#include "builtin/dyntools.h"
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char runner_py[] =
    "import json, sys, traceback\n"
    "_in = sys.stdin\n"
    "_out = sys.stdout\n"
    "def _send(o):\n"
    "    _out.write(json.dumps(o) + '\\n'); _out.flush()\n"
    "class HostError(Exception):\n"
    "    pass\n"
    "class _Host:\n"
    "    def call(self, op, args=None, /, **kw):\n"
    "        _send({'host': {'op': op, 'args': dict(args or {}, **kw)}})\n"
    "        line = _in.readline()\n"
    "        if not line:\n"
    "            raise HostError('abx went away')\n"
    "        r = json.loads(line)\n"
    "        if r.get('status', 500) >= 300:\n"
    "            e = (r.get('body') or {}).get('error') or {}\n"
    "            raise HostError('%s: %s' % (e.get('code'), e.get('message')))\n"
    "        return r.get('body')\n"
    "def _why(e):\n"
    "    return '%s: %s' % (type(e).__name__, e)\n"
    "def main():\n"
    "    req = json.loads(_in.readline())\n"
    "    sys.stdout = sys.stderr\n"
    "    g = {'__name__': 'abx_dyn', 'host': _Host(), 'HostError': HostError}\n"
    "    try:\n"
    "        exec(compile(req['code'], '<tool>', 'exec'), g)\n"
    "        fn = g.get('run')\n"
    "        if not callable(fn):\n"
    "            raise TypeError('the code must define run(**args)')\n"
    "    except Exception as e:\n"
    "        _send({'error': {'message': _why(e), 'trace': traceback.format_exc()[-4000:]}}); return\n"
    "    if 'tests' in req:\n"
    "        out = []\n"
    "        for i, t in enumerate(req['tests']):\n"
    "            try:\n"
    "                got = json.loads(json.dumps(fn(**t['args'])))\n"
    "                out.append({'index': i, 'ok': got == t['expect'], 'got': got})\n"
    "            except Exception as e:\n"
    "                out.append({'index': i, 'ok': False, 'error': _why(e)})\n"
    "        _send({'tests': out})\n"
    "        return\n"
    "    try:\n"
    "        _send({'result': json.loads(json.dumps(fn(**req['args'])))})\n"
    "    except Exception as e:\n"
    "        _send({'error': {'message': _why(e), 'trace': traceback.format_exc()[-4000:]}})\n"
    "main()\n";

typedef struct rootset {
    char **v;
    size_t n;
} rootset;

static void roots_add(abx_arena *a, rootset *s, const char *p)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->v[i], p) == 0)
            return;
    char **g = abx_arena_alloc(a, (s->n + 2) * sizeof *g);
    if (!g)
        return;
    if (s->n)
        memcpy(g, s->v, s->n * sizeof *g);
    g[s->n++] = abx_arena_strdup(a, p);
    s->v = g;
}

static bool under(const char *p, const char *root)
{
    size_t n = strlen(root);
    return strncmp(p, root, n) == 0 && (p[n] == '\0' || p[n] == '/' || (n == 1 && root[0] == '/'));
}

/* The definition's roots intersected with the view's: for each pair, the deeper one
 * when one holds the other. */
static void intersect(abx_arena *a, rootset *out, const char *const *mine, size_t n_mine, char *const *view,
                      size_t n_view)
{
    for (size_t i = 0; i < n_mine; i++)
        for (size_t j = 0; j < n_view; j++) {
            if (under(mine[i], view[j]))
                roots_add(a, out, mine[i]);
            else if (under(view[j], mine[i]))
                roots_add(a, out, view[j]);
        }
}

typedef struct run {
    abx_ctx *ctx;
    abx_proc *proc;
    uint64_t out_off, err_off;
    abx_buf line;
    const char *as;
    int64_t deadline;
} run;

enum { GOT_LINE, GOT_EXIT, GOT_TIMEOUT, GOT_TOO_LONG };

static void drain_err(run *x)
{
    for (;;) {
        char *data = NULL;
        uint64_t start, total;
        bool dropped;
        size_t n = abx_proc_read(x->proc, ABX_STDERR, x->err_off, 16384, &data, &start, &dropped, &total);
        if (n)
            abx_ctx_log(x->ctx, "info", "dyn tool: %.*s", (int)(data[n - 1] == '\n' ? n - 1 : n), data);
        abx_free(data);
        x->err_off = start + n;
        if (!n)
            return;
    }
}

static int next_line(run *x, char **out)
{
    *out = NULL;
    for (;;) {
        char *nl = x->line.len ? memchr(x->line.data, '\n', x->line.len) : NULL;
        if (nl) {
            size_t n = (size_t)(nl - x->line.data);
            *out = abx_strndup(x->line.data, n);
            memmove(x->line.data, nl + 1, x->line.len - n - 1);
            x->line.len -= n + 1;
            return GOT_LINE;
        }
        char *data = NULL;
        uint64_t start, total;
        bool dropped;
        bool was_running = abx_proc_running(x->proc);
        size_t n = abx_proc_read(x->proc, ABX_STDOUT, x->out_off, 65536, &data, &start, &dropped, &total);
        if (dropped) {
            abx_free(data);
            return GOT_TOO_LONG;
        }
        if (n) {
            abx_buf_append(&x->line, data, n);
            abx_free(data);
            x->out_off = start + n;
            if (x->line.failed)
                return GOT_TOO_LONG;
            continue;
        }
        abx_free(data);
        drain_err(x);
        if (!was_running)
            return GOT_EXIT;
        int64_t now = abx_now_ms();
        if (now >= x->deadline || abx_ctx_cancelled(x->ctx))
            return GOT_TIMEOUT;
        abx_proc_wait_output(x->proc, x->out_off, x->err_off, now + 200 < x->deadline ? now + 200 : x->deadline);
    }
}

static bool send_line(run *x, json_t *j)
{
    char *t = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    if (!t)
        return false;
    size_t n = strlen(t);
    t[n] = '\0';
    bool ok = abx_proc_write_stdin(x->proc, t, n, false, x->deadline) == (long)n &&
              abx_proc_write_stdin(x->proc, "\n", 1, false, x->deadline) == 1;
    free(t);
    return ok;
}

/* A {host: {op, args}} request: the pipeline, as x->as. */
static bool serve_host(run *x, const json_t *h)
{
    const char *op = json_string_value(json_object_get(h, "op"));
    const json_t *args = json_object_get(h, "args");
    json_t *body = NULL;
    int status = 400;
    if (!op)
        body = json_pack("{s:{s:s, s:s}}", "error", "code", "args.invalid", "message", "a host call needs an op");
    else
        status = abx_host_call_kernel(abx_ctx_host(x->ctx), x->as, op, json_is_object(args) ? args : NULL,
                                      abx_ctx_ledger_group(x->ctx), &body);
    return send_line(x, json_pack("{s:i, s:o}", "status", status, "body", body ? body : json_null()));
}

static abx_err converse(run *x, json_t *req, json_t **out, abx_reply *r)
{
    if (!send_line(x, req))
        return abx_reply_error(r, ABX_E_OP_WORKER_FAILED, NULL, "the tool's process exited before its call");
    for (;;) {
        char *line = NULL;
        int st = next_line(x, &line);
        if (st != GOT_LINE) {
            abx_free(line);
            return abx_reply_error(r, ABX_E_OP_WORKER_FAILED, NULL, "the tool's process %s",
                                   st == GOT_EXIT ? "crashed (it exited without an answer)"
                                   : st == GOT_TIMEOUT ? "did not answer before the call's deadline"
                                                       : "answered more than 1 MiB");
        }
        json_t *j = json_loads(line, 0, NULL);
        abx_free(line);
        const json_t *h = json_object_get(j, "host");
        if (h) {
            bool ok = serve_host(x, h);
            json_decref(j);
            if (!ok)
                return abx_reply_error(r, ABX_E_OP_WORKER_FAILED, NULL, "the tool's process went away");
            continue;
        }
        const json_t *err = json_object_get(j, "error");
        if (err) {
            const char *m = json_string_value(json_object_get(err, "message"));
            const char *tr = json_string_value(json_object_get(err, "trace"));
            if (tr)
                abx_ctx_log(x->ctx, "info", "dyn tool raised: %s", tr);
            abx_err e = abx_reply_error(r, ABX_E_TOOLS_RAISED, NULL, "%s", m ? m : "the tool raised an exception");
            json_decref(j);
            return e;
        }
        if (!json_object_get(j, "result") && !json_object_get(j, "tests")) {
            json_decref(j);
            continue; /* not an answer: anything else the code printed on the protocol */
        }
        *out = j;
        return ABX_OK;
    }
}

static abx_err spawn(run *x, const abx_dyndef *def, abx_reply *r)
{
    abx_ctx *ctx = x->ctx;
    abx_fs_view v;
    int vrc = abx_ctx_fs_view(ctx, &v);
    if (vrc != 0) {
        abx_fs_view_release(&v);
        return abx_reply_error(r, vrc == -2 ? ABX_E_POLICY_PATH_DENIED : ABX_E_SERVER_UNAVAILABLE, NULL,
                               vrc == -2 ? "a denied path moved where its mask cannot follow" : "out of memory");
    }
    abx_arena *a = abx_ctx_arena(ctx);
    rootset ro = {0}, rw = {0};
    intersect(a, &ro, def->read, def->n_read, v.ro, v.n_ro);
    intersect(a, &ro, def->read, def->n_read, v.rw, v.n_rw);
    if (def->effects & ABX_EFF_WRITE)
        intersect(a, &rw, def->write, def->n_write, v.rw, v.n_rw);
    abx_procs *procs = abx_ctx_procs(ctx);
    char tmpdir[128], tmpenv[160], home[160], why[400];
    if (abx_procs_make_tmpdir(procs, tmpdir, sizeof tmpdir, why, sizeof why) != 0) {
        abx_fs_view_release(&v);
        return abx_reply_error(r, ABX_E_SERVER_UNAVAILABLE, NULL, "cannot prepare the tool's process: %s", why);
    }
    snprintf(tmpenv, sizeof tmpenv, "TMPDIR=%s", tmpdir);
    snprintf(home, sizeof home, "HOME=%s", tmpdir);
    char *argv[] = {"/usr/bin/python3", "-B", "-I", "-c", (char *)runner_py, NULL};
    char *envp[] = {"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", home, tmpenv, NULL};
    int cwd = open(tmpdir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    abx_confine conf = {
        .read_roots = (const char *const *)ro.v, .n_read = ro.n,
        .write_roots = (const char *const *)rw.v, .n_write = rw.n,
        .masks = (const char *const *)v.masks, .n_masks = v.n_masks,
        .readonly = (const char *const *)v.readonly, .n_readonly = v.n_readonly,
        .pins = (const char *const *)v.pins, .n_pins = v.n_pins,
        .net = def->net && abx_ctx_decision(ctx)->net, .set_ids = true, .required = true,
        .pids_max = 32, .memory_max = 512ll << 20,
    };
    int64_t mem = abx_ctx_limit(ctx, ABX_LIM_MEMORY), pids = abx_ctx_limit(ctx, ABX_LIM_PIDS);
    if (mem > 0 && mem < conf.memory_max) /* the statement's limits narrow the defaults, never widen */
        conf.memory_max = mem;
    if (pids > 0 && pids < conf.pids_max)
        conf.pids_max = pids;
    abx_procs_run_ids(procs, &conf.uid, &conf.gid);
    abx_proc_spec spec = {
        .spawn = {.argv = argv, .envp = envp, .cwd_fd = cwd, .cwd_path = tmpdir, .confine = &conf, .tmpdir = tmpdir},
        .owner = abx_ctx_principal(ctx),
        .tag = def->id,
        .keep_stdin = true,
        .kill_after_ms = x->deadline - abx_now_ms() + 1000,
    };
    x->proc = abx_proc_start(procs, &spec, why, sizeof why);
    if (cwd >= 0)
        close(cwd);
    abx_fs_view_release(&v);
    if (!x->proc) {
        abx_rm_tree(tmpdir);
        bool confine = strstr(why, "confinement required") != NULL;
        abx_ctx_log(ctx, "warn", "dyn tool %s: spawn failed: %s", def->id, why);
        return abx_reply_error(r, confine ? ABX_E_SANDBOX_UNAVAILABLE : ABX_E_OP_WORKER_FAILED, NULL,
                               "cannot start the tool's confined process: %s", why);
    }
    abx_proc_set_tmpdir(x->proc, tmpdir);
    return ABX_OK;
}

abx_err abx__dyn_exec(abx_ctx *ctx, const abx_dyndef *def, const json_t *args, const char *as, json_t **out,
                      abx_reply *r)
{
    *out = NULL;
    int64_t dl = abx_ctx_deadline_ms(ctx);
    int64_t cap = abx_now_ms() + (args ? DYN_CALL_TIMEOUT_MS : DYN_TESTS_TIMEOUT_MS);
    run x = {.ctx = ctx, .as = as, .deadline = dl > 0 && dl < cap ? dl : cap};
    abx_buf_init(&x.line, 1u << 20);
    abx_err e = spawn(&x, def, r);
    if (e == ABX_OK) {
        json_t *req = args ? json_pack("{s:s, s:O}", "code", def->code, "args", args)
                           : json_pack("{s:s, s:O}", "code", def->code, "tests", def->tests);
        e = converse(&x, req, out, r);
        drain_err(&x);
        if (abx_proc_running(x.proc)) {
            abx_proc_kill(x.proc, SIGKILL, false);
            abx_proc_wait(x.proc, abx_now_ms() + 2000, NULL, NULL);
        }
        abx_proc_unref(x.proc);
    }
    abx_buf_release(&x.line);
    return e;
}
