/* slurmop: the operator's main: flags, logging, signals, the loop. */
#include <assert.h>
#include <getopt.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "op_commit.h" /* generated: OP_GIT_COMMIT */
#include "core/err.h"
#include "core/log.h"
#include "core/mem.h"
#include "reconcilers/nodehealth.h"
#include "reconcilers/operator.h"
#include "reconcilers/token_build.h"
#include "slurmio/slurmlib.h"

static const char usage[] =
    "Usage: slurmop [flags]\n"
    "\n"
    "Run Slurm on Kubernetes: reconciles Slinky's slinky.slurm.net/v1beta1 resources (Controller, NodeSet,\n"
    "LoginSet, RestApi, Accounting, Token) into pods, services and configuration, and keeps Slurm's view of\n"
    "its nodes (drain before delete, node state on pods) in step.\n"
    "\n"
    "Kubernetes:\n"
    "  --kubeconfig PATH            kubeconfig file (else $KUBECONFIG, in-cluster config, ~/.kube/config)\n"
    "  --context NAME               kubeconfig context (default: current-context)\n"
    "  --namespace NS               watch only this namespace (repeatable; default: all namespaces); a\n"
    "                               reference (controllerRef, accountingRef, a Token's key) into another\n"
    "                               namespace makes its object Valid=False\n"
    "  --qps N                      client-side request rate limit (default 200; 0 or less disables);\n"
    "                               leader-election (Lease) requests are not limited\n"
    "  --burst N                    client-side burst (default 400)\n"
    "  --leader-elect               run leader election; only the leader reconciles\n"
    "  --leader-elect-namespace NS  namespace of the Lease (default: the client's namespace, else default)\n"
    "  --leader-elect-lease NAME    name of the Lease (default slurmop)\n"
    "  --leader-elect-lease-duration SECONDS\n"
    "                               how long a silent Lease keeps others waiting (default 15)\n"
    "  --leader-elect-renew-deadline SECONDS\n"
    "                               the leader steps down (and exits 1) when no renewal succeeded within "
    "this\n"
    "                               long of sending the last successful one (default 10)\n"
    "  --leader-elect-retry-period SECONDS\n"
    "                               time between attempts to acquire or renew (default 2); the three must "
    "keep\n"
    "                               lease duration > renew deadline > 1.2 x retry period (fractions "
    "allowed)\n"
    "  --cluster-domain DOMAIN      cluster DNS domain (default: from /etc/resolv.conf, else cluster.local)\n"
    "  --propagated-node-conditions LIST\n"
    "                               Node condition types whose reason/message become the Slurm drain reason\n"
    "                               when a Node is cordoned (comma-separated)\n"
    "  --unhealthy-node-condition TYPE[=STATUS]\n"
    "                               a Node condition that means its Slurm node is unhealthy (repeatable;\n"
    "                               STATUS defaults to True), e.g. GpuUnhealthy or Ready=False: the Slurm "
    "node\n"
    "                               of a NodeSet pod there is drained (reason \"slurm-operator: TYPE: "
    "message\"),\n"
    "                               its jobs finish, then the pod is replaced (kept off that Node); the "
    "drain\n"
    "                               is undone once the Node is healthy. Default: none (off)\n"
    "  --unhealthy-node-taint KEY   the same for a Node taint of that key (repeatable; default none)\n"
    "  --unhealthy-max-share PCT    at most this share of a NodeSet drained or replaced for health at once,\n"
    "                               at least one node (default 10%)\n"
    "\n"
    "Slurm:\n"
    "  --slurmrestd NS/NAME=URL     reach the slurmrestd of RestApi NS/NAME at URL instead of its Service "
    "DNS\n"
    "                               name (repeatable), e.g. --slurmrestd slurm/slurm=http://127.0.0.1:6820;\n"
    "                               needed outside a cluster (tests, benchmarks, a laptop against kind);\n"
    "                               an https:// URL is verified with --slurmrestd-ca\n"
    "  --slurmrestd-ca FILE         CA bundle (PEM) that https slurmrestd certificates must chain to (and\n"
    "                               whose names must match the URL host); without it https URLs are refused\n"
    "  --slurm-conf PATH            slurm.conf for the libslurm backend, used for the node and reservation\n"
    "                               updates that the server's REST version cannot do (else $SLURM_CONF)\n"
    "  --drift-grace SECONDS        a pod Ready this long whose Slurm node no read lists, and that Slurm "
    "says\n"
    "                               by name it does not know, is replaced so slurmd registers again (at "
    "most\n"
    "                               2 per NodeSet per minute; default 60, minimum 5)\n"
    "  --slurmrestd-max-body SIZE   largest slurmrestd answer accepted, in bytes or with Ki/Mi/Gi (default "
    "64Mi:\n"
    "                               16,384 nodes of any version); a larger answer is an error, never a "
    "partial\n"
    "                               table. Decoding one takes up to 5 times this much memory at its peak\n"
    "\n"
    "Topology webhook (pods/binding; the Node's topology annotation lands on a NodeSet pod as it is bound,\n"
    "before slurmd starts and registers):\n"
    "  --topology-webhook[=BOOL]    serve the mutating admission webhook "
    "/mutate-pods-binding over HTTPS on\n"
    "                               --webhook-addr (default false; the Helm chart and deploy/manifests turn\n"
    "                               it on and register it with failurePolicy Ignore)\n"
    "  --webhook-addr ADDR          where it listens (default :9443)\n"
    "  --webhook-cert-file FILE     serving certificate chain (PEM), e.g. cert-manager's Secret mounted;\n"
    "  --webhook-key-file FILE      its key (PEM); both re-read every --webhook-resync and swapped in when\n"
    "                               they change. Without both, a self-signed certificate is made at start\n"
    "  --webhook-dns-names LIST     names of the self-signed certificate, comma-separated (the webhook\n"
    "                               Service's, e.g. slurmop-webhook.slurmop-system.svc), besides localhost,\n"
    "                               127.0.0.1 and ::1\n"
    "  --webhook-config NAME        the MutatingWebhookConfiguration slurmop keeps: with a self-signed\n"
    "                               certificate its caBundle equal to its certificates (current and\n"
    "                               previous), and its namespaceSelector as --webhook-scope says\n"
    "  --webhook-scope SCOPE        nodesets (default): NAME's namespaceSelector admits only the namespaces\n"
    "                               that hold NodeSets (one expression kubernetes.io/metadata.name In "
    "[...],\n"
    "                               kept current; its other expressions stay), so no other pod's binding\n"
    "                               waits for the webhook; registered: left as registered\n"
    "  --webhook-cert-rotate SECONDS  make a new self-signed certificate this often (default 15724800, 182\n"
    "                               days; it is valid for 365), served once NAME trusts it\n"
    "  --webhook-resync SECONDS     how often the caBundle is checked and the files re-read (default 60)\n"
    "  --webhook-client-ca FILE     CA bundle (PEM): callers must present a client certificate it signed "
    "(the\n"
    "                               one kube-apiserver presents to webhooks, set in the kubeconfig of its\n"
    "                               --admission-control-config-file); without it anyone may call. Either\n"
    "                               way the webhook's pod reads have their own budget (20/s, 4 connections,\n"
    "                               64 in flight, 16 per caller address), never the reconcilers'\n"
    "  --webhook-client-names LIST  with --webhook-client-ca: the subject CNs answered (comma-separated;\n"
    "                               others get 403)\n"
    "\n"
    "Security:\n"
    "  --token-users LIST           Slurm users a Token may mint a JWT for (comma-separated); \"*\" stands\n"
    "                               for every user but root and the SlurmUser (slurm), which are allowed\n"
    "                               only when listed by name (default \"*\")\n"
    "  --token-max-lifetime DUR     longest spec.lifetime a Token may ask for, a Go duration (default 24h)\n"
    "  --allow-node-taints          let NodeSets with taintKubeNodes taint the Kubernetes Nodes of their\n"
    "                               pods (cluster-scoped objects; off: such NodeSets are Valid=False and no\n"
    "                               Node is written; the RBAC then needs no patch on Nodes)\n"
    "  --ref-poll-interval SECONDS  the Secrets and ConfigMaps custom resources reference (keys, passwords,\n"
    "                               config files) are read by name, never watched: each is read again this\n"
    "                               often to notice a rotation (default 30; fractions allowed)\n"
    "\n"
    "Process:\n"
    "  --metrics-addr ADDR          serve /metrics (Prometheus) here (default :8080; 0 disables)\n"
    "  --health-addr ADDR           serve /healthz and /readyz here (default :8081; 0 disables)\n"
    "  --metrics-secure[=BOOL]      serve /metrics over HTTPS on --metrics-addr, each scrape's bearer token\n"
    "                               checked with a TokenReview and a SubjectAccessReview (get on the\n"
    "                               non-resource URL /metrics): 401 without a valid token, 403 when not\n"
    "                               allowed (default false; /healthz and /readyz stay plain HTTP)\n"
    "  --metrics-cert-file FILE     with --metrics-secure: serving certificate chain (PEM), read at start\n"
    "  --metrics-key-file FILE      its private key (PEM); without both, a self-signed certificate is\n"
    "                               made at start\n"
    "  --log-format text|json       log line format (default text; json adds controller, namespace, name "
    "and\n"
    "                               reconcileID to the lines of a reconcile)\n"
    "  --log-level LEVEL            error, warn, info, debug or trace, or 0-4 (default info)\n"
    "  --shutdown-grace SECONDS     how long writes in flight may finish at a stop signal (default 10)\n"
    "  --help                       show this help\n"
    "  --version                    print the version, then the git commit it was built from\n"
    "\n"
    "SIGTERM, SIGINT, SIGHUP or SIGQUIT stops the watches, lets writes in flight finish, releases the\n"
    "lease and exits 0 (SIGHUP re-reads nothing: flags are fixed; token and certificate files are re-read\n"
    "on their own). A second signal cancels the writes still in flight and releases the lease at once; a\n"
    "third exits at once.\n"
    "A leader that loses its lease cancels every write not yet sent (and refuses new ones), lets writes\n"
    "already sent finish within the shutdown grace, and exits 1.\n";

