/* ks_table: meta.k8s.io/v1 Tables, the answer to `kubectl get`.
 *
 * kubectl asks for `application/json;as=Table;v=v1;g=meta.k8s.io` and prints
 * the columns the server chooses. Custom resources get Name followed by the
 * CRD version's additionalPrinterColumns (or Age when it has none), each a
 * JSONPath evaluated on the object, as apiextensions-apiserver does. Pods,
 * Nodes, Namespaces, ConfigMaps, Secrets, Leases, Services, Deployments,
 * StatefulSets, Events (of both groups) and CRDs get the columns of
 * kube-apiserver's printers; other built-ins get Name and Age.
 *
 * Rows are built only when a Table is asked for, from the stored bytes of the
 * objects being listed, so plain JSON requests pay nothing.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "kubesim/ks_int.h"
#include "core/json.h"
#include "core/mem.h"
#include "core/rfc3339.h"

/* ---- column definitions ------------------------------------------------- */

typedef struct col_def {
    const char *name, *type, *format, *desc;
    int priority;
} col_def;

#define DESC_NAME                                                                                           \
    "Name must be unique within a namespace. Is required when creating resources, although some resources " \
    "may allow a client to request the generation of an appropriate name automatically. Name is primarily " \
    "intended for creation idempotence and configuration definition. Cannot be updated. More info: "        \
    "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names"
#define DESC_CREATED                                                                                        \
    "CreationTimestamp is a timestamp representing the server time when this object was created. It is "    \
    "not guaranteed to be set in happens-before order across separate operations. Clients may not set this " \
    "value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null "  \
    "for lists. More info: "                                                                                \
    "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"
#define DESC_NODE_ADDRS                                                                                     \
    "List of addresses reachable to the node. Queried from cloud provider, if available. More info: "       \
    "https://kubernetes.io/docs/reference/node/node-status/#addresses Note: This field is declared as "     \
    "mergeable, but the merge key is not sufficiently unique, which can cause data corruption when it is "  \
    "merged. Callers should instead use a full-replacement patch. See https://pr.k8s.io/79391 for an "       \
    "example. Consumers should assume that addresses can change during the lifetime of a Node. However, "   \
    "there are some exceptions where this may not be possible, such as Pods that inherit a Node's address " \
    "in its own status or consumers of the downward API (status.hostIP)."

#define COL_NAME {"Name", "string", "name", DESC_NAME, 0}
#define COL_AGE {"Age", "string", "", DESC_CREATED, 0}

static const col_def pod_cols[] = {
    COL_NAME,
    {"Ready", "string", "", "The aggregate readiness state of this pod for accepting traffic.", 0},
    {"Status", "string", "", "The aggregate status of the containers in this pod.", 0},
    {"Restarts", "string", "",
     "The number of times the containers in this pod have been restarted and when the last container in this "
     "pod has restarted.",
     0},
    COL_AGE,
    {"IP", "string", "",
     "podIP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.",
     1},
    {"Node", "string", "",
     "NodeName indicates in which node this pod is scheduled. If empty, this pod is a candidate for "
     "scheduling by the scheduler defined in schedulerName. Once this field is set, the kubelet for this "
     "node "
     "becomes responsible for the lifecycle of this pod. This field should not be used to express a desire "
     "for the pod to be scheduled on a specific node. "
     "https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/#nodename",
     1},
    {"Nominated Node", "string", "",
     "nominatedNodeName is set only when this pod preempts other pods on the node, but it cannot be "
     "scheduled right away as preemption victims receive their graceful termination periods. This field does "
     "not guarantee that the pod will be scheduled on this node. Scheduler may decide to place the pod "
     "elsewhere if other nodes become available sooner. Scheduler may also decide to give the resources on "
     "this node to a higher priority pod that is created after preemption. As a result, this field may be "
     "different than PodSpec.nodeName when the pod is scheduled.",
     1},
    {"Readiness Gates", "string", "",
     "If specified, all readiness gates will be evaluated for pod readiness. A pod is ready when all its "
     "containers are ready AND all conditions specified in the readiness gates have status equal to \"True\" "
     "More info: https://git.k8s.io/enhancements/keps/sig-network/580-pod-readiness-gates",
     1},
};

static const col_def node_cols[] = {
    COL_NAME,
    {"Status", "string", "", "The status of the node", 0},
    {"Roles", "string", "", "The roles of the node", 0},
    COL_AGE,
    {"Version", "string", "", "Kubelet Version reported by the node.", 0},
    {"Internal-IP", "string", "", DESC_NODE_ADDRS, 1},
    {"External-IP", "string", "", DESC_NODE_ADDRS, 1},
    {"OS-Image", "string", "",
     "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).", 1},
    {"Kernel-Version", "string", "",
     "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).", 1},
    {"Container-Runtime", "string", "",
     "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2).",
     1},
};

static const col_def ns_cols[] = {
    COL_NAME,
    {"Status", "string", "", "The status of the namespace", 0},
    COL_AGE,
};

static const col_def cm_cols[] = {
    COL_NAME,
    {"Data", "string", "",
     "Data contains the configuration data. Each key must consist of alphanumeric characters, '-', '_' or "
     "'.'. Values with non-UTF-8 byte sequences must use the BinaryData field. The keys stored in Data must "
     "not overlap with the keys in the BinaryData field, this is enforced during validation process.",
     0},
    COL_AGE,
};

static const col_def secret_cols[] = {
    COL_NAME,
    {"Type", "string", "", "Used to facilitate programmatic handling of secret data. More info: "
                           "https://kubernetes.io/docs/concepts/configuration/secret/#secret-types",
     0},
    {"Data", "string", "",
     "Data contains the secret data. Each key must consist of alphanumeric characters, '-', '_' or '.'. The "
     "serialized form of the secret data is a base64 encoded string, representing the arbitrary (possibly "
     "non-string) data value here. Described in https://tools.ietf.org/html/rfc4648#section-4",
     0},
    COL_AGE,
};

