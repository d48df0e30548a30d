/* nodeset_build: the pure (I/O-free) parts of the NodeSet engine.
 *
 * Everything the NodeSet reconciler computes without talking to anyone
 * (docs/compat.md#nodeset): in-memory defaults, pod identity (names,
 * ordinals, hostnames, Slurm names), the worker pod, revisions and their
 * hash, PVCs and their owner references, the shared worker Service and
 * PodDisruptionBudget, the SSH ConfigMap, the scale-in victim order,
 * rolling-update arithmetic, DaemonSet eligibility, status counts, and the
 * checks Slinky's webhooks make (docs/compat.md#admission-checks).
 *
 * Conventions:
 *  - JSON inputs are borrowed and never modified; every returned cJSON tree
 *    or string is new and owned by the caller (cJSON_Delete / free).
 *  - Functions that take "nodeset" expect the NodeSet object *with defaults
 *    applied* (nsb_with_defaults) unless said otherwise; they read only
 *    metadata.{name,namespace,uid,labels,annotations} and spec.
 *  - Per-pod work (victim order, status, update split) runs on nsb_pod, a
 *    small struct the reconciler fills from its compact pod projections, so
 *    a pass over 8,192 pods parses no JSON.
 *  - Times are Unix seconds (Kubernetes timestamps have second precision);
 *    0 means "unset".
 */
#ifndef OP_NODESET_BUILD_H
#define OP_NODESET_BUILD_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "core/podfit.h"

/* ---- Well-known names (docs/compat.md#well-known-labels-and-annotations) ---------------------- */

#define NSB_API_VERSION "slinky.slurm.net/v1beta1"
#define NSB_KIND "NodeSet"

/* The largest spec.replicas accepted (the CRD's maximum too): 8x the
 * 8,192-node fleets slurmop is built for. A pass allocates and loops in
 * proportion to replicas, so an unbounded value (a valid int32) would stall
 * the loop for every cluster the operator manages; larger values are a
 * validation error. */
#define NSB_REPLICAS_MAX 65536
/* The NodeSet condition True while condemned pods are kept because Slurm
 * cannot be asked (reason: why; message: what to do). */
#define NSB_COND_DRAIN_BLOCKED "DrainBlocked"
#define NSB_LABEL_APP "app.kubernetes.io/name"
#define NSB_LABEL_INSTANCE "app.kubernetes.io/instance"
#define NSB_LABEL_COMPONENT "app.kubernetes.io/component"
#define NSB_LABEL_CLUSTER "slinky.slurm.net/cluster"
#define NSB_LABEL_POD_NAME "nodeset.slinky.slurm.net/pod-name"
#define NSB_LABEL_POD_INDEX "nodeset.slinky.slurm.net/pod-index"
#define NSB_LABEL_POD_HOSTNAME "nodeset.slinky.slurm.net/pod-hostname"
#define NSB_LABEL_SCALING_MODE "nodeset.slinky.slurm.net/scaling-mode"
#define NSB_LABEL_POD_PROTECT "nodeset.slinky.slurm.net/pod-protect"
#define NSB_LABEL_REVISION "controller-revision-hash"
/* The revision label of Slinky's NodeSet controller (Kubernetes' history
 * package) on the pods and ControllerRevisions it made. Read where ours is
 * missing, so that the pods of a NodeSet taken over from Slinky count as
 * the revision they run (docs/migrate-from-slinky.md). */
#define NSB_LABEL_REVISION_SLINKY "controller.kubernetes.io/hash"

#define NSB_ANN_POD_CORDON "nodeset.slinky.slurm.net/pod-cordon"
#define NSB_ANN_DELETION_COST "nodeset.slinky.slurm.net/pod-deletion-cost"
#define NSB_ANN_DEADLINE "nodeset.slinky.slurm.net/pod-deadline"
#define NSB_ANN_HOSTNAME_OVERRIDE "nodeset.slinky.slurm.net/hostname-override"
#define NSB_ANN_TOPOLOGY "topology.slinky.slurm.net/spec"
#define NSB_ANN_DEFAULT_CONTAINER "kubectl.kubernetes.io/default-container"
#define NSB_ANN_SSHD_HASH "slinky.slurm.net/sshd-conf-hash"
#define NSB_ANN_SSSD_HASH "slinky.slurm.net/sssd-conf-hash"

