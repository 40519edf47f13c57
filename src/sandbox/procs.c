/* procs.c — the process manager (see procs.h for the state machine).
 *
 * Threads: one manager thread runs an epoll loop over an eventfd (requests), each
 * process's pidfd (exit) and output descriptors (data); request threads only touch
 * the table under `mu` and sleep on `cond`, which the manager broadcasts whenever
 * output arrives or a process exits. Spawning happens on the manager thread because
 * PDEATHSIG follows the parent *thread*: a connection thread may end long before the
 * background process it started. */
#include "sandbox/procs_int.h"
#include "core/util.h"
#include <ftw.h>
#include <sys/stat.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <pty.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

/* The value types (stream_buf, abx_proc, pending, abx_procs): sandbox/procs_int.h.
 * One process's own API (wait, signal, stdin, output, status) is in proc.c. */

static abx_egress_ca *egress_ca(abx_procs *m, char *why, size_t whylen);

static void proc_free(abx_proc *p)
{
    for (int i = 0; i < 2; i++) {
        abx_free(p->s[i].head);
        abx_free(p->s[i].ring);
        if (p->s[i].fd >= 0 && !(p->pty && i == 0))
            close(p->s[i].fd);
    }
    if (p->pty_master >= 0)
        close(p->pty_master);
    if (p->stdin_fd >= 0 && p->stdin_fd != p->pty_master)
        close(p->stdin_fd);
    abx_egress_box_stop(p->egress);
    abx_child_cleanup(&p->child);
    if (p->tmpdir) {
        abx_rm_tree(p->tmpdir);
        abx_free(p->tmpdir);
    }
    json_decref(p->argv);
    abx_free(p->owner);
    abx_free(p->tag);
    abx_free(p);
}

void abx_proc_unref(abx_proc *p)
{
    if (p && atomic_fetch_sub(&p->refs, 1) == 1)
        proc_free(p);
}

static abx_proc *ref(abx_proc *p)
{
    atomic_fetch_add(&p->refs, 1);
    return p;
}

static void stream_append(stream_buf *b, const char *data, size_t n)
{
    if (b->head_cap && b->head_len < b->head_cap) {
        size_t take = n < b->head_cap - b->head_len ? n : b->head_cap - b->head_len;
        if (!b->head) {
            b->head = abx_malloc(b->head_cap);
        }
        if (b->head) {
            memcpy(b->head + b->head_len, data, take);
            b->head_len += take;
        }
    }
    if (b->ring_cap) {
        if (!b->ring)
            b->ring = abx_malloc(b->ring_cap);
        if (b->ring) {
            /* only the last ring_cap bytes of this chunk can survive */
            const char *d = n > b->ring_cap ? data + (n - b->ring_cap) : data;
            uint64_t at = n > b->ring_cap ? b->total + (n - b->ring_cap) : b->total;
            size_t m = n > b->ring_cap ? b->ring_cap : n;
            size_t pos = (size_t)(at % b->ring_cap);
            size_t first = m < b->ring_cap - pos ? m : b->ring_cap - pos;
            memcpy(b->ring + pos, d, first);
            memcpy(b->ring, d + first, m - first);
        }
    }
    b->total += n;
}

/* ---- manager thread ---- */

static void epoll_add(abx_procs *m, int fd, abx_proc *p, uint32_t tag)
{
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = ((uint64_t)(uintptr_t)p) | tag};
    epoll_ctl(m->epfd, EPOLL_CTL_ADD, fd, &ev);
}

/* tags in the low bits of the pointer (objects are at least 8-byte aligned) */
enum { TAG_PID = 1, TAG_OUT = 2, TAG_ERR = 3 };

static int set_nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

