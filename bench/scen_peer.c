/* scen_peer: --peer slinky, the same work for slurmop and for SchedMD's
 * Slinky slurm-operator (its manager built from its Go module by
 * tests/slinky/build.sh), each on a fresh real control plane with the same
 * KWOK Nodes and the same objects.
 *
 * Per size N, three runs, each on its own fresh cluster (cluster.sh start):
 *   slurmop with its defaults (client limiter 200 requests/s, burst 400),
 *   slurmop with Slinky's client setting (controller-runtime turns the
 *   client-side limiter off and leaves fairness to the API server; left out
 *   with --quick), and Slinky's manager with its defaults.
 * Each operator runs as its own ServiceAccount (bound to cluster-admin, the
 * same for both), so the API server's audit log (cluster.sh logs every
 * request of a ServiceAccount outside kube-system) counts its requests and
 * nothing else's. The pod times come from the harness's own watch, the same
 * observer for both; CPU and RSS from /proc.
 *
 * Each run: scale-out 0 -> N, churn (100 pods deleted at 10/s and
 * recreated), a kube-apiserver restart (the requests and writes of the 30 s
 * after), scale-in N -> 0, then the busy scale-in (below).
 *
 * Up to the scale-in, no RestApi and no Slurm: Slinky's NodeSet controller
 * asks slurmrestd on every pass once a RestApi exists, which would change
 * the figures of the steps before. That scale-in therefore shows what each
 * operator does with pods whose Slurm nodes nobody can drain (the NodeSet
 * carries slurmop's delete-without-drain annotation, which Slinky does not
 * read).
 *
 * The busy scale-in (busy_scale_in) then adds Slurm on the same cluster and
 * operator process: a 26.05 lab (Slinky v1.1.0 speaks REST v0.0.44 only;
 * its v1.2.1 too: its client carries v0.0.45 but the operator uses v0.0.44)
 * with slurmrestd on 127.0.0.1:6820, where both operators reach it: Slinky
 * builds http://<RestApi Service>:6820, which this host cannot resolve,
 * unless DEBUG=1 (then http://localhost:6820); slurmop gets the same URL
 * with --slurmrestd. Both are given from the start and used only once the
 * RestApi exists. The labs of the three runs come one after another (one
 * port). */
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench.h"
#include "core/err.h"
#include "core/file.h"
#include "core/rfc3339.h"

#define PEER_NS_SA "bench-operators"

enum { V_OP_DEFAULT, V_OP_NOLIMIT, V_SLINKY, N_VARIANTS };

static const char *const variant_name[N_VARIANTS] = {"slurmop", "slurmop (Slinky's QPS)", "Slinky"};
static const char *const variant_key[N_VARIANTS] = {"slurmop", "slurmopSlinkyQps", "slinky"};
static const char *const variant_sa[N_VARIANTS] = {"slurmop", "slurmop", "slinky"};

/* API requests of one ServiceAccount in one window of the audit log */
typedef struct peer_reqs {
    long total;
    double last_relist; /* wall-clock time of the last list or watch request (0: none) */
    cJSON *verbs; /* {verb: count} */
    cJSON *res;   /* {"verb resource[/subresource]": count} */
} peer_reqs;

typedef struct peer_run {
    int ran, out_ok, in_done;
    int out_created, out_ready;            /* pods created / Ready when the scale-out wait ended */
    double start_s;                        /* operator start to ready */
    double created_s, ready_s, status_s;   /* scale-out: PATCH to N-th ADDED, N-th Ready, status */
    double cpu_start, cpu_out, cpu_in;     /* CPU seconds per window */
    long rss_kib, hwm_kib;                 /* after the scale-out (all cached), peak */
    peer_reqs req_start, req_out, req_in;  /* audit log per window */
    double in_first_s, in_gone_s;          /* scale-in: first pod terminating, all gone */
    int in_left;                           /* pods left when the scale-in wait ended */
    int ch_n, ch_back;                     /* churn: pods deleted, pods back by name */
    double ch_p50, ch_p99, ch_max;         /* churn: DELETED -> ADDED of the same name */
    double cpu_churn, cpu_rs;              /* CPU seconds of the churn and restart windows */
    peer_reqs req_churn, req_rs;           /* audit log of the churn and restart windows */
    double rs_relist_s;                    /* restart begun -> its last LIST/WATCH */
    char in_note[200];
    /* the scale-in with busy Slurm nodes (busy_scale_in) */
    int bz_ran, bz_m, bz_nb;               /* ran to the end; pods; nodes with a slurmd and a job */
    int bz_drained, bz_left;               /* drains seen in Slurm; pods left when its wait ended */
    int bz_while_busy, bz_after;           /* busy pods deleted while their job ran / after it */
    double bz_out_s;                       /* the scale-out 0 -> m before it, PATCH to all Ready */
    double bz_first_drain_s, bz_all_drain_s; /* PATCH to the first / the m-th drain seen in Slurm */
    double bz_last_drain_s;                /* ... to the last drain seen (all or not) */
    double bz_first_s, bz_gone_s;          /* PATCH to the first pod terminating / all gone */
    double bz_lag_max;                     /* a busy pod: its job's end to its terminating, the largest */
    double bz_idle_s;                      /* PATCH to the last idle pod (no slurmd) terminating */
    double bz_poll_s;                      /* mean duration of one sinfo poll (the drain times' grain) */
    int bz_quiet;                          /* the operator's CPU went quiet before the PATCH */
    double bz_cpu;
    peer_reqs req_bz;
    char bz_slurm[64];                     /* scontrol --version of the lab */
    char bz_note[240];                     /* why it did not run, or what it reached */
} peer_run;

/* ---- helpers ---- */

/* VmHWM (peak RSS) of pid in KiB, -1 unknown. */
static long hwm_kib(int pid)
{
    char path[64], *s = NULL;
    size_t len = 0;
    long v = -1;
    snprintf(path, sizeof(path), "/proc/%d/status", pid);
    if (file_read_all(path, 1 << 16, &s, &len) == 0) {
        const char *p = strstr(s, "VmHWM:");
        if (p)
            v = strtol(p + 6, NULL, 10);
    }
    free(s);
    return v;
}

static long file_size(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fclose(f);
    return n < 0 ? 0 : n;
}

/* Count the requests of system:serviceaccount:bench-operators:<sa> logged
 * after byte offset `from` of the audit log. A request is one audit ID: a
 * watch logs ResponseStarted (and ResponseComplete when it ends), every
 * other request ResponseComplete only, so a watch counts at its start. */
static void audit_count(bx_ctx *x, const char *sa, long from, peer_reqs *r)
{
    char *path = xasprintf("%s/log/audit.log", x->k8s_dir), *s = NULL;
    char *user = xasprintf("system:serviceaccount:%s:%s", PEER_NS_SA, sa);
    size_t len = 0;
    r->total = 0;
    r->last_relist = 0;
    r->verbs = cJSON_CreateObject();
    r->res = cJSON_CreateObject();
    if (file_read_all(path, (size_t)1 << 31, &s, &len) != 0) {
        bx_say(x, "bench: cannot read %s", path);
        r->total = -1;
        goto out;
    }
    for (char *line = s + (from < (long)len ? from : (long)len); line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        if (strstr(line, user)) {
            cJSON *ev = cJSON_Parse(line);
            const char *stage = cJSON_GetStringValue(cJSON_GetObjectItem(ev, "stage"));
            const char *verb = cJSON_GetStringValue(cJSON_GetObjectItem(ev, "verb"));
            const char *un =
                cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetObjectItem(ev, "user"), "username"));
            if (stage && verb && un && strcmp(un, user) == 0 &&
                (strcmp(verb, "watch") == 0 ? strcmp(stage, "ResponseStarted") == 0
                                            : strcmp(stage, "ResponseComplete") == 0)) {
                r->total++;
                const char *ts = cJSON_GetStringValue(cJSON_GetObjectItem(ev, "requestReceivedTimestamp"));
                int64_t secs;
                int zulu;
                if ((strcmp(verb, "list") == 0 || strcmp(verb, "watch") == 0) && ts &&
                    rfc3339_parse(ts, &secs, &zulu) == 0) {
                    const char *frac = strchr(ts, '.');
                    double t = (double)secs + (frac ? strtod(frac, NULL) : 0);
                    if (t > r->last_relist)
                        r->last_relist = t;
                }
                cJSON *c = cJSON_GetObjectItem(r->verbs, verb);
                if (c)
                    cJSON_SetNumberValue(c, c->valuedouble + 1);
                else
                    cJSON_AddNumberToObject(r->verbs, verb, 1);
                cJSON *ref = cJSON_GetObjectItem(ev, "objectRef");
                const char *rs = cJSON_GetStringValue(cJSON_GetObjectItem(ref, "resource"));
                const char *sub = cJSON_GetStringValue(cJSON_GetObjectItem(ref, "subresource"));
                char key[128];
                snprintf(key, sizeof(key), "%s %s%s%s", verb, rs ? rs : "-", sub ? "/" : "", sub ? sub : "");
                c = cJSON_GetObjectItem(r->res, key);
                if (c)
                    cJSON_SetNumberValue(c, c->valuedouble + 1);
                else
                    cJSON_AddNumberToObject(r->res, key, 1);
            }
            cJSON_Delete(ev);
        }
        line = nl ? nl + 1 : NULL;
    }
