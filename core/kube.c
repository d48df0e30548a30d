#include "core/kube.h"

#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/json.h"
#include "core/list.h"
#include "core/log.h"
#include "core/loopstat.h"
#include "core/mem.h"
#include "core/ndjson.h"
#include "core/thread.h"

#define RES(var, g, v, p, k, nsd) const kube_res var = {g, v, p, k, nsd}
RES(KUBE_PODS, "", "v1", "pods", "Pod", 1);
RES(KUBE_NODES, "", "v1", "nodes", "Node", 0);
RES(KUBE_NAMESPACES, "", "v1", "namespaces", "Namespace", 0);
RES(KUBE_SERVICES, "", "v1", "services", "Service", 1);
RES(KUBE_CONFIGMAPS, "", "v1", "configmaps", "ConfigMap", 1);
RES(KUBE_SECRETS, "", "v1", "secrets", "Secret", 1);
RES(KUBE_PVCS, "", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", 1);
RES(KUBE_EVENTS, "", "v1", "events", "Event", 1);
RES(KUBE_EVENTS_V1, "events.k8s.io", "v1", "events", "Event", 1);
RES(KUBE_STATEFULSETS, "apps", "v1", "statefulsets", "StatefulSet", 1);
RES(KUBE_DEPLOYMENTS, "apps", "v1", "deployments", "Deployment", 1);
RES(KUBE_CONTROLLERREVISIONS, "apps", "v1", "controllerrevisions", "ControllerRevision", 1);
RES(KUBE_PDBS, "policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", 1);
RES(KUBE_LEASES, "coordination.k8s.io", "v1", "leases", "Lease", 1);
RES(KUBE_CRDS, "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", 0);
RES(KUBE_MUTATINGWEBHOOKS, "admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations",
    "MutatingWebhookConfiguration", 0);
RES(KUBE_SERVICEMONITORS, "monitoring.coreos.com", "v1", "servicemonitors", "ServiceMonitor", 1);

#define MAX_ERROR_BODY (64 * 1024)
#define KUBE_OFFLOAD_BYTES (256 * 1024)
#define READ_RETRIES 3

enum req_state { RS_DELAYED, RS_IN_FLIGHT, RS_FINISHING };

struct kube_request {
    list_node link; /* in c->delayed (RS_DELAYED), c->inflight (RS_IN_FLIGHT with an hc
                       request) or c->finishing (RS_FINISHING) */
    kube_client *c;
    enum req_state state;
    char *method;
    char *verb; /* metrics verb: LIST/WATCH differ from GET */
    const char *plural;
    char *path;
    const char *content_type;
    char *body;
    size_t body_len;
    uint64_t ready_at; /* uv_now() ms when it may start */
    uint64_t started_ns;
    int attempts;
    int retried_401;
    int canceled;
    int is_write;         /* anything but GET: subject to the write fence */
    kube_req_opts ro;     /* per-request options */
    uint64_t deadline_ms; /* uv_now() by which the whole call (retries included) ends; 0 = none */
    hc_req *hreq;
    kube_cb cb;
    void *data;
    /* final result, delivered from the finishing list */
    int err;
    kube_status st;
    /* watch */
    int is_watch;
    int no_answer; /* kube_req_opts.no_answer */
    kube_watch_event_cb on_event;
    kube_watch_done_cb on_wdone;
    int http_status;
    int events_seen;
    int watch_err; /* set by an ERROR event */
    size_t max_event;
    unsigned idle_ms; /* watch: no byte for this long means a dead stream */
    /* large answers are parsed on the threadpool */
    uv_work_t work;
    char *raw;
    size_t raw_len;
    cJSON *parsed;
    json_arena *arena; /* answers and events are parsed into it */
    ndjson lines;
    buf_t errbody;
    /* watch pacing (see "watch pacing" below) */
    list_node plink; /* in c->paused while paused */
    int paused;      /* its connection is paused; bytes read meanwhile are in held */
    int yield;       /* the budget ran out during the current feed */
    buf_t held;      /* read but not yet dispatched, from held_off */
    size_t held_off;
};

struct kube_client {
    uv_loop_t *loop;
    hc_pool *pool;
    kube_client_opts opts;
    char *user_agent;
    uv_timer_t timer;
    list_node delayed;   /* requests waiting for the limiter or a retry */
    list_node finishing; /* requests whose callback must run on the next tick */
    list_node inflight;  /* requests handed to the HTTP pool */
    int outstanding;     /* requests not yet finished */
    int watches_open;    /* of which watches */
    int fenced;          /* kube_client_fence was called: writes are refused */
    int unreachable;     /* an exchange got no answer (refused, reset, timed out) or 503, and none has
                            succeeded since */
    list_node reach_hooks; /* kube_reach_hook: told when the server answers again */
    double tokens;
    uint64_t tokens_at_ns;
    int closing;
    int pool_closed;
    int timer_closed;
    /* watch pacing */
    uv_prepare_t turn;      /* resets the budget, continues paused watches */
    uv_idle_t awake;        /* active while a watch is paused: the loop must not block in poll, since no
                               I/O will come for the bytes a paused watch holds */
    int turn_active;
    int turn_closed;
    int awake_closed;
    list_node paused;       /* watches waiting for the next loop iteration */
    uint64_t budget_ns;     /* event dispatch per loop iteration, at least */
    uint64_t turn_budget_ns; /* ... this iteration's: the rest of the loop's share ("watch pacing") */
    uint64_t turn_used_ns;  /* spent since the last prepare */
    uint64_t turn_mark_ns;
    uint64_t turn_end_ns; /* the loop thread's CPU time when the last prepare's dispatching ended, 0: none */
    uint64_t turn_end_used_ns; /* turn_used_ns then */
    void (*on_closed)(void *);
    void *closed_data;
    kube_stats stats;
};

/* ------------------------------------------------------------------ */

const char *kube_api_version(const kube_res *res, char *buf, size_t len)
{
    if (*res->group)
        snprintf(buf, len, "%s/%s", res->group, res->version);
    else
        snprintf(buf, len, "%s", res->version);
    return buf;
}

int kube_query_escape(buf_t *b, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    int rc = 0;
    for (; *s && rc == 0; s++) {
        unsigned char ch = (unsigned char)*s;
        if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '-' ||
            ch == '_' || ch == '.' || ch == '~')
            rc = buf_putc(b, (char)ch);
        else {
            char e[4] = {'%', hex[ch >> 4], hex[ch & 15], 0};
            rc = buf_puts(b, e);
        }
    }
    return rc;
}

