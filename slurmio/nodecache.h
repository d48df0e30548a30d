/* nodecache: what one Slurm cluster says about its nodes, kept current
 * without hammering it, and turned into events.
 *
 * Polling. The node table is read with GET nodes?update_time=<t>: when
 * nothing changed since t slurmrestd answers 304 with no body (free at any
 * fleet size); when anything changed it sends the whole table (Slurm's
 * update_time is all-or-nothing: ~10 MB and ~1.5 s of slurmrestd time at
 * 8,192 nodes). t is the table's "last_update" where the version reports it
 * (v0.0.40+), else our clock at the time the last full table was asked for,
 * minus a margin against clock skew. The interval adapts to the cost of a
 * full fetch: poll_min_ms while full fetches are cheap, about twice the last
 * full fetch's duration when they are not (capped at poll_max_ms). Failures
 * back off (1 s, 2 s, ... up to 10 s). A full fetch without update_time runs
 * every full_resync_ms as a safety net against a missed change.
 *
 * Nodes in transition. A node that was just written, or that the caller is
 * waiting on (a drain issued on a busy node: nc_track), is read on its own
 * (GET node/{name}, a few ms) every track_ms while the table's interval is
 * longer, for at most max_tracked nodes; more than that and the table poll
 * (at its minimum interval) does the job better.
 *
 * Events. Every change of a node as the operator sees it (base state, flags,
 * reason, comment, features, topology, reservation, the deadline of the jobs
 * on it), every node that appears or vanishes, fires on_node(name). A change
 * of the cluster's health (readable <-> unknown) fires on_node(NULL): "look
 * at everything". So the owner of a node is told at once, instead of
 * discovering the change on a 30-second requeue.
 *
 * Failing closed. When a poll fails (transport error, token refused, an
 * answer with "errors"), or the data is older than stale_ms, the cluster is
 * unknown: nc_lookup() answers NC_UNKNOWN for every node (never "absent",
 * never a stale "drained"), until a poll succeeds again. Nothing here ever
 * blocks or waits: lookups answer from memory at once.
 *
 * Absence is not proof. A node missing from a table (empty, partial,
 * replayed) may still run jobs, so NC_ABSENT licenses nothing. Two guards:
 * a full answer that lacks more than shrink_pct of the nodes we know is
 * held (the cluster reads unknown, on_node(NULL) fires) and the table is
 * read again; it is applied only when an answer sent suspect_confirm_ms
 * later agrees. An answer older than the table we have (v0.0.40+ report
 * "last_update") is an error. The one proof that a node does not exist is
 * Slurm's own answer to a read of that node by name: error "Invalid node
 * name" (2018) on 22.05, "Failure to query node <name>" numbered 0 with no
 * node list on 24.11 and later (sm_error.no_such_node): nc_confirm_gone(). A read by name whose answer does
 * not list the node (an empty list, another node) changes nothing.
 *
 * Repeated writes. An update Slurm accepted, read back, and asked for again
 * (so it did not show) is retried after 1 s, 2 s, ... 60 s, not on every
 * pass; the node's owner is woken (on_node) when the next try is due.
 *
 * Writes. nc_update() / nc_delete_node() go through the cluster's batcher
 * (nodebatch.h: one hostlist request per distinct update per loop
 * iteration). A node with a write in flight, or whose last write completed
 * after its cached data was read, is "settling" (nc_settling): its cached
 * state may not show the write yet, so a reconciler must not decide from it
 * again; asking for the same write while it settles is a no-op. A completed
 * write makes the node (or, for many nodes, the table) be read again at once,
 * except a write that sets only the comment: once Slurm accepted it, the
 * cached node takes the new comment (and keeps it against answers to reads
 * sent before), nothing settles and no event fires.
 *
 * Jobs (for deadlines, and for the proof that no job holds a drained node:
 * nc_jobs_free), controller pings (HA) and reservations are polled
 * only once somebody asked for them (nc_want_*), on their own timers.
 *
 * Lifetime: nc_close() is the one close path; callbacks never fire after it
 * returns. Pointers returned by lookups are valid until the loop runs again.
 */
