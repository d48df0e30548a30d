/* nodeset_write: the NodeSet engine's one writer. Every Kubernetes write the NodeSet reconciler
 * (reconcilers/nodeset.c) and its Slurm rules (nodeset_slurm.c) make to a pod or a NodeSet goes through the
 * functions below, and so do the two gates that keep those writes from piling up on the API server:
 *
 *   - the value gate, per (object uid, what): a write of the same value is not sent again while it is in
 *     flight, nor within NSW_VALUE_TTL_MS of being sent (its watch event is on its way, so the cache that
 *     made the pass want it is behind). A different value goes at once. A write that fails opens its gate
 *     and asks the owner for another pass (nsw_hooks.retry) unless the object is gone;
 *   - the pace of a NodeSet's status: one PATCH in flight per NodeSet, at most one per NSW_STATUS_MIN_MS.
 *     Each is a merge patch of absolute values diffed against the cached object, so two in flight could land
 *     in either order and leave an older count for good.
 *
 * The NodeSet's other objects (ControllerRevisions, the worker Service and PDB, the SSH ConfigMap) are owned
 * objects every reconciler writes through objsync, which gates each object itself.
 *
 * The state is a part of the NodeSet reconciler in the registry (RC_NODESET_WRITE, nsw_of()): the reconciler
 * sets it up and stops it. Completions run on a later turn of the loop, once; a request the client refuses
 * completes inside the call. Every write is counted until its completion, and the state is freed after the
 * API client closed, when none is left (asserted).
 */
#ifndef OP_NODESET_WRITE_H
#define OP_NODESET_WRITE_H

#include <stdint.h>

#include "core/kube.h"
#include "core/map.h"
#include "core/store.h"
#include "reconcilers/operator.h"

#define NSW_VALUE_TTL_MS 30000u
#define NSW_STATUS_MIN_MS 1000u

/* ---- the value gate (pure: the caller gives the clock) ---- */

typedef struct nsw_gates {
    map_t m;          /* private: "<uid>\x1f<what>" -> entry */
    uint64_t inserts; /* private: sweep pacing */
} nsw_gates;
typedef struct nsw_ticket nsw_ticket;

void nsw_gates_init(nsw_gates *g);
void nsw_gates_free(nsw_gates *g);
/** A write of value want for (uid, what) may go at now: returns its ticket (noted in flight), or NULL when
 *  the same value is in flight or was sent less than NSW_VALUE_TTL_MS before. A ticket is handed to exactly
 *  one send (or to nsw_gate_end). */
nsw_ticket *nsw_gate_take(nsw_gates *g, const char *uid, const char *what, uint64_t want, uint64_t now);
/** The key a ticket's end is looked up by (the gate may have been swept or cleared meanwhile). */
const char *nsw_ticket_key(const nsw_ticket *t);
/** The write of key ended with err: it is no longer in flight; a failure opens the gate for any value. */
void nsw_gate_end(nsw_gates *g, const char *key, int err);
/** Entries kept (for tests and the sweep's bound). */
size_t nsw_gates_count(const nsw_gates *g);

/* ---- the status pace (pure) ---- */

typedef struct nsw_pace {
    int again;        /* a pass held its write back meanwhile */
    int inflight;     /* a PATCH is on its way */
    uint64_t sent_ms; /* when the last one was sent */
} nsw_pace;

#define NSW_PACE_BUSY (-1)
/** May a status PATCH go at now? 0: yes, noted in flight; NSW_PACE_BUSY: one is in flight (its end asks for
 *  a pass); > 0: the ms until one may go (the caller queues a pass then). */
int64_t nsw_pace_take(nsw_pace *p, uint64_t now);
/** The PATCH ended (asserted in flight): -1 when no pass waits on it, else the ms after which the held-back
 *  pass should run (0: now). */
int64_t nsw_pace_end(nsw_pace *p, uint64_t now);

/* ---- the writer ---- */

typedef struct nsw_state nsw_state;
extern const op_reconciler RC_NODESET_WRITE;
/** op's (never NULL from op_start on). */
nsw_state *nsw_of(const operator *op);

/** What the writer asks of the NodeSet reconciler. */
typedef struct nsw_hooks {
    void *ctx;
    /* A gated write for NodeSet "ns/name" failed (not cancelled, the object not gone): a pass after ms. */
    void (*retry)(void *ctx, const char *set, uint64_t ms);
} nsw_hooks;

/** Set up the writer; h is copied. */
void nsw_setup(operator *op, const nsw_hooks *h);
/** Completions from now on touch no gate and ask for no pass (the callers' own completions still run). */
void nsw_stop(operator *op);
/** Writes sent whose completion has not run. */
unsigned nsw_inflight(const operator *op);

/** A value-gated write (nsw_gate_take on the writer's gates): NULL when it must not go. */
nsw_ticket *nsw_take(operator *op, const char *uid, const char *what, uint64_t want);
/** Patch pod (sub NULL: the object; "status": its status) with t's value; set is the owning NodeSet's key,
 *  what names the write in a failure's log line. Takes t and patch. */
void nsw_patch_pod(operator *op, nsw_ticket *t, const char *set, const sobj *pod, const char *sub,
                   enum kube_patch_type type, cJSON *patch, const char *what);
/** Merge-patch a NodeSet (sub NULL or "status") with t's value. Takes t and patch. */
void nsw_patch_nodeset(operator *op, nsw_ticket *t, const sobj *nodeset, const char *sub, cJSON *patch);

/* Writes the reconciler completes itself (expectations, Events, batches): cb runs once with the outcome. */

/** Create pod (copied) in its namespace; answer: the callback gets the created object (else NULL). */
void nsw_create_pod(operator *op, const cJSON *pod, int answer, kube_cb cb, void *data);
/** Delete pod, only that incarnation (its uid a precondition), and with unchanged only as the cache has it
 *  (its resourceVersion too). A delete goes ahead of queued writes (first: ahead of other deletes too): it
 *  ends a drain or a pod's life, which people wait for. */
void nsw_delete_pod(operator *op, const sobj *pod, int unchanged, int first, kube_cb cb, void *data);
/** Adopt orphan pod under the owner reference ref (taken), only that incarnation. */
void nsw_adopt_pod(operator *op, const sobj *pod, cJSON *ref, kube_cb cb, void *data);
/** Merge-patch the status of NodeSet ns/name; the caller paces it (nsw_pace). patch stays the caller's. */
void nsw_patch_status(operator *op, const char *ns, const char *name, const cJSON *patch, kube_cb cb,
                      void *data);

#endif
