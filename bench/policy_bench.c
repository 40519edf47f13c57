/* policy_bench.c — decisions per second of abx's compiled policy (src/policy), single
 * thread, no HTTP: how much one call's step 7 (canonicalize the path arguments, deny
 * statements, protected areas, the mounting allow statements' scopes) costs.
 *
 * usage: policy_bench WORKSPACE [SECONDS] [STATEMENTS]
 *
 * WORKSPACE is an existing empty directory (the caller removes it afterwards); the
 * program makes a small tree in it. It compiles a generated policy of STATEMENTS
 * (default 200) statements — about 90 % allow statements with a mix of op selectors
 * ("files.*", "effect:read", exact ids), principals role:r0..r9 and path scopes under
 * the workspace, about 10 % deny statements with paths — then times abx_decide for
 * files.stat and files.read with canonical absolute paths inside the scopes, outside
 * them and on a denied path. Each decision's outcome is checked once before timing.
 *
 * SECONDS (default 2) is the length of the mixed run (all cases round-robin); each
 * case alone then runs for SECONDS / 4. Output: a human table on stdout, followed by
 * machine-readable lines "result<TAB>name<TAB>op<TAB>outcome<TAB>decisions<TAB>seconds
 * <TAB>decisions_per_s<TAB>ns_per_decision" and "compile<TAB>ms<TAB>n_allow<TAB>n_deny".
 * Exit status 0, or 1 when the policy does not compile or a decision is not the
 * expected one. */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/util.h"
#include "policy/paths.h"
#include "policy/policy.h"

#define N_ROLES 10
#define N_DIRS 20

static char ws[PATH_MAX];

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "policy_bench: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(1);
}

/* ---- a growable string -------------------------------------------------------------------- */
typedef struct {
    char *s;
    size_t n, cap;
} buf;

static void bprintf(buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void bprintf(buf *b, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->s ? b->s + b->n : NULL, b->s ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (k < 0)
            die("vsnprintf failed");
        if (b->s && b->n + (size_t)k < b->cap) {
            b->n += (size_t)k;
            return;
        }
        size_t want = (b->cap ? b->cap * 2 : 4096) + (size_t)k;
        char *ns = realloc(b->s, want);
        if (!ns)
            die("out of memory");
        b->s = ns;
        b->cap = want;
    }
}

/* ---- the workspace tree ------------------------------------------------------------------- */
static void mkdirs(const char *rel)
{
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/%s", ws, rel);
    for (char *q = p + strlen(ws) + 1; *q; q++)
        if (*q == '/') {
            *q = '\0';
            if (mkdir(p, 0755) != 0 && errno != EEXIST)
                die("mkdir %s: %s", p, strerror(errno));
            *q = '/';
        }
    if (mkdir(p, 0755) != 0 && errno != EEXIST)
        die("mkdir %s: %s", p, strerror(errno));
}

static void touch(const char *rel)
{
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/%s", ws, rel);
    FILE *f = fopen(p, "w");
    if (!f || fputs("policy bench\n", f) < 0 || fclose(f) != 0)
        die("cannot write %s", p);
}

static void make_tree(void)
{
    char rel[PATH_MAX];
    for (int d = 0; d < N_DIRS; d++) {
        snprintf(rel, sizeof rel, "d%d/a/b/c/d", d);
        mkdirs(rel);
        snprintf(rel, sizeof rel, "d%d/private", d);
        mkdirs(rel);
        snprintf(rel, sizeof rel, "d%d/f.txt", d);
        touch(rel);
        snprintf(rel, sizeof rel, "d%d/a/b/c/d/f.txt", d);
        touch(rel);
        snprintf(rel, sizeof rel, "d%d/private/key.txt", d);
        touch(rel);
    }
    mkdirs("shared");
    touch("shared/notes.txt");
}

/* ---- the generated configuration ---------------------------------------------------------- */
static const char *const bench_token = "policy-bench-token-0000000001";

