#include "reconcilers/slurmconf.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/err.h"
#include "core/json.h"

/* The generated files are small and built from our own inputs, so the
 * buffer has no cap; an append can then only fail by aborting on OOM. */
static void put(buf_t *b, const char *fmt, ...) OP_PRINTF(2, 3);
static void put(buf_t *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = xvasprintf(fmt, ap);
    va_end(ap);
    if (buf_puts(b, s) != 0)
        abort();
    free(s);
}

static void section(buf_t *b, const char *title)
{
    put(b, "#\n### %s ###\n", title);
}

static char *finish(buf_t *b)
{
    char *s = buf_detach(b, NULL);
    return s ? s : xstrdup("");
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* ---- merged config ---------------------------------------------------- */

typedef struct strvec {
    char **v;
    size_t n, cap;
} strvec;

static void sv_push(strvec *s, char *str)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 8;
        s->v = xrealloc(s->v, s->cap * sizeof(*s->v));
    }
    s->v[s->n++] = str;
}

static void sv_free(strvec *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->v[i]);
    free(s->v);
    s->v = NULL;
    s->n = s->cap = 0;
}

static int sv_has(const strvec *s, const char *str)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->v[i], str) == 0)
            return 1;
    return 0;
}

static char *lower_dup(const char *s, size_t n)
{
    char *o = xstrndup(s, n);
    for (char *p = o; *p; p++)
        *p = (char)tolower((unsigned char)*p);
    return o;
}

/* The lower-cased text before the first '=' of an option. */
static char *opt_name(const char *opt)
{
    const char *eq = strchr(opt, '=');
    return lower_dup(opt, eq ? (size_t)(eq - opt) : strlen(opt));
}

static const char *trim(const char *s, size_t *len)
{
    size_t n = *len;
    while (n && (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r' || *s == '\v' || *s == '\f'))
        s++, n--;
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\n' || s[n - 1] == '\r' ||
                 s[n - 1] == '\v' || s[n - 1] == '\f'))
        n--;
    *len = n;
    return s;
}

/* Parsed "key=value" lines of an extraConf: keys lower-cased, last wins. */
typedef struct kvs {
    strvec keys, vals;
} kvs;

static void kvs_set(kvs *kv, const char *logical, size_t len)
{
    const char *l = trim(logical, &len);
    const char *eq = memchr(l, '=', len);
    if (len == 0 || eq == NULL)
        return;
    size_t kl = (size_t)(eq - l), vl = len - kl - 1;
    const char *k = trim(l, &kl);
    const char *v = trim(eq + 1, &vl);
    if (kl == 0 || vl == 0 || memchr(v, ' ', vl) || memchr(v, '\n', vl))
        return;
    char *key = lower_dup(k, kl);
    for (size_t i = 0; i < kv->keys.n; i++)
        if (strcmp(kv->keys.v[i], key) == 0) {
            free(kv->vals.v[i]);
            kv->vals.v[i] = xstrndup(v, vl);
            free(key);
            return;
        }
    sv_push(&kv->keys, key);
    sv_push(&kv->vals, xstrndup(v, vl));
}

static void parse_conf(const char *text, kvs *kv)
{
    buf_t logical;
    buf_init(&logical, BUF_UNLIMITED);
    const char *p = text ? text : "";
    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        const char *next = nl ? nl + 1 : p + n;
        if (n && p[n - 1] == '\r')
            n--;
        const char *hash = memchr(p, '#', n);
        if (hash)
            n = (size_t)(hash - p);
        while (n && (p[n - 1] == ' ' || p[n - 1] == '\t'))
            n--;
        if (n) {
            if (p[n - 1] == '\\') {
                if (buf_append(&logical, p, n - 1) != 0)
                    abort();
            } else {
                if (buf_append(&logical, p, n) != 0)
                    abort();
                kvs_set(kv, buf_cstr(&logical), logical.len);
                buf_reset(&logical);
            }
        }
        p = next;
    }
    if (logical.len)
        kvs_set(kv, buf_cstr(&logical), logical.len);
    buf_free(&logical);
}

