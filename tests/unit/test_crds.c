/* Unit tests for the CRD files in crds/: every CRD parses with core/yaml, has the names,
 * scope, subresources, printer columns, fields, defaults and rules that
 * docs/compat.md#crds lists, and is a structural schema. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "core/mem.h"
#include "core/yaml.h"

static cJSON *load(const char *plural)
{
    /* ctest passes the source tree; run by hand, find it from this file's path. */
    const char *src = getenv("OP_SOURCE_DIR");
    char *dir = NULL;
    if (src == NULL) {
        const char *tail = strstr(__FILE__, "/tests/unit/");
        dir = tail ? xstrndup(__FILE__, (size_t)(tail - __FILE__)) : xstrdup(".");
        src = dir;
    }
    char *path = xasprintf("%s/crds/slinky.slurm.net_%s.yaml", src, plural);
    free(dir);
    char err[256] = "";
    cJSON *crd = yaml_parse_file(path, 1 << 20, err, sizeof(err));
    if (crd == NULL)
        fprintf(stderr, "%s: %s\n", path, err);
    free(path);
    assert_non_null(crd);
    return crd;
}

static const cJSON *version(const cJSON *crd)
{
    const cJSON *versions = json_get(crd, "spec.versions");
    assert_int_equal(json_len(versions), 1);
    return versions->child;
}

static const cJSON *schema(const cJSON *crd)
{
    const cJSON *s = json_get(version(crd), "schema.openAPIV3Schema");
    assert_non_null(s);
    return s;
}

/* Schema node at a dotted path of property names ("spec.updateStrategy.type"). */
static const cJSON *prop(const cJSON *crd, const char *path)
{
    const cJSON *node = schema(crd);
    char *copy = xstrdup(path), *save = NULL;
    for (char *p = strtok_r(copy, ".", &save); p && node; p = strtok_r(NULL, ".", &save)) {
        const cJSON *props = json_child(node, "properties");
        if (props == NULL && json_child(node, "items"))
            props = json_get(node, "items.properties");
        node = json_child(props, p);
    }
    if (node == NULL)
        fprintf(stderr, "no schema property %s\n", path);
    free(copy);
    assert_non_null(node);
    return node;
}

static void expect_str(const cJSON *o, const char *path, const char *want)
{
    const char *got = json_get_str(o, path);
    if (got == NULL || strcmp(got, want) != 0)
        fprintf(stderr, "%s: got %s, want %s\n", path, got ? got : "(null)", want);
    assert_non_null(got);
    assert_string_equal(got, want);
}

static void expect_strings(const cJSON *arr, const char *const *want, size_t n)
{
    assert_int_equal(json_len(arr), n);
    size_t i = 0;
    for (const cJSON *e = arr->child; e; e = e->next, i++) {
        assert_true(cJSON_IsString(e));
        assert_string_equal(e->valuestring, want[i]);
    }
}

/* ---- structural rules, checked on every node of every schema ------------------------------------ */

typedef struct walk_stats {
    int rules, patterns, defaults, preserve;
} walk_stats;

static void check_pattern(const char *where, const char *pat)
{
    /* RE2 and POSIX ERE agree on the constructs we use, except that RE2
     * reads "\n" as a newline: translate it for regcomp. */
    char *p = xstrdup(pat), *w = p;
    for (const char *r = pat; *r; r++) {
        if (r[0] == '\\' && r[1] == 'n') {
            *w++ = '\n';
            r++;
        } else {
            *w++ = *r;
        }
    }
    *w = '\0';
    regex_t re;
    int rc = regcomp(&re, p, REG_EXTENDED | REG_NOSUB);
    if (rc != 0)
        fprintf(stderr, "%s: pattern %s does not compile\n", where, pat);
    assert_int_equal(rc, 0);
    regfree(&re);
    free(p);
}

static int balanced(const char *s)
{
    int depth = 0;
    char quote = 0;
    for (; *s; s++) {
        if (quote) {
            if (*s == quote)
                quote = 0;
            continue;
        }
        if (*s == '\'' || *s == '"')
            quote = *s;
        else if (*s == '(')
            depth++;
        else if (*s == ')' && --depth < 0)
            return 0;
    }
    return depth == 0 && quote == 0;
}

