/* slurmop-bench: the benchmark harness's main: flags, finding (or building)
 * the binaries, running the selected scenarios, writing the report. */
#include <getopt.h>
#include <libgen.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench.h"
#include "core/err.h"
#include "core/file.h"
#include "core/json.h"
#include "core/log.h"

/* registration: the defaults of --registration-real, -cycle and -pace */
#define REG_REAL_DEFAULT 128
#define REG_CYCLE_DEFAULT 16
#define REG_PACE_DEFAULT 0
#define STR_(v) #v
#define STR(v) STR_(v)
#define REG_REAL_DEFAULT_S STR(REG_REAL_DEFAULT)
#define REG_CYCLE_DEFAULT_S STR(REG_CYCLE_DEFAULT)
#define REG_PACE_DEFAULT_S STR(REG_PACE_DEFAULT)

static const char usage[] =
    "Usage: slurmop-bench [--quick] [--out DIR] [--scenario NAME ...] [--cluster kubesim|real]\n"
    "                     [--kubeconfig FILE] [--slurm-version 22.05|24.11|26.05]\n"
    "                     [--sizes 1024,4096,8192] [more flags below]\n"
    "\n"
    "Measures slurmop against the limits of the machine it runs on and prints one table per\n"
    "scenario; every figure stands beside a limit measured in the same run. Writes report.md,\n"
    "summary.json, one <scenario>.json each, SVG plots and the logs of every process into --out.\n"
    "\n"
    "Scenarios (default: all):\n"
    "  scale-out   0 -> N pods per size: time to the last create accepted, to all pods Ready, to\n"
    "              status.readyReplicas == N; includes `limit`, the bare pipelined client creating\n"
    "              the same N pods against the same kubesim, and the ratio\n"
    "  limit       only the limit half of scale-out\n"
    "  scale-in    N -> 0 against a real Slurm (slurmctld + slurmrestd of the lab) holding N nodes,\n"
    "              a share of them busy with jobs: drains issued, pods deleted only once drained\n"
    "  churn       N pods; pods failing and Nodes flapping at 10, 100 and 1,000 events/s:\n"
    "              event -> action latency from the operator's histogram, queue depth over time\n"
    "  restart     the API server drops every watch and compacts its history (410): resync time,\n"
    "              LIST calls, reconciles, writes\n"
    "  memory      RSS with N Nodes, N pods and N Slurm nodes cached; idle CPU; bytes per idle\n"
    "              Slurm poll\n"
    "  registration  (only when named) N dynamic nodes register with a slurmctld running the\n"
    "              operator's own slurm.conf (Slurm 26.05, or 24.11 by --slurm-version; N = 32 with\n"
    "              --quick): time to all registered and idle, sdiag's RPC counts, the operator's\n"
    "              Slurm reads and writes, slurmctld's refusals\n"
    "\n"
    "Flags:\n"
    "  --quick               N = 1,024 only, shorter windows (CI smoke; about 2 minutes)\n"
    "  --out DIR             where the report goes (default ./bench-results)\n"
    "  --scenario NAME       run only these (repeatable or comma-separated)\n"
    "  --sizes LIST          pod counts for scale-out (default 1024,4096,8192); the largest is the N of\n"
    "                        the other scenarios\n"
    "  --cluster KIND        kubesim (default: a fresh in-repo kubesim per run) or real: the harness\n"
    "                        starts a real control plane (tests/k8s/cluster.sh: etcd, kube-apiserver,\n"
    "                        controller-manager, scheduler, kwok) with --nodes KWOK Nodes in <out>/k8s\n"
    "                        and stops it at the end; every scenario runs on it, `restart` restarts\n"
    "                        kube-apiserver, the Slurm parts start their own lab as with kubesim\n"
    "  --kubeconfig FILE     run against this cluster instead of starting kubesim (a kind cluster:\n"
    "                        pods run --image; `restart` is skipped; the Slurm parts need --slurmrestd)\n"
    "  --namespace NS        namespace of the benchmark's objects (default: default with kubesim,\n"
    "                        slurmop-bench with --kubeconfig)\n"
    "  --image IMAGE         slurmd image of the NodeSet (default ghcr.io/slinkyproject/slurmd:25.11 with\n"
    "                        kubesim, which never pulls it; registry.k8s.io/pause:3.9 on a real cluster)\n"
    "  --k8s-dir DIR         with --cluster real: use the control plane that `tests/k8s/cluster.sh start`\n"
    "                        runs in DIR (K8S_DIR) instead of starting one, add KWOK Nodes up to --nodes,\n"
    "                        and leave it running (thousands of Nodes take minutes to be Ready); implies\n"
    "                        --cluster real\n"
    "  --pod-shape SHAPE     anti: one slurmd per Node by the NodeSet's required pod anti-affinity (the\n"
    "                        default on kubesim and with --peer, as Slinky builds them); gpu: each slurmd\n"
    "                        asks for its Node's 8 nvidia.com/gpu and the NodeSet sets oversubscribeNode,\n"
    "                        so the requests keep one pod per Node (the default with --cluster real:\n"
    "                        kube-scheduler's anti-affinity check grows with the pods placed and made an\n"
    "                        8,192-pod fleet take the best part of an hour to be Ready)\n"
    "  --nodes N             Kubernetes Nodes of kubesim (default: the largest size) or KWOK Nodes of\n"
    "                        --cluster real (default: the largest size + 1/8, at least + 8)\n"
    "  --qps Q               slurmop --qps (default 0: its client-side limiter off, so the run measures\n"
    "                        the operator and not a configured rate)\n"
    "  --repeat K            scale-out runs per size, limit and operator alternating; the best of each is\n"
    "                        reported (default 3, 1 with --quick)\n"
    "  --churn-seconds S     seconds per churn rate (default 10, 5 with --quick)\n"
    "  --idle-seconds S      idle CPU window (default 60, 10 with --quick)\n"
    "  --slurmrestd NS/NAME=URL, --slurm-conf PATH\n"
    "                        with --kubeconfig: an existing Slurm for scale-in and memory (else skipped)\n"
    "  --slurm-version V     Slurm of the labs (scale-in, memory): 22.05 (default, the host's packages;\n"
    "                        node writes through libslurm), 24.11 or 26.05 (tests/slurm/slurmlab.sh\n"
    "                        SLURMLAB_VERSION: a cached Debian root file system; node writes through REST)\n"
    "  --no-slurm            skip everything that needs the Slurm lab\n"
    "  --registration-real K  registration: slurmd kept running, one per node, as pods run them\n"
    "                        (default " REG_REAL_DEFAULT_S "; all of them with --quick unless given); the\n"
    "                        other nodes are registered by cycled slurmd, each stopped once its node\n"
    "                        is listed\n"
    "  --registration-cycle C  registration: cycled slurmd running at once (default " REG_CYCLE_DEFAULT_S
    ")\n"
    "  --registration-pace M  registration: at most M slurmd started and not yet registered (default\n"
    "                        " REG_PACE_DEFAULT_S "; 0: no cap)\n"
    "  --registration-precreate B  registration: before the storm, make the N node records with\n"
    "                        scontrol create (State=FUTURE, the pods' features), B names a call; their\n"
    "                        slurmd then register nodes that exist (default 0: none). \"operator\": the\n"
    "                        pods declare CPUs= and RealMemory=, and the operator makes the records as it\n"
    "                        creates them (the harness deletes the N pods once it reads the lab)\n"
    "  --registration-scalein  registration: then scale the NodeSet to 0 with jobs on some kept\n"
    "                        nodes: drains answered, pods gone, no busy pod deleted before its job\n"
    "  --churn-slurm         churn with a RestApi: the NodeSet's Controller reads a Slurm lab of N nodes\n"
    "                        (named like the pods, no slurmds), so every event also runs the Slurm side\n"
    "                        (cordon sync, conditions, counts); default: churn without Slurm\n"
    "  --scalein-write-rate N  during scale-in, kubesim applies API writes at most N per second, in order\n"
    "                        (its write-rate fault: a busy API server, as a real one at thousands of pods);\n"
    "                        the idle pods' deletions are then seen slowly, and the busy pods' deletes must\n"
    "                        not wait for them (kubesim only)\n"
    "  --churn-outage        with --churn-slurm (implied): kill the lab's slurmrestd 0.5 s into the 1,000\n"
    "                        events/s window of each fleet, so that window measures churn while Slurm\n"
    "                        cannot be read (the NodeSet's full passes then wait for their gap)\n"
    "  --churn-latency-ms N  during each churn window, kubesim answers every non-watch request N ms late\n"
    "                        (its latency fault: the round trip of a real API server's writes, 1-2.5 ms\n"
    "                        on a loaded one), so writes that wait for the one before show it (kubesim "
    "only)\n"
    "  --peer slinky         instead of the scenarios: slurmop (its defaults, then with Slinky's client\n"
    "                        QPS) and Slinky's slurm-operator (tests/slinky/build.sh) each on a fresh real\n"
    "                        control plane (implies --cluster real): scale-out 0 -> N, churn (100 pods\n"
    "                        deleted and recreated), a kube-apiserver restart and scale-in N -> 0 per\n"
    "                        --sizes, pod times from the harness's watch, API requests from the audit\n"
    "                        log, CPU and RSS side by side; then a scale-in of min(N, 1024) pods with busy\n"
    "                        Slurm nodes (a Slurm 26.05 lab on 127.0.0.1:6820, one run at a time: run it\n"
    "                        under flock /tmp/slurmop-lab.lock beside the tests' labs; --no-slurm skips\n"
    "                        it); with --quick slurmop with Slinky's QPS is left out\n"
    "  --pin-operator        the operator under test (slurmop; Slinky's manager with --peer) on the last\n"
    "                        CPU, the harness, kubesim or the control plane and the Slurm lab on the\n"
    "                        others, as when the API server runs on other machines (without it they\n"
    "                        all share every core, and latency tails include waiting for one)\n"
    "  --slurmop-arg ARG     one more flag for every slurmop the harness starts (repeatable), e.g.\n"
    "                        --slurmop-arg=--log-level=debug\n"
    "  --bin-dir DIR         where slurmop and kubesim are (default: beside slurmop-bench); when they\n"
    "                        are missing and DIR is a CMake build directory, they are built there\n"
    "  --help                this text\n"
    "\n"
    "Use a Release build for numbers:\n"
    "  cmake -S . -B build-rel -DCMAKE_BUILD_TYPE=Release && cmake --build build-rel -j2\n"
    "  build-rel/slurmop-bench --out /tmp/bench\n"
    "The report says which build ran; a sanitizer build is flagged as not comparable.\n"
    "The Slurm lab needs root and Debian's slurm-wlm packages (tests/deps.sh); without them the\n"
    "Slurm parts are skipped and the report says so.\n";

