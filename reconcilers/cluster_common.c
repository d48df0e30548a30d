#include "reconcilers/cluster_common.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "core/crypto.h"
#include "core/err.h"
#include "core/json.h"

const cJSON *clc_get(const clc_env *env, const char *kind, const char *name)
{
    if (env == NULL || env->get == NULL || name == NULL || *name == '\0')
        return NULL;
    return env->get(env->ud, kind, name);
}

const char *clc_cluster_domain(const clc_env *env)
{
    if (env && env->cluster_domain && *env->cluster_domain)
        return env->cluster_domain;
    return CLC_DEFAULT_CLUSTER_DOMAIN;
}

const char *clc_str(const cJSON *obj, const char *key)
{
    const cJSON *v = key ? json_child(obj, key) : NULL;
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

int clc_fail(char **why, int code, const char *fmt, ...)
{
    if (why) {
        va_list ap;
        va_start(ap, fmt);
        free(*why);
        *why = xvasprintf(fmt, ap);
        va_end(ap);
    }
    return code;
}

cJSON *clc_metadata(const char *name, const char *ns)
{
    cJSON *m = cJSON_CreateObject();
    json_set_str(m, "name", name);
    json_set_str(m, "namespace", ns ? ns : "");
    return m;
}

cJSON *clc_owner_ref(const char *api_version, const char *kind, const char *name, const char *uid,
                     int controller)
{
    cJSON *r = cJSON_CreateObject();
    json_set_str(r, "apiVersion", api_version);
    json_set_str(r, "kind", kind);
    json_set_str(r, "name", name ? name : "");
    json_set_str(r, "uid", uid ? uid : "");
    if (controller)
        json_set_bool(r, "controller", 1);
    json_set_bool(r, "blockOwnerDeletion", 1);
    return r;
}

void clc_set_controller_ref(cJSON *obj, const char *kind, const cJSON *cr)
{
    cJSON *meta = json_obj_ensure(obj, "metadata");
    cJSON *refs = cJSON_CreateArray();
    cJSON_AddItemToArray(refs, clc_owner_ref(CLC_API_VERSION, kind, json_get_str(cr, "metadata.name"),
                                             json_get_str(cr, "metadata.uid"), 1));
    json_set(meta, "ownerReferences", refs);
}

cJSON *clc_labels_for(const cJSON *cr, const cJSON *extra, const char *app, const char *component)
{
    cJSON *ours = clc_labels(app, json_get_str_or(cr, "metadata.name", ""), component);
    cJSON *l = CLC_MERGE(json_get(cr, "metadata.labels"), extra, ours);
    cJSON_Delete(ours);
    return l;
}

cJSON *clc_new_object(const char *api_version, const char *kind, const char *name, const cJSON *cr,
                      const char *cr_kind, cJSON *labels, cJSON *annotations)
{
    cJSON *o = cJSON_CreateObject();
    json_set_str(o, "apiVersion", api_version);
    json_set_str(o, "kind", kind);
    cJSON *meta = clc_metadata(name, json_get_str_or(cr, "metadata.namespace", ""));
    json_set(meta, "labels", labels ? labels : cJSON_CreateObject());
    json_set(meta, "annotations", annotations ? annotations : cJSON_CreateObject());
    json_set(o, "metadata", meta);
    clc_set_controller_ref(o, cr_kind, cr);
    return o;
}

static int key_cmp(const void *a, const void *b)
{
    const cJSON *x = *(const cJSON *const *)a, *y = *(const cJSON *const *)b;
    return strcmp(x->string, y->string);
}

void clc_sort_keys(cJSON *obj)
{
    if (!cJSON_IsObject(obj) || obj->child == NULL)
        return;
    size_t n = 0;
    for (cJSON *c = obj->child; c; c = c->next)
        n++;
    cJSON **v = xmalloc(n * sizeof(*v));
    n = 0;
    for (cJSON *c = obj->child; c; c = c->next)
        v[n++] = c;
    /* qsort is not stable, but keys of one object are unique. */
    qsort(v, n, sizeof(*v), key_cmp);
    /* Relink in cJSON's layout: next chains forward, the head's prev points
     * at the tail. */
    for (size_t i = 0; i < n; i++) {
        v[i]->next = i + 1 < n ? v[i + 1] : NULL;
        v[i]->prev = i > 0 ? v[i - 1] : v[n - 1];
    }
    obj->child = v[0];
    free(v);
}

cJSON *clc_strmap_merge(const cJSON *const *maps, size_t n)
{
    cJSON *out = cJSON_CreateObject();
    for (size_t i = 0; i < n; i++) {
        if (!cJSON_IsObject(maps[i]))
            continue;
        for (const cJSON *kv = maps[i]->child; kv; kv = kv->next)
            if (cJSON_IsString(kv) && kv->string && strcmp(kv->string, CLC_ANN_LAST_APPLIED) != 0)
                json_set_str(out, kv->string, kv->valuestring);
    }
    clc_sort_keys(out);
    return out;
}

cJSON *clc_strmap(const char *k, ...)
{
    cJSON *out = cJSON_CreateObject();
    va_list ap;
    va_start(ap, k);
    while (k) {
        const char *v = va_arg(ap, const char *);
        json_set_str(out, k, v ? v : "");
        k = va_arg(ap, const char *);
    }
    va_end(ap);
    clc_sort_keys(out);
    return out;
}

cJSON *clc_labels(const char *app, const char *instance, const char *component)
{
    if (component)
        return clc_strmap(CLC_LABEL_NAME, app, CLC_LABEL_INSTANCE, instance, CLC_LABEL_COMPONENT, component,
                          NULL);
    return clc_strmap(CLC_LABEL_NAME, app, CLC_LABEL_INSTANCE, instance, NULL);
}

void clc_hash_data(const cJSON *obj, int base64, char out[65])
{
    const cJSON *data = json_child(obj, "data");
    size_t n = 0;
    if (cJSON_IsObject(data))
        for (const cJSON *c = data->child; c; c = c->next)
            n++;
    out[0] = '\0';
    if (n == 0)
        return;
    const cJSON **v = xmalloc(n * sizeof(*v));
    n = 0;
    for (const cJSON *c = data->child; c; c = c->next)
        v[n++] = c;
    qsort(v, n, sizeof(*v), key_cmp);
    sha256_ctx ctx;
    sha256_begin(&ctx);
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (!cJSON_IsString(v[i]))
            continue;
        const char *s = v[i]->valuestring;
        size_t len = strlen(s);
        uint8_t *dec = NULL;
        size_t dlen = 0;
        if (base64 && (dec = base64_decode(s, len, &dlen)) != NULL) {
            sha256_update(&ctx, dec, dlen);
            total += dlen;
            free(dec);
        } else {
            sha256_update(&ctx, s, len);
            total += len;
        }
    }
    uint8_t d[SHA256_LEN];
    sha256_end(&ctx, d);
    free(v);
    /* Slinky returns "" rather than the hash of nothing. */
    if (total)
        hex_encode(d, SHA256_LEN, out);
}