int kube_path(buf_t *b, const kube_res *res, const char *ns, const char *name, const char *sub,
              const char *query)
{
    int rc;
    if (*res->group)
        rc = buf_printf(b, "/apis/%s/%s", res->group, res->version);
    else
        rc = buf_printf(b, "/api/%s", res->version);
    if (rc == 0 && res->namespaced && ns && *ns)
        rc = buf_printf(b, "/namespaces/%s", ns);
    if (rc == 0)
        rc = buf_printf(b, "/%s", res->plural);
    if (rc == 0 && name)
        rc = buf_printf(b, "/%s", name);
    if (rc == 0 && name && sub)
        rc = buf_printf(b, "/%s", sub);
    if (rc == 0 && query && *query)
        rc = buf_printf(b, "?%s", query);
    return rc;
}

int kube_err_from_http(int http, const char *reason)
{
    if (http >= 200 && http < 300)
        return 0;
    switch (http) {
    case 400: return OP_EINVAL;
    case 401: return OP_EUNAUTHORIZED;
    case 403: return OP_EFORBIDDEN;
    case 404: return OP_ENOTFOUND;
    case 405:
    case 406:
    case 415: return OP_ENOTSUP;
    case 409: return reason && strcmp(reason, "AlreadyExists") == 0 ? OP_EEXISTS : OP_ECONFLICT;
    case 410: return OP_EGONE;
    case 413: return OP_ETOOBIG;
    case 422: return OP_EINVALID;
    case 429: return OP_ERATELIMIT;
    case 503: return OP_EUNAVAILABLE;
    case 504: return OP_ETIMEOUT;
    default: return http >= 500 ? OP_ESERVER : OP_EHTTP;
    }
}

void kube_status_decode(kube_status *st, int http, const char *body, size_t len)
{
    memset(st, 0, sizeof(*st));
    st->http = http;
    cJSON *o = (body && len) ? json_parse(body, len, NULL) : NULL;
    if (o && strcmp(json_get_str_or(o, "kind", ""), "Status") == 0) {
        snprintf(st->reason, sizeof(st->reason), "%s", json_get_str_or(o, "reason", ""));
        snprintf(st->message, sizeof(st->message), "%s", json_get_str_or(o, "message", ""));
        st->retry_after = (int)json_get_int(o, "details.retryAfterSeconds", 0);
        if (http == 0)
            st->http = (int)json_get_int(o, "code", 0);
    } else if (body && len) {
        /* Plain text (APF 429, unknown-path 404, proxies): keep the first line. */
        size_t n = strcspn(body, "\r\n");
        if (n > len)
            n = len;
        snprintf(st->message, sizeof(st->message), "%.*s", (int)n, body);
    }
    cJSON_Delete(o);
}

/* ------------------------------------------------------------------ */
/* Scheduling: a single timer serves the limiter, retries and deferred
 * completions. */

static void on_timer(uv_timer_t *t);

static void kick(kube_client *c, uint64_t delay_ms)
{
    if (c->timer_closed)
        return;
    uint64_t due = uv_timer_get_due_in(&c->timer);
    if (!uv_is_active((uv_handle_t *)&c->timer) || delay_ms < due)
        uv_timer_start(&c->timer, on_timer, delay_ms, 0);
}

static void start_request(kube_request *r);

static void req_free(kube_request *r)
{
    ndjson_free(&r->lines);
    json_arena_free(r->arena);
    buf_free(&r->errbody);
    buf_free(&r->held);
    free(r->method);
    free(r->verb);
    free(r->path);
    free(r->body);
    free(r);
}

static void maybe_closed(kube_client *c)
{
    if (!c->closing || !c->pool_closed || !c->timer_closed || !c->turn_closed || !c->awake_closed ||
        c->outstanding > 0)
        return;
    assert(c->outstanding == 0 && c->watches_open == 0);
    assert(list_empty(&c->delayed) && list_empty(&c->finishing) && list_empty(&c->inflight) &&
           list_empty(&c->paused));
    void (*cb)(void *) = c->on_closed;
    void *data = c->closed_data;
    free(c->user_agent);
    free(c);
    if (cb)
        cb(data);
}

static void deliver(kube_request *r);

/* Queue the final callback for the next tick (completions are asynchronous). */
static void finish(kube_request *r, int err, const kube_status *st)
{
    kube_client *c = r->c;
    /* Every call completes exactly once (kube.h), and not while its HTTP
     * request is still out. */
    assert(r->state != RS_FINISHING && r->hreq == NULL);
    if (list_is_linked(&r->link))
        list_remove(&r->link);
    r->state = RS_FINISHING;
    r->err = err;
    if (st)
        r->st = *st;
    else
        memset(&r->st, 0, sizeof(r->st));
    if (c->timer_closed) {
        /* Closing: the deferral timer is gone, and we are inside an
         * asynchronous completion already, so deliver now. */
        deliver(r);
        maybe_closed(c);
        return;
    }
    list_insert_tail(&c->finishing, &r->link);
    kick(c, 0);
}

static void deliver(kube_request *r)
{
    kube_client *c = r->c;
    assert(r->state == RS_FINISHING && c->outstanding > 0);
    assert(!r->is_watch || c->watches_open > 0);
    if (list_is_linked(&r->link))
        list_remove(&r->link);
    if (r->is_watch) {
        c->watches_open--;
        if (r->on_wdone)
            r->on_wdone(r->err, &r->st, r->events_seen, r->data);
    } else if (r->cb) {
        r->cb(r->err, NULL, &r->st, r->data);
    }
    req_free(r);
    c->outstanding--;
}

/* Token bucket with reservations (client-go / golang.org/x/time/rate):
 * tokens refill continuously up to burst; taking one may drive the count
 * negative, and the request then waits until it is paid back. */
static uint64_t limiter_reserve(kube_client *c)
{
    if (c->opts.qps <= 0)
        return 0;
    uint64_t now = uv_hrtime();
    double elapsed = (double)(now - c->tokens_at_ns) / 1e9;
    c->tokens_at_ns = now;
    c->tokens += elapsed * c->opts.qps;
    if (c->tokens > c->opts.burst)
        c->tokens = c->opts.burst;
    c->tokens -= 1.0;
    if (c->tokens >= 0)
        return 0;
    return (uint64_t)ceil((-c->tokens / c->opts.qps) * 1000.0);
}

static void schedule(kube_request *r, uint64_t delay_ms)
{
    kube_client *c = r->c;
    assert(r->state != RS_FINISHING && r->hreq == NULL && !list_is_linked(&r->link));
    r->state = RS_DELAYED;
    r->ready_at = uv_now(c->loop) + delay_ms;
    list_insert_tail(&c->delayed, &r->link);
    kick(c, delay_ms);
}

