/* kubesim: a Kubernetes API server and kubelet simulator for slurmop's
 * tests and benchmarks. See kubesim/README.md. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "kubesim/ks.h"
#include "kubesim/ks_server.h"
#include "core/err.h"
#include "core/log.h"
#include "core/mem.h"

static void usage(FILE *f)
{
    fputs("usage: kubesim [options]\n"
          "Cluster:\n"
          "  --nodes N                Nodes created at start (node-00001 ...), default 0\n"
          "  --node-gpus N            nvidia.com/gpu capacity of each Node\n"
          "  --node-label k=v         label added to every Node (repeatable)\n"
          "  --node-taint k=v:Effect  taint of every Node (repeatable)\n"
          "  --pod-start-delay D      bound -> Running (default 100ms)\n"
          "  --pod-ready-delay D      Running -> Ready (default 100ms)\n"
          "  --max-grace D            cap on pod termination grace periods (default 2s)\n"
          "  --schedule-retry D       retry unschedulable pods at most this often (default 1s)\n"
          "  --no-namespace-defaults  no ServiceAccount/kube-root-ca.crt in new namespaces\n"
          "API server:\n"
          "  --history N              watch events kept per resource (default 10000)\n"
          "  --bookmark-interval D    periodic watch bookmarks (default 60s)\n"
          "  --continue-ttl D         continue tokens expire after this (default 5m)\n"
          "  --too-large-wait D       wait before 504 on a future resourceVersion (default 3s)\n"
          "  --gc-delay D             garbage collector reaction time (default 20ms)\n"
          "  --min-request-timeout S  watches without timeoutSeconds last [S, 2S) seconds (default 1800)\n"
          "  --seed N                 random seed (names, fault dice)\n"
          "Network and auth:\n"
          "  --host ADDR              listen address (default 127.0.0.1)\n"
          "  --port N                 HTTPS port (default 0 = ephemeral)\n"
          "  --plain                  serve plain HTTP on --port instead of HTTPS\n"
          "  --http-port N            also serve plain HTTP on N (0 = ephemeral)\n"
          "  --ca-cert F --ca-key F   use this CA instead of generating one\n"
          "  --tls-cert F --tls-key F serving certificate instead of issuing one\n"
          "  --client-ca F            CA that verifies client certificates (default: the CA)\n"
          "  --require-client-cert    refuse TLS handshakes without a client certificate\n"
          "  --token T                accepted bearer token (repeatable); requests need a token or a cert\n"
          "  --auth-required          refuse anonymous requests (401) even without --token\n"
          "  --write-kubeconfig F     write a kubeconfig for the primary URL\n"
          "  --port-file F            write {\"url\",\"https\",\"http\",\"pid\"} as JSON\n"
          "Faults:\n"
          "  --rate-429 X             fraction of API requests answered 429 (APF plain text)\n"
          "  --rate-500 X             fraction answered 500\n"
          "  --latency D              added to every API response\n"
          "  --write-rate N           apply API writes at most N per second, in arrival order (a busy\n"
          "                           API server: watchers see a burst only as fast as it is applied)\n"
          "  --expire-watches N       the next N watches get the 410 ERROR event\n"
          "  --retry-after S          Retry-After of injected 429s (default 1)\n"
          "State:\n"
          "  --state F                load F at start if present; write it on SIGTERM/SIGINT\n"
          "  --log-level L            error|warn|info|debug (default info)\n"
          "Durations: 250ms, 2s, 1m; a bare number is milliseconds.\n",
          f);
}

static int parse_duration(const char *s, unsigned *out)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || v < 0)
        return -1;
    double mult = 1;
    if (*end == '\0' || strcmp(end, "ms") == 0)
        mult = 1;
    else if (strcmp(end, "s") == 0)
        mult = 1000;
    else if (strcmp(end, "m") == 0)
        mult = 60000;
    else if (strcmp(end, "us") == 0)
        mult = 0.001;
    else
        return -1;
    *out = (unsigned)(v * mult);
    return 0;
}

typedef struct app {
    uv_loop_t *loop;
    ks *k;
    ks_server *srv;
    uv_signal_t sigterm, sigint;
    const char *state_file;
    int stopping;
} app;

static void drop_hook(void *data)
{
    app *a = data;
    if (a->srv)
        ks_server_drop_connections(a->srv);
}

static void engine_closed(void *data)
{
    app *a = data;
    a->k = NULL;
    if (a->srv)
        ks_server_close(a->srv, NULL, NULL);
    a->srv = NULL;
}

static void on_signal(uv_signal_t *s, int signum)
{
    app *a = s->data;
    if (a->stopping)
        return;
    a->stopping = 1;
    log_info("kubesim: signal %d, shutting down", signum);
    if (a->state_file) {
        int rc = ks_state_save(a->k, a->state_file);
        if (rc)
            log_error("kubesim: saving state to %s: %s", a->state_file, err_str(rc));
        else
            log_info("kubesim: state saved to %s", a->state_file);
    }
    uv_signal_stop(&a->sigterm);
    uv_signal_stop(&a->sigint);
    uv_close((uv_handle_t *)&a->sigterm, NULL);
    uv_close((uv_handle_t *)&a->sigint, NULL);
    /* watches end first (their streams are aborted), then the listeners close */
    ks_close(a->k, engine_closed, a);
}

