/* call.c — `abx call OP k=v ...`: one operation on a running server over HTTP
 * (libcurl), as POST /ops/{id}. Arguments are typed by the local registry's schema
 * when the op is known, else read as JSON literals (falling back to strings). The URL
 * and token come from --url/--token, ABX_URL/ABX_TOKEN, or the files the embedded
 * default wrote ($ABX_HOME or ~/.abx: url, token). */
#include "core/core.h"
#include "core/util.h"
#include <curl/curl.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int abx_cli_call(int argc, char **argv);

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

static size_t on_body(char *p, size_t sz, size_t n, void *ud)
{
    return abx_buf_append(ud, p, sz * n) ? sz * n : 0;
}

int abx_cli_call(int argc, char **argv)
{
    const char *op = NULL, *url = getenv("ABX_URL"), *token = getenv("ABX_TOKEN"), *json_args = NULL;
    bool raw = false;
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
        else if (strcmp(a, "--json") == 0 && i + 1 < argc)
            json_args = argv[++i];
        else if (strcmp(a, "--raw") == 0)
            raw = true;
        else if (!op && a[0] != '-')
            op = a;
        else if (strchr(a, '=')) {
            const char *eq = strchr(a, '=');
            char *name = abx_strndup(a, (size_t)(eq - a));
            const abx_op *o = op ? abx_registry_resolve(reg, op) : NULL;
            char msg[256];
            const abx_param *pa = o ? abx_op_param(o, name) : NULL;
            json_t *as_json = pa && pa->type == ABX_T_LIST && eq[1] == '[' ? json_loads(eq + 1, 0, NULL) : NULL;
            if (as_json) { /* argv='["ls","-l"]': a list written as JSON */
                json_object_set_new(args, name, as_json);
            } else if (pa && pa->type != ABX_T_OBJECT && pa->type != ABX_T_MAP && pa->type != ABX_T_ANY) {
                if (abx_args_add_text(o, args, name, eq + 1, strlen(eq + 1), msg, sizeof msg) != ABX_OK) {
                    fprintf(stderr, "abx call: %s\n", msg);
                    abx_free(name);
                    goto out;
                }
            } else {
                json_t *v = json_loads(eq + 1, JSON_DECODE_ANY, NULL);
                json_object_set_new(args, name, v ? v : json_string(eq + 1));
            }
            abx_free(name);
        } else {
            fprintf(stderr, "abx call: unexpected argument '%s'\n", a);
            goto out;
        }
    }
    if (!op) {
        fprintf(stderr, "usage: abx call OP [k=v ...] [--json '{...}'] [--url URL] [--token T] [--raw]\n");
        rc = 2;
        goto out;
    }
    if (json_args) {
        json_error_t je;
        json_t *j = json_loads(json_args, 0, &je);
        if (!json_is_object(j)) {
            fprintf(stderr, "abx call: --json must be a JSON object: %s\n", je.text);
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
    abx_buf resp;
    abx_buf_init(&resp, 0);
    lc.easy_setopt(c, CURLOPT_URL, full);
    lc.easy_setopt(c, CURLOPT_POSTFIELDS, body);
    lc.easy_setopt(c, CURLOPT_HTTPHEADER, h);
    lc.easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    lc.easy_setopt(c, CURLOPT_WRITEDATA, &resp);
    CURLcode cr = lc.easy_perform(c);
    long status = 0;
    char *ctype = NULL;
    lc.easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    lc.easy_getinfo(c, CURLINFO_CONTENT_TYPE, &ctype);
    if (cr != CURLE_OK) {
        fprintf(stderr, "abx call: %s: %s\n", url, lc.easy_strerror(cr));
    } else {
        json_t *j = (!raw && ctype && strncmp(ctype, "application/json", 16) == 0)
                        ? json_loadb(resp.data ? resp.data : "", resp.len, 0, NULL)
                        : NULL;
        if (j) {
            char *pretty = json_dumps(j, JSON_INDENT(2));
            puts(pretty ? pretty : "");
            free(pretty);
            json_decref(j);
        } else if (resp.len) {
            fwrite(resp.data, 1, resp.len, stdout);
        }
        rc = status >= 200 && status < 300 ? 0 : 1;
    }
    abx_buf_release(&resp);
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
