/* test_router.c — unit tests of the pure HTTP parts: the trie router of src/http/router.c
 * (literal beats variable whatever the order, variable extraction, 405 with the other
 * methods, trailing slashes and unknown paths), and src/http/target.c: the step-0
 * request-target check (abx_target_ok), percent-decoding and abx_query_each. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/http.h"

static abx_err ok_handler(abx_ctx *ctx, const json_t *args, abx_reply *reply)
{
    (void)ctx;
    (void)args;
    (void)reply;
    return ABX_OK;
}

static const abx_param pid_param[] = {{.name = "pid", .type = ABX_T_INT}, {.name = "data", .type = ABX_T_STRING}, {0}};
static const abx_param x_param[] = {{.name = "x", .type = ABX_T_STRING}, {0}};
static const abx_param ab_params[] = {{.name = "a", .type = ABX_T_STRING}, {.name = "b", .type = ABX_T_STRING}, {0}};

#define OP(ID, EFF, BINDING, PARAMS) \
    {.id = (ID), .effects = (EFF), .http = {BINDING}, .params = (PARAMS), .handler = ok_handler}

/* Two tables with the same bindings; the ids are chosen so that the frozen (sorted) index
 * puts the literal binding first in one registry and the variable binding first in the
 * other: the router must not depend on that order. */
static const abx_op_def table_literal_first[] = {
    OP("custom.aa.list", ABX_EFF_READ, "GET /process/list", NULL),
    OP("custom.ab.get", ABX_EFF_READ, "GET /process/{pid}", pid_param),
    OP("custom.ac.write", ABX_EFF_WRITE, "POST /process/{pid}/stdin", pid_param),
    OP("custom.ad.get", ABX_EFF_READ, "GET /a/b/c", NULL),
    OP("custom.ae.get", ABX_EFF_READ, "GET /a/{x}/c", x_param),
    OP("custom.af.delete", ABX_EFF_DELETE, "DELETE /files", NULL),
    OP("custom.ag.delete", ABX_EFF_DELETE, "DELETE /process/{pid}", pid_param),
    OP("custom.ah.get", ABX_EFF_READ, "GET /u/{a}/v/{b}", ab_params),
    {0},
};
static const abx_op_def table_variable_first[] = {
    OP("custom.zz.list", ABX_EFF_READ, "GET /process/list", NULL),
    OP("custom.ab.get", ABX_EFF_READ, "GET /process/{pid}", pid_param),
    OP("custom.ac.write", ABX_EFF_WRITE, "POST /process/{pid}/stdin", pid_param),
    OP("custom.zy.get", ABX_EFF_READ, "GET /a/b/c", NULL),
    OP("custom.ae.get", ABX_EFF_READ, "GET /a/{x}/c", x_param),
    OP("custom.af.delete", ABX_EFF_DELETE, "DELETE /files", NULL),
    OP("custom.ag.delete", ABX_EFF_DELETE, "DELETE /process/{pid}", pid_param),
    OP("custom.ah.get", ABX_EFF_READ, "GET /u/{a}/v/{b}", ab_params),
    {0},
};

typedef struct fixture {
    abx_registry *reg;
    abx_router *router;
    const char *list_id;    /* the op bound to GET /process/list */
    const char *abc_id;     /* the op bound to GET /a/b/c */
} fixture;

static fixture fx[2];

static int build(fixture *f, const abx_op_def *table, const char *list_id, const char *abc_id)
{
    char err[256];
    f->reg = abx_registry_new(NULL);
    if (abx_registry_add(f->reg, table, err, sizeof err) != 0) {
        fprintf(stderr, "setup: %s\n", err);
        return -1;
    }
    abx_registry_freeze(f->reg);
    f->router = abx_router_build(f->reg);
    f->list_id = list_id;
    f->abc_id = abc_id;
    return f->router ? 0 : -1;
}

static int group_setup(void **state)
{
    (void)state;
    if (build(&fx[0], table_literal_first, "custom.aa.list", "custom.ad.get") != 0 ||
        build(&fx[1], table_variable_first, "custom.zz.list", "custom.zy.get") != 0)
        return -1;
    /* the premise of the order test: the sorted index really differs */
    if (abx_registry_index_of(fx[0].reg, abx_registry_get(fx[0].reg, "custom.aa.list")) >
            abx_registry_index_of(fx[0].reg, abx_registry_get(fx[0].reg, "custom.ab.get")) ||
        abx_registry_index_of(fx[1].reg, abx_registry_get(fx[1].reg, "custom.zz.list")) <
            abx_registry_index_of(fx[1].reg, abx_registry_get(fx[1].reg, "custom.ab.get")))
        return -1;
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    for (int i = 0; i < 2; i++) {
        abx_router_free(fx[i].router);
        abx_registry_free(fx[i].reg);
    }
    return 0;
}

