/* Scenario: the registration storm of N dynamic nodes, with slurmctld
 * running the slurm.conf the operator generated.
 *
 *  1. kubesim and slurmop as in every scenario; Controller "slurm" and
 *     NodeSet "gpu" (its partition enabled) scaled to N, every pod Ready;
 *     the harness waits for ConfigMap slurm-config to carry the MaxNodeCount
 *     the fleet needs (sconf_max_node_count).
 *  2. A Slurm lab (24.11 or 26.05) started from that slurm.conf
 *     (slurmlab.sh SLURMLAB_CONF_FROM: only the host-specific lines are
 *     rewritten, and the report lists them); the lab's JWT key goes into
 *     Secret slurm-auth-jwt and RestApi "slurm" is created, so the operator
 *     reads and writes the lab's nodes through its slurmrestd.
 *  3. Time 0: the storm. Every pod's slurmd is started as the pod runs it,
 *     `slurmd -Z --conf <the pod's --conf>` (read from pod gpu-0's args),
 *     plus -N <pod hostname> and Port=<a port of its own> (all run on this
 *     host) and -f <the lab's slurm.conf> in place of --conf-server. K of
 *     them (--registration-real) keep running, as pods do; the other N - K
 *     are "cycled": each is started the same way, and stopped once
 *     slurmctld lists its node, with at most C (--registration-cycle)
 *     running at once, each on a port no later slurmd takes (up to
 *     REG_UNIQUE_MAX nodes; past it the C slots share their ports, and the
 *     run says so). Every node is registered by a real slurmd's
 *     MESSAGE_NODE_REGISTRATION_STATUS; a cycled node's record stays (IDLE,
 *     until slurmctld's pings find no slurmd). --registration-pace M caps the
 *     slurmd started and not yet registered (0: no cap).
 *  4. Measured: storm start to every node listed by sinfo and to every node
 *     seen idle; the operator's node table reaching N and its node writes
 *     (pod info, one per node) settling; slurmctld's RPC counts and mean
 *     times from sdiag (reset at time 0); the operator's Slurm polls and
 *     writes and its API requests (its /metrics, differences over the
 *     window); slurmctld's log errors from time 0 (refusals such as
 *     MaxNodeCount or an invalid node name); the RSS of the running slurmd.
 */
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
#include "reconcilers/slurmconf.h"

#define REG_QUICK_N 32
/* sinfo's period: 0.3 s up to 2,048 nodes, then in proportion to N (at
 * most 2 s), so that the harness's own node reads, which slurmctld serves
 * under the lock its registrations take, stay a small share of its time */
#define REG_POLL_S 0.3
#define REG_POLL_MAX_S 2.0
#define REG_ERR_KINDS 8
/* tests/lib/ports.py hands out 20000-29999, then 10300-19999 (19,700);
 * leave room for other users */
#define REG_UNIQUE_MAX 18500
/* --registration-scalein: kept nodes given a job before the scale-in */
#define REG_SCALEIN_BUSY 16

enum { NODE_WAITING, NODE_STARTED, NODE_REGISTERED, NODE_FAILED };

typedef struct reg_node {
    bx_proc *proc; /* its slurmd, while it runs */
    int slot;      /* the port slot it holds, -1: none */
    int state;
    int cycled; /* stopped once registered */
    int stopping;
    uint64_t started, registered, idle;
} reg_node;

typedef struct reg_run {
    bx_ctx *x;
    bx_lab *lab;
    int n, real, cycle, pace;
    reg_node *nodes;
    int *ports;     /* [0, real) the kept slurmd, then the cycle slots, then slurmrestd's */
    int n_ports;
    int unique;     /* a port per node (n slots): no cycled node's port is used again */
    char *slot_use; /* cycle slots in use (not unique) */
    const char *conf;
    char *out_log;
    int one_port; /* 22.05: every slurmd on SlurmdPort, one at a time */
    int next_real, next_cycled;
    int starting, registered, idle, failed, running_cycled;
    uint64_t t0;
} reg_run;

/* ---- ports ------------------------------------------------------------------------------------ */

/* n ports from the host-wide reservation list (tests/lib/ports.py), held
 * under owner until release_ports: the same list every lab of this host
 * uses, so that no other lab takes one. */
static int *reserve_ports(bx_ctx *x, const char *owner, int n)
{
    char *script = xasprintf("%s/tests/lib/ports.py", x->src_dir);
    char count[16];
    snprintf(count, sizeof(count), "%d", n);
    const char *argv[] = {"python3", script, count, "--owner", owner, NULL};
    char *out = NULL;
    int rc = bx_run(x, argv, NULL, NULL, 60, &out);
    free(script);
    int *ports = NULL;
    if (rc == 0 && out) {
        ports = xcalloc((size_t)n, sizeof(*ports));
        char *p = out;
        for (int i = 0; i < n; i++) {
            char *end;
            long v = strtol(p, &end, 10);
            if (end == p || v <= 0 || v > 65535) {
                free(ports);
                ports = NULL;
                break;
            }
            ports[i] = (int)v;
            p = end;
        }
    }
    if (ports == NULL)
        bx_say(x, "bench: registration: could not reserve %d ports (exit %d)", n, rc);
    free(out);
    return ports;
}

/* Runs to the end even when the run is being interrupted: ports left
 * reserved would be withheld from every lab of this host for hours. */
static void release_ports(bx_ctx *x, const char *owner)
{
    char *script = xasprintf("%s/tests/lib/ports.py", x->src_dir);
    const char *argv[] = {"python3", script, "--release", owner, NULL};
    x->cleanup++;
    (void)bx_run(x, argv, NULL, NULL, 60, NULL);
    x->cleanup--;
    free(script);
}

/* ---- the slurmd ------------------------------------------------------------------------------- */

static void start_slurmd(reg_run *r, int i, int slot)
{
    reg_node *nd = &r->nodes[i];
    char name[32], conf[1024], tag[512], pidf[512];
    snprintf(name, sizeof(name), "gpu-%d", i);
    /* Port: every slurmd of this host needs its own (24.11 and 26.05 take
     * it in --conf); the rest of the argument is the pod's. */
    if (r->one_port)
        snprintf(conf, sizeof(conf), "%s", r->conf);
    else
        snprintf(conf, sizeof(conf), "%s\vPort=%d", r->conf, r->ports[slot]);
    snprintf(tag, sizeof(tag), "SLURMLAB_TAG=%s", r->lab->dir);
    /* its own /run/slurm, as in a pod: slurmd binds its auth socket there */
    char run_dir[512];
    snprintf(run_dir, sizeof(run_dir), "SLURMLAB_RUN_DIR=%s/spool/run.%s", r->lab->dir, name);
    const char *argv[12];
    int a = 0;
    if (r->lab->run && *r->lab->run)
        argv[a++] = r->lab->run;
    argv[a++] = "slurmd";
    argv[a++] = "-D";
    argv[a++] = "-Z";
    argv[a++] = "-N";
    argv[a++] = name;
    argv[a++] = "--conf";
    argv[a++] = conf;
    argv[a++] = "-f";
    argv[a++] = r->lab->slurm_conf;
    argv[a] = NULL;
    const char *env[] = {tag, run_dir, NULL};
    nd->proc = bx_proc_start(r->x, name, argv, env, r->out_log);
    nd->started = uv_hrtime();
    nd->slot = slot;
    if (nd->proc == NULL) {
        nd->state = NODE_FAILED;
        r->failed++;
        return;
    }
    nd->state = NODE_STARTED;
    r->starting++;
    /* slurmlab.sh stop finds it by this file and the tag, should the
     * harness not get to stop it */
    snprintf(pidf, sizeof(pidf), "%s/run/slurmd.%s.pid", r->lab->dir, name);
    char pid[24];
    int pl = snprintf(pid, sizeof(pid), "%d\n", bx_proc_pid(nd->proc));
    (void)bx_write_file(pidf, pid, (size_t)pl);
}