#define NSB_WORKER_TAINT "nodeset.slinky.slurm.net/worker"
#define NSB_SLURMD_PORT 6818
#define NSB_SLURMCTLD_PORT 6817

enum nsb_mode { NSB_STATEFULSET = 0, NSB_DAEMONSET = 1 };

/* ---- Defaults and accessors ------------------------------------------------------------------- */

/** A deep copy of a NodeSet object with Slinky's in-memory defaults filled
 *  in where absent: replicas 1, scalingMode StatefulSet, updateStrategy.type
 *  RollingUpdate with rollingUpdate.maxUnavailable "25%" (RollingUpdate
 *  only), scheduledUpdate.duration "30m" (when scheduledUpdate is given),
 *  revisionHistoryLimit 0, persistentVolumeClaimRetentionPolicy
 *  Retain/Retain, minReadySeconds 0, ordinalPadding 0, pinToNode false,
 *  workloadDisruptionProtection true, pruneSlurmNodeRecords Never,
 *  oversubscribeNode false, ssh.enabled / partition.enabled false when those
 *  objects exist. Values already present are never changed. */
cJSON *nsb_with_defaults(const cJSON *nodeset);

enum nsb_mode nsb_mode_of(const cJSON *nodeset);
/** spec.replicas (defaulted: 1 when absent). */
int nsb_replicas(const cJSON *nodeset);

/* ---- Identity (docs/compat.md#nodeset-identity) ----------------------------------------------- */

/** The ordinal zero-padded to width padding ("%0*d"); malloc'd. */
char *nsb_padded_ordinal(int padding, int ordinal);
/** "<nss>-<padded ordinal>"; malloc'd. */
char *nsb_pod_name(const char *nss, int padding, int ordinal);
/** Parse "<parent>-<digits>" at the end of a pod name (the last '-' followed
 *  only by digits). Returns the ordinal (0..INT32_MAX) and sets *parent_len
 *  (when non-NULL) to the length of the parent part; -1 when the name has no
 *  such suffix or the number does not fit in int32. */
int nsb_split_pod_name(const char *pod_name, size_t *parent_len);
/** The ordinal of a pod of NodeSet nss, or -1 when the name is not
 *  "<nss>-<digits>". Padding is not checked ("nss-007" gives 7). */
int nsb_parse_ordinal(const char *pod_name, const char *nss);

/** StatefulSet-mode hostname of an ordinal: template.spec.hostname (the
 *  prefix) followed by the padded ordinal, else the pod name; malloc'd. */
char *nsb_statefulset_hostname(const cJSON *nodeset, int ordinal);
/** The StatefulSet-mode pod name of an ordinal ("<nodeset>-<padded ordinal>"). */
char *nsb_statefulset_pod_name(const cJSON *nodeset, int ordinal);
/** DaemonSet-mode hostname: the Node's hostname-override annotation when
 *  non-empty (override may be NULL), else the node name up to its first
 *  '.'; malloc'd. */
char *nsb_daemonset_hostname(const char *node_name, const char *override);
/** Same, reading metadata.name and the annotation from a Node object. */
char *nsb_daemonset_hostname_of_node(const cJSON *node);
/** The Slurm NodeSet name: template.spec.hostname with leading and trailing
 *  '-' trimmed when a prefix is set, else the CR name; malloc'd. */
char *nsb_slurm_nodeset_name(const cJSON *nodeset);
/** The Slurm node name of a pod, as slurmd -Z takes it (gethostname()
 *  whole): with hostNetwork, in both modes, the name of the Node it is bound
 *  to, in full (Slinky's GetSlurmNodeName uses spec.hostname in DaemonSet
 *  mode, the name cut at its first dot, which slurmd never registers);
 *  else spec.hostname; else, in StatefulSet mode, the pod name. Arguments
 *  may be NULL (treated as ""); the result points into one of them (never
 *  NULL). nss_pod_slurm_name() is the only caller for pods. */
