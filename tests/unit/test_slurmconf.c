/* Unit tests for reconcilers/slurmconf: slurm.conf, slurmdbd.conf,
 * cgroup.conf, sshd_config text against golden files reviewed line by line
 * against docs/compat.md#generated-files, and the merged-config rule
 * case by case. */
#include "unit/cluster_fixtures.h"

#include "core/err.h"
#include "reconcilers/slurmconf.h"

#define CTL_BASE                                                                                             \
    "'apiVersion':'slinky.slurm.net/v1beta1','kind':'Controller',"                                           \
    "'metadata':{'name':'slurm','namespace':'slurm','uid':'11111111-2222-3333-4444-555555555555'}"
#define CTL_KEYS                                                                                             \
    "'slurmKeyRef':{'name':'slurm-auth-slurm','key':'slurm.key'},"                                           \
    "'jwtKeyRef':{'name':'slurm-auth-jwt','key':'jwt.key'}"

static char *conf_of(const char *ctl_jq, const cJSON *const *nodesets, size_t n, tenv *t)
{
    cJSON *ctl = JQ(ctl_jq);
    char *out = NULL, *why = NULL;
    int rc = sconf_slurm_conf(ctl, nodesets, n, t ? &t->env : NULL, &out, &why);
    if (rc)
        fprintf(stderr, "sconf_slurm_conf: %s\n", why ? why : "?");
    assert_int_equal(rc, 0);
    assert_null(why);
    cJSON_Delete(ctl);
    return out;
}

static void test_plain(void **state)
{
    char *s = conf_of("{" CTL_BASE ",'spec':{" CTL_KEYS "}}", NULL, 0, NULL);
    golden("slurm.conf.plain", s);
    free(s);
}

static void test_ha_metrics_jwks(void **state)
{
    char *s = conf_of("{" CTL_BASE ",'spec':{" CTL_KEYS ",'clusterName':'prod',"
                      "'jwksKeyRef':{'name':'jwks','key':'jwks.json'},'ha':{'enabled':true,'backups':2},"
                      "'persistence':{'enabled':true,'existingClaim':'statesave-rwx'},"
                      "'metrics':{'enabled':true}}}",
                      NULL, 0, NULL);
    golden("slurm.conf.ha", s);
    /* HA without backups given: one backup by default. */
    char *d = conf_of("{" CTL_BASE ",'spec':{" CTL_KEYS ",'ha':{'enabled':true}}}", NULL, 0, NULL);
    assert_non_null(
        strstr(d, "SlurmctldHost=slurm-controller-1(slurm-controller-1.slurm-controller-internal.slurm)\n"
                  "SlurmctldPort=6817\n"));
    assert_null(strstr(d, "slurm-controller-2"));
    free(d);
    free(s);
}

