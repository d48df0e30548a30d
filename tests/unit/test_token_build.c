/* Unit tests for reconcilers/token_build: Token defaults, Go durations, the
 * output Secret (ownership, immutability) and the refresh schedule, whose
 * requeue must never be zero or negative (slurm-operator#240). */
#include "unit/cluster_fixtures.h"

#include "core/crypto.h"
#include "core/err.h"
#include "reconcilers/token_build.h"

#define TOK                                                                                                  \
    "'apiVersion':'slinky.slurm.net/v1beta1','kind':'Token','metadata':{'name':'tok','namespace':'slurm',"   \
    "'uid':'tok-uid','labels':{'team':'a'},'annotations':{'note':'n'}}"

static void test_settings_defaults(void **state)
{
    cJSON *t = JQ("{" TOK ",'spec':{'username':'alice','jwtKeyRef':{'name':'jwt','key':'jwt.key'}}}");
    tokb_settings s;
    char *why = NULL;
    assert_int_equal(tokb_settings_get(t, &s, &why), 0);
    assert_null(why);
    assert_string_equal(s.username, "alice");
    assert_int_equal(s.lifetime_ms, 15 * 60 * 1000);
    assert_true(s.refresh);
    assert_string_equal(s.secret_name, "tok-jwt-alice");
    assert_string_equal(s.secret_key, "SLURM_JWT");
    assert_string_equal(json_get_str(s.jwt_ref, "name"), "jwt");

    cJSON *d = tokb_defaults(t);
    assert_string_equal(json_get_str(d, "spec.lifetime"), "15m0s");
    assert_true(json_get_bool(d, "spec.refresh", 0));
    assert_string_equal(json_get_str(d, "spec.secretRef.name"), "tok-jwt-alice");
    assert_string_equal(json_get_str(d, "spec.secretRef.key"), "SLURM_JWT");
    /* The input is not modified. */
    assert_null(json_get(t, "spec.lifetime"));
    cJSON_Delete(d);
    cJSON_Delete(t);

    /* Deprecated ref, custom secretRef, refresh off, explicit lifetime. */
    t = JQ("{" TOK ",'spec':{'username':'bob','jwtHs256KeyRef':{'name':'old','key':'k'},"
           "'secretRef':{'name':'mine','key':'TOKEN'},'refresh':false,'lifetime':'1h30m'}}");
    assert_int_equal(tokb_settings_get(t, &s, NULL), 0);
    assert_int_equal(s.lifetime_ms, 90 * 60 * 1000);
    assert_false(s.refresh);
    assert_string_equal(s.secret_name, "mine");
    assert_string_equal(s.secret_key, "TOKEN");
    assert_string_equal(json_get_str(s.jwt_ref, "name"), "old");
    d = tokb_defaults(t);
    assert_string_equal(json_get_str(d, "spec.lifetime"), "1h30m");
    assert_false(json_get_bool(d, "spec.refresh", 1));
    cJSON_Delete(d);
    cJSON_Delete(t);
}

static void test_lifetime_clamp_and_errors(void **state)
{
    struct {
        const char *lt;
        int rc;
        int64_t ms;
    } cases[] = {
        {"90s", 0, 90000},
        {"1.5h", 0, 5400000},
        {"250ms", 0, 250},
        {"0", 0, 0},
        {"-5m", 0, 0},                                           /* clamped to 0 */
        {"999999h", 0, TOKB_MAX_LIFETIME_S * 1000},              /* clamped to 2147483646 s */
        {"9999999999999999999h", 0, TOKB_MAX_LIFETIME_S * 1000}, /* overflow: clamped too */
        {"15", OP_EPARSE, 15 * 60 * 1000},                       /* no unit: default kept */
        {"soon", OP_EPARSE, 15 * 60 * 1000},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char jq[256];
        snprintf(jq, sizeof(jq), "{" TOK ",'spec':{'username':'u','lifetime':'%s'}}", cases[i].lt);
        cJSON *t = JQ(jq);
        tokb_settings s;
        char *why = NULL;
        assert_int_equal(tokb_settings_get(t, &s, &why), cases[i].rc);
        assert_int_equal(s.lifetime_ms, cases[i].ms);
        if (cases[i].rc) {
            assert_non_null(why);
            assert_non_null(strstr(why, cases[i].lt));
            free(why);
        }
        cJSON_Delete(t);
    }
}

