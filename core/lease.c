#include "core/lease.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "core/crypto.h"
#include "core/err.h"
#include "core/json.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/rfc3339.h"

/* How long one Lease request may take (retries included): never the kube
 * client's 60 s default, and never past the renew deadline, where the
 * deadline timer cancels it anyway; with the default 10 s deadline a stuck
 * renewal still leaves room for another try. */
#define LEASE_REQUEST_CAP_MS 5000u

struct lease_elector {
    uv_loop_t *loop;
    lease_opts o;
    char *ns, *name, *identity;
    kube_req_opts ro;         /* for every Lease request: unthrottled, urgent, short timeout */
    uv_timer_t timer;         /* next acquire or renew attempt */
    uv_timer_t deadline;      /* the renew deadline while leading */
    kube_request *req;
    int leader;
    int lost;                 /* stepped down: no further attempts */
    int stopping;
    int releasing;
    int handles_closed;       /* of timer and deadline */
    uint64_t attempt_ms;      /* when the attempt in progress sent its first request */
    uint64_t last_ok_sent_ms; /* when the last successful attempt was sent (leader) */
    char lost_reason[256];
    char *observed_record;    /* holder|renewTime|transitions as last seen */
    uint64_t observed_ms;     /* local time the record last changed */
    cJSON *cached;            /* last Lease object read or written */
    void (*on_stopped)(void *);
    void *stopped_data;
};

static void try_acquire_or_renew(lease_elector *le);
static void on_written(int err, const cJSON *obj, const kube_status *st, void *data);
static void lose(lease_elector *le, const char *fmt, ...) OP_PRINTF(2, 3);

static void on_timer(uv_timer_t *t)
{
    try_acquire_or_renew(t->data);
}

/* The renew deadline is counted from when the last successful renewal was
 * sent, not from when its answer came: the API server may have applied it
 * at any moment in between, so that is the latest point the successor's
 * lease-duration clock can have started from. Firing while a renewal is
 * still in flight is the point: a request stuck for longer than the
 * deadline must not keep us leading. */
static void on_deadline(uv_timer_t *t)
{
    lease_elector *le = t->data;
    if (!le->leader || le->stopping)
        return;
    uint64_t now = uv_now(le->loop);
    uint64_t due = le->last_ok_sent_ms + le->o.renew_deadline_ms;
    if (now < due) {
        uv_timer_start(&le->deadline, on_deadline, due - now, 0);
        return;
    }
    lose(le, "renew deadline passed: no renewal succeeded within %u ms of sending the last successful one%s",
         le->o.renew_deadline_ms, le->req ? " (one still in flight, canceled)" : "");
}

static void maybe_done(lease_elector *le)
{
    if (!le->stopping || le->req || le->handles_closed < 2)
        return;
    assert(le->handles_closed == 2);
    void (*cb)(void *) = le->on_stopped;
    void *data = le->stopped_data;
    cJSON_Delete(le->cached);
    free(le->observed_record);
    free(le->ns);
    free(le->name);
    free(le->identity);
    free(le);
    if (cb)
        cb(data);
}

static void schedule(lease_elector *le, unsigned ms)
{
    if (le->stopping || le->lost)
        return;
    if (!le->leader) {
        /* Acquire attempts are jittered (factor 1.2) so candidates spread out. */
        uint32_t r;
        random_bytes(&r, sizeof(r));
        ms += (unsigned)(((uint64_t)r * (ms / 5 + 1)) >> 32);
    }
    uv_timer_start(&le->timer, on_timer, ms, 0);
}

/* A write of ours succeeded: (still) leading, until the attempt's send
 * time plus the renew deadline. */
static void become_leader(lease_elector *le)
{
    /* Stepping down is final (lease.h): nothing leads again after it. */
    assert(!le->lost && !le->stopping);
    le->last_ok_sent_ms = le->attempt_ms;
    uint64_t now = uv_now(le->loop);
    uint64_t due = le->last_ok_sent_ms + le->o.renew_deadline_ms;
    uv_timer_start(&le->deadline, on_deadline, due > now ? due - now : 0, 0);
    if (le->leader)
        return;
    le->leader = 1;
    log_info("leader election: %s acquired lease %s/%s", le->identity, le->ns, le->name);
    if (le->o.on_started_leading)
        le->o.on_started_leading(le->o.data);
}

/* Step down for good: no timer, no request of ours is left, and the owner
 * hears of it before this returns, so it can fence its writes before any
 * other callback of this loop iteration runs. */
static void lose(lease_elector *le, const char *fmt, ...)
{
    if (!le->leader)
        return;
    assert(!le->lost && !le->stopping);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(le->lost_reason, sizeof(le->lost_reason), fmt, ap);
    va_end(ap);
    le->leader = 0;
    le->lost = 1;
    uv_timer_stop(&le->timer);
    uv_timer_stop(&le->deadline);
    if (le->req)
        kube_cancel(le->req); /* its callback sees le->lost and does nothing */
    log_warn("leader election: %s lost lease %s/%s: %s", le->identity, le->ns, le->name, le->lost_reason);
    if (le->o.on_stopped_leading)
        le->o.on_stopped_leading(le->o.data);
}

