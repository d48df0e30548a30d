/* thread: what slurmop's own threads may ask of the kernel's scheduler.
 *
 * The event loop is the one thread whose delays users see: an event waits
 * for whatever the loop is doing, and for whatever keeps the loop off its
 * CPU. Work moved to libuv's threadpool because it is heavy (decoding a
 * Slurm node table of 8,192 nodes takes ~50 ms of CPU, a page of a big
 * LIST tens of milliseconds, an SSH key pair more) then competes with the
 * loop for the same CPU whenever the operator has fewer CPUs than runnable
 * threads (a container's CPU limit, or one core): the kernel shares the CPU
 * between them in slices of a few milliseconds, and events that arrive
 * during the worker's slice wait for it. Under churn at 1,000 events/s on a
 * single CPU that was the tail of event -> action at 8,192 pods (and not
 * at 1,024, whose table decodes in a few milliseconds).
 *
 * thread_background() lowers the calling thread's priority (to nice
 * THREAD_BACKGROUND_NICE, a per-thread attribute on Linux), once per
 * thread and for the rest of its life: an unprivileged thread cannot raise
 * it back. The loop then runs first whenever it has work, and the worker
 * still gets every cycle the loop leaves. Threadpool threads also run the
 * libslurm calls, which mostly wait on the network and lose nothing. It
 * does nothing on the process's main thread (where a failed uv_queue_work
 * runs the same work inline) and nothing where the kernel refuses. */
#ifndef OP_THREAD_H
#define OP_THREAD_H

#define THREAD_BACKGROUND_NICE 10

/** Lower the calling thread's CPU priority for good, unless it is the
 *  process's main thread. Cheap after the first call on a thread. */
void thread_background(void);

/** 1 when the calling thread was lowered by thread_background (tests). */
int thread_is_background(void);

#endif