enum {
    OPT_KUBECONFIG = 256,
    OPT_CONTEXT,
    OPT_NAMESPACE,
    OPT_QPS,
    OPT_BURST,
    OPT_LEADER_ELECT,
    OPT_LEADER_NS,
    OPT_LEADER_LEASE,
    OPT_LEADER_DURATION,
    OPT_LEADER_DEADLINE,
    OPT_LEADER_RETRY,
    OPT_CLUSTER_DOMAIN,
    OPT_PROPAGATED,
    OPT_UNHEALTHY_COND,
    OPT_UNHEALTHY_TAINT,
    OPT_UNHEALTHY_SHARE,
    OPT_DRIFT_GRACE,
    OPT_SLURMRESTD,
    OPT_SLURM_CONF,
    OPT_SLURMRESTD_CA,
    OPT_SLURMRESTD_MAX_BODY,
    OPT_METRICS_ADDR,
    OPT_HEALTH_ADDR,
    OPT_METRICS_SECURE,
    OPT_METRICS_CERT,
    OPT_METRICS_KEY,
    OPT_LOG_FORMAT,
    OPT_LOG_LEVEL,
    OPT_GRACE,
    OPT_TOKEN_USERS,
    OPT_TOKEN_MAX_LIFETIME,
    OPT_ALLOW_NODE_TAINTS,
    OPT_REF_POLL,
    OPT_TOPOLOGY_WEBHOOK,
    OPT_WEBHOOK_ADDR,
    OPT_WEBHOOK_CERT,
    OPT_WEBHOOK_KEY,
    OPT_WEBHOOK_NAMES,
    OPT_WEBHOOK_CONFIG,
    OPT_WEBHOOK_ROTATE,
    OPT_WEBHOOK_RESYNC,
    OPT_WEBHOOK_CLIENT_CA,
    OPT_WEBHOOK_CLIENT_NAMES,
    OPT_WEBHOOK_SCOPE,
    OPT_HELP,
    OPT_VERSION,
};