static enum abx_route_result route(const fixture *f, const char *method, const char *path, abx_route_match *m)
{
    return abx_router_match(f->router, method, path, strlen(path), m);
}

static void expect_found(const fixture *f, const char *method, const char *path, const char *want_id)
{
    abx_route_match m;
    enum abx_route_result r = route(f, method, path, &m);
    if (r != ABX_ROUTE_FOUND)
        fail_msg("%s %s: result %d, want FOUND (%s)", method, path, r, want_id);
    assert_non_null(m.op);
    if (strcmp(m.op->id, want_id) != 0)
        fail_msg("%s %s: routed to %s, want %s", method, path, m.op->id, want_id);
    assert_int_equal(m.op_index, abx_registry_index_of(f->reg, m.op));
}

static void expect_none(const fixture *f, const char *method, const char *path)
{
    abx_route_match m;
    enum abx_route_result r = route(f, method, path, &m);
    if (r != ABX_ROUTE_NONE)
        fail_msg("%s \"%s\": result %d (%s), want NONE", method, path, r, m.op ? m.op->id : "-");
    assert_null(m.op);
    assert_int_equal(m.n_others, 0);
}

static void expect_var(const abx_route_match *m, size_t i, const char *name, const char *val)
{
    assert_true(i < m->n_vars);
    assert_string_equal(m->vars[i].name, name);
    assert_int_equal(m->vars[i].len, strlen(val));
    assert_memory_equal(m->vars[i].val, val, strlen(val));
}

/* ---- router ------------------------------------------------------------------------------ */

static void test_literal_beats_variable(void **state)
{
    (void)state;
    for (int i = 0; i < 2; i++) {
        const fixture *f = &fx[i];
        expect_found(f, "GET", "/process/list", f->list_id);
        expect_found(f, "GET", "/process/123", "custom.ab.get");
        expect_found(f, "GET", "/process/lis", "custom.ab.get");
        expect_found(f, "GET", "/process/listx", "custom.ab.get");
        expect_found(f, "GET", "/a/b/c", f->abc_id);
        expect_found(f, "GET", "/a/x/c", "custom.ae.get");
        expect_found(f, "GET", "/a/bb/c", "custom.ae.get");
        abx_route_match m;
        assert_int_equal(route(f, "GET", "/process/list", &m), ABX_ROUTE_FOUND);
        assert_int_equal(m.n_vars, 0);
    }
}

static void test_variables_extracted(void **state)
{
    (void)state;
    for (int i = 0; i < 2; i++) {
        const fixture *f = &fx[i];
        abx_route_match m;
        assert_int_equal(route(f, "GET", "/process/123", &m), ABX_ROUTE_FOUND);
        assert_int_equal(m.n_vars, 1);
        expect_var(&m, 0, "pid", "123");
        assert_int_equal(route(f, "POST", "/process/42/stdin", &m), ABX_ROUTE_FOUND);
        assert_string_equal(m.op->id, "custom.ac.write");
        assert_int_equal(m.n_vars, 1);
        expect_var(&m, 0, "pid", "42");
        /* the value points into the caller's path */
        const char *path = "/a/some%20thing/c";
        assert_int_equal(abx_router_match(f->router, "GET", path, strlen(path), &m), ABX_ROUTE_FOUND);
        assert_string_equal(m.op->id, "custom.ae.get");
        expect_var(&m, 0, "x", "some%20thing");
        assert_ptr_equal(m.vars[0].val, path + 3);
        assert_int_equal(route(f, "GET", "/u/one/v/two", &m), ABX_ROUTE_FOUND);
        assert_string_equal(m.op->id, "custom.ah.get");
        assert_int_equal(m.n_vars, 2);
        expect_var(&m, 0, "a", "one");
        expect_var(&m, 1, "b", "two");
    }
}

static void test_backtracking(void **state)
{
    (void)state;
    const fixture *f = &fx[0];
    /* the literal branch /a/b dead-ends at /d: no route, and no crash */
    expect_none(f, "GET", "/a/b/d");
    expect_none(f, "GET", "/a/b");
    /* the literal "list" has no DELETE: the variable binding takes the segment */
    abx_route_match m;
    assert_int_equal(route(f, "DELETE", "/process/list", &m), ABX_ROUTE_FOUND);
    assert_string_equal(m.op->id, "custom.ag.delete");
    expect_var(&m, 0, "pid", "list");
}