#ifndef OP_SLURM_NODECACHE_H
#define OP_SLURM_NODECACHE_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "core/metrics.h"
#include "slurmio/model.h"
#include "slurmio/nodebatch.h"
#include "slurmio/rest.h"
#include "slurmio/slurmlib.h"

typedef struct nc_cache nc_cache;

/** What the cache knows about one node. */
enum nc_found {
    NC_UNKNOWN = 0, /* Slurm could not be asked, answered with errors, or the data is stale */
    NC_ABSENT,      /* Slurm's current node table does not have it: proves nothing (nc_confirm_gone) */
    NC_PRESENT,
};

typedef struct nc_opts {
    const char *name;        /* the cluster, for logs and the metrics label "cluster" (copied) */
    sr_client *rest;         /* required, borrowed: close the cache before it */
    sl_backend *lib;         /* optional, borrowed (for writes 22.05's REST cannot do) */
    mx_registry *metrics;    /* optional */
    unsigned poll_min_ms;    /* default 1000 */
    unsigned poll_max_ms;    /* default 30000 */
    unsigned full_resync_ms; /* default 600000 */
    unsigned track_ms;       /* default 1000 */
    unsigned max_tracked;    /* default 32 */
    unsigned stale_ms;       /* default 60000 */
    unsigned skew_margin_s;  /* subtracted from our clock for update_time (v0.0.38), default 2 */
    unsigned jobs_ms;        /* default 3000 */
    unsigned ping_ms;        /* default 5000 */
    unsigned resv_ms;        /* default 10000 */
    unsigned shrink_pct; /* a full answer lacking more than this % of the known nodes is held, default 10 */
    unsigned suspect_confirm_ms; /* ... until a second answer sent this much later agrees, default 1000 */
    /* Events (see above); all optional. */
    void (*on_node)(const char *name, void *data);
    void (*on_ping)(void *data);
    void (*on_resv)(const char *name, void *data); /* a reservation appeared, changed or vanished */
    void *data;
} nc_opts;

/** Create a cache and start polling at once. 0 or OP_EINVAL. */
int nc_new(uv_loop_t *loop, const nc_opts *opts, nc_cache **out);

/** Stop polling; writes not yet sent complete with OP_ECANCELED, writes in
 *  flight when their request completes; then cb (may be NULL) runs and the
 *  cache is freed. No event fires after this call. Idempotent. */
void nc_close(nc_cache *c, void (*cb)(void *data), void *data);

/** 1 while the node table is current (last poll succeeded, not stale). */
int nc_ready(const nc_cache *c);
enum nc_why {
    NC_WHY_READY = 0,
    NC_WHY_CLOSING,
    NC_WHY_SUSPECT,
    NC_WHY_FAILED,
    NC_WHY_NOT_READ,
    NC_WHY_STALE
};
/** Why nc_ready() is 0, as one clause naming the cause that applies (the
 *  last poll's error, a held answer, no read yet, a stale table), written
 *  to out (n bytes, always terminated); returns which (enum nc_why). */
int nc_unready_why(const nc_cache *c, char *out, size_t n);
/** The negotiated REST version (0 while unknown). */
int nc_version(const nc_cache *c);
/** Whether this cluster's writes can use the libslurm backend. */
int nc_have_lib(const nc_cache *c);

/** Look a node up; *out (may be NULL) gets it when NC_PRESENT. */
enum nc_found nc_lookup(const nc_cache *c, const char *name, const sm_node **out);

/** 1 when the node has a write in flight or completed since it was read. */
int nc_settling(const nc_cache *c, const char *name);

/** 1 when what the cache says of the node (present or not) comes from a
 *  read sent at most max_age_ms ago: a table poll (a 304 confirms the whole
 *  table) or a read of the node by name. 0 when not ready. */
