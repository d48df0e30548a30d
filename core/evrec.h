/* evrec: the Kubernetes event recorder (events.k8s.io/v1).
 *
 * Reconcilers report what they did (ScalingUp, SuccessfulCreate, ...) and
 * what is wrong (Warning events) on the object concerned, visible with
 * `kubectl describe` / `kubectl events`. As client-go does, repeats are
 * aggregated: the same (object, type, reason, note) within EVREC_SERIES_MS
 * becomes a PATCH of the event's `series` (count, lastObservedTime) instead of
 * a new object, and each object may emit at most a burst of 25 events, then
 * one per 5 minutes, so a hot loop cannot flood the API server. Recording is
 * fire-and-forget: failures are logged, never returned.
 */
#ifndef OP_EVREC_H
#define OP_EVREC_H

#include "core/kube.h"
#include "core/mem.h"

#define EVREC_SERIES_MS (6 * 60 * 1000)

typedef struct evrec evrec;

typedef struct evrec_ref {
    const char *api_version; /* "slinky.slurm.net/v1beta1" */
    const char *kind;
    const char *ns;          /* "" for cluster-scoped objects (event goes to "default") */
    const char *name;
    const char *uid;
} evrec_ref;

/** controller: reportingController ("slinky.slurm.net/slurmop"); instance:
 *  reportingInstance (the pod name or hostname). */
evrec *evrec_new(uv_loop_t *loop, kube_client *client, const char *controller, const char *instance);
/** Free the recorder. Close the kube client first: callbacks of writes in
 *  flight must have run (with OP_ECANCELED) before the recorder goes. */
void evrec_free(evrec *r);

/** Emit one event. type "Normal" or "Warning"; action: what the controller
 *  did ("Scale", "Reconcile"); note is printf-formatted (truncated to 1024). */
void evrec_emit(evrec *r, const evrec_ref *regarding, const char *type, const char *reason,
                const char *action, const char *fmt, ...) OP_PRINTF(6, 7);

typedef struct evrec_stats {
    unsigned long long created, patched, dropped, failed;
} evrec_stats;
void evrec_get_stats(const evrec *r, evrec_stats *out);

#endif
