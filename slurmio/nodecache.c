#include "slurmio/nodecache.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/err.h"
#include "core/list.h"
#include "core/log.h"
#include "core/map.h"
#include "core/mem.h"
#include "core/pset.h"
#include "slurmio/backend.h"
#include "slurmio/hostlist.h"

#define FAIL_BACKOFF_MIN_MS 1000u
#define FAIL_BACKOFF_MAX_MS 5000u
/* A write nobody managed to read back settles anyway after this long, so a
 * node can never be stuck "settling" (reads failing mean unknown anyway). */
#define SETTLE_MAX_MS 60000u
/* How long a node that Slurm lost (nc_vanished) is remembered. Its pod is
 * deleted or kept long before; the bound keeps nodes removed by others
 * from piling up. */
#define LOST_KEEP_MS (60u * 60u * 1000u)
/* The same update asked for again after Slurm accepted it and a read showed
 * it had no effect: retried after 1 s, 2 s, ... up to this. */
#define REPEAT_BACKOFF_MAX_MS 60000u
/* The pause between two rounds of reads that prove nodes absent (max_tracked at once): at most ten rounds a
 * second, so slurmctld answers at most 10 x max_tracked single-node reads a second for them. */
#define PROOF_ROUND_MS 100u
/* How long nc_jobs_free keeps the job list read every track_ms after it
 * found a jobless node held by a job. */
#define JOBS_FAST_MS 60000u
/* Why a full answer is held (nc_cache.suspect_kind). */
#define SUSPECT_SHRINK 1
#define SUSPECT_CONTRADICTION 2
/* A reason time more than this far ahead of the answer's own clock (the
 * server's time when the answer carries one, else ours) is a contradiction:
 * slurmctld stamps a reason with its time() before it packs the answer. */
#define FUTURE_MAX_S 10
/* Slurm's error for a node name it does not know (ESLURM_INVALID_NODE_NAME):
 * the only answer that proves a node does not exist. */
#define SLURM_INVALID_NODE_NAME 2018

typedef struct nc_node {
    char *name; /* map key: the entry's own name_buf */
    sm_node n;
    /* 4-byte fields sit in pairs where the groups allow it: there is an
     * entry per Slurm node, and each hole before a uint64_t is paid per node. */
    int present;       /* in Slurm's current table */
    int prove; /* somebody waits for a read by name (nc_confirm_gone): never replaced by a table read */
    uint64_t read_seq; /* c->seq when the request that produced n was sent */
    uint64_t read_ms;  /* uv_now() when that request was sent */
    /* uv_now() at which a read of this node by name was sent that Slurm
     * answered "no such node"; 0 when none, or when a later read listed it. */
    uint64_t gone_ms;
    /* Our drains. A read that shows a drain proves it only when the drain's
     * reason time is newer than any this node showed before we sent ours:
     * an older answer replayed (by a proxy, a cache, a restarted server)
     * can show DRAIN, but never a reason time it had not seen. */
    int64_t max_reason_at; /* newest reason_changed_at any read of this node showed */
    int64_t drain_floor;   /* max_reason_at when our last drain was sent */
    int drain_state;       /* 0 none, 1 in flight, 2 accepted by Slurm */
    uint64_t drain_ok_ms;  /* uv_now() when it was accepted */
    /* uv_now() of the latest read (sent then) that showed the node in state
     * UNKNOWN: slurmctld restarted (perhaps without its state) and slurmd
     * has not registered yet; jobs it forgot may still run there until it
     * has, and been told to kill them. 0: never. */
    uint64_t unknown_ms;
    /* Lost nodes (nc_vanished). seen: a read in this cache's life listed
     * the node; busy: the last such read showed it not jobless; lost_ms:
     * uv_now() when it was first found absent after that, unless our own
     * delete of it had been accepted (deleted). 0 while present. */
    int seen;
    int busy;
    int deleted;
    uint64_t lost_ms;
    uint64_t listed_gen; /* c->table_gen of the last full table that listed it */
    /* c->order when an answer first showed the node with DRAIN (0 while
     * the last read showed none) and when an answer said Slurm has no such
     * node: a job read sent after that can prove that no job holds it (no
     * job starts on a drained node). */
    uint64_t drain_seen_order;
    uint64_t gone_seen_order;
    uint64_t drain_ok_order; /* c->order when our last drain was accepted */
    /* A read showed a reason time from the future (FUTURE_MAX_S past the
     * answer's clock): future_at that time, future_ms when the read that
     * first showed it was sent. Held (nc_contradicted) until a read by
     * name sent suspect_confirm_ms later shows a sane time, or the same one
     * (then it is Slurm's own state, future_ok: a clock that jumped back).
     * Never taken into max_reason_at, which it would stall for good. */
    int64_t future_at;
    uint64_t future_ms;
    int future_ok;
    /* The same update asked for again after Slurm accepted it and a read
     * showed no effect: backoff, and a wake-up once it has passed. */
    unsigned repeats;
    uint64_t retry_at;
    int retry_notify;
    /* writes */
    char *wkey;         /* content of the last write */
    int writing;        /* writes in flight (comment-only ones included) */
    int writing_comment; /* comment-only writes in flight: they change no state, so they never settle */
    char *ckey;          /* content of the last comment-only write, while one is in flight */
    uint64_t wdone_seq; /* c->seq right after the last write completed (0: none since read) */
    uint64_t wdone_ms;
    /* individual reads */
    uint64_t track_until; /* uv_now() ms */
    int reading;
    int want_read;     /* in c->reread */
    int settle_notify; /* tell the owner once the write has been read back */
    /* What this entry held on the heap when last counted (recount), so
     * that c->heap_bytes stays exact whatever changed it in between. */
    uint32_t bytes;
    list_node reread_link;
    list_node watch_link; /* in c->watched: retry_notify, prove or track_until set */
    /* n.comment was set by a comment-only write Slurm accepted, without a
     * read back; answers to requests sent before it (seq < local_seq) may
     * still carry the old comment and must not undo it. 0: none. */
    uint64_t local_seq;
    char name_buf[]; /* in the entry's allocation: one malloc less per node */
} nc_node;

typedef struct deadline_ent {
    char *name;
    int64_t deadline;
} deadline_ent;

/* Context of a request in flight (so a late completion after close finds
 * the cache still allocated: it is freed only when none are left). */
typedef struct nc_rq {
    nc_cache *c;
    char *name;
    uint64_t seq;      /* c->seq when sent */
    uint64_t sent_ms;  /* uv_now() */
    uint64_t sent_ns;  /* uv_hrtime() */
    int64_t sent_wall; /* epoch seconds */
    int64_t update_time;
    int64_t ref_time; /* the answer's clock for FUTURE_MAX_S (0: use ours when it arrived) */
    uint64_t order;   /* c->order when sent */
    int negotiating; /* the version was not known when sent: the time includes negotiation */
    int proof;       /* a read by name counted in proof_reads */
    nc_write_cb cb;
    void *data;
} nc_rq;

/* Slurm 22.05 (v0.0.38) answers a node poll with update_time by loading the
 * partitions with the same update_time; when the nodes changed but the
 * partitions did not, that second load "fails" with "no change" and the
 * whole answer becomes HTTP 500 "Unspecified error" (-1), the same shape as
 * a refused token. So a Slurm error on a poll that carried update_time is
 * retried at once without it, and only a failure of that full read makes
 * the cluster unknown. (Seen on the lab: every poll after a node write.) */

struct nc_cache {
    uv_loop_t *loop;
    char *name;
    sr_client *rest;
    sl_backend *lib;
    nb_batcher *batch;
    nc_opts o;
    pset nodes; /* the nc_nodes, by name (each holds its own) */
    uint64_t seq;
    /* Orders what happened on the loop exactly (uv_now() has a millisecond
     * and one value per iteration): answers applied, job reads sent. */
    uint64_t order;
    /* the node table */
    uv_timer_t poll_timer;
    int polling;
    int poll_again;
    int force_full;
    int ok;
    size_t n_present;
    /* A full answer that would drop more than shrink_pct of the table (or
     * goes back in time) is held, the cache reads as unknown, and the table
     * is read again; only a second answer sent suspect_confirm_ms later that
     * agrees is applied. */
    int suspect;
    int suspect_kind; /* SUSPECT_* */
    uint64_t suspect_ms;
    int64_t table_last_update; /* "last_update" of the applied table (v0.0.40+) */
    uint64_t last_ok_ms;
    int64_t confirmed_at;
    int64_t update_time;
    uint64_t last_full_ms; /* uv_now() of the last full fetch's request */
    unsigned interval_ms;
    unsigned backoff_ms;
    /* A full table being applied, APPLY_SLICE nodes per loop iteration
     * (apply_slice). apply_rq is the poll it answers (NULL: none); polling
     * stays set until the last slice is in. */
    uv_idle_t apply_idle;
    nc_rq *apply_rq;
    sm_node *apply_nodes; /* taken from the answer */
    size_t apply_n, apply_i, apply_listed;
    int apply_quiet;
    uint64_t table_gen; /* full tables applied (nc_node.listed_gen) */
    /* individual reads */
    uv_timer_t track_timer;
    list_node reread;
    size_t n_reread;
    /* Nodes with a timed reason to be looked at by track_tick (a tracked
     * read, a proof asked for, a repeated write's wake-up), so a tick costs
     * what is due and not a walk over the whole table: a tick follows every
     * write, and at 8,192 nodes the walk was the one cost of an event that
     * grew with the fleet. */
    list_node watched;
    size_t n_watched;
    /* Reads by name that prove a node absent (nc_confirm_gone) in flight, at most max_tracked; and whether a
     * tick left some for want of room. A round that ends with some left starts the next after
     * PROOF_ROUND_MS, not a whole track_ms: a scale-in of pods whose slurmd never registered needs one
     * proof per pod, and at max_tracked a second 8,192 of them took four minutes. */
    size_t proof_reads;
    int proofs_left;
    /* jobs */
    uv_timer_t jobs_timer;
    int want_jobs, jobs_polling, jobs_ok;
    uint64_t jobs_ok_ms;
    uint64_t jobs_ok_order; /* c->order when that read was sent */
    int64_t jobs_update_time;
    int64_t jobs_last_update; /* "last_update" of the applied job list (v0.0.40+) */
    int jobs_failed;          /* the last job read failed */
    int jobs_again;           /* a read was asked for while one was in flight */
    int jobs_confirm;         /* a vanished holder waits for a confirming read */
    uint64_t jobs_fast_until; /* uv_now() until which the list is read every track_ms (nc_jobs_free) */
    map_t deadlines; /* name -> deadline_ent */
    /* Nodes some job of the current list holds (sm_job_holds_nodes):
     * name -> name. jobs_bad: the list named nodes in a form that does not
     * expand; every node is then held. */
    map_t holders;
    map_t named; /* nodes a job record of the current list names (any state) */
    int jobs_bad;
    /* The partitions some job record of the current list (any state, ended
     * ones too, until MinJobAge purges them) is in: name -> name; and those
     * that left the list, kept until a read suspect_confirm_ms later agrees
     * (an empty or partial answer is not a purge): name -> uint64_t ms. */
    map_t job_parts;
    map_t job_parts_gone;
    map_t job_waiters; /* name -> name: told (on_node) when the next job read completes */
    /* The PENDING jobs of the current list, in its order (nc_pending_jobs). */
    nc_pending *pending;
    size_t n_pending;
    map_t jobs_vanished; /* name -> uint64_t ms: its holder left the list unseen ended (apply_jobs) */
    /* Why the table is held (c->suspect): for logs and the owner's Event. */
    char suspect_why[160];
    /* Why the last node poll failed ("" after a success): logged at info
     * level when it changes, not at every attempt, and named by the
     * owner's DrainBlockedSlurmUnknown Event (nc_unready_why). */
    char down_why[200];
    uint64_t born_ms; /* uv_now() at nc_new: the table's age before any read */
    /* pings */
    uv_timer_t ping_timer;
    int want_ping, ping_polling, ping_ok;
    uint64_t ping_ok_ms;
    int active;
    /* reservations */
    uv_timer_t resv_timer;
    int want_resv, resv_polling, resv_ok, resv_again;
    uint64_t resv_ok_ms;
    uint64_t resv_started; /* reads sent */
    uint64_t resv_read;    /* the number (resv_started) of the last read that completed */
    sm_resv *resvs;
    size_t n_resvs;
    /* lifetime */
    int closing;
    int requests; /* nc_rq in flight */
    int batch_open;
    int handles;
    void (*close_cb)(void *);
    void *close_data;
    nc_stats stats;
    size_t heap_bytes; /* the nodes' entries: the sum of their nc_node.bytes */
    /* metrics */
    mx_family *mx_polls, *mx_bytes, *mx_last, *mx_up, *mx_nodes, *mx_interval, *mx_writes, *mx_contra,
        *mx_age, *mx_heap;
};