char *sconf_merged_config(const char *extra, const sconf_merge *keys, size_t n_keys)
{
    kvs kv = {0};
    parse_conf(extra, &kv);

    /* Emit in bytewise order of the key names. */
    const sconf_merge **order = xmalloc((n_keys ? n_keys : 1) * sizeof(*order));
    for (size_t i = 0; i < n_keys; i++)
        order[i] = &keys[i];
    for (size_t i = 1; i < n_keys; i++)
        for (size_t j = i; j > 0 && strcmp(order[j - 1]->key, order[j]->key) > 0; j--) {
            const sconf_merge *t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }

    buf_t b;
    buf_init(&b, BUF_UNLIMITED);
    for (size_t i = 0; i < n_keys; i++) {
        const sconf_merge *m = order[i];
        char *lk = lower_dup(m->key, strlen(m->key));
        const char *user = NULL;
        for (size_t j = 0; j < kv.keys.n; j++)
            if (strcmp(kv.keys.v[j], lk) == 0)
                user = kv.vals.v[j];
        free(lk);
        if (user == NULL)
            continue;
        strvec vals = {0}, seen = {0};
        for (size_t j = 0; j < m->n_options; j++) {
            if (!sv_has(&vals, m->options[j]))
                sv_push(&vals, xstrdup(m->options[j]));
            char *nm = opt_name(m->options[j]);
            if (sv_has(&seen, nm))
                free(nm);
            else
                sv_push(&seen, nm);
        }
        const char *p = user;
        while (1) {
            const char *comma = strchr(p, ',');
            size_t n = comma ? (size_t)(comma - p) : strlen(p);
            if (n) {
                char *opt = xstrndup(p, n);
                char *nm = opt_name(opt);
                if (sv_has(&seen, nm)) {
                    free(nm);
                } else {
                    char *low = lower_dup(opt, n);
                    if (sv_has(&vals, low))
                        free(low);
                    else
                        sv_push(&vals, low);
                    sv_push(&seen, nm);
                }
                free(opt);
            }
            if (!comma)
                break;
            p = comma + 1;
        }
        qsort(vals.v, vals.n, sizeof(*vals.v), cmp_str);
        if (b.len)
            put(&b, "\n");
        put(&b, "%s=", m->key);
        for (size_t j = 0; j < vals.n; j++)
            put(&b, "%s%s", j ? "," : "", vals.v[j]);
        sv_free(&vals);
        sv_free(&seen);
    }
    free(order);
    sv_free(&kv.keys);
    sv_free(&kv.vals);
    return finish(&b);
}

/* ---- slurm.conf --------------------------------------------------------- */

/* Whether the extraConf text sets key (case-insensitively, as Slurm reads
 * it), by the same line rules as the merged config. */
static int user_sets(const char *extra, const char *key)
{
    kvs kv = {0};
    parse_conf(extra, &kv);
    char *lk = lower_dup(key, strlen(key));
    int found = sv_has(&kv.keys, lk);
    free(lk);
    sv_free(&kv.keys);
    sv_free(&kv.vals);
    return found;
}

static const char *const ctld_params[] = {"enable_configless", "reconfig_on_restart"};
static const char *const auth_info[] = {"use_client_ids"};

/* Accounting lines: the in-cluster Service, or the external endpoint of an
 * external Accounting (whose Service does not exist). */
