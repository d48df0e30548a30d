#include "core/file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/err.h"
#include "core/mem.h"

int file_read_stream(FILE *f, size_t max, char **out, size_t *len)
{
    size_t cap = 4096, n = 0;
    char *p = xmalloc(cap);
    for (;;) {
        if (n + 1 >= cap) {
            if (cap > max + 1) {
                free(p);
                return OP_ETOOBIG;
            }
            cap *= 2;
            p = xrealloc(p, cap);
        }
        size_t r = fread(p + n, 1, cap - n - 1, f);
        n += r;
        if (r == 0)
            break;
    }
    if (ferror(f)) {
        free(p);
        return OP_EIO;
    }
    if (n > max) {
        free(p);
        return OP_ETOOBIG;
    }
    p[n] = '\0';
    *out = p;
    if (len)
        *len = n;
    return 0;
}

int file_read_all(const char *path, size_t max, char **out, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return OP_ERRNO(errno);
    int rc = file_read_stream(f, max, out, len);
    fclose(f);
    return rc;
}