/* ---- helpers ---- */

static int64_t wall(void)
{
    return (int64_t)time(NULL);
}

static const char *str0(const char *s)
{
    return s ? s : "";
}

static int node_differs(const sm_node *a, const sm_node *b)
{
    return a->base != b->base || a->flags != b->flags || a->flags_known != b->flags_known ||
           strcmp(str0(a->reason), str0(b->reason)) != 0 || strcmp(str0(a->comment), str0(b->comment)) != 0 ||
           strcmp(str0(a->features), str0(b->features)) != 0 ||
           strcmp(str0(a->active_features), str0(b->active_features)) != 0 ||
           strcmp(str0(a->topology), str0(b->topology)) != 0 ||
           strcmp(str0(a->reservation), str0(b->reservation)) != 0 ||
           strcmp(str0(a->partitions), str0(b->partitions)) != 0;
}

static nc_node *node_get(const nc_cache *c, const char *name)
{
    return pset_get(&c->nodes, name);
}

static size_t str_bytes(const char *s)
{
    return s ? mem_footprint(strlen(s) + 1) : 0;
}

/* A cached node's strings but its comment live in one block that starts
 * with its name: a node has ten strings, most of them short or empty, and
 * one malloc each cost a 32-byte chunk at least. The comment stays apart,
 * since comment-only writes replace it in place (apply_comment,
 * keep_local_comment). node_clear is the one way to release such a node;
 * sm_node_clear would free pointers into the block. */
static const size_t packed_off[] = {offsetof(sm_node, name),       offsetof(sm_node, reason),
                                    offsetof(sm_node, features),   offsetof(sm_node, active_features),
                                    offsetof(sm_node, topology),   offsetof(sm_node, reservation),
                                    offsetof(sm_node, partitions), offsetof(sm_node, address),
                                    offsetof(sm_node, hostname)};

static char **packed_field(sm_node *n, size_t i)
{
    return (char **)(void *)((char *)n + packed_off[i]);
}

static const char *packed_str(const sm_node *n, size_t i)
{
    return *(char *const *)(const void *)((const char *)n + packed_off[i]);
}

/* n's strings (from a decoded answer, one malloc each) into one block; a
 * field that is NULL stays NULL (readers tell "not reported" from ""), but
 * the name is always there, since the block is freed through it. */
static void node_pack(sm_node *n)
{
    size_t len = 0;
    for (size_t i = 0; i < ARRAY_SIZE(packed_off); i++)
        if (i == 0 || packed_str(n, i))
            len += strlen(str0(packed_str(n, i))) + 1;
    char *block = xmalloc(len), *p = block;
    for (size_t i = 0; i < ARRAY_SIZE(packed_off); i++) {
        char **f = packed_field(n, i);
        if (i > 0 && *f == NULL)
            continue;
        size_t l = strlen(str0(*f));
        memcpy(p, str0(*f), l + 1);
        free(*f);
        *f = p;
        p += l + 1;
    }
    assert(p == block + len && n->name == block);
}

/* Release a node whose strings node_pack packed (or an empty one). */
static void node_clear(sm_node *n)
{
    free(n->name); /* the block */
    free(n->comment);
    memset(n, 0, sizeof(*n));
}

/* What e holds on the heap, as the allocator counts it (core/mem.h). */
static size_t node_bytes(const nc_node *e)
{
    const sm_node *n = &e->n;
    size_t b = mem_footprint(sizeof(*e) + strlen(e->name) + 1) + str_bytes(e->wkey) + str_bytes(e->ckey) +
               str_bytes(n->comment);
    if (n->name) {
        size_t len = 0;
        for (size_t i = 0; i < ARRAY_SIZE(packed_off); i++)
            if (packed_str(n, i))
                len += strlen(packed_str(n, i)) + 1;
        b += mem_footprint(len);
    }
    return b;
}

/* After anything that changes what e holds: bring c->heap_bytes up to date. */
static void recount(nc_cache *c, nc_node *e)
{
    size_t b = node_bytes(e);
    assert(c->heap_bytes >= e->bytes);
    c->heap_bytes = c->heap_bytes - e->bytes + b;
    e->bytes = (uint32_t)b;
}

static void node_free(void *v);

static void node_drop(nc_cache *c, nc_node *e)
{
    assert(c->heap_bytes >= e->bytes);
    c->heap_bytes -= e->bytes;
    pset_del(&c->nodes, e);
    node_free(e);
}

static nc_node *node_ensure(nc_cache *c, const char *name)
{
    nc_node *e = pset_get(&c->nodes, name);
    if (e)
        return e;
    size_t len = strlen(name);
    e = xcalloc(1, sizeof(*e) + len + 1);
    memcpy(e->name_buf, name, len + 1);
    e->name = e->name_buf;
    list_init(&e->reread_link);
    list_init(&e->watch_link);
    pset_add(&c->nodes, e);
    recount(c, e);
    return e;
}

/* e got a reason for track_tick to look at it (see c->watched). */
static void watch(nc_cache *c, nc_node *e)
{
    if (!list_is_linked(&e->watch_link)) {
        list_insert_tail(&c->watched, &e->watch_link);
        c->n_watched++;
    }
}

static int settling(const nc_cache *c, const nc_node *e)
{
    if (e->writing > e->writing_comment)
        return 1;
    if (e->wkey == NULL || e->wdone_seq == 0)
        return 0;
    if (e->wdone_seq <= e->read_seq)
        return 0;
    return uv_now(c->loop) - e->wdone_ms < SETTLE_MAX_MS;
}

static int node_idle_entry(const nc_cache *c, const nc_node *e)
{
    uint64_t now = uv_now(c->loop);
    if (e->lost_ms && now - e->lost_ms < LOST_KEEP_MS)
        return 0; /* remembered for nc_vanished */
    return !e->present && !e->writing && !e->reading && !e->want_read && !e->prove && e->track_until <= now &&
           (e->gone_ms == 0 || now - e->gone_ms > SETTLE_MAX_MS) && !e->retry_notify && !settling(c, e);
}

/* A read listed the node (n is its new state). */
static void mark_present(nc_node *e)
{
    e->seen = 1;
    e->busy = sm_node_busy(&e->n);
    e->deleted = 0;
    e->lost_ms = 0;
}

/* A read found the node absent (sent at sent_ms). */
static void mark_absent(nc_node *e, uint64_t sent_ms)
{
    if (e->seen && !e->deleted && !e->lost_ms)
        e->lost_ms = sent_ms ? sent_ms : 1;
}

static void node_free(void *v)
{
    nc_node *e = v;
    if (list_is_linked(&e->reread_link))
        list_remove(&e->reread_link);
    if (list_is_linked(&e->watch_link))
        list_remove(&e->watch_link);
    node_clear(&e->n);
    free(e->ckey);
    free(e->wkey);
    free(e);
}

static const char *node_key(const void *e)
{
    return ((const nc_node *)e)->name;
}

/* Before a read answer replaces e->n: an answer to a request sent before
 * our last comment-only write completed keeps that comment; a newer answer
 * is Slurm's word and ends the override. */
static void keep_local_comment(nc_node *e, sm_node *n, uint64_t seq)
{
    if (e->local_seq == 0)
        return;
    if (seq < e->local_seq && e->present) {
        char *t = n->comment; /* e->n is replaced by n next: swap them */
        n->comment = e->n.comment;
        e->n.comment = t;
        return;
    }
    e->local_seq = 0;
}

static void fire(nc_cache *c, const char *name)
{
    if (c->closing)
        return;
    c->stats.events++;
    if (c->o.on_node)
        c->o.on_node(name, c->o.data);
}

static void set_ok(nc_cache *c, int ok)
{
    if (c->ok == ok)
        return;
    c->ok = ok;
    if (c->mx_up)
        mx_gauge_set(mx_gauge_get(c->mx_up, MX_LV(c->name)), ok);
    if (ok)
        log_info("slurm %s: node table readable again", c->name);
    else
        log_warn("slurm %s: node table unknown (%s); drains wait", c->name,
                 c->down_why[0] ? c->down_why : "Slurm unreachable or answering errors");
    fire(c, NULL);
}

/* A node poll failed: keep why, and say it at info level when it is not
 * what the last failure said (an operator tailing logs at info sees why
 * Slurm cannot be read once, not at every retry). */
static void note_down(nc_cache *c, int http_status, const char *message)
{
    char why[sizeof(c->down_why)];
    if (http_status > 0)
        snprintf(why, sizeof(why), "HTTP %d: %s", http_status, message);
    else
        snprintf(why, sizeof(why), "%s", message);
    if (strcmp(why, c->down_why) != 0)
        log_info("slurm %s: cannot read the node table: %s", c->name, why);
    else
        log_debug("slurm %s: node poll failed again: %s", c->name, why);
    memcpy(c->down_why, why, sizeof(why));
}

static nc_rq *rq_new(nc_cache *c, const char *name)
{
    nc_rq *r = xcalloc(1, sizeof(*r));
    r->c = c;
    r->name = name ? xstrdup(name) : NULL;
    r->seq = c->seq;
    r->sent_ms = uv_now(c->loop);
    r->sent_ns = uv_hrtime();
    r->sent_wall = wall();
    r->order = ++c->order;
    c->requests++;
    return r;
}

static void maybe_finish(nc_cache *c);

/* Release a request context; 1 when the cache is closing (the caller must
 * not touch the cache's state any more). */
static int rq_done(nc_rq *r)
{
    nc_cache *c = r->c;
    free(r->name);
    free(r);
    assert(c->requests > 0);
    c->requests--;
    if (c->closing) {
        maybe_finish(c);
        return 1;
    }
    return 0;
}

static void count_bytes(nc_cache *c, const sm_response *resp)
{
    (void)resp;
    sr_stats st;
    sr_get_stats(c->rest, &st);
    c->stats.bytes = st.bytes_in;
    if (c->mx_bytes)
        mx_gauge_set(mx_gauge_get(c->mx_bytes, MX_LV(c->name)), (double)st.bytes_in);
}

static void count_poll(nc_cache *c, const char *result)
{
    if (c->mx_polls)
        mx_counter_inc(mx_counter_get(c->mx_polls, MX_LV(c->name, result)));
}

/* ---- the node table ---- */

static void do_poll(uv_timer_t *t);

static void schedule_poll(nc_cache *c, unsigned ms)
{
    if (c->closing)
        return;
    uv_timer_start(&c->poll_timer, do_poll, ms, 0);
}

/* A full answer replaces the table APPLY_SLICE nodes per loop iteration.
 * Applied in one go, 8,192 nodes kept the loop for about 10 ms per poll,
 * and every pod or Node event that came in meanwhile waited behind them:
 * under churn that wait was the tail of event -> action at 8,192 pods and
 * hardly showed at 1,024. Between two slices each node holds either its
 * previous read or this one, each whole and with its own read_seq and
 * read_ms, as when a read by name lands between two table reads; what
 * concerns the table as a whole (nodes it no longer lists, n_present,
 * last_ok_ms, ok) changes only once the last slice is in, and no other table
 * read starts before (polling stays set). */
#define APPLY_SLICE 512

static unsigned poll_ok(nc_cache *c, const nc_rq *r);
static void poll_finish(nc_cache *c, nc_rq *r, unsigned next);

static void arm_track(nc_cache *c, unsigned ms);

static void contradiction(nc_cache *c, const char *kind)
{
    c->stats.contradictions++;
    if (c->mx_contra)
        mx_counter_inc(mx_counter_get(c->mx_contra, MX_LV(c->name, kind)));
}

/* The reason time of n, as read with r, against the answer's clock: a
 * time from the future is held (see nc_node.future_at) and never taken
 * into max_reason_at; the node is read again by name once
 * suspect_confirm_ms have passed. */