static void test_wrong_method(void **state)
{
    (void)state;
    for (int i = 0; i < 2; i++) {
        const fixture *f = &fx[i];
        abx_route_match m;
        assert_int_equal(route(f, "GET", "/files", &m), ABX_ROUTE_WRONG_METHOD);
        assert_null(m.op);
        assert_int_equal(m.n_others, 1);
        assert_string_equal(m.others[0].method, "DELETE");
        assert_int_equal(m.others[0].op_index,
                         abx_registry_index_of(f->reg, abx_registry_get(f->reg, "custom.af.delete")));

        assert_int_equal(route(f, "POST", "/a/b/c", &m), ABX_ROUTE_WRONG_METHOD);
        assert_int_equal(m.n_others, 1);
        assert_string_equal(m.others[0].method, "GET");

        assert_int_equal(route(f, "GET", "/process/7/stdin", &m), ABX_ROUTE_WRONG_METHOD);
        assert_int_equal(m.n_others, 1);
        assert_string_equal(m.others[0].method, "POST");

        /* two methods bound on /process/{pid}: both listed */
        assert_int_equal(route(f, "PUT", "/process/7", &m), ABX_ROUTE_WRONG_METHOD);
        assert_int_equal(m.n_others, 2);
        bool get = false, del = false;
        for (size_t k = 0; k < m.n_others; k++) {
            get |= strcmp(m.others[k].method, "GET") == 0;
            del |= strcmp(m.others[k].method, "DELETE") == 0;
        }
        assert_true(get && del);

        /* an unknown method is a 405 where the path exists, a 404 elsewhere */
        assert_int_equal(route(f, "FETCH", "/files", &m), ABX_ROUTE_WRONG_METHOD);
        assert_string_equal(m.others[0].method, "DELETE");
        assert_int_equal(route(f, "get", "/files", &m), ABX_ROUTE_WRONG_METHOD); /* methods are case-sensitive */
        expect_none(f, "FETCH", "/nowhere");
    }
}

static void test_no_route(void **state)
{
    (void)state;
    for (int i = 0; i < 2; i++) {
        const fixture *f = &fx[i];
        expect_none(f, "GET", "/process/list/");  /* trailing slash */
        expect_none(f, "GET", "/process/123/");
        expect_none(f, "DELETE", "/files/");
        expect_none(f, "GET", "/process/");
        expect_none(f, "GET", "/process");        /* an inner node without a binding */
        expect_none(f, "GET", "/a");
        expect_none(f, "GET", "/nope");
        expect_none(f, "GET", "/");
        expect_none(f, "GET", "");
        expect_none(f, "GET", "process/list");    /* no leading slash */
        expect_none(f, "GET", "//process/list");
        expect_none(f, "GET", "/process//list");
        expect_none(f, "GET", "/process/list/extra");
        expect_none(f, "GET", "/PROCESS/list");   /* literals are case-sensitive */
        expect_none(f, "POST", "/process/1/stdin/x");
    }
}

static void test_path_length_respected(void **state)
{
    (void)state;
    const fixture *f = &fx[0];
    abx_route_match m;
    const char *path = "/process/list/and/more";
    assert_int_equal(abx_router_match(f->router, "GET", path, strlen("/process/list"), &m), ABX_ROUTE_FOUND);
    assert_string_equal(m.op->id, f->list_id);
    assert_int_equal(abx_router_match(f->router, "GET", path, strlen("/process/li"), &m), ABX_ROUTE_FOUND);
    assert_string_equal(m.op->id, "custom.ab.get");
    expect_var(&m, 0, "pid", "li");
    /* a NUL inside the given length is just a byte of the segment */
    const char nul_path[] = "/process/l\0st";
    assert_int_equal(abx_router_match(f->router, "GET", nul_path, sizeof nul_path - 1, &m), ABX_ROUTE_FOUND);
    assert_string_equal(m.op->id, "custom.ab.get");
    assert_int_equal(m.vars[0].len, 4);
}

/* A binding must name at least one segment: "GET /" is refused at registration
 * (decided after this test found the root path unreachable through the router). */
