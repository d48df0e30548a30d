/* bench_env: the binaries under test (kubesim, slurmop) as child processes,
 * and the benchmark's Slurm cluster objects. */
#include <dirent.h>
#include <glob.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench/bench.h"
#include "core/crypto.h"
#include "core/err.h"
#include "core/file.h"
#include "core/json.h"
#include "core/yaml.h"
#include "reconcilers/nodeset.h"
#include "reconcilers/nodeset_build.h"

/* ------------------------------------------------------------------ */
/* kubesim */

static char *read_small(const char *path)
{
    char *s = NULL;
    size_t len = 0;
    if (file_read_all(path, 1u << 20, &s, &len) != 0)
        return NULL;
    return s;
}

int bx_kubesim_start(bx_ctx *x, const char *log, int nodes, const char *const *extra, bx_kubesim *ks)
{
    char tmpl[] = "/tmp/slurmop-bench-ks.XXXXXX";
    memset(ks, 0, sizeof(*ks));
    if (mkdtemp(tmpl) == NULL) {
        bx_say(x, "bench: mkdtemp: %s", strerror(errno));
        return OP_ERRNO(errno);
    }
    ks->dir = xstrdup(tmpl);
    ks->kubeconfig = xasprintf("%s/kubeconfig", ks->dir);
    char *port_file = xasprintf("%s/port.json", ks->dir);
    char *bin = xasprintf("%s/kubesim", x->bin_dir);
    char nbuf[16];
    snprintf(nbuf, sizeof(nbuf), "%d", nodes);
    const char *argv[64];
    int a = 0;
    argv[a++] = bin;
    argv[a++] = "--nodes";
    argv[a++] = nbuf;
    argv[a++] = "--node-gpus";
    argv[a++] = "8";
    argv[a++] = "--write-kubeconfig";
    argv[a++] = ks->kubeconfig;
    argv[a++] = "--port-file";
    argv[a++] = port_file;
    argv[a++] = "--http-port";
    argv[a++] = "0";
    argv[a++] = "--log-level";
    argv[a++] = "warn";
    for (int i = 0; extra && extra[i] && a < 62; i++)
        argv[a++] = extra[i];
    argv[a] = NULL;
    char *log_path = xasprintf("%s/%s", x->log_dir, log);
    ks->proc = bx_proc_start(x, "kubesim", argv, NULL, log_path);
    free(log_path);
    free(bin);
    int rc = ks->proc ? OP_ETIMEOUT : OP_EINVAL;
    uint64_t deadline = uv_hrtime() + 30000000000ull;
    while (ks->proc && uv_hrtime() < deadline && !bx_proc_exited(ks->proc) && !bx_stop_requested(x)) {
        char *s = read_small(port_file);
        cJSON *pf = s ? cJSON_Parse(s) : NULL;
        free(s);
        if (pf && json_get_str(pf, "url") && json_get_str(pf, "http")) {
            ks->url = xstrdup(json_get_str(pf, "url"));
            ks->http_url = xstrdup(json_get_str(pf, "http"));
            cJSON_Delete(pf);
            rc = 0;
            break;
        }
        cJSON_Delete(pf);
        bx_sleep(x, 0.02);
    }
    free(port_file);
    if (rc == 0 && access(ks->kubeconfig, R_OK) != 0)
        rc = OP_ENOTFOUND;
    if (rc == 0)
        ks->admin = bx_pool_new(x, ks->http_url);
    if (rc || ks->admin == NULL) {
        bx_say(x, "bench: kubesim did not start (see %s/%s)", x->log_dir, log);
        bx_kubesim_stop(x, ks);
        return rc ? rc : OP_EINVAL;
    }
    return 0;
}

static void rm_tree(const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        char *p = xasprintf("%s/%s", dir, e->d_name);
        unlink(p);
        free(p);
    }
    closedir(d);
    rmdir(dir);
}

