/* Scenario 5: the API server restarts under a steady fleet of N pods.
 *
 * On the real control plane (--cluster real) the restart is the real one:
 * etcd's history is compacted, kube-apiserver gets SIGTERM and is started
 * again on the same port (tests/k8s/cluster.sh restart-apiserver); every
 * connection and watch ends, and its fresh watch cache answers the
 * operator's old resourceVersions 410. There are no server-side counters of
 * one client's requests, so the calls are the operator's own
 * (slurmop_api_requests_total by verb), and resync is when every cache's
 * relist counter moved (/metrics scraped every 50 ms once the API server is
 * ready again).
 *
 * kubesim's POST /kubesim/restart drops every connection and watch and
 * compacts its history, so every watch the operator re-opens from its last
 * resourceVersion is answered 410 Gone and every cache must relist. The
 * harness counts what the operator does about it:
 *  - time to resync: from the restart until kubesim serves as many
 *    watches as before (the operator's; a reflector watches again once its
 *    relist is done; polled every 20 ms from kubesim, which costs the
 *    operator nothing), confirmed by every resource's
 *    slurmop_watch_relists_total having moved;
 *  - loop time: the CPU time (utime + stime, 10 ms ticks) of the operator's
 *    main thread, which runs the libuv loop, over the same window; the
 *    process's CPU (threadpool included: big LIST pages are parsed there)
 *    beside it;
 *  - LIST and WATCH calls, and writes by verb, from kubesim's request
 *    counters (reset just before the restart; nothing else talks to it);
 *  - reconciles of the NodeSet controller (controller_runtime_reconcile_total)
 *    and its queue adds, until the queue has been quiet for a second.
 * The limit beside the loop time is the harness's own LIST of the same N
 * pods (one call, parsed with cJSON), timed on the same kubesim.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "core/err.h"
#include "core/json.h"
#include "reconcilers/nodeset.h"

#define QN "name=\"" NODESET_CONTROLLER "\""
#define QC "controller=\"" NODESET_CONTROLLER "\""

static const kube_res KUBE_SERVICEACCOUNTS_BENCH = {"", "v1", "serviceaccounts", "ServiceAccount", 1};

/* Every resource whose relist counter moved past its value in m0. */
static int all_relisted(const bx_metrics *m0, const bx_metrics *m, int *missing, char *which, size_t len)
{
    int total = 0;
    *missing = 0;
    which[0] = '\0';
    for (size_t i = 0; i < m0->n; i++) {
        if (strcmp(m0->v[i].name, "slurmop_watch_relists_total") != 0)
            continue;
        total++;
        if (bx_metric(m, "slurmop_watch_relists_total", m0->v[i].labels) <= m0->v[i].v) {
            (*missing)++;
            size_t l = strlen(which);
            snprintf(which + l, len - l, "%s%s", l ? " " : "", m0->v[i].labels);
        }
    }
    return total > 0 && *missing == 0;
}