const char *nsb_slurm_node_name(enum nsb_mode mode, int host_network, const char *node_name,
                                const char *hostname, const char *pod_name);

/** Selector labels {app.kubernetes.io/name: slurmd, app.kubernetes.io/instance: nss}. */
cJSON *nsb_selector_labels(const char *nss);
/** "app.kubernetes.io/instance=<nss>,app.kubernetes.io/name=slurmd" (status.selector); malloc'd. */
char *nsb_selector_string(const char *nss);
/** The worker labels of every pod: selector labels plus component=worker and
 *  slinky.slurm.net/cluster=<controllerRef.name>. */
cJSON *nsb_worker_labels(const cJSON *nodeset);
/** The controller ownerReference of objects the NodeSet owns (pods, PVCs,
 *  revisions, the SSH ConfigMap): controller and blockOwnerDeletion true. */
cJSON *nsb_controller_ref(const cJSON *nodeset);

/* ---- slurmd configuration (docs/compat.md#nodeset-pod) ---------------------------------------- */

/* The environment variable that carries the pod's topology (the Node's
 * topology.slinky.slurm.net/spec annotation) into the slurmd container: the
 * image's entrypoint appends Topology=<it> to --conf when it is not empty
 * (Slinky's images and slurmop's do). */
#define NSB_ENV_TOPOLOGY "POD_TOPOLOGY"
/* The separator of --conf items: a vertical tab. Slurm splits node
 * parameters on any white space (POSIX [[:space:]]); a shell splits words on
 * space, tab and newline only. So the argument is one word with the same
 * bytes whether the image's entrypoint hands it to slurmd as it is or
 * evaluates its arguments in a shell (as Slinky's images do), and an
 * entrypoint that appends " Item" to it still yields separate items. */
#define NSB_CONF_SEP '\v'

/** The first character of s a POSIX shell would not take literally inside
 *  a word (quotes, backslash, $, `, ;, &, |, <, >, parentheses, braces,
 *  brackets, *, ?, ~, control characters), or 0 when there is none. */
int nsb_shell_unsafe(const char *s);

/** The Features value of nsb_slurmd_conf() (comma-separated, sorted: the
 *  Slurm NodeSet name and extraConf's features); NULL when the --conf
 *  cannot be built. malloc'd. */
char *nsb_slurmd_features(const cJSON *nodeset);

/** The value of slurmd's --conf argument: the sorted Key=Value items,
 *  unquoted, separated by NSB_CONF_SEP, so that it means the same passed to
 *  slurmd literally or evaluated by a shell. Features = the Slurm NodeSet
 *  name plus every Feature/Features value of extraConf (comma lists split,
 *  sorted, de-duplicated); every other extraConf key is title-cased ("gres"
 *  -> "Gres") and repeated keys are comma-joined. There is no Topology item
 *  (the entrypoint adds one from NSB_ENV_TOPOLOGY only when it is not
 *  empty: an empty "Topology=" fails the registration once the entrypoint
 *  appends CoreSpecCount/MemSpecLimit, Slinky's issue 261) unless extraConf
 *  has one. Empty extraConf tokens are skipped; a token without '=', or
 *  with a character nsb_shell_unsafe() reports, gives NULL with a message
 *  in err (validation rejects such a NodeSet). malloc'd. */
char *nsb_slurmd_conf(const cJSON *nodeset, char *err, size_t errlen);
/** slurmd's --conf-server value: "<ctl>-controller.<ns>:6817", or
 *  "<host>:<port>" of spec.externalConfig when the Controller is external;
 *  malloc'd, NULL when an external Controller lacks host or port. */
char *nsb_conf_server(const cJSON *controller, const char *ns);
/** The CPU count and memory (MiB) of POD_CPUS / POD_MEMORY: limits of
 *  spec.slurmd.resources override pod-level template.spec.resources limits,
 *  each only when non-zero; quantities rounded up like resource.Quantity's
 *  Value(); memory bytes / 1 MiB truncated. 0 when unset. */
void nsb_resource_limits(const cJSON *nodeset, long long *cpus, long long *mem_mib);

/* ---- Worker pod (docs/compat.md#nodeset-pod) -------------------------------------------------- */

