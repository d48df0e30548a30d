/* Memory of whole node tables: synthetic tables of 8,192 and 16,384 nodes
 * (v0.0.38, Slurm 22.05's shape, and v0.0.44, the largest per node) decoded
 * with the bound the REST client uses (sr_max_tree of the default body cap),
 * the peak heap of each decode reported, and documents past the bound
 * refused whole (OP_ETOOBIG, no nodes), whether they are big or merely
 * hostile ("[0,0,...]" takes ~30 times its text as a tree).
 *
 * The heap is counted exactly under AddressSanitizer (its malloc/free hooks);
 * without it the peak resident size is read (VmHWM after clear_refs), which
 * is what a container's memory limit sees. The figures are printed for
 * docs/internals/SLURMIO.md. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <inttypes.h>
#include <string.h>
#include <time.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "core/buf.h"
#include "core/err.h"
#include "core/json.h"
#include "core/mem.h"
#include "slurmio/model.h"
#include "slurmio/rest.h"

/* ---- measuring ---- */

#if defined(__SANITIZE_ADDRESS__)
/* From the sanitizer runtime (sanitizer/allocator_interface.h, which Debian
 * ships only with clang). */
int __sanitizer_install_malloc_and_free_hooks(void (*malloc_hook)(const volatile void *, size_t),
                                              void (*free_hook)(const volatile void *));
int __sanitizer_get_ownership(const volatile void *p);
size_t __sanitizer_get_allocated_size(const volatile void *p);
#define HEAP_EXACT 1
static int64_t heap_cur, heap_peak;
static int counting;

static void on_malloc(const volatile void *p, size_t n)
{
    (void)p;
    if (!counting)
        return;
    heap_cur += (int64_t)n;
    if (heap_cur > heap_peak)
        heap_peak = heap_cur;
}

static void on_free(const volatile void *p)
{
    if (counting && p && __sanitizer_get_ownership(p))
        heap_cur -= (int64_t)__sanitizer_get_allocated_size(p);
}

static void measure_start(void)
{
    heap_cur = heap_peak = 0;
    counting = 1;
}

/* Peak heap growth since measure_start, in bytes. */
static int64_t measure_peak(void)
{
    counting = 0;
    return heap_peak;
}
#else
#define HEAP_EXACT 0
static long status_kb(const char *key)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    size_t kl = strlen(key);
    while (f && fgets(line, sizeof(line), f))
        if (strncmp(line, key, kl) == 0)
            v = strtol(line + kl, NULL, 10);
    if (f)
        fclose(f);
    return v;
}

static long rss_base;

static void measure_start(void)
{
#ifdef __GLIBC__
    malloc_trim(0);
#endif
    FILE *f = fopen("/proc/self/clear_refs", "w"); /* "5" resets VmHWM */
    if (f) {
        fputs("5", f);
        fclose(f);
    }
    rss_base = status_kb("VmRSS:");
}

/* Peak resident growth since measure_start, in bytes. */
static int64_t measure_peak(void)
{
    return ((int64_t)status_kb("VmHWM:") - rss_base) * 1024;
}

/* Resident growth since measure_start once malloc has given back what it
 * can (the REST client trims after a large answer). */
static int64_t measure_kept(void)
{
#ifdef __GLIBC__
    malloc_trim(0);
#endif
    return ((int64_t)status_kb("VmRSS:") - rss_base) * 1024;
}
#endif

static int64_t ms_since(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (int64_t)(t1.tv_sec - t0->tv_sec) * 1000 + (t1.tv_nsec - t0->tv_nsec) / 1000000;
}

/* ---- synthetic tables ---- */

static char *load(const char *name)
{
    const char *src = getenv("OP_SOURCE_DIR");
    char *path = xasprintf("%s/tests/data/slurmrestd/%s", src ? src : ".", name);
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open %s", path);
    buf_t b;
    buf_init(&b, BUF_UNLIMITED);
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
        assert_int_equal(buf_append(&b, chunk, n), 0);
    fclose(f);
    free(path);
    return buf_detach(&b, NULL);
}

/* A node table of n nodes in the shape of version, built from a recorded
 * (v0.0.38) or documented (v0.0.44) node the way slurmrestd prints it
 * (indented), each node carrying the pod information and features the
 * operator writes, named gpu-00001 ... */