static void walk(const cJSON *node, const char *where, walk_stats *st)
{
    const char *type = json_get_str(node, "type");
    int int_or_string = cJSON_IsTrue(json_child(node, "x-kubernetes-int-or-string"));
    int preserve = cJSON_IsTrue(json_child(node, "x-kubernetes-preserve-unknown-fields"));
    /* Structural schema: every node states its type (int-or-string and
     * preserve-unknown nodes may omit it). */
    if (type == NULL && !int_or_string && !preserve)
        fprintf(stderr, "%s: no type\n", where);
    assert_true(type != NULL || int_or_string || preserve);
    st->preserve += preserve;
    if (type && strcmp(type, "object") == 0 && json_child(node, "items"))
        fail_msg("%s: object with items", where);
    if (type && strcmp(type, "array") == 0)
        assert_non_null(json_child(node, "items"));

    const cJSON *dflt = json_child(node, "default");
    if (dflt) {
        st->defaults++;
        if (type && strcmp(type, "string") == 0)
            assert_true(cJSON_IsString(dflt));
        else if (type && strcmp(type, "integer") == 0)
            assert_true(cJSON_IsNumber(dflt));
        else if (type && strcmp(type, "boolean") == 0)
            assert_true(cJSON_IsBool(dflt));
        else if (int_or_string)
            assert_true(cJSON_IsNumber(dflt) || cJSON_IsString(dflt));
        /* A default must satisfy the enum it sits next to. */
        const cJSON *en = json_child(node, "enum");
        if (en) {
            int found = 0;
            for (const cJSON *e = en->child; e; e = e->next)
                found |= json_equal(e, dflt);
            if (!found)
                fprintf(stderr, "%s: default not in enum\n", where);
            assert_true(found);
        }
    }
    const char *pat = json_get_str(node, "pattern");
    if (pat) {
        st->patterns++;
        check_pattern(where, pat);
    }
    const cJSON *rules = json_child(node, "x-kubernetes-validations");
    for (const cJSON *r = rules ? rules->child : NULL; r; r = r->next) {
        const char *rule = json_get_str(r, "rule"), *msg = json_get_str(r, "message");
        if (rule == NULL || msg == NULL || !balanced(rule))
            fprintf(stderr, "%s: bad rule %s\n", where, rule ? rule : "(none)");
        assert_non_null(rule);
        assert_non_null(msg);
        assert_int_not_equal(*msg, '\0');
        assert_true(balanced(rule));
        st->rules++;
    }
    const cJSON *props = json_child(node, "properties");
    for (const cJSON *p = props ? props->child : NULL; p; p = p->next) {
        char *w = xasprintf("%s.%s", where, p->string);
        walk(p, w, st);
        free(w);
    }
    const cJSON *req = json_child(node, "required");
    for (const cJSON *r = req ? req->child : NULL; r; r = r->next) {
        if (!json_child(props, r->valuestring))
            fprintf(stderr, "%s: required %s is not a property\n", where, r->valuestring);
        assert_non_null(json_child(props, r->valuestring));
    }
    const cJSON *items = json_child(node, "items");
    if (items) {
        char *w = xasprintf("%s[]", where);
        walk(items, w, st);
        free(w);
    }
    const cJSON *ap = json_child(node, "additionalProperties");
    if (cJSON_IsObject(ap))
        walk(ap, where, st);
}

/* ---- per-CRD expectations ---------------------------------------------------------------------- */

typedef struct column {
    const char *name, *type, *path;
    int priority;
} column;

typedef struct crd_want {
    const char *plural, *singular, *kind;
    const char *short_names[4];
    size_t nshort;
    int scale;
    column cols[10];
    size_t ncols;
    const char *spec_fields[32];
    const char *status_fields[20];
} crd_want;

