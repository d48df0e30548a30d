/* sh_script.h: run a generated container script with /bin/sh the way a
 * container runtime does, for the unit tests of the pod builders.
 *
 * sh_pid1_sigterm() starts `sh -c <script>` as PID 1 of a new PID namespace
 * (what a container's first process is: the kernel then drops every signal
 * for which the process has no handler, so a shell without a trap ignores
 * SIGTERM), optionally writes a line into a FIFO the script reads, sends
 * SIGTERM from the parent namespace (as the kubelet's runtime does) and
 * reports how the script ended. Needs CAP_SYS_ADMIN for the namespace (CI
 * runs the tests as root); SH_NO_NAMESPACE when it cannot have one. */
#ifndef OP_TEST_SH_SCRIPT_H
#define OP_TEST_SH_SCRIPT_H

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { SH_NO_NAMESPACE = -2 };

typedef struct sh_outcome {
    int exited;     /* 1: the script ended by itself after SIGTERM */
    int status;     /* its exit status (when exited) */
    double seconds; /* SIGTERM to exit */
    char out[256];  /* what it wrote to stdout, NUL-terminated */
} sh_outcome;

static double sh_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* envs: NULL-terminated "K=V" strings for the script. fifo: when non-NULL,
 * wait for it to appear and write line into it before the SIGTERM. Waits at
 * most timeout seconds for the exit, then kills the namespace. Returns 0
 * (outcome in *o), SH_NO_NAMESPACE, or -1 on a setup failure. */
static int sh_pid1_sigterm(const char *script, char *const envs[], const char *fifo, const char *line,
                           double timeout, sh_outcome *o)
{
    memset(o, 0, sizeof(*o));
    int out[2], ready[2];
    if (pipe(out) != 0 || pipe(ready) != 0)
        return -1;
    pid_t mid = fork();
    if (mid < 0)
        return -1;
    if (mid == 0) {
        /* The intermediate process: unshare, then its first child is PID 1
         * of the new namespace. It reports the child's PID (as seen from
         * here) through ready. */
        close(out[0]);
        close(ready[0]);
        char msg[32];
        if (unshare(CLONE_NEWPID) != 0) {
            snprintf(msg, sizeof(msg), "E");
            (void)!write(ready[1], msg, strlen(msg));
            _exit(0);
        }
        pid_t init = fork();
        if (init == 0) {
            dup2(out[1], 1);
            close(out[1]);
            close(ready[1]);
            execle("/bin/sh", "sh", "-c", script, (char *)NULL, envs);
            _exit(127);
        }
        snprintf(msg, sizeof(msg), "%d", (int)init);
        (void)!write(ready[1], msg, strlen(msg));
        close(ready[1]);
        close(out[1]);
        int st = 0;
        waitpid(init, &st, 0);
        _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
    }
    close(out[1]);
    close(ready[1]);
    char msg[32] = {0};
    ssize_t n = read(ready[0], msg, sizeof(msg) - 1);
    close(ready[0]);
    if (n <= 0 || msg[0] == 'E') {
        waitpid(mid, NULL, 0);
        close(out[0]);
        return SH_NO_NAMESPACE;
    }
    pid_t init = (pid_t)atoi(msg);
    int rc = 0;
    if (fifo) {
        struct stat sb;
        double t0 = sh_now();
        while ((stat(fifo, &sb) != 0 || !S_ISFIFO(sb.st_mode)) && sh_now() - t0 < 5)
            usleep(10000);
        int fd = open(fifo, O_WRONLY);
        if (fd < 0 || write(fd, line, strlen(line)) != (ssize_t)strlen(line))
            rc = -1;
        if (fd >= 0)
            close(fd);
    }
    /* Let the script reach its loop (and a reader reopen the FIFO). */
    usleep(300000);
    double t0 = sh_now();
    kill(init, SIGTERM);
    int st = 0;
    pid_t w = 0;
    while ((w = waitpid(mid, &st, WNOHANG)) == 0 && sh_now() - t0 < timeout)
        usleep(10000);
    if (w == mid) {
        o->exited = 1;
        o->status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        o->seconds = sh_now() - t0;
    } else {
        /* SIGKILL is always delivered to a namespace's init from outside. */
        kill(init, SIGKILL);
        waitpid(mid, &st, 0);
    }
    fcntl(out[0], F_SETFL, O_NONBLOCK);
    size_t len = 0;
    ssize_t r;
    while (len < sizeof(o->out) - 1 && (r = read(out[0], o->out + len, sizeof(o->out) - 1 - len)) > 0)
        len += (size_t)r;
    o->out[len] = '\0';
    close(out[0]);
    return rc;
}

/* The logfile sidecar's contract, checked on its script: as PID 1 it copies
 * a line written into its FIFO ($SOCKET) to stdout, and exits 0 within two
 * seconds of a SIGTERM. Returns NULL when it holds, SH_SKIP when no PID
 * namespace can be had, else what failed (static text). */
static const char SH_SKIP[] = "no PID namespace (needs root)";
static const char *sh_check_logfile(const char *script)
{
    static char msg[512];
    char dir[] = "/tmp/slurmop-logfile-XXXXXX";
    if (mkdtemp(dir) == NULL)
        return "mkdtemp failed";
    char fifo[128], sock[160];
    snprintf(fifo, sizeof(fifo), "%s/log/slurmd.log", dir);
    snprintf(sock, sizeof(sock), "SOCKET=%s", fifo);
    char path[] = "PATH=/usr/sbin:/usr/bin:/sbin:/bin";
    char *const envs[] = {sock, path, NULL};
    sh_outcome o;
    int rc = sh_pid1_sigterm(script, envs, fifo, "hello from the writer\n", 10, &o);
    char rm[256];
    snprintf(rm, sizeof(rm), "rm -rf %s", dir);
    (void)!system(rm);
    if (rc == SH_NO_NAMESPACE)
        return SH_SKIP;
    if (rc != 0)
        return "could not start the script or write into its FIFO";
    if (strstr(o.out, "hello from the writer") == NULL) {
        snprintf(msg, sizeof(msg), "the line written into the FIFO did not reach stdout (got \"%s\")", o.out);
        return msg;
    }
    if (!o.exited)
        return "still running 10 s after SIGTERM (as PID 1 it ignores SIGTERM)";
    if (o.status != 0 || o.seconds > 2) {
        snprintf(msg, sizeof(msg), "exited %d, %.2f s after SIGTERM (want 0 within 2 s)", o.status,
                 o.seconds);
        return msg;
    }
    return NULL;
}

#endif