void bx_kubesim_stop(bx_ctx *x, bx_kubesim *ks)
{
    bx_pool_close(x, ks->admin);
    if (ks->proc) {
        int rc = bx_proc_stop(x, ks->proc, SIGTERM, 30);
        if (rc != 0)
            bx_say(x, "bench: kubesim exited with status %d", rc);
    }
    if (ks->dir)
        rm_tree(ks->dir);
    free(ks->dir);
    free(ks->kubeconfig);
    free(ks->url);
    free(ks->http_url);
    memset(ks, 0, sizeof(*ks));
}

int bx_admin(bx_ctx *x, bx_kubesim *ks, const char *method, const char *path, const char *body, cJSON **out)
{
    bx_resp r;
    int rc = bx_http(x, ks->admin, method, path, body ? "application/json" : NULL, body, 60, &r);
    if (rc == 0 && r.status >= 300)
        rc = OP_EHTTP;
    if (rc)
        bx_say(x, "bench: kubesim admin %s %s: %s (HTTP %d) %.200s", method, path, err_str(rc), r.status,
               r.body ? r.body : "");
    if (out)
        *out = rc == 0 ? cJSON_Parse(r.body) : NULL;
    bx_resp_free(&r);
    return rc;
}

/* ------------------------------------------------------------------ */
/* slurmop */

/* The listeners' addresses from the log: "serving /metrics /healthz /readyz
 * on HOST:PORT", metrics first (operator.c starts it first). */
static int find_listeners(const char *log_path, char **metrics, char **health)
{
    char *s = NULL;
    size_t len = 0;
    if (file_read_all(log_path, 64u << 20, &s, &len) != 0)
        return 0;
    const char *key = "serving /metrics /healthz /readyz on ";
    char *found[2] = {NULL, NULL};
    int n = 0;
    for (const char *p = s; n < 2 && (p = strstr(p, key)) != NULL; n++) {
        p += strlen(key);
        size_t k = strcspn(p, " \r\n");
        found[n] = xasprintf("http://%.*s", (int)k, p);
    }
    free(s);
    if (n < 2) {
        free(found[0]);
        return 0;
    }
    *metrics = found[0];
    *health = found[1];
    return 1;
}

int bx_slurmop_start(bx_ctx *x, const char *log, const char *kubeconfig, const char *const *extra,
                     bx_slurmop *op)
{
    memset(op, 0, sizeof(*op));
    char *bin = xasprintf("%s/slurmop", x->bin_dir);
    char qps[32];
    snprintf(qps, sizeof(qps), "%g", x->qps);
    const char *argv[64];
    int a = 0;
    argv[a++] = bin;
    argv[a++] = "--kubeconfig";
    argv[a++] = kubeconfig;
    argv[a++] = "--metrics-addr";
    argv[a++] = "127.0.0.1:0";
    argv[a++] = "--health-addr";
    argv[a++] = "127.0.0.1:0";
    argv[a++] = "--log-level";
    argv[a++] = "info";
    if (!isnan(x->qps)) { /* NAN: slurmop's own default */
        argv[a++] = "--qps";
        argv[a++] = qps;
    }
    for (int i = 0; extra && extra[i] && a < 44; i++)
        argv[a++] = extra[i];
    for (int i = 0; i < x->n_op_args && a < 62; i++)
        argv[a++] = x->op_args[i];
    argv[a] = NULL;
    op->log = xasprintf("%s/%s", x->log_dir, log);
    unlink(op->log);
    /* sanitizer builds (CI) must not stop on leak reports of a killed child */
    const char *env[] = {"ASAN_OPTIONS=detect_leaks=0", NULL};
    op->proc = bx_proc_start(x, "slurmop", argv, env, op->log);
    bx_proc_pin(x, op->proc);
    free(bin);
    if (op->proc == NULL)
        return OP_EINVAL;
    uint64_t deadline = uv_hrtime() + 30000000000ull;
    while (uv_hrtime() < deadline && !bx_proc_exited(op->proc) && !bx_stop_requested(x) &&
           !find_listeners(op->log, &op->metrics_url, &op->health_url))
        bx_sleep(x, 0.02);
    if (op->metrics_url == NULL) {
        bx_say(x, "bench: slurmop did not start (see %s)", op->log);
        bx_slurmop_stop(x, op);
        return OP_ETIMEOUT;
    }
    op->metrics = bx_pool_new(x, op->metrics_url);
    hc_pool *health = bx_pool_new(x, op->health_url);
    int rc = OP_ETIMEOUT;
    while (uv_hrtime() < deadline && !bx_proc_exited(op->proc) && !bx_stop_requested(x)) {
        bx_resp r;
        if (bx_http(x, health, "GET", "/readyz", NULL, NULL, 5, &r) == 0 && r.status == 200) {
            bx_resp_free(&r);
            rc = 0;
            break;
        }
        bx_resp_free(&r);
        bx_sleep(x, 0.05);
    }
    bx_pool_close(x, health);
    if (rc) {
        bx_say(x, "bench: slurmop did not become ready (see %s)", op->log);
        bx_slurmop_stop(x, op);
    }
    return rc;
}

