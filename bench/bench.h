/* bench: the internal contract of slurmop-bench, the benchmark harness.
 *
 * The harness is one libuv program that drives the real binaries as
 * subprocesses over real sockets: kubesim (or any API server named by
 * --kubeconfig), slurmop, and a Slurm lab (tests/slurm/slurmlab.sh). Its own
 * clients (API calls, watches that timestamp pods, the pipelined create
 * client that measures the limit, /metrics scrapes, admin calls) all run on
 * the same loop.
 *
 * Scenario code is written as a straight script: every helper below that
 * waits (bx_wait, bx_sleep, bx_http, bx_kube_*, bx_sh, process start/stop)
 * runs the loop until its own condition holds, so the watches, samplers and
 * load generators armed earlier keep running while the script waits. No
 * callback ever calls a waiting helper (they are not re-entrant); callbacks
 * only record.
 *
 * Times are uv_hrtime() nanoseconds (monotonic); reports use seconds.
 */
#ifndef OP_BENCH_H
#define OP_BENCH_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <uv.h>

#include "core/buf.h"
#include "core/httpc.h"
#include "core/kube.h"
#include "core/kubeconfig.h"
#include "core/mem.h"
#include "watchers/slinky.h"

#define BX_MAX_SIZES 8

/* ------------------------------------------------------------------ */
/* context */

typedef struct bx_ctx bx_ctx;
typedef struct bx_proc bx_proc;

/** Renders the progress line of the running step into out (called about
 *  four times a second while the harness waits). */
typedef void (*bx_status_fn)(void *arg, char *out, size_t len);

/* --registration-precreate operator */
#define REG_PRECREATE_OPERATOR (-1)

struct bx_ctx {
    uv_loop_t *loop;
    /* settings (flags) */
    int quick;
    int sizes[BX_MAX_SIZES];
    int n_sizes;
    int k8s_nodes; /* Nodes kubesim starts with (default: the largest size) */
    const char *out_dir;
    const char *kubeconfig;  /* external cluster; NULL = start kubesim */
    const char *ns;          /* namespace of the benchmark's objects */
    const char *image;       /* container image of the NodeSet pods */
    double qps;              /* slurmop --qps (0 = limiter off) */
    int repeat;              /* scale-out runs per size (best kept) */
    double churn_s;          /* seconds per churn rate */
    double idle_s;           /* idle CPU window */
    int real_k8s;            /* --cluster real: the harness started tests/k8s/cluster.sh */
    char *k8s_dir;           /* ... its K8S_DIR (state, logs, the admin kubeconfig) */
    int k8s_reuse;           /* --k8s-dir: a cluster.sh cluster already running there, left running */
    const char *slurm_version; /* SLURMLAB_VERSION of the labs: 22.05 (default), 24.11, 26.05 */
    int slurm_version_given;   /* ... named by --slurm-version */
    const char *slurmrestd;  /* external Slurm: NS/NAME=URL (with --kubeconfig) */
    const char *slurm_conf;  /* external Slurm: slurm.conf for libslurm */
    int no_slurm;            /* skip everything that needs the Slurm lab */
    int churn_slurm;         /* churn with a RestApi and a Slurm lab of N nodes */
    int churn_outage;        /* ... and its slurmrestd killed 0.5 s into the 1,000 events/s window */
    int churn_latency_ms;    /* > 0: kubesim answers non-watch requests this late during churn windows */
    double scalein_write_rate; /* > 0: kubesim applies writes at most this many per second during scale-in */
    int reg_real;            /* registration: slurmd kept running (the rest are cycled) */
    int reg_real_given;      /* ... named on the command line (--quick keeps all unless it was) */
    int reg_cycle;           /* ... cycled slurmd running at once */
    int reg_pace;            /* ... slurmd started and not yet registered, at most (0: no cap) */
    int reg_precreate;       /* ... node records made FUTURE before the storm, per scontrol call (0: none;
                              * REG_PRECREATE_OPERATOR: the operator makes them as it creates the pods) */
    int reg_scalein;         /* ... then a scale-in to 0 with busy nodes (bx_scalein_run) */
    int pin_cpu;             /* --pin-operator: the CPU of the operator under test, -1: not pinned */
    const char *op_args[16]; /* --slurmop-arg: extra flags for every slurmop */
    int n_op_args;
    /* paths */
    char *bin_dir;    /* where slurmop and kubesim are */
    char *src_dir;    /* the source tree (crds/, tests/slurm/) */
    int tolerate_unready; /* NodeSet pods tolerate not-ready/unreachable Nodes (--peer) */
    int gpu_shape; /* --pod-shape gpu: slurmd asks for the Node's 8 GPUs, oversubscribeNode (no anti-affinity)
                    */
    const char *crd_dir; /* CRDs to install, NULL = <src_dir>/crds (--peer: Slinky's own for its runs) */
    char *log_dir;    /* <out>/logs */
    char *build_type; /* CMAKE_BUILD_TYPE of bin_dir, or "unknown" */
    int sanitized;    /* bin_dir was built with ASan/UBSan */
    int slurm_aware;  /* the operator talks to Slurm (slurmio node cache linked in) */
    /* progress */
    int tty;
    bx_status_fn status_fn;
    void *status_arg;
    char step[160];
    uint64_t step_t0;
    uint64_t last_progress;
    uint64_t run_t0;
    /* results */
    cJSON *results; /* {scenario: {...}} */
    cJSON *targets; /* [{target, measured, limit, ratio, verdict, note}] */
    buf_t report;   /* Markdown of every table, in order */
    int failures;   /* scenarios that could not complete */
    /* interruption (SIGINT/SIGTERM): waits end early, except in cleanup */
    volatile int interrupted;
    int cleanup; /* > 0 while stopping what was started: waits run to the end */
};

