/* bench_proc: child processes of the harness (spawn, stop, run to
 * completion), their CPU time and RSS from /proc, and the waiting
 * primitives every scenario script is built on. */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench.h"
#include "core/file.h"
#include "core/err.h"

extern char **environ;

struct bx_proc {
    uv_process_t h;
    char *name;
    int pid;
    int exited;
    int64_t status;
    int term_signal;
    int closed;
};

/* ------------------------------------------------------------------ */
/* progress line and waiting */

void bx_progress_clear(bx_ctx *x)
{
    if (x->tty && x->last_progress) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
    }
    x->last_progress = 0;
}

void bx_say(bx_ctx *x, const char *fmt, ...)
{
    va_list ap;
    bx_progress_clear(x);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
    x->last_progress = 0;
}

void bx_step(bx_ctx *x, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(x->step, sizeof(x->step), fmt, ap);
    va_end(ap);
    x->step_t0 = uv_hrtime();
    x->status_fn = NULL;
    if (!x->tty) {
        fprintf(stderr, "[%6.1fs] %s\n", bx_secs(x->run_t0, x->step_t0), x->step);
        fflush(stderr);
    }
}

void bx_set_status(bx_ctx *x, bx_status_fn fn, void *arg)
{
    x->status_fn = fn;
    x->status_arg = arg;
}

/* The progress line: rewritten in place on a terminal (4 times a second),
 * one line every 10 seconds otherwise (CI logs). */
static void progress(bx_ctx *x)
{
    uint64_t now = uv_hrtime();
    uint64_t every = x->tty ? 250000000ull : 10000000000ull;
    if (x->step[0] == '\0' || (x->last_progress && now - x->last_progress < every))
        return;
    if (!x->tty && x->last_progress == 0) {
        x->last_progress = now; /* bx_step already printed the step */
        return;
    }
    char detail[200] = "";
    if (x->status_fn)
        x->status_fn(x->status_arg, detail, sizeof(detail));
    if (x->tty)
        fprintf(stderr, "\r\033[K[%6.1fs] %s (%.1f s)%s%s", bx_secs(x->run_t0, now), x->step,
                bx_secs(x->step_t0, now), detail[0] ? ": " : "", detail);
    else
        fprintf(stderr, "[%6.1fs]   ... %s (%.0f s)%s%s\n", bx_secs(x->run_t0, now), x->step,
                bx_secs(x->step_t0, now), detail[0] ? ": " : "", detail);
    fflush(stderr);
    x->last_progress = now;
}

static void tick_cb(uv_timer_t *t)
{
    (void)t;
}

int bx_wait(bx_ctx *x, int (*pred)(void *arg), void *arg, double timeout_s)
{
    uv_timer_t tick;
    uint64_t deadline = uv_hrtime() + (uint64_t)(timeout_s * 1e9);
    int ok = 0;
    uv_timer_init(x->loop, &tick);
    uv_timer_start(&tick, tick_cb, 5, 5);
    int canceled = 0;
    for (;;) {
        if (pred && pred(arg)) {
            ok = 1;
            break;
        }
        if (uv_hrtime() >= deadline)
            break;
        if (bx_stop_requested(x)) {
            canceled = 1;
            break;
        }
        progress(x);
        uv_run(x->loop, UV_RUN_ONCE);
    }
    uv_close((uv_handle_t *)&tick, NULL);
    uv_run(x->loop, UV_RUN_NOWAIT); /* the close callback */
    return ok ? 0 : canceled ? OP_ECANCELED : OP_ETIMEOUT;
}

void bx_sleep(bx_ctx *x, double s)
{
    (void)bx_wait(x, NULL, NULL, s);
}

/* ------------------------------------------------------------------ */
/* spawning */