static char *make_table(int version, int n, size_t *len)
{
    char *raw = load(version == 38 ? "v38_nodes_idle_200.json" : "v44_nodes_states_200.json");
    cJSON *doc = json_parse(raw, strlen(raw), NULL);
    free(raw);
    assert_non_null(doc);
    cJSON *proto = cJSON_Duplicate(json_child(doc, "nodes")->child, 1);
    json_set_str(proto, "name", "@NAME@");
    json_set_str(proto, "comment",
                 "{\"namespace\":\"slurm\",\"podName\":\"@NAME@\",\"node\":\"gpu-node-0001\","
                 "\"nodeSetName\":\"gpu\",\"nodeSetUID\":\"0f0e8a4c-6b1d-4c9e-9f3a-2d7c5e1b8a90\"}");
    if (version == 38) {
        json_set_str(proto, "features", "k8s/zone-a,gpu");
        json_set_str(proto, "active_features", "k8s/zone-a,gpu");
    }
    json_set(doc, "nodes", cJSON_CreateString("@NODES@"));
    char *outer = cJSON_Print(doc);
    char *node = cJSON_Print(proto);
    cJSON_Delete(doc);
    cJSON_Delete(proto);
    char *hole = strstr(outer, "\"@NODES@\"");
    assert_non_null(hole);
    buf_t b;
    buf_init(&b, BUF_UNLIMITED);
    int rc = buf_append(&b, outer, (size_t)(hole - outer));
    rc |= buf_puts(&b, "[");
    for (int i = 0; i < n; i++) {
        char name[16];
        snprintf(name, sizeof(name), "gpu-%05d", i + 1);
        if (i)
            rc |= buf_puts(&b, ",");
        for (const char *p = node, *q; *p; p = q + 6) {
            q = strstr(p, "@NAME@");
            if (!q) {
                rc |= buf_puts(&b, p);
                break;
            }
            rc |= buf_append(&b, p, (size_t)(q - p));
            rc |= buf_puts(&b, name);
        }
    }
    rc |= buf_puts(&b, "]");
    rc |= buf_puts(&b, hole + strlen("\"@NODES@\""));
    assert_int_equal(rc, 0);
    free(outer);
    free(node);
    return buf_detach(&b, len);
}

/* Bytes the decoded model holds. */
static size_t model_bytes(const sm_response *r)
{
    size_t n = r->n_nodes * sizeof(sm_node);
    for (size_t i = 0; i < r->n_nodes; i++) {
        const sm_node *x = &r->nodes[i];
        const char *s[] = {x->name,     x->reason,      x->comment, x->features, x->active_features,
                           x->topology, x->reservation, x->address, x->hostname};
        for (size_t k = 0; k < ARRAY_SIZE(s); k++)
            n += s[k] ? strlen(s[k]) + 1 : 0;
    }
    return n;
}

static void table_case(int version, int nodes)
{
    size_t len;
    char *body = make_table(version, nodes, &len);
    size_t max_tree = sr_max_tree(SR_DEFAULT_MAX_BODY);
    assert_true(len < SR_DEFAULT_MAX_BODY); /* the default cap holds 16,384 nodes of any version */
    sm_response r;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    measure_start();
    int rc = sm_parse_bounded(version, SM_KIND_NODES, 200, body, len, max_tree, &r);
    int64_t peak = measure_peak();
    int64_t ms = ms_since(&t0);
    if (rc != 0)
        fail_msg("v0.0.%d %d nodes: %s", version, nodes, r.err.message);
    assert_int_equal(r.n_nodes, (size_t)nodes);
    assert_string_equal(r.nodes[nodes - 1].name, nodes == 8192 ? "gpu-08192" : "gpu-16384");
    size_t model = model_bytes(&r);
    assert_true(r.tree_bytes > len && r.tree_bytes <= max_tree);
    /* What the decode held at its peak: the tree (bounded) and the model,
     * plus small change (arena headers, one growing array). */
    if (HEAP_EXACT)
        assert_true(peak <= (int64_t)(r.tree_bytes + model + ((size_t)4 << 20)));
    print_message("v0.0.%d %5d nodes: body %6.1f MB (%4zu B/node), tree %6.1f MB (%.2fx body, bound %zu MB), "
                  "model %5.1f MB, peak %s %6.1f MB, %" PRId64 " ms\n",
                  version, nodes, len / 1e6, len / (size_t)nodes, r.tree_bytes / 1e6,
                  (double)r.tree_bytes / (double)len, max_tree >> 20, model / 1e6,
                  HEAP_EXACT ? "heap" : "RSS", peak / 1e6, ms);
    sm_response_free(&r);
    free(body);
#if !HEAP_EXACT
    /* The body was resident before the measurement started and is gone
     * now: what is left over must be small change, not the tree. */
    int64_t kept = measure_kept();
    print_message("  after the response is freed and malloc trimmed: RSS %+.1f MB\n", kept / 1e6);
    assert_true(kept < (int64_t)(8 << 20));
#endif
}