/** True once the user asked to stop (and we are not cleaning up). */
static inline int bx_stop_requested(const bx_ctx *x)
{
    return x->interrupted && x->cleanup == 0;
}

/** Seconds between two uv_hrtime() values. */
static inline double bx_secs(uint64_t from, uint64_t to)
{
    return to > from ? (double)(to - from) / 1e9 : 0.0;
}

/** Print a message line (clears the progress line first). */
void bx_say(bx_ctx *x, const char *fmt, ...) OP_PRINTF(2, 3);
/** Erase the progress line (before printing to stdout). */
void bx_progress_clear(bx_ctx *x);
/** Start a step: its name shows in the progress line with its elapsed time. */
void bx_step(bx_ctx *x, const char *fmt, ...) OP_PRINTF(2, 3);
/** Set (or clear, fn NULL) the callback that adds detail to the progress line. */
void bx_set_status(bx_ctx *x, bx_status_fn fn, void *arg);

/** Run the loop until pred(arg) is non-zero (checked after every loop
 *  iteration and at least every 5 ms) or timeout_s passes. 0, OP_ETIMEOUT,
 *  or OP_ECANCELED at once when the run is being interrupted (outside
 *  cleanup). */
int bx_wait(bx_ctx *x, int (*pred)(void *arg), void *arg, double timeout_s);
/** Run the loop for s seconds. */
void bx_sleep(bx_ctx *x, double s);

/* ------------------------------------------------------------------ */
/* processes (bench_proc.c) */

/** Spawn argv (argv[0] is the path), stdout and stderr appended to log_path,
 *  env entries ("K=V") added to the inherited environment. NULL on failure
 *  (reported with bx_say). */
bx_proc *bx_proc_start(bx_ctx *x, const char *name, const char *const *argv, const char *const *env,
                       const char *log_path);
/** Pid, or 0 once exited. */
int bx_proc_pid(const bx_proc *p);
/** --pin-operator: move every thread of p to x->pin_cpu (the harness and the
 *  other children run on the remaining CPUs). No-op when not pinning. */
void bx_proc_pin(bx_ctx *x, const bx_proc *p);
/** --pin-operator: keep this process (and the children it starts later) off
 *  the last CPU it may use and reserve that one for the operator; returns
 *  that CPU, or -1 (with a message) when fewer than two CPUs are usable. */
int bx_pin_setup(bx_ctx *x);
/** --pin-operator: move every thread of the processes whose environment
 *  holds K8S_CLUSTER_TAG=tag (a control plane of tests/k8s/cluster.sh) off
 *  the operator's CPU (away) or back onto every CPU. Threads moved; 0 when
 *  not pinning. */
int bx_pin_tagged_away(bx_ctx *x, const char *tag, int away);
/** 1 once the process has exited. */
int bx_proc_exited(const bx_proc *p);
/** Send sig, wait up to timeout_s (then SIGKILL), free p. Returns the exit
 *  status (128+signal when killed by one). p may be NULL (returns 0). */
