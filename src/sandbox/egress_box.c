/* egress_box.c — one process's egress proxy with owned copies of what it decides on
 * (egress_box.h). */
#include "sandbox/egress_box.h"
#include "core/util.h"
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

struct abx_egress_box {
    abx_egress_allow allow;
    abx_egress_resolver res;
    abx_egress_sink sink;
    abx_egress *proxy;
};

static atomic_uint_fast64_t n_allowed, n_denied;

void abx_egress_counts(uint64_t *allowed, uint64_t *denied)
{
    *allowed = (uint64_t)atomic_load(&n_allowed);
    *denied = (uint64_t)atomic_load(&n_denied);
}

static void on_record(const abx_egress_record *rec, void *ctx)
{
    abx_egress_box *b = ctx;
    atomic_fetch_add(rec->allowed ? &n_allowed : &n_denied, 1);
    if (b->sink.fn)
        b->sink.fn(rec, b->sink.ctx);
}

static int copy_allow(abx_egress_allow *to, const abx_egress_allow *from, char *err, size_t errlen)
{
    for (size_t i = 0; i < from->n; i++)
        if (abx_egress_allow_add(to, from->rules[i].text, err, errlen) != 0)
            return -1;
    return 0;
}

static int copy_resolver(abx_egress_resolver *to, const abx_egress_resolver *from)
{
    if (!from || !from->n)
        return 0;
    if (!(to->pins = abx_calloc(from->n, sizeof *to->pins)))
        return -1;
    for (size_t i = 0; i < from->n; i++) {
        to->pins[i] = from->pins[i];
        to->pins[i].host = abx_strdup(from->pins[i].host);
        to->n = i + 1;
        if (!to->pins[i].host)
            return -1;
    }
    return 0;
}

static void box_free(abx_egress_box *b)
{
    abx_egress_allow_free(&b->allow);
    abx_egress_resolver_free(&b->res);
    if (b->sink.ctx_free)
        b->sink.ctx_free(b->sink.ctx);
    abx_free(b);
}

abx_egress_box *abx_egress_box_start(int listen_fd, const abx_egress_allow *allow, const abx_egress_resolver *res,
                                     abx_egress_sink sink, char *err, size_t errlen)
{
    abx_egress_box *b = abx_calloc(1, sizeof *b);
    if (!b) {
        close(listen_fd);
        if (sink.ctx_free)
            sink.ctx_free(sink.ctx);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    b->sink = sink;
    err[0] = '\0';
    if (copy_allow(&b->allow, allow, err, errlen) != 0 || copy_resolver(&b->res, res) != 0) {
        if (!err[0])
            snprintf(err, errlen, "out of memory");
        close(listen_fd);
        box_free(b);
        return NULL;
    }
    abx_egress_config cfg = {
        .allow = &b->allow, .resolver = &b->res, .system_dns = true, .record = on_record, .ctx = b};
    if (!(b->proxy = abx_egress_start(listen_fd, &cfg))) { /* it closed the fd */
        snprintf(err, errlen, "the egress proxy cannot start: %s", strerror(errno));
        box_free(b);
        return NULL;
    }
    return b;
}

void abx_egress_box_stop(abx_egress_box *b)
{
    if (!b)
        return;
    abx_egress_stop(b->proxy);
    box_free(b);
}