static void observe_record(lease_elector *le, const cJSON *lease)
{
    char rec[1024];
    snprintf(rec, sizeof(rec), "%s|%s|%lld|%lld", json_get_str_or(lease, "spec.holderIdentity", ""),
             json_get_str_or(lease, "spec.renewTime", ""), json_get_int(lease, "spec.leaseTransitions", 0),
             json_get_int(lease, "spec.leaseDurationSeconds", 0));
    if (le->observed_record == NULL || strcmp(rec, le->observed_record) != 0) {
        free(le->observed_record);
        le->observed_record = xstrdup(rec);
        le->observed_ms = uv_now(le->loop);
    }
    cJSON_Delete(le->cached);
    le->cached = cJSON_Duplicate(lease, 1);
}

/* Stopping with nothing in flight: a leader releases the Lease (an empty
 * holder and a 1 s duration let a successor take over at once). */
static void release_or_done(lease_elector *le)
{
    assert(le->stopping && le->req == NULL && !le->releasing);
    if (!le->leader || !le->cached ||
        strcmp(json_get_str_or(le->cached, "spec.holderIdentity", ""), le->identity) != 0) {
        /* Not ours (any more): never write over another holder's record. */
        maybe_done(le);
        return;
    }
    char now[RFC3339_MICRO_LEN];
    rfc3339_now_micro(now);
    cJSON *lease = cJSON_Duplicate(le->cached, 1);
    cJSON *spec = json_obj_ensure(lease, "spec");
    json_set_str(spec, "holderIdentity", "");
    json_set_int(spec, "leaseDurationSeconds", 1);
    json_set_str(spec, "renewTime", now);
    json_set_str(spec, "acquireTime", now);
    le->leader = 0;
    le->releasing = 1;
    le->req = kube_update_with(le->o.client, &le->ro, &KUBE_LEASES, le->ns, le->name, lease, on_written, le);
    cJSON_Delete(lease);
}

static void on_written(int err, const cJSON *obj, const kube_status *st, void *data)
{
    lease_elector *le = data;
    assert(le->req != NULL); /* one request of ours at a time, and this is it */
    le->req = NULL;
    if (le->stopping) {
        if (le->releasing) {
            if (!err)
                log_info("leader election: released lease %s/%s", le->ns, le->name);
            maybe_done(le);
            return;
        }
        /* The renewal that was in flight at lease_stop: release over it. */
        if (err) {
            cJSON_Delete(le->cached);
            le->cached = NULL;
        } else {
            observe_record(le, obj);
        }
        release_or_done(le);
        return;
    }
    if (le->lost)
        return;
    if (err) {
        log_debug("leader election: write failed: %s (%s)", err_str(err), st ? st->message : "");
        /* The cached copy is stale (409) or unusable: read it again next
         * time. A leader keeps trying until the deadline timer says no. */
        cJSON_Delete(le->cached);
        le->cached = NULL;
        schedule(le, le->o.retry_ms);
        return;
    }
    observe_record(le, obj);
    become_leader(le);
    schedule(le, le->o.retry_ms);
}

static cJSON *build_spec(lease_elector *le, const cJSON *prev)
{
    char now[RFC3339_MICRO_LEN];
    rfc3339_now_micro(now);
    cJSON *spec = cJSON_CreateObject();
    const char *holder = json_get_str_or(prev, "spec.holderIdentity", "");
    int was_me = strcmp(holder, le->identity) == 0;
    long long transitions = json_get_int(prev, "spec.leaseTransitions", 0);
    json_set_str(spec, "holderIdentity", le->identity);
    json_set_int(spec, "leaseDurationSeconds", (le->o.lease_ms + 999) / 1000);
    json_set_str(spec, "acquireTime", was_me ? json_get_str_or(prev, "spec.acquireTime", now) : now);
    json_set_str(spec, "renewTime", now);
    json_set_int(spec, "leaseTransitions", was_me || prev == NULL ? transitions : transitions + 1);
    return spec;
}

