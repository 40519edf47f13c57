/* kernels.c — the kernels namespace: persistent Python kernels (ipykernel), each its own
 * confined process started through the same path as a command (exec.c: Landlock roots,
 * masks, network namespace, cgroup, run_as), spoken to over the Jupyter protocol
 * (jupyter.c). Cells run FIFO per kernel; host.* calls from a cell come back over the
 * kernel's host channel and enter the pipeline as the kernel's creator (door `kernel`),
 * their ledger groups linked to the cell's call. Executions: kernel_exec.c. */
#include "builtin/exec.h"
#include "builtin/kernels.h"
#include "builtin/kernel_files.h"
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define KERNEL_START_MS 30000

static kstate *state_of(abx_ctx *ctx) { return abx_ctx_ns_state(ctx, &abx_ns_kernels); }

static void *kstate_new(void)
{
    kstate *st = abx_calloc(1, sizeof *st);
    if (st)
        pthread_mutex_init(&st->mu, NULL);
    return st;
}

static void kernel_stop(kernel *k)
{
    if (k->proc) {
        abx_proc_kill(k->proc, SIGKILL, false);
        abx_proc_wait(k->proc, abx_now_ms() + 2000, NULL, NULL);
        abx_proc_unref(k->proc); /* its record removes the private directory */
        k->proc = NULL;
    }
    abx_jconn_free(k->conn);
    k->conn = NULL;
    abx_kmem_disarm(k);
}

void abx_kernel_unref(kstate *st, kernel *k)
{
    pthread_mutex_lock(&st->mu);
    bool last = --k->refs == 0;
    pthread_mutex_unlock(&st->mu);
    if (!last)
        return;
    kernel_stop(k);
    pthread_cond_destroy(&k->cv);
    pthread_mutex_destroy(&k->mu);
    json_decref(k->args);
    abx_free(k->cwd);
    abx_free(k->owner);
    abx_free(k);
}

static void kstate_free(void *p)
{
    kstate *st = p;
    while (st->list) {
        kernel *k = st->list;
        st->list = k->next;
        /* the server freed the process manager first (every kernel is dead by now): drop
         * the record without calling into the manager */
        abx_proc_unref(k->proc);
        k->proc = NULL;
        abx_kernel_unref(st, k);
    }
    pthread_mutex_destroy(&st->mu);
    abx_free(st);
}

/* Unlink kernels idle past limits.kernel_idle (each call of the namespace reaps: no thread). */
static void reap_idle(abx_ctx *ctx, kstate *st)
{
    abx_server_facts f;
    abx_ctx_server_facts(ctx, &f);
    int64_t now = abx_now_ms(), idle_ms = f.kernel_idle_ms > 0 ? f.kernel_idle_ms : 30LL * 60 * 1000;
    kernel *gone = NULL;
    pthread_mutex_lock(&st->mu);
    for (kernel **pp = &st->list; *pp;) {
        kernel *k = *pp;
        pthread_mutex_lock(&k->mu);
        bool idle = k->serving == k->next_ticket && now - k->last_used > idle_ms;
        pthread_mutex_unlock(&k->mu);
        if (idle) {
            *pp = k->next;
            k->next = gone;
            gone = k;
        } else {
            pp = &k->next;
        }
    }
    pthread_mutex_unlock(&st->mu);
    while (gone) {
        kernel *k = gone;
        gone = k->next;
        abx_kernel_unref(st, k);
    }
}

/* The caller's kernel `id` (a reference), or NULL with 404: another principal's kernel is
 * answered exactly like one that does not exist. */
/* Take k off the list (its reference passes to the caller); false when it is not there. */
static bool kernel_unlink(kstate *st, kernel *k)
{
    bool found = false;
    pthread_mutex_lock(&st->mu);
    for (kernel **pp = &st->list; *pp; pp = &(*pp)->next)
        if (*pp == k) {
            *pp = k->next;
            found = true;
            break;
        }
    pthread_mutex_unlock(&st->mu);
    return found;
}