static const struct option long_opts[] = {
    {"kubeconfig", required_argument, NULL, OPT_KUBECONFIG},
    {"context", required_argument, NULL, OPT_CONTEXT},
    {"namespace", required_argument, NULL, OPT_NAMESPACE},
    {"qps", required_argument, NULL, OPT_QPS},
    {"burst", required_argument, NULL, OPT_BURST},
    {"leader-elect", no_argument, NULL, OPT_LEADER_ELECT},
    {"leader-elect-namespace", required_argument, NULL, OPT_LEADER_NS},
    {"leader-elect-lease", required_argument, NULL, OPT_LEADER_LEASE},
    {"leader-elect-lease-duration", required_argument, NULL, OPT_LEADER_DURATION},
    {"leader-elect-renew-deadline", required_argument, NULL, OPT_LEADER_DEADLINE},
    {"leader-elect-retry-period", required_argument, NULL, OPT_LEADER_RETRY},
    {"cluster-domain", required_argument, NULL, OPT_CLUSTER_DOMAIN},
    {"propagated-node-conditions", required_argument, NULL, OPT_PROPAGATED},
    {"unhealthy-node-condition", required_argument, NULL, OPT_UNHEALTHY_COND},
    {"unhealthy-node-taint", required_argument, NULL, OPT_UNHEALTHY_TAINT},
    {"unhealthy-max-share", required_argument, NULL, OPT_UNHEALTHY_SHARE},
    {"drift-grace", required_argument, NULL, OPT_DRIFT_GRACE},
    {"slurmrestd", required_argument, NULL, OPT_SLURMRESTD},
    {"slurm-conf", required_argument, NULL, OPT_SLURM_CONF},
    {"slurmrestd-ca", required_argument, NULL, OPT_SLURMRESTD_CA},
    {"slurmrestd-max-body", required_argument, NULL, OPT_SLURMRESTD_MAX_BODY},
    {"metrics-addr", required_argument, NULL, OPT_METRICS_ADDR},
    {"health-addr", required_argument, NULL, OPT_HEALTH_ADDR},
    {"metrics-secure", optional_argument, NULL, OPT_METRICS_SECURE},
    {"metrics-cert-file", required_argument, NULL, OPT_METRICS_CERT},
    {"metrics-key-file", required_argument, NULL, OPT_METRICS_KEY},
    {"log-format", required_argument, NULL, OPT_LOG_FORMAT},
    {"log-level", required_argument, NULL, OPT_LOG_LEVEL},
    {"shutdown-grace", required_argument, NULL, OPT_GRACE},
    {"token-users", required_argument, NULL, OPT_TOKEN_USERS},
    {"token-max-lifetime", required_argument, NULL, OPT_TOKEN_MAX_LIFETIME},
    {"allow-node-taints", no_argument, NULL, OPT_ALLOW_NODE_TAINTS},
    {"ref-poll-interval", required_argument, NULL, OPT_REF_POLL},
    {"topology-webhook", optional_argument, NULL, OPT_TOPOLOGY_WEBHOOK},
    {"webhook-addr", required_argument, NULL, OPT_WEBHOOK_ADDR},
    {"webhook-cert-file", required_argument, NULL, OPT_WEBHOOK_CERT},
    {"webhook-key-file", required_argument, NULL, OPT_WEBHOOK_KEY},
    {"webhook-dns-names", required_argument, NULL, OPT_WEBHOOK_NAMES},
    {"webhook-config", required_argument, NULL, OPT_WEBHOOK_CONFIG},
    {"webhook-cert-rotate", required_argument, NULL, OPT_WEBHOOK_ROTATE},
    {"webhook-resync", required_argument, NULL, OPT_WEBHOOK_RESYNC},
    {"webhook-client-ca", required_argument, NULL, OPT_WEBHOOK_CLIENT_CA},
    {"webhook-client-names", required_argument, NULL, OPT_WEBHOOK_CLIENT_NAMES},
    {"webhook-scope", required_argument, NULL, OPT_WEBHOOK_SCOPE},
    {"help", no_argument, NULL, OPT_HELP},
    {"version", no_argument, NULL, OPT_VERSION},
    {NULL, 0, NULL, 0},
};

