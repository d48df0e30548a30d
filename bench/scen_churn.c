/* Scenario 4: steady churn. N pods Ready on N Nodes; then, for each rate
 * (10, 100, 1,000 events/s), events at that rate for --churn-seconds: half
 * are pod failures (kubesim's /kubesim/pods/fail sets a pod Failed, as a
 * kubelet would; on a real cluster the pod is deleted instead), half are
 * Node flaps (a Node cordoned, then uncordoned on the next Node event, so
 * at most one Node is cordoned at a time). Every event reaches the
 * operator as a watch event that queues NodeSet "gpu".
 *
 * Latency is the operator's own: slurmop_event_to_action_seconds
 * {controller="nodeset-controller"} observes, for every reconcile that
 * writes, the time from the first watch event that queued the key to that
 * reconcile's first write (a failed pod's delete, a replacement's create).
 * The harness scrapes the histogram before and after each rate and takes
 * the difference; percentiles are interpolated inside buckets as
 * Prometheus' histogram_quantile does, the max is the upper bound of the
 * highest non-empty bucket, and the share of actions within 1 ms is exact
 * (1 ms is a bucket bound; the buckets start at 50 µs). Queue depth is sampled from /metrics every
 * 100 ms. Node flaps alone cause reconciles without writes (nothing to do
 * without Slurm), so they add queue work but no latency samples.
 *
 * When N is larger than CHURN_REF_N (and not --quick), the same rates run
 * first on a fleet of CHURN_REF_N pods of its own: the p99 at N over that
 * one says whether an event's cost grows with the fleet.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "core/err.h"
#include "core/json.h"
#include "reconcilers/nodeset.h"

#define QN "name=\"" NODESET_CONTROLLER "\""
#define QC "controller=\"" NODESET_CONTROLLER "\""

/* The fleet whose p99 is the reference of the larger one's (the cost of an
 * event must not grow with the fleet). */
#define CHURN_REF_N 1024

typedef struct churn {
    bx_ctx *x;
    bx_fleet *f;
    double rate;
    uint64_t t0;
    long sent, ok, failed, inflight;
    int node_busy;     /* real cluster: a Node PATCH is in flight */
    long node_skipped; /* ... so a Node event was not sent */
    char first_error[160];
    int running;
    uv_timer_t tick;
    int pod_i;
    size_t node_j;
    int node_phase; /* 0: the next Node event cordons node_j; 1: it uncordons it */
    char **nodes;
    size_t n_nodes;
    hc_pool *node_pool; /* one connection: a Node's cordon and uncordon must not overtake each other */
    /* queue depth samples */
    uv_timer_t samp;
    int scraping;
    double *st, *sd;
    size_t sn, scap;
    int closed;
    /* --churn-outage: the fleet's lab, and its slurmrestd killed in this window */
    bx_lab *lab;
    uv_timer_t outage;
    int killed;
    /* pod failures sent in this window, for the harness's own latency: when
     * each was sent and to which ordinal (-1: the pod was already absent or
     * terminating in the observer's view, so no action of its own follows) */
    uint64_t *ev_t;
    int *ev_pod;
    size_t ev_n, ev_cap;
    uint64_t last_answer; /* the last event answered with success */
} churn;

static void ev_done_http(hc_req *req, int status, const hc_response *r, void *data)
{
    churn *c = data;
    (void)req;
    c->inflight--;
    if (status == 0 && r->status < 300) {
        c->ok++;
        c->last_answer = uv_hrtime();
    } else {
        c->failed++;
        if (!c->first_error[0])
            snprintf(c->first_error, sizeof(c->first_error), "%s: HTTP %d %.100s",
                     status ? err_str(status) : "answer", r->status, r->body ? r->body : "");
    }
}

static void ev_done_kube(int err, const cJSON *obj, const kube_status *st, void *data)
{
    churn *c = data;
    (void)obj;
    (void)st;
    c->inflight--;
    if (err == 0) {
        c->ok++;
        c->last_answer = uv_hrtime();
    } else {
        c->failed++;
        if (!c->first_error[0])
            snprintf(c->first_error, sizeof(c->first_error), "%s (%.100s)", err_str(err),
                     st ? st->message : "");
    }
}

static void node_done_kube(int err, const cJSON *obj, const kube_status *st, void *data)
{
    ((churn *)data)->node_busy = 0;
    ev_done_kube(err, obj, st, data);
}

static void admin_post(churn *c, hc_pool *pool, const char *path, char *body)
{
    hc_header h[1] = {{"Content-Type", "application/json"}};
    hc_req_opts o;
    memset(&o, 0, sizeof(o));
    o.method = "POST";
    o.path = path;
    o.headers = h;
    o.n_headers = 1;
    o.body = body;
    o.body_len = strlen(body);
    o.request_timeout_ms = 30000;
    o.on_done = ev_done_http;
    o.data = c;
    hc_request(pool, &o);
}

/* Cordon (on) or uncordon the current flap Node; then advance the flap. */
static void node_event(churn *c)
{
    const char *node = c->nodes[c->node_j];
    int on = c->node_phase == 0;
    if (!c->f->have_ks && c->node_busy) {
        /* The kube client spreads requests over its connections, so a
         * Node's uncordon could overtake its cordon and leave it cordoned
         * (and its pod unschedulable): one Node PATCH at a time. */
        c->node_skipped++;
        return;
    }
    c->inflight++;
    if (c->f->have_ks) {
        char *b = xasprintf("{\"names\":[\"%s\"],\"unschedulable\":%s}", node, on ? "true" : "false");
        admin_post(c, c->node_pool, "/kubesim/nodes/cordon", b);
        free(b);
    } else {
        cJSON *p =
            cJSON_Parse(on ? "{\"spec\":{\"unschedulable\":true}}" : "{\"spec\":{\"unschedulable\":null}}");
        c->node_busy = 1;
        kube_patch(c->f->api.kc, &KUBE_NODES, NULL, node, NULL, KUBE_PATCH_MERGE, p, NULL, 0, node_done_kube,
                   c);
        cJSON_Delete(p);
    }
    c->node_phase = !c->node_phase;
    if (c->node_phase == 0)
        c->node_j = (c->node_j + 1) % c->n_nodes;
}

