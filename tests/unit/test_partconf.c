/* Unit tests for reconcilers/partconf: only keys and values Slurm accepts on
 * a partition line reach slurm.conf from a NodeSet (issue 39, finding 7: an
 * unknown key made slurmctld refuse to start). */
#include "unit/cluster_fixtures.h"

#include "reconcilers/partconf.h"
#include "reconcilers/tenancy.h"

static int ok_for(const char *c, int version)
{
    char why[256] = "";
    int rc = pcf_check(c, version, why, sizeof(why));
    assert_true(rc == 0 ? why[0] == '\0' : why[0] != '\0');
    return rc == 0;
}

static int ok(const char *c)
{
    return ok_for(c, 2605);
}

static void test_accepted(void **state)
{
    (void)state;
    static const char *const good[] = {
        NULL,
        "",
        "Default=YES",
        "default=yes",
        "Default=YES MaxTime=UNLIMITED",
        "MaxTime=1-00:00:00 State=UP",
        "MaxTime=UNLIMITED State=UP OverSubscribe=EXCLUSIVE",
        "  MaxNodes=4\tPriorityTier=10  ",
        "TRESBillingWeights=\"CPU=1.0,Mem=0.25G\"",
        "AllowGroups=a,b DenyAccounts=x QOS=normal",
        "State=DRAIN",
        "MaxMemPerNode=UNLIMITED",
        "Hidden=NO RootOnly=NO ExclusiveUser=YES LLN=NO",
    };
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
        if (!ok(good[i]))
            fail_msg("refused: \"%s\"", good[i] ? good[i] : "(null)");
}

static void test_refused(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "Bogus=1",                /* unknown key: slurmctld would not start */
        "Default",                /* not KEY=VALUE */
        "=YES",
        "Default=",               /* no value */
        "Nodes=ALL",              /* the operator's: every node into the partition */
        "nodes=victim-[0-9]",
        "PartitionName=other",
        "Default=YES Default=NO", /* twice */
        "Default=maybe",
        "State=OPEN",
        "MaxNodes=four",
        "MaxNodes=-1",
        "MaxTime=1#comment",
        "MaxTime=1\\",
        "Default=YES\nNodeName=x",
        "Default=YES\rInclude=/etc/passwd",
        "AllowGroups=\"a b",
        "AllowGroups=\"a\"b",
        "AllowGroups=a\"b\"",
        "Max-Time=1",
        "Default=YES NodeName=evil",
        "Include=/etc/shadow",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (ok(bad[i]))
            fail_msg("accepted: \"%s\"", bad[i]);
    char big[PCF_MAX_LEN + 16];
    memset(big, ' ', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    assert_false(ok(big));
    char why[256];
    assert_int_equal(pcf_check("Default=YES Bogus=1", 2605, why, sizeof(why)), -1);
    assert_non_null(strstr(why, "Bogus"));
}

/* Keys newer than 22.05 only for a slurmctld that has them (measured on the
 * labs: 22.05 refuses these four, 24.11 Topology). */
static void test_versions(void **state)
{
    (void)state;
    static const char *const newer[] = {"ExclusiveTopo=NO", "MaxCPUsPerSocket=4", "PowerDownOnIdle=NO"};
    for (size_t i = 0; i < sizeof(newer) / sizeof(newer[0]); i++) {
        assert_false(ok_for(newer[i], 0));
        assert_false(ok_for(newer[i], 2205));
        assert_true(ok_for(newer[i], 2411));
    }
    assert_false(ok_for("Topology=default", 2411));
    assert_true(ok_for("Topology=default", 2505));
    assert_true(ok_for("Default=YES MaxTime=60", 0)); /* 22.05's keys need no version */
    char why[256];
    assert_int_equal(pcf_check("Topology=t", 0, why, sizeof(why)), -1);
    assert_non_null(strstr(why, "25.05"));
}

static void test_names(void **state)
{
    (void)state;
    char why[256];
    assert_int_equal(pcf_check_name("cpu", why, sizeof(why)), 0);
    assert_int_equal(pcf_check_name("gpu_a100.x-1", why, sizeof(why)), 0);
    assert_int_equal(pcf_check_name("a=b", why, sizeof(why)), -1);
    assert_int_equal(pcf_check_name("a#b", why, sizeof(why)), -1);
    assert_int_equal(pcf_check_name("", why, sizeof(why)), -1);
}

/* The NodeSet as a whole: its partition config and Slurm name, and a
 * Controller of another namespace only when admitted. */
static void test_nodeset(void **state)
{
    (void)state;
    cJSON *ctl = JQ("{'metadata':{'name':'slurm','namespace':'victim'},'spec':{}}");
    cJSON *ok_same =
        JQ("{'metadata':{'name':'cpu','namespace':'victim'},'spec':{'controllerRef':{'name':'slurm'},"
           "'partition':{'enabled':true,'config':'Default=YES'}}}");
    cJSON *foreign = JQ("{'metadata':{'name':'cpu','namespace':'tenant'},'spec':{'controllerRef':"
                        "{'name':'slurm','namespace':'victim'}}}");
    cJSON *bad =
        JQ("{'metadata':{'name':'cpu','namespace':'victim'},'spec':{'controllerRef':{'name':'slurm'},"
           "'partition':{'enabled':true,'config':'Bogus=1'}}}");
    cJSON *off =
        JQ("{'metadata':{'name':'cpu','namespace':'victim'},'spec':{'controllerRef':{'name':'slurm'},"
           "'partition':{'enabled':false,'config':'Bogus=1'}}}");
    char *m = tnc_nodeset_refusal(ok_same, ctl, 0);
    assert_null(m);
    m = tnc_nodeset_refusal(off, ctl, 0); /* never written */
    assert_null(m);
    m = tnc_nodeset_refusal(bad, ctl, 0);
    assert_non_null(m);
    assert_non_null(strstr(m, "spec.partition.config"));
    free(m);
    m = tnc_nodeset_refusal(foreign, ctl, 0);
    assert_non_null(m);
    char *m2 =
        tnc_nodeset_refusal(foreign, NULL, 0); /* the same words whether the Controller exists or not */
    assert_string_equal(m, m2);
    free(m);
    free(m2);
    assert_false(tnc_nodeset_admitted(foreign, ctl));
    json_set(cJSON_GetObjectItem(ctl, "metadata"), "annotations",
             JQ("{'slinky.slurm.net/allowed-namespaces':'tenant'}"));
    assert_true(tnc_nodeset_admitted(foreign, ctl));
    assert_null(tnc_nodeset_refusal(foreign, ctl, 0));
    cJSON *taint =
        JQ("{'metadata':{'name':'cpu','namespace':'victim'},'spec':{'controllerRef':{'name':'slurm'},"
           "'taintKubeNodes':true}}");
    m = tnc_nodeset_refusal(taint, ctl, 0);
    assert_non_null(m);
    assert_non_null(strstr(m, "--allow-node-taints"));
    free(m);
    assert_null(tnc_nodeset_refusal(taint, ctl, 1));
    cJSON_Delete(taint);
    cJSON_Delete(ctl);
    cJSON_Delete(ok_same);
    cJSON_Delete(foreign);
    cJSON_Delete(bad);
    cJSON_Delete(off);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accepted),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_versions),
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_nodeset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