static const crd_want wants[] = {
    {"controllers",
     "controller",
     "Controller",
     {"slurmctld"},
     1,
     0,
     {{"AGE", "date", ".metadata.creationTimestamp", 0}},
     1,
     {"clusterName",
      "slurmKeyRef",
      "jwtKeyRef",
      "jwtHs256KeyRef",
      "jwksKeyRef",
      "accountingRef",
      "external",
      "externalConfig",
      "ha",
      "slurmctld",
      "inplaceReconfigure",
      "reconfigure",
      "logfile",
      "template",
      "extraConf",
      "configFileRefs",
      "prologScriptRefs",
      "epilogScriptRefs",
      "prologSlurmctldScriptRefs",
      "epilogSlurmctldScriptRefs",
      "persistence",
      "service",
      "metrics"},
     {"conditions"}},
    {"nodesets",
     "nodeset",
     "NodeSet",
     {"nodesets", "nss", "slurmd"},
     3,
     1,
     {{"DESIRED", "integer", ".status.desired", 0},
      {"REPLICAS", "integer", ".status.replicas", 0},
      {"UPDATED", "integer", ".status.updatedReplicas", 0},
      {"READY", "integer", ".status.readyReplicas", 0},
      {"IDLE", "integer", ".status.slurmIdle", 1},
      {"ALLOCATED", "integer", ".status.slurmAllocated", 1},
      {"DOWN", "integer", ".status.slurmDown", 1},
      {"DRAIN", "integer", ".status.slurmDrain", 1},
      {"BLOCKED", "string", ".status.conditions[?(@.type==\"DrainBlocked\")].reason", 1},
      {"AGE", "date", ".metadata.creationTimestamp", 0}},
     10,
     {"controllerRef", "replicas", "scalingMode", "slurmd", "ssh", "logfile", "template", "extraConf",
      "partition", "volumeClaimTemplates", "updateStrategy", "revisionHistoryLimit",
      "persistentVolumeClaimRetentionPolicy", "minReadySeconds", "ordinalPadding", "pinToNode",
      "workloadDisruptionProtection", "pruneSlurmNodeRecords", "oversubscribeNode", "taintKubeNodes"},
     {"replicas", "updatedReplicas", "readyReplicas", "availableReplicas", "unavailableReplicas", "desired",
      "slurmIdle", "slurmAllocated", "slurmDown", "slurmDrain", "slurmPendingNodes", "slurmIdleCooledNodes",
      "observedGeneration", "nodeSetHash", "collisionCount", "ordinalToNode", "selector", "conditions"}},
    {"loginsets",
     "loginset",
     "LoginSet",
     {"loginsets", "lss", "sackd"},
     3,
     1,
     {{"REPLICAS", "integer", ".status.replicas", 0}, {"AGE", "date", ".metadata.creationTimestamp", 0}},
     2,
     {"controllerRef", "replicas", "login", "initconf", "template", "rootSshAuthorizedKeys",
      "extraSshdConfig", "sssdConfRef", "strategy", "service"},
     {"replicas", "selector", "conditions"}},
    {"restapis",
     "restapi",
     "RestApi",
     {"slurmrestd"},
     1,
     0,
     {{"AGE", "date", ".metadata.creationTimestamp", 0}},
     1,
     {"controllerRef", "replicas", "slurmrestd", "template", "service"},
     {"conditions"}},
    {"accountings",
     "accounting",
     "Accounting",
     {"slurmdbd"},
     1,
     0,
     {{"AGE", "date", ".metadata.creationTimestamp", 0}},
     1,
     {"slurmKeyRef", "jwtKeyRef", "jwtHs256KeyRef", "jwksKeyRef", "external", "externalConfig", "slurmdbd",
      "template", "storageConfig", "extraConf", "service"},
     {"conditions"}},
    {"tokens",
     "token",
     "Token",
     {"tokens", "jwt"},
     2,
     0,
     {{"USER", "string", ".spec.username", 0},
      {"IAT", "date", ".status.issuedAt", 0},
      {"AGE", "date", ".metadata.creationTimestamp", 0}},
     3,
     {"jwtKeyRef", "jwtHs256KeyRef", "username", "lifetime", "refresh", "secretRef"},
     {"issuedAt", "conditions"}},
};