kernel *abx_kernel_find(abx_ctx *ctx, const json_t *args, abx_reply *r, bool unlink)
{
    kstate *st = state_of(ctx);
    reap_idle(ctx, st);
    const char *id = json_string_value(json_object_get(args, "id"));
    kernel *found = NULL;
    pthread_mutex_lock(&st->mu);
    for (kernel **pp = &st->list; *pp; pp = &(*pp)->next)
        if (id && strcmp((*pp)->id, id) == 0 && strcmp((*pp)->owner, abx_ctx_principal(ctx)) == 0) {
            found = *pp;
            if (unlink) /* the list's reference passes to the caller */
                *pp = found->next;
            else
                found->refs++;
            break;
        }
    pthread_mutex_unlock(&st->mu);
    if (!found)
        abx_reply_error(r, ABX_E_KERNEL_NOT_FOUND, NULL, "no kernel %s of this caller", id ? id : "");
    return found;
}

static int write_file(const char *dir, const char *name, const char *text)
{
    char path[160];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0)
        return -1;
    size_t n = strlen(text);
    int rc = write(fd, text, n) == (ssize_t)n ? 0 : -1;
    close(fd);
    return rc;
}

/* Connect and wait until the kernel answers kernel_info on shell AND abx has seen a
 * status on iopub: before that, a subscription may still be joining and a cell's first
 * outputs would be lost. */
static int handshake(kernel *k, char *why, size_t whylen)
{
    if (abx_jconn_connect(k->conn, why, whylen) != 0)
        return -1;
    int64_t deadline = abx_now_ms() + KERNEL_START_MS;
    bool replied = false, status = false;
    while (!(replied && status)) {
        if (!abx_proc_running(k->proc)) {
            snprintf(why, whylen, "the kernel exited while starting");
            return -1;
        }
        if (abx_now_ms() > deadline) {
            snprintf(why, whylen, "no kernel_info_reply within %d s", KERNEL_START_MS / 1000);
            return -1;
        }
        char mid[40];
        if (!replied && abx_jconn_send(k->conn, ABX_J_SHELL, "kernel_info_request", json_object(), mid) != 0) {
            snprintf(why, whylen, "cannot send kernel_info_request");
            return -1;
        }
        int64_t round = abx_now_ms() + 500;
        while (!(replied && status) && abx_now_ms() < round) {
            enum abx_jchan ch;
            abx_jmsg m;
            if (abx_jconn_recv(k->conn, (1u << ABX_J_SHELL) | (1u << ABX_J_IOPUB), 100, &ch, &m) != 1)
                continue;
            if (ch == ABX_J_SHELL && strcmp(m.msg_type, "kernel_info_reply") == 0)
                replied = true;
            if (ch == ABX_J_IOPUB && strcmp(m.msg_type, "status") == 0)
                status = true;
            abx_jmsg_release(&m);
        }
    }
    return 0;
}

/* The language's files in dir and its command line and environment (both owned by the
 * caller: argv[] points into paths). -1 with errno. */
typedef struct kspawn {
    char launch[160], kjson[160], host_ep[160], ipy[160], mpl[160];
    char *argv[12];
    json_t *env;
} kspawn;

