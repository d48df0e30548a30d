/* nodebatch: node writes batched per loop iteration.
 *
 * A scale-in of 8,192 pods drains 8,192 Slurm nodes with the same reason;
 * one request per node costs ~41 s on Slurm 22.05, one hostlist request
 * 0.12 s (measured on the Slurm lab of tests/slurm/README.md with 8,192
 * nodes). So node writes are not sent when they are asked
 * for: every update requested during one loop iteration is grouped by its
 * content (state request, reason, comment, features, topology: the whole
 * update message) and each group goes out as ONE request naming its nodes as
 * a compressed hostlist, just before the loop next waits for I/O (a
 * uv_prepare, as redis' handleClientsWithPendingWrites). Deletes of node
 * records are grouped the same way.
 *
 * Which way a group goes depends on the negotiated REST version and on
 * whether the libslurm backend is there (backend.h, sb_choose): v0.0.42+
 * POST nodes/ with the hostlist; libslurm's slurm_update_node() with the
 * hostlist (22.05, whose REST API has no node writes); or, for v0.0.40/41
 * without libslurm, one POST node/{name} per node. A group that cannot be
 * sent (topology on 22.05, no backend at all) completes with OP_ENOTSUP.
 *
 * A hostlist request is refused as a whole when one of its nodes does not
 * exist (Slurm error 2018): such a group is then sent again node by node, so
 * the others are still updated and only the missing node reports
 * OP_ENOTFOUND.
 *
 * Updates that carry no state change (a comment, features, topology) are
 * different for every node and so never batch; they are throttled
 * (max_unbatched requests in flight) behind state changes, so that thousands
 * of comments never delay a drain: on 22.05 the libslurm backend runs one
 * request at a time.
 *
 * Completions: each node's callback runs once, asynchronously, with the
 * status of the request that carried it (0, or a code as documented for
 * sr_update_nodes / sl_update_nodes), and OP_ECANCELED when the batcher is
 * closed first.
 */
#ifndef OP_SLURM_NODEBATCH_H
#define OP_SLURM_NODEBATCH_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "slurmio/model.h"
#include "slurmio/rest.h"
#include "slurmio/slurmlib.h"

typedef struct nb_batcher nb_batcher;

/** A node's write completed. node is valid only during the call. */
typedef void (*nb_done_cb)(const char *node, int status, void *data);

typedef struct nb_opts {
    sr_client *rest;        /* required, borrowed: must outlive the batcher's callbacks */
    sl_backend *lib;        /* optional, borrowed (same rule) */
    unsigned max_unbatched; /* stateless single-node requests in flight at once (default 2) */
    const char *name;       /* for logs (copied) */
} nb_opts;

/** Create a batcher. 0 or OP_EINVAL (no REST client). */
int nb_new(uv_loop_t *loop, const nb_opts *opts, nb_batcher **out);

/** Close: queued writes complete with OP_ECANCELED; writes in flight complete
 *  when their request does (close the REST client and backend to hurry
 *  them); then cb (may be NULL) runs and the batcher is freed. Idempotent. */
void nb_close(nb_batcher *b, void (*cb)(void *data), void *data);

/**
 * Queue an update of one node (u->names is ignored; strings are copied).
 * @return 0 (cb runs later, once); OP_EINVAL for an invalid node name or an
 *         empty update; OP_ECANCELED when closing (cb never runs then).
 */
int nb_update(nb_batcher *b, const char *node, const sm_node_update *u, nb_done_cb cb, void *data);

/** Queue the deletion of a node record; same convention. */
int nb_delete(nb_batcher *b, const char *node, nb_done_cb cb, void *data);

/** Send what is queued now instead of at the end of the loop iteration. */
void nb_flush(nb_batcher *b);

typedef struct nb_stats {
    uint64_t queued;   /* node writes accepted */
    uint64_t requests; /* requests sent (all paths) */
    uint64_t rest_requests;
    uint64_t lib_requests;
    uint64_t largest;   /* most nodes in one request */
    uint64_t split;     /* groups re-sent node by node after OP_ENOTFOUND */
    uint64_t failed;    /* node writes completed with an error (cancellations excluded) */
    unsigned in_flight; /* requests in flight */
} nb_stats;
void nb_get_stats(const nb_batcher *b, nb_stats *out);

/** The content key of an update: equal keys batch together (exposed for tests). */
char *nb_update_key(const sm_node_update *u);

#endif
