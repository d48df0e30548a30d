/* Unit tests for slurmio/hostlist: expansion, compression, bounds, and (when
 * libslurm is present) agreement with libslurm's own hostlist functions. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/err.h"
#include "core/mem.h"
#include "slurmio/hostlist.h"

#ifdef OP_HAVE_LIBSLURM
#include <slurm/slurm.h>
#endif

/* Expand and join with spaces, or return the error code as text. */
static char *expand_str(const char *expr, size_t max)
{
    hostlist_names hn;
    int rc = hostlist_expand(expr, max, &hn);
    if (rc < 0) {
        assert_null(hn.names);
        assert_int_equal(hn.n, 0);
        return xstrdup(err_name(rc));
    }
    buf_t b;
    buf_init(&b, BUF_UNLIMITED);
    for (size_t i = 0; i < hn.n; i++)
        assert_int_equal(buf_printf(&b, "%s%s", i ? " " : "", hn.names[i]), 0);
    hostlist_names_free(&hn);
    return b.data ? buf_detach(&b, NULL) : xstrdup("");
}

#define EXPECT_EXPAND(expr, want)                                                                            \
    do {                                                                                                     \
        char *got_ = expand_str((expr), 0);                                                                  \
        assert_string_equal(got_, (want));                                                                   \
        free(got_);                                                                                          \
    } while (0)

static void test_expand_basic(void **state)
{
    EXPECT_EXPAND("g[00001-00003,7],n1", "g00001 g00002 g00003 g7 n1");
    EXPECT_EXPAND("n1", "n1");
    EXPECT_EXPAND("", "");
    EXPECT_EXPAND(NULL, "");
    EXPECT_EXPAND("slinky-[0-2]", "slinky-0 slinky-1 slinky-2");
    EXPECT_EXPAND("n[8-11]", "n8 n9 n10 n11");
    EXPECT_EXPAND("n[01-3]", "n01 n02 n03");
    EXPECT_EXPAND("n[1-003]", "n1 n2 n3");
    EXPECT_EXPAND("a[1-2]b[3-4]", "a1b3 a1b4 a2b3 a2b4");
    EXPECT_EXPAND("rack[1,3]-n[1-2]x", "rack1-n1x rack1-n2x rack3-n1x rack3-n2x");
    EXPECT_EXPAND("  a , b\tc\n", "a b c");
    EXPECT_EXPAND("x,,y", "x y");
    EXPECT_EXPAND("n1,n1", "n1 n1");
    EXPECT_EXPAND("[1-2]", "1 2");
    EXPECT_EXPAND("n[5]", "n5");
    EXPECT_EXPAND("host.example-1", "host.example-1");
}

static void test_expand_malformed(void **state)
{
    static const char *bad[] = {"n[3-1]",   "n[1-2", "n]1",   "n[[1]]", "n[]",
                                "n[a]",     "n[1-]", "n[ 1]", "n[1,]",  "n[,1]",
                                "n[1-2-3]", "n[-1]", "]",     "n[1]]",  "n[1234567890123456789]"};
    for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
        hostlist_names hn;
        int rc = hostlist_expand(bad[i], 0, &hn);
        if (rc != OP_EPARSE)
            fail_msg("%s: got %d", bad[i], rc);
        assert_null(hn.names);
        size_t n = 99;
        assert_int_equal(hostlist_count(bad[i], 0, &n), OP_EPARSE);
    }
    /* A name longer than HOSTLIST_NAME_MAX, literally or once expanded. */
    char longname[HOSTLIST_NAME_MAX + 2];
    memset(longname, 'a', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    hostlist_names hn;
    assert_int_equal(hostlist_expand(longname, 0, &hn), OP_EPARSE);
    longname[HOSTLIST_NAME_MAX - 3] = '[';
    longname[HOSTLIST_NAME_MAX - 2] = '9';
    longname[HOSTLIST_NAME_MAX - 1] = ']';
    longname[HOSTLIST_NAME_MAX] = '\0';
    assert_int_equal(hostlist_expand(longname, 0, &hn), 0); /* exactly at the limit */
    assert_int_equal(hn.n, 1);
    assert_int_equal(strlen(hn.names[0]), HOSTLIST_NAME_MAX - 2);
    hostlist_names_free(&hn);
    /* Too many groups in one entry. */
    assert_int_equal(hostlist_expand("a[1]b[1]c[1]d[1]e[1]f[1]g[1]h[1]i[1]", 0, &hn), OP_EPARSE);
}

