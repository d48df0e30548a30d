/* Unit tests for the pure parts of the cluster reconcilers: which CRs a
 * change to a Secret, ConfigMap, PVC, Accounting or NodeSet concerns
 * (cluster_watch), the validation condition and the status merge patch,
 * the fields never patched on StatefulSets and Deployments, the write gates
 * (cluster_rc), and objsync's diff. */
#include "unit/cluster_fixtures.h"

#include "core/err.h"
#include "reconcilers/cluster_rc.h"
#include "reconcilers/cluster_watch.h"
#include "reconcilers/objsync.h"

#define CTL_META                                                                                             \
    "'apiVersion':'slinky.slurm.net/v1beta1','kind':'Controller','metadata':{'name':'c1','namespace':'ns'}"

static void test_controller_uses(void **state)
{
    cJSON *c =
        JQ("{" CTL_META ",'spec':{'slurmKeyRef':{'name':'sk','key':'slurm.key'},"
           "'jwtKeyRef':{'name':'jk','key':'jwt.key'},'jwtHs256KeyRef':{'name':'old','key':'k'},"
           "'jwksKeyRef':{'name':'jwks','key':'jwks.json'},'accountingRef':{'name':'acct'},"
           "'configFileRefs':[{'name':'files1'},{'name':'files2'}],'prologScriptRefs':[{'name':'pro'}],"
           "'epilogScriptRefs':[{'name':'epi'}],'prologSlurmctldScriptRefs':[{'name':'pros'}],"
           "'epilogSlurmctldScriptRefs':[{'name':'epis'}],"
           "'persistence':{'enabled':true,'existingClaim':'claim'}}}");
    assert_true(cw_controller_uses_secret(c, "sk"));
    assert_true(cw_controller_uses_secret(c, "jk"));
    assert_true(cw_controller_uses_secret(c, "old"));
    assert_false(cw_controller_uses_secret(c, "jwks")); /* a ConfigMap, not a Secret */
    assert_false(cw_controller_uses_secret(c, "other"));
    assert_false(cw_controller_uses_secret(c, ""));
    assert_false(cw_controller_uses_secret(c, NULL));
    assert_false(cw_controller_uses_secret(NULL, "sk"));

    const char *cms[] = {"files1", "files2", "pro", "epi", "pros", "epis", "jwks"};
    for (size_t i = 0; i < sizeof(cms) / sizeof(cms[0]); i++)
        assert_true(cw_controller_uses_configmap(c, cms[i]));
    assert_false(cw_controller_uses_configmap(c, "c1-config")); /* our own: an owner event, not a ref */
    assert_false(cw_controller_uses_configmap(c, "sk"));

    assert_true(cw_controller_uses_pvc(c, "claim"));
    assert_false(cw_controller_uses_pvc(c, "statesave-c1-controller-0"));
    assert_true(cw_controller_uses_accounting(c, "ns", "acct"));
    assert_false(cw_controller_uses_accounting(c, "ns", "acct2"));
    assert_false(cw_controller_uses_accounting(c, "other", "acct")); /* empty namespace: the Controller's */
    cJSON_Delete(c);

    /* accountingRef.namespace: an Accounting of another namespace. */
    c = JQ("{" CTL_META ",'spec':{'accountingRef':{'name':'acct','namespace':'db'}}}");
    assert_true(cw_controller_uses_accounting(c, "db", "acct"));
    assert_false(cw_controller_uses_accounting(c, "ns", "acct"));
    assert_string_equal(cw_ref_ns(c, "spec.accountingRef"), "db");
    assert_string_equal(cw_ref_ns(c, "spec.controllerRef"), "ns"); /* absent: its own */
    cJSON_Delete(c);

    /* A bare Controller uses nothing. */
    c = JQ("{" CTL_META ",'spec':{}}");
    assert_false(cw_controller_uses_secret(c, "sk"));
    assert_false(cw_controller_uses_configmap(c, "files1"));
    assert_false(cw_controller_uses_accounting(c, "ns", "acct"));
    assert_false(cw_controller_uses_pvc(c, "claim"));
    cJSON_Delete(c);
}

