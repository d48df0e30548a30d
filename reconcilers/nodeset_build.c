#include "reconcilers/nodeset_build.h"

#include <ctype.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/buf.h"
#include "core/crypto.h"
#include "core/err.h"
#include "core/json.h"
#include "core/mem.h"
#include "core/quantity.h"
#include "core/rfc3339.h"
#include "reconcilers/cluster_common.h"
#include "reconcilers/podtemplate.h"

#define LAST_APPLIED "kubectl.kubernetes.io/last-applied-configuration"

/* ---- small helpers ----------------------------------------------------------------------------- */

static const char *str_or(const char *s, const char *dflt)
{
    return s ? s : dflt;
}

static const char *meta_str(const cJSON *o, const char *field)
{
    const char *s = json_get_str(json_child(o, "metadata"), field);
    return s ? s : "";
}

/* String value of key in o; keys may contain dots (labels, annotations). */
static const char *child_str(const cJSON *o, const char *key)
{
    const cJSON *v = json_child(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static const cJSON *spec_of(const cJSON *nodeset)
{
    return json_child(nodeset, "spec");
}

static const char *controller_name(const cJSON *nodeset)
{
    return json_get_str_or(nodeset, "spec.controllerRef.name", "");
}

static int is_nonempty_str(const cJSON *v)
{
    return cJSON_IsString(v) && v->valuestring[0] != '\0';
}

static int is_nonempty_obj(const cJSON *v)
{
    return cJSON_IsObject(v) && v->child != NULL;
}

static void set_if_absent(cJSON *o, const char *key, cJSON *item)
{
    if (json_child(o, key))
        cJSON_Delete(item);
    else
        cJSON_AddItemToObject(o, key, item);
}

/* Append a copy of every string pair of src to dst where dst lacks the key. */
static void add_missing_pairs(cJSON *dst, const cJSON *src, const char *skip)
{
    for (const cJSON *kv = cJSON_IsObject(src) ? src->child : NULL; kv; kv = kv->next)
        if (cJSON_IsString(kv) && !json_child(dst, kv->string) &&
            (skip == NULL || strcmp(kv->string, skip) != 0))
            json_set_str(dst, kv->string, kv->valuestring);
}

static cJSON *str_array(const char *const *v, size_t n)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; i < n; i++)
        cJSON_AddItemToArray(a, cJSON_CreateString(v[i]));
    return a;
}

/* Appends to unlimited buffers: they cannot fail (allocation aborts). */
static void put(buf_t *b, const char *s)
{
    if (buf_puts(b, s) != 0)
        abort();
}

static void putch(buf_t *b, char c)
{
    if (buf_putc(b, c) != 0)
        abort();
}

static void errf(char *err, size_t errlen, const char *fmt, ...) OP_PRINTF(3, 4);
static void errf(char *err, size_t errlen, const char *fmt, ...)
{
    if (err == NULL || errlen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* ---- defaults ---------------------------------------------------------------------------------- */

cJSON *nsb_with_defaults(const cJSON *nodeset)
{
    cJSON *o = cJSON_Duplicate(nodeset, 1);
    if (o == NULL)
        o = cJSON_CreateObject();
    cJSON *spec = json_obj_ensure(o, "spec");

    set_if_absent(spec, "replicas", cJSON_CreateNumber(1));
    set_if_absent(spec, "scalingMode", cJSON_CreateString("StatefulSet"));

    cJSON *us = json_obj_ensure(spec, "updateStrategy");
    set_if_absent(us, "type", cJSON_CreateString("RollingUpdate"));
    if (strcmp(json_get_str_or(us, "type", ""), "RollingUpdate") == 0) {
        cJSON *ru = json_obj_ensure(us, "rollingUpdate");
        set_if_absent(ru, "maxUnavailable", cJSON_CreateString("25%"));
    }
    cJSON *su = cJSON_GetObjectItemCaseSensitive(us, "scheduledUpdate");
    if (cJSON_IsObject(su))
        set_if_absent(su, "duration", cJSON_CreateString("30m"));

    set_if_absent(spec, "revisionHistoryLimit", cJSON_CreateNumber(0));
    cJSON *pvc = json_obj_ensure(spec, "persistentVolumeClaimRetentionPolicy");
    set_if_absent(pvc, "whenDeleted", cJSON_CreateString("Retain"));
    set_if_absent(pvc, "whenScaled", cJSON_CreateString("Retain"));
    set_if_absent(spec, "minReadySeconds", cJSON_CreateNumber(0));
    set_if_absent(spec, "ordinalPadding", cJSON_CreateNumber(0));
    set_if_absent(spec, "pinToNode", cJSON_CreateFalse());
    set_if_absent(spec, "workloadDisruptionProtection", cJSON_CreateTrue());
    set_if_absent(spec, "pruneSlurmNodeRecords", cJSON_CreateString("Never"));
    set_if_absent(spec, "oversubscribeNode", cJSON_CreateFalse());

    cJSON *ssh = cJSON_GetObjectItemCaseSensitive(spec, "ssh");
    if (cJSON_IsObject(ssh))
        set_if_absent(ssh, "enabled", cJSON_CreateFalse());
    cJSON *part = cJSON_GetObjectItemCaseSensitive(spec, "partition");
    if (cJSON_IsObject(part))
        set_if_absent(part, "enabled", cJSON_CreateFalse());
    return o;
}

enum nsb_mode nsb_mode_of(const cJSON *nodeset)
{
    const char *m = json_get_str_or(nodeset, "spec.scalingMode", "StatefulSet");
    return strcmp(m, "DaemonSet") == 0 ? NSB_DAEMONSET : NSB_STATEFULSET;
}

int nsb_replicas(const cJSON *nodeset)
{
    long long r = json_get_int(nodeset, "spec.replicas", 1);
    return r < 0 ? 0 : r > NSB_REPLICAS_MAX ? NSB_REPLICAS_MAX : (int)r;
}

static int padding_of(const cJSON *nodeset)
{
    long long p = json_get_int(nodeset, "spec.ordinalPadding", 0);
    /* A width beyond what an int32 ordinal can use only makes names longer
     * than Kubernetes accepts; cap it so formatting stays bounded. */
    return p < 0 ? 0 : p > 64 ? 64 : (int)p;
}

static int spec_bool(const cJSON *nodeset, const char *path, int dflt)
{
    return json_get_bool(spec_of(nodeset), path, dflt);
}

/* ---- identity ---------------------------------------------------------------------------------- */

char *nsb_padded_ordinal(int padding, int ordinal)
{
    return xasprintf("%0*d", padding < 0 ? 0 : padding, ordinal);
}

char *nsb_pod_name(const char *nss, int padding, int ordinal)
{
    return xasprintf("%s-%0*d", nss, padding < 0 ? 0 : padding, ordinal);
}

int nsb_split_pod_name(const char *pod_name, size_t *parent_len)
{
    if (pod_name == NULL)
        return -1;
    size_t len = strlen(pod_name), i = len;
    while (i > 0 && isdigit((unsigned char)pod_name[i - 1]))
        i--;
    /* Needs at least one digit, preceded by '-'. The parent may be empty
     * ("-5"), as the regular expression (.*)-([0-9]+)$ allows. */
    if (i == len || i == 0 || pod_name[i - 1] != '-')
        return -1;
    long long v = 0;
    for (size_t k = i; k < len; k++) {
        v = v * 10 + (pod_name[k] - '0');
        if (v > INT32_MAX)
            return -1;
    }
    if (parent_len)
        *parent_len = i - 1;
    return (int)v;
}

int nsb_parse_ordinal(const char *pod_name, const char *nss)
{
    size_t plen = 0;
    int ord = nsb_split_pod_name(pod_name, &plen);
    if (ord < 0 || nss == NULL || strlen(nss) != plen || strncmp(pod_name, nss, plen) != 0)
        return -1;
    return ord;
}

static const char *hostname_prefix(const cJSON *nodeset)
{
    const char *h = json_get_str(nodeset, "spec.template.spec.hostname");
    return h && *h ? h : NULL;
}

char *nsb_statefulset_pod_name(const cJSON *nodeset, int ordinal)
{
    return nsb_pod_name(meta_str(nodeset, "name"), padding_of(nodeset), ordinal);
}

char *nsb_statefulset_hostname(const cJSON *nodeset, int ordinal)
{
    const char *prefix = hostname_prefix(nodeset);
    int pad = padding_of(nodeset);
    if (prefix)
        return xasprintf("%s%0*d", prefix, pad, ordinal);
    return nsb_pod_name(meta_str(nodeset, "name"), pad, ordinal);
}

char *nsb_daemonset_hostname(const char *node_name, const char *override)
{
    if (override && *override)
        return xstrdup(override);
    node_name = str_or(node_name, "");
    const char *dot = strchr(node_name, '.');
    return dot ? xstrndup(node_name, (size_t)(dot - node_name)) : xstrdup(node_name);
}

char *nsb_daemonset_hostname_of_node(const cJSON *node)
{
    const cJSON *ann = json_get(node, "metadata.annotations");
    return nsb_daemonset_hostname(meta_str(node, "name"), child_str(ann, NSB_ANN_HOSTNAME_OVERRIDE));
}

char *nsb_slurm_nodeset_name(const cJSON *nodeset)
{
    const char *h = hostname_prefix(nodeset);
    if (h == NULL)
        return xstrdup(meta_str(nodeset, "name"));
    /* The prefix is a single word ("cpu-"); take its first whitespace-separated
     * field, then trim '-' on both ends. */
    while (isspace((unsigned char)*h))
        h++;
    size_t n = 0;
    while (h[n] && !isspace((unsigned char)h[n]))
        n++;
    while (n > 0 && *h == '-')
        h++, n--;
    while (n > 0 && h[n - 1] == '-')
        n--;
    return xstrndup(h, n);
}

const char *nsb_slurm_node_name(enum nsb_mode mode, int host_network, const char *node_name,
                                const char *hostname, const char *pod_name)
{
    /* slurmd -Z without -N names itself gethostname() whole, case kept
     * (_dynamic_init in 22.05, 24.11 and 26.05 alike; only NodeHostname is
     * cut at the first dot). A hostNetwork pod shares its host's UTS
     * namespace, in both modes: the host's own name, which is the Node's
     * full name, dots and all, when the kubelet named the Node after it
     * (lowercased, though: see nss_pod_slurm_name_exact). Otherwise the
     * kubelet sets the kernel hostname to spec.hostname. */
    if (host_network)
        return str_or(node_name, "");
    if (mode == NSB_DAEMONSET)
        return str_or(hostname, "");
    if (hostname && *hostname)
        return hostname;
    return str_or(pod_name, "");
}

cJSON *nsb_selector_labels(const char *nss)
{
    cJSON *l = cJSON_CreateObject();
    json_set_str(l, NSB_LABEL_APP, "slurmd");
    json_set_str(l, NSB_LABEL_INSTANCE, nss);
    return l;
}

char *nsb_selector_string(const char *nss)
{
    /* Sorted by key, as Kubernetes' SelectorFromSet prints it. */
    return xasprintf(NSB_LABEL_INSTANCE "=%s," NSB_LABEL_APP "=slurmd", nss);
}

cJSON *nsb_worker_labels(const cJSON *nodeset)
{
    cJSON *l = nsb_selector_labels(meta_str(nodeset, "name"));
    json_set_str(l, NSB_LABEL_COMPONENT, "worker");
    json_set_str(l, NSB_LABEL_CLUSTER, controller_name(nodeset));
    return l;
}

static cJSON *owner_ref(const char *name, const char *uid, int controller, int block)
{
    cJSON *r = cJSON_CreateObject();
    json_set_str(r, "apiVersion", NSB_API_VERSION);
    json_set_str(r, "kind", NSB_KIND);
    json_set_str(r, "name", name);
    json_set_str(r, "uid", uid);
    if (controller)
        json_set_bool(r, "controller", 1);
    if (block)
        json_set_bool(r, "blockOwnerDeletion", 1);
    return r;
}

cJSON *nsb_controller_ref(const cJSON *nodeset)
{
    return owner_ref(meta_str(nodeset, "name"), meta_str(nodeset, "uid"), 1, 1);
}

static cJSON *controller_refs(const cJSON *nodeset)
{
    cJSON *a = cJSON_CreateArray();
    cJSON_AddItemToArray(a, nsb_controller_ref(nodeset));
    return a;
}

/* ---- slurmd --conf ----------------------------------------------------------------------------- */

/* Title-case like Go's cases.Title for ASCII keys: the first letter of every
 * word upper case, the rest lower case; letters, digits, '_', '.' and '\''
 * continue a word. */
static void title_case(char *s)
{
    int in_word = 0;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (isalpha(c)) {
            *s = (char)(in_word ? tolower(c) : toupper(c));
            in_word = 1;
        } else {
            in_word = isdigit(c) || c == '_' || c == '.' || c == '\'';
        }
    }
}

typedef struct conf_item {
    char *key;
    buf_t val;
} conf_item;

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static conf_item *conf_find(conf_item *items, size_t n, const char *key)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(items[i].key, key) == 0)
            return &items[i];
    return NULL;
}

