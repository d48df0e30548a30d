/* Scenario 3: scale-in N -> 0 with drain-before-delete against a real Slurm.
 *
 * The Slurm lab holds one node per pod, named like the pods (gpu-0 ...):
 * the first B run a slurmd each (partition "debug") and get a job pinned
 * with --nodelist before the scale-in; the others have no slurmd (they are
 * defined in slurm.conf, idle as far as the operator is concerned). The
 * operator reaches the lab's slurmrestd (reads, v0.0.38) and drains through
 * libslurm (--slurm-conf; 22.05 cannot update nodes over REST).
 *
 * Measured from the scale PATCH (time 0):
 *  - all drains answered: the operator's slurmop_slurm_node_writes_total
 *    {result="ok"} grew by N (every node's drain was answered by Slurm);
 *    read from /metrics every 50 ms; the operator's log lines "draining K
 *    Slurm nodes" (written before their RPC) are reported beside it;
 *  - all pods gone (the harness's watch saw N deletions);
 *  - for every busy pod: it must not start terminating before its job
 *    ended (job ends polled with squeue every 200 ms); a violation is a
 *    pod deleted while Slurm still ran a job there.
 * The limit beside "drains answered" is one scontrol request that drains the
 * same N nodes (one RPC with a hostlist), timed in the same lab just
 * before (and undone).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include "bench/bench.h"
#include "core/err.h"
#include "core/file.h"
#include "core/json.h"

typedef bx_busy_job busy_job;

static int all_running(bx_ctx *x, bx_lab *lab, int want)
{
    const char *argv[] = {"squeue", "-h", "-t", "R", "-o", "%i", NULL};
    char *out = NULL;
    int n = 0;
    if (bx_lab_cmd(x, lab, argv, &out) == 0)
        for (char *p = out; p && *p; p++)
            n += *p == '\n';
    free(out);
    return n >= want;
}

/* Record the end of every job that squeue lists as ended: a job gone from
 * the list, or an answer that lacks it, proves nothing (a harness that took
 * absence for an end would license the very deletes it is there to catch). */
static void poll_jobs(bx_ctx *x, bx_lab *lab, busy_job *jobs, int nb)
{
    uint64_t sent = uv_hrtime();
    char *out = bx_lab_jobs(x, lab);
    if (out == NULL)
        return;
    uint64_t now = uv_hrtime();
    for (int i = 0; i < nb; i++)
        bx_busy_read(out, jobs[i].id, sent, now, &jobs[i].ended, &jobs[i].busy);
    free(out);
}