static void test_accounting_nodesets_scripts(void **state)
{
    tenv t;
    tenv_init(&t);
    tenv_add(&t, "Accounting", "slurm", "{'metadata':{'name':'slurm','namespace':'slurm'},'spec':{}}");
    tenv_add(&t, "ConfigMap", "prolog-b", "{'data':{'90-last.sh':'#!/bin/sh','10-first.sh':'#!/bin/sh'}}");
    tenv_add(&t, "ConfigMap", "prolog-a", "{'data':{'50-middle.sh':'#!/bin/sh'}}");
    tenv_add(&t, "ConfigMap", "epilog", "{'data':{'zz.sh':'x','aa.sh':'y'}}");
    tenv_add(&t, "ConfigMap", "pctld", "{'data':{'pre.sh':'x'}}");
    tenv_add(&t, "ConfigMap", "ectld", "{'data':{'post.sh':'x','cleanup.sh':'y'}}");
    cJSON *ns[5] = {
        /* Hostname prefix "gpu-" gives the Slurm NodeSet name "gpu". */
        JQ("{'metadata':{'name':'slurm-worker-gpu'},'spec':{'controllerRef':{'name':'slurm'},"
           "'template':{'spec':{'hostname':'gpu-'}},"
           "'partition':{'enabled':true,'config':'Default=YES MaxTime=UNLIMITED'}}}"),
        /* No hostname: the CR name; partition disabled: no partition line. */
        JQ("{'metadata':{'name':'slurm-worker-cpu'},'spec':{'controllerRef':{'name':'slurm'},"
           "'partition':{'enabled':false,'config':'ignored'}}}"),
        /* Another Controller's NodeSet is ignored. */
        JQ("{'metadata':{'name':'aaa-other'},'spec':{'controllerRef':{'name':'other'},"
           "'partition':{'enabled':true}}}"),
        /* Partition without config: Slinky's trailing space after Nodes=. */
        JQ("{'metadata':{'name':'slurm-worker-bare'},'spec':{'controllerRef':{'name':'slurm'},"
           "'partition':{'enabled':true}}}"),
        /* "-x-" trims to "x". */
        JQ("{'metadata':{'name':'slurm-worker-x'},'spec':{'controllerRef':{'name':'slurm'},"
           "'template':{'spec':{'hostname':'-x-'}}}}"),
    };
    char *s = conf_of("{" CTL_BASE ",'spec':{" CTL_KEYS ",'accountingRef':{'name':'slurm'},"
                      "'jwksKeyRef':{'name':'jwks','key':'keys.json'},"
                      "'prologScriptRefs':[{'name':'prolog-b'},{'name':'prolog-a'}],"
                      "'epilogScriptRefs':[{'name':'epilog'}],"
                      "'prologSlurmctldScriptRefs':[{'name':'pctld'}],"
                      "'epilogSlurmctldScriptRefs':[{'name':'ectld'}]}}",
                      (const cJSON *const *)ns, 5, &t);
    golden("slurm.conf.accounting", s);
    free(s);

    /* The order of the NodeSet list does not matter. */
    cJSON *rev[5] = {ns[4], ns[3], ns[2], ns[1], ns[0]};
    char *s2 = conf_of("{" CTL_BASE ",'spec':{" CTL_KEYS ",'accountingRef':{'name':'slurm'},"
                       "'jwksKeyRef':{'name':'jwks','key':'keys.json'},"
                       "'prologScriptRefs':[{'name':'prolog-a'},{'name':'prolog-b'}],"
                       "'epilogScriptRefs':[{'name':'epilog'}],"
                       "'prologSlurmctldScriptRefs':[{'name':'pctld'}],"
                       "'epilogSlurmctldScriptRefs':[{'name':'ectld'}]}}",
                       (const cJSON *const *)rev, 5, &t);
    golden("slurm.conf.accounting", s2);
    free(s2);

    /* An accountingRef whose Accounting does not exist: accounting off. */
    tenv_del(&t, "Accounting", "slurm");
    char *s3 = conf_of("{" CTL_BASE ",'spec':{" CTL_KEYS ",'accountingRef':{'name':'slurm'}}}", NULL, 0, &t);
    assert_non_null(strstr(s3, "### ACCOUNTING ###\nAccountingStorageType=accounting_storage/none\n"));
    free(s3);

    /* An external Accounting is reached at its external endpoint. */
    tenv_add(&t, "Accounting", "ext",
             "{'metadata':{'name':'ext'},'spec':{'external':true,'externalConfig':{'host':'dbd.example','"
             "port':7031}}}");
    char *s4 = conf_of("{" CTL_BASE ",'spec':{" CTL_KEYS ",'accountingRef':{'name':'ext'}}}", NULL, 0, &t);
    assert_non_null(strstr(s4, "AccountingStorageType=accounting_storage/slurmdbd\n"
                               "AccountingStorageHost=dbd.example\nAccountingStoragePort=7031\n"));
    free(s4);

    /* An Accounting of another namespace (accountingRef.namespace): its
     * Service is named with that namespace, as the short name would resolve
     * in the Controller's own. */
    tenv_add(&t, "Accounting", "db", "{'metadata':{'name':'db','namespace':'dbns'},'spec':{}}");
    char *s5 = conf_of(
        "{" CTL_BASE ",'spec':{" CTL_KEYS ",'accountingRef':{'name':'db','namespace':'dbns'}}}", NULL, 0, &t);
    assert_non_null(strstr(s5, "AccountingStorageHost=db-accounting.dbns\nAccountingStoragePort=6819\n"));
    free(s5);

    for (int i = 0; i < 5; i++)
        cJSON_Delete(ns[i]);
    tenv_free(&t);
}

