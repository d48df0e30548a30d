#include "reconcilers/token_build.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/crypto.h"
#include "core/err.h"
#include "core/json.h"
#include "core/mem.h"

int tokb_settings_get(const cJSON *token, tokb_settings *s, char **why)
{
    int rc = 0;
    const cJSON *spec = json_child(token, "spec");
    memset(s, 0, sizeof(*s));
    s->username = json_get_str_or(spec, "username", "");
    s->lifetime_ms = (int64_t)TOKB_DEFAULT_LIFETIME_S * 1000;
    const char *lt = json_get_str(spec, "lifetime");
    if (lt) {
        int64_t ns = 0;
        int e = clc_parse_duration(lt, &ns);
        if (e == OP_ETOOBIG)
            ns = INT64_MAX;
        if (e == 0 || e == OP_ETOOBIG) {
            /* Clamp as Slinky does: [0, 2147483646 s]. */
            int64_t ms = ns / 1000000;
            if (ms < 0)
                ms = 0;
            if (ms > TOKB_MAX_LIFETIME_S * 1000)
                ms = TOKB_MAX_LIFETIME_S * 1000;
            s->lifetime_ms = ms;
        } else {
            rc = clc_fail(why, OP_EPARSE, "spec.lifetime \"%s\" is not a duration", lt);
        }
    }
    s->refresh = json_get_bool(spec, "refresh", 1);
    const cJSON *ref = json_child(spec, "secretRef");
    if (cJSON_IsObject(ref)) {
        snprintf(s->secret_name, sizeof(s->secret_name), "%s", json_get_str_or(ref, "name", ""));
        s->secret_key = json_get_str_or(ref, "key", TOKB_DEFAULT_KEY);
    } else {
        snprintf(s->secret_name, sizeof(s->secret_name), "%s-jwt-%s",
                 json_get_str_or(token, "metadata.name", ""), s->username);
        s->secret_key = TOKB_DEFAULT_KEY;
    }
    s->jwt_ref = clc_jwt_ref(spec);
    return rc;
}

/* Go's time.Duration.String() for whole milliseconds. */
static void go_duration(int64_t ms, char *out, size_t size)
{
    if (ms == 0) {
        snprintf(out, size, "0s");
        return;
    }
    int64_t h = ms / 3600000, m = ms / 60000 % 60, s = ms / 1000 % 60, r = ms % 1000;
    char sec[32];
    if (r)
        snprintf(sec, sizeof(sec), "%lld.%03lld", (long long)s, (long long)r);
    else
        snprintf(sec, sizeof(sec), "%lld", (long long)s);
    /* Trim trailing zeros of the fraction as Go does. */
    char *dot = strchr(sec, '.');
    if (dot) {
        char *e = sec + strlen(sec) - 1;
        while (*e == '0')
            *e-- = '\0';
    }
    if (h)
        snprintf(out, size, "%lldh%lldm%ss", (long long)h, (long long)m, sec);
    else if (m)
        snprintf(out, size, "%lldm%ss", (long long)m, sec);
    else if (ms < 1000)
        snprintf(out, size, "%lldms", (long long)ms);
    else
        snprintf(out, size, "%ss", sec);
}

cJSON *tokb_defaults(const cJSON *token)
{
    cJSON *t = cJSON_Duplicate(token, 1);
    if (t == NULL)
        t = cJSON_CreateObject();
    tokb_settings s;
    tokb_settings_get(t, &s, NULL);
    cJSON *spec = json_obj_ensure(t, "spec");
    if (!cJSON_IsString(json_child(spec, "lifetime"))) {
        char d[64];
        go_duration(s.lifetime_ms, d, sizeof(d));
        json_set_str(spec, "lifetime", d);
    }
    if (!cJSON_IsBool(json_child(spec, "refresh")))
        json_set_bool(spec, "refresh", 1);
    if (!cJSON_IsObject(json_child(spec, "secretRef"))) {
        cJSON *ref = cJSON_CreateObject();
        json_set_str(ref, "name", s.secret_name);
        json_set_str(ref, "key", s.secret_key);
        json_set(spec, "secretRef", ref);
    }
    return t;
}