int nsb_shell_unsafe(const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c < 0x20 || c == 0x7f || strchr("'\"\\$`;&|<>(){}[]*?~", c))
            return c;
    }
    return 0;
}

char *nsb_slurmd_conf(const cJSON *nodeset, char *err, size_t errlen)
{
    const char *extra = json_get_str_or(nodeset, "spec.extraConf", "");
    size_t cap = 4 + strlen(extra) / 2, nitems = 0, nfeat = 0, featcap = 4;
    conf_item *items = xcalloc(cap, sizeof(*items));
    char **feats = xcalloc(featcap, sizeof(*feats));
    char *copy = xstrdup(extra), *save = NULL, *res = NULL;
    int bad = 0;

    feats[nfeat++] = nsb_slurm_nodeset_name(nodeset);

    for (char *tok = strtok_r(copy, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
        char *eq = strchr(tok, '=');
        if (eq == NULL || eq == tok) {
            errf(err, errlen, "malformed extraConf item \"%s\" (want Key=Value)", tok);
            bad = 1;
            break;
        }
        int c = nsb_shell_unsafe(tok);
        if (c) {
            errf(err, errlen, "extraConf item \"%s\" has '%c', which a shell would interpret", tok, c);
            bad = 1;
            break;
        }
        *eq = '\0';
        char *key = tok, *val = eq + 1;
        title_case(key);
        if (strcmp(key, "Feature") == 0 || strcmp(key, "Features") == 0) {
            /* Slurm's trailing 's' is optional; every feature joins the
             * baseline feature (the Slurm NodeSet name). */
            char *fsave = NULL;
            for (char *f = strtok_r(val, ",", &fsave); f; f = strtok_r(NULL, ",", &fsave)) {
                if (nfeat == featcap)
                    feats = xrealloc(feats, (featcap *= 2) * sizeof(*feats));
                feats[nfeat++] = xstrdup(f);
            }
            continue;
        }
        conf_item *it = conf_find(items, nitems, key);
        if (it == NULL) {
            if (nitems == cap)
                items = xrealloc(items, (cap *= 2) * sizeof(*items));
            it = &items[nitems++];
            it->key = xstrdup(key);
            buf_init(&it->val, BUF_UNLIMITED);
        } else {
            putch(&it->val, ',');
        }
        put(&it->val, val);
    }

    if (!bad) {
        /* Features: sorted and de-duplicated. */
        qsort(feats, nfeat, sizeof(*feats), cmp_str);
        buf_t fv;
        buf_init(&fv, BUF_UNLIMITED);
        for (size_t i = 0; i < nfeat; i++) {
            if (feats[i][0] == '\0' || (i > 0 && strcmp(feats[i], feats[i - 1]) == 0))
                continue;
            if (fv.len)
                putch(&fv, ',');
            put(&fv, feats[i]);
        }
        char **lines = xcalloc(nitems + 1, sizeof(*lines));
        size_t nl = 0;
        lines[nl++] = xasprintf("Features=%s", buf_cstr(&fv));
        buf_free(&fv);
        for (size_t i = 0; i < nitems; i++)
            lines[nl++] = xasprintf("%s=%s", items[i].key, buf_cstr(&items[i].val));
        qsort(lines, nl, sizeof(*lines), cmp_str);
        buf_t out;
        buf_init(&out, BUF_UNLIMITED);
        for (size_t i = 0; i < nl; i++) {
            if (i)
                putch(&out, NSB_CONF_SEP);
            put(&out, lines[i]);
            free(lines[i]);
        }
        free(lines);
        res = buf_detach(&out, NULL);
    }
    for (size_t i = 0; i < nitems; i++) {
        free(items[i].key);
        buf_free(&items[i].val);
    }
    for (size_t i = 0; i < nfeat; i++)
        free(feats[i]);
    free(items);
    free(feats);
    free(copy);
    return res;
}

char *nsb_slurmd_features(const cJSON *nodeset)
{
    char err[256];
    char *conf = nsb_slurmd_conf(nodeset, err, sizeof(err));
    if (conf == NULL)
        return NULL;
    char *res = NULL;
    for (char *item = conf; item && *item;) {
        char *end = strchr(item, NSB_CONF_SEP);
        if (end)
            *end = '\0';
        if (strncmp(item, "Features=", 9) == 0) {
            res = xstrdup(item + 9);
            break;
        }
        item = end ? end + 1 : NULL;
    }
    free(conf);
    return res;
}

char *nsb_conf_server(const cJSON *controller, const char *ns)
{
    if (json_get_bool(controller, "spec.external", 0)) {
        const char *host = json_get_str(controller, "spec.externalConfig.host");
        long long port = json_get_int(controller, "spec.externalConfig.port", 0);
        if (host == NULL || *host == '\0' || port <= 0)
            return NULL;
        return xasprintf("%s:%lld", host, port);
    }
    return xasprintf("%s-controller.%s:%d", meta_str(controller, "name"), str_or(ns, ""), NSB_SLURMCTLD_PORT);
}

static void limits_of(const cJSON *resources, long long *cpu, long long *mem)
{
    const cJSON *lim = json_child(resources, "limits");
    long long v;
    *cpu = *mem = 0;
    const cJSON *c = json_child(lim, "cpu"), *m = json_child(lim, "memory");
    if (cJSON_IsString(c) && quantity_parse(c->valuestring, &v) == 0)
        *cpu = v;
    else if (cJSON_IsNumber(c) && c->valuedouble > -1e15 && c->valuedouble < 1e15)
        *cpu = (long long)ceil(c->valuedouble);
    if (cJSON_IsString(m) && quantity_parse(m->valuestring, &v) == 0)
        *mem = v;
    else if (cJSON_IsNumber(m) && m->valuedouble > -1e15 && m->valuedouble < 1e15)
        *mem = (long long)ceil(m->valuedouble);
}

void nsb_resource_limits(const cJSON *nodeset, long long *cpus, long long *mem_mib)
{
    long long pc, pm, cc, cm;
    limits_of(json_get(nodeset, "spec.template.spec.resources"), &pc, &pm);
    limits_of(json_get(nodeset, "spec.slurmd.resources"), &cc, &cm);
    if (cc != 0)
        pc = cc;
    if (cm != 0)
        pm = cm;
    *cpus = pc;
    *mem_mib = pm / 1024 / 1024;
}

/* ---- worker pod -------------------------------------------------------------------------------- */

void nsb_conf_hash(const void *data, size_t len, char out[65])
{
    sha256_hex(data, len, out);
}

/* slurmd's startup probe asks every second, with the same 60 s budget as
 * its liveness probe's 6 x 10 s: its first probe comes before slurmd
 * listens, and with a 10 s period a replaced pod then waited up to 10 s
 * more for Ready (pod delete -> replacement Ready took 12-13 s on real
 * pods). */
#define STARTUP_PERIOD_S 1
#define STARTUP_FAILURES 60

static cJSON *http_probe(const char *path, int failures, int period)
{
    cJSON *p = cJSON_CreateObject();
    cJSON *g = json_obj_ensure(p, "httpGet");
    json_set_str(g, "path", path);
    json_set_str(g, "port", "slurmd");
    if (failures) {
        json_set_int(p, "failureThreshold", failures);
        json_set_int(p, "periodSeconds", period);
    }
    return p;
}

static cJSON *mount(const char *name, const char *path, const char *sub, int ro)
{
    cJSON *m = cJSON_CreateObject();
    json_set_str(m, "name", name);
    json_set_str(m, "mountPath", path);
    if (sub)
        json_set_str(m, "subPath", sub);
    if (ro)
        json_set_bool(m, "readOnly", 1);
    return m;
}

static cJSON *env_value(const char *name, const char *value)
{
    cJSON *e = cJSON_CreateObject();
    json_set_str(e, "name", name);
    json_set_str(e, "value", value);
    return e;
}

static cJSON *slurmd_container(const cJSON *nodeset, const char *conf_server, const char *conf, int ssh)
{
    cJSON *c = cJSON_CreateObject();
    json_set_str(c, "name", "slurmd");
    const char *args[] = {"-Z", "--conf-server", conf_server, "--conf", conf};
    json_set(c, "args", str_array(args, ARRAY_SIZE(args)));

    long long cpus, mem;
    nsb_resource_limits(nodeset, &cpus, &mem);
    char num[32];
    cJSON *env = cJSON_CreateArray();
    cJSON *topo = cJSON_CreateObject();
    json_set_str(topo, "name", NSB_ENV_TOPOLOGY);
    json_set_str(json_obj_path_ensure(topo, "valueFrom.fieldRef"), "fieldPath",
                 "metadata.annotations['" NSB_ANN_TOPOLOGY "']");
    cJSON_AddItemToArray(env, topo);
    snprintf(num, sizeof(num), "%lld", cpus);
    cJSON_AddItemToArray(env, env_value("POD_CPUS", num));
    snprintf(num, sizeof(num), "%lld", mem);
    cJSON_AddItemToArray(env, env_value("POD_MEMORY", num));
    json_set(c, "env", env);

    cJSON *ports = cJSON_CreateArray();
    cJSON *p = cJSON_CreateObject();
    json_set_str(p, "name", "slurmd");
    json_set_int(p, "containerPort", NSB_SLURMD_PORT);
    json_set_str(p, "protocol", "TCP");
    cJSON_AddItemToArray(ports, p);
    if (ssh) {
        p = cJSON_CreateObject();
        json_set_str(p, "name", "ssh");
        json_set_int(p, "containerPort", 22);
        json_set_str(p, "protocol", "TCP");
        cJSON_AddItemToArray(ports, p);
    }
    json_set(c, "ports", ports);

    if (clc_image_http_probes(json_get_str(nodeset, "spec.slurmd.image"))) {
        json_set(c, "startupProbe", http_probe("/livez", STARTUP_FAILURES, STARTUP_PERIOD_S));
        json_set(c, "livenessProbe", http_probe("/livez", 6, 10));
        json_set(c, "readinessProbe", http_probe("/readyz", 0, 0));
    } else {
        /* Slurm 24.11 (or a version the tag does not say) has no /livez. */
        json_set(c, "startupProbe",
                 clc_probe(clc_tcp_socket(NSB_SLURMD_PORT), STARTUP_FAILURES, STARTUP_PERIOD_S));
        json_set(c, "livenessProbe", clc_probe(clc_tcp_socket(NSB_SLURMD_PORT), 6, 10));
        json_set(c, "readinessProbe", clc_probe(clc_tcp_socket(NSB_SLURMD_PORT), 0, 0));
    }

    cJSON *sc = cJSON_CreateObject();
    json_set_bool(sc, "privileged", 1);
    const char *caps[] = {"BPF", "NET_ADMIN", "SYS_ADMIN", "SYS_NICE"};
    json_set(json_obj_ensure(sc, "capabilities"), "add", str_array(caps, ARRAY_SIZE(caps)));
    json_set(c, "securityContext", sc);

    /* The preStop hook marks the node DOWN so Slurm stops scheduling on it
     * before the pod disappears; the reason carries our prefix so the
     * operator may clear it later. */
    const char *stop[] = {"/usr/bin/sh", "-c",
                          "scontrol update nodename=$(hostname) state=down "
                          "reason='slurm-operator: Pod is terminating';"};
    json_set(json_obj_path_ensure(c, "lifecycle.preStop.exec"), "command", str_array(stop, ARRAY_SIZE(stop)));

    cJSON *mounts = cJSON_CreateArray();
    cJSON_AddItemToArray(mounts, mount("slurm-etc", "/etc/slurm", NULL, 1));
    cJSON_AddItemToArray(mounts, mount("slurm-logfile", "/var/log/slurm", NULL, 0));
    if (ssh) {
        cJSON_AddItemToArray(mounts, mount("ssh-config", "/etc/ssh/sshd_config", "sshd_config", 1));
        cJSON_AddItemToArray(mounts, mount("sssd-conf", "/etc/sssd/sssd.conf", "sssd.conf", 1));
    }
    json_set(c, "volumeMounts", mounts);
    return pt_merge_container(c, json_get(nodeset, "spec.slurmd"));
}

/* The log sidecar owns a FIFO that slurmd writes its log into and copies it
 * to stdout (clc_logfile_script). */
static cJSON *logfile_container(const cJSON *nodeset)
{
    cJSON *c = cJSON_CreateObject();
    json_set_str(c, "name", "logfile");
    cJSON *env = cJSON_CreateArray();
    cJSON_AddItemToArray(env, env_value("SOCKET", "/var/log/slurm/slurmd.log"));
    json_set(c, "env", env);
    const char *cmd[] = {"sh", "-c", clc_logfile_script()};
    json_set(c, "command", str_array(cmd, ARRAY_SIZE(cmd)));
    json_set_str(c, "restartPolicy", "Always");
    cJSON *mounts = cJSON_CreateArray();
    cJSON_AddItemToArray(mounts, mount("slurm-logfile", "/var/log/slurm", NULL, 0));
    json_set(c, "volumeMounts", mounts);
    return pt_merge_container(c, json_get(nodeset, "spec.logfile"));
}

static cJSON *projected(const char *vol, const char *kind, const char *name, const char *key,
                        const char *path, int item_mode)
{
    cJSON *v = cJSON_CreateObject();
    json_set_str(v, "name", vol);
    cJSON *pr = json_obj_ensure(v, "projected");
    json_set_int(pr, "defaultMode", 0600);
    cJSON *sources = cJSON_CreateArray();
    cJSON *src = cJSON_CreateObject();
    cJSON *ref = json_obj_ensure(src, kind);
    json_set_str(ref, "name", name);
    cJSON *items = cJSON_CreateArray();
    cJSON *it = cJSON_CreateObject();
    json_set_str(it, "key", key);
    json_set_str(it, "path", path);
    if (item_mode)
        json_set_int(it, "mode", 0600);
    cJSON_AddItemToArray(items, it);
    json_set(ref, "items", items);
    cJSON_AddItemToArray(sources, src);
    json_set(pr, "sources", sources);
    return v;
}

static cJSON *base_volumes(const cJSON *nodeset, const char *key_secret, const char *key_key)
{
    cJSON *vols = cJSON_CreateArray();
    /* Configless: slurmd fetches slurm.conf from slurmctld; only the shared
     * auth/slurm key is mounted. */
    cJSON_AddItemToArray(vols, projected("slurm-etc", "secret", key_secret, key_key, "slurm.key", 0));
    cJSON *log = cJSON_CreateObject();
    json_set_str(log, "name", "slurm-logfile");
    json_set_str(json_obj_ensure(log, "emptyDir"), "medium", "Memory");
    cJSON_AddItemToArray(vols, log);
    if (spec_bool(nodeset, "ssh.enabled", 0)) {
        char *cm = xasprintf("%s-ssh-config", meta_str(nodeset, "name"));
        cJSON_AddItemToArray(vols, projected("ssh-config", "configMap", cm, "sshd_config", "sshd_config", 1));
        free(cm);
        cJSON_AddItemToArray(
            vols,
            projected("sssd-conf", "secret", json_get_str_or(nodeset, "spec.ssh.sssdConfRef.name", ""),
                      json_get_str_or(nodeset, "spec.ssh.sssdConfRef.key", "sssd.conf"), "sssd.conf", 1));
    }
    return vols;
}

static cJSON *toleration(const char *key, const char *op, const char *effect)
{
    cJSON *t = cJSON_CreateObject();
    json_set_str(t, "key", key);
    json_set_str(t, "operator", op);
    json_set_str(t, "effect", effect);
    return t;
}

static int toleration_same(const cJSON *a, const cJSON *b)
{
    static const char *const f[] = {"key", "operator", "value", "effect"};
    for (size_t i = 0; i < ARRAY_SIZE(f); i++)
        if (strcmp(json_get_str_or(a, f[i], ""), json_get_str_or(b, f[i], "")) != 0)
            return 0;
    return 1;
}

/* Every worker pod tolerates the worker taint, even when the user's template
 * brings its own tolerations (a list without merge key replaces ours). */
static void ensure_worker_toleration(cJSON *spec)
{
    cJSON *tols = cJSON_GetObjectItemCaseSensitive(spec, "tolerations");
    if (!cJSON_IsArray(tols)) {
        tols = cJSON_CreateArray();
        json_set(spec, "tolerations", tols);
    }
    cJSON *want = toleration(NSB_WORKER_TAINT, "Equal", "NoExecute");
    for (const cJSON *t = tols->child; t; t = t->next)
        if (toleration_same(t, want)) {
            cJSON_Delete(want);
            return;
        }
    cJSON_InsertItemInArray(tols, 0, want);
}

cJSON *nsb_build_template(const nsb_pod_args *a, char *err, size_t errlen)
{
    const cJSON *ns_obj = a->nodeset, *ctl = a->controller;
    const char *ns = meta_str(ns_obj, "namespace"), *ctl_name = controller_name(ns_obj);
    const char *key_secret = json_get_str(ctl, "spec.slurmKeyRef.name");
    const char *key_key = json_get_str_or(ctl, "spec.slurmKeyRef.key", "slurm.key");
    if (key_secret == NULL || *key_secret == '\0') {
        errf(err, errlen, "Controller %s has no spec.slurmKeyRef.name", meta_str(ctl, "name"));
        return NULL;
    }
    /* slurmctld's Service lives in the Controller's namespace (controllerRef.namespace). */
    char *server = nsb_conf_server(ctl, *meta_str(ctl, "namespace") ? meta_str(ctl, "namespace") : ns);
    if (server == NULL) {
        errf(err, errlen, "external Controller %s lacks externalConfig host or port", meta_str(ctl, "name"));
        return NULL;
    }
    char *conf = nsb_slurmd_conf(ns_obj, err, errlen);
    if (conf == NULL) {
        free(server);
        return NULL;
    }
    int ssh = spec_bool(ns_obj, "ssh.enabled", 0);

    cJSON *tmpl = cJSON_CreateObject();
    cJSON *meta = json_obj_ensure(tmpl, "metadata");
    json_set(meta, "labels", nsb_worker_labels(ns_obj));
    cJSON *ann = json_obj_ensure(meta, "annotations");
    json_set_str(ann, NSB_ANN_DEFAULT_CONTAINER, "slurmd");
    char empty_hash[65];
    nsb_conf_hash("", 0, empty_hash);
    json_set_str(ann, NSB_ANN_SSHD_HASH, str_or(a->sshd_conf_hash, empty_hash));
    json_set_str(ann, NSB_ANN_SSSD_HASH, str_or(a->sssd_conf_hash, empty_hash));

    cJSON *spec = json_obj_ensure(tmpl, "spec");
    json_set_bool(spec, "automountServiceAccountToken", 0);
    json_set_bool(spec, "enableServiceLinks", 0);
    cJSON *containers = cJSON_CreateArray();
    cJSON_AddItemToArray(containers, slurmd_container(ns_obj, server, conf, ssh));
    json_set(spec, "containers", containers);
    cJSON *inits = cJSON_CreateArray();
    cJSON_AddItemToArray(inits, logfile_container(ns_obj));
    json_set(spec, "initContainers", inits);
    char *svc = nsb_worker_service_name(ctl_name);
    json_set_str(spec, "subdomain", svc);
    char *search = xasprintf("%s.%s.svc.%s", svc, ns, str_or(a->cluster_domain, "cluster.local"));
    const char *searches[] = {search};
    json_set(json_obj_ensure(spec, "dnsConfig"), "searches", str_array(searches, 1));
    free(search);
    free(svc);
    json_set(spec, "volumes", base_volumes(ns_obj, key_secret, key_key));
    cJSON *tols = cJSON_CreateArray();
    cJSON_AddItemToArray(tols, toleration(NSB_WORKER_TAINT, "Equal", "NoExecute"));
    json_set(spec, "tolerations", tols);
    free(server);
    free(conf);

    tmpl = pt_merge_template(tmpl, json_get(ns_obj, "spec.template"));
    ensure_worker_toleration(json_obj_ensure(tmpl, "spec"));
    /* The NodeSet's own labels and annotations come last and never override
     * what the operator or the template set. */
    meta = json_obj_ensure(tmpl, "metadata");
    add_missing_pairs(json_obj_ensure(meta, "labels"), json_get(ns_obj, "metadata.labels"), NULL);
    add_missing_pairs(json_obj_ensure(meta, "annotations"), json_get(ns_obj, "metadata.annotations"),
                      LAST_APPLIED);
    return tmpl;
}

/* Replace the required node affinity by "metadata.name In [node]" (Kubernetes'
 * ReplaceDaemonSetPodNodeNameNodeAffinity); preferred terms are kept. */
static void pin_to_node(cJSON *spec, const char *node)
{
    cJSON *na = json_obj_path_ensure(spec, "affinity.nodeAffinity");
    cJSON *req = cJSON_CreateObject();
    cJSON *terms = cJSON_CreateArray();
    cJSON *term = cJSON_CreateObject();
    cJSON *fields = cJSON_CreateArray();
    cJSON *f = cJSON_CreateObject();
    json_set_str(f, "key", "metadata.name");
    json_set_str(f, "operator", "In");
    const char *vals[] = {node};
    json_set(f, "values", str_array(vals, 1));
    cJSON_AddItemToArray(fields, f);
    json_set(term, "matchFields", fields);
    cJSON_AddItemToArray(terms, term);
    json_set(req, "nodeSelectorTerms", terms);
    json_set(na, "requiredDuringSchedulingIgnoredDuringExecution", req);
}

static void add_anti_affinity(cJSON *spec)
{
    cJSON *paa = json_obj_path_ensure(spec, "affinity.podAntiAffinity");
    cJSON *req = cJSON_GetObjectItemCaseSensitive(paa, "requiredDuringSchedulingIgnoredDuringExecution");
    if (!cJSON_IsArray(req)) {
        req = cJSON_CreateArray();
        json_set(paa, "requiredDuringSchedulingIgnoredDuringExecution", req);
    }
    cJSON *term = cJSON_CreateObject();
    json_set_str(term, "topologyKey", "kubernetes.io/hostname");
    cJSON *expr = cJSON_CreateObject();
    json_set_str(expr, "key", NSB_LABEL_APP);
    json_set_str(expr, "operator", "In");
    const char *vals[] = {"slurmd"};
    json_set(expr, "values", str_array(vals, 1));
    cJSON *exprs = cJSON_CreateArray();
    cJSON_AddItemToArray(exprs, expr);
    json_set(json_obj_ensure(term, "labelSelector"), "matchExpressions", exprs);
    cJSON_AddItemToArray(req, term);
}

/* The tolerations the DaemonSet controller gives its pods; without them a
 * pod could not be (re)created on a cordoned or pressured node. */
static void add_daemon_tolerations(cJSON *spec)
{
    static const struct {
        const char *key, *effect;
    } t[] = {
        {"node.kubernetes.io/not-ready", "NoExecute"},
        {"node.kubernetes.io/unreachable", "NoExecute"},
        {"node.kubernetes.io/disk-pressure", "NoSchedule"},
        {"node.kubernetes.io/memory-pressure", "NoSchedule"},
        {"node.kubernetes.io/pid-pressure", "NoSchedule"},
        {"node.kubernetes.io/unschedulable", "NoSchedule"},
        {"node.kubernetes.io/network-unavailable", "NoSchedule"},
    };
    cJSON *tols = cJSON_GetObjectItemCaseSensitive(spec, "tolerations");
    if (!cJSON_IsArray(tols)) {
        tols = cJSON_CreateArray();
        json_set(spec, "tolerations", tols);
    }
    size_t n = ARRAY_SIZE(t) - (json_get_bool(spec, "hostNetwork", 0) ? 0 : 1);
    for (size_t i = 0; i < n; i++) {
        cJSON *want = toleration(t[i].key, "Exists", t[i].effect);
        int have = 0;
        for (const cJSON *x = tols->child; x && !have; x = x->next)
            have = toleration_same(x, want);
        if (have)
            cJSON_Delete(want);
        else
            cJSON_AddItemToArray(tols, want);
    }
}

/* Claim volumes first (in template order), then the pod's other volumes;
 * a pod volume named like a claim is replaced by the claim. */
static void add_claim_volumes(cJSON *spec, const cJSON *nodeset, const char *suffix)
{
    const cJSON *claims = json_get(nodeset, "spec.volumeClaimTemplates");
    if (json_len(claims) == 0)
        return;
    const char *nss = meta_str(nodeset, "name");
    cJSON *old = cJSON_DetachItemFromObjectCaseSensitive(spec, "volumes");
    cJSON *vols = cJSON_CreateArray();
    for (const cJSON *c = claims->child; c; c = c->next) {
        const char *cname = meta_str(c, "name");
        char *pvc = nsb_pvc_name(cname, nss, suffix);
        cJSON *v = cJSON_CreateObject();
        json_set_str(v, "name", cname);
        cJSON *src = json_obj_ensure(v, "persistentVolumeClaim");
        json_set_str(src, "claimName", pvc);
        free(pvc);
        cJSON_AddItemToArray(vols, v);
    }
    for (cJSON *v = old ? old->child : NULL; v; v = v->next) {
        const char *vname = json_get_str_or(v, "name", "");
        int claimed = 0;
        for (const cJSON *c = claims->child; c && !claimed; c = c->next)
            claimed = strcmp(meta_str(c, "name"), vname) == 0;
        if (!claimed)
            cJSON_AddItemToArray(vols, cJSON_Duplicate(v, 1));
    }
    cJSON_Delete(old);
    json_set(spec, "volumes", vols);
}

cJSON *nsb_build_pod(const nsb_pod_args *a, char *err, size_t errlen)
{
    cJSON *tmpl = nsb_build_template(a, err, errlen);
    if (tmpl == NULL)
        return NULL;
    cJSON *pod = nsb_stamp_pod(a, tmpl, err, errlen);
    cJSON_Delete(tmpl);
    return pod;
}

cJSON *nsb_stamp_pod(const nsb_pod_args *a, const cJSON *template, char *err, size_t errlen)
{
    enum nsb_mode mode = nsb_mode_of(a->nodeset);
    const char *nss = meta_str(a->nodeset, "name");
    if (mode == NSB_DAEMONSET && (a->node_name == NULL || *a->node_name == '\0')) {
        errf(err, errlen, "DaemonSet-mode pod of NodeSet %s needs a node name", nss);
        return NULL;
    }
    cJSON *tmpl = cJSON_Duplicate(template, 1);
    cJSON *pod = cJSON_CreateObject();
    json_set_str(pod, "apiVersion", "v1");
    json_set_str(pod, "kind", "Pod");
    cJSON *meta = json_obj_ensure(pod, "metadata");
    cJSON *tmeta = json_obj_ensure(tmpl, "metadata");
    cJSON *labels = cJSON_DetachItemFromObjectCaseSensitive(tmeta, "labels");
    cJSON *ann = cJSON_DetachItemFromObjectCaseSensitive(tmeta, "annotations");
    cJSON *spec = cJSON_DetachItemFromObjectCaseSensitive(tmpl, "spec");
    cJSON_Delete(tmpl);

    char *name = NULL, *hostname = NULL, *suffix = NULL;
    if (mode == NSB_STATEFULSET) {
        int pad = padding_of(a->nodeset);
        name = nsb_pod_name(nss, pad, a->ordinal);
        hostname = nsb_statefulset_hostname(a->nodeset, a->ordinal);
        suffix = nsb_padded_ordinal(pad, a->ordinal);
        json_set_str(meta, "name", name);
    } else {
        hostname = nsb_daemonset_hostname(a->node_name, a->node_hostname_override);
        suffix = xstrdup(hostname);
        char *gen = xasprintf("%s-", nss);
        json_set_str(meta, "generateName", gen);
        free(gen);
    }
    json_set_str(meta, "namespace", meta_str(a->nodeset, "namespace"));

    json_set_str(spec, "hostname", hostname);
    json_del(spec, "nodeName");
    if (mode == NSB_STATEFULSET)
        json_set_str(labels, NSB_LABEL_POD_INDEX, suffix);
    json_set_str(labels, NSB_LABEL_POD_NAME, name ? name : "");
    /* DaemonSet mode: the hostname, which an unscheduled pod is matched to
     * its Node by (scale_daemonset), whatever the Slurm name. */
    json_set_str(labels, NSB_LABEL_POD_HOSTNAME,
                 mode == NSB_DAEMONSET ? hostname
                                       : nsb_slurm_node_name(mode, json_get_bool(spec, "hostNetwork", 0),
                                                             NULL, hostname, name));
    json_set_str(labels, NSB_LABEL_SCALING_MODE, mode == NSB_DAEMONSET ? "DaemonSet" : "StatefulSet");
    if (a->revision && *a->revision)
        json_set_str(labels, NSB_LABEL_REVISION, a->revision);
    json_set(meta, "labels", labels);
    json_set(meta, "annotations", ann);
    json_set(meta, "ownerReferences", controller_refs(a->nodeset));

    add_claim_volumes(spec, a->nodeset, suffix);
    if (!spec_bool(a->nodeset, "oversubscribeNode", 0))
        add_anti_affinity(spec);
    if (mode == NSB_DAEMONSET) {
        pin_to_node(spec, a->node_name);
        add_daemon_tolerations(spec);
    } else if (a->pin_node && *a->pin_node) {
        pin_to_node(spec, a->pin_node);
    }
    json_set(pod, "spec", spec);
    free(name);
    free(hostname);
    free(suffix);
    return pod;
}

cJSON *nsb_daemon_sim_spec(const nsb_pod_args *a, char *err, size_t errlen)
{
    cJSON *tmpl = nsb_build_template(a, err, errlen);
    if (tmpl == NULL)
        return NULL;
    cJSON *spec = cJSON_DetachItemFromObjectCaseSensitive(tmpl, "spec");
    cJSON_Delete(tmpl);
    /* The user's own node affinity stays: the simulated pod is placed by
     * nodeName, which is what keeps the user's terms meaningful here. */
    json_del(spec, "nodeName");
    add_daemon_tolerations(spec);
    return spec;
}

void nsb_daemon_fit(const cJSON *sim_spec, const cJSON *node, fit_result *out)
{
    fit_daemon(sim_spec, node, out);
}

void nsb_daemon_fit_labels(const cJSON *sim_spec, const cJSON *node, lsel_lookup_fn labels, void *ctx,
                           fit_result *out)
{
    fit_daemon_labels(sim_spec, node, labels, ctx, out);
}

/* ---- revisions --------------------------------------------------------------------------------- */

static cJSON *replace_copy(const cJSON *o)
{
    cJSON *c = cJSON_Duplicate(o, 1);
    json_set_str(c, "$patch", "replace");
    return c;
}

cJSON *nsb_revision_patch(const cJSON *nodeset)
{
    const cJSON *spec = spec_of(nodeset);
    cJSON *patch = cJSON_CreateObject();
    cJSON *ps = json_obj_ensure(patch, "spec");
    const cJSON *tmpl = json_child(spec, "template");
    cJSON *t = cJSON_IsObject(tmpl) ? cJSON_Duplicate(tmpl, 1) : cJSON_CreateObject();
    json_set_str(t, "$patch", "replace");
    json_set(ps, "template", t);
    json_set_int(ps, "ordinalPadding", padding_of(nodeset));
    json_set_bool(ps, "oversubscribeNode", spec_bool(nodeset, "oversubscribeNode", 0));
    static const char *const objs[] = {"slurmd", "logfile", "ssh"};
    for (size_t i = 0; i < ARRAY_SIZE(objs); i++) {
        const cJSON *o = json_child(spec, objs[i]);
        if (is_nonempty_obj(o))
            json_set(ps, objs[i], replace_copy(o));
    }
    const cJSON *extra = json_child(spec, "extraConf");
    if (is_nonempty_str(extra))
        json_set_str(ps, "extraConf", extra->valuestring);
    return patch;
}

static uint32_t fnv1_32(uint32_t h, const void *data, size_t len)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < len; i++) {
        h *= 16777619u;
        h ^= p[i];
    }
    return h;
}