/* MaxNodeCount (issue 32: it was 1024 whatever the fleet, an eighth of what
 * slurmop is for): the sum of the NodeSets' nodes plus a quarter, in steps of
 * 1024 times a power of two, never below what slurm.conf has, at most what
 * Slurm accepts (26.05 refuses 65537: "higher than the maximum allowed
 * (65536)"). */
static void test_tree_width(void **state)
{
    (void)state;
    /* 16 + 256 + 4096 = 4368 nodes in three hops at Slurm's default. */
    assert_int_equal(sconf_tree_width(0), 16);
    assert_int_equal(sconf_tree_width(4368), 16);
    assert_int_equal(sconf_tree_width(4369), 17);
    assert_int_equal(sconf_tree_width(32768), 32);
    assert_int_equal(sconf_tree_width(65536), 40);
    for (long long n = 1; n <= 70000; n += 97) {
        long long w = sconf_tree_width(n);
        assert_true(w + w * w + w * w * w >= n);
        assert_true(w == 16 || (w - 1) + (w - 1) * (w - 1) + (w - 1) * (w - 1) * (w - 1) < n);
    }
}

static void test_max_node_count(void **state)
{
    static const long long table[][3] = {
        /* fleet, current, want */
        {0, 0, 1024},          {1, 0, 1024},         {819, 0, 1024},   {820, 0, 2048},
        {1638, 0, 2048},       {1639, 0, 4096},      {8000, 0, 16384}, {52428, 0, 65536},
        {60000, 0, 65536},     {1000000, 0, 65536},  {-5, 0, 1024},    {10, 4096, 4096},
        {10000, 4096, 16384},  {10, 1000000, 65536}, {10, 512, 1024},
    };
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
        long long got = sconf_max_node_count(table[i][0], table[i][1]);
        if (got != table[i][2])
            fprintf(stderr, "fleet %lld current %lld: got %lld want %lld\n", table[i][0], table[i][1], got,
                    table[i][2]);
        assert_int_equal(got, table[i][2]);
    }

    cJSON *sts = JQ("{'spec':{'replicas':5000}}"), *dflt = JQ("{'spec':{}}"),
          *ds = JQ("{'spec':{'scalingMode':'DaemonSet','replicas':3},'status':{'desired':700}}"),
          *neg = JQ("{'spec':{'replicas':-4}}");
    assert_int_equal(sconf_nodeset_fleet(sts), 5000);
    assert_int_equal(sconf_nodeset_fleet(dflt), 1);
    assert_int_equal(sconf_nodeset_fleet(ds), 700);
    assert_int_equal(sconf_nodeset_fleet(neg), 0);
    cJSON_Delete(sts);
    cJSON_Delete(dflt);
    cJSON_Delete(ds);
    cJSON_Delete(neg);

    /* In slurm.conf: 3000 + 2000 replicas + 900 eligible Nodes of a
     * DaemonSet-mode NodeSet (another Controller's 9000 do not count):
     * 5900 * 1.25 = 7375 -> 8192. */
    cJSON *ns[3] = {
        JQ("{'metadata':{'name':'a'},'spec':{'controllerRef':{'name':'slurm'},'replicas':3000}}"),
        JQ("{'metadata':{'name':'b'},'spec':{'controllerRef':{'name':'slurm'},'replicas':2000,"
           "'scalingMode':'StatefulSet'}}"),
        JQ("{'metadata':{'name':'c'},'spec':{'controllerRef':{'name':'slurm'},'scalingMode':'DaemonSet'},"
           "'status':{'desired':900}}"),
    };
    cJSON *other = JQ("{'metadata':{'name':'o'},'spec':{'controllerRef':{'name':'other'},'replicas':9000}}");
    const cJSON *all[4] = {ns[0], ns[1], ns[2], other};
    char *s = conf_of("{" CTL_BASE ",'spec':{" CTL_KEYS "}}", all, 4, NULL);
    assert_non_null(strstr(s, "\nSlurmdSpoolDir=/var/spool/slurmd\nMaxNodeCount=8192\n"));
    /* A large fleet's settings open the NodeSet section, sized by the
     * MaxNodeCount (20 + 20^2 + 20^3 = 8420 >= 8192 > 19 + 361 + 6859). */
    assert_non_null(strstr(s, "### NODESET & PARTITION ###\n# a large fleet\nMessageTimeout=60\n"
                              "TreeWidth=20\nNodeSet="));
    /* ... and are not in what the slurmctld pods' hash covers. */
    char *view = sconf_without_nodesets(s);
    assert_null(strstr(view, "MessageTimeout"));
    assert_null(strstr(view, "TreeWidth"));
    free(view);
    free(s);
    /* A key of the user's wins; the other stays. */
    s = conf_of("{" CTL_BASE ",'spec':{" CTL_KEYS ",'extraConf':'treewidth=64'}}", all, 4, NULL);
    assert_null(strstr(s, "TreeWidth="));
    assert_non_null(strstr(s, "\nMessageTimeout=60\n"));
    free(s);

    /* It never shrinks below the stored slurm.conf's value. */
    tenv t;
    tenv_init(&t);
    tenv_add(&t, "ConfigMap", "slurm-config",
             "{'data':{'slurm.conf':'#\\n### GENERAL ###\\nClusterName=x\\nMaxNodeCount=32768\\n'}}");
    s = conf_of("{" CTL_BASE ",'spec':{" CTL_KEYS "}}", all, 4, &t);
    assert_non_null(strstr(s, "\nMaxNodeCount=32768\n"));
    free(s);
    tenv_free(&t);

    /* The user's extraConf value stands alone (any case, as Slurm reads it). */
    s = conf_of("{" CTL_BASE ",'spec':{" CTL_KEYS ",'extraConf':'maxnodecount=50000\\nFoo=bar'}}", all, 4,
                NULL);
    assert_null(strstr(s, "MaxNodeCount="));
    assert_non_null(strstr(s, "### EXTRA CONFIG ###\nmaxnodecount=50000\n"));
    free(s);

    for (int i = 0; i < 3; i++)
        cJSON_Delete(ns[i]);
    cJSON_Delete(other);
}

