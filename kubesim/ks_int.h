/* ks_int: kubesim's internal data model, shared by the engine's .c files.
 *
 * Objects are stored as immutable, reference-counted versions (ks_ver): the
 * serialised JSON as it is sent on the wire plus the few fields selectors
 * need (namespace, name, labels, selectable fields). A write parses the
 * current version, changes the tree, and serialises a new version once; LIST
 * and every watch reuse those bytes. The event history of a resource is a
 * ring of (type, version, previous version) records, so a watch can replay
 * changes after an RV and a LIST can rebuild the state at an older RV.
 */
#ifndef KS_INT_H
#define KS_INT_H

#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdlib.h>

#include "kubesim/ks.h"
#include "core/buf.h"
#include "core/json.h"
#include "core/labels.h"
#include "core/list.h"
#include "core/map.h"

/* ---- versions ---------------------------------------------------------- */

typedef struct ks_ver {
    uint32_t refs;
    uint32_t len; /* JSON bytes (data[0..len)) */
    uint64_t rv;
    uint32_t rv_off; /* offset of the RV digits inside the JSON, 0 when absent */
    uint16_t rv_len;
    uint16_t hdr_len; /* length of the `{"kind":..,"apiVersion":..,` prefix */
    uint32_t ns_off;  /* into data: namespace ("" when cluster scoped) */
    uint32_t name_off;
    uint32_t labels_off; /* packed "k\0v\0...\0" (just "\0" when none) */
    uint32_t fields_off; /* packed "field\0value\0...\0" */
    char data[];
} ks_ver;

static inline const char *ver_json(const ks_ver *v)
{
    return v->data;
}
static inline const char *ver_ns(const ks_ver *v)
{
    return v->data + v->ns_off;
}
static inline const char *ver_name(const ks_ver *v)
{
    return v->data + v->name_off;
}
/** Value of a label, or NULL. */
const char *ver_label(const ks_ver *v, const char *key);
/** Value of a selectable field (metadata.name, metadata.namespace, or a
 *  per-type field), "" when the object lacks it. */
const char *ver_field(const ks_ver *v, const char *field);
void ver_ref(ks_ver *v);
void ver_unref(ks_ver *v);
/** A copy of v whose metadata.resourceVersion is rv (DELETED events). */
ks_ver *ver_restamp(const ks_ver *v, uint64_t rv);
/** Parse the JSON of a version (never fails on our own bytes). */
cJSON *ver_parse(const ks_ver *v);

/* ---- resources --------------------------------------------------------- */

enum ks_res_flags {
    KSR_GENERATION = 1 << 0,         /* metadata.generation tracked */
    KSR_RV_REQUIRED = 1 << 1,        /* PUT needs metadata.resourceVersion (422 otherwise) */
    KSR_CREATE_ON_UPDATE = 1 << 2,   /* PUT of a missing object creates it */
    KSR_DELETE_RETURNS_OBJ = 1 << 3, /* immediate DELETE answers the object, not a Status */
    KSR_CUSTOM = 1 << 4,             /* served from a CRD */
    KSR_NO_WATCH = 1 << 5,
};

/* One served version of a resource (built-ins have one). */
typedef struct ks_view {
    char *version;     /* "v1" */
    char *api_version; /* "apps/v1", "v1" */
    int has_status;
    int has_scale;
    char *spec_replicas_path; /* ".spec.replicas" */
    char *status_replicas_path;
    char *label_selector_path; /* may be NULL */
    cJSON *schema;             /* openAPIV3Schema (CRs), owned */
    int preserve_unknown;      /* schema root preserves unknown fields */
    cJSON *columns;            /* additionalPrinterColumns (CRs), owned, NULL when none */
} ks_view;

typedef struct ks_event {
    uint64_t rv;
    int type;     /* KS_ADDED / KS_MODIFIED / KS_DELETED */
    ks_ver *obj;  /* new state; for DELETED the last state stamped with the delete RV */
    ks_ver *prev; /* state before (NULL for ADDED) */
} ks_event;

enum { KS_ADDED = 0, KS_MODIFIED = 1, KS_DELETED = 2 };

typedef struct ks_hist {
    ks_event *ring;
    size_t cap, start, n;
    size_t max;         /* configured size; the ring grows up to it */
    uint64_t compacted; /* watches from an RV below this get 410 */
} ks_hist;

