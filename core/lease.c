#include "core/lease.h"

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

struct lease_elector {
    uv_loop_t *loop;
    lease_opts o;
    char *ns, *name, *identity;
    uv_timer_t timer;
    kube_request *req;
    int leader;
    int stopping;
    int releasing;
    int timer_closed;
    uint64_t last_renew_ms;   /* when we last renewed successfully (leader) */
    char *observed_record;    /* holder|renewTime|transitions as last seen */
    uint64_t observed_ms;     /* local time the record last changed */
    cJSON *cached;            /* last Lease object read or written */
    void (*on_stopped)(void *);
    void *stopped_data;
};

static void try_acquire_or_renew(lease_elector *le);

static void on_timer(uv_timer_t *t)
{
    try_acquire_or_renew(t->data);
}

static void micro_now(char *out, size_t len)
{
    struct timeval tv;
    struct tm tm;
    gettimeofday(&tv, NULL);
    gmtime_r(&tv.tv_sec, &tm);
    snprintf(out, len, "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
             tm.tm_hour, tm.tm_min, tm.tm_sec, (long)tv.tv_usec);
}

static void maybe_done(lease_elector *le)
{
    if (!le->stopping || le->req || !le->timer_closed)
        return;
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
    if (le->stopping)
        return;
    if (!le->leader) {
        /* Acquire attempts are jittered (factor 1.2) so candidates spread out. */
        uint32_t r;
        random_bytes(&r, sizeof(r));
        ms += (unsigned)(((uint64_t)r * (ms / 5 + 1)) >> 32);
    }
    uv_timer_start(&le->timer, on_timer, ms, 0);
}

static void become_leader(lease_elector *le)
{
    le->last_renew_ms = uv_now(le->loop);
    if (le->leader)
        return;
    le->leader = 1;
    log_info("leader election: %s acquired lease %s/%s", le->identity, le->ns, le->name);
    if (le->o.on_started_leading)
        le->o.on_started_leading(le->o.data);
}

static void lose(lease_elector *le, const char *why)
{
    if (!le->leader)
        return;
    le->leader = 0;
    log_warn("leader election: %s lost lease %s/%s: %s", le->identity, le->ns, le->name, why);
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

static void on_written(int err, const cJSON *obj, const kube_status *st, void *data)
{
    lease_elector *le = data;
    le->req = NULL;
    if (le->stopping) {
        if (le->releasing && !err)
            log_info("leader election: released lease %s/%s", le->ns, le->name);
        maybe_done(le);
        return;
    }
    if (err) {
        log_debug("leader election: write failed: %s (%s)", op_strerror(err), st ? st->message : "");
        /* The cached copy is stale (409) or unusable: read it again next time. */
        cJSON_Delete(le->cached);
        le->cached = NULL;
        if (le->leader && uv_now(le->loop) - le->last_renew_ms > le->o.renew_deadline_ms)
            lose(le, "could not renew within the renew deadline");
        schedule(le, le->o.retry_ms);
        return;
    }
    observe_record(le, obj);
    become_leader(le);
    schedule(le, le->o.retry_ms);
}

static cJSON *build_spec(lease_elector *le, const cJSON *prev)
{
    char now[64];
    micro_now(now, sizeof(now));
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
    le->req = NULL;
    if (le->stopping) {
        maybe_done(le);
        return;
    }
    if (err == OP_ENOTFOUND) {
        cJSON *lease = cJSON_CreateObject();
        json_set_str(lease, "apiVersion", "coordination.k8s.io/v1");
        json_set_str(lease, "kind", "Lease");
        cJSON *meta = json_obj_ensure(lease, "metadata");
        json_set_str(meta, "name", le->name);
        json_set_str(meta, "namespace", le->ns);
        json_set(lease, "spec", build_spec(le, NULL));
        le->req = kube_create(le->o.client, &KUBE_LEASES, le->ns, lease, on_written, le);
        cJSON_Delete(lease);
        return;
    }
    if (err) {
        log_debug("leader election: read failed: %s (%s)", op_strerror(err), st ? st->message : "");
        if (le->leader && uv_now(le->loop) - le->last_renew_ms > le->o.renew_deadline_ms)
            lose(le, "could not read the lease within the renew deadline");
        schedule(le, le->o.retry_ms);
        return;
    }
    observe_record(le, obj);
    const char *holder = json_get_str_or(obj, "spec.holderIdentity", "");
    long long dur_s = json_get_int(obj, "spec.leaseDurationSeconds", (le->o.lease_ms + 999) / 1000);
    int held_by_other = *holder && strcmp(holder, le->identity) != 0;
    int valid = le->observed_ms + (uint64_t)dur_s * 1000 > uv_now(le->loop);
    if (held_by_other && valid) {
        lose(le, "another holder renewed it");
        schedule(le, le->o.retry_ms);
        return;
    }
    cJSON *lease = cJSON_Duplicate(obj, 1);
    json_set(lease, "spec", build_spec(le, obj));
    le->req = kube_update(le->o.client, &KUBE_LEASES, le->ns, le->name, NULL, lease, on_written, le);
    cJSON_Delete(lease);
}

static void try_acquire_or_renew(lease_elector *le)
{
    if (le->stopping || le->req)
        return;
    if (le->leader && uv_now(le->loop) - le->last_renew_ms > le->o.renew_deadline_ms)
        lose(le, "renew deadline passed");
    if (le->leader && le->cached) {
        /* Fast path: renew from the cached copy; a 409 sends us back to GET. */
        cJSON *lease = cJSON_Duplicate(le->cached, 1);
        json_set(lease, "spec", build_spec(le, le->cached));
        le->req = kube_update(le->o.client, &KUBE_LEASES, le->ns, le->name, NULL, lease, on_written, le);
        cJSON_Delete(lease);
        return;
    }
    le->req = kube_get(le->o.client, &KUBE_LEASES, le->ns, le->name, NULL, on_read, le);
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
    uv_timer_init(loop, &le->timer);
    le->timer.data = le;
    uv_timer_start(&le->timer, on_timer, 0, 0);
    return le;
}

int lease_is_leader(const lease_elector *le)
{
    return le->leader;
}

static void on_timer_closed(uv_handle_t *h)
{
    lease_elector *le = container_of((uv_timer_t *)(void *)h, lease_elector, timer);
    le->timer_closed = 1;
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
    uv_close((uv_handle_t *)&le->timer, on_timer_closed);
    if (le->req) {
        kube_cancel(le->req);
        return;
    }
    if (le->leader && le->cached) {
        /* Release: an empty holder and a 1 s duration let a successor take over at once. */
        char now[64];
        micro_now(now, sizeof(now));
        cJSON *lease = cJSON_Duplicate(le->cached, 1);
        cJSON *spec = json_obj_ensure(lease, "spec");
        json_set_str(spec, "holderIdentity", "");
        json_set_int(spec, "leaseDurationSeconds", 1);
        json_set_str(spec, "renewTime", now);
        json_set_str(spec, "acquireTime", now);
        le->leader = 0;
        le->releasing = 1;
        le->req = kube_update(le->o.client, &KUBE_LEASES, le->ns, le->name, NULL, lease, on_written, le);
        cJSON_Delete(lease);
    }
}
