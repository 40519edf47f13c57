/* metrics.c — counters for GET /metrics in the Prometheus text format: requests by op
 * and status, latency histograms by op, denials by error code, connections in use.
 * Lock-free: relaxed atomic adds into arrays sized when the server starts. */
#include "pipeline/pipeline.h"
#include "sandbox/egress_box.h"
#include <stdio.h>
#include <string.h>

static const int statuses[] = {200, 201, 202, 204, 206, 400, 401, 403, 404, 405, 408, 409, 413, 415, 429, 500, 502, 503};
#define N_STATUS (ABX_ARRAY_LEN(statuses) + 1) /* + "other" */
static const double buckets_ms[] = {0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000};
#define N_BUCKETS ABX_ARRAY_LEN(buckets_ms)

struct abx_metrics {
    size_t n_ops;            /* rows: one per op plus one for "no op" (unknown/unauthenticated) */
    atomic_ullong *by_status;  /* [(n_ops+1) * N_STATUS] */
    atomic_ullong *hist;       /* [(n_ops+1) * (N_BUCKETS+1)] cumulative at render */
    atomic_ullong *sum_us;     /* [(n_ops+1)] */
    atomic_ullong errors[ABX_E__COUNT];
};

abx_metrics *abx_metrics_new(size_t n_ops)
{
    abx_metrics *m = abx_calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->n_ops = n_ops;
    m->by_status = abx_calloc((n_ops + 1) * N_STATUS, sizeof *m->by_status);
    m->hist = abx_calloc((n_ops + 1) * (N_BUCKETS + 1), sizeof *m->hist);
    m->sum_us = abx_calloc(n_ops + 1, sizeof *m->sum_us);
    if (!m->by_status || !m->hist || !m->sum_us) {
        abx_metrics_free(m);
        return NULL;
    }
    return m;
}

void abx_metrics_free(abx_metrics *m)
{
    if (!m)
        return;
    abx_free(m->by_status);
    abx_free(m->hist);
    abx_free(m->sum_us);
    abx_free(m);
}

