/* test_jupyter.c — the Jupyter protocol pieces kernels.* relies on: HMAC-SHA256 against
 * RFC 4231's vectors, and the decoder accepting a well-signed message and refusing a
 * flipped signature byte, a missing delimiter, a non-object part and a missing msg_type. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "builtin/jupyter.h"
#include "core/util.h"

static void hmac_hex(const char *key, size_t klen, const char *msg, char out[65])
{
    unsigned char mac[32];
    abx_jpart p = {msg, strlen(msg)};
    abx_hmac_sha256((const unsigned char *)key, klen, &p, 1, mac);
    abx_hex(mac, 32, out);
}

static void test_hmac_rfc4231(void **st)
{
    (void)st;
    char hex[65], key[131];
    memset(key, 0x0b, 20);
    hmac_hex(key, 20, "Hi There", hex);
    assert_string_equal(hex, "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
    hmac_hex("Jefe", 4, "what do ya want for nothing?", hex);
    assert_string_equal(hex, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    memset(key, 0xaa, 131); /* a key longer than the block is hashed first */
    hmac_hex(key, 131, "Test Using Larger Than Block-Size Key - Hash Key First", hex);
    assert_string_equal(hex, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

static const unsigned char K[] = "k3y";
#define HDR "{\"msg_id\":\"m1\",\"msg_type\":\"stream\"}"

static int decode(const char *parent, const char *content, int flip, abx_jmsg *m)
{
    abx_jpart body[4] = {{HDR, strlen(HDR)}, {parent, strlen(parent)}, {"{}", 2}, {content, strlen(content)}};
    unsigned char mac[32];
    char hex[65];
    abx_hmac_sha256(K, 3, body, 4, mac);
    abx_hex(mac, 32, hex);
    if (flip)
        hex[5] = hex[5] == 'a' ? 'b' : 'a';
    abx_jpart parts[7] = {{"topic", 5}, {"<IDS|MSG>", 9}, {hex, 64}, body[0], body[1], body[2], body[3]};
    char why[128];
    return abx_jmsg_decode(parts, 7, K, 3, m, why, sizeof why);
}

static void test_decode(void **st)
{
    (void)st;
    abx_jmsg m;
    assert_int_equal(decode("{\"msg_id\":\"p\"}", "{\"text\":\"hi\"}", 0, &m), 0);
    assert_string_equal(m.msg_type, "stream");
    assert_string_equal(m.parent_id, "p");
    assert_string_equal(json_string_value(json_object_get(m.content, "text")), "hi");
    abx_jmsg_release(&m);
    assert_int_equal(decode("{}", "{}", 1, &m), -1);        /* a flipped signature digit */
    assert_int_equal(decode("{}", "[1]", 0, &m), -1);       /* content is not an object */
    assert_int_equal(decode("{}", "{\"a\":1,\"a\":2}", 0, &m), -1); /* duplicate keys */
    abx_jpart nodelim[2] = {{"x", 1}, {"y", 1}};
    char why[128];
    assert_int_equal(abx_jmsg_decode(nodelim, 2, K, 3, &m, why, sizeof why), -1);
    assert_non_null(strstr(why, "delimiter"));
    const char *nt = "{\"msg_id\":\"m1\"}";
    abx_jpart body[6] = {{"<IDS|MSG>", 9}, {"", 0}, {nt, strlen(nt)}, {"{}", 2}, {"{}", 2}, {"{}", 2}};
    assert_int_equal(abx_jmsg_decode(body, 6, NULL, 0, &m, why, sizeof why), -1); /* no msg_type */
    body[1] = (abx_jpart){"00", 2};
    assert_int_equal(abx_jmsg_decode(body, 6, NULL, 0, &m, why, sizeof why), -1); /* unexpected signature */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hmac_rfc4231),
        cmocka_unit_test(test_decode),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