/* Every signal whose default action would end the process without
 * releasing the leader Lease takes the graceful path instead (SIGHUP too:
 * there is no configuration file to re-read, flags are fixed at start, and
 * the token and certificate files are re-read on their own). */
static const int stop_signals[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT};
#define N_STOP_SIGNALS (sizeof(stop_signals) / sizeof(stop_signals[0]))

struct app {
    uv_loop_t loop;
    uv_signal_t sig[N_STOP_SIGNALS];
    operator *op;
    int exit_code;
    int stopping; /* stop signals received */
};

static void on_operator_stopped(void *data, int code)
{
    struct app *a = data;
    assert(a->op != NULL); /* the operator stops once (operator.h) */
    assert(code == 0 || code == 1);
    a->exit_code = code;
    a->op = NULL;
    for (size_t i = 0; i < N_STOP_SIGNALS; i++)
        uv_close((uv_handle_t *)&a->sig[i], NULL);
}

static const char *signal_name(int signum)
{
    switch (signum) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGHUP: return "SIGHUP";
    case SIGQUIT: return "SIGQUIT";
    default: return "a signal";
    }
}

/* First signal: graceful stop. Second: no grace for writes in flight, but
 * the lease is still released (a successor then starts at once instead of
 * after a whole lease duration). Third: exit now. */