typedef struct ks_res {
    list_node link; /* ks.resources */
    char *group;    /* "" for core */
    char *plural, *singular, *kind, *list_kind;
    char *short_names; /* comma-separated, may be NULL */
    char *categories;  /* comma-separated, may be NULL */
    char *qual;        /* "pods", "deployments.apps" (qualified resource, for messages) */
    char *qual_kind;   /* "Pod", "Deployment.apps" */
    int namespaced;
    unsigned flags;
    const char *const *fields;   /* extra selectable fields, NULL-terminated, may be NULL */
    const struct ks_builtin *bi; /* built-in behaviour, NULL for CRs */
    ks_view *views;
    int n_views;
    int storage_view;
    char *crd_name; /* CRs: the CRD that defines it */
    map_t objs;     /* key -> ks_obj */
    ks_hist hist;
    list_node watches; /* ks_watch.link */
    int removed;       /* CRD gone: no longer routed, freed at shutdown */
} ks_res;

/* ---- objects ----------------------------------------------------------- */

typedef struct ks_oref {
    list_node link; /* in the owner uid's dependents bucket */
    struct ks_deps *bucket;
    struct ks_obj *obj;
    int block; /* blockOwnerDeletion */
    char uid[40];
} ks_oref;

typedef struct ks_obj {
    char *key; /* "ns/name" or "name" */
    ks_res *res;
    ks_ver *cur;
    char uid[40];
    ks_oref *orefs;
    int n_orefs;
    list_node gc_link;    /* ks.gc_queue */
    struct ks_pod *pod;   /* pods: kubelet/scheduler state */
    struct ks_node *node; /* nodes */
} ks_obj;

/* Dependents of one owner uid. */
typedef struct ks_deps {
    char uid[40];
    list_node head; /* ks_oref.link */
} ks_deps;

/* Consistent LIST snapshots behind continue tokens. */
typedef struct ks_snap {
    list_node link;
    ks_res *res;
    uint64_t rv;
    uint64_t created_ms;
    size_t n;
    ks_ver **items; /* sorted by (namespace, name) */
} ks_snap;

/* ---- the engine -------------------------------------------------------- */

typedef struct ks_route {
    char *key; /* "group/version/plural" */
    ks_res *res;
    int view;
} ks_route;

struct ks {
    uv_loop_t *loop;
    ks_config cfg;
    char **owned_strs; /* copies of cfg strings */
    int n_owned;
    ks_hooks hooks;
    uint64_t rv;
    uint64_t rng;
    list_node resources;
    map_t routes; /* "g/v/plural" -> ks_route */
    map_t uids;   /* uid -> ks_obj */
    map_t deps;   /* owner uid -> ks_deps */
    list_node snaps;
    int n_snaps;
    list_node dirty_watches;
    int n_watches;
    uv_prepare_t flush;
    uv_timer_t gc_timer;
    list_node gc_queue; /* objects whose owners must be checked */
    map_t gc_owners;    /* owner uids that went away or are being deleted, value unused */
    int gc_ns_pending;  /* a namespace is terminating */
    struct ks_kubelet *kl;
    /* faults */
    double rate_429, rate_500;
    char *fault_path; /* only requests whose path contains this get the 429/500 faults (NULL: all) */
    unsigned latency_ms;
    double write_rate;     /* see ks_write_wait_ms */
    double write_next_ms;  /* the next free slot of the write-rate fault */
    int expire_watches;
    /* counters: "verb\tresource\tcode" -> count (value is the count cast to a pointer) */
    map_t counters;
    unsigned long long n_requests;
    int closing;
    int pending_closes;
    void (*close_cb)(void *);
    void *close_data;
    int loading;         /* state load: no hooks, no namespace defaults */
    const char *root_ca; /* PEM published in kube-root-ca.crt */
};

/* ---- status errors (ks_resp.c) ---------------------------------------- */

/* A field error (Kubernetes field.Error). */
typedef struct ks_cause {
    const char *reason; /* "FieldValueRequired", ... (static) */
    char *field;
    char *message; /* "Required value", "Invalid value: \"x\": detail" */
} ks_cause;

typedef struct ks_errs {
    ks_cause items[16];
    int n;
} ks_errs;

