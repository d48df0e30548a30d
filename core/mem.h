/* mem: allocation that never returns NULL, and small memory helpers.
 *
 * An operator that runs out of memory cannot do anything useful, and the
 * kubelet restarts it, so every allocation aborts with a message on failure
 * (as redis' zmalloc does). What a peer controls is bounded elsewhere (see
 * buf.h): nothing here grows on behalf of untrusted input without a cap.
 */
#ifndef OP_MEM_H
#define OP_MEM_H

#include <stddef.h>
#include <stdarg.h>

/** Recover the outer struct from a pointer to one of its members. */
#define container_of(ptr, type, member) ((type *)(void *)((char *)(ptr) - offsetof(type, member)))

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#if defined(__GNUC__)
#define OP_PRINTF(f, a) __attribute__((format(printf, f, a)))
#define OP_UNUSED __attribute__((unused))
#define OP_WUR __attribute__((warn_unused_result))
#else
#define OP_PRINTF(f, a)
#define OP_UNUSED
#define OP_WUR
#endif

void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
/** Copy n bytes of s and terminate; s need not be NUL-terminated. */
char *xstrndup(const char *s, size_t n);
char *xasprintf(const char *fmt, ...) OP_PRINTF(1, 2);
char *xvasprintf(const char *fmt, va_list ap);

/** Ask the kernel to back the 2 MiB-aligned part of [p, p + n) with huge
 *  pages (transparent huge pages in "madvise" mode; a no-op where there
 *  are none). For big buffers filled on the event loop: each first touch of
 *  a 4 KiB page is a fault, and an 11 MB answer took ~2,700 of them. */
void mem_advise_huge(void *p, size_t n);

/** The heap bytes one malloc(n) takes, as the allocator counts them in use
 *  (what mallinfo2's uordblks adds up): glibc's 64-bit chunk, n plus its
 *  8-byte size word rounded up to 16, at least 32. The caches count their
 *  bytes with it, so that their sum can be set against the live heap; it is
 *  a model of the allocator, the same whatever malloc_usable_size says. */
static inline size_t mem_footprint(size_t n)
{
    size_t c = (n + sizeof(size_t) + 15) & ~(size_t)15;
    return c < 32 ? 32 : c;
}

/** Install the aborting, arena-aware allocators as cJSON's hooks. Call at
 *  start, before any thread uses cJSON (json_arena_new also makes sure). */
void mem_init(void);
/** Give the pages the allocator holds free back to the system (glibc's
 *  malloc_trim; a no-op elsewhere). Freed memory otherwise stays resident:
 *  after a burst (thousands of queued writes behind a slow API server) RSS
 *  stayed at the high-water mark, 2.7x the live heap. */
void mem_trim(void);

#endif