out:
    free(s);
    free(user);
    free(path);
}

/* A ServiceAccount in namespace bench-operators bound to cluster-admin and
 * a kubeconfig with a token of it (<K8S_DIR>/<sa>.kubeconfig). */
static char *sa_kubeconfig(bx_ctx *x, const char *sa)
{
    static const char script[] =
        "set -eu\n"
        "K=\"$(cat \"$K8S_DIR/run/bin\")/kubectl\"\n"
        "k() { \"$K\" --kubeconfig \"$K8S_DIR/admin.kubeconfig\" \"$@\"; }\n"
        "k get namespace " PEER_NS_SA " >/dev/null 2>&1 || k create namespace " PEER_NS_SA " >/dev/null\n"
        "k -n " PEER_NS_SA " create serviceaccount \"$SA\" >/dev/null\n"
        "k create clusterrolebinding \"bench-$SA\" --clusterrole=cluster-admin "
        "--serviceaccount=" PEER_NS_SA ":\"$SA\" >/dev/null\n"
        "tok=$(k -n " PEER_NS_SA " create token \"$SA\" --duration=6h)\n"
        "srv=$(k config view --raw --minify -o 'jsonpath={.clusters[0].cluster.server}')\n"
        "ca=$(k config view --raw --minify -o 'jsonpath={.clusters[0].cluster.certificate-authority-data}')\n"
        "out=\"$K8S_DIR/$SA.kubeconfig\"\n"
        "umask 077\n"
        "printf 'apiVersion: v1\\nkind: Config\\nclusters:\\n- name: k8s\\n  cluster:\\n    server: %s\\n"
        "    certificate-authority-data: %s\\nusers:\\n- name: sa\\n  user:\\n    token: %s\\n"
        "contexts:\\n- name: sa\\n  context:\\n    cluster: k8s\\n    user: sa\\ncurrent-context: sa\\n' "
        "\"$srv\" \"$ca\" \"$tok\" > \"$out\"\n"
        "printf '%s' \"$out\"\n";
    char *e_dir = xasprintf("K8S_DIR=%s", x->k8s_dir), *e_sa = xasprintf("SA=%s", sa), *out = NULL;
    const char *env[] = {e_dir, e_sa, NULL};
    const char *argv[] = {"/bin/bash", "-c", script, NULL};
    char *log = xasprintf("%s/k8s-cluster.log", x->log_dir);
    int rc = bx_run(x, argv, env, log, 60, &out);
    free(e_dir);
    free(e_sa);
    free(log);
    if (rc != 0 || out == NULL || out[0] == '\0') {
        bx_say(x, "bench: could not make ServiceAccount %s's kubeconfig (exit %d)", sa, rc);
        free(out);
        return NULL;
    }
    return out;
}

/* tests/slinky/build.sh: the manager's path (built and cached when missing). */
static char *slinky_bin(bx_ctx *x, char **dir)
{
    char *script = xasprintf("%s/tests/slinky/build.sh", x->src_dir), *out = NULL;
    /* The version: SLURMOP_SLINKY_VERSION, else Slinky's newest release
     * (build.sh builds it from its source archives; without them it exits
     * 77 and the run says so: SLURMOP_SLINKY_VERSION=v1.1.0 then measures
     * the newest release the module proxy serves). */
    const char *version = getenv("SLURMOP_SLINKY_VERSION");
    if (version == NULL || version[0] == '\0')
        version = "v1.2.1";
    const char *argv[] = {"/bin/bash", script, "--version", version, NULL};
    char *log = xasprintf("%s/slinky-build.log", x->log_dir);
    bx_step(x, "Slinky's manager: tests/slinky/build.sh");
    int rc = bx_run(x, argv, NULL, log, 7200, &out);
    char *bin = NULL;
    const char *p = out ? strstr(out, "SLINKY_BIN=") : NULL;
    if (rc == 0 && p) {
        p += strlen("SLINKY_BIN=");
        bin = xasprintf("%.*s", (int)strcspn(p, "\n"), p);
    } else {
        bx_say(x, "bench: tests/slinky/build.sh exited %d (see %s)", rc, log);
    }
    const char *d = out ? strstr(out, "SLINKY_DIR=") : NULL;
    if (d)
        *dir = xasprintf("%.*s/config/crd/bases", (int)strcspn(d + 11, "\n"), d + 11);
    const char *v = out ? strstr(out, "SLINKY_VERSION=") : NULL;
    if (v)
        bx_say(x, "bench: Slinky's manager %.*s (%s)", (int)strcspn(v + 15, "\n"), v + 15, bin ? bin : "-");
    free(out);
    free(log);
    free(script);
    return bin;
}

/* The predicates bx_wait polls read logs or scrape metrics: at most every
 * 100 ms. 1 when the call comes sooner than that after the last one. */
static int too_soon(uint64_t *last)
{
    uint64_t now = uv_hrtime();
    if (now - *last < 100000000ull)
        return 1;
    *last = now;
    return 0;
}

/* An operator's log as a string (malloc'd), NULL when unreadable. */
static char *read_log(const char *path)
{
    char *s = NULL;
    size_t len = 0;
    if (file_read_all(path, (size_t)256 << 20, &s, &len) != 0) {
        free(s);
        return NULL;
    }
    return s;
}

typedef struct slinky_ready {
    const char *log;
    uint64_t last;
    int ok;
} slinky_ready;

/* Ready once its NodeSet and Controller controllers started their workers. */
static int slinky_ready_pred(void *arg)
{
    slinky_ready *r = arg;
    if (too_soon(&r->last))
        return 0;
    char *s = read_log(r->log);
    if (s &&
        (strstr(s, "\"msg\":\"Starting workers\",\"controller\":\"nodeset\"") ||
         (strstr(s, "\"msg\":\"Starting workers\"") && strstr(s, "\"controllerKind\":\"NodeSet\",\"worker"))))
        r->ok = 1;
    free(s);
    return r->ok;
}

typedef struct obs_goal {
    bx_obs *o;
    int n, want_gone;
    int want_status; /* and the NodeSet's readyReplicas says n */
} obs_goal;

static int goal_pred(void *arg)
{
    obs_goal *g = arg;
    bx_obs_counts c;
    bx_obs_counts_get(g->o, &c);
    if (g->want_gone)
        return c.exist == 0;
    return c.created >= g->n && c.ready >= g->n && c.exist >= g->n && (!g->want_status || c.ns_ready == g->n);
}

static int status_pred(void *arg)
{
    return bx_obs_ns_ready_at((bx_obs *)arg) != 0;
}

static double nth(const bx_obs *o, int kind, int n, uint64_t t0)
{
    size_t k = 0;
    const uint64_t *t = bx_obs_times(o, kind, &k);
    if (n <= 0 || (size_t)n > k)
        return NAN;
    return bx_secs(t0, t[n - 1]);
}

static cJSON *reqs_json(const peer_reqs *r)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "total", (double)r->total);
    cJSON_AddItemToObject(o, "byVerb", r->verbs ? cJSON_Duplicate(r->verbs, 1) : cJSON_CreateObject());
    cJSON_AddItemToObject(o, "byResource", r->res ? cJSON_Duplicate(r->res, 1) : cJSON_CreateObject());
    return o;
}

/* ---- one run ---- */