static void test_go_durations(void **state)
{
    struct {
        const char *s;
        int rc;
        int64_t ns;
    } cases[] = {
        {"0", 0, 0},
        {"1ns", 0, 1},
        {"2us", 0, 2000},
        {"2\xc2\xb5s", 0, 2000},
        {"300ms", 0, 300000000},
        {"1h2m3.5s", 0, 3723500000000LL},
        {"+1m", 0, 60000000000LL},
        {"-1.5s", 0, -1500000000LL},
        {".5s", 0, 500000000},
        {"", OP_EPARSE, 0},
        {"1", OP_EPARSE, 0},
        {"h", OP_EPARSE, 0},
        {"1x", OP_EPARSE, 0},
        {"1h 2m", OP_EPARSE, 0},
        {".s", OP_EPARSE, 0},
        {"3000000h", OP_ETOOBIG, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int64_t ns = -42;
        int rc = clc_parse_duration(cases[i].s, &ns);
        if (rc != cases[i].rc)
            fprintf(stderr, "duration [%s]: rc %d\n", cases[i].s, rc);
        assert_int_equal(rc, cases[i].rc);
        if (rc == 0)
            assert_int_equal(ns, cases[i].ns);
    }
}

static void test_secret(void **state)
{
    cJSON *t = JQ("{" TOK ",'spec':{'username':'alice','jwtKeyRef':{'name':'jwt','key':'jwt.key'}}}");
    cJSON *key = JQ("{'metadata':{'name':'jwt','namespace':'slurm','uid':'key-uid'}}");
    cJSON *s = NULL;
    char *why = NULL;
    assert_int_equal(tokb_secret(t, "aaa.bbb.ccc", key, &s, &why), 0);
    assert_string_equal(json_get_str(s, "apiVersion"), "v1");
    assert_string_equal(json_get_str(s, "kind"), "Secret");
    assert_string_equal(json_get_str(s, "metadata.name"), "tok-jwt-alice");
    assert_string_equal(json_get_str(s, "metadata.namespace"), "slurm");
    assert_string_equal(json_get_str(s, "metadata.labels.team"), "a");
    assert_string_equal(json_get_str(s, "metadata.annotations.note"), "n");
    assert_false(json_get_bool(s, "immutable", 1));
    char *b64 = base64_encode("aaa.bbb.ccc", 11);
    assert_string_equal(json_get_str(json_get(s, "data"), "SLURM_JWT"), b64);
    free(b64);
    /* Controller owner: the signing-key Secret (same namespace). */
    const cJSON *refs = json_get(s, "metadata.ownerReferences");
    assert_int_equal(json_len(refs), 1);
    assert_string_equal(json_get_str(refs->child, "apiVersion"), "v1");
    assert_string_equal(json_get_str(refs->child, "kind"), "Secret");
    assert_string_equal(json_get_str(refs->child, "name"), "jwt");
    assert_string_equal(json_get_str(refs->child, "uid"), "key-uid");
    assert_true(json_get_bool(refs->child, "controller", 0));
    assert_true(json_get_bool(refs->child, "blockOwnerDeletion", 0));
    cJSON_Delete(s);

    /* A key Secret elsewhere (or unknown): the Token owns the Secret. */
    cJSON *far = JQ("{'metadata':{'name':'jwt','namespace':'other','uid':'key-uid'}}");
    const cJSON *owners[] = {far, NULL};
    for (int i = 0; i < 2; i++) {
        assert_int_equal(tokb_secret(t, "x", owners[i], &s, NULL), 0);
        refs = json_get(s, "metadata.ownerReferences");
        assert_int_equal(json_len(refs), 1);
        assert_string_equal(json_get_str(refs->child, "apiVersion"), "slinky.slurm.net/v1beta1");
        assert_string_equal(json_get_str(refs->child, "kind"), "Token");
        assert_string_equal(json_get_str(refs->child, "uid"), "tok-uid");
        cJSON_Delete(s);
    }
    cJSON_Delete(far);

    /* No JWT: refused. */
    s = (cJSON *)1;
    assert_int_equal(tokb_secret(t, "", key, &s, &why), OP_EINVAL);
    assert_null(s);
    assert_non_null(why);
    free(why);
    cJSON_Delete(t);

    /* refresh=false: immutable, custom name and key. */
    t = JQ("{" TOK ",'spec':{'username':'bob','refresh':false,'secretRef':{'name':'mine','key':'TOKEN'}}}");
    assert_int_equal(tokb_secret(t, "j.w.t", key, &s, NULL), 0);
    assert_true(json_get_bool(s, "immutable", 0));
    assert_string_equal(json_get_str(s, "metadata.name"), "mine");
    assert_non_null(json_get(s, "data.TOKEN"));
    cJSON_Delete(s);
    cJSON_Delete(t);
    cJSON_Delete(key);
}

static void test_refresh_schedule(void **state)
{
    const int64_t life = 15 * 60 * 1000, now = 1700000000000LL;
    const int64_t exp = now / 1000 + 15 * 60; /* minted just now */

    /* Fresh token: wake up at exp - lifetime/5 = 12 min from now. */
    tokb_plan p = tokb_refresh_plan(exp, now, life);
    assert_false(p.refresh_now);
    assert_int_equal(p.requeue_ms, 12 * 60 * 1000);
    assert_int_equal(p.refresh_at_s, exp - 3 * 60);

    /* 1 ms before it is due: still wait, but at least one second. */
    int64_t due_ms = (exp - 3 * 60) * 1000;
    p = tokb_refresh_plan(exp, due_ms - 1, life);
    assert_false(p.refresh_now);
    assert_int_equal(p.requeue_ms, 1000);

    /* Due: mint now, check again after 0.8 x lifetime. */
    p = tokb_refresh_plan(exp, due_ms, life);
    assert_true(p.refresh_now);
    assert_int_equal(p.requeue_ms, 12 * 60 * 1000);

    /* Long expired. */
    p = tokb_refresh_plan(exp, now + 24LL * 3600 * 1000, life);
    assert_true(p.refresh_now);
    assert_int_equal(p.requeue_ms, 12 * 60 * 1000);

    /* A token from the far future (clock skew, a stale lifetime): the wait
     * is capped at one lifetime. */
    p = tokb_refresh_plan(exp + 10LL * 365 * 24 * 3600, now, life);
    assert_false(p.refresh_now);
    assert_int_equal(p.requeue_ms, life);

    /* The lifetime grew since the token was minted: exp - lifetime/5 may
     * already be past, then refresh now. */
    p = tokb_refresh_plan(exp, now, 2 * 3600 * 1000);
    assert_true(p.refresh_now);
    assert_int_equal(p.requeue_ms, 96 * 60 * 1000);
}

/* slurm-operator#240: a requeue <= 0 means "never again" to controller-
 * runtime, and tokens silently expired. Ours is >= 1 s for any input. */
static void test_issue240_requeue_never_zero(void **state)
{
    /* Edge cases: zero and sub-second lifetimes, exp in the past/future,
     * extreme values. */
    const int64_t lifetimes[] = {0,         1, 999, 1000, 1001, 15 * 60 * 1000, TOKB_MAX_LIFETIME_S * 1000,
                                 INT64_MAX, -5};
    const int64_t exps[] = {0, 1, 1700000000, 1700000900, INT64_MAX, INT64_MIN, -1};
    const int64_t nows[] = {0, 1700000000000LL, 1700000899999LL, INT64_MAX, INT64_MIN};
    for (size_t a = 0; a < sizeof(lifetimes) / sizeof(lifetimes[0]); a++)
        for (size_t b = 0; b < sizeof(exps) / sizeof(exps[0]); b++)
            for (size_t c = 0; c < sizeof(nows) / sizeof(nows[0]); c++) {
                tokb_plan p = tokb_refresh_plan(exps[b], nows[c], lifetimes[a]);
                assert_true(p.requeue_ms >= 1000);
                int64_t upper = lifetimes[a] < 1000                         ? 1000
                                : lifetimes[a] > TOKB_MAX_LIFETIME_S * 1000 ? TOKB_MAX_LIFETIME_S * 1000
                                                                            : lifetimes[a];
                assert_true(p.requeue_ms <= upper);
            }
    /* And random ones. */
    for (int i = 0; i < 100000; i++) {
        int64_t v[3];
        random_bytes(v, sizeof(v));
        tokb_plan p = tokb_refresh_plan(v[0], v[1], v[2] % (TOKB_MAX_LIFETIME_S * 1000 + 1));
        assert_true(p.requeue_ms >= 1000);
    }
    /* A zero lifetime re-mints every second, it does not stop. */
    tokb_plan p = tokb_refresh_plan(1700000000, 1700000000000LL, 0);
    assert_true(p.refresh_now);
    assert_int_equal(p.requeue_ms, 1000);
}

/* The Token policy: root and the SlurmUser only when listed by name, other
 * users with "*" (the default) or when listed, the lifetime bounded. */
static int allowed(const tokb_policy *p, const char *user, int64_t lifetime_s)
{
    tokb_settings s;
    memset(&s, 0, sizeof(s));
    s.username = user;
    s.lifetime_ms = lifetime_s * 1000;
    char *why = NULL;
    int rc = tokb_policy_check(p, &s, &why);
    assert_true(rc == 0 ? why == NULL : why != NULL);
    free(why);
    return rc == 0;
}

static void test_policy(void **state)
{
    tokb_policy p;
    char *why = NULL;
    assert_int_equal(tokb_policy_parse(NULL, NULL, &p, &why), 0);
    assert_true(allowed(&p, "alice", 3600));
    assert_false(allowed(&p, "root", 60));
    assert_false(allowed(&p, "slurm", 60));
    assert_true(allowed(&p, "alice", 24 * 3600));
    assert_false(allowed(&p, "alice", 24 * 3600 + 1));
    assert_false(allowed(&p, "alice", TOKB_MAX_LIFETIME_S));
    tokb_policy_free(&p);

    assert_int_equal(tokb_policy_parse("root, bob", "1h", &p, &why), 0);
    assert_true(allowed(&p, "root", 3600));
    assert_true(allowed(&p, "bob", 60));
    assert_false(allowed(&p, "alice", 60)); /* no "*" */
    assert_false(allowed(&p, "slurm", 60));
    assert_false(allowed(&p, "root", 3601));
    tokb_policy_free(&p);

    assert_int_equal(tokb_policy_parse("*,slurm", "", &p, &why), 0);
    assert_true(allowed(&p, "slurm", 60));
    assert_true(allowed(&p, "alice", 60));
    assert_false(allowed(&p, "root", 60));
    tokb_policy_free(&p);

    assert_int_equal(tokb_policy_parse(NULL, "soon", &p, &why), OP_EINVAL);
    assert_non_null(why);
    free(why);
    why = NULL;
    assert_int_equal(tokb_policy_parse(NULL, "500ms", &p, &why), OP_EINVAL);
    free(why);
    why = NULL;
    assert_int_equal(tokb_policy_parse(" , ", NULL, &p, &why), OP_EINVAL);
    free(why);
    tokb_policy_free(&p);
}

/* Issue 39, finding 5: Slurm resolves a name it cannot find as a numeric
 * uid (strtol: leading white space and a sign accepted), so every spelling
 * of 0 is root; white space and case variants of root and the SlurmUser are
 * refused too, even with "*" and even when the name is listed. */
static void test_names_as_slurm_reads_them(void **state)
{
    (void)state;
    tokb_policy p;
    char *why = NULL;
    assert_int_equal(tokb_policy_parse("*,0,401, 0", NULL, &p, &why), 0);
    static const char *const refused[] = {"0",       "00",     "+0",    "-0",    " 0",    "\t0",
                                          "\n0",     "000000", "401",   "+401",  "12345", " 1000",
                                          "root ",   " root",  "ROOT",  "Root",  "SLURM", "Slurm",
                                          "slurm\n", "al ice", "bob\t", "\x01x", ""};
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        if (allowed(&p, refused[i], 60))
            fail_msg("token user \"%s\" allowed", refused[i]);
    }
    assert_true(allowed(&p, "alice", 60));
    assert_true(allowed(&p, "u0", 60));     /* strtol stops at 'u': a name */
    assert_true(allowed(&p, "0x1", 60));    /* base 10: "0" then "x1" left over, Slurm refuses it as a uid */
    assert_true(allowed(&p, "1000a", 60));
    assert_true(allowed(&p, "root2", 60));
    tokb_policy_free(&p);
    /* Listed by name, root passes; its spellings do not. */
    assert_int_equal(tokb_policy_parse("root", NULL, &p, &why), 0);
    assert_true(allowed(&p, "root", 60));
    assert_false(allowed(&p, "Root", 60));
    assert_false(allowed(&p, "0", 60));
    tokb_policy_free(&p);
    assert_int_equal(tokb_username_check("0", &why), OP_EFORBIDDEN);
    assert_non_null(strstr(why, "numeric"));
    free(why);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_settings_defaults), cmocka_unit_test(test_lifetime_clamp_and_errors),
        cmocka_unit_test(test_go_durations),      cmocka_unit_test(test_secret),
        cmocka_unit_test(test_refresh_schedule),  cmocka_unit_test(test_issue240_requeue_never_zero),
        cmocka_unit_test(test_policy),            cmocka_unit_test(test_names_as_slurm_reads_them),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