/* registration runs only when named: it needs Slurm 24.11 or 26.05 and
 * starts a slurmd per node */
static const char *const all_scenarios[] = {"scale-out", "limit",  "scale-in",    "churn",
                                            "restart",   "memory", "registration"};
#define N_SCEN 7
#define N_DEFAULT_SCEN 6

enum {
    OPT_QUICK = 256,
    OPT_OUT,
    OPT_SCENARIO,
    OPT_KUBECONFIG,
    OPT_SIZES,
    OPT_NAMESPACE,
    OPT_IMAGE,
    OPT_NODES,
    OPT_QPS,
    OPT_CHURN,
    OPT_IDLE,
    OPT_SLURMRESTD,
    OPT_SLURM_CONF,
    OPT_NO_SLURM,
    OPT_BIN_DIR,
    OPT_REPEAT,
    OPT_SLURMOP_ARG,
    OPT_CLUSTER,
    OPT_SLURM_VERSION,
    OPT_PEER,
    OPT_PIN,
    OPT_CHURN_SLURM,
    OPT_CHURN_OUTAGE,
    OPT_SCALEIN_WRITE_RATE,
    OPT_CHURN_LATENCY,
    OPT_POD_SHAPE,
    OPT_K8S_DIR,
    OPT_REG_REAL,
    OPT_REG_CYCLE,
    OPT_REG_PACE,
    OPT_REG_PRECREATE,
    OPT_REG_SCALEIN,
    OPT_HELP,
};