static void pod_event(churn *c)
{
    bx_ctx *x = c->x;
    char name[64];
    snprintf(name, sizeof(name), "gpu-%d", c->pod_i);
    if (c->ev_n == c->ev_cap) {
        c->ev_cap = c->ev_cap ? c->ev_cap * 2 : 1024;
        c->ev_t = xrealloc(c->ev_t, c->ev_cap * sizeof(*c->ev_t));
        c->ev_pod = xrealloc(c->ev_pod, c->ev_cap * sizeof(*c->ev_pod));
    }
    c->ev_t[c->ev_n] = uv_hrtime();
    c->ev_pod[c->ev_n++] = bx_obs_pod_state(c->f->obs, name) == 1 ? c->pod_i : -1;
    c->pod_i = (c->pod_i + 1) % c->f->n;
    c->inflight++;
    if (c->f->have_ks) {
        char *b = xasprintf("{\"namespace\":\"%s\",\"name\":\"%s\",\"phase\":\"Failed\",\"reason\":\"Error\","
                            "\"exitCode\":1}",
                            x->ns, name);
        admin_post(c, c->f->ks.admin, "/kubesim/pods/fail", b);
        free(b);
    } else {
        /* At once (grace 0): kwok removes a terminating pod by name,
         * without a UID precondition, and when it lags (a loaded machine)
         * that delete hits the pod the operator created in its place under
         * the same name, which then terminates and is deleted in turn: a
         * loop that outlives the churn. */
        kube_delete_opts o = {.grace_seconds = 0};
        kube_delete(c->f->api.kc, &KUBE_PODS, x->ns, name, &o, ev_done_kube, c);
    }
}

static void send_event(churn *c)
{
    if (c->sent % 2 == 0 || c->n_nodes == 0)
        pod_event(c);
    else
        node_event(c);
    c->sent++;
}

static void tick_cb(uv_timer_t *t)
{
    churn *c = t->data;
    if (!c->running)
        return;
    double el = bx_secs(c->t0, uv_hrtime());
    long due = (long)(c->rate * el) - c->sent;
    while (due-- > 0)
        send_event(c);
}

static void samp_done(hc_req *req, int status, const hc_response *r, void *data)
{
    churn *c = data;
    (void)req;
    c->scraping = 0;
    if (status || r->status != 200)
        return;
    bx_metrics m;
    bx_metrics_parse(r->body, &m);
    if (c->sn == c->scap) {
        c->scap = c->scap ? c->scap * 2 : 256;
        c->st = xrealloc(c->st, c->scap * sizeof(double));
        c->sd = xrealloc(c->sd, c->scap * sizeof(double));
    }
    c->st[c->sn] = bx_secs(c->t0, uv_hrtime());
    c->sd[c->sn] = bx_metric(&m, "workqueue_depth", QN);
    c->sn++;
    bx_metrics_free(&m);
}

static void samp_cb(uv_timer_t *t)
{
    churn *c = t->data;
    if (c->scraping || !c->running)
        return;
    hc_req_opts o;
    memset(&o, 0, sizeof(o));
    o.method = "GET";
    o.path = "/metrics";
    o.request_timeout_ms = 5000;
    o.on_done = samp_done;
    o.data = c;
    c->scraping = 1;
    hc_request(c->f->op.metrics, &o);
}

static void status_line(void *arg, char *out, size_t len)
{
    churn *c = arg;
    snprintf(out, len, "%ld events sent (%ld failed), queue depth %.0f", c->sent, c->failed,
             c->sn ? c->sd[c->sn - 1] : 0.0);
}

static int drained(void *arg)
{
    churn *c = arg;
    return c->inflight == 0 && !c->scraping;
}

static void timer_closed(uv_handle_t *h)
{
    ((churn *)h->data)->closed++;
}

static int timers_closed(void *arg)
{
    return ((churn *)arg)->closed == 3;
}

/* --churn-outage: Slurm goes away mid-window, as slurmrestd crashing would
 * take it (connections refused); the rest of the window runs with the
 * Slurm side unknown. */
static void outage_cb(uv_timer_t *t)
{
    churn *c = t->data;
    int e = bx_lab_kill_rest(c->lab);
    if (e)
        bx_say(c->x, "bench: churn: could not kill the lab's slurmrestd: %s", err_str(e));
    else
        c->killed = 1;
}

/* The Nodes to flap: every Node of the cluster, in name order. */
static int load_nodes(bx_ctx *x, bx_fleet *f, churn *c)
{
    cJSON *list = NULL;
    if (bx_list(x, &f->api, &KUBE_NODES, NULL, NULL, &list) != 0)
        return OP_EIO;
    int n = json_len(json_get(list, "items"));
    c->nodes = xcalloc((size_t)n + 1, sizeof(char *));
    const cJSON *it;
    cJSON_ArrayForEach(it, json_get(list, "items"))
    {
        const char *name = json_get_str(it, "metadata.name");
        if (name)
            c->nodes[c->n_nodes++] = xstrdup(name);
    }
    cJSON_Delete(list);
    return c->n_nodes ? 0 : OP_ENOTFOUND;
}

static const char *bucket_label(char *b, size_t len, double lo, double hi)
{
    char l[32], h[32];
    if (isinf(hi))
        snprintf(b, len, "> %s", bx_fmt_s(l, sizeof(l), lo));
    else if (lo <= 0)
        snprintf(b, len, "≤ %s", bx_fmt_s(h, sizeof(h), hi));
    else
        snprintf(b, len, "%s–%s", bx_fmt_s(l, sizeof(l), lo), bx_fmt_s(h, sizeof(h), hi));
    return b;
}

typedef struct rate_result {
    double rate, seconds;
    long sent, failed, node_skipped;
    bx_hist lat, rec, loop, lcpu; /* loop, lcpu: slurmop_loop_iteration_{busy,cpu}_seconds */
    bx_hist podw;                 /* slurmop_event_to_pod_write_seconds (n 0: an operator without it) */
    double loop_busy, loop_cpu;   /* slurmop_loop_{busy,cpu}_seconds_total over the window (NAN: absent) */
    double adds, reconciles, max_depth, mean_depth;
    double full, incr; /* NodeSet passes by kind (NAN: an operator without the counter) */
    cJSON *full_why;   /* full passes by reason: {"reason=\"...\"": n} */
    cJSON *polls;      /* Slurm node-table polls by cluster and result */
    double poll_errors; /* of them, failed or held: the cache read unknown meanwhile */
    double share;       /* NodeSet passes of kind kubernetes-share (NAN: an operator without them) */
    int outage;         /* slurmrestd was killed in this window (--churn-outage) */
    double *st, *sd;
    size_t sn;
    /* seen from the harness's own watch (bench_obs.c): pod failure sent ->
     * its pod terminating (kubesim: the operator's delete), -> a pod of that
     * name added again (the replacement); seconds, sorted */
    double *e2e_del, *e2e_add;
    size_t n_del, n_add;
    long pod_events, pod_excluded, del_unseen, add_unseen;
    double achieved; /* events answered with success per second of the window, to the last answer */
} rate_result;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Nearest-rank quantile of a sorted sample (NAN when empty). */
static double quantile(const double *v, size_t n, double q)
{
    if (n == 0)
        return NAN;
    size_t i = (size_t)ceil(q * (double)n);
    return v[i ? i - 1 : 0];
}

