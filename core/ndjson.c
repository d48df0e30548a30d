#include "core/ndjson.h"

#include <assert.h>
#include <string.h>

#include "core/err.h"

void ndjson_init(ndjson *s, size_t max_line)
{
    buf_init(&s->tail, max_line);
}

void ndjson_free(ndjson *s)
{
    buf_free(&s->tail);
}

void ndjson_reset(ndjson *s)
{
    buf_reset(&s->tail);
}

size_t ndjson_pending(const ndjson *s)
{
    return s->tail.len;
}

static int deliver(const char *p, size_t n, ndjson_line_fn fn, void *data)
{
    while (n && (p[n - 1] == '\r' || p[n - 1] == ' ' || p[n - 1] == '\t'))
        n--;
    if (n == 0)
        return 0;
    assert(memchr(p, '\n', n) == NULL); /* one record, never two */
    return fn(p, n, data) ? OP_ECANCELED : 0;
}

int ndjson_feed(ndjson *s, const char *p, size_t n, ndjson_line_fn fn, void *data)
{
    size_t used;
    return ndjson_feed_upto(s, p, n, fn, data, &used);
}

int ndjson_feed_upto(ndjson *s, const char *p, size_t n, ndjson_line_fn fn, void *data, size_t *used)
{
    const char *start = p;
    const char *end = p + n; /* for the assert below */
    (void)end;
    *used = 0;
    while (n > 0) {
        const char *nl = memchr(p, '\n', n);
        if (nl == NULL) {
            int rc = buf_append(&s->tail, p, n);
            if (rc == 0)
                *used = (size_t)(p - start) + n;
            return rc;
        }
        size_t k = (size_t)(nl - p);
        int rc;
        if (s->tail.len == 0) {
            rc = deliver(p, k, fn, data); /* the whole line is in this fragment: no copy */
        } else {
            if (buf_append(&s->tail, p, k) != 0)
                return OP_ETOOBIG;
            rc = deliver(s->tail.data, s->tail.len, fn, data);
            buf_reset(&s->tail);
        }
        p += k + 1;
        n -= k + 1;
        *used = (size_t)(p - start);
        assert(p + n == end && s->tail.len == 0);
        if (rc)
            return rc;
    }
    return 0;
}

int ndjson_finish(ndjson *s, ndjson_line_fn fn, void *data)
{
    int rc = 0;
    if (s->tail.len)
        rc = deliver(s->tail.data, s->tail.len, fn, data);
    buf_reset(&s->tail);
    return rc;
}