static void accounting_lines(buf_t *b, const cJSON *controller, const cJSON *accounting)
{
    section(b, "ACCOUNTING");
    if (accounting == NULL) {
        put(b, "AccountingStorageType=accounting_storage/none\n");
        return;
    }
    put(b, "AccountingStorageType=accounting_storage/slurmdbd\n");
    if (clc_is_external(accounting)) {
        put(b, "AccountingStorageHost=%s\n", json_get_str_or(accounting, "spec.externalConfig.host", ""));
        put(b, "AccountingStoragePort=%lld\n", json_get_int(accounting, "spec.externalConfig.port", 0));
    } else {
        /* Short name in the Controller's own namespace (Slinky's text); an
         * Accounting of another namespace (accountingRef.namespace) is reached
         * through <name>-accounting.<namespace>. */
        const char *ans = json_get_str_or(accounting, "metadata.namespace", "");
        if (*ans && strcmp(ans, json_get_str_or(controller, "metadata.namespace", "")) != 0)
            put(b, "AccountingStorageHost=%s-accounting.%s\n",
                json_get_str_or(accounting, "metadata.name", ""), ans);
        else
            put(b, "AccountingStorageHost=%s-accounting\n", json_get_str_or(accounting, "metadata.name", ""));
        put(b, "AccountingStoragePort=%d\n", CLC_SLURMDBD_PORT);
    }
}

long long sconf_nodeset_fleet(const cJSON *nodeset)
{
    const char *mode = json_get_str_or(nodeset, "spec.scalingMode", "StatefulSet");
    long long n = strcmp(mode, "DaemonSet") == 0 ? json_get_int(nodeset, "status.desired", 0)
                                                 : json_get_int(nodeset, "spec.replicas", 1);
    return n > 0 ? n : 0;
}

int sconf_tree_width(long long fleet)
{
    long long w = SCONF_TREE_WIDTH_MIN;
    while (w < 65533 && w + w * w + w * w * w < fleet)
        w++;
    return (int)w;
}

/* What a fleet past SCONF_LARGE_FLEET needs (docs/compat.md#large-fleets):
 * RPCs that wait on a busy slurmctld (a registration storm, a fan-out to
 * thousands of slurmd) outlive Slurm's 10 s default and are retried, which
 * adds to the load; and a tree wide enough that a message reaches every
 * node in three hops. Sized by max_nodes, the MaxNodeCount the fleet gets,
 * not by the fleet itself: that value moves in powers of two, so scaling
 * rewrites these lines (and reconfigures slurmctld) only when it does. A
 * key of the user's extraConf wins. */
static void large_fleet_lines(buf_t *b, long long max_nodes, const char *extra)
{
    if (max_nodes <= SCONF_LARGE_FLEET)
        return;
    put(b, "# a large fleet\n");
    if (!user_sets(extra, "MessageTimeout"))
        put(b, "MessageTimeout=%d\n", SCONF_LARGE_MESSAGE_TIMEOUT);
    if (!user_sets(extra, "TreeWidth"))
        put(b, "TreeWidth=%d\n", sconf_tree_width(max_nodes));
}

long long sconf_max_node_count(long long fleet, long long current)
{
    if (fleet < 0)
        fleet = 0;
    if (fleet > SCONF_MAX_NODES_LIMIT)
        fleet = SCONF_MAX_NODES_LIMIT;
    long long want = fleet + (fleet + 3) / 4, v = SCONF_MAX_NODES_MIN;
    while (v < want && v < SCONF_MAX_NODES_LIMIT)
        v *= 2;
    if (current > v)
        v = current;
    return v > SCONF_MAX_NODES_LIMIT ? SCONF_MAX_NODES_LIMIT : v;
}

/* The MaxNodeCount of the slurm.conf stored in ConfigMap <name>-config (the
 * first such line, ours; 0 when there is none). */
static long long stored_max_nodes(const char *name, const clc_env *env)
{
    char *cm_name = xasprintf("%s-config", name);
    const cJSON *cm = clc_get(env, "ConfigMap", cm_name);
    free(cm_name);
    const cJSON *conf = json_child(json_child(cm, "data"), SCONF_SLURM_CONF);
    if (!cJSON_IsString(conf))
        return 0;
    static const char key[] = "\nMaxNodeCount=";
    const char *p = strstr(conf->valuestring, key);
    if (p == NULL)
        return 0;
    p += strlen(key);
    long long v = 0;
    while (*p >= '0' && *p <= '9' && v <= SCONF_MAX_NODES_LIMIT)
        v = v * 10 + (*p++ - '0');
    return v;
}