static const col_def lease_cols[] = {
    COL_NAME,
    {"Holder", "string", "", "holderIdentity contains the identity of the holder of a current lease. If "
                             "Coordinated Leader Election is used, the holder identity must be equal to the "
                             "elected LeaseCandidate.metadata.name field.",
     0},
    COL_AGE,
};

static const col_def svc_cols[] = {
    COL_NAME,
    {"Type", "string", "",
     "type determines how the Service is exposed. Defaults to ClusterIP. Valid options are Exter"
     "nalName, ClusterIP, NodePort, and LoadBalancer. \"ClusterIP\" allocates a cluster-internal I"
     "P address for load-balancing to endpoints. Endpoints are determined by the selector or if "
     "that is not specified, by manual construction of an Endpoints object or EndpointSlice obje"
     "cts. If clusterIP is \"None\", no virtual IP is allocated and the endpoints are published as"
     " a set of endpoints rather than a virtual IP. \"NodePort\" builds on ClusterIP and allocates"
     " a port on every node which routes to the same endpoints as the clusterIP. \"LoadBalancer\" "
     "builds on NodePort and creates an external load-balancer (if supported in the current clou"
     "d) which routes to the same endpoints as the clusterIP. \"ExternalName\" aliases this servic"
     "e to the specified externalName. Several other fields do not apply to ExternalName service"
     "s. More info: https://kubernetes.io/docs/concepts/services-networking/service/#publishing-"
     "services-service-types"
     , 0},
    {"Cluster-IP", "string", "",
     "clusterIP is the IP address of the service and is usually assigned randomly. If an address"
     " is specified manually, is in-range (as per system configuration), and is not in use, it w"
     "ill be allocated to the service; otherwise creation of the service will fail. This field m"
     "ay not be changed through updates unless the type field is also being changed to ExternalN"
     "ame (which requires this field to be blank) or the type field is being changed from Extern"
     "alName (in which case this field may optionally be specified, as describe above).  Valid v"
     "alues are \"None\", empty string (\"\"), or a valid IP address. Setting this to \"None\" makes a"
     " \"headless service\" (no virtual IP), which is useful when direct endpoint connections are "
     "preferred and proxying is not required.  Only applies to types ClusterIP, NodePort, and Lo"
     "adBalancer. If this field is specified when creating a Service of type ExternalName, creat"
     "ion will fail. This field will be wiped when updating a Service to type ExternalName. More"
     " info: https://kubernetes.io/docs/concepts/services-networking/service/#virtual-ips-and-se"
     "rvice-proxies"
     , 0},
    {"External-IP", "string", "",
     "externalIPs is a list of IP addresses for which nodes in the cluster will also accept traf"
     "fic for this service.  These IPs are not managed by Kubernetes.  The user is responsible f"
     "or ensuring that traffic arrives at a node with this IP.  A common example is external loa"
     "d-balancers that are not part of the Kubernetes system."
     , 0},
    {"Port(s)", "string", "",
     "The list of ports that are exposed by this service. More info: https://kubernetes.io/docs/"
     "concepts/services-networking/service/#virtual-ips-and-service-proxies"
     , 0},
    COL_AGE,
    {"Selector", "string", "",
     "Route service traffic to pods with label keys and values matching this selector. If empty "
     "or not present, the service is assumed to have an external process managing its endpoints,"
     " which Kubernetes will not modify. Only applies to types ClusterIP, NodePort, and LoadBala"
     "ncer. Ignored if type is ExternalName. More info: https://kubernetes.io/docs/concepts/serv"
     "ices-networking/service/"
     , 1},
};

static const col_def deploy_cols[] = {
    COL_NAME,
    {"Ready", "string", "",
     "Number of the pod with ready state"
     , 0},
    {"Up-to-date", "string", "",
     "Total number of non-terminating pods targeted by this deployment that have the desired tem"
     "plate spec."
     , 0},
    {"Available", "string", "",
     "Total number of available non-terminating pods (ready for at least minReadySeconds) target"
     "ed by this deployment."
     , 0},
    COL_AGE,
    {"Containers", "string", "",
     "Names of each container in the template."
     , 1},
    {"Images", "string", "",
     "Images referenced by each container in the template."
     , 1},
    {"Selector", "string", "",
     "Label selector for pods. Existing ReplicaSets whose pods are selected by this will be the "
     "ones affected by this deployment."
     , 1},
};

static const col_def sts_cols[] = {
    COL_NAME,
    {"Ready", "string", "",
     "Number of the pod with ready state"
     , 0},
    COL_AGE,
    {"Containers", "string", "",
     "Names of each container in the template."
     , 1},
    {"Images", "string", "",
     "Images referenced by each container in the template."
     , 1},
};

static const col_def created_cols[] = {
    COL_NAME,
    {"Created At", "date", "", DESC_CREATED, 0},
};

static const col_def default_cols[] = {COL_NAME, COL_AGE};

/* Events: the real printer's columns, in its order (Name last, shown by -o wide only). */
static const col_def event_cols[] = {
    {"Last Seen", "string", "", "How long ago the Event last happened.", 0},
    {"Type", "string", "", "Normal or Warning.", 0},
    {"Reason", "string", "", "Why the Event was recorded, in one word.", 0},
    {"Object", "string", "", "The object the Event is about (kind/name).", 0},
    {"Subobject", "string", "", "The part of the object the Event is about (fieldPath).", 1},
    {"Source", "string", "", "The component that recorded the Event.", 1},
    {"Message", "string", "", "What happened, for a person to read.", 0},
    {"First Seen", "string", "", "How long ago the Event first happened.", 1},
    {"Count", "string", "", "How often the Event happened.", 1},
    {"Name", "string", "name", DESC_NAME, 1},
};