void errs_add(ks_errs *e, const char *reason, const char *field, const char *fmt, ...) OP_PRINTF(4, 5);
void errs_free(ks_errs *e);
#define ERR_REQUIRED(e, f) errs_add((e), "FieldValueRequired", (f), "Required value")
#define ERR_REQUIRED_D(e, f, d) errs_add((e), "FieldValueRequired", (f), "Required value: %s", (d))
#define ERR_FORBIDDEN(e, f, d) errs_add((e), "FieldValueForbidden", (f), "Forbidden: %s", (d))

/** A Status failure response: code, reason, message and optional details. */
void resp_status(ks_resp *r, int code, const char *reason, const char *message, const char *d_name,
                 const char *d_group, const char *d_kind, const char *d_uid);
void resp_statusf(ks_resp *r, int code, const char *reason, const char *fmt, ...) OP_PRINTF(4, 5);
void resp_not_found(ks_resp *r, const ks_res *res, const char *name);
void resp_already_exists(ks_resp *r, const ks_res *res, const char *name);
void resp_conflict(ks_resp *r, const ks_res *res, const char *name, const char *why);
void resp_conflict_modified(ks_resp *r, const ks_res *res, const char *name);
/** 422 Invalid: "<Kind>[.group] "<name>" is invalid: ...". qual_kind/group for details. */
void resp_invalid(ks_resp *r, const char *qual_kind, const char *group, const char *kind, const char *name,
                  ks_errs *e);
void resp_bad_request(ks_resp *r, const char *fmt, ...) OP_PRINTF(2, 3);
void resp_plain(ks_resp *r, int code, const char *text);
void resp_json_take(ks_resp *r, int code, cJSON *o); /* frees o */

/* ---- utilities (ks_util.c) --------------------------------------------- */

uint64_t ks_rand(ks *k);
double ks_randf(ks *k);
long long ks_now_ms(void);
/** Query parameter lookup on a raw query string, percent-decoded into a
 *  malloc'd string; NULL when absent ("" for "?watch"). */
char *query_get(const char *query, const char *name);
/** Kubernetes boolean query semantics: absent -> dflt; "0"/"false" -> 0; anything else -> 1. */
int query_bool(const char *query, const char *name, int dflt);
int parse_u64(const char *s, uint64_t *out);
/** Qualified-name and DNS checks used by validation. */
int dns_subdomain_ok(const char *s);
int dns_label_ok(const char *s);
const char *dns_subdomain_msg(void);
const char *dns_label_msg(void);

/* ---- store (ks_store.c) ------------------------------------------------ */

void res_free(ks_res *r);
ks_res *res_new(ks *k);
void res_add_route(ks *k, ks_res *r, int view);
/** The destructors of k->routes (ks_route_free frees one route). */
void ks_route_free(void *route);
extern const map_type ks_route_type;
void res_unroute(ks *k, ks_res *r);
ks_route *route_find(ks *k, const char *group, const char *version, const char *plural);
ks_res *res_find(ks *k, const char *group, const char *plural);
ks_res *res_by_kind(ks *k, const char *api_version, const char *kind);

/** Build the stored form of obj (canonical key order, RV set) as a version. */
ks_ver *ver_build(const ks_res *r, cJSON *obj);
/** Key "ns/name" into out. */
void obj_key(char *out, size_t n, const char *ns, const char *name);
ks_obj *obj_find(ks_res *r, const char *ns, const char *name);

enum { WR_DRY_RUN = 1 };
/** Store a new object (metadata complete except resourceVersion). Takes obj.
 *  Returns the object; *out gets a reference to the stored version. */
ks_obj *ks_store_create(ks *k, ks_res *r, cJSON *obj, int flags, ks_ver **out);
/** Replace the object's state. Takes obj. A state equal to the current one
 *  is a no-op (same RV, no event). Finishes deletion when deletionTimestamp
 *  is set, the grace period is 0 and no finalizers are left (then *gone=1
 *  and o is freed). *out: reference to the resulting version (may be NULL). */
void ks_store_update(ks *k, ks_obj *o, cJSON *obj, int flags, ks_ver **out, int *gone);
/** Remove now: DELETED event, indexes dropped, o freed. *out (optional) gets
 *  the tombstone version. */
