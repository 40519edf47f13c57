/* e2b_pbjson.c — protobuf-c messages to and from Connect's JSON encoding (the proto3 JSON
 * mapping), driven only by the descriptors protoc-c generated from envd's .proto files:
 * one walk over the fields serves every message of both services. */
#include "doors/e2b.h"
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void camel(const char *snake, char *out, size_t n)
{
    size_t o = 0;
    bool up = false;
    for (const char *p = snake; *p && o + 1 < n; p++) {
        if (*p == '_') {
            up = true;
            continue;
        }
        out[o++] = up && *p >= 'a' && *p <= 'z' ? (char)(*p - 32) : *p;
        up = false;
    }
    out[o] = 0;
}

static bool is_timestamp(const ProtobufCMessageDescriptor *d)
{
    return d && strcmp(d->name, "google.protobuf.Timestamp") == 0;
}

static bool is_map(const ProtobufCFieldDescriptor *f)
{
    const ProtobufCMessageDescriptor *d = f->descriptor;
    if (f->label != PROTOBUF_C_LABEL_REPEATED || f->type != PROTOBUF_C_TYPE_MESSAGE || !d || d->n_fields != 2)
        return false;
    size_t n = strlen(d->name);
    return n > 5 && strcmp(d->name + n - 5, "Entry") == 0 && strcmp(d->fields[0].name, "key") == 0;
}

static size_t elem_size(ProtobufCType t)
{
    switch (t) {
    case PROTOBUF_C_TYPE_INT64: case PROTOBUF_C_TYPE_SINT64: case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64: case PROTOBUF_C_TYPE_FIXED64: case PROTOBUF_C_TYPE_DOUBLE:
        return 8;
    case PROTOBUF_C_TYPE_STRING: case PROTOBUF_C_TYPE_MESSAGE:
        return sizeof(void *);
    case PROTOBUF_C_TYPE_BYTES:
        return sizeof(ProtobufCBinaryData);
    default:
        return 4; /* 32-bit integers, enums, float, protobuf_c_boolean */
    }
}

static json_t *ts_json(const ProtobufCMessage *m)
{
    /* google.protobuf.Timestamp {int64 seconds = 1; int32 nanos = 2;} */
    const ProtobufCMessageDescriptor *d = m->descriptor;
    int64_t sec = *(const int64_t *)((const char *)m + d->fields[0].offset);
    int32_t ns = *(const int32_t *)((const char *)m + d->fields[1].offset);
    time_t t = (time_t)sec;
    struct tm tm;
    char buf[64];
    /* RFC 3339's range (years 1 to 9999) and whole nanoseconds, or no JSON form */
    if (!gmtime_r(&t, &tm) || tm.tm_year < 1 - 1900 || tm.tm_year > 9999 - 1900 || ns < 0 || ns > 999999999)
        return NULL;
    size_t n = strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
    if (ns > 0)
        snprintf(buf + n, sizeof buf - n, ".%09dZ", (int)ns);
    else
        snprintf(buf + n, sizeof buf - n, "Z");
    return json_string(buf);
}

