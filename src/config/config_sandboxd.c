/* config_sandboxd.c — the sandboxd section's cross-key rules, checked when the config is
 * loaded (a pod that would listen in the clear on its network by mistake never starts):
 * a non-loopback listener (REST or gRPC) needs top-level tls or allow_plaintext
 * (sandboxd's own or the top-level one); token_file needs principal and is read here (a
 * mounted Secret), its value kept in memory only. */
#include "config/config.h"
#include "core/util.h"
#include <errno.h>
#include <stdio.h>
#include <string.h>

void abx_sandboxd_token_free(char *token)
{
    if (!token)
        return;
    volatile char *p = token;
    while (*p)
        *p++ = 0;
    abx_free(token);
}

static char *read_token(const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "re");
    if (!f) {
        snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
        return NULL;
    }
    char buf[4096];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    bool more = fgetc(f) != EOF;
    fclose(f);
    buf[n] = '\0';
    while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' '))
        buf[--n] = '\0';
    char *tok = NULL;
    if (more)
        snprintf(err, errlen, "%s is larger than 4 KiB", path);
    else if (n < 16)
        snprintf(err, errlen, "%s holds a token shorter than 16 characters", path);
    else if (strcspn(buf, " \t\r\n") != n)
        snprintf(err, errlen, "%s holds whitespace inside the token", path);
    else
        tok = abx_strdup(buf);
    memset(buf, 0, sizeof buf);
    return tok;
}

bool abx_sandboxd_config_check(abx_config *c, abx_diags *d)
{
    bool plain = c->allow_plaintext || c->sandboxd_allow_plaintext;
    if (c->sandboxd_rest_host && c->sandboxd_rest_port >= 0 && !abx_host_is_loopback(c->sandboxd_rest_host) &&
        !c->tls_cert && !plain) {
        abx_diag_add(d, "error", "config.invalid", 0,
                     "sandboxd.rest_listen %s is not loopback: configure tls: {cert, key} or sandboxd.allow_plaintext: true",
                     c->sandboxd_rest_host);
        return false;
    }
    if (c->sandboxd_grpc_host && c->sandboxd_grpc_port >= 0 && !abx_host_is_loopback(c->sandboxd_grpc_host) &&
        !c->tls_cert && !plain) {
        abx_diag_add(d, "error", "config.invalid", 0,
                     "sandboxd.grpc_listen %s is not loopback: configure tls: {cert, key} (HTTP/2 over TLS) or "
                     "sandboxd.allow_plaintext: true (cleartext h2c on a pod network)",
                     c->sandboxd_grpc_host);
        return false;
    }
    if (c->sandboxd_rest_host && c->listen_host && c->sandboxd_rest_port > 0 &&
        c->sandboxd_rest_port == c->listen_port) {
        abx_diag_add(d, "error", "config.invalid", 0,
                     "sandboxd.rest_listen and listen share port %d: move listen (e.g. 127.0.0.1:7070)",
                     c->listen_port);
        return false;
    }
    if (c->sandboxd_token_file) {
        if (!c->sandboxd_principal) {
            abx_diag_add(d, "error", "config.invalid", 0, "sandboxd.token_file needs sandboxd.principal");
            return false;
        }
        char err[300] = "";
        c->sandboxd_token = read_token(c->sandboxd_token_file, err, sizeof err);
        if (!c->sandboxd_token) {
            abx_diag_add(d, "error", "config.invalid", 0, "sandboxd.token_file: %s", err);
            return false;
        }
    }
    return true;
}