void clc_hash_secret_key(const cJSON *secret, const char *key, char out[65])
{
    const char *s = clc_str(json_child(secret, "data"), key);
    if (s == NULL) {
        sha256_hex("", 0, out);
        return;
    }
    size_t dlen = 0;
    uint8_t *dec = base64_decode(s, strlen(s), &dlen);
    if (dec) {
        sha256_hex(dec, dlen, out);
        free(dec);
    } else {
        sha256_hex(s, strlen(s), out);
    }
}

void clc_hash_str(const char *s, char out[65])
{
    sha256_hex(s ? s : "", s ? strlen(s) : 0, out);
}

const cJSON *clc_jwt_ref(const cJSON *spec)
{
    const cJSON *r = json_child(spec, "jwtKeyRef");
    if (cJSON_IsObject(r))
        return r;
    r = json_child(spec, "jwtHs256KeyRef");
    return cJSON_IsObject(r) ? r : NULL;
}

const char *clc_nodeset_name(const cJSON *nodeset, char *buf, size_t size)
{
    const char *name = json_get_str_or(nodeset, "metadata.name", "");
    const char *h = json_get_str(nodeset, "spec.template.spec.hostname");
    if (h == NULL || size == 0)
        return name;
    while (*h && isspace((unsigned char)*h))
        h++;
    size_t n = 0;
    while (h[n] && !isspace((unsigned char)h[n]))
        n++;
    while (n && *h == '-')
        h++, n--;
    while (n && h[n - 1] == '-')
        n--;
    if (n == 0)
        return name;
    if (n >= size)
        n = size - 1;
    memcpy(buf, h, n);
    buf[n] = '\0';
    return buf;
}

