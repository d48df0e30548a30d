/* model: what the operator reads from Slurm, whatever slurmrestd version
 * answered, and how to read errors without ever taking one for success.
 *
 * slurmrestd speaks one "data_parser" version per URL prefix
 * (/slurm/v0.0.N/...). Debian's Slurm 22.05 offers v0.0.36-v0.0.38; Slurm
 * 23.11-25.11 offer v0.0.40-v0.0.44 (Slinky requires v0.0.44), 26.05 offers
 * v0.0.42-v0.0.45. The versions differ in shape, not in meaning:
 *
 *   item            v0.0.36        v0.0.37/38                  v0.0.40 ... v0.0.45
 *   node state      "state":"idle" + "state_flags":["DRAIN"]   "state":["IDLE","DRAIN"]
 *                   (no flags)
 *   features        "a,b"          "a,b"                       ["a","b"]
 *   topology        -              -                           v0.0.43+ "topology"
 *   times, limits   integers; time_limit null = unlimited      {set, infinite, number}
 *   job state       "RUNNING"      "RUNNING"                   ["RUNNING", ...flags]
 *   ping            "ping":"UP", "mode":"primary"              v0.0.40 "pinged":"UP";
 *                                                              v0.0.41+ "responding", "primary";
 *                                                              v0.0.45 drops "pinged" and "mode"
 *                                                              (assumed: v0.0.40/41 documents were
 *                                                              not at hand; both forms are read)
 *   error number    "errno"        "errno" / "error_number"    "error_number"
 *   node writes     none (22.05 has no REST node update)       POST node/{name}; v0.0.42+
 *                                                              also POST nodes/ (hostlist)
 *   reservation writes  none                                   v0.0.43+ POST reservation
 *
 * v0.0.36 reports no state flags at all: a drained node reads "idle" there,
 * so nothing built on v0.0.36 may decide that a node is drained
 * (sm_node.flags_known is 0 and sm_node_drained() answers 0). v0.0.39 (Slurm
 * 23.02) is not supported.
 *
 * Errors, as slurmrestd gives them (all must be errors, never "no data"):
 *   - HTTP 200 with a non-empty "errors" list (a list endpoint then often has
 *     an empty data list too: "nodes": [] with errors is NOT "no nodes");
 *   - HTTP 500 with a JSON "errors" list whose entries carry the Slurm error
 *     number as "errno", "error_number" or "error_code" (a bad or expired
 *     token looks like this: -1 "Unspecified error");
 *   - HTTP 400 "Unable to parse query." (text/plain), or 400 with JSON errors;
 *   - HTTP 401 "Authentication failure" (text/plain: a header is missing);
 *   - HTTP 404 (no such URL: the version or endpoint does not exist), 405
 *     (method not defined: e.g. POST node on 22.05), 415 (Accept refused),
 *     all text/plain;
 *   - HTTP 304 (with ?update_time=) has no body and means "unchanged".
 * Slurm error 2018 "Invalid node name specified" becomes OP_ENOTFOUND, so a
 * caller can tell "this node does not exist" from "Slurm could not answer".
 *
 * Derived facts (Slinky's semantics, spec 3.9, made fail-closed) — the
 * reconcilers use these:
 *   idle-proof = base IDLE, DOWN or FUTURE, nothing allocated where Slurm
 *              reports it reliably (v0.0.40+: alloc_cpus, alloc_memory),
 *              and neither flag COMPLETING nor
 *              a state word this module does not know (OTHER: it might
 *              mean jobs; each data_parser version fixes its flag list,
 *              so OTHER only comes from a server this model was not
 *              written for): a base state under which slurmctld runs no
 *              job on the node. IDLE has
 *              none by definition; when a node goes DOWN slurmctld ends
 *              (kills or requeues) every job on it at once and sends the
 *              kill without waiting for the node (deallocate_nodes does not
 *              mark a DOWN node COMPLETING), so no job Slurm still counts on
 *              is left; COMPLETING is checked all the same, for a job whose
 *              epilog still runs; FUTURE nodes were never scheduled. ALLOCATED and MIXED have jobs; ERROR
 * (nodes with errored resources, which may run jobs on the rest), UNKNOWN (slurmctld has not heard from the
 * node since it started, or a state word this module does not know) prove nothing; busy     = not idle-proof
 * (jobs are, were or may be running; never delete the pod). Unknown counts as busy; drain    = flag DRAIN and
 * not flag UNDRAIN (someone asked for a drain); drained  = drain and idle-proof (safe to delete the pod);
 *   draining = drain and not drained (wait);
 *   NodeSet status counts: idle = base IDLE; allocated = ALLOCATED + MIXED;
 *   down = base DOWN; drain = flag DRAIN.
 * Pod conditions: one SlurmNodeState<Base> for the base state (Allocated,
 * Down, Error, Future, Idle, Mixed, Unknown), one per flag among Completing,
 * Drain, Fail, Invalid, InvalidReg, Maintenance, NotResponding, Undrain.
 * When flags are not known (v0.0.36) every flag-derived fact is "no".
 *
 * Everything here is pure: no I/O, no loop. Parsers allocate the results;
 * free them with sm_response_free().
 */
