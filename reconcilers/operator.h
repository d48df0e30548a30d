/* operator: the process-wide context every reconciler works in.
 *
 * It owns the Kubernetes client, one store and reflector per watched
 * resource (per namespace when --namespace limits the cache), the metrics
 * registry and the /metrics, /healthz and /readyz servers, the event
 * recorder, leader election and the reconcilers. Reconcilers read the
 * fields below; only operator.c writes them.
 *
 * Lifecycle: op_start() loads the client configuration, starts the HTTP
 * servers and the caches, then (after acquiring the lease when leader
 * election is on) starts every reconciler. op_stop() is the one close path:
 * it stops the reconcilers and the watches, lets writes in flight finish
 * (bounded by a grace period), releases the lease, closes every handle and
 * calls back; the loop then runs dry. Losing the lease takes the same path after
 * closing the client's write fence (kube_client_fence).
 */
#ifndef OP_OPERATOR_H
#define OP_OPERATOR_H

#include <assert.h>
#include <uv.h>

#include "core/evrec.h"
#include "core/httpd.h"
#include "core/kube.h"
#include "core/kubeconfig.h"
#include "core/lease.h"
#include "core/metrics.h"
#include "core/store.h"
#include "core/wq.h"
#include "reconcilers/objsync.h"
#include "watchers/reflector.h"

#define OP_MAX_NAMESPACES 64
#define OP_MAX_SLURMRESTD 64

/* The resource types the operator caches, in start order. */
enum op_kind {
    OPK_NODESETS = 0,
    OPK_CONTROLLERS,
    OPK_RESTAPIS,
    OPK_ACCOUNTINGS,
    OPK_LOGINSETS,
    OPK_TOKENS,
    OPK_PODS,
    OPK_NODES,
    OPK_SERVICES,
    OPK_CONFIGMAPS,
    OPK_SECRETS,
    OPK_STATEFULSETS,
    OPK_DEPLOYMENTS,
    OPK_PDBS,
    OPK_REVISIONS,
    OPK_PVCS,
    OPK__COUNT
};

typedef struct op_slurmrestd_map {
    char *key; /* "namespace/restapi-name" */
    char *url; /* "http://127.0.0.1:6820" */
} op_slurmrestd_map;

