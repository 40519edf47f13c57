/* fuzz_router.c — libFuzzer target for the trie router (src/http/router.c).
 *
 * A fixed registry with overlapping literal and variable bindings is frozen and its
 * router built once. The input is "METHOD path" (method up to the first space, path =
 * every remaining byte, NULs included). abx_router_match must never crash, and every
 * answer is checked against a naive reference that matches the path against every
 * binding segment by segment:
 *  - FOUND: the op has a binding with that method that matches; the variables are
 *    exactly that binding's {names}, each value non-empty, without '/', pointing into
 *    the path at the right segment; and no other matching binding of that method is
 *    more specific (literal segments beat variables, compared left to right);
 *  - WRONG_METHOD: no binding with that method matches, some binding with another
 *    method does, and every listed method/op is really bound on a matching binding;
 *  - NONE: no binding of any method matches.
 * The reference must stay independent of router.c. No root binding ("GET /") is in
 * the table: that one is a known bug (tests/unit/test_router.c).
 * Paths under /r/ meet a {rest*} binding (the rest of the path, slashes and all) beside
 * a literal one; their reference is rest_check: "/r/X/lit" the literal, any other
 * "/r/X/..." (X non-empty) the rest binding with everything after "/r/X/", else none. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_INPUT 2048

static abx_err ok_handler(abx_ctx *ctx, const json_t *args, abx_reply *reply)
{
    (void)ctx;
    (void)args;
    (void)reply;
    return ABX_OK;
}

static const abx_param params[] = {
    {.name = "pid", .type = ABX_T_INT}, {.name = "x", .type = ABX_T_STRING}, {.name = "y", .type = ABX_T_STRING},
    {.name = "name", .type = ABX_T_STRING}, {.name = "a", .type = ABX_T_STRING}, {.name = "b", .type = ABX_T_STRING},
    {.name = "p", .type = ABX_T_STRING}, {.name = "q", .type = ABX_T_STRING}, {.name = "r", .type = ABX_T_STRING},
    {0},
};

#define OP(ID, ...) {.id = (ID), .effects = ABX_EFF_READ, .http = {__VA_ARGS__}, .params = params, .handler = ok_handler}

static const abx_op_def ops[] = {
    OP("fz.proc.list", "GET /process/list"),
    OP("fz.proc.get", "GET /process/{pid}"),
    OP("fz.proc.write", "POST /process/{pid}/stdin", "PUT /process/{pid}/stdin"),
    OP("fz.proc.delete", "DELETE /process/{pid}"),
    OP("fz.abc.get", "GET /a/b/c"),
    OP("fz.axc.get", "GET /a/{x}/c"),
    OP("fz.aby.get", "GET /a/b/{y}"),
    OP("fz.axy.create", "POST /a/{x}/{y}"),
    OP("fz.files.delete", "DELETE /files"),
    OP("fz.files.put", "PUT /files/{name}"),
    OP("fz.files.read", "GET /files/read"),
    OP("fz.files.meta", "GET /files/{name}/meta", "PATCH /files/{name}/meta"),
    OP("fz.uv.get", "GET /u/{a}/v/{b}"),
    OP("fz.pqr.update", "PATCH /x/{p}/{q}/{r}"),
    OP("fz.deep.get", "GET /d/e/e/p/l/y/n/e/s/t/e/d"),
    OP("fz.rest.get", "GET /r/{x}/{y*}"),
    OP("fz.rlit.get", "GET /r/{x}/lit"),
    {0},
};

static abx_registry *reg;
static abx_router *router;

static void fail(const char *what, const char *method, const char *path, size_t plen)
{
    fprintf(stderr, "fuzz_router: %s\n  method: \"%s\"\n  path: \"", what, method);
    for (size_t i = 0; i < plen; i++) {
        unsigned char c = (unsigned char)path[i];
        fprintf(stderr, (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') ? "%c" : "\\x%02x", c);
    }
    fprintf(stderr, "\"\n");
    abort();
}

static void init(void)
{
    if (router)
        return;
    char err[256];
    reg = abx_registry_new(NULL);
    if (!reg || abx_registry_add(reg, ops, err, sizeof err) != 0) {
        fprintf(stderr, "fuzz_router: setup: %s\n", err);
        abort();
    }
    abx_registry_freeze(reg);
    router = abx_router_build(reg);
    if (!router)
        abort();
}

/* ---- reference ---- */

