/* Scenario 6: memory and idle cost.
 *
 * One operator process is watched while its caches fill, step by step, on
 * a kubesim that starts with no Nodes:
 *   0. the benchmark's objects only (baseline);
 *   1. N Nodes added (/kubesim/nodes/add);
 *   2. NodeSet gpu scaled to N: N pods cached;
 *   3. with Slurm: RestApi "slurm" created, so the operator starts polling
 *      the lab's slurmrestd and caches its N nodes (named like the pods).
 * RSS (VmRSS) is read after each step once the queue is quiet; the
 * difference per step over N is the cost per object. The operator's own
 * count of each cache's bytes, at the baseline and after the last step,
 * breaks the live heap down (breakdown_emit). Then, with
 * everything cached, once the queue is quiet and the operator's Slurm node
 * writes (pod info, one request per node after a scale-out) have stopped
 * for 3 s (at most 300 s; step 3's RSS is read then too) and a node poll
 * has answered 304 (the last writes read back), the operator's
 * CPU time over --idle-seconds and the Slurm polls in that window (count and bytes from
 * slurmop_slurm_node_polls_total / slurmop_slurm_received_bytes) give the
 * idle cost and the bytes per poll when nothing changed; the bytes of one
 * full node table (what a poll moves when anything changed) are the limit
 * beside it. Last, a second operator is started against the same cluster:
 * its RSS after the initial lists is the cache without the high-water mark
 * of the scale-out.
 */
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "core/err.h"
#include "core/file.h"
#include "core/json.h"
#include "core/mem.h"
#include "reconcilers/nodeset.h"

static int cache_count(bx_ctx *x, bx_slurmop *op, const char *resource)
{
    bx_metrics m;
    char q[96];
    snprintf(q, sizeof(q), "resource=\"%s\"", resource);
    int v = bx_scrape(x, op, &m) == 0 ? (int)bx_metric(&m, "slurmop_cache_objects", q) : -1;
    bx_metrics_free(&m);
    return v;
}

struct cache_wait {
    bx_ctx *x;
    bx_slurmop *op;
    const char *resource;
    int want;
    uint64_t last;
};

static int cache_reached(void *arg)
{
    struct cache_wait *w = arg;
    uint64_t now = uv_hrtime();
    if (now - w->last < 100000000ull)
        return 0;
    w->last = now;
    return cache_count(w->x, w->op, w->resource) >= w->want;
}

/* Slurm nodes cached by the operator (slurmop_slurm_nodes). */
static double slurm_nodes(bx_ctx *x, bx_slurmop *op)
{
    bx_metrics m;
    double v = bx_scrape(x, op, &m) == 0 ? bx_metric(&m, "slurmop_slurm_nodes", NULL) : -1;
    bx_metrics_free(&m);
    return v;
}

struct slurm_wait {
    bx_ctx *x;
    bx_slurmop *op;
    int want;
    uint64_t last;
};

static int slurm_reached(void *arg)
{
    struct slurm_wait *w = arg;
    uint64_t now = uv_hrtime();
    if (now - w->last < 100000000ull)
        return 0;
    w->last = now;
    return slurm_nodes(w->x, w->op) >= w->want;
}

/* RSS once the NodeSet queue was quiet for a second (at most 30 s: with
 * Slurm at 8,192 nodes the operator may never be quiet, see the report). */
static long settle_rss(bx_ctx *x, bx_slurmop *op)
{
    (void)bx_wait_quiet(x, op, 1.0, 30);
    bx_sleep(x, 0.5);
    return bx_rss_kib(bx_proc_pid(op->proc));
}

/* Bytes of heap in use in the operator: its slurmop_heap_inuse_bytes, or
 * for an operator without it glibc's malloc_stats(), called in the process
 * through gdb, which prints them on its stderr (our log). RSS keeps every
 * page the allocator ever touched; this is what is live. -1 when neither
 * works or the build has sanitizers (their allocator). */