static const cJSON *find_accounting(const cJSON *controller, const clc_env *env)
{
    const char *ref = json_get_str(controller, "spec.accountingRef.name");
    return ref ? clc_get(env, "Accounting", ref) : NULL;
}

char *sconf_slurm_conf_external(const cJSON *controller, const cJSON *accounting)
{
    buf_t b;
    buf_init(&b, BUF_UNLIMITED);
    char *cluster = clc_cluster_name(controller);
    section(&b, "GENERAL");
    put(&b, "ClusterName=%s\n", cluster);
    put(&b, "SlurmUser=%s\n", CLC_SLURM_USER);
    put(&b, "SlurmctldHost=%s\n", json_get_str_or(controller, "spec.externalConfig.host", ""));
    put(&b, "SlurmctldPort=%lld\n", json_get_int(controller, "spec.externalConfig.port", 0));
    section(&b, "PLUGINS & PARAMETERS");
    put(&b, "AuthType=auth/slurm\nCredType=cred/slurm\nAuthAltTypes=auth/jwt\n");
    accounting_lines(&b, controller, accounting);
    free(cluster);
    return finish(&b);
}

/* The file names (data keys) of the ConfigMaps listed in spec.<field>,
 * appended to names. */
static int script_names(const cJSON *controller, const char *field, const clc_env *env, strvec *names,
                        char **why)
{
    const cJSON *refs = json_child(json_child(controller, "spec"), field);
    if (!cJSON_IsArray(refs))
        return 0;
    for (const cJSON *r = refs->child; r; r = r->next) {
        const char *name = json_get_str(r, "name");
        const cJSON *cm = clc_get(env, "ConfigMap", name);
        if (cm == NULL)
            return clc_fail(why, OP_ENOTFOUND, "ConfigMap %s (%s) not found", name ? name : "", field);
        const cJSON *data = json_child(cm, "data");
        if (cJSON_IsObject(data))
            for (const cJSON *kv = data->child; kv; kv = kv->next)
                sv_push(names, xstrdup(kv->string));
    }
    qsort(names->v, names->n, sizeof(*names->v), cmp_str);
    return 0;
}

typedef struct ns_item {
    const char *crname;
    const cJSON *ns;
} ns_item;

static int cmp_ns(const void *a, const void *b)
{
    return strcmp(((const ns_item *)a)->crname, ((const ns_item *)b)->crname);
}