#define MAX_SEGS 64

typedef struct segs {
    size_t n;
    const char *s[MAX_SEGS];
    size_t len[MAX_SEGS];
} segs;

/* Split "/a/b" into segments; false if it does not start with '/', has an empty
 * segment, or too many. "" and "/" have no usable form here (no root binding). */
static bool split(const char *p, size_t n, segs *out)
{
    out->n = 0;
    if (n == 0 || p[0] != '/')
        return false;
    size_t i = 1, start = 1;
    for (;; i++) {
        if (i == n || p[i] == '/') {
            if (i == start || out->n == MAX_SEGS)
                return false;
            out->s[out->n] = p + start;
            out->len[out->n++] = i - start;
            if (i == n)
                return true;
            start = i + 1;
        }
    }
}

/* Does binding path bp match? kinds[k] = 1 for a variable segment. */
static bool ref_match(const char *bp, const segs *ps, int *kinds)
{
    segs bs;
    if (!split(bp, strlen(bp), &bs) || bs.n != ps->n)
        return false;
    for (size_t k = 0; k < bs.n; k++) {
        bool var = bs.s[k][0] == '{';
        kinds[k] = var;
        if (!var && (bs.len[k] != ps->len[k] || memcmp(bs.s[k], ps->s[k], bs.len[k]) != 0))
            return false;
    }
    return true;
}

/* -1 if a is more specific than b (literal earlier), 0 equal, 1 less */
static int cmp_kinds(const int *a, const int *b, size_t n)
{
    for (size_t k = 0; k < n; k++)
        if (a[k] != b[k])
            return a[k] < b[k] ? -1 : 1;
    return 0;
}

