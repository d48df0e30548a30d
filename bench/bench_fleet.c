/* bench_fleet: the steady state several scenarios start from: a cluster
 * (kubesim with N Nodes, or the user's), the benchmark's objects, slurmop
 * running, NodeSet "gpu" scaled to N and every pod Ready, the queue quiet. */
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "core/err.h"
#include "core/json.h"

struct prog {
    bx_obs *obs;
    int n;
};

static void status_line(void *arg, char *out, size_t len)
{
    struct prog *p = arg;
    bx_obs_counts c;
    bx_obs_counts_get(p->obs, &c);
    snprintf(out, len, "%d/%d pods, %d Ready, readyReplicas %d", c.exist, p->n, c.ready, c.ns_ready);
}

static int converged(void *arg)
{
    struct prog *p = arg;
    bx_obs_counts c;
    bx_obs_counts_get(p->obs, &c);
    return c.exist == p->n && c.ready == p->n && c.terminating == 0 && c.ns_ready == p->n &&
           c.ns_replicas == p->n;
}

int bx_fleet_converge(bx_ctx *x, bx_fleet *f, int n, double timeout_s)
{
    /* On a real control plane kube-scheduler and kwok set the pace (about
     * 13 pods a second at 8,192 with a Slurm lab on the same two cores: 7,502
     * of 8,192 Ready after 600 s), not the operator. */
    if (x->real_k8s)
        timeout_s += 0.12 * n;
    struct prog p = {f->obs, n};
    bx_set_status(x, status_line, &p);
    int rc = bx_wait(x, converged, &p, timeout_s);
    bx_set_status(x, NULL, NULL);
    if (rc) {
        bx_obs_counts c;
        bx_obs_counts_get(f->obs, &c);
        bx_say(x,
               "bench: NodeSet gpu did not converge to %d Ready pods in %.0f s (%d pods, %d Ready, "
               "readyReplicas %d)",
               n, timeout_s, c.exist, c.ready, c.ns_ready);
        /* show a few of the pods that are not Ready, for the log */
        cJSON *list = NULL;
        if (bx_list(x, &f->api, &KUBE_PODS, x->ns, "labelSelector=app.kubernetes.io%2Finstance%3Dgpu",
                    &list) == 0) {
            int shown = 0;
            const cJSON *it;
            cJSON_ArrayForEach(it, json_get(list, "items"))
            {
                const cJSON *cd;
                const char *why = "";
                int ready = 0;
                cJSON_ArrayForEach(cd, json_get(it, "status.conditions"))
                {
                    const char *type = json_get_str(cd, "type"), *st = json_get_str(cd, "status");
                    if (type && st && strcmp(type, "Ready") == 0 && strcmp(st, "True") == 0)
                        ready = 1;
                    if (st && strcmp(st, "True") != 0 && json_get_str(cd, "message"))
                        why = json_get_str(cd, "message");
                }
                if (ready || shown >= 5)
                    continue;
                shown++;
                bx_say(x, "bench:   %s: phase %s, node %s%s %s", json_get_str_or(it, "metadata.name", "?"),
                       json_get_str_or(it, "status.phase", "-"), json_get_str_or(it, "spec.nodeName", "-"),
                       json_get(it, "metadata.deletionTimestamp") ? ", terminating," : "", why);
            }
            cJSON_Delete(list);
        }
    }
    return rc;
}

/* On a real cluster: remove the pods of NodeSet "gpu" (and any left by the
 * limit) and wait until they are gone. Listed in pages: one LIST of 8,192
 * pods is ~40 MB, and a failed one ended the scale-out at that size. */
#define CLEAN_SEL "labelSelector=app.kubernetes.io%2Finstance%3Dgpu"

int bx_clean_pods(bx_ctx *x, bx_api *api)
{
    char cont[1024] = "";
    for (int page = 0; page < 1000; page++) {
        char *q = xasprintf("%s&limit=500%s%s", CLEAN_SEL, cont[0] ? "&continue=" : "", cont);
        cJSON *list = NULL;
        int rc = bx_list(x, api, &KUBE_PODS, x->ns, q, &list);
        free(q);
        if (rc == OP_EGONE && cont[0]) {
            /* the token outlived etcd's compaction (5 min) while the pages
             * were deleted one by one: from the top again, skipping the pods
             * already terminating */
            cont[0] = '\0';
            continue;
        }
        if (rc != 0) {
            bx_say(x, "bench: listing the pods to clean up: %s", err_str(rc));
            return rc;
        }
        const cJSON *it;
        cJSON_ArrayForEach(it, json_get(list, "items"))
        {
            const char *name = json_get_str(it, "metadata.name");
            if (name && !json_get(it, "metadata.deletionTimestamp"))
                (void)bx_delete(x, api, &KUBE_PODS, x->ns, name);
        }
        /* the token is base64 (URL-safe alphabet but '=' padding) */
        const char *tok = json_get_str(list, "metadata.continue");
        size_t o = 0;
        for (const char *c = tok ? tok : ""; *c && o + 4 < sizeof(cont); c++)
            o += (size_t)(*c == '=' ? snprintf(cont + o, sizeof(cont) - o, "%%3D")
                                    : snprintf(cont + o, sizeof(cont) - o, "%c", *c));
        cont[o] = '\0';
        cJSON_Delete(list);
        if (o == 0)
            break;
    }
    for (int i = 0; i < 1200 && !bx_stop_requested(x); i++) {
        cJSON *list = NULL;
        int rc = bx_list(x, api, &KUBE_PODS, x->ns, CLEAN_SEL "&limit=1", &list);
        if (rc != 0) {
            bx_say(x, "bench: waiting for the pods to go: %s", err_str(rc));
            return rc;
        }
        int n = json_len(json_get(list, "items"));
        cJSON_Delete(list);
        if (n == 0)
            return 0;
        bx_sleep(x, 0.5);
    }
    bx_say(x, "bench: the NodeSet's pods were not gone after 600 s");
    return OP_ETIMEOUT;
}

