#include "reconcilers/operator.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/crypto.h"
#include "core/err.h"
#include "core/file.h"
#include "core/intern.h"
#include "core/json.h"
#include "core/log.h"
#include "core/loopstat.h"
#include "core/mem.h"
#include "reconcilers/bindhook.h"
#include "reconcilers/msec.h"
#include "reconcilers/nodehealth.h"
#include "reconcilers/objsync.h"
#include "reconcilers/reconcilers.h"
#include "watchers/byname.h"
#include "watchers/kinds.h"
#include "watchers/slinky.h"

/* What is cached, and how. Pods are filtered to the daemons we manage;
 * Secrets and ConfigMaps to the ones this operator created (its managed-by
 * label): the user objects a CR references are read by name (watchers/byname.h),
 * so the other Secrets of a namespace are never listed, watched or held.
 * The rest is read in full (they are few). */
#define MANAGED_SELECTOR OBJSYNC_MANAGED_BY_LABEL "=" OBJSYNC_MANAGED_BY
static const struct {
    const kube_res *res;
    const store_kind *kind;
    const char *label_selector;
} kinds[OPK__COUNT] = {
    [OPK_NODESETS] = {&SLINKY_NODESETS, &KIND_FULL_NAMESPACED, NULL},
    [OPK_CONTROLLERS] = {&SLINKY_CONTROLLERS, &KIND_FULL_NAMESPACED, NULL},
    [OPK_RESTAPIS] = {&SLINKY_RESTAPIS, &KIND_FULL_NAMESPACED, NULL},
    [OPK_ACCOUNTINGS] = {&SLINKY_ACCOUNTINGS, &KIND_FULL_NAMESPACED, NULL},
    [OPK_LOGINSETS] = {&SLINKY_LOGINSETS, &KIND_FULL_NAMESPACED, NULL},
    [OPK_TOKENS] = {&SLINKY_TOKENS, &KIND_FULL_NAMESPACED, NULL},
    [OPK_PODS] = {&KUBE_PODS, &KIND_PODS,
                  "app.kubernetes.io/name in (slurmd,slurmctld,slurmrestd,slurmdbd,login)"},
    [OPK_NODES] = {&KUBE_NODES, &KIND_NODES, NULL},
    [OPK_SERVICES] = {&KUBE_SERVICES, &KIND_FULL_NAMESPACED, NULL},
    [OPK_CONFIGMAPS] = {&KUBE_CONFIGMAPS, &KIND_FULL_NAMESPACED, MANAGED_SELECTOR},
    [OPK_SECRETS] = {&KUBE_SECRETS, &KIND_FULL_NAMESPACED, MANAGED_SELECTOR},
    [OPK_STATEFULSETS] = {&KUBE_STATEFULSETS, &KIND_FULL_NAMESPACED, NULL},
    [OPK_DEPLOYMENTS] = {&KUBE_DEPLOYMENTS, &KIND_FULL_NAMESPACED, NULL},
    [OPK_PDBS] = {&KUBE_PDBS, &KIND_FULL_NAMESPACED, NULL},
    /* No selector: Slinky's revisions carry none of our labels (kinds.h). */
    [OPK_REVISIONS] = {&KUBE_CONTROLLERREVISIONS, &KIND_REVISIONS, NULL},
    [OPK_PVCS] = {&KUBE_PVCS, &KIND_FULL_NAMESPACED, NULL},
};

/* The kinds whose referenced objects are read by name: index in priv.bn. */
static int ref_index(enum op_kind k)
{
    return k == OPK_SECRETS ? 0 : k == OPK_CONFIGMAPS ? 1 : -1;
}
static const enum op_kind ref_kinds[2] = {OPK_SECRETS, OPK_CONFIGMAPS};

struct priv {
    reflector *rf[OPK__COUNT][OP_MAX_NAMESPACES];
    store *ref_store[2]; /* referenced Secrets, ConfigMaps (fed by bn) */
    byname *bn[2];
    int n_rf[OPK__COUNT];
    int n_synced;
    int n_reflectors;
    hs_server *metrics_srv;
    msec *metrics_sec; /* --metrics-secure: instead of metrics_srv */
    bindhook *webhook; /* --topology-webhook */
    kube_client *webhook_client; /* the webhook's own API budget (never the reconcilers') */
    hs_server *health_srv;
    loopstat *loopstat; /* slurmop_loop_* metrics */
    lease_elector *lease;
    uv_timer_t grace;
    uint64_t grace_deadline;
    int hurry; /* op_stop_hurry: no grace period */
    uv_timer_t trim; /* mem_trim every TRIM_MS */
    int pending; /* things op_stop waits for */
    int exit_code;
    mx_family *mx_cache_objects;
    mx_family *mx_cache_bytes;
    mx_family *mx_watch_lists;
    mx_family *mx_watch_gone;
    mx_family *mx_watch_failures;
    mx_family *mx_leader;
    mx_family *mx_fenced;
    mx_family *mx_waiting;
    mx_family *mx_in_flight;
    mx_family *mx_ref_objects;
    mx_family *mx_ref_gets;
    mx_family *mx_ref_full;
    unsigned long long fenced_total; /* read just before the client closes */
    /* rest_client_*: the API server's host:port, as client-go's label */
    mx_family *mx_rest_requests, *mx_rest_seconds;
    char api_host[256];
    /* the totals the *_total counters were last brought up to (follow_total) */
    unsigned long long seen_lists[OPK__COUNT], seen_gone[OPK__COUNT], seen_failures[OPK__COUNT];
    unsigned long long seen_ref_gets[2], seen_ref_full[2], seen_fenced;
};

#define P(op) ((struct priv *)(op)->priv)

/* ------------------------------------------------------------------ */
/* metrics helpers */

