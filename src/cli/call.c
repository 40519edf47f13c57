/* call.c — `abx call OP k=v ...`: one operation on a running server over HTTP
 * (libcurl), as POST /ops/{id}. Arguments are typed by the local registry's schema
 * when the op is known, else read as JSON literals (falling back to strings). The URL
 * and token come from --url/--token, ABX_URL/ABX_TOKEN, or the files the embedded
 * default wrote ($ABX_HOME or ~/.abx: url, token). Output: the JSON reply indented,
 * or with --json one compact JSON document a line; server-sent events are printed as
 * they arrive (as sent, or with --json one {"event", "data", "id"} object a line). */
#include "cli/cli.h"
#include "core/core.h"
#include "core/util.h"
#include <curl/curl.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *read_small(const char *dir, const char *name)
{
    char *path = abx_asprintf("%s/%s", dir, name);
    FILE *f = path ? fopen(path, "re") : NULL;
    abx_free(path);
    if (!f)
        return NULL;
    char buf[512];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    while (n && (buf[n - 1] == '\n' || buf[n - 1] == ' ' || buf[n - 1] == '\r'))
        buf[--n] = '\0';
    return n ? abx_strdup(buf) : NULL;
}

/* libcurl is loaded only when `abx call` runs: `abx serve` must not pay for its
 * dozens of shared libraries at every start (measured: ~30 ms of start-up). */
static struct {
    CURLcode (*global_init)(long);
    void (*global_cleanup)(void);
    CURL *(*easy_init)(void);
    CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
    CURLcode (*easy_perform)(CURL *);
    CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
    void (*easy_cleanup)(CURL *);
    const char *(*easy_strerror)(CURLcode);
    struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
    void (*slist_free_all)(struct curl_slist *);
} lc;