static void on_timer(uv_timer_t *t)
{
    kube_client *c = container_of(t, kube_client, timer);
    list_node *pos, *tmp;
    uint64_t now = uv_now(c->loop), next = UINT64_MAX;

    /* Deferred completions first; a callback may submit new requests. */
    list_node done;
    list_init(&done);
    list_splice_tail(&done, &c->finishing);
    while (!list_empty(&done)) {
        kube_request *r = list_entry(done.next, kube_request, link);
        deliver(r);
    }
    list_foreach_safe(pos, tmp, &c->delayed)
    {
        kube_request *r = list_entry(pos, kube_request, link);
        assert(r->state == RS_DELAYED);
        if (r->ready_at <= now) {
            list_remove(pos);
            start_request(r);
        } else if (r->ready_at - now < next) {
            next = r->ready_at - now;
        }
    }
    if (next != UINT64_MAX)
        kick(c, next);
    if (!list_empty(&c->finishing))
        kick(c, 0);
    maybe_closed(c);
}

/* ------------------------------------------------------------------ */
/* HTTP exchange */

static int is_idempotent_read(const kube_request *r)
{
    return !r->is_watch && strcmp(r->method, "GET") == 0;
}

static void observe(kube_request *r, int code)
{
    kube_client *c = r->c;
    if (c->opts.observe)
        c->opts.observe(c->opts.observe_data, r->verb, r->plural, code,
                        (double)(uv_hrtime() - r->started_ns) / 1e9);
}

/* Decide whether a failed attempt is retried; returns 1 when rescheduled. */
static int maybe_retry(kube_request *r, int err, const kube_status *st, const char *retry_after_hdr)
{
    kube_client *c = r->c;
    if (r->canceled || c->closing)
        return 0;
    if (r->is_write && c->fenced)
        return 0; /* a retry would be a new write after the fence */
    if (r->deadline_ms && uv_now(c->loop) >= r->deadline_ms)
        return 0;
    if (st->http == 401 && !r->retried_401 && c->opts.token_invalidate) {
        r->retried_401 = 1;
        c->opts.token_invalidate(c->opts.token_data);
        c->stats.retries++;
        schedule(r, 0);
        return 1;
    }
    int ra = st->retry_after;
    if (retry_after_hdr && *retry_after_hdr)
        ra = atoi(retry_after_hdr);
    if ((st->http == 429 || st->http >= 500) && (ra > 0 || (retry_after_hdr && *retry_after_hdr)) &&
        r->attempts <= c->opts.max_retries) {
        if (ra < 1)
            ra = 1;
        if (ra > 60)
            ra = 60;
        if (r->deadline_ms && uv_now(c->loop) + (uint64_t)ra * 1000 >= r->deadline_ms)
            return 0; /* the answer would come too late for the caller's deadline */
        c->stats.retries++;
        log_debug("kube: %s %s answered %d, retrying in %ds (attempt %d)", r->method, r->path, st->http, ra,
                  r->attempts);
        schedule(r, (uint64_t)ra * 1000);
        return 1;
    }
    if (st->http == 0 && is_idempotent_read(r) && r->attempts <= READ_RETRIES) {
        if (r->deadline_ms && uv_now(c->loop) + (100u << r->attempts) >= r->deadline_ms)
            return 0;
        c->stats.retries++;
        schedule(r, 100u << r->attempts);
        return 1;
    }
    (void)err;
    return 0;
}

static int dispatch_line(const char *s, size_t n, void *data)
{
    kube_request *r = data;
    if (r->watch_err)
        return 1;
    /* Events are read and dropped: parse into the watch's arena. */
    json_arena_reset(r->arena);
    cJSON *ev = json_arena_parse(r->arena, s, n, NULL);
    const char *type = json_get_str(ev, "type");
    const cJSON *obj = json_child(ev, "object");
    if (ev == NULL || type == NULL || !cJSON_IsObject(obj)) {
        /* An undecodable event is a failed watch (client-go surfaces it as an ERROR). */
        log_warn("kube: undecodable watch event on %s (%zu bytes)", r->path, n);
        r->watch_err = OP_EPROTO;
        snprintf(r->st.message, sizeof(r->st.message), "undecodable watch event");
        hc_cancel(r->hreq);
        return 1;
    }
    int t = -1;
    if (!strcmp(type, "ADDED"))
        t = KUBE_EV_ADDED;
    else if (!strcmp(type, "MODIFIED"))
        t = KUBE_EV_MODIFIED;
    else if (!strcmp(type, "DELETED"))
        t = KUBE_EV_DELETED;
    else if (!strcmp(type, "BOOKMARK"))
        t = KUBE_EV_BOOKMARK;
    else if (!strcmp(type, "ERROR")) {
        int code = (int)json_get_int(obj, "code", 500);
        const char *reason = json_get_str_or(obj, "reason", "");
        r->st.http = code;
        snprintf(r->st.reason, sizeof(r->st.reason), "%s", reason);
        snprintf(r->st.message, sizeof(r->st.message), "%s", json_get_str_or(obj, "message", ""));
        r->watch_err = (code == 410 || !strcmp(reason, "Expired") || !strcmp(reason, "Gone"))
                           ? OP_EGONE
                           : kube_err_from_http(code, reason);
        if (r->watch_err == 0)
            r->watch_err = OP_ESERVER;
        hc_cancel(r->hreq);
        return 1;
    }
    if (t >= 0) {
        r->events_seen++;
        if (r->on_event && !r->canceled)
            r->on_event(t, obj, r->data);
    }
    json_arena_reset(r->arena);
    return 0;
}

/* ---- watch pacing ----
 * After a busy moment a watch stream holds hundreds of events, each a few
 * KB to decrypt and parse. Handed over in one go, the first of them waits
 * for all the others: the work queues run from idle callbacks, between
 * loop iterations, so its reconcile (and the write it leads to) starts only
 * once the whole burst is parsed (5-30 ms at 8,192 pods). So the client
 * dispatches watch events for at most budget_ns per loop iteration, over
 * all its watches. A watch that finds the budget spent pauses its
 * connection (hc_pause), keeps what it read in held, and goes on from the
 * client's uv_prepare, which runs after the idle callbacks: the queued
 * keys are handled first. The budget is budget_ns or, when the rest of the
 * loop took over 1 ms of CPU since the last turn (full NodeSet passes over thousands
 * of pods, a relist's diff), as much time as the rest took, up to
 * KUBE_TURN_MAX_NS: a fixed 30 us against 10-20 ms passes let one event
 * through per pass, so events queued up behind passes that each of them
 * caused (on a real API server at 8,192 pods, readyReplicas trailed the
 * Ready pods by about 500), while an equal share lets the events of a
 * pass's time coalesce into the next pass. While a watch is paused an idle handle is kept
 * active, so that the loop polls without blocking: no I/O would wake it for
 * the bytes the watch already holds. Nothing is dropped; events keep their order. A
 * stream that ends cleanly while paused (the server's watch timeout, minutes
 * apart) hands over what it held at once, with its end. */