char *clc_cluster_name(const cJSON *controller)
{
    const char *cn = json_get_str(controller, "spec.clusterName");
    if (cn && *cn)
        return xstrdup(cn);
    return xasprintf("%s_%s", json_get_str_or(controller, "metadata.namespace", ""),
                     json_get_str_or(controller, "metadata.name", ""));
}

int clc_controller_replicas(const cJSON *controller)
{
    if (clc_is_external(controller) || !json_get_bool(controller, "spec.ha.enabled", 0))
        return 1;
    long long b = json_get_int(controller, "spec.ha.backups", 1);
    if (b < 0)
        b = 0;
    if (b > 1000)
        b = 1000; /* a schema bound would be int32; keep the config generator sane */
    return 1 + (int)b;
}

int clc_is_external(const cJSON *cr)
{
    return json_get_bool(cr, "spec.external", 0);
}

cJSON *clc_mount(const char *name, const char *path, const char *subpath, int readonly)
{
    cJSON *m = cJSON_CreateObject();
    json_set_str(m, "name", name);
    json_set_str(m, "mountPath", path);
    if (subpath)
        json_set_str(m, "subPath", subpath);
    if (readonly)
        json_set_bool(m, "readOnly", 1);
    return m;
}

cJSON *clc_key_to_path(const char *key, const char *path, int mode)
{
    cJSON *k = cJSON_CreateObject();
    json_set_str(k, "key", key ? key : "");
    json_set_str(k, "path", path);
    if (mode >= 0)
        json_set_int(k, "mode", mode);
    return k;
}

cJSON *clc_secret_projection(const char *name, const char *key, const char *path)
{
    cJSON *p = cJSON_CreateObject();
    cJSON *s = json_obj_ensure(p, "secret");
    json_set_str(s, "name", name ? name : "");
    cJSON *items = cJSON_CreateArray();
    cJSON_AddItemToArray(items, clc_key_to_path(key, path, -1));
    json_set(s, "items", items);
    return p;
}

cJSON *clc_configmap_projection(const char *name, const char *key, const char *path)
{
    cJSON *p = cJSON_CreateObject();
    cJSON *c = json_obj_ensure(p, "configMap");
    json_set_str(c, "name", name ? name : "");
    if (key) {
        cJSON *items = cJSON_CreateArray();
        cJSON_AddItemToArray(items, clc_key_to_path(key, path, -1));
        json_set(c, "items", items);
    }
    return p;
}

cJSON *clc_empty_dir(const char *name, int memory)
{
    cJSON *v = cJSON_CreateObject();
    json_set_str(v, "name", name);
    cJSON *e = json_obj_ensure(v, "emptyDir");
    if (memory)
        json_set_str(e, "medium", "Memory");
    return v;
}

cJSON *clc_sh_command(const char *script)
{
    cJSON *cmd = cJSON_CreateArray();
    cJSON_AddItemToArray(cmd, cJSON_CreateString("sh"));
    cJSON_AddItemToArray(cmd, cJSON_CreateString("-c"));
    cJSON_AddItemToArray(cmd, cJSON_CreateString(script));
    return cmd;
}

cJSON *clc_probe(cJSON *handler_kv, int failure_threshold, int period_seconds)
{
    cJSON *p = cJSON_CreateObject();
    cJSON_AddItemToObject(p, handler_kv->string, handler_kv);
    if (failure_threshold > 0)
        json_set_int(p, "failureThreshold", failure_threshold);
    if (period_seconds > 0)
        json_set_int(p, "periodSeconds", period_seconds);
    return p;
}

/* A detached item carries its future key in ->string so clc_probe can add
 * it under the right name. */