static void check_reason_time(nc_cache *c, nc_node *e, const sm_node *n, const nc_rq *r)
{
    int64_t ref = r->ref_time > 0 ? r->ref_time : wall();
    int64_t at = n->reason_changed_at;
    if (at <= ref + FUTURE_MAX_S) {
        if (e->future_ms)
            log_info("slurm %s: node %s: reason time back to %" PRId64 " (was %" PRId64 ", in the future)",
                     c->name, e->name, at, e->future_at);
        e->future_at = 0;
        e->future_ms = 0;
        e->future_ok = 0;
        if (at > e->max_reason_at)
            e->max_reason_at = at;
        return;
    }
    if (e->future_ms == 0 || e->future_at != at) {
        e->future_at = at;
        e->future_ms = r->sent_ms ? r->sent_ms : 1;
        e->future_ok = 0;
        contradiction(c, "future_time");
        log_warn("slurm %s: node %s: reason time %" PRId64 " is %" PRId64 " s ahead of the answer's clock; "
                 "holding every decision about the node until a read %u ms later says the same or otherwise",
                 c->name, e->name, at, at - ref, c->o.suspect_confirm_ms);
        watch(c, e);
        arm_track(c, c->o.suspect_confirm_ms);
    } else if (!e->future_ok && r->sent_ms >= e->future_ms + c->o.suspect_confirm_ms) {
        /* Two reads a while apart agree: Slurm's own state (its clock ran
         * ahead when it stamped the reason). Not a proof of our drain:
         * a drain of ours gets a new stamp, on the clock it has now. */
        e->future_ok = 1;
        log_warn("slurm %s: node %s: reason time %" PRId64
                 " in the future confirmed by a second read; no longer "
                 "held, never taken as proof of a drain",
                 c->name, e->name, at);
    }
}

/* A read listed e as n (sent with r): n's contents move into e, n is left
 * empty. 1 when the owner should look again (new to us, or different). */
static int take_listed(nc_cache *c, nc_node *e, sm_node *n, const nc_rq *r)
{
    keep_local_comment(e, n, r->seq);
    int changed = !e->present || node_differs(&e->n, n);
    int was_drain = e->present && sm_node_drain(&e->n);
    check_reason_time(c, e, n, r);
    node_clear(&e->n);
    e->n = *n;
    node_pack(&e->n);
    if (!sm_node_drain(&e->n))
        e->drain_seen_order = 0;
    else if (!was_drain || !e->drain_seen_order)
        e->drain_seen_order = ++c->order;
    if (e->n.base == SM_NODE_UNKNOWN)
        e->unknown_ms = r->sent_ms ? r->sent_ms : 1;
    memset(n, 0, sizeof(*n));
    e->present = 1;
    e->gone_ms = 0;
    e->gone_seen_order = 0;
    mark_present(e);
    recount(c, e);
    return changed;
}

/* One listed node of the table being applied. */
static void apply_node(nc_cache *c, sm_node *n)
{
    const nc_rq *r = c->apply_rq;
    if (!n->name || !n->name[0])
        return;
    nc_node *e = node_ensure(c, n->name);
    int changed = take_listed(c, e, n, r);
    e->read_seq = r->seq;
    e->read_ms = r->sent_ms;
    if (e->listed_gen != c->table_gen) {
        e->listed_gen = c->table_gen;
        c->apply_listed++; /* a name listed twice counts once */
    }
    if (e->settle_notify && !settling(c, e)) {
        e->settle_notify = 0;
        changed = 1; /* read back: let the owner decide again even if nothing shows */
    }
    if (changed && !c->apply_quiet)
        fire(c, e->name);
}

/* Drop the table being applied (the cache closes); the poll's context is
 * released by the caller. */
static nc_rq *apply_drop(nc_cache *c)
{
    nc_rq *r = c->apply_rq;
    for (size_t i = 0; i < c->apply_n; i++)
        sm_node_clear(&c->apply_nodes[i]);
    free(c->apply_nodes);
    c->apply_nodes = NULL;
    c->apply_n = c->apply_i = 0;
    c->apply_rq = NULL;
    uv_idle_stop(&c->apply_idle);
    return r;
}

/* The last slice is in: nodes the table no longer lists, then the poll's
 * end as for any successful read. */
static void apply_done(nc_cache *c)
{
    /* Copied: an owner may close the cache from fire(), which releases the
     * poll's context. */
    uint64_t seq = c->apply_rq->seq, sent_ms = c->apply_rq->sent_ms;
    /* Collect first: the map cannot change while being walked. */
    size_t it = 0, n_gone = 0;
    nc_node **gone = xcalloc(c->nodes.count + 1, sizeof(*gone));
    nc_node *e;
    while ((e = pset_next(&c->nodes, &it))) {
        if (e->listed_gen == c->table_gen)
            continue;
        if (e->present) {
            e->present = 0;
            e->read_seq = seq;
            e->read_ms = sent_ms;
            node_clear(&e->n);
            recount(c, e);
            mark_absent(e, sent_ms);
            if (!c->apply_quiet)
                fire(c, e->name);
        }
        gone[n_gone++] = e;
    }
    for (size_t i = 0; i < n_gone; i++) {
        if (node_idle_entry(c, gone[i]))
            node_drop(c, gone[i]);
    }
    free(gone);
    if (c->closing)
        return; /* an owner closed the cache from fire(): nc_close dropped the table */
    c->n_present = c->apply_listed;
    c->stats.nodes = c->apply_n;
    if (c->mx_nodes)
        mx_gauge_set(mx_gauge_get(c->mx_nodes, MX_LV(c->name)), (double)c->apply_n);
    nc_rq *done = apply_drop(c);
    c->polling = 0;
    poll_finish(c, done, poll_ok(c, done));
}

/* One slice per loop iteration, from an idle handle: while it is active
 * the loop polls for I/O without blocking, so what came in is handled
 * between two slices. (A zero timer started from a timer callback, where
 * answers are delivered, would run in the same pass of libuv's timers.) */
static void apply_slice(uv_idle_t *h)
{
    nc_cache *c = h->data;
    if (c->closing || !c->apply_rq)
        return;
    size_t end = c->apply_i + APPLY_SLICE < c->apply_n ? c->apply_i + APPLY_SLICE : c->apply_n;
    while (c->apply_i < end && !c->closing)
        apply_node(c, &c->apply_nodes[c->apply_i++]);
    if (c->closing)
        return; /* nc_close released the table */
    if (c->apply_i == c->apply_n)
        apply_done(c);
}

/* Take a full answer's nodes; the slices begin later in this iteration. */
static void apply_table(nc_cache *c, nc_rq *r, sm_response *resp, int was_ok)
{
    c->apply_rq = r;
    c->apply_nodes = resp->nodes;
    c->apply_n = resp->n_nodes;
    resp->nodes = NULL;
    resp->n_nodes = 0;
    c->apply_i = 0;
    c->apply_listed = 0;
    c->apply_quiet = !was_ok; /* becoming readable fires "everything" instead */
    c->table_gen++;
    uv_idle_start(&c->apply_idle, apply_slice);
}

static void set_suspect(nc_cache *c, int on)
{
    if (!on)
        c->suspect_why[0] = '\0';
    if (c->suspect == on)
        return;
    c->suspect = on;
    fire(c, NULL); /* every owner looks again (and finds unknown, or the new table) */
}

/* The first name listed twice in a full answer, NULL when none. A node has
 * one state: an answer with two (a buggy or hostile server, a proxy that
 * joins answers) is a contradiction, and which entry is true cannot be
 * told. */
static const char *duplicate_name(const sm_response *resp)
{
    map_t seen;
    map_init(&seen);
    const char *dup = NULL;
    for (size_t i = 0; i < resp->n_nodes && !dup; i++) {
        const char *name = resp->nodes[i].name;
        if (!name || !*name)
            continue;
        if (map_get(&seen, name))
            dup = name;
        else
            map_put(&seen, name, (void *)name);
    }
    map_free(&seen);
    return dup;
}

/* Whether a full answer may replace the table: 0 yes; 1 hold it (the
 * table would shrink by more than shrink_pct: read again and apply only
 * when a second answer agrees; or it lists a node twice: read again, and
 * never apply such an answer); OP_EPROTO when it is older than the table
 * we have (a replayed answer). Absence never proves anything on its own,
 * but a table that suddenly lacks nodes is more likely a lie or a partial
 * answer than a fleet that vanished, and nodes missing from it would lose
 * their pod-protect labels and conditions. */
static int check_table(nc_cache *c, const sm_response *resp, const nc_rq *r)
{
    if (resp->last_update > 0 && c->table_last_update > 0 && resp->last_update < c->table_last_update) {
        log_warn("slurm %s: a node table answer is older than the one we have (last_update %" PRId64
                 " < %" PRId64 "); ignored",
                 c->name, resp->last_update, c->table_last_update);
        return OP_EPROTO;
    }
    const char *dup = duplicate_name(resp);
    if (dup) {
        contradiction(c, "duplicate");
        if (c->suspect_kind != SUSPECT_CONTRADICTION)
            log_warn(
                "slurm %s: the node table answer lists node %s twice; holding every decision and reading it "
                "again",
                c->name, dup);
        snprintf(c->suspect_why, sizeof(c->suspect_why), "the node table answer listed node %.64s twice",
                 dup);
        c->suspect_kind = SUSPECT_CONTRADICTION;
        c->suspect_ms = r->sent_ms;
        set_suspect(c, 1);
        return 1;
    }
    size_t kept = 0;
    for (size_t i = 0; i < resp->n_nodes; i++) {
        const char *name = resp->nodes[i].name;
        const nc_node *e = name && *name ? node_get(c, name) : NULL;
        kept += e && e->present;
    }
    size_t vanished = c->n_present > kept ? c->n_present - kept : 0;
    size_t allowed = c->n_present * c->o.shrink_pct / 100u;
    if (vanished <= allowed) {
        if (c->suspect)
            log_info("slurm %s: node table back to %zu nodes; the held answer was not confirmed", c->name,
                     resp->n_nodes);
        c->suspect_kind = 0;
        set_suspect(c, 0);
        return 0;
    }
    if (c->suspect && c->suspect_kind == SUSPECT_SHRINK &&
        r->sent_ms >= c->suspect_ms + c->o.suspect_confirm_ms) {
        log_warn("slurm %s: node table shrank from %zu to %zu nodes, confirmed by a second read; applied",
                 c->name, c->n_present, kept);
        c->suspect = 0; /* the owners are told by the table's own events */
        c->suspect_kind = 0;
        c->suspect_why[0] = '\0';
        return 0;
    }
    if (!c->suspect || c->suspect_kind != SUSPECT_SHRINK) {
        /* A shrink after a contradiction starts its own confirmation. */
        log_warn("slurm %s: node table answer lacks %zu of %zu known nodes; holding every decision and "
                 "reading it again",
                 c->name, vanished, c->n_present);
        snprintf(c->suspect_why, sizeof(c->suspect_why),
                 "the node table answer lacked %zu of %zu known nodes", vanished, c->n_present);
        c->suspect_kind = SUSPECT_SHRINK;
        c->suspect_ms = r->sent_ms;
        set_suspect(c, 1);
    }
    return 1;
}

/* A node poll succeeded (a 304, or a full table now applied): the table is
 * confirmed as of r's request. The interval to the next poll. */
static unsigned poll_ok(nc_cache *c, const nc_rq *r)
{
    c->down_why[0] = '\0';
    c->last_ok_ms = r->sent_ms;
    c->confirmed_at = r->sent_wall;
    c->stats.last_success = r->sent_wall;
    if (c->mx_last)
        mx_gauge_set(mx_gauge_get(c->mx_last, MX_LV(c->name)), (double)wall());
    set_ok(c, 1);
    return c->interval_ms;
}

/* Every node poll ends here: release r and schedule the next one. */
static void poll_finish(nc_cache *c, nc_rq *r, unsigned next)
{
    if (c->mx_interval)
        mx_gauge_set(mx_gauge_get(c->mx_interval, MX_LV(c->name)), next / 1000.0);
    c->stats.interval_ms = next;
    if (rq_done(r))
        return;
    if (c->poll_again) {
        c->poll_again = 0;
        next = 0;
    }
    schedule_poll(c, next);
}