typedef struct operator_opts {
    const char *kubeconfig;   /* --kubeconfig */
    const char *context;      /* --context */
    const char *namespaces[OP_MAX_NAMESPACES]; /* --namespace (repeatable); none = all */
    int n_namespaces;
    const char *metrics_addr; /* --metrics-addr, default ":8080", "0" disables */
    const char *health_addr;  /* --health-addr, default ":8081", "0" disables */
    int metrics_secure; /* --metrics-secure: /metrics over HTTPS, TokenReview + SubjectAccessReview (msec.h)
                         */
    const char *metrics_cert_file; /* --metrics-cert-file (PEM); NULL with the key: self-signed */
    const char *metrics_key_file;  /* --metrics-key-file */
    double qps;               /* --qps, default 200 */
    int burst;                /* --burst, default 400 */
    int leader_elect;         /* --leader-elect */
    const char *leader_elect_namespace; /* default: the kubeconfig/service-account namespace or "default" */
    const char *lease_name;   /* --leader-elect-lease, default "slurmop" */
    unsigned lease_duration_ms; /* --leader-elect-lease-duration, 0 = 15 s */
    unsigned renew_deadline_ms; /* --leader-elect-renew-deadline, 0 = 10 s */
    unsigned retry_period_ms;   /* --leader-elect-retry-period, 0 = 2 s */
    const char *cluster_domain; /* --cluster-domain, default from /etc/resolv.conf or "cluster.local" */
    const char *propagated_node_conditions; /* comma list */
    /* --unhealthy-node-condition, --unhealthy-node-taint, --unhealthy-max-share
     * (borrowed: it must outlive the operator); NULL or empty: off */
    const struct nh_config *health;
    op_slurmrestd_map slurmrestd[OP_MAX_SLURMRESTD]; /* --slurmrestd ns/name=url */
    const char *slurmrestd_ca; /* --slurmrestd-ca: CA bundle (PEM file) that https slurmrestd URLs are
                                  verified with */
    int n_slurmrestd;
    const char *slurm_conf;   /* --slurm-conf (libslurm backend) */
    unsigned
        drift_grace_s; /* --drift-grace: a Ready pod unknown to Slurm this long is replaced (default 60) */
    size_t slurmrestd_max_body; /* --slurmrestd-max-body; 0 = SR_DEFAULT_MAX_BODY */
    unsigned shutdown_grace_ms; /* how long writes in flight may take at stop (default 10 s) */
    int topology_webhook;     /* --topology-webhook: serve the pods/binding webhook (bindhook.h) */
    const char *webhook_addr; /* --webhook-addr, default ":9443" */
    const char *webhook_cert_file; /* --webhook-cert-file (PEM, re-read when it changes); NULL: self-signed */
    const char *webhook_key_file;  /* --webhook-key-file */
    const char *webhook_config;    /* --webhook-config: MutatingWebhookConfiguration kept (caBundle, scope) */
    int webhook_scope_registered;  /* --webhook-scope registered: leave its namespaceSelector alone */
    const char *webhook_names;     /* --webhook-dns-names: comma list for the self-signed certificate */
    uint64_t webhook_rotate_ms;    /* --webhook-cert-rotate (0: 182 days) */
    unsigned webhook_resync_ms;    /* --webhook-resync (0: 60 s) */
    const char *webhook_client_ca; /* --webhook-client-ca: callers need a client certificate it signed */
    const char *webhook_client_names; /* --webhook-client-names: their allowed CNs (comma list) */
    unsigned
        ref_poll_ms; /* --ref-poll-interval: referenced Secrets/ConfigMaps read again this often (0: 30 s) */
    /* --token-users, --token-max-lifetime (tokb_policy_parse; borrowed: it
     * must outlive the operator); NULL: the default policy */
    const struct tokb_policy *token_policy;
    /* --allow-node-taints: NodeSet taintKubeNodes may write the worker taint
     * on Nodes (cluster-scoped: a tenant's NodeSet would otherwise taint any
     * Node its pods land on). Off: the nodetaint reconciler does not run and
     * such a NodeSet is Valid=False. */
    int allow_node_taints;
    /* Called once the operator has stopped (after op_stop, or by itself when
     * it lost the leader lease), with the process exit code to use. */
    void (*on_stopped)(void *data, int exit_code);
    void *stopped_data;
} operator_opts;

typedef struct operator operator;

/* A module of the registry (reconcilers.c): a reconciler, or a part of one
 * that keeps a state of its own (the NodeSet reconciler's Slurm side).
 *
 * The operator makes every module's state before any setup, in registry
 * order, and frees them once its API client has closed (write completions
 * use them until then): first the states free_state frees at once, then
 * the free_late ones, each phase in registry order. A freed state's slot
 * is emptied: op_state asserts on a state reached after its free. */
typedef struct op_reconciler {
    const char *name; /* "nodeset-controller": metrics label and queue name (a part: its name in logs) */
    /* Its place in the registry (enum op_rc, reconcilers.h): op_state finds
     * its state there. */
    unsigned slot;
    /* Make its state (NULL: it has none; then free_state is NULL too). No
     * state needs the operator before setup, where each records it. */
    void *(*new_state)(void);
    /* Free a state new_state made (NULL: nothing). */
    void (*free_state)(void *state);
    /* free_state may leave the state alive past the call: the last of its
     * own completions still in flight (closing Slurm clusters, Slurm
     * writes, work on the threadpool) frees it then, and those completions
     * reach nothing of the operator, which is gone by then. The operator
     * frees these after every other state, so a state freed at once can
     * still reach them through the operator while it goes. */
    int free_late;
    /* Add indexes and store handlers (stores are empty). NULL for a part:
     * its reconciler sets it up, starts and stops it (nss_setup, ...). */
    void (*setup)(operator *op);
    /* The lease is ours: create the queue, enqueue every existing object. */
    int (*start)(operator *op);
    /* Stop: shut the queue down. */
    void (*stop)(operator *op);
} op_reconciler;

struct operator {
    /* read-only for reconcilers */
    uv_loop_t *loop;
    operator_opts opts;
    kcfg *cfg;
    kube_client *client;
    mx_registry *metrics;
    evrec *events;
    char *identity;           /* "<hostname>_<uuid>" */
    char *cluster_domain;
    store *stores[OPK__COUNT];
    objsync *objsync;         /* owned objects' writes (reconcilers/objsync.h) */
    /* The registry's states by slot (op_reconcilers' order, OPR__COUNT of
     * them): a module reaches its own through its typed accessor
     * (controller_of, nss_of, ...), which calls op_state (reconcilers.h). */
    void **state;
    int leading;              /* reconcilers are running */
    int stopping;

