/* The benchmark harness's arithmetic: the Prometheus text parser, label
 * filters, and the histogram quantiles, bounds and differences that every
 * latency figure of slurmop-bench is computed with. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "bench/bench_http.c"
#include "bench/bench_proc.c"
#include "unit_assert.h"

static const char text[] =
    "# HELP slurmop_event_to_action_seconds Time from the first watch event to the first write\n"
    "# TYPE slurmop_event_to_action_seconds histogram\n"
    "slurmop_event_to_action_seconds_bucket{controller=\"nodeset-controller\",le=\"0.001\"} 10\n"
    "slurmop_event_to_action_seconds_bucket{controller=\"nodeset-controller\",le=\"0.005\"} 90\n"
    "slurmop_event_to_action_seconds_bucket{controller=\"nodeset-controller\",le=\"0.01\"} 99\n"
    "slurmop_event_to_action_seconds_bucket{controller=\"nodeset-controller\",le=\"+Inf\"} 100\n"
    "slurmop_event_to_action_seconds_sum{controller=\"nodeset-controller\"} 0.4\n"
    "slurmop_event_to_action_seconds_count{controller=\"nodeset-controller\"} 100\n"
    "slurmop_event_to_action_seconds_bucket{controller=\"other\",le=\"0.001\"} 5\n"
    "slurmop_event_to_action_seconds_bucket{controller=\"other\",le=\"+Inf\"} 5\n"
    "workqueue_depth{name=\"nodeset-controller\"} 3\n"
    "workqueue_depth{name=\"nodeset-controller-2\"} 7\n"
    "slurmop_api_requests_total{verb=\"POST\",resource=\"pods\",code=\"201\"} 8192\n"
    "slurmop_api_requests_total{verb=\"POST\",resource=\"pods\",code=\"409\"} 2\n"
    "slurmop_api_requests_total{verb=\"PATCH\",resource=\"pods\",code=\"200\"} 5\n"
    "odd_label{msg=\"a}b,c=\\\"d\\\"\"} 1.5\n"
    "process_cpu_seconds_total 12.25\n"
    "nan_metric NaN\n";

static void test_parse_and_filter(void **state)
{
    (void)state;
    bx_metrics m;
    bx_metrics_parse(text, &m);
    assert_int_equal(m.n, 16);
    /* a filter term matches a whole pair, not a prefix of another value */
    assert_dbl_equal(bx_metric(&m, "workqueue_depth", "name=\"nodeset-controller\""), 3);
    assert_dbl_equal(bx_metric(&m, "workqueue_depth", NULL), 10);
    assert_dbl_equal(bx_metric(&m, "slurmop_api_requests_total", "verb=\"POST\",resource=\"pods\""), 8194);
    assert_dbl_equal(bx_metric(&m, "slurmop_api_requests_total", "resource=\"pods\""), 8199);
    assert_dbl_equal(bx_metric(&m, "slurmop_api_requests_total", "verb=\"DELETE\""), 0);
    assert_false(bx_metric_has(&m, "slurmop_api_requests_total", "verb=\"DELETE\""));
    assert_true(bx_metric_has(&m, "process_cpu_seconds_total", NULL));
    assert_dbl_equal(bx_metric(&m, "process_cpu_seconds_total", ""), 12.25);
    /* a '}' inside a quoted label value does not end the label set */
    assert_dbl_equal(bx_metric(&m, "odd_label", NULL), 1.5);
    assert_true(isnan(bx_metric(&m, "nan_metric", NULL)));
    bx_metrics_free(&m);
}

static void test_histogram(void **state)
{
    (void)state;
    bx_metrics m;
    bx_hist h;
    bx_metrics_parse(text, &m);
    assert_int_equal(
        bx_hist_read(&m, "slurmop_event_to_action_seconds", "controller=\"nodeset-controller\"", &h), 0);
    assert_int_equal(h.n, 4);
    assert_true(isinf(h.le[3]));
    assert_dbl_equal(h.count, 100);
    assert_true(fabs(h.sum - 0.4) < 1e-12);
    /* p50: rank 50 lies in (1 ms, 5 ms] which holds ranks 10..90: 1 + 4 * 40/80 = 3 ms */
    assert_true(fabs(bx_hist_quantile(&h, 0.5) - 0.003) < 1e-12);
    /* p10 is exactly the first bound; p5 interpolates from 0 */
    assert_true(fabs(bx_hist_quantile(&h, 0.1) - 0.001) < 1e-12);
    assert_true(fabs(bx_hist_quantile(&h, 0.05) - 0.0005) < 1e-12);
    /* p99: rank 99 = the top of (5 ms, 10 ms] */
    assert_true(fabs(bx_hist_quantile(&h, 0.99) - 0.01) < 1e-12);
    /* p99.5 lands in +Inf: the largest finite bound is answered */
    assert_true(fabs(bx_hist_quantile(&h, 0.995) - 0.01) < 1e-12);
    assert_true(isinf(bx_hist_max_bound(&h)));
    /* exact shares at bucket bounds */
    assert_true(fabs(bx_hist_frac_le(&h, 0.005) - 0.90) < 1e-12);
    assert_true(fabs(bx_hist_frac_le(&h, 0.004) - 0.10) < 1e-12);
    /* both controllers together: buckets of equal bounds add up */
    bx_hist all;
    assert_int_equal(bx_hist_read(&m, "slurmop_event_to_action_seconds", NULL, &all), 0);
    assert_int_equal(all.n, 4);
    assert_dbl_equal(all.cum[0], 15);
    assert_dbl_equal(all.cum[3], 105);
    assert_int_equal(bx_hist_read(&m, "nope", NULL, &all), OP_ENOTFOUND);
    bx_metrics_free(&m);
}

static void test_histogram_difference(void **state)
{
    (void)state;
    bx_hist a, b;
    memset(&a, 0, sizeof(a));
    memset(&b, 0, sizeof(b));
    double le[] = {0.001, 0.005, INFINITY};
    double ca[] = {10, 12, 12}, cb[] = {4, 4, 4};
    for (int i = 0; i < 3; i++) {
        a.le[i] = b.le[i] = le[i];
        a.cum[i] = ca[i];
        b.cum[i] = cb[i];
    }
    a.n = b.n = 3;
    a.count = 12;
    b.count = 4;
    bx_hist_sub(&a, &b);
    assert_dbl_equal(a.cum[0], 6);
    assert_dbl_equal(a.cum[1], 8);
    assert_dbl_equal(a.cum[2], 8);
    assert_dbl_equal(a.count, 8);
    assert_true(fabs(bx_hist_max_bound(&a) - 0.005) < 1e-12);
    /* an empty difference has no quantiles */
    bx_hist c = b;
    bx_hist_sub(&c, &b);
    assert_true(isnan(bx_hist_quantile(&c, 0.5)));
    assert_true(isnan(bx_hist_max_bound(&c)));
    assert_true(isnan(bx_hist_frac_le(&c, 0.005)));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_and_filter),
        cmocka_unit_test(test_histogram),
        cmocka_unit_test(test_histogram_difference),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