#ifndef OP_SLURM_MODEL_H
#define OP_SLURM_MODEL_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "core/buf.h"

/* ---- versions ---- */

/** Versions are the N of "v0.0.N". */
enum sm_version {
    SM_V36 = 36,
    SM_V37 = 37,
    SM_V38 = 38,
    SM_V40 = 40,
    SM_V41 = 41,
    SM_V42 = 42,
    SM_V43 = 43,
    SM_V44 = 44,
    SM_V45 = 45,
};
#define SM_VERSION_NEWEST SM_V45
/** The oldest version negotiation will choose (v0.0.36/37 parse, but are
 *  never picked: v0.0.36 cannot show DRAIN). */
#define SM_VERSION_OLDEST_USABLE SM_V38

/** "v0.0.38", "0.0.38" or "openapi/v0.0.38" -> 38; OP_ENOTSUP for a
 *  well-formed version this module does not parse (v0.0.39, v0.0.46);
 *  OP_EPARSE otherwise. */
int sm_version_parse(const char *s);
/** "v0.0.38" for 38 (static string; "v0.0.?" for unknown values). */
const char *sm_version_str(int version);
/** Whether the parsers understand this version. */
int sm_version_supported(int version);

/** Operations whose availability depends on the version. */
enum sm_op {
    SM_OP_GET_NODES,          /* GET nodes (?update_time=) */
    SM_OP_GET_NODE,           /* GET node/{name} */
    SM_OP_GET_JOBS,           /* GET jobs */
    SM_OP_PING,               /* GET ping */
    SM_OP_GET_RESERVATIONS,   /* GET reservations (not v0.0.36) */
    SM_OP_GET_RESERVATION,    /* GET reservation/{name} (not v0.0.36) */
    SM_OP_UPDATE_NODE,        /* POST node/{name}: v0.0.40+ */
    SM_OP_UPDATE_NODES,       /* POST nodes/ with a hostlist "name": v0.0.42+ */
    SM_OP_DELETE_NODE,        /* DELETE node/{name}: v0.0.40+ */
    SM_OP_UPDATE_TOPOLOGY,    /* "topology_str" in node updates: v0.0.43+ */
    SM_OP_POST_RESERVATION,   /* POST reservation (create or update): v0.0.43+ */
    SM_OP_DELETE_RESERVATION, /* DELETE reservation/{name}: v0.0.43+ */
    SM_OP_DIAG,               /* GET diag: slurmctld's statistics (for its clock) */
    SM_OP_CREATE_NODES,       /* POST new/node/ with a node_conf line (a hostlist NodeName): v0.0.44+ */
};
/** Whether slurmrestd offers op in version (per the OpenAPI documents). */
int sm_version_has(int version, enum sm_op op);
/** Short name of an operation ("update-node"), for logs. */
const char *sm_op_name(enum sm_op op);