static void do_spawn(abx_procs *m, pending *pd)
{
    const abx_proc_spec *sp = pd->spec;
    abx_proc *p = abx_calloc(1, sizeof *p);
    int out[2] = {-1, -1}, err[2] = {-1, -1}, in[2] = {-1, -1}, master = -1, slave = -1;
    bool slot_given = false;
    if (!p) {
        abx_sandbox_slot_put(sp->spawn.slot);
        snprintf(pd->err, sizeof pd->err, "out of memory");
        pd->rc = -1;
        return;
    }
    atomic_init(&p->refs, 1);
    p->mgr = m;
    p->child.pid = -1; /* nothing to close or give back until abx_spawn fills it */
    p->child.pidfd = -1;
    p->child.netns = -1;
    p->stdin_fd = -1;
    p->pty_master = -1;
    p->s[0].fd = p->s[1].fd = -1;
    abx_spawn_req req = sp->spawn;
    req.deadline_ms = sp->kill_after_ms > 0 ? abx_now_ms() + sp->kill_after_ms : 0;
    if (sp->pty) {
        struct winsize ws = {.ws_row = sp->rows ? sp->rows : 24, .ws_col = sp->cols ? sp->cols : 80};
        if (openpty(&master, &slave, NULL, NULL, &ws) != 0) {
            snprintf(pd->err, sizeof pd->err, "openpty: %s", strerror(errno));
            goto fail;
        }
        fcntl(master, F_SETFD, FD_CLOEXEC);
        fcntl(slave, F_SETFD, FD_CLOEXEC);
        req.stdin_fd = req.stdout_fd = req.stderr_fd = slave;
        req.ctty = true;
    } else {
        if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0 ||
            (sp->keep_stdin && pipe2(in, O_CLOEXEC) != 0)) {
            snprintf(pd->err, sizeof pd->err, "pipe: %s", strerror(errno));
            goto fail;
        }
        req.stdout_fd = out[1];
        req.stderr_fd = err[1];
        req.stdin_fd = sp->keep_stdin ? in[0] : -1;
    }
    if (!m->sb) {
        snprintf(pd->err, sizeof pd->err, "confinement required but unavailable: the sandbox could not be built");
        goto fail;
    }
    slot_given = true; /* abx_spawn takes it, started or not */
    if (abx_spawn(m->sb, &req, &p->child, pd->err, sizeof pd->err) != 0)
        goto fail;
    p->pid = p->child.pid;
    if (p->child.egress.n) {
        abx_egress_listeners lis = p->child.egress;
        p->child.egress.n = 0;
        pd->sink_taken = true;
        abx_egress_box_tls tls = {.inj = sp->egress_inject, .upstream_ca = m->egress_upstream_ca};
        if (sp->egress_inject && sp->egress_inject->n)
            tls.ca = egress_ca(m, pd->err, sizeof pd->err);
        p->egress = abx_egress_box_start_multi(&lis, sp->egress_allow, sp->egress_resolve, &tls, sp->egress_sink,
                                               pd->err, sizeof pd->err);
        if (!p->egress) { /* fail closed: no process whose way out is missing */
            abx_child_kill(&p->child, SIGKILL);
            goto fail_spawned;
        }
    }
    p->running = true;
    p->started_wall = abx_wall_ms();
    p->started_mono = abx_now_ms();
    p->kill_at_mono = sp->kill_after_ms > 0 ? p->started_mono + sp->kill_after_ms : 0;
    p->owner = abx_strdup(sp->owner ? sp->owner : "");
    p->tag = sp->tag ? abx_strdup(sp->tag) : NULL;
    p->argv = json_array();
    for (char *const *a = sp->spawn.argv; *a; a++)
        json_array_append_new(p->argv, json_string(*a));
    for (int i = 0; i < 2; i++) {
        p->s[i].head_cap = sp->head_bytes;
        p->s[i].ring_cap = m->ring_cap;
    }
    if (sp->pty) {
        close(slave);
        p->pty = true;
        p->pty_master = master;
        p->s[0].fd = master;
        p->stdin_fd = master;
        set_nonblock(master);
        epoll_add(m, master, p, TAG_OUT);
    } else {
        close(out[1]);
        close(err[1]);
        p->s[0].fd = out[0];
        p->s[1].fd = err[0];
        set_nonblock(out[0]);
        set_nonblock(err[0]);
        epoll_add(m, out[0], p, TAG_OUT);
        epoll_add(m, err[0], p, TAG_ERR);
        if (sp->keep_stdin) {
            close(in[0]);
            p->stdin_fd = in[1];
        }
    }
    epoll_add(m, p->child.pidfd, p, TAG_PID);
    if (m->n == m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 64;
        abx_proc **g = abx_realloc(m->table, cap * sizeof *g);
        if (!g) {
            abx_child_kill(&p->child, SIGKILL);
            snprintf(pd->err, sizeof pd->err, "out of memory");
            goto fail_spawned;
        }
        m->table = g;
        m->cap = cap;
    }
    m->table[m->n++] = p;
    p->in_table = true;
    pd->proc = ref(p);
    pd->rc = 0;
    return;