void abx_metrics_observe(abx_metrics *m, size_t op_index, bool has_op, int status, abx_err err, int64_t dur_us)
{
    if (!m)
        return;
    size_t row = has_op && op_index < m->n_ops ? op_index : m->n_ops;
    size_t si = N_STATUS - 1;
    for (size_t i = 0; i < ABX_ARRAY_LEN(statuses); i++)
        if (statuses[i] == status)
            si = i;
    atomic_fetch_add_explicit(&m->by_status[row * N_STATUS + si], 1, memory_order_relaxed);
    double ms = (double)dur_us / 1000.0;
    size_t b = N_BUCKETS;
    for (size_t i = 0; i < N_BUCKETS; i++)
        if (ms <= buckets_ms[i]) {
            b = i;
            break;
        }
    atomic_fetch_add_explicit(&m->hist[row * (N_BUCKETS + 1) + b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->sum_us[row], (unsigned long long)(dur_us > 0 ? dur_us : 0), memory_order_relaxed);
    if (err > ABX_OK && err < ABX_E__COUNT)
        atomic_fetch_add_explicit(&m->errors[err], 1, memory_order_relaxed);
}

char *abx_metrics_render(abx_metrics *m, const abx_registry *reg, const abx_conn_metrics *cm, size_t *len)
{
    abx_buf b;
    abx_buf_init(&b, 0);
    abx_buf_puts(&b, "# HELP abx_requests_total Requests by operation and HTTP status.\n"
                     "# TYPE abx_requests_total counter\n");
    for (size_t row = 0; row <= m->n_ops; row++) {
        const char *op = row < m->n_ops ? abx_registry_at(reg, row)->id : "";
        for (size_t s = 0; s < N_STATUS; s++) {
            unsigned long long v = atomic_load_explicit(&m->by_status[row * N_STATUS + s], memory_order_relaxed);
            if (!v)
                continue;
            if (s < N_STATUS - 1)
                abx_buf_printf(&b, "abx_requests_total{op=\"%s\",status=\"%d\"} %llu\n", op, statuses[s], v);
            else
                abx_buf_printf(&b, "abx_requests_total{op=\"%s\",status=\"other\"} %llu\n", op, v);
        }
    }
    abx_buf_puts(&b, "# HELP abx_request_duration_seconds Request latency by operation.\n"
                     "# TYPE abx_request_duration_seconds histogram\n");
    for (size_t row = 0; row <= m->n_ops; row++) {
        unsigned long long total = 0, cum = 0;
        for (size_t i = 0; i <= N_BUCKETS; i++)
            total += atomic_load_explicit(&m->hist[row * (N_BUCKETS + 1) + i], memory_order_relaxed);
        if (!total)
            continue;
        const char *op = row < m->n_ops ? abx_registry_at(reg, row)->id : "";
        for (size_t i = 0; i < N_BUCKETS; i++) {
            cum += atomic_load_explicit(&m->hist[row * (N_BUCKETS + 1) + i], memory_order_relaxed);
            abx_buf_printf(&b, "abx_request_duration_seconds_bucket{op=\"%s\",le=\"%g\"} %llu\n", op,
                           buckets_ms[i] / 1000.0, cum);
        }
        abx_buf_printf(&b, "abx_request_duration_seconds_bucket{op=\"%s\",le=\"+Inf\"} %llu\n", op, total);
        abx_buf_printf(&b, "abx_request_duration_seconds_sum{op=\"%s\"} %.6f\n", op,
                       (double)atomic_load_explicit(&m->sum_us[row], memory_order_relaxed) / 1e6);
        abx_buf_printf(&b, "abx_request_duration_seconds_count{op=\"%s\"} %llu\n", op, total);
    }
    abx_buf_puts(&b, "# HELP abx_errors_total Error replies (denials included) by error code.\n"
                     "# TYPE abx_errors_total counter\n");
    for (int e = 1; e < ABX_E__COUNT; e++) {
        unsigned long long v = atomic_load_explicit(&m->errors[e], memory_order_relaxed);
        if (v)
            abx_buf_printf(&b, "abx_errors_total{code=\"%s\"} %llu\n", abx_err_code((abx_err)e), v);
    }
    abx_buf_printf(&b, "# HELP abx_connections Open client connections.\n# TYPE abx_connections gauge\n"
                       "abx_connections %d\n", cm->open);
    abx_buf_printf(&b,
                   "# HELP abx_connections_unauthenticated Open connections that have not authenticated yet.\n"
                   "# TYPE abx_connections_unauthenticated gauge\nabx_connections_unauthenticated %d\n"
                   "# HELP abx_workers_busy Blocking calls running or queued on the worker pool.\n"
                   "# TYPE abx_workers_busy gauge\nabx_workers_busy %d\n"
                   "# HELP abx_streams Streamed replies in flight.\n# TYPE abx_streams gauge\nabx_streams %d\n"
                   "# HELP abx_connections_opened_total Connections accepted.\n"
                   "# TYPE abx_connections_opened_total counter\nabx_connections_opened_total %llu\n"
                   "# HELP abx_connections_closed_total Connections closed, by reason (all: every close).\n"
                   "# TYPE abx_connections_closed_total counter\n"
                   "abx_connections_closed_total{reason=\"all\"} %llu\n"
                   "abx_connections_closed_total{reason=\"slow_headers\"} %llu\n"
                   "abx_connections_closed_total{reason=\"read_timeout\"} %llu\n"
                   "abx_connections_closed_total{reason=\"client_gone\"} %llu\n"
                   "# HELP abx_connections_refused_total Connections refused, by reason.\n"
                   "# TYPE abx_connections_refused_total counter\n"
                   "abx_connections_refused_total{reason=\"per_address\"} %llu\n"
                   "abx_connections_refused_total{reason=\"busy\"} %llu\n",
                   cm->unauthenticated, cm->workers_busy, cm->streams, cm->opened, cm->closed, cm->closed_slow,
                   cm->closed_timeout, cm->aborted, cm->refused_address, cm->refused_busy);
    uint64_t eg_allow, eg_deny;
    abx_egress_counts(&eg_allow, &eg_deny);
    abx_buf_printf(&b,
                   "# HELP abx_egress_connections_total Connections through the egress proxies, by decision.\n"
                   "# TYPE abx_egress_connections_total counter\n"
                   "abx_egress_connections_total{decision=\"allow\"} %llu\n"
                   "abx_egress_connections_total{decision=\"deny\"} %llu\n",
                   (unsigned long long)eg_allow, (unsigned long long)eg_deny);
    *len = b.len;
    return abx_buf_detach(&b);
}
