#include "reconcilers/bindhook.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/crypto.h"
#include "core/err.h"
#include "core/file.h"
#include "core/httpd.h"
#include "core/json.h"
#include "core/log.h"
#include "core/map.h"
#include "core/mem.h"
#include "core/selfcert.h"
#include "watchers/kinds.h"

#define DEF_ROTATE_MS (182ull * 86400ull * 1000ull)
#define DEF_RESYNC_MS 60000u
#define RETRY_MS 5000u        /* a failed caBundle read or patch is tried again this soon */
#define POD_GET_TIMEOUT_MS 3000u /* the API server waits 10 s at most (timeoutSeconds) */
#define MAX_PEM (1u << 20)
#define THROTTLE_HOLD_MS 1000u /* a review past the read bounds is answered this late */

/* ------------------------------------------------------------------ */
/* pure part */

static int copy_str(char *dst, size_t cap, const char *s)
{
    if (s == NULL || *s == '\0' || strlen(s) >= cap)
        return OP_EINVAL;
    memcpy(dst, s, strlen(s) + 1);
    return 0;
}

int bh_parse_review(const cJSON *review, bh_review *out, int *binding)
{
    memset(out, 0, sizeof(*out));
    *binding = 0;
    const cJSON *req = json_get(review, "request");
    if (!cJSON_IsObject(review) || strcmp(json_get_str_or(review, "kind", ""), "AdmissionReview") != 0 ||
        !cJSON_IsObject(req) || copy_str(out->uid, sizeof(out->uid), json_get_str(req, "uid")) != 0)
        return OP_EINVAL;
    if (strcmp(json_get_str_or(req, "resource.resource", ""), "pods") != 0 ||
        strcmp(json_get_str_or(req, "subResource", ""), "binding") != 0 ||
        strcmp(json_get_str_or(req, "operation", ""), "CREATE") != 0)
        return 0;
    const cJSON *obj = json_get(req, "object");
    const char *kind = json_get_str_or(obj, "target.kind", "Node");
    /* request.name is the pod; the Binding's own name is the same. */
    const char *pod = json_get_str(req, "name");
    if (pod == NULL)
        pod = json_get_str(obj, "metadata.name");
    if (strcmp(kind, "Node") != 0 ||
        copy_str(out->ns, sizeof(out->ns), json_get_str(req, "namespace")) != 0 ||
        copy_str(out->pod, sizeof(out->pod), pod) != 0 ||
        copy_str(out->node, sizeof(out->node), json_get_str(obj, "target.name")) != 0)
        return 0;
    out->has_annotations = cJSON_IsObject(json_get(obj, "metadata.annotations"));
    *binding = 1;
    return 0;
}

int bh_build_response(const bh_review *r, const char *topology, buf_t *out)
{
    cJSON *root = cJSON_CreateObject();
    json_set_str(root, "apiVersion", "admission.k8s.io/v1");
    json_set_str(root, "kind", "AdmissionReview");
    cJSON *resp = json_obj_ensure(root, "response");
    json_set_str(resp, "uid", r->uid);
    json_set_bool(resp, "allowed", 1);
    if (topology && *topology) {
        cJSON *patch = cJSON_CreateArray();
        cJSON *op = cJSON_CreateObject();
        json_set_str(op, "op", "add");
        if (r->has_annotations) {
            /* "/" in the key is "~1" in a JSON pointer (RFC 6901). */
            json_set_str(op, "path", "/metadata/annotations/topology.slinky.slurm.net~1spec");
            json_set_str(op, "value", topology);
        } else {
            json_set_str(op, "path", "/metadata/annotations");
            cJSON *v = cJSON_CreateObject();
            json_set_str(v, ANN_TOPOLOGY, topology);
            json_set(op, "value", v);
        }
        cJSON_AddItemToArray(patch, op);
        char *text = json_dump(patch);
        cJSON_Delete(patch);
        char *b64 = base64_encode(text, strlen(text));
        free(text);
        json_set_str(resp, "patchType", "JSONPatch");
        json_set_str(resp, "patch", b64);
        free(b64);
    }
    int rc = json_dump_buf(root, out);
    cJSON_Delete(root);
    return rc;
}

int bh_pod_is_nodeset(const cJSON *pod)
{
    const cJSON *refs = json_get(pod, "metadata.ownerReferences");
    const cJSON *ref;
    cJSON_ArrayForEach(ref, refs)
    {
        const char *api = json_get_str_or(ref, "apiVersion", "");
        if (json_get_bool(ref, "controller", 0) && strcmp(json_get_str_or(ref, "kind", ""), "NodeSet") == 0 &&
            strncmp(api, "slinky.slurm.net/", 17) == 0)
            return 1;
    }
    return 0;
}

#define NS_KEY "kubernetes.io/metadata.name"