static int kernel_files(kernel *k, const char *dir, kspawn *p)
{
    bool r_lang = strcmp(k->language, "r") == 0;
    snprintf(p->kjson, sizeof p->kjson, "%s/kernel.json", dir);
    snprintf(p->launch, sizeof p->launch, "%s/abx_launch.%s", dir, r_lang ? "R" : "py");
    snprintf(p->host_ep, sizeof p->host_ep, "ipc://%s/k-%d", dir, ABX_J_HOST + 1);
    snprintf(p->ipy, sizeof p->ipy, "%s/ipython", dir);
    snprintf(p->mpl, sizeof p->mpl, "%s/mpl", dir);
    json_t *fds = abx_jconn_fd_map(k->conn);
    char *fdmap = json_dumps(fds, JSON_COMPACT);
    json_decref(fds);
    p->env = json_pack("{s:s, s:s, s:s}", "ABX_KERNEL_FDS", fdmap ? fdmap : "{}", "ABX_KERNEL_CREDENTIAL",
                       k->credential, "ABX_KERNEL_HOST", p->host_ep);
    free(fdmap);
    if (!p->env)
        return -1;
    /* big blocks come from mmap and go back to the system when freed (glibc would
     * otherwise raise its threshold after the first free and keep them in its heap):
     * memory an interrupted cell let go of stops counting against the limit */
    json_object_set_new(p->env, "MALLOC_MMAP_THRESHOLD_", json_string("1048576"));
    if (r_lang) {
        char *argv[] = {"/usr/lib/R/bin/R", "--no-echo", "--no-save", "--no-restore", "--no-init-file",
                        "-f", p->launch, "--args", p->kjson, NULL};
        memcpy(p->argv, argv, sizeof argv);
        return write_file(dir, "abx_launch.R", kernel_launcher_r);
    }
    json_object_set_new(p->env, "PYTHONPATH", json_string(dir));
    json_object_set_new(p->env, "IPYTHONDIR", json_string(p->ipy));
    json_object_set_new(p->env, "MPLCONFIGDIR", json_string(p->mpl));
    json_object_set_new(p->env, "MPLBACKEND", json_string("module://matplotlib_inline.backend_inline"));
    char *argv[] = {"/usr/bin/python3", "-s", p->launch, "-f", p->kjson, "--HistoryManager.enabled=False",
                    "--IPythonKernel._execute_sleep=0", /* ipykernel sleeps 0.5 ms per cell by default */
                    "--IPKernelApp.exec_lines=import host; host._hook()", NULL};
    memcpy(p->argv, argv, sizeof argv);
    return write_file(dir, "abx_launch.py", kernel_launcher_py) || write_file(dir, "host.py", kernel_host_py);
}

/* Start (or restart) k's process from its creation arguments (k->args: cwd, env): a
 * fresh private directory with its sockets, connection file and the language's launcher;
 * the kernel confined like a command. */
static abx_err kernel_spawn(abx_ctx *ctx, kernel *k, abx_reply *r)
{
    const json_t *args = k->args;
    abx_procs *procs = abx_ctx_procs(ctx);
    char dir[128], why[300];
    if (abx_procs_make_tmpdir(procs, dir, sizeof dir, why, sizeof why) != 0)
        return abx_reply_error(r, ABX_E_KERNEL_START_FAILED, NULL, "%s", why);
    uid_t uid;
    gid_t gid;
    abx_procs_run_ids(procs, &uid, &gid);
    k->conn = abx_jconn_new(dir, '-', why, sizeof why);
    kspawn p = {0};
    if (!k->conn || chown(abx_jconn_file(k->conn), uid, gid) != 0 || kernel_files(k, dir, &p) != 0) {
        if (k->conn)
            snprintf(why, sizeof why, "cannot prepare %s: %s", dir, strerror(errno));
        json_decref(p.env);
        abx_jconn_free(k->conn);
        k->conn = NULL;
        abx_rm_tree(dir);
        return abx_reply_error(r, ABX_E_KERNEL_START_FAILED, NULL, "%s", why);
    }
    json_t *env = p.env;
    abx_exec_opts o = {.tag = "kernel", .tmpdir = dir, .keep_fds = abx_jconn_listen_fds(k->conn),
                       .n_keep_fds = ABX_J_N, .persistent = true, .base_env = env, .argv = p.argv,
                       .cwd = k->cwd}; /* a restart: the directory admitted at creation */
    json_t *no_env = json_deep_copy(args);
    json_object_del(no_env, "env"); /* the call's env joins base_env below */
    json_t *call_env = json_object_get(args, "env");
    const char *key;
    json_t *val;
    json_object_foreach(call_env, key, val) json_object_set(env, key, val);
    k->proc = abx_exec_start(ctx, no_env, &o, r);
    json_decref(no_env);
    json_decref(env);
    if (!k->proc) {
        abx_jconn_free(k->conn);
        k->conn = NULL;
        abx_rm_tree(dir);
        return abx_exec_start_failed(r);
    }
    if (handshake(k, why, sizeof why) != 0) {
        char *err = NULL;
        uint64_t start, total;
        bool dropped;
        size_t n = abx_proc_read(k->proc, ABX_STDERR, 0, 4096, &err, &start, &dropped, &total);
        kernel_stop(k);
        abx_reply_error(r, ABX_E_KERNEL_START_FAILED, NULL, "%s%s%.*s", why, n ? "; stderr: " : "", (int)n,
                        err ? err : "");
        abx_free(err);
        return ABX_E_KERNEL_START_FAILED;
    }
    if (abx_kmem_arm(k, abx_proc_pid(k->proc), abx_ctx_limit(ctx, ABX_LIM_MEMORY)) > 0)
        abx_jconn_watch_fd(k->conn, k->mem_fd, abx_kmem_events(k));
    k->exec_count = 0;
    k->last_used = abx_now_ms();
    return ABX_OK;
}