/* principals p0..p9 (role rK each) and "bench" (role r3) */
static char *gen_auth(void)
{
    buf b = {0};
    char hex[65];
    bprintf(&b, "{\"tokens\": [");
    for (int i = 0; i < N_ROLES; i++) {
        char tok[64];
        snprintf(tok, sizeof tok, "policy-bench-token-other-%04d", i);
        abx_sha256_hex(tok, strlen(tok), hex);
        bprintf(&b, "{\"principal\": \"p%d\", \"roles\": [\"r%d\"], \"token_sha256\": \"%s\"}, ", i, i, hex);
    }
    abx_sha256_hex(bench_token, strlen(bench_token), hex);
    bprintf(&b, "{\"principal\": \"bench\", \"roles\": [\"r3\"], \"token_sha256\": \"%s\"}]}", hex);
    return b.s;
}

/* n statements: n/10 deny (at least 1), the rest allow */
static char *gen_policy(int n, int *n_allow, int *n_deny)
{
    static const char *const ops[] = {
        "[\"files.*\"]",
        "[\"effect:read\"]",
        "[\"files.stat\", \"files.read\"]",
        "[\"files.read\"]",
        "[\"files.list\", \"system.info\"]",
        "[\"files.stat\"]",
    };
    int nd = n / 10 > 0 ? n / 10 : 1, na = n - nd;
    if (na < 1)
        die("need at least 2 statements");
    buf b = {0};
    bprintf(&b, "{\"deny\": [");
    for (int j = 0; j < nd; j++) {
        bprintf(&b, "%s", j ? ", " : "");
        switch (j % 4) {
        case 0:
            bprintf(&b, "{\"paths\": [\"%s/**/.env\", \"%s/**/*.pem\"]}", ws, ws);
            break;
        case 1:
            bprintf(&b, "{\"paths\": [\"%s/d%d/private/**\"]}", ws, j % N_DIRS);
            break;
        case 2:
            bprintf(&b, "{\"ops\": [\"files.read\"], \"paths\": [\"%s/secret%d/**\", \"%s/d%d/*.key\"]}", ws, j, ws,
                    j % N_DIRS);
            break;
        default:
            bprintf(&b, "{\"ops\": [\"files.list\"], \"principals\": [\"role:r%d\"], \"paths\": [\"%s/d%d/**/*.log\"]}",
                    j % N_ROLES, ws, j % N_DIRS);
            break;
        }
    }
    bprintf(&b, "], \"allow\": [");
    for (int i = 0; i < na; i++) {
        int role = i % N_ROLES, dir = (i * 7) % N_DIRS;
        bprintf(&b, "%s{\"ops\": %s, \"principals\": [\"role:r%d\"], ", i ? ", " : "",
                ops[(i / N_ROLES) % (int)(sizeof ops / sizeof *ops)], role);
        switch (i % 3) {
        case 0:
            bprintf(&b, "\"paths\": [\"%s/d%d/**\"]", ws, dir);
            break;
        case 1:
            bprintf(&b, "\"paths\": {\"read\": [\"%s/d%d/**\", \"%s/shared/*.txt\"], \"write\": [\"%s/d%d/out/**\"]}",
                    ws, dir, ws, ws, dir);
            break;
        default:
            bprintf(&b, "\"paths\": [\"%s/d%d/*.txt\", \"%s/d%d/**/*.md\", \"%s/d%d/a/**\"]", ws, dir, ws, dir, ws,
                    dir);
            break;
        }
        if (i % 7 == 0)
            bprintf(&b, ", \"limits\": {\"max_bytes\": \"1MiB\", \"max_entries\": 100}");
        bprintf(&b, "}");
    }
    bprintf(&b, "]}");
    *n_allow = na;
    *n_deny = nd;
    return b.s;
}

static json_t *parse(const char *text)
{
    json_error_t je;
    json_t *v = json_loads(text, 0, &je);
    if (!v)
        die("generated JSON does not parse: %s", je.text);
    return v;
}