static void check_common(const crd_want *w, walk_stats *st)
{
    cJSON *crd = load(w->plural);
    expect_str(crd, "apiVersion", "apiextensions.k8s.io/v1");
    expect_str(crd, "kind", "CustomResourceDefinition");
    char *name = xasprintf("%s.slinky.slurm.net", w->plural);
    expect_str(crd, "metadata.name", name);
    free(name);
    expect_str(crd, "spec.group", "slinky.slurm.net");
    expect_str(crd, "spec.scope", "Namespaced");
    const cJSON *names = json_get(crd, "spec.names");
    expect_str(names, "kind", w->kind);
    char *list_kind = xasprintf("%sList", w->kind);
    expect_str(names, "listKind", list_kind);
    free(list_kind);
    expect_str(names, "plural", w->plural);
    expect_str(names, "singular", w->singular);
    expect_strings(json_child(names, "shortNames"), w->short_names, w->nshort);

    const cJSON *v = version(crd);
    expect_str(v, "name", "v1beta1");
    assert_true(cJSON_IsTrue(json_child(v, "served")));
    assert_true(cJSON_IsTrue(json_child(v, "storage")));
    assert_true(cJSON_IsObject(json_get(v, "subresources.status")));
    const cJSON *scale = json_get(v, "subresources.scale");
    if (w->scale) {
        assert_non_null(scale);
        expect_str(scale, "specReplicasPath", ".spec.replicas");
        expect_str(scale, "statusReplicasPath", ".status.replicas");
        expect_str(scale, "labelSelectorPath", ".status.selector");
        /* The paths the scale subresource reads exist with the right types. */
        expect_str(prop(crd, "spec.replicas"), "type", "integer");
        expect_str(prop(crd, "status.replicas"), "type", "integer");
        expect_str(prop(crd, "status.selector"), "type", "string");
    } else {
        assert_null(scale);
    }

    const cJSON *cols = json_child(v, "additionalPrinterColumns");
    assert_int_equal(json_len(cols), w->ncols);
    size_t i = 0;
    for (const cJSON *c = cols->child; c; c = c->next, i++) {
        expect_str(c, "name", w->cols[i].name);
        expect_str(c, "type", w->cols[i].type);
        expect_str(c, "jsonPath", w->cols[i].path);
        assert_int_equal(json_get_int(c, "priority", 0), w->cols[i].priority);
    }

    const cJSON *root = schema(crd);
    expect_str(root, "type", "object");
    for (i = 0; i < ARRAY_SIZE(w->spec_fields) && w->spec_fields[i]; i++) {
        char *p = xasprintf("spec.%s", w->spec_fields[i]);
        (void)prop(crd, p);
        free(p);
    }
    assert_int_equal(json_len(json_get(root, "properties.spec.properties")), i); /* nothing unexpected */
    for (i = 0; i < ARRAY_SIZE(w->status_fields) && w->status_fields[i]; i++) {
        char *p = xasprintf("status.%s", w->status_fields[i]);
        (void)prop(crd, p);
        free(p);
    }
    assert_int_equal(json_len(json_get(root, "properties.status.properties")), i);

    /* status.conditions is a metav1.Condition list keyed by type. */
    const cJSON *conds = prop(crd, "status.conditions");
    expect_str(conds, "x-kubernetes-list-type", "map");
    const char *const keys[] = {"type"};
    expect_strings(json_child(conds, "x-kubernetes-list-map-keys"), keys, 1);
    cJSON_Delete(crd);
    (void)st;
}

static void test_common(void **state)
{
    for (size_t i = 0; i < ARRAY_SIZE(wants); i++) {
        walk_stats st = {0};
        check_common(&wants[i], &st);
    }
}

static void test_structural(void **state)
{
    walk_stats total = {0};
    for (size_t i = 0; i < ARRAY_SIZE(wants); i++) {
        cJSON *crd = load(wants[i].plural);
        walk(schema(crd), wants[i].plural, &total);
        cJSON_Delete(crd);
    }
    /* Sanity: the walk saw what the files hold. */
    assert_true(total.rules >= 20);
    assert_true(total.patterns >= 10);
    assert_true(total.defaults >= 25);
    assert_true(total.preserve >= 15);
}

/* kubectl explain prints a field's description and nothing else that says what the field is for:
 * every property of the six schemas (and each schema's root) has one, a sentence. */
static void check_described(const cJSON *node, const char *where, int depth, size_t *fields,
                            size_t *missing)
{
    const char *d = json_get_str(node, "description");
    size_t n = d ? strlen(d) : 0;
    if (n < 8 || d[n - 1] != '.') {
        fprintf(stderr, "%s: %s\n", where, d ? "description is not a sentence" : "no description");
        (*missing)++;
    }
    const cJSON *props = json_child(node, "properties");
    for (const cJSON *p = props ? props->child : NULL; p; p = p->next) {
        char *w = xasprintf("%s.%s", where, p->string);
        if (depth == 0 && strcmp(p->string, "metadata") == 0) {
            /* The API server describes ObjectMeta itself and refuses a CRD whose root metadata says
             * more than its type ("must not specify anything other than name and generateName"). */
            if (json_child(p, "description") || json_child(p, "properties"))
                fprintf(stderr, "%s: the API server refuses anything but its type\n", w);
            assert_null(json_child(p, "description"));
            assert_null(json_child(p, "properties"));
            free(w);
            continue;
        }
        (*fields)++;
        check_described(p, w, depth + 1, fields, missing);
        free(w);
    }
    /* Array items and map values are described by the field that holds them; their own
     * properties are fields of their own. */
    const cJSON *inner[] = {json_child(node, "items"), json_child(node, "additionalProperties")};
    for (size_t i = 0; i < ARRAY_SIZE(inner); i++) {
        const cJSON *ip = cJSON_IsObject(inner[i]) ? json_child(inner[i], "properties") : NULL;
        for (const cJSON *p = ip ? ip->child : NULL; p; p = p->next) {
            char *w = xasprintf("%s[].%s", where, p->string);
            (*fields)++;
            check_described(p, w, depth + 1, fields, missing);
            free(w);
        }
    }
}