#define NS(ctl, extra)                                                                                       \
    "{'apiVersion':'slinky.slurm.net/v1beta1','kind':'NodeSet','metadata':{'name':'cpu','namespace':'ns'},"  \
    "'spec':{'controllerRef':{'name':'" ctl "'}" extra "}}"

static void expect_ref(cw_ref r, const char *ns, const char *name)
{
    assert_non_null(r.ns);
    assert_non_null(r.name);
    assert_string_equal(r.ns, ns);
    assert_string_equal(r.name, name);
}

static void test_nodeset_affects(void **state)
{
    cw_ref out[2];
    cJSON *a = JQ(NS("c1", ",'replicas':2,'partition':{'enabled':true,'config':'Default=YES'}"));
    /* Added / deleted: its Controller. */
    assert_int_equal(cw_nodeset_affects(NULL, a, out), 1);
    expect_ref(out[0], "ns", "c1");
    assert_int_equal(cw_nodeset_affects(a, NULL, out), 1);
    expect_ref(out[0], "ns", "c1");

    /* Image, status: slurm.conf does not show them. */
    cJSON *b = JQ(NS("c1", ",'replicas':2,'partition':{'enabled':true,'config':'Default=YES'},"
                           "'slurmd':{'image':'x'}"));
    assert_int_equal(cw_nodeset_affects(a, b, out), 0);
    assert_null(out[0].name);
    cJSON_Delete(b);

    /* Replicas: MaxNodeCount is sized from them (issue 32). */
    b = JQ(NS("c1", ",'replicas':5000,'partition':{'enabled':true,'config':'Default=YES'}"));
    assert_int_equal(cw_nodeset_affects(a, b, out), 1);
    expect_ref(out[0], "ns", "c1");
    cJSON_Delete(b);

    /* Partition config / enabled. */
    b = JQ(NS("c1", ",'replicas':2,'partition':{'enabled':true,'config':'Default=NO'}"));
    assert_int_equal(cw_nodeset_affects(a, b, out), 1);
    expect_ref(out[0], "ns", "c1");
    cJSON_Delete(b);
    b = JQ(NS("c1", ",'replicas':2"));
    assert_int_equal(cw_nodeset_affects(a, b, out), 1);
    cJSON_Delete(b);

    /* Hostname: the Slurm NodeSet name. */
    b = JQ(NS("c1", ",'replicas':2,'partition':{'enabled':true,'config':'Default=YES'},"
                    "'template':{'spec':{'hostname':'gpu-'}}"));
    assert_int_equal(cw_nodeset_affects(a, b, out), 1);
    expect_ref(out[0], "ns", "c1");
    cJSON_Delete(b);

    /* Moved to another Controller: both. */
    b = JQ(NS("c2", ",'replicas':2,'partition':{'enabled':true,'config':'Default=YES'}"));
    assert_int_equal(cw_nodeset_affects(a, b, out), 2);
    expect_ref(out[0], "ns", "c1");
    expect_ref(out[1], "ns", "c2");
    cJSON_Delete(b);

    /* The same name in another namespace: both Controllers. */
    b = JQ(
        NS("c1', 'namespace':'other", ",'replicas':2,'partition':{'enabled':true,'config':'Default=YES'}"));
    assert_int_equal(cw_nodeset_affects(a, b, out), 2);
    expect_ref(out[0], "ns", "c1");
    expect_ref(out[1], "other", "c1");
    assert_int_equal(cw_nodeset_affects(NULL, b, out), 1);
    expect_ref(out[0], "other", "c1");
    assert_true(cw_ref_is(b, "spec.controllerRef", "other", "c1"));
    assert_false(cw_ref_is(b, "spec.controllerRef", "ns", "c1"));
    cJSON_Delete(b);
    /* An empty namespace is the NodeSet's own. */
    b = JQ(NS("c1', 'namespace':'", ",'replicas':2,'partition':{'enabled':true,'config':'Default=YES'}"));
    assert_int_equal(cw_nodeset_affects(a, b, out), 0);
    cJSON_Delete(b);

    /* A NodeSet without a controllerRef concerns nobody. */
    b = JQ("{'metadata':{'name':'x','namespace':'ns'},'spec':{}}");
    assert_int_equal(cw_nodeset_affects(NULL, b, out), 0);
    assert_int_equal(cw_nodeset_affects(b, b, out), 0);
    /* ... until it gets one. */
    assert_int_equal(cw_nodeset_affects(b, a, out), 1);
    expect_ref(out[0], "ns", "c1");
    cJSON_Delete(b);
    cJSON_Delete(a);
}