static void turn_cb(uv_prepare_t *h);

/* The share applies once the rest of an iteration took 1 ms of CPU (a pass
 * over thousands of pods); below, the fixed budget keeps an event's wait in
 * microseconds. It never exceeds 100 ms. */
#define KUBE_SHARE_MIN_NS (1000ull * 1000)
#define KUBE_TURN_MAX_NS (100ull * 1000 * 1000)

static void turn_begin(kube_client *c)
{
    if (!c->turn_active && !c->closing) {
        uv_prepare_start(&c->turn, turn_cb);
        c->turn_active = 1;
    }
    c->turn_mark_ns = uv_hrtime();
}

static void turn_account(kube_client *c)
{
    uint64_t now = uv_hrtime();
    c->turn_used_ns += now - c->turn_mark_ns;
    c->turn_mark_ns = now;
}

static int paced_line(const char *s, size_t n, void *data)
{
    kube_request *r = data;
    if (dispatch_line(s, n, r))
        return 1;
    turn_account(r->c);
    if (r->c->turn_used_ns >= r->c->turn_budget_ns) {
        r->yield = 1;
        return 1;
    }
    return 0;
}

static void awake_cb(uv_idle_t *h)
{
    (void)h; /* its being active is the point: poll does not block */
}

static void watch_pause(kube_request *r)
{
    if (r->paused)
        return;
    assert(r->is_watch && r->hreq != NULL && (r->plink.next == NULL || r->plink.next == &r->plink));
    r->paused = 1;
    hc_pause(r->hreq);
    list_insert_tail(&r->c->paused, &r->plink);
    if (!r->c->closing)
        uv_idle_start(&r->c->awake, awake_cb);
}

static void watch_unpause(kube_request *r)
{
    if (!r->paused)
        return;
    assert(list_is_linked(&r->plink));
    r->paused = 0;
    list_remove(&r->plink);
    if (list_empty(&r->c->paused))
        uv_idle_stop(&r->c->awake);
}

static int watch_hold(kube_request *r, const char *p, size_t n)
{
    if (buf_append(&r->held, p, n) != 0) {
        /* Bounded: after the pause at most one read's worth arrives. */
        log_warn("kube: watch on %s: more than %zu bytes held while paused", r->path, r->max_event);
        r->watch_err = OP_ETOOBIG;
        snprintf(r->st.message, sizeof(r->st.message), "watch backlog larger than %zu bytes", r->max_event);
        hc_cancel(r->hreq);
        return 1;
    }
    return 0;
}

/* Dispatch what the budget allows of p; keep the rest and pause. */
static int watch_feed(kube_request *r, const char *p, size_t n)
{
    kube_client *c = r->c;
    size_t used = 0;
    turn_begin(c);
    r->yield = 0;
    int rc = ndjson_feed_upto(&r->lines, p, n, paced_line, r, &used);
    turn_account(c);
    if (rc == OP_ECANCELED && r->yield && !r->watch_err) {
        r->yield = 0;
        watch_pause(r);
        return used < n ? watch_hold(r, p + used, n - used) : 0;
    }
    if (rc == OP_ETOOBIG) {
        log_warn("kube: watch event on %s exceeds %zu bytes", r->path, r->max_event);
        r->watch_err = OP_ETOOBIG;
        snprintf(r->st.message, sizeof(r->st.message), "watch event larger than %zu bytes", r->max_event);
    }
    return r->watch_err ? 1 : 0;
}

static void turn_cb(uv_prepare_t *h)
{
    kube_client *c = container_of(h, kube_client, turn);
    /* The rest of the loop's time since the last turn: the time since then
     * minus what watches dispatched meanwhile (from on_data). */
    uint64_t other = 0;
    if (c->turn_end_ns) {
        /* thread CPU time, so that waiting for a core (or poll) counts as nothing */
        uint64_t span = loopstat_thread_cpu_ns() - c->turn_end_ns,
                 ours = c->turn_used_ns - c->turn_end_used_ns;
        other = span > ours ? span - ours : 0;
    }
    c->turn_budget_ns = other >= KUBE_SHARE_MIN_NS && other > c->budget_ns
                            ? (other < KUBE_TURN_MAX_NS ? other : KUBE_TURN_MAX_NS)
                            : c->budget_ns;
    c->turn_used_ns = 0;
    while (!c->closing && !list_empty(&c->paused) && c->turn_used_ns < c->turn_budget_ns) {
        kube_request *r = list_entry(c->paused.next, kube_request, plink);
        if (r->canceled || r->watch_err || !r->hreq) {
            watch_unpause(r); /* its on_done comes */
            continue;
        }
        /* held is kept (its memory too: freeing 64 KB blocks makes glibc
         * consolidate its free lists, a cost that grows with the cache)
         * and consumed from held_off. */
        size_t used = 0;
        turn_begin(c);
        r->yield = 0;
        int rc = ndjson_feed_upto(&r->lines, r->held.data + r->held_off, r->held.len - r->held_off,
                                  paced_line, r, &used);
        turn_account(c);
        if (rc == OP_ECANCELED && r->yield && !r->watch_err) {
            /* Still paused; the others' turn next. */
            r->yield = 0;
            r->held_off += used;
            assert(r->held_off <= r->held.len);
            list_remove(&r->plink);
            list_insert_tail(&c->paused, &r->plink);
            continue;
        }
        buf_reset(&r->held);
        r->held_off = 0;
        watch_unpause(r);
        if (rc == OP_ETOOBIG) {
            log_warn("kube: watch event on %s exceeds %zu bytes", r->path, r->max_event);
            r->watch_err = OP_ETOOBIG;
            snprintf(r->st.message, sizeof(r->st.message), "watch event larger than %zu bytes", r->max_event);
            hc_cancel(r->hreq);
        }
        if (rc == 0)
            hc_resume(r->hreq);
    }
    if (list_empty(&c->paused) && c->turn_used_ns == 0) {
        uv_prepare_stop(&c->turn);
        c->turn_active = 0;
        c->turn_end_ns = 0;
        c->turn_budget_ns = c->budget_ns;
    } else {
        c->turn_end_ns = loopstat_thread_cpu_ns();
        c->turn_end_used_ns = c->turn_used_ns;
    }
}

static void deliver_parsed(kube_request *r, cJSON *obj, int had_body);
static void parse_work(uv_work_t *w);
static void parse_done(uv_work_t *w, int status);