enum tkind {
    T_DEFAULT,
    T_EVENT,
    T_POD,
    T_NODE,
    T_NS,
    T_CM,
    T_SECRET,
    T_LEASE,
    T_CREATED,
    T_SVC,
    T_DEPLOY,
    T_STS,
    T_CUSTOM
};

static enum tkind kind_of(const ks_res *r)
{
    if (r->flags & KSR_CUSTOM)
        return T_CUSTOM;
    if (r->group[0] == '\0') {
        if (strcmp(r->plural, "pods") == 0)
            return T_POD;
        if (strcmp(r->plural, "nodes") == 0)
            return T_NODE;
        if (strcmp(r->plural, "namespaces") == 0)
            return T_NS;
        if (strcmp(r->plural, "configmaps") == 0)
            return T_CM;
        if (strcmp(r->plural, "secrets") == 0)
            return T_SECRET;
        if (strcmp(r->plural, "services") == 0)
            return T_SVC;
    }
    /* One resource in two groups (ks_event.c), one printer. */
    if (strcmp(r->plural, "events") == 0 && (r->group[0] == '\0' || strcmp(r->group, "events.k8s.io") == 0))
        return T_EVENT;
    if (strcmp(r->group, "apps") == 0 && strcmp(r->plural, "deployments") == 0)
        return T_DEPLOY;
    if (strcmp(r->group, "apps") == 0 && strcmp(r->plural, "statefulsets") == 0)
        return T_STS;
    if (strcmp(r->group, "coordination.k8s.io") == 0 && strcmp(r->plural, "leases") == 0)
        return T_LEASE;
    if (strcmp(r->group, "apiextensions.k8s.io") == 0)
        return T_CREATED;
    return T_DEFAULT;
}

static const col_def *cols_of(enum tkind t, size_t *n)
{
#define RET(a)                       \
    do {                             \
        *n = sizeof(a) / sizeof(a[0]); \
        return a;                    \
    } while (0)
    switch (t) {
    case T_POD:
        RET(pod_cols);
    case T_NODE:
        RET(node_cols);
    case T_NS:
        RET(ns_cols);
    case T_CM:
        RET(cm_cols);
    case T_SECRET:
        RET(secret_cols);
    case T_LEASE:
        RET(lease_cols);
    case T_CREATED:
        RET(created_cols);
    case T_SVC:
        RET(svc_cols);
    case T_DEPLOY:
        RET(deploy_cols);
    case T_STS:
        RET(sts_cols);
    case T_EVENT:
        RET(event_cols);
    default:
        RET(default_cols);
    }
#undef RET
}

/* ---- output helpers ------------------------------------------------------ */

static void put_col(buf_t *b, int first, const char *name, const char *type, const char *format,
                    const char *desc, long long priority)
{
    ks_put(b, first ? "{\"name\":" : ",{\"name\":");
    ks_putq(b, name);
    ks_put(b, ",\"type\":");
    ks_putq(b, type);
    ks_put(b, ",\"format\":");
    ks_putq(b, format);
    ks_put(b, ",\"description\":");
    ks_putq(b, desc);
    if (buf_printf(b, ",\"priority\":%lld}", priority) != 0)
        abort();
}

/* ---- Accept negotiation --------------------------------------------------- */

/* The value of parameter key in a media-type parameter list "a=b;c=d". */
static int param_is(const char *params, const char *key, const char *want)
{
    size_t kl = strlen(key);
    const char *p = params;
    while (p && *p) {
        while (*p == ' ' || *p == ';')
            p++;
        const char *e = strchr(p, ';');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len > kl && strncasecmp(p, key, kl) == 0 && p[kl] == '=') {
            size_t vl = len - kl - 1;
            while (vl && p[kl + 1 + vl - 1] == ' ')
                vl--;
            return vl == strlen(want) && strncmp(p + kl + 1, want, vl) == 0;
        }
        p = e;
    }
    return 0;
}

int table_accept(const char *accept)
{
    if (accept == NULL || *accept == '\0')
        return TABLE_NONE;
    const char *p = accept;
    while (*p) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        char item[512];
        snprintf(item, sizeof(item), "%.*s", (int)(len < sizeof(item) - 1 ? len : sizeof(item) - 1), p);
        char *s = item;
        while (*s == ' ')
            s++;
        char *semi = strchr(s, ';');
        char *params = semi ? semi + 1 : NULL;
        if (semi)
            *semi = '\0';
        char *end = s + strlen(s);
        while (end > s && end[-1] == ' ')
            *--end = '\0';
        int json = strcasecmp(s, "application/json") == 0;
        int shaped = params && strstr(params, "as=") != NULL;
        if (strcmp(s, "*/*") == 0 || strcasecmp(s, "application/*") == 0 || (json && !shaped))
            return TABLE_NONE;
        if (json && param_is(params, "as", "Table") && param_is(params, "g", "meta.k8s.io")) {
            if (param_is(params, "v", "v1"))
                return TABLE_V1;
            if (param_is(params, "v", "v1beta1"))
                return TABLE_V1BETA1;
        }
        p = e ? e + 1 : p + len;
    }
    return TABLE_REFUSED;
}

/* ---- cells ---------------------------------------------------------------- */