void op_observe_reconcile(operator *op, const char *controller, wq_result res, double seconds)
{
    /* controller_runtime_reconcile_total / _errors_total are counted by the
     * work queue itself (its name is the controller name). */
    (void)res;
    mx_histogram_observe(mx_histogram_get(op->mx_reconcile_seconds, MX_LV(controller)), seconds);
}

/* The time since first_add_ns (a queueing, uv_hrtime()) into family f. */
static void observe_since(mx_family *f, const char *controller, uint64_t first_add_ns)
{
    uint64_t now = uv_hrtime();
    if (first_add_ns == 0 || first_add_ns > now)
        return;
    mx_histogram_observe(mx_histogram_get(f, MX_LV(controller)), (double)(now - first_add_ns) / 1e9);
}

void op_observe_action(operator *op, const char *controller, uint64_t first_add_ns)
{
    observe_since(op->mx_event_to_action, controller, first_add_ns);
}

void op_observe_pod_write(operator *op, const char *controller, uint64_t first_add_ns)
{
    observe_since(op->mx_event_to_pod_write, controller, first_add_ns);
}

/* client-go's rest_client_* carry the HTTP method, not the API verb: a
 * LIST and a WATCH are GETs there. */
static const char *http_method(const char *verb)
{
    return strcmp(verb, "LIST") == 0 || strcmp(verb, "WATCH") == 0 ? "GET" : verb;
}

static void observe_api(void *data, const char *verb, const char *resource, int code, double seconds)
{
    operator *op = data;
    struct priv *p = P(op);
    char c[16];
    snprintf(c, sizeof(c), "%d", code);
    mx_counter_inc(mx_counter_get(op->mx_api_requests, MX_LV(verb, resource, c)));
    mx_histogram_observe(mx_histogram_get(op->mx_api_seconds, MX_LV(verb)), seconds);
    /* client-go's label for a request that got no answer */
    if (code == 0)
        snprintf(c, sizeof(c), "<error>");
    const char *m = http_method(verb);
    mx_counter_inc(mx_counter_get(p->mx_rest_requests, MX_LV(c, m, p->api_host)));
    mx_histogram_observe(mx_histogram_get(p->mx_rest_seconds, MX_LV(m, p->api_host)), seconds);
}

/* A counter that follows a running total kept elsewhere (the reflectors'
 * and the client's statistics): only the growth is added, so a total that
 * restarts (a client made again) never makes the counter go down. */
static void follow_total(mx_family *f, const char *label, unsigned long long *last, unsigned long long now)
{
    mx_counter *c = mx_counter_get(f, MX_LV(label));
    if (c && now > *last)
        mx_counter_add(c, (double)(now - *last));
    *last = now;
}

static void on_scrape(void *data)
{
    operator *op = data;
    struct priv *p = P(op);
    for (int k = 0; k < OPK__COUNT; k++) {
        const char *res = kinds[k].res->plural;
        unsigned long long lists = 0, gone = 0, fail = 0;
        for (int i = 0; i < p->n_rf[k]; i++) {
            rf_stats st;
            rf_get_stats(p->rf[k][i], &st);
            lists += st.relists;
            gone += st.gone;
            fail += st.failures;
        }
        mx_gauge_set(mx_gauge_get(p->mx_cache_objects, MX_LV(res)), (double)store_count(op->stores[k]));
        mx_gauge_set(mx_gauge_get(p->mx_cache_bytes, MX_LV(res)), (double)store_bytes(op->stores[k]));
        follow_total(p->mx_watch_lists, res, &p->seen_lists[k], lists);
        follow_total(p->mx_watch_gone, res, &p->seen_gone[k], gone);
        follow_total(p->mx_watch_failures, res, &p->seen_failures[k], fail);
    }
    /* The strings the caches share (labels, owners, node names): counted
     * once, here, and by no store. */
    mx_gauge_set(mx_gauge_get(p->mx_cache_bytes, MX_LV("interned")), (double)istr_bytes());
    for (int i = 0; i < 2; i++) {
        if (p->bn[i] == NULL)
            continue;
        bn_stats bs;
        bn_get_stats(p->bn[i], &bs);
        const char *res = kinds[ref_kinds[i]].res->plural;
        mx_gauge_set(mx_gauge_get(p->mx_ref_objects, MX_LV(res)), (double)bs.entries);
        follow_total(p->mx_ref_gets, res, &p->seen_ref_gets[i], bs.gets);
        follow_total(p->mx_ref_full, res, &p->seen_ref_full[i], bs.full);
    }
    mx_gauge_set(mx_gauge_get(p->mx_leader, MX_LV("slurmop")), op->leading ? 1 : 0);
    kube_stats ks;
    kube_client_stats(op->client, &ks);
    follow_total(p->mx_fenced, "slurmop", &p->seen_fenced, ks.fenced);
    mx_gauge_set(mx_gauge_get(p->mx_waiting, MX_LV("slurmop")), (double)ks.waiting);
    mx_gauge_set(mx_gauge_get(p->mx_in_flight, MX_LV("watch")), (double)ks.watches_open);
    mx_gauge_set(mx_gauge_get(p->mx_in_flight, MX_LV("request")), (double)(ks.in_flight - ks.watches_open));
}

/* The API server connection carries every Secret the operator reads and
 * the bearer token: without TLS, or with a certificate that is not checked,
 * anybody on the path reads or changes them. Allowed (kubeconfigs do it),
 * but never quietly: an error-level line at start and a gauge that alerts
 * can watch. */