int bx_proc_stop(bx_ctx *x, bx_proc *p, int sig, double timeout_s);
/** Resident set size (KiB) of pid, -1 when unknown. */
long bx_rss_kib(int pid);
/** User + system CPU seconds of pid (every thread), -1 when unknown. */
double bx_cpu_seconds(int pid);
/** The same for the process's main thread only (the libuv loop of slurmop). */
double bx_loop_cpu_seconds(int pid);
/** Run argv to completion (stdin /dev/null; stderr appended to log_path or
 *  dropped when NULL), capturing stdout (at most 16 MiB) into *out (may be
 *  NULL; free it). Returns the exit status, or a negative code on a spawn
 *  failure or timeout (the process is killed). */
int bx_run(bx_ctx *x, const char *const *argv, const char *const *env, const char *log_path, double timeout_s,
           char **out);

/* ------------------------------------------------------------------ */
/* HTTP, API and metrics (bench_http.c) */

typedef struct bx_resp {
    int err;    /* 0, or a transport error */
    int status; /* HTTP status */
    char *body; /* NUL-terminated; owned */
    size_t len;
} bx_resp;

/** One request, waited for (plain HTTP pools for admin and /metrics). The
 *  body is sent as is with content_type. resp must be freed with
 *  bx_resp_free. Returns resp->err. */
int bx_http(bx_ctx *x, hc_pool *pool, const char *method, const char *path, const char *content_type,
            const char *body, double timeout_s, bx_resp *resp);
void bx_resp_free(bx_resp *r);
/** A plain-HTTP pool for base_url ("http://127.0.0.1:port"). */
hc_pool *bx_pool_new(bx_ctx *x, const char *base_url);
/** Close a pool and wait until it is gone. */
void bx_pool_close(bx_ctx *x, hc_pool *pool);

/** An API client: a kube_client plus the configuration it came from. */
typedef struct bx_api {
    kcfg *cfg;
    kube_client *kc;
} bx_api;
/** Load kubeconfig_path and connect (limiter off). 0 or a code (message said). */
int bx_api_open(bx_ctx *x, const char *kubeconfig_path, bx_api *api);
void bx_api_close(bx_ctx *x, bx_api *api);

/** Synchronous API calls: *out (may be NULL) gets a copy of the returned
 *  object (cJSON_Delete it). Return the kube_cb error (0 on 2xx). */
int bx_get(bx_ctx *x, bx_api *api, const kube_res *res, const char *ns, const char *name, cJSON **out);
int bx_list(bx_ctx *x, bx_api *api, const kube_res *res, const char *ns, const char *query, cJSON **out);
int bx_create(bx_ctx *x, bx_api *api, const kube_res *res, const char *ns, const cJSON *obj, cJSON **out);
int bx_patch(bx_ctx *x, bx_api *api, const kube_res *res, const char *ns, const char *name, const char *sub,
             const char *patch_json, cJSON **out);
int bx_delete(bx_ctx *x, bx_api *api, const kube_res *res, const char *ns, const char *name);

/* ---- Prometheus text ---- */

typedef struct bx_sample {
    char *name;
    char *labels; /* the text between the braces, "" when none */
    double v;
} bx_sample;

typedef struct bx_metrics {
    bx_sample *v;
    size_t n;
} bx_metrics;

/** Parse the text exposition format (comments skipped). */
void bx_metrics_parse(const char *text, bx_metrics *m);
void bx_metrics_free(bx_metrics *m);
/** Sum of the samples called name whose labels contain every
 *  comma-separated `k="v"` term of filter (NULL or "" = all). */
double bx_metric(const bx_metrics *m, const char *name, const char *filter);
/** 1 when a sample called name (matching filter) exists. */
int bx_metric_has(const bx_metrics *m, const char *name, const char *filter);

#define BX_HIST_MAX 40
/** A histogram read from /metrics: cumulative counts per upper bound. */
typedef struct bx_hist {
    int n;                  /* buckets, +Inf last */
    double le[BX_HIST_MAX]; /* upper bounds */
    double cum[BX_HIST_MAX];
    double sum, count;
} bx_hist;

/** Read histogram name (the _bucket/_sum/_count series) for filter; 0 or OP_ENOTFOUND. */
int bx_hist_read(const bx_metrics *m, const char *name, const char *filter, bx_hist *h);
/** a -= b (the observations between two scrapes). */
void bx_hist_sub(bx_hist *a, const bx_hist *b);
/** Histogram name in m1 minus the same in m0 (the observations between the
 *  two scrapes); 0 or OP_ENOTFOUND when m1 lacks it. */
int bx_hist_delta(const bx_metrics *m0, const bx_metrics *m1, const char *name, const char *filter,
                  bx_hist *h);
