/* pause: the process that holds a pod sandbox's namespaces (the pod's
 * infrastructure container). It sleeps until SIGTERM/SIGINT (exit 0) and
 * reaps the zombies it may inherit as PID 1 of a shared PID namespace.
 * Built statically by tests/k8s/build-node.sh and packed as the image
 * registry.k8s.io/pause:3.10 that the real Nodes' containerd runs. */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_stop(int sig)
{
    (void)sig;
    _exit(0);
}

static void on_child(int sig)
{
    (void)sig;
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
}

int main(void)
{
    struct sigaction stop = {.sa_handler = on_stop};
    struct sigaction child = {.sa_handler = on_child, .sa_flags = SA_NOCLDSTOP};
    if (sigaction(SIGINT, &stop, NULL) != 0 || sigaction(SIGTERM, &stop, NULL) != 0 ||
        sigaction(SIGCHLD, &child, NULL) != 0)
        return 1;
    for (;;)
        pause();
}