static void test_descriptions(void **state)
{
    size_t fields = 0, missing = 0;
    for (size_t i = 0; i < ARRAY_SIZE(wants); i++) {
        cJSON *crd = load(wants[i].plural);
        check_described(schema(crd), wants[i].singular, 0, &fields, &missing);
        cJSON_Delete(crd);
    }
    fprintf(stderr, "%zu fields, %zu without a description\n", fields, missing);
    assert_int_equal(missing, 0);
    /* Sanity: the walk reached the nested fields (317 when this was written). */
    assert_true(fields >= 300);
}

static const char *rule_with(const cJSON *node, const char *needle)
{
    const cJSON *rules = json_child(node, "x-kubernetes-validations");
    for (const cJSON *r = rules ? rules->child : NULL; r; r = r->next) {
        const char *rule = json_get_str(r, "rule");
        if (rule && strstr(rule, needle))
            return json_get_str(r, "message");
    }
    fprintf(stderr, "no rule containing %s\n", needle);
    fail();
    return NULL;
}

static void expect_default(const cJSON *crd, const char *path, const char *want_json)
{
    const cJSON *d = json_child(prop(crd, path), "default");
    cJSON *w = json_parse(want_json, strlen(want_json), NULL);
    if (!json_equal(d, w))
        fprintf(stderr, "%s: default mismatch (want %s)\n", path, want_json);
    assert_true(json_equal(d, w));
    cJSON_Delete(w);
}

static void expect_preserve(const cJSON *crd, const char *path)
{
    const cJSON *n = prop(crd, path);
    if (json_child(n, "items"))
        n = json_child(n, "items");
    assert_true(cJSON_IsTrue(json_child(n, "x-kubernetes-preserve-unknown-fields")));
}