static int may_start(const reg_run *r)
{
    return r->pace <= 0 || r->starting < r->pace;
}

static void launch_more(reg_run *r)
{
    while (r->next_real < r->real && may_start(r)) {
        start_slurmd(r, r->next_real, r->next_real);
        r->next_real++;
    }
    if (r->unique) {
        while (r->running_cycled < r->cycle && r->next_cycled < r->n && may_start(r)) {
            int i = r->next_cycled++;
            r->nodes[i].cycled = 1;
            r->running_cycled++;
            start_slurmd(r, i, i);
        }
        return;
    }
    for (int s = 0; s < r->cycle && r->next_cycled < r->n && may_start(r); s++) {
        if (r->slot_use[s])
            continue;
        int i = r->next_cycled++;
        r->nodes[i].cycled = 1;
        r->slot_use[s] = 1;
        r->running_cycled++;
        start_slurmd(r, i, r->real + s);
    }
}

/* Collect the cycled slurmd that exited (stopped once registered, or died
 * before) and give their slots back. */
static void reap(reg_run *r)
{
    for (int i = r->real; i < r->next_cycled; i++) {
        reg_node *nd = &r->nodes[i];
        if (nd->proc == NULL || !bx_proc_exited(nd->proc))
            continue;
        (void)bx_proc_stop(r->x, nd->proc, SIGTERM, 1);
        nd->proc = NULL;
        if (nd->state == NODE_STARTED) {
            nd->state = NODE_FAILED;
            r->failed++;
            r->starting--;
        }
        if (!r->unique)
            r->slot_use[nd->slot - r->real] = 0;
        r->running_cycled--;
    }
    for (int i = 0; i < r->next_real; i++) {
        reg_node *nd = &r->nodes[i];
        if (nd->proc && nd->state == NODE_STARTED && bx_proc_exited(nd->proc)) {
            nd->state = NODE_FAILED;
            r->failed++;
            r->starting--;
        }
    }
}

/* The N node records made FUTURE before the storm, batch names a call,
 * with the features of the pods' --conf: their slurmd then register nodes
 * that exist instead of creating them. Returns the seconds it took; failed
 * gets the calls refused. */
static double precreate(bx_ctx *x, bx_lab *lab, int n, int batch, const char *conf, int *failed)
{
    char feat[256] = "";
    const char *f = conf ? strstr(conf, "Features=") : NULL;
    if (f) {
        size_t len = strcspn(f, " \v");
        snprintf(feat, sizeof(feat), "%.*s", (int)len, f);
    }
    bx_step(x, "registration: %d node records made FUTURE first, %d a call", n, batch);
    uint64_t t0 = uv_hrtime();
    *failed = 0;
    for (int a = 0; a < n && !bx_stop_requested(x); a += batch) {
        int b = a + batch - 1 < n - 1 ? a + batch - 1 : n - 1;
        char names[64];
        snprintf(names, sizeof(names), "NodeName=gpu-[%d-%d]", a, b);
        const char *argv[] = {"scontrol", "create", names, "State=FUTURE", feat[0] ? feat : NULL, NULL};
        char *out = NULL;
        if (bx_lab_cmd(x, lab, argv, &out) != 0) {
            if (*failed == 0)
                bx_say(x, "bench: registration: scontrol create %s refused: %s", names, out ? out : "");
            (*failed)++;
        }
        free(out);
    }
    return bx_secs(t0, uv_hrtime());
}

/* The records the operator has made first, and the names it was refused, from its /metrics. */
struct pc_wait {
    bx_ctx *x;
    bx_slurmop *op;
    double made, refused;
    double want;
};

static int pc_reached(void *arg)
{
    struct pc_wait *w = arg;
    bx_metrics m;
    if (bx_scrape(w->x, w->op, &m) == 0) {
        const char *name = "slurmop_slurm_node_precreates_total";
        w->made = bx_metric(&m, name, "result=\"created\"");
        w->refused = bx_metric(&m, name, "result=\"exists\"") + bx_metric(&m, name, "result=\"failed\"");
    }
    bx_metrics_free(&m);
    if (w->made + w->refused < w->want)
        bx_sleep(w->x, 0.1);
    return w->made + w->refused >= w->want;
}

/* Whether node name's record is FUTURE with the hardware of the NodeSet's extraConf (REG_OP_CONF). */
static int future_record_ok(bx_ctx *x, bx_lab *lab, const char *name)
{
    const char *argv[] = {"scontrol", "--future", "show", "node", name, NULL};
    char *out = NULL;
    int ok = 0, rc = 0;
    /* scontrol may time out while slurmctld makes a thousand records under its node write lock */
    for (int i = 0; i < 30 && !ok && !bx_stop_requested(x); i++) {
        if (i)
            bx_sleep(x, 1.0);
        free(out);
        out = NULL;
        rc = bx_lab_cmd(x, lab, argv, &out);
        ok = rc == 0 && out && strstr(out, "State=FUTURE") && strstr(out, "CPUTot=1 ") &&
             strstr(out, "RealMemory=1000 ");
    }
    if (!ok)
        bx_say(x, "bench: registration: the record of %s is not FUTURE with CPUs=1 RealMemory=1000 (exit %d)",
               name, rc);
    free(out);
    return ok;
}

/* --registration-precreate operator: the records made by the operator, as a scale-out creates the pods
 * (nss_precreate). The NodeSet was scaled to N before the lab existed, since the lab runs the slurm.conf
 * generated for N; so once the operator reads the lab, the NodeSet is scaled to 0 (its pods have no Slurm
 * node: each goes after Slurm's answer by name) and to N again, and that scale-out's pods come with their
 * records. The first and last are checked FUTURE with the pods' hardware, then all are deleted before the
 * storm: a record made from the pods' --conf has the cluster's SlurmdPort, as on a fleet, where every pod's
 * slurmd listens on it; here all slurmd share one host and each listens on a port of its own, which a
 * registration does not change in an existing record, so slurmctld could not reach a node registered into
 * one (NOT_RESPONDING; its jobs are requeued when they end). Returns the seconds from the scale-out to the
 * N-th name answered (NAN when not all were made or a record is not as asked); *refused: the names
 * answered exists or failed. */
