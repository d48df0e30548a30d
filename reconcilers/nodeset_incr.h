/* nodeset_incr: the derived state of one NodeSet, kept per pod uid, so that
 * an event about one pod updates it in O(1) instead of a pass over every
 * pod. Pure: no I/O, no clock, no stores (unit- and property-tested).
 *
 * What is kept is exactly what a full pass derives from all of its pods
 * for a StatefulSet-mode NodeSet (reconcilers/nodeset.c, scale_statefulset,
 * rolling_update, nsb_count): the status counters, the ordinals in use,
 * the pods of another scaling mode (a full pass condemns them), the pods
 * coming back (terminating), the pods not at the update revision (a
 * rolling update's work), and the set of pods that ended (Failed or
 * Succeeded: a full pass deletes and replaces them). nsi_plan() turns it
 * into the same decision scale_statefulset would take, or NSI_FULL when
 * the decision needs the whole pod list (victim order: scale-in, rolling
 * update, mode change).
 *
 * The reference is the full pass: nsi_rebuild() derives the state from a
 * pod list from scratch, and the property test (tests/unit/test_nodeset_incr.c)
 * checks after every random event that the incrementally updated state is
 * equal to it. Debug builds also compare the two after every incremental
 * pass of the operator.
 *
 * The reconciler decides when the state may be used (nodeset.c, "incremental
 * passes"); the engine only keeps it. Times are not part of it: a NodeSet
 * with minReadySeconds (availability depends on the clock) never uses it.
 */
#ifndef OP_NODESET_INCR_H
#define OP_NODESET_INCR_H

#include <stddef.h>
#include <stdint.h>

#include "core/map.h"
#include "reconcilers/nodeset_build.h"

/** What the state keeps of one pod. */
typedef struct nsi_pod {
    int ordinal; /* -1: none (or beyond NSB_REPLICAS_MAX, see ord_high) */
    enum nsb_phase phase;
    unsigned ready : 1;       /* Running and Ready */
    unsigned terminating : 1; /* deletionTimestamp set */
    unsigned mode_ok : 1;     /* of the NodeSet's scaling mode (or unlabelled) */
    unsigned updated : 1;     /* its revision is the update revision */
    unsigned current : 1;     /* its revision is the current revision */
    unsigned slurm : 4;       /* NSI_SLURM_* of its Slurm node (0: not listed, or no RestApi) */
} nsi_pod;

/* What a pod's Slurm node adds to the NodeSet's Slurm counts (nss_status):
 * the caller reads them from the node cache; nsi_pod_of leaves them 0. */
#define NSI_SLURM_IDLE 1u
#define NSI_SLURM_ALLOCATED 2u
#define NSI_SLURM_DOWN 4u
#define NSI_SLURM_DRAIN 8u

typedef struct nsi_state {
    map_t pods; /* uid -> struct nsi_ent (private) */
    /* the status counters of nsb_count (minReadySeconds 0: available = ready) */
    int32_t created; /* phase set: status.replicas */
    int32_t ready;
    int32_t updated; /* created, not terminating, at the update revision */
    int32_t current; /* created, not terminating, at the current revision */
    /* scale_statefulset's inputs */
    int32_t active;      /* of the mode, not terminating */
    int32_t coming_back; /* of the mode, terminating (their ordinals come back) */
    int32_t other_mode;  /* not of the mode, not terminating: condemned by a full pass */
    /* rolling_update's input: not terminating and not at the update revision */
    int32_t old;
    /* ordinals in use (every pod with an ordinal, terminating or not) */
    uint32_t *ord_use; /* pods per ordinal < ord_cap */
    size_t ord_cap;
    int32_t ord_high; /* pods whose ordinal is >= NSB_REPLICAS_MAX */
    /* the Slurm counts: pods whose node has each NSI_SLURM_* bit */
    int32_t slurm_idle, slurm_allocated, slurm_down, slurm_drain;
    /* uids of active pods of the mode whose phase is Failed or Succeeded
     * (values: private entries) */
    map_t ended;
} nsi_state;

void nsi_init(nsi_state *s);
void nsi_free(nsi_state *s);
/** Forget every pod (the state is empty, as nsi_init leaves it). */
void nsi_clear(nsi_state *s);

/** The facts of one pod: mode_ok as the reconciler decided it, the
 *  revisions compared as nsb_revision_same does. */
nsi_pod nsi_pod_of(const nsb_pod *p, int mode_ok, const char *update_rev, const char *current_rev,
                   const char *nss);

/** An event about one pod: f is its facts now, NULL when it is gone (or no
 *  longer ours); ref (copied) is how the caller finds the pod again (the
 *  pods store key), returned by nsi_ended_next. */
void nsi_set(nsi_state *s, const char *uid, const char *ref, const nsi_pod *f);
/** The facts kept of a pod, or NULL. */
const nsi_pod *nsi_get(const nsi_state *s, const char *uid);

/** The state from scratch: clear, then nsi_set for each pod. */
void nsi_rebuild(nsi_state *s, const char *const *uids, const char *const *refs, const nsi_pod *pods,
                 size_t n);

/** Whether two states are equal (aggregates, pods, ordinals, ended set);
 *  when not, what differs first, in why. */
int nsi_equal(const nsi_state *a, const nsi_state *b, char *why, size_t why_len);

/** nsb_count over the kept pods, for a StatefulSet with desired replicas
 *  and minReadySeconds 0. */
void nsi_counts(const nsi_state *s, int32_t desired, nsb_counts *out);

enum nsi_action {
    NSI_NONE = 0, /* right size, nothing ended, nothing to roll */
    NSI_FULL,     /* the decision needs every pod: run a full pass */
    NSI_WAIT,     /* short of replicas, but terminating pods come back: wait */
    NSI_CREATE,   /* create `want` pods at the lowest free ordinals */
    NSI_REPLACE,  /* right size: delete the ended pods (nsi_ended) */
};

typedef struct nsi_plan_t {
    enum nsi_action action;
    int want; /* NSI_CREATE */
} nsi_plan_t;

/** scale_statefulset's decision for `replicas`, then rolling_update's
 *  (rolling: the strategy is RollingUpdate). */
nsi_plan_t nsi_plan(const nsi_state *s, int replicas, int rolling);

/** The `want` lowest ordinals no pod uses, ascending, into out; returns how
 *  many were found (fewer only when the search reaches NSB_REPLICAS_MAX). */
size_t nsi_free_ordinals(const nsi_state *s, int want, int *out);

/** Iterate the ended pods: size_t it = 0; while ((uid = nsi_ended_next(s, &it, &ref))) ... */
const char *nsi_ended_next(const nsi_state *s, size_t *it, const char **ref);

#endif
