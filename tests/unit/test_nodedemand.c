/* Unit tests for nodedemand: the annotation's parsing, which pending
 * reasons are demand, how a job is routed among the NodeSets that follow
 * the queue, and the replicas a NodeSet wants (up for the queue, down only
 * for nodes idle past the cool-down, within min and max). */
#include "unit/cluster_fixtures.h"

#include "core/err.h"
#include "core/mem.h"
#include "reconcilers/nodedemand.h"

static void test_parse(void **state)
{
    (void)state;
    nd_policy p;
    char err[256];
    assert_int_equal(nd_parse("max=64", &p, err, sizeof(err)), 0);
    assert_int_equal(p.min, 0);
    assert_int_equal(p.max, 64);
    assert_int_equal(p.cooldown_s, ND_DEFAULT_COOLDOWN_S);
    assert_int_equal(nd_parse(" min = 2 , MAX=8, cooldown=5m ", &p, err, sizeof(err)), 0);
    assert_int_equal(p.min, 2);
    assert_int_equal(p.max, 8);
    assert_int_equal(p.cooldown_s, 300);
    assert_int_equal(nd_parse("max=4,cooldown=30s", &p, err, sizeof(err)), 0);
    assert_int_equal(p.cooldown_s, 30);
    assert_int_equal(nd_parse("max=4,cooldown=1h", &p, err, sizeof(err)), 0);
    assert_int_equal(p.cooldown_s, 3600);
    assert_int_equal(nd_parse("max=0", &p, err, sizeof(err)), 0);
    struct {
        const char *text, *says;
    } bad[] = {
        {"", "max is required"},
        {"min=1", "max is required"},
        {"min=5,max=4", "above max"},
        {"max=4,max=5", "given twice"},
        {"max=-1", "not a count"},
        {"max=65537", "not a count"},
        {"max=4,cooldown=2d", "not a count"},
        {"max=4,cooldown=90000", "not a count"},
        {"max=4,size=3", "unknown key \"size\""},
        {"max", "not KEY=VALUE"},
        {"max=4,,min=1", "not KEY=VALUE"},
        {"max=4x", "not a count"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        err[0] = '\0';
        assert_int_equal(nd_parse(bad[i].text, &p, err, sizeof(err)), OP_EINVAL);
        if (strstr(err, bad[i].says) == NULL)
            fail_msg("nd_parse(\"%s\"): \"%s\" does not say \"%s\"", bad[i].text, err, bad[i].says);
    }
}

static void test_waits(void **state)
{
    (void)state;
    const char *yes[] = {
        "",
        "None",
        "Resources",
        "Priority",
        "ReqNodeNotAvail, UnavailableNodes:slinky-[2-3]",
        "Nodes required for job are DOWN, DRAINED or reserved for jobs in higher priority partitions",
        "NodeDown"};
    const char *no[] = {"JobHeldUser", "JobHeldAdmin", "Dependency", "DependencyNeverSatisfied", "BeginTime",
                        "QOSMaxNodePerJobLimit", "AssocGrpNodeLimit", "PartitionDown", "PartitionNodeLimit",
                        "Reservation", "BadConstraints", "resources", "SomethingNew"};
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
        assert_true(nd_waits(yes[i]));
    assert_true(nd_waits(NULL));
    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
        if (nd_waits(no[i]))
            fail_msg("\"%s\" counted as waiting for nodes", no[i]);
}

static void test_route(void **state)
{
    (void)state;
    assert_true(nd_lists_meet("a,b", "c,b"));
    assert_true(nd_lists_meet("gpu", "gpu"));
    assert_false(nd_lists_meet("gpu", "gpu2,cpu"));
    assert_false(nd_lists_meet("", "a"));
    assert_false(nd_lists_meet("a", ""));
    assert_false(nd_lists_meet("a,,b", "c,"));
    nd_set sets[] = {{"all,cpu", 4}, {"all,gpu", 16}, {"gpu", 64}};
    assert_int_equal(nd_route("cpu", 2, sets, 3), 0);
    assert_int_equal(nd_route("all", 4, sets, 3), 0);
    assert_int_equal(nd_route("all", 5, sets, 3), 1);  /* too big for the first */
    assert_int_equal(nd_route("gpu", 32, sets, 3), 2);
    assert_int_equal(nd_route("cpu", 5, sets, 3), ND_NEVER_FITS);
    assert_int_equal(nd_route("gpu", 65, sets, 3), ND_NEVER_FITS);
    assert_int_equal(nd_route("debug", 1, sets, 3), ND_NO_SET);
    assert_int_equal(nd_route("debug,gpu", 1, sets, 3), 1); /* a job may name several partitions */
    assert_int_equal(nd_route("cpu", 1, sets, 0), ND_NO_SET);
}

static void test_want(void **state)
{
    (void)state;
    nd_policy p = {.min = 2, .max = 8, .cooldown_s = 60};
    /* Up: busy + demand beyond replicas, capped at max. */
    assert_int_equal(nd_want(&p, 2, 2, 2, 0), 4);
    assert_int_equal(nd_want(&p, 4, 1, 4, 0), 5); /* 3 idle, a 4-node job: one more */
    assert_int_equal(nd_want(&p, 4, 2, 20, 0), 8);
    /* Pods coming up count: no second step for the same demand. */
    assert_int_equal(nd_want(&p, 4, 2, 2, 0), 4);
    /* A job that fits the idle nodes asks for nothing new. */
    assert_int_equal(nd_want(&p, 4, 1, 2, 0), 4);
    /* Down: only the nodes idle past the cool-down, never below need or min. */
    assert_int_equal(nd_want(&p, 6, 0, 0, 0), 6);
    assert_int_equal(nd_want(&p, 6, 0, 0, 3), 3);
    assert_int_equal(nd_want(&p, 6, 0, 0, 6), 2);
    assert_int_equal(nd_want(&p, 6, 3, 1, 3), 4); /* 3 busy + 1 wanted stay */
    assert_int_equal(nd_want(&p, 6, 6, 0, 0), 6);
    /* Outside [min, max]: brought in. */
    assert_int_equal(nd_want(&p, 0, 0, 0, 0), 2);
    assert_int_equal(nd_want(&p, 12, 0, 0, 0), 8);
    nd_policy z = {.min = 0, .max = 64, .cooldown_s = 0};
    assert_int_equal(nd_want(&z, 0, 0, 64, 0), 64);
    assert_int_equal(nd_want(&z, 64, 0, 0, 64), 0);
    assert_int_equal(nd_want(&z, 0, 0, INT32_MAX, 0), 64); /* no overflow */
}

int main(void)
{
    mem_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_waits),
        cmocka_unit_test(test_route),
        cmocka_unit_test(test_want),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