/* Every figure "not measured" until the run sets it. */
static void run_init(peer_run *r)
{
    memset(r, 0, sizeof(*r));
    r->start_s = r->created_s = r->ready_s = r->status_s = NAN;
    r->cpu_start = r->cpu_out = r->cpu_in = NAN;
    r->in_first_s = r->in_gone_s = NAN;
    r->rss_kib = r->hwm_kib = -1;
    r->req_start.total = r->req_out.total = r->req_in.total = -1;
    r->in_left = -1;
    r->ch_p50 = r->ch_p99 = r->ch_max = r->cpu_churn = r->cpu_rs = r->rs_relist_s = NAN;
    r->req_churn.total = r->req_rs.total = -1;
    r->bz_out_s = r->bz_first_drain_s = r->bz_all_drain_s = r->bz_last_drain_s = NAN;
    r->bz_first_s = r->bz_gone_s = r->bz_lag_max = r->bz_cpu = r->bz_idle_s = r->bz_poll_s = NAN;
    r->bz_drained = r->bz_left = r->bz_while_busy = r->bz_after = -1;
    r->req_bz.total = -1;
    snprintf(r->bz_note, sizeof(r->bz_note), "not run");
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct churn_goal {
    bx_obs *o;
    char (*names)[32];
    int n;
} churn_goal;

/* Every deleted pod has a new pod of its name, added after its deletion. */
static int churn_pred(void *arg)
{
    churn_goal *g = arg;
    for (int i = 0; i < g->n; i++) {
        uint64_t d = bx_obs_deleted_at(g->o, g->names[i]);
        if (d == 0 || bx_obs_added_at(g->o, g->names[i]) <= d)
            return 0;
    }
    return 1;
}

#define PEER_CHURN_PODS 100
#define PEER_SETTLE_S 300 /* bound on the replacements becoming Ready after the churn */
#define PEER_CHURN_RATE 10.0 /* deletes a second */

/* Churn: PEER_CHURN_PODS pods spread over the NodeSet deleted one by one at
 * PEER_CHURN_RATE a second, as failed pods or drained nodes would go; each
 * operator recreates them. The latency is the harness's own DELETED event
 * of a pod to the ADDED event of its replacement (the same name in both
 * operators' StatefulSet-like naming), the same observer for both, since
 * Slinky has no latency histogram of its own. */
static void churn(bx_ctx *x, bx_api *api, bx_obs *obs, int n, int pid, const char *sa, const char *audit,
                  peer_run *r)
{
    int k = n < PEER_CHURN_PODS ? n : PEER_CHURN_PODS;
    char(*names)[32] = xcalloc((size_t)k, sizeof(*names));
    long off = file_size(audit);
    double c0 = bx_cpu_seconds(pid);
    bx_step(x, "churn: %d pods deleted at %.0f/s", k, PEER_CHURN_RATE);
    for (int i = 0; i < k && !bx_stop_requested(x); i++) {
        snprintf(names[i], sizeof(names[i]), "gpu-%d", (int)((long)i * n / k));
        (void)bx_delete(x, api, &KUBE_PODS, x->ns, names[i]);
        bx_sleep(x, 1.0 / PEER_CHURN_RATE);
    }
    churn_goal g = {obs, names, k};
    (void)bx_wait(x, churn_pred, &g, 60 + k);
    double *lat = xcalloc((size_t)k, sizeof(double));
    int m = 0;
    for (int i = 0; i < k; i++) {
        uint64_t d = bx_obs_deleted_at(obs, names[i]), a = bx_obs_added_at(obs, names[i]);
        if (d && a > d)
            lat[m++] = (double)(a - d) / 1e9;
    }
    qsort(lat, (size_t)m, sizeof(double), cmp_double);
    r->ch_n = k;
    r->ch_back = m;
    if (m > 0) {
        r->ch_p50 = lat[(m - 1) / 2];
        r->ch_p99 = lat[(int)ceil(0.99 * m) - 1];
        r->ch_max = lat[m - 1];
    }
    /* The replacements become Ready at kube-scheduler's pace (at 8,192
     * Nodes with anti-affinity, seconds each): the restart that follows
     * must find nothing left to report, or its window counts the status
     * writes of these Ready transitions (7 at 8,192 before this wait). */
    obs_goal sg = {obs, n, 0, 1};
    if (bx_wait(x, goal_pred, &sg, PEER_SETTLE_S) != 0)
        bx_say(x, "bench: churn: the %d pods and the NodeSet's readyReplicas were not all back in %d s", n,
               PEER_SETTLE_S);
    bx_sleep(x, 3); /* the status writes that follow */
    r->cpu_churn = bx_cpu_seconds(pid) - c0;
    audit_count(x, sa, off, &r->req_churn);
    free(lat);
    free(names);
}

/* The API server restarts (every watch ends, nothing changed): what each
 * operator asks for and writes in the 30 s after, and when its last LIST or
 * WATCH of the resync came. */
static void restart(bx_ctx *x, int pid, const char *sa, const char *audit, peer_run *r)
{
    long off = file_size(audit);
    double c0 = bx_cpu_seconds(pid);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    double begun = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
    bx_step(x, "restart: kube-apiserver restarts");
    if (bx_k8s_restart_apiserver(x) != 0) {
        bx_say(x, "bench: restart-apiserver failed (see logs/k8s-cluster.log)");
        return;
    }
    bx_sleep(x, 30);
    r->cpu_rs = bx_cpu_seconds(pid) - c0;
    audit_count(x, sa, off, &r->req_rs);
    if (r->req_rs.last_relist > 0)
        r->rs_relist_s = r->req_rs.last_relist - begun;
}

/* ---- scale-in with busy Slurm nodes ---- */

#define PEER_BUSY_MAX 1024    /* pods of the busy scale-in: min(N, this) */
#define PEER_REST_PORT 6820   /* slurmrestd's port in Slinky's URL (and so under DEBUG=1) */
#define PEER_BUSY_HOLD_S 10.0 /* a busy node's job runs on this long after its drain was seen */
#define PEER_POLL_S 0.2       /* the harness's reads of Slurm (drains, jobs) */

typedef struct busy_node {
    char job[32];
    uint64_t cancelled; /* the harness cancelled its job (PEER_BUSY_HOLD_S after the drain) */
    uint64_t ended;     /* the answer of the first poll that saw the job ended */
    uint64_t busy;      /* when the last poll that saw it not ended was sent */
} busy_node;

/* The first time each of gpu-0 .. gpu-(m-1) was seen with Slurm's DRAIN
 * flag (drained or draining, DOWN+DRAIN included), from one sinfo request:
 * the same observer for both operators, whatever each logs. */
static void poll_drains(bx_ctx *x, bx_lab *lab, uint64_t *seen, int m)
{
    const char *argv[] = {"sinfo", "-h", "-N", "-t", "drain,drng,drained", "-o", "%N", NULL};
    char *out = NULL;
    if (bx_lab_cmd(x, lab, argv, &out) == 0) {
        uint64_t now = uv_hrtime();
        char *save = NULL;
        for (char *l = strtok_r(out, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
            int i;
            char tail;
            if (sscanf(l, "gpu-%d%c", &i, &tail) == 1 && i >= 0 && i < m && seen[i] == 0)
                seen[i] = now;
        }
    }
    free(out);
}

/* Record the end of every job that squeue lists as ended (absence proves
 * nothing: bx_job_ended). */
static void poll_busy_jobs(bx_ctx *x, bx_lab *lab, busy_node *b, int nb)
{
    uint64_t sent = uv_hrtime();
    char *out = bx_lab_jobs(x, lab);
    if (out == NULL)
        return;
    uint64_t now = uv_hrtime();
    for (int i = 0; i < nb; i++)
        bx_busy_read(out, b[i].job, sent, now, &b[i].ended, &b[i].busy);
    free(out);
}

typedef struct slurm_seen {
    bx_ctx *x;
    bx_slurmop *op; /* slurmop: its slurmop_slurm_nodes; NULL: Slinky's log */
    const char *log;
    int want;
    uint64_t last;
} slurm_seen;

/* The operator has a Slurm client for the lab: slurmop caches its m nodes;
 * Slinky's manager logged "Added slurm client" (it has no such metric). */
static int slurm_seen_pred(void *arg)
{
    slurm_seen *s = arg;
    if (too_soon(&s->last))
        return 0;
    int ok = 0;
    if (s->op) {
        bx_metrics m;
        ok = bx_scrape(s->x, s->op, &m) == 0 && bx_metric(&m, "slurmop_slurm_nodes", NULL) >= s->want;
        bx_metrics_free(&m);
    } else {
        char *t = read_log(s->log);
        ok = t && strstr(t, "\"Added slurm client\"");
        free(t);
    }
    return ok;
}

typedef struct cpu_quiet {
    int pid;
    double c0;
    uint64_t t0;
} cpu_quiet;

/* The operator used under 2% of a CPU over the last 2 s: what it does after
 * pods turn Ready (slurmop and Slinky both write each pod's info into its
 * Slurm node) is over before the scale-in. */
static int cpu_quiet_pred(void *arg)
{
    cpu_quiet *q = arg;
    uint64_t now = uv_hrtime();
    if (bx_secs(q->t0, now) < 2)
        return 0;
    double c = bx_cpu_seconds(q->pid);
    int quiet = c - q->c0 < 0.04;
    q->c0 = c;
    q->t0 = now;
    return quiet;
}

/* After the scale-in without Slurm, on the same cluster and the same
 * operator process: a Slurm 26.05 lab whose nodes are named like the pods
 * (gpu-0 .. gpu-(m-1)), the first nb with a slurmd, the others DOWN
 * without one; the lab's JWT key in the Controller's Secret, RestApi
 * "slurm", the NodeSet without delete-without-drain; scale-out 0 -> m, a
 * job on each slurmd node, then the scale PATCH to 0, timed from both
 * sides: the drains as Slurm shows them (sinfo every PEER_POLL_S) and the
 * pods as the harness's watch sees them. Each busy job runs on
 * PEER_BUSY_HOLD_S after its node's drain was seen and is then cancelled,
 * so a pod deleted before its job ended was deleted while Slurm still ran
 * work there, however long the operator took to get to it. */
static void busy_scale_in(bx_ctx *x, bx_api *api, const char *tag, int n, int pid, bx_slurmop *op,
                          const char *log, const char *sa, const char *audit, peer_run *r)
{
    int m = n < PEER_BUSY_MAX ? n : PEER_BUSY_MAX;
    int nb = m >= 4096 ? 16 : m >= 1024 ? 4 : 2;
    if (nb > m)
        nb = m;
    r->bz_m = m;
    r->bz_nb = nb;
    if (x->no_slurm) {
        snprintf(r->bz_note, sizeof(r->bz_note), "skipped: --no-slurm");
        return;
    }
    if (r->in_left != 0) {
        snprintf(r->bz_note, sizeof(r->bz_note), "skipped: the scale-in before it left pods");
        return;
    }
    bx_lab lab;
    memset(&lab, 0, sizeof(lab));
    bx_obs *obs = NULL;
    busy_node *b = xcalloc((size_t)nb, sizeof(*b));
    uint64_t *drained = xcalloc((size_t)m, sizeof(*drained));
    char *jwt = NULL;
    size_t jwt_len = 0;
    buf_t names;
    buf_init(&names, BUF_UNLIMITED);
    int bad = 0;
    for (int i = 0; i < nb; i++)
        bad |= buf_printf(&names, "%sgpu-%d", i ? " " : "", i);
    /* as scen_scalein: the nodes without a slurmd are DOWN (an UNKNOWN node
     * is never drained for slurmop); Slinky takes DRAIN without
     * ALLOCATED, MIXED or COMPLETING as drained, DOWN or not */
    char *conf = m > nb ? xasprintf("MaxNodeCount=%d\n"
                                    "NodeName=gpu-[%d-%d] NodeHostname=localhost NodeAddr=127.0.0.1 CPUs=2 "
                                    "RealMemory=1000 State=DOWN\n"
                                    "PartitionName=gpu Nodes=gpu-[%d-%d] MaxTime=INFINITE State=UP\n"
                                    "SlurmdTimeout=0",
                                    m + 16, nb, m - 1, nb, m - 1)
                        : xstrdup("");
    /* Slinky v1.1.0 and v1.2.1 speak REST v0.0.44 only:
     * 26.05 whatever --slurm-version says */
    const char *saved = x->slurm_version;
    x->slurm_version = "26.05";
    bx_step(x, "%s: busy scale-in: a Slurm 26.05 lab of %d nodes (%d with a slurmd)", tag, m, nb);
    int e = bad ? OP_ENOMEM : bx_lab_start_at(x, &lab, names.data, conf, PEER_REST_PORT);
    x->slurm_version = saved;
    free(conf);
    buf_free(&names);
    if (e) {
        snprintf(r->bz_note, sizeof(r->bz_note), "skipped: %s",
                 e == OP_ENOTSUP ? "the Slurm lab needs root and Slurm's packages"
                                 : "the Slurm 26.05 lab did not start on port 6820 (logs/slurmlab.log)");
        goto out;
    }
    snprintf(r->bz_slurm, sizeof(r->bz_slurm), "%s", lab.version ? lab.version : "Slurm 26.05");
    if (bx_lab_jwt_key(&lab, &jwt, &jwt_len) != 0 || bx_make_cluster(x, api, 0, jwt, jwt_len, 1, 0) != 0) {
        snprintf(r->bz_note, sizeof(r->bz_note),
                 "skipped: the lab's JWT key, the RestApi or the NodeSet could "
                 "not be set up");
        goto out;
    }
    /* Slinky's Slurm client controller watches Controllers only, and has
     * failed (no RestApi) with a backoff that grew for minutes: a change of
     * the Controller makes it build its client now. slurmop watches RestApis
     * and gets the same change. */
    char patch[160];
    snprintf(patch, sizeof(patch), "{\"metadata\":{\"annotations\":{\"slurmop-bench/restapi\":\"%llu\"}}}",
             (unsigned long long)time(NULL));
    (void)bx_patch(x, api, &SLINKY_CONTROLLERS, x->ns, "slurm", NULL, patch, NULL);
    slurm_seen ss = {x, op, log, m, 0};
    if (bx_wait(x, slurm_seen_pred, &ss, 120) != 0)
        bx_say(x, "bench: %s: the operator shows no Slurm client for the lab after 120 s", tag);

    obs = bx_obs_start(x, api, x->ns);
    if (obs == NULL)
        goto out;
    bx_obs_watch_ready(obs, m);
    bx_step(x, "%s: busy scale-in: scale-out 0 -> %d with Slurm", tag, m);
    uint64_t t0 = uv_hrtime();
    if (bx_scale(x, api, m) != 0)
        goto out;
    obs_goal g = {obs, m, 0, 1};
    if (bx_wait(x, goal_pred, &g, 60 + m * 0.15) != 0) {
        bx_obs_counts c;
        bx_obs_counts_get(obs, &c);
        snprintf(r->bz_note, sizeof(r->bz_note),
                 "the scale-out to %d before it did not finish: %d pods, %d Ready", m, c.exist, c.ready);
        goto out;
    }
    r->bz_out_s = bx_secs(t0, uv_hrtime());
    cpu_quiet q = {pid, bx_cpu_seconds(pid), uv_hrtime()};
    r->bz_quiet = bx_wait(x, cpu_quiet_pred, &q, 60) == 0;

    bx_step(x, "%s: busy scale-in: %d jobs", tag, nb);
    for (int i = 0; i < nb; i++) {
        char node[32];
        snprintf(node, sizeof(node), "gpu-%d", i);
        /* runs until the harness cancels it (PEER_BUSY_HOLD_S after its drain) */
        const char *sb[] = {"sbatch", "--parsable", "-p", "debug",     "-w",     node,          "-N1", "-n1",
                            "-D",     "/tmp",       "-o", "/dev/null", "--wrap", "sleep 3600", NULL};
        char *out = NULL;
        if (bx_lab_cmd(x, &lab, sb, &out) == 0 && out)
            snprintf(b[i].job, sizeof(b[i].job), "%.*s", (int)strcspn(out, ";\n"), out);
        free(out);
        if (b[i].job[0] == '\0') {
            snprintf(r->bz_note, sizeof(r->bz_note), "sbatch on %s failed", node);
            goto out;
        }
    }
    for (uint64_t dl = uv_hrtime() + 60000000000ull; uv_hrtime() < dl && !bx_stop_requested(x);) {
        int running = 0;
        char *jobs = bx_lab_jobs(x, &lab);
        for (int i = 0; i < nb; i++)
            running += bx_job_running(jobs, b[i].job);
        free(jobs);
        if (running == nb)
            break;
        bx_sleep(x, 0.2);
    }
    /* both read Slurm's node states when they reconcile (slurmop also polls
     * them): let the jobs show before the PATCH */
    bx_sleep(x, 3);

    bx_step(x, "%s: busy scale-in %d -> 0 (%d busy)", tag, m, nb);
    long off = file_size(audit);
    double c0 = bx_cpu_seconds(pid);
    t0 = uv_hrtime();
    if (bx_scale(x, api, 0) != 0)
        goto out;
    double window_s = 120 + PEER_BUSY_HOLD_S + 0.2 * m;
    uint64_t deadline = t0 + (uint64_t)(window_s * 1e9), last_poll = 0, gone = 0, poll_ns = 0;
    int polls = 0;
    while (uv_hrtime() < deadline && !bx_stop_requested(x)) {
        uint64_t now = uv_hrtime();
        bx_obs_counts c;
        bx_obs_counts_get(obs, &c);
        if (c.exist == 0) {
            gone = now;
            break;
        }
        if (now - last_poll >= (uint64_t)(PEER_POLL_S * 1e9)) {
            last_poll = now;
            int seen = 0;
            for (int i = 0; i < m; i++)
                seen += drained[i] != 0;
            /* once every drain is seen, the jobs' reads alone: the busy pods are judged by them */
            if (seen < m) {
                poll_drains(x, &lab, drained, m);
                poll_ns += uv_hrtime() - now;
                polls++;
            }
            poll_busy_jobs(x, &lab, b, nb);
            now = uv_hrtime();
            for (int i = 0; i < nb; i++)
                if (drained[i] && !b[i].cancelled && !b[i].ended &&
                    bx_secs(drained[i], now) >= PEER_BUSY_HOLD_S) {
                    const char *sc[] = {"scancel", b[i].job, NULL};
                    (void)bx_lab_cmd(x, &lab, sc, NULL);
                    b[i].cancelled = now;
                }
        }
        bx_sleep(x, 0.05);
    }
    r->bz_cpu = bx_cpu_seconds(pid) - c0;
    audit_count(x, sa, off, &r->req_bz);
    poll_drains(x, &lab, drained, m); /* the last ones, if the pods went first */
    /* Slurm's side */
    uint64_t first = 0, last = 0;
    int k = 0;
    for (int i = 0; i < m; i++)
        if (drained[i]) {
            k++;
            if (first == 0 || drained[i] < first)
                first = drained[i];
            if (drained[i] > last)
                last = drained[i];
        }
    r->bz_drained = k;
    r->bz_first_drain_s = first ? bx_secs(t0, first) : NAN;
    r->bz_last_drain_s = last ? bx_secs(t0, last) : NAN;
    r->bz_all_drain_s = k == m ? r->bz_last_drain_s : NAN;
    /* the pods' side */
    bx_obs_counts c;
    bx_obs_counts_get(obs, &c);
    r->bz_left = c.exist;
    r->bz_gone_s = gone ? bx_secs(t0, gone) : NAN;
    first = 0;
    for (int i = 0; i < m; i++) {
        char pod[32];
        snprintf(pod, sizeof(pod), "gpu-%d", i);
        uint64_t t = bx_obs_terminating_at(obs, pod);
        if (t && (first == 0 || t < first))
            first = t;
    }
    r->bz_first_s = first ? bx_secs(t0, first) : NAN;
    r->bz_poll_s = polls ? (double)poll_ns / polls / 1e9 : NAN;
    uint64_t last_idle = 0;
    int idle_gone = 0;
    for (int i = nb; i < m; i++) {
        char pod[32];
        snprintf(pod, sizeof(pod), "gpu-%d", i);
        uint64_t t = bx_obs_terminating_at(obs, pod);
        idle_gone += t != 0;
        if (t > last_idle)
            last_idle = t;
    }
    r->bz_idle_s = idle_gone == m - nb && last_idle ? bx_secs(t0, last_idle) : NAN;
    /* a busy pod seen terminating before a read sent later still showed its job, or whose job no read
     * showed ended, went while busy (bx_busy_deleted_while_busy) */
    r->bz_while_busy = r->bz_after = 0;
    r->bz_lag_max = NAN;
    for (int i = 0; i < nb; i++) {
        char pod[32];
        snprintf(pod, sizeof(pod), "gpu-%d", i);
        uint64_t d = bx_obs_terminating_at(obs, pod);
        if (d == 0)
            continue;
        bx_busy_job j = {.ended = b[i].ended, .busy = b[i].busy, .deleted = d};
        if (bx_busy_deleted_while_busy(&j)) {
            r->bz_while_busy++;
            continue;
        }
        r->bz_after++;
        double lag = (double)((int64_t)d - (int64_t)b[i].ended) / 1e9;
        if (isnan(r->bz_lag_max) || lag > r->bz_lag_max)
            r->bz_lag_max = lag;
    }
    r->bz_ran = 1;
    if (gone)
        snprintf(r->bz_note, sizeof(r->bz_note), "all %d pods deleted, %d of %d drains seen in Slurm", m, k,
                 m);
    else
        snprintf(r->bz_note, sizeof(r->bz_note),
                 "%d of %d pods still there after %.0f s (%d terminating), %d of %d drains seen in Slurm",
                 c.exist, m, window_s, c.terminating, k, m);
out:
    if (obs)
        bx_obs_stop(x, obs);
    /* before the next run's lab needs port 6820 */
    bx_lab_stop(x, &lab);
    free(jwt);
    free(drained);
    free(b);
}

static void run_one(bx_ctx *x, int variant, int n, const char *slinky, peer_run *r)
{
    run_init(r);
    char tag[64];
    snprintf(tag, sizeof(tag), "peer-%s-%d", variant_key[variant], n);
    if (bx_k8s_start(x, x->k8s_nodes) != 0)
        return;
    bx_api api = {0};
    bx_slurmop op;
    bx_proc *sl = NULL;
    bx_obs *obs = NULL;
    memset(&op, 0, sizeof(op));
    char *kc = sa_kubeconfig(x, variant_sa[variant]);
    char *audit = xasprintf("%s/log/audit.log", x->k8s_dir);
    char *log = xasprintf("%s/%s.log", x->log_dir, tag);
    int pid = 0;
    if (kc == NULL || bx_api_open(x, x->kubeconfig, &api) != 0)
        goto out;
    if (bx_make_cluster(x, &api, 0, NULL, 0, 0, 1) != 0) {
        bx_say(x, "bench: %s: the cluster's objects could not be made", tag);
        goto out;
    }
    long off = file_size(audit);
    uint64_t t0 = uv_hrtime();
    bx_step(x, "%s: starting the operator", tag);
    if (variant == V_SLINKY) {
        const char *argv[] = {slinky,
                              "--kubeconfig",
                              kc,
                              "--metrics-addr",
                              "0",
                              "--health-addr",
                              "127.0.0.1:0",
                              "--zap-log-level",
                              "info",
                              NULL};
        /* DEBUG=1: its Slurm client reaches slurmrestd at localhost:6820
         * instead of the RestApi's Service name, which this host cannot
         * resolve; nothing else reads it, and without a RestApi (every
         * step before the busy scale-in) it has no Slurm client at all */
        const char *env[] = {"DEBUG=1", NULL};
        unlink(log);
        sl = bx_proc_start(x, "slinky-manager", argv, env, log);
        bx_proc_pin(x, sl);
        if (sl == NULL)
            goto out;
        slinky_ready sr = {log, 0, 0};
        if (bx_wait(x, slinky_ready_pred, &sr, 60) != 0 || bx_proc_exited(sl)) {
            bx_say(x, "bench: %s: Slinky's manager did not start its NodeSet controller (see %s)", tag, log);
            goto out;
        }
        pid = bx_proc_pid(sl);
    } else {
        double saved = x->qps;
        x->qps = variant == V_OP_DEFAULT ? NAN : 0; /* NAN: no --qps, slurmop's default */
        char name[80];
        snprintf(name, sizeof(name), "%s.log", tag);
        /* the busy scale-in's slurmrestd, as DEBUG=1 gives it to Slinky;
         * used only once RestApi "slurm" exists */
        char *rest = xasprintf("%s/slurm=http://127.0.0.1:%d", x->ns, PEER_REST_PORT);
        const char *extra[] = {"--slurmrestd", rest, NULL};
        int rc = bx_slurmop_start(x, name, kc, extra, &op);
        free(rest);
        x->qps = saved;
        if (rc != 0)
            goto out;
        pid = bx_proc_pid(op.proc);
    }
    r->start_s = bx_secs(t0, uv_hrtime());
    /* let it make the Controller's objects and go quiet before the scale */
    bx_sleep(x, 5);
    r->cpu_start = bx_cpu_seconds(pid);
    audit_count(x, variant_sa[variant], off, &r->req_start);
    r->ran = 1;

    obs = bx_obs_start(x, &api, x->ns);
    if (obs == NULL)
        goto out;
    bx_obs_watch_ready(obs, n);
    off = file_size(audit);
    double c0 = bx_cpu_seconds(pid);
    bx_step(x, "%s: scale-out 0 -> %d", tag, n);
    t0 = uv_hrtime();
    if (bx_scale(x, &api, n) != 0)
        goto out;
    obs_goal g = {obs, n, 0, 0};
    /* "all Ready" is kwok's pace more than the operator's: on a loaded
     * machine it lags by minutes, so the wait is bounded and what it reached
     * is reported; the scale-in runs once every pod was created */
    int rc = bx_wait(x, goal_pred, &g, 60 + n * 0.15);
    r->created_s = nth(obs, 0, n, t0);
    r->ready_s = nth(obs, 1, n, t0);
    if (rc == 0) {
        r->out_ok = 1;
        (void)bx_wait(x, status_pred, obs, 60);
        uint64_t st = bx_obs_ns_ready_at(obs);
        r->status_s = st ? bx_secs(t0, st) : NAN;
    } else {
        bx_obs_counts c;
        bx_obs_counts_get(obs, &c);
        bx_say(x, "bench: %s: scale-out did not finish: %ld created, %d Ready", tag, c.created, c.ready);
        r->status_s = NAN;
    }
    bx_obs_counts oc;
    bx_obs_counts_get(obs, &oc);
    r->out_created = (int)oc.created;
    r->out_ready = oc.ready;
    bx_sleep(x, 3); /* trailing status writes belong to the scale-out */
    r->cpu_out = bx_cpu_seconds(pid) - c0;
    r->rss_kib = bx_rss_kib(pid);
    r->hwm_kib = hwm_kib(pid);
    audit_count(x, variant_sa[variant], off, &r->req_out);
    if (r->out_created < n)
        goto out;
    if (r->out_ok) {
        churn(x, &api, obs, n, pid, variant_sa[variant], audit, r);
        restart(x, pid, variant_sa[variant], audit, r);
    }

    bx_step(x, "%s: scale-in %d -> 0", tag, n);
    off = file_size(audit);
    c0 = bx_cpu_seconds(pid);
    t0 = uv_hrtime();
    if (bx_scale(x, &api, 0) != 0)
        goto out;
    g.want_gone = 1;
    double in_wait = 60 + n * 0.05;
    rc = bx_wait(x, goal_pred, &g, in_wait);
    bx_obs_counts c;
    bx_obs_counts_get(obs, &c);
    r->in_left = c.exist;
    size_t nd = 0;
    const uint64_t *td = bx_obs_times(obs, 2, &nd);
    uint64_t first = 0;
    char pod[32];
    for (int i = 0; i < n; i++) {
        snprintf(pod, sizeof(pod), "gpu-%d", i);
        uint64_t t = bx_obs_terminating_at(obs, pod);
        if (t && (first == 0 || t < first))
            first = t;
    }
    r->in_first_s = first ? bx_secs(t0, first) : NAN;
    if (rc == 0 && nd > 0)
        r->in_gone_s = bx_secs(t0, td[nd - 1]);
    if (rc == 0)
        snprintf(r->in_note, sizeof(r->in_note), "all %d pods deleted", n);
    else
        snprintf(r->in_note, sizeof(r->in_note), "%d of %d pods still there after %.0f s (%d terminating)",
                 c.exist, n, in_wait, c.terminating);
    r->in_done = 1;
    r->cpu_in = bx_cpu_seconds(pid) - c0;
    audit_count(x, variant_sa[variant], off, &r->req_in);
    bx_obs_stop(x, obs);
    obs = NULL;
    busy_scale_in(x, &api, tag, n, pid, variant == V_SLINKY ? NULL : &op, variant == V_SLINKY ? log : op.log,
                  variant_sa[variant], audit, r);
out:
    if (obs)
        bx_obs_stop(x, obs);
    if (sl)
        (void)bx_proc_stop(x, sl, SIGTERM, 30);
    if (op.proc)
        (void)bx_slurmop_stop(x, &op);
    if (api.kc)
        bx_api_close(x, &api);
    bx_k8s_stop(x);
    /* the next run starts its own cluster */
    free((char *)x->kubeconfig);
    x->kubeconfig = NULL;
    x->real_k8s = 0;
    free(kc);
    free(audit);
    free(log);
}

/* ---- report ---- */

static const char *fs(char *b, size_t len, double s)
{
    if (isnan(s))
        return "n/a";
    return bx_fmt_s(b, len, s);
}

static const char *ratio(char *b, size_t len, double ours, double theirs)
{
    if (isnan(ours) || isnan(theirs) || theirs <= 0 || ours < 0)
        snprintf(b, len, "n/a");
    else
        snprintf(b, len, "%.2f×", ours / theirs);
    return b;
}

static void row_s(bx_table *t, const char *what, double a, double b, double c)
{
    char s[3][32], q[2][32];
    bx_table_row(t, what, fs(s[0], 32, a), fs(s[1], 32, b), fs(s[2], 32, c), ratio(q[0], 32, a, c),
                 ratio(q[1], 32, b, c));
}

static void row_n(bx_table *t, const char *what, const char *fmt, double a, double b, double c)
{
    char s[3][32], q[2][32];
    snprintf(s[0], 32, fmt, a);
    snprintf(s[1], 32, fmt, b);
    snprintf(s[2], 32, fmt, c);
    bx_table_row(t, what, !(a >= 0) ? "n/a" : s[0], !(b >= 0) ? "n/a" : s[1], !(c >= 0) ? "n/a" : s[2],
                 ratio(q[0], 32, a, c), ratio(q[1], 32, b, c));
}

static long verb(const peer_reqs *r, const char *v)
{
    cJSON *c = r->verbs ? cJSON_GetObjectItem(r->verbs, v) : NULL;
    return c ? (long)c->valuedouble : 0;
}

/* "N verb resource, ..." for the five largest counts. */
static void top_resources(const peer_reqs *r, char *out, size_t len)
{
    out[0] = '\0';
    if (r->res == NULL || r->res->child == NULL) {
        snprintf(out, len, "n/a");
        return;
    }
    const cJSON *used[5] = {0};
    size_t o = 0;
    for (int k = 0; k < 5; k++) {
        const cJSON *best = NULL, *it;
        cJSON_ArrayForEach(it, r->res)
        {
            int seen = 0;
            for (int j = 0; j < k; j++)
                seen |= used[j] == it;
            if (!seen && (best == NULL || it->valuedouble > best->valuedouble))
                best = it;
        }
        if (best == NULL)
            break;
        used[k] = best;
        int w = snprintf(out + o, len - o, "%s%.0f %s", k ? ", " : "", best->valuedouble, best->string);
        if (w < 0 || (size_t)w >= len - o)
            break;
        o += (size_t)w;
    }
}

static cJSON *run_json(const peer_run *r)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddBoolToObject(o, "ran", r->ran);
    cJSON_AddItemToObject(o, "startSeconds", bx_num(r->start_s));
    cJSON *so = cJSON_AddObjectToObject(o, "scaleOut");
    cJSON_AddBoolToObject(so, "complete", r->out_ok);
    cJSON_AddNumberToObject(so, "podsCreated", r->out_created);
    cJSON_AddNumberToObject(so, "podsReady", r->out_ready);
    cJSON_AddItemToObject(so, "allCreatedSeconds", bx_num(r->created_s));
    cJSON_AddItemToObject(so, "allReadySeconds", bx_num(r->ready_s));
    cJSON_AddItemToObject(so, "statusReadySeconds", bx_num(r->status_s));
    cJSON_AddItemToObject(so, "cpuSeconds", bx_num(r->cpu_out));
    cJSON_AddItemToObject(so, "apiRequests", reqs_json(&r->req_out));
    cJSON_AddNumberToObject(o, "rssKiB", (double)r->rss_kib);
    cJSON_AddNumberToObject(o, "peakRssKiB", (double)r->hwm_kib);
    cJSON_AddItemToObject(o, "startCpuSeconds", bx_num(r->cpu_start));
    cJSON_AddItemToObject(o, "startApiRequests", reqs_json(&r->req_start));
    cJSON *ch = cJSON_AddObjectToObject(o, "churn");
    cJSON_AddNumberToObject(ch, "podsDeleted", r->ch_n);
    cJSON_AddNumberToObject(ch, "podsBack", r->ch_back);
    cJSON_AddItemToObject(ch, "p50Seconds", bx_num(r->ch_p50));
    cJSON_AddItemToObject(ch, "p99Seconds", bx_num(r->ch_p99));
    cJSON_AddItemToObject(ch, "maxSeconds", bx_num(r->ch_max));
    cJSON_AddItemToObject(ch, "cpuSeconds", bx_num(r->cpu_churn));
    cJSON_AddItemToObject(ch, "apiRequests", reqs_json(&r->req_churn));
    cJSON *rs = cJSON_AddObjectToObject(o, "apiServerRestart");
    cJSON_AddItemToObject(rs, "lastRelistSeconds", bx_num(r->rs_relist_s));
    cJSON_AddItemToObject(rs, "cpuSeconds", bx_num(r->cpu_rs));
    cJSON_AddItemToObject(rs, "apiRequests", reqs_json(&r->req_rs));
    cJSON *si = cJSON_AddObjectToObject(o, "scaleIn");
    cJSON_AddBoolToObject(si, "ran", r->in_done);
    cJSON_AddItemToObject(si, "firstTerminatingSeconds", bx_num(r->in_first_s));
    cJSON_AddItemToObject(si, "allGoneSeconds", bx_num(r->in_gone_s));
    cJSON_AddNumberToObject(si, "podsLeft", r->in_left);
    cJSON_AddStringToObject(si, "note", r->in_note);
    cJSON_AddItemToObject(si, "cpuSeconds", bx_num(r->cpu_in));
    cJSON_AddItemToObject(si, "apiRequests", reqs_json(&r->req_in));
    cJSON *bz = cJSON_AddObjectToObject(o, "busyScaleIn");
    cJSON_AddBoolToObject(bz, "ran", r->bz_ran);
    cJSON_AddStringToObject(bz, "note", r->bz_note);
    cJSON_AddStringToObject(bz, "slurm", r->bz_slurm);
    cJSON_AddNumberToObject(bz, "pods", r->bz_m);
    cJSON_AddNumberToObject(bz, "busy", r->bz_nb);
    cJSON_AddNumberToObject(bz, "holdAfterDrainSeconds", PEER_BUSY_HOLD_S);
    cJSON_AddItemToObject(bz, "scaleOutSeconds", bx_num(r->bz_out_s));
    cJSON_AddItemToObject(bz, "firstDrainSeconds", bx_num(r->bz_first_drain_s));
    cJSON_AddItemToObject(bz, "allDrainsSeconds", bx_num(r->bz_all_drain_s));
    cJSON_AddItemToObject(bz, "lastDrainSeconds", bx_num(r->bz_last_drain_s));
    cJSON_AddNumberToObject(bz, "drainsSeen", r->bz_drained);
    cJSON_AddItemToObject(bz, "firstTerminatingSeconds", bx_num(r->bz_first_s));
    cJSON_AddItemToObject(bz, "allGoneSeconds", bx_num(r->bz_gone_s));
    cJSON_AddNumberToObject(bz, "podsLeft", r->bz_left);
    cJSON_AddNumberToObject(bz, "busyDeletedWhileJobRan", r->bz_while_busy);
    cJSON_AddNumberToObject(bz, "busyDeletedAfterJob", r->bz_after);
    cJSON_AddItemToObject(bz, "busyDeleteLagMaxSeconds", bx_num(r->bz_lag_max));
    cJSON_AddItemToObject(bz, "idleLastTerminatingSeconds", bx_num(r->bz_idle_s));
    cJSON_AddItemToObject(bz, "drainPollSeconds", bx_num(r->bz_poll_s));
    cJSON_AddBoolToObject(bz, "quietBeforeScaleIn", r->bz_quiet);
    cJSON_AddItemToObject(bz, "cpuSeconds", bx_num(r->bz_cpu));
    cJSON_AddItemToObject(bz, "apiRequests", reqs_json(&r->req_bz));
    return o;
}

static void report_size(bx_ctx *x, int n, peer_run *r, cJSON *js)
{
    char title[160];
    snprintf(title, sizeof(title),
             "Peer: slurmop and Slinky's slurm-operator, N = %d (real control plane, KWOK Nodes)", n);
    bx_table *t = bx_table_new(title, 6, "measure", variant_name[0], variant_name[1], variant_name[2],
                               "slurmop / Slinky", "slurmop (Slinky's QPS) / Slinky");
    peer_run *a = &r[V_OP_DEFAULT], *b = &r[V_OP_NOLIMIT], *c = &r[V_SLINKY];
    char bs[3][32], bp[3][32];
    row_s(t, "operator start to ready", a->start_s, b->start_s, c->start_s);
    row_s(t, "scale-out: PATCH to N-th pod created (harness's watch)", a->created_s, b->created_s,
          c->created_s);
    row_s(t, "scale-out: PATCH to N-th pod Ready", a->ready_s, b->ready_s, c->ready_s);
    row_s(t, "scale-out: PATCH to status.readyReplicas = N", a->status_s, b->status_s, c->status_s);
    row_n(t, "scale-out: pods Ready when the wait ended", "%.0f", a->ran ? a->out_ready : -1,
          b->ran ? b->out_ready : -1, c->ran ? c->out_ready : -1);
    row_n(t, "scale-out: API requests (audit log)", "%.0f", (double)a->req_out.total,
          (double)b->req_out.total, (double)c->req_out.total);
    static const char *const verbs[] = {"create", "get", "list", "watch", "update", "patch", "delete"};
    for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++) {
        char w[64];
        snprintf(w, sizeof(w), "  of them %s", verbs[i]);
        long va = verb(&a->req_out, verbs[i]), vb = verb(&b->req_out, verbs[i]),
             vc = verb(&c->req_out, verbs[i]);
        if (va || vb || vc)
            row_n(t, w, "%.0f", (double)va, (double)vb, (double)vc);
    }
    row_n(t, "scale-out: operator CPU seconds", "%.2f", a->cpu_out, b->cpu_out, c->cpu_out);
    row_n(t, "RSS after the scale-out, everything cached (MiB)", "%.1f", a->rss_kib / 1024.0,
          b->rss_kib / 1024.0, c->rss_kib / 1024.0);
    row_n(t, "peak RSS (VmHWM, MiB)", "%.1f", a->hwm_kib / 1024.0, b->hwm_kib / 1024.0, c->hwm_kib / 1024.0);
    row_n(t, "start (Controller's objects): API requests", "%.0f", (double)a->req_start.total,
          (double)b->req_start.total, (double)c->req_start.total);
    row_s(t, "churn: pod DELETED to its replacement ADDED, p50", a->ch_p50, b->ch_p50, c->ch_p50);
    row_s(t, "churn: ... p99", a->ch_p99, b->ch_p99, c->ch_p99);
    row_n(t, "churn: pods back of those deleted", "%.0f", a->ran ? a->ch_back : -1, b->ran ? b->ch_back : -1,
          c->ran ? c->ch_back : -1);
    row_n(t, "churn: API requests (audit log)", "%.0f", (double)a->req_churn.total,
          (double)b->req_churn.total, (double)c->req_churn.total);
    row_n(t, "churn: operator CPU seconds", "%.2f", a->cpu_churn, b->cpu_churn, c->cpu_churn);
    row_s(t, "API server restart: to the last LIST/WATCH of the resync", a->rs_relist_s, b->rs_relist_s,
          c->rs_relist_s);
    row_n(t, "API server restart: API requests in 30 s", "%.0f", (double)a->req_rs.total,
          (double)b->req_rs.total, (double)c->req_rs.total);
    {
        static const char *const wv[] = {"create", "update", "patch", "delete"};
        long wa = 0, wb = 0, wc = 0;
        for (size_t i = 0; i < 4; i++) {
            wa += verb(&a->req_rs, wv[i]);
            wb += verb(&b->req_rs, wv[i]);
            wc += verb(&c->req_rs, wv[i]);
        }
        row_n(t, "API server restart: writes in 30 s", "%.0f", a->req_rs.total < 0 ? -1 : (double)wa,
              b->req_rs.total < 0 ? -1 : (double)wb, c->req_rs.total < 0 ? -1 : (double)wc);
    }
    row_n(t, "API server restart: operator CPU seconds in 30 s", "%.2f", a->cpu_rs, b->cpu_rs, c->cpu_rs);
    row_s(t, "scale-in: PATCH to first pod terminating", a->in_first_s, b->in_first_s, c->in_first_s);
    row_s(t, "scale-in: PATCH to all pods gone", a->in_gone_s, b->in_gone_s, c->in_gone_s);
    row_n(t, "scale-in: pods left at the end of the wait", "%.0f", (double)a->in_left, (double)b->in_left,
          (double)c->in_left);
    row_n(t, "scale-in: API requests (audit log)", "%.0f", (double)a->req_in.total, (double)b->req_in.total,
          (double)c->req_in.total);
    row_n(t, "scale-in: operator CPU seconds", "%.2f", a->cpu_in, b->cpu_in, c->cpu_in);
    {
        char w[160];
        snprintf(w, sizeof(w), "busy scale-in %d → 0 (%d busy, Slurm): PATCH to first drain seen in Slurm",
                 c->bz_m ? c->bz_m : a->bz_m, c->bz_nb ? c->bz_nb : a->bz_nb);
        row_s(t, w, a->bz_first_drain_s, b->bz_first_drain_s, c->bz_first_drain_s);
    }
    row_s(t, "busy scale-in: PATCH to all drains seen in Slurm", a->bz_all_drain_s, b->bz_all_drain_s,
          c->bz_all_drain_s);
    row_n(t, "busy scale-in: drains seen in Slurm", "%.0f", (double)a->bz_drained, (double)b->bz_drained,
          (double)c->bz_drained);
    row_s(t, "busy scale-in: PATCH to first pod terminating", a->bz_first_s, b->bz_first_s, c->bz_first_s);
    row_s(t, "busy scale-in: PATCH to the last idle pod terminating", a->bz_idle_s, b->bz_idle_s,
          c->bz_idle_s);
    row_s(t, "busy scale-in: PATCH to all pods gone", a->bz_gone_s, b->bz_gone_s, c->bz_gone_s);
    row_n(t, "busy scale-in: pods left at the end of the wait", "%.0f", (double)a->bz_left,
          (double)b->bz_left, (double)c->bz_left);
    row_n(t, "busy scale-in: busy pods deleted while their job ran", "%.0f", (double)a->bz_while_busy,
          (double)b->bz_while_busy, (double)c->bz_while_busy);
    row_n(t, "busy scale-in: busy pods deleted after their job", "%.0f", (double)a->bz_after,
          (double)b->bz_after, (double)c->bz_after);
    row_s(t, "busy scale-in: a busy job's end to its pod terminating (largest)", a->bz_lag_max, b->bz_lag_max,
          c->bz_lag_max);
    row_n(t, "busy scale-in: API requests (audit log)", "%.0f", (double)a->req_bz.total,
          (double)b->req_bz.total, (double)c->req_bz.total);
    row_n(t, "busy scale-in: operator CPU seconds", "%.2f", a->bz_cpu, b->bz_cpu, c->bz_cpu);
    bx_table_note(
        t,
        "Each column is its own fresh cluster (cluster.sh start, %d KWOK Nodes), the same CRs (Controller "
        "and NodeSet gpu; no RestApi and no Slurm before the busy scale-in), the operator as its own "
        "ServiceAccount (cluster-admin).",
        x->k8s_nodes);
    bx_table_note(
        t,
        "slurmop: its defaults (client limiter 200 requests/s, burst 400); slurmop (Slinky's QPS): "
        "--qps 0, the limiter off, as controller-runtime leaves Slinky's client (QPS -1, fairness left "
        "to the API server); Slinky: its manager's defaults. Ratios are slurmop / Slinky (below 1: slurmop "
        "is faster, smaller or asks less).");
    bx_table_note(t,
                  "API requests: the API server's audit log (one per audit ID; a watch counts once, at its "
                  "start). Times: the harness's own watch on the pods, both operators alike.");
    for (int v = 0; v < N_VARIANTS; v += 2) {
        char top[400];
        top_resources(&r[v].req_out, top, sizeof(top));
        bx_table_note(t, "%s's scale-out requests by resource: %s.", variant_name[v], top);
    }
    bx_table_note(t, "scale-in without Slurm: slurmop %s; Slinky %s.", a->in_note[0] ? a->in_note : "n/a",
                  c->in_note[0] ? c->in_note : "n/a");
    bx_table_note(
        t,
        "busy scale-in, after the scale-in above, same cluster and operator process: a %s lab "
        "(slurmrestd on 127.0.0.1:%d, REST v0.0.44) with nodes gpu-0 .. gpu-%d named like the pods, the "
        "first %d with a slurmd and a job, the others DOWN without one; the lab's JWT key in the "
        "Controller's Secret, RestApi slurm, the NodeSet without delete-without-drain; scale-out 0 → %d "
        "(%s / %s / %s to all Ready; the operator's CPU under 2%% for 2 s before the PATCH, at most "
        "60 s: %s / %s / %s), then the PATCH to 0. Drains: when an sinfo that showed each node with DRAIN "
        "returned (one every %.1f s, each took %s / %s / %s: the grain of the drain times; the same "
        "observer for both). Each job runs on %.0f s after its node's drain was seen, then the harness "
        "cancels it, so \"all pods gone\" includes that wait; a pod that started terminating before its "
        "job ended (squeue every %.1f s) was deleted while busy.",
        c->bz_slurm[0]   ? c->bz_slurm
        : a->bz_slurm[0] ? a->bz_slurm
                         : "Slurm 26.05",
        PEER_REST_PORT, (c->bz_m ? c->bz_m : a->bz_m) - 1, c->bz_nb ? c->bz_nb : a->bz_nb,
        c->bz_m ? c->bz_m : a->bz_m, fs(bs[0], 32, a->bz_out_s), fs(bs[1], 32, b->bz_out_s),
        fs(bs[2], 32, c->bz_out_s), a->bz_quiet ? "yes" : "no", b->bz_quiet ? "yes" : "no",
        c->bz_quiet ? "yes" : "no", PEER_POLL_S, fs(bp[0], 32, a->bz_poll_s), fs(bp[1], 32, b->bz_poll_s),
        fs(bp[2], 32, c->bz_poll_s), PEER_BUSY_HOLD_S, PEER_POLL_S);
    bx_table_note(t, "busy scale-in: slurmop %s; slurmop (Slinky's QPS) %s; Slinky %s.", a->bz_note,
                  b->bz_note, c->bz_note);
    bx_table_emit(x, t);
    for (int v = 0; v < N_VARIANTS; v++)
        cJSON_AddItemToObject(js, variant_key[v], run_json(&r[v]));
}

