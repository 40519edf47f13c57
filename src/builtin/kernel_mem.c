/* kernel_mem.c — memory pressure on a kernel's cgroup. A cell that nears the kernel's
 * `memory` limit is interrupted (kernel_exec.c) and answered kernel.memory_pressure, so
 * the OOM killer does not take the kernel and its state.
 *
 * The kernel's memory cgroup is the one abx made for it (sandbox/spawn.c), found in
 * /proc/PID/cgroup. The threshold is 90% of the limit (at least 16 MiB below it):
 *   cgroup v2: memory.high is set to it (the kernel throttles allocation past it, which
 *     gives abx time), and memory.events is watched (POLLPRI) for its `high` count;
 *   cgroup v1: an eventfd is registered on memory.usage_in_bytes with that threshold
 *     (cgroup.event_control), which the kernel signals when usage crosses it.
 * Without a memory cgroup (no delegation, or no `memory` limit) nothing is watched and
 * the limit, if any, is the OOM killer's. */
#include "builtin/kernels.h"
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include "builtin/zmq_lazy.h"

static int read_text(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, len - 1);
    close(fd);
    if (n < 0)
        return -1;
    buf[n] = '\0';
    return 0;
}

static int write_text(const char *path, const char *text)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = write(fd, text, strlen(text));
    close(fd);
    return n == (ssize_t)strlen(text) ? 0 : -1;
}

/* The kernel's memory cgroup directory and its version (1, 2), or 0. */
static int find_cgroup(pid_t pid, char *dir, size_t dirlen)
{
    char path[64], buf[2048];
    snprintf(path, sizeof path, "/proc/%d/cgroup", (int)pid);
    if (read_text(path, buf, sizeof buf) != 0)
        return 0;
    char *save = NULL;
    for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2 || strstr(c2, "..") || strlen(c2 + 1) < 2) /* "/" alone: not abx's cgroup */
            continue;
        if (c2 - c1 == 7 && strncmp(c1 + 1, "memory", 6) == 0) {
            snprintf(dir, dirlen, "/sys/fs/cgroup/memory%s", c2 + 1);
            return 1;
        }
        if (c2 == c1 + 1 && strncmp(line, "0:", 2) == 0) {
            snprintf(dir, dirlen, "/sys/fs/cgroup%s", c2 + 1);
            char f[300];
            snprintf(f, sizeof f, "%s/memory.max", dir);
            if (access(f, F_OK) == 0)
                return 2;
        }
    }
    return 0;
}

static uint64_t v2_high_count(const kernel *k)
{
    char buf[512];
    if (lseek(k->mem_fd, 0, SEEK_SET) != 0 || read(k->mem_fd, buf, sizeof buf - 1) <= 0)
        return k->mem_high;
    buf[sizeof buf - 1] = '\0';
    const char *h = strstr(buf, "high ");
    return h ? strtoull(h + 5, NULL, 10) : k->mem_high;
}

static int64_t usage_of(const kernel *k)
{
    char f[300], buf[64];
    snprintf(f, sizeof f, "%s/%s", k->mem_dir, k->mem_ver == 1 ? "memory.usage_in_bytes" : "memory.current");
    return read_text(f, buf, sizeof buf) == 0 ? strtoll(buf, NULL, 10) : -1;
}

void abx_kmem_disarm(kernel *k)
{
    if (k->mem_fd >= 0)
        close(k->mem_fd);
    k->mem_fd = -1;
    k->mem_ver = 0;
}

int abx_kmem_arm(kernel *k, pid_t pid, int64_t limit)
{
    abx_kmem_disarm(k);
    k->mem_limit = limit;
    if (limit <= 0)
        return 0;
    int ver = find_cgroup(pid, k->mem_dir, sizeof k->mem_dir);
    if (!ver)
        return 0;
    int64_t margin = limit / 10 > (16 << 20) ? limit / 10 : (16 << 20);
    k->mem_threshold = limit > 2 * margin ? limit - margin : limit / 2;
    char f[300], val[96];
    if (ver == 2) {
        snprintf(f, sizeof f, "%s/memory.high", k->mem_dir);
        snprintf(val, sizeof val, "%" PRId64, k->mem_threshold);
        if (write_text(f, val) != 0)
            return -1;
        snprintf(f, sizeof f, "%s/memory.events", k->mem_dir);
        if ((k->mem_fd = open(f, O_RDONLY | O_CLOEXEC)) < 0)
            return -1;
        k->mem_ver = 2;
        k->mem_high = 0;
        k->mem_high = v2_high_count(k);
        return 1;
    }
    int efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    snprintf(f, sizeof f, "%s/memory.usage_in_bytes", k->mem_dir);
    int ufd = efd >= 0 ? open(f, O_RDONLY | O_CLOEXEC) : -1;
    snprintf(f, sizeof f, "%s/cgroup.event_control", k->mem_dir);
    snprintf(val, sizeof val, "%d %d %" PRId64, efd, ufd, k->mem_threshold);
    int rc = ufd >= 0 ? write_text(f, val) : -1;
    if (ufd >= 0)
        close(ufd);
    if (rc != 0) {
        if (efd >= 0)
            close(efd);
        return -1;
    }
    k->mem_fd = efd;
    k->mem_ver = 1;
    return 1;
}

short abx_kmem_events(const kernel *k) { return k->mem_ver == 2 ? ZMQ_POLLPRI | ZMQ_POLLERR : ZMQ_POLLIN; }

/* Forget what happened between cells: only a crossing while a cell runs counts. */
void abx_kmem_reset(kernel *k)
{
    if (k->mem_ver == 1) {
        uint64_t v;
        while (read(k->mem_fd, &v, sizeof v) == sizeof v) {
        }
    } else if (k->mem_ver == 2) {
        k->mem_high = v2_high_count(k);
    }
}

bool abx_kmem_fired(kernel *k)
{
    if (k->mem_ver == 1) {
        uint64_t v;
        bool ev = read(k->mem_fd, &v, sizeof v) == sizeof v;
        return ev && usage_of(k) >= k->mem_threshold;
    }
    if (k->mem_ver == 2) {
        uint64_t h = v2_high_count(k);
        bool more = h > k->mem_high;
        k->mem_high = h;
        return more;
    }
    return false;
}

json_t *abx_kmem_json(const kernel *k)
{
    return json_pack("{s:I, s:I, s:I, s:i}", "memory_limit", (json_int_t)k->mem_limit, "threshold",
                     (json_int_t)k->mem_threshold, "usage_bytes", (json_int_t)usage_of(k), "cgroup_version",
                     k->mem_ver);
}