/**
 * The URL path of op for version, with arg (a node name, hostlist or
 * reservation name; URL-escaped here) where the path has one, appended to
 * out. 22.05's paths have no trailing slash; v0.0.40+ list paths end in "/",
 * as the OpenAPI documents write them.
 * @return 0; OP_ENOTSUP when version lacks op; OP_EINVAL when arg is missing
 *         or present where not needed; OP_ETOOBIG when out is full.
 */
int sm_path(int version, enum sm_op op, const char *arg, buf_t *out);

/**
 * Pick the data_parser version to use from slurmrestd's /openapi/v3 document:
 * the newest of v0.0.45 ... v0.0.40, v0.0.38 whose node list endpoint the
 * document lists.
 * @return the version, or OP_ENOTSUP when none is offered, OP_EPARSE when the
 *         document has no "paths" object.
 */
int sm_negotiate(const cJSON *openapi);
/** The same over a list of path strings ("/slurm/v0.0.38/nodes", ...). */
int sm_negotiate_paths(const char *const *paths, size_t n);

/* ---- nodes ---- */

/** Base state (exactly one), numbered as Slurm's enum node_states. */
enum sm_node_base {
    SM_NODE_UNKNOWN = 0,
    SM_NODE_DOWN,
    SM_NODE_IDLE,
    SM_NODE_ALLOCATED,
    SM_NODE_ERROR,
    SM_NODE_MIXED,
    SM_NODE_FUTURE,
};

/* State flags: X(bit name, Slurm's name). OTHER collects names this table
 * does not know, so that an unexpected flag is visible, not dropped. */
#define SM_NODE_FLAG_MAP(X)                                                                                  \
    X(DRAIN, "DRAIN")                                                                                        \
    X(UNDRAIN, "UNDRAIN")                                                                                    \
    X(COMPLETING, "COMPLETING")                                                                              \
    X(NOT_RESPONDING, "NOT_RESPONDING")                                                                      \
    X(FAIL, "FAIL")                                                                                          \
    X(MAINTENANCE, "MAINTENANCE")                                                                            \
    X(INVALID, "INVALID")                                                                                    \
    X(INVALID_REG, "INVALID_REG")                                                                            \
    X(RESUME, "RESUME")                                                                                      \
    X(RESERVED, "RESERVED")                                                                                  \
    X(CLOUD, "CLOUD")                                                                                        \
    X(PLANNED, "PLANNED")                                                                                    \
    X(BLOCKED, "BLOCKED")                                                                                    \
    X(EXTERNAL, "EXTERNAL")                                                                                  \
    X(PERFCTRS, "PERFCTRS")                                                                                  \
    X(DYNAMIC_FUTURE, "DYNAMIC_FUTURE")                                                                      \
    X(DYNAMIC_NORM, "DYNAMIC_NORM")                                                                          \
    X(POWERED_DOWN, "POWERED_DOWN")                                                                          \
    X(POWERING_UP, "POWERING_UP")                                                                            \
    X(POWERING_DOWN, "POWERING_DOWN")                                                                        \
    X(POWER_DOWN, "POWER_DOWN")                                                                              \
    X(POWER_UP, "POWER_UP")                                                                                  \
    X(POWER_DRAIN, "POWER_DRAIN")                                                                            \
    X(REBOOT_REQUESTED, "REBOOT_REQUESTED")                                                                  \
    X(REBOOT_ISSUED, "REBOOT_ISSUED")                                                                        \
    X(REBOOT_CANCELED, "REBOOT_CANCELED")                                                                    \
    X(OTHER, "OTHER")

enum sm_node_flag_bit {
#define SM_NFB_ENUM(name, str) SM_NFB_##name,
    SM_NODE_FLAG_MAP(SM_NFB_ENUM)
#undef SM_NFB_ENUM
        SM_NFB__COUNT
};
/** The mask of one flag: n->flags & SM_NF(DRAIN). */
#define SM_NF(name) (UINT64_C(1) << SM_NFB_##name)

