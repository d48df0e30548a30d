/* ks_engine: the engine's lifecycle and the front door of every request
 * (admin routing, authentication, injected faults, latency).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "kubesim/ks_int.h"
#include "core/crypto.h"
#include "core/err.h"
#include "core/json.h"
#include "core/log.h"
#include "core/mem.h"

void ks_config_defaults(ks_config *c)
{
    memset(c, 0, sizeof(*c));
    c->pod_start_delay_ms = 100;
    c->pod_ready_delay_ms = 100;
    c->max_grace_ms = 2000;
    c->schedule_retry_ms = 1000;
    c->namespace_defaults = 1;
    c->history = 10000;
    c->bookmark_interval_ms = 60000;
    c->continue_ttl_ms = 300000;
    c->too_large_wait_ms = 3000;
    c->gc_delay_ms = 20;
    c->min_request_timeout_s = 1800;
    c->retry_after_s = 1;
}

static const char *own(ks *k, const char *s)
{
    if (s == NULL)
        return NULL;
    k->owned_strs = xrealloc(k->owned_strs, sizeof(char *) * (size_t)(k->n_owned + 1));
    return k->owned_strs[k->n_owned++] = xstrdup(s);
}

static const char *const *own_list(ks *k, const char *const *v, int n)
{
    if (n == 0)
        return NULL;
    const char **c = xcalloc((size_t)n + 1, sizeof(char *));
    for (int i = 0; i < n; i++)
        c[i] = own(k, v[i]);
    k->owned_strs = xrealloc(k->owned_strs, sizeof(char *) * (size_t)(k->n_owned + 1));
    k->owned_strs[k->n_owned++] = (char *)c;
    return c;
}

static void flush_cb(uv_prepare_t *p)
{
    watch_flush_all(p->data);
}

static void handle_closed(uv_handle_t *h)
{
    ks__handle_closed(h->data);
}

static void create_namespace(ks *k, const char *name)
{
    ks_res *r = res_find(k, "", "namespaces");
    if (obj_find(r, NULL, name))
        return;
    cJSON *o = cJSON_CreateObject();
    json_set_str(o, "kind", "Namespace");
    json_set_str(o, "apiVersion", "v1");
    json_set_str(json_obj_ensure(o, "metadata"), "name", name);
    api_obj_create(k, r, o);
}

/* What the ServiceAccount and root-CA controllers put into every namespace. */
static void namespace_defaults(ks *k, const char *ns)
{
    ks_res *sa = res_find(k, "", "serviceaccounts");
    cJSON *o = cJSON_CreateObject();
    json_set_str(o, "kind", "ServiceAccount");
    json_set_str(o, "apiVersion", "v1");
    cJSON *m = json_obj_ensure(o, "metadata");
    json_set_str(m, "name", "default");
    json_set_str(m, "namespace", ns);
    api_obj_create(k, sa, o);
    ks_res *cm = res_find(k, "", "configmaps");
    o = cJSON_CreateObject();
    json_set_str(o, "kind", "ConfigMap");
    json_set_str(o, "apiVersion", "v1");
    m = json_obj_ensure(o, "metadata");
    json_set_str(m, "name", "kube-root-ca.crt");
    json_set_str(m, "namespace", ns);
    json_set_str(
        json_obj_ensure(m, "annotations"), "kubernetes.io/description",
        "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints "
        "such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across "
        "distributions of Kubernetes clusters.");
    json_set_str(json_obj_ensure(o, "data"), "ca.crt", k->root_ca ? k->root_ca : "");
    api_obj_create(k, cm, o);
}

void ks__namespace_created(ks *k, const char *name)
{
    if (k->loading || !k->cfg.namespace_defaults || k->closing)
        return;
    namespace_defaults(k, name);
}

ks *ks_new(uv_loop_t *loop, const ks_config *cfg, int *err)
{
    ks *k = xcalloc(1, sizeof(*k));
    k->loop = loop;
    k->cfg = *cfg;
    k->cfg.node_labels = own_list(k, cfg->node_labels, cfg->n_node_labels);
    k->cfg.node_taints = own_list(k, cfg->node_taints, cfg->n_node_taints);
    k->cfg.tokens = own_list(k, cfg->tokens, cfg->n_tokens);
    k->cfg.state_file = own(k, cfg->state_file);
    k->root_ca = own(k, cfg->root_ca_pem);
    if (k->cfg.history == 0)
        k->cfg.history = 1;
    if (k->cfg.min_request_timeout_s == 0)
        k->cfg.min_request_timeout_s = 1800;
    if (k->cfg.bookmark_interval_ms == 0)
        k->cfg.bookmark_interval_ms = 60000;
    if (k->cfg.retry_after_s == 0)
        k->cfg.retry_after_s = 1;
    k->rng = cfg->seed;
    if (k->rng == 0)
        random_bytes(&k->rng, sizeof(k->rng));
    if (k->rng == 0)
        k->rng = 0x9E3779B97F4A7C15ULL;
    list_init(&k->resources);
    list_init(&k->snaps);
    list_init(&k->dirty_watches);
    map_init_type(&k->routes, &ks_route_type);
    map_init(&k->uids);
    map_init_type(&k->counters, &map_type_free_val); /* counters: one block each */
    k->rate_429 = cfg->rate_429;
    k->rate_500 = cfg->rate_500;
    k->latency_ms = cfg->latency_ms;
    k->write_rate = cfg->write_rate;
    k->expire_watches = cfg->expire_watches;
    k->rv = 1;

    uv_prepare_init(loop, &k->flush);
    k->flush.data = k;
    uv_prepare_start(&k->flush, flush_cb);
    uv_unref((uv_handle_t *)&k->flush);
    k->pending_closes++;

    types_register_builtins(k);
    ctrl_init(k);
    kubelet_init(k);

    int rc = 0;
    if (k->cfg.state_file && access(k->cfg.state_file, F_OK) == 0) {
        rc = admin_state_load(k, k->cfg.state_file);
        if (rc) {
            log_error("kubesim: cannot load state from %s: %s", k->cfg.state_file, err_str(rc));
            ks_close(k, NULL, NULL);
            if (err)
                *err = rc;
            return NULL;
        }
    }
    create_namespace(k, "default");
    create_namespace(k, "kube-system");
    create_namespace(k, "kube-public");
    create_namespace(k, "kube-node-lease");
    if (k->cfg.nodes > 0)
        kubelet_create_nodes(k, 1, k->cfg.nodes);
    return k;
}

