/* proc.c — one process abx started, as the handlers see it: its pid and owner, waiting
 * for its end or its output, signals, stdin, the terminal size, reading its output
 * (head and ring), its status and JSON view. Every function takes the table's lock the
 * manager (procs.c) broadcasts on; none blocks the manager. */
#include "sandbox/procs_int.h"
#include "core/util.h"
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

int abx_proc_pid(const abx_proc *p) { return p->pid; }

void abx_proc_set_tmpdir(abx_proc *p, const char *dir)
{
    pthread_mutex_lock(&p->mgr->mu);
    abx_free(p->tmpdir);
    p->tmpdir = abx_strdup(dir);
    pthread_mutex_unlock(&p->mgr->mu);
}
const char *abx_proc_owner(const abx_proc *p) { return p->owner; }

bool abx_proc_running(abx_proc *p)
{
    pthread_mutex_lock(&p->mgr->mu);
    bool r = p->running;
    pthread_mutex_unlock(&p->mgr->mu);
    return r;
}

static int set_nonblock(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

static void deadline_ts(int64_t ms, struct timespec *ts)
{
    ts->tv_sec = ms / 1000;
    ts->tv_nsec = (ms % 1000) * 1000000;
}

int abx_proc_wait(abx_proc *p, int64_t deadline_ms, bool (*cancelled)(void *), void *ud)
{
    abx_procs *m = p->mgr;
    pthread_mutex_lock(&m->mu);
    int rc = 1;
    while (p->running) {
        int64_t now = abx_now_ms();
        if (deadline_ms && now >= deadline_ms) {
            rc = 0;
            break;
        }
        if (cancelled) {
            pthread_mutex_unlock(&m->mu);
            bool c = cancelled(ud);
            pthread_mutex_lock(&m->mu);
            if (c) {
                rc = -1;
                break;
            }
            if (!p->running) /* it exited while the lock was down: no wake-up will come */
                break;
        }
        int64_t until = now + 100;
        if (deadline_ms && deadline_ms < until)
            until = deadline_ms;
        struct timespec ts;
        deadline_ts(until, &ts);
        pthread_cond_timedwait(&m->cond, &m->mu, &ts);
    }
    pthread_mutex_unlock(&m->mu);
    return rc;
}

bool abx_proc_wait_output(abx_proc *p, uint64_t out_off, uint64_t err_off, int64_t deadline_ms)
{
    abx_procs *m = p->mgr;
    pthread_mutex_lock(&m->mu);
    bool got;
    for (;;) {
        got = p->s[0].total > out_off || p->s[1].total > err_off || !p->running;
        if (got || abx_now_ms() >= deadline_ms)
            break;
        struct timespec ts;
        deadline_ts(deadline_ms, &ts);
        pthread_cond_timedwait(&m->cond, &m->mu, &ts);
    }
    pthread_mutex_unlock(&m->mu);
    return got;
}

void abx_proc_kill(abx_proc *p, int sig, bool timed_out)
{
    pthread_mutex_lock(&p->mgr->mu);
    if (p->running) {
        if (timed_out)
            p->timed_out = true;
        else if (sig == SIGKILL || sig == SIGTERM)
            p->killed = true;
        abx_child_kill(&p->child, sig);
    }
    pthread_mutex_unlock(&p->mgr->mu);
}

int abx_proc_signal(abx_proc *p, int sig)
{
    int rc = 0;
    pthread_mutex_lock(&p->mgr->mu);
    if (!p->running)
        rc = -ESRCH;
    else if (kill(-p->pid, sig) != 0)
        rc = -errno;
    else if (sig == SIGKILL)
        p->killed = true;
    pthread_mutex_unlock(&p->mgr->mu);
    return rc;
}

long abx_proc_write_stdin(abx_proc *p, const void *data, size_t len, bool eof, int64_t deadline_ms)
{
    abx_procs *m = p->mgr;
    pthread_mutex_lock(&m->mu);
    int fd = p->stdin_fd >= 0 ? dup(p->stdin_fd) : -1;
    pthread_mutex_unlock(&m->mu);
    if (fd < 0)
        return -EPIPE;
    set_nonblock(fd);
    size_t done = 0;
    long rc = 0;
    while (done < len) {
        ssize_t n = write(fd, (const char *)data + done, len - done);
        if (n > 0) {
            done += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN) {
            int64_t left = deadline_ms - abx_now_ms();
            if (left <= 0)
                break;
            struct pollfd pf = {.fd = fd, .events = POLLOUT};
            poll(&pf, 1, left > 100 ? 100 : (int)left);
            continue;
        }
        rc = -errno;
        break;
    }
    close(fd);
    if (eof && !p->pty) {
        pthread_mutex_lock(&m->mu);
        if (p->stdin_fd >= 0) {
            close(p->stdin_fd);
            p->stdin_fd = -1;
        }
        pthread_mutex_unlock(&m->mu);
    } else if (eof && p->pty) {
        pthread_mutex_lock(&m->mu);
        int mfd = p->pty_master >= 0 ? dup(p->pty_master) : -1;
        pthread_mutex_unlock(&m->mu);
        if (mfd >= 0) {
            char eot = 4; /* ^D on the terminal */
            ssize_t w = write(mfd, &eot, 1);
            (void)w;
            close(mfd);
        }
    }
    return rc < 0 && done == 0 ? rc : (long)done;
}

int abx_proc_resize(abx_proc *p, unsigned short cols, unsigned short rows)
{
    if (!p->pty)
        return -ENOTTY;
    struct winsize ws = {.ws_row = rows, .ws_col = cols};
    pthread_mutex_lock(&p->mgr->mu);
    int fd = p->pty_master >= 0 ? dup(p->pty_master) : -1;
    pthread_mutex_unlock(&p->mgr->mu);
    if (fd < 0)
        return -EIO; /* the terminal has ended */
    int rc = ioctl(fd, TIOCSWINSZ, &ws) == 0 ? 0 : -errno;
    close(fd);
    return rc;
}

size_t abx_proc_read(abx_proc *p, enum abx_stream_id s, uint64_t off, size_t max, char **data, uint64_t *start,
                     bool *dropped, uint64_t *total)
{
    abx_procs *m = p->mgr;
    pthread_mutex_lock(&m->mu);
    stream_buf *b = &p->s[s];
    uint64_t oldest = b->total > b->ring_cap ? b->total - b->ring_cap : 0;
    *dropped = off < oldest;
    uint64_t from = off < oldest ? oldest : off;
    if (from > b->total)
        from = b->total;
    size_t n = (size_t)(b->total - from);
    if (n > max)
        n = max;
    char *out = abx_malloc(n + 1);
    if (out && n) {
        size_t pos = (size_t)(from % b->ring_cap);
        size_t first = n < b->ring_cap - pos ? n : b->ring_cap - pos;
        memcpy(out, b->ring + pos, first);
        memcpy(out + first, b->ring, n - first);
    }
    if (out)
        out[n] = '\0';
    *start = from;
    *total = b->total;
    pthread_mutex_unlock(&m->mu);
    *data = out;
    return out ? n : 0;
}

size_t abx_proc_head(abx_proc *p, enum abx_stream_id s, char **data, bool *truncated)
{
    abx_procs *m = p->mgr;
    pthread_mutex_lock(&m->mu);
    stream_buf *b = &p->s[s];
    size_t n = b->head_len;
    char *out = abx_malloc(n + 1);
    if (out) {
        if (n)
            memcpy(out, b->head, n);
        out[n] = '\0';
    }
    *truncated = b->total > b->head_len;
    pthread_mutex_unlock(&m->mu);
    *data = out;
    return out ? n : 0;
}

static const char *status_locked(const abx_proc *p)
{
    if (p->running)
        return "running";
    if (p->timed_out)
        return "timed_out";
    if (p->killed || p->term_signal) /* asked to die, or died of a signal (a limit, a crash) */
        return "killed";
    return "completed";
}

const char *abx_proc_status(abx_proc *p)
{
    pthread_mutex_lock(&p->mgr->mu);
    const char *s = status_locked(p);
    pthread_mutex_unlock(&p->mgr->mu);
    return s;
}

json_t *abx_proc_json(abx_proc *p)
{
    pthread_mutex_lock(&p->mgr->mu);
    char started[32], ended[32];
    abx_iso8601(p->started_wall, started);
    abx_iso8601(p->ended_wall, ended);
    int64_t dur = (p->running ? abx_now_ms() : p->ended_mono) - p->started_mono;
    json_t *o = json_pack("{s:i, s:b, s:s, s:s, s:I, s:O, s:s, s:I, s:I, s:b}", "pid", p->pid, "running", p->running,
                          "status", status_locked(p), "started_at", started, "duration_ms", (json_int_t)dur, "argv",
                          p->argv, "owner", p->owner, "stdout_bytes", (json_int_t)p->s[0].total, "stderr_bytes",
                          (json_int_t)p->s[1].total, "pty", p->pty);
    json_object_set_new(o, "tag", p->tag ? json_string(p->tag) : json_null());
    json_object_set_new(o, "exit_code", p->running || p->exit_code < 0 ? json_null() : json_integer(p->exit_code));
    json_object_set_new(o, "signal", !p->running && p->term_signal ? json_string(sigabbrev_np(p->term_signal))
                                                                    : json_null());
    json_object_set_new(o, "ended_at", p->running ? json_null() : json_string(ended));
    pthread_mutex_unlock(&p->mgr->mu);
    return o;
}