static void on_nodes(int status, sm_response *resp, void *data)
{
    nc_rq *r = data;
    nc_cache *c = r->c;
    c->polling = 0;
    if (c->closing) {
        rq_done(r);
        return;
    }
    count_bytes(c, resp);
    int was_ok = c->ok;
    unsigned next;
    int verdict = status == 0 && !resp->not_modified ? check_table(c, resp, r) : 0;
    if (verdict == 1) {
        /* Held: nothing applied, nothing confirmed; a full read follows. */
        c->stats.held++;
        count_poll(c, "held");
        c->update_time = 0;
        c->force_full = 1;
        if (rq_done(r))
            return;
        schedule_poll(c, c->o.suspect_confirm_ms);
        return;
    }
    if (verdict < 0) {
        status = verdict;
        if (!resp->err.message)
            resp->err.message = xstrdup("answer older than the table already read");
    }
    if (status < 0 && r->update_time > 0 && resp->err.http_status >= 500) {
        log_debug("slurm %s: node poll with update_time failed (%s); reading the whole table", c->name,
                  resp->err.message ? resp->err.message : err_str(status));
        c->stats.retried++;
        c->update_time = 0;
        c->force_full = 1;
        rq_done(r);
        if (!c->closing)
            do_poll(&c->poll_timer);
        return;
    }
    if (status < 0) {
        c->stats.errors++;
        count_poll(c, "error");
        note_down(c, resp->err.http_status, resp->err.message ? resp->err.message : err_str(status));
        c->backoff_ms = c->backoff_ms ? c->backoff_ms * 2 : FAIL_BACKOFF_MIN_MS;
        if (c->backoff_ms > FAIL_BACKOFF_MAX_MS)
            c->backoff_ms = FAIL_BACKOFF_MAX_MS;
        next = c->backoff_ms;
        c->update_time = 0; /* the next answer must be a whole table */
        set_ok(c, 0);
    } else if (resp->not_modified) {
        c->backoff_ms = 0;
        c->stats.not_modified++;
        count_poll(c, "not_modified");
        next = poll_ok(c, r);
    } else {
        c->backoff_ms = 0;
        uint64_t took_ms = (uv_hrtime() - r->sent_ns) / 1000000u;
        c->stats.full++;
        c->stats.last_full_ms = took_ms;
        count_poll(c, "full");
        if (resp->last_update > 0)
            c->table_last_update = resp->last_update;
        c->last_full_ms = r->sent_ms;
        /* Slurm answers 304 when nothing changed since update_time. Use
         * the server's own time when it says it (v0.0.40+), else ours
         * minus a margin against clock skew: asking a little early only
         * costs one more full answer after a change. Set now: no poll
         * reads it before the table is applied. */
        if (resp->last_update > 0)
            c->update_time = resp->last_update;
        else if (resp->server_time > 0 && resp->server_time_src != SM_TIME_HTTP_DATE)
            c->update_time = resp->server_time; /* slurmctld's clock (22.05: from diag) */
        else
            c->update_time = r->sent_wall - (int64_t)c->o.skew_margin_s;
        /* Adapt the interval to what a full answer costs (not counting
         * a version negotiation the first request waited for). */
        uint64_t want = r->negotiating ? c->o.poll_min_ms : took_ms * 2;
        if (want < c->o.poll_min_ms)
            want = c->o.poll_min_ms;
        if (want > c->o.poll_max_ms)
            want = c->o.poll_max_ms;
        log_debug("slurm %s: full node table (%zu nodes, update_time %" PRId64 ") took %" PRIu64
                  " ms; polling every %" PRIu64 " ms",
                  c->name, resp->n_nodes, r->update_time, took_ms, want);
        c->interval_ms = (unsigned)want;
        c->polling = 1; /* until the last slice is in (apply_done) */
        r->ref_time = resp->server_time_src != SM_TIME_NONE ? resp->server_time : 0;
        apply_table(c, r, resp, was_ok);
        return;
    }
    poll_finish(c, r, next);
}

static void do_poll(uv_timer_t *t)
{
    nc_cache *c = t->data;
    if (c->closing)
        return;
    if (c->polling) {
        c->poll_again = 1;
        return;
    }
    uint64_t now = uv_now(c->loop);
    int full = !c->ok || c->update_time == 0 || c->force_full || now - c->last_full_ms >= c->o.full_resync_ms;
    nc_rq *r = rq_new(c, NULL);
    r->update_time = full ? 0 : c->update_time;
    r->negotiating = sr_version(c->rest) == 0;
    c->force_full = 0;
    c->polling = 1;
    c->stats.polls++;
    if (sr_get_nodes(c->rest, r->update_time, on_nodes, r) < 0) {
        c->polling = 0;
        rq_done(r);
    }
}

void nc_poll_soon(nc_cache *c)
{
    if (c->closing)
        return;
    if (c->polling)
        c->poll_again = 1;
    else
        schedule_poll(c, 0);
}

/* ---- individual reads ---- */

static void track_tick(uv_timer_t *t);

static void arm_track(nc_cache *c, unsigned ms)
{
    if (c->closing)
        return;
    uint64_t due = uv_now(c->loop) + ms;
    if (uv_is_active((uv_handle_t *)&c->track_timer) &&
        uv_now(c->loop) + uv_timer_get_due_in(&c->track_timer) <= due)
        return;
    uv_timer_start(&c->track_timer, track_tick, ms, 0);
}

static void on_node_read(int status, sm_response *resp, void *data)
{
    nc_rq *r = data;
    nc_cache *c = r->c;
    if (c->closing) {
        rq_done(r);
        return;
    }
    count_bytes(c, resp);
    nc_node *e = node_get(c, r->name);
    if (e)
        e->reading = 0;
    if (r->proof) {
        assert(c->proof_reads > 0);
        if (--c->proof_reads == 0 && c->proofs_left)
            arm_track(c, PROOF_ROUND_MS);
    }
    /* Only the node asked for counts: an answer without it (an empty list,
     * another node) proves nothing and changes nothing. */
    sm_node *got = NULL;
    size_t hits = 0;
    for (size_t i = 0; status == 0 && i < resp->n_nodes; i++)
        if (resp->nodes[i].name && strcmp(resp->nodes[i].name, r->name) == 0) {
            got = &resp->nodes[i];
            hits++;
        }
    if (hits > 1) {
        /* The node twice in one answer: a contradiction, never a reading. */
        contradiction(c, "duplicate");
        log_warn("slurm %s: the answer to a read of node %s lists it %zu times; ignored", c->name, r->name,
                 hits);
        got = NULL;
        status = OP_EPROTO;
    }
    if (got)
        r->ref_time = resp->server_time_src != SM_TIME_NONE ? resp->server_time : 0;
    /* And only Slurm's own "no such node" says it does not exist. */
    int unknown_to_slurm = status == OP_ENOTFOUND && (resp->err.slurm_errno == SLURM_INVALID_NODE_NAME ||
                                                      (resp->err.no_such_node && r->name &&
                                                       strcmp(resp->err.no_such_node, r->name) == 0));
    if (got == NULL && !unknown_to_slurm && (status == 0 || status == OP_ENOTFOUND)) {
        c->stats.bad_reads++;
        log_warn("slurm %s: the answer to a read of node %s does not list it (%zu other nodes); ignored",
                 c->name, r->name, resp->n_nodes);
    }
    if (e && (got || unknown_to_slurm)) {
        int changed;
        if (got && log_enabled(LOGL_DEBUG) && e->track_until > uv_now(c->loop)) {
            /* What a tracked node read by name showed: a condemned pod's
             * wait, step by step (at most max_tracked such reads a tick). */
            buf_t st;
            buf_init(&st, 256);
            sm_node_state_str(got, &st);
            log_debug("slurm %s: tracked node %s read by name: %s", c->name, r->name, buf_cstr(&st));
            buf_free(&st);
        }
        if (got) {
            c->n_present += !e->present;
            changed = take_listed(c, e, got, r);
        } else {
            changed = e->present;
            c->n_present -= e->present && c->n_present > 0;
            e->present = 0;
            node_clear(&e->n);
            recount(c, e);
            e->gone_ms = r->sent_ms ? r->sent_ms : 1;
            e->gone_seen_order = ++c->order;
            e->drain_seen_order = 0;
            mark_absent(e, r->sent_ms);
        }
        if (r->seq >= e->read_seq) {
            e->read_seq = r->seq;
            e->read_ms = r->sent_ms;
        }
        if (e->settle_notify && !settling(c, e)) {
            e->settle_notify = 0;
            changed = 1; /* read back: let the owner decide again even if nothing shows */
        }
        if (e->prove) {
            e->prove = 0;
            changed = 1; /* the owner waits for this answer */
        }
        if (changed && c->ok)
            fire(c, e->name);
    }
    rq_done(r);
}

static void read_node(nc_cache *c, nc_node *e, int proof)
{
    if (e->reading)
        return;
    nc_rq *r = rq_new(c, e->name);
    e->reading = 1;
    r->proof = proof;
    c->proof_reads += (size_t)proof;
    c->stats.single_reads++;
    if (sr_get_node(c->rest, e->name, on_node_read, r) < 0) {
        e->reading = 0;
        c->proof_reads -= (size_t)proof;
        rq_done(r);
    }
}

static void track_tick(uv_timer_t *t)
{
    nc_cache *c = t->data;
    if (c->closing)
        return;
    uint64_t now = uv_now(c->loop);
    /* Who needs a read: nodes just written (c->reread), and tracked nodes
     * when the table's own interval is longer than ours (c->watched). */
    size_t n = 0, tracked = 0, rereads = c->n_reread, n_proofs = 0, waking = 0;
    int left = 0;
    nc_node **due = xcalloc(c->n_reread + c->n_watched + 1, sizeof(*due));
    nc_node **proofs = xcalloc(c->n_watched + 1, sizeof(*proofs));
    list_node *l, *next;
    for (l = c->watched.next; l != &c->watched; l = next) {
        next = l->next;
        nc_node *e = list_entry(l, nc_node, watch_link);
        if (e->retry_notify) {
            if (e->retry_at <= now) {
                e->retry_notify = 0;
                fire(c, e->name); /* its repeated write may go out again */
            } else {
                waking++;
            }
        }
        waking += (size_t)e->prove;
        int track = e->track_until > now;
        tracked += (size_t)track;
        int future = e->future_ms && !e->future_ok && e->present;
        if (future && now >= e->future_ms + c->o.suspect_confirm_ms && !e->reading && !e->want_read &&
            !e->prove && n < c->o.max_tracked)
            due[n++] = e; /* the re-read that settles a reason time from the future */
        else if (future)
            waking++;
        if (!e->retry_notify && !e->prove && !track && !future) {
            assert(c->n_watched > 0);
            list_remove(&e->watch_link);
            c->n_watched--;
            continue;
        }
        if (e->prove && !e->reading) {
            /* Only a read by name can say a node does not exist: never
             * folded into a table read. */
            if (n_proofs + c->proof_reads < c->o.max_tracked)
                proofs[n_proofs++] = e;
            else
                left = 1;
            continue;
        }
        if (track && !future && c->interval_ms > c->o.track_ms && !e->want_read && !e->reading)
            due[n++] = e; /* a node also in c->reread is taken below */
    }
    while ((l = list_first(&c->reread))) {
        nc_node *e = list_entry(l, nc_node, reread_link);
        list_remove(l);
        e->want_read = 0;
        if (!e->reading && !e->prove)
            due[n++] = e;
    }
    c->n_reread = 0;
    c->proofs_left = left;
    for (size_t i = 0; i < n_proofs; i++)
        read_node(c, proofs[i], 1);
    free(proofs);
    if (n <= c->o.max_tracked) {
        for (size_t i = 0; i < n; i++)
            read_node(c, due[i], 0);
    } else {
        /* Many nodes were just written, or are tracked: one whole table is
         * cheaper than that many single reads, and the table's own poll
         * serves them. Except the tracked nodes with a job: a scale-in
         * tracks every node it drains, the idle ones until the next table
         * read proves them free, and the busy ones wait for their job's
         * end, which a read by name shows within track_ms where the table
         * (seconds a read at fleet size) shows it one or two polls late.
         * A node has a job while the job list says one holds it, and also
         * while its own last reading is not jobless: the list can show the
         * job ended before the node does (COMPLETING, or a read by name
         * sent just before the end), and that node's pod waits for a
         * reading that shows it free. Those are read by name, up to
         * max_tracked. */
        size_t k = 0;
        for (size_t i = 0; i < n && k < c->o.max_tracked; i++) {
            const nc_node *e = due[i];
            int has_job = map_get(&c->holders, e->name) || (e->present && !sm_node_jobless(&e->n));
            if (e->track_until > now && !e->reading && has_job) {
                read_node(c, due[i], 0);
                k++;
            }
        }
        if (rereads) {
            c->force_full = 1;
            nc_poll_soon(c);
        }
    }
    free(due);
    if (tracked || waking)
        arm_track(c, c->o.track_ms);
}

void nc_track(nc_cache *c, const char *name, unsigned ms)
{
    if (c->closing || !name || !*name)
        return;
    nc_node *e = node_ensure(c, name);
    uint64_t until = uv_now(c->loop) + ms;
    if (until > e->track_until)
        e->track_until = until;
    watch(c, e);
    arm_track(c, c->o.track_ms);
}