static long long heap_in_use(bx_ctx *x, bx_slurmop *op)
{
    /* The operator's own allocator statistics first (glibc mallinfo2 on
     * /metrics): no debugger, no stop of the process, and they work where
     * ptrace does not. */
    bx_metrics m;
    if (bx_scrape(x, op, &m) == 0) {
        double v = bx_metric(&m, "slurmop_heap_inuse_bytes", NULL);
        bx_metrics_free(&m);
        if (isfinite(v) && v > 0)
            return (long long)v;
    }
    static int no_gdb = -1;
    if (no_gdb < 0) {
        const char *argv[] = {"gdb", "--version", NULL};
        no_gdb = bx_run(x, argv, NULL, NULL, 20, NULL) != 0;
    }
    if (no_gdb || x->sanitized)
        return -1;
    char pid[16];
    snprintf(pid, sizeof(pid), "%d", bx_proc_pid(op->proc));
    /* --readnever: the debug info of a -g3 binary takes long to load, and
     * only libc's dynamic symbols are needed */
    const char *argv[] = {
        "gdb", "-nx", "-batch", "--readnever", "-p", pid, "-ex", "call (void)malloc_stats()", NULL};
    int rc = bx_run(x, argv, NULL, NULL, 120, NULL);
    /* A gdb that was killed while attached leaves the operator stopped. */
    int opid = bx_proc_pid(op->proc);
    if (opid > 0)
        kill(opid, SIGCONT);
    if (rc != 0)
        return -1;
    bx_sleep(x, 0.2);
    char *log = NULL;
    size_t len = 0;
    long long v = -1;
    if (file_read_all(op->log, 256u << 20, &log, &len) == 0) {
        const char *t = NULL;
        for (const char *p = log; (p = strstr(p, "Total (incl. mmap):")) != NULL; p++)
            t = p;
        const char *u = t ? strstr(t, "in use bytes") : NULL;
        if (u && (u = strchr(u, '=')) != NULL)
            v = strtoll(u + 1, NULL, 10);
    }
    free(log);
    return v;
}

/* Until a node poll of the operator answers "not modified" (a later one
 * than any so far); OP_ETIMEOUT after timeout_s. */
static int wait_not_modified(bx_ctx *x, bx_slurmop *op, double timeout_s)
{
    static const char *const nm = "result=\"not_modified\"";
    double base = NAN;
    uint64_t deadline = uv_hrtime() + (uint64_t)(timeout_s * 1e9);
    while (uv_hrtime() < deadline && !bx_stop_requested(x)) {
        bx_metrics m;
        if (bx_scrape(x, op, &m) == 0) {
            double v = bx_metric(&m, "slurmop_slurm_node_polls_total", nm);
            bx_metrics_free(&m);
            if (isnan(base))
                base = v;
            else if (v > base)
                return 0;
        }
        bx_sleep(x, 0.25);
    }
    return OP_ETIMEOUT;
}

/* The caches of the breakdown, as the operator names them on /metrics: the
 * big three first; every other watch cache is summed in one row. */
static const char *const big_caches[] = {"pods", "nodes", "slurm_nodes", "interned"};

/* Bytes and objects of one cache (a resource of slurmop_cache_bytes, or the
 * Slurm node tables of every cluster) in a scrape; "other" is every watch
 * cache not in big_caches. */
static void cache_of(const bx_metrics *m, const char *cache, double *bytes, double *objects)
{
    char q[96];
    if (strcmp(cache, "slurm_nodes") == 0) {
        *bytes = bx_metric(m, "slurmop_slurm_node_cache_bytes", NULL);
        *objects = bx_metric(m, "slurmop_slurm_nodes", NULL);
        return;
    }
    if (strcmp(cache, "other") != 0) {
        snprintf(q, sizeof(q), "resource=\"%s\"", cache);
        *bytes = bx_metric(m, "slurmop_cache_bytes", q);
        *objects = strcmp(cache, "interned") == 0 ? NAN : bx_metric(m, "slurmop_cache_objects", q);
        return;
    }
    *bytes = bx_metric(m, "slurmop_cache_bytes", NULL);
    *objects = bx_metric(m, "slurmop_cache_objects", NULL);
    for (size_t i = 0; i < ARRAY_SIZE(big_caches); i++) {
        if (strcmp(big_caches[i], "slurm_nodes") == 0)
            continue;
        snprintf(q, sizeof(q), "resource=\"%s\"", big_caches[i]);
        *bytes -= bx_metric(m, "slurmop_cache_bytes", q);
        *objects -= bx_metric(m, "slurmop_cache_objects", q);
    }
}

/* Per cache: what it holds with everything cached (m1), per object, and its
 * growth from the baseline (m0) over n; then the sum, the live heap of the
 * same scrapes, and the rest (heap less the caches): what the operator
 * keeps outside its caches (reconciler state, queues, buffers). */