/** bx_metric of m1 minus that of m0; NAN when m1 lacks the metric. */
double bx_metric_delta(const bx_metrics *m0, const bx_metrics *m1, const char *name, const char *filter);
/** Every sample of name that grew from m0 to m1: {"its labels": growth}. */
cJSON *bx_metric_deltas(const bx_metrics *m0, const bx_metrics *m1, const char *name);
/** Quantile q (0..1) by linear interpolation inside the bucket that holds
 *  it (Prometheus' histogram_quantile); the first bucket starts at 0; a
 *  quantile in the +Inf bucket answers the largest finite bound. NAN when
 *  the histogram is empty. */
double bx_hist_quantile(const bx_hist *h, double q);
/** Upper bound of the highest non-empty bucket (the max is at most this);
 *  INFINITY when the +Inf bucket has observations, NAN when empty. */
double bx_hist_max_bound(const bx_hist *h);
/** Fraction of observations <= le, exact when le is a bucket bound. */
double bx_hist_frac_le(const bx_hist *h, double le);

/* ------------------------------------------------------------------ */
/* the binaries under test (bench_env.c) */

typedef struct bx_kubesim {
    bx_proc *proc;
    char *dir;        /* its files: kubeconfig, port.json */
    char *kubeconfig; /* HTTPS with a client certificate */
    char *url;        /* https://127.0.0.1:port */
    char *http_url;   /* the plain listener: admin API */
    hc_pool *admin;
} bx_kubesim;

/** Start kubesim with `nodes` Nodes plus extra flags (NULL-terminated, may be
 *  NULL); wait until it listens. 0 or a code. log names the log file. */
int bx_kubesim_start(bx_ctx *x, const char *log, int nodes, const char *const *extra, bx_kubesim *ks);
void bx_kubesim_stop(bx_ctx *x, bx_kubesim *ks);
/** POST/GET an admin path; *out (may be NULL) gets the decoded JSON. */
int bx_admin(bx_ctx *x, bx_kubesim *ks, const char *method, const char *path, const char *body, cJSON **out);

typedef struct bx_slurmop {
    bx_proc *proc;
    char *log;
    char *metrics_url;
    char *health_url;
    hc_pool *metrics;
} bx_slurmop;

/** Start slurmop against kubeconfig with extra flags (NULL-terminated);
 *  wait until /readyz answers 200 and the caches are synced. */
int bx_slurmop_start(bx_ctx *x, const char *log, const char *kubeconfig, const char *const *extra,
                     bx_slurmop *op);
/** SIGTERM; returns the exit status (0 expected). */
int bx_slurmop_stop(bx_ctx *x, bx_slurmop *op);
/** Scrape /metrics. 0 or a code. */
int bx_scrape(bx_ctx *x, bx_slurmop *op, bx_metrics *m);
/** Wait until the NodeSet queue is empty and no key is being processed,
 *  and no add happened for quiet_s. 0 or OP_ETIMEOUT. */
int bx_wait_quiet(bx_ctx *x, bx_slurmop *op, double quiet_s, double timeout_s);
/** Wait until slurmop's Slurm node writes (slurmop_slurm_node_writes_total)
 *  stopped for quiet_s: after a scale-out it writes each node's pod info, one
 *  request per node. 0 or OP_ETIMEOUT. */
int bx_wait_slurm_quiet(bx_ctx *x, bx_slurmop *op, double quiet_s, double timeout_s);
/** Wait until the operator has no Kubernetes API request in flight but its
 *  watches (slurmop_api_requests_in_flight{kind="request"} 0) for quiet_s. */
int bx_wait_api_quiet(bx_ctx *x, bx_slurmop *op, double quiet_s, double timeout_s);

/** The benchmark's cluster: CRDs, key Secrets, Controller "slurm", and
 *  NodeSet "gpu" with `replicas`. jwt_key (may be NULL) is the JWT key to
 *  store (a Slurm lab's); restapi creates a RestApi "slurm" too. no_drain
 *  (runs without Slurm only) annotates the NodeSet
 *  nodeset.slinky.slurm.net/delete-without-drain=true: with no Slurm to
 *  confirm a drain the operator would otherwise keep every pod a scale-in
 *  condemns, and hold the deleted NodeSet with its drain finalizer. */
int bx_make_cluster(bx_ctx *x, bx_api *api, int replicas, const char *jwt_key, size_t jwt_len, int restapi,
                    int no_drain);