int scen_peer_slinky(bx_ctx *x)
{
    char *crds = NULL;
    char *slinky = slinky_bin(x, &crds);
    if (slinky == NULL || crds == NULL) {
        free(slinky);
        free(crds);
        bx_say(x, "bench: --peer slinky: Slinky's manager is not available: nothing measured");
        return 1;
    }
    x->tolerate_unready = 1;
    cJSON *peers = cJSON_AddObjectToObject(x->results, "peers");
    cJSON *js = cJSON_AddObjectToObject(peers, "slinky");
    cJSON_AddStringToObject(js, "manager", slinky);
    cJSON *sizes = cJSON_AddObjectToObject(js, "sizes");
    int rc = 0;
    for (int i = 0; i < x->n_sizes && !bx_stop_requested(x); i++) {
        int n = x->sizes[i];
        peer_run runs[N_VARIANTS];
        for (int v = 0; v < N_VARIANTS; v++)
            run_init(&runs[v]);
        /* Slinky second: a run cut short still has the two defaults */
        static const int order[N_VARIANTS] = {V_OP_DEFAULT, V_SLINKY, V_OP_NOLIMIT};
        for (int vi = 0; vi < N_VARIANTS && !bx_stop_requested(x); vi++) {
            int v = order[vi];
            /* --quick (CI): the two defaults only */
            if (x->quick && v == V_OP_NOLIMIT)
                continue;
            /* each operator gets its own CRDs: ours prune what Slinky's
             * schema has and ours does not (controllerRef.namespace) */
            x->crd_dir = v == V_SLINKY ? crds : NULL;
            run_one(x, v, n, slinky, &runs[v]);
            x->crd_dir = NULL;
            if (runs[v].out_created < n)
                rc = 1;
        }
        char key[16];
        snprintf(key, sizeof(key), "%d", n);
        report_size(x, n, runs, cJSON_AddObjectToObject(sizes, key));
        for (int v = 0; v < N_VARIANTS; v++) {
            peer_reqs *pr[] = {&runs[v].req_start, &runs[v].req_out, &runs[v].req_in, &runs[v].req_churn,
                               &runs[v].req_rs, &runs[v].req_bz};
            for (int k = 0; k < 6; k++) {
                cJSON_Delete(pr[k]->verbs);
                cJSON_Delete(pr[k]->res);
            }
        }
    }
    free(slinky);
    free(crds);
    return rc;
}
