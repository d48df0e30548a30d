#include "core/file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/err.h"
#include "core/mem.h"

int file_read_all(const char *path, size_t max, char **out, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return OP_ERRNO(errno);
    size_t cap = 4096, n = 0;
    char *p = xmalloc(cap);
    for (;;) {
        if (n + 1 >= cap) {
            if (cap > max + 1) {
                free(p);
                fclose(f);
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
    int bad = ferror(f);
    fclose(f);
    if (bad) {
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
