/* ports.c — the ports namespace: the servers the caller's processes listen on
 * (ports.list) and an HTTP reverse proxy to them (ports.proxy, /ports/{port}/{rest*}, any method).
 *
 * A listening socket counts when a process of the caller (one it started, or any process
 * in that process's session) holds it: its inode is among the process's fds and in
 * /proc/PID/net/tcp{,6} in LISTEN, read through that process, so inside its own network
 * namespace. The proxy connects only to such a socket, at its own address (loopback for
 * a wildcard bind) and inside the owner's network namespace: a worker thread enters it
 * (setns on that thread only) to make the connection (ports_proxy.c). Nothing else is
 * reachable. */
#include "builtin/builtin.h"
#include "builtin/ports.h"
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define MAX_PIDS 512
#define MAX_INODES 1024
#define PROXY_MAX_BYTES (64 * 1024 * 1024)


/* Every pid whose session is one of the caller's processes (the process itself first). */
static size_t session_pids(const int *roots, size_t n_roots, int *pids, int *root_of, size_t max)
{
    size_t n = 0;
    DIR *d = opendir("/proc");
    if (!d)
        return 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && n < max) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        if (*end || pid <= 0)
            continue;
        char path[64], buf[512];
        snprintf(path, sizeof path, "/proc/%ld/stat", pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        ssize_t k = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (k <= 0)
            continue;
        buf[k] = '\0';
        const char *rp = strrchr(buf, ')'); /* comm may hold spaces and parens */
        int ppid = 0, pgrp = 0, sid = 0;
        char state;
        if (!rp || sscanf(rp + 1, " %c %d %d %d", &state, &ppid, &pgrp, &sid) != 4)
            continue;
        for (size_t i = 0; i < n_roots; i++)
            if (sid == roots[i] || pid == roots[i]) {
                pids[n] = (int)pid;
                root_of[n++] = roots[i];
                break;
            }
    }
    closedir(d);
    return n;
}

static size_t socket_inodes(int pid, unsigned long *inodes, size_t max)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd", pid);
    DIR *d = opendir(path);
    if (!d)
        return 0;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && n < max) {
        char link[64], target[64];
        snprintf(link, sizeof link, "/proc/%d/fd/%s", pid, e->d_name);
        ssize_t k = readlink(link, target, sizeof target - 1);
        if (k <= 0)
            continue;
        target[k] = '\0';
        unsigned long ino;
        if (sscanf(target, "socket:[%lu]", &ino) == 1)
            inodes[n++] = ino;
    }
    closedir(d);
    return n;
}

/* LISTEN entries of /proc/PID/net/tcp{,6} (that process's namespace) held by inodes. */
static void scan_table(int pid, int root, int family, const unsigned long *inodes, size_t n_in, listener **out,
                       size_t *n, size_t *cap)
{
    char path[64], line[512];
    snprintf(path, sizeof path, "/proc/%d/net/%s", pid, family == AF_INET ? "tcp" : "tcp6");
    FILE *f = fopen(path, "re");
    if (!f)
        return;
    while (fgets(line, sizeof line, f)) {
        char local[64];
        unsigned port, st;
        unsigned long ino;
        if (sscanf(line, " %*d: %63[0-9A-Fa-f]:%x %*64[0-9A-Fa-f]:%*x %x %*x:%*x %*x:%*x %*x %*d %*d %lu", local,
                   &port, &st, &ino) != 4 ||
            st != 0x0A)
            continue;
        bool mine = false;
        for (size_t i = 0; i < n_in && !mine; i++)
            mine = inodes[i] == ino;
        if (!mine)
            continue;
        if (*n == *cap) {
            size_t nc = *cap ? *cap * 2 : 8;
            listener *g = abx_realloc(*out, nc * sizeof *g);
            if (!g)
                break;
            *out = g;
            *cap = nc;
        }
        listener *l = &(*out)[(*n)++];
        memset(l, 0, sizeof *l);
        l->port = (int)port;
        l->family = family;
        l->pid = pid;
        l->root = root;
        l->inode = ino;
        /* the kernel prints each 32-bit word in host order */
        for (int w = 0; w < (family == AF_INET ? 1 : 4); w++) {
            unsigned v;
            char word[9];
            memcpy(word, local + 8 * w, 8);
            word[8] = '\0';
            sscanf(word, "%x", &v);
            memcpy(l->addr + 4 * w, &v, 4);
        }
    }
    fclose(f);
}