enum {
    O_NODES = 1000,
    O_GPUS,
    O_LABEL,
    O_TAINT,
    O_START,
    O_READY,
    O_GRACE,
    O_RETRY,
    O_NO_NS,
    O_HISTORY,
    O_BOOKMARK,
    O_CONT_TTL,
    O_TOO_LARGE,
    O_GC,
    O_MIN_TIMEOUT,
    O_SEED,
    O_HOST,
    O_PORT,
    O_PLAIN,
    O_HTTP_PORT,
    O_CA_CERT,
    O_CA_KEY,
    O_TLS_CERT,
    O_TLS_KEY,
    O_CLIENT_CA,
    O_REQ_CERT,
    O_TOKEN,
    O_AUTH,
    O_KUBECONFIG,
    O_PORT_FILE,
    O_429,
    O_500,
    O_LATENCY,
    O_WRITE_RATE,
    O_EXPIRE,
    O_RETRY_AFTER,
    O_STATE,
    O_LOG,
};

int main(int argc, char **argv)
{
    mem_init();
    signal(SIGPIPE, SIG_IGN);
    ks_config cfg;
    ks_config_defaults(&cfg);
    ks_server_opts so;
    memset(&so, 0, sizeof(so));
    so.https_port = 0;
    so.http_port = -1;
    int plain = 0, port = 0, loglevel = LOGL_INFO;
    const char *kubeconfig = NULL, *port_file = NULL;
    const char **labels = xcalloc((size_t)argc + 1, sizeof(char *));
    const char **taints = xcalloc((size_t)argc + 1, sizeof(char *));
    const char **tokens = xcalloc((size_t)argc + 1, sizeof(char *));
    static const struct option opts[] = {
        {"nodes", 1, 0, O_NODES},
        {"node-gpus", 1, 0, O_GPUS},
        {"node-label", 1, 0, O_LABEL},
        {"node-taint", 1, 0, O_TAINT},
        {"pod-start-delay", 1, 0, O_START},
        {"pod-ready-delay", 1, 0, O_READY},
        {"max-grace", 1, 0, O_GRACE},
        {"schedule-retry", 1, 0, O_RETRY},
        {"no-namespace-defaults", 0, 0, O_NO_NS},
        {"history", 1, 0, O_HISTORY},
        {"bookmark-interval", 1, 0, O_BOOKMARK},
        {"continue-ttl", 1, 0, O_CONT_TTL},
        {"too-large-wait", 1, 0, O_TOO_LARGE},
        {"gc-delay", 1, 0, O_GC},
        {"min-request-timeout", 1, 0, O_MIN_TIMEOUT},
        {"seed", 1, 0, O_SEED},
        {"host", 1, 0, O_HOST},
        {"port", 1, 0, O_PORT},
        {"plain", 0, 0, O_PLAIN},
        {"http-port", 1, 0, O_HTTP_PORT},
        {"ca-cert", 1, 0, O_CA_CERT},
        {"ca-key", 1, 0, O_CA_KEY},
        {"tls-cert", 1, 0, O_TLS_CERT},
        {"tls-key", 1, 0, O_TLS_KEY},
        {"client-ca", 1, 0, O_CLIENT_CA},
        {"require-client-cert", 0, 0, O_REQ_CERT},
        {"token", 1, 0, O_TOKEN},
        {"auth-required", 0, 0, O_AUTH},
        {"write-kubeconfig", 1, 0, O_KUBECONFIG},
        {"port-file", 1, 0, O_PORT_FILE},
        {"rate-429", 1, 0, O_429},
        {"rate-500", 1, 0, O_500},
        {"latency", 1, 0, O_LATENCY},
        {"write-rate", 1, 0, O_WRITE_RATE},
        {"expire-watches", 1, 0, O_EXPIRE},
        {"retry-after", 1, 0, O_RETRY_AFTER},
        {"state", 1, 0, O_STATE},
        {"log-level", 1, 0, O_LOG},
        {"help", 0, 0, 'h'},
        {0, 0, 0, 0},
    };
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        int bad = 0;
        switch (c) {
        case O_NODES:
            cfg.nodes = atoi(optarg);
            break;
        case O_GPUS:
            cfg.node_gpus = atoi(optarg);
            break;
        case O_LABEL:
            labels[cfg.n_node_labels++] = optarg;
            break;
        case O_TAINT:
            taints[cfg.n_node_taints++] = optarg;
            break;
        case O_START:
            bad = parse_duration(optarg, &cfg.pod_start_delay_ms);
            break;
        case O_READY:
            bad = parse_duration(optarg, &cfg.pod_ready_delay_ms);
            break;
        case O_GRACE:
            bad = parse_duration(optarg, &cfg.max_grace_ms);
            break;
        case O_RETRY:
            bad = parse_duration(optarg, &cfg.schedule_retry_ms);
            break;
        case O_NO_NS:
            cfg.namespace_defaults = 0;
            break;
        case O_HISTORY:
            cfg.history = (unsigned)atoi(optarg);
            break;
        case O_BOOKMARK:
            bad = parse_duration(optarg, &cfg.bookmark_interval_ms);
            break;
        case O_CONT_TTL:
            bad = parse_duration(optarg, &cfg.continue_ttl_ms);
            break;
        case O_TOO_LARGE:
            bad = parse_duration(optarg, &cfg.too_large_wait_ms);
            break;
        case O_GC:
            bad = parse_duration(optarg, &cfg.gc_delay_ms);
            break;
        case O_MIN_TIMEOUT:
            cfg.min_request_timeout_s = (unsigned)atoi(optarg);
            break;
        case O_SEED:
            cfg.seed = strtoull(optarg, NULL, 10);
            break;
        case O_HOST:
            so.host = optarg;
            break;
        case O_PORT:
            port = atoi(optarg);
            break;
        case O_PLAIN:
            plain = 1;
            break;
        case O_HTTP_PORT:
            so.http_port = atoi(optarg);
            break;
        case O_CA_CERT:
            so.ca_cert_file = optarg;
            break;
        case O_CA_KEY:
            so.ca_key_file = optarg;
            break;
        case O_TLS_CERT:
            so.tls_cert_file = optarg;
            break;
        case O_TLS_KEY:
            so.tls_key_file = optarg;
            break;
        case O_CLIENT_CA:
            so.client_ca_file = optarg;
            break;
        case O_REQ_CERT:
            so.require_client_cert = 1;
            break;
        case O_TOKEN:
            tokens[cfg.n_tokens++] = optarg;
            break;
        case O_AUTH:
            cfg.auth_required = 1;
            break;
        case O_KUBECONFIG:
            kubeconfig = optarg;
            break;
        case O_PORT_FILE:
            port_file = optarg;
            break;
        case O_429:
            cfg.rate_429 = atof(optarg);
            break;
        case O_500:
            cfg.rate_500 = atof(optarg);
            break;
        case O_LATENCY:
            bad = parse_duration(optarg, &cfg.latency_ms);
            break;
        case O_WRITE_RATE:
            cfg.write_rate = atof(optarg);
            bad = !(cfg.write_rate > 0);
            break;
        case O_EXPIRE:
            cfg.expire_watches = atoi(optarg);
            break;
        case O_RETRY_AFTER:
            cfg.retry_after_s = (unsigned)atoi(optarg);
            break;
        case O_STATE:
            cfg.state_file = optarg;
            break;
        case O_LOG:
            loglevel = log_level_parse(optarg);
            bad = loglevel < 0;
            break;
        case 'h':
            usage(stdout);
            free(labels);
            free(taints);
            free(tokens);
            return 0;
        default:
            usage(stderr);
            free(labels);
            free(taints);
            free(tokens);
            return 2;
        }
        if (bad) {
            fprintf(stderr, "kubesim: bad value for --%s: %s\n", opts[c - O_NODES].name, optarg);
            free(labels);
            free(taints);
            free(tokens);
            return 2;
        }
    }
    if (optind < argc) {
        usage(stderr);
        free(labels);
        free(taints);
        free(tokens);
        return 2;
    }
    log_setup(loglevel, 0);
    cfg.node_labels = labels;
    cfg.node_taints = taints;
    cfg.tokens = tokens;
    if (cfg.n_tokens)
        cfg.auth_required = 1;
    if (plain) {
        so.https_port = -1;
        so.http_port = port;
    } else {
        so.https_port = port;
    }

    uv_loop_t *loop = uv_default_loop();
    app a;
    memset(&a, 0, sizeof(a));
    a.loop = loop;
    a.state_file = cfg.state_file;
    int err = 0;
    /* The server first: it makes the CA that every namespace publishes in
     * kube-root-ca.crt. No request is handled before the loop runs, by which
     * time the engine is bound to it. */
    ks *k = NULL;
    ks_server *srv = ks_server_new(loop, NULL, &so, &err);
    if (srv == NULL) {
        fprintf(stderr, "kubesim: cannot listen: %s\n", err_str(err));
        uv_run(loop, UV_RUN_DEFAULT);
        return 1;
    }
    cfg.root_ca_pem = ks_server_ca_pem(srv);
    k = ks_new(loop, &cfg, &err);
    if (k == NULL) {
        fprintf(stderr, "kubesim: cannot start: %s\n", err_str(err));
        ks_server_close(srv, NULL, NULL);
        uv_run(loop, UV_RUN_DEFAULT);
        uv_loop_close(loop);
        return 1;
    }
    ks_server_set_engine(srv, k);
    a.k = k;
    a.srv = srv;
    ks_hooks hooks = {drop_hook, &a};
    ks_set_hooks(k, &hooks);
    if (kubeconfig) {
        int rc = ks_server_write_kubeconfig(srv, kubeconfig, cfg.n_tokens ? cfg.tokens[0] : NULL);
        if (rc) {
            fprintf(stderr, "kubesim: cannot write %s: %s\n", kubeconfig, err_str(rc));
            return 1;
        }
    }
    if (port_file) {
        char *tmp = xasprintf("%s.tmp", port_file);
        FILE *f = fopen(tmp, "w");
        if (f == NULL) {
            fprintf(stderr, "kubesim: cannot write %s\n", port_file);
            return 1;
        }
        fprintf(f, "{\"url\":\"%s\",\"https\":\"%s\",\"http\":\"%s\",\"pid\":%d}\n", ks_server_url(srv),
                ks_server_https_port(srv) ? ks_server_url(srv) : "",
                ks_server_http_url(srv) ? ks_server_http_url(srv) : "", (int)getpid());
        fclose(f);
        if (rename(tmp, port_file) != 0) {
            fprintf(stderr, "kubesim: cannot write %s\n", port_file);
            return 1;
        }
        free(tmp);
    }
    uv_signal_init(loop, &a.sigterm);
    uv_signal_init(loop, &a.sigint);
    a.sigterm.data = a.sigint.data = &a;
    uv_signal_start(&a.sigterm, on_signal, SIGTERM);
    uv_signal_start(&a.sigint, on_signal, SIGINT);
    /* exactly one line on stdout; the plain listener is in the port file and the log */
    if (ks_server_http_url(srv) && ks_server_https_port(srv))
        log_info("kubesim: plain http on %s", ks_server_http_url(srv));
    printf("kubesim: listening on %s\n", ks_server_url(srv));
    fflush(stdout);
    uv_run(loop, UV_RUN_DEFAULT);
    int rc = uv_loop_close(loop);
    if (rc)
        log_error("kubesim: loop not empty at exit: %s", err_str(rc));
    free(labels);
    free(taints);
    free(tokens);
    return rc ? 1 : 0;
}