int sconf_slurm_conf(const cJSON *controller, const cJSON *const *nodesets, size_t n_nodesets,
                     const clc_env *env, char **out, char **why)
{
    *out = NULL;
    const cJSON *accounting = find_accounting(controller, env);
    if (clc_is_external(controller)) {
        *out = sconf_slurm_conf_external(controller, accounting);
        return 0;
    }
    static const char *const fields[4] = {"prologSlurmctldScriptRefs", "epilogSlurmctldScriptRefs",
                                          "prologScriptRefs", "epilogScriptRefs"};
    strvec scripts[4] = {{0}};
    int rc = 0;
    for (int i = 0; i < 4 && rc == 0; i++)
        rc = script_names(controller, fields[i], env, &scripts[i], why);
    if (rc) {
        for (int i = 0; i < 4; i++)
            sv_free(&scripts[i]);
        return rc;
    }

    const char *name = json_get_str_or(controller, "metadata.name", "");
    const char *ns = json_get_str_or(controller, "metadata.namespace", "");
    const char *extra = json_get_str_or(controller, "spec.extraConf", "");
    char *cluster = clc_cluster_name(controller);
    int jwks = cJSON_IsObject(json_get(controller, "spec.jwksKeyRef"));
    const char *alt_params[2] = {SCONF_JWT_KEY_PARAM, SCONF_JWKS_PARAM};

    buf_t b;
    buf_init(&b, BUF_UNLIMITED);
    section(&b, "GENERAL");
    put(&b, "ClusterName=%s\n", cluster);
    put(&b, "SlurmUser=%s\n", CLC_SLURM_USER);
    int replicas = clc_controller_replicas(controller);
    for (int i = 0; i < replicas; i++)
        put(&b, "SlurmctldHost=%s-controller-%d(%s-controller-%d.%s-controller-internal.%s)\n", name, i, name,
            i, name, ns);
    put(&b, "SlurmctldPort=%d\n", CLC_SLURMCTLD_PORT);
    put(&b, "SlurmctldAddr=%s-controller.%s\n", name, ns);
    put(&b, "StateSaveLocation=%s/%s\n", SCONF_SPOOL_DIR, cluster);
    put(&b, "SlurmdUser=root\n");
    put(&b, "SlurmdPort=%d\n", CLC_SLURMD_PORT);
    put(&b, "SlurmdSpoolDir=/var/spool/slurmd\n");
    /* Dynamic nodes need a non-zero MaxNodeCount, and one at least the fleet:
     * slurmctld refuses a registration past it. */
    long long fleet = 0;
    for (size_t i = 0; i < n_nodesets; i++) {
        const char *ref = json_get_str(nodesets[i], "spec.controllerRef.name");
        if (ref && strcmp(ref, name) == 0)
            fleet += sconf_nodeset_fleet(nodesets[i]);
    }
    long long max_nodes = sconf_max_node_count(fleet, stored_max_nodes(name, env));
    if (!user_sets(extra, "MaxNodeCount"))
        put(&b, "MaxNodeCount=%lld\n", max_nodes);

    section(&b, "LOGGING");
    put(&b, "SlurmctldLogFile=/var/log/slurm/slurmctld.log\n");
    put(&b, "SlurmSchedLogFile=/var/log/slurm/slurmctld.log\n");
    put(&b, "SlurmdLogFile=/var/log/slurm/slurmd.log\n");

    section(&b, "PLUGINS & PARAMETERS");
    put(&b, "AuthType=auth/slurm\n");
    put(&b, "CredType=cred/slurm\n");
    put(&b, "AuthAltTypes=auth/jwt\n");
    put(&b, "AuthAltParameters=%s%s%s\n", SCONF_JWT_KEY_PARAM, jwks ? "," : "", jwks ? SCONF_JWKS_PARAM : "");
    put(&b, "AuthInfo=use_client_ids\n");
    put(&b, "SlurmctldParameters=enable_configless,reconfig_on_restart\n");
    if (json_get_bool(controller, "spec.metrics.enabled", 0))
        put(&b, "MetricsType=metrics/openmetrics\n");

    accounting_lines(&b, controller, accounting);

    if (scripts[0].n || scripts[1].n) {
        section(&b, "SLURMCTLD PROLOG & EPILOG");
        for (size_t i = 0; i < scripts[0].n; i++)
            put(&b, "PrologSlurmctld=%s/%s\n", SCONF_ETC_DIR, scripts[0].v[i]);
        for (size_t i = 0; i < scripts[1].n; i++)
            put(&b, "EpilogSlurmctld=%s/%s\n", SCONF_ETC_DIR, scripts[1].v[i]);
    }
    if (scripts[2].n || scripts[3].n) {
        section(&b, "PROLOG & EPILOG");
        for (size_t i = 0; i < scripts[2].n; i++)
            put(&b, "Prolog=%s\n", scripts[2].v[i]);
        for (size_t i = 0; i < scripts[3].n; i++)
            put(&b, "Epilog=%s\n", scripts[3].v[i]);
    }

    ns_item *items = xmalloc((n_nodesets ? n_nodesets : 1) * sizeof(*items));
    size_t n_items = 0;
    for (size_t i = 0; i < n_nodesets; i++) {
        const char *ref = json_get_str(nodesets[i], "spec.controllerRef.name");
        if (ref == NULL || strcmp(ref, name) != 0)
            continue;
        items[n_items].crname = json_get_str_or(nodesets[i], "metadata.name", "");
        items[n_items].ns = nodesets[i];
        n_items++;
    }
    qsort(items, n_items, sizeof(*items), cmp_ns);
    if (n_items) {
        section(&b, "NODESET & PARTITION");
        large_fleet_lines(&b, max_nodes, extra);
        for (size_t i = 0; i < n_items; i++) {
            char nb[256];
            const char *n = clc_nodeset_name(items[i].ns, nb, sizeof(nb));
            put(&b, "NodeSet=%s Feature=%s\n", n, n);
            if (json_get_bool(items[i].ns, "spec.partition.enabled", 0))
                put(&b, "PartitionName=%s Nodes=%s %s\n", n, n,
                    json_get_str_or(items[i].ns, "spec.partition.config", ""));
        }
    }
    free(items);

    if (*extra) {
        section(&b, "EXTRA CONFIG");
        put(&b, "%s\n", extra);
    }
    sconf_merge merge[3] = {
        {"SlurmctldParameters", ctld_params, 2},
        {"AuthInfo", auth_info, 1},
        {"AuthAltParameters", alt_params, jwks ? 2 : 1},
    };
    char *merged = sconf_merged_config(extra, merge, 3);
    if (*merged) {
        section(&b, "MERGED CONFIG");
        put(&b, "%s\n", merged);
    }
    free(merged);
    free(cluster);
    for (int i = 0; i < 4; i++)
        sv_free(&scripts[i]);
    *out = finish(&b);
    return 0;
}