fail_spawned : {
    int st;
    waitpid(p->pid, &st, 0);
}
fail:
    if (!slot_given)
        abx_sandbox_slot_put(sp->spawn.slot);
    for (int i = 0; i < 2; i++) {
        if (out[i] >= 0)
            close(out[i]);
        if (err[i] >= 0)
            close(err[i]);
        if (in[i] >= 0)
            close(in[i]);
    }
    if (master >= 0)
        close(master);
    if (slave >= 0)
        close(slave);
    p->s[0].fd = p->s[1].fd = -1;
    p->pty_master = -1;
    p->stdin_fd = -1;
    proc_free(p);
    pd->rc = -1;
}

static void drain(abx_procs *m, abx_proc *p, int i)
{
    stream_buf *b = &p->s[i];
    char buf[65536];
    while (b->fd >= 0) {
        ssize_t n = read(b->fd, buf, sizeof buf);
        if (n > 0) {
            stream_append(b, buf, (size_t)n);
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            break;
        /* EOF, or EIO from a pty whose last slave closed */
        epoll_ctl(m->epfd, EPOLL_CTL_DEL, b->fd, NULL);
        if (!(p->pty && i == 0))
            close(b->fd);
        b->fd = -1;
    }
}

/* A reaped child's cgroups and network namespace are released after its waiters are
 * woken (release_deferred): removing cgroups, making its slot's next process (a spare)
 * and checking the namespace are the manager's work, not the caller's wait. Its
 * processes were killed already (abx_child_kill). */
static void defer_release(abx_procs *m, abx_child *c)
{
    if (m->n_released == m->cap_released) {
        size_t cap = m->cap_released ? m->cap_released * 2 : 8;
        abx_child *g = abx_realloc(m->released, cap * sizeof *g);
        if (!g) {
            abx_child_release(m->sb, c); /* no memory to defer it: now */
            return;
        }
        m->released = g;
        m->cap_released = cap;
    }
    m->released[m->n_released++] = *c;
    /* the record keeps its pid, none of what was moved */
    c->pidfd = -1;
    c->netns = -1;
    c->slot = NULL;
    c->egress.n = 0;
    for (int i = 0; i < 3; i++)
        c->cgroup[i][0] = '\0';
}

/* Called with m->mu held; drops it while releasing. */
static void release_deferred(abx_procs *m)
{
    while (m->n_released) {
        abx_child c = m->released[--m->n_released];
        pthread_mutex_unlock(&m->mu);
        abx_child_release(m->sb, &c);
        pthread_mutex_lock(&m->mu);
    }
}

static void reap(abx_procs *m, abx_proc *p)
{
    siginfo_t si = {0};
    if (waitid((idtype_t)P_PIDFD, (id_t)p->child.pidfd, &si, WEXITED | WNOHANG) != 0 || si.si_pid == 0)
        return;
    epoll_ctl(m->epfd, EPOLL_CTL_DEL, p->child.pidfd, NULL);
    for (int i = 0; i < 2; i++)
        drain(m, p, i);
    if (si.si_code == CLD_EXITED) {
        p->exit_code = si.si_status;
        p->term_signal = 0;
    } else {
        p->exit_code = -1;
        p->term_signal = si.si_status;
    }
    p->running = false;
    p->ended_wall = abx_wall_ms();
    p->ended_mono = abx_now_ms();
    /* a command's processes end with it: stragglers in its group or cgroup are killed,
     * which also closes pipes they may hold */
    abx_child_kill(&p->child, SIGKILL);
    for (int i = 0; i < 2; i++)
        if (p->s[i].fd >= 0) {
            epoll_ctl(m->epfd, EPOLL_CTL_DEL, p->s[i].fd, NULL);
            drain(m, p, i);
            /* no EOF yet: a killed straggler still holds the write end; it is gone from
             * epoll, so the read end would stay open with the record (pty: below) */
            if (p->s[i].fd >= 0 && p->s[i].fd != p->pty_master) {
                close(p->s[i].fd);
                p->s[i].fd = -1;
            }
        }
    defer_release(m, &p->child);
    /* its connections end with it (the namespace goes too); their records are made
     * before the waiter sees the exit, unless a DNS lookup holds one (then soon after) */
    abx_egress_box_stop_within(p->egress, 1000);
    p->egress = NULL;
    /* an exited record keeps its output, not its descriptors: a record is retained for
     * minutes, and thousands of them holding a pipe or a pty each would exhaust the
     * server's fds (found by bench/soak.py). Writers dup these under m->mu. */
    if (p->stdin_fd >= 0 && p->stdin_fd != p->pty_master)
        close(p->stdin_fd);
    p->stdin_fd = -1;
    if (p->pty_master >= 0) {
        epoll_ctl(m->epfd, EPOLL_CTL_DEL, p->pty_master, NULL);
        close(p->pty_master);
        p->pty_master = -1;
        p->s[0].fd = -1;
    }
}

#define MAX_EXITED 512

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* The end time of the k-th oldest exited record (k >= 1): records that ended at or
 * before it are dropped. Ties may drop a few more; that is fine for a bound. */
static int64_t nth_oldest_end(abx_procs *m, size_t k)
{
    int64_t *ends = abx_malloc(m->n * sizeof *ends);
    if (!ends)
        return INT64_MIN;
    size_t e = 0;
    for (size_t i = 0; i < m->n; i++)
        if (!m->table[i]->running)
            ends[e++] = m->table[i]->ended_mono;
    qsort(ends, e, sizeof *ends, cmp_i64);
    int64_t cut = k <= e ? ends[k - 1] : INT64_MIN;
    abx_free(ends);
    return cut;
}

/* How long the manager must have had nothing to do before it makes namespaces ahead. */
#define PREPARE_IDLE_MS 50

static void *manager_main(void *arg)
{
    abx_procs *m = arg;
    struct epoll_event evs[64];
    char err[256];
    abx_sandbox *sb = abx_sandbox_new(m->runtime_dir, false, err, sizeof err);
    abx_sandbox_log_tier(sb, err, m->log);
    if (sb)
        abx_sandbox_prepare(sb); /* network namespaces made ahead, before any spawn waits */
    pthread_mutex_lock(&m->mu);
    m->sb = sb;
    m->sb_ready = true;
    pthread_cond_broadcast(&m->cond);
    while (!m->stop) {
        /* the next hard deadline bounds the wait */
        int64_t now = abx_now_ms(), next = now + 1000;
        for (size_t i = 0; i < m->n; i++)
            if (m->table[i]->running && m->table[i]->kill_at_mono && m->table[i]->kill_at_mono < next)
                next = m->table[i]->kill_at_mono;
        pthread_mutex_unlock(&m->mu);
        int timeout = next > now ? (int)(next - now) : 0;
        bool prepare = abx_sandbox_wants_prepare(sb);
        if (prepare && timeout > PREPARE_IDLE_MS)
            timeout = PREPARE_IDLE_MS;
        int n = epoll_wait(m->epfd, evs, 64, timeout);
        if (n == 0 && prepare) /* idle: make ahead what the next spawns take */
            abx_sandbox_prepare(sb);
        pthread_mutex_lock(&m->mu);
        for (int k = 0; k < n; k++) {
            uint64_t u = evs[k].data.u64;
            if (u == 0) { /* the eventfd: spawn requests */
                uint64_t v;
                ssize_t r = read(m->evfd, &v, sizeof v);
                (void)r;
                while (m->queue) {
                    pending *pd = m->queue;
                    m->queue = pd->next;
                    do_spawn(m, pd);
                    pd->done = true;
                }
                continue;
            }
            abx_proc *p = (abx_proc *)(uintptr_t)(u & ~(uint64_t)7);
            switch (u & 7) {
            case TAG_PID: reap(m, p); break;
            case TAG_OUT: drain(m, p, 0); break;
            case TAG_ERR: drain(m, p, 1); break;
            }
        }
        now = abx_now_ms();
        for (size_t i = 0; i < m->n; i++) {
            abx_proc *p = m->table[i];
            if (p->running && p->kill_at_mono && now >= p->kill_at_mono) {
                p->timed_out = true;
                abx_child_kill(&p->child, SIGKILL);
                p->kill_at_mono = 0;
            }
        }
        /* drop exited records past retention, and the oldest ones beyond MAX_EXITED (a
         * busy agent starts processes faster than retention forgets them: memory and
         * this loop's cost stay bounded) */
        size_t exited = 0;
        int64_t cutoff = INT64_MIN;
        for (size_t i = 0; i < m->n; i++)
            exited += !m->table[i]->running;
        if (exited > MAX_EXITED)
            cutoff = nth_oldest_end(m, exited - MAX_EXITED);
        for (size_t i = 0; i < m->n;) {
            abx_proc *p = m->table[i];
            if (!p->running && (now - p->ended_mono > m->retention_ms || p->ended_mono <= cutoff)) {
                p->in_table = false;
                m->table[i] = m->table[--m->n];
                abx_proc_unref(p);
            } else {
                i++;
            }
        }
        pthread_cond_broadcast(&m->cond);
        release_deferred(m);
    }
    release_deferred(m);
    pthread_mutex_unlock(&m->mu);
    return NULL;
}

abx_sandbox *abx_procs_sandbox(abx_procs *m)
{
    pthread_mutex_lock(&m->mu);
    while (!m->sb_ready)
        pthread_cond_wait(&m->cond, &m->mu);
    abx_sandbox *sb = m->sb;
    pthread_mutex_unlock(&m->mu);
    return sb;
}

abx_procs *abx_procs_new(const abx_procs_opts *o, char *err, size_t errlen)
{
    abx_procs *m = abx_calloc(1, sizeof *m);
    if (!m) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    snprintf(m->runtime_dir, sizeof m->runtime_dir, "%s", o->runtime_dir);
    if (o->homes_dir)
        snprintf(m->homes_dir, sizeof m->homes_dir, "%s", o->homes_dir);
    else
        snprintf(m->homes_dir, sizeof m->homes_dir, "%s/homes", o->runtime_dir);
    m->homes_ttl_ms = o->homes_ttl_ms;
    abx_procs_homes_expire(m, m->homes_ttl_ms);
    m->run_uid = o->run_uid;
    m->run_gid = o->run_gid;
    m->confine_set = o->confine_set;
    m->confine_required = o->confine_required;
    m->log = o->log;
    m->ring_cap = o->ring_bytes ? o->ring_bytes : 1024 * 1024;
    m->retention_ms = o->retention_ms > 0 ? o->retention_ms : 10 * 60 * 1000;
    m->egress_ca_dir = o->egress_ca_dir ? abx_strdup(o->egress_ca_dir) : NULL;
    m->egress_upstream_ca = o->egress_upstream_ca ? abx_strdup(o->egress_upstream_ca) : NULL;
    m->egress_port = o->egress_proxy_port > 0 ? o->egress_proxy_port : ABX_EGRESS_PORT;
    pthread_mutex_init(&m->ca_mu, NULL);
    pthread_mutex_init(&m->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&m->cond, &ca);
    pthread_condattr_destroy(&ca);
    m->epfd = epoll_create1(EPOLL_CLOEXEC);
    m->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 0};
    if (m->epfd < 0 || m->evfd < 0 || epoll_ctl(m->epfd, EPOLL_CTL_ADD, m->evfd, &ev) != 0 ||
        pthread_create(&m->thread, NULL, manager_main, m) != 0) {
        snprintf(err, errlen, "cannot start the process manager: %s", strerror(errno));
        if (m->epfd >= 0)
            close(m->epfd);
        if (m->evfd >= 0)
            close(m->evfd);
        abx_free(m);
        return NULL;
    }
    return m;
}