/* ---- cases -------------------------------------------------------------------------------- */
typedef struct {
    const char *name;
    const char *op_id;
    char path[PATH_MAX];
    abx_err want;
    const abx_op *op;
    size_t op_index;
    json_t *args;
} bcase;

static volatile unsigned sink;

static void decide_once(const abx_policy *pol, int slot, const bcase *c)
{
    abx_decision d;
    abx_decide(pol, slot, c->op, c->op_index, c->args, &d, NULL);
    sink += (unsigned)d.err + (unsigned)d.n_paths;
    abx_decision_release(&d);
}

/* Time decisions over cases[0..n-1] round-robin for about `secs` seconds. */
static void run(const abx_policy *pol, int slot, const bcase *cases, size_t n, double secs, unsigned long *count,
                double *elapsed)
{
    unsigned long k = 0;
    double t0 = now_s(), t;
    for (;;) {
        for (int r = 0; r < 64; r++)
            for (size_t i = 0; i < n; i++) {
                decide_once(pol, slot, &cases[i]);
                k++;
            }
        t = now_s();
        if (t - t0 >= secs)
            break;
    }
    *count = k;
    *elapsed = t - t0;
}

/* The same for canonicalization alone (abx_path_canon, the part of a decision that asks
 * the file system). */
static void run_canon(const bcase *cases, size_t n, double secs, unsigned long *count, double *elapsed)
{
    unsigned long k = 0;
    double t0 = now_s(), t;
    for (;;) {
        for (int r = 0; r < 64; r++)
            for (size_t i = 0; i < n; i++) {
                char *out = NULL;
                if (abx_path_canon(ws, cases[i].path, &out) == 0)
                    sink += (unsigned)strlen(out);
                free(out);
                k++;
            }
        t = now_s();
        if (t - t0 >= secs)
            break;
    }
    *count = k;
    *elapsed = t - t0;
}