static bool load_curl(void)
{
    void *h = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        h = dlopen("libcurl-gnutls.so.4", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return false;
#define SYM(field, name) (*(void **)&lc.field = dlsym(h, name))
    return SYM(global_init, "curl_global_init") && SYM(global_cleanup, "curl_global_cleanup") &&
           SYM(easy_init, "curl_easy_init") && SYM(easy_setopt, "curl_easy_setopt") &&
           SYM(easy_perform, "curl_easy_perform") && SYM(easy_getinfo, "curl_easy_getinfo") &&
           SYM(easy_cleanup, "curl_easy_cleanup") && SYM(easy_strerror, "curl_easy_strerror") &&
           SYM(slist_append, "curl_slist_append") && SYM(slist_free_all, "curl_slist_free_all");
#undef SYM
}

/* The answer as it arrives: a stream (SSE, 2xx) is printed at once, anything else is
 * kept for printing at the end. */
typedef struct sink {
    CURL *c;
    bool json;     /* --json: SSE frames become JSON lines */
    bool decided;  /* whether this is a stream is known (the headers have arrived) */
    bool sse;
    abx_buf body;  /* the whole answer (not a stream) */
    abx_buf frame; /* SSE bytes not yet ending in a blank line (--json) */
} sink;

/* One SSE frame (no trailing blank line) as {"event", "data", "id"}: data parsed as
 * JSON when it is, else the text. Comments (keepalives) alone print nothing. */
static void print_sse_frame(const char *f, size_t n)
{
    char event[64] = "message";
    abx_buf data, id;
    abx_buf_init(&data, 0);
    abx_buf_init(&id, 0);
    bool any = false, has_id = false;
    for (size_t i = 0; i < n;) {
        size_t e = i;
        while (e < n && f[e] != '\n')
            e++;
        size_t len = e - i;
        if (len && f[i + len - 1] == '\r')
            len--;
        const char *line = f + i, *colon = memchr(line, ':', len);
        size_t flen = colon ? (size_t)(colon - line) : len;
        const char *v = colon ? colon + 1 : line + len;
        size_t vlen = (size_t)(line + len - v);
        if (vlen && *v == ' ')
            v++, vlen--;
        if (flen == 5 && strncmp(line, "event", 5) == 0) {
            snprintf(event, sizeof event, "%.*s", (int)vlen, v);
        } else if (flen == 4 && strncmp(line, "data", 4) == 0) {
            if (any)
                abx_buf_putc(&data, '\n');
            abx_buf_append(&data, v, vlen);
            any = true;
        } else if (flen == 2 && strncmp(line, "id", 2) == 0) {
            abx_buf_release(&id);
            abx_buf_append(&id, v, vlen);
            has_id = true;
        }
        i = e + 1;
    }
    if (any) {
        json_t *d = json_loadb(data.data ? data.data : "", data.len, JSON_DECODE_ANY, NULL);
        json_t *o = json_pack("{s:s, s:o}", "event", event, "data", d ? d : json_stringn(data.data ? data.data : "",
                                                                                            data.len));
        if (o && has_id)
            json_object_set_new(o, "id", json_stringn(id.data ? id.data : "", id.len));
        char *line = o ? json_dumps(o, JSON_COMPACT) : NULL;
        if (line) {
            puts(line);
            fflush(stdout);
        }
        free(line);
        json_decref(o);
    }
    abx_buf_release(&data);
    abx_buf_release(&id);
}

static size_t on_body(char *p, size_t sz, size_t n, void *ud)
{
    sink *k = ud;
    size_t len = sz * n;
    if (!k->decided) {
        long status = 0;
        char *ctype = NULL;
        lc.easy_getinfo(k->c, CURLINFO_RESPONSE_CODE, &status);
        lc.easy_getinfo(k->c, CURLINFO_CONTENT_TYPE, &ctype);
        k->sse = status >= 200 && status < 300 && ctype && strncmp(ctype, "text/event-stream", 17) == 0;
        k->decided = true;
    }
    if (!k->sse)
        return abx_buf_append(&k->body, p, len) ? len : 0;
    if (!k->json) {
        fwrite(p, 1, len, stdout);
        fflush(stdout);
        return len;
    }
    if (!abx_buf_append(&k->frame, p, len))
        return 0;
    for (;;) { /* every complete frame: up to a blank line */
        char *f = k->frame.data;
        char *end = f ? strstr(f, "\n\n") : NULL;
        if (!end)
            break;
        print_sse_frame(f, (size_t)(end - f));
        size_t used = (size_t)(end - f) + 2;
        memmove(f, f + used, k->frame.len - used + 1);
        k->frame.len -= used;
    }
    return len;
}

/* name=value on the command line, typed by the op's schema: a list may be written as
 * JSON ('argv=["ls","-l"]'); objects, maps and any-typed values are JSON when they parse. */
static int add_kv_arg(abx_registry *reg, const char *op, json_t *args, const char *a)
{
    const char *eq = strchr(a, '=');
    char *name = abx_strndup(a, (size_t)(eq - a));
    const abx_op *o = op ? abx_registry_resolve(reg, op) : NULL;
    char msg[256];
    const abx_param *pa = o && name ? abx_op_param(o, name) : NULL;
    json_t *as_json = pa && pa->type == ABX_T_LIST && eq[1] == '[' ? json_loads(eq + 1, 0, NULL) : NULL;
    int rc = name ? 0 : -1;
    if (as_json) {
        json_object_set_new(args, name, as_json);
    } else if (pa && pa->type != ABX_T_OBJECT && pa->type != ABX_T_MAP && pa->type != ABX_T_ANY) {
        if (abx_args_add_text(o, args, name, eq + 1, strlen(eq + 1), msg, sizeof msg) != ABX_OK) {
            fprintf(stderr, "abx call: %s\n", msg);
            rc = -1;
        }
    } else if (name) {
        json_t *v = json_loads(eq + 1, JSON_DECODE_ANY, NULL);
        json_object_set_new(args, name, v ? v : json_string(eq + 1));
    }
    abx_free(name);
    return rc;
}

/* A whole (non-stream) reply: JSON pretty-printed (compact with --json), bytes as they
 * are, or with --json as {content_type, length, content_base64}. */
static void print_reply(const sink *k, const char *ctype, bool raw, bool json_out)
{
    bool is_json = ctype && strncmp(ctype, "application/json", 16) == 0;
    json_t *j = !raw && is_json ? json_loadb(k->body.data ? k->body.data : "", k->body.len, 0, NULL) : NULL;
    if (j) {
        char *text = json_dumps(j, json_out ? JSON_COMPACT : JSON_INDENT(2));
        puts(text ? text : "");
        free(text);
        json_decref(j);
    } else if (json_out && !raw) {
        char *b64 = abx_base64_encode(k->body.data ? k->body.data : "", k->body.len, NULL);
        json_t *o = json_pack("{s:s, s:I, s:s}", "content_type", ctype ? ctype : "application/octet-stream",
                              "length", (json_int_t)k->body.len, "content_base64", b64 ? b64 : "");
        char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
        puts(text ? text : "");
        free(text);
        json_decref(o);
        abx_free(b64);
    } else if (k->body.len) {
        fwrite(k->body.data, 1, k->body.len, stdout);
    }
}

int abx_cli_call(int argc, char **argv)
{
    const char *op = NULL, *url = getenv("ABX_URL"), *token = getenv("ABX_TOKEN"), *json_args = NULL;
    bool raw = false, json_out = false;
    json_t *args = json_object();
    char *url_owned = NULL, *token_owned = NULL;
    char *home = getenv("ABX_HOME") ? abx_strdup(getenv("ABX_HOME"))
                                    : abx_asprintf("%s/.abx", getenv("HOME") ? getenv("HOME") : "/root");
    abx_registry *reg = abx_registry_default();
    abx_registry_freeze(reg);
    int rc = 1;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--url") == 0 && i + 1 < argc)
            url = argv[++i];
        else if (strcmp(a, "--token") == 0 && i + 1 < argc)
            token = argv[++i];
        else if (strcmp(a, "--args") == 0 && i + 1 < argc)
            json_args = argv[++i];
        else if (strcmp(a, "--json") == 0 && i + 1 < argc && argv[i + 1][0] == '{')
            json_args = argv[++i]; /* the older spelling of --args */
        else if (strcmp(a, "--json") == 0)
            json_out = true;
        else if (strcmp(a, "--raw") == 0)
            raw = true;
        else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            rc = op ? abx_cli_op_help(op, stdout) : 2;
            if (!op)
                fprintf(stderr, "usage: abx call OP --help (abx ops lists the operations)\n");
            goto out;
        } else if (!op && a[0] != '-')
            op = a;
        else if (strchr(a, '=')) {
            if (add_kv_arg(reg, op, args, a) != 0)
                goto out;
        } else {
            fprintf(stderr, "abx call: unexpected argument '%s'\n", a);
            goto out;
        }
    }
    if (!op) {
        fprintf(stderr, "usage: abx call OP [k=v ...] [--args '{...}'] [--json] [--url URL] [--token T] [--raw]\n");
        rc = 2;
        goto out;
    }
    if (json_args) {
        json_error_t je;
        json_t *j = json_loads(json_args, 0, &je);
        if (!json_is_object(j)) {
            fprintf(stderr, "abx call: --args must be a JSON object: %s\n", je.text);
            json_decref(j);
            goto out;
        }
        json_object_update(args, j);
        json_decref(j);
    }
    if (!url)
        url = url_owned = read_small(home, "url");
    if (!url)
        url = "http://127.0.0.1:8080";
    if (!token)
        token = token_owned = read_small(home, "token");
    if (!load_curl()) {
        fprintf(stderr, "abx call: libcurl (libcurl.so.4) is not installed\n");
        goto out;
    }
    lc.global_init(CURL_GLOBAL_DEFAULT);
    CURL *c = lc.easy_init();
    char *full = abx_asprintf("%s/ops/%s", url, op);
    char *body = json_dumps(args, JSON_COMPACT);
    struct curl_slist *h = lc.slist_append(NULL, "Content-Type: application/json");
    h = lc.slist_append(h, "X-ABX-Client: abx-cli/" ABX_VERSION " catalog=1");
    char *auth = token ? abx_asprintf("Authorization: Bearer %s", token) : NULL;
    if (auth)
        h = lc.slist_append(h, auth);
    sink k = {.c = c, .json = json_out};
    abx_buf_init(&k.body, 0);
    abx_buf_init(&k.frame, 1u << 20); /* one SSE frame is far smaller */
    lc.easy_setopt(c, CURLOPT_URL, full);
    lc.easy_setopt(c, CURLOPT_POSTFIELDS, body);
    lc.easy_setopt(c, CURLOPT_HTTPHEADER, h);
    lc.easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    lc.easy_setopt(c, CURLOPT_WRITEDATA, &k);
    CURLcode cr = lc.easy_perform(c);
    long status = 0;
    char *ctype = NULL;
    lc.easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    lc.easy_getinfo(c, CURLINFO_CONTENT_TYPE, &ctype);
    if (cr != CURLE_OK) {
        fprintf(stderr, "abx call: %s: %s\n", url, lc.easy_strerror(cr));
    } else if (k.sse) {
        if (k.json && k.frame.len) /* a last frame without its blank line */
            print_sse_frame(k.frame.data, k.frame.len);
        rc = 0;
    } else {
        print_reply(&k, ctype, raw, json_out);
        rc = status >= 200 && status < 300 ? 0 : 1;
    }
    abx_buf_release(&k.body);
    abx_buf_release(&k.frame);
    lc.slist_free_all(h);
    abx_free(auth);
    free(body);
    abx_free(full);
    lc.easy_cleanup(c);
    lc.global_cleanup();
out:
    json_decref(args);
    abx_free(url_owned);
    abx_free(token_owned);
    abx_free(home);
    return rc;
}
