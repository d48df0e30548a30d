/* bench_slurm: the Slurm lab (tests/slurm/slurmlab.sh) as the harness uses
 * it: a real slurmctld and slurmrestd on loopback (Debian's 22.05 on the
 * host, or 24.11 / 26.05 in a cached Debian root file system:
 * --slurm-version), with a few static nodes that run a slurmd each (jobs can
 * run there) and any number of slurmd-less nodes described by extra
 * slurm.conf lines. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench/bench.h"
#include "core/err.h"
#include "core/file.h"

static int have(const char *bin)
{
    const char *path = getenv("PATH");
    if (path == NULL)
        path = "/usr/sbin:/usr/bin:/sbin:/bin";
    char *copy = xasprintf("%s:/usr/sbin:/sbin", path), *save = NULL;
    int found = 0;
    for (char *d = strtok_r(copy, ":", &save); d && !found; d = strtok_r(NULL, ":", &save)) {
        char *p = xasprintf("%s/%s", d, bin);
        found = access(p, X_OK) == 0;
        free(p);
    }
    free(copy);
    return found;
}

/* The value of `export NAME=value` in the lab's env output (quotes dropped). */
static char *env_value(const char *text, const char *name)
{
    char key[96];
    snprintf(key, sizeof(key), "export %s=", name);
    const char *p = strstr(text, key);
    if (p == NULL)
        return NULL;
    p += strlen(key);
    size_t n = strcspn(p, "\n");
    if (n >= 2 && p[0] == '"' && p[n - 1] == '"')
        return xstrndup(p + 1, n - 2);
    return xstrndup(p, n);
}

int bx_lab_start(bx_ctx *x, bx_lab *lab, const char *static_names, const char *extra_conf)
{
    return bx_lab_start_at(x, lab, static_names, extra_conf, 0);
}

/* conf_from: a slurm.conf for slurmlab.sh to run (SLURMLAB_CONF_FROM) in
 * place of its own; static_names and extra_conf are then unused. */