static void test_other_kinds_use(void **state)
{
    cJSON *acct = JQ("{'metadata':{'name':'a','namespace':'ns'},'spec':{'slurmKeyRef':{'name':'sk'},"
                     "'jwtHs256KeyRef':{'name':'jk'},'jwksKeyRef':{'name':'jwks'},"
                     "'storageConfig':{'host':'db','passwordKeyRef':{'name':'dbpass','key':'password'}}}}");
    assert_true(cw_accounting_uses_secret(acct, "sk"));
    assert_true(cw_accounting_uses_secret(acct, "jk"));
    assert_true(cw_accounting_uses_secret(acct, "dbpass"));
    assert_false(cw_accounting_uses_secret(acct, "a-accounting"));
    assert_true(cw_accounting_uses_configmap(acct, "jwks"));
    assert_false(cw_accounting_uses_configmap(acct, "sk"));
    cJSON_Delete(acct);

    cJSON *ctl = JQ("{" CTL_META ",'spec':{'slurmKeyRef':{'name':'sk'},'jwtKeyRef':{'name':'jk'}}}");
    cJSON *ls = JQ("{'metadata':{'name':'login','namespace':'ns'},'spec':{'controllerRef':{'name':'c1'},"
                   "'sssdConfRef':{'name':'sssd','key':'sssd.conf'}}}");
    assert_string_equal(cw_controller_ref(ls), "c1");
    assert_true(cw_loginset_uses_secret(ls, ctl, "sssd"));
    assert_true(cw_loginset_uses_secret(ls, ctl, "sk"));
    assert_true(cw_loginset_uses_secret(ls, ctl, "jk"));
    assert_false(cw_loginset_uses_secret(ls, ctl, "other"));
    /* Without its Controller only its own refs count. */
    assert_true(cw_loginset_uses_secret(ls, NULL, "sssd"));
    assert_false(cw_loginset_uses_secret(ls, NULL, "sk"));
    cJSON_Delete(ls);

    cJSON *ra = JQ("{'metadata':{'name':'r','namespace':'ns'},'spec':{'controllerRef':{'name':'c1'}}}");
    assert_true(cw_restapi_uses_secret(ra, ctl, "sk"));
    assert_false(cw_restapi_uses_secret(ra, NULL, "sk"));
    assert_false(cw_restapi_uses_secret(ra, ctl, "x"));
    cJSON_Delete(ra);
    cJSON_Delete(ctl);
    assert_null(cw_controller_ref(NULL));
}

static void test_token_uses(void **state)
{
    cJSON *t = JQ("{'metadata':{'name':'tok','namespace':'ns'},'spec':{'username':'alice',"
                  "'jwtKeyRef':{'name':'jk','key':'jwt.key'}}}");
    assert_true(cw_token_uses_secret(t, "ns", "jk"));
    assert_true(cw_token_uses_secret(t, "ns", "tok-jwt-alice"));
    assert_false(cw_token_uses_secret(t, "ns", "tok"));
    cJSON_Delete(t);
    t = JQ("{'metadata':{'name':'tok','namespace':'ns'},'spec':{'username':'alice',"
           "'jwtHs256KeyRef':{'name':'old','key':'jwt.key'},'secretRef':{'name':'mine','key':'T'}}}");
    assert_true(cw_token_uses_secret(t, "ns", "old"));
    assert_true(cw_token_uses_secret(t, "ns", "mine"));
    assert_false(cw_token_uses_secret(t, "ns", "tok-jwt-alice"));
    assert_false(cw_token_uses_secret(t, "other", "old"));
    cJSON_Delete(t);
    /* jwtKeyRef.namespace: the signing key of another namespace; the output
     * Secret stays in the Token's. */
    t = JQ("{'metadata':{'name':'tok','namespace':'ns'},'spec':{'username':'alice',"
           "'jwtKeyRef':{'name':'jk','key':'jwt.key','namespace':'keys'}}}");
    assert_true(cw_token_uses_secret(t, "keys", "jk"));
    assert_false(cw_token_uses_secret(t, "ns", "jk"));
    assert_true(cw_token_uses_secret(t, "ns", "tok-jwt-alice"));
    assert_false(cw_token_uses_secret(t, "keys", "tok-jwt-alice"));
    assert_string_equal(cw_token_key_ns(t), "keys");
    cJSON_Delete(t);
}

