#include "reconcilers/batch.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/mem.h"

struct wbatch {
    void **items;
    size_t n;
    size_t next;      /* first item not started */
    size_t batch_end; /* the current slow-start batch is items[..batch_end) */
    size_t in_flight; /* started, not done */
    size_t batch;     /* size of the next batch */
    size_t failed;
    size_t skipped;
    int stop;
    int starting;     /* inside start_more: completions there must not recurse */
    wbatch_start_fn start;
    wbatch_item_fn item_done;
    wbatch_end_fn end;
    void *data;
};

static void skip_rest(wbatch *b)
{
    while (b->next < b->n) {
        size_t i = b->next++;
        b->skipped++;
        b->item_done(b->items[i], OP_ECANCELED, b->data);
    }
}

/* Start items of the current batch while the window has room. */
static void start_more(wbatch *b)
{
    b->starting = 1;
    while (b->next < b->batch_end && b->in_flight < WBATCH_WINDOW && !b->stop) {
        size_t i = b->next++;
        b->in_flight++;
        b->start(b, i, b->items[i], b->data);
    }
    assert(b->in_flight <= WBATCH_WINDOW);
    b->starting = 0;
}

/* Returns 1 when the batch object was freed. */
static int advance(wbatch *b)
{
    for (;;) {
        assert(b->next <= b->n && b->batch_end <= b->n && b->in_flight <= b->next);
        if (b->starting)
            return 0;
        if (!b->stop && b->next < b->batch_end && b->in_flight < WBATCH_WINDOW) {
            start_more(b);
            continue;
        }
        if (b->in_flight > 0)
            return 0; /* the window is full or the batch is draining */
        /* The current batch is over. */
        if (b->stop)
            skip_rest(b);
        if (b->next < b->n) {
            b->batch_end = b->next + b->batch < b->n ? b->next + b->batch : b->n;
            b->batch *= 2;
            continue;
        }
        wbatch_end_fn end = b->end;
        void *data = b->data;
        /* Every item was started and done, or skipped. */
        assert(b->in_flight == 0 && b->next == b->n && b->failed + b->skipped <= b->n);
        size_t sent = b->n - b->skipped, failed = b->failed, skipped = b->skipped;
        free(b->items);
        free(b);
        if (end)
            end(sent, failed, skipped, data);
        return 1;
    }
}

wbatch *wbatch_run(void *const *items, size_t n, wbatch_start_fn start, wbatch_item_fn item_done,
                   wbatch_end_fn end, void *data)
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
    return advance(b) ? NULL : b;
}

void wbatch_item_done(wbatch *b, size_t index, int err)
{
    /* Only a started item is done, and the window counted it. */
    assert(b->in_flight > 0 && index < b->next);
    if (err) {
        b->failed++;
        b->stop = 1;
    }
    b->in_flight--;
    b->item_done(b->items[index], err, b->data);
    advance(b);
}

void wbatch_abort(wbatch *b)
{
    b->stop = 1;
    advance(b);
}