void nc_untrack(nc_cache *c, const char *name)
{
    nc_node *e = name ? node_get(c, name) : NULL;
    if (e)
        e->track_until = 0; /* the tick drops it from c->watched when nothing else holds it */
}

static void want_read(nc_cache *c, nc_node *e)
{
    if (!e->want_read) {
        e->want_read = 1;
        list_insert_tail(&c->reread, &e->reread_link);
        c->n_reread++;
    }
    arm_track(c, 0);
}

/* ---- writes ---- */

typedef struct nc_write {
    nc_cache *c;
    char *name;
    char *comment; /* set when the write changes nothing but the comment */
    int drain;     /* a drain (its acceptance starts nc_drain_proved's wait) */
    int del;       /* a delete of the node record */
    nc_write_cb cb;
    void *data;
} nc_write;

/* A comment-only write that Slurm accepted is applied to the cached node
 * instead of being read back. Pod info is one such write per node with a
 * different comment each, so it cannot share a hostlist request; reading
 * each back (one GET per node, or the whole table when many are due) and
 * then waking the NodeSet to look again cost a full pass per node, which at
 * 8,192 nodes kept the operator busy for minutes after a scale-out. A
 * comment changes no state, so nothing else waits for the read. */
static int apply_comment(nc_cache *c, nc_node *e, const char *comment)
{
    if (!e->present)
        return 0;
    free(e->n.comment);
    e->n.comment = xstrdup(comment);
    recount(c, e);
    /* Not a read: read_seq stays, so a state write of the node that is
     * still unread keeps settling. */
    e->local_seq = ++c->seq;
    return 1;
}

static void jobs_read_soon(nc_cache *c);

static void on_written(const char *node, int status, void *data)
{
    nc_write *w = data;
    nc_cache *c = w->c;
    if (!c->closing) {
        nc_node *e = node_get(c, w->name);
        /* A node with a write in flight is never dropped (node_idle_entry). */
        assert(e != NULL);
        if (e) {
            assert(e->writing > 0 && (!w->comment || e->writing_comment > 0));
            assert(e->drain_state >= 0 && e->drain_state <= 2);
            e->writing--;
            if (w->comment && --e->writing_comment == 0) {
                free(e->ckey); /* only needed to spot a repeat in flight */
                e->ckey = NULL;
                recount(c, e);
            }
            if (w->comment && (status == 0 || status == OP_ECANCELED)) {
                if (status == 0 && apply_comment(c, e, w->comment))
                    c->stats.local_applies++;
                else if (status == 0)
                    want_read(c, e); /* not in the table yet: read it */
            } else if (w->comment) {
                /* Refused: the next pass may ask again; read the node, which
                 * may be gone. State writes are untouched. */
                want_read(c, e);
            } else if (status == 0) {
                e->wdone_seq = ++c->seq;
                e->wdone_ms = uv_now(c->loop);
                e->settle_notify = 1;
                if (w->drain && e->drain_state == 1) {
                    e->drain_state = 2;
                    e->drain_ok_ms = uv_now(c->loop);
                    /* From now on no job starts there: a job read sent
                     * after this proves what holds the node (nc_jobs_free).
                     * Sent now, it is back by the time the node's own read
                     * back shows the drain: the idle victims of a scale-in
                     * need no pass more than before. */
                    e->drain_ok_order = ++c->order;
                    jobs_read_soon(c);
                }
                if (w->del) {
                    e->deleted = 1; /* its absence from now on is ours */
                    e->lost_ms = 0;
                }
                want_read(c, e);
            } else if (w->drain && e->drain_state == 1) {
                e->drain_state = 0; /* refused or canceled: nothing to prove */
            }
            if (!w->comment && status != 0 && status != OP_ECANCELED) {
                /* Not settling: the next pass decides again. Read the node
                 * anyway: a refused write may still have changed it (22.05
                 * clears DRAIN of a never-registered node and then answers
                 * 2028), and a missing node should show as absent. */
                free(e->wkey);
                e->wkey = NULL;
                recount(c, e);
                e->wdone_seq = 0;
                want_read(c, e);
            }
        }
        if (c->mx_writes)
            mx_counter_inc(mx_counter_get(c->mx_writes, MX_LV(c->name, status == 0 ? "ok" : "error")));
    }
    if (w->cb)
        w->cb(node, status, w->data);
    free(w->comment);
    free(w->name);
    free(w);
    assert(c->requests > 0);
    c->requests--;
    if (c->closing)
        maybe_finish(c);
}

static int start_write(nc_cache *c, const char *name, const char *key, const sm_node_update *u,
                       nc_write_cb cb, void *data)
{
    if (c->closing)
        return OP_ECANCELED;
    if (!name || !hostlist_name_valid(name))
        return OP_EINVAL;
    nc_node *e = node_ensure(c, name);
    int comment_only = u && u->set == SM_UPD_COMMENT;
    if (comment_only && e->writing_comment && e->ckey && strcmp(e->ckey, key) == 0)
        return 1;
    if (!comment_only && e->wkey && strcmp(e->wkey, key) == 0) {
        if (settling(c, e))
            return 1;
        if (e->wdone_seq) {
            /* Slurm accepted this very update and a read since shows it had
             * no effect (the caller would not ask again otherwise): retry,
             * but back off instead of every pass, and wake the owner when
             * the next try is due. */
            uint64_t now = uv_now(c->loop);
            if (now >= e->retry_at + 2 * REPEAT_BACKOFF_MAX_MS)
                e->repeats = 0; /* long ago: a new story */
            else if (now < e->retry_at) {
                e->retry_notify = 1;
                watch(c, e);
                arm_track(c, (unsigned)(e->retry_at - now));
                return 1;
            }
            unsigned delay = 1000u << (e->repeats < 6 ? e->repeats : 6);
            if (delay > REPEAT_BACKOFF_MAX_MS)
                delay = REPEAT_BACKOFF_MAX_MS;
            if (++e->repeats == 3)
                log_warn(
                    "slurm %s: node %s: Slurm accepts the same update but reads do not show it; retrying "
                    "with backoff (up to %u s)",
                    c->name, name, REPEAT_BACKOFF_MAX_MS / 1000u);
            e->retry_at = now + delay;
        }
    } else if (!comment_only) {
        e->repeats = 0;
        e->retry_at = 0;
    }
    nc_write *w = xcalloc(1, sizeof(*w));
    w->c = c;
    w->name = xstrdup(name);
    w->cb = cb;
    w->data = data;
    if (comment_only)
        w->comment = xstrdup(u->comment ? u->comment : "");
    w->del = u == NULL;
    int rc = u ? nb_update(c->batch, name, u, on_written, w) : nb_delete(c->batch, name, on_written, w);
    if (rc < 0) {
        free(w->comment);
        free(w->name);
        free(w);
        if (node_idle_entry(c, e))
            node_drop(c, e);
        return rc;
    }
    c->requests++;
    e->writing++;
    if (comment_only) {
        e->writing_comment++;
        assert(e->writing_comment <= e->writing);
        free(e->ckey);
        e->ckey = xstrdup(key);
        recount(c, e);
        return 0;
    }
    free(e->wkey);
    e->wkey = xstrdup(key);
    recount(c, e);
    e->wdone_seq = 0;
    if (u && (u->set & SM_UPD_STATE)) {
        w->drain = u->state == SM_REQ_DRAIN;
        e->drain_state = w->drain ? 1 : 0;
        if (w->drain)
            e->drain_floor = e->max_reason_at;
    }
    return 0;
}

int nc_update(nc_cache *c, const char *name, const sm_node_update *u, nc_write_cb cb, void *data)
{
    if (!u || !u->set)
        return OP_EINVAL;
    char *key = nb_update_key(u);
    int rc = start_write(c, name, key, u, cb, data);
    free(key);
    return rc;
}

int nc_delete_node(nc_cache *c, const char *name, nc_write_cb cb, void *data)
{
    return start_write(c, name, "DELETE", NULL, cb, data);
}

/* ---- jobs ---- */

static void do_jobs(uv_timer_t *t);

static void deadline_free(void *v)
{
    deadline_ent *d = v;
    free(d->name);
    free(d);
}

static const map_type deadline_type = {.val_free = deadline_free};

/* jobs_vanished: the key is its own copy, the value a uint64_t. */
static void free_key(char *key)
{
    free(key);
}
static const map_type vanished_type = {.val_free = free, .key_free = free_key};

/* Put name in set (key and value one copy); 1 when it was not there. */
static int name_set_add(map_t *set, const char *name)
{
    if (map_get(set, name))
        return 0;
    char *k = xstrdup(name);
    map_put(set, k, k);
    return 1;
}

/* Fire for every name in a that b lacks. */
static void fire_missing(nc_cache *c, const map_t *a, const map_t *b)
{
    size_t it = 0;
    const char *k;
    void *v;
    while (map_next(a, &it, &k, &v))
        if (!map_get(b, k))
            fire(c, k);
}

static void pending_clear(nc_cache *c)
{
    for (size_t i = 0; i < c->n_pending; i++) {
        free(c->pending[i].partitions);
        free(c->pending[i].reason);
    }
    free(c->pending);
    c->pending = NULL;
    c->n_pending = 0;
}

static void apply_jobs(nc_cache *c, const sm_response *resp, const nc_rq *r)
{
    map_t nm, holders, named, parts;
    map_init_type(&parts, &map_type_free_val);
    map_init_type(&nm, &deadline_type);
    map_init_type(&holders, &map_type_free_val);
    map_init_type(&named, &map_type_free_val);
    int bad = 0;
    pending_clear(c);
    c->pending = xcalloc(resp->n_jobs + 1, sizeof(*c->pending));
    for (size_t i = 0; i < resp->n_jobs; i++) {
        const sm_job *j = &resp->jobs[i];
        int run = j->state == SM_JOB_RUNNING, holds = sm_job_holds_nodes(j);
        if (j->state == SM_JOB_PENDING && !(j->flags & SM_JF_OTHER)) {
            nc_pending *pj = &c->pending[c->n_pending++];
            pj->id = j->id;
            pj->nodes = j->node_count > 0 ? j->node_count : 1;
            pj->partitions = xstrdup(str0(j->partition));
            pj->reason = xstrdup(str0(j->reason));
        }
        for (const char *p = j->partition; p && *p;) {
            const char *e = strchr(p, ',');
            size_t len = e ? (size_t)(e - p) : strlen(p);
            char part[256];
            if (len && len < sizeof(part)) {
                memcpy(part, p, len);
                part[len] = '\0';
                name_set_add(&parts, part);
            }
            p = e ? e + 1 : p + len;
        }
        if (!j->nodes || !j->nodes[0])
            continue;
        hostlist_names hn;
        if (hostlist_expand(j->nodes, 0, &hn) < 0) {
            /* Which nodes it holds cannot be told: none is proven free. */
            if (!bad)
                log_warn("slurm %s: job %" PRIu32 " lists nodes \"%.64s\" that do not read as a hostlist; no "
                         "node counts as free of jobs until the list reads cleanly",
                         c->name, j->id, j->nodes);
            bad = 1;
            hostlist_names_free(&hn);
            continue;
        }
        int64_t dl = sm_job_deadline(j);
        for (size_t k = 0; k < hn.n; k++) {
            name_set_add(&named, hn.names[k]);
            if (holds)
                name_set_add(&holders, hn.names[k]);
            if (!run)
                continue;
            deadline_ent *d = map_get(&nm, hn.names[k]);
            if (!d) {
                d = xcalloc(1, sizeof(*d));
                d->name = xstrdup(hn.names[k]);
                map_put(&nm, d->name, d);
            }
            if (dl > d->deadline)
                d->deadline = dl;
        }
        hostlist_names_free(&hn);
    }
    /* A job that held a node does not leave the list without being seen
     * ended (slurmctld keeps ended jobs for MinJobAge, 300 s by default):
     * a list where the node's holder is simply gone (an empty or partial
     * answer, a proxy) keeps the node held until a list sent
     * suspect_confirm_ms later says the same (slurmctld restarted without
     * its state, or the job was purged while we did not look). */
    size_t it = 0;
    const char *k;
    void *v;
    while (map_next(&c->holders, &it, &k, &v)) {
        if (map_get(&holders, k) || map_get(&named, k))
            continue;
        uint64_t *since = map_get(&c->jobs_vanished, k);
        if (since == NULL) {
            since = xmalloc(sizeof(*since));
            *since = r->sent_ms ? r->sent_ms : 1;
            map_put(&c->jobs_vanished, xstrdup(k), since);
            contradiction(c, "job_vanished");
            log_warn(
                "slurm %s: the job list no longer shows the job that held node %s, nor its end; the node "
                "stays held until a read %u ms later agrees",
                c->name, k, c->o.suspect_confirm_ms);
        }
        if (r->sent_ms < *since + c->o.suspect_confirm_ms) {
            name_set_add(&holders, k);
            c->jobs_confirm = 1; /* the confirming read, suspect_confirm_ms from now */
        }
    }
    it = 0;
    size_t n_drop = 0;
    char **drop = xcalloc(c->jobs_vanished.count + 1, sizeof(*drop));
    while (map_next(&c->jobs_vanished, &it, &k, &v))
        if (!map_get(&holders, k))
            drop[n_drop++] = xstrdup(k);
    for (size_t i = 0; i < n_drop; i++) {
        map_drop(&c->jobs_vanished, drop[i]);
        free(drop[i]);
    }
    free(drop);
    /* A node no job record names any more may have its record deleted
     * (nc_job_names): its owner hears of it. */
    fire_missing(c, &c->named, &named);
    map_free(&c->named);
    c->named = named;
    /* Fire for every node whose deadline changed, appeared or went. */
    it = 0;
    while (map_next(&nm, &it, &k, &v)) {
        deadline_ent *o = map_get(&c->deadlines, k);
        if (!o || o->deadline != ((deadline_ent *)v)->deadline)
            fire(c, k);
    }
    it = 0;
    while (map_next(&c->deadlines, &it, &k, &v))
        if (!map_get(&nm, k))
            fire(c, k);
    map_free(&c->deadlines);
    c->deadlines = nm;
    /* ... and for every node a job took or left (a drained node's pod may
     * go once the last one left it). */
    fire_missing(c, &holders, &c->holders);
    fire_missing(c, &c->holders, &holders);
    map_free(&c->holders);
    c->holders = holders;
    c->jobs_bad = bad;
    /* A partition whose records all left the list: slurmctld purged them,
     * or the answer lost them. Kept until a read sent suspect_confirm_ms
     * later agrees; one listed again starts afresh. */
    map_t kept;
    map_init_type(&kept, &map_type_free_val);
    it = 0;
    while (map_next(&c->job_parts, &it, &k, &v)) {
        if (map_get(&parts, k))
            continue;
        uint64_t *since = map_get(&c->job_parts_gone, k);
        if (since == NULL) {
            since = xmalloc(sizeof(*since));
            *since = r->sent_ms ? r->sent_ms : 1;
            map_put(&c->job_parts_gone, xstrdup(k), since);
        }
        if (r->sent_ms < *since + c->o.suspect_confirm_ms) {
            name_set_add(&kept, k);
            c->jobs_confirm = 1;
        }
    }
    n_drop = 0;
    drop = xcalloc(c->job_parts_gone.count + 1, sizeof(*drop));
    it = 0;
    while (map_next(&c->job_parts_gone, &it, &k, &v))
        if (!map_get(&kept, k))
            drop[n_drop++] = xstrdup(k);
    for (size_t i = 0; i < n_drop; i++) {
        map_drop(&c->job_parts_gone, drop[i]);
        free(drop[i]);
    }
    free(drop);
    it = 0;
    while (map_next(&kept, &it, &k, &v))
        name_set_add(&parts, k);
    map_free(&kept);
    map_free(&c->job_parts);
    c->job_parts = parts;
}