int nc_fresh(const nc_cache *c, const char *name, unsigned max_age_ms);
/** Read the node soon (by name, or with the table when many are due). */
void nc_read_soon(nc_cache *c, const char *name);
/** 1 when Slurm answered a read of this node by name, sent at most
 *  max_age_ms ago, with "Invalid node name" (and nothing read since listed
 *  the node, and no write of it is settling): the only proof that the node
 *  does not exist. Otherwise 0, and such a read is asked for (always by
 *  name; on_node(name) fires when it completes). 0 when not ready. */
int nc_confirm_gone(nc_cache *c, const char *name, unsigned max_age_ms);
/** 1 when our last drain of the node was accepted by Slurm and a read
 *  since (nothing settling) shows the node with DRAIN and a reason time
 *  newer than any read of it showed before that drain was sent: proof that
 *  the read reflects our drain, not an older answer replayed. */
int nc_drain_proved(const nc_cache *c, const char *name);
/** Our last drain of the node: 0 none (or another state write of ours came
 *  after it), 1 in flight, 2 accepted by Slurm (*accepted_ago_ms, may be
 *  NULL, gets how long ago). Slurm keeps the reason time when a drain
 *  repeats the current reason: a drain meant to be proved must carry a
 *  reason different from the one the node shows. */
int nc_drain_state(const nc_cache *c, const char *name, uint64_t *accepted_ago_ms);
/** Whether Slurm lost a node it had: a read in this cache's life listed it,
 *  and it is absent now although no delete of ours removed it. That is
 *  slurmctld restarted without its state (a dynamic node that has not
 *  registered again is then unknown to it, while slurmd may still run the
 *  jobs it forgot) or a person deleted it (Slurm refuses that while jobs
 *  run). 0: not lost (or never seen: this process cannot tell); 1: it was
 *  jobless at its last read; 2: it was not. *ago_ms (may be NULL): since
 *  it was first found absent. Remembered for an hour. */
int nc_vanished(const nc_cache *c, const char *name, uint64_t *ago_ms);
/** How long ago (ms) a read last showed the node in state UNKNOWN
 *  (slurmctld restarted, slurmd not registered again yet), UINT64_MAX when
 *  none did. */
uint64_t nc_unknown_ago(const nc_cache *c, const char *name);
/** 1 while a shrunken table answer is held for confirmation, or a table
 *  answer contradicted itself (a node listed twice): the cache is then not
 *  ready, and the table is read again. */
int nc_suspect(const nc_cache *c);
/** Why the table is held ("the node table answer listed node x twice"),
 *  NULL when it is not. Valid until the loop runs again. */
const char *nc_suspect_why(const nc_cache *c);
/** 1 while the node's last read showed a reason time more than 10 s ahead
 *  of the answer's clock (slurmctld's when the answer says it, else ours),
 *  and no read by name sent suspect_confirm_ms later has settled it: every
 *  decision about the node waits. Bounded: the re-read is sent by the
 *  cache itself; when it shows the same time, that is Slurm's own state
 *  and the hold ends (such a time never proves a drain, nc_drain_proved). */
int nc_contradicted(const nc_cache *c, const char *name);

/** Wall-clock time (epoch seconds) at which the current node table was last
 *  confirmed by a successful poll (the request's start), 0 when never. */
int64_t nc_confirmed_at(const nc_cache *c);

/** Call fn for every node of the current table (nothing when not ready). */
void nc_foreach(const nc_cache *c, void (*fn)(const sm_node *n, void *data), void *data);

/** Read name on its own every track_ms for the next ms milliseconds. */
void nc_track(nc_cache *c, const char *name, unsigned ms);
/** Stop tracking name (nc_track): its reads are no longer needed (its pod is
 *  being deleted). Tracked nodes beyond max_tracked are left to the table's
 *  poll, so nodes that need no more reads must not crowd out those that do. */