static const struct option long_opts[] = {
    {"quick", no_argument, NULL, OPT_QUICK},
    {"out", required_argument, NULL, OPT_OUT},
    {"scenario", required_argument, NULL, OPT_SCENARIO},
    {"kubeconfig", required_argument, NULL, OPT_KUBECONFIG},
    {"sizes", required_argument, NULL, OPT_SIZES},
    {"namespace", required_argument, NULL, OPT_NAMESPACE},
    {"image", required_argument, NULL, OPT_IMAGE},
    {"pod-shape", required_argument, NULL, OPT_POD_SHAPE},
    {"k8s-dir", required_argument, NULL, OPT_K8S_DIR},
    {"nodes", required_argument, NULL, OPT_NODES},
    {"qps", required_argument, NULL, OPT_QPS},
    {"churn-seconds", required_argument, NULL, OPT_CHURN},
    {"idle-seconds", required_argument, NULL, OPT_IDLE},
    {"slurmrestd", required_argument, NULL, OPT_SLURMRESTD},
    {"slurm-conf", required_argument, NULL, OPT_SLURM_CONF},
    {"no-slurm", no_argument, NULL, OPT_NO_SLURM},
    {"bin-dir", required_argument, NULL, OPT_BIN_DIR},
    {"repeat", required_argument, NULL, OPT_REPEAT},
    {"slurmop-arg", required_argument, NULL, OPT_SLURMOP_ARG},
    {"cluster", required_argument, NULL, OPT_CLUSTER},
    {"slurm-version", required_argument, NULL, OPT_SLURM_VERSION},
    {"peer", required_argument, NULL, OPT_PEER},
    {"pin-operator", no_argument, NULL, OPT_PIN},
    {"churn-slurm", no_argument, NULL, OPT_CHURN_SLURM},
    {"churn-outage", no_argument, NULL, OPT_CHURN_OUTAGE},
    {"scalein-write-rate", required_argument, NULL, OPT_SCALEIN_WRITE_RATE},
    {"churn-latency-ms", required_argument, NULL, OPT_CHURN_LATENCY},
    {"registration-real", required_argument, NULL, OPT_REG_REAL},
    {"registration-cycle", required_argument, NULL, OPT_REG_CYCLE},
    {"registration-pace", required_argument, NULL, OPT_REG_PACE},
    {"registration-precreate", required_argument, NULL, OPT_REG_PRECREATE},
    {"registration-scalein", no_argument, NULL, OPT_REG_SCALEIN},
    {"help", no_argument, NULL, OPT_HELP},
    {NULL, 0, NULL, 0},
};

static bx_ctx *the_ctx;

/* First signal: finish cleanly (waits end, children and the Slurm lab are
 * stopped, the report of what ran is written); second: exit now. */