/* Each pod failure of the window matched with what the harness's watch saw
 * next of that pod name. A failure sent to a pod already absent or
 * terminating is left out (the earlier failure's action covers it). */
static void e2e_collect(churn *c, rate_result *rr)
{
    rr->e2e_del = xmalloc((c->ev_n + 1) * sizeof(double));
    rr->e2e_add = xmalloc((c->ev_n + 1) * sizeof(double));
    rr->pod_events = (long)c->ev_n;
    for (size_t i = 0; i < c->ev_n; i++) {
        if (c->ev_pod[i] < 0) {
            rr->pod_excluded++;
            continue;
        }
        char name[64];
        snprintf(name, sizeof(name), "gpu-%d", c->ev_pod[i]);
        uint64_t td = bx_obs_first_after(c->f->obs, name, BX_OBS_TERMINATING, c->ev_t[i]);
        uint64_t ta = bx_obs_first_after(c->f->obs, name, BX_OBS_ADDED, c->ev_t[i]);
        if (td)
            rr->e2e_del[rr->n_del++] = bx_secs(c->ev_t[i], td);
        else
            rr->del_unseen++;
        if (ta)
            rr->e2e_add[rr->n_add++] = bx_secs(c->ev_t[i], ta);
        else
            rr->add_unseen++;
    }
    qsort(rr->e2e_del, rr->n_del, sizeof(double), cmp_double);
    qsort(rr->e2e_add, rr->n_add, sizeof(double), cmp_double);
}

static int run_rate(bx_ctx *x, bx_fleet *f, churn *c, double rate, double secs, rate_result *rr)
{
    bx_metrics m0, m1;
    memset(rr, 0, sizeof(*rr));
    rr->rate = rate;
    rr->seconds = secs;
    bx_step(x, "churn: %g events/s for %.0f s", rate, secs);
    (void)bx_scrape(x, &f->op, &m0);
    c->rate = rate;
    c->sent = c->ok = c->failed = c->node_skipped = 0;
    c->sn = 0;
    c->ev_n = 0;
    c->last_answer = 0;
    bx_obs_history(f->obs, 1);
    c->t0 = uv_hrtime();
    c->running = 1;
    bx_set_status(x, status_line, c);
    uv_timer_start(&c->tick, tick_cb, 1, 1);
    uv_timer_start(&c->samp, samp_cb, 0, 100);
    c->killed = 0;
    if (x->churn_latency_ms > 0 && f->have_ks) {
        char body[64];
        snprintf(body, sizeof(body), "{\"latencyMs\":%d}", x->churn_latency_ms);
        if (bx_admin(x, &f->ks, "POST", "/kubesim/faults", body, NULL) != 0)
            bx_say(x, "bench: churn: kubesim's latency fault could not be set; the window runs without it");
    }
    if (x->churn_outage && c->lab && rate >= 1000)
        uv_timer_start(&c->outage, outage_cb, 500, 0);
    bx_sleep(x, secs);
    c->running = 0;
    uv_timer_stop(&c->tick);
    uv_timer_stop(&c->samp);
    uv_timer_stop(&c->outage);
    rr->outage = c->killed;
    (void)bx_wait(x, drained, c, 60);
    if (x->churn_latency_ms > 0 && f->have_ks)
        (void)bx_admin(x, &f->ks, "POST", "/kubesim/faults", "{\"latencyMs\":0}", NULL);
    rr->seconds = bx_secs(c->t0, uv_hrtime());
    rr->achieved = c->last_answer > c->t0 ? (double)c->ok / bx_secs(c->t0, c->last_answer) : NAN;
    rr->sent = c->sent - c->node_skipped;
    rr->failed = c->failed;
    rr->node_skipped = c->node_skipped;
    if (c->failed)
        bx_say(x, "bench: churn at %g events/s: %ld events failed; the first: %s", rate, c->failed,
               c->first_error);
    c->first_error[0] = '\0';
    /* A cordoned Node left over is uncordoned, then the fleet settles. */
    if (c->node_phase == 1) {
        node_event(c);
        (void)bx_wait(x, drained, c, 30);
    }
    if (f->have_ks) {
        /* belt and braces: every Node schedulable again */
        buf_t b;
        buf_init(&b, BUF_UNLIMITED);
        int e = buf_puts(&b, "{\"unschedulable\":false,\"names\":[");
        for (size_t i = 0; i < c->n_nodes; i++)
            e |= buf_printf(&b, "%s\"%s\"", i ? "," : "", c->nodes[i]);
        e |= buf_puts(&b, "]}");
        if (e == 0)
            (void)bx_admin(x, &f->ks, "POST", "/kubesim/nodes/cordon", b.data, NULL);
        buf_free(&b);
    } else {
        /* The same on a real cluster: the cordon and uncordon PATCHes of
         * one Node travel on different connections and may land in the
         * wrong order, leaving it cordoned; with one pod per Node its pod
         * could not be scheduled again. */
        cJSON *list = NULL;
        if (bx_list(x, &f->api, &KUBE_NODES, NULL, "fieldSelector=spec.unschedulable%3Dtrue", &list) == 0) {
            const cJSON *it;
            cJSON_ArrayForEach(it, json_get(list, "items"))
            {
                const char *name = json_get_str(it, "metadata.name");
                if (name)
                    (void)bx_patch(x, &f->api, &KUBE_NODES, NULL, name, NULL,
                                   "{\"spec\":{\"unschedulable\":null}}", NULL);
            }
        }
        cJSON_Delete(list);
    }
    bx_step(x, "churn: %g events/s: settling", rate);
    int rc = bx_fleet_converge(x, f, f->n, 180);
    (void)bx_wait_quiet(x, &f->op, 0.5, 60);
    (void)bx_scrape(x, &f->op, &m1);
    bx_set_status(x, NULL, NULL);
    e2e_collect(c, rr);
    bx_obs_history(f->obs, 0);
    (void)bx_hist_delta(&m0, &m1, "slurmop_event_to_action_seconds", QC, &rr->lat);
    (void)bx_hist_delta(&m0, &m1, "slurmop_event_to_pod_write_seconds", QC, &rr->podw);
    (void)bx_hist_delta(&m0, &m1, "controller_runtime_reconcile_time_seconds", QC, &rr->rec);
    (void)bx_hist_delta(&m0, &m1, "slurmop_loop_iteration_busy_seconds", NULL, &rr->loop);
    (void)bx_hist_delta(&m0, &m1, "slurmop_loop_iteration_cpu_seconds", NULL, &rr->lcpu);
    rr->loop_busy = bx_metric_delta(&m0, &m1, "slurmop_loop_busy_seconds_total", NULL);
    rr->loop_cpu = bx_metric_delta(&m0, &m1, "slurmop_loop_cpu_seconds_total", NULL);
    rr->adds = bx_metric(&m1, "workqueue_adds_total", QN) - bx_metric(&m0, "workqueue_adds_total", QN);
    rr->reconciles = bx_metric(&m1, "controller_runtime_reconcile_total", QC) -
                     bx_metric(&m0, "controller_runtime_reconcile_total", QC);
    rr->full = bx_metric_delta(&m0, &m1, "slurmop_nodeset_passes_total", "kind=\"full\"");
    rr->incr = bx_metric_delta(&m0, &m1, "slurmop_nodeset_passes_total", "kind=\"incremental\"");
    rr->share = bx_metric_delta(&m0, &m1, "slurmop_nodeset_passes_total", "kind=\"kubernetes-share\"");
    rr->full_why = bx_metric_deltas(&m0, &m1, "slurmop_nodeset_full_passes_total");
    rr->polls = bx_metric_deltas(&m0, &m1, "slurmop_slurm_node_polls_total");
    for (const cJSON *it = rr->polls ? rr->polls->child : NULL; it; it = it->next)
        if (strstr(it->string, "result=\"error\"") || strstr(it->string, "result=\"held\""))
            rr->poll_errors += it->valuedouble;
    double sum = 0;
    for (size_t i = 0; i < c->sn; i++) {
        sum += c->sd[i];
        if (c->sd[i] > rr->max_depth)
            rr->max_depth = c->sd[i];
    }
    rr->mean_depth = c->sn ? sum / (double)c->sn : NAN;
    rr->st = xmalloc((c->sn + 1) * sizeof(double));
    rr->sd = xmalloc((c->sn + 1) * sizeof(double));
    memcpy(rr->st, c->st ? c->st : rr->st, c->sn * sizeof(double));
    memcpy(rr->sd, c->sd ? c->sd : rr->sd, c->sn * sizeof(double));
    rr->sn = c->sn;
    bx_metrics_free(&m0);
    bx_metrics_free(&m1);
    return rc;
}