static int is_name_expr(const cJSON *e, const char *op)
{
    return strcmp(json_get_str_or(e, "key", ""), NS_KEY) == 0 &&
           strcmp(json_get_str_or(e, "operator", ""), op) == 0;
}

cJSON *bh_scope_selector(const cJSON *selector, const char *const *nss, size_t n)
{
    cJSON *out = cJSON_CreateObject();
    const cJSON *ml = json_get(selector, "matchLabels");
    if (cJSON_IsObject(ml) && ml->child)
        json_set(out, "matchLabels", cJSON_Duplicate(ml, 1));
    cJSON *exprs = cJSON_CreateArray();
    cJSON *ours = cJSON_CreateObject();
    json_set_str(ours, "key", NS_KEY);
    json_set_str(ours, "operator", "In");
    cJSON *vals = cJSON_CreateArray();
    for (size_t i = 0; i < n; i++)
        cJSON_AddItemToArray(vals, cJSON_CreateString(nss[i]));
    if (n == 0)
        cJSON_AddItemToArray(vals, cJSON_CreateString(BH_NO_NAMESPACE));
    json_set(ours, "values", vals);
    cJSON_AddItemToArray(exprs, ours);
    const cJSON *e;
    cJSON_ArrayForEach(e, json_get(selector, "matchExpressions"))
    {
        if (!is_name_expr(e, "In"))
            cJSON_AddItemToArray(exprs, cJSON_Duplicate(e, 1));
    }
    json_set(out, "matchExpressions", exprs);
    return out;
}

static int values_hold(const cJSON *e, const char *ns)
{
    const cJSON *v;
    cJSON_ArrayForEach(v, json_get(e, "values"))
    {
        if (cJSON_IsString(v) && strcmp(v->valuestring, ns) == 0)
            return 1;
    }
    return 0;
}

int bh_selector_admits(const cJSON *selector, const char *ns)
{
    const cJSON *e;
    cJSON_ArrayForEach(e, json_get(selector, "matchExpressions"))
    {
        if ((is_name_expr(e, "In") && !values_hold(e, ns)) ||
            (is_name_expr(e, "NotIn") && values_hold(e, ns)))
            return 0;
    }
    return 1;
}

/* ------------------------------------------------------------------ */
/* the server */

typedef struct bh_call bh_call;

/* Pod reads in flight for one caller address. */
typedef struct bh_peer {
    int n;
    char ip[64];
} bh_peer;

struct bindhook {
    uv_loop_t *loop;
    hs_server *srv;
    kube_client *client;
    const store *pods, *nodes;
    char *config_name;
    char *cert_file, *key_file;
    char **dns;
    size_t n_dns;
    uint64_t rotate_ms;
    unsigned resync_ms;

    char *client_ca;    /* PEM: callers' certificates must chain to it; NULL: anyone */
    char **client_names; /* allowed subject CNs (NULL-terminated); NULL: any */
    map_t peers;        /* ip -> bh_peer, callers with reads in flight */
    char *cert, *key;   /* served now */
    char *prev_cert;    /* self-signed: the one before, still trusted */
    char *next_cert, *next_key; /* self-signed: made, waiting for the caBundle to trust it */
    uint64_t next_rotation; /* loop time of the next self-signed certificate */

    uv_timer_t timer;
    kube_request *cfg_req; /* GET or PATCH of the configuration */
    int kick;              /* a check of the configuration is wanted as soon as cfg_req is done */

    /* Scope (bindhook.h). */
    int scope;
    const store *nodesets;
    int (*synced)(void *data);
    void *synced_data;
    cJSON
        *scope_sel; /* the namespaceSelector of the configuration, as last read or patched; NULL: none yet */
    cJSON *scope_pending;   /* the one a PATCH in flight writes */
    uint64_t
        scope_wait_since; /* loop ms bh_covers first said no since the selector last admitted all asked; 0 */
    int scope_gave_up;      /* the wait ran out (logged once until it admits again) */
    int n_calls;           /* pod reads in flight and throttled reviews held */
    int n_reads;           /* pod reads in flight */
    int closing;
    int timer_closed;
    int srv_closed;
    void (*on_closed)(void *data);
    void *closed_data;

    mx_family *mx_requests; /* {result} */
    mx_family *mx_rotations;
};

struct bh_call {
    bindhook *h;
    bh_peer *peer;
    hs_req *req; /* NULL once the API server went away */
    kube_request *kr;
    bh_review rv;
};

/* A review held before its "throttled" answer. */
typedef struct bh_hold {
    bindhook *h;
    hs_req *req; /* NULL once the caller went away */
    bh_review rv;
    uv_timer_t timer;
} bh_hold;

static void count(bindhook *h, const char *result)
{
    if (h->mx_requests)
        mx_counter_inc(mx_counter_get(h->mx_requests, MX_LV(result)));
}

static void maybe_free(bindhook *h);