json_t *abx_kernel_json(kernel *k)
{
    pthread_mutex_lock(&k->mu);
    bool busy = k->serving != k->next_ticket;
    pthread_mutex_unlock(&k->mu);
    bool alive = k->proc && abx_proc_running(k->proc);
    return json_pack("{s:s, s:s, s:s, s:i, s:i}", "id", k->id, "language", k->language, "status",
                     !alive ? "dead" : busy ? "busy" : "idle", "pid", k->proc ? abx_proc_pid(k->proc) : 0,
                     "execution_count", k->exec_count);
}

/* A started kernel of the caller's, in the list, or NULL with the error on r. The list
 * holds one reference and the caller gets another. */
static kernel *kernel_new(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    kstate *st = state_of(ctx);
    reap_idle(ctx, st);
    const char *lang = json_string_value(json_object_get(args, "language"));
    const char *k_;
    json_t *v;
    json_object_foreach(json_object_get(args, "env"), k_, v) if (strncmp(k_, "ABX_", 4) == 0 ||
                                                                 strncmp(k_, "LD_", 3) == 0 ||
                                                                 strncmp(k_, "PYTHON", 6) == 0 ||
                                                                 strncmp(k_, "R_", 2) == 0) {
        abx_reply_error(r, ABX_E_ARGS_INVALID, NULL, "env: %s is reserved", k_);
        return NULL;
    }
    const char *run = json_string_value(json_object_get(args, "run"));
    if (run && (strlen(run) >= sizeof ((kernel *)0)->run ||
                !abx_run_exists(abx_ctx_host(ctx), run, abx_ctx_principal(ctx)))) {
        abx_reply_error(r, ABX_E_RUN_NOT_FOUND, NULL, "no run %s of this caller", run);
        return NULL;
    }
    kernel *k = abx_calloc(1, sizeof *k);
    unsigned char rnd[24];
    if (!k || !(k->owner = abx_strdup(abx_ctx_principal(ctx))) || abx_random(rnd, sizeof rnd) != 0) {
        if (k)
            abx_free(k->owner);
        abx_free(k);
        abx_reply_error(r, ABX_E_SERVER_UNAVAILABLE, NULL, "out of memory");
        return NULL;
    }
    char hex[49];
    abx_hex(rnd, sizeof rnd, hex);
    snprintf(k->id, sizeof k->id, "k-%.12s", hex);
    memcpy(k->credential, hex + 12, 36); /* never shown outside the kernel */
    snprintf(k->language, sizeof k->language, "%s", lang);
    snprintf(k->run, sizeof k->run, "%s", run ? run : "");
    pthread_mutex_init(&k->mu, NULL);
    pthread_cond_init(&k->cv, NULL);
    k->refs = 1;
    k->mem_fd = -1;
    const char *cwd = abx_ctx_path(ctx, "cwd"); /* canonical, admitted by the path scope */
    if (cwd && !(k->cwd = abx_strdup(cwd))) {
        abx_kernel_unref(st, k);
        abx_reply_error(r, ABX_E_SERVER_UNAVAILABLE, NULL, "out of memory");
        return NULL;
    }
    k->args = json_object();
    if (k->args && json_object_get(args, "cwd"))
        json_object_set(k->args, "cwd", json_object_get(args, "cwd"));
    if (k->args && json_object_get(args, "env"))
        json_object_set(k->args, "env", json_object_get(args, "env"));
    if (!k->args || kernel_spawn(ctx, k, r) != ABX_OK) {
        abx_kernel_unref(st, k);
        return NULL;
    }
    pthread_mutex_lock(&st->mu);
    k->refs++;
    k->next = st->list;
    st->list = k;
    pthread_mutex_unlock(&st->mu);
    return k;
}

