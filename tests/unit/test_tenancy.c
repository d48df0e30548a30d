/* Unit tests for reconcilers/tenancy: a Controller admits the namespaces its
 * allowed-namespaces annotation lists (issue 39, findings 6 and 7), vouches
 * only for its own JWT key, and a refusal across namespaces reads the same
 * whether the object exists or not. */
#include "unit/cluster_fixtures.h"

#include "reconcilers/tenancy.h"

#define CTL(ann)                                                                                             \
    "{'kind':'Controller','metadata':{'name':'slurm','namespace':'victim','uid':'ctl-uid'" ann "},"          \
    "'spec':{'jwtKeyRef':{'name':'auth-jwt','key':'jwt.key'}}}"

static void test_admits(void **state)
{
    (void)state;
    cJSON *c = JQ(CTL(""));
    assert_true(tnc_admits(c, "victim"));
    assert_false(tnc_admits(c, "tenant"));
    assert_false(tnc_admits(c, ""));
    assert_false(tnc_admits(NULL, "victim"));
    cJSON_Delete(c);
    c = JQ(CTL(",'annotations':{'slinky.slurm.net/allowed-namespaces':'team-a, team-b,team-c'}"));
    assert_true(tnc_admits(c, "team-a"));
    assert_true(tnc_admits(c, "team-b"));
    assert_true(tnc_admits(c, "team-c"));
    assert_false(tnc_admits(c, "team"));   /* a prefix of a listed name */
    assert_false(tnc_admits(c, "team-a,")); /* not a list */
    assert_false(tnc_admits(c, "tenant"));
    cJSON_Delete(c);
    c = JQ(CTL(",'annotations':{'slinky.slurm.net/allowed-namespaces':'*'}"));
    assert_true(tnc_admits(c, "anyone"));
    cJSON_Delete(c);
    c = JQ(CTL(",'annotations':{'slinky.slurm.net/allowed-namespaces':''}"));
    assert_false(tnc_admits(c, "tenant"));
    cJSON_Delete(c);
    c = JQ(CTL(",'annotations':{'other/allowed-namespaces':'tenant'}"));
    assert_false(tnc_admits(c, "tenant"));
    cJSON_Delete(c);
}

static void test_vouches(void **state)
{
    (void)state;
    cJSON *c = JQ(CTL(",'annotations':{'slinky.slurm.net/allowed-namespaces':'tenant'}"));
    assert_true(tnc_vouches(c, "victim", "auth-jwt", "jwt.key", NULL));
    assert_true(tnc_vouches(c, "tenant", "auth-jwt", "jwt.key", NULL));
    assert_false(tnc_vouches(c, "other", "auth-jwt", "jwt.key", NULL));
    assert_false(tnc_vouches(c, "victim", "auth-jwt", "other.key", NULL)); /* another key of the Secret */
    assert_false(tnc_vouches(c, "victim", "db-password", "password", NULL));
    cJSON *owned = JQ("{'metadata':{'name':'gen-jwt','namespace':'victim','ownerReferences':"
                      "[{'kind':'Controller','name':'slurm','uid':'ctl-uid','controller':true}]}}");
    assert_true(tnc_vouches(c, "victim", "gen-jwt", "k", owned));
    cJSON *other = JQ("{'metadata':{'name':'gen-jwt','namespace':'victim','ownerReferences':"
                      "[{'kind':'Controller','name':'slurm','uid':'ctl-uid','controller':false}]}}");
    assert_false(tnc_vouches(c, "victim", "gen-jwt", "k", other));
    cJSON_Delete(other);
    other = JQ("{'metadata':{'name':'gen-jwt','namespace':'victim','ownerReferences':"
               "[{'kind':'Accounting','name':'slurm','uid':'ctl-uid','controller':true}]}}");
    assert_false(tnc_vouches(c, "victim", "gen-jwt", "k", other));
    cJSON_Delete(other);
    cJSON_Delete(owned);
    cJSON_Delete(c);
}

static void test_refusals_do_not_tell(void **state)
{
    (void)state;
    /* Across namespaces the reason given is not part of the message. */
    char *a = tnc_key_refused("tenant", "victim", "db", "password", "the key is 12 bytes long");
    char *b = tnc_key_refused("tenant", "victim", "db", "password", "the Secret or its key is not there");
    assert_string_equal(a, b);
    assert_null(strstr(a, "bytes long"));
    assert_non_null(strstr(a, TNC_ANN_ALLOWED_NAMESPACES));
    free(a);
    free(b);
    a = tnc_key_refused("victim", "victim", "db", "password", "the key is 12 bytes long");
    assert_non_null(strstr(a, "12 bytes long"));
    free(a);
    a = tnc_refused("spec.controllerRef", "Controller", "victim", "slurm", "tenant");
    assert_non_null(strstr(a, "victim/slurm"));
    assert_non_null(strstr(a, "\"tenant\""));
    free(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_admits),
        cmocka_unit_test(test_vouches),
        cmocka_unit_test(test_refusals_do_not_tell),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