void nsb_revision_hash(const cJSON *patch, int32_t collision_count, char out[NSB_HASH_MAX])
{
    static const char alphabet[] = "bcdfghjklmnpqrstvwxz2456789";
    char *bytes = json_canonical(patch);
    uint32_t h = fnv1_32(2166136261u, bytes, strlen(bytes));
    free(bytes);
    char cc[16], dec[16];
    snprintf(cc, sizeof(cc), "%" PRId32, collision_count);
    h = fnv1_32(h, cc, strlen(cc));
    snprintf(dec, sizeof(dec), "%" PRIu32, h);
    size_t i;
    for (i = 0; dec[i] && i < NSB_HASH_MAX - 1; i++)
        out[i] = alphabet[(unsigned char)dec[i] % (sizeof(alphabet) - 1)];
    out[i] = '\0';
}

char *nsb_revision_name(const char *nss, const char *hash)
{
    return xasprintf("%s-%s", nss, hash);
}

const char *nsb_revision_hash_part(const char *v, const char *nss)
{
    if (v == NULL || nss == NULL)
        return v;
    size_t n = strlen(nss);
    if (strncmp(v, nss, n) == 0 && v[n] == '-' && v[n + 1] != '\0')
        return v + n + 1;
    return v;
}

int nsb_revision_same(const char *a, const char *b, const char *nss)
{
    if (a == NULL || b == NULL || *a == '\0' || *b == '\0')
        return 0;
    return strcmp(nsb_revision_hash_part(a, nss), nsb_revision_hash_part(b, nss)) == 0;
}