int abx_procs_egress_port(const abx_procs *m) { return m->egress_port; }

/* the egress CA, made or loaded once (it lives until abx_procs_free); NULL with why */
static abx_egress_ca *egress_ca(abx_procs *m, char *why, size_t whylen)
{
    pthread_mutex_lock(&m->ca_mu);
    if (!m->egress_ca) {
        if (!m->egress_ca_dir)
            snprintf(why, whylen, "no place for the egress CA");
        else
            m->egress_ca = abx_egress_ca_open(m->egress_ca_dir, why, whylen);
    }
    abx_egress_ca *ca = m->egress_ca;
    pthread_mutex_unlock(&m->ca_mu);
    return ca;
}

/* copy from → to (made 0644, replaced); 0 or -1 with errno */
static int copy_public_file(const char *from, const char *to)
{
    int in = open(from, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return -1;
    int out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    int rc = out < 0 || fchmod(out, 0644) != 0 ? -1 : 0; /* whatever the umask: the process reads it */
    char buf[16384];
    ssize_t n;
    while (rc == 0 && (n = read(in, buf, sizeof buf)) != 0) {
        if (n < 0 || write(out, buf, (size_t)n) != n)
            rc = -1;
    }
    int e = errno;
    close(in);
    if (out >= 0 && close(out) != 0)
        rc = -1;
    errno = e;
    return rc;
}

int abx_procs_egress_ca_env(abx_procs *m, const char *dir, char *bundle, char *cert,
                            abx_env_pair out[ABX_EGRESS_CA_ENV], char *why, size_t whylen)
{
    abx_egress_ca *ca = egress_ca(m, why, whylen);
    if (!ca)
        return -1;
    snprintf(bundle, PATH_MAX, "%s/abx-egress-ca-bundle.pem", dir);
    snprintf(cert, PATH_MAX, "%s/abx-egress-ca.pem", dir);
    if (copy_public_file(abx_egress_ca_bundle_path(ca), bundle) != 0 ||
        copy_public_file(abx_egress_ca_cert_path(ca), cert) != 0) {
        snprintf(why, whylen, "cannot copy the egress CA into the process's TMPDIR: %s", strerror(errno));
        return -1;
    }
    abx_egress_ca_env(ca, out);
    for (size_t i = 0; i < ABX_EGRESS_CA_ENV; i++)
        out[i].value = strcmp(out[i].name, "NODE_EXTRA_CA_CERTS") == 0 ? cert : bundle;
    return 0;
}

/* required unless the config says best_effort: on every tier, a statement's promise is kept or fails closed */
bool abx_procs_confine_required(abx_procs *m) { return !m->confine_set || m->confine_required; }

void abx_procs_run_ids(const abx_procs *m, uid_t *uid, gid_t *gid)
{
    *uid = m->run_uid;
    *gid = m->run_gid;
}

abx_slot *abx_procs_slot_take(abx_procs *m, const abx_confine *c, const char *home, char *dir, size_t dirlen)
{
    return abx_sandbox_slot_take(abx_procs_sandbox(m), c, home, m->run_uid, m->run_gid, dir, dirlen);
}

int abx_procs_make_tmpdir(abx_procs *m, char *dir, size_t dirlen, char *why, size_t whylen)
{
    if ((size_t)snprintf(dir, dirlen, "%s/tmp-XXXXXX", m->runtime_dir) >= dirlen) {
        snprintf(why, whylen, "cannot create a private TMPDIR: the runtime dir's name is too long");
        dir[0] = '\0';
        return -1;
    }
    if (mkdir(m->runtime_dir, 0711) != 0 && errno != EEXIST) {
        snprintf(why, whylen, "cannot create %s: %s", m->runtime_dir, strerror(errno));
        dir[0] = '\0';
        return -1;
    }
    struct stat rst; /* ours, a real directory, writable by no one else: else refuse */
    if (lstat(m->runtime_dir, &rst) != 0 || !S_ISDIR(rst.st_mode) || rst.st_uid != geteuid() ||
        (rst.st_mode & 022)) {
        snprintf(why, whylen, "cannot create a private TMPDIR: %s is not abx's own directory", m->runtime_dir);
        dir[0] = '\0';
        return -1;
    }
    if (!mkdtemp(dir)) {
        snprintf(why, whylen, "cannot create a private TMPDIR: %s", strerror(errno));
        dir[0] = '\0';
        return -1;
    }
    if (chown(dir, m->run_uid, m->run_gid) != 0) {
        snprintf(why, whylen, "cannot create a private TMPDIR: %s", strerror(errno));
        rmdir(dir); /* empty: made just above */
        dir[0] = '\0';
        return -1;
    }
    return 0;
}

void abx_procs_kill_all(abx_procs *m, int sig)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->mu);
    for (size_t i = 0; i < m->n; i++)
        if (m->table[i]->running)
            abx_child_kill(&m->table[i]->child, sig);
    pthread_mutex_unlock(&m->mu);
}