static void test_expand_bounds(void **state)
{
    hostlist_names hn;
    size_t n = 0;
    /* Refused without allocating: these would be absurd. */
    assert_int_equal(hostlist_expand("n[0-99999999999999]", 0, &hn), OP_ETOOBIG);
    assert_int_equal(hostlist_expand("a[0-999999]b[0-999999]c[0-999999]", 1000000, &hn), OP_ETOOBIG);
    assert_int_equal(hostlist_count("a[0-999999999999999999]b[0-999999999999999999]", 0, &n), OP_ETOOBIG);
    assert_int_equal(hostlist_expand("n[1-10]", 9, &hn), OP_ETOOBIG);
    assert_int_equal(hostlist_expand("n[1-5],m[1-5]", 9, &hn), OP_ETOOBIG);
    assert_int_equal(hostlist_expand("n[1-5,6-10]", 9, &hn), OP_ETOOBIG);
    assert_int_equal(hostlist_expand("n[1-10]", 10, &hn), 0);
    assert_int_equal(hn.n, 10);
    hostlist_names_free(&hn);
    assert_int_equal(hostlist_count("g[00001-08192],n[1-3]", 0, &n), 0);
    assert_int_equal(n, 8195);
    /* The default bound. */
    assert_int_equal(hostlist_count("g[1-65536]", 0, &n), 0);
    assert_int_equal(hostlist_count("g[1-65537]", 0, &n), OP_ETOOBIG);
}

static char *compress_list(const char *space_separated)
{
    char *copy = xstrdup(space_separated);
    const char *v[64];
    size_t n = 0;
    for (char *save = NULL, *t = strtok_r(copy, " ", &save); t; t = strtok_r(NULL, " ", &save))
        v[n++] = t;
    char *s = hostlist_compress(v, n);
    free(copy);
    return s;
}

#define EXPECT_COMPRESS(list, want)                                                                          \
    do {                                                                                                     \
        char *got_ = compress_list(list);                                                                    \
        assert_non_null(got_);                                                                               \
        assert_string_equal(got_, (want));                                                                   \
        free(got_);                                                                                          \
    } while (0)

static void test_compress_basic(void **state)
{
    EXPECT_COMPRESS("", "");
    EXPECT_COMPRESS("n1", "n1");
    EXPECT_COMPRESS("n3 n1 n2", "n[1-3]");
    EXPECT_COMPRESS("g00001 g00002 g00003 g00007", "g[00001-00003,00007]");
    EXPECT_COMPRESS("n9 n10", "n[9-10]");
    EXPECT_COMPRESS("n08 n09 n10", "n[08-10]");
    EXPECT_COMPRESS("n1 n01", "n[1,01]");
    EXPECT_COMPRESS("slinky-0 slinky-1 slinky-10 slinky-2", "slinky-[0-2,10]");
    EXPECT_COMPRESS("r10n1 r2n1 a b1", "a,b1,r2n1,r10n1");
    EXPECT_COMPRESS("gpu-a1 gpu-b1 gpu-a2", "gpu-a[1-2],gpu-b1");
    EXPECT_COMPRESS("n1 n1 n2 n2", "n[1-2]");
    EXPECT_COMPRESS("n n1", "n,n1");
    EXPECT_COMPRESS("abc abc", "abc");
    EXPECT_COMPRESS("n5 n5", "n5");
    EXPECT_COMPRESS("n1 n3 n5 n6", "n[1,3,5-6]");

    const char *bad1[] = {"n1", "a,b"};
    assert_null(hostlist_compress(bad1, 2));
    const char *bad2[] = {""};
    assert_null(hostlist_compress(bad2, 1));
    const char *bad3[] = {"n[1]"};
    assert_null(hostlist_compress(bad3, 1));
    assert_true(hostlist_name_valid("slinky-0"));
    assert_false(hostlist_name_valid("a b"));
}

static void test_compress_8192(void **state)
{
    size_t n = 8192;
    char **v = xcalloc(n, sizeof(char *));
    for (size_t i = 0; i < n; i++)
        v[(i * 7919) % n] = xasprintf("g%05zu", i + 1); /* shuffled */
    char *s = hostlist_compress((const char *const *)v, n);
    assert_string_equal(s, "g[00001-08192]");
    hostlist_names hn;
    assert_int_equal(hostlist_expand(s, 0, &hn), 0);
    assert_int_equal(hn.n, n);
    assert_string_equal(hn.names[0], "g00001");
    assert_string_equal(hn.names[n - 1], "g08192");
    hostlist_names_free(&hn);
    free(s);
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

static int strp_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Sort and de-duplicate an array of strings in place; returns the new count. */
static size_t sort_unique(char **v, size_t n)
{
    qsort(v, n, sizeof(char *), strp_cmp);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (k && strcmp(v[k - 1], v[i]) == 0) {
            free(v[i]);
            continue;
        }
        v[k++] = v[i];
    }
    return k;
}

static unsigned rnd(unsigned *s)
{
    *s = *s * 1103515245u + 12345u;
    return (*s >> 16) & 0x7fff;
}

/* Random sets, including the odd mixes (n1 with n01, n9 with n010): the
 * compressed form must always expand back to the same set. */
