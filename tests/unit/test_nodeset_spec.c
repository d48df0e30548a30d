/* Unit tests for reconcilers/nodeset_spec: the typed view of a NodeSet's
 * spec, for an empty NodeSet (every default), for one that sets every field,
 * and for the NodeSet as the reconcile reads it (nsb_with_defaults first). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "reconcilers/nodeset_spec.h"

static cJSON *parse(const char *text)
{
    cJSON *j = cJSON_Parse(text);
    assert_non_null(j);
    return j;
}

static void check_defaults(const nsp_spec *sp)
{
    assert_int_equal(sp->mode, NSB_STATEFULSET);
    assert_int_equal(sp->replicas, 1);
    assert_int_equal(sp->ordinal_pad, 0);
    assert_int_equal(sp->strategy, NSP_ROLLING_UPDATE);
    assert_null(sp->max_unavailable);
    assert_string_equal(sp->sched.start, "");
    assert_true(sp->sched.start_secs <= 0);
    assert_string_equal(sp->sched.duration, "30m");
    assert_null(sp->sched.flags);
    assert_int_equal(sp->min_ready_secs, 0);
    assert_int_equal(sp->history_limit, 0);
    assert_false(sp->pin_to_node);
    assert_false(sp->host_network);
    assert_null(sp->hostname);
    assert_null(sp->claims);
    assert_true(sp->wdp);
    assert_false(sp->partition);
    assert_false(sp->prune_not_found);
    assert_string_equal(sp->ctl_name, "");
}

static void test_null_and_empty_are_defaults(void **state)
{
    (void)state;
    nsp_spec sp;
    memset(&sp, 0x5a, sizeof(sp)); /* every field must be set, not left over */
    nsp_read(NULL, &sp);
    check_defaults(&sp);
    assert_null(sp.ctl_ns);

    cJSON *ns = parse("{\"metadata\":{\"name\":\"a\",\"namespace\":\"t1\"},\"spec\":{}}");
    memset(&sp, 0x5a, sizeof(sp));
    nsp_read(ns, &sp);
    check_defaults(&sp);
    assert_string_equal(sp.ctl_ns, "t1"); /* the NodeSet's own namespace */
    cJSON_Delete(ns);
}

static void test_every_field(void **state)
{
    (void)state;
    cJSON *ns = parse("{\"metadata\":{\"name\":\"gpu\",\"namespace\":\"t1\"},\"spec\":{"
                      "\"scalingMode\":\"DaemonSet\",\"replicas\":12,\"ordinalPadding\":3,"
                      "\"updateStrategy\":{\"type\":\"ScheduledUpdate\","
                      "\"rollingUpdate\":{\"maxUnavailable\":\"25%\"},"
                      "\"scheduledUpdate\":{\"startTime\":\"2026-12-01T10:00:00Z\",\"duration\":\"2h\","
                      "\"flags\":[\"FLEX\"]}},"
                      "\"minReadySeconds\":15,\"revisionHistoryLimit\":4,\"pinToNode\":true,"
                      "\"template\":{\"spec\":{\"hostNetwork\":true,\"hostname\":\"gpu-\"}},"
                      "\"volumeClaimTemplates\":[{\"metadata\":{\"name\":\"scratch\"}}],"
                      "\"workloadDisruptionProtection\":false,\"partition\":{\"enabled\":true},"
                      "\"pruneSlurmNodeRecords\":\"NodeNotFound\","
                      "\"controllerRef\":{\"name\":\"slurm\",\"namespace\":\"shared\"}}}");
    nsp_spec sp;
    nsp_read(ns, &sp);
    assert_int_equal(sp.mode, NSB_DAEMONSET);
    assert_int_equal(sp.replicas, 12);
    assert_int_equal(sp.ordinal_pad, 3);
    assert_int_equal(sp.strategy, NSP_SCHEDULED_UPDATE);
    assert_non_null(sp.max_unavailable);
    assert_string_equal(sp.max_unavailable->valuestring, "25%");
    assert_string_equal(sp.sched.start, "2026-12-01T10:00:00Z");
    assert_int_equal(sp.sched.start_secs, 1796119200);
    assert_string_equal(sp.sched.duration, "2h");
    assert_int_equal(cJSON_GetArraySize(sp.sched.flags), 1);
    assert_int_equal(sp.min_ready_secs, 15);
    assert_int_equal(sp.history_limit, 4);
    assert_true(sp.pin_to_node);
    assert_true(sp.host_network);
    assert_string_equal(sp.hostname, "gpu-");
    assert_int_equal(cJSON_GetArraySize(sp.claims), 1);
    assert_false(sp.wdp);
    assert_true(sp.partition);
    assert_true(sp.prune_not_found);
    assert_string_equal(sp.ctl_name, "slurm");
    assert_string_equal(sp.ctl_ns, "shared");
    cJSON_Delete(ns);
}