void nc_untrack(nc_cache *c, const char *name);
/** Poll the table as soon as possible. */
void nc_poll_soon(nc_cache *c);

/** A write completed: status as nb_done_cb. */
typedef void (*nc_write_cb)(const char *node, int status, void *data);

/**
 * Update a node through the batcher. Returns 0 when queued (cb runs later,
 * once); 1 when the same update (same content) is already in flight or
 * settling for this node (nothing is sent, cb never runs); or a negative
 * code (OP_EINVAL, OP_ECANCELED; cb never runs).
 */
int nc_update(nc_cache *c, const char *name, const sm_node_update *u, nc_write_cb cb, void *data);
/** Delete a node record; same convention. */
int nc_delete_node(nc_cache *c, const char *name, nc_write_cb cb, void *data);

/* ---- jobs ---- */

/** Start polling jobs (sticky). */
void nc_want_jobs(nc_cache *c);
/** 1 when the job list is current. */
int nc_jobs_ready(const nc_cache *c);
/** 1 when a job read proves that no job holds the node: the job list is
 *  current and read cleanly, the last job read was sent after our drain
 *  of the node was accepted (else after the first read that showed it
 *  drained, or Slurm's "no such node" for it) and at most max_age_ms ago, and no job of it (any state that
 * may hold a node: sm_job_holds_nodes) lists the node. No job starts on a drained node, so one such read is
 * proof for as long as the drain stays. Otherwise 0, and when only the read is missing one is sent at once
 * and on_node(name) fires when it completes. Starts job polling if needed. */
int nc_jobs_free(nc_cache *c, const char *name, unsigned max_age_ms);
/** 1 when the last job read failed, or its list named nodes that do not
 *  read as a hostlist (no node is then free of jobs). */
int nc_jobs_failed(const nc_cache *c);
/** A PENDING job of the current list. */
typedef struct nc_pending {
    uint32_t id;
    int32_t nodes;    /* the node count it asks for (1 when Slurm did not say) */
    char *partitions; /* comma-separated; "" when not reported */
    char *reason;     /* Slurm's state_reason; "" when not reported */
} nc_pending;
/** The PENDING jobs of the current job list, in the list's order; *out is
 *  valid until the loop runs again. 0 (and *out NULL) while the list is not
 *  current or its last read failed: no demand is inferred then. */
size_t nc_pending_jobs(const nc_cache *c, const nc_pending **out);
/** Read the job list every track_ms (instead of jobs_ms) for the next ms
 *  milliseconds; starts job polling. For owners that follow the queue. */
void nc_jobs_fast(nc_cache *c, unsigned ms);
/** 1 when a job of the current list holds the node, 0 when none does, -1
 *  when the list is not current or did not read cleanly. */
int nc_job_holds(const nc_cache *c, const char *name);
/** 1 when a job record of the current list, in any state (ended ones too:
 *  slurmctld keeps them MinJobAge, 300 s by default), is in that partition;
 *  0 when none is; -1 when the list is not current or its last read
 *  failed. */
int nc_job_in_partition(const nc_cache *c, const char *partition);
/** 1 when a job record of the current list, in any state (ended ones
 *  too), names the node; 0 when none does; -1 when the list is not current
 *  or did not read cleanly. A node record deleted while a job record still
 *  names it is what crashes some slurmctld versions. */
int nc_job_names(const nc_cache *c, const char *name);
/** The latest deadline (sm_job_deadline) of the running jobs on a node:
 *  0 when none runs there, SM_INFINITE when one has no limit. */
int64_t nc_deadline(const nc_cache *c, const char *name);

/* ---- controller pings ---- */

/** Start pinging (sticky). */
void nc_want_ping(nc_cache *c);
/** The index of the first responding controller (slurm.conf order), or
 *  OP_EUNKNOWN while no current ping result is known, OP_EUNAVAILABLE when
 *  none responds. */
int nc_active_controller(const nc_cache *c);

