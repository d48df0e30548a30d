/* Unit tests for core/metrics: exact exposition text for every type,
 * escaping, histograms, validation, child bounds and the process collector. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/buf.h"
#include "core/err.h"
#include "core/log.h"
#include "core/metrics.h"
#include "unit_assert.h"

static char *render(mx_registry *r)
{
    buf_t b;
    buf_init(&b, 1 << 20);
    assert_int_equal(mx_render(r, &b), 0);
    return b.data ? buf_detach(&b, NULL) : strdup("");
}

static void expect_render(mx_registry *r, const char *want)
{
    char *got = render(r);
    if (strcmp(got, want) != 0)
        fprintf(stderr, "--- want\n%s--- got\n%s---\n", want, got);
    assert_string_equal(got, want);
    free(got);
}

static void test_counter_exposition_and_escaping(void **state)
{
    mx_registry *r = mx_registry_new();
    int err = 0;
    mx_counter *c =
        mx_counter_new(r, "op_requests_total", "Requests sent.\nSecond line, a \\ and a \"quote\".", &err);
    assert_non_null(c);
    assert_int_equal(err, 0);
    mx_counter_add(c, 3);
    mx_counter_inc(c);
    mx_counter_add(c, -7); /* ignored: counters only go up */

    mx_family *f = mx_family_new(r, MX_COUNTER, "op_http_total", "HTTP calls.", "code,path", NULL, 0, &err);
    assert_non_null(f);
    mx_counter_inc(mx_counter_get(f, MX_LV("200", "/a")));
    mx_counter_add(mx_counter_get(f, MX_LV("500", "q\"uote back\\slash new\nline")), 2.5);
    mx_counter_inc(mx_counter_get(f, MX_LV("200", "/a")));

    expect_render(r, "# HELP op_requests_total Requests sent.\\nSecond line, a \\\\ and a \"quote\".\n"
                     "# TYPE op_requests_total counter\n"
                     "op_requests_total 4\n"
                     "# HELP op_http_total HTTP calls.\n"
                     "# TYPE op_http_total counter\n"
                     "op_http_total{code=\"200\",path=\"/a\"} 2\n"
                     "op_http_total{code=\"500\",path=\"q\\\"uote back\\\\slash new\\nline\"} 2.5\n");
    mx_registry_free(r);
}

static double fixed_fn(void *data)
{
    return *(double *)data;
}

static void test_gauge_exposition(void **state)
{
    mx_registry *r = mx_registry_new();
    int err = 0;
    mx_gauge *g = mx_gauge_new(r, "op_temperature", "A gauge.", &err);
    mx_gauge_set(g, -1.5);
    mx_gauge_add(g, 0.25);

    double depth = 17;
    assert_int_equal(mx_gauge_fn_new(r, "op_queue_depth", "Read at scrape time.", fixed_fn, &depth), 0);
    /* Only once for an unlabeled family. */
    assert_int_equal(mx_gauge_fn_new(r, "op_queue_depth", "Read at scrape time.", fixed_fn, &depth),
                     OP_EEXISTS);

    mx_family *f = mx_family_new(r, MX_GAUGE, "op_special", "Special values.", "kind", NULL, 0, &err);
    mx_gauge_set(mx_gauge_get(f, MX_LV("nan")), NAN);
    mx_gauge_set(mx_gauge_get(f, MX_LV("inf")), INFINITY);
    mx_gauge_set(mx_gauge_get(f, MX_LV("-inf")), -INFINITY);
    mx_gauge_set(mx_gauge_get(f, MX_LV("big")), 1e20);
    mx_gauge_set(mx_gauge_get(f, MX_LV("tiny")), 1e-8);
    mx_gauge_set(mx_gauge_get(f, MX_LV("third")), 1.0 / 3);
    double cb = 2.5;
    assert_int_equal(mx_child_fn(f, MX_LV("cb"), fixed_fn, &cb), 0);
    assert_int_equal(mx_child_fn(f, MX_LV("cb"), fixed_fn, &cb), OP_EEXISTS);
    assert_int_equal(mx_child_fn(f, MX_LV("big"), fixed_fn, &cb), OP_EEXISTS);

    expect_render(r, "# HELP op_temperature A gauge.\n"
                     "# TYPE op_temperature gauge\n"
                     "op_temperature -1.25\n"
                     "# HELP op_queue_depth Read at scrape time.\n"
                     "# TYPE op_queue_depth gauge\n"
                     "op_queue_depth 17\n"
                     "# HELP op_special Special values.\n"
                     "# TYPE op_special gauge\n"
                     "op_special{kind=\"nan\"} NaN\n"
                     "op_special{kind=\"inf\"} +Inf\n"
                     "op_special{kind=\"-inf\"} -Inf\n"
                     "op_special{kind=\"big\"} 1e+20\n"
                     "op_special{kind=\"tiny\"} 1e-08\n"
                     "op_special{kind=\"third\"} 0.33333333333333331\n"
                     "op_special{kind=\"cb\"} 2.5\n");
    /* The callback is read at every scrape. */
    depth = 3;
    char *text = render(r);
    assert_non_null(strstr(text, "\nop_queue_depth 3\n"));
    free(text);
    mx_registry_free(r);
}