static void warn_insecure_transport(operator *op)
{
    int plain = strncmp(op->cfg->server, "http://", 7) == 0;
    int skip = op->cfg->insecure;
    if (plain)
        log_error("INSECURE: the API server %s is reached over plain HTTP: Secrets and credentials cross the "
                  "network unencrypted",
                  op->cfg->server);
    if (skip)
        log_error("INSECURE: insecure-skip-tls-verify is set for %s: the API server's certificate is not "
                  "checked, so anybody on the path can impersonate it",
                  op->cfg->server);
    mx_family *f =
        mx_family_new(op->metrics, MX_GAUGE, "slurmop_api_insecure_transport",
                      "1 when the API server connection is not protected this way (reason: plain-http, "
                      "skip-tls-verify)",
                      "reason", NULL, 0, NULL);
    if (f == NULL)
        return;
    const char *v1[] = {"plain-http"}, *v2[] = {"skip-tls-verify"};
    mx_gauge *g = mx_gauge_get(f, v1);
    if (g)
        mx_gauge_set(g, plain);
    g = mx_gauge_get(f, v2);
    if (g)
        mx_gauge_set(g, skip);
}

static int setup_metrics(operator *op)
{
    static const double lat[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                 0.25,   0.5,   1,      2.5,   5,    10,    30,   60};
    /* Reconciles and event -> action take tens of microseconds to a few
     * milliseconds: buckets fine enough below 1 ms to tell them apart (a
     * p99 interpolated inside 0.25-0.5 ms could not tell 260 from 480 us). */
    static const double fine[] = {0.00005, 0.0001, 0.00015, 0.0002, 0.00025, 0.0003, 0.0004, 0.0005,
                                  0.00075, 0.001,  0.0025,  0.005,  0.01,    0.025,  0.05,   0.1,
                                  0.25,    0.5,    1,       2.5,    5,       10,     30,     60};
    struct priv *p = P(op);
    mx_registry *r = op->metrics;
    /* client-go's host label is the URL's host[:port] */
    const char *h = strstr(op->cfg->server, "://");
    h = h ? h + 3 : op->cfg->server;
    snprintf(p->api_host, sizeof(p->api_host), "%.*s", (int)strcspn(h, "/"), h);
    size_t nl = sizeof(lat) / sizeof(lat[0]), nf = sizeof(fine) / sizeof(fine[0]);
    op->mx_reconcile_seconds =
        mx_family_new(r, MX_HISTOGRAM, "controller_runtime_reconcile_time_seconds",
                      "Length of time per reconciliation per controller", "controller", fine, nf, NULL);
    op->mx_event_to_action =
        mx_family_new(r, MX_HISTOGRAM, "slurmop_event_to_action_seconds",
                      "Time from the first watch event that queued an object to the first write "
                      "its reconcile issued",
                      "controller", fine, nf, NULL);
    op->mx_event_to_pod_write =
        mx_family_new(r, MX_HISTOGRAM, "slurmop_event_to_pod_write_seconds",
                      "Time from the first watch event that queued an object to the first "
                      "pod create or delete its reconcile issued",
                      "controller", fine, nf, NULL);
    op->mx_api_requests =
        mx_family_new(r, MX_COUNTER, "slurmop_api_requests_total",
                      "Kubernetes API requests by verb, resource and HTTP code (0: no answer)",
                      "verb,resource,code", NULL, 0, NULL);
    op->mx_api_seconds = mx_family_new(r, MX_HISTOGRAM, "slurmop_api_request_duration_seconds",
                                       "Kubernetes API request latency by verb", "verb", lat, nl, NULL);
    p->mx_cache_objects = mx_family_new(r, MX_GAUGE, "slurmop_cache_objects", "Objects in the informer cache",
                                        "resource", NULL, 0, NULL);
    p->mx_cache_bytes =
        mx_family_new(r, MX_GAUGE, "slurmop_cache_bytes",
                      "Heap bytes held by the informer cache of a resource (resource=\"interned\": the "
                      "strings the caches share)",
                      "resource", NULL, 0, NULL);
    p->mx_watch_lists =
        mx_family_new(r, MX_COUNTER, "slurmop_watch_relists_total",
                      "Complete relists after the first list, per resource", "resource", NULL, 0, NULL);
    p->mx_watch_gone =
        mx_family_new(r, MX_COUNTER, "slurmop_watch_expired_total",
                      "Watches or lists answered 410 Gone, per resource", "resource", NULL, 0, NULL);
    p->mx_watch_failures = mx_family_new(r, MX_COUNTER, "slurmop_watch_failures_total",
                                         "Failed lists and watches (restarted with backoff), per resource",
                                         "resource", NULL, 0, NULL);
    /* client-go's buckets */
    static const double rest_b[] = {0.005, 0.025, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60};
    p->mx_rest_requests =
        mx_family_new(r, MX_COUNTER, "rest_client_requests_total",
                      "Number of HTTP requests, partitioned by status code, method, and host",
                      "code,method,host", NULL, 0, NULL);
    p->mx_rest_seconds = mx_family_new(r, MX_HISTOGRAM, "rest_client_request_duration_seconds",
                                       "Request latency in seconds, broken down by verb and host",
                                       "verb,host", rest_b, sizeof(rest_b) / sizeof(rest_b[0]), NULL);
    p->mx_leader = mx_family_new(r, MX_GAUGE, "leader_election_master_status",
                                 "1 when this process holds the leader lease (or runs without election)",
                                 "name", NULL, 0, NULL);
    p->mx_fenced = mx_family_new(r, MX_COUNTER, "slurmop_fenced_writes_total",
                                 "API writes canceled or refused because the leader lease was lost", "name",
                                 NULL, 0, NULL);
    p->mx_waiting = mx_family_new(r, MX_GAUGE, "slurmop_api_requests_waiting",
                                  "API requests waiting in the client for the QPS limiter or a retry", "name",
                                  NULL, 0, NULL);
    p->mx_in_flight =
        mx_family_new(r, MX_GAUGE, "slurmop_api_requests_in_flight",
                      "API requests sent or queued and not yet answered: kind=watch for the open "
                      "watches, kind=request for the others (a backlog of writes shows here)",
                      "kind", NULL, 0, NULL);
    p->mx_ref_objects = mx_family_new(r, MX_GAUGE, "slurmop_referenced_objects",
                                      "Objects referenced by custom resources and read by name (not watched)",
                                      "resource", NULL, 0, NULL);
    p->mx_ref_gets = mx_family_new(r, MX_COUNTER, "slurmop_referenced_gets_total",
                                   "GETs of referenced objects (first reads and rotation polls)", "resource",
                                   NULL, 0, NULL);
    p->mx_ref_full =
        mx_family_new(r, MX_COUNTER, "slurmop_referenced_full_total",
                      "Lookups of referenced objects not read for want of room (the namespace's share "
                      "or the whole table full): they wait, never read as missing",
                      "resource", NULL, 0, NULL);
    if (!op->mx_reconcile_seconds || !op->mx_event_to_action || !op->mx_event_to_pod_write ||
        !p->mx_ref_objects || !p->mx_ref_gets || !p->mx_ref_full || !op->mx_api_requests ||
        !op->mx_api_seconds || !p->mx_cache_objects || !p->mx_cache_bytes || !p->mx_watch_lists ||
        !p->mx_watch_gone || !p->mx_watch_failures || !p->mx_leader || !p->mx_fenced || !p->mx_waiting ||
        !p->mx_in_flight || !p->mx_rest_requests || !p->mx_rest_seconds)
        return OP_EINVAL;
    mx_registry_on_scrape(r, on_scrape, op);
    return mx_process_collector(r);
}

