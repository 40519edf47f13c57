/* yaml.c — owns the translation of YAML (and JSON) text into a jansson value plus a
 * line map, driven by libyaml's event API, and the typing of plain scalars.
 * It must never: accept anchors/aliases, tags outside the core set, several
 * documents, duplicate or non-scalar keys, nesting deeper than 64 or input over
 * 4 MiB; keep global or static mutable state; read files; know what a config key
 * means (that belongs to the config loader).
 * The line map it fills lives in linemap.c.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* strtod_l, newlocale */
#endif
#include "core/yaml.h"

#include <limits.h>
#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#define YAML_MAX_INPUT ((size_t)4 * 1024 * 1024)
#define YAML_MAX_DEPTH 64
#define YAML_CORE_TAG "tag:yaml.org,2002:"

/* ---- parse context and errors ---- */

typedef struct yctx {
    yaml_parser_t parser;
    const char *text;
    size_t len;
    abx_linemap *lm; /* NULL when the caller wants no lines */
    char *err;
    size_t errlen;
    int *err_line;
    bool failed;
    locale_t cloc; /* "C" numeric locale for strtod_l, created on first real */
} yctx;

static void fail(yctx *c, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void fail(yctx *c, int line, const char *fmt, ...)
{
    if (c->failed)
        return; /* keep the first, most specific error */
    c->failed = true;
    if (c->err && c->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->err, c->errlen, fmt, ap);
        va_end(ap);
    }
    if (c->err_line)
        *c->err_line = line;
}

static int mark_line(yaml_mark_t m)
{
    return m.line >= (size_t)INT_MAX - 1 ? INT_MAX : (int)m.line + 1;
}

/* A printable excerpt of untrusted text for messages: control bytes become '?',
 * long text is cut at a UTF-8 boundary and ends with "...". */
#define EXCERPT_MAX 48
static const char *excerpt_max(char *out, size_t max, const char *s, size_t n)
{
    size_t k = n;
    if (k > max) {
        k = max;
        while (k > 0 && ((unsigned char)s[k] & 0xC0) == 0x80)
            k--;
    }
    for (size_t i = 0; i < k; i++) {
        unsigned char ch = (unsigned char)s[i];
        out[i] = (ch < 0x20 || ch == 0x7f) ? '?' : (char)ch;
    }
    if (k < n)
        memcpy(out + k, "...", 4);
    else
        out[k] = '\0';
    return out;
}

static const char *excerpt(char out[EXCERPT_MAX + 4], const char *s, size_t n)
{
    return excerpt_max(out, EXCERPT_MAX, s, n);
}

/* Shows "tag:yaml.org,2002:x" as "!!x". */
static const char *tag_excerpt(char out[EXCERPT_MAX + 4], const char *tag)
{
    size_t plen = strlen(YAML_CORE_TAG);
    if (strncmp(tag, YAML_CORE_TAG, plen) == 0) {
        out[0] = out[1] = '!';
        excerpt_max(out + 2, EXCERPT_MAX - 2, tag + plen, strlen(tag + plen));
        return out;
    }
    return excerpt(out, tag, strlen(tag));
}

static void parser_fail(yctx *c)
{
    const yaml_parser_t *p = &c->parser;
    const char *problem = p->problem ? p->problem : "invalid YAML";
    switch (p->error) {
    case YAML_MEMORY_ERROR:
        fail(c, 0, "out of memory while parsing YAML");
        break;
    case YAML_READER_ERROR: {
        /* the reader reports a byte offset, not a mark: count lines ourselves
         * (only meaningful for UTF-8 input, which is what configs are) */
        int line = 0;
        if (p->encoding == YAML_UTF8_ENCODING || p->encoding == YAML_ANY_ENCODING) {
            size_t end = p->problem_offset < c->len ? p->problem_offset : c->len;
            line = 1;
            for (size_t i = 0; i < end && line < INT_MAX; i++)
                line += c->text[i] == '\n';
        }
        if (p->problem_value != -1)
            fail(c, line, "%s (#%X)", problem, (unsigned)p->problem_value);
        else
            fail(c, line, "%s", problem);
        break;
    }
    default:
        if (p->context)
            fail(c, mark_line(p->problem_mark), "%s at line %d: %s", p->context,
                 mark_line(p->context_mark), problem);
        else
            fail(c, mark_line(p->problem_mark), "%s", problem);
        break;
    }
}

