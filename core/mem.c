#include "core/mem.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif
#if defined(__GLIBC__)
#include <malloc.h>
#endif

static void oom(size_t n)
{
    fprintf(stderr, "slurmop: out of memory allocating %zu bytes\n", n);
    abort();
}

void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (p == NULL)
        oom(n);
    return p;
}

void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (p == NULL)
        oom(n * size);
    return p;
}

void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (q == NULL)
        oom(n);
    return q;
}

char *xstrdup(const char *s)
{
    return xstrndup(s, strlen(s));
}

char *xstrndup(const char *s, size_t n)
{
    char *p = xmalloc(n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

char *xvasprintf(const char *fmt, va_list ap)
{
    va_list cp;
    va_copy(cp, ap);
    int n = vsnprintf(NULL, 0, fmt, cp);
    va_end(cp);
    if (n < 0)
        abort();
    char *p = xmalloc((size_t)n + 1);
    vsnprintf(p, (size_t)n + 1, fmt, ap);
    return p;
}

char *xasprintf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *p = xvasprintf(fmt, ap);
    va_end(ap);
    return p;
}

/* core/json.c: arena-aware allocation for cJSON (see json_arena). */
void *json__hook_malloc(size_t n);
void json__hook_free(void *p);

static int hooks_installed;

void mem_init(void)
{
    if (hooks_installed)
        return;
    cJSON_Hooks hooks = {json__hook_malloc, json__hook_free};
    cJSON_InitHooks(&hooks);
    hooks_installed = 1;
#if defined(__GLIBC__)
    /* glibc gives each thread that mallocs its own arena (up to 8 per core)
     * and keeps their freed pages: a few threadpool parses of big lists left
     * over 100 MiB resident that the loop could never reuse. Two arenas keep
     * the threadpool off the loop's lock most of the time. MALLOC_ARENA_MAX
     * in the environment still wins. */
    if (getenv("MALLOC_ARENA_MAX") == NULL)
        mallopt(M_ARENA_MAX, 2);
#endif
}

void mem_advise_huge(void *p, size_t n)
{
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    const uintptr_t huge = 2u << 20;
    uintptr_t a = ((uintptr_t)p + huge - 1) & ~(huge - 1), e = ((uintptr_t)p + n) & ~(huge - 1);
    if (e > a)
        (void)madvise((void *)a, e - a, MADV_HUGEPAGE);
#else
    (void)p;
    (void)n;
#endif
}

void mem_trim(void)
{
#if defined(__GLIBC__)
    (void)malloc_trim(0);
#endif
}