static void on_signal(uv_signal_t *h, int signum)
{
    (void)h;
    if (the_ctx->interrupted) {
        fprintf(stderr,
                "\nslurmop-bench: second signal: exiting now (child processes may be left running)\n");
        _exit(130);
    }
    the_ctx->interrupted = 1;
    bx_say(the_ctx, "slurmop-bench: signal %d: stopping what runs and writing the report (again to exit now)",
           signum);
}

static int die_usage(const char *msg, const char *arg)
{
    fprintf(stderr, "slurmop-bench: %s%s\nRun 'slurmop-bench --help' for usage.\n", msg, arg ? arg : "");
    return 2;
}

static int parse_sizes(bx_ctx *x, const char *s)
{
    x->n_sizes = 0;
    char *copy = xstrdup(s), *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        char *end;
        long v = strtol(tok, &end, 10);
        if (*end || v < 1 || v > 100000 || x->n_sizes == BX_MAX_SIZES) {
            free(copy);
            return -1;
        }
        x->sizes[x->n_sizes++] = (int)v;
    }
    free(copy);
    return x->n_sizes ? 0 : -1;
}

static int mkdirs(const char *path)
{
    char *p = xstrdup(path);
    for (char *s = p + 1; *s; s++) {
        if (*s == '/') {
            *s = '\0';
            mkdir(p, 0755);
            *s = '/';
        }
    }
    int rc = mkdir(p, 0755);
    free(p);
    return rc == 0 || errno == EEXIST ? 0 : OP_ERRNO(errno);
}

/* A value from a CMakeCache.txt ("NAME:TYPE=value"); NULL when absent. */
static char *cache_value(const char *cache, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = cache; p && *p;) {
        if (strncmp(p, name, n) == 0 && p[n] == ':') {
            const char *eq = strchr(p, '=');
            const char *eol = strchr(p, '\n');
            if (eq && (!eol || eq < eol))
                return xstrndup(eq + 1, eol ? (size_t)(eol - eq - 1) : strlen(eq + 1));
        }
        p = strchr(p, '\n');
        if (p)
            p++;
    }
    return NULL;
}

static int file_has(const char *path, const char *needle)
{
    char *s = NULL;
    size_t len = 0;
    if (file_read_all(path, 256u << 20, &s, &len) != 0)
        return 0;
    int found = memmem(s, len, needle, strlen(needle)) != NULL;
    free(s);
    return found;
}

/* Find the binaries and the source tree; build what is missing. */
static int locate(bx_ctx *x, const char *bin_dir)
{
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0)
        return OP_ENOTFOUND;
    self[n] = '\0';
    x->bin_dir = bin_dir ? realpath(bin_dir, NULL) : xstrdup(dirname(self));
    if (x->bin_dir == NULL) {
        fprintf(stderr, "slurmop-bench: no such directory: %s\n", bin_dir);
        return OP_ENOTFOUND;
    }
    char *cache_path = xasprintf("%s/CMakeCache.txt", x->bin_dir), *cache = NULL;
    size_t len;
    if (file_read_all(cache_path, 16u << 20, &cache, &len) != 0)
        cache = NULL;
    free(cache_path);
    if (getenv("OP_SOURCE_DIR"))
        x->src_dir = xstrdup(getenv("OP_SOURCE_DIR"));
    else if (cache && (x->src_dir = cache_value(cache, "CMAKE_HOME_DIRECTORY")) != NULL)
        ;
    else
        x->src_dir = xasprintf("%s/..", x->bin_dir);
    x->build_type = cache ? cache_value(cache, "CMAKE_BUILD_TYPE") : NULL;
    if (x->build_type == NULL)
        x->build_type = xstrdup("unknown");
    if (cache) {
        char *asan = cache_value(cache, "OP_ASAN"), *ubsan = cache_value(cache, "OP_UBSAN");
        x->sanitized = (asan && strcmp(asan, "ON") == 0) || (ubsan && strcmp(ubsan, "ON") == 0);
        free(asan);
        free(ubsan);
    }
    char *ks = xasprintf("%s/kubesim", x->bin_dir), *op = xasprintf("%s/slurmop", x->bin_dir);
    int rc = 0;
    if ((access(ks, X_OK) != 0 || access(op, X_OK) != 0) && cache) {
        fprintf(stderr, "slurmop-bench: building slurmop and kubesim in %s\n", x->bin_dir);
        char *cmd = xasprintf("cmake --build '%s' --target slurmop kubesim -j2 >&2", x->bin_dir);
        if (system(cmd) != 0)
            rc = OP_EIO;
        free(cmd);
    }
    if (rc == 0 && (access(ks, X_OK) != 0 || access(op, X_OK) != 0)) {
        fprintf(stderr, "slurmop-bench: %s and %s are needed (build them, or pass --bin-dir)\n", ks, op);
        rc = OP_ENOTFOUND;
    }
    if (rc == 0)
        x->slurm_aware = file_has(op, "slurmop_slurm_node_polls_total");
    char *crds = xasprintf("%s/crds", x->src_dir);
    if (rc == 0 && access(crds, R_OK) != 0) {
        fprintf(stderr, "slurmop-bench: no source tree at %s (set OP_SOURCE_DIR)\n", x->src_dir);
        rc = OP_ENOTFOUND;
    }
    free(crds);
    free(ks);
    free(op);
    free(cache);
    return rc;
}