static char **merged_env(const char *const *extra)
{
    size_t n = 0, m = 0;
    while (environ[n])
        n++;
    while (extra && extra[m])
        m++;
    char **env = xcalloc(n + m + 1, sizeof(char *));
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        /* an extra entry replaces the inherited one of the same name */
        const char *eq = strchr(environ[i], '=');
        size_t klen = eq ? (size_t)(eq - environ[i]) : strlen(environ[i]);
        int replaced = 0;
        for (size_t j = 0; j < m; j++)
            if (strncmp(extra[j], environ[i], klen) == 0 && extra[j][klen] == '=')
                replaced = 1;
        if (!replaced)
            env[k++] = environ[i];
    }
    for (size_t j = 0; j < m; j++)
        env[k++] = (char *)extra[j];
    env[k] = NULL;
    return env;
}

/* uv_spawn argv[0] with this process's environment plus env, and three
 * stdio slots. */
static int spawn(bx_ctx *x, uv_process_t *h, const char *const *argv, const char *const *env,
                 uv_stdio_container_t stdio[3], uv_exit_cb exit_cb)
{
    char **e = merged_env(env);
    uv_process_options_t o;
    memset(&o, 0, sizeof(o));
    o.file = argv[0];
    o.args = (char **)argv;
    o.env = e;
    o.exit_cb = exit_cb;
    o.stdio = stdio;
    o.stdio_count = 3;
    int rc = uv_spawn(x->loop, h, &o);
    free(e);
    return rc;
}

static void on_exit_cb(uv_process_t *h, int64_t status, int sig)
{
    bx_proc *p = h->data;
    p->exited = 1;
    p->status = status;
    p->term_signal = sig;
}

static void on_proc_closed(uv_handle_t *h)
{
    bx_proc *p = h->data;
    p->closed = 1;
}

bx_proc *bx_proc_start(bx_ctx *x, const char *name, const char *const *argv, const char *const *env,
                       const char *log_path)
{
    int fd = open(log_path ? log_path : "/dev/null", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
        bx_say(x, "bench: cannot open %s: %s", log_path, strerror(errno));
        return NULL;
    }
    bx_proc *p = xcalloc(1, sizeof(*p));
    p->name = xstrdup(name);
    p->h.data = p;
    uv_stdio_container_t stdio[3];
    stdio[0].flags = UV_IGNORE;
    stdio[1].flags = UV_INHERIT_FD;
    stdio[1].data.fd = fd;
    stdio[2].flags = UV_INHERIT_FD;
    stdio[2].data.fd = fd;
    int rc = spawn(x, &p->h, argv, env, stdio, on_exit_cb);
    close(fd);
    if (rc) {
        bx_say(x, "bench: cannot start %s (%s): %s", name, argv[0], uv_strerror(rc));
        uv_close((uv_handle_t *)&p->h, on_proc_closed);
        while (!p->closed)
            uv_run(x->loop, UV_RUN_ONCE);
        free(p->name);
        free(p);
        return NULL;
    }
    p->pid = p->h.pid;
    return p;
}

int bx_pin_setup(bx_ctx *x)
{
    cpu_set_t all, rest;
    if (sched_getaffinity(0, sizeof(all), &all) != 0 || CPU_COUNT(&all) < 2) {
        bx_say(x, "bench: --pin-operator needs two usable CPUs; running unpinned");
        return -1;
    }
    int last = -1;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &all))
            last = c;
    rest = all;
    CPU_CLR(last, &rest);
    if (sched_setaffinity(0, sizeof(rest), &rest) != 0) {
        bx_say(x, "bench: --pin-operator: sched_setaffinity: %s; running unpinned", strerror(errno));
        return -1;
    }
    bx_say(x,
           "bench: --pin-operator: the operator under test on CPU %d, the harness and everything else on the "
           "other %d",
           last, CPU_COUNT(&rest));
    return last;
}

/* Every thread of pid gets mask: sched_setaffinity(pid) moves only the
 * main one, and threads started before keep the mask they inherited.
 * Returns the threads moved. */
static int set_threads_affinity(int pid, const cpu_set_t *mask)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/task", pid);
    DIR *d = opendir(path);
    struct dirent *e;
    int n = 0;
    while (d && (e = readdir(d)) != NULL) {
        int tid = atoi(e->d_name);
        if (tid > 0 && sched_setaffinity(tid, sizeof(*mask), mask) == 0)
            n++;
    }
    if (d)
        closedir(d);
    return n;
}