static void on_read(int err, const cJSON *obj, const kube_status *st, void *data)
{
    lease_elector *le = data;
    assert(le->req != NULL);
    le->req = NULL;
    if (le->stopping) {
        if (!err && obj)
            observe_record(le, obj);
        release_or_done(le);
        return;
    }
    if (le->lost)
        return;
    if (err == OP_ENOTFOUND) {
        cJSON *lease = cJSON_CreateObject();
        json_set_str(lease, "apiVersion", "coordination.k8s.io/v1");
        json_set_str(lease, "kind", "Lease");
        cJSON *meta = json_obj_ensure(lease, "metadata");
        json_set_str(meta, "name", le->name);
        json_set_str(meta, "namespace", le->ns);
        json_set(lease, "spec", build_spec(le, NULL));
        le->req = kube_create_with(le->o.client, &le->ro, &KUBE_LEASES, le->ns, lease, on_written, le);
        cJSON_Delete(lease);
        return;
    }
    if (err) {
        log_debug("leader election: read failed: %s (%s)", err_str(err), st ? st->message : "");
        schedule(le, le->o.retry_ms);
        return;
    }
    observe_record(le, obj);
    const char *holder = json_get_str_or(obj, "spec.holderIdentity", "");
    long long dur_s = json_get_int(obj, "spec.leaseDurationSeconds", (le->o.lease_ms + 999) / 1000);
    int held_by_other = *holder && strcmp(holder, le->identity) != 0;
    int valid = le->observed_ms + (uint64_t)dur_s * 1000 > uv_now(le->loop);
    if (le->leader && strcmp(holder, le->identity) != 0) {
        /* Whoever wrote the record after us took the lease (our renewals
         * had stopped getting through): never write it back. */
        lose(le, "lease taken by \"%s\"", holder);
        return;
    }
    if (held_by_other && valid) {
        schedule(le, le->o.retry_ms);
        return;
    }
    cJSON *lease = cJSON_Duplicate(obj, 1);
    json_set(lease, "spec", build_spec(le, obj));
    le->req = kube_update_with(le->o.client, &le->ro, &KUBE_LEASES, le->ns, le->name, lease, on_written, le);
    cJSON_Delete(lease);
}

static void try_acquire_or_renew(lease_elector *le)
{
    if (le->stopping || le->lost || le->req)
        return;
    /* The attempt is dated from its first request (a GET then a PUT counts
     * from the GET): the earlier, the safer for the renew deadline. */
    le->attempt_ms = uv_now(le->loop);
    if (le->leader && le->cached) {
        /* Fast path: renew from the cached copy; a 409 sends us back to GET. */
        cJSON *lease = cJSON_Duplicate(le->cached, 1);
        json_set(lease, "spec", build_spec(le, le->cached));
        le->req =
            kube_update_with(le->o.client, &le->ro, &KUBE_LEASES, le->ns, le->name, lease, on_written, le);
        cJSON_Delete(lease);
        return;
    }
    le->req = kube_get_with(le->o.client, &le->ro, &KUBE_LEASES, le->ns, le->name, on_read, le);
    assert(le->req != NULL); /* kube calls back later, never from inside the call */
}

lease_elector *lease_start(uv_loop_t *loop, const lease_opts *opts, int *err)
{
    lease_opts o = *opts;
    if (o.lease_ms == 0)
        o.lease_ms = 15000;
    if (o.renew_deadline_ms == 0)
        o.renew_deadline_ms = 10000;
    if (o.retry_ms == 0)
        o.retry_ms = 2000;
    if (!(o.lease_ms > o.renew_deadline_ms && (double)o.renew_deadline_ms > 1.2 * o.retry_ms)) {
        *err = OP_EINVAL;
        return NULL;
    }
    lease_elector *le = xcalloc(1, sizeof(*le));
    le->loop = loop;
    le->o = o;
    le->ns = xstrdup(o.ns);
    le->name = xstrdup(o.name);
    le->identity = xstrdup(o.identity);
    le->ro.unthrottled = 1;
    le->ro.urgent = 1;
    le->ro.timeout_ms =
        o.renew_deadline_ms < LEASE_REQUEST_CAP_MS ? o.renew_deadline_ms : LEASE_REQUEST_CAP_MS;
    uv_timer_init(loop, &le->timer);
    le->timer.data = le;
    uv_timer_init(loop, &le->deadline);
    le->deadline.data = le;
    uv_timer_start(&le->timer, on_timer, 0, 0);
    return le;
}

int lease_is_leader(const lease_elector *le)
{
    assert(!(le->leader && le->lost));
    return le->leader;
}

const char *lease_lost_reason(const lease_elector *le)
{
    return le->lost ? le->lost_reason : NULL;
}

static void on_handle_closed(uv_handle_t *h)
{
    lease_elector *le = h->data;
    assert(le->stopping && le->handles_closed < 2);
    le->handles_closed++;
    maybe_done(le);
}

void lease_stop(lease_elector *le, void (*on_stopped)(void *data), void *data)
{
    if (le->stopping)
        return;
    le->stopping = 1;
    le->on_stopped = on_stopped;
    le->stopped_data = data;
    uv_timer_stop(&le->timer);
    uv_close((uv_handle_t *)&le->timer, on_handle_closed);
    uv_close((uv_handle_t *)&le->deadline, on_handle_closed);
    if (le->req) {
        /* A leader's renewal in flight is let finish (its timeout is short)
         * so that the release is written over the record it leaves;
         * anything else is canceled. */
        if (!le->leader)
            kube_cancel(le->req);
        return;
    }
    release_or_done(le);
}