/* One fleet of n pods (with its own Slurm lab under --churn-slurm), the
 * three rates in turn. *done: rates that ran; *with_slurm: the lab started;
 * *n_nodes: Kubernetes Nodes the events flapped. */
static int churn_fleet(bx_ctx *x, int n, rate_result rr[3], int *done, int *with_slurm_out, size_t *n_nodes)
{
    bx_fleet f;
    churn c;
    memset(&c, 0, sizeof(c));
    c.x = x;
    c.f = &f;
    /* --churn-slurm: a RestApi, so every pass also runs the Slurm side */
    bx_lab lab;
    memset(&lab, 0, sizeof(lab));
    bx_fleet_slurm fs;
    memset(&fs, 0, sizeof(fs));
    char *jwt = NULL;
    size_t jwt_len = 0;
    const char *slurm_skip = NULL;
    if (x->churn_slurm) {
        if (x->no_slurm)
            slurm_skip = "--no-slurm";
        else if (!x->slurm_aware)
            slurm_skip = "this slurmop does not talk to Slurm";
        else if (x->kubeconfig && !x->real_k8s)
            slurm_skip = "--kubeconfig: the Slurm node names are not under the harness's control";
        if (!slurm_skip) {
            bx_step(x, "churn: starting a Slurm lab with %d nodes", n);
            int e = bx_lab_start_nodes(x, &lab, n);
            if (e == 0 && bx_lab_jwt_key(&lab, &jwt, &jwt_len) == 0) {
                fs = (bx_fleet_slurm){lab.rest_url, lab.newer ? NULL : lab.slurm_conf, jwt, jwt_len, 1};
            } else {
                slurm_skip = e == OP_ENOTSUP ? "the Slurm lab needs root and Slurm's packages"
                                             : "the Slurm lab did not start";
                bx_lab_stop(x, &lab);
            }
        }
        if (slurm_skip)
            bx_say(x, "bench: churn without Slurm: %s", slurm_skip);
    }
    int with_slurm = x->churn_slurm && !slurm_skip;
    bx_step(x, "churn: starting a fleet of %d pods%s", n, with_slurm ? " with Slurm" : "");
    int rc = bx_fleet_open(x, &f, "churn", x->k8s_nodes > n ? x->k8s_nodes : n, n, with_slurm ? &fs : NULL);
    if (rc == 0 && with_slurm && bx_wait_slurm_quiet(x, &f.op, 3.0, 300) != 0)
        bx_say(x, "bench: churn: the operator's Slurm writes after the scale-out did not settle in 300 s");
    if (rc == 0)
        rc = load_nodes(x, &f, &c);
    static const double rates[] = {10, 100, 1000};
    memset(rr, 0, 3 * sizeof(*rr));
    *done = 0;
    if (rc == 0) {
        if (f.have_ks) {
            hc_pool_opts po;
            memset(&po, 0, sizeof(po));
            po.max_conns = 1;
            int e = 0;
            c.node_pool = hc_pool_new(x->loop, f.ks.http_url, &po, &e);
        }
        uv_timer_init(x->loop, &c.tick);
        uv_timer_init(x->loop, &c.samp);
        uv_timer_init(x->loop, &c.outage);
        c.tick.data = c.samp.data = c.outage.data = &c;
        c.lab = with_slurm ? &lab : NULL;
        for (int i = 0; i < 3; i++) {
            /* at least 100 events per rate, so that a p99 means something */
            double secs = x->churn_s;
            if (rates[i] * secs < 100)
                secs = 100 / rates[i];
            if (run_rate(x, &f, &c, rates[i], secs, &rr[i]) != 0)
                bx_say(x, "bench: churn at %g events/s did not settle", rates[i]);
            (*done)++;
        }
        uv_close((uv_handle_t *)&c.tick, timer_closed);
        uv_close((uv_handle_t *)&c.samp, timer_closed);
        uv_close((uv_handle_t *)&c.outage, timer_closed);
        (void)bx_wait(x, timers_closed, &c, 5);
        bx_pool_close(x, c.node_pool);
    }
    bx_fleet_close(x, &f);
    if (with_slurm)
        bx_lab_stop(x, &lab);
    free(jwt);

    *with_slurm_out = with_slurm;
    *n_nodes = c.n_nodes;
    for (size_t i = 0; i < c.n_nodes; i++)
        free(c.nodes[i]);
    free(c.nodes);
    free(c.st);
    free(c.sd);
    free(c.ev_t);
    free(c.ev_pod);
    return rc;
}

