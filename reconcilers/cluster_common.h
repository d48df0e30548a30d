/* cluster_common: what the Controller, RestApi, Accounting, LoginSet and Token
 * builders share (docs/compat.md#well-known-labels-and-annotations,
 * docs/compat.md#cluster-kinds).
 *
 * The builders are pure functions: a custom resource as the API server
 * stores it goes in, the desired Kubernetes object comes out as a new cJSON
 * tree. They never talk to the API server. Objects they need besides the CR
 * itself (referenced Secrets, ConfigMaps, the Controller of a RestApi ...)
 * come from a read-only lookup the caller provides (clc_env), normally backed
 * by the reconciler's cache. Everything here is deterministic: the same
 * inputs give byte-identical JSON (maps are emitted with sorted keys), so a
 * reconciler can diff desired against observed without spurious patches.
 *
 * Error convention (core/err.h): builders return 0 or a negative OP_E* code
 * and, when the caller passes a non-NULL `why`, store a malloc'd sentence in
 * *why that is fit for a Warning event (the caller frees it). On error *out
 * is left NULL.
 */
#ifndef OP_CLUSTER_COMMON_H
#define OP_CLUSTER_COMMON_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "core/mem.h"

/* Group/version of the Slinky kinds, used in ownerReferences. */
#define CLC_API_VERSION "slinky.slurm.net/v1beta1"

/* Well-known labels and annotations (docs/compat.md#well-known-labels-and-annotations). */
#define CLC_LABEL_NAME "app.kubernetes.io/name"
#define CLC_LABEL_INSTANCE "app.kubernetes.io/instance"
#define CLC_LABEL_COMPONENT "app.kubernetes.io/component"
#define CLC_LABEL_CONTROLLER_ACTIVE "controller.slinky.slurm.net/active"
#define CLC_ANN_LAST_APPLIED "kubectl.kubernetes.io/last-applied-configuration"
#define CLC_ANN_DEFAULT_CONTAINER "kubectl.kubernetes.io/default-container"
#define CLC_ANN_SLURM_KEY_HASH "slinky.slurm.net/slurm-key-hash"
#define CLC_ANN_JWT_KEY_HASH "slinky.slurm.net/jwt-key-hash"
#define CLC_ANN_SLURM_CONFIG_HASH "slinky.slurm.net/slurm-config-hash"
#define CLC_ANN_SLURMDBD_CONF_HASH "slinky.slurm.net/slurmdbd-conf-hash"
#define CLC_ANN_SSHD_CONF_HASH "slinky.slurm.net/sshd-conf-hash"
#define CLC_ANN_SSSD_CONF_HASH "slinky.slurm.net/sssd-conf-hash"
#define CLC_ANN_SSH_HOST_KEYS_HASH "slinky.slurm.net/ssh-host-keys-hash"

/* Slurm constants baked into the images and the generated configuration. */
#define CLC_SLURM_USER "slurm"
#define CLC_SLURM_UID 401
#define CLC_SLURMCTLD_PORT 6817
#define CLC_SLURMD_PORT 6818
#define CLC_SLURMDBD_PORT 6819
#define CLC_SLURMRESTD_PORT 6820
#define CLC_LOGIN_PORT 22
#define CLC_DEFAULT_CLUSTER_DOMAIN "cluster.local"

/* Read-only access to the objects of the CR's namespace (the Controller and
 * the Accounting: of the namespace its reference names).
 *
 * get(ud, kind, name) returns the object as stored (or a projection holding
 * at least the fields listed below), or NULL when it does not exist. The
 * builders never keep the pointer past the call and never modify it.
 * Kinds and the fields read from them:
 *   "Secret"                 data (base64 values, as the API server returns them)
 *   "ConfigMap"              data
 *   "PersistentVolumeClaim"  spec.accessModes
 *   "Controller"             metadata.name, spec (RestApi, LoginSet)
 *   "Accounting"             metadata.name, spec.external, spec.externalConfig (slurm.conf)
 * A NULL get finds nothing. cluster_domain is the DNS cluster domain used in
 * search paths ("cluster.local" when NULL). */
typedef const cJSON *(*clc_get_fn)(void *ud, const char *kind, const char *name);
typedef struct clc_env {
    clc_get_fn get;
    void *ud;
    const char *cluster_domain;
} clc_env;

/** env->get(kind, name), tolerating a NULL env, NULL get and NULL/empty name. */
const cJSON *clc_get(const clc_env *env, const char *kind, const char *name);
/** The cluster DNS domain of env ("cluster.local" by default). */
const char *clc_cluster_domain(const clc_env *env);

