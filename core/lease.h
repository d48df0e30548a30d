/* lease: leader election on a coordination.k8s.io/v1 Lease (client-go's
 * algorithm).
 *
 * Candidates try every retry period (with jitter) to create the Lease or to
 * take it over when its holder stopped renewing; the API server's optimistic
 * concurrency (PUT with the resourceVersion just read, 409 on a race) makes
 * the take-over mutually exclusive. Expiry is judged on the local clock: a
 * lease is still held while less than leaseDuration has passed since this
 * process last saw its record change — never by comparing the holder's
 * renewTime with our clock. The leader renews every retry period.
 *
 * Fencing (so two leaders never act at once):
 *  - Lease requests skip the kube client's QPS limiter and go ahead of
 *    queued requests for a connection (kube_req_opts unthrottled, urgent),
 *    with a timeout of min(renew deadline, 5 s) for the whole call, so a
 *    renewal never waits behind the operator's own writes.
 *  - A local timer enforces the renew deadline, counted from when the last
 *    successful renewal was *sent* (an attempt that reads, then writes,
 *    counts from its read): if nothing sent later has succeeded by then, the
 *    leader steps down at once, canceling a renewal still in flight. A
 *    successor needs lease duration (> renew deadline) of silence after the
 *    record last changed, so it cannot start before we stopped.
 *  - A leader that reads the Lease and finds another holder steps down at
 *    once ("lease taken").
 *  - Stepping down is final: on_stopped_leading runs synchronously from the
 *    timer or completion that decided it, so the owner can fence its writes
 *    (kube_client_fence) before anything else of this loop iteration runs;
 *    the elector makes no further attempt and is then only lease_stop()ped.
 *
 * On stop, a leader releases the lease (empty holder, duration 1 s) so a
 * successor can start at once.
 */
#ifndef OP_LEASE_H
#define OP_LEASE_H

#include "core/kube.h"

typedef struct lease_elector lease_elector;

typedef struct lease_opts {
    kube_client *client;
    const char *ns;
    const char *name;
    const char *identity;        /* "<hostname>_<uuid>" */
    unsigned lease_ms;           /* default 15000 */
    unsigned renew_deadline_ms;  /* default 10000 */
    unsigned retry_ms;           /* default 2000 */
    void (*on_started_leading)(void *data);
    void (*on_stopped_leading)(void *data); /* lost the lease (not called by lease_stop); see
                                               lease_lost_reason */
    void *data;
} lease_opts;

/** Start campaigning. NULL with *err = OP_EINVAL when the durations violate
 *  lease > renew deadline > 1.2 * retry. */
lease_elector *lease_start(uv_loop_t *loop, const lease_opts *opts, int *err);
int lease_is_leader(const lease_elector *le);
/** Why leadership was lost ("renew deadline passed: ...", "lease taken by
 *  \"id\"", ...), or NULL while not lost. Valid until lease_stop. */
const char *lease_lost_reason(const lease_elector *le);
/** Stop (releasing the lease when leading); on_stopped runs when done. */
void lease_stop(lease_elector *le, void (*on_stopped)(void *data), void *data);

#endif