static double operator_precreate(bx_ctx *x, bx_fleet *f, bx_lab *lab, int n, int *refused)
{
    *refused = 0;
    bx_step(x, "registration: NodeSet gpu scaled to 0 and to %d again: the operator makes the records", n);
    int rc = bx_scale(x, &f->api, 0);
    if (rc == 0)
        rc = bx_fleet_converge(x, f, 0, 600);
    struct pc_wait w = {x, &f->op, 0, 0, 0};
    if (rc == 0) {
        (void)pc_reached(&w); /* the counts before: want 0 is reached at once */
        double base_made = w.made, base_refused = w.refused;
        w.want = w.made + w.refused + n;
        uint64_t t0 = uv_hrtime();
        rc = bx_scale(x, &f->api, n);
        if (rc == 0)
            rc = bx_wait(x, pc_reached, &w, 120);
        double secs = bx_secs(t0, uv_hrtime());
        *refused = (int)(w.refused - base_refused);
        int made = (int)(w.made - base_made);
        if (rc != 0)
            bx_say(x, "bench: registration: the operator answered %d of %d records (%d made)",
                   made + *refused, n, made);
        if (rc == 0)
            rc = bx_fleet_converge(x, f, n, 600);
        char first[32], last[32], all[64];
        snprintf(first, sizeof(first), "gpu-0");
        snprintf(last, sizeof(last), "gpu-%d", n - 1);
        snprintf(all, sizeof(all), "nodename=gpu-[0-%d]", n - 1);
        int ok = rc == 0 && made == n && future_record_ok(x, lab, first) && future_record_ok(x, lab, last);
        const char *del[] = {"scontrol", "delete", all, NULL};
        if (ok && bx_lab_cmd(x, lab, del, NULL) != 0) {
            bx_say(x, "bench: registration: scontrol delete %s failed", all);
            ok = 0;
        }
        if (ok)
            return secs;
    }
    return NAN;
}

/* One sinfo: every node listed is registered, "idle" (no suffix: it
 * answers) is idle. */
static void poll_nodes(reg_run *r)
{
    const char *argv[] = {"sinfo", "-h", "-N", "-o", "%N %T", NULL};
    char *out = NULL;
    if (bx_lab_cmd(r->x, r->lab, argv, &out) != 0) {
        free(out);
        return;
    }
    uint64_t now = uv_hrtime();
    char *save = NULL;
    for (char *l = strtok_r(out, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        int i;
        char st[32];
        if (sscanf(l, "gpu-%d %31s", &i, st) != 2 || i < 0 || i >= r->n)
            continue;
        reg_node *nd = &r->nodes[i];
        if (!nd->registered && strcmp(st, "future") != 0) {
            nd->registered = now;
            r->registered++;
            if (nd->state == NODE_STARTED) {
                nd->state = NODE_REGISTERED;
                r->starting--;
            }
        }
        if (!nd->idle && strcmp(st, "idle") == 0) {
            nd->idle = now;
            r->idle++;
        }
        if (nd->cycled && nd->registered && nd->proc && !nd->stopping) {
            kill(bx_proc_pid(nd->proc), SIGTERM);
            nd->stopping = 1;
        }
    }
    free(out);
}

static void stop_all(reg_run *r)
{
    r->x->cleanup++;
    for (int i = 0; i < r->n; i++)
        if (r->nodes[i].proc && !bx_proc_exited(r->nodes[i].proc))
            kill(bx_proc_pid(r->nodes[i].proc), SIGTERM);
    for (int i = 0; i < r->n; i++)
        if (r->nodes[i].proc) {
            (void)bx_proc_stop(r->x, r->nodes[i].proc, SIGTERM, 15);
            r->nodes[i].proc = NULL;
        }
    r->x->cleanup--;
}

/* ---- what the operator, slurmctld and its log say ------------------------------------------------ */

struct op_wait {
    bx_ctx *x;
    bx_slurmop *op;
    const char *metric;
    double want;
};

static int metric_reached(void *arg)
{
    struct op_wait *w = arg;
    bx_metrics m;
    double v = bx_scrape(w->x, w->op, &m) == 0 ? bx_metric(&m, w->metric, NULL) : -1;
    bx_metrics_free(&m);
    if (v < w->want)
        bx_sleep(w->x, 0.2);
    return v >= w->want;
}

/* One line of sdiag's "by message type" list: name, count, mean µs. */
typedef struct rpc_stat {
    char name[64];
    double count, ave_us;
} rpc_stat;

static int cmp_rpc(const void *a, const void *b)
{
    double d = ((const rpc_stat *)b)->count - ((const rpc_stat *)a)->count;
    return d > 0 ? 1 : d < 0 ? -1 : 0;
}

static size_t parse_sdiag(const char *text, rpc_stat *out, size_t cap)
{
    const char *p = text ? strstr(text, "by message type") : NULL;
    const char *end = p ? strstr(p, "by user") : NULL;
    size_t n = 0;
    while (p && *p && (!end || p < end) && n < cap) {
        const char *nl = strchr(p, '\n');
        char line[256];
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        if (len >= sizeof(line))
            len = sizeof(line) - 1;
        memcpy(line, p, len);
        line[len] = '\0';
        char name[64];
        double count, ave;
        const char *c = strstr(line, "count:"), *a = strstr(line, "ave_time:");
        if (c && a && sscanf(line, " %63s", name) == 1 && sscanf(c + 6, "%lf", &count) == 1 &&
            sscanf(a + 9, "%lf", &ave) == 1) {
            snprintf(out[n].name, sizeof(out[n].name), "%s", name);
            out[n].count = count;
            out[n].ave_us = ave;
            n++;
        }
        p = nl ? nl + 1 : NULL;
    }
    return n;
}

static double sdiag_value(const char *text, const char *key)
{
    const char *p = text ? strstr(text, key) : NULL;
    return p ? strtod(p + strlen(key), NULL) : NAN;
}

/* slurmctld's log errors after byte offset from: the count, and the most
 * frequent kinds (digits and node numbers folded) into kinds. */
typedef struct err_kind {
    char text[160];
    int count;
} err_kind;

static int slurmctld_errors(const char *log_path, size_t from, err_kind *kinds, int *n_kinds, int *max_nodes,
                            int *bad_name)
{
    char *log = NULL;
    size_t len = 0;
    int total = 0;
    *n_kinds = 0;
    *max_nodes = *bad_name = 0;
    if (file_read_all(log_path, 512u << 20, &log, &len) != 0)
        return -1;
    for (char *p = log + (from < len ? from : len); p && *p;) {
        char *nl = strchr(p, '\n');
        if (nl)
            *nl = '\0';
        char *e = strstr(p, "error: ");
        if (e) {
            total++;
            *max_nodes += strstr(e, "MaxNodeCount") != NULL;
            *bad_name += strcasestr(e, "invalid node name") != NULL;
            char folded[160];
            size_t o = 0;
            for (const char *c = e + 7; *c && o + 2 < sizeof(folded); c++) {
                if (*c >= '0' && *c <= '9') {
                    if (o == 0 || folded[o - 1] != '#')
                        folded[o++] = '#';
                    continue;
                }
                folded[o++] = *c;
            }
            folded[o] = '\0';
            int k = 0;
            while (k < *n_kinds && strcmp(kinds[k].text, folded) != 0)
                k++;
            if (k == *n_kinds && *n_kinds < REG_ERR_KINDS) {
                snprintf(kinds[k].text, sizeof(kinds[k].text), "%s", folded);
                kinds[k].count = 0;
                (*n_kinds)++;
            }
            if (k < *n_kinds)
                kinds[k].count++;
        }
        p = nl ? nl + 1 : NULL;
    }
    free(log);
    return total;
}

static size_t file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (size_t)st.st_size : 0;
}