static abx_err kernels_create(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    kernel *k = kernel_new(ctx, args, r);
    if (!k)
        return abx_exec_start_failed(r);
    abx_reply_json(r, abx_kernel_json(k));
    abx_kernel_unref(state_of(ctx), k);
    return ABX_OK;
}

/* devtools.code.run: a fresh kernel for one cell, then gone. */
static abx_err code_run(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    json_t *kargs = json_pack("{s:O}", "language", json_object_get(args, "language"));
    kernel *k = kargs ? kernel_new(ctx, kargs, r) : NULL;
    json_decref(kargs);
    if (!k)
        return abx_reply_err(r) ? abx_reply_err(r) : abx_reply_error(r, ABX_E_SERVER_UNAVAILABLE, NULL, "out of memory");
    json_t *xargs = json_pack("{s:s, s:O, s:O?}", "id", k->id, "code", json_object_get(args, "code"), "timeout",
                              json_object_get(args, "timeout"));
    abx_err e = xargs ? abx_kernels_execute(ctx, xargs, r)
                      : abx_reply_error(r, ABX_E_SERVER_UNAVAILABLE, NULL, "out of memory");
    if (kernel_unlink(state_of(ctx), k)) /* the list's reference (reaping may have taken it) */
        abx_kernel_unref(state_of(ctx), k);
    abx_kernel_unref(state_of(ctx), k);
    json_decref(xargs);
    return e;
}

static abx_err kernels_list(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    kstate *st = state_of(ctx);
    reap_idle(ctx, st);
    json_t *arr = json_array();
    pthread_mutex_lock(&st->mu);
    for (kernel *k = st->list; k; k = k->next)
        if (strcmp(k->owner, abx_ctx_principal(ctx)) == 0)
            json_array_append_new(arr, abx_kernel_json(k));
    pthread_mutex_unlock(&st->mu);
    abx_reply_json(r, json_pack("{s:o}", "kernels", arr));
    return ABX_OK;
}

static abx_err kernels_get(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    kernel *k = abx_kernel_find(ctx, args, r, false);
    if (!k)
        return ABX_E_KERNEL_NOT_FOUND;
    abx_reply_json(r, abx_kernel_json(k));
    abx_kernel_unref(state_of(ctx), k);
    return ABX_OK;
}

static abx_err kernels_interrupt(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    kernel *k = abx_kernel_find(ctx, args, r, false);
    if (!k)
        return ABX_E_KERNEL_NOT_FOUND;
    int rc = k->proc ? abx_proc_signal(k->proc, SIGINT) : -ESRCH;
    json_t *out = abx_kernel_json(k);
    abx_kernel_unref(state_of(ctx), k);
    if (rc != 0) {
        json_decref(out);
        return abx_reply_error(r, ABX_E_KERNEL_DIED, NULL, "the kernel is not running; restart it");
    }
    json_object_set_new(out, "interrupted", json_true());
    abx_reply_json(r, out);
    return ABX_OK;
}

