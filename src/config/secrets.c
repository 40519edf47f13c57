/* secrets.c — the config's secrets and the ${secret:NAME} template parser (secrets.h). */
#include "config/secrets.h"

#include "core/util.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static bool name_ok(const char *n, size_t len)
{
    if (len == 0 || len > ABX_SECRET_NAME_MAX || isdigit((unsigned char)n[0]))
        return false;
    for (size_t i = 0; i < len; i++)
        if (!isalnum((unsigned char)n[i]) && n[i] != '_' && n[i] != '-' && n[i] != '.')
            return false;
    return true;
}

/* a file's contents without one trailing newline; NULL with errno */
static char *read_secret_file(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return NULL;
    char *buf = abx_calloc(1, ABX_SECRET_VALUE_MAX + 2);
    size_t len = 0;
    ssize_t n = 0;
    while (buf && len <= ABX_SECRET_VALUE_MAX &&
           (n = read(fd, buf + len, ABX_SECRET_VALUE_MAX + 1 - len)) > 0)
        len += (size_t)n;
    int err = n < 0 ? errno : len > ABX_SECRET_VALUE_MAX ? EFBIG : 0;
    close(fd);
    if (!buf || err) {
        abx_free(buf);
        errno = buf ? err : ENOMEM;
        return NULL;
    }
    if (len && buf[len - 1] == '\n')
        buf[--len] = '\0';
    if (len && buf[len - 1] == '\r')
        buf[--len] = '\0';
    return buf;
}

static int load_one(const char *name, const json_t *spec, abx_secret *out, const char **code, char *err,
                    size_t errlen)
{
    const json_t *env = json_object_get(spec, "env"), *file = json_object_get(spec, "file");
    *code = "config.invalid";
    if (!name_ok(name, strlen(name))) {
        snprintf(err, errlen, "secret name '%.64s' must be letters, digits, _ - . (at most 64)", name);
        return -1;
    }
    if (!json_is_object(spec) || json_object_size(spec) != 1 || !(json_is_string(env) || json_is_string(file))) {
        snprintf(err, errlen, "secret '%s' must be {env: VARIABLE} or {file: PATH}", name);
        return -1;
    }
    *code = "config.secret_unavailable";
    char *v;
    if (env) {
        const char *e = getenv(json_string_value(env));
        if (!e || !*e) {
            snprintf(err, errlen, "secret '%s': environment variable %s is not set", name, json_string_value(env));
            return -1;
        }
        v = abx_strdup(e);
    } else if (!(v = read_secret_file(json_string_value(file)))) {
        snprintf(err, errlen, "secret '%s': cannot read %s: %s", name, json_string_value(file), strerror(errno));
        return -1;
    }
    if (!v || !*v || strlen(v) > ABX_SECRET_VALUE_MAX || strpbrk(v, "\r\n")) {
        snprintf(err, errlen, "secret '%s' is empty, over 8 KiB or has a line break", name);
        abx_free(v);
        return -1;
    }
    out->name = abx_strdup(name);
    out->value = v;
    return 0;
}

int abx_secrets_load(const json_t *map, abx_secrets *out, const char **code, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (!map)
        return 0;
    if (!json_is_object(map)) {
        *code = "config.invalid";
        snprintf(err, errlen, "'secrets' must be a map NAME: {env: VARIABLE} | {file: PATH}");
        return -1;
    }
    out->v = abx_calloc(json_object_size(map) + 1, sizeof *out->v);
    const char *name;
    const json_t *spec;
    json_object_foreach((json_t *)map, name, spec)
    {
        if (!out->v || load_one(name, spec, &out->v[out->n], code, err, errlen) < 0) {
            abx_secrets_free(out);
            return -1;
        }
        out->n++;
    }
    return 0;
}

void abx_secrets_free(abx_secrets *s)
{
    for (size_t i = 0; s->v && i < s->n; i++) {
        abx_free(s->v[i].name);
        if (s->v[i].value) {
            explicit_bzero(s->v[i].value, strlen(s->v[i].value));
            abx_free(s->v[i].value);
        }
    }
    abx_free(s->v);
    memset(s, 0, sizeof *s);
}

const char *abx_secret_value(const abx_secrets *s, const char *name)
{
    for (size_t i = 0; s && i < s->n; i++)
        if (strcmp(s->v[i].name, name) == 0)
            return s->v[i].value;
    return NULL;
}

int abx_secret_tpl_next(const char *tpl, size_t *pos, size_t *lit, char name[ABX_SECRET_NAME_MAX + 1])
{
    const char *p = tpl + *pos, *d = strchr(p, '$');
    name[0] = '\0';
    if (!d) {
        *lit = strlen(p);
        *pos += *lit;
        return 0;
    }
    *lit = (size_t)(d - p);
    if (d[1] == '$') { /* "$$": one literal '$' (the literal is the text up to and with it) */
        *lit += 1;
        *pos += *lit + 1;
        return 2;
    }
    if (strncmp(d, "${secret:", 9) != 0)
        return -1;
    const char *n = d + 9, *e = strchr(n, '}');
    if (!e || !name_ok(n, (size_t)(e - n)))
        return -1;
    memcpy(name, n, (size_t)(e - n));
    name[e - n] = '\0';
    *pos = (size_t)(e + 1 - tpl);
    return 1;
}

static void buf_wipe_free(abx_buf *b)
{
    if (b->data)
        explicit_bzero(b->data, b->len);
    abx_buf_release(b);
}

char *abx_secret_expand(const char *tpl, const abx_secrets *s, void (*used)(const char *value, void *ctx), void *ctx,
                        char *err, size_t errlen)
{
    abx_buf b = {0};
    size_t pos = 0, lit;
    char name[ABX_SECRET_NAME_MAX + 1];
    for (;;) {
        size_t start = pos;
        int r = abx_secret_tpl_next(tpl, &pos, &lit, name);
        if (r < 0) {
            snprintf(err, errlen, "malformed secret reference at offset %zu (write ${secret:NAME}, $$ for $)", start + lit);
            buf_wipe_free(&b);
            return NULL;
        }
        abx_buf_append(&b, tpl + start, lit);
        if (r == 0)
            break;
        if (r == 1) {
            const char *v = abx_secret_value(s, name);
            if (!v) {
                snprintf(err, errlen, "unknown secret '%s' (not in secrets:)", name);
                buf_wipe_free(&b);
                return NULL;
            }
            abx_buf_puts(&b, v);
            if (used)
                used(v, ctx);
        }
    }
    if (b.failed) {
        snprintf(err, errlen, "out of memory");
        buf_wipe_free(&b);
        return NULL;
    }
    if (!b.len) {
        abx_buf_release(&b);
        return abx_strdup("");
    }
    return abx_buf_detach(&b);
}