/** Create the workers' headless Service and PodDisruptionBudget the
 *  operator makes for Controller "slurm" (reconcilers/nodeset_build), owned
 *  by NodeSet "gpu", unless they exist. The limit's run on a real cluster
 *  needs them: kube-controller-manager keeps an EndpointSlice entry per pod
 *  of the Service and re-evaluates the budget on every pod change, work the
 *  API server and the controller manager do in the operator's runs too. */
int bx_make_worker_objects(bx_ctx *x, bx_api *api);
/** Create RestApi "slurm" (of Controller "slurm"). */
int bx_make_restapi(bx_ctx *x, bx_api *api);
/** PATCH the NodeSet's scale subresource. */
int bx_scale(bx_ctx *x, bx_api *api, int replicas);
/** The pods the operator would create for ordinals [0, n) of NodeSet
 *  "gpu" as it is now, as POST bodies (built by reconcilers/nodeset_build).
 *  NULL on failure. Free with bx_free_strv. */
char **bx_build_pods(bx_ctx *x, bx_api *api, int n);
void bx_free_strv(char **v, size_t n);

/* ------------------------------------------------------------------ */
/* pod observer (bench_obs.c) */

typedef struct bx_obs bx_obs;

/** Watch the pods of namespace ns (and the NodeSet "gpu"): timestamps of
 *  every pod created, turning Ready and deleted. Starts with a LIST. */
bx_obs *bx_obs_start(bx_ctx *x, bx_api *api, const char *ns);
void bx_obs_stop(bx_ctx *x, bx_obs *o);

typedef struct bx_obs_counts {
    int exist; /* pods present now */
    int ready; /* ... of them Ready */
    int terminating;
    long created; /* ADDED events since start (pods present at start excluded) */
    long became_ready;
    long deleted;
    int ns_replicas, ns_ready; /* NodeSet status.replicas / readyReplicas (-1 unknown) */
    long events;
} bx_obs_counts;
void bx_obs_counts_get(const bx_obs *o, bx_obs_counts *c);
/** Event times (uv_hrtime ns) in arrival order; kind 0 created, 1 ready, 2 deleted. */
const uint64_t *bx_obs_times(const bx_obs *o, int kind, size_t *n);
/** Time the NodeSet's status first had readyReplicas == replicas == target (0 = not yet). */
void bx_obs_watch_ready(bx_obs *o, int target);
uint64_t bx_obs_ns_ready_at(const bx_obs *o);
/** When one pod started terminating (deletionTimestamp first seen, or its
 *  deletion when it went at once); 0 when it has not since start or since a
 *  pod of that name was last added. */
uint64_t bx_obs_terminating_at(const bx_obs *o, const char *pod);
/** Deletion time of one pod (0 when not deleted since start). */
uint64_t bx_obs_deleted_at(const bx_obs *o, const char *pod);
/** Time of the last ADDED event of a pod of that name since start (0: none):
 *  with bx_obs_deleted_at, how long a deleted pod took to come back. */
uint64_t bx_obs_added_at(const bx_obs *o, const char *pod);
/** History of every pod name's terminations and creations, kept while on
 *  (off by default: it grows with every event); off also forgets it. */
void bx_obs_history(bx_obs *o, int on);
enum { BX_OBS_TERMINATING = 1, BX_OBS_ADDED = 2 };
/** With the history on: the first event of kind (BX_OBS_*) of a pod name at
 *  or after t (uv_hrtime ns); 0 when none was seen. */
uint64_t bx_obs_first_after(const bx_obs *o, const char *pod, int kind, uint64_t t);
/** The observer's view of a pod now: 0 absent, 1 present, 2 terminating. */
int bx_obs_pod_state(const bx_obs *o, const char *pod);

/* ------------------------------------------------------------------ */
/* the pipelined create client (bench_load.c) */

typedef struct bx_load_result {
    size_t ok, failed;
    int first_error_status;
    uint64_t t_start; /* first request written (after every connection is up) */
    uint64_t t_end;   /* last response read */
    size_t watch_bytes; /* read from the watch (bx_load_opts.watch_path) */
} bx_load_result;

typedef struct bx_load_opts {
    int conns, depth;       /* keep-alive connections, requests pipelined on each */
    const char *watch_path; /* a watch held and read throughout (NULL: none) */
    int cpu;                /* >= 0: run on a thread of its own pinned there */
} bx_load_opts;

/** POST bodies[0..n) to path over o->conns keep-alive connections to the
 *  server of cfg (TLS or plain, the kubeconfig's credentials), o->depth
 *  requests pipelined on each. With o->watch_path, that watch streams
 *  before the first POST and is read until the last answer. Waits for
 *  every answer (with o->cpu, while this thread's loop keeps running). 0
 *  or a code. */