void ks_store_remove(ks *k, ks_obj *o, ks_ver **out);
/** Same, with an RV already taken. */
void ks_store_remove_at(ks *k, ks_obj *o, uint64_t rv);
/** Insert an object from the state file as it is (no RV bump, no event). Takes obj. */
void ks_store_load(ks *k, ks_res *r, cJSON *obj);
/** Free an object without events (shutdown). */
void ks_store_drop(ks *k, ks_obj *o);
/** Bump and return the global RV. */
uint64_t ks_store_next_rv(ks *k);
/** Objects of a resource sorted by key, optionally one namespace; caller frees the array (refs not taken). */
ks_ver **ks_store_sorted(ks_res *r, const char *ns, size_t *n);
/** State of r at rv rebuilt from the current state and the history; NULL
 *  when the history does not reach back. Items are referenced. */
ks_snap *snap_at(ks *k, ks_res *r, uint64_t rv);
ks_snap *snap_lookup(ks *k, ks_res *r, uint64_t rv);
void snap_free(ks_snap *s);
void snaps_expire(ks *k, int all);
/** Record one event of r in its history ring. */
void hist_push(ks *k, ks_res *r, int type, ks_ver *obj, ks_ver *prev);
/** Forget every event of every resource (restart fault). */
void hist_compact_all(ks *k);
int ks_store_deletion_done(const cJSON *obj);

/* ---- types (ks_types.c) ------------------------------------------------ */

/* Per-type behaviour of built-ins. */
typedef struct ks_builtin {
    const char *group, *version, *plural, *singular, *kind, *short_names, *categories;
    int namespaced;
    unsigned flags;
    int status; /* has a /status subresource */
    int scale;  /* has /scale (spec.replicas / status.replicas / spec.selector) */
    const char *const *fields;
    /* defaults and validation on create; NULL when nothing to do */
    void (*on_create)(ks *k, ks_res *r, cJSON *obj, ks_errs *e);
    /* validation on update (old is the stored object) */
    void (*on_update)(ks *k, ks_res *r, cJSON *obj, const cJSON *old, ks_errs *e);
} ks_builtin;

void types_register_builtins(ks *k);
/** A CRD was created or changed: (re)build the resource it defines. */
void types_crd_apply(ks *k, const cJSON *crd);
/** A CRD is gone: remove its resource and every custom object. */
void types_crd_remove(ks *k, const char *crd_name);
/** CRD create/update validation and status. */
void types_crd_validate(ks *k, cJSON *crd, ks_errs *e);
void types_crd_set_status(cJSON *crd);
/** Prune unknown fields and apply defaults of the view's schema; pruned
 *  field paths go to warn (may be NULL). */
void types_cr_prune_default(const ks_view *v, cJSON *obj, buf_t *warn);
/** Validate obj against the view's schema. */
void types_cr_validate(const ks_view *v, const cJSON *obj, ks_errs *e);
/** Schema node for a dotted path (for list-map keys in apply). */
const cJSON *types_schema_at(const cJSON *schema, const char *const *path, int depth);

/* ---- selectors (ks_fsel.c) -------------------------------------------- */

typedef struct fsel_term {
    char *field;
    char *value;
    int neq;
} fsel_term;

typedef struct fsel {
    int n;
    fsel_term t[16];
} fsel;

/** Parse a fieldSelector for resource r; fields other than metadata.name,
 *  metadata.namespace and r's selectable fields fail with a message
 *  "field label not supported: X". */
int fsel_parse(const ks_res *r, const char *s, fsel **out, char *err, size_t errlen);
void fsel_free(fsel *f);
/** The value an equality term requires for field, or NULL. */
const char *fsel_required(const fsel *f, const char *field);
int obj_matches(const ks_ver *v, const char *ns, const lsel *ls, const fsel *fs);

/* ---- watch (ks_watch.c) ------------------------------------------------ */

typedef struct ks_watch_opts {
    const char *ns; /* NULL: all namespaces */
    lsel *ls;       /* taken */
    fsel *fs;       /* taken */
    int rv_set;     /* resourceVersion given and not "0" */
    uint64_t rv;
    int initial;             /* send synthetic ADDED for the current state */
    int send_initial_events; /* watch-list: end bookmark after them */
    int bookmarks;
    long long timeout_ms;
    int table;   /* TABLE_NONE, or each event's object is a Table (kubectl get -w) */
    int include; /* TABLE_INCLUDE_* of those Tables */
    int expired; /* answer with the 410 ERROR event (too old or fault) */
    uint64_t expired_req, expired_have;
} ks_watch_opts;