static double counter(const cJSON *cnt, const char *verb)
{
    const cJSON *v = json_get(cnt, "byVerb");
    v = v ? json_child(v, verb) : NULL;
    return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

/* 1 when kubesim's history was compacted since st0 (its /kubesim/stats
 * before the restart): some resource's "compacted" moved. */
static int restarted(bx_ctx *x, bx_kubesim *ks, const cJSON *st0)
{
    cJSON *st = NULL;
    int moved = 0;
    if (st0 == NULL || bx_admin(x, ks, "GET", "/kubesim/stats", NULL, &st) != 0)
        return 0;
    const cJSON *r;
    cJSON_ArrayForEach(r, json_get(st, "resources"))
    {
        const cJSON *r0 = json_child(json_get(st0, "resources"), r->string);
        if (r0 && json_get_int(r, "compacted", 0) != json_get_int(r0, "compacted", 0))
            moved = 1;
    }
    cJSON_Delete(st);
    return moved;
}

/* The restart on the real control plane: compact, restart kube-apiserver,
 * then scrape until every cache relisted. m0 gets the scrape before. */
static int restart_real(bx_ctx *x, bx_fleet *f, bx_metrics *m0, double *resync_s, double *ready_s,
                        double *cpu_s, double *loop_s, int *missing, char *which, size_t len)
{
    (void)bx_wait_quiet(x, &f->op, 1.0, 60);
    memset(m0, 0, sizeof(*m0));
    /* A write the operator does not watch moves etcd's revision past every
     * cache's; the compaction removes the history in between. */
    cJSON *marker = cJSON_Parse("{\"apiVersion\":\"v1\",\"kind\":\"ServiceAccount\","
                                "\"metadata\":{\"name\":\"bench-restart-marker\"}}");
    (void)bx_create(x, &f->api, &KUBE_SERVICEACCOUNTS_BENCH, x->ns, marker, NULL);
    cJSON_Delete(marker);
    if (bx_k8s_compact(x) != 0)
        bx_say(x, "bench: restart: the etcd compaction failed (see logs/k8s-cluster.log)");
    (void)bx_scrape(x, &f->op, m0);
    int pid = bx_proc_pid(f->op.proc);
    double cpu0 = bx_cpu_seconds(pid), loop0 = bx_loop_cpu_seconds(pid);
    uint64_t t0 = uv_hrtime();
    bx_step(x, "restart: kube-apiserver restarts (cluster.sh restart-apiserver)");
    int rc = bx_k8s_restart_apiserver(x);
    if (rc != 0) {
        bx_say(x, "bench: restart: cluster.sh restart-apiserver failed (see logs/k8s-cluster.log)");
        return rc;
    }
    *ready_s = bx_secs(t0, uv_hrtime());
    bx_step(x, "restart: waiting for every cache to relist");
    uint64_t deadline = uv_hrtime() + 120000000000ull;
    while (uv_hrtime() < deadline && !bx_stop_requested(x)) {
        bx_metrics m;
        uint64_t t = uv_hrtime();
        double cpu = bx_cpu_seconds(pid), loop = bx_loop_cpu_seconds(pid);
        int ok = bx_scrape(x, &f->op, &m) == 0 && all_relisted(m0, &m, missing, which, len);
        bx_metrics_free(&m);
        if (ok) {
            *resync_s = bx_secs(t0, t);
            *cpu_s = cpu - cpu0;
            *loop_s = loop - loop0;
            return 0;
        }
        bx_sleep(x, 0.05);
    }
    bx_say(
        x,
        "bench: restart: not resynced within 120 s of the API server's return (%d caches did not relist: %s)",
        *missing, which);
    return OP_ETIMEOUT;
}

int scen_restart(bx_ctx *x)
{
    if (x->kubeconfig && !x->real_k8s) {
        bx_say(
            x,
            "bench: restart: skipped (the harness cannot restart the API server of a --kubeconfig cluster; "
            "--cluster real can)");
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "skipped", "needs kubesim's /kubesim/restart");
        cJSON_AddItemToObject(x->results, "restart", o);
        return 0;
    }
    int n = 0;
    for (int i = 0; i < x->n_sizes; i++)
        if (x->sizes[i] > n)
            n = x->sizes[i];
    bx_fleet f;
    bx_step(x, "restart: starting a fleet of %d pods", n);
    int rc = bx_fleet_open(x, &f, "restart", x->k8s_nodes > n ? x->k8s_nodes : n, n, NULL);
    double list_s = NAN, resync_s = NAN, cpu_s = NAN, loop_s = NAN, settle_s = NAN;
    double lists = NAN, watches = NAN, writes = NAN, reconciles = NAN, adds = NAN, pod_lists = NAN;
    double list_bytes = NAN, ready_s = NAN;
    cJSON *writes_by = NULL;
    char missing_which[512] = "";
    int missing = 0, resources = 0;
    if (rc == 0) {
        /* the observer would add its own LIST and WATCH to kubesim's counters */
        bx_obs_stop(x, f.obs);
        f.obs = NULL;
        bx_step(x, "restart: a bare LIST of %d pods (the limit)", n);
        cJSON *list = NULL;
        uint64_t t = uv_hrtime();
        if (bx_list(x, &f.api, &KUBE_PODS, x->ns, NULL, &list) == 0) {
            list_s = bx_secs(t, uv_hrtime());
            char *text = cJSON_PrintUnformatted(list);
            list_bytes = (double)strlen(text);
            free(text);
        }
        cJSON_Delete(list);
        if (x->real_k8s) {
            bx_metrics m0, m;
            rc = restart_real(x, &f, &m0, &resync_s, &ready_s, &cpu_s, &loop_s, &missing, missing_which,
                              sizeof(missing_which));
            for (size_t i = 0; i < m0.n; i++)
                resources += strcmp(m0.v[i].name, "slurmop_watch_relists_total") == 0;
            uint64_t t_q = uv_hrtime();
            (void)bx_wait_quiet(x, &f.op, 1.0, 60);
            settle_s = bx_secs(t_q, uv_hrtime()) + (isfinite(resync_s) ? resync_s : 0);
            (void)bx_scrape(x, &f.op, &m);
            reconciles = bx_metric(&m, "controller_runtime_reconcile_total", QC) -
                         bx_metric(&m0, "controller_runtime_reconcile_total", QC);
            adds = bx_metric(&m, "workqueue_adds_total", QN) - bx_metric(&m0, "workqueue_adds_total", QN);
#define D(filter) (bx_metric(&m, "slurmop_api_requests_total", filter) - \
                   bx_metric(&m0, "slurmop_api_requests_total", filter))
            lists = D("verb=\"LIST\"");
            pod_lists = D("verb=\"LIST\",resource=\"pods\"");
            watches = D("verb=\"WATCH\"");
            writes_by = cJSON_CreateObject();
            writes = 0;
            static const char *const wverbs[] = {"POST", "PUT", "PATCH", "DELETE"};
            for (size_t k = 0; k < sizeof(wverbs) / sizeof(wverbs[0]); k++) {
                char filt[48];
                snprintf(filt, sizeof(filt), "verb=\"%s\"", wverbs[k]);
                double v = D(filt);
                writes += v;
                if (v > 0)
                    cJSON_AddNumberToObject(writes_by, wverbs[k], v);
            }
#undef D
            bx_metrics_free(&m);
            bx_metrics_free(&m0);
            goto report;
        }
        bx_step(x, "restart: kubesim restarts (watches dropped, history compacted)");
        (void)bx_wait_quiet(x, &f.op, 1.0, 60);
        bx_metrics m0, m;
        (void)bx_scrape(x, &f.op, &m0);
        for (size_t i = 0; i < m0.n; i++)
            resources += strcmp(m0.v[i].name, "slurmop_watch_relists_total") == 0;
        /* A write to a resource the operator does not watch moves the global
         * resourceVersion past every cache's, so after the compaction every
         * watch gets 410 and every cache relists (the scenario of the issue). */
        cJSON *marker = cJSON_Parse("{\"apiVersion\":\"v1\",\"kind\":\"ServiceAccount\","
                                    "\"metadata\":{\"name\":\"bench-restart-marker\"}}");
        (void)bx_create(x, &f.api, &KUBE_SERVICEACCOUNTS_BENCH, x->ns, marker, NULL);
        cJSON_Delete(marker);
        cJSON *st0 = NULL;
        long long watches0 = 0;
        if (bx_admin(x, &f.ks, "GET", "/kubesim/stats", NULL, &st0) == 0)
            watches0 = json_get_int(st0, "watches", 0);
        (void)bx_admin(x, &f.ks, "POST", "/kubesim/counters/reset", "{}", NULL);
        int pid = bx_proc_pid(f.op.proc);
        double cpu0 = bx_cpu_seconds(pid), loop0 = bx_loop_cpu_seconds(pid);
        uint64_t t0 = uv_hrtime();
        rc = bx_admin(x, &f.ks, "POST", "/kubesim/restart", "{}", NULL);
        if (rc != 0 && rc != OP_EHTTP && restarted(x, &f.ks, st0)) {
            /* kubesim drops every connection 50 ms after its answer, the
             * admin one too: on a loaded machine the answer can be lost
             * with it although the restart happened */
            bx_say(x,
                   "bench: restart: the answer was lost with the dropped connections; kubesim did restart");
            rc = 0;
        }
        cJSON_Delete(st0);
        uint64_t deadline = t0 + 60000000000ull;
        int done = 0;
        while (rc == 0 && uv_hrtime() < deadline && !bx_stop_requested(x)) {
            /* Poll kubesim (free for the operator) until the operator's
             * watches are all back; only then scrape /metrics, whose
             * rendering would otherwise add to the CPU time measured. */
            cJSON *st = NULL;
            long long w = -1;
            if (bx_admin(x, &f.ks, "GET", "/kubesim/stats", NULL, &st) == 0)
                w = json_get_int(st, "watches", -1);
            cJSON_Delete(st);
            if (w >= watches0) {
                uint64_t t_w = uv_hrtime();
                double cpu_w = bx_cpu_seconds(pid), loop_w = bx_loop_cpu_seconds(pid);
                if (bx_scrape(x, &f.op, &m) == 0 &&
                    all_relisted(&m0, &m, &missing, missing_which, sizeof(missing_which))) {
                    resync_s = bx_secs(t0, t_w);
                    cpu_s = cpu_w - cpu0;
                    loop_s = loop_w - loop0;
                    done = 1;
                }
                bx_metrics_free(&m);
            }
            if (done)
                break;
            bx_sleep(x, 0.02);
        }
        if (rc == 0 && !done)
            bx_say(x, "bench: restart: not resynced within 60 s (%d of %d caches did not relist: %s)",
                   missing, resources, missing_which);
        (void)bx_wait_quiet(x, &f.op, 1.0, 60);
        settle_s = bx_secs(t0, uv_hrtime());
        (void)bx_scrape(x, &f.op, &m);
        reconciles = bx_metric(&m, "controller_runtime_reconcile_total", QC) -
                     bx_metric(&m0, "controller_runtime_reconcile_total", QC);
        adds = bx_metric(&m, "workqueue_adds_total", QN) - bx_metric(&m0, "workqueue_adds_total", QN);
        bx_metrics_free(&m);
        bx_metrics_free(&m0);
        cJSON *cnt = NULL;
        if (bx_admin(x, &f.ks, "GET", "/kubesim/counters", NULL, &cnt) == 0) {
            lists = counter(cnt, "list");
            watches = counter(cnt, "watch");
            writes = counter(cnt, "create") + counter(cnt, "update") + counter(cnt, "patch") +
                     counter(cnt, "delete") + counter(cnt, "deletecollection");
            const cJSON *pods = json_get(cnt, "byResource.pods");
            pod_lists = pods ? (double)json_get_int(pods, "list", 0) : 0;
            writes_by = cJSON_CreateObject();
            const cJSON *r;
            cJSON_ArrayForEach(r, json_get(cnt, "byResource"))
            {
                static const char *const verbs[] = {"create", "update", "patch", "delete",
                                                    "deletecollection"};
                for (size_t k = 0; k < sizeof(verbs) / sizeof(verbs[0]); k++) {
                    long long v = json_get_int(r, verbs[k], 0);
                    if (v) {
                        char key[160];
                        snprintf(key, sizeof(key), "%s %s", verbs[k], r->string);
                        cJSON_AddNumberToObject(writes_by, key, (double)v);
                    }
                }
            }
        }
        cJSON_Delete(cnt);
        if (!done)
            rc = OP_ETIMEOUT;
    }