static bool next_event(yctx *c, yaml_event_t *ev)
{
    if (!yaml_parser_parse(&c->parser, ev)) {
        parser_fail(c);
        return false;
    }
    return true;
}

static bool record(yctx *c, const json_t *node, const char *key, int line)
{
    if (!c->lm || abx__linemap_put(c->lm, node, key, line))
        return true;
    fail(c, 0, "out of memory");
    return false;
}

/* ---- tags ---- */

enum ytag { T_NONE, T_STR, T_INT, T_FLOAT, T_BOOL, T_NULL, T_MAP, T_SEQ, T_BAD };

static enum ytag tag_kind(const yaml_char_t *utag)
{
    static const struct {
        const char *name;
        enum ytag kind;
    } known[] = {
        {"str", T_STR}, {"int", T_INT}, {"float", T_FLOAT}, {"bool", T_BOOL},
        {"null", T_NULL}, {"map", T_MAP}, {"seq", T_SEQ},
    };
    const char *tag = (const char *)utag;
    if (!tag)
        return T_NONE;
    size_t plen = strlen(YAML_CORE_TAG);
    if (strncmp(tag, YAML_CORE_TAG, plen) != 0)
        return T_BAD;
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        if (strcmp(tag + plen, known[i].name) == 0)
            return known[i].kind;
    }
    return T_BAD;
}

/* Common checks on a node's anchor and tag; `want` is T_MAP, T_SEQ or T_NONE (scalar). */
static bool check_props(yctx *c, const yaml_char_t *anchor, const yaml_char_t *tag,
                        enum ytag want, int line)
{
    char ex[EXCERPT_MAX + 4];
    if (anchor) {
        fail(c, line, "YAML anchors and aliases are not supported");
        return false;
    }
    enum ytag t = tag_kind(tag);
    if (t == T_BAD) {
        fail(c, line, "unsupported tag '%s'", tag_excerpt(ex, (const char *)tag));
        return false;
    }
    bool ok = t == T_NONE || (want == T_MAP ? t == T_MAP
                              : want == T_SEQ ? t == T_SEQ
                                              : (t != T_MAP && t != T_SEQ));
    if (!ok) {
        fail(c, line, "tag '%s' does not fit a %s", tag_excerpt(ex, (const char *)tag),
             want == T_MAP ? "mapping" : want == T_SEQ ? "sequence" : "scalar");
        return false;
    }
    return true;
}

/* ---- scalar typing (YAML 1.2 core schema, with leading zeros kept as text) ---- */

static bool text_is(const char *s, size_t n, const char *lit)
{
    return strlen(lit) == n && memcmp(s, lit, n) == 0;
}

static bool is_null_text(const char *s, size_t n)
{
    return n == 0 || text_is(s, n, "~") || text_is(s, n, "null") || text_is(s, n, "Null") ||
           text_is(s, n, "NULL");
}

/* 1 true, 0 false, -1 not a boolean */
static int bool_text(const char *s, size_t n)
{
    if (text_is(s, n, "true") || text_is(s, n, "True") || text_is(s, n, "TRUE"))
        return 1;
    if (text_is(s, n, "false") || text_is(s, n, "False") || text_is(s, n, "FALSE"))
        return 0;
    return -1;
}