int bx_slurmop_stop(bx_ctx *x, bx_slurmop *op)
{
    bx_pool_close(x, op->metrics);
    int rc = 0;
    if (op->proc) {
        rc = bx_proc_stop(x, op->proc, SIGTERM, 30);
        if (rc != 0)
            bx_say(x, "bench: slurmop exited with status %d (see %s)", rc, op->log);
    }
    free(op->log);
    free(op->metrics_url);
    free(op->health_url);
    memset(op, 0, sizeof(*op));
    return rc;
}

int bx_scrape(bx_ctx *x, bx_slurmop *op, bx_metrics *m)
{
    bx_resp r;
    memset(m, 0, sizeof(*m));
    int rc = bx_http(x, op->metrics, "GET", "/metrics", NULL, NULL, 10, &r);
    if (rc == 0 && r.status != 200)
        rc = OP_EHTTP;
    if (rc == 0)
        bx_metrics_parse(r.body, m);
    else
        m->v = xmalloc(sizeof(*m->v));
    bx_resp_free(&r);
    return rc;
}

/* Scrape until sample() has reported "idle" with the same value for
 * quiet_s: the one wait loop behind bx_wait_quiet and bx_wait_slurm_quiet. */
static int wait_stable(bx_ctx *x, bx_slurmop *op, double quiet_s, double timeout_s, double poll_s,
                       int (*sample)(const bx_metrics *m, double *value))
{
    uint64_t deadline = uv_hrtime() + (uint64_t)(timeout_s * 1e9), since = uv_hrtime();
    double last = NAN;
    int seen = 0;
    while (uv_hrtime() < deadline && !bx_stop_requested(x)) {
        bx_metrics m;
        if (bx_scrape(x, op, &m) == 0) {
            double v = 0;
            int idle = sample(&m, &v);
            uint64_t now = uv_hrtime();
            if (!idle || !seen || v != last)
                since = now;
            last = v;
            seen = 1;
            if (bx_secs(since, now) >= quiet_s) {
                bx_metrics_free(&m);
                return 0;
            }
        }
        bx_metrics_free(&m);
        bx_sleep(x, poll_s);
    }
    return OP_ETIMEOUT;
}

static int slurm_writes(const bx_metrics *m, double *value)
{
    *value = bx_metric(m, "slurmop_slurm_node_writes_total", NULL);
    return 1;
}

static int nodeset_queue(const bx_metrics *m, double *value)
{
    const char *q = "name=\"" NODESET_CONTROLLER "\"";
    *value = bx_metric(m, "workqueue_adds_total", q);
    return bx_metric(m, "workqueue_depth", q) <= 0 &&
           bx_metric(m, "workqueue_unfinished_work_seconds", q) <= 0;
}