static void test_histogram_exposition(void **state)
{
    mx_registry *r = mx_registry_new();
    int err = 0;
    const double bounds[] = {0.125, 1, 8};
    mx_histogram *h = mx_histogram_new(r, "op_latency_seconds", "Latency.", bounds, 3, &err);
    assert_non_null(h);
    const double obs[] = {0.0625, 0.125, 0.5, 4, 64};
    for (size_t i = 0; i < 5; i++)
        mx_histogram_observe(h, obs[i]);

    /* Labeled, +Inf given explicitly (it is implied anyway). */
    const double b2[] = {0.5, INFINITY};
    mx_family *f = mx_family_new(r, MX_HISTOGRAM, "op_size_bytes", "Sizes.", "name", b2, 2, &err);
    assert_non_null(f);
    mx_histogram *q = mx_histogram_get(f, MX_LV("q1"));
    mx_histogram_observe(q, 0.25);
    mx_histogram_observe(q, 2);
    mx_histogram_get(f, MX_LV("q2")); /* exported with zeros */

    expect_render(r, "# HELP op_latency_seconds Latency.\n"
                     "# TYPE op_latency_seconds histogram\n"
                     "op_latency_seconds_bucket{le=\"0.125\"} 2\n"
                     "op_latency_seconds_bucket{le=\"1\"} 3\n"
                     "op_latency_seconds_bucket{le=\"8\"} 4\n"
                     "op_latency_seconds_bucket{le=\"+Inf\"} 5\n"
                     "op_latency_seconds_sum 68.6875\n"
                     "op_latency_seconds_count 5\n"
                     "# HELP op_size_bytes Sizes.\n"
                     "# TYPE op_size_bytes histogram\n"
                     "op_size_bytes_bucket{name=\"q1\",le=\"0.5\"} 1\n"
                     "op_size_bytes_bucket{name=\"q1\",le=\"+Inf\"} 2\n"
                     "op_size_bytes_sum{name=\"q1\"} 2.25\n"
                     "op_size_bytes_count{name=\"q1\"} 2\n"
                     "op_size_bytes_bucket{name=\"q2\",le=\"0.5\"} 0\n"
                     "op_size_bytes_bucket{name=\"q2\",le=\"+Inf\"} 0\n"
                     "op_size_bytes_sum{name=\"q2\"} 0\n"
                     "op_size_bytes_count{name=\"q2\"} 0\n");

    double eb[4];
    mx_exponential_buckets(10e-9, 10, 4, eb);
    assert_true(fabs(eb[0] - 1e-8) < 1e-20 && fabs(eb[3] - 1e-5) < 1e-17);
    mx_registry_free(r);
}