static void breakdown_emit(bx_ctx *x, const bx_metrics *m0, const bx_metrics *m1, int n, cJSON *o)
{
    double heap0 = bx_metric(m0, "slurmop_heap_inuse_bytes", NULL);
    double heap1 = bx_metric(m1, "slurmop_heap_inuse_bytes", NULL);
    bx_table *t = bx_table_new("Memory: the live heap by cache, everything cached", 5, "cache", "objects",
                               "bytes", "bytes per object", "growth per N");
    cJSON *jb = cJSON_AddObjectToObject(o, "caches");
    double sum0 = 0, sum1 = 0;
    const char *rows[ARRAY_SIZE(big_caches) + 1];
    for (size_t i = 0; i < ARRAY_SIZE(big_caches); i++)
        rows[i] = big_caches[i];
    rows[ARRAY_SIZE(big_caches)] = "other";
    for (size_t i = 0; i < ARRAY_SIZE(rows); i++) {
        double b0, o0, b1, o1;
        cache_of(m0, rows[i], &b0, &o0);
        cache_of(m1, rows[i], &b1, &o1);
        sum0 += b0;
        sum1 += b1;
        char a[32], b[32], c[32], d[32];
        snprintf(a, sizeof(a), isfinite(o1) ? "%.0f" : "", o1);
        snprintf(b, sizeof(b), "%.2f MiB", b1 / 1048576.0);
        snprintf(c, sizeof(c), isfinite(o1) && o1 > 0 ? "%.0f B" : "", b1 / o1);
        snprintf(d, sizeof(d), "%.0f B", (b1 - b0) / n);
        bx_table_row(t, strcmp(rows[i], "other") == 0 ? "other watch caches" : rows[i], a, b, c, d);
        cJSON *j = cJSON_AddObjectToObject(jb, rows[i]);
        cJSON_AddItemToObject(j, "objects", bx_num(o1));
        cJSON_AddItemToObject(j, "bytes", bx_num(b1));
        cJSON_AddItemToObject(j, "bytesPerObject", bx_num(o1 > 0 ? b1 / o1 : NAN));
        cJSON_AddItemToObject(j, "growthPerN", bx_num((b1 - b0) / n));
    }
    char b[32], d[32];
    snprintf(b, sizeof(b), "%.2f MiB", sum1 / 1048576.0);
    snprintf(d, sizeof(d), "%.0f B", (sum1 - sum0) / n);
    bx_table_row(t, "sum of the caches", "", b, "", d);
    if (isfinite(heap0) && isfinite(heap1) && heap0 > 0 && heap1 > 0) {
        snprintf(b, sizeof(b), "%.2f MiB", heap1 / 1048576.0);
        snprintf(d, sizeof(d), "%.0f B", (heap1 - heap0) / n);
        bx_table_row(t, "live heap", "", b, "", d);
        double r0 = heap0 - sum0, r1 = heap1 - sum1;
        snprintf(b, sizeof(b), "%.2f MiB", r1 / 1048576.0);
        snprintf(d, sizeof(d), "%.0f B", (r1 - r0) / n);
        bx_table_row(t, "other (heap − caches)", "", b, "", d);
        cJSON_AddItemToObject(o, "heapOutsideCachesBytes", bx_num(r1));
        cJSON_AddItemToObject(o, "heapOutsideCachesGrowthPerN", bx_num((r1 - r0) / n));
    }
    cJSON_AddItemToObject(o, "cachesBytes", bx_num(sum1));
    bx_table_note(t,
                  "bytes: the operator's slurmop_cache_bytes (resource=\"interned\": the strings the caches "
                  "share) and slurmop_slurm_node_cache_bytes, as glibc counts them in use; growth per N: "
                  "from the baseline to the last step, over %d; the live heap is slurmop_heap_inuse_bytes.",
                  n);
    bx_table_emit(x, t);
}