/* Every listening socket of the caller's running processes. want > 0 (the proxy): look
 * at the started processes themselves first, and through their whole sessions (a scan
 * of /proc) only when none of them holds that port. */
static size_t collect(abx_ctx *ctx, listener **out, int want)
{
    *out = NULL;
    abx_proc **procs;
    size_t np = abx_procs_list(abx_ctx_procs(ctx), abx_ctx_principal(ctx), &procs);
    int roots[MAX_PIDS];
    size_t nr = 0;
    for (size_t i = 0; i < np; i++) {
        if (abx_proc_running(procs[i]) && nr < MAX_PIDS)
            roots[nr++] = abx_proc_pid(procs[i]);
        abx_proc_unref(procs[i]);
    }
    abx_free(procs);
    if (!nr)
        return 0;
    int *pids = abx_calloc(MAX_PIDS, sizeof *pids), *root_of = abx_calloc(MAX_PIDS, sizeof *root_of);
    unsigned long *inodes = abx_calloc(MAX_INODES, sizeof *inodes);
    size_t n = 0, cap = 0;
    for (size_t i = 0; want > 0 && inodes && i < nr; i++) {
        size_t ni = socket_inodes(roots[i], inodes, MAX_INODES);
        scan_table(roots[i], roots[i], AF_INET, inodes, ni, out, &n, &cap);
        scan_table(roots[i], roots[i], AF_INET6, inodes, ni, out, &n, &cap);
    }
    for (size_t i = 0; i < n; i++)
        if ((*out)[i].port == want)
            goto done;
    n = 0;
    if (pids && root_of && inodes) {
        size_t npid = session_pids(roots, nr, pids, root_of, MAX_PIDS);
        for (size_t i = 0; i < npid; i++) {
            size_t ni = socket_inodes(pids[i], inodes, MAX_INODES);
            if (!ni)
                continue;
            scan_table(pids[i], root_of[i], AF_INET, inodes, ni, out, &n, &cap);
            scan_table(pids[i], root_of[i], AF_INET6, inodes, ni, out, &n, &cap);
        }
    }
done:
    abx_free(pids);
    abx_free(root_of);
    abx_free(inodes);
    return n;
}

/* ---- the proxy's cache of found listeners ----
 * Finding a listener reads /proc/PID/net/tcp{,6}, which is the whole host's table when
 * the process shares abx's namespace (tens of ms on a busy host). The proxy keeps what
 * it found for CACHE_TTL_MS, keyed by principal and port, and trusts an entry only while
 * its started process is still one of the caller's running processes and the holding
 * process still has that very socket among its fds (a cheap /proc/PID/fd walk); anything
 * else falls back to the full search. */
#define CACHE_SLOTS 64
#define CACHE_TTL_MS 5000

typedef struct cache_entry {
    char principal[64];
    int port;
    int64_t expires;
    listener l;
} cache_entry;

static cache_entry g_cache[CACHE_SLOTS];
static pthread_mutex_t g_cache_mu = PTHREAD_MUTEX_INITIALIZER;

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static bool holds_inode(int pid, unsigned long inode)
{
    unsigned long *inodes = abx_calloc(MAX_INODES, sizeof *inodes);
    if (!inodes)
        return false;
    size_t n = socket_inodes(pid, inodes, MAX_INODES);
    bool hit = false;
    for (size_t i = 0; i < n && !hit; i++)
        hit = inodes[i] == inode;
    abx_free(inodes);
    return hit;
}

static bool root_running(abx_ctx *ctx, int root)
{
    abx_proc **procs;
    size_t np = abx_procs_list(abx_ctx_procs(ctx), abx_ctx_principal(ctx), &procs);
    bool hit = false;
    for (size_t i = 0; i < np; i++) {
        if (!hit && abx_proc_running(procs[i]) && abx_proc_pid(procs[i]) == root)
            hit = true;
        abx_proc_unref(procs[i]);
    }
    abx_free(procs);
    return hit;
}