int bx_wait_slurm_quiet(bx_ctx *x, bx_slurmop *op, double quiet_s, double timeout_s)
{
    return wait_stable(x, op, quiet_s, timeout_s, 0.25, slurm_writes);
}

/* No API request but the open watches (a backlog of writes behind a slow
 * API server reads > 0; an older operator without the gauge reads 0). */
static int api_requests(const bx_metrics *m, double *value)
{
    double v = bx_metric(m, "slurmop_api_requests_in_flight", "kind=\"request\"");
    *value = 0;
    return !(v > 0);
}

int bx_wait_api_quiet(bx_ctx *x, bx_slurmop *op, double quiet_s, double timeout_s)
{
    return wait_stable(x, op, quiet_s, timeout_s, 0.25, api_requests);
}

int bx_wait_quiet(bx_ctx *x, bx_slurmop *op, double quiet_s, double timeout_s)
{
    return wait_stable(x, op, quiet_s, timeout_s, 0.1, nodeset_queue);
}

/* ------------------------------------------------------------------ */
/* the cluster's objects */

static int apply_crds(bx_ctx *x, bx_api *api)
{
    char *dir = x->crd_dir ? xstrdup(x->crd_dir) : xasprintf("%s/crds", x->src_dir);
    char *pattern = xasprintf("%s/*.yaml", dir);
    glob_t g;
    int rc = glob(pattern, 0, NULL, &g);
    free(pattern);
    if (rc != 0) {
        bx_say(x, "bench: no CRDs under %s", dir);
        free(dir);
        return OP_ENOTFOUND;
    }
    free(dir);
    rc = 0;
    for (size_t i = 0; i < g.gl_pathc && rc == 0; i++) {
        char err[256], *text = NULL;
        size_t len = 0;
        cJSON *docs = NULL;
        if (file_read_all(g.gl_pathv[i], 16u << 20, &text, &len) == 0)
            docs = yaml_parse_all(text, len, err, sizeof(err));
        else
            snprintf(err, sizeof(err), "cannot read");
        free(text);
        if (docs == NULL) {
            bx_say(x, "bench: %s: %s", g.gl_pathv[i], err);
            rc = OP_EPARSE;
            break;
        }
        const cJSON *d;
        cJSON_ArrayForEach(d, docs)
        {
            int e = bx_create(x, api, &KUBE_CRDS, NULL, d, NULL);
            if (e && e != OP_EEXISTS)
                rc = e;
        }
        cJSON_Delete(docs);
    }
    globfree(&g);
    if (rc)
        return rc;
    /* served once a list answers */
    for (int tries = 0; tries < 200; tries++) {
        const kube_res *all[] = {&SLINKY_NODESETS, &SLINKY_CONTROLLERS, &SLINKY_RESTAPIS};
        int ok = 1;
        for (size_t i = 0; i < sizeof(all) / sizeof(all[0]) && ok; i++)
            ok = bx_list(x, api, all[i], x->ns, "limit=1", NULL) == 0;
        if (ok)
            return 0;
        bx_sleep(x, 0.05);
    }
    bx_say(x, "bench: the CRDs are not served");
    return OP_ETIMEOUT;
}

static int create_json(bx_ctx *x, bx_api *api, const kube_res *res, const char *ns, const char *json)
{
    cJSON *o = cJSON_Parse(json);
    if (o == NULL) {
        bx_say(x, "bench: internal: bad JSON %.80s", json);
        return OP_EINVAL;
    }
    int rc = bx_create(x, api, res, ns, o, NULL);
    cJSON_Delete(o);
    return rc == OP_EEXISTS ? 0 : rc;
}

/* On a cluster that outlives the scenarios (--kubeconfig, --cluster real)
 * an object of an earlier scenario may be there: bring it in line (merge
 * patch of the same body) instead of keeping what that scenario wanted, e.g.
 * an older lab's JWT key. */
static int create_or_patch(bx_ctx *x, bx_api *api, const kube_res *res, const char *ns, const char *name,
                           const char *json)
{
    int rc = create_json(x, api, res, ns, json);
    if (rc == 0 && x->kubeconfig)
        rc = bx_patch(x, api, res, ns, name, NULL, json, NULL);
    return rc;
}