/* A job read ended (either way): tell those who wait for one. */
static void wake_job_waiters(nc_cache *c)
{
    if (!c->job_waiters.count)
        return;
    map_t w = c->job_waiters;
    map_init_type(&c->job_waiters, &map_type_free_val);
    size_t it = 0;
    const char *k;
    void *v;
    while (map_next(&w, &it, &k, &v))
        fire(c, k);
    map_free(&w);
}

static void on_jobs(int status, sm_response *resp, void *data)
{
    nc_rq *r = data;
    nc_cache *c = r->c;
    assert(c->jobs_polling); /* one job read at a time */
    c->jobs_polling = 0;
    if (c->closing) {
        rq_done(r);
        return;
    }
    count_bytes(c, resp);
    if (status < 0 && r->update_time > 0 && resp->err.http_status >= 500) {
        /* As for nodes: read the whole list at once before giving up. */
        c->jobs_update_time = 0;
        c->jobs_ok = 0;
        rq_done(r);
        if (!c->closing)
            uv_timer_start(&c->jobs_timer, do_jobs, 0, 0);
        return;
    }
    if (status == 0 && !resp->not_modified && resp->last_update > 0 && c->jobs_last_update > 0 &&
        resp->last_update < c->jobs_last_update) {
        /* Older than the list we have: a replayed answer, never applied. */
        log_warn("slurm %s: a job list answer is older than the one we have (last_update %" PRId64
                 " < %" PRId64 "); ignored",
                 c->name, resp->last_update, c->jobs_last_update);
        status = OP_EPROTO;
    }
    c->jobs_failed = status < 0;
    log_debug("slurm %s: job read (update_time %" PRId64 "): %s, %zu jobs", c->name, r->update_time,
              status < 0 ? err_str(status) : resp->not_modified ? "not modified" : "list", resp->n_jobs);
    if (status < 0) {
        if (c->jobs_ok)
            log_debug("slurm %s: job poll failed: %s", c->name, resp->err.message ? resp->err.message : "");
        c->jobs_ok = 0;
        c->jobs_update_time = 0;
    } else {
        if (!resp->not_modified) {
            apply_jobs(c, resp, r);
            if (resp->last_update > 0)
                c->jobs_last_update = resp->last_update;
            /* As for the node table: slurmctld's clock when the answer
             * says it (v0.0.40+), or the estimate from diag (22.05), else
             * ours minus the margin. */
            if (resp->last_update > 0)
                c->jobs_update_time = resp->last_update;
            else if (resp->server_time > 0 && resp->server_time_src != SM_TIME_HTTP_DATE)
                c->jobs_update_time = resp->server_time;
            else
                c->jobs_update_time = r->sent_wall - c->o.skew_margin_s;
        }
        c->jobs_ok = 1;
        c->jobs_ok_ms = r->sent_ms;
        c->jobs_ok_order = r->order;
    }
    wake_job_waiters(c);
    if (rq_done(r))
        return;
    unsigned next = status < 0 ? FAIL_BACKOFF_MAX_MS / 2 : c->o.jobs_ms;
    if (status == 0 && uv_now(c->loop) < c->jobs_fast_until && next > c->o.track_ms)
        next = c->o.track_ms;
    if (c->jobs_confirm && next > c->o.suspect_confirm_ms)
        next = c->o.suspect_confirm_ms;
    c->jobs_confirm = 0;
    if (c->jobs_again)
        next = 0;
    c->jobs_again = 0;
    uv_timer_start(&c->jobs_timer, do_jobs, next, 0);
}

static void do_jobs(uv_timer_t *t)
{
    nc_cache *c = t->data;
    if (c->closing || c->jobs_polling)
        return;
    nc_rq *r = rq_new(c, NULL);
    /* While a holder that vanished unseen, or a partition whose records
     * all left the list, waits for its confirming read, ask for the whole
     * list: an answer "not changed since update_time" is never applied, so
     * it could not confirm, and after slurmctld restarted without its state
     * (or purged the last records) it would say so for as long as no job is
     * submitted (the node then stayed held, the NodeSet kept, for good). */
    r->update_time = c->jobs_ok && c->jobs_vanished.count == 0 && c->job_parts_gone.count == 0
                         ? c->jobs_update_time
                         : 0;
    c->jobs_polling = 1;
    if (sr_get_jobs(c->rest, r->update_time, on_jobs, r) < 0) {
        c->jobs_polling = 0;
        rq_done(r);
    }
}

/* A job read sent from now on, as soon as possible. */
static void jobs_read_soon(nc_cache *c)
{
    if (c->closing)
        return;
    if (c->jobs_polling)
        c->jobs_again = 1;
    else
        uv_timer_start(&c->jobs_timer, do_jobs, 0, 0);
}

int nc_jobs_free(nc_cache *c, const char *name, unsigned max_age_ms)
{
    if (c->closing || !name || !*name)
        return 0;
    nc_want_jobs(c);
    const nc_node *e = node_get(c, name);
    uint64_t since = !e ? 0 : e->present ? e->drain_seen_order : e->gone_seen_order;
    /* Our own drain, accepted: no job starts after that (the node's read
     * back must still show it drained, as judge() asks). */
    if (e && e->present && e->drain_state == 2 && e->drain_ok_order && e->drain_ok_order < since)
        since = e->drain_ok_order;
    if (since == 0)
        return 0; /* no read showed it drained (or gone): nothing to prove against */
    int listed = nc_jobs_ready(c) && !c->jobs_bad;
    if (listed && map_get(&c->holders, name)) {
        /* A job holds it: the list's change brings the owner back. When the
         * node was read after the list (it may read jobless now: the job
         * ended), the list is read again at once rather than at its next
         * poll; once, as the list is then the newer. */
        if (e->read_ms > c->jobs_ok_ms && sm_node_jobless(&e->n)) {
            name_set_add(&c->job_waiters, name);
            jobs_read_soon(c);
        }
        /* A node that reads jobless while a job holds it (SUSPENDED) shows
         * the job's end in the job list only, and nothing else wakes its
         * owner: read the list every track_ms instead of every jobs_ms for
         * the next minute (a "no change" answer: 0 B on 22.05, 842 B on
         * 26.05). */
        if (sm_node_jobless(&e->n))
            c->jobs_fast_until = uv_now(c->loop) + JOBS_FAST_MS;
        return 0;
    }
    if (listed && c->jobs_ok_order > since && uv_now(c->loop) - c->jobs_ok_ms <= max_age_ms)
        return 1;
    name_set_add(&c->job_waiters, name);
    jobs_read_soon(c);
    return 0;
}

int nc_jobs_failed(const nc_cache *c)
{
    return c->jobs_failed || c->jobs_bad;
}

size_t nc_pending_jobs(const nc_cache *c, const nc_pending **out)
{
    *out = NULL;
    if (!nc_jobs_ready(c) || c->jobs_failed)
        return 0;
    *out = c->pending;
    return c->n_pending;
}

void nc_jobs_fast(nc_cache *c, unsigned ms)
{
    nc_want_jobs(c);
    uint64_t until = uv_now(c->loop) + ms;
    if (until > c->jobs_fast_until)
        c->jobs_fast_until = until;
}

int nc_job_in_partition(const nc_cache *c, const char *partition)
{
    if (!nc_jobs_ready(c) || c->jobs_failed)
        return -1;
    return map_get(&c->job_parts, partition) != NULL;
}

int nc_job_names(const nc_cache *c, const char *name)
{
    if (!nc_jobs_ready(c) || c->jobs_bad)
        return -1;
    return map_get(&c->named, name) != NULL;
}

int nc_job_holds(const nc_cache *c, const char *name)
{
    if (!nc_jobs_ready(c) || c->jobs_bad)
        return -1;
    return map_get(&c->holders, name) != NULL;
}

void nc_want_jobs(nc_cache *c)
{
    if (c->want_jobs || c->closing)
        return;
    c->want_jobs = 1;
    uv_timer_start(&c->jobs_timer, do_jobs, 0, 0);
}

int nc_jobs_ready(const nc_cache *c)
{
    return c->jobs_ok && uv_now(c->loop) - c->jobs_ok_ms < c->o.stale_ms;
}

int64_t nc_deadline(const nc_cache *c, const char *name)
{
    const deadline_ent *d = map_get(&c->deadlines, name);
    return d ? d->deadline : 0;
}

/* ---- pings ---- */

static void do_ping(uv_timer_t *t);

static void on_ping(int status, sm_response *resp, void *data)
{
    nc_rq *r = data;
    nc_cache *c = r->c;
    assert(c->ping_polling);
    c->ping_polling = 0;
    if (c->closing) {
        rq_done(r);
        return;
    }
    count_bytes(c, resp);
    int before = c->ping_ok ? c->active : OP_EUNKNOWN;
    if (status < 0) {
        c->ping_ok = 0;
    } else {
        c->ping_ok = 1;
        c->ping_ok_ms = r->sent_ms;
        c->active = OP_EUNAVAILABLE;
        for (size_t i = 0; i < resp->n_pings; i++) {
            if (resp->pings[i].responding) {
                c->active = (int)i;
                break;
            }
        }
    }
    int after = c->ping_ok ? c->active : OP_EUNKNOWN;
    if (before != after && c->o.on_ping)
        c->o.on_ping(c->o.data);
    if (rq_done(r))
        return;
    uv_timer_start(&c->ping_timer, do_ping, c->o.ping_ms, 0);
}

