/* Unit tests for core/rfc3339: the forms Kubernetes and users write, the
 * malformed ones refused, and formatting round trips. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>
#include <time.h>

#include "core/rfc3339.h"

static void test_parse_forms(void **state)
{
    (void)state;
    int64_t t = -1;
    int zulu = -1;
    assert_int_equal(rfc3339_parse("2024-05-06T07:08:09Z", &t, &zulu), 0);
    assert_int_equal(t, 1714979289);
    assert_int_equal(zulu, 1);
    /* Fractions of any length are ignored, lower-case 't' and 'z' are RFC 3339 too. */
    assert_int_equal(rfc3339_parse("2024-05-06t07:08:09.123456789z", &t, NULL), 0);
    assert_int_equal(t, 1714979289);
    /* Offsets: local time minus the offset. */
    assert_int_equal(rfc3339_parse("2024-05-06T07:08:09-02:30", &t, &zulu), 0);
    assert_int_equal(t, 1714979289 + 9000);
    assert_int_equal(zulu, 0);
    assert_int_equal(rfc3339_parse("1970-01-01T01:00:10.5+01:00", &t, NULL), 0);
    assert_int_equal(t, 10);
    assert_int_equal(rfc3339_parse("2024-05-06 07:08:09Z", &t, NULL), 0);
    assert_int_equal(t, 1714979289);
    /* A leap second is accepted (as Go's time.Parse does not, but Kubernetes never writes one). */
    assert_int_equal(rfc3339_parse("2016-12-31T23:59:60Z", &t, NULL), 0);
    assert_int_equal(t, 1483228800);
}

static void test_parse_refused(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "",
        "garbage",
        "2024-05-06",
        "2024-05-06T07:08:09",       /* no zone */
        "2024-05-06 07:08:09",       /* no zone */
        "2024-05-06T07:08:09Zjunk",  /* trailing text */
        "2024-05-06T07:08:09.Z",     /* empty fraction */
        "2024-05-06T07:08:09+0200",  /* offset without ':' */
        "2024-13-06T07:08:09Z",      /* month */
        "2024-05-32T07:08:09Z",      /* day */
        "2024-05-06T24:08:09Z",      /* hour */
        "2024-05-06T07:60:09Z",      /* minute */
        "24-05-06T07:08:09Z",        /* short year */
        " 2024-05-06T07:08:09Z",     /* leading space */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int64_t t = 42;
        if (rfc3339_parse(bad[i], &t, NULL) != -1)
            fail_msg("accepted \"%s\"", bad[i]);
        assert_int_equal(t, 42); /* untouched */
        assert_int_equal(rfc3339_secs(bad[i]), 0);
    }
    int64_t t = 42;
    assert_int_equal(rfc3339_parse(NULL, &t, NULL), -1);
    assert_int_equal(rfc3339_secs(NULL), 0);
    assert_int_equal(rfc3339_secs("1970-01-01T00:00:10Z"), 10);
}

static void test_format(void **state)
{
    (void)state;
    char s[RFC3339_LEN];
    rfc3339_format(1714979289, s);
    assert_string_equal(s, "2024-05-06T07:08:09Z");
    rfc3339_format(0, s);
    assert_string_equal(s, "1970-01-01T00:00:00Z");
    rfc3339_format(253402300799, s); /* the largest that fits */
    assert_string_equal(s, "9999-12-31T23:59:59Z");
    char m[RFC3339_MICRO_LEN];
    rfc3339_format_micro(1714979289, 7, m);
    assert_string_equal(m, "2024-05-06T07:08:09.000007Z");
    rfc3339_format_micro(1714979289, 999999, m);
    assert_string_equal(m, "2024-05-06T07:08:09.999999Z");
}

static void test_now_round_trip(void **state)
{
    (void)state;
    int64_t before = (int64_t)time(NULL);
    char s[RFC3339_LEN], m[RFC3339_MICRO_LEN];
    rfc3339_now(s, 0);
    rfc3339_now_micro(m);
    int64_t after = (int64_t)time(NULL);
    int64_t a = rfc3339_secs(s), b = rfc3339_secs(m);
    assert_in_range(a, before, after);
    assert_in_range(b, before, after);
    assert_int_equal(strlen(m), RFC3339_MICRO_LEN - 1);
    rfc3339_now(s, 3600);
    assert_in_range(rfc3339_secs(s), before + 3600, after + 3600);
    rfc3339_now(s, -60);
    assert_in_range(rfc3339_secs(s), before - 60, after - 60);
    /* Every second of a day formats and parses back to itself. */
    for (int64_t t = 1714953600; t < 1714953600 + 86400; t += 7) {
        rfc3339_format(t, s);
        assert_int_equal(rfc3339_secs(s), t);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_forms),
        cmocka_unit_test(test_parse_refused),
        cmocka_unit_test(test_format),
        cmocka_unit_test(test_now_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