/* Reachability: an exchange that ended without an answer, or with 503
 * (a kube-apiserver starting or shutting down), marks the server as not
 * serving; the next success (2xx, a watch's included) ends that and tells
 * the hooks. A canceled request says nothing about the server; a 429 is a
 * server that serves and asks for less (the hooks would undo backoffs it
 * asked for). */
static void note_unanswered(kube_request *r, int status)
{
    if (!r->canceled && status != OP_ECANCELED)
        r->c->unreachable = 1;
}

static void note_answered(kube_client *c, int http)
{
    if (http == 503)
        c->unreachable = 1;
    if (!c->unreachable || http < 200 || http > 299)
        return;
    c->unreachable = 0;
    c->stats.reached_again++;
    list_node *pos, *tmp;
    list_foreach_safe(pos, tmp, &c->reach_hooks)
    {
        kube_reach_hook *h = list_entry(pos, kube_reach_hook, link);
        h->fn(h);
    }
}

void kube_reach_watch(kube_client *c, kube_reach_hook *h)
{
    if (!list_is_linked(&h->link) && !c->closing)
        list_insert_tail(&c->reach_hooks, &h->link);
}

void kube_reach_unwatch(kube_reach_hook *h)
{
    list_remove(&h->link);
}

static void on_headers(hc_req *hr, const hc_response *resp, void *data)
{
    kube_request *r = data;
    r->http_status = resp->status;
    note_answered(r->c, resp->status);
}

static int on_data(hc_req *hr, const char *p, size_t n, void *data)
{
    kube_request *r = data;
    if (r->http_status != 200) {
        /* An error answer to a watch: keep (a bounded part of) the Status body. */
        if (r->errbody.len < MAX_ERROR_BODY) {
            size_t take = n < MAX_ERROR_BODY - r->errbody.len ? n : MAX_ERROR_BODY - r->errbody.len;
            if (buf_append(&r->errbody, p, take) != 0)
                return 1;
        }
        return 0;
    }
    if (r->paused)
        return watch_hold(r, p, n);
    if (r->c->turn_active && r->c->turn_used_ns >= r->c->turn_budget_ns) {
        watch_pause(r);
        return watch_hold(r, p, n);
    }
    return watch_feed(r, p, n);
}

static void on_done(hc_req *hr, int status, const hc_response *resp, void *data)
{
    kube_request *r = data;
    kube_status st;
    assert(r->hreq == hr && r->state == RS_IN_FLIGHT);
    r->hreq = NULL;
    if (list_is_linked(&r->link))
        list_remove(&r->link); /* from c->inflight */
    memset(&st, 0, sizeof(st));
    watch_unpause(r);

    if (r->is_watch) {
        int err;
        if (r->watch_err) {
            err = r->watch_err;
            st = r->st;
            observe(r, st.http ? st.http : 200);
        } else if (status != 0) {
            err = status;
            st.http = 0;
            snprintf(st.message, sizeof(st.message), "%s", err_str(status));
            observe(r, 0);
            if (!r->http_status)
                note_unanswered(r, status);
        } else if (r->http_status != 200) {
            kube_status_decode(&st, r->http_status, r->errbody.data, r->errbody.len);
            err = kube_err_from_http(r->http_status, st.reason);
            observe(r, r->http_status);
            if (maybe_retry(r, err, &st, hc_header_get(resp, "Retry-After")))
                return;
        } else {
            /* Clean end; what a pause held is dispatched now, and a last
             * event without a trailing newline still counts. */
            if (r->held.len > r->held_off && !r->canceled)
                ndjson_feed(&r->lines, r->held.data + r->held_off, r->held.len - r->held_off, dispatch_line,
                            r);
            buf_reset(&r->held);
            r->held_off = 0;
            ndjson_finish(&r->lines, dispatch_line, r);
            err = r->watch_err;
            st = r->st;
            observe(r, 200);
        }
        if (r->canceled)
            err = OP_ECANCELED;
        finish(r, err, &st);
        return;
    }

    if (status != 0) {
        st.http = 0;
        snprintf(st.message, sizeof(st.message), "%s %s: %s", r->method, r->path, err_str(status));
        observe(r, 0);
        note_unanswered(r, status);
        if (!r->canceled && maybe_retry(r, status, &st, NULL))
            return;
        finish(r, r->canceled ? OP_ECANCELED : status, &st);
        return;
    }
    observe(r, resp->status);
    note_answered(r->c, resp->status);
    if (resp->status >= 200 && resp->status < 300) {
        r->http_status = resp->status;
        if (r->no_answer) {
            /* A pod's answer is ~5 KB of JSON: parsing it cost a create
             * more than building and sending the pod did. */
            deliver_parsed(r, NULL, 0);
            return;
        }
        if (resp->body_len >= KUBE_OFFLOAD_BYTES && !r->c->closing) {
            /* A page of a big LIST (~2.5 MB for 500 pods) takes tens of
             * milliseconds to parse: do it off the loop. */
            r->raw = xmalloc(resp->body_len + 1);
            memcpy(r->raw, resp->body, resp->body_len);
            r->raw[resp->body_len] = '\0';
            r->raw_len = resp->body_len;
            if (uv_queue_work(r->c->loop, &r->work, parse_work, parse_done) == 0) {
                r->c->stats.offloaded++;
                return;
            }
            free(r->raw);
            r->raw = NULL;
        }
        cJSON *obj = resp->body_len ? json_arena_parse(r->arena, resp->body, resp->body_len, NULL) : NULL;
        deliver_parsed(r, obj, resp->body_len != 0);
        return;
    }
    kube_status_decode(&st, resp->status, resp->body, resp->body_len);
    int err = kube_err_from_http(resp->status, st.reason);
    if (st.message[0] == '\0')
        snprintf(st.message, sizeof(st.message), "HTTP %d from %s %s", resp->status, r->method, r->path);
    if (maybe_retry(r, err, &st, hc_header_get(resp, "Retry-After")))
        return;
    finish(r, err, &st);
}

/* The answer of a successful request, parsed (obj NULL with had_body means
 * malformed JSON). Runs from an hc or threadpool completion, i.e.
 * asynchronously with respect to the caller. */
static void deliver_parsed(kube_request *r, cJSON *obj, int had_body)
{
    /* Straight from on_done or the parse offload: out of every list. */
    assert(r->state == RS_IN_FLIGHT && r->hreq == NULL && !list_is_linked(&r->link));
    kube_status st;
    memset(&st, 0, sizeof(st));
    st.http = r->http_status;
    if (had_body && obj == NULL) {
        snprintf(st.message, sizeof(st.message), "malformed JSON in %d answer to %s %s", r->http_status,
                 r->method, r->path);
        finish(r, OP_EPARSE, &st);
        return;
    }
    kube_client *c = r->c;
    if (r->cb && !r->canceled)
        r->cb(0, obj, &st, r->data);
    else if (r->cb)
        r->cb(OP_ECANCELED, NULL, &st, r->data);
    (void)obj; /* lives in r->arena, released with the request */
    req_free(r);
    c->outstanding--;
    maybe_closed(c);
}