static json_t *value_json(const ProtobufCFieldDescriptor *f, const void *v)
{
    char num[32];
    switch (f->type) {
    case PROTOBUF_C_TYPE_INT32: case PROTOBUF_C_TYPE_SINT32: case PROTOBUF_C_TYPE_SFIXED32:
        return json_integer(*(const int32_t *)v);
    case PROTOBUF_C_TYPE_UINT32: case PROTOBUF_C_TYPE_FIXED32:
        return json_integer(*(const uint32_t *)v);
    case PROTOBUF_C_TYPE_INT64: case PROTOBUF_C_TYPE_SINT64: case PROTOBUF_C_TYPE_SFIXED64:
        snprintf(num, sizeof num, "%" PRId64, *(const int64_t *)v);
        return json_string(num);
    case PROTOBUF_C_TYPE_UINT64: case PROTOBUF_C_TYPE_FIXED64:
        snprintf(num, sizeof num, "%" PRIu64, *(const uint64_t *)v);
        return json_string(num);
    case PROTOBUF_C_TYPE_FLOAT:
        return json_real(*(const float *)v);
    case PROTOBUF_C_TYPE_DOUBLE:
        return json_real(*(const double *)v);
    case PROTOBUF_C_TYPE_BOOL:
        return json_boolean(*(const protobuf_c_boolean *)v);
    case PROTOBUF_C_TYPE_ENUM: {
        const ProtobufCEnumValue *ev = protobuf_c_enum_descriptor_get_value(f->descriptor, *(const int *)v);
        return ev ? json_string(ev->name) : json_integer(*(const int *)v);
    }
    case PROTOBUF_C_TYPE_STRING:
        return json_string(*(char *const *)v ? *(char *const *)v : "");
    case PROTOBUF_C_TYPE_BYTES: {
        const ProtobufCBinaryData *b = v;
        size_t n;
        char *s = abx_base64_encode(b->data, b->len, &n);
        json_t *j = s ? json_stringn(s, n) : NULL;
        free(s);
        return j;
    }
    case PROTOBUF_C_TYPE_MESSAGE:
        return abx_e2b_pb_to_json(*(ProtobufCMessage *const *)v);
    }
    return json_null();
}

static bool is_default(const ProtobufCFieldDescriptor *f, const void *v)
{
    switch (f->type) {
    case PROTOBUF_C_TYPE_STRING: {
        const char *s = *(char *const *)v;
        return !s || !*s;
    }
    case PROTOBUF_C_TYPE_BYTES:
        return ((const ProtobufCBinaryData *)v)->len == 0;
    case PROTOBUF_C_TYPE_MESSAGE:
        return *(void *const *)v == NULL;
    default: {
        static const char zero[8];
        return memcmp(v, zero, elem_size(f->type)) == 0;
    }
    }
}

static json_t *repeated_json(const ProtobufCFieldDescriptor *f, const char *base, size_t n)
{
    const char *arr = *(char *const *)(base + f->offset);
    if (is_map(f)) {
        json_t *o = json_object();
        for (size_t k = 0; k < n; k++) {
            const ProtobufCMessage *e = ((ProtobufCMessage *const *)arr)[k];
            const ProtobufCMessageDescriptor *d = e->descriptor;
            json_t *key = value_json(&d->fields[0], (const char *)e + d->fields[0].offset);
            json_t *val = value_json(&d->fields[1], (const char *)e + d->fields[1].offset);
            bool ok = json_is_string(key) && val;
            if (ok)
                ok = json_object_set_new(o, json_string_value(key), val) == 0; /* steals val either way */
            else
                json_decref(val);
            json_decref(key);
            if (!ok) {
                json_decref(o);
                return NULL;
            }
        }
        return o;
    }
    json_t *a = json_array();
    for (size_t k = 0; k < n; k++)
        if (json_array_append_new(a, value_json(f, arr + k * elem_size(f->type))) != 0) {
            json_decref(a);
            return NULL;
        }
    return a;
}

json_t *abx_e2b_pb_to_json(const ProtobufCMessage *m)
{
    if (!m)
        return json_object();
    const ProtobufCMessageDescriptor *d = m->descriptor;
    if (is_timestamp(d))
        return ts_json(m);
    json_t *o = json_object();
    const char *base = (const char *)m;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        char name[64];
        camel(f->name, name, sizeof name);
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            size_t n = *(const size_t *)(base + f->quantifier_offset);
            if (n && json_object_set_new(o, name, repeated_json(f, base, n)) != 0)
                goto bad;
            continue;
        }
        if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
            if (*(const uint32_t *)(base + f->quantifier_offset) != f->id)
                continue;
        } else if (is_default(f, base + f->offset)) {
            continue;
        }
        if (json_object_set_new(o, name, value_json(f, base + f->offset)) != 0)
            goto bad;
    }
    return o;