/* The --conf and --conf-server of pod gpu-0's slurmd, as the operator built
 * them. 0 or a code. */
static int pod_slurmd_args(bx_ctx *x, bx_api *api, char **conf, char **server)
{
    cJSON *pod = NULL;
    *conf = *server = NULL;
    int rc = bx_get(x, api, &KUBE_PODS, x->ns, "gpu-0", &pod);
    if (rc)
        return rc;
    const cJSON *c;
    cJSON_ArrayForEach(c, json_get(pod, "spec.containers"))
    {
        const char *name = json_get_str(c, "name");
        if (name == NULL || strcmp(name, "slurmd") != 0)
            continue;
        const cJSON *a, *prev = NULL;
        cJSON_ArrayForEach(a, json_get(c, "args"))
        {
            const char *flag = prev ? prev->valuestring : NULL;
            if (flag && cJSON_IsString(a) && strcmp(flag, "--conf") == 0)
                *conf = xstrdup(a->valuestring);
            if (flag && cJSON_IsString(a) && strcmp(flag, "--conf-server") == 0)
                *server = xstrdup(a->valuestring);
            prev = cJSON_IsString(a) ? a : NULL;
        }
    }
    cJSON_Delete(pod);
    return *conf ? 0 : OP_ENOTFOUND;
}

struct cm_wait {
    bx_ctx *x;
    bx_api *api;
    long long want;
    char *conf;
};

/* ConfigMap slurm-config holds a slurm.conf with MaxNodeCount >= want. */
static int conf_ready(void *arg)
{
    struct cm_wait *w = arg;
    cJSON *cm = NULL;
    int ok = 0;
    if (bx_get(w->x, w->api, &KUBE_CONFIGMAPS, w->x->ns, "slurm-config", &cm) == 0) {
        /* a plain child: the key has a dot, which json_get_str reads as a path */
        const cJSON *c = json_child(json_child(cm, "data"), SCONF_SLURM_CONF);
        const char *conf = cJSON_IsString(c) ? c->valuestring : NULL;
        const char *m = conf ? strstr(conf, "\nMaxNodeCount=") : NULL;
        if (m && strtoll(m + 14, NULL, 10) >= w->want) {
            free(w->conf);
            w->conf = xstrdup(conf);
            ok = 1;
        }
    }
    cJSON_Delete(cm);
    if (!ok)
        bx_sleep(w->x, 0.2);
    return ok;
}

static int conf_value(const char *conf, const char *key)
{
    char k[64];
    snprintf(k, sizeof(k), "\n%s=", key);
    const char *p = strstr(conf, k);
    return p ? atoi(p + strlen(k)) : -1;
}

static void status_line(void *arg, char *out, size_t len)
{
    reg_run *r = arg;
    snprintf(out, len, "%d/%d registered, %d idle, %d starting, %d cycled running, %d failed", r->registered,
             r->n, r->idle, r->starting, r->running_cycled, r->failed);
}

/* Seconds from t0 to the latest of the nodes' times at offset, NAN unless
 * every node has one. */
static double last_time(const reg_run *r, int idle)
{
    uint64_t last = 0;
    for (int i = 0; i < r->n; i++) {
        uint64_t t = idle ? r->nodes[i].idle : r->nodes[i].registered;
        if (t == 0)
            return NAN;
        if (t > last)
            last = t;
    }
    return bx_secs(r->t0, last);
}

static const char *fmt_s(char *b, size_t n, double s)
{
    if (!isfinite(s))
        return "n/a";
    return bx_fmt_s(b, n, s);
}

static void add_rss(const reg_run *r, cJSON *o, double *mean_kib, double *max_kib, int *count)
{
    double sum = 0, mx = 0;
    int k = 0;
    for (int i = 0; i < r->real; i++) {
        if (r->nodes[i].proc == NULL || bx_proc_exited(r->nodes[i].proc))
            continue;
        long v = bx_rss_kib(bx_proc_pid(r->nodes[i].proc));
        if (v <= 0)
            continue;
        sum += (double)v;
        mx = (double)v > mx ? (double)v : mx;
        k++;
    }
    *mean_kib = k ? sum / k : NAN;
    *max_kib = k ? mx : NAN;
    *count = k;
    cJSON_AddNumberToObject(o, "slurmdRunning", k);
    cJSON_AddItemToObject(o, "slurmdRssMeanKiB", bx_num(*mean_kib));
    cJSON_AddItemToObject(o, "slurmdRssMaxKiB", bx_num(*max_kib));
    cJSON_AddNumberToObject(o, "slurmdRssTotalKiB", sum);
}

/* ---- the scenario ------------------------------------------------------------------------------- */

static void skip(bx_ctx *x, const char *why)
{
    bx_say(x, "bench: registration: skipped: %s", why);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "skipped", why);
    cJSON_AddItemToObject(x->results, "registration", o);
    bx_target(x, "registration: N dynamic nodes register from the operator's slurm.conf", "not measured",
              "N", NAN, "not measured", why);
}

/* The scale-in after the storm: its table, its JSON under "scaleIn" and
 * its target (every pod gone, none before its job ended). */