int bx_load_run(bx_ctx *x, const kcfg *cfg, const char *path, char *const *bodies, size_t n,
                const bx_load_opts *o, bx_load_result *res);

/* ------------------------------------------------------------------ */
/* the real control plane (bench_k8s.c): tests/k8s/cluster.sh run by the
 * harness (--cluster real). One cluster serves the whole run: its Nodes are
 * made once (KWOK), every scenario empties the benchmark's namespace of
 * what it made, as on any --kubeconfig cluster. */

/** Start the cluster in <out>/k8s with `nodes` KWOK Nodes; on success
 *  x->kubeconfig names its admin kubeconfig and x->real_k8s is set. */
int bx_k8s_start(bx_ctx *x, int nodes);
/** Stop it (nothing left running; etcd's data removed, the logs kept). */
void bx_k8s_stop(bx_ctx *x);
/** Compact etcd's history (watches from before it get 410 once the API
 *  server's watch cache no longer holds their resourceVersion). */
int bx_k8s_compact(bx_ctx *x);
/** SIGTERM kube-apiserver (every connection and watch ends), start it again
 *  on the same port and wait until /readyz answers. */
int bx_k8s_restart_apiserver(bx_ctx *x);
/** kube-apiserver's pid (0 when unknown), for its CPU time. */
int bx_k8s_apiserver_pid(bx_ctx *x);

/* ------------------------------------------------------------------ */
/* the Slurm lab (bench_slurm.c) */

typedef struct bx_lab {
    char *dir;      /* the lab directory */
    char *env_text; /* `slurmlab.sh env` output */
    char *slurm_conf;
    char *rest_url;
    char *rest_user;
    char *rest_token;
    char *jwt_key_path;
    char *version; /* scontrol --version of the lab's Slurm */
    char *bin;     /* SLURMLAB_BIN: the clients of the lab's version */
    char *api;     /* SLURMLAB_API: the data parser of that version (v0.0.38, v0.0.42, v0.0.44) */
    int newer;     /* not 22.05: node writes go through REST (no libslurm, no --slurm-conf) */
    char *run;      /* SLURMLAB_RUN: the runner of the lab's programs ("" for 22.05: the host's) */
    char *rewrites; /* SLURMLAB_CONF_REWRITES: the lines a given slurm.conf had rewritten */
    int ctld_port;  /* SlurmctldPort */
    int slurmd_port; /* SlurmdPort */
    int started;
} bx_lab;

/** Start a lab of x->slurm_version: static nodes with a slurmd each named by
 *  static_names (space-separated, may be NULL), plus slurmd-less nodes from
 *  extra_conf lines. The newer versions run SlurmUser "slurm", whose tokens
 *  may update nodes through REST. 0, OP_ENOTSUP when Slurm is not installed
 *  / not root, or a code. */
int bx_lab_start(bx_ctx *x, bx_lab *lab, const char *static_names, const char *extra_conf);
/** bx_lab_start with slurmrestd on 127.0.0.1:rest_port (0: a free port, as
 *  bx_lab_start). A busy port fails the start. */
int bx_lab_start_at(bx_ctx *x, bx_lab *lab, const char *static_names, const char *extra_conf, int rest_port);
/** bx_lab_start_at for a lab that runs conf_path, a slurm.conf the
 *  operator generated (slurmlab.sh SLURMLAB_CONF_FROM: the host-specific
 *  lines rewritten, listed in lab->rewrites, the rest kept), with no static
 *  node. */
int bx_lab_start_from(bx_ctx *x, bx_lab *lab, const char *conf_path, int rest_port);
/** A lab whose slurm.conf defines gpu-0 .. gpu-(n-1), the Slurm names of
 *  NodeSet gpu's pods, without slurmds (State=UNKNOWN, never timed out):
 *  the operator caches n Slurm nodes and mirrors them onto the pods. */
int bx_lab_start_nodes(bx_ctx *x, bx_lab *lab, int n);
void bx_lab_stop(bx_ctx *x, bx_lab *lab);
/** Run a Slurm command (scontrol, sbatch, sinfo, squeue: the lab version's,
 *  from SLURMLAB_BIN) with the lab's SLURM_CONF; *out gets stdout. Returns
 *  the exit status. */