cJSON *nsb_build_revision(const cJSON *nodeset, const cJSON *patch, const char *hash, int64_t revision)
{
    const char *nss = meta_str(nodeset, "name");
    cJSON *cr = cJSON_CreateObject();
    json_set_str(cr, "apiVersion", "apps/v1");
    json_set_str(cr, "kind", "ControllerRevision");
    cJSON *meta = json_obj_ensure(cr, "metadata");
    char *name = nsb_revision_name(nss, hash);
    json_set_str(meta, "name", name);
    free(name);
    json_set_str(meta, "namespace", meta_str(nodeset, "namespace"));
    /* Selector labels are added so the revision is found again by the
     * selector the reconciler lists revisions with. */
    cJSON *labels = nsb_selector_labels(nss);
    json_set_str(labels, NSB_LABEL_REVISION, hash);
    add_missing_pairs(labels, json_get(nodeset, "spec.template.metadata.labels"), NULL);
    json_set(meta, "labels", labels);
    cJSON *ann = cJSON_CreateObject();
    add_missing_pairs(ann, json_get(nodeset, "metadata.annotations"), LAST_APPLIED);
    if (ann->child)
        json_set(meta, "annotations", ann);
    else
        cJSON_Delete(ann);
    json_set(meta, "ownerReferences", controller_refs(nodeset));
    json_set(cr, "data", cJSON_Duplicate(patch, 1));
    json_set_int(cr, "revision", revision);
    return cr;
}