static char *cpu_model(void)
{
    char *s = NULL;
    size_t len;
    if (file_read_all("/proc/cpuinfo", 4u << 20, &s, &len) != 0)
        return xstrdup("unknown CPU");
    char *p = strstr(s, "model name"), *out;
    if (p && (p = strchr(p, ':')) != NULL) {
        p++;
        while (*p == ' ' || *p == '\t')
            p++;
        out = xstrndup(p, strcspn(p, "\n"));
    } else {
        out = xstrdup("unknown CPU");
    }
    free(s);
    return out;
}

static void write_report(bx_ctx *x, int argc, char **argv, double total_s)
{
    /* the targets table, printed last and put first in the report */
    bx_table *t = bx_table_new("Where slurmop stands against its targets", 6, "target", "measured",
                               "limit / target", "ratio", "verdict", "note");
    const cJSON *it;
    cJSON_ArrayForEach(it, x->targets)
    {
        char r[32];
        const cJSON *ratio = json_child(it, "ratio");
        if (cJSON_IsNumber(ratio))
            snprintf(r, sizeof(r), "%.2f×", ratio->valuedouble);
        else
            snprintf(r, sizeof(r), "—");
        bx_table_row(t, json_get_str(it, "target"), json_get_str(it, "measured"), json_get_str(it, "limit"),
                     r, json_get_str(it, "verdict"), json_get_str(it, "note"));
    }
    buf_t tables = x->report; /* keep the scenario tables; the summary goes first */
    buf_init(&x->report, BUF_UNLIMITED);
    bx_table_emit(x, t);

    struct utsname u;
    uname(&u);
    char when[64];
    time_t now = time(NULL);
    strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", gmtime(&now));
    char *cpu = cpu_model();
    buf_t md;
    buf_init(&md, BUF_UNLIMITED);
    int rc = buf_puts(&md, "# slurmop benchmark report\n\n`");
    for (int i = 0; i < argc; i++)
        rc |= buf_printf(&md, "%s%s", i ? " " : "", argv[i]);
    rc |= buf_puts(&md, x->interrupted ? "`\n\n**Interrupted: partial results.**" : "`");
    rc |= buf_printf(&md, "\n\n%s; %s, %ld cores; Linux %s; build %s%s (%s); %s kubesim; total %.0f s.\n\n",
                     when, cpu, sysconf(_SC_NPROCESSORS_ONLN), u.release, x->build_type,
                     x->sanitized ? " with sanitizers: NOT comparable" : "", x->bin_dir,
                     x->real_k8s     ? "real control plane (tests/k8s/cluster.sh), not"
                     : x->kubeconfig ? "no (--kubeconfig)"
                                     : "in-repo",
                     total_s);
    if (x->pin_cpu >= 0)
        rc |=
            buf_printf(&md,
                       "The operator under test ran alone on CPU %d (--pin-operator); everything else on the "
                       "other cores.\n\n",
                       x->pin_cpu);
    rc |= buf_printf(&md, "Pod shape: %s.\n\n",
                     x->gpu_shape
                         ? "gpu (each slurmd asks for its Node's 8 nvidia.com/gpu; oversubscribeNode, no "
                           "pod anti-affinity)"
                         : "anti (one slurmd per Node by the NodeSet's required pod anti-affinity)");
    rc |= buf_append(&md, x->report.data, x->report.len);
    rc |= buf_puts(&md, "## Scenarios\n\n");
    rc |= buf_append(&md, tables.data ? tables.data : "", tables.len);
    (void)rc;
    char *path = bx_out_path(x, "report.md");
    if (bx_write_file(path, md.data, md.len) != 0)
        bx_say(x, "bench: cannot write %s", path);
    free(path);
    buf_free(&md);
    buf_free(&tables);

    cJSON *sum = cJSON_CreateObject();
    cJSON *meta = cJSON_AddObjectToObject(sum, "meta");
    cJSON_AddStringToObject(meta, "date", when);
    cJSON_AddStringToObject(meta, "cpu", cpu);
    cJSON_AddNumberToObject(meta, "cores", (double)sysconf(_SC_NPROCESSORS_ONLN));
    cJSON_AddStringToObject(meta, "kernel", u.release);
    cJSON_AddStringToObject(meta, "buildType", x->build_type);
    cJSON_AddBoolToObject(meta, "sanitized", x->sanitized);
    cJSON_AddBoolToObject(meta, "quick", x->quick);
    cJSON_AddBoolToObject(meta, "kubesim", x->kubeconfig == NULL);
    cJSON_AddStringToObject(meta, "cluster", x->real_k8s ? "real" : x->kubeconfig ? "kubeconfig" : "kubesim");
    cJSON_AddStringToObject(meta, "slurmVersion", x->slurm_version);
    cJSON_AddBoolToObject(meta, "slurmAware", x->slurm_aware);
    cJSON_AddNumberToObject(meta, "operatorCpu", x->pin_cpu); /* -1: not pinned */
    cJSON_AddStringToObject(meta, "podShape", x->gpu_shape ? "gpu" : "anti");
    cJSON_AddNumberToObject(meta, "totalSeconds", total_s);
    cJSON *sizes = cJSON_AddArrayToObject(meta, "sizes");
    for (int i = 0; i < x->n_sizes; i++)
        cJSON_AddItemToArray(sizes, cJSON_CreateNumber(x->sizes[i]));
    cJSON_AddItemReferenceToObject(sum, "results", x->results);
    cJSON_AddItemReferenceToObject(sum, "targets", x->targets);
    char *text = cJSON_Print(sum);
    path = bx_out_path(x, "summary.json");
    if (bx_write_file(path, text, strlen(text)) != 0)
        bx_say(x, "bench: cannot write %s", path);
    free(path);
    free(text);
    /* one file per scenario */
    cJSON_ArrayForEach(it, x->results)
    {
        char name[96];
        snprintf(name, sizeof(name), "%s.json", it->string);
        text = cJSON_Print(it);
        path = bx_out_path(x, name);
        if (bx_write_file(path, text, strlen(text)) != 0)
            bx_say(x, "bench: cannot write %s", path);
        free(path);
        free(text);
    }
    cJSON_Delete(sum);
    free(cpu);
}