typedef struct nsb_pod_args {
    const cJSON *nodeset;               /* with defaults applied */
    const cJSON *controller;            /* the Controller of spec.controllerRef */
    const char *revision;               /* controller-revision-hash label value; NULL or "" = none */
    int ordinal;                        /* StatefulSet mode */
    const char *node_name;              /* DaemonSet mode: the target k8s Node (required) */
    const char *node_hostname_override; /* DaemonSet mode: that Node's hostname-override, or NULL */
    const char *pin_node; /* StatefulSet mode with pinToNode: the node the ordinal is pinned to, or NULL */
    const char *cluster_domain; /* NULL = "cluster.local" */
    const char *sshd_conf_hash; /* value of slinky.slurm.net/sshd-conf-hash; NULL = SHA-256 of "" */
    const char *sssd_conf_hash; /* value of slinky.slurm.net/sssd-conf-hash; NULL = SHA-256 of "" */
} nsb_pod_args;

/** The pod template before identity: {metadata:{labels,annotations},
 *  spec} with the base slurmd and logfile containers, volumes, tolerations,
 *  subdomain and DNS search, the user's spec.slurmd / spec.logfile merged
 *  into their containers and spec.template merged over it all
 *  (reconcilers/podtemplate.h rules), then the NodeSet's own labels and
 *  annotations added where the operator has not set the key
 *  (kubectl.kubernetes.io/last-applied-configuration is not copied).
 *  Only nodeset, controller, cluster_domain and the two hashes of a are read.
 *  NULL with a message in err when the Controller lacks slurmKeyRef.name or
 *  an external address, or extraConf is malformed. */
cJSON *nsb_build_template(const nsb_pod_args *a, char *err, size_t errlen);

/** A complete worker Pod object ready to POST:
 *  - StatefulSet mode: metadata.name "<nss>-<padded ordinal>", hostname
 *    per nsb_statefulset_hostname, labels pod-index/pod-name/pod-hostname;
 *    with pin_node a required node affinity matchFields metadata.name In
 *    [pin_node] replaces the user's required node affinity;
 *  - DaemonSet mode: metadata.generateName "<nss>-" (pod-name label "" until
 *    the server names the pod), hostname per nsb_daemonset_hostname, the
 *    required node affinity replaced by matchFields metadata.name In
 *    [node_name], and the DaemonSet controller's tolerations (not-ready,
 *    unreachable, disk/memory/pid-pressure, unschedulable, plus
 *    network-unavailable with hostNetwork);
 *  - both: scaling-mode and controller-revision-hash labels, controller
 *    ownerReference to the NodeSet, one PVC volume per volumeClaimTemplate
 *    (replacing a template volume of the same name, claims first), the
 *    required pod anti-affinity on kubernetes.io/hostname for
 *    app.kubernetes.io/name In [slurmd] appended unless oversubscribeNode,
 *    and spec.nodeName removed (the scheduler places the pod).
 *  NULL with a message in err on the errors of nsb_build_template, or a
 *  missing node_name in DaemonSet mode. */
cJSON *nsb_build_pod(const nsb_pod_args *a, char *err, size_t errlen);
/** The same pod stamped from a template made earlier by nsb_build_template
 *  with the same nodeset, controller, domain and hashes (template is only
 *  read): build the template once per pass, then stamp every ordinal or
 *  node. NULL with a message in err for a missing DaemonSet node name. */
cJSON *nsb_stamp_pod(const nsb_pod_args *a, const cJSON *template, char *err, size_t errlen);

/** SHA-256 hex of data (the hash annotations); out holds 65 bytes. */
void nsb_conf_hash(const void *data, size_t len, char out[65]);

/* ---- DaemonSet eligibility (docs/compat.md#nodeset-scaling) ----------------------------------- */

/** The pod spec of a simulated DaemonSet pod: the merged template plus the
 *  DaemonSet tolerations, without nodeName (evaluating it against a Node is
 *  the same as setting nodeName to that Node). Build it once per pass and
 *  test every Node with nsb_daemon_fit. NULL as nsb_build_template. */