static bool cache_get(abx_ctx *ctx, int port, listener *out)
{
    const char *who = abx_ctx_principal(ctx);
    bool found = false;
    int64_t now = now_ms();
    pthread_mutex_lock(&g_cache_mu);
    for (size_t i = 0; i < CACHE_SLOTS && !found; i++)
        if (g_cache[i].port == port && g_cache[i].expires > now && who && strcmp(g_cache[i].principal, who) == 0) {
            *out = g_cache[i].l;
            found = true;
        }
    pthread_mutex_unlock(&g_cache_mu);
    return found && root_running(ctx, out->root) && holds_inode(out->pid, out->inode);
}

static void cache_put(abx_ctx *ctx, int port, const listener *l)
{
    const char *who = abx_ctx_principal(ctx);
    if (!who || strlen(who) >= sizeof g_cache[0].principal)
        return;
    int64_t now = now_ms();
    pthread_mutex_lock(&g_cache_mu);
    size_t slot = 0;
    for (size_t i = 0; i < CACHE_SLOTS; i++) {
        if ((g_cache[i].port == port && strcmp(g_cache[i].principal, who) == 0) || g_cache[i].expires <= now) {
            slot = i;
            break;
        }
        if (g_cache[i].expires < g_cache[slot].expires)
            slot = i;
    }
    snprintf(g_cache[slot].principal, sizeof g_cache[slot].principal, "%s", who);
    g_cache[slot].port = port;
    g_cache[slot].expires = now + CACHE_TTL_MS;
    g_cache[slot].l = *l;
    pthread_mutex_unlock(&g_cache_mu);
}

static abx_err ports_list(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    (void)args;
    listener *ls;
    size_t n = collect(ctx, &ls, 0);
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++) {
        char text[INET6_ADDRSTRLEN];
        inet_ntop(ls[i].family, ls[i].addr, text, sizeof text);
        json_array_append_new(arr, json_pack("{s:i, s:s, s:s, s:i, s:i, s:s}", "port", ls[i].port, "address", text,
                                             "family", ls[i].family == AF_INET ? "ipv4" : "ipv6", "pid", ls[i].pid,
                                             "process", ls[i].root, "path", ""));
        char path[32];
        snprintf(path, sizeof path, "/ports/%d/", ls[i].port);
        json_object_set_new(json_array_get(arr, json_array_size(arr) - 1), "path", json_string(path));
    }
    abx_free(ls);
    abx_reply_json(r, json_pack("{s:o}", "ports", arr));
    return ABX_OK;
}

static abx_err ports_proxy(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    int port = (int)json_integer_value(json_object_get(args, "port"));
    const char *rest = json_string_value(json_object_get(args, "rest"));
    listener found;
    if (!cache_get(ctx, port, &found)) {
        listener *ls;
        size_t n = collect(ctx, &ls, port);
        const listener *hit = NULL;
        for (size_t i = 0; i < n && !hit; i++)
            if (ls[i].port == port)
                hit = &ls[i];
        if (hit) {
            found = *hit;
            cache_put(ctx, port, hit);
        }
        abx_free(ls);
        if (!hit)
            return abx_reply_error(r, ABX_E_PORTS_NOT_FOUND, NULL, "none of your processes listens on port %d", port);
    }
    return abx_ports_relay(ctx, &found, port, rest ? rest : "", r);
}

/* A browser's way to a port: a single-use ticket that signs it in on the port's own
 * origin, p<port>.<name> (pipeline/port_origin.c turns it into a session cookie). */
