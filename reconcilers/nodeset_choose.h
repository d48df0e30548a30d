/* nodeset_choose: which step a NodeSet's reconcile takes next, as a pure
 * function of what the reconcile has found out (nsc_facts). nodeset.c
 * gathers the facts, asks, acts, and asks again when an act has changed
 * them (the share of a pass taken while writes are in flight, an
 * incremental pass that could not finish). The order of the rules is the
 * contract; tests/unit/test_nodeset_choose.c holds it as a table.
 *
 * A fact a higher rule makes irrelevant need not be gathered: the caller
 * stops at the first step that ends the reconcile, so, for example, the
 * spec of a NodeSet whose namespace the topology webhook does not cover
 * yet is not validated.
 */
#ifndef SLURMOP_NODESET_CHOOSE_H
#define SLURMOP_NODESET_CHOOSE_H

#include <stdint.h>

typedef enum nsc_step {
    NSC_UNSYNCED,       /* the caches are not synced: try again later */
    NSC_FORGET,         /* the NodeSet is gone: drop its state */
    NSC_SCOPE_WAIT,     /* the webhook does not cover its namespace yet (not while deleting) */
    NSC_INVALID,        /* its spec is invalid: say why, act on nothing (not while deleting) */
    NSC_DELETE_REFUSED, /* deleted while its Controller does not admit its namespace: drain nothing */
    NSC_DELETE,         /* deleted: drain and delete its pods, then its finalizers */
    NSC_NO_CONTROLLER,  /* its Controller is not in the cache */
    NSC_PENDING,        /* writes in flight: the incremental step's share of the events, then ask again */
    NSC_WAIT,           /* writes in flight and a pass ran too recently: wait */
    NSC_INCR,           /* an incremental pass; when it cannot finish, ask again */
    NSC_K8S_SHARE,      /* Slurm busy: the Kubernetes share now, the full pass at the end of the gap */
    NSC_FULL,           /* a full pass over every pod */
    NSC_N_STEPS
} nsc_step;

typedef struct nsc_facts {
    unsigned synced : 1;         /* every cache has listed */
    unsigned exists : 1;         /* the NodeSet is in the cache */
    unsigned deleting : 1;       /* it has a deletionTimestamp */
    unsigned covered : 1;        /* the topology webhook admits its namespace */
    unsigned invalid : 1;        /* validation found something wrong with the spec */
    unsigned ctl_found : 1;      /* its Controller is in the cache */
    unsigned ctl_refuses : 1;    /* ... and does not admit the NodeSet's namespace */
    unsigned writes_pending : 1; /* creates or deletes not yet observed */
    unsigned pending_done : 1;   /* NSC_PENDING's step was taken in this reconcile */
    unsigned incr_tried : 1;     /* NSC_INCR was tried in this reconcile and could not finish */
    unsigned slurm_busy : 1;     /* ... because the Slurm side is not calm */
    uint64_t wait_ms;            /* after NSC_PENDING: time before another pass may run (0: now) */
    uint64_t gap_ms;             /* Slurm busy: time left before the next full pass */
} nsc_facts;

/** The next step for these facts. Pure: no state, no side effect. */
nsc_step nsc_choose(const nsc_facts *f);

/** A short name of a step for logs and tests ("full", "incremental" ...). */
const char *nsc_step_name(nsc_step s);

#endif