int tokb_secret(const cJSON *token, const char *jwt, const cJSON *key_secret, cJSON **out, char **why)
{
    *out = NULL;
    if (jwt == NULL || *jwt == '\0')
        return clc_fail(why, OP_EINVAL, "no JWT to store");
    tokb_settings s;
    tokb_settings_get(token, &s, NULL);
    if (s.secret_name[0] == '\0' || *s.secret_key == '\0')
        return clc_fail(why, OP_EINVAL, "spec.secretRef needs a name and a key");

    const char *ns = json_get_str_or(token, "metadata.namespace", "");
    cJSON *sec = cJSON_CreateObject();
    json_set_str(sec, "apiVersion", "v1");
    json_set_str(sec, "kind", "Secret");
    cJSON *meta = clc_metadata(s.secret_name, ns);
    json_set(meta, "labels", CLC_MERGE(json_get(token, "metadata.labels")));
    json_set(meta, "annotations", CLC_MERGE(json_get(token, "metadata.annotations")));
    cJSON *refs = cJSON_CreateArray();
    const char *kns = json_get_str(key_secret, "metadata.namespace");
    if (key_secret && json_get_str(key_secret, "metadata.uid") && (kns == NULL || strcmp(kns, ns) == 0))
        cJSON_AddItemToArray(refs, clc_owner_ref("v1", "Secret", json_get_str(key_secret, "metadata.name"),
                                                 json_get_str(key_secret, "metadata.uid"), 1));
    else
        cJSON_AddItemToArray(refs,
                             clc_owner_ref(CLC_API_VERSION, TOKB_KIND, json_get_str(token, "metadata.name"),
                                           json_get_str(token, "metadata.uid"), 1));
    json_set(meta, "ownerReferences", refs);
    json_set(sec, "metadata", meta);
    json_set_bool(sec, "immutable", !s.refresh);
    char *enc = base64_encode(jwt, strlen(jwt));
    json_set_str(json_obj_ensure(sec, "data"), s.secret_key, enc);
    free(enc);
    *out = sec;
    return 0;
}

int tokb_policy_parse(const char *users, const char *max_lifetime, tokb_policy *p, char **why)
{
    memset(p, 0, sizeof(*p));
    p->max_lifetime_s = TOKB_DEFAULT_MAX_LIFETIME_S;
    if (max_lifetime && *max_lifetime) {
        int64_t ns = 0;
        if (clc_parse_duration(max_lifetime, &ns) != 0 || ns < INT64_C(1000000000))
            return clc_fail(why, OP_EINVAL, "token max lifetime \"%s\" is not a duration of at least 1s",
                            max_lifetime);
        p->max_lifetime_s = ns / 1000000000;
    }
    if (users == NULL || *users == '\0') {
        p->any = 1;
        return 0;
    }
    char *copy = xstrdup(users), *save = NULL;
    for (char *t = strtok_r(copy, ", ", &save); t; t = strtok_r(NULL, ", ", &save)) {
        if (strcmp(t, TOKB_POLICY_ANY) == 0) {
            p->any = 1;
            continue;
        }
        p->users = xrealloc(p->users, (p->n_users + 1) * sizeof(*p->users));
        p->users[p->n_users++] = xstrdup(t);
    }
    free(copy);
    if (!p->any && p->n_users == 0)
        return clc_fail(why, OP_EINVAL, "token users \"%s\" names nobody", users);
    return 0;
}

void tokb_policy_free(tokb_policy *p)
{
    for (size_t i = 0; i < p->n_users; i++)
        free(p->users[i]);
    free(p->users);
    memset(p, 0, sizeof(*p));
}

/* Slurm reads a JWT's user name with uid_from_string (src/common/uid.c): a
 * name the password database does not know is then parsed as a decimal uid
 * by strtol, which skips leading white space and takes a sign ("-0" passes
 * its l < 0 test). So "0", "00", "+0", "-0" and " 0" are root, and "401"
 * the SlurmUser, whatever the policy says about names. Any name that strtol
 * would read as a number is refused, listed or not. */