/* ---- reservations ---- */

/** Start polling reservations (sticky). */
void nc_want_reservations(nc_cache *c);
/** As nc_lookup, for a reservation. */
enum nc_found nc_reservation(const nc_cache *c, const char *name, const sm_resv **out);
/** Read the reservations again as soon as possible (after a write). */
void nc_resv_poll_soon(nc_cache *c);
/** A mark of the reservation reads sent so far; nc_resv_read_since(c, mark)
 *  is 1 once a read sent after the mark has completed, i.e. the reservations
 *  reflect everything that completed before the mark was taken. */
uint64_t nc_resv_mark(const nc_cache *c);
int nc_resv_read_since(const nc_cache *c, uint64_t mark);

enum nc_resv_op { NC_RESV_CREATE, NC_RESV_UPDATE, NC_RESV_DELETE };
/** 1 when this cluster's version and build can create and delete
 *  reservations (REST v0.0.43+, or the libslurm backend); 0 while the
 *  version is not negotiated yet. */
int nc_resv_writable(const nc_cache *c);
/**
 * Write a reservation: REST POST/DELETE reservation (v0.0.43+) or the
 * libslurm backend (backend.h); the reservations are read again when it
 * completes. For NC_RESV_DELETE only d->name is used. cb(status, data) runs
 * later, once. 0, OP_ENOTSUP (no path for this version and build; cb never
 * runs), OP_EINVAL, OP_ECANCELED.
 */
int nc_resv_write(nc_cache *c, enum nc_resv_op op, const sm_resv_desc *d, void (*cb)(int status, void *data),
                  void *data);

/** 1 when this cluster's version can create node records (REST v0.0.44+); 0 while the version is not
 *  negotiated yet. */
int nc_can_create_nodes(const nc_cache *c);
/**
 * Create node records from node_conf, a slurm.conf node line with a hostlist NodeName (sr_create_nodes):
 * all or none, OP_EEXISTS when one of them exists. Records made FUTURE are not in the table this cache
 * reads (slurmrestd lists no FUTURE node), and a read by name answers for them as for a name that has no
 * record, so nothing here changes until their slurmd register. cb(status, data) runs later, once. 0,
 * OP_ENOTSUP (no path for this version; cb never runs), OP_EINVAL, OP_ECANCELED.
 */
int nc_create_nodes(nc_cache *c, const char *node_conf, void (*cb)(int status, void *data), void *data);

/** The batcher (for writes other than node updates: none today). */
nb_batcher *nc_batcher(nc_cache *c);

typedef struct nc_stats {
    uint64_t polls;        /* node table requests */
    uint64_t not_modified; /* ... answered 304 */
    uint64_t full;         /* ... answered with the whole table */
    uint64_t errors;       /* ... failed */
    uint64_t retried;      /* ... failed with update_time and retried at once without it */
    uint64_t single_reads; /* GET node/{name} */
    uint64_t local_applies; /* comment-only writes applied to the cache without a read back */
    uint64_t held;         /* full answers held as suspect (shrunken table) */
    uint64_t bad_reads;    /* reads by name whose answer did not list the node */
    uint64_t contradictions; /* answers listing a node twice, reason times from the future */
    uint64_t events;       /* on_node calls (NULL included) */
    uint64_t bytes;        /* response bytes of every request of this cache */
    uint64_t last_full_ms; /* duration of the last full fetch (request to decoded) */
    unsigned interval_ms;  /* current poll interval */
    int64_t last_success;  /* wall clock seconds of the last successful poll */
    size_t nodes;
} nc_stats;
void nc_get_stats(const nc_cache *c, nc_stats *out);
/** The heap bytes the cached node table holds, as the allocator counts them
 *  (mem_footprint, core/mem.h): every node's entry with its strings, and the
 *  map. Kept up to date as nodes change, so it costs nothing to read. */
size_t nc_heap_bytes(const nc_cache *c);

#endif