bad: /* a string that is not UTF-8 (proto3 strings must be): no JSON form */
    json_decref(o);
    return NULL;
}

/* ---- JSON → message ---- */


static const ProtobufCFieldDescriptor *field_named(const ProtobufCMessageDescriptor *d, const char *key)
{
    char name[64];
    for (unsigned i = 0; i < d->n_fields; i++) {
        camel(d->fields[i].name, name, sizeof name);
        if (strcmp(key, name) == 0 || strcmp(key, d->fields[i].name) == 0)
            return &d->fields[i];
    }
    return NULL;
}

static bool int_of(const json_t *j, long long *out)
{
    if (json_is_integer(j)) {
        *out = json_integer_value(j);
        return true;
    }
    if (json_is_real(j)) {
        *out = (long long)json_real_value(j);
        return true;
    }
    if (json_is_string(j)) {
        char *end;
        *out = strtoll(json_string_value(j), &end, 10);
        return end != json_string_value(j) && !*end;
    }
    return false;
}

static ProtobufCMessage *ts_from_json(const ProtobufCMessageDescriptor *d, const json_t *j)
{
    struct tm tm = {0};
    const char *s = json_string_value(j);
    const char *rest = s ? strptime(s, "%Y-%m-%dT%H:%M:%S", &tm) : NULL;
    if (!rest)
        return NULL;
    int32_t ns = 0;
    if (*rest == '.') { /* a fraction of a second: up to nanoseconds */
        int digits = 0;
        for (rest++; *rest >= '0' && *rest <= '9'; rest++, digits++)
            if (digits < 9)
                ns = ns * 10 + (*rest - '0');
        for (; digits < 9; digits++)
            ns *= 10;
    }
    if (strcmp(rest, "Z") != 0)
        return NULL; /* the converter writes UTC; offsets are not taken */
    ProtobufCMessage *m = calloc(1, d->sizeof_message);
    if (!m)
        return NULL;
    d->message_init(m);
    *(int64_t *)((char *)m + d->fields[0].offset) = (int64_t)timegm(&tm);
    *(int32_t *)((char *)m + d->fields[1].offset) = ns;
    return m;
}

static bool set_value(const ProtobufCFieldDescriptor *f, void *v, const json_t *j, char *err, size_t errlen)
{
    long long n;
    switch (f->type) {
    case PROTOBUF_C_TYPE_BOOL:
        if (!json_is_boolean(j))
            break;
        *(protobuf_c_boolean *)v = json_is_true(j);
        return true;
    case PROTOBUF_C_TYPE_ENUM:
        if (json_is_string(j)) {
            const ProtobufCEnumValue *ev =
                protobuf_c_enum_descriptor_get_value_by_name(f->descriptor, json_string_value(j));
            if (!ev)
                break;
            *(int *)v = ev->value;
            return true;
        }
        if (!int_of(j, &n))
            break;
        *(int *)v = (int)n;
        return true;
    case PROTOBUF_C_TYPE_STRING:
        if (!json_is_string(j))
            break;
        *(char **)v = strdup(json_string_value(j));
        return *(char **)v != NULL;
    case PROTOBUF_C_TYPE_BYTES: {
        if (!json_is_string(j))
            break;
        size_t len = json_string_length(j), outlen = 0;
        char *s = malloc(len + 4);
        if (!s)
            return false;
        for (size_t i = 0; i < len; i++) { /* the URL-safe alphabet too, padding optional */
            char ch = json_string_value(j)[i];
            s[i] = ch == '-' ? '+' : ch == '_' ? '/' : ch;
        }
        while (len % 4)
            s[len++] = '=';
        unsigned char *b = abx_base64_decode(s, len, &outlen);
        free(s);
        if (!b)
            break;
        ((ProtobufCBinaryData *)v)->data = b;
        ((ProtobufCBinaryData *)v)->len = outlen;
        return true;
    }
    case PROTOBUF_C_TYPE_MESSAGE: {
        const ProtobufCMessageDescriptor *sd = f->descriptor;
        ProtobufCMessage *sub = is_timestamp(sd) ? ts_from_json(sd, j) : abx_e2b_pb_from_json(sd, j, err, errlen);
        *(ProtobufCMessage **)v = sub;
        return sub != NULL;
    }
    case PROTOBUF_C_TYPE_FLOAT:
        if (!json_is_number(j))
            break;
        *(float *)v = (float)json_number_value(j);
        return true;
    case PROTOBUF_C_TYPE_DOUBLE:
        if (!json_is_number(j))
            break;
        *(double *)v = json_number_value(j);
        return true;
    default:
        if (!int_of(j, &n))
            break;
        if (elem_size(f->type) == 8)
            *(int64_t *)v = (int64_t)n;
        else
            *(int32_t *)v = (int32_t)n;
        return true;
    }
    if (err && !*err)
        snprintf(err, errlen, "field %s has the wrong type", f->name);
    return false;
}