ks_watch *watch_new(ks *k, ks_res *r, int view, ks_watch_opts *o);
/** Shutdown: end every watch now. */
void watch_shutdown(ks *k);
/** One of the engine's handles finished closing (frees the engine at the end of ks_close). */
void ks__handle_closed(ks *k);

/** Deliver one new event of r to every watch (and record it in the history). */
void watch_dispatch(ks *k, ks_res *r, const ks_event *ev);
void watch_flush_all(ks *k);
/** End every watch (abort: without the chunk terminator). */
void watch_end_all(ks *k, int abort);
/** End every watch of r (CRD removed). */
void watch_end_res(ks *k, ks_res *r);
/** Serialise a version for the view (kind/apiVersion header present). */
int watch_emit_obj(buf_t *b, const ks_res *r, int view, const ks_ver *v, int with_header);

/* ---- request handling (ks_api.c) --------------------------------------- */

typedef struct ks_ctx {
    ks *k;
    const ks_req *req;
    ks_resp *resp;
    ks_res *res;
    int view;
    const char *ns;   /* namespace from the URL or NULL */
    const char *name; /* object name or NULL */
    const char *sub;  /* subresource or NULL */
    char *verb;       /* for counters: get list watch create update patch delete deletecollection */
    int table;        /* TABLE_NONE or the Table version the Accept header asks for */
    int include;      /* TABLE_INCLUDE_*: includeObject of a Table */
} ks_ctx;

void api_handle(ks *k, const ks_req *req, ks_resp *resp);
/** Run the generic DELETE flow on an object (used by GC and controllers too).
 *  policy: "Background", "Foreground", "Orphan" or NULL. grace < 0: default.
 *  Returns the resulting version (referenced) or NULL when removed. */
ks_ver *api_obj_delete(ks *k, ks_obj *o, const char *policy, long long grace, int *gone);

/** Create an object from inside the engine (nodes, namespace defaults):
 *  server fields and type defaults are filled in. Takes obj; NULL when it
 *  already exists or is invalid. */
ks_obj *api_obj_create(ks *k, ks_res *r, cJSON *obj);

/* ---- Tables (ks_table.c) --------------------------------------------- */

enum { TABLE_NONE = 0, TABLE_V1 = 1, TABLE_V1BETA1 = 2, TABLE_REFUSED = -1 };
enum { TABLE_INCLUDE_METADATA = 0, TABLE_INCLUDE_OBJECT = 1, TABLE_INCLUDE_NONE = 2 };

/** What an Accept header asks a resource request for: TABLE_NONE (plain
 *  JSON), TABLE_V1/TABLE_V1BETA1 (a meta.k8s.io Table), or TABLE_REFUSED
 *  (nothing kubesim serves: 406). The first acceptable entry wins. */
int table_accept(const char *accept);
/** Start a Table: metadata (rv 0: none), column definitions (null with
 *  no_headers) and the opening of "rows"; close it with "]}". */
void table_begin(buf_t *b, const ks_res *r, int view, int table, uint64_t rv, const char *cont,
                 long long remaining, int no_headers);
/** One row for the object v (first: no leading comma). */
void table_row(buf_t *b, const ks_res *r, int view, int table, const ks_ver *v, int first, int include);
/** The same for a parsed object; v (may be NULL) gives the bytes of includeObject=Object. */
void table_row_obj(buf_t *b, const ks_res *r, int view, int table, const cJSON *obj, const ks_ver *v,
                   int first, int include);

/* ---- OpenAPI (ks_openapi.c) -------------------------------------------- */

/** GET /openapi/v3: the group-versions served, each with its document URL. */
void openapi_v3_index(ks *k, ks_resp *resp);
/** GET /openapi/v3/<gv> (gv "api/v1" or "apis/<group>/<version>"); 404 when not served. */
void openapi_v3_doc(ks *k, ks_resp *resp, const char *gv);

/* ---- protobuf bodies (ks_proto.c) ------------------------------------- */

/** Decode a Kubernetes protobuf body ("k8s\0" + runtime.Unknown) of the few
 *  kinds kubesim knows into the JSON object a JSON client would send; NULL
 *  with err set otherwise. */
cJSON *proto_decode(const void *body, size_t len, char *err, size_t errlen);