static void do_ping(uv_timer_t *t)
{
    nc_cache *c = t->data;
    if (c->closing || c->ping_polling)
        return;
    nc_rq *r = rq_new(c, NULL);
    c->ping_polling = 1;
    if (sr_ping(c->rest, on_ping, r) < 0) {
        c->ping_polling = 0;
        rq_done(r);
    }
}

void nc_want_ping(nc_cache *c)
{
    if (c->want_ping || c->closing)
        return;
    c->want_ping = 1;
    uv_timer_start(&c->ping_timer, do_ping, 0, 0);
}

int nc_active_controller(const nc_cache *c)
{
    if (!c->ping_ok || uv_now(c->loop) - c->ping_ok_ms >= c->o.stale_ms)
        return OP_EUNKNOWN;
    return c->active;
}

/* ---- reservations ---- */

static void do_resv(uv_timer_t *t);

static void resvs_free(sm_resv *r, size_t n)
{
    sm_response tmp;
    memset(&tmp, 0, sizeof(tmp));
    tmp.resvs = r;
    tmp.n_resvs = n;
    sm_response_free(&tmp);
}

static const sm_resv *resv_find(const sm_resv *v, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (v[i].name && strcmp(v[i].name, name) == 0)
            return &v[i];
    return NULL;
}

static int resv_differs(const sm_resv *a, const sm_resv *b)
{
    return a->start_time != b->start_time || a->end_time != b->end_time || a->flags != b->flags ||
           strcmp(str0(a->node_list), str0(b->node_list)) != 0 || strcmp(str0(a->users), str0(b->users)) != 0;
}

static void on_resvs(int status, sm_response *resp, void *data)
{
    nc_rq *r = data;
    nc_cache *c = r->c;
    assert(c->resv_polling && r->seq > c->resv_read);
    c->resv_polling = 0;
    if (c->closing) {
        rq_done(r);
        return;
    }
    count_bytes(c, resp);
    if (status < 0) {
        c->resv_ok = 0;
    } else {
        c->resv_read = r->seq;
        sm_resv *old = c->resvs;
        size_t n_old = c->n_resvs;
        c->resvs = resp->resvs;
        c->n_resvs = resp->n_resvs;
        resp->resvs = NULL;
        resp->n_resvs = 0;
        int was_ok = c->resv_ok;
        c->resv_ok = 1;
        c->resv_ok_ms = r->sent_ms;
        if (c->o.on_resv) {
            for (size_t i = 0; i < c->n_resvs; i++) {
                const sm_resv *o = resv_find(old, n_old, c->resvs[i].name);
                if (!was_ok || !o || resv_differs(o, &c->resvs[i]))
                    c->o.on_resv(c->resvs[i].name, c->o.data);
            }
            for (size_t i = 0; i < n_old; i++)
                if (!resv_find(c->resvs, c->n_resvs, old[i].name))
                    c->o.on_resv(old[i].name, c->o.data);
        }
        resvs_free(old, n_old);
    }
    if (rq_done(r))
        return;
    uv_timer_start(&c->resv_timer, do_resv, c->resv_again ? 0 : c->o.resv_ms, 0);
    c->resv_again = 0;
}

static void do_resv(uv_timer_t *t)
{
    nc_cache *c = t->data;
    if (c->closing || c->resv_polling)
        return;
    nc_rq *r = rq_new(c, NULL);
    r->seq = ++c->resv_started; /* for reservations, seq numbers the reads */
    c->resv_polling = 1;
    if (sr_get_reservations(c->rest, on_resvs, r) < 0) {
        c->resv_polling = 0;
        rq_done(r);
    }
}

void nc_want_reservations(nc_cache *c)
{
    if (c->want_resv || c->closing)
        return;
    c->want_resv = 1;
    uv_timer_start(&c->resv_timer, do_resv, 0, 0);
}

void nc_resv_poll_soon(nc_cache *c)
{
    if (!c->want_resv || c->closing)
        return;
    if (c->resv_polling)
        c->resv_again = 1; /* that read may predate a write: read once more */
    else
        uv_timer_start(&c->resv_timer, do_resv, 0, 0);
}

uint64_t nc_resv_mark(const nc_cache *c)
{
    return c->resv_started;
}

int nc_resv_read_since(const nc_cache *c, uint64_t mark)
{
    return c->resv_read > mark;
}

typedef struct nc_rw {
    nc_cache *c;
    void (*cb)(int, void *);
    void *data;
} nc_rw;

/* A write's one completion: its callback, then the cache's count (which a closing cache waits on). */
static void rw_finish(nc_rw *w, int status)
{
    nc_cache *c = w->c;
    if (w->cb)
        w->cb(status, w->data);
    free(w);
    assert(c->requests > 0);
    c->requests--;
    if (c->closing)
        maybe_finish(c);
}

static void resv_written(nc_rw *w, int status, const char *message)
{
    nc_cache *c = w->c;
    if (status < 0 && status != OP_ECANCELED)
        log_warn("slurm %s: reservation write failed: %s", c->name, message ? message : err_str(status));
    /* Polled first: a closing cache may be freed by rw_finish. */
    if (!c->closing)
        nc_resv_poll_soon(c);
    rw_finish(w, status);
}

static void on_resv_rest(int status, sm_response *resp, void *data)
{
    resv_written(data, status, resp->err.message);
}

static void on_resv_lib(void *data, const sl_result *res)
{
    resv_written(data, res->status, res->message);
}

int nc_resv_writable(const nc_cache *c)
{
    return sr_version(c->rest) != 0 &&
           sb_choose(sr_version(c->rest), c->lib != NULL, SM_OP_POST_RESERVATION) != SB_NONE &&
           sb_choose(sr_version(c->rest), c->lib != NULL, SM_OP_DELETE_RESERVATION) != SB_NONE;
}

int nc_resv_write(nc_cache *c, enum nc_resv_op op, const sm_resv_desc *d, void (*cb)(int status, void *data),
                  void *data)
{
    if (c->closing)
        return OP_ECANCELED;
    if (!d || !d->name || !*d->name)
        return OP_EINVAL;
    enum sm_op sop = op == NC_RESV_DELETE ? SM_OP_DELETE_RESERVATION : SM_OP_POST_RESERVATION;
    enum sb_path path = sb_choose(sr_version(c->rest), c->lib != NULL, sop);
    if (path == SB_NONE)
        return OP_ENOTSUP;
    nc_rw *w = xcalloc(1, sizeof(*w));
    w->c = c;
    w->cb = cb;
    w->data = data;
    int rc;
    if (path == SB_LIBSLURM) {
        if (op == NC_RESV_DELETE)
            rc = sl_delete_reservation(c->lib, d->name, on_resv_lib, w);
        else if (op == NC_RESV_CREATE)
            rc = sl_create_reservation(c->lib, d, on_resv_lib, w);
        else
            rc = sl_update_reservation(c->lib, d, on_resv_lib, w);
    } else {
        rc = op == NC_RESV_DELETE ? sr_delete_reservation(c->rest, d->name, on_resv_rest, w)
                                  : sr_post_reservation(c->rest, d, on_resv_rest, w);
    }
    if (rc < 0) {
        free(w);
        return rc;
    }
    c->requests++;
    return 0;
}

static void on_create_rest(int status, sm_response *resp, void *data)
{
    nc_rw *w = data;
    nc_cache *c = w->c;
    if (status < 0 && status != OP_ECANCELED && status != OP_EEXISTS)
        log_warn("slurm %s: node create failed: %s", c->name,
                 resp->err.message ? resp->err.message : err_str(status));
    rw_finish(w, status);
}

int nc_can_create_nodes(const nc_cache *c)
{
    return !c->closing && sr_version(c->rest) != 0 &&
           sb_choose(sr_version(c->rest), c->lib != NULL, SM_OP_CREATE_NODES) != SB_NONE;
}

int nc_create_nodes(nc_cache *c, const char *node_conf, void (*cb)(int status, void *data), void *data)
{
    if (c->closing)
        return OP_ECANCELED;
    if (!nc_can_create_nodes(c))
        return OP_ENOTSUP;
    nc_rw *w = xcalloc(1, sizeof(*w));
    w->c = c;
    w->cb = cb;
    w->data = data;
    int rc = sr_create_nodes(c->rest, node_conf, on_create_rest, w);
    if (rc < 0) {
        free(w);
        return rc;
    }
    c->requests++;
    return 0;
}

enum nc_found nc_reservation(const nc_cache *c, const char *name, const sm_resv **out)
{
    if (out)
        *out = NULL;
    if (!c->resv_ok || uv_now(c->loop) - c->resv_ok_ms >= c->o.stale_ms)
        return NC_UNKNOWN;
    const sm_resv *r = resv_find(c->resvs, c->n_resvs, name);
    if (!r)
        return NC_ABSENT;
    if (out)
        *out = r;
    return NC_PRESENT;
}

/* ---- lookups ---- */

int nc_ready(const nc_cache *c)
{
    return !c->closing && c->ok && !c->suspect && uv_now(c->loop) - c->last_ok_ms < c->o.stale_ms;
}

int nc_unready_why(const nc_cache *c, char *out, size_t n)
{
    uint64_t now = uv_now(c->loop);
    if (c->closing) {
        snprintf(out, n, "its client is being closed");
        return NC_WHY_CLOSING;
    }
    if (c->suspect) {
        snprintf(out, n, "its node table answer is held as suspect: %s", c->suspect_why);
        return NC_WHY_SUSPECT;
    }
    if (c->down_why[0]) {
        snprintf(out, n, "the last read of its node table failed: %s", c->down_why);
        return NC_WHY_FAILED;
    }
    if (c->last_ok_ms == 0 || !c->ok) {
        snprintf(out, n, "its node table has not been read yet (%.1f s since the client started)",
                 (double)(now - c->born_ms) / 1000.0);
        return NC_WHY_NOT_READ;
    }
    if (now - c->last_ok_ms >= c->o.stale_ms) {
        snprintf(out, n, "its node table is stale: the last good read is %.0f s old (limit %u ms)",
                 (double)(now - c->last_ok_ms) / 1000.0, c->o.stale_ms);
        return NC_WHY_STALE;
    }
    snprintf(out, n, "its node table is readable");
    return NC_WHY_READY;
}

/* slurmop_slurm_node_table_age_seconds: since the last good read, or
 * since the cache started when none was. */
static double table_age(void *data)
{
    const nc_cache *c = data;
    uint64_t now = uv_now(c->loop), at = c->last_ok_ms ? c->last_ok_ms : c->born_ms;
    return now > at ? (double)(now - at) / 1000.0 : 0;
}

int nc_version(const nc_cache *c)
{
    return sr_version(c->rest);
}

int nc_have_lib(const nc_cache *c)
{
    return c->lib != NULL;
}

enum nc_found nc_lookup(const nc_cache *c, const char *name, const sm_node **out)
{
    if (out)
        *out = NULL;
    if (!nc_ready(c))
        return NC_UNKNOWN;
    const nc_node *e = node_get(c, name);
    if (!e || !e->present)
        return NC_ABSENT;
    if (out)
        *out = &e->n;
    return NC_PRESENT;
}

int nc_fresh(const nc_cache *c, const char *name, unsigned max_age_ms)
{
    if (!nc_ready(c))
        return 0;
    const nc_node *e = node_get(c, name);
    /* A table poll (304 or full) confirms every node it holds as of its
     * request; a read by name confirms that node. */
    uint64_t at = c->last_ok_ms;
    if (e && e->read_ms > at)
        at = e->read_ms;
    return uv_now(c->loop) - at <= max_age_ms;
}

void nc_read_soon(nc_cache *c, const char *name)
{
    if (c->closing || !name || !*name || !hostlist_name_valid(name))
        return;
    want_read(c, node_ensure(c, name));
}

int nc_confirm_gone(nc_cache *c, const char *name, unsigned max_age_ms)
{
    if (!nc_ready(c) || !name || !*name)
        return 0;
    if (!hostlist_name_valid(name))
        return 0;
    nc_node *e = node_ensure(c, name);
    if (!e->present && e->gone_ms && uv_now(c->loop) - e->gone_ms <= max_age_ms && !settling(c, e))
        return 1;
    if (!e->prove) {
        e->prove = 1;
        watch(c, e);
        arm_track(c, 0);
    }
    return 0;
}

int nc_drain_proved(const nc_cache *c, const char *name)
{
    if (!nc_ready(c))
        return 0;
    const nc_node *e = node_get(c, name);
    return e && e->present && e->drain_state == 2 && !settling(c, e) && sm_node_drain(&e->n) &&
           e->future_ms == 0 && e->n.reason_changed_at > e->drain_floor;
}