static abx_err kernels_restart(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    kernel *k = abx_kernel_find(ctx, args, r, false);
    if (!k)
        return ABX_E_KERNEL_NOT_FOUND;
    abx_err e = abx_kernel_acquire(k, true, r); /* after the cells already queued */
    if (e == ABX_OK) {
        kernel_stop(k);
        e = kernel_spawn(ctx, k, r); /* the cwd, env and language it was created with */
        abx_kernel_release(k);
        if (e == ABX_OK)
            abx_reply_json(r, abx_kernel_json(k));
    }
    abx_kernel_unref(state_of(ctx), k);
    return e;
}

static abx_err kernels_delete(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    kernel *k = abx_kernel_find(ctx, args, r, true);
    if (!k)
        return ABX_E_KERNEL_NOT_FOUND;
    if (k->proc) /* a running cell ends now; its caller gets kernel.died */
        abx_proc_kill(k->proc, SIGKILL, false);
    abx_reply_json(r, json_pack("{s:s, s:b}", "id", k->id, "deleted", 1));
    abx_kernel_unref(state_of(ctx), k);
    return ABX_OK;
}

/* ---- FIFO admission ---- */

abx_err abx_kernel_acquire(kernel *k, bool wait, abx_reply *r)
{
    pthread_mutex_lock(&k->mu);
    if (!wait && k->serving != k->next_ticket) {
        pthread_mutex_unlock(&k->mu);
        return abx_reply_error(r, ABX_E_KERNEL_BUSY, NULL, "kernel %s is running another cell", k->id);
    }
    uint64_t mine = k->next_ticket++;
    while (k->serving != mine)
        pthread_cond_wait(&k->cv, &k->mu);
    pthread_mutex_unlock(&k->mu);
    return ABX_OK;
}

void abx_kernel_release(kernel *k)
{
    pthread_mutex_lock(&k->mu);
    k->serving++;
    k->last_used = abx_now_ms();
    pthread_cond_broadcast(&k->cv);
    pthread_mutex_unlock(&k->mu);
}

static const abx_param create_params[] = {
    {"language", ABX_T_ENUM, .required = true, .choices = "python|r", .kind = ABX_KIND_LANGUAGE,
     .doc = "The kernel's language (checked by the statement's languages scope)"},
    {"cwd", ABX_T_STRING, .kind = ABX_KIND_PATH, .access = ABX_ACC_READ, .doc = "Working directory"},
    {"env", ABX_T_MAP, .item = ABX_T_STRING, .doc = "Extra environment (ABX_*, LD_*, PYTHON*, R_* are reserved)"},
    {"run", ABX_T_STRING, .doc = "A run of the caller's (runs.create) that host.submit_output completes"},
    {0},
};
static const abx_param id_params[] = {{"id", ABX_T_STRING, .required = true, .doc = "Kernel id"}, {0}};
static const abx_param exec_params[] = {
    {"id", ABX_T_STRING, .required = true, .doc = "Kernel id"},
    {"code", ABX_T_STRING, .required = true, .doc = "The cell's source"},
    {"timeout", ABX_T_NUMBER, .doc = "Seconds before the cell is interrupted (the statement's timeout caps it)"},
    {"wait", ABX_T_BOOL, .dflt = "true", .doc = "Wait behind running cells (false: 409 kernel.busy)"},
    {"env", ABX_T_MAP, .item = ABX_T_STRING,
     .doc = "Environment variables for this cell only (the statement's env allowlist; ABX_*, LD_*, PYTHON*, R_* are "
            "reserved); the old values come back after the cell"},
    {0},
};

#define KLIMITS (ABX_LIM_TIMEOUT | ABX_LIM_RATE | ABX_LIM_CONCURRENCY | ABX_LIM_MEMORY | ABX_LIM_PIDS | ABX_LIM_CPU)

/* results: what each op answers */
static const abx_param kernel_result[] = {
    {"id", ABX_T_STRING, .required = true},
    {"language", ABX_T_STRING, .required = true, .dflt = "\"python\""},
    {"status", ABX_T_ENUM, .required = true, .choices = "idle|busy|dead"},
    {"pid", ABX_T_INT, .required = true},
    {"execution_count", ABX_T_INT, .required = true},
    {0},
};

