/* thread: see thread.h. */
#include "core/thread.h"

#include <errno.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/log.h"

static _Thread_local int lowered; /* 0 not yet tried, 1 lowered, -1 refused or the main thread */

void thread_background(void)
{
    if (lowered)
        return;
#if defined(__linux__)
    pid_t tid = (pid_t)syscall(SYS_gettid);
    if (tid == getpid()) {
        lowered = -1; /* the loop's own thread: never */
        return;
    }
    errno = 0;
    int cur = getpriority(PRIO_PROCESS, (id_t)tid);
    if ((errno == 0 && cur >= THREAD_BACKGROUND_NICE) ||
        setpriority(PRIO_PROCESS, (id_t)tid, THREAD_BACKGROUND_NICE) == 0) {
        lowered = 1;
        return;
    }
    log_debug("thread: could not lower worker thread %d to nice %d", (int)tid, THREAD_BACKGROUND_NICE);
#endif
    lowered = -1;
}

int thread_is_background(void)
{
    return lowered == 1;
}