int nc_contradicted(const nc_cache *c, const char *name)
{
    const nc_node *e = node_get(c, name);
    return e && e->present && e->future_ms && !e->future_ok;
}

const char *nc_suspect_why(const nc_cache *c)
{
    return c->suspect && c->suspect_why[0] ? c->suspect_why : NULL;
}

int nc_drain_state(const nc_cache *c, const char *name, uint64_t *accepted_ago_ms)
{
    const nc_node *e = node_get(c, name);
    if (accepted_ago_ms)
        *accepted_ago_ms = e && e->drain_state == 2 ? uv_now(c->loop) - e->drain_ok_ms : 0;
    return e ? e->drain_state : 0;
}

int nc_vanished(const nc_cache *c, const char *name, uint64_t *ago_ms)
{
    const nc_node *e = node_get(c, name);
    if (!e || e->present || !e->lost_ms)
        return 0;
    if (ago_ms)
        *ago_ms = uv_now(c->loop) - e->lost_ms;
    return e->busy ? 2 : 1;
}

uint64_t nc_unknown_ago(const nc_cache *c, const char *name)
{
    const nc_node *e = node_get(c, name);
    if (!e || !e->unknown_ms)
        return UINT64_MAX;
    return uv_now(c->loop) - e->unknown_ms;
}

int nc_suspect(const nc_cache *c)
{
    return c->suspect;
}

int nc_settling(const nc_cache *c, const char *name)
{
    const nc_node *e = node_get(c, name);
    return e ? settling(c, e) : 0;
}

int64_t nc_confirmed_at(const nc_cache *c)
{
    return c->confirmed_at;
}

void nc_foreach(const nc_cache *c, void (*fn)(const sm_node *n, void *data), void *data)
{
    if (!nc_ready(c))
        return;
    size_t it = 0;
    const nc_node *e;
    while ((e = pset_next(&c->nodes, &it))) {
        if (e->present)
            fn(&e->n, data);
    }
}

nb_batcher *nc_batcher(nc_cache *c)
{
    return c->batch;
}

void nc_get_stats(const nc_cache *c, nc_stats *out)
{
    *out = c->stats;
}

size_t nc_heap_bytes(const nc_cache *c)
{
    return c->heap_bytes + pset_bytes(&c->nodes);
}

static double heap_gauge(void *data)
{
    return (double)nc_heap_bytes(data);
}

/* ---- lifetime ---- */

static void setup_metrics(nc_cache *c, mx_registry *r)
{
    if (!r)
        return;
    c->mx_polls = mx_family_new(r, MX_COUNTER, "slurmop_slurm_node_polls_total",
                                "Polls of a Slurm cluster's node table by result (full, not_modified, error)",
                                "cluster,result", NULL, 0, NULL);
    c->mx_bytes =
        mx_family_new(r, MX_GAUGE, "slurmop_slurm_received_bytes",
                      "Response bytes received from a cluster's slurmrestd", "cluster", NULL, 0, NULL);
    c->mx_last =
        mx_family_new(r, MX_GAUGE, "slurmop_slurm_last_success_timestamp_seconds",
                      "When a cluster's node table was last read successfully", "cluster", NULL, 0, NULL);
    c->mx_up = mx_family_new(r, MX_GAUGE, "slurmop_slurm_up",
                             "1 while a cluster's node table is readable, 0 while it is unknown", "cluster",
                             NULL, 0, NULL);
    c->mx_nodes = mx_family_new(r, MX_GAUGE, "slurmop_slurm_nodes", "Nodes in a cluster's node table",
                                "cluster", NULL, 0, NULL);
    c->mx_interval =
        mx_family_new(r, MX_GAUGE, "slurmop_slurm_poll_interval_seconds",
                      "Current poll interval of a cluster's node table", "cluster", NULL, 0, NULL);
    c->mx_writes =
        mx_family_new(r, MX_COUNTER, "slurmop_slurm_node_writes_total",
                      "Node writes (drain, undrain, comment ...) by result", "cluster,result", NULL, 0, NULL);
    c->mx_contra = mx_family_new(
        r, MX_COUNTER, "slurmop_slurm_contradictions_total",
        "Slurm answers that contradict themselves or earlier ones (kind: duplicate, a node listed "
        "twice; future_time, a reason time ahead of the answer's clock; job_vanished, a "
        "job holding a node gone from the list unseen ended), held and read again",
        "cluster,kind", NULL, 0, NULL);
    c->mx_age =
        mx_family_new(r, MX_GAUGE, "slurmop_slurm_node_table_age_seconds",
                      "Seconds since a cluster's node table was last read (since the client started when "
                      "it never was)",
                      "cluster", NULL, 0, NULL);
    /* Every child from the start (0 until it happens), so that a dashboard
     * or an alert sees each series before the first error or contradiction. */
    static const char *const polls[] = {"full", "not_modified", "error", "held"};
    static const char *const kinds_[] = {"duplicate", "future_time", "job_vanished"};
    for (size_t i = 0; c->mx_polls && i < ARRAY_SIZE(polls); i++)
        mx_counter_get(c->mx_polls, MX_LV(c->name, polls[i]));
    for (size_t i = 0; c->mx_contra && i < ARRAY_SIZE(kinds_); i++)
        mx_counter_get(c->mx_contra, MX_LV(c->name, kinds_[i]));
    if (c->mx_writes) {
        mx_counter_get(c->mx_writes, MX_LV(c->name, "ok"));
        mx_counter_get(c->mx_writes, MX_LV(c->name, "error"));
    }
    if (c->mx_nodes)
        mx_gauge_get(c->mx_nodes, MX_LV(c->name));
    if (c->mx_last)
        mx_gauge_get(c->mx_last, MX_LV(c->name));
    if (c->mx_up)
        mx_gauge_set(mx_gauge_get(c->mx_up, MX_LV(c->name)), 0);
    if (c->mx_age)
        mx_child_fn(c->mx_age, MX_LV(c->name), table_age, c);
    c->mx_heap = mx_family_new(r, MX_GAUGE, "slurmop_slurm_node_cache_bytes",
                               "Heap bytes of a cluster's cached node table (entries, strings, map)",
                               "cluster", NULL, 0, NULL);
    if (c->mx_heap)
        mx_child_fn(c->mx_heap, MX_LV(c->name), heap_gauge, c);
}

static void remove_metrics(nc_cache *c)
{
    static const char *const results[] = {"full", "not_modified", "error", "held"};
    if (c->mx_polls)
        for (size_t i = 0; i < ARRAY_SIZE(results); i++)
            mx_child_remove(c->mx_polls, MX_LV(c->name, results[i]));
    if (c->mx_writes) {
        mx_child_remove(c->mx_writes, MX_LV(c->name, "ok"));
        mx_child_remove(c->mx_writes, MX_LV(c->name, "error"));
    }
    if (c->mx_contra) {
        mx_child_remove(c->mx_contra, MX_LV(c->name, "duplicate"));
        mx_child_remove(c->mx_contra, MX_LV(c->name, "future_time"));
        mx_child_remove(c->mx_contra, MX_LV(c->name, "job_vanished"));
    }
    mx_family *single[] = {c->mx_bytes,    c->mx_last, c->mx_up,  c->mx_nodes,
                           c->mx_interval, c->mx_age,  c->mx_heap};
    for (size_t i = 0; i < ARRAY_SIZE(single); i++)
        if (single[i])
            mx_child_remove(single[i], MX_LV(c->name));
}

int nc_new(uv_loop_t *loop, const nc_opts *opts, nc_cache **out)
{
    *out = NULL;
    if (!opts->rest)
        return OP_EINVAL;
    nc_cache *c = xcalloc(1, sizeof(*c));
    c->loop = loop;
    c->o = *opts;
    c->name = xstrdup(opts->name ? opts->name : "cluster");
    c->o.name = c->name;
    c->rest = opts->rest;
    c->lib = opts->lib;
#define DEF(f, v)                                                                                            \
    if (!c->o.f)                                                                                             \
    c->o.f = (v)
    DEF(poll_min_ms, 1000);
    DEF(poll_max_ms, 30000);
    DEF(full_resync_ms, 600000);
    DEF(track_ms, 1000);
    DEF(max_tracked, 32);
    DEF(stale_ms, 60000);
    DEF(skew_margin_s, 2);
    DEF(jobs_ms, 3000);
    DEF(ping_ms, 5000);
    DEF(resv_ms, 10000);
    DEF(shrink_pct, 10);
    DEF(suspect_confirm_ms, 1000);
#undef DEF
    if (c->o.poll_max_ms < c->o.poll_min_ms)
        c->o.poll_max_ms = c->o.poll_min_ms;
    c->interval_ms = c->o.poll_min_ms;
    c->active = OP_EUNKNOWN;
    pset_init(&c->nodes, node_key);
    map_init_type(&c->deadlines, &deadline_type);
    map_init_type(&c->holders, &map_type_free_val);
    map_init_type(&c->named, &map_type_free_val);
    map_init_type(&c->job_parts, &map_type_free_val);
    map_init_type(&c->job_parts_gone, &vanished_type);
    map_init_type(&c->job_waiters, &map_type_free_val);
    map_init_type(&c->jobs_vanished, &vanished_type);
    list_init(&c->reread);
    list_init(&c->watched);
    nb_opts bo = {.rest = c->rest, .lib = c->lib, .name = c->name};
    int rc = nb_new(loop, &bo, &c->batch);
    if (rc < 0) {
        free(c->name);
        free(c);
        return rc;
    }
    c->batch_open = 1;
    uv_timer_t *timers[] = {&c->poll_timer, &c->track_timer, &c->jobs_timer, &c->ping_timer, &c->resv_timer};
    for (size_t i = 0; i < ARRAY_SIZE(timers); i++) {
        uv_timer_init(loop, timers[i]);
        timers[i]->data = c;
    }
    uv_idle_init(loop, &c->apply_idle);
    c->apply_idle.data = c;
    c->born_ms = uv_now(loop);
    setup_metrics(c, opts->metrics);
    log_info("slurm %s: node cache started (poll every %u-%u ms, stale after %u ms)", c->name,
             c->o.poll_min_ms, c->o.poll_max_ms, c->o.stale_ms);
    schedule_poll(c, 0);
    *out = c;
    return 0;
}

static void on_handle_closed(uv_handle_t *h)
{
    nc_cache *c = h->data;
    assert(c->closing && c->handles > 0);
    if (--c->handles > 0)
        return;
    assert(c->requests == 0 && !c->batch_open);
    void (*cb)(void *) = c->close_cb;
    void *data = c->close_data;
    size_t it = 0;
    nc_node *e;
    while ((e = pset_next(&c->nodes, &it)))
        node_free(e);
    pset_free(&c->nodes);
    map_free(&c->deadlines);
    map_free(&c->holders);
    map_free(&c->named);
    pending_clear(c);
    map_free(&c->job_parts);
    map_free(&c->job_parts_gone);
    map_free(&c->job_waiters);
    map_free(&c->jobs_vanished);
    resvs_free(c->resvs, c->n_resvs);
    free(c->name);
    free(c);
    if (cb)
        cb(data);
}

static void on_batch_closed(void *data)
{
    nc_cache *c = data;
    c->batch_open = 0;
    maybe_finish(c);
}

static void maybe_finish(nc_cache *c)
{
    if (!c->closing || c->requests > 0 || c->batch_open || c->handles)
        return;
    uv_timer_t *timers[] = {&c->poll_timer, &c->track_timer, &c->jobs_timer, &c->ping_timer, &c->resv_timer};
    c->handles = (int)ARRAY_SIZE(timers) + 1;
    for (size_t i = 0; i < ARRAY_SIZE(timers); i++)
        uv_close((uv_handle_t *)timers[i], on_handle_closed);
    uv_close((uv_handle_t *)&c->apply_idle, on_handle_closed);
}

void nc_close(nc_cache *c, void (*cb)(void *data), void *data)
{
    if (c->closing)
        return;
    c->closing = 1;
    c->close_cb = cb;
    c->close_data = data;
    uv_timer_t *timers[] = {&c->poll_timer, &c->track_timer, &c->jobs_timer, &c->ping_timer, &c->resv_timer};
    for (size_t i = 0; i < ARRAY_SIZE(timers); i++)
        uv_timer_stop(timers[i]);
    remove_metrics(c);
    nb_close(c->batch, on_batch_closed, c);
    if (c->apply_rq)
        (void)rq_done(apply_drop(c)); /* a table half applied: dropped */
}