void abx_procs_free(abx_procs *m, int64_t grace_ms)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->mu);
    for (size_t i = 0; i < m->n; i++)
        if (m->table[i]->running)
            abx_child_kill(&m->table[i]->child, SIGTERM);
    int64_t until = abx_now_ms() + grace_ms;
    for (;;) {
        bool any = false;
        for (size_t i = 0; i < m->n; i++)
            any = any || m->table[i]->running;
        if (!any || abx_now_ms() >= until)
            break;
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += 50 * 1000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&m->cond, &m->mu, &ts);
    }
    for (size_t i = 0; i < m->n; i++)
        if (m->table[i]->running)
            abx_child_kill(&m->table[i]->child, SIGKILL);
    pthread_mutex_unlock(&m->mu);
    /* give the manager a moment to reap what was killed */
    for (int tries = 0; tries < 100; tries++) {
        pthread_mutex_lock(&m->mu);
        bool any = false;
        for (size_t i = 0; i < m->n; i++)
            any = any || m->table[i]->running;
        pthread_mutex_unlock(&m->mu);
        if (!any)
            break;
        usleep(10000);
    }
    pthread_mutex_lock(&m->mu);
    m->stop = true;
    pthread_mutex_unlock(&m->mu);
    uint64_t one = 1;
    ssize_t w = write(m->evfd, &one, sizeof one);
    (void)w;
    pthread_join(m->thread, NULL);
    for (size_t i = 0; i < m->n; i++) {
        abx_proc *p = m->table[i];
        if (p->running) { /* could not be reaped in time: reap now, blocking */
            int st;
            waitpid(p->pid, &st, 0);
            p->running = false;
        }
        p->in_table = false;
        abx_proc_unref(p);
    }
    abx_free(m->table);
    abx_free(m->released); /* emptied by the manager before it returned */
    abx_egress_box_drain(); /* stops still under way record into sinks that close after us */
    abx_egress_ca_free(m->egress_ca); /* every box that borrowed it is stopped */
    abx_free(m->egress_ca_dir);
    abx_free(m->egress_upstream_ca);
    pthread_mutex_destroy(&m->ca_mu);
    abx_sandbox_free(m->sb);
    close(m->epfd);
    close(m->evfd);
    pthread_cond_destroy(&m->cond);
    pthread_mutex_destroy(&m->mu);
    abx_free(m);
}