static void respond(bindhook *h, hs_req *req, const bh_review *rv, const char *topology, const char *result)
{
    buf_t b;
    buf_init(&b, 1u << 20);
    if (bh_build_response(rv, topology, &b) != 0) {
        buf_free(&b);
        count(h, "error");
        hs_respond(req, 500, "text/plain", NULL, "response too large\n", 19);
        return;
    }
    count(h, result);
    log_debug("topology webhook: %s/%s -> Node %s: %s%s%s", rv->ns, rv->pod, rv->node, result,
              topology ? " " : "", topology ? topology : "");
    hs_respond(req, 200, "application/json", NULL, b.data, b.len);
    buf_free(&b);
}

/* The pod is the NodeSet's: answer with the Node's topology (if any). */
static void answer_nodeset_pod(bindhook *h, hs_req *req, const bh_review *rv)
{
    const sobj *node = store_get(h->nodes, NULL, rv->node);
    const char *topo = node ? sobj_annotation(node, ANN_TOPOLOGY) : NULL;
    if (topo && *topo)
        respond(h, req, rv, topo, "patched");
    else
        respond(h, req, rv, NULL, node ? "no_topology" : "node_unknown");
}

static void call_req_closed(hs_req *req, void *data)
{
    (void)req;
    bh_call *c = data;
    c->req = NULL;
    if (c->kr)
        kube_cancel(c->kr);
}

static void on_pod_read(int err, const cJSON *obj, const kube_status *st, void *data)
{
    (void)st;
    bh_call *c = data;
    bindhook *h = c->h;
    assert(c->kr != NULL && h->n_reads > 0 && h->n_calls > 0);
    c->kr = NULL;
    if (c->req) {
        if (err == 0 && bh_pod_is_nodeset(obj))
            answer_nodeset_pod(h, c->req, &c->rv);
        else
            respond(h, c->req, &c->rv, NULL, err == 0 || err == OP_ENOTFOUND ? "not_nodeset" : "error");
    }
    assert(c->peer == NULL || (c->peer->n > 0 && map_get(&h->peers, c->peer->ip) == c->peer));
    if (c->peer && --c->peer->n == 0) {
        map_del(&h->peers, c->peer->ip);
        free(c->peer);
    }
    free(c);
    h->n_reads--;
    h->n_calls--;
    maybe_free(h);
}

static void hold_closed(uv_handle_t *t)
{
    bh_hold *ho = t->data;
    bindhook *h = ho->h;
    free(ho);
    assert(h->n_calls > 0);
    h->n_calls--;
    maybe_free(h);
}

static void hold_done(uv_timer_t *t)
{
    bh_hold *ho = t->data;
    if (ho->req)
        respond(ho->h, ho->req, &ho->rv, NULL, "throttled");
    ho->req = NULL;
    uv_close((uv_handle_t *)&ho->timer, hold_closed);
}

static void hold_req_closed(hs_req *req, void *data)
{
    (void)req;
    bh_hold *ho = data;
    ho->req = NULL;
    uv_timer_stop(&ho->timer);
    uv_close((uv_handle_t *)&ho->timer, hold_closed);
}

/* Past the read bounds: answer "allowed, unchanged", but only after a
 * while. The connection sends nothing more meanwhile (one request at a
 * time is with the handler), so a flood of reviews of unknown pods costs a
 * request per connection per THROTTLE_HOLD_MS instead of as many as the
 * caller can send: answered at once, 40 callers made 420 reviews a second
 * and their parsing alone slowed a scale-out tenfold. */
static void throttle(bindhook *h, hs_req *req, const bh_review *rv)
{
    bh_hold *ho = xcalloc(1, sizeof(*ho));
    ho->h = h;
    ho->req = req;
    ho->rv = *rv;
    uv_timer_init(h->loop, &ho->timer);
    ho->timer.data = ho;
    h->n_calls++;
    hs_req_on_close(req, hold_req_closed, ho);
    uv_timer_start(&ho->timer, hold_done, THROTTLE_HOLD_MS, 0);
}

static int name_allowed(const bindhook *h, const char *cn)
{
    if (h->client_names == NULL)
        return 1;
    for (char **n = h->client_names; cn && *n; n++)
        if (strcmp(*n, cn) == 0)
            return 1;
    return 0;
}

/* Only POST to the webhook's path: anything else is refused before its
 * body is read. */
static int head_check(hs_req *req, void *data)
{
    (void)data;
    if (strcmp(hs_req_path(req), BH_PATH) != 0)
        return 404;
    return strcmp(hs_req_method(req), "POST") != 0 ? 405 : 0;
}

