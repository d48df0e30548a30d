/* Host name lookups on detached threads (see resolve.h). */
#include "core/resolve.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/mem.h"

/* Shared by the loop side and the thread; the last of the two to let go
 * (refs) frees it. Fields below mu are guarded by it. */
struct rsv_req {
    uv_async_t async; /* first: the handle's address is the request's */
    rsv_cb cb;
    void *data;
    char *host;
    char *port;
    struct addrinfo hints;
    pthread_mutex_t mu;
    int refs;
    int abandoned;
    int done;
    int status;
    struct addrinfo *res;
};

/* Threads are a process-wide resource: counted process-wide. */
static atomic_int live_threads;

static void req_release(rsv_req *q)
{
    pthread_mutex_lock(&q->mu);
    assert(q->refs > 0); /* the loop's handle and the thread: one release each */
    int last = --q->refs == 0;
    pthread_mutex_unlock(&q->mu);
    if (!last)
        return;
    if (q->res)
        freeaddrinfo(q->res);
    pthread_mutex_destroy(&q->mu);
    free(q->host);
    free(q->port);
    free(q);
}

/* getaddrinfo's EAI_* as libuv's codes, as uv_getaddrinfo reports them. */
static int eai_to_uv(int rc)
{
    switch (rc) {
    case 0: return 0;
#ifdef EAI_ADDRFAMILY
    case EAI_ADDRFAMILY: return UV_EAI_ADDRFAMILY;
#endif
    case EAI_AGAIN: return UV_EAI_AGAIN;
    case EAI_BADFLAGS: return UV_EAI_BADFLAGS;
    case EAI_FAIL: return UV_EAI_FAIL;
    case EAI_FAMILY: return UV_EAI_FAMILY;
    case EAI_MEMORY: return UV_EAI_MEMORY;
#ifdef EAI_NODATA
    case EAI_NODATA: return UV_EAI_NODATA;
#endif
    case EAI_NONAME: return UV_EAI_NONAME;
    case EAI_OVERFLOW: return UV_EAI_OVERFLOW;
    case EAI_SERVICE: return UV_EAI_SERVICE;
    case EAI_SOCKTYPE: return UV_EAI_SOCKTYPE;
    case EAI_SYSTEM: return errno ? -errno : UV_EAI_FAIL;
    default: return UV_EAI_FAIL;
    }
}

static void *lookup_thread(void *arg)
{
    rsv_req *q = arg;
    struct addrinfo *res = NULL;
    int rc = eai_to_uv(getaddrinfo(q->host, q->port, &q->hints, &res));
    pthread_mutex_lock(&q->mu);
    q->status = rc;
    q->res = rc == 0 ? res : NULL;
    if (rc != 0 && res)
        freeaddrinfo(res);
    q->done = 1;
    /* Under mu: rsv_abandon closes the handle under it too, so the
     * handle is never signalled once closing. */
    if (!q->abandoned)
        uv_async_send(&q->async);
    pthread_mutex_unlock(&q->mu);
    req_release(q);
    int before = atomic_fetch_sub(&live_threads, 1);
    assert(before > 0);
    (void)before;
    return NULL;
}

static void async_closed(uv_handle_t *h)
{
    req_release((rsv_req *)h);
}

static void async_cb(uv_async_t *h)
{
    rsv_req *q = (rsv_req *)h;
    pthread_mutex_lock(&q->mu);
    assert(q->refs > 0);
    int deliver = q->done && !q->abandoned;
    struct addrinfo *res = q->res;
    int status = q->status;
    if (deliver) {
        q->res = NULL; /* the callee's now */
        q->abandoned = 1; /* finished: nothing more to signal */
    }
    pthread_mutex_unlock(&q->mu);
    if (!deliver)
        return;
    uv_close((uv_handle_t *)&q->async, async_closed);
    q->cb(status, res, q->data);
}

int rsv_lookup(uv_loop_t *loop, const char *host, const char *port, const struct addrinfo *hints, rsv_cb cb,
               void *data, rsv_req **out)
{
    if (!host || !*host || !cb || !out)
        return UV_EINVAL;
    if (atomic_fetch_add(&live_threads, 1) >= RSV_MAX_THREADS) {
        atomic_fetch_sub(&live_threads, 1);
        return UV_EAGAIN;
    }
    rsv_req *q = xcalloc(1, sizeof(*q));
    q->cb = cb;
    q->data = data;
    q->host = xstrdup(host);
    q->port = port ? xstrdup(port) : NULL;
    if (hints)
        q->hints = *hints;
    q->hints.ai_addr = NULL;
    q->hints.ai_canonname = NULL;
    q->hints.ai_next = NULL;
    pthread_mutex_init(&q->mu, NULL);
    q->refs = 2; /* the loop's handle and the thread */
    int rc = uv_async_init(loop, &q->async, async_cb);
    if (rc < 0) {
        pthread_mutex_destroy(&q->mu);
        free(q->host);
        free(q->port);
        free(q);
        atomic_fetch_sub(&live_threads, 1);
        return rc;
    }
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr,
                              512 * 1024); /* NSS modules need some; the default 8 MiB is address space */
    pthread_t t;
    int err = pthread_create(&t, &attr, lookup_thread, q);
    pthread_attr_destroy(&attr);
    if (err) {
        q->refs = 1; /* no thread */
        q->abandoned = 1;
        uv_close((uv_handle_t *)&q->async, async_closed);
        atomic_fetch_sub(&live_threads, 1);
        return -err;
    }
    *out = q;
    return 0;
}

void rsv_abandon(rsv_req *q)
{
    if (!q)
        return;
    pthread_mutex_lock(&q->mu);
    int was = q->abandoned;
    q->abandoned = 1;
    if (!was)
        uv_close((uv_handle_t *)&q->async, async_closed);
    pthread_mutex_unlock(&q->mu);
}

int rsv_threads(void)
{
    return atomic_load(&live_threads);
}