/* ------------------------------------------------------------------ */
/* referenced objects */

const sobj *op_ref_get(operator *op, enum op_kind k, const char *ns, const char *name, int *pending)
{
    if (pending)
        *pending = 0;
    if (name == NULL || *name == '\0')
        return NULL;
    assert(k >= OPK_NODESETS && k < OPK__COUNT);
    const sobj *o = store_get(op->stores[k], ns, name);
    int i = ref_index(k);
    if (o || i < 0 || P(op)->bn[i] == NULL)
        return o;
    return bn_get(P(op)->bn[i], ns, name, pending);
}

void op_ref_refresh(operator *op, enum op_kind k, const char *ns, const char *name)
{
    int i = ref_index(k);
    if (name == NULL || *name == '\0' || i < 0 || P(op)->bn[i] == NULL || store_get(op->stores[k], ns, name))
        return;
    if (bn_refresh(P(op)->bn[i], ns, name))
        log_debug("%s %s/%s: read again ahead of its poll", kinds[k].res->kind, ns, name);
}

/* A referenced object changed: to the reconcilers it is a change of the
 * kind's store, as a watch event is. */
static void forward_ref_change(store *s, const sobj *old_obj, const sobj *new_obj, void *data)
{
    store_notify(data, old_obj, new_obj);
}

/* ------------------------------------------------------------------ */
/* events */

static void emitv(operator *op, const sobj *cr, const char *kind, const char *type, const char *reason,
                  const char *action, const char *fmt, va_list ap)
{
    char note[1024];
    vsnprintf(note, sizeof(note), fmt, ap);
    evrec_ref ref = {
        .api_version = "slinky.slurm.net/v1beta1",
        .kind = kind,
        .ns = cr->ns,
        .name = cr->name,
        .uid = cr->uid,
    };
    evrec_emit(op->events, &ref, type, reason, action, "%s", note);
}

void op_warn(operator *op, const sobj *cr, const char *kind, const char *reason, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    emitv(op, cr, kind, "Warning", reason, "Reconcile", fmt, ap);
    va_end(ap);
}

void op_event(operator *op, const sobj *cr, const char *kind, const char *reason, const char *action,
              const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    emitv(op, cr, kind, "Normal", reason, action, fmt, ap);
    va_end(ap);
}

/* ------------------------------------------------------------------ */
/* HTTP endpoints */

int op_caches_synced(const operator *op)
{
    return P(op)->n_synced == P(op)->n_reflectors;
}

static void serve(hs_req *req, void *data)
{
    operator *op = data;
    const char *path = hs_req_path(req);
    const char *method = hs_req_method(req);
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
        hs_respond(req, 405, "text/plain", "Allow: GET, HEAD\r\n", "method not allowed\n", 19);
        return;
    }
    /* With --metrics-secure, /metrics is only on the HTTPS server (msec). */
    if (strcmp(path, "/metrics") == 0 && !op->opts.metrics_secure) {
        buf_t b;
        buf_init(&b, 64u << 20);
        if (mx_render(op->metrics, &b) != 0) {
            buf_free(&b);
            hs_respond(req, 500, "text/plain", NULL, "metrics too large\n", 18);
            return;
        }
        hs_respond(req, 200, "text/plain; version=0.0.4; charset=utf-8", NULL, b.data ? b.data : "", b.len);
        buf_free(&b);
    } else if (strcmp(path, "/healthz") == 0 || strcmp(path, "/livez") == 0) {
        hs_respond(req, 200, "text/plain", NULL, "ok", 2);
    } else if (strcmp(path, "/readyz") == 0) {
        if (op_caches_synced(op) && !op->stopping)
            hs_respond(req, 200, "text/plain", NULL, "ok", 2);
        else
            hs_respond(req, 503, "text/plain", NULL, "caches not synced\n", 18);
    } else {
        hs_respond(req, 404, "text/plain", NULL, "404 page not found\n", 19);
    }
}