static void serve(hs_req *req, void *data)
{
    bindhook *h = data;
    if (strcmp(hs_req_path(req), BH_PATH) != 0) {
        hs_respond(req, 404, "text/plain", NULL, "404 page not found\n", 19);
        return;
    }
    if (strcmp(hs_req_method(req), "POST") != 0) {
        hs_respond(req, 405, "text/plain", "Allow: POST\r\n", "method not allowed\n", 19);
        return;
    }
    if (!name_allowed(h, hs_req_client_cn(req))) {
        count(h, "forbidden");
        log_debug("topology webhook: %s (CN %s) is not an allowed caller", hs_req_peer(req),
                  hs_req_client_cn(req) ? hs_req_client_cn(req) : "none");
        hs_respond(req, 403, "text/plain", NULL, "forbidden\n", 10);
        return;
    }
    size_t len;
    const char *body = hs_req_body(req, &len);
    cJSON *review = json_parse_untrusted(body, len, NULL);
    bh_review rv;
    int binding = 0;
    int rc = bh_parse_review(review, &rv, &binding);
    cJSON_Delete(review);
    if (rc != 0) {
        count(h, "invalid");
        hs_respond(req, 400, "text/plain", NULL, "want an AdmissionReview v1 with a request uid\n", 46);
        return;
    }
    if (!binding) {
        respond(h, req, &rv, NULL, "not_binding");
        return;
    }
    const sobj *pod = store_get(h->pods, rv.ns, rv.pod);
    if (pod) {
        if (pod->owner_kind && strcmp(pod->owner_kind, "NodeSet") == 0)
            answer_nodeset_pod(h, req, &rv);
        else
            respond(h, req, &rv, NULL, "not_nodeset");
        return;
    }
    /* A pod is often bound before its ADDED event reaches the cache (the
     * scheduler watches the same stream): read it. The cache's label
     * selector also keeps out pods that are not Slurm's, which this read
     * then sees as such. Bounded: a caller that sends reviews of pods
     * nobody has must not queue reads without end (it once slowed a
     * 100-pod scale-out from 0.12 s to 21.6 s through the shared budget). */
    char ip[sizeof(((bh_peer *)0)->ip)];
    hs_peer_ip(hs_req_peer(req), ip, sizeof(ip));
    bh_peer *peer = map_get(&h->peers, ip);
    if (h->n_reads >= BH_MAX_READS || (peer && peer->n >= BH_MAX_READS_PER_PEER)) {
        throttle(h, req, &rv);
        return;
    }
    if (peer == NULL) {
        peer = xcalloc(1, sizeof(*peer));
        memcpy(peer->ip, ip, sizeof(ip));
        map_put(&h->peers, peer->ip, peer);
    }
    peer->n++;
    bh_call *c = xcalloc(1, sizeof(*c));
    c->h = h;
    c->peer = peer;
    h->n_reads++;
    assert(h->n_reads <= BH_MAX_READS && peer->n <= BH_MAX_READS_PER_PEER);
    c->req = req;
    c->rv = rv;
    h->n_calls++;
    hs_req_on_close(req, call_req_closed, c);
    kube_req_opts ro = {.timeout_ms = POD_GET_TIMEOUT_MS};
    c->kr = kube_get_with(h->client, &ro, &KUBE_PODS, rv.ns, rv.pod, on_pod_read, c);
}

/* ------------------------------------------------------------------ */
/* certificates */

static int self_signed(bindhook *h, char **cert, char **key)
{
    return selfcert_new(h->n_dns ? h->dns[0] : "localhost", (const char *const *)h->dns, h->n_dns, cert, key);
}

static int serve_with(bindhook *h, const char *cert, const char *key)
{
    hs_tls_opts tls = {.cert_pem = cert, .cert_len = strlen(cert), .key_pem = key, .key_len = strlen(key)};
    if (h->client_ca) {
        tls.client_ca_pem = h->client_ca;
        tls.client_ca_len = strlen(h->client_ca);
        tls.require_client_cert = 1;
    }
    return hs_set_tls(h->srv, &tls);
}

static void wipe_free(char *s)
{
    if (s) {
        memset(s, 0, strlen(s));
        free(s);
    }
}

/* Files: swap them in when they changed. */
static void reload_files(bindhook *h)
{
    char *cert = NULL, *key = NULL;
    size_t cl, kl;
    if (file_read_all(h->cert_file, MAX_PEM, &cert, &cl) != 0 ||
        file_read_all(h->key_file, MAX_PEM, &key, &kl) != 0) {
        log_warn("topology webhook: cannot read %s or %s again; serving the certificate read before",
                 h->cert_file, h->key_file);
    } else if (strcmp(cert, h->cert) != 0 || strcmp(key, h->key) != 0) {
        int rc = serve_with(h, cert, key);
        if (rc) {
            log_warn("topology webhook: the new %s / %s do not parse or match (%s); serving the old ones",
                     h->cert_file, h->key_file, err_str(rc));
        } else {
            log_info("topology webhook: serving the renewed certificate of %s", h->cert_file);
            if (h->mx_rotations)
                mx_counter_inc(mx_counter_get(h->mx_rotations, NULL));
            free(h->cert);
            wipe_free(h->key);
            h->cert = cert;
            h->key = key;
            cert = key = NULL;
        }
    }
    free(cert);
    wipe_free(key);
}

