/* cluster_rc: what the Controller, RestApi, Accounting, LoginSet and Token
 * reconcilers share (docs/compat.md#common-mechanics).
 *
 * Each of them is a crc_module: a work queue of "namespace/name" keys of
 * one CR kind and a sync function that runs one pass. A pass (crc_pass)
 * reads the caches, asks the pure builders for the desired objects, and
 * converges each owned object through objsync (minimal merge patches, no
 * write when in sync). It never waits: writes complete later, and their
 * watch events queue the CR again. Failures of a step are reported as
 * Warning events and the remaining steps still run (Slinky's syncsteps);
 * the pass then asks to be retried with backoff.
 *
 * A write that fails after the pass (the API server refused it) queues the
 * CR again after a backoff that doubles with every failure (200 ms up to
 * 5 min); passes that come earlier, for other events, wait for the end of
 * the backoff instead of sending the refused write again at once. The
 * backoff is forgotten once a pass finds every object in sync.
 *
 * Events (reasons as in Slinky): CreateSucceeded (Normal) when an owned
 * object was created, CreateFailed / PatchFailed / DeleteFailed (Warning)
 * when a write failed, SyncFailed (Warning) when a builder could not build
 * an object, ValidationFailed / ValidationWarning for the checks of
 * validate_cluster.h.
 *
 * Validation: an invalid CR gets a Warning event, the status condition
 * "Valid" = False (reason ValidationFailed, message = the errors) and no
 * other write. The condition is removed once the CR is valid again (Slinky
 * itself sets no conditions, so a valid CR carries none of ours but the
 * Controller's SlurmVersionSupported, controller_build.h). The last
 * accepted version of each CR is remembered for the immutability checks
 * (in memory: a restarted operator checks only create-time rules until the
 * first accepted pass).
 *
 * Status is written through the status subresource as a merge patch of the
 * fields that differ, only when something differs, and not again while the
 * cache still shows the version the last status write was computed from.
 *
 * A module's memory (queue, accepted versions, gates, backoff) is in its
 * crc_module, which the reconciler keeps in its own state, owned by the
 * operator (operator.h); nothing of it is process-wide. Everything runs on
 * the loop thread.
 */
#ifndef OP_CLUSTER_RC_H
#define OP_CLUSTER_RC_H

#include <cjson/cJSON.h>
#include <stdint.h>

#include "core/map.h"
#include "reconcilers/cluster_common.h"
#include "reconcilers/operator.h"
#include "reconcilers/validate_cluster.h"

/* Status condition maintained for validation results. */
#define CRC_COND_VALID "Valid"
/* Status condition set while an object the CR would own has a name taken by
 * somebody else's object (True, reason CRC_REASON_NOT_OWNED, message: the
 * objects); removed once no such object is left. The same reason is the
 * Warning event's. Such an object is never written (objsync.h). */
#define CRC_COND_CONFLICT "OwnershipConflict"
#define CRC_REASON_NOT_OWNED "NotOwned"
/* A CR in conflict is looked at again after this long: the foreign object's
 * removal queues nothing (it has no owner of ours). */
#define CRC_CONFLICT_RETRY_MS 30000

typedef struct crc_pass crc_pass;
typedef struct crc_module crc_module;

/* Write gates: one write per object in flight, and after a successful write
 * no new one while the cache still shows the version it was computed from
 * (the watch event of the write is on its way), bounded by 30 s. objsync
 * does this for owned objects; gates serve the writes that bypass it
 * (status, pod labels). Keys are the caller's ("ns/name"). */
typedef struct crc_gates {
    map_t m; /* private */
} crc_gates;
typedef struct crc_gate crc_gate;

/** 1 when a write for key is in flight, or has finished but the cache
 *  still shows cur_rv, the version it was computed from. */
int crc_gate_busy(crc_gates *g, const char *key, const char *cur_rv);
/** Start a write for key computed from cur_rv; the token goes to
 *  crc_gate_end. */
crc_gate *crc_gate_begin(crc_gates *g, const char *key, const char *cur_rv);
/** The write ended with err; rv_new is the resourceVersion the server
 *  answered (NULL when none). Frees the token. */
void crc_gate_end(crc_gates *g, crc_gate *t, int err, const char *rv_new);
/** Forget every gate (tokens in flight stay valid until their end). */
void crc_gates_clear(crc_gates *g);