/* ":8080" -> 0.0.0.0:8080, "127.0.0.1:0" -> itself. */
static int parse_addr(const char *addr, char *host, size_t hostlen, int *port)
{
    const char *colon = strrchr(addr, ':');
    if (colon == NULL)
        return OP_EINVAL;
    size_t n = (size_t)(colon - addr);
    if (n == 0)
        snprintf(host, hostlen, "0.0.0.0");
    else if (addr[0] == '[' && n >= 2 && addr[n - 1] == ']')
        snprintf(host, hostlen, "%.*s", (int)(n - 2), addr + 1);
    else
        snprintf(host, hostlen, "%.*s", (int)n, addr);
    char *end;
    long p = strtol(colon + 1, &end, 10);
    if (*end || p < 0 || p > 65535)
        return OP_EINVAL;
    *port = (int)p;
    return 0;
}

static int render_metrics(void *data, buf_t *out)
{
    operator *op = data;
    return mx_render(op->metrics, out);
}

static int listen_secure(operator *op, const char *addr, char *err, size_t errlen)
{
    char host[256];
    int port, rc;
    if (addr == NULL || strcmp(addr, "0") == 0 || *addr == '\0')
        return 0;
    if (parse_addr(addr, host, sizeof(host), &port) != 0) {
        snprintf(err, errlen, "bad listen address \"%s\" (want host:port or :port)", addr);
        return OP_EINVAL;
    }
    msec_opts mo = {
        .host = host,
        .port = port,
        .cert_file = op->opts.metrics_cert_file,
        .key_file = op->opts.metrics_key_file,
        .client = op->client,
        .render = render_metrics,
        .data = op,
    };
    P(op)->metrics_sec = msec_start(op->loop, &mo, &rc, err, errlen);
    return P(op)->metrics_sec ? 0 : rc;
}

static int listen_on(operator *op, const char *addr, hs_server **out, char *err, size_t errlen)
{
    char host[256];
    int port, rc;
    *out = NULL;
    if (addr == NULL || strcmp(addr, "0") == 0 || *addr == '\0')
        return 0;
    if (parse_addr(addr, host, sizeof(host), &port) != 0) {
        snprintf(err, errlen, "bad listen address \"%s\" (want host:port or :port)", addr);
        return OP_EINVAL;
    }
    hs_opts ho;
    hs_opts_get_only(&ho);
    ho.handler = serve;
    ho.data = op;
    *out = hs_listen(op->loop, host, port, &ho, &rc);
    if (*out == NULL) {
        snprintf(err, errlen, "cannot listen on %s: %s", addr, err_str(rc));
        return rc;
    }
    /* Tests read the bound ports from these lines. */
    log_info("serving %s on %s:%d",
             op->opts.metrics_secure ? "/healthz /readyz" : "/metrics /healthz /readyz", host, hs_port(*out));
    return 0;
}

/* The pods/binding webhook: every replica serves it (it reads the caches
 * only), leader or not. */
static int caches_synced_cb(void *data)
{
    return op_caches_synced(data);
}

int op_webhook_covers(operator *op, const char *ns)
{
    return op->priv == NULL || bh_covers(P(op)->webhook, ns);
}