/* ---- patches (ks_patch.c) ---------------------------------------------- */

/** RFC 6902. 0, or OP_EPARSE (undecodable: msg filled, 400) or OP_EINVALID (failed op: 422). */
int patch_json_apply(cJSON **doc, const char *patch, size_t len, char *msg, size_t msglen);
/** Server-side apply of cfg onto live (NULL when creating) as manager.
 *  Returns the merged object, or NULL with *conflict_msg (409) set; the
 *  caller frees. managedFields of the result are updated. */
cJSON *patch_ssa_apply(const ks_res *r, int view, const cJSON *live, const cJSON *cfg, const char *manager,
                 int force, char **conflict_msg, cJSON **conflict_causes);
/** Record an Update operation by manager on an object that has managedFields. */
void patch_ssa_record_update(const ks_res *r, int view, const cJSON *old, cJSON *obj, const char *manager,
                       const char *subresource);

/* ---- controllers (ks_ctrl.c) ------------------------------------------- */

void ctrl_init(ks *k);
void ctrl_close(ks *k);
/** An object changed (old NULL: created; new NULL: removed). */
void ctrl_on_change(ks *k, ks_obj *o, const cJSON *newobj, int removed);
void ctrl_gc_kick(ks *k);
void ctrl_orefs_set(ks *k, ks_obj *o, const cJSON *obj);
void ctrl_orefs_clear(ks *k, ks_obj *o);

/* ---- kubelet (ks_kubelet.c) -------------------------------------------- */

int kubelet_init(ks *k);
void kubelet_close(ks *k);
void kubelet_free(ks *k);
/** Create cfg->nodes Nodes (names that already exist are kept). */
void kubelet_create_nodes(ks *k, int first, int count);
/** A pod or node changed (new_ver NULL when removed; o may then be freed after return). */
void kubelet_on_pod(ks *k, ks_obj *o, const ks_ver *old_ver, const ks_ver *new_ver, const cJSON *newobj);
void kubelet_on_node(ks *k, ks_obj *o, const ks_ver *old_ver, const ks_ver *new_ver);
void kubelet_obj_gone(ks *k, ks_obj *o);
/** Admin: fail (or finish) pods. */
int kubelet_set_phase(ks *k, ks_obj *pod, const char *phase, const char *reason, int exit_code);
/** Grace period the kubelet will honour for a pod being deleted (ms). */
unsigned kubelet_grace_ms(ks *k, long long grace_s);
void kubelet_schedule_removal(ks *k, ks_obj *pod, long long grace_s);

/* ---- admin (ks_admin.c) ------------------------------------------------ */

void admin_handle(ks *k, const ks_req *req, ks_resp *resp);
/** Count a request (verb, resource, code). */
void admin_count(ks *k, const char *verb, const char *resource, int code);
/** 429/500/latency faults for a request to path: non-zero when it was answered. */
int admin_faults_apply(ks *k, const char *path, ks_resp *resp);
int admin_state_load(ks *k, const char *path);

/** A namespace was created: add what the controllers would (ServiceAccount, root CA ConfigMap). */
void ks__namespace_created(ks *k, const char *name);

/* ---- events (ks_event.c) ------------------------------------------------ */

/** An Event of one group in the other's field names: to_core 1 from events.k8s.io/v1 to core/v1,
 *  0 the other way. */
cJSON *ks_event_convert(const cJSON *obj, int to_core);
/** After a write of an Event in either group: the same change to its twin in the other group, at
 *  the same rv (newobj NULL: removed). Other resources are left alone. */
void ks_event_twin(ks *k, ks_obj *o, const cJSON *newobj, uint64_t rv);

/* ---- hooks called by the store on every change ------------------------- */
void ks_store_on_change(ks *k, ks_obj *o, const ks_ver *old_ver, const ks_ver *new_ver, const cJSON *newobj);

/* Appending to a response body built in memory: a failure is out of memory,
 * which kubesim treats as fatal (as xmalloc does). */
static inline void ks_put(buf_t *b, const char *s)
{
    if (buf_puts(b, s) != 0)
        abort();
}

/* ... a JSON string literal of s (NULL: ""). */
static inline void ks_putq(buf_t *b, const char *s)
{
    if (json_quote_buf(b, s ? s : "") != 0)
        abort();
}

#endif