/* The section headers as section() writes them. */
#define GENERAL_END "\n#\n### LOGGING ###\n"
#define NODESET_HEAD "#\n### NODESET & PARTITION ###\n"

char *sconf_without_nodesets(const char *conf)
{
    buf_t b;
    buf_init(&b, BUF_UNLIMITED);
    const char *p = conf;
    /* Our MaxNodeCount line is in GENERAL, which has only generated text; a
     * MaxNodeCount of the user's is in EXTRA CONFIG and stays. */
    const char *gend = strstr(p, GENERAL_END);
    const char *m = strstr(p, "\nMaxNodeCount=");
    if (m && gend && m < gend) {
        m++;
        const char *eol = strchr(m, '\n');
        if (buf_append(&b, p, (size_t)(m - p)) != 0)
            abort();
        p = eol ? eol + 1 : m + strlen(m);
    }
    /* The NodeSet section comes before every section of user text. */
    const char *h = strstr(p, "\n" NODESET_HEAD);
    if (h) {
        h++;
        const char *end = strstr(h + strlen(NODESET_HEAD), "\n#\n### ");
        if (buf_append(&b, p, (size_t)(h - p)) != 0)
            abort();
        p = end ? end + 1 : h + strlen(h);
    }
    put(&b, "%s", p);
    return finish(&b);
}

char *sconf_cgroup_conf(void)
{
    return xstrdup("CgroupPlugin=cgroup/v2\nIgnoreSystemd=yes\n");
}

int sconf_config_files_have(const cJSON *controller, const clc_env *env, const char *file)
{
    const cJSON *refs = json_get(controller, "spec.configFileRefs");
    if (!cJSON_IsArray(refs))
        return 0;
    for (const cJSON *r = refs->child; r; r = r->next) {
        const cJSON *cm = clc_get(env, "ConfigMap", json_get_str(r, "name"));
        if (json_child(json_child(cm, "data"), file))
            return 1;
    }
    return 0;
}

/* ---- slurmdbd.conf ------------------------------------------------------ */