cJSON *nsb_daemon_sim_spec(const nsb_pod_args *a, char *err, size_t errlen);
/** fit_daemon over the simulated spec: should_run (create a pod there) and
 *  should_continue (keep an existing pod: only untolerated NoExecute says no). */
void nsb_daemon_fit(const cJSON *sim_spec, const cJSON *node, fit_result *out);
/** The same for a Node whose labels are read through `labels` (the
 *  operator's Node cache keeps them interned, out of the trimmed JSON). */
void nsb_daemon_fit_labels(const cJSON *sim_spec, const cJSON *node, lsel_lookup_fn labels, void *ctx,
                           fit_result *out);

/* ---- Revisions (docs/compat.md#nodeset-revisions) --------------------------------------------- */

#define NSB_HASH_MAX 16

/** The revision patch: {"spec":{"template":{...,"$patch":"replace"},
 *  "ordinalPadding":n,"oversubscribeNode":b[,"slurmd":{...,"$patch":"replace"}]
 *  [,"logfile":{...}][,"ssh":{...}][,"extraConf":s]}}. template is always
 *  present ({} when unset); slurmd, logfile and ssh only when non-empty
 *  objects; extraConf only when a non-empty string. replicas, update
 *  strategy, retention policy etc. are not part of it, so changing them
 *  never starts a rollout. */
cJSON *nsb_revision_patch(const cJSON *nodeset);


/** The revision hash, Kubernetes' ControllerRevision scheme applied to our
 *  canonical bytes: h = FNV-1 32-bit (offset 2166136261, prime 16777619,
 *  multiply then xor) over json_canonical(patch), continued over the
 *  decimal text of collision_count; the decimal text of h is then mapped
 *  character by character to "bcdfghjklmnpqrstvwxz2456789"[c % 27]
 *  (apimachinery's SafeEncodeString). Deterministic across runs and
 *  machines; at most 10 characters. */
void nsb_revision_hash(const cJSON *patch, int32_t collision_count, char out[NSB_HASH_MAX]);
/** "<nss>-<hash>"; malloc'd. */
char *nsb_revision_name(const char *nss, const char *hash);
/** The hash part of a revision identifier: v itself, or what follows
 *  "<nss>-" when v starts with it (pods and nodeSetHash may carry either the
 *  bare hash or the ControllerRevision name). */
const char *nsb_revision_hash_part(const char *v, const char *nss);
/** Whether two revision identifiers (hash or name) denote the same revision. */
int nsb_revision_same(const char *a, const char *b, const char *nss);

/** An apps/v1 ControllerRevision: name "<nss>-<hash>", labels =
 *  template.metadata.labels + selector labels + controller-revision-hash,
 *  annotations = the NodeSet's (minus last-applied-configuration),
 *  controller ownerReference, data = patch (copied), revision. */
cJSON *nsb_build_revision(const cJSON *nodeset, const cJSON *patch, const char *hash, int64_t revision);

/** What the reconciler knows about one existing ControllerRevision. */
typedef struct nsb_rev {
    const char *name;  /* metadata.name */
    const char *hash;  /* controller-revision-hash label (else Slinky's), or NULL */
    int64_t revision;  /* .revision */
    const cJSON *data; /* .data (borrowed) */
    int slinky;        /* made by Slinky (its label, not ours): data is Go's serialization */
} nsb_rev;

enum nsb_rev_action {
    NSB_REV_REUSE,  /* revs[update] equals the patch and is the newest: nothing to write */
    NSB_REV_BUMP,   /* revs[update] equals the patch but is older: set its .revision to plan.revision */
    NSB_REV_CREATE, /* create nsb_build_revision(nodeset, patch, plan.hash, plan.revision) */
};

typedef struct nsb_rev_plan {
    enum nsb_rev_action action;
    int update;              /* index in revs of the update revision (REUSE/BUMP), -1 for CREATE */
    int current;             /* index in revs named by status.nodeSetHash, -1 = the update revision */
    char hash[NSB_HASH_MAX]; /* hash of the update revision */
    int64_t revision;        /* revision number the update revision has or must get */
    int32_t collision_count; /* to store in status.collisionCount */
} nsb_rev_plan;

