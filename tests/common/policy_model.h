/* policy_model.h — the reference model of policy decisions, shared by the unit test's
 * property test (tests/unit/test_policy.c: random policies) and the differential fuzzer
 * (tests/fuzz/fuzz_policy_model.c: policies the fuzzer picks). A universe of four
 * principals (alice dev, bob ops, carol dev+ops, anonymous), four ops, four paths; a fixed
 * pool of statements whose meaning is computed by hand; model() is the algebra of
 * docs/policy.md over those hand-computed meanings (mount, deny > allow, path scopes,
 * tightest limits, determining statements). It must never call the policy module except
 * through pm_actual(), which asks the real one. Test code only. */
#ifndef ABX_TESTS_POLICY_MODEL_H
#define ABX_TESTS_POLICY_MODEL_H

#include <ftw.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/util.h"
#include "policy/policy.h"

static inline abx_err ok_handler(abx_ctx *ctx, const json_t *args, abx_reply *reply)
{
    (void)ctx;
    (void)args;
    (void)reply;
    return ABX_OK;
}

/* An explicit-only op of our own: "*" and effect selectors must never mount it. */
static const abx_op_def custom_ops[] = {
    {.id = "custom.admin.run", .effects = ABX_EFF_ADMIN, .summary = "admin", .handler = ok_handler},
    {0},
};

/* Broad selectors ("*", "effect:...") also mount built-ins with command, url, language
 * or agent parameters, and each of those needs its scope (scope_required). Empty scopes
 * admit nothing for those ops and keep these tests independent of the built-in set. */
#define OTHER_SCOPES "\"commands\": [], \"urls\": [], \"languages\": [], \"agents\": [], \"ports\": []"
#define LIM_MAX_BYTES __builtin_ctz(ABX_LIM_MAX_BYTES)

static const char *const tokens[3] = {"alice-secret-token-0001", "bob-secret-token-000002", "carol-secret-token-0003"};
enum { ALICE, BOB, CAROL, ANON }; /* slots in auth_text order; ANON = n_principals */

/* The registry (default + custom_ops, frozen), a workspace with a/ and b/, the auth text. */
typedef struct pm_world {
    abx_registry *reg;
    char ws[PATH_MAX];
    char auth_text[2048];
} pm_world;

static inline int pm_world_init(pm_world *w)
{
    char err[256];
    memset(w, 0, sizeof *w);
    w->reg = abx_registry_new(abx_registry_default());
    if (!w->reg || abx_registry_add(w->reg, custom_ops, err, sizeof err) != 0) {
        fprintf(stderr, "setup: %s\n", err);
        return -1;
    }
    abx_registry_freeze(w->reg);
    char tmpl[] = "/tmp/abx-test-policy-XXXXXX";
    if (!mkdtemp(tmpl) || !realpath(tmpl, w->ws))
        return -1;
    char sub[PATH_MAX + 8];
    snprintf(sub, sizeof sub, "%s/a", w->ws);
    if (mkdir(sub, 0755) != 0)
        return -1;
    snprintf(sub, sizeof sub, "%s/b", w->ws);
    if (mkdir(sub, 0755) != 0)
        return -1;
    char hex[3][65];
    for (int i = 0; i < 3; i++)
        abx_sha256_hex(tokens[i], strlen(tokens[i]), hex[i]);
    snprintf(w->auth_text, sizeof w->auth_text,
             "{\"tokens\": ["
             "{\"principal\": \"alice\", \"roles\": [\"dev\"], \"token_sha256\": \"%s\"},"
             "{\"principal\": \"bob\", \"roles\": [\"ops\"], \"token_sha256\": \"%s\"},"
             "{\"principal\": \"carol\", \"roles\": [\"dev\", \"ops\"], \"token_sha256\": \"%s\"}]}",
             hex[0], hex[1], hex[2]);
    return 0;
}