typedef struct sm_node {
    char *name;
    int base;        /* enum sm_node_base */
    uint64_t flags;  /* SM_NF(...) bits */
    int flags_known; /* 0 for v0.0.36, which reports no flags */
    char *reason;    /* "" when none */
    char *comment;   /* "" when none */
    char *features;  /* available features, comma-separated, "" when none */
    char *active_features;
    char *topology;    /* v0.0.43+; "" otherwise */
    char *reservation; /* v0.0.40+; "" otherwise */
    char *partitions;  /* the partitions it is in, comma-separated, "" when none */
    char *address;
    char *hostname;
    int cpus;                  /* -1 when not reported */
    int alloc_cpus;            /* -1 when not reported (22.05 reports 0 while jobs run: unreliable) */
    int64_t alloc_memory;      /* MB; -1 when not reported (22.05: 0 while jobs run, unreliable too) */
    int64_t real_memory;       /* MB, the record's RealMemory; -1 when not reported */
    /* alloc_cpus and alloc_memory are Slurm's count of what jobs hold on
     * the node (v0.0.40+: the state is a list; 22.05 reports 0 while jobs
     * run). Then a jobless base state with anything allocated betrays a
     * job (sm_node_jobless). */
    int alloc_known;
    int64_t reason_changed_at; /* epoch seconds, 0 when unknown */
    int64_t slurmd_started_at; /* when the slurmd now registered started (epoch seconds), 0 when unknown */
} sm_node;

/** Release the strings of a node (the struct itself is the caller's). The
 *  fields are NULL afterwards. */
void sm_node_clear(sm_node *n);

/** The base state and flags prove that no job runs on the node (see
 *  "idle-proof" above): base IDLE, DOWN or FUTURE without COMPLETING or an
 *  unknown word. When the flags are unknown (v0.0.36) COMPLETING cannot be
 *  seen: 0. */
static inline int sm_node_jobless(const sm_node *n)
{
    return n->flags_known &&
           (n->base == SM_NODE_IDLE || n->base == SM_NODE_DOWN || n->base == SM_NODE_FUTURE) &&
           !(n->flags & (SM_NF(COMPLETING) | SM_NF(OTHER))) &&
           !(n->alloc_known && (n->alloc_cpus > 0 || n->alloc_memory > 0));
}
/** Jobs are, were or may be running: anything not proven jobless,
 *  including an UNKNOWN or ERROR base state. v0.0.36 (flags unknown) keeps
 *  the old reading of its base word, so that its idle nodes are not all
 *  "busy"; nothing there can be drained anyway. */
static inline int sm_node_busy(const sm_node *n)
{
    if (!n->flags_known)
        return n->base != SM_NODE_IDLE && n->base != SM_NODE_DOWN && n->base != SM_NODE_FUTURE;
    return !sm_node_jobless(n);
}
static inline int sm_node_drain(const sm_node *n)
{
    return n->flags_known && (n->flags & SM_NF(DRAIN)) && !(n->flags & SM_NF(UNDRAIN));
}
/** Safe to delete the pod: drain requested and a base state that proves no
 *  job is left. Fails closed: 0 when the flags are unknown, for an UNKNOWN
 *  or ERROR base state, and while COMPLETING. */
static inline int sm_node_drained(const sm_node *n)
{
    return sm_node_drain(n) && sm_node_jobless(n);
}
static inline int sm_node_draining(const sm_node *n)
{
    return sm_node_drain(n) && !sm_node_jobless(n);
}

/** "IDLE", "MIXED", ... */
const char *sm_node_base_name(int base);
/** "DRAIN", ... for a flag bit number (SM_NFB_*). */
const char *sm_node_flag_name(int bit);
/** The state as Slurm writes it in v0.0.40+: "IDLE+DRAIN+NOT_RESPONDING";
 *  appended to out. */