struct crc_module {
    /* set by the reconciler */
    const char *name;    /* "controller-controller": queue name and metrics label */
    const char *kind;    /* CR kind, "Controller" */
    enum op_kind store;  /* the CR's store, OPK_CONTROLLERS */
    const kube_res *res; /* the CR's resource, &SLINKY_CONTROLLERS */
    /* One pass over a CR that exists and is not being deleted. */
    void (*sync)(crc_pass *p);
    /* Optional: the CR key is gone (deleted, or replaced by a new uid). */
    void (*forget)(crc_module *m, const char *key);
    /* Optional: the cluster the CR serves (its Controller's namespace and
     * name, pointers into o). Set, the CR holds CRC_NODESETS_FINALIZER while
     * NodeSets of that Controller exist (crc_hold_for_nodesets). */
    void (*cluster_of)(const sobj *o, const char **ns, const char **name);
    /* Optional, for a CR that serves several clusters: how many NodeSets
     * depend on it (the Accounting: those of every Controller whose
     * accountingRef names it). Set, it decides instead of cluster_of. */
    size_t (*nodesets_served)(operator *op, const sobj *o);
    /* read-only, set by crc_setup */
    operator *op;
    /* private */
    wq_t *q;
    map_t accepted;         /* key -> struct accepted (last valid CR) */
    crc_gates status_gates; /* status writes per CR key */
    map_t backoff;          /* key -> struct backoff (failed writes) */
    crc_gates fin_gates;    /* finalizer writes per CR key */
    map_t full_warned; /* key -> struct full_warned: the last ReferenceTableFull Warning (crc_ref_full) */
    uint64_t full_window_ms; /* start of the current 10 s window of such Warnings */
    unsigned full_window_n;  /* Warnings sent in it */
};

struct crc_pass {
    crc_module *m;
    operator *op;
    const sobj *o;   /* the CR in the cache (valid during the pass) */
    const cJSON *cr; /* its JSON */
    uint64_t first_add_ns;
    int wrote;           /* a write was submitted (event-to-action measured once) */
    int failed;          /* a step failed: retry with backoff */
    int pending;         /* an object still waits for an earlier write */
    uint32_t requeue_ms; /* smallest requested delay, 0 = none */
    char *invalid;       /* validation errors ("; "-joined), NULL when valid */
    char *conflict;      /* objects not ours with our names ("; "-joined), NULL when none */
    clc_env env;         /* looks up the CR's namespace in the caches */
    int ref_wait;        /* a referenced object's first read is on its way (crc_ref_wait) */
    int ref_full;        /* a referenced object found no room (crc_ref_full): warned once */
};

/* The finalizer a Controller and a RestApi hold while NodeSets of their
 * cluster exist (docs/compat.md#deleting-a-cluster): a NodeSet being deleted
 * drains its pods through Slurm, and slurmctld and slurmrestd must outlive
 * it. With it, deleting everything at once (helm uninstall) ends with every
 * pod drained: the NodeSets go first, then the Controller and the RestApi,
 * whose objects the garbage collector then removes. The Accounting a
 * Controller names holds it too: gone before the Controller, it would change
 * slurm.conf (no accounting) and so roll slurmctld, slurmrestd and the login
 * pods in the middle of the drain, with the keys' Secrets already deleted
 * (helm deletes Secrets and ConfigMaps before custom resources). */
#define CRC_NODESETS_FINALIZER "slinky.slurm.net/nodesets"

/** Whether obj's metadata.finalizers has name. */
int crc_has_finalizer(const cJSON *obj, const char *name);
/** The NodeSets (any namespace, deleting ones too) whose controllerRef is
 *  ns/name. */
size_t crc_nodesets_of(operator *op, const char *ns, const char *name);

/** A reconciler's state whose first member is its crc_module: size bytes,
 *  zeroed, the module's reconciler fields (name, kind, store, res, sync,
 *  forget) copied from tmpl. */
void *crc_state_new(size_t size, const crc_module *tmpl);
/** crc_fini of the module that starts state, then free state (NULL:
 *  nothing). */
void crc_state_free(void *state);

/** Set up a module: remember op and queue the CR on every change of its
 *  store (call from the reconciler's setup()). */
void crc_setup(crc_module *m, operator *op);
/** Create the queue and queue every cached CR. 0 or a negative code. */
int crc_start(crc_module *m);
/** Shut the queue down and forget the per-CR memory. */
void crc_stop(crc_module *m);
/** Free what the module still holds (with its reconciler's state, once the
 *  operator's client has closed: write completions use the module). Safe
 *  on a module that was never set up or started. */
void crc_fini(crc_module *m);

/** Queue a CR by key "ns/name" / by namespace and name (no-op when stopped
 *  or name is NULL/empty). */
void crc_enqueue_key(crc_module *m, const char *key);
void crc_enqueue(crc_module *m, const char *ns, const char *name);
/** Queue the CR of m that controls o (o's controller owner is of m's kind). */
void crc_enqueue_owner(crc_module *m, const sobj *o);
/** A store handler that does crc_enqueue_owner for the old and the new
 *  object; data is the crc_module. */
void crc_on_owned(store *s, const sobj *old_obj, const sobj *new_obj, void *data);

/** A write for the CR key failed after its pass: queue it again after the
 *  next backoff step and hold earlier passes back until then (no-op when
 *  stopped). */
void crc_write_failed(crc_module *m, const char *key);

/** The clc_env lookup backed by the caches ("Secret", "ConfigMap",
 *  "PersistentVolumeClaim" in the CR's namespace; "Controller" and
 *  "Accounting" in the namespace the CR's controllerRef / accountingRef
 *  points into, cw_ref_ns); ud is the crc_pass. crc_pass.env is set up with it. Secrets
 *  and ConfigMaps go through op_ref_get: a user object not read yet makes
 *  the pass wait (crc_ref_wait). */