static cJSON *keyed(const char *key, cJSON *v)
{
    v->string = xstrdup(key);
    return v;
}

cJSON *clc_http_get(const char *path, const char *port)
{
    cJSON *h = cJSON_CreateObject();
    json_set_str(h, "path", path);
    json_set_str(h, "port", port);
    return keyed("httpGet", h);
}

cJSON *clc_tcp_socket(int port)
{
    cJSON *h = cJSON_CreateObject();
    json_set_int(h, "port", port);
    return keyed("tcpSocket", h);
}

/* An existing FIFO is kept: deleting it races a restarting writer, which
 * could open the unlinked node and block forever. A foreground `cat` would
 * defer the trap until the FIFO's writer closes it (never, while slurmd
 * runs); `wait` returns as soon as a trapped signal arrives. */
static const char logfile_script[] =
    "set -eu\n"
    "fifo=\"${SOCKET:-/tmp/logfile.log}\"\n"
    "mkdir -p \"$(dirname \"$fifo\")\"\n"
    "[ -p \"$fifo\" ] || { rm -f \"$fifo\"; mkfifo -m 777 \"$fifo\"; }\n"
    "pid=\n"
    "trap 'if [ -n \"$pid\" ]; then kill \"$pid\" 2>/dev/null || true; fi; exit 0' "
    "TERM INT\n"
    "while :; do\n"
    "  cat \"$fifo\" &\n"
    "  pid=$!\n"
    "  wait \"$pid\" || true\n"
    "done\n";

const char *clc_logfile_script(void)
{
    return logfile_script;
}

int clc_image_slurm_version(const char *image)
{
    if (image == NULL)
        return 0;
    /* The tag is what follows the last ':' after the last '/' (a registry's
     * port comes before a '/'), up to a digest. */
    const char *slash = strrchr(image, '/');
    const char *name = slash ? slash + 1 : image;
    const char *colon = strchr(name, ':');
    if (colon == NULL)
        return 0;
    const char *t = colon + 1;
    if (*t == 'v')
        t++;
    if (!isdigit((unsigned char)t[0]) || !isdigit((unsigned char)t[1]) || t[2] != '.' ||
        !isdigit((unsigned char)t[3]) || !isdigit((unsigned char)t[4]) || isdigit((unsigned char)t[5]))
        return 0;
    int yy = (t[0] - '0') * 10 + (t[1] - '0'), mm = (t[3] - '0') * 10 + (t[4] - '0');
    if (mm < 1 || mm > 12)
        return 0;
    return yy * 100 + mm;
}

int clc_image_http_probes(const char *image)
{
    return clc_image_slurm_version(image) >= 2505;
}

cJSON *clc_security_context(int id, int with_fs_group)
{
    cJSON *s = cJSON_CreateObject();
    json_set_bool(s, "runAsNonRoot", 1);
    json_set_int(s, "runAsUser", id);
    json_set_int(s, "runAsGroup", id);
    if (with_fs_group)
        json_set_int(s, "fsGroup", id);
    return s;
}