static void test_ref_outside(void **state)
{
    const char *watched[] = {"a", "b"}, *ns = "x";
    cJSON *n = JQ("{'kind':'NodeSet','metadata':{'name':'n','namespace':'a'},"
                  "'spec':{'controllerRef':{'name':'c','namespace':'b'}}}");
    assert_null(cw_ref_outside(n, watched, 2, &ns));
    assert_null(ns);
    assert_null(cw_ref_outside(n, watched, 0, &ns)); /* every namespace watched */
    assert_string_equal(cw_ref_outside(n, watched, 1, &ns), "spec.controllerRef");
    assert_string_equal(ns, "b");
    cJSON_Delete(n);
    /* No namespace: the CR's own, which is watched. */
    n = JQ(
        "{'kind':'NodeSet','metadata':{'name':'n','namespace':'a'},'spec':{'controllerRef':{'name':'c'}}}");
    assert_null(cw_ref_outside(n, watched, 1, &ns));
    cJSON_Delete(n);
    cJSON *c = JQ("{'kind':'Controller','metadata':{'name':'c','namespace':'a'},"
                  "'spec':{'accountingRef':{'name':'db','namespace':'z'}}}");
    assert_string_equal(cw_ref_outside(c, watched, 2, &ns), "spec.accountingRef");
    assert_string_equal(ns, "z");
    cJSON_Delete(c);
    cJSON *t = JQ("{'kind':'Token','metadata':{'name':'t','namespace':'a'},"
                  "'spec':{'username':'u','jwtHs256KeyRef':{'name':'k','key':'k','namespace':'keys'}}}");
    assert_string_equal(cw_ref_outside(t, watched, 2, &ns), "spec.jwtHs256KeyRef");
    assert_string_equal(ns, "keys");
    cJSON_Delete(t);
}

static void test_pod_ordinal(void **state)
{
    assert_int_equal(cw_pod_ordinal("c1-controller-0", "c1-controller"), 0);
    assert_int_equal(cw_pod_ordinal("c1-controller-12", "c1-controller"), 12);
    assert_int_equal(cw_pod_ordinal("c1-controller-01", "c1-controller"), -1);
    assert_int_equal(cw_pod_ordinal("c1-controller-", "c1-controller"), -1);
    assert_int_equal(cw_pod_ordinal("c1-controller-x", "c1-controller"), -1);
    assert_int_equal(cw_pod_ordinal("c1-controller-internal-0", "c1-controller"), -1);
    assert_int_equal(cw_pod_ordinal("c1-controllerx-0", "c1-controller"), -1);
    assert_int_equal(cw_pod_ordinal("c1-controller-99999999999", "c1-controller"), -1);
    assert_int_equal(cw_pod_ordinal(NULL, "c1-controller"), -1);
}