static void rates_free(rate_result rr[3])
{
    for (int i = 0; i < 3; i++) {
        free(rr[i].st);
        free(rr[i].sd);
        free(rr[i].e2e_del);
        free(rr[i].e2e_add);
        cJSON_Delete(rr[i].full_why);
        cJSON_Delete(rr[i].polls);
    }
}

/* The same windows as the harness's watch saw them: from the moment a pod
 * failure was sent to its pod terminating and to a pod of that name added
 * again. These include what the operator's histogram leaves out: the API
 * server applying the event, the watch delivering it to the operator,
 * decoding, the client's queue, the write at the server and the watch
 * back to the harness. */
static void harness_table(bx_ctx *x, const rate_result *rr, int done, int n)
{
    int real = x->kubeconfig != NULL;
    bx_table *t = bx_table_new("Churn seen from the harness's own watch: pod failure sent → action seen", 9,
                               "events/s sent", "achieved", "pod failures timed (left out)",
                               real ? "delete (the harness's own)" : "→ delete p50 / p99 / max",
                               "deletes unseen", "→ replacement p50 / p99 / max", "replacements unseen",
                               "operator's p99", "harness p99 / operator p99");
    for (int i = 0; i < done; i++) {
        const rate_result *r = &rr[i];
        char a[24], b[32], c[48], d[80], e[24], f[80], g[24], h[24], k[24], s1[24], s2[24], s3[24];
        snprintf(a, sizeof(a), "%g", r->rate);
        snprintf(b, sizeof(b), isfinite(r->achieved) ? "%.1f/s" : "n/a", r->achieved);
        snprintf(c, sizeof(c), "%ld (%ld)", r->pod_events - r->pod_excluded, r->pod_excluded);
        double d99 = quantile(r->e2e_del, r->n_del, 0.99), a99 = quantile(r->e2e_add, r->n_add, 0.99);
        if (real)
            snprintf(d, sizeof(d), "n/a");
        else
            snprintf(
                d, sizeof(d), "%s / %s / %s", bx_fmt_s(s1, sizeof(s1), quantile(r->e2e_del, r->n_del, 0.5)),
                bx_fmt_s(s2, sizeof(s2), d99), bx_fmt_s(s3, sizeof(s3), quantile(r->e2e_del, r->n_del, 1)));
        snprintf(e, sizeof(e), "%ld", r->del_unseen);
        snprintf(f, sizeof(f), "%s / %s / %s", bx_fmt_s(s1, sizeof(s1), quantile(r->e2e_add, r->n_add, 0.5)),
                 bx_fmt_s(s2, sizeof(s2), a99), bx_fmt_s(s3, sizeof(s3), quantile(r->e2e_add, r->n_add, 1)));
        snprintf(g, sizeof(g), "%ld", r->add_unseen);
        double op99 = bx_hist_quantile(&r->lat, 0.99);
        double mine = real ? a99 : d99;
        snprintf(k, sizeof(k), isfinite(mine) && op99 > 0 ? "%.1f×" : "n/a", mine / op99);
        bx_table_row(t, a, b, c, d, e, f, g, bx_fmt_s(h, sizeof(h), op99), k);
        if (r->rate == 1000 && isfinite(mine)) {
            char mv[96], note[160];
            snprintf(mv, sizeof(mv), "p99 %s at %d pods", bx_fmt_s(s1, sizeof(s1), mine), n);
            snprintf(note, sizeof(note), "%zu failures timed; achieved %.0f events/s of 1,000 sent",
                     real ? r->n_add : r->n_del, r->achieved);
            const char *what = real ? "pod deleted → replacement seen by the harness, p99 ≤ 1 ms at 1,000/s"
                                    : "pod failed → its delete seen by the harness, p99 ≤ 1 ms at 1,000/s";
            bx_target(x, what, mv, "1 ms", mine / 0.001, mine <= 0.001 ? "met" : "missed", note);
        }
        if (r->rate == 100 && isfinite(a99)) {
            char mv[96], note[160];
            snprintf(mv, sizeof(mv), "p99 %s at %d pods", bx_fmt_s(s1, sizeof(s1), a99), n);
            snprintf(note, sizeof(note), "%zu failures timed (half of the events are pod failures)",
                     r->n_add);
            bx_target(x, "pod failed → replacement seen by the harness, p99 ≤ 100 ms at 100 events/s", mv,
                      "100 ms", a99 / 0.1, a99 <= 0.1 ? "met" : "missed", note);
        }
    }
    bx_table_note(t, "achieved: events answered with success per second, from the window's start to the last "
                     "answer (the API server's pace, not the send rate).");
    bx_table_note(t, "A failure sent to a pod the harness saw absent or terminating is left out: the "
                     "earlier failure's action covers it. Quantiles are exact (nearest rank) over every "
                     "timed failure.");
    if (real)
        bx_table_note(t, "On a real cluster the harness deletes the pod itself: only the replacement is the "
                         "operator's action.");
    bx_table_emit(x, t);
}