/** The string member key of obj, matched exactly (keys may contain dots,
 *  unlike json_get_str paths), or NULL. */
const char *clc_str(const cJSON *obj, const char *key);

/** Store a formatted message in *why (when why is non-NULL) and return code. */
int clc_fail(char **why, int code, const char *fmt, ...) OP_PRINTF(3, 4);

/** A new object {"name":name,"namespace":ns}. */
cJSON *clc_metadata(const char *name, const char *ns);

/** One ownerReference entry: apiVersion, kind, name, uid, controller,
 *  blockOwnerDeletion (both true when controller is non-zero, as
 *  controllerutil.SetControllerReference does; blockOwnerDeletion only
 *  otherwise). */
cJSON *clc_owner_ref(const char *api_version, const char *kind, const char *name, const char *uid,
                     int controller);
/** Set obj.metadata.ownerReferences to the single controller reference of a
 *  Slinky CR of the given kind (name and uid read from cr.metadata). */
void clc_set_controller_ref(cJSON *obj, const char *kind, const cJSON *cr);

/** Object labels for a component of cr: cr.metadata.labels, then extra
 *  (the user's labels for that object, may be NULL), then
 *  clc_labels(app, cr name, component), later ones winning. New object. */
cJSON *clc_labels_for(const cJSON *cr, const cJSON *extra, const char *app, const char *component);

/** A new object {apiVersion, kind, metadata:{name, namespace (of cr),
 *  labels, annotations, ownerReferences: [controller ref to cr of kind
 *  cr_kind]}}. labels and annotations are taken over (NULL: empty). */
cJSON *clc_new_object(const char *api_version, const char *kind, const char *name, const cJSON *cr,
                      const char *cr_kind, cJSON *labels, cJSON *annotations);

/** Merge string maps: the result holds every string-valued entry of the
 *  given objects (NULL and non-objects are skipped), later maps winning on
 *  equal keys, keys sorted bytewise. Always returns a new object.
 *  kubectl.kubernetes.io/last-applied-configuration is never copied: it is
 *  kubectl's record of the CR itself, and copied into a pod template it
 *  would roll the pods on every `kubectl apply` of the CR. */
cJSON *clc_strmap_merge(const cJSON *const *maps, size_t n);
#define CLC_MERGE(...)                                                                                       \
    clc_strmap_merge((const cJSON *const[]){__VA_ARGS__},                                                    \
                     sizeof((const cJSON *const[]){__VA_ARGS__}) / sizeof(const cJSON *))
/** Sort the members of an object by key (bytewise), in place. */
void clc_sort_keys(cJSON *obj);
/** A new string map {k1:v1, k2:v2, ...} from NULL-terminated key/value pairs. */
cJSON *clc_strmap(const char *k, ...);

/** Operator labels of a component: {name: app, instance}; with component
 *  non-NULL also {component}. The two-key form is the selector. */
cJSON *clc_labels(const char *app, const char *instance, const char *component);

/* ---- hashes (the *-hash pod annotations) -------------------------------
 * Hex SHA-256, lower case, 64 characters, or "" as stated. */

/** Slinky's CheckSumFromMap over obj.data: the values concatenated in
 *  bytewise order of their keys, keys themselves not hashed. base64 != 0
 *  decodes each value first (Secret data); a value that is not valid base64
 *  is hashed as its raw text. "" when obj is NULL or the concatenation is
 *  empty (no data, or only empty values). */
void clc_hash_data(const cJSON *obj, int base64, char out[65]);
/** SHA-256 of the base64-decoded value of secret.data[key]; the hash of the
 *  empty string when the Secret or key is missing (Slinky's CheckSum). */
void clc_hash_secret_key(const cJSON *secret, const char *key, char out[65]);
/** SHA-256 of a string (NULL hashes as ""). */
void clc_hash_str(const char *s, char out[65]);

/** The effective JWT key selector of a spec: jwtKeyRef, else the deprecated
 *  jwtHs256KeyRef, else NULL. */
const cJSON *clc_jwt_ref(const cJSON *spec);

/** Clusterwide Slurm NodeSet name of a NodeSet CR (docs/compat.md#nodeset-identity): the
 *  first word of spec.template.spec.hostname with leading and trailing '-'
 *  removed, or the CR name when there is no hostname (or nothing is left).
 *  Returns a pointer into nodeset or into buf (size >= 254). */
const char *clc_nodeset_name(const cJSON *nodeset, char *buf, size_t size);

/* ---- facts about a Controller CR (defaults applied on the fly) ---------- */

/** spec.clusterName, or "<namespace>_<name>" when empty; malloc'd. */
char *clc_cluster_name(const cJSON *controller);
/** slurmctld replicas: 1 when external or HA is off, else 1 + ha.backups
 *  (default 1, negative values count as 0). */