static int numeric_name(const char *u)
{
    while (*u && isspace((unsigned char)*u))
        u++;
    if (*u == '+' || *u == '-')
        u++;
    if (!isdigit((unsigned char)*u))
        return 0;
    while (isdigit((unsigned char)*u))
        u++;
    return *u == '\0';
}

/* No Unix user name holds white space or control characters; a name with
 * them is either a typo or an attempt at a name that some lookup trims
 * (getpwnam does not, an LDAP or sssd back end may). */
static int odd_chars(const char *u)
{
    for (; *u; u++)
        if (isspace((unsigned char)*u) || iscntrl((unsigned char)*u))
            return 1;
    return 0;
}

/* root and the SlurmUser in any case: sssd with case_sensitive = false
 * resolves "ROOT" as "root". */
static int privileged_name(const char *u)
{
    return strcasecmp(u, "root") == 0 || strcasecmp(u, CLC_SLURM_USER) == 0;
}

int tokb_username_check(const char *user, char **why)
{
    if (user == NULL || *user == '\0')
        return clc_fail(why, OP_EFORBIDDEN, "spec.username is empty");
    if (numeric_name(user))
        return clc_fail(why, OP_EFORBIDDEN,
                        "spec.username \"%s\" is numeric: Slurm reads a name it cannot find as a uid (\"0\" "
                        "is root), so numeric names are refused whatever --token-users says; name the user",
                        user);
    if (odd_chars(user))
        return clc_fail(why, OP_EFORBIDDEN,
                        "spec.username \"%s\" holds white space or control characters: no Slurm user is "
                        "named so, and the name is refused whatever --token-users says",
                        user);
    return 0;
}

int tokb_policy_check(const tokb_policy *p, const tokb_settings *s, char **why)
{
    int rc = tokb_username_check(s->username, why);
    if (rc != 0)
        return rc;
    int listed = 0;
    for (size_t i = 0; i < p->n_users; i++)
        if (strcmp(p->users[i], s->username) == 0)
            listed = 1;
    int privileged = privileged_name(s->username);
    if (!listed && (privileged || !p->any))
        return clc_fail(why, OP_EFORBIDDEN,
                        privileged
                            ? "the operator's token policy does not allow tokens for Slurm user \"%s\" "
                              "(root and the SlurmUser must be listed in --token-users)"
                            : "the operator's token policy does not allow tokens for Slurm user \"%s\" "
                              "(not in --token-users)",
                        s->username);
    if (s->lifetime_ms > p->max_lifetime_s * 1000)
        return clc_fail(why, OP_EFORBIDDEN,
                        "spec.lifetime is longer than the operator's maximum token lifetime of %llds "
                        "(--token-max-lifetime)",
                        (long long)p->max_lifetime_s);
    return 0;
}

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

tokb_plan tokb_refresh_plan(int64_t exp_s, int64_t now_ms, int64_t lifetime_ms)
{
    tokb_plan p = {0};
    /* Keep every intermediate within int64: seconds and milliseconds of any
     * plausible clock fit with a wide margin once inputs are bounded. */
    const int64_t max_s = INT64_C(1) << 40; /* ~34,000 years of seconds */
    lifetime_ms = clamp64(lifetime_ms, 0, TOKB_MAX_LIFETIME_S * 1000);
    exp_s = clamp64(exp_s, -max_s, max_s);
    now_ms = clamp64(now_ms, -max_s * 1000, max_s * 1000);
    int64_t upper = lifetime_ms < 1000 ? 1000 : lifetime_ms;

    int64_t refresh_at_ms = exp_s * 1000 - lifetime_ms / 5;
    p.refresh_at_s = refresh_at_ms / 1000;
    if (now_ms >= refresh_at_ms || now_ms >= exp_s * 1000) {
        p.refresh_now = 1;
        p.requeue_ms = clamp64(lifetime_ms * 4 / 5, 1000, upper);
    } else {
        p.requeue_ms = clamp64(refresh_at_ms - now_ms, 1000, upper);
    }
    return p;
}