/* The lab for memory: N slurmd-less nodes named like the pods. */
int scen_memory(bx_ctx *x)
{
    int n = 0;
    for (int i = 0; i < x->n_sizes; i++)
        if (x->sizes[i] > n)
            n = x->sizes[i];
    bx_lab lab;
    memset(&lab, 0, sizeof(lab));
    /* a real control plane started by the harness (--cluster real) gets its
     * own lab, as kubesim does; a user's cluster (--kubeconfig) does not */
    int want_slurm = !x->no_slurm && x->slurm_aware && (!x->kubeconfig || x->real_k8s);
    const char *slurm_skip = NULL;
    if (x->no_slurm)
        slurm_skip = "--no-slurm";
    else if (!x->slurm_aware)
        slurm_skip = "this slurmop does not talk to Slurm yet";
    else if (x->kubeconfig && !x->real_k8s)
        slurm_skip = x->slurmrestd ? "external Slurm: the node count is not under the harness's control"
                                   : "--kubeconfig without --slurmrestd";
    bx_fleet_slurm fs;
    memset(&fs, 0, sizeof(fs));
    char *jwt = NULL;
    size_t jwt_len = 0;
    if (want_slurm) {
        bx_step(x, "memory: starting a Slurm lab with %d nodes", n);
        int e = bx_lab_start_nodes(x, &lab, n);
        if (e == 0 && bx_lab_jwt_key(&lab, &jwt, &jwt_len) == 0) {
            fs.rest_url = lab.rest_url;
            fs.slurm_conf = lab.newer ? NULL : lab.slurm_conf; /* newer: REST writes only */
            fs.jwt_key = jwt;
            fs.jwt_len = jwt_len;
            fs.restapi = 0; /* created in step 3 */
        } else {
            slurm_skip = e == OP_ENOTSUP ? "the Slurm lab needs root and Slurm's packages"
                                         : "the Slurm lab did not start";
            want_slurm = 0;
            bx_lab_stop(x, &lab);
        }
    }
    bx_fleet f;
    long rss[4] = {-1, -1, -1, -1}, rss_fresh = -1;
    long long heap[4] = {-1, -1, -1, -1}, heap_fresh = -1;
    /* scrapes for the breakdown by cache: at the baseline, and once
     * everything is cached (the last step measured) */
    bx_metrics mb0 = {NULL, 0}, mb1 = {NULL, 0};
    int writes_quiet = -1, api_quiet = -1;
    double api_wait = NAN;
    double writes_wait = NAN, podinfo_writes = NAN, podinfo_s = NAN;
    double idle_cpu = NAN, idle_s = NAN, polls = NAN, poll_bytes = NAN, full_bytes = NAN, pod_json = NAN;
    double polls_304 = NAN, polls_full = NAN, polls_err = NAN, idle_writes = NAN, idle_loop = NAN;
    bx_step(x, "memory: baseline");
    int rc = bx_fleet_open(x, &f, "memory", 0, 0, want_slurm ? &fs : NULL);
    int pid = rc == 0 ? bx_proc_pid(f.op.proc) : 0;
    if (rc == 0) {
        rss[0] = settle_rss(x, &f.op);
        heap[0] = heap_in_use(x, &f.op);
        (void)bx_scrape(x, &f.op, &mb0);
        /* 1. Nodes (kubesim only: a real cluster's Nodes are in the baseline) */
        if (f.have_ks) {
            bx_step(x, "memory: %d Nodes", n);
            char body[64];
            snprintf(body, sizeof(body), "{\"count\":%d}", n);
            rc = bx_admin(x, &f.ks, "POST", "/kubesim/nodes/add", body, NULL);
            struct cache_wait cw = {x, &f.op, "nodes", n, 0};
            if (rc == 0 && bx_wait(x, cache_reached, &cw, 120) == 0) {
                rss[1] = settle_rss(x, &f.op);
                heap[1] = heap_in_use(x, &f.op);
            }
        }
        /* 2. pods */
        bx_step(x, "memory: %d pods", n);
        if (rc == 0)
            rc = bx_scale(x, &f.api, n);
        if (rc == 0)
            rc = bx_fleet_converge(x, &f, n, 600);
        if (rc == 0) {
            rss[2] = settle_rss(x, &f.op);
            heap[2] = heap_in_use(x, &f.op);
            (void)bx_scrape(x, &f.op, &mb1);
        }
        cJSON *list = NULL;
        if (rc == 0 && bx_list(x, &f.api, &KUBE_PODS, x->ns, NULL, &list) == 0) {
            char *text = cJSON_PrintUnformatted(json_get(list, "items"));
            pod_json = (double)strlen(text) / n;
            free(text);
        }
        cJSON_Delete(list);
        /* 3. Slurm nodes */
        if (rc == 0 && want_slurm) {
            bx_step(x, "memory: %d Slurm nodes", n);
            bx_metrics mw;
            double wr0 =
                bx_scrape(x, &f.op, &mw) == 0 ? bx_metric(&mw, "slurmop_slurm_node_writes_total", NULL) : NAN;
            bx_metrics_free(&mw);
            uint64_t tw0 = uv_hrtime();
            rc = bx_make_restapi(x, &f.api);
            struct slurm_wait sw = {x, &f.op, n, 0};
            if (rc == 0 && bx_wait(x, slurm_reached, &sw, 120) == 0) {
                /* What is measured is the cache, not the queue of pod-info
                 * writes (one per node) that follows a scale-out. */
                uint64_t w0 = uv_hrtime();
                writes_quiet = bx_wait_slurm_quiet(x, &f.op, 3.0, 300) == 0;
                writes_wait = bx_secs(w0, uv_hrtime());
                /* the pod-info writes: from the RestApi's creation to the
                 * last write (the wait ended 3 s after it) */
                if (bx_scrape(x, &f.op, &mw) == 0) {
                    podinfo_writes = bx_metric(&mw, "slurmop_slurm_node_writes_total", NULL) - wr0;
                    podinfo_s = bx_secs(tw0, uv_hrtime()) - (writes_quiet ? 3.0 : 0.0);
                }
                bx_metrics_free(&mw);
                if (!writes_quiet)
                    bx_say(x, "bench: memory: Slurm node writes still going after %.0f s; measuring anyway",
                           writes_wait);
                /* ... nor the pod writes that mirror Slurm's view (conditions,
                 * labels) queued behind a slow API server: on the real
                 * control plane at 8,192 nodes some 10,000 were still in
                 * flight when the idle window ended, and their bodies and
                 * events were most of the heap and all of the "idle" CPU. */
                uint64_t a0 = uv_hrtime();
                api_quiet = bx_wait_api_quiet(x, &f.op, 3.0, 900) == 0;
                api_wait = bx_secs(a0, uv_hrtime());
                if (!api_quiet)
                    bx_say(x, "bench: memory: API requests still in flight after %.0f s; measuring anyway",
                           api_wait);
                /* ... nor a full node table being read and applied (the
                 * first poll after the last write reads the whole table:
                 * at 8,192 nodes its parse alone is tens of MiB while it
                 * lasts): a 304 says none is. */
                if (wait_not_modified(x, &f.op, 120) != 0)
                    bx_say(x, "bench: memory: no node poll answered 304 within 120 s; measuring anyway");
                rss[3] = settle_rss(x, &f.op);
                heap[3] = heap_in_use(x, &f.op);
                bx_metrics_free(&mb1);
                (void)bx_scrape(x, &f.op, &mb1);
            } else {
                bx_say(x, "bench: memory: the operator did not cache the lab's %d nodes", n);
                want_slurm = 0;
                slurm_skip = "the operator did not cache the lab's nodes";
            }
        }
        /* idle */
        if (rc == 0) {
            bx_obs_stop(x, f.obs); /* nothing of ours may move during the idle window */
            f.obs = NULL;
            bx_step(x, "memory: idle for %.0f s", x->idle_s);
            int quiet = bx_wait_quiet(x, &f.op, 2.0, 30) == 0;
            if (!quiet)
                bx_say(x,
                       "bench: memory: the operator's queue is still busy; measuring the idle window anyway");
            if (want_slurm) { /* idle means no Slurm writes either */
                (void)bx_wait_slurm_quiet(x, &f.op, 3.0, 60);
                /* ... and the last of them read back: the first node poll
                 * after a write reads the whole table (it changed), and at
                 * 8,192 nodes the poll interval (twice a full read) is
                 * longer than the quiet wait, so that read used to fall in
                 * the window (26.05: 1 of 2 polls). A 304 says the cache
                 * has caught up. */
                if (wait_not_modified(x, &f.op, 120) != 0)
                    bx_say(x, "bench: memory: no node poll answered 304 within 120 s; measuring anyway");
            }
            bx_metrics m0, m1;
            (void)bx_scrape(x, &f.op, &m0);
            double c0 = bx_cpu_seconds(pid), l0 = bx_loop_cpu_seconds(pid);
            uint64_t t0 = uv_hrtime();
            bx_sleep(x, x->idle_s);
            double c1 = bx_cpu_seconds(pid), l1 = bx_loop_cpu_seconds(pid);
            idle_s = bx_secs(t0, uv_hrtime());
            (void)bx_scrape(x, &f.op, &m1);
            idle_cpu = (c1 - c0) / idle_s;
            idle_loop = (l1 - l0) / idle_s;
            if (want_slurm) {
                polls = bx_metric(&m1, "slurmop_slurm_node_polls_total", NULL) -
                        bx_metric(&m0, "slurmop_slurm_node_polls_total", NULL);
                double bytes = bx_metric(&m1, "slurmop_slurm_received_bytes", NULL) -
                               bx_metric(&m0, "slurmop_slurm_received_bytes", NULL);
                poll_bytes = polls > 0 ? bytes / polls : NAN;
#define DELTA(name, filter) (bx_metric(&m1, name, filter) - bx_metric(&m0, name, filter))
                polls_304 = DELTA("slurmop_slurm_node_polls_total", "result=\"not_modified\"");
                polls_full = DELTA("slurmop_slurm_node_polls_total", "result=\"full\"");
                polls_err = DELTA("slurmop_slurm_node_polls_total", "result=\"error\"");
                idle_writes = DELTA("slurmop_slurm_node_writes_total", NULL);
#undef DELTA
                /* the limit: one full node table, as the operator's version reads it */
                const char *argv[] = {"curl", "-s", "-o", "/dev/null", "-w", "%{size_download}",
                                      "-H",   NULL, "-H", NULL,        NULL, NULL};
                char *h1 = xasprintf("X-SLURM-USER-NAME: %s", lab.rest_user);
                char *h2 = xasprintf("X-SLURM-USER-TOKEN: %s", lab.rest_token);
                char *url = xasprintf("%s/slurm/%s/nodes", lab.rest_url, lab.api);
                argv[7] = h1;
                argv[9] = h2;
                argv[10] = url;
                char *out = NULL;
                if (bx_run(x, argv, NULL, NULL, 60, &out) == 0)
                    full_bytes = strtod(out, NULL);
                free(out);
                free(h1);
                free(h2);
                free(url);
            }
            bx_metrics_free(&m0);
            bx_metrics_free(&m1);
        }
        /* a fresh operator over the same cluster */
        if (rc == 0) {
            bx_step(x, "memory: a fresh operator over the same cluster");
            bx_slurmop_stop(x, &f.op);
            const char *extra[6] = {NULL};
            char *rest = NULL;
            if (want_slurm) {
                rest = xasprintf("%s/slurm=%s", x->ns, lab.rest_url);
                extra[0] = "--slurmrestd";
                extra[1] = rest;
                if (!lab.newer) {
                    extra[2] = "--slurm-conf";
                    extra[3] = lab.slurm_conf;
                }
            }
            rc = bx_slurmop_start(x, "slurmop-memory-fresh.log", f.kubeconfig, extra, &f.op);
            free(rest);
            if (rc == 0 && want_slurm) {
                struct slurm_wait sw = {x, &f.op, n, 0};
                (void)bx_wait(x, slurm_reached, &sw, 120);
            }
            if (rc == 0) {
                rss_fresh = settle_rss(x, &f.op);
                heap_fresh = heap_in_use(x, &f.op);
            }
        }
    }
    bx_fleet_close(x, &f);
    char *version = lab.version ? xstrdup(lab.version) : NULL;
    char *api = xstrdup(lab.api ? lab.api : "v0.0.38");
    int newer = lab.newer;
    if (lab.started)
        bx_lab_stop(x, &lab);
    free(jwt);

    bx_table *t = bx_table_new("Memory: slurmop's RSS and live heap as its caches fill, and its idle cost", 6,
                               "step", "RSS", "RSS Δ per object", "live heap", "heap Δ per object", "target");
    const char *steps[4] = {"baseline (cluster objects only)", "+ %d Nodes", "+ %d pods", "+ %d Slurm nodes"};
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "n", n);
    cJSON *js = cJSON_AddArrayToObject(o, "steps");
    int prev = -1;
    for (int i = 0; i < 4; i++) {
        char a[64], b[32], c[32], d[32], e[32];
        snprintf(a, sizeof(a), steps[i], n);
        if (rss[i] < 0) {
            if (i == 1 && x->kubeconfig)
                bx_table_row(t, "the cluster's Nodes", "in the baseline", "", "", "", "--kubeconfig");
            else
                bx_table_row(t, a, i == 3 && slurm_skip ? "not measured" : "—", "", "", "",
                             i == 3 && slurm_skip ? slurm_skip : "");
            continue;
        }
        double per = prev >= 0 ? (double)(rss[i] - rss[prev]) * 1024.0 / n : NAN;
        double hper = prev >= 0 && heap[i] >= 0 && heap[prev] >= 0 ? (double)(heap[i] - heap[prev]) / n : NAN;
        snprintf(b, sizeof(b), "%.1f MiB", rss[i] / 1024.0);
        snprintf(c, sizeof(c), isfinite(per) ? "%.0f B" : "", per);
        snprintf(d, sizeof(d), heap[i] >= 0 ? "%.1f MiB" : "n/a", (double)heap[i] / 1048576.0);
        snprintf(e, sizeof(e), isfinite(hper) ? "%.0f B" : "", hper);
        bx_table_row(t, a, b, c, d, e, i == 2 ? "≤ 1 KiB per pod" : "");
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "step", a);
        cJSON_AddNumberToObject(j, "rssKiB", (double)rss[i]);
        cJSON_AddItemToObject(j, "rssBytesPerObject", bx_num(per));
        cJSON_AddItemToObject(j, "heapInUseBytes", bx_num((double)heap[i]));
        cJSON_AddItemToObject(j, "heapBytesPerObject", bx_num(hper));
        cJSON_AddItemToArray(js, j);
        prev = i;
    }
    long total = rss[3] >= 0 ? rss[3] : rss[2];
    long long htotal = heap[3] >= 0 ? heap[3] : heap[2];
    {
        char b[32], d[48];
        snprintf(b, sizeof(b), "%.1f MiB", rss_fresh / 1024.0);
        snprintf(d, sizeof(d), heap_fresh >= 0 ? "%.1f MiB" : "n/a", (double)heap_fresh / 1048576.0);
        bx_table_row(t, "fresh operator over the same cluster", rss_fresh >= 0 ? b : "—", "",
                     rss_fresh >= 0 ? d : "", "", "≤ 64 MiB in total");
        snprintf(b, sizeof(b), "%.3f %% of a core", idle_cpu * 100);
        snprintf(d, sizeof(d), "over %.0f s (loop %.3f %%)", idle_s, idle_loop * 100);
        bx_table_row(t, "idle CPU", isfinite(idle_cpu) ? b : "—", isfinite(idle_s) ? d : "", "", "",
                     "< 0.5 % of a core");
        char c[64], e[48];
        snprintf(b, sizeof(b), "%.0f B", poll_bytes);
        snprintf(c, sizeof(c), "%.0f polls: %.0f×304, %.0f full", polls, polls_304, polls_full);
        snprintf(e, sizeof(e), "full table %.1f MB", full_bytes / 1e6);
        bx_table_row(t, "bytes per Slurm poll, nothing changed", isfinite(poll_bytes) ? b : "not measured",
                     isfinite(polls) ? c : "", isfinite(full_bytes) ? e : (slurm_skip ? slurm_skip : ""), "",
                     "≤ 1 KB");
    }
    bx_table_note(t,
                  "RSS: VmRSS once the queue was quiet for 1 s; live heap: the operator's "
                  "slurmop_heap_inuse_bytes (glibc mallinfo2); per object: the step's growth / %d. A JSON "
                  "pod as served is %.0f B.",
                  n, pod_json);
    if (want_slurm && version)
        bx_table_note(t, "Slurm: %s, REST %s; node writes through %s.", version, api,
                      newer ? "REST" : "libslurm");
    if (writes_quiet >= 0)
        bx_table_note(t,
                      "With Slurm, RSS and heap were read (and the idle window began) once the operator's "
                      "Slurm node writes (pod info after the scale-out) had stopped for 3 s: %.0f s after "
                      "its nodes were cached%s; the idle window began once a node poll had answered 304 "
                      "after that (the writes read back); %.0f writes during the idle window.",
                      writes_wait, writes_quiet ? "" : " (waited at most 300 s)", idle_writes);
    if (api_quiet >= 0)
        bx_table_note(
            t,
            "They were read after the Kubernetes writes that follow Slurm's view (pod conditions and "
            "labels) had all been answered too (slurmop_api_requests_in_flight{kind=\"request\"} 0 "
            "for 3 s): %.0f s after the Slurm writes settled%s.",
            api_wait, api_quiet ? "" : " (waited at most 900 s; still in flight)");
    if (isfinite(podinfo_writes) && podinfo_s > 0)
        bx_table_note(t,
                      "Pod info (each node's comment, one write per node with a comment of its own): %.0f "
                      "node writes in %.1f s after the RestApi appeared, %.0f per second, through %s.",
                      podinfo_writes, podinfo_s, podinfo_writes / podinfo_s,
                      newer ? "REST (one request per node)" : "libslurm");
    free(version);
    free(api);
    bx_table_emit(x, t);
    if (mb0.n && mb1.n)
        breakdown_emit(x, &mb0, &mb1, n, o);
    bx_metrics_free(&mb0);
    bx_metrics_free(&mb1);
    cJSON_AddItemToObject(o, "freshRssKiB", bx_num((double)rss_fresh));
    cJSON_AddItemToObject(o, "freshHeapInUseBytes", bx_num((double)heap_fresh));
    cJSON_AddItemToObject(o, "idleCpuShare", bx_num(idle_cpu));
    cJSON_AddItemToObject(o, "idleSeconds", bx_num(idle_s));
    cJSON_AddItemToObject(o, "idleSlurmPolls", bx_num(polls));
    cJSON_AddItemToObject(o, "idleSlurmPollsNotModified", bx_num(polls_304));
    cJSON_AddItemToObject(o, "idleSlurmPollsFull", bx_num(polls_full));
    cJSON_AddItemToObject(o, "idleSlurmPollsError", bx_num(polls_err));
    cJSON_AddItemToObject(o, "idleSlurmNodeWrites", bx_num(idle_writes));
    cJSON_AddItemToObject(o, "slurmWritesSettleSeconds", bx_num(writes_wait));
    cJSON_AddItemToObject(o, "apiWritesSettleSeconds", bx_num(api_wait));
    cJSON_AddItemToObject(o, "podInfoWrites", bx_num(podinfo_writes));
    cJSON_AddItemToObject(o, "podInfoSeconds", bx_num(podinfo_s));
    cJSON_AddItemToObject(o, "idleLoopCpuShare", bx_num(idle_loop));
    cJSON_AddItemToObject(o, "bytesPerIdlePoll", bx_num(poll_bytes));
    cJSON_AddItemToObject(o, "fullNodeTableBytes", bx_num(full_bytes));
    cJSON_AddItemToObject(o, "podJsonBytes", bx_num(pod_json));
    if (slurm_skip)
        cJSON_AddStringToObject(o, "slurmSkipped", slurm_skip);
    cJSON_AddItemToObject(x->results, "memory", o);

    char note[96], a[96], b[96];
    snprintf(note, sizeof(note), "N = %d%s", n, rss[3] < 0 ? " (no Slurm nodes)" : "");
    int base = rss[1] >= 0 ? 1 : 0;
    if (rss[2] >= 0 && rss[base] >= 0) {
        double per = (double)(rss[2] - rss[base]) * 1024.0 / n;
        double hper = heap[2] >= 0 && heap[base] >= 0 ? (double)(heap[2] - heap[base]) / n : NAN;
        double judge = isfinite(hper) ? hper : per;
        if (isfinite(hper))
            snprintf(a, sizeof(a), "%.0f B live heap per pod (%.0f B RSS)", hper, per);
        else
            snprintf(a, sizeof(a), "%.0f B RSS per pod", per);
        snprintf(b, sizeof(b), "1 KiB (a pod's JSON: %.0f B)", pod_json);
        bx_target(x, "≤ 1 KiB per cached pod", a, b, judge / 1024, judge <= 1024 ? "met" : "missed", note);
    }
    if (total >= 0 || rss_fresh >= 0) {
        long worst = total > rss_fresh ? total : rss_fresh;
        if (htotal >= 0)
            snprintf(a, sizeof(a), "RSS %.1f MiB, fresh start %.1f MiB; live heap %.1f MiB", total / 1024.0,
                     rss_fresh / 1024.0, (double)htotal / 1048576.0);
        else
            snprintf(a, sizeof(a), "RSS %.1f MiB, fresh start %.1f MiB", total / 1024.0, rss_fresh / 1024.0);
        bx_target(x, "RSS with N pods, N Nodes and N Slurm nodes cached ≤ 64 MiB", a, "64 MiB",
                  worst / 65536.0,
                  rss[3] < 0
                      ? (worst <= 65536 ? "met so far (no Slurm nodes)" : "missed (even without Slurm nodes)")
                  : worst <= 65536 ? "met"
                                   : "missed",
                  note);
    }
    if (isfinite(idle_cpu)) {
        snprintf(a, sizeof(a), "%.3f %% of a core", idle_cpu * 100);
        bx_target(x, "idle < 0.5 % of a core", a, "0.5 %", idle_cpu / 0.005,
                  idle_cpu < 0.005 ? "met" : "missed", note);
    }
    if (isfinite(poll_bytes)) {
        snprintf(a, sizeof(a), "%.0f B per poll (%.0f polls)", poll_bytes, polls);
        snprintf(b, sizeof(b), "1 KB (full table %.1f MB)", full_bytes / 1e6);
        bx_target(x, "an idle Slurm poll moves ≤ 1 KB", a, b, poll_bytes / 1000,
                  poll_bytes <= 1000 ? "met" : "missed", note);
    } else {
        bx_target(x, "an idle Slurm poll moves ≤ 1 KB", "not measured", "1 KB", NAN, "not measured",
                  slurm_skip ? slurm_skip : "");
    }
    return rc;
}