static void report_scalein(bx_ctx *x, cJSON *o, const bx_scalein *si, int si_rc, const char *version)
{
    char title[160], v[96], t1[32], t2[32], t3[32];
    snprintf(title, sizeof(title), "Scale-in %d → 0 after the storm (%s, the operator's slurm.conf, %d busy)",
             si->n, version, si->nb);
    bx_table *tb = bx_table_new(title, 2, "measure", "value");
    bx_table_row(tb, "scale PATCH answered", fmt_s(t1, 32, si->patch_s));
    bx_table_row(tb, "first drain batch issued (operator's log)", fmt_s(t1, 32, si->first_drain_s));
    snprintf(v, sizeof(v), "%s (%.0f nodes logged)", fmt_s(t1, 32, si->last_drain_s), si->logged);
    bx_table_row(tb, "last drain batch issued (operator's log)", v);
    snprintf(v, sizeof(v), "%s (%.0f node writes ok)", fmt_s(t1, 32, si->drains_s), si->writes);
    bx_table_row(tb, "all N drains answered by slurmctld", v);
    bx_table_row(tb, "idle pods: the last one terminating", fmt_s(t1, 32, si->idle_gone_s));
    bx_table_row(tb, "all pods gone (the harness's watch)", fmt_s(t1, 32, si->gone_s));
    snprintf(v, sizeof(v), "%d of %d, ≤ %s after the job's end (decided ≤ %s)", si->busy_deleted_after,
             si->nb, fmt_s(t2, 32, si->busy_lag_max), fmt_s(t3, 32, si->decided_lag_max));
    bx_table_row(tb, "busy pods deleted after their job", v);
    snprintf(v, sizeof(v), "%d", si->violations);
    bx_table_row(tb, "busy pods deleted while their job ran", v);
    snprintf(v, sizeof(v), "%.0f DELETE, %.0f PATCH", si->pod_deletes, si->pod_patches);
    bx_table_row(tb, "operator's pod requests", v);
    snprintf(v, sizeof(v), "%.0f", si->drained);
    bx_table_row(tb, "nodes drained in Slurm at the end", v);
    bx_table_note(tb,
                  "Time 0: the scale PATCH. gpu-0 .. gpu-%d run a kept slurmd and a %.0f s job each "
                  "(partition gpu); the other nodes registered and lost their slurmd (cycled), as pods "
                  "that went away would.",
                  si->nb - 1, si->job_s);
    bx_table_emit(x, tb);
    cJSON *j = cJSON_CreateObject();
    bx_scalein_json(si, j);
    cJSON_AddItemToObject(o, "scaleIn", j);
    int ok = si_rc == 0 && isfinite(si->gone_s) && si->violations == 0;
    snprintf(v, sizeof(v), "gone in %s, %d deleted while busy", fmt_s(t1, 32, si->gone_s), si->violations);
    bx_target(x, "registration scale-in: N → 0 with the operator's slurm.conf, no busy pod deleted", v,
              "all gone, 0 while busy", isfinite(si->gone_s) ? 1.0 : 0.0, ok ? "met" : "MISSED", "");
    if (!ok)
        x->failures++;
}