static void test_missing_script_configmap(void **state)
{
    tenv t;
    tenv_init(&t);
    cJSON *ctl = JQ("{" CTL_BASE ",'spec':{" CTL_KEYS ",'epilogScriptRefs':[{'name':'nope'}]}}");
    char *out = (char *)"sentinel", *why = NULL;
    assert_int_equal(sconf_slurm_conf(ctl, NULL, 0, &t.env, &out, &why), OP_ENOTFOUND);
    assert_null(out);
    assert_non_null(why);
    assert_non_null(strstr(why, "nope"));
    free(why);
    cJSON_Delete(ctl);
    tenv_free(&t);
}

static void test_extraconf_merge(void **state)
{
    cJSON *ns =
        JQ("{'metadata':{'name':'slinky'},'spec':{'controllerRef':{'name':'slurm'},"
           "'template':{'spec':{'hostname':'slinky-'}},'partition':{'enabled':true,'config':'State=UP'}}}");
    const cJSON *list[1] = {ns};
    char *s = conf_of("{" CTL_BASE ",'spec':{" CTL_KEYS ",'extraConf':"
                      "'PartitionName=all Nodes=ALL Default=YES MaxTime=UNLIMITED\\n"
                      "# SlurmctldParameters=commented_out\\n"
                      "SlurmctldParameters=enable_configless,\\\\\\nIdle_On_Node_Suspend   # keep nodes\\n"
                      "AuthAltParameters=JWT_KEY=/elsewhere,disable_token_creation\\r\\n"
                      "MinJobAge=2'}}",
                      list, 1, NULL);
    golden("slurm.conf.merge", s);
    free(s);
    cJSON_Delete(ns);
}

