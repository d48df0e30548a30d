/* Host name lookups that never hold up the loop or the process's exit.
 *
 * uv_getaddrinfo runs getaddrinfo(3) on libuv's thread pool, and neither a
 * loop with the request pending nor the pool's cleanup at exit can finish
 * before getaddrinfo returns. Without a reachable DNS server (a laptop
 * offline, a CI machine, an operator outside the cluster asked for
 * "svc.ns") that is the resolver's timeouts times its attempts, for every
 * lookup queued behind it: seen as a SIGTERM that took over 30 s. Here each
 * lookup runs on a detached thread of its own; one that is abandoned
 * (the connection closed) leaves nothing for the loop to wait for, and the
 * thread frees what it got when getaddrinfo finally returns.
 */
#ifndef OP_CORE_RESOLVE_H
#define OP_CORE_RESOLVE_H

#include <netdb.h>
#include <uv.h>

typedef struct rsv_req rsv_req;

/** status: 0 or a negative libuv error (UV_EAI_NONAME, ...); res is the
 *  callee's to free with freeaddrinfo(3) (NULL on error). Runs on the loop
 *  thread, never inside rsv_lookup. */
typedef void (*rsv_cb)(int status, struct addrinfo *res, void *data);

/** At most this many lookup threads live at once; a lookup beyond it
 *  fails at once with UV_EAGAIN (callers retry later). */
#define RSV_MAX_THREADS 32

/** Start resolving host:port with hints. 0 and *out (valid until cb runs
 *  or rsv_abandon), or a negative libuv error (cb will not run). */
int rsv_lookup(uv_loop_t *loop, const char *host, const char *port, const struct addrinfo *hints, rsv_cb cb,
               void *data, rsv_req **out);

/** Give up a lookup whose cb has not run: cb never runs, and nothing of
 *  the loop waits for the thread. */
void rsv_abandon(rsv_req *q);

/** Lookup threads alive now (for tests). */
int rsv_threads(void);

#endif