static void parse_work(uv_work_t *w)
{
    kube_request *r = container_of(w, kube_request, work);
    thread_background(); /* the loop runs first: core/thread.h */
    r->parsed = json_arena_parse(r->arena, r->raw, r->raw_len, NULL);
}

static void parse_done(uv_work_t *w, int status)
{
    kube_request *r = container_of(w, kube_request, work);
    free(r->raw);
    r->raw = NULL;
    deliver_parsed(r, r->parsed, 1);
}

/* Complete a write refused by the fence (asynchronously, as always). */
static void fence_status_finish(kube_request *r)
{
    kube_status st;
    memset(&st, 0, sizeof(st));
    snprintf(st.message, sizeof(st.message), "%s %s: refused, the client's write fence is closed", r->method,
             r->path);
    r->canceled = 1;
    finish(r, OP_ECANCELED, &st);
}

static void start_request(kube_request *r)
{
    kube_client *c = r->c;
    hc_header hdrs[5];
    size_t nh = 0;
    char *auth = NULL;
    const char *tok = c->opts.token ? c->opts.token(c->opts.token_data) : NULL;

    assert(r->state == RS_DELAYED && r->hreq == NULL && !list_is_linked(&r->link));
    if (r->canceled || c->closing) {
        finish(r, OP_ECANCELED, NULL);
        return;
    }
    if (r->is_write && c->fenced) {
        /* A retry (401, Retry-After) that waited across the fence. */
        c->stats.fenced++;
        fence_status_finish(r);
        return;
    }
    if (tok && strlen(tok) > KUBE_MAX_BEARER_TOKEN) {
        /* Refused, never cut: a truncated token only fails as 401 later,
         * with nothing saying why. */
        kube_status st = {.http = 0};
        snprintf(st.message, sizeof(st.message),
                 "bearer token of %zu bytes is longer than the %d bytes accepted", strlen(tok),
                 KUBE_MAX_BEARER_TOKEN);
        log_error("kube: %s", st.message);
        finish(r, OP_ETOOBIG, &st);
        return;
    }
    r->attempts++;
    r->state = RS_IN_FLIGHT;
    r->started_ns = uv_hrtime();
    hdrs[nh++] = (hc_header){"Accept", "application/json"};
    hdrs[nh++] = (hc_header){"User-Agent", c->user_agent};
    if (tok && *tok) {
        auth = xasprintf("Bearer %s", tok);
        hdrs[nh++] = (hc_header){"Authorization", auth};
    }
    if (r->content_type)
        hdrs[nh++] = (hc_header){"Content-Type", r->content_type};
    hc_req_opts o = {
        .method = r->method,
        .path = r->path,
        .headers = hdrs,
        .n_headers = nh,
        .body = r->body,
        .body_len = r->body_len,
        .on_done = on_done,
        .data = r,
    };
    if (r->is_watch) {
        ndjson_reset(&r->lines);
        buf_reset(&r->errbody);
        r->http_status = 0;
        o.on_headers = on_headers;
        o.on_data = on_data;
        o.idle_timeout_ms = r->idle_ms;
    } else {
        o.request_timeout_ms = c->opts.request_timeout_ms;
        if (r->deadline_ms) {
            uint64_t now = uv_now(c->loop);
            uint64_t left = r->deadline_ms > now ? r->deadline_ms - now : 1;
            if (left < o.request_timeout_ms)
                o.request_timeout_ms = (unsigned)left;
            /* The caller's bound covers the wait for a connection too. */
            o.total_timeout_ms = (unsigned)left;
        }
    }
    o.urgent = r->ro.urgent;
    o.prio = r->ro.prio;
    o.first = r->ro.first;
    c->stats.requests++;
    r->hreq = hc_request(c->pool, &o);
    list_insert_tail(&c->inflight, &r->link);
    if (auth) {
        memset(auth, 0, strlen(auth));
        free(auth);
    }
}

static kube_request *req_new(kube_client *c, const char *method, const char *verb, const kube_res *res,
                             const char *path, const char *ctype, const char *body, size_t len, kube_cb cb,
                             void *data)
{
    kube_request *r = xcalloc(1, sizeof(*r));
    list_init(&r->link);
    r->c = c;
    r->method = xstrdup(method);
    r->verb = xstrdup(verb);
    r->plural = res->plural;
    r->path = xstrdup(path);
    r->content_type = ctype;
    if (body) {
        r->body = xstrndup(body, len);
        r->body_len = len;
    }
    r->cb = cb;
    r->data = data;
    r->is_write = strcmp(method, "GET") != 0;
    ndjson_init(&r->lines, 16u << 20);
    buf_init(&r->errbody, MAX_ERROR_BODY + 1);
    buf_init(&r->held, 16u << 20);
    r->arena = json_arena_new();
    c->outstanding++;
    return r;
}

static kube_request *submit(kube_request *r, const kube_req_opts *ro)
{
    kube_client *c = r->c;
    if (ro)
        r->ro = *ro;
    if (r->ro.timeout_ms)
        r->deadline_ms = uv_now(c->loop) + r->ro.timeout_ms;
    if (c->closing) {
        finish(r, OP_ECANCELED, NULL);
        return r;
    }
    if (r->is_write && c->fenced) {
        c->stats.fenced++;
        fence_status_finish(r);
        return r;
    }
    uint64_t wait_ms = r->ro.unthrottled ? 0 : limiter_reserve(c);
    if (r->ro.prio || r->ro.first)
        wait_ms = 0; /* its token is taken: the requests after it wait the longer */
    c->stats.throttled_ms += wait_ms;
    schedule(r, wait_ms);
    return r;
}

static kube_request *do_simple(kube_client *c, const kube_req_opts *ro, const char *method, const char *verb,
                               const kube_res *res, const char *ns, const char *name, const char *sub,
                               const char *query, const char *ctype, const cJSON *body, kube_cb cb,
                               void *data)
{
    buf_t path;
    buf_init(&path, 8192);
    int rc = kube_path(&path, res, ns, name, sub, query);
    char *b = body ? json_dump(body) : NULL;
    kube_request *r = req_new(c, method, verb, res, buf_cstr(&path), ctype, b, b ? strlen(b) : 0, cb, data);
    free(b);
    buf_free(&path);
    if (rc) {
        kube_status st = {.http = 0};
        snprintf(st.message, sizeof(st.message), "request path too long");
        finish(r, rc, &st);
        return r;
    }
    r->no_answer = ro && ro->no_answer;
    return submit(r, ro);
}