static void engine_free(ks *k)
{
    list_node *n, *t;
    /* objects first (the kubelet's side records point at nodes), then resources */
    list_foreach(n, &k->resources)
    {
        ks_res *r = list_entry(n, ks_res, link);
        while (r->objs.count) {
            size_t it = 0;
            const char *key;
            void *val;
            map_next(&r->objs, &it, &key, &val);
            map_del(&r->objs, key);
            ks_store_drop(k, val);
        }
    }
    snaps_expire(k, 1);
    list_foreach_safe(n, t, &k->resources)
    {
        ks_res *r = list_entry(n, ks_res, link);
        list_remove(&r->link);
        res_free(r);
    }
    map_free(&k->routes);
    map_free(&k->uids);
    map_free(&k->deps);
    map_free(&k->counters);
    free(k->fault_path);
    kubelet_free(k);
    for (int i = 0; i < k->n_owned; i++)
        free(k->owned_strs[i]);
    free(k->owned_strs);
    void (*cb)(void *) = k->close_cb;
    void *data = k->close_data;
    free(k);
    if (cb)
        cb(data);
}

void ks__handle_closed(ks *k)
{
    k->pending_closes--;
    if (k->closing && k->pending_closes == 0)
        engine_free(k);
}

void ks_close(ks *k, void (*cb)(void *data), void *data)
{
    if (k->closing)
        return;
    k->closing = 1;
    k->close_cb = cb;
    k->close_data = data;
    watch_shutdown(k);
    kubelet_close(k);
    ctrl_close(k);
    uv_prepare_stop(&k->flush);
    uv_close((uv_handle_t *)&k->flush, handle_closed);
}

void ks_set_hooks(ks *k, const ks_hooks *h)
{
    k->hooks = *h;
}

uint64_t ks_rv(const ks *k)
{
    return k->rv;
}

void ks_get_stats(const ks *k, ks_stats *out)
{
    memset(out, 0, sizeof(*out));
    out->watches = (size_t)k->n_watches;
    list_node *n;
    list_foreach(n, &k->resources)
    {
        ks_res *r = list_entry(n, ks_res, link);
        out->objects += r->objs.count;
        out->history_events += r->hist.n;
        size_t it = 0;
        const char *key;
        void *val;
        while (map_next(&r->objs, &it, &key, &val))
            out->json_bytes += ((ks_obj *)val)->cur->len;
    }
}

/* ---- the front door ---------------------------------------------------- */

static int health_path(const char *p)
{
    return strncmp(p, "/healthz", 8) == 0 || strncmp(p, "/livez", 6) == 0 || strncmp(p, "/readyz", 7) == 0 ||
           strcmp(p, "/version") == 0;
}

/* 0 when the request may proceed. */
static int authenticate(ks *k, const ks_req *req, ks_resp *resp)
{
    const char *a = req->authorization;
    if (a && strncasecmp(a, "Bearer ", 7) == 0) {
        const char *tok = a + 7;
        while (*tok == ' ')
            tok++;
        for (int i = 0; i < k->cfg.n_tokens; i++)
            if (strcmp(k->cfg.tokens[i], tok) == 0)
                return 0;
        goto deny; /* a wrong token is refused even where anonymous access is allowed */
    }
    if (req->client_cn)
        return 0;
    if (!k->cfg.auth_required || health_path(req->path))
        return 0;
deny:
    resp_status(resp, 401, "Unauthorized", "Unauthorized", NULL, NULL, NULL, NULL);
    return -1;
}

unsigned ks_write_wait_ms(ks *k, const char *method, const char *path, uint64_t now_ms)
{
    if (k->write_rate <= 0 || method == NULL || path == NULL || strcmp(method, "GET") == 0 ||
        strcmp(method, "HEAD") == 0 || strcmp(method, "OPTIONS") == 0)
        return 0;
    if (strncmp(path, "/api/", 5) != 0 && strncmp(path, "/apis/", 6) != 0)
        return 0;
    double now = (double)now_ms;
    if (k->write_next_ms < now)
        k->write_next_ms = now;
    double wait = k->write_next_ms - now;
    k->write_next_ms += 1000.0 / k->write_rate;
    return wait > 3600000 ? 3600000u : (unsigned)wait;
}

void ks_handle(ks *k, const ks_req *req, ks_resp *resp)
{
    const char *path = req->path ? req->path : "/";
    k->n_requests++;
    if (strncmp(path, "/kubesim/", 9) == 0) {
        admin_handle(k, req, resp);
        return;
    }
    if (authenticate(k, req, resp) != 0) {
        admin_count(k, "unauthorized", "", 401);
        return;
    }
    int api = strncmp(path, "/api/", 5) == 0 || strncmp(path, "/apis/", 6) == 0 ||
              strcmp(path, "/api") == 0 || strcmp(path, "/apis") == 0;
    if (api && admin_faults_apply(k, path, resp))
        return;
    api_handle(k, req, resp);
    if (api && resp->watch == NULL)
        resp->delay_ms += k->latency_ms;
}
