/* pause: the sandbox ("pause") container's process.
 *
 * A pod's sandbox container holds the pod's namespaces open; its process does
 * nothing but wait. As PID 1 of the pod's PID namespace (when the pod shares
 * one) it must also reap the orphans that get reparented to it, or they stay
 * zombies. SIGTERM and SIGINT end it (exit 0; the runtime stops a sandbox with
 * SIGTERM, and PID 1 gets no default action for it, so it must be handled),
 * SIGCHLD reaps every exited child. Everything else is blocked.
 *
 * Built static (`cc -static -O2 -o pause pause.c`) so that the image holds
 * nothing but this file. */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc > 1 && (strcmp(argv[1], "-v") == 0 || strcmp(argv[1], "--version") == 0)) {
        puts("pause (slurmop) 3.10");
        return 0;
    }
    sigset_t set;
    sigfillset(&set);
    /* Blocked and taken synchronously with sigwait, so no handler runs
     * asynchronously and none can be lost between checks. */
    if (sigprocmask(SIG_BLOCK, &set, NULL) != 0) {
        perror("pause: sigprocmask");
        return 1;
    }
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGCHLD);
    for (;;) {
        int sig = 0;
        int rc = sigwait(&set, &sig);
        if (rc != 0) {
            fprintf(stderr, "pause: sigwait: %s\n", strerror(rc));
            return 1;
        }
        if (sig == SIGCHLD) {
            while (waitpid(-1, NULL, WNOHANG) > 0)
                ;
            continue;
        }
        fprintf(stderr, "pause: signal %d, exiting\n", sig);
        return 0;
    }
}