/* translateTimestampSince: duration.HumanDuration of the time since ts. */
static void human_age(char *out, size_t n, const char *ts)
{
    int64_t t;
    int zulu;
    if (rfc3339_parse(ts, &t, &zulu) != 0 || !zulu) {
        snprintf(out, n, "<unknown>");
        return;
    }
    long long d = (long long)time(NULL) - t;
    if (d < -1) {
        snprintf(out, n, "<invalid>");
        return;
    }
    if (d < 0)
        d = 0;
    long long m = d / 60, h = d / 3600, days = h / 24;
    if (d < 120)
        snprintf(out, n, "%llds", d);
    else if (m < 10)
        d % 60 ? snprintf(out, n, "%lldm%llds", m, d % 60) : snprintf(out, n, "%lldm", m);
    else if (m < 180)
        snprintf(out, n, "%lldm", m);
    else if (h < 8)
        m % 60 ? snprintf(out, n, "%lldh%lldm", h, m % 60) : snprintf(out, n, "%lldh", h);
    else if (h < 48)
        snprintf(out, n, "%lldh", h);
    else if (h < 24 * 8)
        h % 24 ? snprintf(out, n, "%lldd%lldh", days, h % 24) : snprintf(out, n, "%lldd", days);
    else if (h < 24 * 365 * 2)
        snprintf(out, n, "%lldd", days);
    else if (h < 24 * 365 * 8)
        days % 365 ? snprintf(out, n, "%lldy%lldd", days / 365, days % 365)
                   : snprintf(out, n, "%lldy", days / 365);
    else
        snprintf(out, n, "%lldy", days / 365);
}

static void cell_str(buf_t *b, const char *s)
{
    ks_put(b, ",");
    ks_putq(b, s);
}

static void cell_age(buf_t *b, const cJSON *obj)
{
    char age[32];
    human_age(age, sizeof(age), json_get_str(obj, "metadata.creationTimestamp"));
    cell_str(b, age);
}

static const cJSON *find_by(const cJSON *arr, const char *key, const char *val)
{
    for (const cJSON *e = cJSON_IsArray(arr) ? arr->child : NULL; e; e = e->next)
        if (strcmp(json_get_str_or(e, key, ""), val) == 0)
            return e;
    return NULL;
}

static void cell_since(buf_t *b, const char *ts, int first)
{
    char age[32] = "<unknown>";
    if (ts && *ts)
        human_age(age, sizeof(age), ts);
    if (!first)
        ks_put(b, ",");
    ks_putq(b, age);
}

/* The core/v1 Event printer: a first and last time from the legacy timestamps, else from eventTime
 * (and series, for an Event seen again); the count the series or the legacy field gives. */
static void event_cells(buf_t *b, const cJSON *ev)
{
    const char *first = json_get_str(ev, "firstTimestamp");
    if (first == NULL)
        first = json_get_str(ev, "eventTime");
    const char *last = json_get_str(ev, "lastTimestamp");
    if (last == NULL)
        last = first;
    long long count = json_get_int(ev, "count", 0);
    if (cJSON_IsObject(json_child(ev, "series"))) {
        last = json_get_str_or(ev, "series.lastObservedTime", "");
        count = json_get_int(ev, "series.count", 0);
    }
    cell_since(b, last, 1);
    cell_str(b, json_get_str_or(ev, "type", ""));
    cell_str(b, json_get_str_or(ev, "reason", ""));
    const char *kind = json_get_str_or(ev, "involvedObject.kind", "");
    const char *name = json_get_str_or(ev, "involvedObject.name", "");
    char *target = *name ? xasprintf("%s/%s", kind, name) : xstrdup(kind);
    for (char *c = target; *c && *c != '/'; c++)
        *c = (char)tolower((unsigned char)*c);
    cell_str(b, target);
    free(target);
    cell_str(b, json_get_str_or(ev, "involvedObject.fieldPath", ""));
    const char *comp = json_get_str_or(ev, "source.component", "");
    const char *host = json_get_str_or(ev, "source.host", "");
    if (!*comp)
        comp = json_get_str_or(ev, "reportingComponent", "");
    if (!*host)
        host = json_get_str_or(ev, "reportingInstance", "");
    char *src = !*comp ? xstrdup("") : *host ? xasprintf("%s, %s", comp, host) : xstrdup(comp);
    cell_str(b, src);
    free(src);
    /* strings.TrimSpace of the message */
    const char *msg = json_get_str_or(ev, "message", "");
    while (isspace((unsigned char)*msg))
        msg++;
    size_t n = strlen(msg);
    while (n && isspace((unsigned char)msg[n - 1]))
        n--;
    char *trimmed = xstrndup(msg, n);
    cell_str(b, trimmed);
    free(trimmed);
    cell_since(b, first, 0);
    if (buf_printf(b, ",%lld", count) != 0)
        abort();
    cell_str(b, json_get_str_or(ev, "metadata.name", ""));
}