static void test_conditions(void **state)
{
    const char *t0 = "2026-01-01T00:00:00Z", *t1 = "2026-01-02T00:00:00Z";
    /* Added to nothing. */
    cJSON *c = crc_conditions_set(NULL, "Valid", "False", "ValidationFailed", "bad", 3, t0);
    assert_int_equal(cJSON_GetArraySize(c), 1);
    const cJSON *v = cJSON_GetArrayItem(c, 0);
    assert_string_equal(json_get_str(v, "type"), "Valid");
    assert_string_equal(json_get_str(v, "status"), "False");
    assert_string_equal(json_get_str(v, "reason"), "ValidationFailed");
    assert_string_equal(json_get_str(v, "message"), "bad");
    assert_int_equal(json_get_int(v, "observedGeneration", 0), 3);
    assert_string_equal(json_get_str(v, "lastTransitionTime"), t0);

    /* Same status later: the transition time stays, the message follows. */
    cJSON *others = JQ("[{'type':'Other','status':'True'}]");
    cJSON_AddItemToArray(others, cJSON_Duplicate(v, 1));
    cJSON *d = crc_conditions_set(others, "Valid", "False", "ValidationFailed", "worse", 4, t1);
    assert_int_equal(cJSON_GetArraySize(d), 2);
    assert_string_equal(json_get_str(cJSON_GetArrayItem(d, 0), "type"), "Other");
    v = cJSON_GetArrayItem(d, 1);
    assert_string_equal(json_get_str(v, "lastTransitionTime"), t0);
    assert_string_equal(json_get_str(v, "message"), "worse");
    assert_int_equal(json_get_int(v, "observedGeneration", 0), 4);
    cJSON_Delete(d);

    /* Another status: a transition. */
    d = crc_conditions_set(others, "Valid", "True", "Valid", "", 4, t1);
    assert_string_equal(json_get_str(cJSON_GetArrayItem(d, 1), "lastTransitionTime"), t1);
    cJSON_Delete(d);

    /* Removed: the others stay. */
    d = crc_conditions_set(others, "Valid", NULL, NULL, NULL, 4, t1);
    assert_int_equal(cJSON_GetArraySize(d), 1);
    assert_string_equal(json_get_str(cJSON_GetArrayItem(d, 0), "type"), "Other");
    cJSON_Delete(d);
    cJSON_Delete(others);
    cJSON_Delete(c);

    /* Removing from nothing gives an empty array. */
    d = crc_conditions_set(NULL, "Valid", NULL, NULL, NULL, 1, t0);
    assert_int_equal(cJSON_GetArraySize(d), 0);
    cJSON_Delete(d);
}

static void test_status_patch(void **state)
{
    cJSON *st = JQ("{'issuedAt':'2026-01-01T00:00:00Z','replicas':2,'foreign':'kept'}");
    /* Equal: nothing to write, foreign members ignored. */
    cJSON *want = JQ("{'issuedAt':'2026-01-01T00:00:00Z'}");
    assert_null(crc_status_patch(st, want));
    cJSON_Delete(want);

    /* One member differs: only it is in the patch. */
    want = JQ("{'issuedAt':'2026-01-02T00:00:00Z','replicas':2}");
    cJSON *p = crc_status_patch(st, want);
    assert_non_null(p);
    char *s = json_dump(p);
    assert_string_equal(s, "{\"issuedAt\":\"2026-01-02T00:00:00Z\"}");
    free(s);
    cJSON_Delete(p);
    cJSON_Delete(want);

    /* Our condition goes away: conditions are replaced (the others kept by
     * crc_conditions_set) or deleted when none is left. */
    cJSON_Delete(st);
    st = JQ("{'conditions':[{'type':'Valid','status':'False'}]}");
    want = JQ("{}");
    p = crc_status_patch(st, want);
    s = json_dump(p);
    assert_string_equal(s, "{\"conditions\":null}");
    free(s);
    cJSON_Delete(p);
    cJSON_Delete(want);

    /* A condition added to a status that has none. */
    want = JQ("{'conditions':[{'type':'Valid','status':'False'}]}");
    p = crc_status_patch(NULL, want);
    s = json_dump(p);
    assert_string_equal(s, "{\"conditions\":[{\"type\":\"Valid\",\"status\":\"False\"}]}");
    free(s);
    cJSON_Delete(p);
    assert_null(crc_status_patch(st, want));
    cJSON_Delete(want);
    cJSON_Delete(st);
    assert_null(crc_status_patch(NULL, NULL));
}