int sm_node_state_str(const sm_node *n, buf_t *out);
/** Parse one state word (base or flag, any case, with Slurm's short forms
 *  "alloc", "mix", "maint", "no_respond" ...). Returns 1 and sets *base for a
 *  base state, 2 and sets *flag_bit for a flag, 0 when unknown. */
int sm_node_state_word(const char *s, int *base, int *flag_bit);

/* ---- jobs ---- */

enum sm_job_state {
    SM_JOB_PENDING = 0,
    SM_JOB_RUNNING,
    SM_JOB_SUSPENDED,
    SM_JOB_COMPLETED,
    SM_JOB_CANCELLED,
    SM_JOB_FAILED,
    SM_JOB_TIMEOUT,
    SM_JOB_NODE_FAIL,
    SM_JOB_PREEMPTED,
    SM_JOB_BOOT_FAIL,
    SM_JOB_DEADLINE,
    SM_JOB_OUT_OF_MEMORY,
    SM_JOB_OTHER, /* only a flag was given (22.05 writes "COMPLETING") or a new name */
};
/* Job state flags (v0.0.40+ list them with the state; 22.05 writes one
 * word). Known flags are kept so that only a word this module has never
 * seen is OTHER. */
#define SM_JF_COMPLETING (1u << 0)
#define SM_JF_CONFIGURING (1u << 1)
#define SM_JF_REQUEUED (1u << 2)    /* REQUEUED, REQUEUE_HOLD, REQUEUE_FED, SPECIAL_EXIT */
#define SM_JF_STOPPED (1u << 3)     /* SIGSTOP sent to the job: its processes stay on the nodes */
#define SM_JF_SIGNALING (1u << 4)   /* a signal on its way to the nodes */
#define SM_JF_STAGE_OUT (1u << 5)   /* burst buffer stage-out: the allocation is kept */
#define SM_JF_RESIZING (1u << 6)
#define SM_JF_BENIGN (1u << 7)      /* words that say nothing about nodes (UPDATE_DB, REVOKED, ...) */
#define SM_JF_OTHER (1u << 31)

/** No limit: time_limit of an unlimited job, deadline of a job without one. */
#define SM_INFINITE INT64_MAX

typedef struct sm_job {
    uint32_t id;
    int state;          /* enum sm_job_state */
    uint32_t flags;     /* SM_JF_* */
    char *nodes;        /* hostlist expression; "" while pending */
    char *partition;    /* its partition(s), comma-separated; NULL when not reported */
    int64_t start_time; /* epoch seconds; 0 when unset */
    int64_t time_limit; /* minutes; SM_INFINITE when unlimited or unset */
    int32_t node_count; /* nodes it asks for (pending) or holds; 0 when not reported */
    char *reason;       /* why it waits ("Resources", "Priority", ...); "" when not reported */
} sm_job;

/** Whether the job may hold (processes, an allocation, an epilog, state
 *  to come back to) the nodes its list names: every job except one in a
 *  final state (COMPLETED, CANCELLED, FAILED, TIMEOUT, NODE_FAIL,
 *  PREEMPTED, BOOT_FAIL, DEADLINE, OUT_OF_MEMORY) that shows none of
 *  COMPLETING, STOPPED, SIGNALING, STAGE_OUT, RESIZING or a word this
 *  module does not know. A PENDING job holds the nodes it still lists (a
 *  requeued one does until slurmctld clears them); a state word this module
 *  does not know holds. Fail closed: new states are busy. */
int sm_job_holds_nodes(const sm_job *j);

/** When the job's time is up: start_time + time_limit minutes, or
 *  SM_INFINITE (unlimited, or no start time yet). */
int64_t sm_job_deadline(const sm_job *j);
const char *sm_job_state_name(int state);

/* ---- ping ---- */

typedef struct sm_ping {
    char *hostname;
    char *mode;     /* "primary", "backup1", ...; "" when not reported */
    int responding; /* the controller answered */
    int primary;    /* it is the primary controller */
    int latency_us; /* -1 when not reported (before v0.0.40) */
} sm_ping;