static int lab_start(bx_ctx *x, bx_lab *lab, const char *static_names, const char *extra_conf, int rest_port,
                     const char *conf_from)
{
    static const char *const bins[] = {"slurmctld", "slurmd", "slurmrestd", "munged",
                                       "scontrol",  "sbatch", "sinfo"};
    static const char *const chroot_bins[] = {"debootstrap", "chroot", "unshare"};
    memset(lab, 0, sizeof(*lab));
    const char *version = x->slurm_version ? x->slurm_version : "22.05";
    int newer = strcmp(version, "22.05") != 0;
    /* 22.05 runs the host's Slurm; the others a root file system of their own */
    for (size_t i = 0; !newer && i < sizeof(bins) / sizeof(bins[0]); i++)
        if (!have(bins[i])) {
            bx_say(x, "bench: %s not found: Slurm parts skipped (tests/deps.sh installs Slurm)", bins[i]);
            return OP_ENOTSUP;
        }
    for (size_t i = 0; newer && i < sizeof(chroot_bins) / sizeof(chroot_bins[0]); i++)
        if (!have(chroot_bins[i])) {
            bx_say(x, "bench: %s not found: the Slurm %s lab cannot run, Slurm parts skipped", chroot_bins[i],
                   version);
            return OP_ENOTSUP;
        }
    if (geteuid() != 0) {
        bx_say(x, "bench: the Slurm lab needs root: Slurm parts skipped");
        return OP_ENOTSUP;
    }
    char tmpl[] = "/tmp/slurmop-bench-lab.XXXXXX";
    if (mkdtemp(tmpl) == NULL)
        return OP_ERRNO(errno);
    chmod(tmpl, 0755); /* munged needs every directory above its socket searchable */
    lab->dir = xasprintf("%s/lab", tmpl);
    char *script = xasprintf("%s/tests/slurm/slurmlab.sh", x->src_dir);
    char *e_dir = xasprintf("SLURMLAB_DIR=%s", lab->dir);
    char *e_names = conf_from ? xasprintf("SLURMLAB_CONF_FROM=%s", conf_from)
                              : xasprintf("SLURMLAB_NODE_NAMES=%s", static_names ? static_names : "lab-0");
    char *e_conf = xasprintf("SLURMLAB_EXTRA_CONF=%s", conf_from || !extra_conf ? "" : extra_conf);
    char *e_ver = xasprintf("SLURMLAB_VERSION=%s", version);
    /* a free port unless the caller needs a fixed one (--peer: Slinky's
     * manager under DEBUG=1 reaches slurmrestd at localhost:6820 only) */
    char *e_port = rest_port > 0 ? xasprintf("SLURMLAB_REST_PORT=%d", rest_port) : NULL;
    /* Only root and SlurmUser may update nodes: on the newer versions the
     * operator's REST writes carry a token of SlurmUser "slurm", as in a
     * Slinky cluster. 22.05 writes through libslurm as root. */
    const char *env[7] = {e_dir, e_names, e_conf, e_ver, NULL, NULL, NULL};
    size_t ne = 4;
    if (newer)
        env[ne++] = "SLURMLAB_SLURM_USER=slurm";
    if (e_port)
        env[ne++] = e_port;
    const char *argv[] = {"/bin/bash", script, "start", NULL};
    char *log = xasprintf("%s/slurmlab.log", x->log_dir);
    char *out = NULL;
    /* a first run of a newer version debootstraps its root file system */
    int rc = bx_run(x, argv, env, log, newer ? 1200 : 300, &out);
    lab->started = 1; /* even a failed start may leave daemons: stop cleans up */
    if (rc != 0) {
        bx_say(x, "bench: the Slurm lab did not start (exit %d, see %s)", rc, log);
        rc = OP_EIO;
    } else {
        lab->env_text = out;
        out = NULL;
        lab->slurm_conf = env_value(lab->env_text, "SLURM_CONF");
        lab->rest_url = env_value(lab->env_text, "SLURMRESTD_URL");
        lab->rest_user = env_value(lab->env_text, "SLURMRESTD_USER");
        lab->rest_token = env_value(lab->env_text, "SLURMRESTD_TOKEN");
        lab->jwt_key_path = env_value(lab->env_text, "SLURMLAB_JWT_KEY");
        lab->bin = env_value(lab->env_text, "SLURMLAB_BIN");
        lab->api = env_value(lab->env_text, "SLURMLAB_API");
        lab->run = env_value(lab->env_text, "SLURMLAB_RUN");
        lab->rewrites = env_value(lab->env_text, "SLURMLAB_CONF_REWRITES");
        char *port = env_value(lab->env_text, "SLURMLAB_CTLD_PORT");
        lab->ctld_port = port ? atoi(port) : 0;
        free(port);
        port = env_value(lab->env_text, "SLURMLAB_SLURMD_PORT");
        lab->slurmd_port = port ? atoi(port) : 0;
        free(port);
        lab->newer = newer;
        if (lab->api == NULL)
            lab->api = xstrdup("v0.0.38");
        if (!lab->slurm_conf || !lab->rest_url || !lab->rest_token || !lab->jwt_key_path || !lab->bin) {
            bx_say(x, "bench: the Slurm lab's environment is incomplete");
            rc = OP_EIO;
        }
    }
    free(out);
    if (rc == 0) {
        /* "slurm-wlm 26.05.5" (Debian's build) or "slurm 22.05.8" */
        const char *v[] = {"scontrol", "--version", NULL};
        char *ver = NULL;
        if (bx_lab_cmd(x, lab, v, &ver) == 0 && ver)
            lab->version = xstrndup(ver, strcspn(ver, "\n"));
        free(ver);
    }
    free(script);
    free(e_dir);
    free(e_names);
    free(e_conf);
    free(e_ver);
    free(e_port);
    free(log);
    if (rc)
        bx_lab_stop(x, lab);
    return rc;
}