kube_request *kube_get(kube_client *c, const kube_res *res, const char *ns, const char *name, const char *sub,
                       kube_cb cb, void *data)
{
    return do_simple(c, NULL, "GET", "GET", res, ns, name, sub, NULL, NULL, NULL, cb, data);
}

kube_request *kube_get_with(kube_client *c, const kube_req_opts *ro, const kube_res *res, const char *ns,
                            const char *name, kube_cb cb, void *data)
{
    return do_simple(c, ro, "GET", "GET", res, ns, name, NULL, NULL, NULL, NULL, cb, data);
}

kube_request *kube_list(kube_client *c, const kube_res *res, const char *ns, const char *query, kube_cb cb,
                        void *data)
{
    return do_simple(c, NULL, "GET", "LIST", res, ns, NULL, NULL, query, NULL, NULL, cb, data);
}

kube_request *kube_create(kube_client *c, const kube_res *res, const char *ns, const cJSON *obj, kube_cb cb,
                          void *data)
{
    return do_simple(c, NULL, "POST", "POST", res, ns, NULL, NULL, NULL, "application/json", obj, cb, data);
}

kube_request *kube_create_with(kube_client *c, const kube_req_opts *ro, const kube_res *res, const char *ns,
                               const cJSON *obj, kube_cb cb, void *data)
{
    return do_simple(c, ro, "POST", "POST", res, ns, NULL, NULL, NULL, "application/json", obj, cb, data);
}

kube_request *kube_update(kube_client *c, const kube_res *res, const char *ns, const char *name,
                          const char *sub, const cJSON *obj, kube_cb cb, void *data)
{
    return do_simple(c, NULL, "PUT", "PUT", res, ns, name, sub, NULL, "application/json", obj, cb, data);
}

kube_request *kube_update_with(kube_client *c, const kube_req_opts *ro, const kube_res *res, const char *ns,
                               const char *name, const cJSON *obj, kube_cb cb, void *data)
{
    return do_simple(c, ro, "PUT", "PUT", res, ns, name, NULL, NULL, "application/json", obj, cb, data);
}

kube_request *kube_patch(kube_client *c, const kube_res *res, const char *ns, const char *name,
                         const char *sub, enum kube_patch_type type, const cJSON *patch,
                         const char *field_manager, int force, kube_cb cb, void *data)
{
    return kube_patch_with(c, NULL, res, ns, name, sub, type, patch, field_manager, force, cb, data);
}

kube_request *kube_patch_with(kube_client *c, const kube_req_opts *ro, const kube_res *res, const char *ns,
                              const char *name, const char *sub, enum kube_patch_type type,
                              const cJSON *patch, const char *field_manager, int force, kube_cb cb,
                              void *data)
{
    static const char *const ctypes[] = {"application/merge-patch+json", "application/json-patch+json",
                                         "application/strategic-merge-patch+json",
                                         "application/apply-patch+yaml"};
    buf_t q;
    buf_init(&q, 1024);
    int rc = 0;
    if (field_manager) {
        rc = buf_puts(&q, "fieldManager=");
        rc = rc ? rc : kube_query_escape(&q, field_manager);
    }
    if (rc == 0 && force && type == KUBE_PATCH_APPLY)
        rc = buf_puts(&q, q.len ? "&force=true" : "force=true");
    kube_request *r =
        do_simple(c, ro, "PATCH", "PATCH", res, ns, name, sub, buf_cstr(&q), ctypes[type], patch, cb, data);
    buf_free(&q);
    return r;
}

kube_request *kube_delete(kube_client *c, const kube_res *res, const char *ns, const char *name,
                          const kube_delete_opts *opts, kube_cb cb, void *data)
{
    return kube_delete_with(c, NULL, res, ns, name, opts, cb, data);
}

kube_request *kube_delete_with(kube_client *c, const kube_req_opts *ro, const kube_res *res, const char *ns,
                               const char *name, const kube_delete_opts *opts, kube_cb cb, void *data)
{
    cJSON *body = NULL;
    if (opts) {
        body = cJSON_CreateObject();
        json_set_str(body, "kind", "DeleteOptions");
        json_set_str(body, "apiVersion", "v1");
        if (opts->propagation)
            json_set_str(body, "propagationPolicy", opts->propagation);
        if (opts->grace_seconds >= 0)
            json_set_int(body, "gracePeriodSeconds", opts->grace_seconds);
        if (opts->uid || opts->resource_version) {
            cJSON *pre = json_obj_ensure(body, "preconditions");
            if (opts->uid)
                json_set_str(pre, "uid", opts->uid);
            if (opts->resource_version)
                json_set_str(pre, "resourceVersion", opts->resource_version);
        }
    }
    kube_request *r = do_simple(c, ro, "DELETE", "DELETE", res, ns, name, NULL, NULL,
                                body ? "application/json" : NULL, body, cb, data);
    cJSON_Delete(body);
    return r;
}

void kube_cancel(kube_request *r)
{
    if (r == NULL || r->canceled || r->state == RS_FINISHING)
        return;
    r->canceled = 1;
    if (r->state == RS_DELAYED)
        finish(r, OP_ECANCELED, NULL);
    else if (r->hreq)
        hc_cancel(r->hreq);
}