/** Whether two revision patches describe the same NodeSet template once
 *  the zero values that Go's encoding writes and ours leaves out are
 *  dropped: object members that are null, false, 0, "" or empty objects or
 *  lists (after the same pruning) do not count; array elements are kept in
 *  order. A Slinky-made revision holds the same template as ours in Go's
 *  serialization (`"metadata":{"creationTimestamp":null}`, `"resources":{}`,
 *  ...), which json_equal would call different. */
int nsb_revision_equivalent(const cJSON *a, const cJSON *b);

/** Choose the update and current revisions like Kubernetes' StatefulSet
 *  history: the next revision number is the highest + 1 (1 when none); a
 *  revision whose data equals patch (json_equal; nsb_revision_equivalent
 *  for one made by Slinky) is reused, and rolled
 *  forward (BUMP) when it is not the newest; otherwise a new one is
 *  planned, its name made unique against revs by incrementing
 *  collision_count while a revision of that name has different data.
 *  status_hash is status.nodeSetHash (bare hash or name; NULL when unset).
 *  If the create then fails with AlreadyExists for an object not in revs,
 *  compare with nsb_revision_collides and re-plan with collision_count + 1. */
void nsb_plan_revisions(const nsb_rev *revs, size_t n, const cJSON *patch, int32_t collision_count,
                        const char *status_hash, const char *nss, nsb_rev_plan *out);
/** True when an existing ControllerRevision object of the wanted name holds
 *  other data than patch (a real hash collision). */
int nsb_revision_collides(const cJSON *existing, const cJSON *patch);

/** Which revisions to delete (truncateHistory): those that are not live
 *  (live = any identifier in live[], matched by nsb_revision_same: pass the
 *  current and update revisions and every pod's revision label), oldest
 *  first by .revision, beyond limit. Writes indices into out (capacity n)
 *  and returns how many. */
size_t nsb_truncate_history(const nsb_rev *revs, size_t n, const char *const *live, size_t nlive,
                            int32_t limit, const char *nss, size_t *out);

/* ---- PVCs (docs/compat.md#nodeset-pvcs) ------------------------------------------------------- */

/** "<claim>-<nss>-<suffix>", suffix = padded ordinal (StatefulSet) or the
 *  pod's hostname label (DaemonSet); malloc'd. */
char *nsb_pvc_name(const char *claim, const char *nss, const char *suffix);
/** The PVC suffix of a pod: padded ordinal (StatefulSet mode) or hostname. */
char *nsb_pvc_suffix(const cJSON *nodeset, int ordinal, const char *hostname);

/** Bring the ownerReferences of a claim in line with the retention policy,
 *  as Kubernetes' StatefulSet does (other owners are kept):
 *   Retain/Retain: no NodeSet or pod reference;
 *   whenDeleted=Delete, whenScaled=Retain: NodeSet reference only;
 *   whenDeleted=Retain, whenScaled=Delete: pod reference once the pod is
 *     condemned for scale-in (pod_condemned), none otherwise;
 *   Delete/Delete: NodeSet reference, replaced by the pod reference once
 *     the pod is condemned.
 *  References are non-controller ({apiVersion, kind, name, uid}). pod_uid
 *  may be NULL when no pod exists (then no pod reference is added). Returns
 *  1 when the claim changed. */
int nsb_pvc_update_owner_refs(cJSON *pvc, const cJSON *nodeset, const char *pod_name, const char *pod_uid,
                              int pod_condemned);

/** A PersistentVolumeClaim from one of spec.volumeClaimTemplates: the
 *  template's metadata (labels + selector labels, annotations) and spec,
 *  name per nsb_pvc_name, namespace of the NodeSet, owner references per
 *  nsb_pvc_update_owner_refs (no pod yet). */
cJSON *nsb_build_pvc(const cJSON *nodeset, const cJSON *claim_template, const char *suffix);

/* ---- Shared per-cluster objects (docs/compat.md#nodeset-objects) ------------------------------ */

typedef struct nsb_owner {
    const char *name; /* a NodeSet of the Controller */
    const char *uid;
} nsb_owner;

/** Non-controller ownerReferences (blockOwnerDeletion true) to every
 *  NodeSet given, sorted by name. */