int clc_service(clc_service_opts *o, cJSON **out, char **why)
{
    *out = NULL;
    const cJSON *uspec = json_child(o->user, "spec");
    cJSON *spec =
        (!o->ignore_user_spec && cJSON_IsObject(uspec)) ? cJSON_Duplicate(uspec, 1) : cJSON_CreateObject();
    /* Selector: the user's entries plus ours, ours winning. */
    cJSON *sel = CLC_MERGE(json_child(spec, "selector"), o->selector);
    cJSON_Delete(o->selector);
    o->selector = NULL;
    json_set(spec, "selector", sel);

    long long uport = json_get_int(o->user, "port", 0);
    cJSON *port = cJSON_CreateObject();
    json_set_str(port, "name", o->port_name);
    json_set_str(port, "protocol", "TCP");
    json_set_int(port, "port", uport > 0 ? uport : o->default_port);
    json_set_str(port, "targetPort", o->port_name);
    long long np = json_get_int(o->user, "nodePort", 0);
    if (o->use_node_port && np > 0)
        json_set_int(port, "nodePort", np);

    cJSON *ports = cJSON_GetObjectItemCaseSensitive(spec, "ports");
    if (!cJSON_IsArray(ports)) {
        ports = cJSON_CreateArray();
        json_set(spec, "ports", ports);
    }
    cJSON_AddItemToArray(ports, port);
    /* Slinky refuses two ports with one name or one number. */
    for (const cJSON *a = ports->child; a; a = a->next)
        for (const cJSON *b = a->next; b; b = b->next) {
            const char *na = json_get_str_or(a, "name", ""), *nb = json_get_str_or(b, "name", "");
            if (strcmp(na, nb) == 0) {
                cJSON_Delete(spec);
                cJSON_Delete(o->labels);
                cJSON_Delete(o->annotations);
                o->labels = o->annotations = NULL;
                return clc_fail(why, OP_EINVAL, "service %s: port name '%s' is already taken by another port",
                                o->name, na);
            }
            if (json_get_int(a, "port", -1) == json_get_int(b, "port", -2)) {
                long long pn = json_get_int(a, "port", 0);
                cJSON_Delete(spec);
                cJSON_Delete(o->labels);
                cJSON_Delete(o->annotations);
                o->labels = o->annotations = NULL;
                return clc_fail(why, OP_EINVAL,
                                "service %s: port number '%lld' is already taken by another port", o->name,
                                pn);
            }
        }
    if (o->headless) {
        json_set_str(spec, "clusterIP", "None");
        json_set_bool(spec, "publishNotReadyAddresses", 1);
    }
    if (o->clear_external_ips)
        json_del(spec, "externalIPs");

    cJSON *svc = cJSON_CreateObject();
    json_set_str(svc, "apiVersion", "v1");
    json_set_str(svc, "kind", "Service");
    cJSON *meta = clc_metadata(o->name, o->ns);
    json_set(meta, "labels", o->labels ? o->labels : cJSON_CreateObject());
    json_set(meta, "annotations", o->annotations ? o->annotations : cJSON_CreateObject());
    o->labels = o->annotations = NULL;
    json_set(svc, "metadata", meta);
    json_set(svc, "spec", spec);
    *out = svc;
    return 0;
}

/* Go's time.ParseDuration: a sequence of decimal numbers with optional
 * fraction and a unit (ns us µs ms s m h), optionally signed; "0" alone is
 * allowed without a unit. */
int clc_parse_duration(const char *s, int64_t *ns)
{
    static const struct {
        const char *unit;
        double mult;
    } units[] = {{"ns", 1.0}, {"us", 1e3}, {"\xc2\xb5s", 1e3}, {"\xce\xbcs", 1e3},
                 {"ms", 1e6}, {"s", 1e9},  {"m", 60e9},        {"h", 3600e9}};
    if (s == NULL || *s == '\0')
        return OP_EPARSE;
    int neg = 0;
    if (*s == '+' || *s == '-')
        neg = *s++ == '-';
    if (strcmp(s, "0") == 0) {
        *ns = 0;
        return 0;
    }
    if (*s == '\0')
        return OP_EPARSE;
    long double total = 0;
    while (*s) {
        if (!isdigit((unsigned char)*s) && *s != '.')
            return OP_EPARSE;
        long double v = 0, scale = 1;
        int digits = 0, frac = 0;
        while (isdigit((unsigned char)*s) || (*s == '.' && !frac)) {
            if (*s == '.') {
                frac = 1;
            } else {
                digits++;
                if (frac) {
                    scale /= 10;
                    v += (*s - '0') * scale;
                } else {
                    v = v * 10 + (*s - '0');
                }
            }
            s++;
        }
        if (digits == 0)
            return OP_EPARSE;
        size_t best = 0, bi = 0;
        for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
            size_t l = strlen(units[i].unit);
            if (strncmp(s, units[i].unit, l) == 0 && l > best)
                best = l, bi = i;
        }
        if (best == 0)
            return OP_EPARSE;
        s += best;
        total += v * (long double)units[bi].mult;
        if (total > 9223372036854775807.0L)
            return OP_ETOOBIG;
    }
    *ns = (int64_t)(neg ? -total : total);
    return 0;
}
