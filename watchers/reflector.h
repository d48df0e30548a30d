/* reflector: keeps a store in step with the API server by LIST + WATCH.
 *
 * One reflector per (resource, namespace). It lists in pages (limit 500,
 * continue tokens; an expired token restarts the list without paging), feeds
 * the pages to the store as a relist (so a relist fires handlers only for real
 * differences), then watches from the list's resourceVersion with bookmarks
 * and a random 5-10 minute server timeout. After that:
 *  - a clean end of the stream: watch again at once from the last seen
 *    resourceVersion (no relist); a stream that ended in under a second
 *    without any event counts as a failure (a server that closes idle watches
 *    must not make us spin);
 *  - 410 Gone (HTTP status or ERROR event): relist, immediately the first
 *    time, with backoff when it keeps happening;
 *  - connection failures and 429: back off, then watch again from the last
 *    resourceVersion;
 *  - any other failure: back off, then relist.
 * Backoff is jittered exponential, 800 ms doubling to 30 s, reset after two
 * minutes without failure (client-go's reflector). A backoff ends within
 * 250 ms once the client sees the API server serve again after it did not
 * (kube_reach_hook): after a kube-apiserver restart the watches come back
 * together, shortly after the first of them, instead of each at the end of
 * its own backoff.
 *
 * State changes go through one setter and are logged at debug level.
 */
#ifndef OP_REFLECTOR_H
#define OP_REFLECTOR_H

#include <uv.h>

#include "core/kube.h"
#include "core/store.h"

typedef struct reflector reflector;

typedef struct rf_opts {
    kube_client *client;
    const kube_res *res;
    const char *ns;             /* NULL or "" = all namespaces */
    const char *label_selector; /* optional */
    const char *field_selector; /* optional */
    store *store;
    int page_size;              /* default 500 */
    /* Called once, after the first complete list has been applied. */
    void (*on_synced)(reflector *rf, void *data);
    void *data;
} rf_opts;

typedef struct rf_stats {
    unsigned long long lists;       /* LIST requests (pages) */
    unsigned long long relists;     /* complete list cycles after the first */
    unsigned long long watches;     /* WATCH requests */
    unsigned long long watch_ends;  /* clean ends */
    unsigned long long gone;        /* 410 answers */
    unsigned long long failures;    /* other failures */
    unsigned long long events;      /* watch events applied */
    unsigned long long list_items;  /* items received by LIST */
    double last_list_seconds;       /* duration of the last complete list */
    int synced;
} rf_stats;

reflector *rf_start(uv_loop_t *loop, const rf_opts *opts);
/** Stop and free; on_stopped runs once nothing is in flight anymore. */
void rf_stop(reflector *rf, void (*on_stopped)(void *data), void *data);
int rf_synced(const reflector *rf);
void rf_get_stats(const reflector *rf, rf_stats *out);
const char *rf_name(const reflector *rf); /* "pods" or "pods@ns" */
/** The resourceVersion the next watch would start from. */
const char *rf_last_rv(const reflector *rf);

#endif