static void test_external(void **state)
{
    /* Without a namespace, ClusterName is "_<name>" (Slinky's format). */
    char *s = conf_of("{'metadata':{'name':'slurm'},'spec':{'external':true,"
                      "'externalConfig':{'host':'my-controller','port':6817},'extraConf':'MinJobAge=2'}}",
                      NULL, 0, NULL);
    assert_string_equal(
        s, "#\n### GENERAL ###\nClusterName=_slurm\nSlurmUser=slurm\nSlurmctldHost=my-controller\n"
           "SlurmctldPort=6817\n#\n### PLUGINS & PARAMETERS ###\nAuthType=auth/slurm\n"
           "CredType=cred/slurm\nAuthAltTypes=auth/jwt\n#\n### ACCOUNTING ###\n"
           "AccountingStorageType=accounting_storage/none\n");
    free(s);
    tenv t;
    tenv_init(&t);
    tenv_add(&t, "Accounting", "acct", "{'metadata':{'name':'acct'},'spec':{}}");
    s = conf_of("{" CTL_BASE
                ",'spec':{'external':true,'externalConfig':{'host':'ctld.example.org','port':6817},"
                "'accountingRef':{'name':'acct'}}}",
                NULL, 0, &t);
    golden("slurm.conf.external", s);
    free(s);
    tenv_free(&t);
}

typedef struct merge_case {
    const char *extra, *want;
} merge_case;