int bx_lab_cmd(bx_ctx *x, bx_lab *lab, const char *const *argv, char **out);
/** SIGKILL the lab's slurmrestd (run/slurmrestd.pid): a Slurm outage as the
 *  operator meets it, connections refused; `slurmlab.sh stop` copes with
 *  the dead pid. 0 or a code. */
int bx_lab_kill_rest(bx_lab *lab);
/** Read the lab's JWT key. 0 or a code. */
int bx_lab_jwt_key(bx_lab *lab, char **key, size_t *len);
/** `squeue -h -t all -o "%i %T"`: every job slurmctld still holds, the
 *  ended ones too (for MinJobAge); malloc'd, NULL when squeue failed. */
char *bx_lab_jobs(bx_ctx *x, bx_lab *lab);
/** 1 when jobs (bx_lab_jobs' answer) lists job id in a state that ends it
 *  (COMPLETED, CANCELLED, FAILED, TIMEOUT, ...); 0 while it runs,
 *  completes or waits, and when it is not listed: a job missing from an
 *  answer proves nothing, as for the operator. */
int bx_job_ended(const char *jobs, const char *id);
/** 1 when jobs lists job id as RUNNING. */
int bx_job_running(const char *jobs, const char *id);

/* ------------------------------------------------------------------ */
/* a running fleet (bench_fleet.c) */

/** How the operator reaches Slurm, when it should. */
typedef struct bx_fleet_slurm {
    const char *rest_url;   /* --slurmrestd <ns>/slurm=URL */
    const char *slurm_conf; /* --slurm-conf */
    const char *jwt_key;    /* stored in Secret slurm-auth-jwt */
    size_t jwt_len;
    int restapi; /* create RestApi "slurm" at once */
} bx_fleet_slurm;

typedef struct bx_fleet {
    bx_kubesim ks;
    int have_ks;
    const char *kubeconfig;
    bx_api api;
    bx_slurmop op;
    bx_obs *obs;
    int n;
    double scale_s; /* the scale-out to n: PATCH to converged */
} bx_fleet;

/** A cluster (fresh kubesim with k8s_nodes Nodes, or the user's), the
 *  benchmark's objects, slurmop started (with Slurm flags when slurm is
 *  given), the observer running, then NodeSet "gpu" scaled to `pods` and
 *  converged (every pod Ready, status current, queue quiet). tag names the
 *  logs. On failure the fleet must still be closed. */
int bx_fleet_open(bx_ctx *x, bx_fleet *f, const char *tag, int k8s_nodes, int pods,
                  const bx_fleet_slurm *slurm);
/** Wait until NodeSet gpu has n pods, all Ready, none terminating, and its
 *  status says so: timeout_s, plus 0.12 s per pod on a real control plane
 *  (--cluster real), where the scheduler and kwok set the pace. */
int bx_fleet_converge(bx_ctx *x, bx_fleet *f, int n, double timeout_s);
/** Stop everything the fleet started. On a real cluster its objects are
 *  removed and its pods waited for, so that the next scenario starts from an
 *  empty namespace (a scenario that found 8,192 pods of the previous one
 *  measured their conflicts, not its own work). */
void bx_fleet_close(bx_ctx *x, bx_fleet *f);
/** On a real cluster: delete every pod of NodeSet "gpu" (and any the limit
 *  left) and wait until they are gone, at most 600 s. 0 or a code. */
int bx_clean_pods(bx_ctx *x, bx_api *api);

/* ------------------------------------------------------------------ */
/* reports (bench_report.c) */

typedef struct bx_table bx_table;

/** A table with ncols columns; header cells follow. */
bx_table *bx_table_new(const char *title, int ncols, ...);
/** Add a row of ncols printf-formatted cells: pass each cell already formatted. */
void bx_table_row(bx_table *t, ...);
/** A note printed under the table. */
void bx_table_note(bx_table *t, const char *fmt, ...) OP_PRINTF(2, 3);
/** Print to stdout (aligned), append the Markdown to x->report, free t. */
void bx_table_emit(bx_ctx *x, bx_table *t);

/** Record one target line of the summary (measured against a limit or target). */
void bx_target(bx_ctx *x, const char *target, const char *measured, const char *limit, double ratio,
               const char *verdict, const char *note);

/** Format a number of seconds: "1.234 s" / "12.3 ms" / "45 µs". */
const char *bx_fmt_s(char *buf, size_t len, double s);
/** cJSON number that is null for NAN/INFINITY. */
cJSON *bx_num(double v);

typedef struct bx_series {
    const char *name;
    const double *x, *y;
    size_t n;
    int step; /* draw as a step function */
} bx_series;