static void on_signal(uv_signal_t *h, int signum)
{
    struct app *a = h->data;
    a->stopping++;
    if (a->stopping >= 3) {
        log_warn("received %s a third time: exiting now (the lease is not released)", signal_name(signum));
        exit(1);
    }
    if (a->stopping == 2) {
        log_warn("received %s again: canceling writes in flight, then releasing the lease",
                 signal_name(signum));
        if (a->op)
            op_stop_hurry(a->op);
        return;
    }
    log_info("received %s", signal_name(signum));
    if (a->op)
        op_stop(a->op);
}

static int die_usage(const char *fmt, const char *arg)
{
    fprintf(stderr, "slurmop: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nRun 'slurmop --help' for usage.\n");
    return 2;
}

static int parse_double(const char *s, double *out)
{
    char *end;
    *out = strtod(s, &end);
    return *s && *end == '\0';
}

static int parse_int(const char *s, int *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < -2147483647L || v > 2147483647L)
        return 0;
    *out = (int)v;
    return 1;
}

/* Seconds (fractions allowed) into milliseconds; 0 when not a positive number of at most a day. */
static unsigned parse_seconds_ms(const char *s)
{
    double v;
    if (!parse_double(s, &v) || !(v > 0) || v > 86400)
        return 0;
    unsigned ms = (unsigned)(v * 1000.0 + 0.5);
    return ms ? ms : 1;
}

/* Bytes, or a number with a Ki, Mi or Gi suffix (as Kubernetes writes
 * memory). At least 64 KiB: less could not hold a ping's answer. */
