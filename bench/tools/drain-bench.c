/* drain-bench: drains through slurmio's node cache and batcher, at fleet scale.
 *
 *   drain-bench --url URL --key JWT_KEY_FILE --conf SLURM_CONF --nodes HOSTLIST
 *               [--user root] [--skip-each]
 *
 * Against a running Slurm (bench/slurm_batcher_bench.sh starts a lab with
 * 8,192 nodes), it measures what the operator's path costs:
 *  1. the node cache's first full read of the table (bytes, ms) and what
 *     idle polls then move (update_time: 304, no body);
 *  2. batched: one DRAIN with one reason for every node of HOSTLIST, queued
 *     in one loop iteration through nc_update() (the operator's path for a
 *     large scale-in): time until every node's write completed, requests
 *     sent, and time until the cache shows every node drained;
 *  3. UNDRAIN of all (batched again);
 *  4. one request per node: the same drains with a reason naming each node
 *     (Slinky's per-pod reasons), which cannot share a request: the
 *     batcher sends one request per node.
 * Prints one line per phase and a JSON summary. Writes go through the
 * libslurm backend when the REST version has no node writes (22.05).
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "core/err.h"
#include "core/log.h"
#include "core/mem.h"
#include "slurmio/hostlist.h"
#include "slurmio/nodecache.h"
#include "slurmio/rest.h"
#include "slurmio/slurmlib.h"

static uv_loop_t *loop;
static nc_cache *cache;
static sr_client *rest;
static sl_backend *lib;
static size_t done, failed;

static double now_ms(void)
{
    return (double)uv_hrtime() / 1e6;
}

static void tick(uv_timer_t *t)
{
    (void)t;
}

/* Run the loop until pred() holds (checked every 5 ms) or timeout_ms passes. */
static int run_until(int (*pred)(void), double timeout_ms)
{
    uv_timer_t t;
    uv_timer_init(loop, &t);
    uv_timer_start(&t, tick, 5, 5);
    double end = now_ms() + timeout_ms;
    int ok;
    while (!(ok = pred()) && now_ms() < end)
        uv_run(loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&t, NULL);
    uv_run(loop, UV_RUN_NOWAIT);
    return ok;
}

static int is_ready(void)
{
    return nc_ready(cache);
}

static int never(void)
{
    return 0;
}

static uint64_t last_full = (uint64_t)-1, nm_since;
static int settled(void)
{
    nc_stats st;
    nc_get_stats(cache, &st);
    if (st.full + st.errors + st.retried != last_full) {
        last_full = st.full + st.errors + st.retried;
        nm_since = st.not_modified;
    }
    return st.not_modified >= nm_since + 3;
}

static hostlist_names names;
static size_t want_done;

static int all_done(void)
{
    return done >= want_done;
}

static int want_drained;
static int cache_agrees(void)
{
    for (size_t i = 0; i < names.n; i++) {
        const sm_node *n;
        if (nc_lookup(cache, names.names[i], &n) != NC_PRESENT || nc_settling(cache, names.names[i]))
            return 0;
        if (sm_node_drain(n) != want_drained)
            return 0;
    }
    return 1;
}

static void on_write(const char *node, int status, void *data)
{
    (void)data;
    done++;
    if (status < 0 && status != OP_EINVALID) /* 22.05: UNDRAIN of a never-registered node says 2028 */
        failed++;
}

typedef struct phase {
    const char *name;
    double write_ms;
    double visible_ms;
    uint64_t requests;
    size_t failed;
} phase;

static void run_phase(phase *ph, int state, int per_node_reason)
{
    nb_stats b0, b1;
    nb_get_stats(nc_batcher(cache), &b0);
    done = failed = 0;
    want_done = names.n;
    double t0 = now_ms();
    char reason[256];
    size_t queued = 0;
    for (size_t i = 0; i < names.n; i++) {
        if (per_node_reason)
            snprintf(reason, sizeof(reason),
                     "slurm-operator: Pod (bench/%s) is pending termination for scale-in", names.names[i]);
        else
            snprintf(reason, sizeof(reason),
                     "slurm-operator: Pods of NodeSet (bench/gpu) are pending termination");
        sm_node_update u = {.set = SM_UPD_STATE | SM_UPD_REASON, .state = state, .reason = reason};
        int rc = nc_update(cache, names.names[i], &u, on_write, NULL);
        if (rc == 0)
            queued++;
        else
            done++; /* nothing to wait for */
    }
    run_until(all_done, 600000);
    ph->write_ms = now_ms() - t0;
    want_drained = state == SM_REQ_DRAIN;
    run_until(cache_agrees, 120000);
    ph->visible_ms = now_ms() - t0;
    nb_get_stats(nc_batcher(cache), &b1);
    ph->requests = b1.requests - b0.requests;
    ph->failed = failed;
    printf("%-34s %zu nodes: writes done in %9.1f ms with %5" PRIu64
           " request(s); visible in the cache after "
           "%9.1f ms%s\n",
           ph->name, queued, ph->write_ms, ph->requests, ph->visible_ms, failed ? " (with failures)" : "");
    fflush(stdout);
}

static void closed(void *data)
{
    (*(int *)data)++;
}