int clc_controller_replicas(const cJSON *controller);
/** spec.external as a boolean. */
int clc_is_external(const cJSON *cr);

/* ---- pieces of pod specs ------------------------------------------------ */

/** {name, mountPath[, subPath][, readOnly: true]}; subpath may be NULL. */
cJSON *clc_mount(const char *name, const char *path, const char *subpath, int readonly);
/** {key, path[, mode]} (mode < 0: none). */
cJSON *clc_key_to_path(const char *key, const char *path, int mode);
/** Projection {secret:{name, items:[{key, path}]}}. */
cJSON *clc_secret_projection(const char *name, const char *key, const char *path);
/** Projection {configMap:{name[, items:[{key, path}]]}}; key NULL: all keys. */
cJSON *clc_configmap_projection(const char *name, const char *key, const char *path);
/** {name, emptyDir:{[medium: "Memory"]}}. */
cJSON *clc_empty_dir(const char *name, int memory);
/** A container's command ["sh", "-c", script]. */
cJSON *clc_sh_command(const char *script);
/** A probe {<handler>, [failureThreshold, periodSeconds]} where handler is
 *  taken over; thresholds <= 0 are omitted. */
cJSON *clc_probe(cJSON *handler_kv, int failure_threshold, int period_seconds);
/** {httpGet:{path, port:"<named port>"}} as a detached key/value item. */
cJSON *clc_http_get(const char *path, const char *port);
/** {tcpSocket:{port:<n>}} as a detached key/value item. */
cJSON *clc_tcp_socket(int port);
/** The `logfile` sidecar's shell script (run as `sh -c <script>`, the FIFO
 *  path in $SOCKET, default /tmp/logfile.log): create the FIFO unless it
 *  exists, copy it to stdout forever, reopening it after every writer
 *  closes it. The copy runs in the background and the shell waits for it, so
 *  a SIGTERM or SIGINT reaches the shell's trap at once and the sidecar exits
 *  0: as PID 1 of its container a shell without a trap ignores SIGTERM, and
 *  every pod delete would wait out the grace period. */
const char *clc_logfile_script(void);
/** The Slurm version an image reference names in its tag: the tag's leading
 *  "YY.MM" (an optional 'v' first; "24.11", "25.11-ubuntu24.04", "26.05.5"
 *  all count), as YY * 100 + MM (2411); 0 when the reference has no tag or
 *  the tag does not start so ("latest", a digest only). */
int clc_image_slurm_version(const char *image);
/** Whether the daemons of image answer HTTP /livez and /readyz on their
 *  Slurm port: Slurm 25.05 and later do, 24.11 and earlier do not (their
 *  HTTP probes never pass). An unknown version gets 0, TCP probes, which
 *  fit every version. */
int clc_image_http_probes(const char *image);
/** {runAsNonRoot: true, runAsUser: id, runAsGroup: id[, fsGroup: id]}. */
cJSON *clc_security_context(int id, int with_fs_group);

/* ---- Services ----------------------------------------------------------- */

typedef struct clc_service_opts {
    const char *name, *ns;
    cJSON *labels;          /* taken over */
    cJSON *annotations;     /* taken over */
    const cJSON *user;      /* the CR's service block {metadata, spec, port, nodePort} or NULL */
    cJSON *selector;        /* taken over; added to the user's selector, ours wins */
    const char *port_name;  /* our port: name, targetPort (named) and protocol TCP */
    int default_port;       /* used when user.port is 0 or absent */
    int use_node_port;      /* copy user.nodePort into our port */
    int headless;           /* clusterIP None + publishNotReadyAddresses */
    int ignore_user_spec;   /* do not start from user.spec (only metadata is used) */
    int clear_external_ips; /* drop spec.externalIPs (CVE-2020-8554) */
} clc_service_opts;

/** A Service: spec = user.spec (unless ignore_user_spec) + our selector +
 *  our port appended to the user's ports. Two ports with the same name or
 *  number are an error (OP_EINVAL), as in Slinky. On success *out owns a new
 *  object without ownerReferences. The taken-over members are consumed in
 *  every case. */
int clc_service(clc_service_opts *o, cJSON **out, char **why);

/* ---- Go durations --------------------------------------------------------- */

/** Parse a Go time.Duration string ("15m", "1h30m", "1.5h", "300ms", "-2s",
 *  "0") into nanoseconds. 0, or OP_EPARSE (malformed) / OP_ETOOBIG (out of
 *  int64 range). */
int clc_parse_duration(const char *s, int64_t *ns);

#endif