/* ---- reservations ---- */

/* Reservation flags the operator reads or writes: X(bit name, Slurm's name). */
#define SM_RESV_FLAG_MAP(X)                                                                                  \
    X(MAINT, "MAINT")                                                                                        \
    X(IGNORE_JOBS, "IGNORE_JOBS")                                                                            \
    X(FORCE_START, "FORCE_START")                                                                            \
    X(HOURLY, "HOURLY")                                                                                      \
    X(DAILY, "DAILY")                                                                                        \
    X(WEEKLY, "WEEKLY")                                                                                      \
    X(WEEKDAY, "WEEKDAY")                                                                                    \
    X(WEEKEND, "WEEKEND")                                                                                    \
    X(SPEC_NODES, "SPEC_NODES")                                                                              \
    X(ANY_NODES, "ANY_NODES")                                                                                \
    X(STATIC, "STATIC")                                                                                      \
    X(PART_NODES, "PART_NODES")                                                                              \
    X(OVERLAP, "OVERLAP")                                                                                    \
    X(FLEX, "FLEX")                                                                                          \
    X(MAGNETIC, "MAGNETIC")                                                                                  \
    X(PURGE_COMP, "PURGE_COMP")                                                                              \
    X(OTHER, "OTHER")

enum sm_resv_flag_bit {
#define SM_RFB_ENUM(name, str) SM_RFB_##name,
    SM_RESV_FLAG_MAP(SM_RFB_ENUM)
#undef SM_RFB_ENUM
        SM_RFB__COUNT
};
#define SM_RF(name) (UINT64_C(1) << SM_RFB_##name)

typedef struct sm_resv {
    char *name;
    int64_t start_time; /* epoch seconds */
    int64_t end_time;   /* epoch seconds; SM_INFINITE when open-ended */
    uint64_t flags;     /* SM_RF(...) bits */
    char *flags_str;    /* the flags as Slurm listed them, comma-separated */
    char *users;        /* comma-separated */
    char *node_list;    /* hostlist expression */
} sm_resv;

/** Duration in minutes (end - start), or SM_INFINITE. */
int64_t sm_resv_duration(const sm_resv *r);
/** Parse one reservation flag name (any case); -1 when unknown. */
int sm_resv_flag_bit(const char *s);

/* ---- responses ---- */

/** What a response was asked for. */
enum sm_kind {
    SM_KIND_NODES,        /* GET nodes: "nodes" list (may be empty) */
    SM_KIND_NODE,         /* GET node/{n}: exactly one node; an empty list is OP_ENOTFOUND */
    SM_KIND_JOBS,         /* GET jobs */
    SM_KIND_PING,         /* GET ping: at least one entry */
    SM_KIND_RESERVATIONS, /* GET reservations */
    SM_KIND_RESERVATION,  /* GET reservation/{n}: exactly one; empty is OP_ENOTFOUND */
    SM_KIND_STATUS,       /* writes (POST/DELETE): only errors matter */
    SM_KIND_DIAG,         /* GET diag: a "statistics" object; only its req_time is read */
};

typedef struct sm_error {
    int code;        /* 0 or a negative OP_E* code (see sm_parse) */
    int http_status; /* as given to sm_parse */
    int slurm_errno; /* the first Slurm error number reported, 0 when none */
    char *message;   /* malloc'd, for logs and events; NULL when code == 0 */
    /* The node a read by name asked for, when the answer says slurmctld has
     * no record of it in the shape 24.11 and later use (HTTP 200, no node
     * list, an error entry numbered 0 described "Failure to query node
     * <name>"): code is then OP_ENOTFOUND. 22.05 answers error 2018 instead
     * (slurm_errno). malloc'd; NULL otherwise. */
    char *no_such_node;
} sm_error;