static const char *rev_hash(const nsb_rev *r, const char *nss)
{
    if (r->hash && *r->hash)
        return r->hash;
    return nsb_revision_hash_part(r->name, nss);
}

/* v without the members that Go's encoding writes for zero values (see
 * nsb_revision_equivalent); NULL when nothing is left. New object. */
static cJSON *prune_zero(const cJSON *v)
{
    if (v == NULL || cJSON_IsNull(v) || cJSON_IsFalse(v))
        return NULL;
    if (cJSON_IsNumber(v) && v->valuedouble == 0)
        return NULL;
    if (cJSON_IsString(v) && (v->valuestring == NULL || v->valuestring[0] == '\0'))
        return NULL;
    if (cJSON_IsObject(v)) {
        cJSON *out = cJSON_CreateObject();
        for (const cJSON *m = v->child; m; m = m->next) {
            cJSON *p = prune_zero(m);
            if (p)
                cJSON_AddItemToObject(out, m->string, p);
        }
        if (out->child == NULL) {
            cJSON_Delete(out);
            return NULL;
        }
        return out;
    }
    if (cJSON_IsArray(v)) {
        if (v->child == NULL)
            return NULL;
        /* Elements stay, in order (a zero element is a value of the list),
         * but their own members are pruned. */
        cJSON *out = cJSON_CreateArray();
        for (const cJSON *e = v->child; e; e = e->next) {
            cJSON *p = cJSON_IsObject(e) ? prune_zero(e) : NULL;
            cJSON_AddItemToArray(out, p                   ? p
                                      : cJSON_IsObject(e) ? cJSON_CreateObject()
                                                          : cJSON_Duplicate(e, 1));
        }
        return out;
    }
    return cJSON_Duplicate(v, 1);
}

int nsb_revision_equivalent(const cJSON *a, const cJSON *b)
{
    cJSON *pa = prune_zero(a), *pb = prune_zero(b);
    int same = (pa == NULL && pb == NULL) || (pa && pb && json_equal(pa, pb));
    cJSON_Delete(pa);
    cJSON_Delete(pb);
    return same;
}

void nsb_plan_revisions(const nsb_rev *revs, size_t n, const cJSON *patch, int32_t collision_count,
                        const char *status_hash, const char *nss, nsb_rev_plan *out)
{
    memset(out, 0, sizeof(*out));
    out->update = out->current = -1;
    int64_t maxrev = 0;
    int newest = -1, equal = -1;
    for (size_t i = 0; i < n; i++) {
        /* Newest = highest revision, name as the tie-break (Kubernetes sorts
         * by revision, then by creation time we do not carry). */
        if (newest < 0 || revs[i].revision > revs[newest].revision ||
            (revs[i].revision == revs[newest].revision && strcmp(revs[i].name, revs[newest].name) > 0))
            newest = (int)i;
        if (revs[i].revision > maxrev)
            maxrev = revs[i].revision;
        int same = json_equal(revs[i].data, patch) ||
                   (revs[i].slinky && nsb_revision_equivalent(revs[i].data, patch));
        if (same &&
            (equal < 0 || revs[i].revision > revs[equal].revision ||
             (revs[i].revision == revs[equal].revision && strcmp(revs[i].name, revs[equal].name) > 0)))
            equal = (int)i;
    }
    int64_t next = n ? maxrev + 1 : 1;
    if (equal >= 0) {
        out->update = equal;
        snprintf(out->hash, sizeof(out->hash), "%s", rev_hash(&revs[equal], nss));
        if (equal == newest) {
            out->action = NSB_REV_REUSE;
            out->revision = revs[equal].revision;
        } else {
            out->action = NSB_REV_BUMP;
            out->revision = next;
        }
    } else {
        out->action = NSB_REV_CREATE;
        out->revision = next;
        /* Bounded: each step moves to a name that no listed revision holds
         * or finds one; n + 1 attempts always suffice. */
        for (size_t tries = 0; tries <= n; tries++) {
            nsb_revision_hash(patch, collision_count, out->hash);
            char *name = nsb_revision_name(nss, out->hash);
            int taken = 0;
            for (size_t i = 0; i < n && !taken; i++)
                taken = strcmp(revs[i].name, name) == 0;
            free(name);
            if (!taken)
                break;
            collision_count++;
        }
    }
    out->collision_count = collision_count;
    if (status_hash && *status_hash)
        for (size_t i = 0; i < n; i++)
            if (nsb_revision_same(rev_hash(&revs[i], nss), status_hash, nss)) {
                out->current = (int)i;
                break;
            }
}

int nsb_revision_collides(const cJSON *existing, const cJSON *patch)
{
    return !json_equal(json_child(existing, "data"), patch);
}

typedef struct rev_ref {
    const nsb_rev *r;
    size_t idx;
} rev_ref;

static int cmp_rev_age(const void *a, const void *b)
{
    const rev_ref *x = a, *y = b;
    if (x->r->revision != y->r->revision)
        return x->r->revision < y->r->revision ? -1 : 1;
    return strcmp(x->r->name, y->r->name);
}