/* The bundle the configuration must hold: what is or will be served, and
 * the one before it. */
static char *wanted_bundle(bindhook *h)
{
    buf_t b;
    buf_init(&b, 4 * MAX_PEM);
    int rc =
        buf_append(&b, h->next_cert ? h->next_cert : h->cert, strlen(h->next_cert ? h->next_cert : h->cert));
    const char *older = h->next_cert ? h->cert : h->prev_cert;
    if (rc == 0 && older)
        rc = buf_append(&b, older, strlen(older));
    char *out = rc == 0 ? base64_encode(b.data, b.len) : NULL;
    buf_free(&b);
    return out;
}

/* The configuration trusts the next certificate: serve it. */
static void promote_next(bindhook *h)
{
    if (h->next_cert == NULL)
        return;
    int rc = serve_with(h, h->next_cert, h->next_key);
    if (rc) {
        log_error("topology webhook: the new self-signed certificate does not load (%s)", err_str(rc));
        free(h->next_cert);
        wipe_free(h->next_key);
    } else {
        free(h->prev_cert);
        wipe_free(h->key);
        h->prev_cert = h->cert;
        h->cert = h->next_cert;
        h->key = h->next_key;
        log_info("topology webhook: serving a new self-signed certificate");
        if (h->mx_rotations)
            mx_counter_inc(mx_counter_get(h->mx_rotations, NULL));
    }
    h->next_cert = h->next_key = NULL;
}

static void arm(bindhook *h, uint64_t ms);

/* Two JSON patch ops for webhook i of the configuration: a test of its
 * name, so that a configuration edited between our read and the patch is
 * refused rather than patched at the wrong index, then field (a path below
 * the webhook) set to value (taken). */