static void test_merged_config_rule(void **state)
{
    static const char *const ctld[] = {"enable_configless", "reconfig_on_restart"};
    static const char *const info[] = {"use_client_ids"};
    static const char *const alt[] = {"jwt_key=/etc/slurm/jwt.key"};
    const sconf_merge keys[] = {
        {"SlurmctldParameters", ctld, 2},
        {"AuthInfo", info, 1},
        {"AuthAltParameters", alt, 1},
    };
    static const merge_case cases[] = {
        /* Nothing to merge. */
        {"", ""},
        {"MinJobAge=2\nPartitionName=x Nodes=ALL", ""},
        /* User options are lower-cased; required ones stay; sorted. */
        {"SlurmctldParameters=enable_configless,Idle_On_Node_Suspend",
         "SlurmctldParameters=enable_configless,idle_on_node_suspend,reconfig_on_restart"},
        /* Key matched case-insensitively, blanks around '=' trimmed. */
        {"SLURMCTLDPARAMETERS = foo ", "SlurmctldParameters=enable_configless,foo,reconfig_on_restart"},
        /* A user option with the name of a required one is dropped. */
        {"AuthAltParameters=JWT_KEY=/other,disable_token_creation",
         "AuthAltParameters=disable_token_creation,jwt_key=/etc/slurm/jwt.key"},
        /* The first of two user options with one name wins. */
        {"SlurmctldParameters=Foo=1,foo=2",
         "SlurmctldParameters=enable_configless,foo=1,reconfig_on_restart"},
        /* Empty options are skipped. */
        {"AuthInfo=,,cred_expire=70,,", "AuthInfo=cred_expire=70,use_client_ids"},
        /* The last line for a key wins. */
        {"AuthInfo=a\nAuthInfo=b", "AuthInfo=b,use_client_ids"},
        /* Comments, CRLF, a continuation (pieces joined as is). */
        {"# AuthInfo=x\nAuthInfo=y # note\r\nSlurmctldParameters=cloud_dns,\\\nMAX_DBD_MSG_ACTION=discard",
         "AuthInfo=use_client_ids,y\n"
         "SlurmctldParameters=cloud_dns,enable_configless,max_dbd_msg_action=discard,reconfig_on_restart"},
        /* An indented continuation puts blanks in the value: not a single
         * Key=Value, so it is not merged (Slinky's parser). */
        {"SlurmctldParameters=cloud_dns,\\\n   idle_on_node_suspend", ""},
        /* A value with a space is not merged. */
        {"AuthInfo=a b", ""},
        /* An empty value is not merged. */
        {"AuthInfo=", ""},
        /* A continuation on the last line still counts. */
        {"AuthInfo=a,\\", "AuthInfo=a,use_client_ids"},
        /* All three keys: emitted in bytewise key order. */
        {"SlurmctldParameters=x\nAuthInfo=y\nAuthAltParameters=z",
         "AuthAltParameters=jwt_key=/etc/slurm/jwt.key,z\nAuthInfo=use_client_ids,y\n"
         "SlurmctldParameters=enable_configless,reconfig_on_restart,x"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *got = sconf_merged_config(cases[i].extra, keys, 3);
        if (strcmp(got, cases[i].want) != 0)
            fprintf(stderr, "case %zu: extra=[%s]\n got=[%s]\nwant=[%s]\n", i, cases[i].extra, got,
                    cases[i].want);
        assert_string_equal(got, cases[i].want);
        free(got);
    }
    char *n = sconf_merged_config(NULL, keys, 3);
    assert_string_equal(n, "");
    free(n);
}

static void test_cgroup_conf(void **state)
{
    char *s = sconf_cgroup_conf();
    golden("cgroup.conf", s);
    free(s);
    tenv t;
    tenv_init(&t);
    tenv_add(&t, "ConfigMap", "extra", "{'data':{'gres.conf':'x'}}");
    tenv_add(&t, "ConfigMap", "cg", "{'data':{'cgroup.conf':'CgroupPlugin=disabled'}}");
    cJSON *c1 = JQ("{" CTL_BASE ",'spec':{'configFileRefs':[{'name':'extra'},{'name':'missing'}]}}");
    cJSON *c2 = JQ("{" CTL_BASE ",'spec':{'configFileRefs':[{'name':'extra'},{'name':'cg'}]}}");
    assert_false(sconf_config_files_have(c1, &t.env, "cgroup.conf"));
    assert_true(sconf_config_files_have(c2, &t.env, "cgroup.conf"));
    cJSON_Delete(c1);
    cJSON_Delete(c2);
    tenv_free(&t);
}

static void test_slurmdbd_conf(void **state)
{
    cJSON *a = JQ("{'metadata':{'name':'slurm','namespace':'slurm'},'spec':{"
                  "'storageConfig':{'host':'mariadb','username':'slurm',"
                  "'passwordKeyRef':{'name':'mariadb-password','key':'password'}}}}");
    char *s = sconf_slurmdbd_conf(a, "s3cr3t");
    golden("slurmdbd.conf", s);
    free(s);
    cJSON_Delete(a);

    a = JQ("{'metadata':{'name':'acct','namespace':'slurm'},'spec':{"
           "'jwksKeyRef':{'name':'jwks','key':'jwks.json'},"
           "'storageConfig':{'host':'db.example','port':3307,'database':'acct','username':'dbd'},"
           "'extraConf':'CommitDelay=1\\nAuthInfo=cred_expire=70\\nAuthAltParameters=jwks=/"
           "x,Disable_Token_Creation'}}");
    s = sconf_slurmdbd_conf(a, "p@ss:w0rd");
    golden("slurmdbd.conf.extra", s);
    free(s);
    cJSON_Delete(a);
}

static void test_sshd_configs(void **state)
{
    char *s = sconf_login_sshd_config("LoginGraceTime 600");
    golden("sshd_config.login", s);
    free(s);
    s = sconf_login_sshd_config(NULL);
    assert_string_equal(s, "#\n### GENERAL ###\nInclude /etc/ssh/sshd_config.d/*.conf\nUsePAM yes\n"
                           "X11Forwarding yes\nSubsystem sftp internal-sftp\n#\n### EXTRA CONFIG ###\n\n");
    free(s);
    s = sconf_worker_sshd_config("PermitRootLogin no");
    golden("sshd_config.worker", s);
    free(s);
    s = sconf_authorized_keys("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExample user@example.com");
    assert_string_equal(s,
                        "#\n### SLINKY ###\nssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExample user@example.com\n");
    free(s);
}

static void test_nodeset_name(void **state)
{
    char buf[256];
    struct {
        const char *jq, *want;
    } cases[] = {
        {"{'metadata':{'name':'cr'}}", "cr"},
        {"{'metadata':{'name':'cr'},'spec':{'template':{'spec':{'hostname':'gpu-'}}}}", "gpu"},
        {"{'metadata':{'name':'cr'},'spec':{'template':{'spec':{'hostname':'--a-b--'}}}}", "a-b"},
        {"{'metadata':{'name':'cr'},'spec':{'template':{'spec':{'hostname':' first second'}}}}", "first"},
        {"{'metadata':{'name':'cr'},'spec':{'template':{'spec':{'hostname':'---'}}}}", "cr"},
        {"{'metadata':{'name':'cr'},'spec':{'template':{'spec':{'hostname':''}}}}", "cr"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        cJSON *o = JQ(cases[i].jq);
        assert_string_equal(clc_nodeset_name(o, buf, sizeof(buf)), cases[i].want);
        cJSON_Delete(o);
    }
}

/* What the slurmctld pod template hashes (controller_build.h): the file
 * without what NodeSets contribute. Two NodeSets more, other replicas, a
 * partition config: the same view as with none; the user's text (an
 * extraConf with a MaxNodeCount and a partition line of its own) stays. */
static void test_without_nodesets(void **state)
{
    const char *ctl =
        "{" CTL_BASE ",'spec':{" CTL_KEYS ",'extraConf':'PartitionName=all Nodes=ALL\\nFoo=bar'}}";
    char *none = conf_of(ctl, NULL, 0, NULL);
    cJSON *ns[2] = {
        JQ("{'metadata':{'name':'a'},'spec':{'controllerRef':{'name':'slurm'},'replicas':3000,"
           "'partition':{'enabled':true,'config':'MaxTime=10'}}}"),
        JQ("{'metadata':{'name':'b'},'spec':{'controllerRef':{'name':'slurm'},'replicas':2}}"),
    };
    const cJSON *all[2] = {ns[0], ns[1]};
    char *two = conf_of(ctl, all, 2, NULL);
    assert_non_null(strstr(two, "MaxNodeCount=4096\n"));
    assert_non_null(strstr(two, "### NODESET & PARTITION ###\n# a large fleet\nMessageTimeout=60\n"
                                "TreeWidth=16\nNodeSet=a Feature=a\n"));
    char *v0 = sconf_without_nodesets(none), *v2 = sconf_without_nodesets(two);
    assert_string_equal(v0, v2);
    assert_null(strstr(v2, "MaxNodeCount"));
    assert_null(strstr(v2, "NodeSet="));
    assert_null(strstr(v2, "NODESET"));
    assert_non_null(strstr(v2, "\nSlurmdSpoolDir=/var/spool/slurmd\n#\n### LOGGING ###\n"));
    assert_non_null(strstr(v2, "### EXTRA CONFIG ###\nPartitionName=all Nodes=ALL\nFoo=bar\n"));
    /* Only those lines went: the view is the file minus them, byte for byte. */
    assert_int_equal(strlen(two) - strlen(v2),
                     strlen("MaxNodeCount=4096\n#\n### NODESET & PARTITION ###\n# a large fleet\n"
                            "MessageTimeout=60\nTreeWidth=16\nNodeSet=a Feature=a\n"
                            "PartitionName=a Nodes=a MaxTime=10\nNodeSet=b Feature=b\n"));
    free(v0);
    free(v2);
    free(none);
    free(two);

    /* A MaxNodeCount of the user's is theirs: it stays in the view. */
    char *u = conf_of("{" CTL_BASE ",'spec':{" CTL_KEYS ",'extraConf':'MaxNodeCount=50000'}}", all, 2, NULL);
    char *vu = sconf_without_nodesets(u);
    assert_non_null(strstr(vu, "### EXTRA CONFIG ###\nMaxNodeCount=50000\n"));
    assert_null(strstr(vu, "NodeSet="));
    free(vu);
    free(u);
    /* A NodeSet section last in the file goes to the end. */
    char *last =
        sconf_without_nodesets("#\n### GENERAL ###\nA=1\n#\n### NODESET & PARTITION ###\nNodeSet=x\n");
    assert_string_equal(last, "#\n### GENERAL ###\nA=1\n");
    free(last);
    cJSON_Delete(ns[0]);
    cJSON_Delete(ns[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain),
        cmocka_unit_test(test_ha_metrics_jwks),
        cmocka_unit_test(test_accounting_nodesets_scripts),
        cmocka_unit_test(test_max_node_count),
        cmocka_unit_test(test_tree_width),
        cmocka_unit_test(test_without_nodesets),
        cmocka_unit_test(test_missing_script_configmap),
        cmocka_unit_test(test_extraconf_merge),
        cmocka_unit_test(test_external),
        cmocka_unit_test(test_merged_config_rule),
        cmocka_unit_test(test_cgroup_conf),
        cmocka_unit_test(test_slurmdbd_conf),
        cmocka_unit_test(test_sshd_configs),
        cmocka_unit_test(test_nodeset_name),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