size_t nsb_truncate_history(const nsb_rev *revs, size_t n, const char *const *live, size_t nlive,
                            int32_t limit, const char *nss, size_t *out)
{
    rev_ref *hist = xcalloc(n ? n : 1, sizeof(*hist));
    size_t nh = 0;
    for (size_t i = 0; i < n; i++) {
        int is_live = 0;
        for (size_t k = 0; k < nlive && !is_live; k++)
            is_live = nsb_revision_same(live[k], revs[i].name, nss) ||
                      nsb_revision_same(live[k], rev_hash(&revs[i], nss), nss);
        if (!is_live)
            hist[nh++] = (rev_ref){&revs[i], i};
    }
    size_t lim = limit < 0 ? 0 : (size_t)limit, cnt = 0;
    if (nh > lim) {
        qsort(hist, nh, sizeof(*hist), cmp_rev_age);
        for (cnt = 0; cnt < nh - lim; cnt++)
            out[cnt] = hist[cnt].idx;
    }
    free(hist);
    return cnt;
}

/* ---- PVCs -------------------------------------------------------------------------------------- */

char *nsb_pvc_name(const char *claim, const char *nss, const char *suffix)
{
    return xasprintf("%s-%s-%s", claim, nss, suffix);
}

char *nsb_pvc_suffix(const cJSON *nodeset, int ordinal, const char *hostname)
{
    if (nsb_mode_of(nodeset) == NSB_STATEFULSET)
        return nsb_padded_ordinal(padding_of(nodeset), ordinal);
    return xstrdup(str_or(hostname, ""));
}

/* Remove every reference to uid; 1 when something was removed. */
static int remove_ref(cJSON *refs, const char *uid)
{
    int changed = 0;
    for (cJSON *r = refs ? refs->child : NULL; r;) {
        cJSON *next = r->next;
        if (uid && strcmp(json_get_str_or(r, "uid", ""), uid) == 0) {
            cJSON_Delete(cJSON_DetachItemViaPointer(refs, r));
            changed = 1;
        }
        r = next;
    }
    return changed;
}

static int set_ref(cJSON *refs, const char *api, const char *kind, const char *name, const char *uid)
{
    for (cJSON *r = refs->child; r; r = r->next)
        if (strcmp(json_get_str_or(r, "uid", ""), uid) == 0)
            return 0;
    cJSON *r = cJSON_CreateObject();
    json_set_str(r, "apiVersion", api);
    json_set_str(r, "kind", kind);
    json_set_str(r, "name", name);
    json_set_str(r, "uid", uid);
    cJSON_AddItemToArray(refs, r);
    return 1;
}

int nsb_pvc_update_owner_refs(cJSON *pvc, const cJSON *nodeset, const char *pod_name, const char *pod_uid,
                              int pod_condemned)
{
    cJSON *meta = json_obj_ensure(pvc, "metadata");
    cJSON *refs = cJSON_GetObjectItemCaseSensitive(meta, "ownerReferences");
    if (!cJSON_IsArray(refs)) {
        refs = cJSON_CreateArray();
        json_set(meta, "ownerReferences", refs);
    }
    const char *set_uid = meta_str(nodeset, "uid"), *set_name = meta_str(nodeset, "name");
    int del_deleted =
        strcmp(json_get_str_or(nodeset, "spec.persistentVolumeClaimRetentionPolicy.whenDeleted", "Retain"),
               "Delete") == 0;
    int del_scaled =
        strcmp(json_get_str_or(nodeset, "spec.persistentVolumeClaimRetentionPolicy.whenScaled", "Retain"),
               "Delete") == 0;
    int want_set = del_deleted && !(del_scaled && pod_condemned);
    int want_pod = del_scaled && pod_condemned && pod_uid && *pod_uid;
    int changed = 0;
    if (want_set)
        changed |= set_ref(refs, NSB_API_VERSION, NSB_KIND, set_name, set_uid);
    else
        changed |= remove_ref(refs, set_uid);
    if (want_pod)
        changed |= set_ref(refs, "v1", "Pod", str_or(pod_name, ""), pod_uid);
    else
        changed |= remove_ref(refs, pod_uid);
    /* No owners: leave the field out rather than keep an empty list. */
    if (refs->child == NULL)
        json_del(meta, "ownerReferences");
    return changed;
}

cJSON *nsb_build_pvc(const cJSON *nodeset, const cJSON *claim_template, const char *suffix)
{
    const char *nss = meta_str(nodeset, "name");
    cJSON *pvc = cJSON_CreateObject();
    json_set_str(pvc, "apiVersion", "v1");
    json_set_str(pvc, "kind", "PersistentVolumeClaim");
    cJSON *meta = json_obj_ensure(pvc, "metadata");
    char *name = nsb_pvc_name(meta_str(claim_template, "name"), nss, suffix);
    json_set_str(meta, "name", name);
    free(name);
    json_set_str(meta, "namespace", meta_str(nodeset, "namespace"));
    cJSON *labels = nsb_selector_labels(nss);
    add_missing_pairs(labels, json_get(claim_template, "metadata.labels"), NULL);
    json_set(meta, "labels", labels);
    const cJSON *ann = json_get(claim_template, "metadata.annotations");
    if (is_nonempty_obj(ann))
        json_set(meta, "annotations", cJSON_Duplicate(ann, 1));
    const cJSON *spec = json_child(claim_template, "spec");
    json_set(pvc, "spec", cJSON_IsObject(spec) ? cJSON_Duplicate(spec, 1) : cJSON_CreateObject());
    (void)nsb_pvc_update_owner_refs(pvc, nodeset, NULL, NULL, 0);
    return pvc;
}

/* ---- shared objects ---------------------------------------------------------------------------- */

static int cmp_owner(const void *a, const void *b)
{
    const nsb_owner *x = *(const nsb_owner *const *)a, *y = *(const nsb_owner *const *)b;
    int c = strcmp(str_or(x->name, ""), str_or(y->name, ""));
    return c ? c : strcmp(str_or(x->uid, ""), str_or(y->uid, ""));
}

cJSON *nsb_shared_owner_refs(const nsb_owner *owners, size_t n)
{
    const nsb_owner **v = xcalloc(n ? n : 1, sizeof(*v));
    for (size_t i = 0; i < n; i++)
        v[i] = &owners[i];
    qsort(v, n, sizeof(*v), cmp_owner);
    cJSON *refs = cJSON_CreateArray();
    for (size_t i = 0; i < n; i++)
        cJSON_AddItemToArray(refs, owner_ref(str_or(v[i]->name, ""), str_or(v[i]->uid, ""), 0, 1));
    free(v);
    return refs;
}

char *nsb_worker_service_name(const char *ctl)
{
    return xasprintf("slurm-workers-%s", ctl);
}

char *nsb_worker_pdb_name(const char *ctl)
{
    return xasprintf("slurm-workers-pdb-%s", ctl);
}

static cJSON *shared_meta(cJSON *obj, char *name, const char *ctl, const char *ns, const nsb_owner *owners,
                          size_t n)
{
    cJSON *meta = json_obj_ensure(obj, "metadata");
    json_set_str(meta, "name", name);
    free(name);
    json_set_str(meta, "namespace", ns);
    cJSON *labels = json_obj_ensure(meta, "labels");
    json_set_str(labels, NSB_LABEL_COMPONENT, "worker");
    json_set_str(labels, NSB_LABEL_CLUSTER, ctl);
    json_set(meta, "ownerReferences", nsb_shared_owner_refs(owners, n));
    return meta;
}

cJSON *nsb_build_worker_service(const char *ctl, const char *ns, const nsb_owner *owners, size_t n)
{
    cJSON *svc = cJSON_CreateObject();
    json_set_str(svc, "apiVersion", "v1");
    json_set_str(svc, "kind", "Service");
    shared_meta(svc, nsb_worker_service_name(ctl), ctl, ns, owners, n);
    cJSON *spec = json_obj_ensure(svc, "spec");
    json_set_str(spec, "clusterIP", "None");
    json_set_bool(spec, "publishNotReadyAddresses", 1);
    cJSON *sel = json_obj_ensure(spec, "selector");
    json_set_str(sel, NSB_LABEL_APP, "slurmd");
    json_set_str(sel, NSB_LABEL_CLUSTER, ctl);
    cJSON *ports = cJSON_CreateArray();
    cJSON *p = cJSON_CreateObject();
    json_set_str(p, "name", "slurmd");
    json_set_str(p, "protocol", "TCP");
    json_set_int(p, "port", NSB_SLURMD_PORT);
    json_set_str(p, "targetPort", "slurmd");
    cJSON_AddItemToArray(ports, p);
    json_set(spec, "ports", ports);
    return svc;
}

cJSON *nsb_build_worker_pdb(const char *ctl, const char *ns, const nsb_owner *owners, size_t n)
{
    cJSON *pdb = cJSON_CreateObject();
    json_set_str(pdb, "apiVersion", "policy/v1");
    json_set_str(pdb, "kind", "PodDisruptionBudget");
    shared_meta(pdb, nsb_worker_pdb_name(ctl), ctl, ns, owners, n);
    cJSON *spec = json_obj_ensure(pdb, "spec");
    json_set_int(spec, "maxUnavailable", 0);
    cJSON *ml = json_obj_path_ensure(spec, "selector.matchLabels");
    json_set_str(ml, NSB_LABEL_POD_PROTECT, "true");
    json_set_str(ml, NSB_LABEL_CLUSTER, ctl);
    return pdb;
}

char *nsb_sshd_config(const char *extra)
{
    /* Users reach workers with a key or their directory password (sssd via
     * PAM); distribution defaults in sshd_config.d still apply. */
    buf_t b;
    buf_init(&b, BUF_UNLIMITED);
    put(&b, "Include /etc/ssh/sshd_config.d/*.conf\n"
            "UsePAM yes\n"
            "AuthenticationMethods publickey password\n"
            "Subsystem sftp internal-sftp\n");
    if (extra && *extra) {
        put(&b, extra);
        if (extra[strlen(extra) - 1] != '\n')
            putch(&b, '\n');
    }
    return buf_detach(&b, NULL);
}

cJSON *nsb_build_ssh_configmap(const cJSON *nodeset)
{
    if (!spec_bool(nodeset, "ssh.enabled", 0))
        return NULL;
    cJSON *cm = cJSON_CreateObject();
    json_set_str(cm, "apiVersion", "v1");
    json_set_str(cm, "kind", "ConfigMap");
    cJSON *meta = json_obj_ensure(cm, "metadata");
    char *name = xasprintf("%s-ssh-config", meta_str(nodeset, "name"));
    json_set_str(meta, "name", name);
    free(name);
    json_set_str(meta, "namespace", meta_str(nodeset, "namespace"));
    json_set(meta, "labels", nsb_worker_labels(nodeset));
    json_set(meta, "ownerReferences", controller_refs(nodeset));
    char *conf = nsb_sshd_config(json_get_str(nodeset, "spec.ssh.extraSshdConfig"));
    json_set_str(json_obj_ensure(cm, "data"), "sshd_config", conf);
    free(conf);
    return cm;
}