static int start_webhook(operator *op, char *err, size_t errlen)
{
    const char *addr = op->opts.webhook_addr ? op->opts.webhook_addr : ":9443";
    char host[256], names_buf[1024];
    const char *names[16];
    size_t n_names = 0;
    int port, rc;
    if (!op->opts.topology_webhook)
        return 0;
    if (parse_addr(addr, host, sizeof(host), &port) != 0) {
        snprintf(err, errlen, "bad --webhook-addr \"%s\" (want host:port or :port)", addr);
        return OP_EINVAL;
    }
    if (op->opts.webhook_names) {
        if (strlen(op->opts.webhook_names) >= sizeof(names_buf)) {
            snprintf(err, errlen, "--webhook-dns-names is too long");
            return OP_EINVAL;
        }
        snprintf(names_buf, sizeof(names_buf), "%s", op->opts.webhook_names);
        char *save = NULL;
        for (char *t = strtok_r(names_buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            if (n_names == sizeof(names) / sizeof(names[0])) {
                snprintf(err, errlen, "--webhook-dns-names: at most 16 names");
                return OP_EINVAL;
            }
            if (*t)
                names[n_names++] = t;
        }
    }
    bh_opts bo = {
        .host = host,
        .port = port,
        .cert_file = op->opts.webhook_cert_file,
        .key_file = op->opts.webhook_key_file,
        .dns = names,
        .n_dns = n_names,
        .config_name = op->opts.webhook_config,
        .scope_nodesets = !op->opts.webhook_scope_registered,
        .nodesets = op->stores[OPK_NODESETS],
        .synced = caches_synced_cb,
        .synced_data = op,
        .rotate_ms = op->opts.webhook_rotate_ms,
        .resync_ms = op->opts.webhook_resync_ms,
        .client_ca_file = op->opts.webhook_client_ca,
        .client_names = op->opts.webhook_client_names,
        .client = P(op)->webhook_client,
        .pods = op->stores[OPK_PODS],
        .nodes = op->stores[OPK_NODES],
        .metrics = op->metrics,
    };
    P(op)->webhook = bh_start(op->loop, &bo, &rc, err, errlen);
    return P(op)->webhook ? 0 : rc;
}

/* ------------------------------------------------------------------ */
/* reconcilers */

/* Every module's state, in registry order, before any setup: setups reach
 * each other's (slurmclient's sets the Controller's ping hook). */
static void new_states(operator *op)
{
    op->state = xcalloc(OPR__COUNT, sizeof(*op->state));
    for (size_t i = 0; i < OPR__COUNT; i++) {
        const op_reconciler *r = op_reconcilers[i];
        assert(r != NULL && r->slot == i);
        assert((r->new_state == NULL) == (r->free_state == NULL));
        assert(!r->free_late || r->free_state);
        assert(r->setup || (!r->start && !r->stop)); /* a part is driven by its reconciler */
        if (r->new_state) {
            op->state[i] = r->new_state();
            assert(op->state[i] != NULL);
        }
    }
}

/* Once the API client has closed: first the states that go at once, then
 * those free_late may leave alive until their last completion, which
 * reaches nothing of the operator. Each slot is emptied as it is freed, so
 * a state reached after its free asserts in op_state. */
static void free_states(operator *op)
{
    for (int late = 0; late <= 1; late++)
        for (size_t i = 0; i < OPR__COUNT; i++) {
            const op_reconciler *r = op_reconcilers[i];
            if ((r->free_late != 0) != late || op->state[i] == NULL)
                continue;
            void *st = op->state[i];
            op->state[i] = NULL;
            r->free_state(st);
        }
    for (size_t i = 0; i < OPR__COUNT; i++)
        assert(op->state[i] == NULL);
    free(op->state);
    op->state = NULL;
}

static void start_reconcilers(operator *op)
{
    if (op->leading || op->stopping)
        return;
    op->leading = 1;
    size_t n = 0;
    for (size_t i = 0; i < OPR__COUNT; i++) {
        if (op_reconcilers[i]->start == NULL)
            continue;
        int rc = op_reconcilers[i]->start(op);
        if (rc)
            log_error("reconciler %s failed to start: %s", op_reconcilers[i]->name, err_str(rc));
        n++;
    }
    log_info("reconcilers started (%zu)", n);
}

static void stop_reconcilers(operator *op)
{
    if (!op->leading)
        return;
    for (size_t i = 0; i < OPR__COUNT; i++)
        if (op_reconcilers[i]->stop)
            op_reconcilers[i]->stop(op);
    op->leading = 0;
}

static void on_started_leading(void *data)
{
    start_reconcilers(data);
}

static void on_stopped_leading(void *data)
{
    operator *op = data;
    struct priv *p = P(op);
    /* A successor may already be writing: close the client's write fence
     * before anything else runs, so nothing we had queued (behind the QPS
     * limiter, for a retry or for a connection) reaches the API server;
     * writes already on the wire finish. Then, like controller-runtime,
     * exit non-zero (the shutdown grace only waits for those). */
    int canceled = kube_client_fence(op->client);
    log_error(
        "lost the leader lease (%s); write fence closed: %d queued writes canceled, later ones refused; "
        "shutting down with exit code 1",
        lease_lost_reason(p->lease), canceled);
    stop_reconcilers(op);
    p->exit_code = 1;
    op_stop(op);
}

/* Freed pages go back to the system every TRIM_MS: a burst of work (a
 * scale-out, a backlog of writes) otherwise leaves RSS at its high-water
 * mark for good. A trim walks the free lists: a few milliseconds at most,
 * a negligible share of a minute. */
#define TRIM_MS 60000
#define TRIM_AFTER_SYNC_MS 5000 /* the first passes over a fresh cache done */

static void on_trim(uv_timer_t *t)
{
    (void)t;
    mem_trim();
}

static void on_synced(reflector *rf, void *data)
{
    operator *op = data;
    struct priv *p = P(op);
    /* on_synced runs once per reflector (reflector.h). */
    assert(p->n_synced < p->n_reflectors);
    p->n_synced++;
    if (p->n_synced == p->n_reflectors) {
        log_info("all %d caches synced", p->n_reflectors);
        /* The first LISTs are the largest transient allocations of a run
         * (pages of a fleet's JSON): their pages go back soon after, not a
         * minute later. */
        uv_timer_start(&p->trim, on_trim, TRIM_AFTER_SYNC_MS, TRIM_MS);
    }
}

/* ------------------------------------------------------------------ */
/* start */

static char *detect_cluster_domain(void)
{
    char *text = NULL;
    size_t n = 0;
    if (file_read_all("/etc/resolv.conf", 1 << 16, &text, &n) != 0)
        return xstrdup("cluster.local");
    /* "search ns.svc.cluster.local svc.cluster.local cluster.local" */
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        if (strncmp(line, "search", 6) != 0)
            continue;
        for (char *w = strtok(line + 6, " \t"); w; w = strtok(NULL, " \t")) {
            if (strncmp(w, "svc.", 4) == 0 && w[4]) {
                char *d = xstrdup(w + 4);
                free(text);
                return d;
            }
        }
        break;
    }
    free(text);
    return xstrdup("cluster.local");
}

static const char *token_cb(void *data)
{
    operator *op = data;
    return kcfg_token(op->cfg, uv_hrtime());
}

static void token_invalidate_cb(void *data)
{
    operator *op = data;
    kcfg_token_invalidate(op->cfg);
}