const cJSON *crc_env_get(void *ud, const char *kind, const char *name);

/* ---- inside a pass ------------------------------------------------------ */

/* A pass that looked up a referenced Secret or ConfigMap whose first read
 * (op_ref_get) is still on its way would see it missing: from then on it
 * writes nothing, reports nothing (no events, no validation result, no
 * status) and runs again after CRC_REF_WAIT_MS (the read's answer, when it
 * finds the object, queues it earlier). The lookups that follow still run,
 * so every reference of the pass is read at once. */
#define CRC_REF_WAIT_MS 200
void crc_ref_wait(crc_pass *p);
/* The same for a reference op_ref_get could not take in (OP_REF_FULL): the
 * pass waits as for a first read, retries after CRC_REF_FULL_RETRY_MS, and
 * says so with a ReferenceTableFull Warning on the CR, at most once per CR
 * every CRC_REF_FULL_WARN_MS and CRC_REF_FULL_WARN_BURST per 10 s for the
 * module: whoever fills the table must not also fill the API budget with
 * Events that delay everyone's writes (the metric
 * slurmop_referenced_full_total counts every lookup). */
#define CRC_REF_FULL_WARN_MS (10u * 60u * 1000u)
#define CRC_REF_FULL_WARN_BURST 10
#define CRC_REF_FULL_RETRY_MS 5000
#define CRC_REASON_REF_FULL "ReferenceTableFull"
void crc_ref_full(crc_pass *p, const char *kind, const char *ns, const char *name);

/** The last accepted version of the CR (same uid), or NULL. */
const cJSON *crc_accepted(const crc_pass *p);

/** Report a validation result: warnings become ValidationWarning events;
 *  errors (rc != 0) a ValidationFailed event and p->invalid. Returns 1 when
 *  the CR is invalid (the caller then skips every step but crc_status),
 *  else 0 and the CR is remembered as accepted. Frees r. */
int crc_validated(crc_pass *p, int rc, vclu_result *r);

/** A step could not build its object: SyncFailed event, p->failed. why is
 *  taken (may be NULL). */
void crc_step_failed(crc_pass *p, const char *step, int rc, char *why);

/** Converge one owned object (desired is taken; NULL: nothing to do).
 *  kind/res: where it lives. Returns the objsync result. */
int crc_ensure(crc_pass *p, enum op_kind kind, const kube_res *res, cJSON *desired);

/** Build result of a step: rc < 0 → crc_step_failed, else crc_ensure. */
void crc_apply(crc_pass *p, const char *step, int rc, char *why, enum op_kind kind, const kube_res *res,
               cJSON *desired);

/** The object kind/name (in the CR's namespace) exists and is not ours: a
 *  Warning event (CRC_REASON_NOT_OWNED), the CRC_COND_CONFLICT condition at
 *  crc_status, a requeue after CRC_CONFLICT_RETRY_MS. Nothing is written. */
void crc_not_owned(crc_pass *p, const kube_res *res, const char *name);

/** Delete an owned object if it is cached (objsync_delete, with events);
 *  an object the CR does not own (objsync_owned_by) is left alone and
 *  reported with crc_not_owned (OBJSYNC_NOT_OWNED). */
int crc_delete(crc_pass *p, enum op_kind kind, const kube_res *res, const char *name);

/** Note that the pass submitted a write (measures event-to-action once). */
void crc_note_write(crc_pass *p);
/** Ask for a requeue after ms (the smallest request wins). */
void crc_requeue_after(crc_pass *p, uint32_t ms);

/** Converge the CR's status: fields (taken, may be NULL) holds the status
 *  members this reconciler owns (with "conditions": all of them, the
 *  current ones with this reconciler's types set); the validation condition is added or
 *  removed from the current status.conditions, and so is CRC_COND_CONFLICT. A merge patch of what
 *  differs goes to the status subresource, or nothing when nothing does. */
void crc_status(crc_pass *p, cJSON *fields);

/* ---- pure helpers (tested on their own) --------------------------------- */

/** A copy of conditions (an array, or NULL) with the condition type set to
 *  status/reason/message (status NULL: removed). lastTransitionTime = now
 *  (RFC 3339) unless the condition already had that status; observedGeneration
 *  = generation. Returns a new array (possibly empty). */
cJSON *crc_conditions_set(const cJSON *conditions, const char *type, const char *status, const char *reason,
                          const char *message, int64_t generation, const char *now);

/** The merge patch that turns the members of status named by want's keys
 *  (plus "conditions" when status has it) into want, or NULL when they are
 *  equal. A member absent from want but in status (only "conditions") is
 *  deleted (null). */
cJSON *crc_status_patch(const cJSON *status, const cJSON *want);

/** Remove from desired.spec the fields the API server refuses to change
 *  (for kind "StatefulSet": selector, serviceName, volumeClaimTemplates,
 *  podManagementPolicy; "Deployment": selector) so that a patch never
 *  touches them, as Slinky's patch whitelist does. */
void crc_strip_immutable(cJSON *desired);

#endif