/* ---- pods -------------------------------------------------------------------------------------- */

enum nsb_phase nsb_phase_parse(const char *s)
{
    if (s == NULL || *s == '\0')
        return NSB_PHASE_NONE;
    if (strcmp(s, "Pending") == 0)
        return NSB_PHASE_PENDING;
    if (strcmp(s, "Running") == 0)
        return NSB_PHASE_RUNNING;
    if (strcmp(s, "Succeeded") == 0)
        return NSB_PHASE_SUCCEEDED;
    if (strcmp(s, "Failed") == 0)
        return NSB_PHASE_FAILED;
    return NSB_PHASE_UNKNOWN;
}

/* strconv.ParseBool's true spellings. */
static int parse_true(const char *s)
{
    static const char *const t[] = {"1", "t", "T", "TRUE", "true", "True"};
    for (size_t i = 0; s && i < ARRAY_SIZE(t); i++)
        if (strcmp(s, t[i]) == 0)
            return 1;
    return 0;
}

void nsb_pod_from_json(const cJSON *pod, const char *nss, nsb_pod *p)
{
    memset(p, 0, sizeof(*p));
    const cJSON *meta = json_child(pod, "metadata");
    const cJSON *labels = json_child(meta, "labels"), *ann = json_child(meta, "annotations");
    p->name = json_get_str_or(meta, "name", "");
    p->revision = child_str(labels, NSB_LABEL_REVISION);
    if (p->revision == NULL)
        p->revision = child_str(labels, NSB_LABEL_REVISION_SLINKY);
    p->ordinal = nss ? nsb_parse_ordinal(p->name, nss) : nsb_split_pod_name(p->name, NULL);
    p->phase = nsb_phase_parse(json_get_str(pod, "status.phase"));
    const char *node = json_get_str(pod, "spec.nodeName");
    p->scheduled = node && *node;
    p->terminating =
        json_child(meta, "deletionTimestamp") != NULL && !cJSON_IsNull(json_child(meta, "deletionTimestamp"));
    p->created = rfc3339_secs(json_get_str(meta, "creationTimestamp"));
    const cJSON *conds = json_get(pod, "status.conditions");
    for (const cJSON *c = conds ? conds->child : NULL; c; c = c->next)
        if (strcmp(json_get_str_or(c, "type", ""), "Ready") == 0) {
            p->ready = strcmp(json_get_str_or(c, "status", ""), "True") == 0;
            if (p->ready)
                p->ready_since = rfc3339_secs(json_get_str(c, "lastTransitionTime"));
            break;
        }
    p->cordoned = parse_true(child_str(ann, NSB_ANN_POD_CORDON));
    const char *cost = child_str(ann, NSB_ANN_DELETION_COST);
    if (cost) {
        char *end;
        long long v = strtoll(cost, &end, 10);
        if (*cost && *end == '\0' && v >= INT32_MIN && v <= INT32_MAX)
            p->deletion_cost = (int32_t)v;
    }
    p->deadline = rfc3339_secs(child_str(ann, NSB_ANN_DEADLINE));
}

int nsb_pod_running_ready(const nsb_pod *p)
{
    return p->phase == NSB_PHASE_RUNNING && p->ready;
}

int nsb_pod_available(const nsb_pod *p, int32_t min_ready, int64_t now)
{
    if (!nsb_pod_running_ready(p))
        return 0;
    if (min_ready <= 0)
        return 1;
    return p->ready_since != 0 && p->ready_since + min_ready < now;
}

int nsb_pod_healthy(const nsb_pod *p)
{
    return nsb_pod_running_ready(p) && !p->terminating;
}

static int phase_weight(enum nsb_phase ph)
{
    /* Pods in phases outside this table weigh as Pending (Go's map zero value). */
    return ph == NSB_PHASE_UNKNOWN ? 1 : ph == NSB_PHASE_RUNNING ? 2 : 0;
}

/* afterOrZero: a zero time counts as later than any other. Returns -1 when a
 * is "after" b (a goes first), 1 when b is, 0 when equal. */
static int after_or_zero(int64_t a, int64_t b)
{
    if (a == b)
        return 0;
    if (a == 0 || b == 0)
        return a == 0 ? -1 : 1;
    return a > b ? -1 : 1;
}

int nsb_victim_cmp(const nsb_pod *a, const nsb_pod *b)
{
    if (a->scheduled != b->scheduled)
        return a->scheduled ? 1 : -1;
    int wa = phase_weight(a->phase), wb = phase_weight(b->phase);
    if (wa != wb)
        return wa < wb ? -1 : 1;
    if (a->ready != b->ready)
        return a->ready ? 1 : -1;
    if (a->deletion_cost != b->deletion_cost)
        return a->deletion_cost < b->deletion_cost ? -1 : 1;
    if (a->deadline != b->deadline)
        return a->deadline < b->deadline ? -1 : 1;
    if (a->cordoned != b->cordoned)
        return a->cordoned ? -1 : 1;
    if (a->ordinal != b->ordinal)
        return a->ordinal > b->ordinal ? -1 : 1;
    if (a->ready && b->ready) {
        int c = after_or_zero(a->ready_since, b->ready_since);
        if (c)
            return c;
    }
    return after_or_zero(a->created, b->created);
}

static int cmp_victim_ptr(const void *x, const void *y)
{
    const nsb_pod *a = *(const nsb_pod *const *)x, *b = *(const nsb_pod *const *)y;
    int c = nsb_victim_cmp(a, b);
    return c ? c : strcmp(str_or(a->name, ""), str_or(b->name, ""));
}

void nsb_sort_victims(const nsb_pod **v, size_t n)
{
    qsort(v, n, sizeof(*v), cmp_victim_ptr);
}

/* ---- update strategy --------------------------------------------------------------------------- */

int nsb_max_unavailable(const cJSON *v, int total, int *out)
{
    long long val;
    if (v == NULL) {
        val = ((long long)total * 25 + 99) / 100;
    } else if (cJSON_IsNumber(v)) {
        if (v->valuedouble < 0 || v->valuedouble != floor(v->valuedouble) || v->valuedouble > INT32_MAX)
            return OP_EINVAL;
        val = (long long)v->valuedouble;
    } else if (cJSON_IsString(v)) {
        const char *s = v->valuestring;
        size_t len = strlen(s);
        if (len < 2 || s[len - 1] != '%')
            return OP_EINVAL;
        long long pct = 0;
        for (size_t i = 0; i + 1 < len; i++) {
            if (!isdigit((unsigned char)s[i]))
                return OP_EINVAL;
            pct = pct * 10 + (s[i] - '0');
            if (pct > INT32_MAX)
                return OP_EINVAL;
        }
        long long t = total < 0 ? 0 : total;
        val = (pct * t + 99) / 100; /* rounded up */
    } else {
        return OP_EINVAL;
    }
    if (val < 1)
        val = 1;
    *out = val > INT32_MAX ? INT32_MAX : (int)val;
    return 0;
}

int nsb_rolling_budget(int max_unavailable, int unavailable)
{
    int b = max_unavailable - unavailable;
    if (b < 0)
        b = 0;
    if (b > max_unavailable)
        b = max_unavailable;
    return b;
}

static int is_new(const nsb_pod *p, const char *update_rev, const char *nss)
{
    return !p->terminating && nsb_revision_same(p->revision, update_rev, nss);
}

static int cmp_creation_ptr(const void *x, const void *y)
{
    const nsb_pod *a = *(const nsb_pod *const *)x, *b = *(const nsb_pod *const *)y;
    if (a->created != b->created)
        return a->created < b->created ? -1 : 1;
    return strcmp(str_or(a->name, ""), str_or(b->name, ""));
}

void nsb_split_update(const nsb_pod *pods, size_t n, const char *update_rev, const char *nss,
                      const nsb_pod **out, nsb_split *counts)
{
    size_t k = 0;
    memset(counts, 0, sizeof(*counts));
    for (size_t i = 0; i < n; i++)
        if (!is_new(&pods[i], update_rev, nss) && !nsb_pod_healthy(&pods[i]))
            out[k++] = &pods[i];
    counts->old_unhealthy = k;
    qsort(out, k, sizeof(*out), cmp_creation_ptr);
    for (size_t i = 0; i < n; i++)
        if (!is_new(&pods[i], update_rev, nss) && nsb_pod_healthy(&pods[i]))
            out[k++] = &pods[i];
    counts->old_healthy = k - counts->old_unhealthy;
    nsb_sort_victims(out + counts->old_unhealthy, counts->old_healthy);
    size_t start = k;
    for (size_t i = 0; i < n; i++)
        if (is_new(&pods[i], update_rev, nss))
            out[k++] = &pods[i];
    counts->fresh = k - start;
    nsb_sort_victims(out + start, counts->fresh);
}

int nsb_rolling_unavailable(const nsb_pod *pods, size_t n, const char *update_rev, const char *nss,
                            int replicas, int32_t min_ready, int64_t now)
{
    int unavailable = 0;
    if (replicas >= 0 && (size_t)replicas > n)
        unavailable += replicas - (int)n;
    for (size_t i = 0; i < n; i++)
        if (is_new(&pods[i], update_rev, nss) && !nsb_pod_available(&pods[i], min_ready, now))
            unavailable++;
    return unavailable;
}

/* ---- status ------------------------------------------------------------------------------------ */

void nsb_count(const nsb_pod *pods, size_t n, const char *update_rev, const char *current_rev,
               const char *nss, enum nsb_mode mode, int32_t desired, int32_t min_ready, int64_t now,
               nsb_counts *out)
{
    memset(out, 0, sizeof(*out));
    for (size_t i = 0; i < n; i++) {
        const nsb_pod *p = &pods[i];
        int created = p->phase != NSB_PHASE_NONE;
        if (created)
            out->replicas++;
        if (nsb_pod_running_ready(p)) {
            out->ready++;
            if (nsb_pod_available(p, min_ready, now))
                out->available++;
        }
        if (created && !p->terminating) {
            if (nsb_revision_same(p->revision, current_rev, nss))
                out->current++;
            if (nsb_revision_same(p->revision, update_rev, nss))
                out->updated++;
        }
    }
    out->desired = desired;
    int32_t base = mode == NSB_DAEMONSET ? desired : out->replicas;
    out->unavailable = base > out->available ? base - out->available : 0;
}