char *sconf_slurmdbd_conf(const cJSON *accounting, const char *storage_pass)
{
    const char *name = json_get_str_or(accounting, "metadata.name", "");
    const char *extra = json_get_str_or(accounting, "spec.extraConf", "");
    int jwks = cJSON_IsObject(json_get(accounting, "spec.jwksKeyRef"));
    long long port = json_get_int(accounting, "spec.storageConfig.port", 0);
    const char *db = json_get_str_or(accounting, "spec.storageConfig.database", "");
    const char *alt_params[2] = {SCONF_JWT_KEY_PARAM, SCONF_JWKS_PARAM};

    buf_t b;
    buf_init(&b, BUF_UNLIMITED);
    section(&b, "GENERAL");
    put(&b, "DbdHost=%s-accounting-0\n", name);
    put(&b, "DbdPort=%d\n", CLC_SLURMDBD_PORT);
    put(&b, "SlurmUser=%s\n", CLC_SLURM_USER);
    section(&b, "PLUGINS & PARAMETERS");
    put(&b, "AuthType=auth/slurm\n");
    put(&b, "AuthAltTypes=auth/jwt\n");
    put(&b, "AuthAltParameters=%s%s%s\n", SCONF_JWT_KEY_PARAM, jwks ? "," : "", jwks ? SCONF_JWKS_PARAM : "");
    put(&b, "AuthInfo=use_client_ids\n");
    section(&b, "STORAGE");
    put(&b, "StorageType=accounting_storage/mysql\n");
    put(&b, "StorageHost=%s\n", json_get_str_or(accounting, "spec.storageConfig.host", ""));
    put(&b, "StoragePort=%lld\n", port > 0 ? port : 3306);
    put(&b, "StorageUser=%s\n", json_get_str_or(accounting, "spec.storageConfig.username", ""));
    put(&b, "StorageLoc=%s\n", *db ? db : "slurm_acct_db");
    put(&b, "StoragePass=%s\n", storage_pass ? storage_pass : "");
    section(&b, "LOGGING");
    put(&b, "LogFile=/dev/null\n");
    if (*extra) {
        section(&b, "EXTRA CONFIG");
        put(&b, "%s\n", extra);
    }
    sconf_merge merge[2] = {
        {"AuthInfo", auth_info, 1},
        {"AuthAltParameters", alt_params, jwks ? 2 : 1},
    };
    char *merged = sconf_merged_config(extra, merge, 2);
    if (*merged) {
        section(&b, "MERGED CONFIG");
        put(&b, "%s\n", merged);
    }
    free(merged);
    return finish(&b);
}

/* ---- sshd ---------------------------------------------------------------- */

char *sconf_login_sshd_config(const char *extra)
{
    buf_t b;
    buf_init(&b, BUF_UNLIMITED);
    section(&b, "GENERAL");
    put(&b, "Include /etc/ssh/sshd_config.d/*.conf\n");
    put(&b, "UsePAM yes\n");
    put(&b, "X11Forwarding yes\n");
    put(&b, "Subsystem sftp internal-sftp\n");
    section(&b, "EXTRA CONFIG");
    put(&b, "%s\n", extra ? extra : "");
    return finish(&b);
}

char *sconf_worker_sshd_config(const char *extra)
{
    buf_t b;
    buf_init(&b, BUF_UNLIMITED);
    section(&b, "GENERAL");
    put(&b, "Include /etc/ssh/sshd_config.d/*.conf\n");
    put(&b, "UsePAM yes\n");
    put(&b, "Subsystem sftp internal-sftp\n");
    put(&b, "AuthenticationMethods publickey password\n");
    section(&b, "EXTRA CONFIG");
    put(&b, "%s\n", extra ? extra : "");
    return finish(&b);
}

char *sconf_authorized_keys(const char *keys)
{
    buf_t b;
    buf_init(&b, BUF_UNLIMITED);
    put(&b, "#\n### SLINKY ###\n%s\n", keys ? keys : "");
    return finish(&b);
}