report:
    bx_fleet_close(x, &f);

    bx_table *t =
        bx_table_new("API server restart under a steady fleet (watches dropped, history compacted: 410)", 10,
                     "pods", "resync", "loop thread CPU", "process CPU", "bare LIST of the pods",
                     "LIST calls (pods)", "WATCH calls", "NodeSet reconciles", "queue adds", "writes");
    char a[16], b[32], c[32], c2[32], d[48], e[32], g[16], h[16], k[16], l[24];
    snprintf(a, sizeof(a), "%d", n);
    snprintf(e, sizeof(e), "%.0f (%.0f)", lists, pod_lists);
    snprintf(g, sizeof(g), "%.0f", watches);
    snprintf(h, sizeof(h), "%.0f", reconciles);
    snprintf(k, sizeof(k), "%.0f", adds);
    snprintf(l, sizeof(l), "%.0f", writes);
    char ls[24];
    snprintf(d, sizeof(d), "%s (%.1f MB)", bx_fmt_s(ls, sizeof(ls), list_s), list_bytes / 1e6);
    bx_table_row(t, a, bx_fmt_s(b, sizeof(b), resync_s), bx_fmt_s(c2, sizeof(c2), loop_s),
                 bx_fmt_s(c, sizeof(c), cpu_s), d, e, g, h, k, l);
    if (x->real_k8s) {
        bx_table_note(
            t,
            "Real control plane: etcd compacted, then kube-apiserver restarted (SIGTERM, started again on "
            "the "
            "same port: `cluster.sh restart-apiserver`; ready again after %s). resync: from the SIGTERM "
            "until "
            "every one of the %d caches had relisted (the operator's slurmop_watch_relists_total, scraped "
            "every "
            "50 ms once the API server was ready); CPU of the operator's loop thread and of the whole "
            "process "
            "over the same window (10 ms ticks), most of it spent while the API server was down (reconnect "
            "attempts) or on the relists.",
            bx_fmt_s(ls, sizeof(ls), ready_s), resources);
        bx_table_note(t,
                      "Calls and writes: the operator's own slurmop_api_requests_total (WATCH counts watches "
                      "that ended: the ones the restart cut and the attempts refused while the server was "
                      "down), until the queue was quiet for 1 s (%.1f s after the SIGTERM).",
                      settle_s);
    } else {
        bx_table_note(
            t,
            "resync: restart until every one of the %d caches had relisted and watched again (kubesim polled "
            "every 20 ms); CPU of the operator's loop thread and of the whole process (threadpool included) "
            "over the same window (10 ms ticks); counts until the queue was quiet for 1 s (%.1f s).",
            resources, settle_s);
    }
    bx_table_note(
        t,
        "The bare LIST is the harness's own GET of all %d pods in one call, parsed; the operator pages "
        "its lists at 500 items.",
        n);
    bx_table_emit(x, t);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "n", n);
    cJSON_AddItemToObject(o, "resyncSeconds", bx_num(resync_s));
    cJSON_AddItemToObject(o, "apiServerReadySeconds", bx_num(ready_s));
    cJSON_AddStringToObject(o, "cluster", x->real_k8s ? "real" : "kubesim");
    cJSON_AddItemToObject(o, "operatorCpuSeconds", bx_num(cpu_s));
    cJSON_AddItemToObject(o, "loopThreadCpuSeconds", bx_num(loop_s));
    cJSON_AddItemToObject(o, "bareListSeconds", bx_num(list_s));
    cJSON_AddItemToObject(o, "bareListBytes", bx_num(list_bytes));
    cJSON_AddItemToObject(o, "listCalls", bx_num(lists));
    cJSON_AddItemToObject(o, "podListCalls", bx_num(pod_lists));
    cJSON_AddItemToObject(o, "watchCalls", bx_num(watches));
    cJSON_AddItemToObject(o, "nodesetReconciles", bx_num(reconciles));
    cJSON_AddItemToObject(o, "nodesetQueueAdds", bx_num(adds));
    cJSON_AddItemToObject(o, "writes", bx_num(writes));
    cJSON_AddItemToObject(o, "writesBy", writes_by ? writes_by : cJSON_CreateObject());
    cJSON_AddNumberToObject(o, "caches", resources);
    cJSON_AddNumberToObject(o, "cachesNotRelisted", missing);
    cJSON_AddItemToObject(x->results, "restart", o);
    if (isfinite(loop_s)) {
        char m[96], lim[64], note[128];
        snprintf(m, sizeof(m), "%s loop (%s process), %s wall", bx_fmt_s(c2, sizeof(c2), loop_s),
                 bx_fmt_s(c, sizeof(c), cpu_s), bx_fmt_s(b, sizeof(b), resync_s));
        snprintf(lim, sizeof(lim), "250 ms (bare LIST %s)", bx_fmt_s(ls, sizeof(ls), list_s));
        snprintf(note, sizeof(note), "N = %d", n);
        bx_target(x, "relist after an API server restart: ≤ 250 ms of loop time", m, lim, loop_s / 0.25,
                  loop_s <= 0.25 ? "met" : "missed", note);
        snprintf(m, sizeof(m), "%.0f reconciles, %.0f writes", reconciles, writes);
        bx_target(x, "no reconcile storm after a restart: one pass per affected NodeSet, no writes", m,
                  "1 reconcile, 0 writes", reconciles / 1.0,
                  reconciles <= 1 && writes == 0 ? "met" : "missed", note);
    }
    return rc;
}