void bx_proc_pin(bx_ctx *x, const bx_proc *p)
{
    if (x->pin_cpu < 0 || p == NULL || p->exited)
        return;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(x->pin_cpu, &one);
    if (set_threads_affinity(p->pid, &one) == 0)
        bx_say(x, "bench: could not pin %s (pid %d) to CPU %d", p->name, p->pid, x->pin_cpu);
}

int bx_pin_tagged_away(bx_ctx *x, const char *tag, int away)
{
    cpu_set_t mask;
    if (x->pin_cpu < 0 || tag == NULL || sched_getaffinity(0, sizeof(mask), &mask) != 0)
        return 0;
    /* the harness's own mask is every CPU but the operator's */
    if (!away)
        CPU_SET(x->pin_cpu, &mask);
    char want[PATH_MAX + 32];
    int wlen = snprintf(want, sizeof(want), "K8S_CLUSTER_TAG=%s", tag);
    int moved = 0;
    DIR *d = opendir("/proc");
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        int pid = atoi(e->d_name);
        if (pid <= 0)
            continue;
        char path[64], *env = NULL;
        size_t len = 0;
        snprintf(path, sizeof(path), "/proc/%d/environ", pid);
        if (file_read_all(path, 1u << 20, &env, &len) != 0)
            continue;
        /* NUL-separated entries: look for the exact one */
        int tagged = 0;
        for (size_t i = 0; i < len && !tagged; i += strlen(env + i) + 1)
            tagged = strncmp(env + i, want, (size_t)wlen + 1) == 0;
        free(env);
        if (tagged)
            moved += set_threads_affinity(pid, &mask);
    }
    if (d)
        closedir(d);
    return moved;
}

int bx_proc_pid(const bx_proc *p)
{
    return p && !p->exited ? p->pid : 0;
}

int bx_proc_exited(const bx_proc *p)
{
    return p == NULL || p->exited;
}

static int exited_pred(void *arg)
{
    return ((bx_proc *)arg)->exited;
}

static int closed_pred(void *arg)
{
    return ((bx_proc *)arg)->closed;
}

int bx_proc_stop(bx_ctx *x, bx_proc *p, int sig, double timeout_s)
{
    if (p == NULL)
        return 0;
    x->cleanup++;
    if (!p->exited) {
        uv_process_kill(&p->h, sig);
        if (bx_wait(x, exited_pred, p, timeout_s) != 0) {
            bx_say(x, "bench: %s did not stop within %.0f s after signal %d: killing it", p->name, timeout_s,
                   sig);
            uv_process_kill(&p->h, SIGKILL);
            (void)bx_wait(x, exited_pred, p, 10);
        }
    }
    int rc = p->term_signal ? 128 + p->term_signal : (int)p->status;
    uv_close((uv_handle_t *)&p->h, on_proc_closed);
    (void)bx_wait(x, closed_pred, p, 5);
    x->cleanup--;
    free(p->name);
    free(p);
    return rc;
}

/* ------------------------------------------------------------------ */
/* /proc */

long bx_rss_kib(int pid)
{
    char path[64], line[256];
    long kib = -1;
    snprintf(path, sizeof(path), "/proc/%d/status", pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    while (fgets(line, sizeof(line), f))
        if (strncmp(line, "VmRSS:", 6) == 0) {
            kib = strtol(line + 6, NULL, 10);
            break;
        }
    fclose(f);
    return kib;
}

static double stat_cpu(const char *path);

double bx_cpu_seconds(int pid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    return stat_cpu(path);
}

double bx_loop_cpu_seconds(int pid)
{
    char path[80];
    snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", pid, pid);
    return stat_cpu(path);
}

static double stat_cpu(const char *path)
{
    char text[1024];
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    size_t n = fread(text, 1, sizeof(text) - 1, f);
    fclose(f);
    text[n] = '\0';
    /* fields after the command name, which is in parentheses and may hold spaces */
    const char *p = strrchr(text, ')');
    if (p == NULL)
        return -1;
    unsigned long utime = 0, stime = 0;
    /* state(3) ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime(14) stime(15) */
    if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &utime, &stime) != 2)
        return -1;
    return (double)(utime + stime) / (double)sysconf(_SC_CLK_TCK);
}