int bx_lab_start_at(bx_ctx *x, bx_lab *lab, const char *static_names, const char *extra_conf, int rest_port)
{
    return lab_start(x, lab, static_names, extra_conf, rest_port, NULL);
}

int bx_lab_start_from(bx_ctx *x, bx_lab *lab, const char *conf_path, int rest_port)
{
    return lab_start(x, lab, NULL, NULL, rest_port, conf_path);
}

int bx_lab_start_nodes(bx_ctx *x, bx_lab *lab, int n)
{
    char *conf = xasprintf("MaxNodeCount=%d\n"
                           "NodeName=gpu-[0-%d] NodeHostname=localhost NodeAddr=127.0.0.1 CPUs=2 "
                           "RealMemory=1000 State=UNKNOWN\n"
                           "PartitionName=gpu Nodes=gpu-[0-%d] MaxTime=INFINITE State=UP\n"
                           "SlurmdTimeout=0",
                           n + 16, n - 1, n - 1);
    int rc = bx_lab_start(x, lab, "lab1", conf);
    free(conf);
    return rc;
}

/* 1 when process pid carries the lab's tag (slurmlab.sh puts
 * SLURMLAB_TAG=<lab dir> in its daemons' environments): a PID file may name
 * a process that has died, and PIDs are reused. */
static int lab_owns(const bx_lab *lab, long pid)
{
    char *path = xasprintf("/proc/%ld/environ", pid), *env = NULL;
    size_t len = 0;
    int rc = file_read_all(path, 1u << 20, &env, &len);
    free(path);
    if (rc != 0)
        return 0;
    char *want = xasprintf("SLURMLAB_TAG=%s", lab->dir);
    size_t wl = strlen(want);
    int found = 0;
    for (size_t i = 0; i < len && !found; i += strlen(env + i) + 1)
        found = len - i >= wl && strcmp(env + i, want) == 0;
    free(want);
    free(env);
    return found;
}

int bx_lab_kill_rest(bx_lab *lab)
{
    if (!lab->started || !lab->dir)
        return OP_EINVAL;
    char *path = xasprintf("%s/run/slurmrestd.pid", lab->dir), *text = NULL;
    size_t len = 0;
    int rc = file_read_all(path, 64, &text, &len);
    free(path);
    if (rc != 0)
        return rc;
    long pid = strtol(text, NULL, 10);
    free(text);
    if (pid <= 1 || !lab_owns(lab, pid))
        return OP_EINVAL;
    return kill((pid_t)pid, SIGKILL) == 0 ? 0 : OP_ERRNO(errno);
}

void bx_lab_stop(bx_ctx *x, bx_lab *lab)
{
    static int seq;
    x->cleanup++;
    if (lab->dir) {
        /* keep slurmctld's log beside the others */
        char *src = xasprintf("%s/log/slurmctld.log", lab->dir), *text = NULL;
        size_t len = 0;
        if (file_read_all(src, 512u << 20, &text, &len) == 0) {
            char *dst = xasprintf("%s/slurmctld-%d.log", x->log_dir, ++seq);
            (void)bx_write_file(dst, text, len);
            free(dst);
        }
        free(text);
        free(src);
    }
    if (lab->started && lab->dir) {
        char *script = xasprintf("%s/tests/slurm/slurmlab.sh", x->src_dir);
        char *e_dir = xasprintf("SLURMLAB_DIR=%s", lab->dir);
        const char *env[] = {e_dir, NULL};
        const char *argv[] = {"/bin/bash", script, "stop", "--clean", NULL};
        char *log = xasprintf("%s/slurmlab.log", x->log_dir);
        int rc = bx_run(x, argv, env, log, 120, NULL);
        if (rc != 0)
            bx_say(x, "bench: stopping the Slurm lab: exit %d (see %s)", rc, log);
        free(script);
        free(e_dir);
        free(log);
    }
    if (lab->dir) {
        char *parent = xstrdup(lab->dir);
        char *slash = strrchr(parent, '/');
        if (slash) {
            *slash = '\0';
            rmdir(parent);
        }
        free(parent);
    }
    free(lab->dir);
    free(lab->env_text);
    free(lab->slurm_conf);
    free(lab->rest_url);
    free(lab->rest_user);
    free(lab->rest_token);
    free(lab->jwt_key_path);
    free(lab->version);
    free(lab->bin);
    free(lab->api);
    free(lab->run);
    free(lab->rewrites);
    memset(lab, 0, sizeof(*lab));
    x->cleanup--;
}

