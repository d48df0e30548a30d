/* nodeset_verdict: the drain-before-delete rule as a pure function. Whether
 * a condemned pod may be deleted now, and what to do while it may not, from
 * what the Slurm client and the node cache say of its Slurm node
 * (docs/internals/DRAIN-SAFETY.md). nodeset_slurm.c gathers the facts,
 * asks, acts on the answer; tests/unit/test_nodeset_verdict.c holds the
 * rule as a table and checks, over every combination of facts, that no
 * delete is ever allowed without its proof.
 *
 * Two facts cost a read when they are not known yet: Slurm's "no such node"
 * to a read of the name (nc_confirm_gone) and a job list read after the
 * drain (nc_jobs_free). nsv_judge asks for them (NSV_ASK_GONE,
 * NSV_ASK_JOBS) only when the rule reaches them, so a node that is still
 * busy costs no job read; the caller asks the cache, fills the answer in
 * and calls again. Each is asked at most once, so a walk ends within three
 * calls.
 */
#ifndef OP_NODESET_VERDICT_H
#define OP_NODESET_VERDICT_H

#include <stdint.h>

/* How old the read may be that licenses a delete: a drained node, or
 * Slurm's "no such node" to a read by name. */
#define NSV_PROOF_FRESH_MS 10000u
/* A drain of ours that Slurm accepted but no read has proved (its reason
 * time did not move past what was seen before) is sent again after this. */
#define NSV_REDRAIN_MS 10000u
/* A node a read showed UNKNOWN (slurmctld restarted), or that Slurm lost
 * while it was jobless, is not deleted for this long after: slurmd
 * registers again and slurmctld kills the jobs it no longer knows (after a
 * restart without its state) in that time. */
#define NSV_REGISTER_GRACE_MS 20000u

typedef enum nsv_client {
    NSV_CLIENT_READY,      /* the node cache is ready and trusted */
    NSV_CLIENT_NO_RESTAPI, /* the Controller has no RestApi: Slurm cannot be asked */
    NSV_CLIENT_SUSPECT,    /* the last table answer contradicted itself (nc_suspect_why) */
    NSV_CLIENT_UNREADY,    /* not ready, or cannot be read */
} nsv_client;

typedef enum nsv_found { NSV_UNKNOWN, NSV_ABSENT, NSV_PRESENT } nsv_found;

typedef struct nsv_facts {
    int no_drain; /* the NodeSet opted out of drains (nss_delete_without_drain) */
    int named;    /* the pod has a Slurm name (a hostNetwork pod not bound to a Node has none) */
    nsv_client client;
    nsv_found found; /* the name in the node table */
    /* NSV_ABSENT */
    int gone_asked; /* gone below is filled in (after NSV_ASK_GONE) */
    int gone;       /* Slurm said "no such node" to a fresh read of this name */
    int name_known; /* the name is the one the pod's slurmd registered (not only derived) */
    int lost;       /* nc_vanished: 0 not lost, 1 lost while jobless, 2 lost while busy */
    uint64_t lost_ago_ms;
    /* NSV_PRESENT */
    int settling;     /* a write of the node is not read back yet */
    int contradicted; /* its last read showed a reason time from the future */
    int drain;        /* DRAIN flag set */
    int our_reason;   /* ... with a reason of ours */
    int drain_proved; /* our accepted drain was read back with a newer reason time */
    int drain_state;  /* nc_drain_state: 0 none, 1 in flight, 2 accepted (drain_ago_ms ago) */
    uint64_t drain_ago_ms;
    int drained;             /* drained: DRAIN and no job left in its state */
    uint64_t unknown_ago_ms; /* since a read showed it UNKNOWN, UINT64_MAX never */
    int fresh;               /* its reading is at most NSV_PROOF_FRESH_MS old */
    /* the job list (after NSV_ASK_JOBS) */
    int jobs_asked;
    int jobs_free;   /* a job read sent after the drain lists no job of any state on it */
    int job_holds;   /* nc_job_holds: 1 a job holds it, 0 none, -1 the list is not current */
    int jobs_failed; /* the last job read failed or named nodes that are no hostlist */
} nsv_facts;

typedef enum nsv_step {
    NSV_ASK_GONE,  /* fill in gone (nc_confirm_gone) and gone_asked, then ask again */
    NSV_ASK_JOBS,  /* fill in jobs_free, job_holds, jobs_failed and jobs_asked, then ask again */
    NSV_DELETE,    /* the pod may be deleted now */
    NSV_WAIT,      /* keep the pod (cordoned); a read, a write's end or after_ms brings the NodeSet back */
    NSV_WAIT_READ, /* keep it for the job read now on its way only: no cordon for those milliseconds */
} nsv_step;

/* Why, for the verdicts a person should hear of (a Warning, a condition),
 * or a delete that needed no drain. */
typedef enum nsv_cause {
    NSV_CAUSE_NONE,
    NSV_CAUSE_NO_DRAIN,        /* delete: the NodeSet opted out (a Warning per pod) */
    NSV_CAUSE_NEVER_BOUND,     /* delete: never bound to a Node, so no Slurm node */
    NSV_CAUSE_GONE,            /* delete: Slurm has no such node, read by its registered name */
    NSV_CAUSE_DRAINED,         /* delete: drained, read fresh, no job holds it */
    NSV_CAUSE_NO_RESTAPI,      /* keep: DrainBlockedNoRestApi */
    NSV_CAUSE_SUSPECT,         /* keep: DrainHeldSlurmContradiction (the table) */
    NSV_CAUSE_UNREADABLE,      /* keep: DrainBlockedSlurmUnknown (the client) */
    NSV_CAUSE_NAME_UNPROVED,   /* keep: DrainBlockedNameUnproved */
    NSV_CAUSE_NODE_LOST,       /* keep: DrainBlockedNodeLost */
    NSV_CAUSE_CONTRADICTED,    /* keep: DrainHeldSlurmContradiction (the node) */
    NSV_CAUSE_JOBS_UNREADABLE, /* keep: DrainBlockedSlurmUnknown (the job list) */
    NSV_N_CAUSES
} nsv_cause;

/* What to do beside the step (bits). */
enum {
    NSV_DRAIN = 1u << 0,     /* queue a drain of the node (sent with the pass's others) */
    NSV_TRACK = 1u << 1,     /* read the node by name while it drains */
    NSV_UNTRACK = 1u << 2,   /* stop that */
    NSV_READ_SOON = 1u << 3, /* read the node soon: its reading is too old to prove anything */
};

typedef struct nsv_verdict {
    nsv_step step;
    nsv_cause cause;
    unsigned acts;     /* NSV_DRAIN | ... */
    uint64_t after_ms; /* > 0: queue the NodeSet again after this long (a registration grace) */
} nsv_verdict;

/** The verdict on a condemned pod from facts f. Pure. */
nsv_verdict nsv_judge(const nsv_facts *f);

/** The condition reason a pod kept for cause c carries ("DrainBlockedNoRestApi"), NULL for a cause
 *  that keeps no pod. */
const char *nsv_cause_reason(nsv_cause c);

/** Short names, for logs and tests. */
const char *nsv_step_name(nsv_step s);

#endif
