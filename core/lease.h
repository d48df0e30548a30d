/* lease: leader election on a coordination.k8s.io/v1 Lease (client-go's
 * algorithm, k8s-wire.md §6).
 *
 * Candidates try every retry period (with jitter) to create the Lease or to
 * take it over when its holder stopped renewing; the API server's optimistic
 * concurrency (PUT with the resourceVersion just read, 409 on a race) makes
 * the take-over mutually exclusive. Expiry is judged on the local clock: a
 * lease is still held while less than leaseDuration has passed since this
 * process last saw its record change — never by comparing the holder's
 * renewTime with our clock. The leader renews every retry period; if it
 * cannot renew within the renew deadline (shorter than the lease duration)
 * it steps down, so two leaders never act at once. On stop, a leader
 * releases the lease (empty holder, duration 1 s) so a successor can start
 * at once.
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
    void (*on_stopped_leading)(void *data); /* lost the lease (not called by lease_stop) */
    void *data;
} lease_opts;

/** Start campaigning. NULL with *err = OP_EINVAL when the durations violate
 *  lease > renew deadline > 1.2 * retry. */
lease_elector *lease_start(uv_loop_t *loop, const lease_opts *opts, int *err);
int lease_is_leader(const lease_elector *le);
/** Stop (releasing the lease when leading); on_stopped runs when done. */
void lease_stop(lease_elector *le, void (*on_stopped)(void *data), void *data);

#endif
