#include "reconcilers/batch.h"

#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/mem.h"

struct wbatch {
    void **items;
    size_t n;
    size_t next;      /* first item not started */
    size_t in_flight; /* started, not done */
    size_t batch;     /* size of the next batch */
    size_t failed;
    size_t skipped;
    int stop;
    int starting;     /* inside start_batch: defer completion handling */
    wbatch_start_fn start;
    wbatch_item_fn item_done;
    wbatch_end_fn end;
    void *data;
};

static void finish_if_done(wbatch *b);

static void skip_rest(wbatch *b)
{
    while (b->next < b->n) {
        size_t i = b->next++;
        b->skipped++;
        b->item_done(b->items[i], OP_ECANCELED, b->data);
    }
}

static void start_batch(wbatch *b)
{
    size_t k = b->batch;
    b->starting = 1;
    while (k-- > 0 && b->next < b->n && !b->stop) {
        size_t i = b->next++;
        b->in_flight++;
        b->start(b, i, b->items[i], b->data);
    }
    b->starting = 0;
    b->batch *= 2;
    finish_if_done(b);
}

static void finish_if_done(wbatch *b)
{
    if (b->in_flight > 0 || b->starting)
        return;
    if (b->stop)
        skip_rest(b);
    if (b->next < b->n) {
        start_batch(b);
        return;
    }
    wbatch_end_fn end = b->end;
    void *data = b->data;
    size_t sent = b->n - b->skipped, failed = b->failed, skipped = b->skipped;
    free(b->items);
    free(b);
    if (end)
        end(sent, failed, skipped, data);
}

wbatch *wbatch_run(void *const *items, size_t n, wbatch_start_fn start, wbatch_item_fn item_done, wbatch_end_fn end,
                   void *data)
{
    wbatch *b = xcalloc(1, sizeof(*b));
    b->items = xmalloc((n ? n : 1) * sizeof(void *));
    if (n)
        memcpy(b->items, items, n * sizeof(void *));
    b->n = n;
    b->batch = 1;
    b->start = start;
    b->item_done = item_done;
    b->end = end;
    b->data = data;
    start_batch(b);
    return b;
}

void wbatch_item_done(wbatch *b, size_t index, int err)
{
    if (err) {
        b->failed++;
        b->stop = 1;
    }
    b->in_flight--;
    b->item_done(b->items[index], err, b->data);
    finish_if_done(b);
}

void wbatch_abort(wbatch *b)
{
    b->stop = 1;
    finish_if_done(b);
}