int main(int argc, char **argv)
{
    bx_ctx x;
    int c, want[N_SCEN] = {0}, any = 0, peer = 0, pin = 0, pod_shape = -1;
    const char *sizes = NULL, *bin_dir = NULL;
    memset(&x, 0, sizeof(x));
    x.out_dir = "bench-results";
    x.qps = 0;
    x.churn_s = -1;
    x.idle_s = -1;
    x.pin_cpu = -1;
    x.reg_real = REG_REAL_DEFAULT;
    x.reg_cycle = REG_CYCLE_DEFAULT;
    x.reg_pace = REG_PACE_DEFAULT;
    mem_init();

    while ((c = getopt_long(argc, argv, "h", long_opts, NULL)) != -1) {
        switch (c) {
        case OPT_QUICK:
            x.quick = 1;
            break;
        case OPT_OUT:
            x.out_dir = optarg;
            break;
        case OPT_SCENARIO: {
            char *copy = xstrdup(optarg), *save = NULL;
            for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                int found = 0;
                for (int i = 0; i < N_SCEN; i++)
                    if (strcmp(tok, all_scenarios[i]) == 0 || (strcmp(tok, "all") == 0 && i < N_DEFAULT_SCEN))
                        want[i] = found = 1;
                if (!found) {
                    int rc = die_usage("unknown scenario: ", tok);
                    free(copy);
                    return rc;
                }
                any = 1;
            }
            free(copy);
            break;
        }
        case OPT_KUBECONFIG:
            x.kubeconfig = optarg;
            break;
        case OPT_SIZES:
            sizes = optarg;
            break;
        case OPT_NAMESPACE:
            x.ns = optarg;
            break;
        case OPT_IMAGE:
            x.image = optarg;
            break;
        case OPT_K8S_DIR:
            x.k8s_dir = xstrdup(optarg);
            x.k8s_reuse = 1;
            x.real_k8s = 1;
            break;
        case OPT_POD_SHAPE:
            if (strcmp(optarg, "gpu") == 0)
                pod_shape = 1;
            else if (strcmp(optarg, "anti") == 0)
                pod_shape = 0;
            else
                return die_usage("--pod-shape takes anti or gpu, not ", optarg);
            break;
        case OPT_NODES:
            x.k8s_nodes = atoi(optarg);
            break;
        case OPT_QPS:
            x.qps = strtod(optarg, NULL);
            break;
        case OPT_CHURN:
            x.churn_s = strtod(optarg, NULL);
            break;
        case OPT_IDLE:
            x.idle_s = strtod(optarg, NULL);
            break;
        case OPT_SLURMRESTD:
            x.slurmrestd = optarg;
            break;
        case OPT_SLURM_CONF:
            x.slurm_conf = optarg;
            break;
        case OPT_NO_SLURM:
            x.no_slurm = 1;
            break;
        case OPT_CHURN_SLURM:
            x.churn_slurm = 1;
            break;
        case OPT_CHURN_OUTAGE:
            x.churn_slurm = x.churn_outage = 1;
            break;
        case OPT_SCALEIN_WRITE_RATE:
            x.scalein_write_rate = atof(optarg);
            if (!(x.scalein_write_rate > 0)) {
                fprintf(stderr, "slurmop-bench: --scalein-write-rate wants a rate above 0, not %s\n", optarg);
                return 2;
            }
            break;
        case OPT_CHURN_LATENCY: {
            char *end;
            long v = strtol(optarg, &end, 10);
            if (*optarg == '\0' || *end != '\0' || v < 1 || v > 10000) {
                fprintf(stderr, "slurmop-bench: --churn-latency-ms wants 1 to 10000 milliseconds, not %s\n",
                        optarg);
                return 2;
            }
            x.churn_latency_ms = (int)v;
            break;
        }
        case OPT_PIN:
            pin = 1;
            break;
        case OPT_BIN_DIR:
            bin_dir = optarg;
            break;
        case OPT_REPEAT:
            x.repeat = atoi(optarg);
            break;
        case OPT_SLURMOP_ARG:
            if (x.n_op_args == 16)
                return die_usage("too many --slurmop-arg", NULL);
            x.op_args[x.n_op_args++] = optarg;
            break;
        case OPT_CLUSTER:
            if (strcmp(optarg, "real") == 0)
                x.real_k8s = 1;
            else if (strcmp(optarg, "kubesim") != 0)
                return die_usage("--cluster: want kubesim or real, got ", optarg);
            break;
        case OPT_SLURM_VERSION:
            if (strcmp(optarg, "22.05") != 0 && strcmp(optarg, "24.11") != 0 && strcmp(optarg, "26.05") != 0)
                return die_usage("--slurm-version: want 22.05, 24.11 or 26.05, got ", optarg);
            x.slurm_version = optarg;
            x.slurm_version_given = 1;
            break;
        case OPT_PEER:
            if (strcmp(optarg, "slinky") != 0)
                return die_usage("--peer: want slinky, got ", optarg);
            peer = 1;
            x.real_k8s = 1;
            break;
        case OPT_REG_SCALEIN:
            x.reg_scalein = 1;
            break;
        case OPT_REG_PRECREATE: {
            char *end = NULL;
            long v = strtol(optarg, &end, 10);
            if (strcmp(optarg, "operator") == 0)
                v = REG_PRECREATE_OPERATOR;
            else if (*optarg == '\0' || *end != '\0' || v < 0 || v > 100000)
                return die_usage("--registration-precreate: want a count or \"operator\", not ", optarg);
            x.reg_precreate = (int)v;
            break;
        }
        case OPT_REG_REAL:
        case OPT_REG_CYCLE:
        case OPT_REG_PACE: {
            char *end;
            long v = strtol(optarg, &end, 10);
            if (*optarg == '\0' || *end != '\0' || v < (c == OPT_REG_PACE ? 0 : 1) || v > 100000)
                return die_usage("--registration-real/-cycle/-pace: want a count, not ", optarg);
            if (c == OPT_REG_REAL) {
                x.reg_real = (int)v;
                x.reg_real_given = 1;
            }
            else if (c == OPT_REG_CYCLE)
                x.reg_cycle = (int)v;
            else
                x.reg_pace = (int)v;
            break;
        }
        case 'h':
        case OPT_HELP:
            fputs(usage, stdout);
            return 0;
        default:
            return die_usage("unknown flag", NULL);
        }
    }
    if (optind < argc)
        return die_usage("unexpected argument: ", argv[optind]);
    if (x.real_k8s && x.kubeconfig)
        return die_usage("--cluster real starts its own cluster: drop --kubeconfig", NULL);
    if (x.slurm_version == NULL)
        x.slurm_version = "22.05";
    if (sizes && parse_sizes(&x, sizes) != 0)
        return die_usage("--sizes: want a comma-separated list of pod counts, got ", sizes);
    if (!sizes) {
        if (x.quick)
            parse_sizes(&x, "1024");
        else
            parse_sizes(&x, "1024,4096,8192");
    }
    if (!any)
        for (int i = 0; i < N_DEFAULT_SCEN; i++)
            want[i] = 1;
    if (want[0])
        want[1] = 0; /* scale-out includes the limit */
    int nmax = 0;
    for (int i = 0; i < x.n_sizes; i++)
        if (x.sizes[i] > nmax)
            nmax = x.sizes[i];
    /* A real cluster gets spare Nodes: one pod per Node (required
     * anti-affinity), and the scheduler counts a terminating pod, or finds a
     * Node cordoned by churn, until it is gone. */
    if (x.k8s_nodes <= 0)
        x.k8s_nodes = x.real_k8s ? nmax + (nmax / 8 > 8 ? nmax / 8 : 8) : nmax;
    if (x.repeat <= 0)
        x.repeat = x.quick ? 1 : 3;
    if (x.churn_s < 0)
        x.churn_s = x.quick ? 5 : 10;
    if (x.idle_s < 0)
        x.idle_s = x.quick ? 10 : 60;
    /* The pod shape: Slinky's (and slurmop's default) one-slurmd-per-Node
     * rule is a required pod anti-affinity, which kube-scheduler evaluates
     * against every placed pod: at 3,000 pods on 8,192 KWOK Nodes it bound
     * ~30 pods a second and slowed as they filled, so an 8,192-pod fleet
     * took the best part of an hour to be Ready. A GPU fleet gets the same
     * rule from its requests (each pod asks for the Node's 8 GPUs) at a
     * cost that does not grow with the pods placed: the default on a real
     * cluster, but not with --peer, where Slinky always adds the
     * anti-affinity and both operators must build the same pods. */
    if (pod_shape < 0)
        pod_shape = x.real_k8s && !peer;
    if (pod_shape && peer)
        return die_usage("--pod-shape gpu: ",
                         "not with --peer (Slinky's pods always carry the anti-affinity)");
    x.gpu_shape = pod_shape;
    if (peer && x.k8s_reuse)
        return die_usage("--k8s-dir: ", "not with --peer (each operator gets a fresh control plane)");
    int external = x.kubeconfig || x.real_k8s;
    if (x.ns == NULL)
        x.ns = external ? "slurmop-bench" : "default";
    if (x.image == NULL)
        x.image = external ? "registry.k8s.io/pause:3.9" : "ghcr.io/slinkyproject/slurmd:25.11";

    log_setup(LOGL_WARN, LOGF_TEXT);
    signal(SIGPIPE, SIG_IGN);
    if (locate(&x, bin_dir) != 0)
        return 1;
    if (mkdirs(x.out_dir) != 0) {
        fprintf(stderr, "slurmop-bench: cannot create %s: %s\n", x.out_dir, strerror(errno));
        return 1;
    }
    x.log_dir = xasprintf("%s/logs", x.out_dir);
    if (mkdirs(x.log_dir) != 0) {
        fprintf(stderr, "slurmop-bench: cannot create %s\n", x.log_dir);
        return 1;
    }
    uv_loop_t loop;
    uv_loop_init(&loop);
    x.loop = &loop;
    x.tty = isatty(2);
    x.results = cJSON_CreateObject();
    x.targets = cJSON_CreateArray();
    buf_init(&x.report, BUF_UNLIMITED);
    x.run_t0 = uv_hrtime();
    the_ctx = &x;
    uv_signal_t sigint, sigterm;
    uv_signal_init(&loop, &sigint);
    uv_signal_init(&loop, &sigterm);
    uv_signal_start(&sigint, on_signal, SIGINT);
    uv_signal_start(&sigterm, on_signal, SIGTERM);
    /* the signal handles must not keep the loop alive: waits run it until
     * their own condition, and the loop is closed at the end */
    uv_unref((uv_handle_t *)&sigint);
    uv_unref((uv_handle_t *)&sigterm);

    bx_say(&x, "slurmop-bench: binaries from %s (%s build%s), sources %s, results into %s", x.bin_dir,
           x.build_type, x.sanitized ? ", SANITIZERS ON: timings are not comparable" : "", x.src_dir,
           x.out_dir);
    if (strcmp(x.build_type, "Release") != 0 || x.sanitized)
        bx_say(&x, "slurmop-bench: note: use a Release build without sanitizers for numbers (see --help)");
    if (pin)
        x.pin_cpu = bx_pin_setup(&x);
    if (pin && x.pin_cpu >= 0 && x.real_k8s && !x.k8s_reuse)
        bx_say(&x,
               "bench: note: --pin-operator with --cluster real: the control plane this run starts (etcd, "
               "kube-apiserver, scheduler, kwok) inherits the harness's CPUs and shares them with it; on "
               "two cores that is one core, and 8,192 creates took 220 s instead of ~100 s");

    int rc = 0;
    if (peer) {
        /* every run starts and stops its own cluster */
        x.real_k8s = 0;
        rc = scen_peer_slinky(&x) != 0;
        memset(want, 0, sizeof(want));
    } else if (x.real_k8s) {
        /* x.real_k8s is set again once the cluster runs */
        x.real_k8s = 0;
        if (bx_k8s_start(&x, x.k8s_nodes) != 0) {
            bx_say(&x, "slurmop-bench: the real control plane did not start: nothing measured");
            rc = 1;
            memset(want, 0, sizeof(want));
        }
    }
    if (want[0] || want[1])
        rc |= scen_scale_out(&x, want[0], 1) != 0;
    if (want[2] && !x.interrupted)
        rc |= scen_scale_in(&x) != 0;
    if (want[3] && !x.interrupted)
        rc |= scen_churn(&x) != 0;
    if (want[4] && !x.interrupted)
        rc |= scen_restart(&x) != 0;
    if (want[5] && !x.interrupted)
        rc |= scen_memory(&x) != 0;
    if (want[6] && !x.interrupted)
        rc |= scen_registration(&x) != 0;

    if (x.k8s_dir && !peer)
        bx_k8s_stop(&x);
    double total = bx_secs(x.run_t0, uv_hrtime());
    write_report(&x, argc, argv, total);
    bx_say(&x, "slurmop-bench: %s in %.0f s; report: %s/report.md",
           x.interrupted ? "interrupted"
           : rc          ? "some scenarios failed"
                         : "done",
           total, x.out_dir);
    cJSON_Delete(x.results);
    cJSON_Delete(x.targets);
    buf_free(&x.report);
    uv_close((uv_handle_t *)&sigint, NULL);
    uv_close((uv_handle_t *)&sigterm, NULL);
    uv_run(&loop, UV_RUN_NOWAIT);
    if (uv_loop_close(&loop) != 0)
        bx_say(&x, "bench: loop not empty at exit");
    free(x.bin_dir);
    free(x.src_dir);
    free(x.log_dir);
    free(x.build_type);
    if (x.real_k8s)
        free((char *)x.kubeconfig);
    free(x.k8s_dir);
    return x.interrupted ? 130 : rc ? 1 : 0;
}