int main(int argc, char **argv)
{
    const char *url = NULL, *keyfile = NULL, *conf = NULL, *hosts = NULL, *user = "root";
    int skip_each = 0;
    static const struct option lo[] = {{"url", 1, 0, 'u'},   {"key", 1, 0, 'k'},  {"conf", 1, 0, 'c'},
                                       {"nodes", 1, 0, 'n'}, {"user", 1, 0, 'U'}, {"skip-each", 0, 0, 's'},
                                       {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (c) {
        case 'u':
            url = optarg;
            break;
        case 'k':
            keyfile = optarg;
            break;
        case 'c':
            conf = optarg;
            break;
        case 'n':
            hosts = optarg;
            break;
        case 'U':
            user = optarg;
            break;
        case 's':
            skip_each = 1;
            break;
        default:
            fprintf(stderr, "see the comment at the top of bench/tools/drain-bench.c\n");
            return 2;
        }
    }
    if (!url || !keyfile || !conf || !hosts) {
        fprintf(stderr, "usage: drain-bench --url URL --key FILE --conf SLURM_CONF --nodes HOSTLIST\n");
        return 2;
    }
    mem_init();
    log_setup(getenv("DRAIN_BENCH_DEBUG") ? LOGL_DEBUG : LOGL_WARN, LOGF_TEXT);
    FILE *f = fopen(keyfile, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", keyfile);
        return 1;
    }
    char key[4096];
    size_t klen = fread(key, 1, sizeof(key), f);
    fclose(f);
    if (hostlist_expand(hosts, 0, &names) < 0) {
        fprintf(stderr, "bad hostlist %s\n", hosts);
        return 1;
    }
    loop = uv_default_loop();
    sr_opts ro = {.url = url, .key = key, .key_len = klen, .user = user, .timeout_ms = 60000};
    if (sr_client_new(loop, &ro, &rest) < 0) {
        fprintf(stderr, "bad URL %s\n", url);
        return 1;
    }
    sl_options so = {.conf = conf, .timeout_ms = 600000};
    int rc = sl_backend_new(loop, &so, &lib);
    if (rc < 0)
        fprintf(stderr, "no libslurm backend (%s): writes need REST v0.0.42+\n", err_str(rc));
    nc_opts no = {.name = "bench", .rest = rest, .lib = lib, .stale_ms = 600000};
    if (nc_new(loop, &no, &cache) < 0)
        return 1;

    /* 1. The table, then idle polls. */
    double t0 = now_ms();
    if (!run_until(is_ready, 120000)) {
        fprintf(stderr, "Slurm's node table could not be read\n");
        return 1;
    }
    nc_stats s0, s1, first;
    nc_get_stats(cache, &s0);
    first = s0;
    printf("first full read of the node table:  %zu nodes, %" PRIu64
           " bytes, %.1f ms (cache ready after %.1f ms)\n",
           s0.nodes, s0.bytes, (double)s0.last_full_ms, now_ms() - t0);
    /* Idle: nodes without slurmd change state for a while after slurmctld
     * starts; wait until three polls in a row were answered 304 (at most a
     * minute), then count five more polls. */
    run_until(settled, 60000);
    nc_get_stats(cache, &s0);
    run_until(never, 5.0 * s0.interval_ms + 200);
    nc_get_stats(cache, &s1);
    printf("idle polls (update_time):           %" PRIu64 " polls, %" PRIu64 " answered 304, %" PRIu64
           " body bytes moved; interval %u ms\n",
           s1.polls - s0.polls, s1.not_modified - s0.not_modified, s1.bytes - s0.bytes, s1.interval_ms);

    phase batched = {.name = "drain, one reason (batched)"};
    phase undrain = {.name = "undrain (batched)"};
    phase each = {.name = "drain, a reason per node"};
    phase undrain2 = {.name = "undrain (batched)"};
    run_phase(&batched, SM_REQ_DRAIN, 0);
    run_phase(&undrain, SM_REQ_UNDRAIN, 0);
    if (!skip_each) {
        run_phase(&each, SM_REQ_DRAIN, 1);
        run_phase(&undrain2, SM_REQ_UNDRAIN, 0);
    }
    printf("{\"nodes\":%zu,\"table_bytes\":%" PRIu64 ",\"table_ms\":%" PRIu64 ",\"idle_polls\":%" PRIu64
           ",\"idle_bytes\":%" PRIu64 ",\"batched_ms\":%.1f,\"batched_requests\":%" PRIu64
           ",\"batched_visible_ms\":%.1f,\"each_ms\":%.1f,\"each_requests\":%" PRIu64 ",\"ratio\":%.1f}\n",
           names.n, first.bytes, first.last_full_ms, s1.polls - s0.polls, s1.bytes - s0.bytes,
           batched.write_ms, batched.requests, batched.visible_ms, each.write_ms, each.requests,
           batched.write_ms > 0 && !skip_each ? each.write_ms / batched.write_ms : 0);

    int closes = 0;
    nc_close(cache, closed, &closes);
    sr_client_close(rest, closed, &closes);
    if (lib)
        sl_backend_close(lib, closed, &closes);
    uv_run(loop, UV_RUN_DEFAULT);
    uv_loop_close(loop);
    hostlist_names_free(&names);
    sl_library_fini();
    return batched.failed || undrain.failed || each.failed ? 1 : 0;
}