static int digit_value(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/* [-+]?(0|[1-9][0-9]*) | 0o[0-7]+ | 0x[0-9a-fA-F]+.
 * 1: integer in *out; 0: not an integer; -1: an integer outside long long. */
static int parse_int(const char *s, size_t n, long long *out)
{
    size_t i = 0;
    bool neg = false;
    unsigned base = 10;
    if (n > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'o')) {
        base = s[1] == 'x' ? 16 : 8;
        i = 2;
    } else {
        if (n > 0 && (s[0] == '+' || s[0] == '-')) {
            neg = s[0] == '-';
            i = 1;
        }
        if (i == n)
            return 0;
        if (s[i] == '0' && n - i > 1)
            return 0; /* "0755", "00": left as text */
    }
    unsigned long long limit = neg ? (unsigned long long)LLONG_MAX + 1ULL : (unsigned long long)LLONG_MAX;
    unsigned long long v = 0;
    bool over = false;
    for (; i < n; i++) {
        int d = digit_value(s[i]);
        if (d < 0 || (unsigned)d >= base)
            return 0;
        if (!over) {
            if (v > (limit - (unsigned)d) / base)
                over = true;
            else
                v = v * base + (unsigned)d;
        }
    }
    if (over)
        return -1;
    if (neg)
        *out = v == (unsigned long long)LLONG_MAX + 1ULL ? LLONG_MIN : -(long long)v;
    else
        *out = (long long)v;
    return 1;
}

static bool is_digit(char ch)
{
    return ch >= '0' && ch <= '9';
}

/* [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)? with no leading zero on a
 * multi-digit integer part, or [-+]?.inf / .nan in their three spellings.
 * 0: not a float; 1: finite syntax; 2: infinity or NaN. */
static int float_syntax(const char *s, size_t n)
{
    size_t i = 0;
    if (n > 0 && (s[0] == '+' || s[0] == '-'))
        i = 1;
    const char *r = s + i;
    size_t rn = n - i;
    if (text_is(r, rn, ".inf") || text_is(r, rn, ".Inf") || text_is(r, rn, ".INF"))
        return 2;
    if (i == 0 && (text_is(s, n, ".nan") || text_is(s, n, ".NaN") || text_is(s, n, ".NAN")))
        return 2;
    size_t int_start = i;
    while (i < n && is_digit(s[i]))
        i++;
    size_t int_digits = i - int_start;
    if (int_digits > 1 && s[int_start] == '0')
        return 0;
    if (i < n && s[i] == '.') {
        i++;
        size_t frac_start = i;
        while (i < n && is_digit(s[i]))
            i++;
        if (int_digits == 0 && i == frac_start)
            return 0;
    } else if (int_digits == 0) {
        return 0;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-'))
            i++;
        size_t exp_start = i;
        while (i < n && is_digit(s[i]))
            i++;
        if (i == exp_start)
            return 0;
    }
    return i == n ? 1 : 0;
}

static json_t *make_real(yctx *c, const char *s, size_t n, int line)
{
    char ex[EXCERPT_MAX + 4];
    if (!c->cloc) {
        c->cloc = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
        if (!c->cloc) {
            fail(c, line, "out of memory");
            return NULL;
        }
    }
    /* s is NUL-terminated (libyaml guarantees it) and holds only [-+.0-9eE] here */
    char *end = NULL;
    double d = strtod_l(s, &end, c->cloc);
    if (end != s + n || !isfinite(d)) {
        fail(c, line, "number '%s' is out of range", excerpt(ex, s, n));
        return NULL;
    }
    json_t *v = json_real(d);
    if (!v)
        fail(c, line, "out of memory");
    return v;
}

static json_t *make_int(yctx *c, const char *s, size_t n, int line, int rc, long long iv)
{
    char ex[EXCERPT_MAX + 4];
    if (rc < 0) {
        fail(c, line, "integer '%s' does not fit in 64 bits", excerpt(ex, s, n));
        return NULL;
    }
    json_t *v = json_integer((json_int_t)iv);
    if (!v)
        fail(c, line, "out of memory");
    return v;
}