    /* metrics every reconciler reports into (label "controller") */
    mx_family *mx_reconcile_seconds;  /* {controller} histogram */
    mx_family *mx_event_to_action;    /* {controller} histogram, seconds */
    mx_family *mx_event_to_pod_write; /* {controller} histogram, seconds: pod creates and deletes only */
    mx_family *mx_api_requests;       /* {verb,resource,code} */
    mx_family *mx_api_seconds;        /* {verb} histogram */
    mx_family *mx_watch_restarts;     /* {resource,reason} (callback gauges) */

    /* private */
    void *priv;
};

/** Start everything. 0, or a negative code with a message in err; *out is
 *  set either way, and a failed start must still be op_stop()ped. */
int op_start(uv_loop_t *loop, const operator_opts *opts, operator **out, char *err, size_t errlen);
/** Graceful stop; opts.on_stopped runs once every handle is closed, with
 *  exit code 0 (or 1 when the operator stopped itself on a lost lease: then
 *  the client's write fence was closed first, so only writes already on the
 *  wire finish during the grace period). */
void op_stop(operator *op);
/** Stop without waiting out the grace period (a second signal): as
 *  op_stop, but writes still in flight are canceled as soon as the watches
 *  are stopped, and the lease is still released. */
void op_stop_hurry(operator *op);

/** True once every cache completed its first list. */
int op_caches_synced(const operator *op);
/** May pods of namespace ns be created and bound now (bh_covers of the
 *  topology webhook; 1 without it). */
int op_webhook_covers(operator *op, const char *ns);

/** The store of a kind (never NULL after op_start). */
static inline store *op_store(const operator *op, enum op_kind k)
{
    assert(k >= OPK_NODESETS && k < OPK__COUNT);
    return op->stores[k];
}

/** A Secret (OPK_SECRETS) or ConfigMap (OPK_CONFIGMAPS) that a custom
 *  resource references by name, in namespace ns: the cached object when the
 *  operator owns it, else the user's object read by name (watchers/byname.h:
 *  a GET at the first lookup, then one per poll interval; changes run the
 *  kind's store handlers like watch events). NULL when absent; *pending
 *  (when not NULL) is then OP_REF_PENDING while the first read is still on
 *  its way, or OP_REF_FULL when there was no room to read it, so the caller
 *  must not conclude "missing" yet (it is queued again by the answer, or
 *  retries shortly). Other kinds: the store lookup. */
const sobj *op_ref_get(operator *op, enum op_kind k, const char *ns, const char *name, int *pending);
/* *pending of op_ref_get: the first read is on its way; or the name could
 * not be taken in at all (the namespace's share of the referenced-object
 * table, or the table, is full: watchers/byname.h). Either way the object
 * is not known to be missing. */
#define OP_REF_PENDING 1
#define OP_REF_FULL 2
/** Read the user's object behind op_ref_get(op, k, ns, name) again now
 *  instead of at its next poll (bn_refresh: at most once a second per
 *  name); nothing for an object the operator owns (its watch is current). */
void op_ref_refresh(operator *op, enum op_kind k, const char *ns, const char *name);

/** Record one reconcile's outcome in the shared metrics. */
void op_observe_reconcile(operator *op, const char *controller, wq_result res, double seconds);
/** Record the latency from the first watch event of a key to its first
 *  write (call once per reconcile that writes). */
void op_observe_action(operator *op, const char *controller, uint64_t first_add_ns);
/** The same for the first pod create or delete of a reconcile
 *  (slurmop_event_to_pod_write_seconds): the action a failed or missing
 *  pod waits for, apart from the status and object writes. */
void op_observe_pod_write(operator *op, const char *controller, uint64_t first_add_ns);

/** Log and emit a Warning event on a CR; also used for validation errors. */
void op_warn(operator *op, const sobj *cr, const char *kind, const char *reason, const char *fmt, ...)
    OP_PRINTF(5, 6);
/** Emit a Normal event on a CR. */
void op_event(operator *op, const sobj *cr, const char *kind, const char *reason, const char *action,
              const char *fmt, ...) OP_PRINTF(6, 7);

#endif
