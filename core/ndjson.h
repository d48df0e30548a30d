/* ndjson: split a byte stream into newline-delimited records.
 *
 * Watch streams arrive in fragments that mean nothing (HTTP chunks, TLS
 * records): one fragment may hold several events or a part of one. The
 * splitter hands every complete line to a callback, without copying when the
 * line lies wholly inside one fragment, and keeps the unfinished tail in a
 * buffer capped at max bytes (an event larger than that is an error, never
 * an unbounded allocation). Blank lines and a trailing '\r' are dropped.
 */
#ifndef OP_NDJSON_H
#define OP_NDJSON_H

#include <stddef.h>

#include "core/buf.h"

/** Called with one line (without the newline). Return non-zero to stop. */
typedef int (*ndjson_line_fn)(const char *line, size_t len, void *data);

typedef struct ndjson {
    buf_t tail; /* private */
} ndjson;

void ndjson_init(ndjson *s, size_t max_line);
void ndjson_free(ndjson *s);
void ndjson_reset(ndjson *s);
/** Feed a fragment. 0; OP_ETOOBIG when a line exceeds the cap; OP_ECANCELED
 *  when the callback asked to stop (the rest of the fragment is dropped). */
int ndjson_feed(ndjson *s, const char *p, size_t n, ndjson_line_fn fn, void *data);
/** ndjson_feed that says how far it got: *used is n after a whole fragment,
 *  and on OP_ECANCELED the bytes up to and including the newline of the
 *  line whose callback asked to stop, so that the caller can keep the rest
 *  and feed it later (a watch that yields the loop between events). */
int ndjson_feed_upto(ndjson *s, const char *p, size_t n, ndjson_line_fn fn, void *data, size_t *used);
/** End of stream: a last line without a newline is still delivered. */
int ndjson_finish(ndjson *s, ndjson_line_fn fn, void *data);
/** Bytes held of an unfinished line. */
size_t ndjson_pending(const ndjson *s);

#endif