static void test_strip_immutable(void **state)
{
    cJSON *sts = JQ("{'kind':'StatefulSet','spec':{'replicas':1,'selector':{},'serviceName':'s',"
                    "'volumeClaimTemplates':[],'podManagementPolicy':'Parallel','template':{}}}");
    crc_strip_immutable(sts);
    char *s = json_dump(json_child(sts, "spec"));
    assert_string_equal(s, "{\"replicas\":1,\"template\":{}}");
    free(s);
    cJSON_Delete(sts);
    cJSON *d = JQ("{'kind':'Deployment','spec':{'replicas':1,'selector':{},'strategy':{}}}");
    crc_strip_immutable(d);
    s = json_dump(json_child(d, "spec"));
    assert_string_equal(s, "{\"replicas\":1,\"strategy\":{}}");
    free(s);
    cJSON_Delete(d);
    cJSON *svc = JQ("{'kind':'Service','spec':{'selector':{'a':'b'}}}");
    crc_strip_immutable(svc);
    assert_non_null(json_get(svc, "spec.selector"));
    cJSON_Delete(svc);
}

static void test_gates(void **state)
{
    crc_gates g;
    memset(&g, 0, sizeof(g));
    assert_false(crc_gate_busy(&g, "ns/a", "10"));

    /* In flight: busy whatever the cache says. */
    crc_gate *t = crc_gate_begin(&g, "ns/a", "10");
    assert_true(crc_gate_busy(&g, "ns/a", "10"));
    assert_true(crc_gate_busy(&g, "ns/a", "11"));
    assert_false(crc_gate_busy(&g, "ns/b", "10"));
    /* Done with a new version: busy while the cache shows the old one. */
    crc_gate_end(&g, t, 0, "11");
    assert_true(crc_gate_busy(&g, "ns/a", "10"));
    assert_false(crc_gate_busy(&g, "ns/a", "11")); /* the event arrived: free */
    assert_false(crc_gate_busy(&g, "ns/a", "10")); /* and forgotten */

    /* A write that changed nothing (same version back) waits for nothing. */
    t = crc_gate_begin(&g, "ns/a", "12");
    crc_gate_end(&g, t, 0, "12");
    assert_false(crc_gate_busy(&g, "ns/a", "12"));
    /* Nor does a failed one. */
    t = crc_gate_begin(&g, "ns/a", "12");
    crc_gate_end(&g, t, OP_ECONFLICT, NULL);
    assert_false(crc_gate_busy(&g, "ns/a", "12"));

    /* Cleared while in flight: the token stays valid and its end frees it. */
    t = crc_gate_begin(&g, "ns/a", "12");
    crc_gate *t2 = crc_gate_begin(&g, "ns/c", "1");
    crc_gates_clear(&g);
    assert_false(crc_gate_busy(&g, "ns/a", "12"));
    crc_gate_end(&g, t, 0, "13");
    assert_false(crc_gate_busy(&g, "ns/a", "12"));
    /* Replaced while in flight: the old token is detached. */
    crc_gate *t3 = crc_gate_begin(&g, "ns/c", "1");
    crc_gate_end(&g, t2, 0, "2");
    assert_true(crc_gate_busy(&g, "ns/c", "1")); /* t3 still in flight */
    crc_gate_end(&g, t3, 0, "3");
    assert_false(crc_gate_busy(&g, "ns/c", "3"));
    crc_gates_clear(&g);
}