static void test_roundtrip_random(void **state)
{
    static const char *prefixes[] = {"n", "gpu-", "r2n", "r10n", "slinky-", "x", "a1b"};
    unsigned seed = 12345;
    for (int round = 0; round < 300; round++) {
        size_t n = 1 + rnd(&seed) % 40;
        char **v = xcalloc(n, sizeof(char *));
        for (size_t i = 0; i < n; i++) {
            const char *p = prefixes[rnd(&seed) % ARRAY_SIZE(prefixes)];
            unsigned num = rnd(&seed) % 30;
            int width = (int)(rnd(&seed) % 4);
            if (rnd(&seed) % 10 == 0)
                v[i] = xstrdup(p); /* no number */
            else
                v[i] = xasprintf("%s%0*u", p, width, num);
        }
        char *s = hostlist_compress((const char *const *)v, n);
        assert_non_null(s);
        hostlist_names hn;
        if (hostlist_expand(s, 0, &hn) != 0)
            fail_msg("cannot expand own output %s", s);
        n = sort_unique(v, n);
        hn.n = sort_unique(hn.names, hn.n);
        if (hn.n != n)
            fail_msg("round %d: %s expands to %zu names, want %zu", round, s, hn.n, n);
        for (size_t i = 0; i < n; i++)
            assert_string_equal(hn.names[i], v[i]);
        hostlist_names_free(&hn);
        for (size_t i = 0; i < n; i++)
            free(v[i]);
        free(v);
        free(s);
    }
}

#ifdef OP_HAVE_LIBSLURM
/* libslurm's expansion of expr, space-joined. */
static char *slurm_expand(const char *expr)
{
    hostlist_t hl = slurm_hostlist_create(expr);
    assert_non_null(hl);
    buf_t b;
    buf_init(&b, BUF_UNLIMITED);
    char *h;
    while ((h = slurm_hostlist_shift(hl))) {
        assert_int_equal(buf_printf(&b, "%s%s", b.len ? " " : "", h), 0);
        free(h);
    }
    slurm_hostlist_destroy(hl);
    return b.data ? buf_detach(&b, NULL) : xstrdup("");
}

static void test_vs_libslurm_expand(void **state)
{
    static const char *exprs[] = {
        "g[00001-00003,7],n1", "slinky-[0-12]", "n[8-11]",   "n[01-3]",        "n[1-003]",
        "a[1-2]b[3-4]",        "x,,y",          "n1 n2  n3", "g[00001-08192]", "n[1,3,5-6]",
        "r[1-2]n[01-02]",      "abc,n[9-10]"};
    for (size_t i = 0; i < ARRAY_SIZE(exprs); i++) {
        char *ours = expand_str(exprs[i], 0);
        char *theirs = slurm_expand(exprs[i]);
        if (strcmp(ours, theirs) != 0)
            fail_msg("%s: ours [%.200s] libslurm [%.200s]", exprs[i], ours, theirs);
        free(ours);
        free(theirs);
    }
}

static char *slurm_compress(char **v, size_t n)
{
    hostlist_t hl = slurm_hostlist_create(NULL);
    for (size_t i = 0; i < n; i++)
        slurm_hostlist_push_host(hl, v[i]);
    slurm_hostlist_uniq(hl);
    char *s = slurm_hostlist_ranged_string_malloc(hl);
    slurm_hostlist_destroy(hl);
    return s;
}

/* Realistic sets (one width per prefix, natural or zero-padded): our
 * compressed text must be exactly libslurm's. */
static void test_vs_libslurm_compress(void **state)
{
    static const char *prefixes[] = {"n", "gpu-", "r2n", "r10n", "slinky-", "login", "a1b"};
    unsigned seed = 777;
    for (int round = 0; round < 300; round++) {
        int width[ARRAY_SIZE(prefixes)];
        for (size_t p = 0; p < ARRAY_SIZE(prefixes); p++)
            width[p] = (int)(rnd(&seed) % 2 ? 0 : 3 + rnd(&seed) % 3);
        size_t n = 1 + rnd(&seed) % 60;
        char **v = xcalloc(n, sizeof(char *));
        for (size_t i = 0; i < n; i++) {
            size_t p = rnd(&seed) % ARRAY_SIZE(prefixes);
            v[i] = xasprintf("%s%0*u", prefixes[p], width[p], rnd(&seed) % 120);
        }
        char *ours = hostlist_compress((const char *const *)v, n);
        char *theirs = slurm_compress(v, n);
        if (strcmp(ours, theirs) != 0)
            fail_msg("round %d: ours [%s] libslurm [%s]", round, ours, theirs);
        free(ours);
        free(theirs);
        for (size_t i = 0; i < n; i++)
            free(v[i]);
        free(v);
    }
    /* And the fleet-sized one. */
    size_t n = 8192;
    char **v = xcalloc(n, sizeof(char *));
    for (size_t i = 0; i < n; i++)
        v[i] = xasprintf("g%05zu", n - i);
    char *ours = hostlist_compress((const char *const *)v, n);
    char *theirs = slurm_compress(v, n);
    assert_string_equal(ours, theirs);
    free(ours);
    free(theirs);
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}
#endif

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_expand_basic),       cmocka_unit_test(test_expand_malformed),
        cmocka_unit_test(test_expand_bounds),      cmocka_unit_test(test_compress_basic),
        cmocka_unit_test(test_compress_8192),      cmocka_unit_test(test_roundtrip_random),
#ifdef OP_HAVE_LIBSLURM
        cmocka_unit_test(test_vs_libslurm_expand), cmocka_unit_test(test_vs_libslurm_compress),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