static void rest_check(const char *method, const char *path, size_t plen, enum abx_route_result r,
                       const abx_route_match *m)
{
    const char *x = path + 3, *end = path + plen;
    const char *slash = memchr(x, '/', (size_t)(end - x));
    if (!slash || slash == x) {
        if (r != ABX_ROUTE_NONE)
            fail("/r/ path without /r/X/ routed", method, path, plen);
        return;
    }
    const char *rest = slash + 1;
    size_t rl = (size_t)(end - rest);
    bool lit = rl == 3 && memcmp(rest, "lit", 3) == 0;
    if (strcmp(method, "GET") != 0) {
        if (r != ABX_ROUTE_WRONG_METHOD || m->n_others != 1 || strcmp(m->others[0].method, "GET") != 0)
            fail("/r/X/... with another method is not WRONG_METHOD [GET]", method, path, plen);
        return;
    }
    if (r != ABX_ROUTE_FOUND || strcmp(m->op->id, lit ? "fz.rlit.get" : "fz.rest.get") != 0)
        fail("/r/X/... not routed to its binding", method, path, plen);
    if (m->n_vars != (lit ? 1u : 2u) || strcmp(m->vars[0].name, "x") != 0 || m->vars[0].val != x ||
        m->vars[0].len != (size_t)(slash - x))
        fail("/r/X/...: X is not the first variable", method, path, plen);
    if (!lit && (strcmp(m->vars[1].name, "y") != 0 || m->vars[1].val != rest || m->vars[1].len != rl))
        fail("/r/X/...: the rest variable is not the rest of the path", method, path, plen);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > MAX_INPUT)
        return 0;
    init();
    char method[16];
    size_t ml = 0;
    while (ml < size && data[ml] != ' ' && ml < sizeof method - 1)
        ml++;
    if (ml < size && data[ml] != ' ')
        return 0; /* method too long */
    memcpy(method, data, ml);
    method[ml] = '\0';
    if (memchr(method, '\0', ml))
        return 0;
    const char *path = ml < size ? (const char *)data + ml + 1 : "";
    size_t plen = ml < size ? size - ml - 1 : 0;
    /* the path in its own exactly-sized heap block, so reads past plen are caught */
    char *pcopy = malloc(plen ? plen : 1);
    if (!pcopy)
        return 0;
    memcpy(pcopy, path, plen);

    abx_route_match m;
    enum abx_route_result r = abx_router_match(router, method, pcopy, plen, &m);

    if (plen >= 3 && memcmp(pcopy, "/r/", 3) == 0) {
        rest_check(method, pcopy, plen, r, &m);
        free(pcopy);
        return 0;
    }
    segs ps;
    bool splittable = split(pcopy, plen, &ps);
    /* reference: best binding for this method, and whether any method matches */
    bool any_method = false, this_method = false;
    int best_kinds[MAX_SEGS], kinds[MAX_SEGS];
    for (size_t i = 0; splittable && i < abx_registry_count(reg); i++) {
        const abx_op *op = abx_registry_at(reg, i);
        for (size_t b = 0; b < op->n_bindings; b++) {
            if (!ref_match(op->bindings[b].path, &ps, kinds))
                continue;
            any_method = true;
            if (strcmp(op->bindings[b].method, method) == 0) {
                if (!this_method || cmp_kinds(kinds, best_kinds, ps.n) < 0)
                    memcpy(best_kinds, kinds, sizeof kinds);
                this_method = true;
            }
        }
    }

    if (r == ABX_ROUTE_FOUND) {
        if (!m.op || !this_method)
            fail("FOUND where no binding of this method matches", method, pcopy, plen);
        if (m.op_index != abx_registry_index_of(reg, m.op) || abx_registry_at(reg, m.op_index) != m.op)
            fail("op_index does not name the op", method, pcopy, plen);
        const abx_binding *hit = NULL;
        for (size_t b = 0; b < m.op->n_bindings && !hit; b++)
            if (strcmp(m.op->bindings[b].method, method) == 0 && ref_match(m.op->bindings[b].path, &ps, kinds))
                hit = &m.op->bindings[b];
        if (!hit)
            fail("FOUND op has no matching binding for this method", method, pcopy, plen);
        if (cmp_kinds(kinds, best_kinds, ps.n) != 0)
            fail("a more specific binding exists (literal must beat variable)", method, pcopy, plen);
        segs bs;
        split(hit->path, strlen(hit->path), &bs);
        size_t nv = 0;
        for (size_t k = 0; k < bs.n; k++) {
            if (bs.s[k][0] != '{')
                continue;
            if (nv >= m.n_vars)
                fail("a variable is missing", method, pcopy, plen);
            if (strlen(m.vars[nv].name) != bs.len[k] - 2 || memcmp(m.vars[nv].name, bs.s[k] + 1, bs.len[k] - 2) != 0)
                fail("variable name differs from the binding", method, pcopy, plen);
            if (m.vars[nv].len == 0 || memchr(m.vars[nv].val, '/', m.vars[nv].len))
                fail("variable value is empty or contains '/'", method, pcopy, plen);
            if (m.vars[nv].val != ps.s[k] || m.vars[nv].len != ps.len[k])
                fail("variable value is not its path segment", method, pcopy, plen);
            nv++;
        }
        if (nv != m.n_vars)
            fail("extra variables", method, pcopy, plen);
    } else if (r == ABX_ROUTE_WRONG_METHOD) {
        if (this_method)
            fail("WRONG_METHOD although a binding of this method matches", method, pcopy, plen);
        if (!any_method || m.n_others == 0)
            fail("WRONG_METHOD without any matching binding", method, pcopy, plen);
        if (m.op)
            fail("WRONG_METHOD with an op", method, pcopy, plen);
        for (size_t k = 0; k < m.n_others; k++) {
            if (strcmp(m.others[k].method, method) == 0)
                fail("the requested method is listed as another method", method, pcopy, plen);
            const abx_op *o = abx_registry_at(reg, m.others[k].op_index);
            bool ok = false;
            for (size_t b = 0; o && b < o->n_bindings; b++)
                ok |= strcmp(o->bindings[b].method, m.others[k].method) == 0 &&
                      ref_match(o->bindings[b].path, &ps, kinds);
            if (!ok)
                fail("a listed method is not bound on a matching binding", method, pcopy, plen);
        }
    } else if (r == ABX_ROUTE_NONE) {
        if (any_method)
            fail("NONE although a binding matches", method, pcopy, plen);
        if (m.op || m.n_others)
            fail("NONE with data", method, pcopy, plen);
    } else {
        fail("unknown result", method, pcopy, plen);
    }
    free(pcopy);
    return 0;
}