/** Write an SVG line plot. 0 or a code. */
int bx_svg_lines(const char *path, const char *title, const char *xlabel, const char *ylabel,
                 const bx_series *s, size_t ns);
/** Write an SVG grouped bar chart: categories on x, one bar per series. */
int bx_svg_bars(const char *path, const char *title, const char *ylabel, const char *const *categories,
                size_t ncat, const bx_series *s, size_t ns);
/** Write s (a file in the out dir) and return 0 or a code. */
int bx_write_file(const char *path, const char *s, size_t len);
/** "<out>/<name>": a new string. */
char *bx_out_path(bx_ctx *x, const char *name);

/* ------------------------------------------------------------------ */
/* scenarios (scen_*.c); each returns 0 when it ran to the end */

int scen_scale_out(bx_ctx *x, int with_operator, int with_limit);
int scen_scale_in(bx_ctx *x);

/* One busy node of a scale-in: its job and what became of both. */
typedef struct bx_busy_job {
    char node[32];
    char id[32];
    uint64_t ended;   /* the answer of the first poll that saw it ended */
    uint64_t busy;    /* when the last poll that saw it not ended was sent */
    uint64_t deleted; /* its pod started terminating */
    double decided;   /* the operator logged its delete (seconds after time 0), NAN: not seen */
} bx_busy_job;
/** Whether j's pod, seen terminating at j->deleted, went while its job was not ended: a read of the jobs
 *  sent after that still showed the job (running or completing), or none ever showed it ended. The
 *  harness's watch sees a delete after it happened, so this never counts a pod deleted after its job; a
 *  delete within one read of the end (between the last read that saw the job and the first that did not)
 *  cannot be placed and is not counted. */
int bx_busy_deleted_while_busy(const bx_busy_job *j);
/** Note what one read of the jobs (bx_lab_jobs, sent at sent, answered at now) shows of job id: *ended
 *  gets now the first time it shows the job ended; until then *busy gets sent. */
void bx_busy_read(const char *jobs, const char *id, uint64_t sent, uint64_t now, uint64_t *ended,
                  uint64_t *busy);

/* A scale-in N -> 0 measured (scen_scalein.c), for the scenarios that end
 * with one: in, the first five fields; out, the rest (NAN: not seen). */
typedef struct bx_scalein {
    int n, nb;           /* pods gpu-0 .. gpu-(n-1); the first nb run a slurmd and get a job */
    double job_s;        /* each busy node's job */
    const char *partition;
    bx_busy_job *jobs;   /* nb of them, the caller's */
    double patch_s;      /* the scale PATCH answered, after time 0 */
    double drains_s;     /* the operator's node writes answered grew by n */
    double gone_s;       /* the harness's watch saw every pod gone */
    double idle_gone_s;  /* the last idle pod terminating */
    double writes;       /* node writes answered ok in the window */
    double drained;      /* nodes drained in Slurm at the end */
    double logged, first_drain_s, last_drain_s; /* drains the operator's log issued */
    double busy_lag_max, decided_lag_max; /* busy pods: job end -> terminating / -> delete decided */
    double pod_patches, pod_deletes;      /* the operator's pod requests in the window */
    double write_rate;   /* --scalein-write-rate applied, 0: none */
    int violations;      /* busy pods deleted before their job ended */
    int busy_deleted_after;
} bx_scalein;

/* Jobs on the busy nodes, the NodeSet scaled to 0, watched until every pod
 * is gone (or a window of job_s + 120 s): 0, or the scale PATCH's error. */
int bx_scalein_run(bx_ctx *x, bx_fleet *f, bx_lab *lab, bx_scalein *si);
/* si's results to "not measured" (NAN, 0 counts); bx_scalein_run starts so. */
void bx_scalein_reset(bx_scalein *si);
/* si's inputs and results as fields of o (one name per result, for every
 * scenario that reports a scale-in). */
void bx_scalein_json(const bx_scalein *si, cJSON *o);
int scen_churn(bx_ctx *x);
int scen_restart(bx_ctx *x);
int scen_memory(bx_ctx *x);
/** N dynamic nodes register with a slurmctld that runs the operator's own
 *  slurm.conf (24.11 or 26.05; named only, not part of the default set). */
int scen_registration(bx_ctx *x);
/** --peer slinky: slurmop and Slinky's manager side by side, each on a fresh
 *  real control plane per --sizes (results under peers.slinky). */
int scen_peer_slinky(bx_ctx *x);

#endif
