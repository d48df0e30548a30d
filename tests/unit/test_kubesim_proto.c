/* kubesim: protobuf request bodies (ks_proto.c) decoded into JSON, and
 * malformed ones (truncated, mutated, unknown kinds and fields) refused
 * without reading outside the buffer. */
#include "test_kubesim_util.h"
#include "kubesim/ks_int.h"

static size_t put_varint(uint8_t *p, uint64_t v)
{
    size_t n = 0;
    do {
        uint8_t b = v & 0x7f;
        v >>= 7;
        p[n++] = (uint8_t)(b | (v ? 0x80 : 0));
    } while (v);
    return n;
}

/* field num, length-delimited, payload */
static size_t put_ld(uint8_t *p, int num, const void *data, size_t len)
{
    size_t n = put_varint(p, (uint64_t)num << 3 | 2);
    n += put_varint(p + n, len);
    memcpy(p + n, data, len);
    return n + len;
}

static size_t put_str(uint8_t *p, int num, const char *s)
{
    return put_ld(p, num, s, strlen(s));
}

static size_t map_entry(uint8_t *p, int num, const char *k, const void *v, size_t vlen)
{
    uint8_t e[256];
    size_t n = put_str(e, 1, k);
    n += put_ld(e + n, 2, v, vlen);
    return put_ld(p, num, e, n);
}

/* "k8s\0" + Unknown{typeMeta{apiVersion, kind}, raw} */
static size_t envelope(uint8_t *out, const char *api, const char *kind, const uint8_t *raw, size_t rlen)
{
    uint8_t tm[128];
    size_t tn = put_str(tm, 1, api);
    tn += put_str(tm + tn, 2, kind);
    memcpy(out, "k8s\0", 4);
    size_t n = 4 + put_ld(out + 4, 1, tm, tn);
    return n + put_ld(out + n, 2, raw, rlen);
}

static size_t configmap_body(uint8_t *out)
{
    uint8_t meta[256], raw[512];
    size_t mn = put_str(meta, 1, "cm");
    mn += put_str(meta + mn, 3, ""); /* empty namespace: dropped as omitempty drops it */
    mn += map_entry(meta + mn, 11, "app", "x", 1);
    meta[mn++] = 7 << 3; /* generation 0 */
    meta[mn++] = 0;
    size_t n = put_ld(raw, 1, meta, mn);
    n += map_entry(raw + n, 2, "a", "1", 1);
    n += map_entry(raw + n, 2, "empty", "", 0);
    n += map_entry(raw + n, 3, "bin", "\0\1", 2);
    return envelope(out, "v1", "ConfigMap", raw, n);
}

static void test_decode(void **state)
{
    (void)state;
    uint8_t body[1024];
    size_t n = configmap_body(body);
    char err[320];
    cJSON *o = proto_decode(body, n, err, sizeof(err));
    assert_non_null(o);
    char *s = json_dump(o);
    assert_string_equal(
        s, "{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"cm\",\"labels\":{"
           "\"app\":\"x\"}},\"data\":{\"a\":\"1\",\"empty\":\"\"},\"binaryData\":{\"bin\":\"AAE=\"}}");
    free(s);
    cJSON_Delete(o);

    /* a Secret: bytes as base64, the type kept */
    uint8_t meta[64], raw[256];
    size_t mn = put_str(meta, 1, "s");
    size_t rn = put_ld(raw, 1, meta, mn);
    rn += map_entry(raw + rn, 2, "pw", "secret", 6);
    rn += put_str(raw + rn, 3, "Opaque");
    n = envelope(body, "v1", "Secret", raw, rn);
    o = proto_decode(body, n, err, sizeof(err));
    assert_non_null(o);
    assert_string_equal(json_get_str(o, "data.pw"), "c2VjcmV0");
    assert_string_equal(json_get_str(o, "type"), "Opaque");
    cJSON_Delete(o);
}

static void test_refused(void **state)
{
    (void)state;
    uint8_t body[1024], raw[64];
    char err[320];
    size_t rn = put_str(raw, 1, "x");
    size_t n = envelope(body, "apps/v1", "Deployment", raw, rn);
    assert_null(proto_decode(body, n, err, sizeof(err)));
    assert_non_null(strstr(err, "apps/v1 Deployment"));
    /* a field number ConfigMap does not have */
    rn = put_str(raw, 9, "x");
    n = envelope(body, "v1", "ConfigMap", raw, rn);
    assert_null(proto_decode(body, n, err, sizeof(err)));
    assert_non_null(strstr(err, "field 9"));
    /* no magic */
    assert_null(proto_decode("{}", 2, err, sizeof(err)));
    /* a length beyond the buffer */
    uint8_t bad[] = {'k', '8', 's', 0, 0x12, 0xff, 0xff, 0xff, 0xff, 0x0f};
    assert_null(proto_decode(bad, sizeof(bad), err, sizeof(err)));
}

/* Every prefix and many single-byte mutations of a valid body: decoded or
 * refused, never a read outside the buffer (ASan). */
static void test_malformed(void **state)
{
    (void)state;
    uint8_t body[1024];
    size_t n = configmap_body(body);
    char err[320];
    for (size_t len = 0; len <= n; len++) {
        uint8_t *copy = xmalloc(len + 1);
        memcpy(copy, body, len);
        cJSON_Delete(proto_decode(copy, len, err, sizeof(err)));
        free(copy);
    }
    uint64_t rng = 12345;
    for (int i = 0; i < 20000; i++) {
        uint8_t *copy = xmalloc(n);
        memcpy(copy, body, n);
        for (int j = 0; j < 1 + i % 3; j++) {
            rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
            size_t pos = 4 + (size_t)(rng >> 33) % (n - 4);
            copy[pos] = (uint8_t)(rng >> 17);
        }
        cJSON_Delete(proto_decode(copy, n, err, sizeof(err)));
        free(copy);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decode),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_malformed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