int bx_lab_cmd(bx_ctx *x, bx_lab *lab, const char *const *argv, char **out)
{
    char *e = xasprintf("SLURM_CONF=%s", lab->slurm_conf);
    const char *env[] = {e, NULL};
    /* SLURMLAB_BIN holds the lab version's clients (wrappers that run them
     * in its root file system; links to the host's for 22.05) */
    const char *av[16];
    size_t n = 0;
    char *first = NULL;
    for (; argv[n] && n < 15; n++)
        av[n] = argv[n];
    av[n] = NULL;
    if (lab->bin && argv[0] && argv[0][0] != '/') {
        first = xasprintf("%s/%s", lab->bin, argv[0]);
        if (access(first, X_OK) == 0)
            av[0] = first;
    }
    int rc = bx_run(x, av, env, NULL, 60, out);
    free(first);
    free(e);
    return rc;
}

char *bx_lab_jobs(bx_ctx *x, bx_lab *lab)
{
    const char *argv[] = {"squeue", "-h", "-t", "all", "-o", "%i %T", NULL};
    char *out = NULL;
    if (bx_lab_cmd(x, lab, argv, &out) != 0) {
        free(out);
        return NULL;
    }
    return out ? out : xstrdup("");
}

/* The state jobs lists for job id (its length in *len), NULL: not listed. */
static const char *job_state(const char *jobs, const char *id, size_t *len)
{
    size_t idl = strlen(id);
    if (jobs == NULL || idl == 0)
        return NULL;
    for (const char *l = jobs; *l;) {
        const char *eol = strchr(l, '\n');
        size_t ll = eol ? (size_t)(eol - l) : strlen(l);
        if (ll > idl && strncmp(l, id, idl) == 0 && l[idl] == ' ') {
            *len = ll - idl - 1;
            return l + idl + 1;
        }
        l += ll + (eol != NULL);
    }
    return NULL;
}

static int state_is(const char *st, size_t len, const char *want)
{
    return st && strlen(want) == len && strncmp(st, want, len) == 0;
}

int bx_job_ended(const char *jobs, const char *id)
{
    static const char *const done[] = {"COMPLETED", "CANCELLED", "FAILED",    "TIMEOUT",     "NODE_FAIL",
                                       "PREEMPTED", "BOOT_FAIL", "DEADLINE", "OUT_OF_MEMORY", NULL};
    size_t len = 0;
    const char *st = job_state(jobs, id, &len);
    for (int i = 0; st && done[i]; i++)
        if (state_is(st, len, done[i]))
            return 1;
    return 0;
}

void bx_busy_read(const char *jobs, const char *id, uint64_t sent, uint64_t now, uint64_t *ended,
                  uint64_t *busy)
{
    if (*ended)
        return;
    if (bx_job_ended(jobs, id))
        *ended = now;
    else
        *busy = sent;
}

int bx_busy_deleted_while_busy(const bx_busy_job *j)
{
    return j->ended == 0 || j->deleted < j->busy;
}

int bx_job_running(const char *jobs, const char *id)
{
    size_t len = 0;
    return state_is(job_state(jobs, id, &len), len, "RUNNING");
}

int bx_lab_jwt_key(bx_lab *lab, char **key, size_t *len)
{
    return file_read_all(lab->jwt_key_path, 1u << 16, key, len);
}