static void webhook_op(cJSON *ops, int i, const char *name, const char *field, cJSON *value)
{
    char path[128];
    cJSON *t = cJSON_CreateObject();
    snprintf(path, sizeof(path), "/webhooks/%d/name", i);
    json_set_str(t, "op", "test");
    json_set_str(t, "path", path);
    json_set_str(t, "value", name);
    cJSON_AddItemToArray(ops, t);
    cJSON *a = cJSON_CreateObject();
    snprintf(path, sizeof(path), "/webhooks/%d/%s", i, field);
    json_set_str(a, "op", "add");
    json_set_str(a, "path", path);
    json_set(a, "value", value);
    cJSON_AddItemToArray(ops, a);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The namespaces of the NodeSet cache, sorted, once each (pointers into the
 * cache; *n of them). */
static const char **nodeset_namespaces(const bindhook *h, size_t *n)
{
    size_t cap = store_count(h->nodesets), k = 0, it = 0;
    const char **v = xcalloc(cap ? cap : 1, sizeof(*v));
    const sobj *o;
    while ((o = store_next(h->nodesets, &it)) && k < cap)
        v[k++] = o->ns;
    qsort(v, k, sizeof(*v), cmp_str);
    size_t u = 0;
    for (size_t i = 0; i < k; i++)
        if (u == 0 || strcmp(v[u - 1], v[i]) != 0)
            v[u++] = v[i];
    *n = u;
    return v;
}

/* Patch ops (appended to ops) that give every webhook of the configuration
 * the scope's selector; the count of webhooks changed. *sel: the selector
 * they have after the patch. */
static int scope_ops(bindhook *h, const cJSON *config, cJSON *ops, cJSON **sel)
{
    size_t n = 0;
    const char **nss = nodeset_namespaces(h, &n);
    int changed = 0, i = 0;
    *sel = NULL;
    const cJSON *wh;
    cJSON_ArrayForEach(wh, json_get(config, "webhooks"))
    {
        const char *name = json_get_str(wh, "name");
        const cJSON *cur = json_get(wh, "namespaceSelector");
        cJSON *want = bh_scope_selector(cur, nss, n);
        if (name && !cJSON_Compare(cur, want, 1)) {
            webhook_op(ops, i, name, "namespaceSelector", cJSON_Duplicate(want, 1));
            changed++;
        }
        if (*sel == NULL)
            *sel = want;
        else
            cJSON_Delete(want);
        i++;
    }
    free(nss);
    return changed;
}

static void scope_set(bindhook *h, cJSON *sel)
{
    cJSON_Delete(h->scope_sel);
    h->scope_sel = sel;
}

static void on_cfg_patched(int err, const cJSON *obj, const kube_status *st, void *data)
{
    (void)obj;
    bindhook *h = data;
    h->cfg_req = NULL;
    if (h->closing) {
        maybe_free(h);
        return;
    }
    if (err) {
        log_warn("topology webhook: cannot update MutatingWebhookConfiguration %s: %s (HTTP %d) %s",
                 h->config_name, err_str(err), st ? st->http : 0, st ? st->message : "");
        cJSON_Delete(h->scope_pending);
        h->scope_pending = NULL;
        arm(h, RETRY_MS);
        return;
    }
    if (h->scope_pending) {
        char *t = json_dump(h->scope_pending);
        log_info("topology webhook: MutatingWebhookConfiguration %s sends the namespaces of NodeSets: %s",
                 h->config_name, t ? t : "");
        free(t);
        scope_set(h, h->scope_pending);
        h->scope_pending = NULL;
    }
    if (!h->cert_file) {
        log_info("topology webhook: MutatingWebhookConfiguration %s trusts the serving certificate",
                 h->config_name);
        promote_next(h);
    }
    arm(h, h->kick || h->next_rotation <= uv_now(h->loop) ? 1 : 0);
}

static void on_cfg_read(int err, const cJSON *obj, const kube_status *st, void *data)
{
    bindhook *h = data;
    h->cfg_req = NULL;
    if (h->closing) {
        maybe_free(h);
        return;
    }
    if (err) {
        log_warn("topology webhook: cannot read MutatingWebhookConfiguration %s: %s (HTTP %d) %s",
                 h->config_name, err_str(err), st ? st->http : 0, st ? st->message : "");
        arm(h, RETRY_MS);
        return;
    }
    /* One JSON patch for the scope and the caBundle (webhook_op). */
    cJSON *ops = cJSON_CreateArray();
    int stale = 0;
    cJSON *sel = NULL;
    if (h->scope && h->synced(h->synced_data)) {
        stale += scope_ops(h, obj, ops, &sel);
        if (stale == 0)
            scope_set(h, sel);
        else
            h->scope_pending = sel;
    }
    char *want = h->cert_file ? NULL : wanted_bundle(h);
    if (want == NULL && !h->cert_file) {
        cJSON_Delete(ops);
        cJSON_Delete(h->scope_pending);
        h->scope_pending = NULL;
        arm(h, RETRY_MS);
        return;
    }
    const cJSON *wh;
    int i = 0;
    cJSON_ArrayForEach(wh, json_get(want ? obj : NULL, "webhooks"))
    {
        const char *name = json_get_str(wh, "name");
        if (name && strcmp(json_get_str_or(wh, "clientConfig.caBundle", ""), want) != 0) {
            webhook_op(ops, i, name, "clientConfig/caBundle", cJSON_CreateString(want));
            stale++;
        }
        i++;
    }
    free(want);
    if (stale == 0) {
        cJSON_Delete(ops);
        if (!h->cert_file)
            promote_next(h);
        /* Not synced yet: look again soon rather than after a resync. */
        arm(h, h->kick || (h->scope && !h->synced(h->synced_data)) ? 200 : 0);
        return;
    }
    h->cfg_req = kube_patch(h->client, &KUBE_MUTATINGWEBHOOKS, NULL, h->config_name, NULL, KUBE_PATCH_JSON,
                            ops, NULL, 0, on_cfg_patched, h);
    cJSON_Delete(ops);
}

static void on_tick(uv_timer_t *t)
{
    bindhook *h = t->data;
    if (h->closing)
        return;
    h->kick = 0;
    if (h->cert_file) {
        reload_files(h);
        if (!h->scope || h->config_name == NULL) {
            arm(h, 0);
            return;
        }
        h->cfg_req = kube_get(h->client, &KUBE_MUTATINGWEBHOOKS, NULL, h->config_name, NULL, on_cfg_read, h);
        return;
    }
    if (h->next_cert == NULL && uv_now(h->loop) >= h->next_rotation) {
        char *cert, *key;
        int rc = self_signed(h, &cert, &key);
        h->next_rotation = uv_now(h->loop) + h->rotate_ms;
        if (rc) {
            log_error("topology webhook: cannot make a new self-signed certificate: %s", err_str(rc));
        } else {
            h->next_cert = cert;
            h->next_key = key;
            log_info("topology webhook: made a new self-signed certificate%s",
                     h->config_name ? "; serving it once the webhook configuration trusts it" : "");
        }
    }
    if (h->config_name == NULL) {
        /* Nobody to tell: serve it now (the caBundle is somebody else's). */
        promote_next(h);
        arm(h, 0);
        return;
    }
    h->cfg_req = kube_get(h->client, &KUBE_MUTATINGWEBHOOKS, NULL, h->config_name, NULL, on_cfg_read, h);
}

int bh_covers(bindhook *h, const char *ns)
{
    if (h == NULL || !h->scope || h->config_name == NULL || h->closing)
        return 1;
    if (h->scope_sel && bh_selector_admits(h->scope_sel, ns)) {
        h->scope_wait_since = 0;
        h->scope_gave_up = 0;
        return 1;
    }
    uint64_t now = uv_now(h->loop);
    if (h->scope_wait_since == 0)
        h->scope_wait_since = now;
    if (now - h->scope_wait_since >= BH_SCOPE_WAIT_MS) {
        if (!h->scope_gave_up)
            log_warn(
                "topology webhook: MutatingWebhookConfiguration %s does not send namespace %s after %u ms "
                "(see the warnings above); its NodeSet pods are bound without the webhook, their topology "
                "copied later by the NodeSet reconciler",
                h->config_name, ns, BH_SCOPE_WAIT_MS);
        h->scope_gave_up = 1;
        return 1;
    }
    if (h->cfg_req)
        h->kick = 1;
    else if (!h->kick) {
        h->kick = 1;
        uv_timer_start(&h->timer, on_tick, 0, 0);
    }
    return 0;
}

/* Next tick in ms; 0: the resync interval, bounded by the next rotation. */
static void arm(bindhook *h, uint64_t ms)
{
    if (h->closing)
        return;
    if (ms == 0) {
        ms = h->resync_ms;
        if (!h->cert_file) {
            uint64_t now = uv_now(h->loop);
            uint64_t until = h->next_rotation > now ? h->next_rotation - now : 1;
            if (until < ms)
                ms = until;
        }
    }
    uv_timer_start(&h->timer, on_tick, ms, 0);
}

/* ------------------------------------------------------------------ */
/* lifecycle */

/* Everything the webhook owns, and the webhook itself (keys wiped). */
static void free_fields(bindhook *h)
{
    free(h->cert);
    wipe_free(h->key);
    free(h->prev_cert);
    free(h->next_cert);
    wipe_free(h->next_key);
    free(h->cert_file);
    free(h->key_file);
    free(h->config_name);
    cJSON_Delete(h->scope_sel);
    cJSON_Delete(h->scope_pending);
    free(h->client_ca);
    if (h->client_names) {
        for (char **n = h->client_names; *n; n++)
            free(*n);
        free(h->client_names);
    }
    map_free(&h->peers); /* empty by now: every read finished */
    for (size_t i = 0; i < h->n_dns; i++)
        free(h->dns[i]);
    free(h->dns);
    free(h);
}

bindhook *bh_start(uv_loop_t *loop, const bh_opts *o, int *rc, char *err, size_t errlen)
{
    int have_cert = o->cert_file && *o->cert_file, have_key = o->key_file && *o->key_file;
    if (have_cert != have_key) {
        snprintf(err, errlen, "--webhook-cert-file and --webhook-key-file go together");
        *rc = OP_EINVAL;
        return NULL;
    }
    bindhook *h = xcalloc(1, sizeof(*h));
    map_init(&h->peers);
    h->loop = loop;
    h->client = o->client;
    h->pods = o->pods;
    h->nodes = o->nodes;
    h->rotate_ms = o->rotate_ms ? o->rotate_ms : DEF_ROTATE_MS;
    h->scope = o->scope_nodesets && o->nodesets && o->synced;
    h->nodesets = o->nodesets;
    h->synced = o->synced;
    h->synced_data = o->synced_data;
    if (o->config_name && *o->config_name)
        h->config_name = xstrdup(o->config_name);
    h->resync_ms = o->resync_ms ? o->resync_ms : DEF_RESYNC_MS;
    if (o->n_dns) {
        h->dns = xcalloc(o->n_dns, sizeof(char *));
        for (size_t i = 0; i < o->n_dns; i++)
            h->dns[i] = xstrdup(o->dns[i]);
        h->n_dns = o->n_dns;
    }
    size_t cl = 0, kl = 0;
    if (have_cert) {
        h->cert_file = xstrdup(o->cert_file);
        h->key_file = xstrdup(o->key_file);
        if ((*rc = file_read_all(h->cert_file, MAX_PEM, &h->cert, &cl)) != 0 ||
            (*rc = file_read_all(h->key_file, MAX_PEM, &h->key, &kl)) != 0) {
            snprintf(err, errlen, "--webhook-cert-file %s / --webhook-key-file %s: %s", o->cert_file,
                     o->key_file, err_str(*rc));
            *rc = OP_ECONFIG;
            goto fail;
        }
    } else {
        if ((*rc = self_signed(h, &h->cert, &h->key)) != 0) {
            snprintf(err, errlen, "cannot make the webhook's self-signed certificate: %s", err_str(*rc));
            goto fail;
        }
        cl = strlen(h->cert);
        kl = strlen(h->key);
    }
    if (o->client_ca_file && *o->client_ca_file) {
        size_t cal = 0;
        if ((*rc = file_read_all(o->client_ca_file, MAX_PEM, &h->client_ca, &cal)) != 0) {
            snprintf(err, errlen, "--webhook-client-ca %s: %s", o->client_ca_file, err_str(*rc));
            *rc = OP_ECONFIG;
            goto fail;
        }
        if (o->client_names && *o->client_names) {
            size_t n = 1;
            for (const char *s = o->client_names; *s; s++)
                n += *s == ',';
            h->client_names = xcalloc(n + 1, sizeof(char *));
            size_t k = 0;
            for (const char *s = o->client_names; *s;) {
                size_t len = strcspn(s, ",");
                if (len)
                    h->client_names[k++] = xstrndup(s, len);
                s += len;
                if (*s == ',')
                    s++;
            }
        }
    } else if (o->client_names && *o->client_names) {
        snprintf(err, errlen, "--webhook-client-names needs --webhook-client-ca");
        *rc = OP_EINVAL;
        goto fail;
    }
    hs_tls_opts tls = {.cert_pem = h->cert, .cert_len = cl, .key_pem = h->key, .key_len = kl};
    if (h->client_ca) {
        tls.client_ca_pem = h->client_ca;
        tls.client_ca_len = strlen(h->client_ca);
        tls.require_client_cert = 1;
    }
    hs_opts ho = {
        .tls = &tls,
        .handler = serve,
        .on_head = head_check,
        .data = h,
        /* An AdmissionReview of a Binding is a few KiB. */
        .max_header_bytes = 16 * 1024,
        .max_body_bytes = 128 * 1024,
        .max_pending_out = 256 * 1024,
        .request_timeout_ms = 10000,
        .idle_timeout_ms = 60000,
        /* The API server opens a connection per call in flight (HTTP/1.1):
         * room for a burst from each of a few API servers. */
        .max_conns = 128,
        .max_conns_per_peer = 64,
    };
    h->srv = hs_listen(loop, o->host, o->port, &ho, rc);
    if (h->srv == NULL) {
        snprintf(err, errlen, "cannot serve the topology webhook on %s:%d: %s%s",
                 o->host ? o->host : "0.0.0.0", o->port, err_str(*rc),
                 *rc == OP_ECONFIG ? " (certificate or key does not parse, or they do not match)" : "");
        goto fail;
    }
    if (o->metrics) {
        h->mx_requests =
            mx_family_new(o->metrics, MX_COUNTER, "slurmop_topology_webhook_requests_total",
                          "pods/binding admission reviews answered, by result (patched: the Node's "
                          "topology was added to the Binding; throttled: past the bounds on pod reads, "
                          "answered unchanged; forbidden: a client CN not in --webhook-client-names)",
                          "result", NULL, 0, NULL);
        h->mx_rotations =
            mx_family_new(o->metrics, MX_COUNTER, "slurmop_topology_webhook_certificate_changes_total",
                          "serving certificates swapped in after the first (rotations, renewed files)", NULL,
                          NULL, 0, NULL);
        /* Every result from the start, at 0: rate() and alerts see a
         * series before the first review of that result. */
        static const char *const results[] = {"patched",     "no_topology", "node_unknown",
                                              "not_nodeset", "not_binding", "error",
                                              "throttled",   "forbidden",   "invalid"};
        for (size_t i = 0; h->mx_requests && i < ARRAY_SIZE(results); i++)
            mx_counter_get(h->mx_requests, MX_LV(results[i]));
    }
    uv_timer_init(loop, &h->timer);
    h->timer.data = h;
    h->next_rotation = uv_now(loop) + h->rotate_ms;
    /* Tests read the port from this line. */
    log_info("serving the topology webhook %s on %s:%d (%s; %s; %s)", BH_PATH, o->host ? o->host : "0.0.0.0",
             hs_port(h->srv),
             h->cert_file     ? "certificate files"
             : h->config_name ? "self-signed, caBundle kept"
                              : "self-signed",
             h->client_ca ? "callers need a client certificate of --webhook-client-ca"
                          : "any caller: no --webhook-client-ca",
             h->scope && h->config_name ? "namespaceSelector kept to the NodeSets' namespaces"
                                        : "namespaceSelector as registered");
    if (h->config_name)
        uv_timer_start(&h->timer, on_tick, 0, 0);
    else
        arm(h, 0);
    return h;
fail:
    free_fields(h);
    return NULL;
}

int bh_port(const bindhook *h)
{
    return hs_port(h->srv);
}

static void maybe_free(bindhook *h)
{
    if (!h->closing || !h->timer_closed || !h->srv_closed || h->n_calls > 0 || h->cfg_req)
        return;
    void (*cb)(void *) = h->on_closed;
    void *data = h->closed_data;
    free_fields(h);
    if (cb)
        cb(data);
}

static void timer_closed(uv_handle_t *t)
{
    bindhook *h = t->data;
    h->timer_closed = 1;
    maybe_free(h);
}

static void srv_closed(void *data)
{
    bindhook *h = data;
    h->srv_closed = 1;
    maybe_free(h);
}

void bh_close(bindhook *h, void (*on_closed)(void *data), void *data)
{
    h->closing = 1;
    h->on_closed = on_closed;
    h->closed_data = data;
    if (h->cfg_req)
        kube_cancel(h->cfg_req);
    uv_close((uv_handle_t *)&h->timer, timer_closed);
    /* Open reviews get on_close, which cancels their pod reads. */
    hs_close(h->srv, srv_closed, h);
}