int scen_churn(bx_ctx *x)
{
    int n = x->sizes[0];
    for (int i = 1; i < x->n_sizes; i++)
        if (x->sizes[i] > n)
            n = x->sizes[i];
    rate_result rr[3], ref[3];
    int done = 0, ref_done = 0, with_slurm = 0, ref_slurm = 0;
    size_t n_nodes = 0, ref_nodes = 0;
    memset(ref, 0, sizeof(ref));
    /* The cost of an event must not grow with the fleet: the same rates on
     * a fleet of CHURN_REF_N first, as the reference of the ratio. */
    int with_ref = n > CHURN_REF_N && !x->quick;
    /* --pin-operator gives the operator a CPU of its own. A control plane
     * the harness started inherited its CPUs; one it reuses (--k8s-dir)
     * runs everywhere, and at 1,000 events/s kube-apiserver's share of the
     * operator's CPU made most of the loop's iterations over 1 ms wait for
     * it (326 of 332 on 1,024 pods). The latency here is the operator's,
     * so the control plane keeps off its CPU for the churn (creates are
     * not timed here, unlike in scale-out, where it keeps both). */
    int moved = x->real_k8s && x->k8s_reuse ? bx_pin_tagged_away(x, x->k8s_dir, 1) : 0;
    if (moved)
        bx_say(x, "bench: churn: the control plane in %s moved off the operator's CPU (%d threads)",
               x->k8s_dir, moved);
    if (with_ref) {
        bx_step(x, "churn: the reference fleet of %d pods", CHURN_REF_N);
        if (churn_fleet(x, CHURN_REF_N, ref, &ref_done, &ref_slurm, &ref_nodes) != 0)
            bx_say(x, "bench: churn: the reference fleet of %d pods failed", CHURN_REF_N);
    }
    int rc = churn_fleet(x, n, rr, &done, &with_slurm, &n_nodes);
    if (moved)
        (void)bx_pin_tagged_away(x, x->k8s_dir, 0);

    bx_table *t = bx_table_new(
        "Churn: event → action latency of the NodeSet controller (operator's histogram)", 14, "events/s",
        "sent (failed)", "actions", "p50", "p90", "p99", "p99 at 1,024 (ratio)", "max ≤", "≤ 1 ms",
        "pod writes: n, p99, ≤ 1 ms", "reconcile p50 / p99", "reconciles (full passes)",
        "queue depth max / mean", "loop busy / CPU, iterations > 1 ms busy / CPU");
    cJSON *out = cJSON_CreateObject();
    cJSON_AddNumberToObject(out, "n", n);
    cJSON_AddBoolToObject(out, "slurm", with_slurm);
    if (with_ref)
        cJSON_AddNumberToObject(out, "referenceN", CHURN_REF_N);
    cJSON *arr = cJSON_AddArrayToObject(out, "rates");
    bx_series lat_s[3], dep_s[3];
    double shares[3][BX_HIST_MAX];
    char names[3][400], names2[3][400];
    int ncat = 0;
    const char *cats[BX_HIST_MAX];
    char catbuf[BX_HIST_MAX][48];
    for (int i = 0; i < done; i++) {
        rate_result *r = &rr[i];
        double p50 = bx_hist_quantile(&r->lat, 0.5), p90 = bx_hist_quantile(&r->lat, 0.9),
               p99 = bx_hist_quantile(&r->lat, 0.99), mx = bx_hist_max_bound(&r->lat),
               f5 = bx_hist_frac_le(&r->lat, 0.001);
        double r50 = bx_hist_quantile(&r->rec, 0.5), r99 = bx_hist_quantile(&r->rec, 0.99);
        double actions = r->lat.n ? r->lat.cum[r->lat.n - 1] : 0;
        char a[24], b[80], cc[24], d[24], e[24], g[24], h[24], k[48], l[24], m[40], rate[16], rr1[24],
            rr2[24];
        snprintf(rate, sizeof(rate), "%g", r->rate);
        if (r->node_skipped)
            snprintf(b, sizeof(b), "%ld (%ld); %ld Node flaps skipped", r->sent, r->failed, r->node_skipped);
        else
            snprintf(b, sizeof(b), "%ld (%ld)", r->sent, r->failed);
        snprintf(a, sizeof(a), "%.0f", actions);
        snprintf(h, sizeof(h), isfinite(f5) ? "%.1f %%" : "n/a", f5 * 100);
        snprintf(k, sizeof(k), "%s / %s", bx_fmt_s(rr1, sizeof(rr1), r50), bx_fmt_s(rr2, sizeof(rr2), r99));
        if (isfinite(r->full))
            snprintf(l, sizeof(l), "%.0f (%.0f)", r->reconciles, r->full);
        else
            snprintf(l, sizeof(l), "%.0f", r->reconciles);
        snprintf(m, sizeof(m), "%.0f / %.2f", r->max_depth, r->mean_depth);
        /* The loop's own view: the share of the window it was busy and of
         * it the CPU its thread got, and how many iterations kept it busy
         * over 1 ms (every event that came then waited) by wall time and by
         * CPU time: the difference is time spent waiting for a core. */
        double it_all = r->loop.n ? r->loop.cum[r->loop.n - 1] : 0;
        double it_long = r->loop.n ? it_all - bx_hist_frac_le(&r->loop, 0.001) * it_all : NAN;
        double ic_all = r->lcpu.n ? r->lcpu.cum[r->lcpu.n - 1] : 0;
        double ic_long = r->lcpu.n ? ic_all - bx_hist_frac_le(&r->lcpu, 0.001) * ic_all : NAN;
        char lp[64];
        if (r->loop.n && r->lcpu.n)
            snprintf(lp, sizeof(lp), "%.1f %% / %.1f %%, %.0f / %.0f", r->loop_busy / r->seconds * 100,
                     r->loop_cpu / r->seconds * 100, it_long, ic_long);
        else
            snprintf(lp, sizeof(lp), "n/a");
        /* The reference fleet's p99 at the same rate (when it ran). */
        double ref99 = i < ref_done ? bx_hist_quantile(&ref[i].lat, 0.99) : NAN;
        double ratio = isfinite(ref99) && ref99 > 0 ? p99 / ref99 : NAN;
        char rf[48], rf1[24];
        if (isfinite(ratio))
            snprintf(rf, sizeof(rf), "%s (%.2f×)", bx_fmt_s(rf1, sizeof(rf1), ref99), ratio);
        else
            snprintf(rf, sizeof(rf), "n/a");
        /* pod creates and deletes alone: a replacement's latency, apart
         * from the status writes (which wait for the one in flight) */
        double pw_n = r->podw.n ? r->podw.cum[r->podw.n - 1] : 0, pw99 = bx_hist_quantile(&r->podw, 0.99),
               pw1 = bx_hist_frac_le(&r->podw, 0.001);
        char pw[64], pw1s[24];
        if (r->podw.n)
            snprintf(pw, sizeof(pw), "%.0f, %s, %.1f %%", pw_n, bx_fmt_s(pw1s, sizeof(pw1s), pw99),
                     pw1 * 100);
        else
            snprintf(pw, sizeof(pw), "n/a");
        bx_table_row(t, rate, b, a, bx_fmt_s(cc, sizeof(cc), p50), bx_fmt_s(d, sizeof(d), p90),
                     bx_fmt_s(e, sizeof(e), p99), rf, bx_fmt_s(g, sizeof(g), mx), h, pw, k, l, m, lp);
        cJSON *j = cJSON_CreateObject();
        cJSON_AddNumberToObject(j, "eventsPerSecond", r->rate);
        cJSON_AddNumberToObject(j, "seconds", r->seconds);
        cJSON_AddNumberToObject(j, "sent", (double)r->sent);
        cJSON_AddNumberToObject(j, "failed", (double)r->failed);
        cJSON_AddNumberToObject(j, "nodeEventsSkipped", (double)r->node_skipped);
        cJSON_AddNumberToObject(j, "actions", actions);
        cJSON_AddItemToObject(j, "p50", bx_num(p50));
        cJSON_AddItemToObject(j, "p90", bx_num(p90));
        cJSON_AddItemToObject(j, "p99", bx_num(p99));
        cJSON_AddItemToObject(j, "referenceP99", bx_num(ref99));
        cJSON_AddItemToObject(j, "p99RatioToReference", bx_num(ratio));
        cJSON_AddItemToObject(j, "maxAtMost", bx_num(mx));
        cJSON_AddItemToObject(j, "shareWithin1ms", bx_num(f5));
        cJSON_AddItemToObject(j, "podWrites", bx_num(r->podw.n ? pw_n : NAN));
        cJSON_AddItemToObject(j, "podWriteP50", bx_num(bx_hist_quantile(&r->podw, 0.5)));
        cJSON_AddItemToObject(j, "podWriteP99", bx_num(pw99));
        cJSON_AddItemToObject(j, "podWriteShareWithin1ms", bx_num(pw1));
        cJSON_AddItemToObject(j, "reconcileP50", bx_num(r50));
        cJSON_AddItemToObject(j, "reconcileP99", bx_num(r99));
        cJSON_AddNumberToObject(j, "reconciles", r->reconciles);
        cJSON_AddItemToObject(j, "fullPasses", bx_num(r->full));
        cJSON_AddItemToObject(j, "incrementalPasses", bx_num(r->incr));
        cJSON_AddItemToObject(j, "kubernetesSharePasses", bx_num(r->share));
        cJSON_AddBoolToObject(j, "slurmOutage", r->outage);
        cJSON_AddNumberToObject(j, "apiLatencyMs", x->churn_latency_ms);
        if (r->full_why) {
            cJSON_AddItemToObject(j, "fullPassReasons", r->full_why);
            r->full_why = NULL;
        }
        if (r->polls && r->polls->child) {
            cJSON_AddItemToObject(j, "slurmNodePolls", r->polls);
            r->polls = NULL;
        }
        cJSON *hj = cJSON_AddObjectToObject(j, "harness");
        cJSON_AddItemToObject(hj, "achievedEventsPerSecond", bx_num(r->achieved));
        cJSON_AddNumberToObject(hj, "podFailures", (double)r->pod_events);
        cJSON_AddNumberToObject(hj, "podFailuresLeftOut", (double)r->pod_excluded);
        cJSON_AddNumberToObject(hj, "deletesSeen", (double)r->n_del);
        cJSON_AddNumberToObject(hj, "deletesUnseen", (double)r->del_unseen);
        cJSON_AddItemToObject(hj, "failedToDeleteP50", bx_num(quantile(r->e2e_del, r->n_del, 0.5)));
        cJSON_AddItemToObject(hj, "failedToDeleteP99", bx_num(quantile(r->e2e_del, r->n_del, 0.99)));
        cJSON_AddItemToObject(hj, "failedToDeleteMax", bx_num(quantile(r->e2e_del, r->n_del, 1)));
        cJSON_AddNumberToObject(hj, "replacementsSeen", (double)r->n_add);
        cJSON_AddNumberToObject(hj, "replacementsUnseen", (double)r->add_unseen);
        cJSON_AddItemToObject(hj, "failedToReplacementP50", bx_num(quantile(r->e2e_add, r->n_add, 0.5)));
        cJSON_AddItemToObject(hj, "failedToReplacementP99", bx_num(quantile(r->e2e_add, r->n_add, 0.99)));
        cJSON_AddItemToObject(hj, "failedToReplacementMax", bx_num(quantile(r->e2e_add, r->n_add, 1)));
        cJSON_AddNumberToObject(j, "workqueueAdds", r->adds);
        cJSON_AddItemToObject(j, "maxQueueDepth", bx_num(r->max_depth));
        cJSON_AddItemToObject(j, "loopBusySeconds", bx_num(r->loop_busy));
        cJSON_AddItemToObject(j, "loopIterations", bx_num(r->loop.n ? it_all : NAN));
        cJSON_AddItemToObject(j, "loopIterationsOver1ms", bx_num(it_long));
        cJSON_AddItemToObject(j, "loopLongestAtMost", bx_num(r->loop.n ? bx_hist_max_bound(&r->loop) : NAN));
        cJSON_AddItemToObject(j, "loopCpuSeconds", bx_num(r->loop_cpu));
        cJSON_AddItemToObject(j, "loopIterationsOver1msCpu", bx_num(ic_long));
        cJSON_AddItemToObject(j, "meanQueueDepth", bx_num(r->mean_depth));
        cJSON *bk = cJSON_AddArrayToObject(j, "buckets");
        for (int k2 = 0; k2 < r->lat.n; k2++) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddItemToObject(o, "le",
                                  isinf(r->lat.le[k2]) ? cJSON_CreateString("+Inf")
                                                       : cJSON_CreateNumber(r->lat.le[k2]));
            cJSON_AddNumberToObject(o, "count", r->lat.cum[k2]);
            cJSON_AddItemToArray(bk, o);
        }
        cJSON *dp = cJSON_AddArrayToObject(j, "queueDepth");
        for (size_t s = 0; s < r->sn; s++) {
            cJSON *pt = cJSON_CreateArray();
            cJSON_AddItemToArray(pt, cJSON_CreateNumber(round(r->st[s] * 1000) / 1000));
            cJSON_AddItemToArray(pt, cJSON_CreateNumber(r->sd[s]));
            cJSON_AddItemToArray(dp, pt);
        }
        cJSON_AddItemToArray(arr, j);
        /* plots: share of actions per bucket; queue depth over time */
        if (r->lat.n > ncat)
            ncat = r->lat.n;
        for (int k2 = 0; k2 < r->lat.n; k2++) {
            double below = k2 ? r->lat.cum[k2 - 1] : 0;
            shares[i][k2] = actions > 0 ? (r->lat.cum[k2] - below) / actions * 100 : 0;
        }
        snprintf(names[i], sizeof(names[i]), "%g events/s (%.0f actions)", r->rate, actions);
        lat_s[i] = (bx_series){names[i], NULL, shares[i], (size_t)r->lat.n, 0};
        snprintf(names2[i], sizeof(names2[i]), "%g events/s", r->rate);
        dep_s[i] = (bx_series){names2[i], r->st, r->sd, r->sn, 1};
        if (r->rate == 100 || r->rate == 1000) {
            char mv[96], note[160], what[96];
            snprintf(mv, sizeof(mv), "p99 %s; %.1f %% ≤ 1 ms", bx_fmt_s(cc, sizeof(cc), p99), f5 * 100);
            snprintf(note, sizeof(note), "%.0f actions; max ≤ %s", actions, bx_fmt_s(d, sizeof(d), mx));
            snprintf(what, sizeof(what), "event → action p99 ≤ 1 ms at %s events/s",
                     r->rate == 100 ? "100" : "1,000");
            bx_target(x, what, mv, "1 ms", p99 / 0.001, isfinite(f5) && f5 >= 0.99 ? "met" : "missed", note);
            if (isfinite(ratio)) {
                char lim[48];
                snprintf(mv, sizeof(mv), "p99 %s at %d pods", bx_fmt_s(cc, sizeof(cc), p99), n);
                snprintf(lim, sizeof(lim), "1.5 × %s", bx_fmt_s(rf1, sizeof(rf1), ref99));
                snprintf(what, sizeof(what), "event → action p99 within 1.5× of %d pods' at %s events/s",
                         CHURN_REF_N, r->rate == 100 ? "100" : "1,000");
                snprintf(note, sizeof(note), "%.0f and %.0f actions", actions,
                         ref[i].lat.n ? ref[i].lat.cum[ref[i].lat.n - 1] : 0);
                bx_target(x, what, mv, lim, ratio, ratio <= 1.5 ? "met" : "missed", note);
            }
        }
    }
    /* bucket categories: up to the highest non-empty bucket of any rate */
    int top = 0;
    for (int i = 0; i < done; i++)
        for (int k2 = 0; k2 < rr[i].lat.n; k2++)
            if (shares[i][k2] > 0 && k2 + 1 > top)
                top = k2 + 1;
    if (top < ncat)
        ncat = top + 1 < ncat ? top + 1 : ncat;
    for (int k2 = 0; k2 < ncat && done; k2++) {
        double lo = k2 ? rr[0].lat.le[k2 - 1] : 0;
        cats[k2] = bucket_label(catbuf[k2], sizeof(catbuf[k2]), lo, rr[0].lat.le[k2]);
    }
    if (done) {
        char *p = bx_out_path(x, "churn-latency.svg");
        char title[96];
        snprintf(title, sizeof(title),
                 "Event → action latency, NodeSet of %d pods (share of actions per bucket)", n);
        if (bx_svg_bars(p, title, "% of actions", cats, (size_t)ncat, lat_s, (size_t)done) != 0)
            bx_say(x, "bench: cannot write %s", p);
        free(p);
        p = bx_out_path(x, "churn-queue-depth.svg");
        if (bx_svg_lines(p, "NodeSet queue depth during churn (sampled every 100 ms)", "seconds",
                         "keys queued", dep_s, (size_t)done) != 0)
            bx_say(x, "bench: cannot write %s", p);
        free(p);
    }
    bx_table_note(t,
                  "%d pods on %d Nodes; half the events fail a pod, half cordon or uncordon a Node. actions: "
                  "reconciles that wrote (the histogram's count);",
                  n, (int)n_nodes);
    if (with_slurm)
        bx_table_note(
            t,
            "With Slurm (--churn-slurm): the Controller has a RestApi reading a Slurm lab of %d nodes "
            "named like the pods (no slurmds: UNKNOWN), so passes also run the Slurm side; a cordon "
            "drains the pod's Slurm node.",
            n);
    if (x->kubeconfig)
        bx_table_note(
            t,
            "On a real cluster a pod \"fails\" by being deleted at once (DELETE with grace 0; kwok, "
            "which deletes terminating pods by name, is set to leave those alone: tests/k8s/cluster.sh) "
            "and a Node flap is a PATCH of spec.unschedulable, one Node PATCH in flight at a time "
            "(flaps due meanwhile are skipped and counted).%s",
            moved ? " The reused control plane ran off the operator's CPU during the churn." : "");
    if (with_ref)
        bx_table_note(t,
                      "p99 at 1,024: the same rates on a fleet of %d pods (%s%s), run first; ratio: "
                      "this fleet's p99 over it.",
                      CHURN_REF_N, x->kubeconfig ? "on the same control plane" : "its own kubesim",
                      ref_slurm ? " and Slurm lab" : "");
    if (x->churn_latency_ms > 0 && !x->kubeconfig)
        bx_table_note(
            t,
            "--churn-latency-ms %d: during each window kubesim answered every non-watch request %d ms "
            "late.",
            x->churn_latency_ms, x->churn_latency_ms);
    /* A failed node poll leaves the Slurm side unknown until one succeeds:
     * full passes (reason slurm-busy) then run once per gap, and events in
     * between take Kubernetes-share steps. A stall of the lab's slurmctld
     * shows as such a window, and so does --churn-outage. */
    for (int i = 0; i < done || i < ref_done; i++) {
        const rate_result *w[2] = {i < done ? &rr[i] : NULL, i < ref_done ? &ref[i] : NULL};
        for (int k = 0; k < 2; k++) {
            if (w[k] && w[k]->outage)
                bx_table_note(
                    t,
                    "At %g events/s on the %d-pod fleet, the lab's slurmrestd was killed 0.5 s into the "
                    "window (--churn-outage).",
                    w[k]->rate, k ? CHURN_REF_N : n);
            if (w[k] && w[k]->poll_errors > 0) {
                char sh[64] = "";
                if (isfinite(w[k]->share))
                    snprintf(sh, sizeof(sh), "; %.0f Kubernetes-share steps", w[k]->share);
                bx_table_note(
                    t,
                    "At %g events/s on the %d-pod fleet, %.0f Slurm node poll(s) failed or were held: "
                    "the Slurm side read unknown until the next one answered, and meanwhile full "
                    "passes (reason slurm-busy) waited for their gap while events took the Kubernetes "
                    "share of an incremental step (%.0f full passes%s).",
                    w[k]->rate, k ? CHURN_REF_N : n, w[k]->poll_errors, w[k]->full, sh);
            }
        }
    }
    bx_table_note(
        t, "percentiles interpolated inside the histogram's buckets (0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, "
           "0.5, 0.75, 1, 2.5, 5 ms ...); "
           "max ≤: upper bound of the highest non-empty bucket; ≤ 1 ms: exact share.");
    bx_table_emit(x, t);
    harness_table(x, rr, done, n);
    cJSON_AddItemToObject(x->results, "churn", out);
    rates_free(rr);
    rates_free(ref);
    return rc == 0 && done == 3 ? 0 : OP_EIO;
}