static int parse_size(const char *s, size_t *out)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    unsigned shift = 0;
    if (end == s || *s == '-')
        return 0;
    if (strcmp(end, "Ki") == 0)
        shift = 10;
    else if (strcmp(end, "Mi") == 0)
        shift = 20;
    else if (strcmp(end, "Gi") == 0)
        shift = 30;
    else if (*end)
        return 0;
    if (v > (SIZE_MAX >> shift) || (v << shift) < 65536)
        return 0;
    *out = (size_t)(v << shift);
    return 1;
}

int main(int argc, char **argv)
{
    struct app a;
    operator_opts o;
    int level = LOGL_INFO, format = LOGF_TEXT, c, n;
    const char *token_users = NULL, *token_max_lifetime = NULL;
    char err[1024];

    memset(&a, 0, sizeof(a));
    memset(&o, 0, sizeof(o));
    nh_config health; /* --unhealthy-*: borrowed by the operator, freed at exit */
    nh_config_init(&health);
    o.health = &health;
    o.metrics_addr = ":8080";
    o.health_addr = ":8081";
    o.qps = 200;
    o.burst = 400;
    o.shutdown_grace_ms = 10000;
    mem_init();

    while ((c = getopt_long(argc, argv, "h", long_opts, NULL)) != -1) {
        switch (c) {
        case OPT_KUBECONFIG: o.kubeconfig = optarg; break;
        case OPT_CONTEXT: o.context = optarg; break;
        case OPT_NAMESPACE:
            if (o.n_namespaces == OP_MAX_NAMESPACES)
                return die_usage("too many --namespace flags (at most %s)", "64");
            o.namespaces[o.n_namespaces++] = optarg;
            break;
        case OPT_QPS:
            if (!parse_double(optarg, &o.qps))
                return die_usage("--qps: not a number: %s", optarg);
            if (o.qps <= 0)
                o.qps = -1; /* disabled */
            break;
        case OPT_BURST:
            if (!parse_int(optarg, &o.burst) || o.burst < 1)
                return die_usage("--burst: want a positive integer, got %s", optarg);
            break;
        case OPT_LEADER_ELECT: o.leader_elect = 1; break;
        case OPT_LEADER_NS: o.leader_elect_namespace = optarg; break;
        case OPT_LEADER_LEASE: o.lease_name = optarg; break;
        case OPT_LEADER_DURATION:
            if ((o.lease_duration_ms = parse_seconds_ms(optarg)) == 0)
                return die_usage("--leader-elect-lease-duration: want positive seconds, got %s", optarg);
            break;
        case OPT_LEADER_DEADLINE:
            if ((o.renew_deadline_ms = parse_seconds_ms(optarg)) == 0)
                return die_usage("--leader-elect-renew-deadline: want positive seconds, got %s", optarg);
            break;
        case OPT_LEADER_RETRY:
            if ((o.retry_period_ms = parse_seconds_ms(optarg)) == 0)
                return die_usage("--leader-elect-retry-period: want positive seconds, got %s", optarg);
            break;
        case OPT_CLUSTER_DOMAIN: o.cluster_domain = optarg; break;
        case OPT_PROPAGATED: o.propagated_node_conditions = optarg; break;
        case OPT_UNHEALTHY_COND:
        case OPT_UNHEALTHY_TAINT:
        case OPT_UNHEALTHY_SHARE: {
            char why[256];
            int bad = c == OPT_UNHEALTHY_COND    ? nh_add_condition(&health, optarg, why, sizeof(why))
                      : c == OPT_UNHEALTHY_TAINT ? nh_add_taint(&health, optarg, why, sizeof(why))
                                                 : nh_set_share(&health, optarg, why, sizeof(why));
            if (bad) {
                snprintf(err, sizeof(err), "--%s: %s",
                         c == OPT_UNHEALTHY_COND    ? "unhealthy-node-condition"
                         : c == OPT_UNHEALTHY_TAINT ? "unhealthy-node-taint"
                                                    : "unhealthy-max-share",
                         why);
                nh_config_free(&health);
                return die_usage("%s", err);
            }
            break;
        }
        case OPT_DRIFT_GRACE: {
            char *end;
            unsigned long v = strtoul(optarg, &end, 10);
            if (*end || v < 5 || v > 86400)
                return die_usage("--drift-grace wants seconds between 5 and 86400, got \"%s\"", optarg);
            o.drift_grace_s = (unsigned)v;
            break;
        }
        case OPT_SLURMRESTD: {
            const char *eq = strchr(optarg, '=');
            const char *slash = strchr(optarg, '/');
            if (eq == NULL || slash == NULL || slash > eq || eq[1] == '\0')
                return die_usage("--slurmrestd: want NAMESPACE/NAME=URL, got %s", optarg);
            if (o.n_slurmrestd == OP_MAX_SLURMRESTD)
                return die_usage("too many --slurmrestd flags (at most %s)", "64");
            o.slurmrestd[o.n_slurmrestd].key = xstrndup(optarg, (size_t)(eq - optarg));
            o.slurmrestd[o.n_slurmrestd].url = xstrdup(eq + 1);
            o.n_slurmrestd++;
            break;
        }
        case OPT_SLURM_CONF: o.slurm_conf = optarg; break;
        case OPT_SLURMRESTD_CA: o.slurmrestd_ca = optarg; break;
        case OPT_SLURMRESTD_MAX_BODY:
            if (!parse_size(optarg, &o.slurmrestd_max_body))
                return die_usage("--slurmrestd-max-body: want bytes (at least 64Ki), e.g. 96Mi; got %s",
                                 optarg);
            break;
        case OPT_METRICS_ADDR: o.metrics_addr = optarg; break;
        case OPT_HEALTH_ADDR: o.health_addr = optarg; break;
        case OPT_METRICS_SECURE:
            if (optarg == NULL || strcmp(optarg, "true") == 0)
                o.metrics_secure = 1;
            else if (strcmp(optarg, "false") == 0)
                o.metrics_secure = 0;
            else
                return die_usage("--metrics-secure: want true or false, got %s", optarg);
            break;
        case OPT_METRICS_CERT: o.metrics_cert_file = optarg; break;
        case OPT_METRICS_KEY: o.metrics_key_file = optarg; break;
        case OPT_LOG_FORMAT:
            if ((format = log_format_parse(optarg)) < 0)
                return die_usage("--log-format: want text or json, got %s", optarg);
            break;
        case OPT_LOG_LEVEL:
            if ((level = log_level_parse(optarg)) < 0)
                return die_usage("--log-level: want error, warn, info, debug, trace or 0-4, got %s", optarg);
            break;
        case OPT_GRACE:
            if (!parse_int(optarg, &n) || n < 0)
                return die_usage("--shutdown-grace: want seconds, got %s", optarg);
            o.shutdown_grace_ms = (unsigned)n * 1000u;
            break;
        case OPT_TOKEN_USERS: token_users = optarg; break;
        case OPT_TOKEN_MAX_LIFETIME: token_max_lifetime = optarg; break;
        case OPT_ALLOW_NODE_TAINTS: o.allow_node_taints = 1; break;
        case OPT_REF_POLL:
            if ((o.ref_poll_ms = parse_seconds_ms(optarg)) == 0 || o.ref_poll_ms < 100)
                return die_usage("--ref-poll-interval: want seconds between 0.1 and 86400, got %s", optarg);
            break;
        case OPT_TOPOLOGY_WEBHOOK:
            if (optarg == NULL || strcmp(optarg, "true") == 0)
                o.topology_webhook = 1;
            else if (strcmp(optarg, "false") == 0)
                o.topology_webhook = 0;
            else
                return die_usage("--topology-webhook: want true or false, got %s", optarg);
            break;
        case OPT_WEBHOOK_ADDR: o.webhook_addr = optarg; break;
        case OPT_WEBHOOK_CERT: o.webhook_cert_file = optarg; break;
        case OPT_WEBHOOK_KEY: o.webhook_key_file = optarg; break;
        case OPT_WEBHOOK_NAMES: o.webhook_names = optarg; break;
        case OPT_WEBHOOK_CONFIG: o.webhook_config = optarg; break;
        case OPT_WEBHOOK_CLIENT_CA: o.webhook_client_ca = optarg; break;
        case OPT_WEBHOOK_CLIENT_NAMES: o.webhook_client_names = optarg; break;
        case OPT_WEBHOOK_SCOPE:
            if (strcmp(optarg, "nodesets") == 0)
                o.webhook_scope_registered = 0;
            else if (strcmp(optarg, "registered") == 0)
                o.webhook_scope_registered = 1;
            else
                return die_usage("--webhook-scope: want nodesets or registered, got %s", optarg);
            break;
        case OPT_WEBHOOK_ROTATE: {
            double v;
            /* Below the certificate's 365 days, so the previous one is still valid when replaced. */
            if (!parse_double(optarg, &v) || !(v >= 1) || v > 364.0 * 86400)
                return die_usage("--webhook-cert-rotate: want seconds between 1 and 31449600, got %s",
                                 optarg);
            o.webhook_rotate_ms = (uint64_t)(v * 1000.0 + 0.5);
            break;
        }
        case OPT_WEBHOOK_RESYNC:
            if ((o.webhook_resync_ms = parse_seconds_ms(optarg)) == 0 || o.webhook_resync_ms < 100)
                return die_usage("--webhook-resync: want seconds between 0.1 and 86400, got %s", optarg);
            break;
        case OPT_VERSION:
            /* First line unchanged ("slurmop X.Y.Z") for scripts that read it. */
            printf("slurmop %s\ncommit %s\n", OP_VERSION, OP_GIT_COMMIT);
            return 0;
        case 'h':
        case OPT_HELP: fputs(usage, stdout); return 0;
        default: return die_usage("%s", "unknown flag");
        }
    }
    if (optind < argc)
        return die_usage("unexpected argument: %s", argv[optind]);
    if (o.slurm_conf == NULL)
        o.slurm_conf = getenv("SLURM_CONF");
    tokb_policy token_policy;
    char *why = NULL;
    if (tokb_policy_parse(token_users, token_max_lifetime, &token_policy, &why) != 0) {
        snprintf(err, sizeof(err), "%s", why ? why : "bad token policy");
        free(why);
        return die_usage("%s", err);
    }
    o.token_policy = &token_policy;

    log_setup(level, format);
    signal(SIGPIPE, SIG_IGN);
    uv_loop_init(&a.loop);
    for (size_t i = 0; i < N_STOP_SIGNALS; i++) {
        uv_signal_init(&a.loop, &a.sig[i]);
        a.sig[i].data = &a;
        uv_signal_start(&a.sig[i], on_signal, stop_signals[i]);
    }
    o.on_stopped = on_operator_stopped;
    o.stopped_data = &a;

    log_info("slurmop %s (commit %s) starting", OP_VERSION, OP_GIT_COMMIT);
    int rc = op_start(&a.loop, &o, &a.op, err, sizeof(err));
    if (rc) {
        log_error("%s", err);
        a.stopping = 1;
        op_stop(a.op);
        uv_run(&a.loop, UV_RUN_DEFAULT);
        a.exit_code = 1;
    } else {
        uv_run(&a.loop, UV_RUN_DEFAULT);
    }
    /* The loop runs dry only after the operator said it stopped: every
     * handle of it is closed by then, and the signal handles with it. */
    assert(a.op == NULL);
    if (uv_loop_close(&a.loop) != 0)
        log_error("loop still has open handles at exit");
    tokb_policy_free(&token_policy);
    nh_config_free(&health);
    sl_library_fini(); /* libslurm's process-wide state, when the backend was used */
    for (int i = 0; i < o.n_slurmrestd; i++) {
        free(o.slurmrestd[i].key);
        free(o.slurmrestd[i].url);
    }
    return a.exit_code;
}