static void test_root_binding_refused(void **state)
{
    (void)state;
    static const abx_op_def root[] = {OP("custom.root.get", ABX_EFF_READ, "GET /", NULL), {0}};
    char err[256] = "";
    abx_registry *reg = abx_registry_new(NULL);
    assert_int_not_equal(abx_registry_add(reg, root, err, sizeof err), 0);
    assert_non_null(strstr(err, "custom.root.get"));
    abx_registry_free(reg);
}

/* {name*}: the rest of the path, slashes included (ports.proxy); literal and variable
 * bindings below the same node still win; only as the last segment. */
static void test_rest_variable(void **state)
{
    (void)state;
    static const abx_param pp[] = {{.name = "port", .type = ABX_T_INT}, {.name = "path", .type = ABX_T_STRING}, {0}};
    static const abx_op_def defs[] = {
        OP("custom.p.get", ABX_EFF_READ, "GET /p/{port}/{path*}", pp),
        OP("custom.q.list", ABX_EFF_READ, "GET /p/{port}/list", pp),
        {0},
    };
    static const abx_op_def bad[] = {OP("custom.r.get", ABX_EFF_READ, "GET /r/{path*}/x", pp), {0}};
    char err[256] = "";
    abx_registry *reg = abx_registry_new(NULL);
    assert_int_equal(abx_registry_add(reg, defs, err, sizeof err), 0);
    assert_int_not_equal(abx_registry_add(reg, bad, err, sizeof err), 0);
    assert_non_null(strstr(err, "before its end"));
    abx_registry_freeze(reg);
    abx_router *r = abx_router_build(reg);
    abx_route_match m;
    static const struct {
        const char *path, *op, *rest;
    } cases[] = {
        {"/p/80/a/b/c.html", "custom.p.get", "a/b/c.html"},
        {"/p/80/", "custom.p.get", ""},
        {"/p/80/dir/", "custom.p.get", "dir/"},
        {"/p/80/list", "custom.q.list", NULL},
        {"/p/80/list/x", "custom.p.get", "list/x"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        assert_int_equal(abx_router_match(r, "GET", cases[i].path, strlen(cases[i].path), &m), ABX_ROUTE_FOUND);
        assert_string_equal(m.op->id, cases[i].op);
        assert_int_equal(m.vars[0].len, 2);
        if (cases[i].rest) {
            assert_int_equal(m.n_vars, 2);
            assert_string_equal(m.vars[1].name, "path");
            assert_int_equal(m.vars[1].len, strlen(cases[i].rest));
            assert_memory_equal(m.vars[1].val, cases[i].rest, m.vars[1].len);
        }
    }
    assert_int_equal(abx_router_match(r, "GET", "/p/80", 5, &m), ABX_ROUTE_NONE);
    assert_int_equal(abx_router_match(r, "POST", "/p/80/x", 7, &m), ABX_ROUTE_WRONG_METHOD);
    abx_router_free(r);
    abx_registry_free(reg);
}

static void test_router_empty_registry(void **state)
{
    (void)state;
    abx_registry *reg = abx_registry_new(NULL);
    abx_registry_freeze(reg);
    abx_router *r = abx_router_build(reg);
    assert_non_null(r);
    abx_route_match m;
    assert_int_equal(abx_router_match(r, "GET", "/x", 2, &m), ABX_ROUTE_NONE);
    assert_int_equal(abx_router_match(r, "GET", "/", 1, &m), ABX_ROUTE_NONE);
    abx_router_free(r);
    abx_router_free(NULL);
    abx_registry_free(reg);
}

/* ---- abx_target_ok --------------------------------------------------------------------------- */

static bool target(const char *s) { return abx_target_ok(s, strlen(s)); }

static void test_target_accepts(void **state)
{
    (void)state;
    static const char *const ok[] = {
        "/",
        "/files/read",
        "/files/read?path=%2Fetc%2Fpasswd",  /* encoded slash is fine in the query */
        "/files/read?path=%2e%2E%5c",
        "/files/read?path=../../etc//x/./y", /* dot segments in the query are just data */
        "/files/read?q=a+b&x=&&y",
        "/process/123",
        "/a/.hidden",
        "/a/..b",
        "/a/b..",
        "/a/...",
        "/a/b/",                             /* trailing slash: the router says no, not step 0 */
        "/caf%C3%A9",                        /* encoded UTF-8 */
        "/a%20b",
        "/a%41",
        "/x?",
        "/x?a=%41&b=%ff",
        "/x?a=\xc3\xa9",                     /* raw UTF-8 in the query */
        "/x?a=?b",
        "/a:b@c,d;e=f+g!$&'()*~-_",
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        if (!target(ok[i]))
            fail_msg("target \"%s\" should be accepted", ok[i]);
}

static void test_target_refuses(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "",
        "a/b",
        "*",
        "?a=1",
        "http://x/a",
        "//",
        "//a",
        "/a//b",
        "/a/b//",
        "/./a",
        "/a/./b",
        "/../a",
        "/a/../b",
        "/a/..",
        "/a/.",
        "/.",
        "/..",
        "/a/..?x=1",
        "/a/.?x=1",
        "/a%2fb",
        "/a%2Fb",
        "/a%2eb",
        "/a%2E",
        "/a/%2e%2e/b",
        "/a%5cb",
        "/a%5Cb",
        "/a\\b",
        "/a\\",
        "/a\x01",
        "/a\x1f",
        "/a\x7f",
        "/a\t",
        "/a\r\n",
        "/a\x80",
        "/caf\xc3\xa9",
        "/\xff",
        "/a b",
        "/a#frag",
        "/%zz",
        "/%4",
        "/a%4",
        "/a%",
        "/a%g1",
        "/a%1g",
        "/a%25",                              /* encoded percent (double encoding) */
        "/a%00",
        "/a%0a",
        "/a%7f",
        "/x?a=%zz",
        "/x?a=%4",
        "/x?a=%",
        "/x?a b",
        "/x?a=\x01",
        "/x?a=\x7f",
        "/x?a#b",
        "/x?a=1\n",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (target(bad[i]))
            fail_msg("target \"%s\" (index %zu) should be refused", bad[i], i);
    /* raw NUL anywhere, counted by length */
    assert_false(abx_target_ok("/a\0b", 4));
    assert_false(abx_target_ok("/x?a=\0", 6));
    /* the length bounds the check: the same bytes pass when cut before the bad part */
    assert_true(abx_target_ok("/ab//", 3));
    assert_false(abx_target_ok("/ab//", 5));
    assert_false(abx_target_ok("/", 0));
}

/* ---- percent-decoding and abx_query_each -------------------------------------------------------- */

static void test_pct_decode(void **state)
{
    (void)state;
    char out[64];
    assert_int_equal(abx_pct_decode("a%41+b", 6, out, true), 4);
    assert_string_equal(out, "aA b");
    assert_int_equal(abx_pct_decode("a%41+b", 6, out, false), 4);
    assert_string_equal(out, "aA+b");
    assert_int_equal(abx_pct_decode("%2f%2F%00", 9, out, true), 3);
    assert_memory_equal(out, "//\0", 3);
    assert_int_equal(abx_pct_decode("", 0, out, true), 0);
    assert_string_equal(out, "");
    assert_int_equal(abx_pct_decode("%zz", 3, out, true), -1);
    assert_int_equal(abx_pct_decode("%4", 2, out, true), -1);
    assert_int_equal(abx_pct_decode("ab%", 3, out, true), -1);
    assert_int_equal(abx_pct_decode("%41%4", 5, out, true), -1);
    /* n bounds the input: "%41" cut to "%4" is malformed */
    assert_int_equal(abx_pct_decode("%41", 2, out, true), -1);
}

typedef struct pairs {
    int n;
    int stop_at; /* return 7 from this call (1-based), 0 = never */
    char name[8][64];
    char val[8][4096];
    size_t nlen[8], vlen[8];
} pairs;

static int collect(void *ud, const char *name, size_t nlen, const char *val, size_t vlen)
{
    pairs *p = ud;
    if (p->n < 8) {
        memcpy(p->name[p->n], name, nlen < 63 ? nlen : 63);
        p->name[p->n][nlen < 63 ? nlen : 63] = '\0';
        memcpy(p->val[p->n], val, vlen < 4095 ? vlen : 4095);
        p->val[p->n][vlen < 4095 ? vlen : 4095] = '\0';
        p->nlen[p->n] = nlen;
        p->vlen[p->n] = vlen;
    }
    p->n++;
    return p->stop_at && p->n == p->stop_at ? 7 : 0;
}

static int query(const char *q, pairs *p)
{
    memset(p, 0, sizeof *p);
    return abx_query_each(q, strlen(q), collect, p);
}

static void expect_pair(const pairs *p, int i, const char *name, const char *val)
{
    assert_true(i < p->n);
    assert_string_equal(p->name[i], name);
    assert_int_equal(p->nlen[i], strlen(name));
    assert_string_equal(p->val[i], val);
    assert_int_equal(p->vlen[i], strlen(val));
}

static void test_query_each(void **state)
{
    (void)state;
    static pairs p;
    assert_int_equal(query("a=1&b=2", &p), 0);
    assert_int_equal(p.n, 2);
    expect_pair(&p, 0, "a", "1");
    expect_pair(&p, 1, "b", "2");

    assert_int_equal(query("path=%2Fetc%2Fpasswd&q=x+y%2By", &p), 0);
    assert_int_equal(p.n, 2);
    expect_pair(&p, 0, "path", "/etc/passwd");
    expect_pair(&p, 1, "q", "x y+y");

    assert_int_equal(query("&&a=1&&&b&", &p), 0); /* empty pairs skipped */
    assert_int_equal(p.n, 2);
    expect_pair(&p, 0, "a", "1");
    expect_pair(&p, 1, "b", "");                  /* a name without '=' */

    assert_int_equal(query("a=&=v&a=b=c", &p), 0);
    assert_int_equal(p.n, 3);
    expect_pair(&p, 0, "a", "");
    expect_pair(&p, 1, "", "v");
    expect_pair(&p, 2, "a", "b=c");               /* only the first '=' splits */

    assert_int_equal(query("a%3Db=c%26d", &p), 0); /* encoded '=' and '&' do not split */
    assert_int_equal(p.n, 1);
    expect_pair(&p, 0, "a=b", "c&d");

    assert_int_equal(query("", &p), 0);
    assert_int_equal(p.n, 0);
    assert_int_equal(query("&", &p), 0);
    assert_int_equal(p.n, 0);

    /* a decoded NUL is passed through with its length */
    assert_int_equal(query("n%00x=v", &p), 0);
    assert_int_equal(p.n, 1);
    assert_int_equal(p.nlen[0], 3);
    assert_memory_equal(p.name[0], "n\0x", 3);
}

static void test_query_each_errors_and_stop(void **state)
{
    (void)state;
    static pairs p;
    assert_int_equal(query("a=%zz", &p), -1);
    assert_int_equal(p.n, 0);
    assert_int_equal(query("a=%4", &p), -1);
    assert_int_equal(query("%4=1", &p), -1);
    assert_int_equal(query("a=%", &p), -1);
    assert_int_equal(query("ok=1&bad=%g0&never=1", &p), -1);
    assert_int_equal(p.n, 1); /* pairs before the bad one were delivered, none after */
    expect_pair(&p, 0, "ok", "1");
    /* an escape cut by '&' is malformed in its own pair */
    assert_int_equal(query("a=%4&1=x", &p), -1);

    /* the callback's non-zero value stops the walk and is returned */
    memset(&p, 0, sizeof p);
    p.stop_at = 2;
    assert_int_equal(abx_query_each("a=1&b=2&c=3", 11, collect, &p), 7);
    assert_int_equal(p.n, 2);

    /* n bounds the input */
    memset(&p, 0, sizeof p);
    assert_int_equal(abx_query_each("a=1&b=2", 3, collect, &p), 0);
    assert_int_equal(p.n, 1);
    expect_pair(&p, 0, "a", "1");
}

static void test_query_each_long_pair(void **state)
{
    (void)state;
    /* longer than the 1 KiB stack buffer: decoded through the heap */
    static pairs p;
    static char q[3100];
    strcpy(q, "k=");
    for (int i = 0; i < 1000; i++)
        strcat(q, "%41");
    strcat(q, "&z=1");
    assert_int_equal(query(q, &p), 0);
    assert_int_equal(p.n, 2);
    assert_int_equal(p.vlen[0], 1000);
    for (int i = 0; i < 1000; i++)
        assert_int_equal(p.val[0][i], 'A');
    expect_pair(&p, 1, "z", "1");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_literal_beats_variable),
        cmocka_unit_test(test_variables_extracted),
        cmocka_unit_test(test_backtracking),
        cmocka_unit_test(test_wrong_method),
        cmocka_unit_test(test_no_route),
        cmocka_unit_test(test_path_length_respected),
        cmocka_unit_test(test_root_binding_refused),
        cmocka_unit_test(test_router_empty_registry),
        cmocka_unit_test(test_rest_variable),
        cmocka_unit_test(test_target_accepts),
        cmocka_unit_test(test_target_refuses),
        cmocka_unit_test(test_pct_decode),
        cmocka_unit_test(test_query_each),
        cmocka_unit_test(test_query_each_errors_and_stop),
        cmocka_unit_test(test_query_each_long_pair),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
