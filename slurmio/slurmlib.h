/* slurmlib: the libslurm backend, for what Slurm 22.05's REST API cannot do.
 *
 * slurmrestd in Slurm 22.05 (data_parser v0.0.36-38) cannot update, drain,
 * resume or delete a node, nor write a reservation (its v0.0.38 API has
 * no node or reservation write endpoints; tests/slurm/README.md has the lab).
 * This backend does those through libslurm's RPCs (slurm_update_node(),
 * slurm_delete_node(), slurm_create/update/delete_reservation()), authenticated
 * with munge like scontrol, so it needs root or SlurmUser, the cluster's munge
 * socket and its slurm.conf. See backend.h for which backend serves which
 * operation for which REST version.
 *
 * Every call blocks in libslurm (a connect and a round trip to slurmctld,
 * retried for up to MessageTimeout when slurmctld is away), so every operation
 * runs on libuv's threadpool (uv_queue_work) and completes on the loop thread.
 * Operations run ONE AT A TIME, in submission order:
 *   - libslurm keeps process-wide state that is not safe to use from several
 *     threads at once in 22.05 (the configuration read by slurm_init(), the
 *     auth and cred plugin contexts, slurm_seterrno()-style error reporting),
 *     and a single worker never contends for it;
 *   - order matters: a drain followed by an undrain of the same node must
 *     reach slurmctld in that order;
 *   - concurrency is not what makes node writes fast: one RPC carries a
 *     hostlist of any size (8,192 drains in one request), so callers batch
 *     nodes instead of issuing requests in parallel.
 * slurm_init(conf) runs once per process, on the worker, before the first
 * operation; every backend in the process must use the same configuration.
 *
 * Every wait is bounded: an operation that has not completed timeout_ms after
 * it was submitted (queued behind others, or stuck in libslurm because
 * slurmctld does not answer) completes with OP_ETIMEOUT at once. A libslurm
 * call cannot be interrupted: if one is stuck, its late result is discarded,
 * and the operations behind it wait for it (and time out in turn).
 *
 * Slurm 22.05's answers to know about (seen on the lab): UNDRAIN and RESUME
 * of a node that never registered or stopped responding (UNKNOWN*, IDLE*)
 * clear DRAIN yet fail with 2028 "Invalid node state specified" (scontrol
 * reports the same); IDLE of a DOWN node fails with 2028. A caller that needs
 * to know the outcome re-reads the node rather than trusting the status.
 *
 * Built only with libslurm (OP_HAVE_LIBSLURM); without it sl_backend_new()
 * returns OP_ENOTSUP and nothing else can be called.
 */
#ifndef OP_SLURMLIB_H
#define OP_SLURMLIB_H

#include <stdint.h>
#include <uv.h>

#include "slurmio/model.h"

typedef struct sl_backend sl_backend;

typedef struct sl_options {
    const char *conf;    /* slurm.conf path (--slurm-conf); NULL: $SLURM_CONF, else libslurm's default */
    unsigned timeout_ms; /* per operation, counted from submission (default 60000) */
} sl_options;

/** The outcome of one operation; valid only during the callback. */
typedef struct sl_result {
    int status;            /* 0 or a negative code:
                            *   OP_ENOTFOUND   a node (or the reservation) does not exist
                            *                  (Slurm error 2018 / 2053): the whole request
                            *                  was refused;
                            *   OP_EUNAVAILABLE slurmctld could not be reached;
                            *   OP_EFORBIDDEN  not root/SlurmUser, or munge refused us;
                            *   OP_EINVALID, OP_EEXISTS, OP_EBUSY, OP_ECONFLICT, OP_ESLURM
                            *                  other Slurm errors (see sm_errno_code());
                            *   OP_ETIMEOUT    no result within timeout_ms;
                            *   OP_ECANCELED   the backend was closed first;
                            *   OP_ECONFIG     the slurm.conf path cannot be read. */
    int slurm_errno;       /* Slurm's error number, 0 when none */
    const char *message;   /* Slurm's text for it, or the project's; never NULL */
    const char *resv_name; /* sl_create_reservation: the reservation's name; else NULL */
    uint64_t elapsed_ns;   /* time spent inside libslurm (0 when it never ran) */
} sl_result;

typedef void (*sl_done_cb)(void *data, const sl_result *res);
typedef void (*sl_close_cb)(void *data);

/**
 * Create a backend on loop. Nothing talks to Slurm yet.
 * @return 0; OP_ECONFIG when opts->conf (or $SLURM_CONF) names a file that
 *         cannot be read, or differs from the configuration an earlier
 *         backend of this process initialised libslurm with; OP_ENOTSUP
 *         without libslurm.
 */
int sl_backend_new(uv_loop_t *loop, const sl_options *opts, sl_backend **out);

/**
 * Close the backend: operations not yet started complete with OP_ECANCELED,
 * one running inside libslurm completes with its result; then cb (may be
 * NULL) runs and the backend is freed. All callbacks fire after this call
 * returns. Idempotent; later submissions return OP_ECANCELED.
 */
void sl_backend_close(sl_backend *b, sl_close_cb cb, void *data);

/**
 * Update the nodes of a hostlist expression in one RPC: a state request
 * (DRAIN and DOWN need a reason; UNDRAIN, RESUME, IDLE), reason, comment,
 * available and active features (comma-separated). Strings are copied.
 * u->names is ignored (hostlist is the node list); topology is not supported
 * by 22.05's update message.
 * @return 0 and cb fires once, later; or (and cb never fires) OP_EINVAL for an
 *         empty hostlist, an empty update, DRAIN/DOWN without a reason or an
 *         unknown state; OP_ENOTSUP for a topology update; OP_ECANCELED when
 *         closing.
 */
int sl_update_nodes(sl_backend *b, const char *hostlist, const sm_node_update *u, sl_done_cb cb, void *data);

/** Delete the nodes of a hostlist from slurmctld (scontrol delete). Same
 *  return convention as sl_update_nodes. */
int sl_delete_nodes(sl_backend *b, const char *hostlist, sl_done_cb cb, void *data);

/** Create a reservation (name, start, duration, flags, users, nodes); the
 *  result's resv_name is the name Slurm gave it. FORCE_START and OTHER are
 *  not sent (22.05 has no FORCE_START). OP_EINVAL without a node list or
 *  users. */
int sl_create_reservation(sl_backend *b, const sm_resv_desc *d, sl_done_cb cb, void *data);

/** Update an existing reservation: every field given (non-NULL string,
 *  start_time > 0, duration > 0, flags != 0) is changed. OP_EINVAL without
 *  a name. */
int sl_update_reservation(sl_backend *b, const sm_resv_desc *d, sl_done_cb cb, void *data);

/** Delete a reservation by name. */
int sl_delete_reservation(sl_backend *b, const char *name, sl_done_cb cb, void *data);

/** Operations submitted and not yet completed (queued or running). */
unsigned sl_backend_pending(const sl_backend *b);

/** Whether this build has the libslurm backend. */
int sl_available(void);

/** Release libslurm's process-wide state (slurm_fini) once every backend is
 *  closed and no operation runs; for a clean exit under leak checkers. */
void sl_library_fini(void);

#endif
