/* Slurm hostlist expressions: whatever expands (bounded) compresses back to
 * an expression that expands to the same sorted unique set. */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "slurmio/hostlist.h"

static int cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char in[2048];
    if (size >= sizeof(in))
        return 0;
    memcpy(in, data, size);
    in[size] = '\0';
    hostlist_names a, b;
    if (hostlist_expand(in, 4096, &a) != 0) {
        hostlist_names_free(&a);
        return 0;
    }
    char *expr = hostlist_compress((const char *const *)a.names, a.n);
    if (expr == NULL) { /* names that cannot be written back (e.g. odd characters) */
        hostlist_names_free(&a);
        return 0;
    }
    FUZZ_ASSERT(hostlist_expand(expr, 8192, &b) == 0);
    /* Sorted unique view of a (pointers copied, names still owned by a). */
    char **v = malloc((a.n ? a.n : 1) * sizeof(char *));
    if (a.n)
        memcpy(v, a.names, a.n * sizeof(char *));
    qsort(v, a.n, sizeof(char *), cmp);
    size_t u = 0;
    for (size_t i = 0; i < a.n; i++)
        if (u == 0 || strcmp(v[u - 1], v[i]) != 0)
            v[u++] = v[i];
    if (b.n)
        qsort(b.names, b.n, sizeof(char *), cmp);
    FUZZ_ASSERT(b.n == u);
    for (size_t i = 0; i < u; i++)
        FUZZ_ASSERT(strcmp(v[i], b.names[i]) == 0);
    free(v);
    free(expr);
    hostlist_names_free(&a);
    hostlist_names_free(&b);
    return 0;
}