static void test_validation_and_reuse(void **state)
{
    mx_registry *r = mx_registry_new();
    int err = 0;
    log_setup(-1, LOGF_TEXT); /* the expected failures below log errors */
    assert_true(mx_valid_metric_name("a:b_c9"));
    assert_true(mx_valid_metric_name("_x"));
    assert_false(mx_valid_metric_name("9abc"));
    assert_false(mx_valid_metric_name("a-b"));
    assert_false(mx_valid_metric_name(""));
    assert_true(mx_valid_label_name("code"));
    assert_false(mx_valid_label_name("__name__"));
    assert_false(mx_valid_label_name("a:b"));
    assert_false(mx_valid_label_name("1a"));

    assert_null(mx_family_new(r, MX_COUNTER, "bad-name", "h", NULL, NULL, 0, &err));
    assert_int_equal(err, OP_EINVAL);
    assert_null(mx_family_new(r, MX_COUNTER, "ok_total", "h", "a,__b", NULL, 0, &err));
    assert_int_equal(err, OP_EINVAL);
    assert_null(mx_family_new(r, MX_COUNTER, "ok_total", "h", "a,a", NULL, 0, &err));
    assert_int_equal(err, OP_EINVAL);
    assert_null(mx_family_new(r, MX_COUNTER, "ok_total", "h", "a,", NULL, 0, &err));
    assert_int_equal(err, OP_EINVAL);
    const double b[] = {1, 2};
    const double desc[] = {2, 1};
    const double nan_b[] = {1, NAN};
    assert_null(mx_family_new(r, MX_HISTOGRAM, "h_seconds", "h", "le", b, 2, &err));
    assert_int_equal(err, OP_EINVAL);
    assert_null(mx_family_new(r, MX_HISTOGRAM, "h_seconds", "h", NULL, desc, 2, &err));
    assert_int_equal(err, OP_EINVAL);
    assert_null(mx_family_new(r, MX_HISTOGRAM, "h_seconds", "h", NULL, nan_b, 2, &err));
    assert_int_equal(err, OP_EINVAL);
    /* A counter may use "le". */
    assert_non_null(mx_family_new(r, MX_COUNTER, "le_total", "h", "le", NULL, 0, &err));

    /* Same shape: the existing family comes back; another shape is refused. */
    mx_family *f = mx_family_new(r, MX_COUNTER, "ok_total", "h", "a,b", NULL, 0, &err);
    assert_non_null(f);
    assert_ptr_equal(mx_family_new(r, MX_COUNTER, "ok_total", "other help", "a,b", NULL, 0, &err), f);
    assert_null(mx_family_new(r, MX_GAUGE, "ok_total", "h", "a,b", NULL, 0, &err));
    assert_int_equal(err, OP_EEXISTS);
    assert_null(mx_family_new(r, MX_COUNTER, "ok_total", "h", "a", NULL, 0, &err));
    assert_int_equal(err, OP_EEXISTS);
    mx_family *h = mx_family_new(r, MX_HISTOGRAM, "h_seconds", "h", NULL, b, 2, &err);
    assert_non_null(h);
    const double b3[] = {1, 3};
    assert_null(mx_family_new(r, MX_HISTOGRAM, "h_seconds", "h", NULL, b3, 2, &err));
    assert_int_equal(err, OP_EEXISTS);

    /* Wrong child type for the family. */
    assert_null(mx_gauge_get(f, MX_LV("x", "y")));
    assert_null(mx_histogram_get(f, MX_LV("x", "y")));
    assert_int_equal(mx_child_fn(h, NULL, fixed_fn, NULL), OP_EINVAL);
    log_setup(LOGL_INFO, LOGF_TEXT);
    mx_registry_free(r);
}

static void test_children_lookup_bound_remove(void **state)
{
    mx_registry *r = mx_registry_new();
    int err = 0;
    mx_family *f = mx_family_new(r, MX_COUNTER, "op_things_total", "Things.", "a,b", NULL, 0, &err);
    /* The same values give the same child; the encoding keeps ("ab","c") and
     * ("a","bc") apart. */
    mx_counter *c1 = mx_counter_get(f, MX_LV("ab", "c"));
    mx_counter *c2 = mx_counter_get(f, MX_LV("a", "bc"));
    assert_ptr_not_equal(c1, c2);
    assert_ptr_equal(mx_counter_get(f, MX_LV("ab", "c")), c1);
    /* A long value goes through the heap key path and still matches. */
    char longv[2000];
    memset(longv, 'x', sizeof(longv) - 1);
    longv[sizeof(longv) - 1] = '\0';
    mx_counter *cl = mx_counter_get(f, MX_LV(longv, "z"));
    assert_ptr_equal(mx_counter_get(f, MX_LV(longv, "z")), cl);
    assert_int_equal(mx_family_children(f), 3);

    assert_int_equal(mx_child_remove(f, MX_LV(longv, "z")), 1);
    assert_int_equal(mx_child_remove(f, MX_LV(longv, "z")), 0);
    assert_int_equal(mx_family_children(f), 2);

    /* Past the bound: a shared child that is never exported. */
    log_setup(-1, LOGF_TEXT);
    mx_family_set_max_children(f, 3);
    mx_counter *c3 = mx_counter_get(f, MX_LV("3", "3"));
    mx_counter *o1 = mx_counter_get(f, MX_LV("4", "4"));
    mx_counter *o2 = mx_counter_get(f, MX_LV("5", "5"));
    assert_non_null(o1);
    assert_ptr_equal(o1, o2);
    assert_ptr_not_equal(o1, c3);
    mx_counter_add(o1, 100);
    assert_int_equal(mx_family_children(f), 3);
    double v = 1;
    assert_int_equal(mx_child_fn(f, MX_LV("6", "6"), fixed_fn, &v), OP_ETOOBIG);
    log_setup(LOGL_INFO, LOGF_TEXT);
    mx_counter_inc(c1);
    char *text = render(r);
    assert_null(strstr(text, "100"));
    assert_null(strstr(text, "a=\"4\""));
    assert_non_null(strstr(text, "op_things_total{a=\"ab\",b=\"c\"} 1\n"));
    free(text);

    /* An empty labeled family is left out entirely. */
    mx_family_new(r, MX_GAUGE, "op_empty", "Nothing yet.", "x", NULL, 0, &err);
    text = render(r);
    assert_null(strstr(text, "op_empty"));
    free(text);

    /* Removing the single child of an unlabeled family resets it to zero. */
    mx_counter *u = mx_counter_new(r, "op_single_total", "One.", &err);
    mx_counter_add(u, 5);
    mx_family *uf = mx_family_new(r, MX_COUNTER, "op_single_total", "One.", NULL, NULL, 0, &err);
    assert_int_equal(mx_child_remove(uf, NULL), 1);
    text = render(r);
    assert_non_null(strstr(text, "\nop_single_total 0\n"));
    free(text);

    /* Rendering into a buffer that is too small fails cleanly. */
    buf_t small;
    buf_init(&small, 40);
    assert_int_equal(mx_render(r, &small), OP_ETOOBIG);
    buf_free(&small);
    mx_registry_free(r);
}