static double drained_count(bx_ctx *x, bx_lab *lab)
{
    const char *argv[] = {"sinfo", "-h", "-N", "-t", "drain,drng,drained", "-o", "%N", NULL};
    char *out = NULL;
    double n = -1;
    if (bx_lab_cmd(x, lab, argv, &out) == 0) {
        n = 0;
        /* sinfo -N prints a node once per partition: count distinct lines */
        char *save = NULL;
        char *prev = NULL;
        for (char *l = strtok_r(out, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
            if (prev == NULL || strcmp(prev, l) != 0)
                n++;
            prev = l;
        }
    }
    free(out);
    return n;
}

/* Seconds since midnight UTC, as the operator's log lines carry them. */
static double day_seconds_now(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (double)(tv.tv_sec % 86400) + (double)tv.tv_usec / 1e6;
}

/* The next line of a log read into memory: the line (its newline replaced
 * by a NUL), *pos moved past it; NULL at the end. */
static char *line_next(char **pos)
{
    char *line = *pos;
    if (line == NULL || *line == '\0')
        return NULL;
    char *eol = strchr(line, '\n');
    if (eol)
        *eol = '\0';
    *pos = eol ? eol + 1 : NULL;
    return line;
}

/* The time of an operator log line ("I1130 03:57:41.393099 ..."), in
 * seconds after day-second t0: 1 when it has one and it is not before t0. */
static int line_time(const char *line, double t0, double *t)
{
    int hh, mm;
    double ss;
    if (strlen(line) < 5 || sscanf(line + 5, " %d:%d:%lf", &hh, &mm, &ss) != 3)
        return 0;
    *t = hh * 3600.0 + mm * 60.0 + ss - t0;
    if (*t < -43200)
        *t += 86400; /* past midnight */
    return *t >= -0.001;
}

/* The drains the operator logged ("draining K Slurm nodes for scale-in")
 * after day-second t0: how many, and when the last and the first were
 * issued (seconds after t0). */
static void logged_drains(const char *log_path, double t0, double *count, double *first_s, double *last_s)
{
    char *log = NULL, *pos, *line;
    size_t len = 0;
    *count = 0;
    *first_s = *last_s = NAN;
    if (file_read_all(log_path, 512u << 20, &log, &len) != 0)
        return;
    for (pos = log; (line = line_next(&pos));) {
        const char *d = strstr(line, ": draining ");
        long k;
        double t;
        if (d && strstr(d, " Slurm nodes for scale-in") && sscanf(d + 11, "%ld", &k) == 1 &&
            line_time(line, t0, &t)) {
            *count += (double)k;
            if (!isfinite(*first_s))
                *first_s = t;
            *last_s = t;
        }
    }
    free(log);
}

/* When the operator decided each busy pod's delete: its first log line
 * "deleting pod <name> (" after day-second t0 (seconds after t0). Beside
 * the time the harness saw the pod terminating, it tells the operator's
 * decision from the API server's pace in applying the deletes queued
 * before it. */
static void logged_deletes(const char *log_path, double t0, busy_job *jobs, int nb)
{
    char *log = NULL, *pos, *line;
    size_t len = 0;
    for (int i = 0; i < nb; i++)
        jobs[i].decided = NAN;
    if (file_read_all(log_path, 512u << 20, &log, &len) != 0)
        return;
    for (pos = log; (line = line_next(&pos));) {
        const char *d = strstr(line, "] nodeset ");
        double t;
        if (d == NULL || strstr(d, ": deleting pod ") == NULL || !line_time(line, t0, &t))
            continue;
        for (int i = 0; i < nb; i++) {
            char want[64];
            snprintf(want, sizeof(want), ": deleting pod %s (", jobs[i].node);
            if (!isfinite(jobs[i].decided) && strstr(d, want))
                jobs[i].decided = t;
        }
    }
    free(log);
}

/* The operator's requests of verb on pods (and their status) so far, or -1. */
static double pod_requests(bx_ctx *x, bx_slurmop *op, const char *verb)
{
    bx_metrics m;
    char sel[64];
    snprintf(sel, sizeof(sel), "verb=\"%s\",resource=\"pods\"", verb);
    double v = bx_scrape(x, op, &m) == 0 ? bx_metric(&m, "slurmop_api_requests_total", sel) : -1;
    bx_metrics_free(&m);
    return v;
}

static double node_writes(bx_ctx *x, bx_slurmop *op)
{
    bx_metrics m;
    double v =
        bx_scrape(x, op, &m) == 0 ? bx_metric(&m, "slurmop_slurm_node_writes_total", "result=\"ok\"") : -1;
    bx_metrics_free(&m);
    return v;
}

struct sn_wait {
    bx_ctx *x;
    bx_slurmop *op;
    int want;
};

static int slurm_seen(void *arg)
{
    struct sn_wait *w = arg;
    bx_metrics m;
    double v = bx_scrape(w->x, w->op, &m) == 0 ? bx_metric(&m, "slurmop_slurm_nodes", NULL) : -1;
    bx_metrics_free(&m);
    if (v < w->want)
        bx_sleep(w->x, 0.1);
    return v >= w->want;
}

void bx_scalein_reset(bx_scalein *si)
{
    si->drains_s = si->gone_s = si->writes = si->drained = NAN;
    si->logged = si->first_drain_s = si->last_drain_s = si->patch_s = NAN;
    si->idle_gone_s = si->decided_lag_max = si->pod_patches = si->pod_deletes = NAN;
    si->busy_lag_max = 0;
    si->write_rate = 0;
    si->violations = si->busy_deleted_after = 0;
}

void bx_scalein_json(const bx_scalein *si, cJSON *o)
{
    cJSON_AddNumberToObject(o, "busy", si->nb);
    cJSON_AddNumberToObject(o, "jobSeconds", si->job_s);
    cJSON_AddItemToObject(o, "scalePatchAnsweredSeconds", bx_num(si->patch_s));
    cJSON_AddItemToObject(o, "drainsLogged", bx_num(si->logged));
    cJSON_AddItemToObject(o, "firstDrainSeconds", bx_num(si->first_drain_s));
    cJSON_AddItemToObject(o, "lastDrainSeconds", bx_num(si->last_drain_s));
    cJSON_AddItemToObject(o, "nodeWritesReachedNSeconds", bx_num(si->drains_s));
    cJSON_AddItemToObject(o, "nodeWrites", bx_num(si->writes));
    cJSON_AddItemToObject(o, "podDeletes", bx_num(si->pod_deletes));
    cJSON_AddItemToObject(o, "podPatches", bx_num(si->pod_patches));
    cJSON_AddItemToObject(o, "idlePodsLastDeleteSeconds", bx_num(si->idle_gone_s));
    cJSON_AddItemToObject(o, "allPodsGoneSeconds", bx_num(si->gone_s));
    cJSON_AddNumberToObject(o, "busyDeletedAfterJob", si->busy_deleted_after);
    cJSON_AddNumberToObject(o, "deletedWhileBusy", si->violations);
    cJSON_AddItemToObject(o, "busyDeleteLagMaxSeconds", bx_num(si->busy_lag_max));
    cJSON_AddItemToObject(o, "busyDeleteDecidedLagMaxSeconds", bx_num(si->decided_lag_max));
    cJSON_AddNumberToObject(o, "writeRate", si->write_rate);
    cJSON_AddItemToObject(o, "drainedInSlurm", bx_num(si->drained));
}

/* The scale-in itself, on a fleet whose Slurm nodes are registered: a job
 * of si->job_s seconds on each of gpu-0 .. gpu-(nb-1) (partition
 * si->partition; those nodes run a slurmd), then the NodeSet scaled to 0,
 * watched until every pod is gone or the window ends. Fills si's results;
 * si->jobs is the caller's, nb long. */
int bx_scalein_run(bx_ctx *x, bx_fleet *f, bx_lab *lab, bx_scalein *si)
{
    int n = si->n, nb = si->nb;
    busy_job *jobs = si->jobs;
    int rc = 0;
    bx_scalein_reset(si);
    bx_step(x, "scale-in: %d jobs on the nodes with a slurmd", nb);
    for (int i = 0; i < nb; i++) {
        snprintf(jobs[i].node, sizeof(jobs[i].node), "gpu-%d", i);
        char wrap[64];
        snprintf(wrap, sizeof(wrap), "sleep %.0f", si->job_s);
        const char *sb[] = {"sbatch", "--parsable", "-p", si->partition, "-w",        jobs[i].node, "-N1",
                            "-n1",    "-D",         "/tmp", "-o",        "/dev/null", "--wrap",     wrap,
                            NULL};
        char *out = NULL;
        if (bx_lab_cmd(x, lab, sb, &out) == 0)
            snprintf(jobs[i].id, sizeof(jobs[i].id), "%.*s", (int)strcspn(out, ";\n"), out);
        else
            bx_say(x, "bench: sbatch on %s failed", jobs[i].node);
        free(out);
    }
    uint64_t dl = uv_hrtime() + 60000000000ull;
    while (!all_running(x, lab, nb) && uv_hrtime() < dl && !bx_stop_requested(x))
        bx_sleep(x, 0.2);
    /* let the operator see them busy */
    bx_sleep(x, 1.5);
    (void)bx_wait_quiet(x, &f->op, 0.5, 30);
    bx_step(x, "scale-in: %d -> 0", n);
    double w0 = node_writes(x, &f->op);
    double p0 = pod_requests(x, &f->op, "PATCH"), d0 = pod_requests(x, &f->op, "DELETE");
    double t0_day = day_seconds_now();
    uint64_t t0 = uv_hrtime(), last_jobs = 0;
    int slowed = 0;
    if (x->scalein_write_rate > 0 && f->have_ks) {
        char body[64];
        snprintf(body, sizeof(body), "{\"writeRate\":%g}", x->scalein_write_rate);
        slowed = bx_admin(x, &f->ks, "POST", "/kubesim/faults", body, NULL) == 0;
        if (!slowed)
            bx_say(x, "bench: scale-in: kubesim refused the write-rate fault");
    }
    rc = bx_scale(x, &f->api, 0);
    si->patch_s = bx_secs(t0, uv_hrtime());
    /* a real API server took the deletes at ~62 a second at 8,192
     * pods: the busy pods' came after 132 s, past a fixed window */
    double window_s = si->job_s + 120 + (x->real_k8s ? 0.05 * n : 0);
    uint64_t deadline = t0 + (uint64_t)(window_s * 1e9);
    while (rc == 0 && uv_hrtime() < deadline && !bx_stop_requested(x)) {
        uint64_t now = uv_hrtime();
        if (!isfinite(si->drains_s) && node_writes(x, &f->op) - w0 >= n)
            si->drains_s = bx_secs(t0, uv_hrtime());
        if (now - last_jobs > 200000000ull) {
            poll_jobs(x, lab, jobs, nb);
            last_jobs = now;
        }
        bx_obs_counts c;
        bx_obs_counts_get(f->obs, &c);
        if (c.exist == 0 && !isfinite(si->gone_s))
            si->gone_s = bx_secs(t0, uv_hrtime());
        if (isfinite(si->gone_s))
            break;
        bx_sleep(x, 0.05);
    }
    if (slowed)
        (void)bx_admin(x, &f->ks, "POST", "/kubesim/faults", "{\"writeRate\":0}", NULL);
    si->write_rate = slowed ? x->scalein_write_rate : 0;
    si->writes = node_writes(x, &f->op) - w0;
    double p1 = pod_requests(x, &f->op, "PATCH"), d1 = pod_requests(x, &f->op, "DELETE");
    if (p0 >= 0 && p1 >= 0)
        si->pod_patches = p1 - p0;
    if (d0 >= 0 && d1 >= 0)
        si->pod_deletes = d1 - d0;
    if (!isfinite(si->gone_s))
        bx_say(x, "bench: scale-in: pods still present after %.0f s", window_s);
    /* the busy pods against their jobs: a last look for the ends the loop's
     * polls missed (the pods went first) */
    poll_jobs(x, lab, jobs, nb);
    logged_deletes(f->op.log, t0_day, jobs, nb);
    for (int i = 0; i < nb; i++) {
        if (jobs[i].ended && isfinite(jobs[i].decided)) {
            double lag = jobs[i].decided - (double)((int64_t)jobs[i].ended - (int64_t)t0) / 1e9;
            if (!isfinite(si->decided_lag_max) || lag > si->decided_lag_max)
                si->decided_lag_max = lag;
        }
        jobs[i].deleted = bx_obs_terminating_at(f->obs, jobs[i].node);
        /* bx_busy_deleted_while_busy: seen terminating before a read sent later still showed its job */
        if (jobs[i].deleted && bx_busy_deleted_while_busy(&jobs[i]))
            si->violations++;
        else if (jobs[i].deleted)
            si->busy_deleted_after++;
        if (jobs[i].deleted && jobs[i].ended) {
            double lag = (double)((int64_t)jobs[i].deleted - (int64_t)jobs[i].ended) / 1e9;
            if (lag > si->busy_lag_max)
                si->busy_lag_max = lag;
        }
    }
    /* the idle pods: the last one to start terminating */
    uint64_t last_idle = 0;
    for (int i = nb; i < n; i++) {
        char name[32];
        snprintf(name, sizeof(name), "gpu-%d", i);
        uint64_t tt = bx_obs_terminating_at(f->obs, name);
        if (tt > last_idle)
            last_idle = tt;
    }
    if (last_idle)
        si->idle_gone_s = bx_secs(t0, last_idle);
    si->drained = drained_count(x, lab);
    logged_drains(f->op.log, t0_day, &si->logged, &si->first_drain_s, &si->last_drain_s);
    return rc;
}

int scen_scale_in(bx_ctx *x)
{
    int n = 0;
    for (int i = 0; i < x->n_sizes; i++)
        if (x->sizes[i] > n)
            n = x->sizes[i];
    const char *skip = NULL;
    if (x->no_slurm)
        skip = "--no-slurm";
    else if (!x->slurm_aware)
        skip = "this slurmop does not talk to Slurm yet (no Slurm-aware NodeSet)";
    else if (x->kubeconfig && !x->real_k8s)
        skip = "with --kubeconfig the harness cannot place jobs on the cluster's Slurm nodes";
    int nb = n >= 4096 ? 16 : n >= 1024 ? 4 : 2;
    if (nb > n)
        nb = n;
    double job_s = x->quick ? 8 : 12;
    bx_lab lab;
    memset(&lab, 0, sizeof(lab));
    busy_job *jobs = xcalloc((size_t)nb, sizeof(*jobs));
    int rc = 0;
    if (!skip) {
        bx_step(x, "scale-in: starting a Slurm lab with %d nodes (%d with a slurmd)", n, nb);
        buf_t names;
        buf_init(&names, BUF_UNLIMITED);
        for (int i = 0; i < nb; i++)
            rc |= buf_printf(&names, "%sgpu-%d", i ? " " : "", i);
        /* slurmlab.sh sizes MaxNodeCount for its own nodes; a later value wins.
         * The nodes without a slurmd are DOWN, as slurmctld would have them
         * once SlurmdTimeout passed: an UNKNOWN node (never heard from) is
         * never "drained" (slurmio/model.h), so their pods would stay. */
        char *conf = n > nb
                         ? xasprintf("MaxNodeCount=%d\n"
                                     "NodeName=gpu-[%d-%d] NodeHostname=localhost NodeAddr=127.0.0.1 CPUs=2 "
                                     "RealMemory=1000 State=DOWN\n"
                                     "PartitionName=gpu Nodes=gpu-[%d-%d] MaxTime=INFINITE State=UP\n"
                                     "SlurmdTimeout=0",
                                     n + 16, nb, n - 1, nb, n - 1)
                         : xstrdup("");
        int e = bx_lab_start(x, &lab, names.data, conf);
        free(conf);
        buf_free(&names);
        if (e)
            skip = e == OP_ENOTSUP ? "the Slurm lab needs root and Slurm's packages"
                                   : "the Slurm lab did not start";
        if (e && e != OP_ENOTSUP)
            rc = e;
    }
    if (skip) {
        bx_say(x, "bench: scale-in: skipped: %s", skip);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "skipped", skip);
        cJSON_AddItemToObject(x->results, "scale-in", o);
        bx_target(x, "scale-in of N: drains answered by Slurm within 1 s of the spec change (batched)",
                  "not measured",
                  "1 s", NAN, "not measured", skip);
        free(jobs);
        bx_lab_stop(x, &lab);
        return rc;
    }
    char *jwt = NULL;
    size_t jwt_len = 0;
    (void)bx_lab_jwt_key(&lab, &jwt, &jwt_len);
    /* 22.05 writes nodes through libslurm (--slurm-conf); the newer versions through REST only */
    bx_fleet_slurm fs = {lab.rest_url, lab.newer ? NULL : lab.slurm_conf, jwt, jwt_len, 1};
    bx_fleet f;
    bx_step(x, "scale-in: a fleet of %d pods with Slurm", n);
    rc = bx_fleet_open(x, &f, "scale-in", x->k8s_nodes > n ? x->k8s_nodes : n, n, &fs);
    double limit_s = NAN;
    cJSON *before = cJSON_CreateObject(); /* what the operator did to get there */
    bx_scalein si = {.n = n, .nb = nb, .job_s = job_s, .partition = "debug", .jobs = jobs};
    bx_scalein_reset(&si);
    char hostlist[64];
    snprintf(hostlist, sizeof(hostlist), "nodename=gpu-[0-%d]", n - 1);
    if (rc == 0) {
        struct sn_wait sw = {x, &f.op, n};
        if (bx_wait(x, slurm_seen, &sw, 120) != 0)
            bx_say(x, "bench: scale-in: the operator does not see the lab's %d nodes", n);
        int quiet = bx_wait_quiet(x, &f.op, 1.0, 30) == 0;
        bx_metrics m;
        if (bx_scrape(x, &f.op, &m) == 0) {
            cJSON_AddItemToObject(before, "scaleOutSeconds", bx_num(f.scale_s));
            cJSON_AddBoolToObject(before, "queueQuietBeforeScaleIn", quiet);
            cJSON_AddNumberToObject(
                before, "nodesetReconciles",
                bx_metric(&m, "controller_runtime_reconcile_total", "controller=\"nodeset-controller\""));
            cJSON_AddNumberToObject(before, "slurmNodeWrites",
                                    bx_metric(&m, "slurmop_slurm_node_writes_total", NULL));
            cJSON_AddNumberToObject(before, "slurmPollsFull",
                                    bx_metric(&m, "slurmop_slurm_node_polls_total", "result=\"full\""));
            cJSON_AddNumberToObject(
                before, "slurmPollsNotModified",
                bx_metric(&m, "slurmop_slurm_node_polls_total", "result=\"not_modified\""));
            cJSON_AddNumberToObject(
                before, "podPatches",
                bx_metric(&m, "slurmop_api_requests_total", "verb=\"PATCH\",resource=\"pods\""));
            cJSON_AddNumberToObject(before, "operatorCpuSeconds", bx_cpu_seconds(bx_proc_pid(f.op.proc)));
        }
        bx_metrics_free(&m);
        /* the limit: one request drains every node */
        bx_step(x, "scale-in: the limit (one scontrol request drains %d nodes)", n);
        const char *drain[] = {"scontrol", "update", hostlist, "state=drain", "reason=bench: limit", NULL};
        const char *resume[] = {"scontrol", "update", hostlist, "state=resume", NULL};
        uint64_t t = uv_hrtime();
        int e = bx_lab_cmd(x, &lab, drain, NULL);
        limit_s = bx_secs(t, uv_hrtime());
        if (e != 0)
            bx_say(x, "bench: scale-in: scontrol drain exited %d", e);
        /* 22.05 answers "Invalid node state specified" for nodes that never
         * registered, yet clears their DRAIN: judge by the result */
        (void)bx_lab_cmd(x, &lab, resume, NULL);
        double left = drained_count(x, &lab);
        if (left != 0)
            bx_say(x, "bench: scale-in: %.0f nodes still drained after the limit's resume", left);
        (void)bx_wait_quiet(x, &f.op, 2.0, 60);
        rc = bx_scalein_run(x, &f, &lab, &si);
    }
    bx_fleet_close(x, &f);
    char *version = lab.version ? xstrdup(lab.version) : xstrdup("Slurm 22.05");
    char *api = xstrdup(lab.api ? lab.api : "v0.0.38");
    int newer = lab.newer;
    bx_lab_stop(x, &lab);
    free(jwt);

    bx_table *t = bx_table_new("Scale-in N → 0 with drain before delete (real Slurm)", 11, "N (busy)",
                               "limit: one drain RPC", "first drain batch", "all drains issued (log)",
                               "all drains answered", "ratio (answered / limit)",
                               "idle pods: last delete", "all pods gone", "busy pods deleted after their job",
                               "deleted while busy", "drained in Slurm");
    char a[32], b[32], c[48], c1[48], d[16], e[32], g[32], h[96], k[16], l[16], lag[24], dlag[24];
    double all_s = si.logged >= n ? si.last_drain_s : NAN;
    snprintf(a, sizeof(a), "%d (%d)", n, nb);
    /* The ratio is taken at Slurm's answers, as the limit's scontrol is
     * timed to its answer: a log line is written before its RPC. */
    snprintf(d, sizeof(d), isfinite(si.drains_s) && isfinite(limit_s) ? "%.2f×" : "n/a",
             si.drains_s / limit_s);
    char ans[24];
    if (isfinite(si.decided_lag_max))
        snprintf(h, sizeof(h), "%d of %d (≤ %s after; decided ≤ %s)", si.busy_deleted_after, nb,
                 bx_fmt_s(lag, sizeof(lag), si.busy_lag_max),
                 bx_fmt_s(dlag, sizeof(dlag), si.decided_lag_max));
    else
        snprintf(h, sizeof(h), "%d of %d (≤ %s after)", si.busy_deleted_after, nb,
                 bx_fmt_s(lag, sizeof(lag), si.busy_lag_max));
    snprintf(k, sizeof(k), "%d", si.violations);
    snprintf(l, sizeof(l), "%.0f", si.drained);
    char tmp[24], tmp2[24];
    snprintf(c1, sizeof(c1), "%s", bx_fmt_s(tmp, sizeof(tmp), si.first_drain_s));
    if (isfinite(all_s))
        bx_fmt_s(c, sizeof(c), all_s);
    else if (isfinite(si.last_drain_s))
        snprintf(c, sizeof(c), "%.0f of %d by %s", si.logged, n, bx_fmt_s(tmp, sizeof(tmp), si.last_drain_s));
    else
        snprintf(c, sizeof(c), "n/a");
    bx_table_row(t, a, bx_fmt_s(b, sizeof(b), limit_s), c1, c, bx_fmt_s(ans, sizeof(ans), si.drains_s), d,
                 bx_fmt_s(e, sizeof(e), si.idle_gone_s),
                 bx_fmt_s(g, sizeof(g), si.gone_s), h, k, l);
    bx_table_note(
        t,
        "%s, REST %s reads, %s writes. The busy nodes run a slurmd and a %.0f-second job "
        "each; the others have no slurmd.",
        version, api, newer ? "REST" : "libslurm", job_s);
    bx_table_note(
        t,
        "Time 0: the scale PATCH (answered at %s). Drains issued: the operator's log lines \"draining K "
        "Slurm nodes for scale-in\" (one hostlist request each; %.0f nodes in all). Node writes answered "
        "(slurmop_slurm_node_writes_total{result=\"ok\"}, drains and other node updates): %.0f; all drains "
        "answered: when that count reached N (scraped every 50 ms or so), at %s.",
        bx_fmt_s(tmp2, sizeof(tmp2), si.patch_s), si.logged, si.writes,
        bx_fmt_s(tmp, sizeof(tmp), si.drains_s));
    bx_table_note(
        t, "Limit: `scontrol update nodename=gpu-[0-%d] state=drain` (one RPC) in the same lab, just before.",
        n - 1);
    bx_table_note(t,
                  "Busy pods: their job's end (squeue polled every 200 ms) to the harness seeing the pod "
                  "terminating; decided: to the operator's log line deciding its delete. A delete decided "
                  "in the same pass as the idle pods' waits behind theirs for the API server.");
    bx_table_note(t,
                  "The operator's pod requests from time 0 to all pods gone: %.0f DELETEs, %.0f PATCHes (the "
                  "pods' cordon annotations and status; slurmop_api_requests_total).",
                  si.pod_deletes, si.pod_patches);
    if (si.write_rate > 0)
        bx_table_note(
            t,
            "--scalein-write-rate: from time 0 until all pods were gone, kubesim applied API writes at "
            "most %g per second, in order (a busy API server): the operator's deletes were seen only "
            "that fast.",
            si.write_rate);
    if (json_get(before, "scaleOutSeconds"))
        bx_table_note(
            t,
            "Getting there (0 → %d with Slurm): %.0f s, %.0f NodeSet reconciles, %.0f Slurm node writes, "
            "%.0f full node-table polls (%.0f × 304), %.0f pod PATCHes, %.0f s operator CPU%s.",
            n, json_get(before, "scaleOutSeconds")->valuedouble,
            (double)json_get_int(before, "nodesetReconciles", 0),
            (double)json_get_int(before, "slurmNodeWrites", 0),
            (double)json_get_int(before, "slurmPollsFull", 0),
            (double)json_get_int(before, "slurmPollsNotModified", 0),
            (double)json_get_int(before, "podPatches", 0),
            json_get(before, "operatorCpuSeconds")->valuedouble,
            json_get_bool(before, "queueQuietBeforeScaleIn", 0)
                ? ""
                : "; its queue was still busy when the scale-in began");
    bx_table_emit(x, t);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "n", n);
    cJSON_AddStringToObject(o, "slurm", version);
    cJSON_AddStringToObject(o, "restVersion", api);
    cJSON_AddStringToObject(o, "nodeWritesBy", newer ? "rest" : "libslurm");
    cJSON_AddStringToObject(o, "cluster", x->real_k8s ? "real" : x->kubeconfig ? "kubeconfig" : "kubesim");
    cJSON_AddItemToObject(o, "limitOneRpcSeconds", bx_num(limit_s));
    cJSON_AddItemToObject(o, "before", before);
    bx_scalein_json(&si, o);
    cJSON_AddItemToObject(o, "allDrainsIssuedSeconds", bx_num(all_s));
    cJSON *jj = cJSON_AddArrayToObject(o, "jobs");
    for (int i = 0; i < nb; i++) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "node", jobs[i].node);
        cJSON_AddStringToObject(j, "job", jobs[i].id);
        cJSON_AddBoolToObject(j, "ended", jobs[i].ended != 0);
        cJSON_AddBoolToObject(j, "podDeleted", jobs[i].deleted != 0);
        cJSON_AddItemToArray(jj, j);
    }
    cJSON_AddItemToObject(x->results, "scale-in", o);
    char m[160], lim[64], note[128];
    /* Timed at Slurm's answers (the log line comes before its RPC); the
     * log's figure stays beside it. */
    if (isfinite(si.drains_s))
        snprintf(m, sizeof(m), "all %d answered at %s (logged by %s; first batch %s)", n,
                 bx_fmt_s(tmp, sizeof(tmp), si.drains_s), c, c1);
    else
        snprintf(m, sizeof(m), "not all answered; logged: %s (first batch %s)", c, c1);
    snprintf(lim, sizeof(lim), "1 s (one RPC: %s)", bx_fmt_s(b, sizeof(b), limit_s));
    snprintf(note, sizeof(note), "N = %d, %d busy; %d deleted while busy", n, nb, si.violations);
    bx_target(x, "scale-in of N: drains answered by Slurm within 1 s of the spec change (batched)", m, lim,
              isfinite(si.drains_s) ? si.drains_s / 1.0 : NAN,
              !isfinite(si.first_drain_s)                                   ? "not measured"
              : isfinite(si.drains_s) && si.drains_s <= 1.0 && si.violations == 0 ? "met"
                                                                         : "missed",
              note);
    free(jobs);
    free(version);
    free(api);
    return rc ? rc : si.violations ? OP_EIO : 0;
}