static json_t *make_string(yctx *c, const char *s, size_t n, int line)
{
    json_t *v = json_stringn(s, n);
    if (!v)
        fail(c, line, "invalid UTF-8 in a string (or out of memory)");
    return v;
}

static json_t *scalar_value(yctx *c, const yaml_event_t *ev)
{
    const char *s = (const char *)ev->data.scalar.value;
    size_t n = ev->data.scalar.length;
    int line = mark_line(ev->start_mark);
    char ex[EXCERPT_MAX + 4];
    if (!check_props(c, ev->data.scalar.anchor, ev->data.scalar.tag, T_NONE, line))
        return NULL;
    if (memchr(s, '\0', n)) {
        fail(c, line, "NUL characters in scalars are not supported");
        return NULL;
    }
    enum ytag t = tag_kind(ev->data.scalar.tag);
    long long iv = 0;
    int rc;
    switch (t) {
    case T_NONE:
        if (ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
            return make_string(c, s, n, line);
        if (is_null_text(s, n))
            return json_null();
        if ((rc = bool_text(s, n)) >= 0)
            return json_boolean(rc);
        if ((rc = parse_int(s, n, &iv)) != 0)
            return make_int(c, s, n, line, rc, iv);
        if ((rc = float_syntax(s, n)) == 1)
            return make_real(c, s, n, line);
        if (rc == 2) {
            fail(c, line, "'%s' (infinity/NaN) cannot be represented in JSON", excerpt(ex, s, n));
            return NULL;
        }
        return make_string(c, s, n, line);
    case T_STR:
        return make_string(c, s, n, line);
    case T_NULL:
        if (is_null_text(s, n))
            return json_null();
        break;
    case T_BOOL:
        if ((rc = bool_text(s, n)) >= 0)
            return json_boolean(rc);
        break;
    case T_INT:
        if ((rc = parse_int(s, n, &iv)) != 0)
            return make_int(c, s, n, line, rc, iv);
        break;
    case T_FLOAT:
        /* an integer's text is a valid float too; it is kept as a real */
        if (float_syntax(s, n) == 1)
            return make_real(c, s, n, line);
        if (float_syntax(s, n) == 2) {
            fail(c, line, "'%s' (infinity/NaN) cannot be represented in JSON", excerpt(ex, s, n));
            return NULL;
        }
        break;
    default:
        break;
    }
    char tx[EXCERPT_MAX + 4];
    fail(c, line, "'%s' is not a valid %s", excerpt(ex, s, n),
         tag_excerpt(tx, (const char *)ev->data.scalar.tag));
    return NULL;
}

/* ---- the tree ---- */

static json_t *parse_node(yctx *c, yaml_event_t *ev, int depth);

static json_t *parse_sequence(yctx *c, int depth, int line)
{
    json_t *arr = json_array();
    if (!arr) {
        fail(c, line, "out of memory");
        return NULL;
    }
    if (!record(c, arr, NULL, line))
        goto bad;
    for (;;) {
        yaml_event_t ev;
        if (!next_event(c, &ev))
            goto bad;
        if (ev.type == YAML_SEQUENCE_END_EVENT) {
            yaml_event_delete(&ev);
            return arr;
        }
        json_t *item = parse_node(c, &ev, depth);
        if (!item)
            goto bad;
        if (json_array_append_new(arr, item) != 0) {
            fail(c, line, "out of memory");
            goto bad;
        }
    }
bad:
    json_decref(arr);
    return NULL;
}

/* Reads one key event; returns its text (malloc'd) or NULL after failing. */
static char *parse_key(yctx *c, yaml_event_t *ev, json_t *obj, int kline)
{
    char ex[EXCERPT_MAX + 4];
    char *key = NULL;
    if (ev->type == YAML_ALIAS_EVENT) {
        fail(c, kline, "YAML anchors and aliases are not supported");
    } else if (ev->type != YAML_SCALAR_EVENT) {
        fail(c, kline, "mapping keys must be scalars, not %s",
             ev->type == YAML_MAPPING_START_EVENT ? "mappings" : "sequences");
    } else if (ev->data.scalar.anchor) {
        fail(c, kline, "YAML anchors and aliases are not supported");
    } else if (tag_kind(ev->data.scalar.tag) != T_NONE && tag_kind(ev->data.scalar.tag) != T_STR) {
        if (tag_kind(ev->data.scalar.tag) == T_BAD)
            fail(c, kline, "unsupported tag '%s'", tag_excerpt(ex, (const char *)ev->data.scalar.tag));
        else
            fail(c, kline, "mapping keys must be strings, not '%s'",
                 tag_excerpt(ex, (const char *)ev->data.scalar.tag));
    } else {
        const char *s = (const char *)ev->data.scalar.value;
        size_t n = ev->data.scalar.length;
        if (n == 0 && ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE && !ev->data.scalar.tag) {
            fail(c, kline, "empty (null) mapping key");
        } else if (memchr(s, '\0', n)) {
            fail(c, kline, "NUL characters in keys are not supported");
        } else if (json_object_get(obj, s)) {
            fail(c, kline, "duplicate key '%s'", excerpt(ex, s, n));
        } else if (!(key = malloc(n + 1))) {
            fail(c, kline, "out of memory");
        } else {
            memcpy(key, s, n + 1);
        }
    }
    yaml_event_delete(ev);
    return key;
}

static json_t *parse_mapping(yctx *c, int depth, int line)
{
    json_t *obj = json_object();
    if (!obj) {
        fail(c, line, "out of memory");
        return NULL;
    }
    if (!record(c, obj, NULL, line))
        goto bad;
    for (;;) {
        yaml_event_t ev;
        if (!next_event(c, &ev))
            goto bad;
        if (ev.type == YAML_MAPPING_END_EVENT) {
            yaml_event_delete(&ev);
            return obj;
        }
        int kline = mark_line(ev.start_mark);
        char *key = parse_key(c, &ev, obj, kline);
        if (!key)
            goto bad;
        if (!next_event(c, &ev)) {
            free(key);
            goto bad;
        }
        json_t *val = parse_node(c, &ev, depth);
        if (!val) {
            free(key);
            goto bad;
        }
        /* set_new consumes val even when it fails */
        if (json_object_set_new(obj, key, val) != 0) {
            fail(c, kline, "invalid UTF-8 in a key (or out of memory)");
            free(key);
            goto bad;
        }
        bool ok = record(c, obj, key, kline);
        free(key);
        if (!ok)
            goto bad;
    }
bad:
    json_decref(obj);
    return NULL;
}

/* Consumes *ev (the first event of a node). depth counts enclosing collections. */
static json_t *parse_node(yctx *c, yaml_event_t *ev, int depth)
{
    int line = mark_line(ev->start_mark);
    json_t *v = NULL;
    bool is_map = false;
    switch (ev->type) {
    case YAML_SCALAR_EVENT:
        v = scalar_value(c, ev);
        yaml_event_delete(ev);
        if (v && !record(c, v, NULL, line)) {
            json_decref(v);
            v = NULL;
        }
        return v;
    case YAML_ALIAS_EVENT:
        fail(c, line, "YAML anchors and aliases are not supported");
        yaml_event_delete(ev);
        return NULL;
    case YAML_MAPPING_START_EVENT:
        is_map = true;
        if (!check_props(c, ev->data.mapping_start.anchor, ev->data.mapping_start.tag, T_MAP, line))
            break;
        goto collection;
    case YAML_SEQUENCE_START_EVENT:
        if (!check_props(c, ev->data.sequence_start.anchor, ev->data.sequence_start.tag, T_SEQ, line))
            break;
        goto collection;
    default:
        /* libyaml only hands out node events here; be defensive anyway */
        fail(c, line, "unexpected YAML event");
        break;
    }
    yaml_event_delete(ev);
    return NULL;

collection:
    yaml_event_delete(ev);
    if (depth + 1 > YAML_MAX_DEPTH) {
        fail(c, line, "nesting deeper than %d levels", YAML_MAX_DEPTH);
        return NULL;
    }
    return is_map ? parse_mapping(c, depth + 1, line) : parse_sequence(c, depth + 1, line);
}

static json_t *empty_root(yctx *c, int line)
{
    json_t *root = json_object();
    if (!root) {
        fail(c, line, "out of memory");
        return NULL;
    }
    if (!record(c, root, NULL, line)) {
        json_decref(root);
        return NULL;
    }
    return root;
}

static json_t *parse_stream(yctx *c)
{
    yaml_event_t ev;
    json_t *root = NULL;
    if (!next_event(c, &ev))
        return NULL;
    yaml_event_delete(&ev); /* STREAM-START */
    if (!next_event(c, &ev))
        return NULL;
    if (ev.type == YAML_STREAM_END_EVENT) { /* empty or comments only */
        yaml_event_delete(&ev);
        return empty_root(c, 1);
    }
    int doc_line = mark_line(ev.start_mark);
    yaml_event_delete(&ev); /* DOCUMENT-START */
    if (!next_event(c, &ev))
        return NULL;
    if (ev.type == YAML_SCALAR_EVENT && ev.data.scalar.length == 0 &&
        ev.data.scalar.style == YAML_PLAIN_SCALAR_STYLE && !ev.data.scalar.tag &&
        !ev.data.scalar.anchor) {
        /* "---" with nothing after it: an empty document, placed at its "---" */
        yaml_event_delete(&ev);
        root = empty_root(c, doc_line);
    } else {
        root = parse_node(c, &ev, 0);
    }
    if (!root)
        return NULL;
    if (!next_event(c, &ev))
        goto bad;
    yaml_event_delete(&ev); /* DOCUMENT-END */
    if (!next_event(c, &ev))
        goto bad;
    if (ev.type != YAML_STREAM_END_EVENT) {
        fail(c, mark_line(ev.start_mark), "multiple YAML documents are not supported");
        yaml_event_delete(&ev);
        goto bad;
    }
    yaml_event_delete(&ev);
    return root;
bad:
    json_decref(root);
    return NULL;
}

json_t *abx_yaml_load(const char *text, size_t len, abx_linemap **lines, char *err, size_t errlen, int *err_line)
{
    yctx c;
    memset(&c, 0, sizeof c);
    c.text = text ? text : "";
    c.len = len;
    c.err = err;
    c.errlen = errlen;
    c.err_line = err_line;
    if (lines)
        *lines = NULL;
    if (err && errlen)
        err[0] = '\0';
    if (err_line)
        *err_line = 0;

    if (!text && len) {
        fail(&c, 0, "no input text");
        return NULL;
    }
    if (len > YAML_MAX_INPUT) {
        fail(&c, 0, "input is larger than 4 MiB");
        return NULL;
    }
    if (lines && !(c.lm = abx__linemap_new())) {
        fail(&c, 0, "out of memory");
        return NULL;
    }
    if (!yaml_parser_initialize(&c.parser)) {
        fail(&c, 0, "out of memory");
        abx_linemap_free(c.lm);
        return NULL;
    }
    yaml_parser_set_input_string(&c.parser, (const unsigned char *)c.text, len);
    json_t *root = parse_stream(&c);
    yaml_parser_delete(&c.parser);
    if (c.cloc)
        freelocale(c.cloc);
    if (!root) {
        if (!c.failed)
            fail(&c, 0, "invalid YAML");
        abx_linemap_free(c.lm);
        return NULL;
    }
    if (lines)
        *lines = c.lm;
    return root;
}
