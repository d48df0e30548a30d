#include "core/buf.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"

/* What every mutating call relies on and leaves true: len within max, and
 * room for the terminator behind the bytes once memory is held. */
#define BUF_SANE(b)                                                                                          \
    ((b)->len <= (b)->max && ((b)->data ? (b)->len < (b)->cap : (b)->len == 0 && (b)->cap == 0))

void buf_init(buf_t *b, size_t max)
{
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    b->max = max;
}

void buf_free(buf_t *b)
{
    free(b->data);
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
}

void buf_reset(buf_t *b)
{
    assert(BUF_SANE(b));
    b->len = 0;
    if (b->data)
        b->data[0] = '\0';
}

int buf_reserve(buf_t *b, size_t n)
{
    assert(BUF_SANE(b));
    if (n > b->max || b->len > b->max - n)
        return OP_ETOOBIG;
    size_t need = b->len + n + 1; /* room for the terminator */
    if (need <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need)
        cap = cap * 2 > cap ? cap * 2 : need;
    b->data = xrealloc(b->data, cap);
    b->cap = cap;
    assert(b->len + n < b->cap);
    return 0;
}

int buf_append(buf_t *b, const void *p, size_t n)
{
    assert(p != NULL || n == 0);
    int rc = buf_reserve(b, n);
    if (rc)
        return rc;
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
    assert(BUF_SANE(b));
    return 0;
}

int buf_puts(buf_t *b, const char *s)
{
    return buf_append(b, s, strlen(s));
}

int buf_putc(buf_t *b, char c)
{
    return buf_append(b, &c, 1);
}

int buf_printf(buf_t *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return OP_EINVAL;
    int rc = buf_reserve(b, (size_t)n);
    if (rc)
        return rc;
    va_start(ap, fmt);
    int m = vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    /* The arguments were read twice: both passes must agree on the size. */
    assert(m == n);
    (void)m;
    b->len += (size_t)n;
    assert(BUF_SANE(b));
    return 0;
}

void buf_consume(buf_t *b, size_t n)
{
    assert(n <= b->len);
    assert(BUF_SANE(b));
    if (n >= b->len) {
        buf_reset(b);
        return;
    }
    memmove(b->data, b->data + n, b->len - n);
    b->len -= n;
    b->data[b->len] = '\0';
}

char *buf_detach(buf_t *b, size_t *len)
{
    assert(BUF_SANE(b));
    char *p = b->data ? b->data : xstrdup("");
    if (len)
        *len = b->len;
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    return p;
}

const char *buf_cstr(const buf_t *b)
{
    return b->data ? b->data : "";
}