static void test_objsync_diff(void **state)
{
    cJSON *live =
        JQ("{'apiVersion':'v1','kind':'ConfigMap','metadata':{'name':'c','namespace':'ns',"
           "'resourceVersion':'5','labels':{'a':'1','theirs':'x'},'ownerReferences':[{'uid':'u1'}]},"
           "'data':{'k':'v'}}");
    cJSON *want = JQ("{'apiVersion':'v1','kind':'ConfigMap','metadata':{'name':'c','namespace':'ns',"
                     "'labels':{'a':'1'},'ownerReferences':[{'uid':'u1'}]},'data':{'k':'v'}}");
    assert_null(objsync_diff(want, live));
    cJSON_Delete(want);
    want = JQ("{'apiVersion':'v1','kind':'ConfigMap','metadata':{'name':'c','namespace':'ns',"
              "'labels':{'a':'2'},'ownerReferences':[{'uid':'u1'}]},'data':{'k':'w'}}");
    cJSON *p = objsync_diff(want, live);
    char *s = json_dump(p);
    assert_string_equal(s, "{\"metadata\":{\"labels\":{\"a\":\"2\"}},\"data\":{\"k\":\"w\"}}");
    free(s);
    cJSON_Delete(p);
    cJSON_Delete(want);
    /* Empty maps: the API server stores none, and that is no difference. */
    want = JQ("{'apiVersion':'v1','kind':'ConfigMap','metadata':{'name':'c','namespace':'ns',"
              "'labels':{'a':'1'},'annotations':{},'ownerReferences':[{'uid':'u1'}]},'data':{'k':'v'},"
              "'spec':{'x':{}}}");
    cJSON_Delete(live);
    live = JQ("{'apiVersion':'v1','kind':'ConfigMap','metadata':{'name':'c','namespace':'ns',"
              "'resourceVersion':'5','labels':{'a':'1'},'ownerReferences':[{'uid':'u1'}]},"
              "'data':{'k':'v'},'spec':{}}");
    assert_null(objsync_diff(want, live));
    cJSON_Delete(want);
    cJSON_Delete(live);

    /* ConfigMap data is ours as a whole: a file we stopped generating goes. */
    live = JQ("{'kind':'ConfigMap','metadata':{'name':'c'},'data':{'slurm.conf':'a','cgroup.conf':'b'}}");
    want = JQ("{'kind':'ConfigMap','metadata':{'name':'c'},'data':{'slurm.conf':'a'}}");
    p = objsync_diff(want, live);
    s = json_dump(p);
    assert_string_equal(s, "{\"data\":{\"cgroup.conf\":null}}");
    free(s);
    cJSON_Delete(p);
    cJSON_Delete(want);
    want = JQ("{'kind':'ConfigMap','metadata':{'name':'c'},'data':{'slurm.conf':'a','cgroup.conf':'b'}}");
    assert_null(objsync_diff(want, live));
    cJSON_Delete(want);
    cJSON_Delete(live);
    /* ... from nothing, too. */
    live = JQ("{'kind':'Secret','metadata':{'name':'c'}}");
    want = JQ("{'kind':'Secret','metadata':{'name':'c'},'data':{'k':'dg=='}}");
    p = objsync_diff(want, live);
    s = json_dump(p);
    assert_string_equal(s, "{\"data\":{\"k\":\"dg==\"}}");
    free(s);
    cJSON_Delete(p);
    cJSON_Delete(want);
    cJSON_Delete(live);

    /* Deep objects: only the differing leaf travels; arrays go whole. */
    live = JQ("{'kind':'StatefulSet','metadata':{'name':'s'},'spec':{'replicas':1,'template':{'metadata':"
              "{'annotations':{'h':'1','k':'2'}},'spec':{'containers':[{'name':'a','image':'x',"
              "'imagePullPolicy':'Always'}]}}}}");
    want = JQ("{'kind':'StatefulSet','metadata':{'name':'s'},'spec':{'replicas':1,'template':{'metadata':"
              "{'annotations':{'h':'9','k':'2'}},'spec':{'containers':[{'name':'a','image':'x'}]}}}}");
    p = objsync_diff(want, live);
    s = json_dump(p);
    assert_string_equal(s, "{\"spec\":{\"template\":{\"metadata\":{\"annotations\":{\"h\":\"9\"}}}}}");
    free(s);
    cJSON_Delete(p);
    cJSON_Delete(want);
    want = JQ("{'kind':'StatefulSet','metadata':{'name':'s'},'spec':{'template':{'spec':{'containers':"
              "[{'name':'a','image':'y'}]}}}}");
    p = objsync_diff(want, live);
    s = json_dump(p);
    assert_string_equal(s, "{\"spec\":{\"template\":{\"spec\":{\"containers\":[{\"name\":\"a\","
                           "\"image\":\"y\"}]}}}}");
    free(s);
    cJSON_Delete(p);
    cJSON_Delete(want);
    cJSON_Delete(live);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_controller_uses), cmocka_unit_test(test_nodeset_affects),
        cmocka_unit_test(test_other_kinds_use), cmocka_unit_test(test_token_uses),
        cmocka_unit_test(test_ref_outside),     cmocka_unit_test(test_pod_ordinal),
        cmocka_unit_test(test_conditions),      cmocka_unit_test(test_status_patch),
        cmocka_unit_test(test_strip_immutable), cmocka_unit_test(test_gates),
        cmocka_unit_test(test_objsync_diff),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
