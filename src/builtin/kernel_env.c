/* kernel_env.c — a cell's own environment variables (kernels.execute / kernels.stream
 * `env`): before the user's cell a silent execute_request sets them in the kernel's
 * process (Python: os.environ, R: Sys.setenv) and keeps what they were inside the
 * kernel; after the cell (also after an error or an interrupt) another silent request
 * puts the old values back. The values travel as JSON string literals (valid Python
 * and R literals alike); the user's code is never edited. */
#include "builtin/kernels.h"
#include <stdio.h>
#include <string.h>

#define MAX_VARS 64
#define MAX_NAME 128
#define MAX_VALUE (32 * 1024)

/* Names like a shell's, not reserved (the rule of kernels.create's env), values not huge. */
abx_err abx_kenv_check(const json_t *env, abx_reply *r)
{
    if (!env)
        return ABX_OK;
    if (json_object_size(env) > MAX_VARS)
        return abx_reply_error(r, ABX_E_ARGS_INVALID, NULL, "env: at most %d variables per cell", MAX_VARS);
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)env, k, v) {
        size_t n = strlen(k);
        bool ok = n && n <= MAX_NAME && !(k[0] >= '0' && k[0] <= '9');
        for (size_t i = 0; ok && i < n; i++)
            ok = k[i] == '_' || (k[i] >= 'A' && k[i] <= 'Z') || (k[i] >= 'a' && k[i] <= 'z') ||
                 (k[i] >= '0' && k[i] <= '9');
        if (!ok)
            return abx_reply_error(r, ABX_E_ARGS_INVALID, NULL, "env: '%.140s' is not a variable name", k);
        if (strncmp(k, "ABX_", 4) == 0 || strncmp(k, "LD_", 3) == 0 || strncmp(k, "PYTHON", 6) == 0 ||
            strncmp(k, "R_", 2) == 0)
            return abx_reply_error(r, ABX_E_ARGS_INVALID, NULL, "env: %s is reserved", k);
        if (!json_is_string(v) || json_string_length(v) > MAX_VALUE) /* (the JSON parser refuses NUL) */
            return abx_reply_error(r, ABX_E_ARGS_INVALID, NULL, "env: %s must be a string of at most %d bytes", k,
                                   MAX_VALUE);
    }
    return ABX_OK;
}

static const char PY_SET[] = "(lambda o, v: (setattr(__import__('sys'), '_abx_cell_env', {k: o.get(k) for k in v}), "
                             "o.update(v)))(__import__('os').environ, %s)";
static const char PY_RESTORE[] =
    "(lambda o, s: [o.pop(k, None) if x is None else o.__setitem__(k, x) for k, x in s.items()])"
    "(__import__('os').environ, __import__('sys').__dict__.pop('_abx_cell_env', {}))";
static const char R_SET[] = "local({v <- c(%s); options(abx.cell_env = Sys.getenv(names(v), unset = NA, names = TRUE)); "
                            "do.call(Sys.setenv, as.list(v)); invisible(NULL)})";
static const char R_RESTORE[] =
    "local({o <- getOption('abx.cell_env'); options(abx.cell_env = NULL); for (n in names(o)) "
    "if (is.na(o[[n]])) Sys.unsetenv(n) else do.call(Sys.setenv, stats::setNames(list(o[[n]]), n)); invisible(NULL)})";

/* The code that sets env in the kernel's language (owned), or NULL. */
static char *set_code(const kernel *k, const json_t *env)
{
    bool r = strcmp(k->language, "r") == 0;
    abx_buf b;
    abx_buf_init(&b, 0);
    const char *name;
    const json_t *v;
    bool first = true;
    if (!r)
        abx_buf_putc(&b, '{');
    json_object_foreach((json_t *)env, name, v) {
        json_t *kj = json_string(name);
        char *ks = json_dumps(kj, JSON_ENCODE_ANY), *vs = json_dumps(v, JSON_ENCODE_ANY);
        json_decref(kj);
        abx_buf_printf(&b, "%s%s%s%s", first ? "" : ", ", ks ? ks : "\"\"", r ? " = " : ": ", vs ? vs : "\"\"");
        free(ks);
        free(vs);
        first = false;
    }
    if (!r)
        abx_buf_putc(&b, '}');
    abx_buf_putc(&b, '\0');
    size_t n = b.len + sizeof R_SET + sizeof PY_SET;
    char *code = abx_malloc(n);
    if (code)
        snprintf(code, n, r ? R_SET : PY_SET, b.data ? b.data : "");
    abx_buf_release(&b);
    return code;
}

/* Run code silently and wait up to ms for its execute_reply: 0 ok, -1 not sent or no
 * reply, 1 the kernel answered with an error, 2 it aborted the request unrun (IRkernel
 * drops what is queued when a cell errs or is interrupted). Other messages are dropped. */
static int run_silent(kernel *k, const char *code, int ms)
{
    char id[40];
    json_t *req = json_pack("{s:s, s:b, s:b, s:{}, s:b, s:b}", "code", code, "silent", 1, "store_history", 0,
                            "user_expressions", "allow_stdin", 0, "stop_on_error", 0);
    if (!k->proc || !abx_proc_running(k->proc) || abx_jconn_send(k->conn, ABX_J_SHELL, "execute_request", req, id))
        return -1;
    int64_t end = abx_now_ms() + ms;
    unsigned mask = (1u << ABX_J_SHELL) | (1u << ABX_J_IOPUB);
    while (abx_now_ms() < end && abx_proc_running(k->proc)) {
        enum abx_jchan ch;
        abx_jmsg m;
        if (abx_jconn_recv(k->conn, mask, 100, &ch, &m) != 1 || ch == ABX_J_N)
            continue;
        int rc = -2;
        if (ch == ABX_J_SHELL && strcmp(m.parent_id, id) == 0 && strcmp(m.msg_type, "execute_reply") == 0)
        {
            const char *st = json_string_value(json_object_get(m.content, "status")) ?: "";
            rc = strcmp(st, "ok") == 0 ? 0 : strncmp(st, "abort", 5) == 0 ? 2 : 1;
        }
        abx_jmsg_release(&m);
        if (rc != -2)
            return rc;
    }
    return -1;
}

abx_err abx_kenv_apply(kernel *k, const json_t *env, abx_reply *r)
{
    char *code = set_code(k, env);
    int rc = code ? run_silent(k, code, 10000) : -1;
    abx_free(code);
    if (rc == 0)
        return ABX_OK;
    abx_kenv_restore(k);
    if (!k->proc || !abx_proc_running(k->proc))
        return abx_reply_error(r, ABX_E_KERNEL_DIED, NULL, "the kernel is not running");
    return abx_reply_error(r, ABX_E_ARGS_INVALID, NULL, "the kernel could not set the cell's env");
}

void abx_kenv_restore(kernel *k)
{
    /* an abort comes from a drain that was under way as the request arrived: again */
    for (int i = 0; i < 5 && run_silent(k, strcmp(k->language, "r") == 0 ? R_RESTORE : PY_RESTORE, 5000) == 2; i++)
        ;
}