kube_watch *kube_watch_start(kube_client *c, const kube_res *res, const char *ns, const kube_watch_opts *opts,
                             kube_watch_event_cb on_event, kube_watch_done_cb on_done_cb, void *data)
{
    buf_t q, path;
    int rc = 0;
    buf_init(&q, 8192);
    buf_init(&path, 16384);
    rc = buf_puts(&q, "watch=1");
    if (rc == 0 && opts->bookmarks)
        rc = buf_puts(&q, "&allowWatchBookmarks=true");
    if (rc == 0 && opts->resource_version && *opts->resource_version) {
        rc = buf_puts(&q, "&resourceVersion=");
        rc = rc ? rc : kube_query_escape(&q, opts->resource_version);
    }
    if (rc == 0 && opts->label_selector && *opts->label_selector) {
        rc = buf_puts(&q, "&labelSelector=");
        rc = rc ? rc : kube_query_escape(&q, opts->label_selector);
    }
    if (rc == 0 && opts->field_selector && *opts->field_selector) {
        rc = buf_puts(&q, "&fieldSelector=");
        rc = rc ? rc : kube_query_escape(&q, opts->field_selector);
    }
    if (rc == 0 && opts->timeout_seconds > 0)
        rc = buf_printf(&q, "&timeoutSeconds=%d", opts->timeout_seconds);
    rc = rc ? rc : kube_path(&path, res, ns, NULL, NULL, buf_cstr(&q));
    kube_request *r = req_new(c, "GET", "WATCH", res, buf_cstr(&path), NULL, NULL, 0, NULL, data);
    buf_free(&q);
    buf_free(&path);
    r->is_watch = 1;
    c->watches_open++;
    r->on_event = on_event;
    r->on_wdone = on_done_cb;
    r->max_event = opts->max_event_bytes ? opts->max_event_bytes : (16u << 20);
    /* A watch is silent until something changes; only a silence longer than
     * the server's own timeout (plus slack) means the stream is dead. */
    r->idle_ms = opts->timeout_seconds > 0 ? (unsigned)(opts->timeout_seconds + 60) * 1000u : 3700u * 1000u;
    ndjson_free(&r->lines);
    ndjson_init(&r->lines, r->max_event);
    buf_free(&r->held);
    buf_init(&r->held, r->max_event);
    c->stats.watches++;
    if (rc) {
        finish(r, rc, NULL);
        return r;
    }
    return submit(r, NULL);
}

void kube_watch_stop(kube_watch *w)
{
    kube_cancel(w);
}

/* ------------------------------------------------------------------ */

kube_client *kube_client_new(uv_loop_t *loop, const kube_client_opts *opts, int *err)
{
    kube_client *c = xcalloc(1, sizeof(*c));
    c->loop = loop;
    c->opts = *opts;
    if (c->opts.qps == 0)
        c->opts.qps = 200;
    if (c->opts.burst <= 0)
        c->opts.burst = 400;
    if (c->opts.max_conns <= 0)
        c->opts.max_conns = 32;
    if (c->opts.request_timeout_ms == 0)
        c->opts.request_timeout_ms = 60000;
    if (c->opts.max_retries <= 0)
        c->opts.max_retries = 10;
    c->user_agent = xstrdup(opts->user_agent ? opts->user_agent : "slurmop/" OP_VERSION);
    c->opts.user_agent = c->user_agent;
    c->tokens = c->opts.burst;
    c->tokens_at_ns = uv_hrtime();
    list_init(&c->delayed);
    list_init(&c->reach_hooks);
    list_init(&c->finishing);
    list_init(&c->inflight);
    hc_pool_opts po = {
        .max_conns = c->opts.max_conns,
        .tls = opts->tls,
    };
    c->pool = hc_pool_new(loop, opts->server, &po, err);
    if (c->pool == NULL) {
        free(c->user_agent);
        free(c);
        return NULL;
    }
    uv_timer_init(loop, &c->timer);
    list_init(&c->paused);
    c->budget_ns =
        (uint64_t)(c->opts.event_budget_us ? c->opts.event_budget_us : KUBE_EVENT_BUDGET_US) * 1000u;
    c->turn_budget_ns = c->budget_ns;
    uv_prepare_init(loop, &c->turn);
    uv_idle_init(loop, &c->awake);
    return c;
}

static void on_pool_closed(void *data)
{
    kube_client *c = data;
    c->pool_closed = 1;
    maybe_closed(c);
}

static void on_turn_closed(uv_handle_t *h)
{
    kube_client *c = container_of((uv_prepare_t *)(void *)h, kube_client, turn);
    c->turn_closed = 1;
    maybe_closed(c);
}

static void on_awake_closed(uv_handle_t *h)
{
    kube_client *c = container_of((uv_idle_t *)(void *)h, kube_client, awake);
    c->awake_closed = 1;
    maybe_closed(c);
}

static void on_timer_closed(uv_handle_t *h)
{
    kube_client *c = container_of((uv_timer_t *)(void *)h, kube_client, timer);
    c->timer_closed = 1;
    /* Deliver whatever finished while closing. */
    while (!list_empty(&c->finishing))
        deliver(list_entry(c->finishing.next, kube_request, link));
    maybe_closed(c);
}

void kube_client_close(kube_client *c, void (*on_closed)(void *data), void *data)
{
    list_node *pos, *tmp;
    if (c->closing)
        return;
    c->closing = 1;
    c->on_closed = on_closed;
    c->closed_data = data;
    /* The hooks' owners may outlive the client: unlink them all. */
    list_foreach_safe(pos, tmp, &c->reach_hooks)
    {
        list_remove(pos);
    }
    list_foreach_safe(pos, tmp, &c->delayed)
    {
        kube_request *r = list_entry(pos, kube_request, link);
        r->canceled = 1;
        finish(r, OP_ECANCELED, NULL);
    }
    /* In-flight requests complete through the pool's cancellation. */
    hc_pool_close(c->pool, on_pool_closed, c);
    uv_timer_stop(&c->timer);
    uv_close((uv_handle_t *)&c->timer, on_timer_closed);
    uv_prepare_stop(&c->turn);
    c->turn_active = 0;
    uv_close((uv_handle_t *)&c->turn, on_turn_closed);
    uv_idle_stop(&c->awake);
    uv_close((uv_handle_t *)&c->awake, on_awake_closed);
}

/* The fence: writes still waiting in the client (for the limiter or a
 * retry) or in the pool (for a connection) are canceled; those already
 * handed to a connection may be on the wire, and canceling them would not
 * unsend them, so they finish and report what the server said. */
int kube_client_fence(kube_client *c)
{
    list_node *pos, *tmp;
    int n = 0;
    if (c->fenced)
        return 0;
    c->fenced = 1;
    if (c->closing)
        return 0; /* everything is being canceled already */
    list_foreach_safe(pos, tmp, &c->delayed)
    {
        kube_request *r = list_entry(pos, kube_request, link);
        if (!r->is_write)
            continue;
        fence_status_finish(r);
        n++;
    }
    list_foreach_safe(pos, tmp, &c->inflight)
    {
        kube_request *r = list_entry(pos, kube_request, link);
        if (!r->is_write || r->canceled || r->hreq == NULL || hc_req_on_wire(r->hreq))
            continue;
        /* on_done runs later with OP_ECANCELED and completes it. */
        r->canceled = 1;
        hc_cancel(r->hreq);
        n++;
    }
    c->stats.fenced += (unsigned long long)n;
    return n;
}

int kube_client_fenced(const kube_client *c)
{
    return c->fenced;
}

void kube_client_stats(const kube_client *c, kube_stats *out)
{
    *out = c->stats;
    out->in_flight = c->outstanding;
    out->watches_open = c->watches_open;
    int n = 0;
    const list_node *p;
    list_foreach(p, &c->delayed) n++;
    out->waiting = n;
}
