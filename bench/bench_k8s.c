/* bench_k8s: the real control plane as the harness uses it (--cluster real):
 * tests/k8s/cluster.sh (etcd, kube-apiserver, kube-controller-manager,
 * kube-scheduler and kwok on loopback, built from their Go modules) started
 * in <out>/k8s with the run's KWOK Nodes, restarted and compacted by the
 * restart scenario, stopped at the end. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench.h"
#include "core/err.h"
#include "core/file.h"

/* Run `cluster.sh <verb> [arg...]` for this run's K8S_DIR; its stderr goes to
 * logs/k8s-cluster.log. */
static int cluster_sh(bx_ctx *x, const char *const *args, double timeout_s, char **out)
{
    char *script = xasprintf("%s/tests/k8s/cluster.sh", x->src_dir);
    char *e_dir = xasprintf("K8S_DIR=%s", x->k8s_dir);
    const char *env[] = {e_dir, NULL};
    const char *argv[8] = {"/bin/bash", script};
    int a = 2;
    for (int i = 0; args[i] && a < 7; i++)
        argv[a++] = args[i];
    argv[a] = NULL;
    char *log = xasprintf("%s/k8s-cluster.log", x->log_dir);
    int rc = bx_run(x, argv, env, log, timeout_s, out);
    free(script);
    free(e_dir);
    free(log);
    return rc;
}

/* --k8s-dir: a cluster that cluster.sh started earlier (it takes minutes
 * to make thousands of KWOK Nodes Ready): checked, given the Nodes the run
 * wants (`cluster.sh nodes N` adds, never removes), used, left running. */
static int k8s_reuse(bx_ctx *x, const char *n)
{
    bx_step(x, "real control plane: reusing %s (cluster.sh nodes %s)", x->k8s_dir, n);
    const char *status[] = {"status", NULL};
    if (cluster_sh(x, status, 60, NULL) != 0) {
        bx_say(x, "bench: --k8s-dir %s: cluster.sh status says it does not run (start it with "
                  "`K8S_DIR=%s bash tests/k8s/cluster.sh start --nodes %s --crds crds`)",
               x->k8s_dir, x->k8s_dir, n);
        return OP_EINVAL;
    }
    const char *add[] = {"nodes", n, NULL};
    if (cluster_sh(x, add, 3600, NULL) != 0) {
        bx_say(x, "bench: cluster.sh nodes %s failed (see %s/k8s-cluster.log)", n, x->log_dir);
        return OP_EIO;
    }
    x->kubeconfig = xasprintf("%s/admin.kubeconfig", x->k8s_dir);
    x->real_k8s = 1;
    return 0;
}

int bx_k8s_start(bx_ctx *x, int nodes)
{
    char n[16];
    snprintf(n, sizeof(n), "%d", nodes);
    if (x->k8s_reuse)
        return k8s_reuse(x, n);
    if (x->k8s_dir == NULL)
        x->k8s_dir = xasprintf("%s/k8s", x->out_dir);
    bx_step(x, "real control plane: starting (cluster.sh start --nodes %d)", nodes);
    const char *args[] = {"start", "--nodes", n, NULL};
    uint64_t t0 = uv_hrtime();
    /* Building the binaries on a fresh machine takes many minutes (build.sh) */
    int rc = cluster_sh(x, args, 7200, NULL);
    if (rc != 0) {
        bx_say(x, "bench: cluster.sh start exited %d (see %s/k8s-cluster.log and %s/log/)", rc, x->log_dir,
               x->k8s_dir);
        bx_k8s_stop(x);
        return rc == 77 ? OP_ENOTSUP : OP_EIO;
    }
    x->kubeconfig = xasprintf("%s/admin.kubeconfig", x->k8s_dir);
    x->real_k8s = 1;
    bx_say(x, "bench: real control plane up with %d KWOK Nodes in %.0f s (%s)", nodes,
           bx_secs(t0, uv_hrtime()), x->k8s_dir);
    return 0;
}

void bx_k8s_stop(bx_ctx *x)
{
    if (x->k8s_dir == NULL || x->k8s_reuse)
        return;
    x->cleanup++;
    bx_step(x, "real control plane: stopping");
    const char *args[] = {"stop", NULL};
    int rc = cluster_sh(x, args, 120, NULL);
    if (rc != 0)
        bx_say(x, "bench: cluster.sh stop exited %d (see %s/k8s-cluster.log)", rc, x->log_dir);
    /* etcd's data of 8,192 Nodes is hundreds of MB; the logs stay */
    char *etcd = xasprintf("%s/etcd", x->k8s_dir);
    const char *rm[] = {"rm", "-rf", etcd, NULL};
    (void)bx_run(x, rm, NULL, NULL, 60, NULL);
    free(etcd);
    x->cleanup--;
}

int bx_k8s_compact(bx_ctx *x)
{
    const char *args[] = {"compact", NULL};
    return cluster_sh(x, args, 60, NULL) == 0 ? 0 : OP_EIO;
}

int bx_k8s_restart_apiserver(bx_ctx *x)
{
    const char *args[] = {"restart-apiserver", NULL};
    return cluster_sh(x, args, 180, NULL) == 0 ? 0 : OP_EIO;
}

int bx_k8s_apiserver_pid(bx_ctx *x)
{
    char *path = xasprintf("%s/run/kube-apiserver.pid", x->k8s_dir), *s = NULL;
    size_t len = 0;
    int pid = 0;
    if (file_read_all(path, 64, &s, &len) == 0)
        pid = atoi(s);
    free(s);
    free(path);
    return pid;
}