cJSON *nsb_shared_owner_refs(const nsb_owner *owners, size_t n);
/** "slurm-workers-<ctl>"; malloc'd. */
char *nsb_worker_service_name(const char *ctl);
/** "slurm-workers-pdb-<ctl>"; malloc'd. */
char *nsb_worker_pdb_name(const char *ctl);
/** The headless Service slurm-workers-<ctl>: clusterIP None,
 *  publishNotReadyAddresses, selector name=slurmd + cluster=<ctl>, port
 *  slurmd 6818/TCP, shared owner references. */
cJSON *nsb_build_worker_service(const char *ctl, const char *ns, const nsb_owner *owners, size_t n);
/** The PodDisruptionBudget slurm-workers-pdb-<ctl>: maxUnavailable 0 over
 *  pods labelled pod-protect=true and cluster=<ctl>, shared owner references. */
cJSON *nsb_build_worker_pdb(const char *ctl, const char *ns, const nsb_owner *owners, size_t n);
/** sshd_config text of the worker pods; extra (may be NULL) is appended. */
char *nsb_sshd_config(const char *extra);
/** The ConfigMap "<nss>-ssh-config" (key sshd_config) when ssh.enabled,
 *  else NULL. */
cJSON *nsb_build_ssh_configmap(const cJSON *nodeset);

/* ---- Pods as the engine sees them ------------------------------------------------------------- */

enum nsb_phase {
    NSB_PHASE_NONE = 0, /* not created yet (empty phase) */
    NSB_PHASE_PENDING,
    NSB_PHASE_RUNNING,
    NSB_PHASE_SUCCEEDED,
    NSB_PHASE_FAILED,
    NSB_PHASE_UNKNOWN,
};

/** A compact description of one pod; strings are borrowed. */
typedef struct nsb_pod {
    const char *name;
    const char *revision; /* controller-revision-hash label, or NULL */
    int ordinal;          /* -1 when the name carries none (DaemonSet mode) */
    enum nsb_phase phase;
    unsigned scheduled : 1;   /* spec.nodeName is set */
    unsigned ready : 1;       /* condition Ready is True */
    unsigned cordoned : 1;    /* pod-cordon annotation parses as true */
    unsigned terminating : 1; /* deletionTimestamp is set */
    int32_t deletion_cost;    /* pod-deletion-cost annotation (0 when absent or unparsable) */
    int64_t ready_since;      /* lastTransitionTime of Ready when ready, else 0 */
    int64_t deadline;         /* pod-deadline annotation, 0 when none */
    int64_t created;          /* creationTimestamp, 0 when unset */
    void *ud;                 /* the caller's own record */
} nsb_pod;

enum nsb_phase nsb_phase_parse(const char *s);
/** Fill p from a Pod object (strings point into pod). */
void nsb_pod_from_json(const cJSON *pod, const char *nss, nsb_pod *p);

/** Running and Ready. */
int nsb_pod_running_ready(const nsb_pod *p);
/** Running and Ready for longer than min_ready seconds at now (k8s
 *  IsPodAvailable: min_ready 0 means as soon as Ready). */
int nsb_pod_available(const nsb_pod *p, int32_t min_ready, int64_t now);
/** Healthy for the update split: Running, Ready and not terminating. */
int nsb_pod_healthy(const nsb_pod *p);

/** The scale-in victim order (docs/compat.md#nodeset-victim-order); negative when a should be
 *  deleted before b, positive when after, 0 when Slinky sees no difference.
 *  Rules, first difference wins: 1 unscheduled first; 2 phase Pending <
 *  Unknown < Running (other phases weigh as Pending); 3 not Ready first;
 *  4 lower deletion cost first; 5 earlier deadline first (none = earliest);
 *  6 cordoned first; 7 higher ordinal first; 8 both Ready: more recently
 *  Ready first (unset = most recent); 9 newer creation first (unset = newest). */
int nsb_victim_cmp(const nsb_pod *a, const nsb_pod *b);
/** Sort pointers in victim order (ties broken by name, so the result is
 *  deterministic). */
