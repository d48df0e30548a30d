/* batch: slow-start execution of a list of writes.
 *
 * Kubernetes' controllers send creates and deletes in batches of 1, 2, 4, 8
 * ... and stop at the first batch that had a failure: a misconfigured pod
 * template then costs one failed request, not thousands. Unlike Slinky
 * there is no fixed cap per pass (its 250): the batches keep doubling until
 * everything is sent, so 8,192 creates take 14 rounds, each pipelined up to
 * the client's QPS limit and connection pool.
 *
 * The caller supplies start(item), which must submit one asynchronous write
 * and later call wbatch_item_done(b, index, err) exactly once; item_done is
 * then told each item's outcome (items skipped after a failure get
 * OP_ECANCELED, so expectations can be lowered for them), and end runs once
 * when every item is accounted for. A batch frees itself after end.
 */
#ifndef OP_BATCH_H
#define OP_BATCH_H

#include <stddef.h>

typedef struct wbatch wbatch;

/* At most this many writes of one batch are in flight at once; the rest of
 * the batch starts as they complete. More would only wait in the HTTP
 * client's queue (the connection pool is smaller) while holding memory. */
#define WBATCH_WINDOW 256

typedef void (*wbatch_start_fn)(wbatch *b, size_t index, void *item, void *data);
typedef void (*wbatch_item_fn)(void *item, int err, void *data);
typedef void (*wbatch_end_fn)(size_t sent, size_t failed, size_t skipped, void *data);

/** Take ownership of items[0..n) (the array is copied; each item is passed to
 *  item_done, which should free it) and start the first batch. start may
 *  report an item's failure synchronously (wbatch_item_done from inside
 *  start). Returns NULL when everything already ended (n == 0, or every
 *  item failed or was skipped synchronously). */
wbatch *wbatch_run(void *const *items, size_t n, wbatch_start_fn start, wbatch_item_fn item_done,
                   wbatch_end_fn end, void *data);
/** Report the outcome of item index (from start's write callback). */
void wbatch_item_done(wbatch *b, size_t index, int err);
/** Skip every item not started yet (their item_done gets OP_ECANCELED). */
void wbatch_abort(wbatch *b);

#endif