static const abx_param kernel_interrupt_result[] = {
    {"id", ABX_T_STRING, .required = true},
    {"language", ABX_T_STRING, .required = true},
    {"status", ABX_T_ENUM, .required = true, .choices = "idle|busy|dead"},
    {"pid", ABX_T_INT, .required = true},
    {"execution_count", ABX_T_INT, .required = true},
    {"interrupted", ABX_T_BOOL, .required = true},
    {0},
};

static const abx_param kernel_list_result[] = {
    {"kernels", ABX_T_LIST, ABX_T_OBJECT, .required = true, .fields = kernel_result},
    {0},
};

static const abx_param kernel_delete_result[] = {
    {"id", ABX_T_STRING, .required = true},
    {"deleted", ABX_T_BOOL, .required = true},
    {0},
};

static const abx_param execute_logs_fields[] = {
    {"stdout", ABX_T_LIST, ABX_T_STRING, .required = true},
    {"stderr", ABX_T_LIST, ABX_T_STRING, .required = true},
    {0},
};

static const abx_param execute_error_fields[] = {
    {"name", ABX_T_STRING, .required = true, .nullable = true},
    {"value", ABX_T_STRING, .required = true, .nullable = true},
    {"traceback", ABX_T_LIST, ABX_T_STRING, .required = true, .nullable = true},
    {0},
};

static const abx_param execute_result[] = {
    {"execution_count", ABX_T_INT, .required = true},
    {"results", ABX_T_LIST, ABX_T_MAP, .required = true,
     .doc = "Rich results: MIME type to data (text/plain always), is_main_result"},
    {"logs", ABX_T_OBJECT, .required = true, .fields = execute_logs_fields},
    {"error", ABX_T_OBJECT, .required = true, .nullable = true, .fields = execute_error_fields},
    {"truncated", ABX_T_BOOL, .required = true},
    {"timed_out", ABX_T_BOOL, .required = true},
    {"stdout_bytes", ABX_T_INT, .required = true},
    {"stderr_bytes", ABX_T_INT, .required = true},
    {0},
};

static const abx_param cell_text_fields[] = {{"text", ABX_T_STRING, .required = true}, {0}};

static const abx_param cell_end_fields[] = {
    {"execution_count", ABX_T_INT, .required = true},
    {"timed_out", ABX_T_BOOL, .required = true},
    {"truncated", ABX_T_BOOL, .required = true},
    {"stdout_bytes", ABX_T_INT, .required = true},
    {"stderr_bytes", ABX_T_INT, .required = true},
    {0},
};

static const abx_param cell_events[] = {
    {"stdout", ABX_T_OBJECT, .fields = cell_text_fields},
    {"stderr", ABX_T_OBJECT, .fields = cell_text_fields},
    {"result", ABX_T_MAP, ABX_T_ANY, .doc = "A rich result: MIME type to data, is_main_result"},
    {"error", ABX_T_MAP, ABX_T_ANY, .doc = "The cell's exception (name, value, traceback) or the kernel's (code, message)"},
    {"end", ABX_T_OBJECT, .fields = cell_end_fields, .doc = "The cell finished (the last event)"},
    {0},
};

