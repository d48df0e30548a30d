/* buf: a growable byte buffer with a hard maximum.
 *
 * Every buffer that holds bytes a peer controls (HTTP headers and bodies,
 * watch events, YAML documents) is a buf with a maximum chosen at init.
 * An append past the maximum fails with OP_ETOOBIG and leaves the contents
 * untouched; it never grows without bound (curl's dynbuf "toobig" rule).
 * The contents are always NUL-terminated after a successful append so that
 * text can be used in place. Fields are read-only for users.
 */
#ifndef OP_BUF_H
#define OP_BUF_H

#include <stddef.h>

#include "core/mem.h"

typedef struct buf {
    char *data; /* read-only: NULL until the first append */
    size_t len; /* read-only: bytes in use */
    size_t cap; /* private */
    size_t max; /* private: hard limit on len */
} buf_t;

#define BUF_UNLIMITED ((size_t)-1)

/** Prepare an empty buffer that will refuse to hold more than max bytes. */
void buf_init(buf_t *b, size_t max);
/** Release the memory; the buffer is empty and can be used again. */
void buf_free(buf_t *b);
/** Forget the contents but keep the memory. */
void buf_reset(buf_t *b);
/** Append n bytes. 0, or OP_ETOOBIG when len + n would exceed max. */
int buf_append(buf_t *b, const void *p, size_t n) OP_WUR;
int buf_puts(buf_t *b, const char *s) OP_WUR;
int buf_putc(buf_t *b, char c) OP_WUR;
int buf_printf(buf_t *b, const char *fmt, ...) OP_PRINTF(2, 3) OP_WUR;
/** Ensure room for n more bytes without changing len. */
int buf_reserve(buf_t *b, size_t n) OP_WUR;
/** Drop the first n bytes (n <= len), moving the rest to the front. */
void buf_consume(buf_t *b, size_t n);
/** Take ownership of the bytes (NUL-terminated); the buffer becomes empty. */
char *buf_detach(buf_t *b, size_t *len);
/** The contents as a C string ("" when empty). */
const char *buf_cstr(const buf_t *b);

#endif