static void test_nodeset(void **state)
{
    cJSON *crd = load("nodesets");
    expect_default(crd, "spec.replicas", "1");
    expect_default(crd, "spec.scalingMode", "\"StatefulSet\"");
    expect_default(crd, "spec.updateStrategy.type", "\"RollingUpdate\"");
    expect_default(crd, "spec.updateStrategy.rollingUpdate.maxUnavailable", "\"25%\"");
    expect_default(crd, "spec.updateStrategy.scheduledUpdate.duration", "\"30m\"");
    expect_default(crd, "spec.revisionHistoryLimit", "0");
    expect_default(crd, "spec.persistentVolumeClaimRetentionPolicy.whenDeleted", "\"Retain\"");
    expect_default(crd, "spec.persistentVolumeClaimRetentionPolicy.whenScaled", "\"Retain\"");
    expect_default(crd, "spec.minReadySeconds", "0");
    expect_default(crd, "spec.ordinalPadding", "0");
    expect_default(crd, "spec.pinToNode", "false");
    expect_default(crd, "spec.workloadDisruptionProtection", "true");
    expect_default(crd, "spec.pruneSlurmNodeRecords", "\"Never\"");
    expect_default(crd, "spec.oversubscribeNode", "false");
    expect_default(crd, "spec.taintKubeNodes", "false");
    expect_default(crd, "spec.ssh.enabled", "false");
    expect_default(crd, "spec.partition.enabled", "false");

    const char *const modes[] = {"StatefulSet", "DaemonSet"};
    expect_strings(json_child(prop(crd, "spec.scalingMode"), "enum"), modes, 2);
    const char *const types[] = {"RollingUpdate", "OnDelete", "ScheduledUpdate"};
    expect_strings(json_child(prop(crd, "spec.updateStrategy.type"), "enum"), types, 3);
    const char *const retain[] = {"Retain", "Delete"};
    expect_strings(json_child(prop(crd, "spec.persistentVolumeClaimRetentionPolicy.whenScaled"), "enum"),
                   retain, 2);
    const char *const prune[] = {"Never", "NodeNotFound"};
    expect_strings(json_child(prop(crd, "spec.pruneSlurmNodeRecords"), "enum"), prune, 2);
    const cJSON *mu = prop(crd, "spec.updateStrategy.rollingUpdate.maxUnavailable");
    assert_true(cJSON_IsTrue(json_child(mu, "x-kubernetes-int-or-string")));
    assert_non_null(rule_with(mu, "self >= 1"));
    assert_non_null(rule_with(prop(crd, "spec.updateStrategy.scheduledUpdate.duration"), "duration('1m')"));
    assert_non_null(rule_with(prop(crd, "spec.updateStrategy"), "ScheduledUpdate"));
    assert_non_null(rule_with(prop(crd, "spec.ssh"), "sssdConfRef"));
    assert_non_null(rule_with(prop(crd, "spec.controllerRef"), "self == oldSelf"));
    /* volumeClaimTemplates immutability: a transition rule on spec (so that
     * adding or removing the list is refused too); the real API server
     * accepts its cost (integration.k8s_crds). slurmop checks it again
     * (nodeset_immut). */
    assert_non_null(rule_with(prop(crd, "spec"), "oldSelf.volumeClaimTemplates"));
    expect_str(prop(crd, "spec.partition.config"), "pattern", "^[^\\n]+$");
    assert_int_equal(json_get_int(prop(crd, "spec.controllerRef.name"), "minLength", 0), 1);
    /* Slinky's ObjectReference has a namespace: without it in the schema the
     * API server would prune it and the reference would silently point at
     * the NodeSet's own namespace. */
    expect_str(prop(crd, "spec.controllerRef.namespace"), "type", "string");

    expect_preserve(crd, "spec.slurmd");
    expect_preserve(crd, "spec.logfile");
    expect_preserve(crd, "spec.template.spec");
    expect_preserve(crd, "spec.volumeClaimTemplates");

    /* The patterns accept and refuse what the webhook does. */
    regex_t re;
    assert_int_equal(
        regcomp(&re, json_get_str(prop(crd, "spec.template.spec.hostname"), "pattern"), REG_EXTENDED), 0);
    assert_int_equal(regexec(&re, "cpu-", 0, NULL, 0), 0);
    assert_int_equal(regexec(&re, "gpu", 0, NULL, 0), 0);
    assert_int_not_equal(regexec(&re, "-cpu", 0, NULL, 0), 0);
    assert_int_not_equal(regexec(&re, "Cpu", 0, NULL, 0), 0);
    assert_int_not_equal(regexec(&re, "a.b", 0, NULL, 0), 0);
    regfree(&re);
    assert_int_equal(regcomp(&re, json_get_str(prop(crd, "spec.extraConf"), "pattern"), REG_EXTENDED), 0);
    assert_int_equal(regexec(&re, "Weight=1  Gres=gpu:1 Features=a,b", 0, NULL, 0), 0);
    assert_int_equal(regexec(&re, "", 0, NULL, 0), 0);
    assert_int_not_equal(regexec(&re, "Weight=1 oops", 0, NULL, 0), 0);
    assert_int_not_equal(regexec(&re, "=1", 0, NULL, 0), 0);
    regfree(&re);

    const char *const status_req[] = {"nodeSetHash", "selector"};
    expect_strings(json_get(prop(crd, "status"), "required"), status_req, 2);
    const char *const spec_req[] = {"controllerRef"};
    expect_strings(json_get(prop(crd, "spec"), "required"), spec_req, 1);
    cJSON_Delete(crd);
}