static void pod_cells(buf_t *b, const cJSON *pod)
{
    const cJSON *spec = json_child(pod, "spec"), *st = json_child(pod, "status");
    const char *phase = json_get_str_or(st, "phase", "");
    char reason[256];
    snprintf(reason, sizeof(reason), "%s", json_get_str_or(st, "reason", phase));
    const cJSON *conds = json_child(st, "conditions");
    for (const cJSON *c = cJSON_IsArray(conds) ? conds->child : NULL; c; c = c->next)
        if (strcmp(json_get_str_or(c, "type", ""), "PodScheduled") == 0 &&
            strcmp(json_get_str_or(c, "reason", ""), "SchedulingGated") == 0)
            snprintf(reason, sizeof(reason), "SchedulingGated");
    long long restarts = 0, ready = 0;
    int running = 0;
    const cJSON *cs = json_child(st, "containerStatuses");
    int ncs = json_len(cs);
    for (int i = ncs - 1; i >= 0; i--) {
        const cJSON *c = cJSON_GetArrayItem(cs, i);
        restarts += json_get_int(c, "restartCount", 0);
        const char *wr = json_get_str(c, "state.waiting.reason");
        const cJSON *term = json_get(c, "state.terminated");
        if (wr && *wr) {
            snprintf(reason, sizeof(reason), "%s", wr);
        } else if (term && json_get_str(term, "reason") && *json_get_str(term, "reason")) {
            snprintf(reason, sizeof(reason), "%s", json_get_str(term, "reason"));
        } else if (term) {
            long long sig = json_get_int(term, "signal", 0);
            if (sig)
                snprintf(reason, sizeof(reason), "Signal:%lld", sig);
            else
                snprintf(reason, sizeof(reason), "ExitCode:%lld", json_get_int(term, "exitCode", 0));
        } else if (json_get_bool(c, "ready", 0) && json_get(c, "state.running")) {
            running = 1;
            ready++;
        }
    }
    if (strcmp(reason, "Completed") == 0 && running) {
        const cJSON *rc = find_by(conds, "type", "Ready");
        snprintf(reason, sizeof(reason), "%s",
                 rc && strcmp(json_get_str_or(rc, "status", ""), "True") == 0 ? "Running" : "NotReady");
    }
    if (json_get(pod, "metadata.deletionTimestamp")) {
        if (strcmp(json_get_str_or(st, "reason", ""), "NodeLost") == 0)
            snprintf(reason, sizeof(reason), "Unknown");
        else if (strcmp(phase, "Succeeded") != 0 && strcmp(phase, "Failed") != 0)
            snprintf(reason, sizeof(reason), "Terminating");
    }
    char tmp[64];
    snprintf(tmp, sizeof(tmp), "%lld/%d", ready, json_len(json_child(spec, "containers")));
    cell_str(b, tmp);
    cell_str(b, reason);
    snprintf(tmp, sizeof(tmp), "%lld", restarts);
    cell_str(b, tmp);
    cell_age(b, pod);
    const cJSON *ips = json_child(st, "podIPs");
    const char *ip = ips && ips->child ? json_get_str(ips->child, "ip") : NULL;
    cell_str(b, ip && *ip ? ip : "<none>");
    const char *node = json_get_str(spec, "nodeName");
    cell_str(b, node && *node ? node : "<none>");
    const char *nom = json_get_str(st, "nominatedNodeName");
    cell_str(b, nom && *nom ? nom : "<none>");
    const cJSON *gates = json_child(spec, "readinessGates");
    if (json_len(gates) > 0) {
        int yes = 0;
        for (const cJSON *g = gates->child; g; g = g->next) {
            const cJSON *c = find_by(conds, "type", json_get_str_or(g, "conditionType", ""));
            if (c && strcmp(json_get_str_or(c, "status", ""), "True") == 0)
                yes++;
        }
        snprintf(tmp, sizeof(tmp), "%d/%d", yes, json_len(gates));
        cell_str(b, tmp);
    } else {
        cell_str(b, "<none>");
    }
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void node_cells(buf_t *b, const cJSON *node)
{
    const cJSON *st = json_child(node, "status");
    const cJSON *ready = find_by(json_child(st, "conditions"), "type", "Ready");
    char status[96];
    snprintf(status, sizeof(status), "%s",
             ready == NULL ? "Unknown"
             : strcmp(json_get_str_or(ready, "status", ""), "True") == 0 ? "Ready"
                                                                         : "NotReady");
    if (json_get_bool(node, "spec.unschedulable", 0))
        strncat(status, ",SchedulingDisabled", sizeof(status) - strlen(status) - 1);
    cell_str(b, status);
    /* Roles: node-role.kubernetes.io/<role> keys and the kubernetes.io/role value, sorted, unique. */
    const char *roles[64];
    int nr = 0;
    const cJSON *labels = json_get(node, "metadata.labels");
    for (const cJSON *l = labels ? labels->child : NULL; l && nr < 64; l = l->next) {
        const char *role = NULL;
        if (strncmp(l->string, "node-role.kubernetes.io/", 24) == 0)
            role = l->string + 24;
        else if (strcmp(l->string, "kubernetes.io/role") == 0 && cJSON_IsString(l))
            role = l->valuestring;
        if (role && *role)
            roles[nr++] = role;
    }
    qsort(roles, (size_t)nr, sizeof(roles[0]), cmp_str);
    buf_t rb;
    buf_init(&rb, BUF_UNLIMITED);
    for (int i = 0; i < nr; i++) {
        if (i && strcmp(roles[i], roles[i - 1]) == 0)
            continue;
        if (buf_printf(&rb, "%s%s", rb.len ? "," : "", roles[i]) != 0)
            abort();
    }
    cell_str(b, rb.len ? buf_cstr(&rb) : "<none>");
    buf_free(&rb);
    cell_age(b, node);
    cell_str(b, json_get_str_or(st, "nodeInfo.kubeletVersion", ""));
    const cJSON *addrs = json_child(st, "addresses");
    const cJSON *in = find_by(addrs, "type", "InternalIP"), *ex = find_by(addrs, "type", "ExternalIP");
    cell_str(b, in ? json_get_str_or(in, "address", "") : "<none>");
    cell_str(b, ex ? json_get_str_or(ex, "address", "") : "<none>");
    static const char *const info[] = {"osImage", "kernelVersion", "containerRuntimeVersion"};
    for (size_t i = 0; i < 3; i++) {
        const char *s = json_get_str(json_child(st, "nodeInfo"), info[i]);
        cell_str(b, s && *s ? s : "<unknown>");
    }
}

/* "a,b" of a field of every element (container names, images). */
static void cell_join(buf_t *b, const cJSON *arr, const char *key)
{
    buf_t t;
    buf_init(&t, BUF_UNLIMITED);
    for (const cJSON *e = cJSON_IsArray(arr) ? arr->child : NULL; e; e = e->next)
        if (buf_printf(&t, "%s%s", e == arr->child ? "" : ",", json_get_str_or(e, key, "")) != 0)
            abort();
    cell_str(b, buf_cstr(&t));
    buf_free(&t);
}

/* metav1.FormatLabelSelector (matchLabels sorted as Go's maps are; kubesim
 * stores maps with sorted keys) or labels.FormatLabels of a plain map. */
static void cell_selector(buf_t *b, const cJSON *sel, int plain_map)
{
    buf_t t;
    buf_init(&t, BUF_UNLIMITED);
    const cJSON *ml = plain_map ? sel : json_child(sel, "matchLabels");
    for (const cJSON *l = cJSON_IsObject(ml) ? ml->child : NULL; l; l = l->next)
        if (buf_printf(&t, "%s%s=%s", t.len ? "," : "", l->string, cJSON_IsString(l) ? l->valuestring : "") !=
            0)
            abort();
    const cJSON *me = plain_map ? NULL : json_child(sel, "matchExpressions");
    for (const cJSON *e = cJSON_IsArray(me) ? me->child : NULL; e; e = e->next) {
        const char *op = json_get_str_or(e, "operator", "");
        const char *key = json_get_str_or(e, "key", "");
        const char *sep = t.len ? "," : "";
        if (strcmp(op, "Exists") == 0 || strcmp(op, "DoesNotExist") == 0) {
            if (buf_printf(&t, "%s%s%s", sep, *op == 'D' ? "!" : "", key) != 0)
                abort();
            continue;
        }
        if (buf_printf(&t, "%s%s %s (", sep, key, strcmp(op, "In") == 0 ? "in" : "notin") != 0)
            abort();
        const cJSON *vals = json_child(e, "values");
        for (const cJSON *v = cJSON_IsArray(vals) ? vals->child : NULL; v; v = v->next)
            if (buf_printf(&t, "%s%s", v == vals->child ? "" : ",",
                           cJSON_IsString(v) ? v->valuestring : "") != 0)
                abort();
        if (buf_puts(&t, ")") != 0)
            abort();
    }
    cell_str(b, t.len ? buf_cstr(&t) : "<none>");
    buf_free(&t);
}

static void svc_cells(buf_t *b, const cJSON *svc)
{
    const cJSON *spec = json_child(svc, "spec");
    const char *type = json_get_str_or(spec, "type", "");
    cell_str(b, type);
    const char *cip = json_get_str(spec, "clusterIP");
    cell_str(b, cip && *cip ? cip : "<none>");
    /* getServiceExternalIP */
    buf_t t;
    buf_init(&t, BUF_UNLIMITED);
    const cJSON *ext = json_child(spec, "externalIPs");
    if (strcmp(type, "ExternalName") == 0) {
        if (buf_puts(&t, json_get_str_or(spec, "externalName", "")) != 0)
            abort();
    } else {
        if (strcmp(type, "LoadBalancer") == 0) {
            const cJSON *ing = json_get(svc, "status.loadBalancer.ingress");
            for (const cJSON *i = cJSON_IsArray(ing) ? ing->child : NULL; i; i = i->next) {
                const char *ip = json_get_str(i, "ip");
                const char *host = json_get_str(i, "hostname");
                if (buf_printf(&t, "%s%s", t.len ? "," : "", ip && *ip ? ip : host ? host : "") != 0)
                    abort();
            }
        }
        for (const cJSON *e = cJSON_IsArray(ext) ? ext->child : NULL; e; e = e->next)
            if (buf_printf(&t, "%s%s", t.len ? "," : "", cJSON_IsString(e) ? e->valuestring : "") != 0)
                abort();
        if (t.len == 0 && buf_puts(&t, strcmp(type, "LoadBalancer") == 0 ? "<pending>" : "<none>") != 0)
            abort();
    }
    cell_str(b, buf_cstr(&t));
    buf_reset(&t);
    const cJSON *ports = json_child(spec, "ports");
    for (const cJSON *p = cJSON_IsArray(ports) ? ports->child : NULL; p; p = p->next) {
        long long np = json_get_int(p, "nodePort", 0);
        if (np && buf_printf(&t, "%s%lld:%lld/%s", t.len ? "," : "", json_get_int(p, "port", 0), np,
                             json_get_str_or(p, "protocol", "TCP")) != 0)
            abort();
        if (!np && buf_printf(&t, "%s%lld/%s", t.len ? "," : "", json_get_int(p, "port", 0),
                              json_get_str_or(p, "protocol", "TCP")) != 0)
            abort();
    }
    cell_str(b, t.len ? buf_cstr(&t) : "<none>");
    buf_free(&t);
    cell_age(b, svc);
    cell_selector(b, json_child(spec, "selector"), 1);
}

/* Deployments and StatefulSets. */
static void workload_cells(buf_t *b, const cJSON *o, int deploy)
{
    char ready[64];
    snprintf(ready, sizeof(ready), "%lld/%lld", json_get_int(o, "status.readyReplicas", 0),
             json_get_int(o, "spec.replicas", 0));
    cell_str(b, ready);
    if (deploy && buf_printf(b, ",%lld,%lld", json_get_int(o, "status.updatedReplicas", 0),
                             json_get_int(o, "status.availableReplicas", 0)) != 0)
        abort();
    cell_age(b, o);
    const cJSON *cs = json_get(o, "spec.template.spec.containers");
    cell_join(b, cs, "name");
    cell_join(b, cs, "image");
    if (deploy)
        cell_selector(b, json_get(o, "spec.selector"), 0);
}

/* ---- JSONPath (the subset printer columns use) ---------------------------- */

/* Evaluate a JSONPath like `.status.replicas`, `.spec.items[0].name`,
 * `.a['b.c']`, `.a[*].b` or `.conds[?(@.type=="Ready")].status` on obj; the
 * first result, or NULL. */
static const cJSON *jsonpath(const cJSON *obj, const char *path)
{
    const char *p = path;
    if (*p == '{') /* "{.a.b}" */
        p++;
    const cJSON *cur = obj;
    while (cur && *p && *p != '}') {
        if (*p == '.') {
            p++;
            if (*p == '.' || *p == '[' || *p == '\0' || *p == '}')
                continue;
            size_t n = strcspn(p, ".[}");
            char key[256];
            snprintf(key, sizeof(key), "%.*s", (int)(n < sizeof(key) - 1 ? n : sizeof(key) - 1), p);
            cur = cJSON_IsObject(cur) ? cJSON_GetObjectItemCaseSensitive(cur, key) : NULL;
            p += n;
        } else if (*p == '[') {
            p++;
            const char *close;
            if (*p == '\'' || *p == '"') {
                char q = *p++;
                close = strchr(p, q);
                if (close == NULL)
                    return NULL;
                char key[256];
                size_t n = (size_t)(close - p);
                snprintf(key, sizeof(key), "%.*s", (int)(n < sizeof(key) - 1 ? n : sizeof(key) - 1), p);
                cur = cJSON_IsObject(cur) ? cJSON_GetObjectItemCaseSensitive(cur, key) : NULL;
                p = close + 1;
            } else if (*p == '?') {
                /* [?(@.field=="value")] */
                const char *at = strstr(p, "@.");
                const char *eq = strstr(p, "==");
                close = strstr(p, ")]");
                if (at == NULL || eq == NULL || close == NULL || eq > close)
                    return NULL;
                char field[128], val[256];
                snprintf(field, sizeof(field), "%.*s", (int)(eq - at - 2), at + 2);
                const char *v = eq + 2;
                while (*v == ' ')
                    v++;
                size_t vl = (size_t)(close - v);
                while (vl && v[vl - 1] == ' ')
                    vl--;
                if (vl >= 2 && (*v == '"' || *v == '\'')) {
                    v++;
                    vl -= 2;
                }
                snprintf(val, sizeof(val), "%.*s", (int)(vl < sizeof(val) - 1 ? vl : sizeof(val) - 1), v);
                char *fe = field + strlen(field);
                while (fe > field && fe[-1] == ' ')
                    *--fe = '\0';
                const cJSON *hit = NULL;
                for (const cJSON *e = cJSON_IsArray(cur) ? cur->child : NULL; e && !hit; e = e->next) {
                    const cJSON *f = json_get(e, field);
                    char num[64];
                    const char *fs = cJSON_IsString(f) ? f->valuestring : NULL;
                    if (cJSON_IsNumber(f)) {
                        snprintf(num, sizeof(num), "%lld", (long long)f->valuedouble);
                        fs = num;
                    } else if (cJSON_IsBool(f)) {
                        fs = cJSON_IsTrue(f) ? "true" : "false";
                    }
                    if (fs && strcmp(fs, val) == 0)
                        hit = e;
                }
                cur = hit;
                p = close + 2;
                continue;
            } else {
                close = strchr(p, ']');
                if (close == NULL)
                    return NULL;
                if (*p == '*') {
                    cur = cJSON_IsArray(cur) ? cur->child : NULL;
                } else {
                    long idx = strtol(p, NULL, 10);
                    int len = cJSON_IsArray(cur) ? cJSON_GetArraySize(cur) : 0;
                    if (idx < 0)
                        idx += len;
                    cur = idx >= 0 && idx < len ? cJSON_GetArrayItem(cur, (int)idx) : NULL;
                }
                p = close;
            }
            if (*p == ']')
                p++;
        } else {
            return NULL;
        }
    }
    return cur;
}

/* The cell of a custom column (apiextensions-apiserver's tableconvertor). */
static void custom_cell(buf_t *b, const cJSON *obj, const cJSON *col)
{
    const char *type = json_get_str_or(col, "type", "string");
    const cJSON *v = jsonpath(obj, json_get_str_or(col, "jsonPath", ""));
    ks_put(b, ",");
    if (v == NULL || cJSON_IsNull(v)) {
        ks_put(b, "null");
        return;
    }
    if (strcmp(type, "string") == 0) {
        if (cJSON_IsString(v)) {
            ks_putq(b, v->valuestring);
        } else if (cJSON_IsObject(v) || cJSON_IsArray(v) || cJSON_IsBool(v)) {
            char *s = json_dump(v);
            ks_putq(b, s);
            free(s);
        } else {
            char num[64];
            if (v->valuedouble == (double)(long long)v->valuedouble)
                snprintf(num, sizeof(num), "%lld", (long long)v->valuedouble);
            else
                snprintf(num, sizeof(num), "%g", v->valuedouble);
            ks_putq(b, num);
        }
        return;
    }
    if (strcmp(type, "integer") == 0 && cJSON_IsNumber(v)) {
        if (buf_printf(b, "%lld", (long long)v->valuedouble) != 0)
            abort();
    } else if (strcmp(type, "number") == 0 && cJSON_IsNumber(v)) {
        if (buf_printf(b, "%.17g", v->valuedouble) != 0)
            abort();
    } else if (strcmp(type, "boolean") == 0 && cJSON_IsBool(v)) {
        ks_put(b, cJSON_IsTrue(v) ? "true" : "false");
    } else if (strcmp(type, "date") == 0 && cJSON_IsString(v)) {
        char age[32];
        int64_t t;
        int zulu;
        if (rfc3339_parse(v->valuestring, &t, &zulu) != 0 || !zulu)
            snprintf(age, sizeof(age), "<invalid>");
        else
            human_age(age, sizeof(age), v->valuestring);
        ks_putq(b, age);
    } else {
        ks_put(b, "null");
    }
}

/* ---- the Table ------------------------------------------------------------ */

void table_begin(buf_t *b, const ks_res *r, int view, int table, uint64_t rv, const char *cont,
                 long long remaining, int no_headers)
{
    if (buf_printf(b, "{\"kind\":\"Table\",\"apiVersion\":\"meta.k8s.io/%s\",\"metadata\":{",
                   table == TABLE_V1BETA1 ? "v1beta1" : "v1") != 0)
        abort();
    if (rv && buf_printf(b, "\"resourceVersion\":\"%llu\"", (unsigned long long)rv) != 0)
        abort();
    if (cont) {
        ks_put(b, rv ? ",\"continue\":" : "\"continue\":");
        ks_putq(b, cont);
    }
    if (remaining >= 0 && buf_printf(b, ",\"remainingItemCount\":%lld", remaining) != 0)
        abort();
    ks_put(b, "},\"columnDefinitions\":");
    if (no_headers) {
        ks_put(b, "null,\"rows\":[");
        return;
    }
    ks_put(b, "[");
    enum tkind t = kind_of(r);
    const cJSON *cols = t == T_CUSTOM ? r->views[view].columns : NULL;
    if (t == T_CUSTOM) {
        put_col(b, 1, "Name", "string", "name", DESC_NAME, 0);
        for (const cJSON *c = cols ? cols->child : NULL; c; c = c->next) {
            const char *jp = json_get_str_or(c, "jsonPath", "");
            const char *d = json_get_str(c, "description");
            char *dflt = xasprintf("Custom resource definition column (in JSONPath format): %s", jp);
            put_col(b, 0, json_get_str_or(c, "name", ""), json_get_str_or(c, "type", ""),
                    json_get_str_or(c, "format", ""), d && *d ? d : dflt, json_get_int(c, "priority", 0));
            free(dflt);
        }
        if (cols == NULL)
            put_col(b, 0, "Age", "date", "", DESC_CREATED, 0);
    } else {
        size_t n;
        const col_def *d = cols_of(t, &n);
        for (size_t i = 0; i < n; i++)
            put_col(b, i == 0, d[i].name, d[i].type, d[i].format, d[i].desc, d[i].priority);
    }
    ks_put(b, "],\"rows\":[");
}

void table_row(buf_t *b, const ks_res *r, int view, int table, const ks_ver *v, int first, int include)
{
    cJSON *obj = ver_parse(v);
    table_row_obj(b, r, view, table, obj, v, first, include);
    cJSON_Delete(obj);
}

void table_row_obj(buf_t *b, const ks_res *r, int view, int table, const cJSON *obj, const ks_ver *v,
                   int first, int include)
{
    ks_put(b, first ? "{\"cells\":[" : ",{\"cells\":[");
    enum tkind t = kind_of(r);
    if (t != T_EVENT)
        ks_putq(b, json_get_str_or(obj, "metadata.name", ""));
    switch (t) {
    case T_EVENT:
        if (r->group[0]) {
            cJSON *core = ks_event_convert(obj, 1);
            event_cells(b, core);
            cJSON_Delete(core);
        } else {
            event_cells(b, obj);
        }
        break;
    case T_CUSTOM: {
        const cJSON *cols = r->views[view].columns;
        if (cols == NULL) {
            char age[32];
            human_age(age, sizeof(age), json_get_str(obj, "metadata.creationTimestamp"));
            cell_str(b, age);
        }
        for (const cJSON *c = cols ? cols->child : NULL; c; c = c->next)
            custom_cell(b, obj, c);
        break;
    }
    case T_POD:
        pod_cells(b, obj);
        break;
    case T_NODE:
        node_cells(b, obj);
        break;
    case T_NS:
        cell_str(b, json_get_str_or(obj, "status.phase", ""));
        cell_age(b, obj);
        break;
    case T_CM:
    case T_SECRET:
        if (t == T_SECRET)
            cell_str(b, json_get_str_or(obj, "type", ""));
        if (buf_printf(b, ",%d",
                       json_len(json_child(obj, "data")) + json_len(json_child(obj, "binaryData"))) != 0)
            abort();
        cell_age(b, obj);
        break;
    case T_LEASE: {
        const char *h = json_get_str(obj, "spec.holderIdentity");
        cell_str(b, h ? h : "");
        cell_age(b, obj);
        break;
    }
    case T_CREATED:
        cell_str(b, json_get_str_or(obj, "metadata.creationTimestamp", ""));
        break;
    case T_SVC:
        svc_cells(b, obj);
        break;
    case T_DEPLOY:
    case T_STS:
        workload_cells(b, obj, t == T_DEPLOY);
        break;
    default:
        cell_age(b, obj);
        break;
    }
    ks_put(b, "]");
    if (include == TABLE_INCLUDE_METADATA) {
        if (buf_printf(b, ",\"object\":{\"kind\":\"PartialObjectMetadata\",\"apiVersion\":\"meta.k8s.io/%s\","
                          "\"metadata\":",
                       table == TABLE_V1BETA1 ? "v1beta1" : "v1") != 0)
            abort();
        const cJSON *meta = json_child(obj, "metadata");
        if (meta == NULL || json_dump_buf(meta, b) != 0)
            ks_put(b, "{}");
        ks_put(b, "}");
    } else if (include == TABLE_INCLUDE_OBJECT) {
        ks_put(b, ",\"object\":");
        if (v ? watch_emit_obj(b, r, view, v, 1) != 0 : json_dump_buf(obj, b) != 0)
            abort();
    } else {
        ks_put(b, ",\"object\":null");
    }
    ks_put(b, "}");
}
