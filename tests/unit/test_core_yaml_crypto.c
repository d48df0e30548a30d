/* Unit tests for core/yaml (typing rules, errors) and core/crypto (known vectors). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "core/crypto.h"
#include "core/json.h"
#include "core/yaml.h"

static void test_yaml_types(void **state)
{
    const char *y = "a: 1\nb: \"1\"\nc: true\nd: ~\ne: [x, 2.5]\nf:\n  g: |\n    line1\n    line2\n"
                    "h: 0777abc\n---\nsecond: doc\n---\n";
    char err[128];
    cJSON *docs = yaml_parse_all(y, strlen(y), err, sizeof(err));
    assert_non_null(docs);
    assert_int_equal(cJSON_GetArraySize(docs), 2);
    cJSON *d = cJSON_GetArrayItem(docs, 0);
    char *s = json_dump(d);
    assert_string_equal(s, "{\"a\":1,\"b\":\"1\",\"c\":true,\"d\":null,\"e\":[\"x\",2.5],"
                           "\"f\":{\"g\":\"line1\\nline2\\n\"},\"h\":\"0777abc\"}");
    free(s);
    cJSON_Delete(docs);
}

static void test_yaml_errors(void **state)
{
    char err[128];
    const char *bad = "a: [1, 2\nb: c\n";
    assert_null(yaml_parse(bad, strlen(bad), err, sizeof(err)));
    assert_non_null(strstr(err, "line"));
    const char *alias = "a: &x [1]\nb: *x\n";
    assert_null(yaml_parse(alias, strlen(alias), err, sizeof(err)));
    assert_non_null(strstr(err, "not supported"));
    assert_null(yaml_parse("", 0, err, sizeof(err)));
}

static void test_crypto_vectors(void **state)
{
    char hex[65];
    sha256_hex("abc", 3, hex);
    assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    /* RFC 4231 test case 2 */
    uint8_t mac[32];
    hmac_sha256("Jefe", 4, "what do ya want for nothing?", 28, mac);
    hex_encode(mac, 32, hex);
    assert_string_equal(hex, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");

    char *b = base64_encode("hello?>", 7);
    assert_string_equal(b, "aGVsbG8/Pg==");
    char *u = base64url_encode("hello?>", 7);
    assert_string_equal(u, "aGVsbG8_Pg");
    size_t n;
    uint8_t *d = base64_decode(u, strlen(u), &n);
    assert_int_equal(n, 7);
    assert_memory_equal(d, "hello?>", 7);
    assert_null(base64_decode("a$b=", 4, &n));
    free(b);
    free(u);
    free(d);

    char id[37], id2[37];
    uuid_v4(id);
    uuid_v4(id2);
    assert_int_equal(strlen(id), 36);
    assert_int_equal(id[14], '4');
    assert_string_not_equal(id, id2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_yaml_types),
        cmocka_unit_test(test_yaml_errors),
        cmocka_unit_test(test_crypto_vectors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