void nsb_sort_victims(const nsb_pod **v, size_t n);

/* ---- Update strategy (docs/compat.md#nodeset-updates) ----------------------------------------- */

/** maxUnavailable (a JSON number or "N%" string; NULL = "25%") scaled
 *  against total, percentages rounded up, at least 1. 0 or OP_EINVAL for
 *  anything else (a string without '%', negative numbers, garbage). */
int nsb_max_unavailable(const cJSON *int_or_percent, int total, int *out);
/** The rolling-update budget clamp(max_unavailable - unavailable, 0, max_unavailable). */
int nsb_rolling_budget(int max_unavailable, int unavailable);

typedef struct nsb_split {
    size_t old_unhealthy; /* out[0 .. old_unhealthy): old and unhealthy, oldest creation first (name ties) */
    size_t old_healthy;   /* next old_healthy: old and healthy, in victim order */
    size_t fresh;         /* the rest: non-terminating pods at the update revision, in victim order */
} nsb_split;

/** Split pods by revision (nsb_revision_same against update_rev): a pod is
 *  new when it is not terminating and carries the update revision, else
 *  old. Fills out (capacity n) as described in nsb_split. */
void nsb_split_update(const nsb_pod *pods, size_t n, const char *update_rev, const char *nss,
                      const nsb_pod **out, nsb_split *counts);
/** Unavailable count of the rolling update: new pods that are not available
 *  plus, in StatefulSet mode (replicas >= 0), the missing slots
 *  max(replicas - n, 0). Pass replicas -1 in DaemonSet mode. */
int nsb_rolling_unavailable(const nsb_pod *pods, size_t n, const char *update_rev, const char *nss,
                            int replicas, int32_t min_ready, int64_t now);

/* ---- Status (docs/compat.md#nodeset-spec-and-status) ------------------------------------------ */

typedef struct nsb_counts {
    int32_t replicas;    /* phase set */
    int32_t updated;     /* created, not terminating, at the update revision */
    int32_t current;     /* created, not terminating, at the current revision */
    int32_t ready;       /* Running and Ready */
    int32_t available;   /* ready and available (minReadySeconds) */
    int32_t unavailable; /* StatefulSet: replicas - available; DaemonSet: desired - available; >= 0 */
    int32_t desired;     /* StatefulSet: spec.replicas; DaemonSet: nodes that should run a pod */
} nsb_counts;

void nsb_count(const nsb_pod *pods, size_t n, const char *update_rev, const char *current_rev,
               const char *nss, enum nsb_mode mode, int32_t desired, int32_t min_ready, int64_t now,
               nsb_counts *out);

typedef struct nsb_slurm_counts {
    int32_t idle, allocated, down, drain; /* allocated = ALLOCATED + MIXED */
    /* A NodeSet that follows the queue (nodedemand.h): what its pending
     * jobs ask for and its nodes idle past the cool-down; in the status
     * only when demand_known. */
    int demand_known;
    int32_t pending_nodes, idle_cooled;
} nsb_slurm_counts;

/** The NodeSet status object: counts, Slurm counts, observedGeneration
 *  (metadata.generation), nodeSetHash, collisionCount, selector,
 *  ordinalToNode (copied when non-NULL) and the existing conditions. */
cJSON *nsb_build_status(const cJSON *nodeset, const nsb_counts *c, const nsb_slurm_counts *s,
                        const char *hash, int32_t collision_count, const cJSON *ordinal_to_node);

/* ---- Validation (docs/compat.md#admission-checks) --------------------------------------------- */

typedef struct nsb_msgs {
    char **v;
    size_t n;
} nsb_msgs;

/** The NodeSet webhook checks; old is the previous object on update, NULL on
 *  create. Appends one message per problem to out (which must start zeroed
 *  or hold earlier messages) and returns how many it added. */
size_t nsb_validate(const cJSON *nodeset, const cJSON *old, nsb_msgs *out);
void nsb_msgs_free(nsb_msgs *m);

/** Go duration text ("30m", "1h30m", "1.5h", "90s", "250ms") in seconds.
 *  0 or OP_EINVAL. */
int nsb_parse_duration(const char *s, double *seconds);

#endif
