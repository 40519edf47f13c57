/* fuzz_e2b.c — libFuzzer target for the E2B door's parsers (src/doors/e2b*.c).
 *
 * First input byte picks the mode, the rest is the payload:
 *  - 0 mod 4: a multipart/form-data body with boundary "zz" through abx_e2b_multipart_next.
 *    Invariants: every part lies inside the body, the position only moves forward, and
 *    the walk ends (end or malformed) within len/4 + 2 parts.
 *  - 1 mod 4: binary protobuf for one of envd's request/response messages (second byte
 *    picks it): unpack → JSON → message → pack → unpack → JSON gives the same JSON.
 *  - 2 mod 4: JSON text for one of those messages: JSON → message → JSON → message →
 *    JSON is stable after the first conversion (the converter is idempotent).
 *  - 3 mod 4: a Connect request stream through abx_e2b_envelope: each message lies
 *    inside the data, the position only moves forward, and the walk ends.
 * Owns no state across inputs. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doors/e2b.h"
#include "filesystem/filesystem.pb-c.h"
#include "process/process.pb-c.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const ProtobufCMessageDescriptor *const descs[] = {
    &process__start_request__descriptor,  &process__start_response__descriptor,
    &process__list_response__descriptor,  &process__send_input_request__descriptor,
    &process__update_request__descriptor, &process__send_signal_request__descriptor,
    &filesystem__list_dir_response__descriptor, &filesystem__stat_response__descriptor,
    &filesystem__watch_dir_response__descriptor, &filesystem__move_request__descriptor,
};

static void fail(const char *what, const char *detail)
{
    fprintf(stderr, "fuzz_e2b: %s\n  %s\n", what, detail ? detail : "");
    abort();
}

static void multipart_mode(const uint8_t *data, size_t size)
{
    abx_arena *a = abx_arena_new();
    if (!a)
        return;
    size_t pos = 0, parts = 0;
    const char *body = (const char *)data, *fn, *d;
    size_t dlen;
    int k;
    while ((k = abx_e2b_multipart_next(body, size, "zz", &pos, a, &fn, &d, &dlen)) == 1) {
        if (d < body || d + dlen > body + size)
            fail("a part lies outside the body", NULL);
        if (pos > size)
            fail("the position passed the end", NULL);
        if (++parts > size / 4 + 2)
            fail("the walk does not end", NULL);
    }
    if (k != 0 && k != -1)
        fail("unexpected result", NULL);
    abx_arena_free(a);
}

static void envelope_mode(const uint8_t *data, size_t size)
{
    const char *d = (const char *)data, *msg;
    size_t at = 0, mlen, n = 0;
    long k;
    while ((k = abx_e2b_envelope(d, size, &at, &msg, &mlen)) > 0) {
        if (msg < d || msg + mlen > d + size || at > size || at < 5)
            fail("an envelope lies outside the data", NULL);
        if (k < 1 || k > 256)
            fail("flags out of range", NULL);
        if (++n > size / 5 + 1)
            fail("the walk does not end", NULL);
    }
    if (k == 0 && at != size)
        fail("the end before the end of the data", NULL);
}

static char *json_of(const ProtobufCMessage *m)
{
    json_t *j = abx_e2b_pb_to_json(m);
    char *s = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(j);
    return s;
}

static void proto_mode(const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t size)
{
    ProtobufCMessage *m = protobuf_c_message_unpack(desc, NULL, size, data);
    if (!m)
        return;
    char *first = json_of(m);
    protobuf_c_message_free_unpacked(m, NULL);
    json_error_t je;
    json_t *j = first ? json_loads(first, 0, &je) : NULL;
    char err[160] = "";
    ProtobufCMessage *back = j ? abx_e2b_pb_from_json(desc, j, err, sizeof err) : NULL;
    json_decref(j);
    if (first && !back)
        fail("the JSON form of a message does not convert back", err);
    if (back) {
        size_t n = protobuf_c_message_get_packed_size(back);
        uint8_t *buf = malloc(n ? n : 1);
        protobuf_c_message_pack(back, buf);
        ProtobufCMessage *again = protobuf_c_message_unpack(desc, NULL, n, buf);
        if (!again)
            fail("a packed message does not unpack", first);
        char *second = json_of(again);
        if (!second || strcmp(first, second) != 0)
            fail("protobuf → JSON → protobuf changed the message", first);
        free(second);
        protobuf_c_message_free_unpacked(again, NULL);
        protobuf_c_message_free_unpacked(back, NULL);
        free(buf);
    }
    free(first);
}

static void json_mode(const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t size)
{
    json_error_t je;
    json_t *j = json_loadb((const char *)data, size, 0, &je);
    if (!j)
        return;
    char err[160] = "";
    ProtobufCMessage *m = abx_e2b_pb_from_json(desc, j, err, sizeof err);
    json_decref(j);
    if (!m)
        return;
    char *first = json_of(m);
    protobuf_c_message_free_unpacked(m, NULL);
    json_t *j2 = first ? json_loads(first, 0, &je) : NULL;
    ProtobufCMessage *m2 = j2 ? abx_e2b_pb_from_json(desc, j2, err, sizeof err) : NULL;
    json_decref(j2);
    if (first && !m2)
        fail("the converter's own JSON does not convert back", first);
    char *second = m2 ? json_of(m2) : NULL;
    if (m2 && (!second || strcmp(first, second) != 0))
        fail("JSON → message → JSON is not stable", first);
    free(second);
    if (m2)
        protobuf_c_message_free_unpacked(m2, NULL);
    free(first);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2 || size > 8192)
        return 0;
    const ProtobufCMessageDescriptor *desc = descs[data[1] % (sizeof descs / sizeof descs[0])];
    switch (data[0] % 4) {
    case 0:
        multipart_mode(data + 1, size - 1);
        break;
    case 1:
        proto_mode(desc, data + 2, size - 2);
        break;
    case 2:
        json_mode(desc, data + 2, size - 2);
        break;
    default:
        envelope_mode(data + 1, size - 1);
        break;
    }
    return 0;
}