/* ------------------------------------------------------------------ */
/* run to completion */

struct run {
    uv_process_t h;
    uv_pipe_t out;
    buf_t buf;
    int exited, eof, closed;
    int64_t status;
    int sig;
};

static void run_alloc(uv_handle_t *h, size_t hint, uv_buf_t *b)
{
    static char slab[65536];
    (void)h;
    (void)hint;
    b->base = slab;
    b->len = sizeof(slab);
}

static void run_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
    struct run *r = s->data;
    if (n > 0) {
        if (buf_append(&r->buf, b->base, (size_t)n) != 0)
            r->eof = 1; /* over the cap: stop collecting */
    } else if (n < 0) {
        r->eof = 1;
        uv_read_stop(s);
    }
}

static void run_exit(uv_process_t *h, int64_t status, int sig)
{
    struct run *r = h->data;
    r->exited = 1;
    r->status = status;
    r->sig = sig;
}

static void run_closed(uv_handle_t *h)
{
    struct run *r = h->data;
    r->closed++;
}

static int run_done(void *arg)
{
    struct run *r = arg;
    return r->exited && r->eof;
}

static int run_closed_all(void *arg)
{
    return ((struct run *)arg)->closed == 2;
}

static int run_exited(void *arg)
{
    return ((struct run *)arg)->exited;
}

int bx_run(bx_ctx *x, const char *const *argv, const char *const *env, const char *log_path, double timeout_s,
           char **out)
{
    struct run r;
    memset(&r, 0, sizeof(r));
    buf_init(&r.buf, 16u << 20);
    r.h.data = &r;
    r.out.data = &r;
    uv_pipe_init(x->loop, &r.out, 0);
    int fd = open(log_path ? log_path : "/dev/null", O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    uv_stdio_container_t stdio[3];
    stdio[0].flags = UV_IGNORE;
    stdio[1].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
    stdio[1].data.stream = (uv_stream_t *)&r.out;
    stdio[2].flags = fd >= 0 ? UV_INHERIT_FD : UV_IGNORE;
    stdio[2].data.fd = fd;
    int rc = spawn(x, &r.h, argv, env, stdio, run_exit);
    if (fd >= 0)
        close(fd);
    if (rc) {
        bx_say(x, "bench: cannot run %s: %s", argv[0], uv_strerror(rc));
        r.closed = 1; /* the process handle is closed below too */
        uv_close((uv_handle_t *)&r.h, NULL);
        uv_close((uv_handle_t *)&r.out, run_closed);
        (void)bx_wait(x, run_closed_all, &r, 5);
        buf_free(&r.buf);
        return rc;
    }
    uv_read_start((uv_stream_t *)&r.out, run_alloc, run_read);
    int status;
    int w = bx_wait(x, run_exited, &r, timeout_s);
    x->cleanup++; /* from here the handles must be closed whatever happens */
    if (w != 0) {
        if (w != OP_ECANCELED)
            bx_say(x, "bench: %s did not finish within %.0f s: killing it", argv[0], timeout_s);
        uv_process_kill(&r.h, SIGKILL);
        (void)bx_wait(x, run_exited, &r, 10);
        status = OP_ETIMEOUT;
    } else {
        /* A daemon started by the command may hold the pipe open: give the
         * output two seconds to end, then stop reading. */
        (void)bx_wait(x, run_done, &r, 2);
        status = r.sig ? 128 + r.sig : (int)r.status;
    }
    uv_close((uv_handle_t *)&r.h, run_closed);
    uv_close((uv_handle_t *)&r.out, run_closed);
    (void)bx_wait(x, run_closed_all, &r, 5);
    x->cleanup--;
    if (out)
        *out = r.buf.data ? buf_detach(&r.buf, NULL) : xstrdup("");
    buf_free(&r.buf);
    return status;
}