static void test_format_value(void **state)
{
    char out[32];
    struct {
        double v;
        const char *s;
    } cases[] = {
        {0, "0"},        {-0.0, "0"},        {42, "42"},
        {-7, "-7"},      {0.1, "0.1"},       {1e-8, "1e-08"},
        {1e20, "1e+20"}, {2.5e-3, "0.0025"}, {123456789012345.0, "123456789012345"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        mx__format_value(cases[i].v, out);
        assert_string_equal(out, cases[i].s);
    }
    /* Values that need 17 digits still read back exactly. */
    double odd[] = {1.0 / 3, 0.1 + 0.2, 1e300 / 7, 5e-324};
    for (size_t i = 0; i < sizeof(odd) / sizeof(odd[0]); i++) {
        mx__format_value(odd[i], out);
        assert_dbl_equal(strtod(out, NULL), odd[i]);
    }
}

static void test_process_collector(void **state)
{
    /* The parser, on a command name with spaces and parentheses. */
    const char *stat = "1234 (my (odd) proc) S 1 1234 1234 0 -1 4194304 100 0 0 0 250 50 0 0 20 0 1 0 "
                       "5000 104857600 2560 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0\n";
    mx__proc_stat st;
    assert_int_equal(mx__proc_parse_stat(stat, 100, &st), 0);
    assert_true(fabs(st.cpu_seconds - 3.0) < 1e-9);
    assert_dbl_equal(st.start_ticks, 5000);
    assert_dbl_equal(st.vsize, 104857600);
    assert_dbl_equal(st.rss_pages, 2560);
    assert_int_equal(mx__proc_parse_stat("1234 (x) S 1 2 3", 100, &st), OP_EPARSE);
    assert_int_equal(mx__proc_parse_stat("no parenthesis", 100, &st), OP_EPARSE);

    mx_registry *r = mx_registry_new();
    assert_int_equal(mx_process_collector(r), 0);
    assert_int_equal(mx_process_collector(r), OP_EEXISTS);
    char *text = render(r);
    double rss = -1, vsz = -1, start = -1, fds = -1, cpu = -1, maxfds = -1;
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        sscanf(line, "process_resident_memory_bytes %lf", &rss);
        sscanf(line, "process_virtual_memory_bytes %lf", &vsz);
        sscanf(line, "process_start_time_seconds %lf", &start);
        sscanf(line, "process_open_fds %lf", &fds);
        sscanf(line, "process_cpu_seconds_total %lf", &cpu);
        sscanf(line, "process_max_fds %lf", &maxfds);
    }
    free(text);
    assert_true(rss > 1 << 20);
    assert_true(vsz >= rss);
    double now = (double)time(NULL);
    assert_true(start > now - 600 && start <= now + 1);
    assert_true(fds >= 3 && fds < 1000);
    assert_true(cpu >= 0);
    assert_true(maxfds >= fds);

    /* The fd count follows the process. */
    FILE *extra[5];
    for (int i = 0; i < 5; i++)
        extra[i] = fopen("/proc/self/stat", "r");
    text = render(r);
    double fds2 = -1;
    char *p = strstr(text, "\nprocess_open_fds ");
    assert_non_null(p);
    sscanf(p + 1, "process_open_fds %lf", &fds2);
    assert_dbl_equal(fds2, fds + 5);
    free(text);
    for (int i = 0; i < 5; i++)
        fclose(extra[i]);
    mx_registry_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counter_exposition_and_escaping),
        cmocka_unit_test(test_gauge_exposition),
        cmocka_unit_test(test_histogram_exposition),
        cmocka_unit_test(test_validation_and_reuse),
        cmocka_unit_test(test_children_lookup_bound_remove),
        cmocka_unit_test(test_format_value),
        cmocka_unit_test(test_process_collector),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