static void test_other_kinds(void **state)
{
    cJSON *crd = load("controllers");
    const cJSON *spec = prop(crd, "spec");
    assert_non_null(rule_with(spec, "has(self.slurmKeyRef) : true"));
    assert_non_null(rule_with(spec, "has(self.jwtKeyRef) || has(self.jwtHs256KeyRef) : true"));
    assert_non_null(rule_with(spec, "has(self.externalConfig) : true"));
    assert_non_null(rule_with(spec, "self.ha.enabled"));
    assert_non_null(rule_with(spec, "oldSelf.clusterName"));
    assert_non_null(rule_with(spec, "oldSelf.slurmKeyRef.name"));
    assert_non_null(rule_with(spec, "oldSelf.jwtKeyRef"));
    assert_non_null(rule_with(spec, "oldSelf.persistence.enabled"));
    assert_non_null(rule_with(spec, "oldSelf.persistence.existingClaim"));
    assert_int_equal(json_get_int(prop(crd, "spec.clusterName"), "maxLength", 0), 40);
    expect_default(crd, "spec.external", "false");
    expect_default(crd, "spec.inplaceReconfigure", "false");
    expect_default(crd, "spec.ha.enabled", "false");
    expect_default(crd, "spec.ha.backups", "1");
    assert_int_equal(json_get_int(prop(crd, "spec.ha.backups"), "minimum", 0), 1);
    expect_default(crd, "spec.persistence.enabled", "true");
    expect_default(crd, "spec.metrics.enabled", "false");
    expect_preserve(crd, "spec.slurmctld");
    expect_preserve(crd, "spec.reconfigure");
    expect_preserve(crd, "spec.service.spec");
    const char *const ext_req[] = {"host", "port"};
    expect_strings(json_get(prop(crd, "spec.externalConfig"), "required"), ext_req, 2);
    expect_str(prop(crd, "spec.accountingRef.namespace"), "type", "string");
    const char *const cm_lists[] = {"configFileRefs", "prologScriptRefs", "epilogScriptRefs",
                                    "prologSlurmctldScriptRefs", "epilogSlurmctldScriptRefs"};
    for (size_t i = 0; i < sizeof(cm_lists) / sizeof(cm_lists[0]); i++) {
        char path[96];
        snprintf(path, sizeof(path), "spec.%s", cm_lists[i]);
        expect_str(json_get(prop(crd, path), "items.properties.namespace"), "type", "string");
    }
    cJSON_Delete(crd);

    crd = load("loginsets");
    expect_default(crd, "spec.replicas", "1");
    assert_non_null(rule_with(prop(crd, "spec.controllerRef"), "self == oldSelf"));
    expect_str(prop(crd, "spec.controllerRef.namespace"), "type", "string");
    assert_non_null(rule_with(prop(crd, "spec.sssdConfRef"), "self.name != ''"));
    expect_preserve(crd, "spec.login");
    expect_preserve(crd, "spec.initconf");
    cJSON_Delete(crd);

    crd = load("restapis");
    expect_default(crd, "spec.replicas", "1");
    expect_preserve(crd, "spec.slurmrestd");
    cJSON_Delete(crd);

    crd = load("restapis");
    expect_str(prop(crd, "spec.controllerRef.namespace"), "type", "string");
    cJSON_Delete(crd);

    crd = load("accountings");
    spec = prop(crd, "spec");
    assert_non_null(rule_with(spec, "has(self.slurmKeyRef) : true"));
    assert_non_null(rule_with(spec, "has(self.externalConfig) : true"));
    assert_non_null(rule_with(spec, "oldSelf.jwtKeyRef"));
    expect_default(crd, "spec.storageConfig.port", "3306");
    expect_default(crd, "spec.storageConfig.database", "\"slurm_acct_db\"");
    const char *const st_req[] = {"host", "passwordKeyRef"};
    expect_strings(json_get(prop(crd, "spec.storageConfig"), "required"), st_req, 2);
    expect_preserve(crd, "spec.slurmdbd");
    cJSON_Delete(crd);

    crd = load("tokens");
    spec = prop(crd, "spec");
    assert_non_null(rule_with(spec, "has(self.jwtKeyRef) || has(self.jwtHs256KeyRef)"));
    assert_non_null(rule_with(spec, "oldSelf.jwtKeyRef"));
    expect_default(crd, "spec.lifetime", "\"15m\"");
    expect_default(crd, "spec.refresh", "true");
    expect_str(prop(crd, "status.issuedAt"), "format", "date-time");
    expect_str(prop(crd, "spec.jwtKeyRef.namespace"), "type", "string");
    expect_str(prop(crd, "spec.jwtHs256KeyRef.namespace"), "type", "string");
    cJSON_Delete(crd);
}

int main(void)
{
    mem_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_common),
        cmocka_unit_test(test_structural),
        cmocka_unit_test(test_descriptions),
        cmocka_unit_test(test_nodeset),
        cmocka_unit_test(test_other_kinds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