static void test_v38_8192(void **state)
{
    table_case(38, 8192);
}

static void test_v38_16384(void **state)
{
    table_case(38, 16384);
}

static void test_v44_16384(void **state)
{
    table_case(44, 16384);
}

/* A table whose tree does not fit the bound is an error, never a partial
 * table: the last node must not be the only thing missing. */
static void test_tree_over_bound(void **state)
{
    size_t len;
    char *body = make_table(38, 2048, &len);
    sm_response r;
    measure_start();
    int rc = sm_parse_bounded(38, SM_KIND_NODES, 200, body, len, len, &r);
    int64_t peak = measure_peak();
    assert_int_equal(rc, OP_ETOOBIG);
    assert_int_equal(r.err.code, OP_ETOOBIG);
    assert_int_equal(r.n_nodes, 0);
    assert_null(r.nodes);
    assert_non_null(strstr(r.err.message, "needs more than"));
    assert_true(r.tree_bytes <= len);
    if (HEAP_EXACT)
        assert_true(peak <= (int64_t)len + (1 << 20));
    sm_response_free(&r);
    /* Unbounded, the same document decodes. */
    assert_int_equal(sm_parse_bounded(38, SM_KIND_NODES, 200, body, len, 0, &r), 0);
    assert_int_equal(r.n_nodes, 2048);
    sm_response_free(&r);
    free(body);
}

/* A hostile answer under the body cap: 4 MB of "0," is two million JSON
 * values, ~30 times its size as a tree. The bound stops it at 4x. */
static void test_hostile_shape(void **state)
{
    size_t n = (size_t)4 << 20;
    char *body = xmalloc(n + 32);
    size_t k = (size_t)snprintf(body, 32, "{\"nodes\":[");
    while (k < n)
        body[k++] = '0', body[k++] = ',';
    memcpy(body + k, "0]}", 4);
    k += 3;
    size_t bound = 4 * k;
    sm_response r;
    measure_start();
    int rc = sm_parse_bounded(38, SM_KIND_NODES, 200, body, k, bound, &r);
    int64_t peak = measure_peak();
    assert_int_equal(rc, OP_ETOOBIG);
    assert_int_equal(r.n_nodes, 0);
    assert_true(r.tree_bytes <= bound);
    if (HEAP_EXACT)
        assert_true(peak <= (int64_t)bound + (1 << 20));
    print_message("hostile %zu-byte answer: refused after %.1f MB of tree (bound %.1f MB), peak %s %.1f MB\n",
                  k, r.tree_bytes / 1e6, bound / 1e6, HEAP_EXACT ? "heap" : "RSS", peak / 1e6);
    sm_response_free(&r);
    free(body);
}

/* The arena gives everything back: nothing of a decode outlives it but the
 * model, and the chunks grow with the document instead of being sized up
 * front. */
static void test_arena_chunks(void **state)
{
    json_arena *a = json_arena_new();
    json_arena_set_limit(a, (size_t)64 << 20);
    size_t len;
    char *body = make_table(38, 1024, &len);
    assert_non_null(json_arena_parse(a, body, len, NULL));
    size_t used = json_arena_bytes(a);
    /* Grown as needed: within one chunk (the text's size, 8 MiB at most)
     * of what the tree needs, not a multiple of the text reserved up front. */
    print_message("arena for a %zu-byte table: %zu bytes (%.2fx)\n", len, used, (double)used / (double)len);
    assert_true(used < 6 * len);
    assert_false(json_arena_exhausted(a));
    json_arena_reset(a);
    assert_true(json_arena_bytes(a) <= 256 * 1024);
    json_arena_set_limit(a, len / 2);
    assert_null(json_arena_parse(a, body, len, NULL));
    assert_true(json_arena_exhausted(a));
    assert_true(json_arena_peak(a) >= used);
    json_arena_reset(a);
    assert_false(json_arena_exhausted(a));
    json_arena_free(a);
    free(body);
}

int main(void)
{
#if defined(__SANITIZE_ADDRESS__)
    __sanitizer_install_malloc_and_free_hooks(on_malloc, on_free);
#endif
    mem_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_v38_8192),        cmocka_unit_test(test_v38_16384),
        cmocka_unit_test(test_v44_16384),       cmocka_unit_test(test_tree_over_bound),
        cmocka_unit_test(test_hostile_shape),   cmocka_unit_test(test_arena_chunks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
