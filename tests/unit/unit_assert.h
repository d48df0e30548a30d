/* Assertions cmocka lacks, that print both values on failure as its own do.
 *
 * cmocka's assert_float_equal converts to float (24-bit mantissa), so it
 * cannot tell apart doubles that differ past the seventh digit; tests of
 * values kept as double compare them exactly here. Include after cmocka.h
 * and string.h. */
#ifndef OP_TESTS_UNIT_ASSERT_H
#define OP_TESTS_UNIT_ASSERT_H

/* a == b as doubles (NaN never equals), else fail showing both in full. */
#define assert_dbl_equal(a, b)                                                                               \
    do {                                                                                                     \
        double a__ = (a), b__ = (b);                                                                         \
        if (!(a__ == b__))                                                                                   \
            fail_msg("%s == %s: %.17g != %.17g", #a, #b, a__, b__);                                          \
    } while (0)

/* s starts with prefix (s not NULL), else fail showing the start of s. */
#define assert_str_prefix(s, prefix)                                                                         \
    do {                                                                                                     \
        const char *s__ = (s), *p__ = (prefix);                                                              \
        if (s__ == NULL || strncmp(s__, p__, strlen(p__)) != 0)                                              \
            fail_msg("%s starts with \"%s\": it is \"%.*s\"", #s, p__, (int)strlen(p__) + 20,                \
                     s__ ? s__ : "(null)");                                                                  \
    } while (0)

#endif