static bool set_repeated(const ProtobufCFieldDescriptor *f, char *base, const json_t *j, char *err, size_t errlen)
{
    bool map = is_map(f);
    if (map ? !json_is_object(j) : !json_is_array(j)) {
        snprintf(err, errlen, "field %s must be %s", f->name, map ? "an object" : "an array");
        return false;
    }
    size_t n = map ? json_object_size(j) : json_array_size(j), es = elem_size(f->type);
    char *arr = n ? calloc(n, es) : NULL;
    if (n && !arr)
        return false;
    *(char **)(base + f->offset) = arr;
    size_t *count = (size_t *)(base + f->quantifier_offset);
    if (!map) {
        for (size_t k = 0; k < n; k++, (*count)++)
            if (!set_value(f, arr + k * es, json_array_get(j, k), err, errlen))
                return false;
        return true;
    }
    const char *key;
    const json_t *val;
    const ProtobufCMessageDescriptor *ed = f->descriptor;
    json_object_foreach((json_t *)j, key, val) {
        ProtobufCMessage *e = calloc(1, ed->sizeof_message);
        if (!e)
            return false;
        ed->message_init(e);
        ((ProtobufCMessage **)arr)[(*count)++] = e;
        json_t *k = json_string(key);
        bool ok = set_value(&ed->fields[0], (char *)e + ed->fields[0].offset, k, err, errlen) &&
                  set_value(&ed->fields[1], (char *)e + ed->fields[1].offset, val, err, errlen);
        json_decref(k);
        if (!ok)
            return false;
    }
    return true;
}

ProtobufCMessage *abx_e2b_pb_from_json(const ProtobufCMessageDescriptor *d, const json_t *j, char *err, size_t errlen)
{
    if (!json_is_object(j)) {
        snprintf(err, errlen, "%s must be a JSON object", d->name);
        return NULL;
    }
    ProtobufCMessage *m = calloc(1, d->sizeof_message);
    if (!m)
        return NULL;
    d->message_init(m);
    char *base = (char *)m;
    const char *key;
    const json_t *val;
    json_object_foreach((json_t *)j, key, val) {
        const ProtobufCFieldDescriptor *f = field_named(d, key);
        if (!f || json_is_null(val))
            continue;
        bool ok;
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            ok = set_repeated(f, base, val, err, errlen);
        } else {
            ok = set_value(f, base + f->offset, val, err, errlen);
            if (ok && (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF))
                *(uint32_t *)(base + f->quantifier_offset) = f->id;
            else if (ok && f->label == PROTOBUF_C_LABEL_OPTIONAL && f->quantifier_offset)
                *(protobuf_c_boolean *)(base + f->quantifier_offset) = 1;
        }
        if (!ok) {
            if (!*err)
                snprintf(err, errlen, "field %s is not valid", f->name);
            protobuf_c_message_free_unpacked(m, NULL);
            return NULL;
        }
    }
    return m;
}