static const abx_op_def kernels_ops[] = {
    {.id = "kernels.create", .result = kernel_result, .effects = ABX_EFF_EXEC,
     .summary = "Start a persistent, confined Python kernel (Jupyter protocol over ZeroMQ ipc).",
     .http = {"POST /kernels"}, .params = create_params, .limits = KLIMITS, .since = "0.2",
     .errors = "kernel.start_failed run.not_found files.not_found files.not_a_directory process.spawn_failed sandbox.unavailable",
     .handler = kernels_create},
    {.id = "kernels.list", .result = kernel_list_result, .effects = ABX_EFF_READ, .summary = "The caller's kernels.", .http = {"GET /kernels"},
     .since = "0.2", .handler = kernels_list},
    {.id = "kernels.get", .result = kernel_result, .effects = ABX_EFF_READ, .summary = "One of the caller's kernels.",
     .http = {"GET /kernels/{id}"}, .params = id_params, .since = "0.2", .errors = "kernel.not_found",
     .handler = kernels_get},
    {.id = "kernels.interrupt", .result = kernel_interrupt_result, .effects = ABX_EFF_EXEC, .summary = "Interrupt the running cell (SIGINT).",
     .http = {"POST /kernels/{id}/interrupt"}, .params = id_params, .since = "0.2",
     .errors = "kernel.not_found kernel.died", .handler = kernels_interrupt},
    {.id = "kernels.restart", .result = kernel_result, .effects = ABX_EFF_EXEC,
     .summary = "Start the kernel's process again (its state is lost), after queued cells.",
     .http = {"POST /kernels/{id}/restart"}, .params = id_params, .limits = KLIMITS, .since = "0.2",
     .errors = "kernel.not_found kernel.start_failed", .handler = kernels_restart},
    {.id = "kernels.delete", .result = kernel_delete_result, .effects = ABX_EFF_EXEC, .summary = "End a kernel.", .http = {"DELETE /kernels/{id}"},
     .params = id_params, .since = "0.2", .errors = "kernel.not_found", .handler = kernels_delete},
    {.id = "kernels.execute", .result = execute_result, .effects = ABX_EFF_EXEC,
     .summary = "Run a cell; returns the Execution (results as MIME bundles, logs, error), close to E2B's.",
     .http = {"POST /kernels/{id}/execute"}, .params = exec_params,
     .limits = ABX_LIM_TIMEOUT | ABX_LIM_RATE | ABX_LIM_CONCURRENCY | ABX_LIM_MAX_OUTPUT_BYTES, .since = "0.2",
     .errors = "kernel.not_found kernel.busy kernel.died kernel.memory_pressure", .handler = abx_kernels_execute},
    {.id = "kernels.stream", .events = cell_events, .effects = ABX_EFF_EXEC,
     .summary = "Run a cell, its outputs as SSE events while they happen: stdout, stderr, result, error, end.",
     .http = {"POST /kernels/{id}/stream"}, .params = exec_params, .stream = ABX_STREAM_SSE,
     .limits = ABX_LIM_TIMEOUT | ABX_LIM_RATE | ABX_LIM_CONCURRENCY | ABX_LIM_MAX_OUTPUT_BYTES, .since = "0.2",
     .errors = "kernel.not_found kernel.busy kernel.died kernel.memory_pressure", .handler = abx_kernels_stream},
    {0},
};

static const abx_param code_params[] = {
    {"language", ABX_T_ENUM, .required = true, .choices = "python|r", .kind = ABX_KIND_LANGUAGE,
     .doc = "The interpreter's language (checked by the statement's languages scope)"},
    {"code", ABX_T_STRING, .required = true, .doc = "The code to run"},
    {"timeout", ABX_T_NUMBER, .doc = "Seconds before it is interrupted (the statement's timeout caps it)"},
    {0},
};

static const abx_op_def devtools_ops[] = {
    {.id = "devtools.code.run", .result = execute_result, .effects = ABX_EFF_EXEC,
     .summary = "Run code once in a fresh confined interpreter; returns the Execution of kernels.execute.",
     .http = {"POST /devtools/code/run"}, .params = code_params,
     .limits = KLIMITS | ABX_LIM_MAX_OUTPUT_BYTES, .since = "0.2",
     .errors = "kernel.start_failed kernel.died kernel.memory_pressure process.spawn_failed sandbox.unavailable",
     .handler = code_run},
    {0},
};

const abx_namespace abx_ns_devtools = {.name = "devtools", .ops = devtools_ops};

const abx_namespace abx_ns_kernels = {
    .name = "kernels", .ops = kernels_ops, .state_new = kstate_new, .state_free = kstate_free};