abx_proc *abx_proc_start(abx_procs *m, const abx_proc_spec *spec, char *err, size_t errlen)
{
    pending pd = {.spec = spec};
    pthread_mutex_lock(&m->mu);
    pd.next = m->queue;
    m->queue = &pd;
    uint64_t one = 1;
    ssize_t w = write(m->evfd, &one, sizeof one);
    (void)w;
    while (!pd.done && !m->stop)
        pthread_cond_wait(&m->cond, &m->mu);
    pthread_mutex_unlock(&m->mu);
    if (!pd.sink_taken && spec->egress_sink.ctx_free)
        spec->egress_sink.ctx_free(spec->egress_sink.ctx);
    if (!pd.done || pd.rc != 0) {
        snprintf(err, errlen, "%s", pd.done ? pd.err : "the process manager is stopping");
        return NULL;
    }
    return pd.proc;
}

abx_proc *abx_proc_find(abx_procs *m, int pid)
{
    abx_proc *found = NULL;
    pthread_mutex_lock(&m->mu);
    for (size_t i = 0; i < m->n; i++)
        if (m->table[i]->pid == pid) {
            found = ref(m->table[i]);
            break;
        }
    pthread_mutex_unlock(&m->mu);
    return found;
}

size_t abx_procs_list(abx_procs *m, const char *owner, abx_proc ***out)
{
    pthread_mutex_lock(&m->mu);
    abx_proc **arr = abx_calloc(m->n + 1, sizeof *arr);
    size_t k = 0;
    for (size_t i = 0; arr && i < m->n; i++)
        if (!owner || strcmp(m->table[i]->owner, owner) == 0)
            arr[k++] = ref(m->table[i]);
    pthread_mutex_unlock(&m->mu);
    *out = arr;
    return k;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) { return remove(path); }

void abx_rm_tree(const char *dir)
{
    if (dir && *dir)
        nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS); /* FTW_PHYS: never follows symlinks */
}