/** Where sm_response.server_time came from, most trustworthy first. */
enum sm_time_src {
    SM_TIME_NONE = 0,
    SM_TIME_LAST_UPDATE, /* the body's "last_update" (v0.0.40+ lists): slurmctld's clock */
    SM_TIME_REQ_TIME,    /* diag's "statistics.req_time" (every version): slurmctld's clock */
    SM_TIME_ESTIMATE,    /* a lower bound from an earlier reading of slurmctld's clock (rest.c) */
    SM_TIME_HTTP_DATE,   /* the HTTP Date header: slurmrestd's clock (rest.c) */
};

typedef struct sm_response {
    int version;
    int not_modified;    /* HTTP 304: nothing changed since update_time; there is
                          * NO data: keep what you had. Also a job list with
                          * "last_update" 0 (24.11 and later: 200, "jobs": [],
                          * warning "No job changes since update_time"). */
    int64_t last_update; /* v0.0.40+ list "last_update"; 0 when absent */
    /* The Slurm server's clock when it made this answer (epoch seconds), 0
     * when the answer carries none; server_time_src says whose clock. A
     * poll's update_time must be on slurmctld's clock: slurmctld answers
     * "no change" when update_time - 1 >= its last change, so our clock
     * running ahead of its hides changes. v0.0.38 (22.05) answers carry no
     * time at all (no "last_update", no Date header: checked against
     * slurmrestd 22.05.8); GET diag (SM_KIND_DIAG) does, and rest.c derives
     * an estimate from it (SM_TIME_ESTIMATE). */
    int64_t server_time;
    int server_time_src; /* enum sm_time_src */
    size_t tree_bytes;   /* memory the JSON tree took while decoding (0 without a body) */
    size_t n_warnings;
    sm_node *nodes;
    size_t n_nodes;
    sm_job *jobs;
    size_t n_jobs;
    sm_ping *pings;
    size_t n_pings;
    sm_resv *resvs;
    size_t n_resvs;
    sm_error err;
} sm_response;

/**
 * Decode one slurmrestd response.
 *
 * @param version  the data_parser version the request was made with.
 * @param kind     what the request asked for.
 * @param http_status, body, len  the response (body need not be
 *                 NUL-terminated; len 0 for none).
 * @param out      always initialised; free with sm_response_free().
 * @return 0 when the response carries what was asked for (or is a 304:
 *         then out->not_modified is set and there is no data); otherwise a
 *         negative code, also stored with a message in out->err, and no data:
 *   OP_ENOTFOUND      Slurm said the object does not exist (node 2018, job
 *                     2017, reservation 2053), or a single-object GET came
 *                     back empty;
 *   OP_EUNAUTHORIZED  401 (missing auth headers);
 *   OP_EFORBIDDEN     403, or Slurm's access/authentication errors;
 *   OP_EEXISTS, OP_EBUSY, OP_ECONFLICT, OP_EINVALID  for the Slurm errors
 *                     of those kinds, and OP_EINVALID for 400;
 *   OP_EUNAVAILABLE   Slurm could not reach slurmctld (18xx), or 502/503/504;
 *   OP_ERATELIMIT     429;
 *   OP_ENOTSUP        404/405 without a JSON error list (the endpoint or
 *                     method does not exist in this version);
 *   OP_EPROTO         415 (our Accept header was refused);
 *   OP_ESLURM         any other error Slurm listed (including a bad token:
 *                     -1 "Unspecified error" in 22.05);
 *   OP_ESERVER        a 5xx without a usable error list;
 *   OP_EPARSE         a 2xx whose body is not the expected JSON shape;
 *   OP_EHTTP          any other status.
 */
int sm_parse(int version, enum sm_kind kind, int http_status, const char *body, size_t len, sm_response *out);

/**
 * sm_parse with a hard bound on the memory of the JSON tree (0 = none). The
 * tree is built in an arena that grows in chunks as needed; a document whose
 * tree would pass max_tree fails with OP_ETOOBIG (and no data), never with
 * a partial answer. A node table's tree takes ~4.5 times its text (measured
 * in docs/internals/SLURMIO.md); a hostile document can need ~30 times.
 */