int bx_fleet_open(bx_ctx *x, bx_fleet *f, const char *tag, int k8s_nodes, int pods,
                  const bx_fleet_slurm *slurm)
{
    char log[96];
    memset(f, 0, sizeof(*f));
    f->n = pods;
    if (x->kubeconfig) {
        f->kubeconfig = x->kubeconfig;
    } else {
        snprintf(log, sizeof(log), "kubesim-%s.log", tag);
        if (bx_kubesim_start(x, log, k8s_nodes, NULL, &f->ks) != 0)
            return OP_EIO;
        f->kubeconfig = f->ks.kubeconfig;
        f->have_ks = 1;
    }
    if (bx_api_open(x, f->kubeconfig, &f->api) != 0)
        return OP_EIO;
    /* pods an interrupted run left would be cached, and conflict */
    if (x->kubeconfig && bx_clean_pods(x, &f->api) != 0)
        return OP_EIO;
    /* Without Slurm nothing can confirm a drain: the NodeSet opts out. */
    int rc = bx_make_cluster(x, &f->api, 0, slurm ? slurm->jwt_key : NULL, slurm ? slurm->jwt_len : 0,
                             slurm && slurm->restapi, slurm == NULL);
    if (rc)
        return rc;
    const char *extra[8];
    int a = 0;
    char *rest = NULL;
    if (slurm && slurm->rest_url) {
        rest = xasprintf("%s/slurm=%s", x->ns, slurm->rest_url);
        extra[a++] = "--slurmrestd";
        extra[a++] = rest;
        if (slurm->slurm_conf) {
            extra[a++] = "--slurm-conf";
            extra[a++] = slurm->slurm_conf;
        }
    }
    extra[a] = NULL;
    snprintf(log, sizeof(log), "slurmop-%s.log", tag);
    rc = bx_slurmop_start(x, log, f->kubeconfig, extra, &f->op);
    free(rest);
    if (rc)
        return rc;
    (void)bx_wait_quiet(x, &f->op, 0.3, 60);
    f->obs = bx_obs_start(x, &f->api, x->ns);
    if (pods > 0) {
        bx_step(x, "%s: scaling the NodeSet to %d pods", tag, pods);
        uint64_t t0 = uv_hrtime();
        rc = bx_scale(x, &f->api, pods);
        if (rc == 0)
            rc = bx_fleet_converge(x, f, pods, 600);
        f->scale_s = rc == 0 ? bx_secs(t0, uv_hrtime()) : -1;
        if (rc == 0 && bx_wait_quiet(x, &f->op, 1.0, slurm ? 30 : 120) != 0)
            bx_say(x, "bench: the operator's queue did not settle within %d s after the scale-out",
                   slurm ? 30 : 120);
    }
    return rc;
}

void bx_fleet_close(bx_ctx *x, bx_fleet *f)
{
    x->cleanup++;
    bx_obs_stop(x, f->obs);
    f->obs = NULL;
    if (x->kubeconfig && f->api.kc) {
        /* Leave the cluster as it was: the benchmark's objects go while the
         * operator still runs (it removes the NodeSet's drain finalizer), and
         * so do the pods, before the next scenario starts. */
        if (f->op.proc)
            (void)bx_scale(x, &f->api, 0);
        (void)bx_delete(x, &f->api, &SLINKY_NODESETS, x->ns, "gpu");
        (void)bx_clean_pods(x, &f->api);
        for (int i = 0; f->op.proc && i < 120 && !bx_stop_requested(x); i++) {
            if (bx_get(x, &f->api, &SLINKY_NODESETS, x->ns, "gpu", NULL) == OP_ENOTFOUND)
                break;
            bx_sleep(x, 0.5);
        }
        /* last: without it the operator keeps condemned pods (DrainBlockedNoRestApi) */
        (void)bx_delete(x, &f->api, &SLINKY_RESTAPIS, x->ns, "slurm");
    }
    if (f->op.proc)
        bx_slurmop_stop(x, &f->op);
    if (f->api.kc)
        bx_api_close(x, &f->api);
    if (f->have_ks)
        bx_kubesim_stop(x, &f->ks);
    memset(f, 0, sizeof(*f));
    x->cleanup--;
}