int op_start(uv_loop_t *loop, const operator_opts *opts, operator **out, char *err, size_t errlen)
{
    operator *op = xcalloc(1, sizeof(*op));
    struct priv *p = xcalloc(1, sizeof(*p));
    int rc;
    char host[256], uuid[37];

    op->loop = loop;
    op->priv = p;
    op->opts = *opts;
    uv_timer_init(loop, &p->grace);
    p->grace.data = op;
    uv_timer_init(loop, &p->trim);
    p->trim.data = op;
    uv_timer_start(&p->trim, on_trim, TRIM_MS, TRIM_MS);
    gethostname(host, sizeof(host));
    host[sizeof(host) - 1] = '\0';
    uuid_v4(uuid);
    op->identity = xasprintf("%s_%s", host, uuid);
    op->cluster_domain = opts->cluster_domain ? xstrdup(opts->cluster_domain) : detect_cluster_domain();
    op->metrics = mx_registry_new();
    for (int k = 0; k < OPK__COUNT; k++)
        op->stores[k] = store_new(kinds[k].kind);
    new_states(op);
    for (int i = 0; i < 2; i++) {
        p->ref_store[i] = store_new(&KIND_FULL_NAMESPACED);
        store_on_change(p->ref_store[i], forward_ref_change, op->stores[ref_kinds[i]]);
    }
    *out = op;

    kcfg_opts ko = {.kubeconfig = opts->kubeconfig, .context = opts->context};
    rc = kcfg_load(&ko, &op->cfg, err, errlen);
    if (rc)
        return rc;
    log_info("API server %s (%s)", op->cfg->server, op->cfg->source);

    rc = setup_metrics(op);
    if (rc) {
        snprintf(err, errlen, "metrics setup failed: %s", err_str(rc));
        return rc;
    }
    P(op)->loopstat = loopstat_new(loop, op->metrics, &rc);
    if (P(op)->loopstat == NULL)
        log_warn("loop metrics unavailable: %s", err_str(rc)); /* not worth refusing to start */
    warn_insecure_transport(op);
    hc_tls_opts tls = {
        .ca_pem = op->cfg->ca_pem,
        .ca_len = op->cfg->ca_len,
        .cert_pem = op->cfg->cert_pem,
        .cert_len = op->cfg->cert_len,
        .key_pem = op->cfg->key_pem,
        .key_len = op->cfg->key_len,
        .server_name = op->cfg->tls_server_name,
        .insecure_skip_verify = op->cfg->insecure,
    };
    kube_client_opts kco = {
        .server = op->cfg->server,
        .tls = op->cfg->tls ? &tls : NULL,
        .token = token_cb,
        .token_invalidate = token_invalidate_cb,
        .token_data = op,
        .qps = opts->qps,
        .burst = opts->burst,
        .observe = observe_api,
        .observe_data = op,
    };
    op->client = kube_client_new(loop, &kco, &rc);
    if (op->client == NULL) {
        snprintf(err, errlen, "cannot create the API client for %s: %s", op->cfg->server, err_str(rc));
        return rc;
    }
    if (opts->topology_webhook) {
        /* The webhook answers whoever reaches it: its pod reads get their
         * own limiter and connections, so a flood of reviews cannot spend
         * the reconcilers' budget (a flood once slowed a 100-pod scale-out
         * from 0.12 s to 21.6 s). 20 reads a second is far more than the
         * bindings of a scale-out whose pods the cache has not seen yet. */
        kube_client_opts wko = kco;
        wko.qps = 20;
        wko.burst = 40;
        wko.max_conns = 4;
        P(op)->webhook_client = kube_client_new(loop, &wko, &rc);
        if (P(op)->webhook_client == NULL) {
            snprintf(err, errlen, "cannot create the webhook's API client for %s: %s", op->cfg->server,
                     err_str(rc));
            return rc;
        }
    }
    op->events = evrec_new(loop, op->client, "slinky.slurm.net/slurmop", host);
    /* objsync looks a create answered AlreadyExists up with a GET where the
     * cache cannot show a foreign object: the caches filtered to our label. */
    op->objsync = objsync_new(op->client);
    for (int k = 0; k < OPK__COUNT; k++)
        if (kinds[k].label_selector && strcmp(kinds[k].label_selector, MANAGED_SELECTOR) == 0)
            (void)objsync_label_filtered(op->objsync, op->stores[k]);

    if (opts->metrics_secure)
        rc = listen_secure(op, opts->metrics_addr, err, errlen);
    else
        rc = listen_on(op, opts->metrics_addr, &p->metrics_srv, err, errlen);
    if (rc != 0)
        return rc;
    if ((rc = listen_on(op, opts->health_addr, &p->health_srv, err, errlen)) != 0)
        return rc;
    if ((rc = start_webhook(op, err, errlen)) != 0)
        return rc;

    kinds_keep_node_conditions(opts->propagated_node_conditions);
    {
        char *types = nh_condition_types(opts->health);
        kinds_keep_node_health(types);
        free(types);
    }
    /* Reconcilers add their indexes and handlers while the stores are empty. */
    for (size_t i = 0; i < OPR__COUNT; i++)
        if (op_reconcilers[i]->setup)
            op_reconcilers[i]->setup(op);

    for (int k = 0; k < OPK__COUNT; k++) {
        int scoped = kinds[k].res->namespaced && opts->n_namespaces > 0;
        int n = scoped ? opts->n_namespaces : 1;
        for (int i = 0; i < n; i++) {
            rf_opts ro = {
                .client = op->client,
                .res = kinds[k].res,
                .ns = scoped ? opts->namespaces[i] : NULL,
                .label_selector = kinds[k].label_selector,
                .store = op->stores[k],
                .on_synced = on_synced,
                .data = op,
            };
            p->rf[k][i] = rf_start(loop, &ro);
            p->n_rf[k]++;
            p->n_reflectors++;
        }
    }

    for (int i = 0; i < 2; i++) {
        bn_opts bo = {
            .client = op->client,
            .res = kinds[ref_kinds[i]].res,
            .store = p->ref_store[i],
            .poll_ms = opts->ref_poll_ms,
        };
        p->bn[i] = bn_start(loop, &bo);
    }

    if (opts->leader_elect) {
        const char *ns = opts->leader_elect_namespace ? opts->leader_elect_namespace
                         : op->cfg->namespace          ? op->cfg->namespace
                                                       : "default";
        lease_opts lo = {
            .client = op->client,
            .ns = ns,
            .name = opts->lease_name ? opts->lease_name : "slurmop",
            .identity = op->identity,
            .lease_ms = opts->lease_duration_ms,
            .renew_deadline_ms = opts->renew_deadline_ms,
            .retry_ms = opts->retry_period_ms,
            .on_started_leading = on_started_leading,
            .on_stopped_leading = on_stopped_leading,
            .data = op,
        };
        p->lease = lease_start(loop, &lo, &rc);
        if (p->lease == NULL) {
            snprintf(err, errlen,
                     "leader election setup failed: %s (want lease duration > renew deadline > 1.2 x retry "
                     "period)",
                     err_str(rc));
            return rc;
        }
        log_info("leader election: campaigning for lease %s/%s as %s", ns, lo.name, op->identity);
    } else {
        start_reconcilers(op);
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* stop */

static void finish_stop(operator *op);

static void one_done(void *data)
{
    operator *op = data;
    struct priv *p = P(op);
    assert(op->stopping && p->pending > 0);
    if (--p->pending == 0)
        finish_stop(op);
}

static void on_srv_closed(void *data)
{
    one_done(data);
}

static void on_client_closed(void *data)
{
    operator *op = data;
    struct priv *p = P(op);
    if (p->fenced_total)
        log_warn("%llu writes were fenced (canceled or refused after the leader lease was lost)",
                 p->fenced_total);
    void (*cb)(void *, int) = op->opts.on_stopped;
    void *cb_data = op->opts.stopped_data;
    int code = p->exit_code;
    evrec_free(op->events);
    objsync_free(op->objsync);
    free_states(op);
    for (int k = 0; k < OPK__COUNT; k++)
        store_free(op->stores[k]);
    for (int i = 0; i < 2; i++)
        store_free(p->ref_store[i]);
    mx_registry_free(op->metrics);
    kcfg_free(op->cfg);
    kinds_keep_node_conditions(NULL);
    free(op->identity);
    free(op->cluster_domain);
    free(p);
    free(op);
    log_info("stopped");
    if (cb)
        cb(cb_data, code);
}

static void close_main_client(void *data)
{
    operator *op = data;
    if (op->client) {
        kube_stats st;
        kube_client_stats(op->client, &st);
        P(op)->fenced_total = st.fenced;
        kube_client_close(op->client, on_client_closed, op);
    }
    else
        on_client_closed(op);
}

static void on_grace_closed(uv_handle_t *h)
{
    operator *op = h->data;
    kube_client *wc = P(op)->webhook_client;
    P(op)->webhook_client = NULL;
    if (wc)
        kube_client_close(wc, close_main_client, op);
    else
        close_main_client(op);
}

static void on_trim_closed(uv_handle_t *h)
{
    operator *op = h->data;
    uv_close((uv_handle_t *)&P(op)->grace, on_grace_closed);
}

/* Every component has stopped: close the client and free everything. */
static void finish_stop(operator *op)
{
    uv_close((uv_handle_t *)&P(op)->trim, on_trim_closed);
}

static void close_servers_and_lease(operator *op)
{
    struct priv *p = P(op);
    p->pending = 1; /* held until everything below is requested */
    loopstat_close(p->loopstat);
    p->loopstat = NULL;
    if (p->lease) {
        p->pending++;
        lease_stop(p->lease, one_done, op);
        p->lease = NULL;
    }
    if (p->metrics_srv) {
        p->pending++;
        hs_close(p->metrics_srv, on_srv_closed, op);
        p->metrics_srv = NULL;
    }
    if (p->metrics_sec) {
        p->pending++;
        msec_close(p->metrics_sec, on_srv_closed, op);
        p->metrics_sec = NULL;
    }
    if (p->health_srv) {
        p->pending++;
        hs_close(p->health_srv, on_srv_closed, op);
        p->health_srv = NULL;
    }
    if (p->webhook) {
        p->pending++;
        bh_close(p->webhook, on_srv_closed, op);
        p->webhook = NULL;
    }
    one_done(op);
}

/* Wait until writes in flight are done (or the grace period is over). */
static void on_grace_tick(uv_timer_t *t)
{
    operator *op = t->data;
    struct priv *p = P(op);
    kube_stats st;
    kube_client_stats(op->client, &st);
    if (st.in_flight > 0 && uv_now(op->loop) < p->grace_deadline) {
        uv_timer_start(&p->grace, on_grace_tick, 20, 0);
        return;
    }
    if (st.in_flight > 0)
        log_warn("shutdown: %d API requests still in flight after the grace period; canceling them",
                 st.in_flight);
    close_servers_and_lease(op);
}

static void on_reflector_stopped(void *data)
{
    operator *op = data;
    struct priv *p = P(op);
    assert(op->stopping && p->pending > 0);
    if (--p->pending > 0)
        return;
    p->grace_deadline = uv_now(op->loop) + (op->opts.shutdown_grace_ms ? op->opts.shutdown_grace_ms : 10000);
    if (p->hurry)
        p->grace_deadline = 0;
    on_grace_tick(&p->grace);
}

void op_stop(operator *op)
{
    struct priv *p = P(op);
    if (op->stopping)
        return;
    op->stopping = 1;
    log_info("shutting down: stopping reconcilers and watches");
    stop_reconcilers(op);
    p->pending = 1;
    for (int k = 0; k < OPK__COUNT; k++)
        for (int i = 0; i < p->n_rf[k]; i++) {
            p->pending++;
            rf_stop(p->rf[k][i], on_reflector_stopped, op);
        }
    for (int i = 0; i < 2; i++)
        if (p->bn[i]) {
            p->pending++;
            bn_stop(p->bn[i], on_reflector_stopped, op);
            p->bn[i] = NULL;
        }
    if (op->client == NULL) {
        close_servers_and_lease(op);
        return;
    }
    on_reflector_stopped(op);
}

void op_stop_hurry(operator *op)
{
    struct priv *p = P(op);
    p->hurry = 1;
    if (!op->stopping) {
        op_stop(op);
        return;
    }
    /* Already waiting out the grace: the next tick cancels what is left
     * and goes on to release the lease. */
    p->grace_deadline = 0;
}