int scen_registration(bx_ctx *x)
{
    int n = 0;
    for (int i = 0; i < x->n_sizes; i++)
        if (x->sizes[i] > n)
            n = x->sizes[i];
    if (x->quick)
        n = REG_QUICK_N;
    const char *why = NULL;
    if (x->no_slurm)
        why = "--no-slurm";
    else if (x->kubeconfig || x->real_k8s)
        why = "kubesim only: the harness starts a slurmd per pod on this host";
    else if (geteuid() != 0)
        why = "the Slurm lab needs root";
    if (why) {
        skip(x, why);
        return 0;
    }
    /* The generated slurm.conf (auth/slurm, dynamic nodes) needs 23.11 or
     * later: 26.05 unless another version was named. 22.05, named, checks
     * the harness only: slurmlab.sh puts munge in place of auth/slurm, and
     * its slurmd refuses Port= in --conf, so one runs at a time. */
    const char *saved_version = x->slurm_version;
    if (x->slurm_version == NULL || !x->slurm_version_given)
        x->slurm_version = "26.05";
    int one_port = strcmp(x->slurm_version, "22.05") == 0;
    reg_run r;
    memset(&r, 0, sizeof(r));
    r.x = x;
    r.n = n;
    r.real = x->reg_real < n ? x->reg_real : n;
    if (x->quick && !x->reg_real_given)
        r.real = n;
    r.cycle = r.real < n ? x->reg_cycle : 0;
    if (one_port) {
        r.real = 0;
        r.cycle = 1;
    }
    r.one_port = one_port;
    r.next_cycled = r.real; /* the cycled nodes follow the kept ones */
    r.pace = x->reg_pace;
    r.nodes = xcalloc((size_t)n, sizeof(*r.nodes));
    r.slot_use = xcalloc((size_t)(r.cycle + 1), 1);
    r.out_log = xasprintf("%s/registration-slurmd.out", x->log_dir);
    char owner[] = "/tmp/slurmop-bench-reg.XXXXXX";
    int have_owner = mkdtemp(owner) != NULL;
    bx_lab lab;
    memset(&lab, 0, sizeof(lab));
    r.lab = &lab;
    bx_fleet f;
    memset(&f, 0, sizeof(f));
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "n", n);
    cJSON_AddNumberToObject(o, "realSlurmd", r.real);
    cJSON_AddNumberToObject(o, "cycledSlurmd", n - r.real);
    cJSON_AddNumberToObject(o, "cycleSlots", r.cycle);
    cJSON_AddNumberToObject(o, "pace", r.pace);
    int rc = have_owner ? 0 : OP_EIO;
    char *conf_path = NULL, *pod_conf = NULL, *pod_server = NULL, *conf_text = NULL;
    /* A port of its own for every node when the host's range holds them:
     * slurmctld keeps a registered node's port and pings it later; were a
     * cycled node's port handed to the next slurmd, that slurmd would
     * answer for a node it is not (past about 2,000 nodes the pings
     * catch up with the cycle), and the run would measure its own mix-ups. */
    int *ports = NULL;
    if (rc == 0 && !one_port && r.cycle > 0 && n + 1 <= REG_UNIQUE_MAX) {
        ports = reserve_ports(x, owner, n + 1);
        r.unique = ports != NULL;
        r.n_ports = n + 1;
    }
    if (rc == 0 && ports == NULL) {
        r.n_ports = r.real + r.cycle + 1;
        ports = reserve_ports(x, owner, r.n_ports);
        if (ports && r.cycle > 0)
            bx_say(
                x,
                "bench: registration: %d cycle slots share their ports: slurmctld's pings of a stopped node "
                "may reach the slurmd that took its port",
                r.cycle);
    }
    if (ports == NULL)
        rc = OP_EIO;
    r.ports = ports;
    cJSON_AddBoolToObject(o, "portPerNode", r.unique || r.cycle == 0);

    /* 1. the fleet and the operator's slurm.conf */
    char rest_url[64] = "";
    if (rc == 0) {
        snprintf(rest_url, sizeof(rest_url), "http://127.0.0.1:%d", ports[r.n_ports - 1]);
        bx_fleet_slurm fs = {rest_url, NULL, NULL, 0, 0};
        bx_step(x, "registration: kubesim, slurmop, Controller and NodeSet");
        rc = bx_fleet_open(x, &f, "registration", x->k8s_nodes > n ? x->k8s_nodes : n, 0, &fs);
    }
    /* The operator makes records first only for pods whose --conf declares their hardware. */
    int by_operator = x->reg_precreate == REG_PRECREATE_OPERATOR;
    if (rc == 0)
        rc = bx_patch(x, &f.api, &SLINKY_NODESETS, x->ns, "gpu", NULL,
                      by_operator ? "{\"spec\":{\"partition\":{\"enabled\":true},"
                                    "\"extraConf\":\"CPUs=1 RealMemory=1000\"}}"
                                  : "{\"spec\":{\"partition\":{\"enabled\":true}}}",
                      NULL);
    if (rc == 0) {
        bx_step(x, "registration: NodeSet gpu scaled to %d pods", n);
        uint64_t t = uv_hrtime();
        rc = bx_scale(x, &f.api, n);
        if (rc == 0)
            rc = bx_fleet_converge(x, &f, n, 600);
        cJSON_AddItemToObject(o, "podsReadySeconds", bx_num(rc == 0 ? bx_secs(t, uv_hrtime()) : NAN));
    }
    if (rc == 0) {
        bx_step(x, "registration: waiting for the operator's slurm.conf");
        struct cm_wait w = {x, &f.api, sconf_max_node_count(n, 0), NULL};
        rc = bx_wait(x, conf_ready, &w, 60);
        if (rc)
            bx_say(x, "bench: registration: ConfigMap slurm-config has no MaxNodeCount >= %lld", w.want);
        conf_text = w.conf;
    }
    if (rc == 0) {
        conf_path = bx_out_path(x, "registration-slurm.conf");
        rc = bx_write_file(conf_path, conf_text, strlen(conf_text));
        cJSON_AddNumberToObject(o, "maxNodeCount", conf_value(conf_text, "MaxNodeCount"));
        cJSON_AddNumberToObject(o, "treeWidth", conf_value(conf_text, "TreeWidth"));
        cJSON_AddNumberToObject(o, "messageTimeout", conf_value(conf_text, "MessageTimeout"));
    }
    /* 2. slurmctld from that file */
    if (rc == 0) {
        bx_step(x, "registration: a Slurm %s lab from the operator's slurm.conf", x->slurm_version);
        rc = bx_lab_start_from(x, &lab, conf_path, ports[r.n_ports - 1]);
        if (rc)
            bx_say(x, "bench: registration: the lab did not start from %s", conf_path);
    }
    char *rewrites = NULL;
    if (rc == 0) {
        size_t len = 0;
        if (lab.rewrites && file_read_all(lab.rewrites, 1u << 20, &rewrites, &len) == 0)
            cJSON_AddStringToObject(o, "rewrittenLines", rewrites);
        char *key = NULL;
        size_t key_len = 0;
        rc = bx_lab_jwt_key(&lab, &key, &key_len);
        if (rc == 0) {
            char *b64 = base64_encode(key, key_len);
            char *patch = xasprintf("{\"data\":{\"jwt.key\":\"%s\"}}", b64);
            rc = bx_patch(x, &f.api, &KUBE_SECRETS, x->ns, "slurm-auth-jwt", NULL, patch, NULL);
            free(patch);
            free(b64);
        }
        free(key);
    }
    if (rc == 0)
        rc = bx_make_restapi(x, &f.api);
    if (rc == 0) {
        bx_step(x, "registration: the operator reaching the lab's slurmrestd");
        struct op_wait w = {x, &f.op, "slurmop_slurm_up", 1};
        if (bx_wait(x, metric_reached, &w, 90) != 0) {
            bx_say(x, "bench: registration: the operator does not read the lab (slurmop_slurm_up stays 0)");
            rc = OP_ETIMEOUT;
        }
    }
    if (rc == 0) {
        rc = pod_slurmd_args(x, &f.api, &pod_conf, &pod_server);
        if (rc)
            bx_say(x, "bench: registration: pod gpu-0 has no slurmd --conf");
        r.conf = pod_conf;
    }

    /* 2b. --registration-precreate: the node records made before the storm */
    double precreate_s = NAN;
    int precreate_failed = 0;
    if (rc == 0 && x->reg_precreate > 0)
        precreate_s = precreate(x, &lab, n, x->reg_precreate, pod_conf, &precreate_failed);
    if (rc == 0 && by_operator) {
        precreate_s = operator_precreate(x, &f, &lab, n, &precreate_failed);
        if (!isfinite(precreate_s))
            rc = OP_ETIMEOUT;
    }

    /* 3. the storm */
    bx_metrics m0, m1;
    memset(&m0, 0, sizeof(m0));
    memset(&m1, 0, sizeof(m1));
    char *log_path = lab.dir ? xasprintf("%s/log/slurmctld.log", lab.dir) : NULL;
    size_t log_from = 0;
    double reg_s = NAN, idle_s = NAN, op_nodes_s = NAN, writes_s = NAN, window_s = NAN;
    if (rc == 0) {
        const char *reset[] = {"sdiag", "-r", NULL};
        (void)bx_lab_cmd(x, &lab, reset, NULL);
        (void)bx_scrape(x, &f.op, &m0);
        log_from = file_size(log_path);
        bx_step(x, "registration: %d slurmd (%d kept running, %d cycled by %d at once, pace %d)", n, r.real,
                n - r.real, r.cycle, r.pace);
        bx_set_status(x, status_line, &r);
        r.t0 = uv_hrtime();
        /* a slurmd takes well under a second here; cycled nodes come through
         * r.cycle at a time */
        double limit_s = 120 + 0.5 * n;
        uint64_t last_poll = 0, last_scrape = 0;
        double poll_s = n > 2048 ? REG_POLL_S * n / 2048 : REG_POLL_S;
        if (poll_s > REG_POLL_MAX_S)
            poll_s = REG_POLL_MAX_S;
        while (!bx_stop_requested(x) && bx_secs(r.t0, uv_hrtime()) < limit_s) {
            launch_more(&r);
            uint64_t now = uv_hrtime();
            if (bx_secs(last_poll, now) >= poll_s) {
                poll_nodes(&r);
                last_poll = uv_hrtime();
            }
            if (!isfinite(op_nodes_s) && bx_secs(last_scrape, now) >= 0.5) {
                bx_metrics m;
                if (bx_scrape(x, &f.op, &m) == 0 && bx_metric(&m, "slurmop_slurm_nodes", NULL) >= n)
                    op_nodes_s = bx_secs(r.t0, uv_hrtime());
                bx_metrics_free(&m);
                last_scrape = uv_hrtime();
            }
            reap(&r);
            if (r.registered + r.failed >= n && r.idle + r.failed >= n && r.running_cycled == 0)
                break;
            bx_sleep(x, 0.05);
        }
        reg_s = last_time(&r, 0);
        idle_s = last_time(&r, 1);
        bx_set_status(x, NULL, NULL);
        bx_step(x, "registration: the operator's node table and writes");
        struct op_wait w = {x, &f.op, "slurmop_slurm_nodes", n};
        if (!isfinite(op_nodes_s) && bx_wait(x, metric_reached, &w, 120) == 0)
            op_nodes_s = bx_secs(r.t0, uv_hrtime());
        if (bx_wait_slurm_quiet(x, &f.op, 3.0, 300) == 0)
            writes_s = bx_secs(r.t0, uv_hrtime()) - 3.0;
        window_s = bx_secs(r.t0, uv_hrtime());
        (void)bx_scrape(x, &f.op, &m1);
    }

    /* 4. what slurmctld and the operator say */
    char *sdiag = NULL;
    rpc_stat rpcs[96];
    size_t n_rpcs = 0;
    err_kind kinds[REG_ERR_KINDS];
    int n_kinds = 0, max_nodes = 0, bad_name = 0, errors = -1;
    double rss_mean = NAN, rss_max = NAN;
    int rss_n = 0;
    if (rc == 0) {
        const char *argv[] = {"sdiag", NULL};
        if (bx_lab_cmd(x, &lab, argv, &sdiag) == 0 && sdiag) {
            char *p = bx_out_path(x, "logs/registration-sdiag.txt");
            (void)bx_write_file(p, sdiag, strlen(sdiag));
            free(p);
        }
        n_rpcs = parse_sdiag(sdiag, rpcs, sizeof(rpcs) / sizeof(rpcs[0]));
        qsort(rpcs, n_rpcs, sizeof(rpcs[0]), cmp_rpc);
        errors = slurmctld_errors(log_path, log_from, kinds, &n_kinds, &max_nodes, &bad_name);
        add_rss(&r, o, &rss_mean, &rss_max, &rss_n);
    }
    /* 5. the scale-in (--registration-scalein) while the kept slurmd still
     * run: the busy nodes' jobs need them */
    bx_scalein si;
    memset(&si, 0, sizeof(si));
    int si_rc = -1;
    if (rc == 0 && x->reg_scalein && r.real > 0) {
        si.n = n;
        si.nb = r.real < REG_SCALEIN_BUSY ? r.real : REG_SCALEIN_BUSY;
        si.job_s = x->quick ? 8 : 12;
        si.partition = "gpu";
        si.jobs = xcalloc((size_t)si.nb, sizeof(*si.jobs));
        si_rc = bx_scalein_run(x, &f, &lab, &si);
    } else if (rc == 0 && x->reg_scalein) {
        bx_say(x, "bench: registration: no scale-in: no slurmd is kept running to hold a job");
    }
    stop_all(&r);

    if (rc == 0) {
        int msg_timeout = conf_value(conf_text, "MessageTimeout");
        if (msg_timeout <= 0)
            msg_timeout = 10; /* Slurm's default */
        cJSON_AddNumberToObject(o, "registered", r.registered);
        cJSON_AddNumberToObject(o, "idle", r.idle);
        cJSON_AddNumberToObject(o, "failedBeforeRegistering", r.failed);
        cJSON_AddItemToObject(o, "allRegisteredSeconds", bx_num(reg_s));
        cJSON_AddItemToObject(o, "allIdleSeconds", bx_num(idle_s));
        cJSON_AddItemToObject(o, "operatorSeesAllSeconds", bx_num(op_nodes_s));
        cJSON_AddItemToObject(o, "operatorWritesSettledSeconds", bx_num(writes_s));
        cJSON_AddItemToObject(o, "windowSeconds", bx_num(window_s));
        cJSON_AddStringToObject(o, "slurmVersion", lab.version ? lab.version : "");
        cJSON_AddStringToObject(o, "podSlurmdConf", pod_conf);
        cJSON_AddStringToObject(o, "podConfServer", pod_server ? pod_server : "");
        cJSON *rj = cJSON_CreateArray();
        double reg_count = 0, reg_mean = NAN;
        for (size_t i = 0; i < n_rpcs; i++) {
            cJSON *e = cJSON_CreateObject();
            cJSON_AddStringToObject(e, "type", rpcs[i].name);
            cJSON_AddNumberToObject(e, "count", rpcs[i].count);
            cJSON_AddNumberToObject(e, "aveMicroseconds", rpcs[i].ave_us);
            cJSON_AddItemToArray(rj, e);
            if (strcmp(rpcs[i].name, "MESSAGE_NODE_REGISTRATION_STATUS") == 0) {
                reg_count = rpcs[i].count;
                reg_mean = rpcs[i].ave_us / 1e6;
            }
        }
        cJSON_AddItemToObject(o, "sdiagRpcs", rj);
        double threads = sdiag_value(sdiag, "Server thread count:");
        double agent = sdiag_value(sdiag, "Agent queue size:");
        cJSON_AddItemToObject(o, "sdiagServerThreads", bx_num(threads));
        cJSON_AddItemToObject(o, "sdiagAgentQueue", bx_num(agent));
        cJSON *ej = cJSON_CreateArray();
        for (int i = 0; i < n_kinds; i++) {
            cJSON *e = cJSON_CreateObject();
            cJSON_AddStringToObject(e, "error", kinds[i].text);
            cJSON_AddNumberToObject(e, "count", kinds[i].count);
            cJSON_AddItemToArray(ej, e);
        }
        cJSON_AddNumberToObject(o, "slurmctldErrors", errors);
        cJSON_AddItemToObject(o, "slurmctldErrorKinds", ej);
        cJSON_AddNumberToObject(o, "refusedMaxNodeCount", max_nodes);
        cJSON_AddNumberToObject(o, "refusedInvalidNodeName", bad_name);
        double polls_full = bx_metric_delta(&m0, &m1, "slurmop_slurm_node_polls_total", "result=\"full\"");
        double polls_304 =
            bx_metric_delta(&m0, &m1, "slurmop_slurm_node_polls_total", "result=\"not_modified\"");
        double polls_err = bx_metric_delta(&m0, &m1, "slurmop_slurm_node_polls_total", "result=\"error\"");
        double writes_ok = bx_metric_delta(&m0, &m1, "slurmop_slurm_node_writes_total", "result=\"ok\"");
        double writes_all = bx_metric_delta(&m0, &m1, "slurmop_slurm_node_writes_total", NULL);
        double api = bx_metric_delta(&m0, &m1, "rest_client_requests_total", NULL);
        double bytes = bx_metric_delta(&m0, &m1, "slurmop_slurm_received_bytes", NULL);
        if (by_operator)
            cJSON_AddStringToObject(o, "precreateBy", "operator");
        else
            cJSON_AddItemToObject(o, "precreateBatch", bx_num(x->reg_precreate));
        cJSON_AddItemToObject(o, "precreateSeconds", bx_num(precreate_s));
        cJSON_AddItemToObject(o, "precreateRefused", bx_num(precreate_failed));
        cJSON_AddItemToObject(o, "operatorPollsFull", bx_num(polls_full));
        cJSON_AddItemToObject(o, "operatorPollsNotModified", bx_num(polls_304));
        cJSON_AddItemToObject(o, "operatorPollsError", bx_num(polls_err));
        cJSON_AddItemToObject(o, "operatorNodeWritesOk", bx_num(writes_ok));
        cJSON_AddItemToObject(o, "operatorNodeWrites", bx_num(writes_all));
        cJSON_AddItemToObject(o, "operatorApiRequests", bx_num(api));
        cJSON_AddItemToObject(o, "operatorSlurmBytes", bx_num(bytes));
        cJSON_AddItemToObject(o, "operatorApiRequestsByCode",
                              bx_metric_deltas(&m0, &m1, "rest_client_requests_total"));

        char t[7][32], title[200];
        snprintf(title, sizeof(title),
                 "Registration storm: %d dynamic nodes from the operator's slurm.conf (%s; %d slurmd kept "
                 "running, %d cycled, pace %d)",
                 n, lab.version ? lab.version : x->slurm_version, r.real, n - r.real, r.pace);
        bx_table *tb = bx_table_new(title, 4, "measure", "value", "limit", "ratio");
        char v[96], l[96], q[32];
        snprintf(v, sizeof(v), "%d", r.registered);
        snprintf(l, sizeof(l), "%d (N)", n);
        snprintf(q, sizeof(q), "%.2f", (double)r.registered / n);
        bx_table_row(tb, "nodes registered (sinfo)", v, l, q);
        double busy = reg_count * reg_mean;
        snprintf(l, sizeof(l), "%s (registrations × their mean, sdiag)", fmt_s(t[1], 32, busy));
        if (isfinite(reg_s) && busy > 0)
            snprintf(q, sizeof(q), "%.1f", reg_s / busy);
        else
            snprintf(q, sizeof(q), "n/a");
        bx_table_row(tb, "storm start → all N registered", fmt_s(t[0], 32, reg_s), l, q);
        bx_table_row(tb, "storm start → all N seen idle", fmt_s(t[2], 32, idle_s), "", "");
        if (x->reg_precreate > 0) {
            snprintf(v, sizeof(v), "%s, %d calls refused", fmt_s(t[6], 32, precreate_s), precreate_failed);
            snprintf(l, sizeof(l), "%d names a call", x->reg_precreate);
            bx_table_row(tb, "before the storm: N records made FUTURE (scontrol create)", v, l, "");
        } else if (by_operator) {
            snprintf(v, sizeof(v), "%s, %d names refused", fmt_s(t[6], 32, precreate_s), precreate_failed);
            bx_table_row(tb, "before the storm: N records made FUTURE by the operator's scale-out", v,
                         "NSPR_BATCH_MAX (1,024) names a request", "");
            bx_table_note(tb,
                          "The operator's records (FUTURE, CPUs=1 RealMemory=1000, checked on gpu-0 and "
                          "gpu-%d) were deleted before the storm: they have the cluster's SlurmdPort, and "
                          "the slurmd here, all on one host, listen on ports of their own.",
                          n - 1);
        }
        bx_table_row(tb, "storm start → the operator's node table has N", fmt_s(t[3], 32, op_nodes_s), "",
                     "");
        bx_table_row(tb, "storm start → the operator's node writes settled (3 s quiet)",
                     fmt_s(t[4], 32, writes_s), "", "");
        for (size_t i = 0; i < n_rpcs && i < 8; i++) {
            char what[128];
            snprintf(what, sizeof(what), "sdiag %.63s: count, mean", rpcs[i].name);
            snprintf(v, sizeof(v), "%.0f, %s", rpcs[i].count, fmt_s(t[5], 32, rpcs[i].ave_us / 1e6));
            snprintf(l, sizeof(l), "MessageTimeout %d s", msg_timeout);
            snprintf(q, sizeof(q), "%.4f", rpcs[i].ave_us / 1e6 / msg_timeout);
            bx_table_row(tb, what, v, l, q);
        }
        snprintf(v, sizeof(v), "%.0f / %.0f", threads, agent);
        bx_table_row(tb, "sdiag at the end: server threads / agent queue", v, "", "");
        snprintf(v, sizeof(v), "%.0f / %.0f / %.0f", polls_full, polls_304, polls_err);
        bx_table_row(tb, "operator: node polls full / 304 / error", v, "", "");
        snprintf(v, sizeof(v), "%.0f of %.0f", writes_ok, writes_all);
        snprintf(l, sizeof(l), "%d (one pod-info write per node)", n);
        snprintf(q, sizeof(q), "%.2f", writes_all / n);
        bx_table_row(tb, "operator: node writes ok", v, l, q);
        snprintf(v, sizeof(v), "%.0f", api);
        bx_table_row(tb, "operator: Kubernetes API requests in the window", v, "", "");
        snprintf(v, sizeof(v), "%d (MaxNodeCount %d, invalid node name %d)", errors, max_nodes, bad_name);
        bx_table_row(tb, "slurmctld log errors from the storm's start", v, "0", "");
        snprintf(v, sizeof(v), "%d", r.failed);
        bx_table_row(tb, "slurmd exited before their node registered", v, "0", "");
        snprintf(v, sizeof(v), "%.1f / %.1f MiB (%d running)", rss_mean / 1024, rss_max / 1024, rss_n);
        bx_table_row(tb, "slurmd RSS mean / max", v, "", "");
        bx_table_note(tb,
                      "generated: MaxNodeCount=%d TreeWidth=%d MessageTimeout=%d (-1: not in the file); the "
                      "lab's slurm.conf is the operator's with only these lines changed:",
                      conf_value(conf_text, "MaxNodeCount"), conf_value(conf_text, "TreeWidth"),
                      conf_value(conf_text, "MessageTimeout"));
        char *save = NULL;
        for (char *ln = rewrites ? strtok_r(rewrites, "\n", &save) : NULL; ln;
             ln = strtok_r(NULL, "\n", &save))
            bx_table_note(tb, "`%s`", ln);
        bx_table_note(tb,
                      "each slurmd runs as the pod's: `slurmd -Z --conf '%s'`, plus -N gpu-<i> (the pod's "
                      "hostname), Port=<its own> and -f <the lab's slurm.conf> in place of --conf-server %s",
                      pod_conf, pod_server ? pod_server : "?");
        bx_table_note(
            tb,
            "real: %d slurmd keep running; emulated: the other %d are cycled (each a real "
            "slurmd -Z that registers its node and is stopped once sinfo lists it, %d at once, %s), "
            "so those nodes are registered by real RPCs but have no slurmd afterwards",
            r.real, n - r.real, r.cycle,
            r.unique ? "each on a port no other slurmd takes" : "sharing their slots' ports");
        for (int i = 0; i < n_kinds; i++)
            bx_table_note(tb, "slurmctld error ×%d: %s", kinds[i].count, kinds[i].text);
        bx_table_emit(x, tb);
        int all = r.registered == n && r.failed == 0 && max_nodes == 0 && bad_name == 0;
        snprintf(v, sizeof(v), "%d of %d in %s", r.registered, n, fmt_s(t[6], 32, reg_s));
        bx_target(x, "registration: N dynamic nodes register from the operator's slurm.conf", v,
                  "N, 0 refused", (double)r.registered / n, all ? "met" : "MISSED", "");
        if (si_rc >= 0)
            report_scalein(x, o, &si, si_rc, lab.version ? lab.version : x->slurm_version);
    } else {
        cJSON_AddStringToObject(o, "error", err_str(rc));
        bx_target(x, "registration: N dynamic nodes register from the operator's slurm.conf", "failed", "N",
                  NAN, "MISSED", err_str(rc));
        x->failures++;
    }
    cJSON_AddItemToObject(x->results, "registration", o);

    free(sdiag);
    bx_metrics_free(&m0);
    bx_metrics_free(&m1);
    free(log_path);
    free(rewrites);
    bx_lab_stop(x, &lab);
    bx_fleet_close(x, &f);
    if (have_owner) {
        release_ports(x, owner);
        rmdir(owner);
    }
    free(ports);
    free(conf_path);
    free(conf_text);
    free(pod_conf);
    free(pod_server);
    free(r.nodes);
    free(r.slot_use);
    free(r.out_log);
    free(si.jobs);
    x->slurm_version = saved_version;
    return rc;
}