static inline int pm_rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static inline void pm_world_release(pm_world *w)
{
    if (w->ws[0])
        nftw(w->ws, pm_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    abx_registry_free(w->reg);
    w->reg = NULL;
}

/* The universe the model knows: four ops, four slots, four paths. */
static const char *const u_ops[] = {"core.health", "files.read", "files.stat", "custom.admin.run"};
static const bool u_has_path[] = {false, true, true, false};
enum { U_HEALTH = 1u << 0, U_READ = 1u << 1, U_STAT = 1u << 2, U_ADMIN = 1u << 3, U_ALLOPS = 0xf };
static const char *const u_paths[] = {"a/x.txt", "b/y.txt", "b/z.bin", "c"};
enum { P_AX = 1u << 0, P_BY = 1u << 1, P_BZ = 1u << 2, P_C = 1u << 3 };
enum { S_ALICE = 1u << ALICE, S_BOB = 1u << BOB, S_CAROL = 1u << CAROL, S_ANON = 1u << ANON, S_ALL = 0xf };

typedef struct mstmt {
    const char *json;      /* the statement as written (with an "id" label) */
    const char *label;
    bool deny;
    unsigned ops;          /* ops it matches (allow side: mounts; deny side: hits) */
    unsigned slots;        /* principals it matches */
    bool has_paths;
    unsigned paths;        /* allow: paths its read scope admits; deny: paths it denies */
    int64_t max_bytes;     /* -1 = none */
    unsigned other_paths;  /* allow: paths only its write/delete scopes admit */
} mstmt;

/* Hand-computed model of each statement. Principals: alice (dev), bob (ops), carol (dev, ops). */
static const mstmt pool[] = {
    {"{\"id\": \"A0\", \"ops\": [\"files.read\"], \"principals\": [\"alice\"], \"paths\": [\"a/**\"],"
     " \"limits\": {\"max_bytes\": 1000}}",
     "A0", false, U_READ, S_ALICE, true, P_AX, 1000},
    {"{\"id\": \"A1\", \"ops\": [\"files.*\"], \"principals\": [\"role:dev\"], \"paths\": [\"b/*.txt\"],"
     " \"limits\": {\"max_bytes\": 500}}",
     "A1", false, U_READ | U_STAT, S_ALICE | S_CAROL, true, P_BY, 500},
    {"{\"id\": \"A2\", \"ops\": [\"*\"], \"principals\": [\"*\"], \"paths\": [\"**\"], " OTHER_SCOPES ","
     " \"limits\": {\"max_bytes\": 2000}}",
     "A2", false, U_HEALTH | U_READ | U_STAT, S_ALICE | S_BOB | S_CAROL, true, P_AX | P_BY | P_BZ | P_C, 2000},
    {"{\"id\": \"A3\", \"ops\": [\"effect:read\"], \"principals\": [\"bob\"], \"paths\": [\"b/**\", \"c\"], " OTHER_SCOPES "}",
     "A3",
     false, U_HEALTH | U_READ | U_STAT, S_BOB, true, P_BY | P_BZ | P_C, -1},
    {"{\"id\": \"A4\", \"ops\": [\"core.health\"], \"principals\": [\"anonymous\", \"alice\"]}", "A4", false,
     U_HEALTH, S_ANON | S_ALICE, false, 0, -1},
    {"{\"id\": \"A5\", \"ops\": [\"custom.admin.run\"], \"principals\": [\"role:ops\"], \"limits\": {\"max_bytes\": 7}}",
     "A5", false, U_ADMIN, S_BOB | S_CAROL, false, 0, 7},
    {"{\"id\": \"A6\", \"ops\": [\"files.stat\", \"core.*\"], \"principals\": [\"bob\", \"role:dev\"],"
     " \"paths\": {\"read\": [\"c\"]}, \"limits\": {\"max_bytes\": 100}}",
     "A6", false, U_STAT | U_HEALTH, S_BOB | S_ALICE | S_CAROL, true, P_C, 100},
    {"{\"id\": \"A7\", \"ops\": [\"files.read\"], \"principals\": [\"bob\"], \"paths\": {\"write\": [\"**\"]}}", "A7",
     false, U_READ, S_BOB, true, 0, -1, P_AX | P_BY | P_BZ | P_C},
    {"{\"id\": \"D0\", \"ops\": [\"files.stat\"], \"principals\": [\"bob\"]}", "D0", true, U_STAT, S_BOB, false, 0,
     -1},
    {"{\"id\": \"D1\", \"paths\": [\"b/z.bin\"]}", "D1", true, U_ALLOPS, S_ALL, true, P_BZ, -1},
    {"{\"id\": \"D2\", \"ops\": [\"effect:admin\"], \"principals\": [\"carol\"]}", "D2", true, U_ADMIN, S_CAROL,
     false, 0, -1},
    {"{\"id\": \"D3\", \"ops\": [\"files.*\"], \"principals\": [\"role:dev\"], \"paths\": [\"a/**\"]}", "D3", true,
     U_READ | U_STAT, S_ALICE | S_CAROL, true, P_AX, -1},
    {"{\"id\": \"D4\", \"ops\": [\"core.health\"], \"principals\": [\"role:ops\"]}", "D4", true, U_HEALTH,
     S_BOB | S_CAROL, false, 0, -1},
};
#define POOL_N (sizeof pool / sizeof pool[0])

/* the implicit statement compiled from the default auth.anonymous */
static const mstmt implicit_anon = {NULL, "auth.anonymous", false, U_HEALTH, S_ANON, false, 0, -1};

typedef struct outcome {
    abx_err err;
    abx_err alt;              /* a second acceptable code (ambiguous deny), or = err */
    int64_t max_bytes;
    char labels[256];         /* admitting labels, ",a,b," sorted and distinct */
} outcome;

static inline int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* canonical form of a comma-separated label list: distinct, sorted, ",x,y," */
static inline void canon_labels(const char *in, char *out, size_t outlen)
{
    char tmp[512];
    snprintf(tmp, sizeof tmp, "%s", in);
    const char *v[64];
    size_t n = 0;
    for (char *save = NULL, *t = strtok_r(tmp, ",", &save); t && n < 64; t = strtok_r(NULL, ",", &save))
        v[n++] = t;
    qsort(v, n, sizeof v[0], cmp_str);
    snprintf(out, outlen, ",");
    for (size_t i = 0; i < n; i++)
        if (i == 0 || strcmp(v[i], v[i - 1]) != 0)
            snprintf(out + strlen(out), outlen - strlen(out), "%s,", v[i]);
}

/* The reference: docs/configuration.md's algebra, over the hand-computed statements. */
static inline outcome model(const size_t *stmts, size_t n, int slot, int op, int path)
{
    outcome o = {ABX_OK, ABX_OK, -1, ""};
    const mstmt *all[64];
    size_t na = 0;
    all[na++] = &implicit_anon;
    for (size_t i = 0; i < n; i++)
        all[na++] = &pool[stmts[i]];
    unsigned sbit = 1u << slot, obit = 1u << op, pbit = path >= 0 ? 1u << path : 0;
    bool mounted = false;
    for (size_t i = 0; i < na; i++)
        if (!all[i]->deny && (all[i]->ops & obit) && (all[i]->slots & sbit))
            mounted = true;
    if (!mounted) {
        o.err = o.alt = ABX_E_OP_NOT_ENABLED;
        return o;
    }
    /* a path outside every scope (any access kind) of the mounting statements gets
     * one answer before any deny is looked at */
    if (u_has_path[op]) {
        bool any_paths = false, in_scope = false;
        for (size_t i = 0; i < na; i++) {
            const mstmt *s = all[i];
            if (s->deny || !(s->ops & obit) || !(s->slots & sbit) || !s->has_paths)
                continue;
            any_paths = true;
            in_scope = in_scope || ((s->paths | s->other_paths) & pbit);
        }
        if (any_paths && !in_scope) {
            o.err = o.alt = ABX_E_POLICY_PATH_NOT_ALLOWED;
            return o;
        }
    }
    bool plain = false, by_path = false;
    for (size_t i = 0; i < na; i++) {
        const mstmt *s = all[i];
        if (!s->deny || !(s->ops & obit) || !(s->slots & sbit))
            continue;
        if (!s->has_paths)
            plain = true;
        else if (u_has_path[op] && (s->paths & pbit))
            by_path = true;
    }
    if (plain || by_path) {
        o.err = plain ? ABX_E_POLICY_DENIED : ABX_E_POLICY_PATH_DENIED;
        o.alt = by_path ? ABX_E_POLICY_PATH_DENIED : o.err; /* both match: either code is a deny */
        return o;
    }
    char labels[256] = "";
    bool admitted = false;
    for (size_t i = 0; i < na; i++) {
        const mstmt *s = all[i];
        if (s->deny || !(s->ops & obit) || !(s->slots & sbit))
            continue;
        if (u_has_path[op] && !(s->paths & pbit))
            continue;
        admitted = true;
        if (s->max_bytes >= 0 && (o.max_bytes < 0 || s->max_bytes < o.max_bytes))
            o.max_bytes = s->max_bytes;
        snprintf(labels + strlen(labels), sizeof labels - strlen(labels), "%s,", s->label);
    }
    if (!admitted) {
        o.err = o.alt = ABX_E_POLICY_PATH_NOT_ALLOWED;
        return o;
    }
    canon_labels(labels, o.labels, sizeof o.labels);
    return o;
}

static inline char *policy_text(const size_t *stmts, size_t n)
{
    static char text[16384];
    size_t na = 0, nd = 0;
    strcpy(text, "{\"allow\": [");
    for (size_t i = 0; i < n; i++)
        if (!pool[stmts[i]].deny)
            snprintf(text + strlen(text), sizeof text - strlen(text), "%s%s", na++ ? ", " : "", pool[stmts[i]].json);
    strcat(text, "], \"deny\": [");
    for (size_t i = 0; i < n; i++)
        if (pool[stmts[i]].deny)
            snprintf(text + strlen(text), sizeof text - strlen(text), "%s%s", nd++ ? ", " : "", pool[stmts[i]].json);
    strcat(text, "]}");
    return text;
}


/* Compile policy text with the world's auth; NULL (diagnostics in why) on failure. */
static inline abx_policy *pm_compile(const pm_world *w, const char *policy, char *why, size_t whylen)
{
    json_t *a = json_loads(w->auth_text, 0, NULL), *p = json_loads(policy, 0, NULL);
    abx_policy_input in = {.reg = w->reg, .auth = a, .policy = p, .workspace = w->ws};
    abx_diags d = {0};
    abx_policy *pol = p ? abx_policy_compile(&in, &d) : NULL;
    why[0] = '\0';
    for (size_t i = 0; i < d.n; i++)
        snprintf(why + strlen(why), whylen - strlen(why), "\n  %s %s: %s", d.items[i].level, d.items[i].code,
                 d.items[i].message);
    if (pol && d.errors) {
        abx_policy_unref(pol);
        pol = NULL;
    }
    abx_diags_release(&d);
    json_decref(a);
    json_decref(p);
    return pol;
}

/* What the real policy module decides for one request of the universe. */
static inline outcome pm_actual(const pm_world *w, const abx_policy *p, int slot, int op, int path)
{
    outcome o = {ABX_OK, ABX_OK, -1, ""};
    const abx_op *def = abx_registry_get(w->reg, u_ops[op]);
    json_t *args = json_object();
    if (path >= 0)
        json_object_set_new(args, "path", json_string(u_paths[path]));
    char msg[300];
    if (abx_args_validate(def, args, msg, sizeof msg) != ABX_OK) {
        fprintf(stderr, "model arguments for %s do not validate: %s\n", u_ops[op], msg);
        abort();
    }
    abx_decision d;
    abx_decide(p, slot, def, abx_registry_index_of(w->reg, def), args, &d, NULL);
    o.err = o.alt = d.err;
    if (o.err == ABX_OK) {
        o.max_bytes = d.limits[LIM_MAX_BYTES];
        canon_labels(d.determining, o.labels, sizeof o.labels);
    }
    abx_decision_release(&d);
    json_decref(args);
    return o;
}

/* Does the real decision agree with the model (either code of an ambiguous deny)? */
static inline bool pm_agrees(const outcome *got, const outcome *want)
{
    return (got->err == want->err || got->err == want->alt) &&
           (got->err != ABX_OK || (got->max_bytes == want->max_bytes && strcmp(got->labels, want->labels) == 0));
}

#endif