/* Out-of-range and odd values as the code acts on them: bounded numbers,
 * an empty list or hostname as none, an unknown strategy as OnDelete. */
static void test_bounds_and_odd_values(void **state)
{
    (void)state;
    static const struct {
        const char *spec;
        nsp_strategy strategy;
        int pad, replicas;
        int32_t min_ready;
    } rows[] = {
        {"{\"updateStrategy\":{\"type\":\"OnDelete\"}}", NSP_ON_DELETE, 0, 1, 0},
        {"{\"updateStrategy\":{\"type\":\"Sideways\"}}", NSP_ON_DELETE, 0, 1, 0},
        {"{\"updateStrategy\":{\"type\":\"\"}}", NSP_ROLLING_UPDATE, 0, 1, 0},
        {"{\"ordinalPadding\":-2,\"replicas\":-5,\"minReadySeconds\":-1}", NSP_ROLLING_UPDATE, 0, 0, 0},
        {"{\"ordinalPadding\":900,\"replicas\":9999999,\"minReadySeconds\":1e12}", NSP_ROLLING_UPDATE, 64,
         NSB_REPLICAS_MAX, INT32_MAX},
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        char text[512];
        snprintf(text, sizeof(text), "{\"metadata\":{\"name\":\"a\"},\"spec\":%s}", rows[i].spec);
        cJSON *ns = parse(text);
        nsp_spec sp;
        nsp_read(ns, &sp);
        assert_int_equal(sp.strategy, rows[i].strategy);
        assert_int_equal(sp.ordinal_pad, rows[i].pad);
        assert_int_equal(sp.replicas, rows[i].replicas);
        assert_int_equal(sp.min_ready_secs, rows[i].min_ready);
        assert_null(sp.ctl_ns); /* no namespace anywhere */
        cJSON_Delete(ns);
    }
    cJSON *ns = parse("{\"spec\":{\"volumeClaimTemplates\":[],\"template\":{\"spec\":{\"hostname\":\"\"}}}}");
    nsp_spec sp;
    nsp_read(ns, &sp);
    assert_null(sp.claims);
    assert_null(sp.hostname);
    cJSON_Delete(ns);
}

/* What the reconcile reads: the NodeSet after nsb_with_defaults, whose
 * defaults must agree with the struct's. */
static void test_after_builder_defaults(void **state)
{
    (void)state;
    cJSON *raw = parse("{\"apiVersion\":\"slinky.slurm.net/v1beta1\",\"kind\":\"NodeSet\","
                       "\"metadata\":{\"name\":\"a\",\"namespace\":\"t1\"},"
                       "\"spec\":{\"controllerRef\":{\"name\":\"slurm\"},"
                       "\"template\":{\"spec\":{\"containers\":[]}}}}");
    cJSON *ns = nsb_with_defaults(raw);
    nsp_spec sp;
    nsp_read(ns, &sp);
    assert_int_equal(sp.strategy, NSP_ROLLING_UPDATE);
    assert_true(sp.wdp);
    assert_false(sp.prune_not_found);
    assert_string_equal(sp.ctl_name, "slurm");
    assert_string_equal(sp.ctl_ns, "t1");
    cJSON_Delete(ns);
    cJSON_Delete(raw);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_null_and_empty_are_defaults),
        cmocka_unit_test(test_every_field),
        cmocka_unit_test(test_bounds_and_odd_values),
        cmocka_unit_test(test_after_builder_defaults),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