int sm_parse_bounded(int version, enum sm_kind kind, int http_status, const char *body, size_t len,
                     size_t max_tree, sm_response *out);

/** Same, from an already parsed document (NULL = no/invalid JSON body). */
int sm_parse_json(int version, enum sm_kind kind, int http_status, const cJSON *doc, sm_response *out);

void sm_response_free(sm_response *r);

/** An HTTP Date header (IMF-fixdate, "Sun, 06 Nov 1994 08:49:37 GMT") as
 *  epoch seconds; 0 when it is not one (the obsolete forms included). */
int64_t sm_http_date(const char *s);

/** Map a Slurm error number (slurm_errno.h) to a project code, as above. */
int sm_errno_code(int slurm_errno);

/* ---- writes (v0.0.40+) ---- */

/** Node state requests the operator sends. */
enum sm_node_req {
    SM_REQ_NONE = 0,
    SM_REQ_DRAIN,   /* needs a reason */
    SM_REQ_UNDRAIN, /* clear DRAIN, leave DOWN alone */
    SM_REQ_RESUME,  /* clear DRAIN and DOWN */
    SM_REQ_DOWN,    /* needs a reason */
    SM_REQ_IDLE,    /* clears DOWN left by the pod's preStop */
};
const char *sm_node_req_name(int req); /* "DRAIN", ... */

/* Which fields of an update to send. */
#define SM_UPD_STATE (1u << 0)
#define SM_UPD_REASON (1u << 1)
#define SM_UPD_COMMENT (1u << 2)
#define SM_UPD_FEATURES (1u << 3)
#define SM_UPD_FEATURES_ACT (1u << 4)
#define SM_UPD_TOPOLOGY (1u << 5)

typedef struct sm_node_update {
    unsigned set;         /* SM_UPD_* bits: only these fields are sent */
    int state;            /* enum sm_node_req, with SM_UPD_STATE */
    const char *reason;   /* with SM_UPD_REASON */
    const char *comment;  /* with SM_UPD_COMMENT ("" clears) */
    const char *features; /* comma-separated, with SM_UPD_FEATURES ("" clears) */
    const char *features_act;
    const char *topology; /* with SM_UPD_TOPOLOGY (v0.0.43+) */
    const char *names;    /* hostlist for the batch endpoint (SM_OP_UPDATE_NODES); NULL otherwise */
} sm_node_update;

/**
 * Serialise a node update (UpdateNodeMsg) for version, appended to out.
 * @return 0; OP_ENOTSUP when version cannot update nodes over REST (before
 *         v0.0.40), cannot set topology (before v0.0.43) or has no batch
 *         endpoint for names (before v0.0.42); OP_EINVAL for an empty update,
 *         DRAIN or DOWN without a reason, or an unknown state; OP_ETOOBIG
 *         when out is full.
 */
int sm_node_update_json(int version, const sm_node_update *u, buf_t *out);

/** A reservation to create or update (ReservationDescMsg, v0.0.43+). */
typedef struct sm_resv_desc {
    const char *name;
    int64_t start_time;    /* epoch seconds */
    int64_t duration;      /* minutes; SM_INFINITE for none */
    uint64_t flags;        /* SM_RF(...) bits (OTHER is not sent) */
    const char *users;     /* comma-separated */
    const char *node_list; /* hostlist expression */
} sm_resv_desc;

/** Serialise a reservation description for version, appended to out.
 *  @return 0; OP_ENOTSUP before v0.0.43; OP_EINVAL without a name. */
int sm_resv_desc_json(int version, const sm_resv_desc *d, buf_t *out);

/** The body of a node create (v0.0.44+ "node_conf"), appended to out. 0; OP_EINVAL for an empty line;
 *  OP_ETOOBIG when out is full. */
int sm_node_create_json(const char *node_conf, buf_t *out);

#endif