static abx_err ports_ticket(abx_ctx *ctx, const json_t *args, abx_reply *r)
{
    int port = (int)json_integer_value(json_object_get(args, "port"));
    char tk[65];
    int64_t ttl = 0;
    if (abx_ctx_ticket_issue(ctx, -port, tk, &ttl) != 0)
        return abx_reply_error(r, ABX_E_LIMIT_CONCURRENCY, NULL, "too many tickets outstanding; retry shortly");
    abx_server_facts f;
    abx_ctx_server_facts(ctx, &f);
    json_t *out = json_pack("{s:i, s:s, s:i, s:o, s:o}", "port", port, "ticket", tk, "expires_in", (int)(ttl / 1000),
                            "path", json_sprintf("/?abx_ticket=%s", tk), "host",
                            json_sprintf("p%d.localhost:%d", port, f.port));
    /* the URL a browser on this machine opens; elsewhere p<port>.<an allowed host name> */
    json_object_set_new(out, "url", json_sprintf("%s://p%d.localhost:%d/?abx_ticket=%s", f.tls ? "https" : "http",
                                                 port, f.port, tk));
    explicit_bzero(tk, sizeof tk);
    abx_reply_json(r, out);
    return ABX_OK;
}

static const abx_param ticket_params[] = {
    {"port", ABX_T_INT, .required = true, ABX_RANGE(1, 65535), .kind = ABX_KIND_PORT,
     .doc = "The port a browser should reach (on its own origin p<port>.<host>)"},
    {0},
};

static const abx_param proxy_params[] = {
    {"port", ABX_T_INT, .required = true, ABX_RANGE(1, 65535), .kind = ABX_KIND_PORT,
     .doc = "A port one of the caller's processes listens on"},
    {"rest", ABX_T_STRING, .dflt = "\"\"", .doc = "The URL path below the server's root (the query string follows as is)"},
    {0},
};

/* the result of ports.list */
static const abx_param port_fields[] = {
    {"port", ABX_T_INT, .required = true},
    {"address", ABX_T_STRING, .required = true},
    {"family", ABX_T_ENUM, .required = true, .choices = "ipv4|ipv6"},
    {"pid", ABX_T_INT, .required = true},
    {"process", ABX_T_INT, .required = true, .doc = "The pid of the caller's process it belongs to (pid may be a child of it)"},
    {"path", ABX_T_STRING, .required = true, .doc = "Proxy path: /ports/{port}/"},
    {0},
};

static const abx_param ports_list_result[] = {
    {"ports", ABX_T_LIST, ABX_T_OBJECT, .required = true, .fields = port_fields},
    {0},
};

static const abx_param ports_ticket_result[] = {
    {"port", ABX_T_INT, .required = true},
    {"ticket", ABX_T_STRING, .required = true, .doc = "Single use"},
    {"expires_in", ABX_T_INT, .required = true, .doc = "Seconds"},
    {"path", ABX_T_STRING, .required = true, .doc = "/?abx_ticket=... on the port's own origin"},
    {"host", ABX_T_STRING, .required = true, .doc = "p<port>.localhost:<abx port>"},
    {"url", ABX_T_STRING, .required = true, .doc = "The URL a browser on this machine opens"},
    {0},
};

static const abx_op_def ports_ops[] = {
    {.id = "ports.list", .result = ports_list_result, .effects = ABX_EFF_READ,
     .summary = "TCP ports the caller's processes (and their children) listen on, in their own network namespaces.",
     .http = {"GET /ports"}, .since = "0.2", .handler = ports_list},
    {.id = "ports.proxy", .effects = ABX_EFF_NET,
     .summary = "HTTP relayed to a server one of the caller's processes listens on (any method, /ports/{port}/...).",
     .http = {"GET /ports/{port}/{rest*}", "POST /ports/{port}/{rest*}", "PUT /ports/{port}/{rest*}",
              "PATCH /ports/{port}/{rest*}", "DELETE /ports/{port}/{rest*}", "HEAD /ports/{port}/{rest*}",
              "OPTIONS /ports/{port}/{rest*}"}, .params = proxy_params, .since = "0.2", .raw_query = true,
     .errors = "ports.not_found ports.upstream_failed", .handler = ports_proxy},
    {.id = "ports.ticket", .result = ports_ticket_result, .effects = ABX_EFF_NET,
     .summary = "A single-use ticket (30 s) that signs a browser in on the port's own origin, "
                "http://p{port}.localhost:{abx port}/?abx_ticket=...: a session cookie for that port only.",
     .http = {"POST /ports/ticket/{port}"}, .params = ticket_params, .since = "0.2",
     .errors = "limit.concurrency", .handler = ports_ticket},
    {0},
};

const abx_namespace abx_ns_ports = {.name = "ports", .ops = ports_ops};