static void report(const char *name, const char *op, const char *outcome, unsigned long k, double secs)
{
    double rate = (double)k / secs, ns = secs * 1e9 / (double)k;
    printf("%-22s %-11s %-26s %12.0f %10.0f\n", name, op, outcome, rate, ns);
    printf("result\t%s\t%s\t%s\t%lu\t%.3f\t%.0f\t%.1f\n", name, op, outcome, k, secs, rate, ns);
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 4) {
        fprintf(stderr, "usage: policy_bench WORKSPACE [SECONDS] [STATEMENTS]\n");
        return 2;
    }
    double secs = argc > 2 ? atof(argv[2]) : 2.0;
    int n_stmts = argc > 3 ? atoi(argv[3]) : 200;
    if (secs <= 0 || secs > 600 || n_stmts < 2 || n_stmts > 60000)
        die("SECONDS must be in (0, 600] and STATEMENTS in [2, 60000]");
    if (!realpath(argv[1], ws))
        die("workspace %s: %s", argv[1], strerror(errno));
    make_tree();

    abx_registry *reg = abx_registry_new(abx_registry_default());
    if (!reg)
        die("abx_registry_new failed");
    abx_registry_freeze(reg);

    int n_allow, n_deny;
    char *auth_text = gen_auth(), *pol_text = gen_policy(n_stmts, &n_allow, &n_deny);
    json_t *auth = parse(auth_text), *policy = parse(pol_text);
    abx_policy_input in = {.reg = reg, .auth = auth, .policy = policy, .workspace = ws};
    abx_diags diags = {0};
    double c0 = now_s();
    abx_policy *pol = abx_policy_compile(&in, &diags);
    double compile_ms = (now_s() - c0) * 1e3;
    if (!pol || diags.errors) {
        for (size_t i = 0; i < diags.n; i++)
            fprintf(stderr, "  %s %s (line %d): %s\n", diags.items[i].level, diags.items[i].code, diags.items[i].line,
                    diags.items[i].message);
        die("the generated policy does not compile");
    }
    abx_diags_release(&diags);
    int slot = abx_policy_auth(pol, bench_token, strlen(bench_token), 0);
    if (slot < 0)
        die("the bench token does not authenticate");

    /* principal bench has role r3: allow statements i = 3, 13, 23, ... apply to it,
     * with directories (i * 7) % 20 = 1 or 11 */
    bcase cases[] = {
        {.name = "stat inside", .op_id = "files.stat", .want = ABX_OK},
        {.name = "read inside", .op_id = "files.read", .want = ABX_OK},
        {.name = "stat inside (deep)", .op_id = "files.stat", .want = ABX_OK},
        {.name = "stat outside (ws)", .op_id = "files.stat", .want = ABX_E_POLICY_PATH_NOT_ALLOWED},
        {.name = "read outside (/etc)", .op_id = "files.read", .want = ABX_E_POLICY_PATH_NOT_ALLOWED},
        {.name = "read denied path", .op_id = "files.read", .want = ABX_E_POLICY_PATH_DENIED},
    };
    const size_t n_cases = sizeof cases / sizeof *cases;
    snprintf(cases[0].path, PATH_MAX, "%s/d1/f.txt", ws);
    snprintf(cases[1].path, PATH_MAX, "%s/d11/f.txt", ws);
    snprintf(cases[2].path, PATH_MAX, "%s/d1/a/b/c/d/f.txt", ws);
    snprintf(cases[3].path, PATH_MAX, "%s/d2/f.txt", ws);
    snprintf(cases[4].path, PATH_MAX, "/etc/hostname");
    snprintf(cases[5].path, PATH_MAX, "%s/d1/private/key.txt", ws);

    size_t mounting_stat = 0;
    for (size_t i = 0; i < n_cases; i++) {
        bcase *c = &cases[i];
        c->op = abx_registry_get(reg, c->op_id);
        if (!c->op)
            die("no op %s in the registry", c->op_id);
        c->op_index = abx_registry_index_of(reg, c->op);
        c->args = json_pack("{s:s}", "path", c->path);
        char msg[300];
        if (!c->args || abx_args_validate(c->op, c->args, msg, sizeof msg) != ABX_OK)
            die("%s: arguments do not validate: %s", c->name, msg);
        abx_decision d;
        abx_decide(pol, slot, c->op, c->op_index, c->args, &d, NULL);
        abx_err got = d.err;
        char why[300];
        snprintf(why, sizeof why, "%s", d.message);
        abx_decision_release(&d);
        if (got != c->want)
            die("%s: %s %s decided %s (%s), expected %s", c->name, c->op_id, c->path, abx_err_code(got), why,
                abx_err_code(c->want));
        if (i == 0)
            mounting_stat = pol->mount_cnt[(size_t)slot * pol->n_ops + c->op_index];
    }

    printf("policy: %d statements (%d allow, %d deny), compiled in %.2f ms; principal 'bench' (role r3) has %zu "
           "allow statements mounting files.stat\n",
           n_allow + n_deny, n_allow, n_deny, compile_ms, mounting_stat);
    printf("compile\t%.3f\t%d\t%d\t%zu\n", compile_ms, n_allow, n_deny, mounting_stat);
    printf("%-22s %-11s %-26s %12s %10s\n", "case", "op", "outcome", "decisions/s", "ns/dec");

    unsigned long k;
    double el;
    run(pol, slot, cases, n_cases, secs, &k, &el);
    report("mixed (all cases)", "both", "round-robin", k, el);
    for (size_t i = 0; i < n_cases; i++) {
        run(pol, slot, &cases[i], 1, secs / 4, &k, &el);
        report(cases[i].name, cases[i].op_id, abx_err_code(cases[i].want), k, el);
    }
    run_canon(cases, n_cases, secs / 4, &k, &el);
    report("canonicalize only", "-", "abx_path_canon, all paths", k, el);

    for (size_t i = 0; i < n_cases; i++)
        json_decref(cases[i].args);
    abx_policy_unref(pol);
    json_decref(auth);
    json_decref(policy);
    free(auth_text);
    free(pol_text);
    abx_registry_free(reg);
    return 0;
}