cJSON *nsb_build_status(const cJSON *nodeset, const nsb_counts *c, const nsb_slurm_counts *s,
                        const char *hash, int32_t collision_count, const cJSON *ordinal_to_node)
{
    cJSON *st = cJSON_CreateObject();
    json_set_int(st, "replicas", c->replicas);
    json_set_int(st, "updatedReplicas", c->updated);
    json_set_int(st, "readyReplicas", c->ready);
    json_set_int(st, "availableReplicas", c->available);
    json_set_int(st, "unavailableReplicas", c->unavailable);
    json_set_int(st, "desired", c->desired);
    json_set_int(st, "slurmIdle", s ? s->idle : 0);
    json_set_int(st, "slurmAllocated", s ? s->allocated : 0);
    json_set_int(st, "slurmDown", s ? s->down : 0);
    json_set_int(st, "slurmDrain", s ? s->drain : 0);
    if (s && s->demand_known) {
        json_set_int(st, "slurmPendingNodes", s->pending_nodes);
        json_set_int(st, "slurmIdleCooledNodes", s->idle_cooled);
    }
    json_set_int(st, "observedGeneration", json_get_int(nodeset, "metadata.generation", 0));
    json_set_str(st, "nodeSetHash", str_or(hash, ""));
    json_set_int(st, "collisionCount", collision_count);
    if (cJSON_IsObject(ordinal_to_node))
        json_set(st, "ordinalToNode", cJSON_Duplicate(ordinal_to_node, 1));
    char *sel = nsb_selector_string(meta_str(nodeset, "name"));
    json_set_str(st, "selector", sel);
    free(sel);
    const cJSON *conds = json_get(nodeset, "status.conditions");
    json_set(st, "conditions", cJSON_IsArray(conds) ? cJSON_Duplicate(conds, 1) : cJSON_CreateArray());
    return st;
}

/* ---- validation -------------------------------------------------------------------------------- */

static void msg(nsb_msgs *m, const char *fmt, ...) OP_PRINTF(2, 3);
static void msg(nsb_msgs *m, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    m->v = xrealloc(m->v, (m->n + 1) * sizeof(*m->v));
    m->v[m->n++] = xvasprintf(fmt, ap);
    va_end(ap);
}

void nsb_msgs_free(nsb_msgs *m)
{
    for (size_t i = 0; i < m->n; i++)
        free(m->v[i]);
    free(m->v);
    m->v = NULL;
    m->n = 0;
}

int nsb_parse_duration(const char *s, double *seconds)
{
    static const struct {
        const char *unit;
        double sec;
    } units[] = {{"ns", 1e-9}, {"us", 1e-6}, {"\xc2\xb5s", 1e-6}, {"\xce\xbcs", 1e-6},
                 {"ms", 1e-3}, {"s", 1},     {"m", 60},           {"h", 3600}};
    if (s == NULL || *s == '\0')
        return OP_EINVAL;
    const char *p = s;
    int neg = 0;
    if (*p == '+' || *p == '-')
        neg = (*p++ == '-');
    if (strcmp(p, "0") == 0) {
        *seconds = 0;
        return 0;
    }
    double total = 0;
    if (*p == '\0')
        return OP_EINVAL;
    while (*p) {
        double v = 0, scale = 1;
        int nd = 0;
        while (isdigit((unsigned char)*p))
            v = v * 10 + (*p++ - '0'), nd++;
        if (*p == '.') {
            p++;
            while (isdigit((unsigned char)*p)) {
                scale /= 10;
                v += (*p++ - '0') * scale;
                nd++;
            }
        }
        if (nd == 0)
            return OP_EINVAL;
        size_t best = ARRAY_SIZE(units), blen = 0;
        for (size_t i = 0; i < ARRAY_SIZE(units); i++) {
            size_t l = strlen(units[i].unit);
            if (strncmp(p, units[i].unit, l) == 0 && l > blen)
                best = i, blen = l;
        }
        if (best == ARRAY_SIZE(units))
            return OP_EINVAL;
        total += v * units[best].sec;
        p += blen;
    }
    *seconds = neg ? -total : total;
    return 0;
}

static int hostname_prefix_ok(const char *h)
{
    /* The prefix followed by an ordinal must be a DNS-1123 label: lowercase
     * alphanumerics and '-', starting with an alphanumeric, the prefix at
     * most 62 characters so that one digit still fits in 63. */
    size_t n = strlen(h);
    if (n == 0 || n > 62 || !(islower((unsigned char)h[0]) || isdigit((unsigned char)h[0])))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!(islower((unsigned char)h[i]) || isdigit((unsigned char)h[i]) || h[i] == '-'))
            return 0;
    return 1;
}

static int in_list(const char *s, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(s, list[i]) == 0)
            return 1;
    return 0;
}

size_t nsb_validate(const cJSON *nodeset, const cJSON *old, nsb_msgs *out)
{
    size_t before = out->n;
    const cJSON *spec = spec_of(nodeset);

    if (*json_get_str_or(spec, "controllerRef.name", "") == '\0')
        msg(out, "spec.controllerRef.name must not be empty");

    const cJSON *mode = json_child(spec, "scalingMode");
    static const char *const modes[] = {"StatefulSet", "DaemonSet"};
    if (mode && !(cJSON_IsString(mode) && in_list(mode->valuestring, modes, 2)))
        msg(out, "spec.scalingMode must be StatefulSet or DaemonSet");

    const cJSON *us = json_child(spec, "updateStrategy");
    const char *type = json_get_str_or(us, "type", "RollingUpdate");
    static const char *const types[] = {"RollingUpdate", "OnDelete", "ScheduledUpdate"};
    if (!in_list(type, types, 3))
        msg(out, "spec.updateStrategy.type must be RollingUpdate, OnDelete or ScheduledUpdate, got \"%s\"",
            type);
    const cJSON *mu = json_get(us, "rollingUpdate.maxUnavailable");
    if (mu) {
        int dummy;
        if (cJSON_IsNumber(mu) && mu->valuedouble < 1)
            msg(out, "spec.updateStrategy.rollingUpdate.maxUnavailable must be >= 1, got %lld",
                json_num_ll(mu, 0));
        else if (cJSON_IsString(mu) && nsb_max_unavailable(mu, 100, &dummy) == 0 &&
                 strspn(mu->valuestring, "0") == strlen(mu->valuestring) - 1)
            msg(out, "spec.updateStrategy.rollingUpdate.maxUnavailable must not be 0%%");
        else if (nsb_max_unavailable(mu, 100, &dummy) != 0)
            msg(out, "spec.updateStrategy.rollingUpdate.maxUnavailable must be an integer or a percentage");
    }
    const cJSON *su = json_child(us, "scheduledUpdate");
    const char *dur = json_get_str(su, "duration");
    double secs;
    if (dur) {
        if (nsb_parse_duration(dur, &secs) != 0)
            msg(out, "spec.updateStrategy.scheduledUpdate.duration \"%s\" is not a valid duration", dur);
        else if (secs < 60)
            msg(out, "spec.updateStrategy.scheduledUpdate.duration must be at least 1m, got %s", dur);
    }
    if (strcmp(type, "ScheduledUpdate") == 0 &&
        (json_get_str(su, "startTime") == NULL || json_child(su, "duration") == NULL))
        msg(out, "spec.updateStrategy.scheduledUpdate.startTime and duration must be set when type is "
                 "ScheduledUpdate");
    const char *start = json_get_str(su, "startTime");
    if (start && rfc3339_secs(start) == 0)
        msg(out, "spec.updateStrategy.scheduledUpdate.startTime \"%s\" is not an RFC 3339 time", start);

    if (json_get_bool(spec, "ssh.enabled", 0) && *json_get_str_or(spec, "ssh.sssdConfRef.name", "") == '\0')
        msg(out, "spec.ssh.sssdConfRef.name must not be empty when ssh is enabled");

    const char *host = json_get_str(spec, "template.spec.hostname");
    if (host && *host && !hostname_prefix_ok(host))
        msg(out,
            "spec.template.spec.hostname \"%s\" is not a valid hostname prefix (lowercase letters, digits "
            "and '-', starting with a letter or digit, at most 62 characters)",
            host);

    /* With it the kubelet names the pod's host <hostname>.<subdomain>.<ns>.svc.<cluster domain>, and slurmd
     * registers under that whole name; the cluster domain is the kubelet's
     * setting, which slurmop cannot read, so the name could not be derived. */
    if (json_get_bool(spec, "template.spec.setHostnameAsFQDN", 0))
        msg(out,
            "spec.template.spec.setHostnameAsFQDN must not be true: slurmd would register under the pod's "
            "fully qualified name, which depends on the kubelet's cluster domain and cannot be derived");

    const char *extra = json_get_str(spec, "extraConf");
    if (extra) {
        char *copy = xstrdup(extra), *save = NULL;
        for (char *tok = strtok_r(copy, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
            char *eq = strchr(tok, '=');
            int c = nsb_shell_unsafe(tok);
            if (eq == NULL || eq == tok)
                msg(out, "spec.extraConf item \"%s\" is not Key=Value", tok);
            else if (c >= 0x20 && c != 0x7f)
                msg(out,
                    "spec.extraConf item \"%s\" has '%c': slurmd's arguments may pass through a shell, "
                    "which would interpret it",
                    tok, c);
            else if (c)
                msg(out, "spec.extraConf item \"%s\" has a control character (items are separated by spaces)",
                    tok);
        }
        free(copy);
    }
    const char *pconf = json_get_str(spec, "partition.config");
    if (pconf && (*pconf == '\0' || strchr(pconf, '\n')))
        msg(out, "spec.partition.config must be one non-empty line");

    long long pad = json_get_int(spec, "ordinalPadding", 0);
    if (pad < 0 || pad > 64)
        msg(out, "spec.ordinalPadding must be between 0 and 64, got %lld", pad);
    long long replicas = json_get_int(spec, "replicas", 0);
    if (replicas < 0)
        msg(out, "spec.replicas must not be negative");
    else if (replicas > NSB_REPLICAS_MAX)
        msg(out, "spec.replicas must be at most %d, got %lld", NSB_REPLICAS_MAX, replicas);

    if (old) {
        const cJSON *ospec = spec_of(old);
        if (!json_equal(json_child(spec, "controllerRef"), json_child(ospec, "controllerRef")))
            msg(out, "spec.controllerRef cannot be changed after creation");
        const cJSON *a = json_child(spec, "volumeClaimTemplates"),
                    *b = json_child(ospec, "volumeClaimTemplates");
        int a_empty = a == NULL || cJSON_IsNull(a) || json_len(a) == 0;
        int b_empty = b == NULL || cJSON_IsNull(b) || json_len(b) == 0;
        if (!(a_empty && b_empty) && !json_equal(a, b))
            msg(out, "spec.volumeClaimTemplates cannot be changed after creation");
    }
    return out->n - before;
}