static char *secret_json(const char *name, const char *key, const char *data, size_t len)
{
    char *b64 = base64_encode(data, len);
    char *s = xasprintf("{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":{\"name\":\"%s\"},"
                        "\"data\":{\"%s\":\"%s\"}}",
                        name, key, b64);
    free(b64);
    return s;
}

/* NodeSet "gpu" is absent or not being deleted; one being deleted has its
 * finalizers lifted and is waited for (up to 15 minutes). */
static int wait_nodeset_gone(bx_ctx *x, bx_api *api)
{
    for (int i = 0; i < 1800; i++) {
        cJSON *o = NULL;
        int rc = bx_get(x, api, &SLINKY_NODESETS, x->ns, "gpu", &o);
        int terminating = rc == 0 && json_get(o, "metadata.deletionTimestamp") != NULL;
        cJSON_Delete(o);
        if (rc == OP_ENOTFOUND || (rc == 0 && !terminating))
            return 0;
        if (rc != 0)
            return rc;
        if (i == 0) {
            /* The earlier scenario's operator is gone: nobody will drain
             * its pods and lift the drain finalizer, so the harness does
             * (its own cluster; the garbage collector then takes the pods). */
            bx_say(x, "bench: NodeSet gpu of an earlier scenario is being deleted: lifting its finalizers");
            (void)bx_patch(x, api, &SLINKY_NODESETS, x->ns, "gpu", NULL,
                           "{\"metadata\":{\"finalizers\":null}}", NULL);
        }
        bx_sleep(x, 0.5);
    }
    bx_say(x, "bench: NodeSet gpu was still being deleted after 15 minutes");
    return OP_ETIMEOUT;
}

int bx_make_cluster(bx_ctx *x, bx_api *api, int replicas, const char *jwt_key, size_t jwt_len, int restapi,
                    int no_drain)
{
    int rc;
    if (strcmp(x->ns, "default") != 0) {
        char *s =
            xasprintf("{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"%s\"}}", x->ns);
        rc = create_json(x, api, &KUBE_NAMESPACES, NULL, s);
        free(s);
        if (rc)
            return rc;
    }
    if ((rc = apply_crds(x, api)) != 0)
        return rc;
    char key[64];
    memset(key, 'k', sizeof(key));
    char *s = secret_json("slurm-auth-slurm", "slurm.key", key, sizeof(key));
    rc = create_or_patch(x, api, &KUBE_SECRETS, x->ns, "slurm-auth-slurm", s);
    free(s);
    memset(key, 'j', sizeof(key));
    s = secret_json("slurm-auth-jwt", "jwt.key", jwt_key ? jwt_key : key, jwt_key ? jwt_len : sizeof(key));
    rc = rc ? rc : create_or_patch(x, api, &KUBE_SECRETS, x->ns, "slurm-auth-jwt", s);
    free(s);
    if (rc)
        return rc;
    /* Images: kubesim never pulls them; a real cluster runs the pause image
     * (and a shell image for the log sidecars). */
    const char *sidecar = x->kubeconfig ? "busybox:1.36" : "alpine:3.20";
    const char *img_ctld = x->kubeconfig ? x->image : "ghcr.io/slinkyproject/slurmctld:25.11";
    s = xasprintf("{\"apiVersion\":\"slinky.slurm.net/v1beta1\",\"kind\":\"Controller\","
                  "\"metadata\":{\"name\":\"slurm\"},\"spec\":{"
                  "\"slurmKeyRef\":{\"name\":\"slurm-auth-slurm\",\"key\":\"slurm.key\"},"
                  "\"jwtKeyRef\":{\"name\":\"slurm-auth-jwt\",\"key\":\"jwt.key\"},"
                  "\"slurmctld\":{\"image\":\"%s\"},\"reconfigure\":{\"image\":\"%s\"},"
                  "\"logfile\":{\"image\":\"%s\"},"
                  "\"persistence\":{\"enabled\":false}}}",
                  img_ctld, img_ctld, sidecar);
    rc = create_json(x, api, &SLINKY_CONTROLLERS, x->ns, s);
    free(s);
    if (rc)
        return rc;
    if (restapi && (rc = bx_make_restapi(x, api)) != 0)
        return rc;
    /* On a real cluster the pods run the pause image: its "-v" flag prints
     * the version and exits 0, which makes a working exec probe. */
    const char *probes = "";
    /* --peer: kwok's Node heartbeats lag on a loaded machine and the node
     * lifecycle controller taints those Nodes not-ready for a while; the
     * pods tolerate it, so that scheduling does not wait on the load */
    static const char tolerations[] =
        ",\"tolerations\":[{\"key\":\"node.kubernetes.io/not-ready\",\"operator\":\"Exists\"},"
        "{\"key\":\"node.kubernetes.io/unreachable\",\"operator\":\"Exists\"}]";
    /* --pod-shape gpu: one pod per Node from the GPU requests (see --help) */
    static const char gpus[] = ",\"resources\":{\"requests\":{\"nvidia.com/gpu\":\"8\"},"
                               "\"limits\":{\"nvidia.com/gpu\":\"8\"}}";
    if (x->kubeconfig)
        probes = ",\"startupProbe\":{\"exec\":{\"command\":[\"/pause\",\"-v\"]}},"
                 "\"livenessProbe\":{\"exec\":{\"command\":[\"/pause\",\"-v\"]}},"
                 "\"readinessProbe\":{\"exec\":{\"command\":[\"/pause\",\"-v\"]}}";
    s = xasprintf(
        "{\"apiVersion\":\"slinky.slurm.net/v1beta1\",\"kind\":\"NodeSet\",\"metadata\":{\"name\":\"gpu\"%s},"
        "\"spec\":{\"controllerRef\":{\"name\":\"slurm\",\"namespace\":\"%s\"},\"replicas\":%d,"
        "\"template\":{\"spec\":{\"hostname\":\"gpu-\"%s}},"
        "\"slurmd\":{\"image\":\"%s\"%s%s},\"logfile\":{\"image\":\"%s\"}%s}}",
        no_drain ? ",\"annotations\":{\"nodeset.slinky.slurm.net/delete-without-drain\":\"true\"}" : "",
        x->ns, replicas, x->tolerate_unready ? tolerations : "", x->image, probes, x->gpu_shape ? gpus : "",
        sidecar, x->gpu_shape ? ",\"oversubscribeNode\":true" : "");
    /* On a shared cluster the previous scenario's NodeSet may still be
     * terminating (its drain finalizer waits for its pods): a create then
     * answers 409 and the NodeSet vanishes later, leaving the run without
     * one. Wait for it to go first. */
    if (x->kubeconfig && (rc = wait_nodeset_gone(x, api)) != 0) {
        free(s);
        return rc;
    }
    rc = create_json(x, api, &SLINKY_NODESETS, x->ns, s);
    free(s);
    /* a NodeSet left by an earlier scenario keeps that scenario's drain
     * annotation otherwise (a scale-in without drains after a run without Slurm) */
    if (rc == 0 && x->kubeconfig)
        rc = bx_patch(
            x, api, &SLINKY_NODESETS, x->ns, "gpu", NULL,
            no_drain
                ? "{\"metadata\":{\"annotations\":{\"nodeset.slinky.slurm.net/"
                  "delete-without-drain\":\"true\"}}}"
                : "{\"metadata\":{\"annotations\":{\"nodeset.slinky.slurm.net/delete-without-drain\":null}}}",
            NULL);
    return rc;
}

int bx_make_worker_objects(bx_ctx *x, bx_api *api)
{
    cJSON *ns = NULL;
    int rc = bx_get(x, api, &SLINKY_NODESETS, x->ns, "gpu", &ns);
    if (rc != 0)
        return rc;
    nsb_owner owner = {json_get_str_or(ns, "metadata.name", "gpu"), json_get_str_or(ns, "metadata.uid", "")};
    cJSON *objs[2] = {nsb_build_worker_service("slurm", x->ns, &owner, 1),
                      nsb_build_worker_pdb("slurm", x->ns, &owner, 1)};
    const kube_res *res[2] = {&KUBE_SERVICES, &KUBE_PDBS};
    for (int i = 0; i < 2; i++) {
        if (rc == 0) {
            int c = bx_create(x, api, res[i], x->ns, objs[i], NULL);
            rc = c == OP_EEXISTS ? 0 : c;
        }
        cJSON_Delete(objs[i]);
    }
    cJSON_Delete(ns);
    return rc;
}

int bx_make_restapi(bx_ctx *x, bx_api *api)
{
    char *s = xasprintf("{\"apiVersion\":\"slinky.slurm.net/v1beta1\",\"kind\":\"RestApi\","
                        "\"metadata\":{\"name\":\"slurm\"},\"spec\":{\"controllerRef\":{\"name\":\"slurm\","
                        "\"namespace\":\"%s\"},\"slurmrestd\":{\"image\":\"%s\"}}}",
                        x->ns,
                        x->kubeconfig ? x->image : "ghcr.io/slinkyproject/slurmrestd:25.11");
    int rc = create_json(x, api, &SLINKY_RESTAPIS, x->ns, s);
    free(s);
    return rc;
}

int bx_scale(bx_ctx *x, bx_api *api, int replicas)
{
    char patch[64];
    snprintf(patch, sizeof(patch), "{\"spec\":{\"replicas\":%d}}", replicas);
    return bx_patch(x, api, &SLINKY_NODESETS, x->ns, "gpu", "scale", patch, NULL);
}

char **bx_build_pods(bx_ctx *x, bx_api *api, int n)
{
    cJSON *ns = NULL, *ctl = NULL;
    if (bx_get(x, api, &SLINKY_NODESETS, x->ns, "gpu", &ns) != 0 ||
        bx_get(x, api, &SLINKY_CONTROLLERS, x->ns, "slurm", &ctl) != 0) {
        cJSON_Delete(ns);
        cJSON_Delete(ctl);
        bx_say(x, "bench: cannot read the NodeSet and its Controller");
        return NULL;
    }
    cJSON *d = nsb_with_defaults(ns);
    /* the revision label the operator would stamp (the first revision) */
    cJSON *rpatch = nsb_revision_patch(d);
    char hash[NSB_HASH_MAX];
    nsb_revision_hash(rpatch, 0, hash);
    cJSON_Delete(rpatch);
    nsb_pod_args a;
    memset(&a, 0, sizeof(a));
    a.nodeset = d;
    a.controller = ctl;
    a.revision = hash;
    a.cluster_domain = "cluster.local";
    char err[256];
    cJSON *tmpl = nsb_build_template(&a, err, sizeof(err));
    char **out = NULL;
    if (tmpl == NULL) {
        bx_say(x, "bench: pod template: %s", err);
    } else {
        out = xcalloc((size_t)n + 1, sizeof(char *));
        for (int i = 0; i < n; i++) {
            a.ordinal = i;
            cJSON *pod = nsb_stamp_pod(&a, tmpl, err, sizeof(err));
            if (pod == NULL) {
                bx_say(x, "bench: pod %d: %s", i, err);
                bx_free_strv(out, (size_t)i);
                out = NULL;
                break;
            }
            out[i] = cJSON_PrintUnformatted(pod);
            cJSON_Delete(pod);
        }
    }
    cJSON_Delete(tmpl);
    cJSON_Delete(d);
    cJSON_Delete(ns);
    cJSON_Delete(ctl);
    return out;
}

void bx_free_strv(char **v, size_t n)
{
    if (v == NULL)
        return;
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}
