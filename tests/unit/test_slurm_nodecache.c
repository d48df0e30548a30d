/* Unit tests for slurmio/nodecache against a scripted slurmrestd: polling
 * with update_time (304 when idle), events for exactly the nodes that
 * changed, failing closed (unknown, never absent or drained) when Slurm
 * errs or is unreachable, recovery, writes that settle only once read back
 * (and are not repeated meanwhile), single-node reads of tracked nodes,
 * deadlines from running jobs, and the active controller from pings. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http_test_util.h"
#include "slurmrestd_sim.h"

#include "core/err.h"
#include "reconcilers/nodeset_verdict.h"
#include "slurmio/nodecache.h"
#include "slurmio/rest.h"

static test_loop TL;
static const char KEY[] = "0123456789abcdef0123456789abcdef";

typedef struct events {
    int all;   /* on_node(NULL) */
    int count; /* per-node events */
    char names[64][32];
    int pings;
    int want; /* set "hit" once count >= want */
    int hit;
    const char *wait_for; /* set "seen" when this node fires */
    int seen;
    int wait_all; /* set "all_hit" on the next NULL event */
    int all_hit;
} events;

static events EV;

static void on_node(const char *name, void *data)
{
    (void)data;
    if (name == NULL) {
        EV.all++;
        if (EV.wait_all)
            EV.all_hit = 1;
        return;
    }
    if (EV.count < 64)
        snprintf(EV.names[EV.count], sizeof(EV.names[0]), "%s", name);
    EV.count++;
    if (EV.want && EV.count >= EV.want)
        EV.hit = 1;
    if (EV.wait_for && strcmp(EV.wait_for, name) == 0)
        EV.seen = 1;
}

static void on_ping(void *data)
{
    (void)data;
    EV.pings++;
}

static int fired(const char *name)
{
    for (int i = 0; i < EV.count && i < 64; i++)
        if (strcmp(EV.names[i], name) == 0)
            return 1;
    return 0;
}

typedef struct cluster {
    sr_client *rest;
    nc_cache *cache;
} cluster;

static cluster open_cluster(int version, unsigned poll_min_ms, unsigned track_ms)
{
    cluster cl;
    char url[64];
    sim_url(url, sizeof(url));
    sr_opts o = {.url = url, .key = KEY, .key_len = sizeof(KEY) - 1, .timeout_ms = 2000, .version = version};
    assert_int_equal(sr_client_new(&TL.loop, &o, &cl.rest), 0);
    nc_opts no = {.name = "test/slurm",
                  .rest = cl.rest,
                  .poll_min_ms = poll_min_ms,
                  .poll_max_ms = poll_min_ms,
                  .track_ms = track_ms,
                  .jobs_ms = 50,
                  .ping_ms = 50,
                  .on_node = on_node,
                  .on_ping = on_ping};
    assert_int_equal(nc_new(&TL.loop, &no, &cl.cache), 0);
    memset(&EV, 0, sizeof(EV));
    return cl;
}

static void closed(void *data)
{
    *(int *)data = 1;
}

/* The cache first, then its REST client at once (it cancels what the
 * cache still has in flight). */
static void close_cluster(cluster *cl)
{
    int a = 0, b = 0;
    nc_close(cl->cache, closed, &a);
    sr_client_close(cl->rest, closed, &b);
    run_until(&TL, &a);
    run_until(&TL, &b);
}

static void wait_ready(cluster *cl)
{
    for (int i = 0; i < 400 && !nc_ready(cl->cache); i++)
        run_for(&TL, 5);
    assert_true(nc_ready(cl->cache));
}

static int setup(void **state)
{
    tl_start(&TL, 30000);
    return 0;
}

static int setup_long(void **state)
{
    tl_start(&TL, 120000);
    return 0;
}

static int teardown(void **state)
{
    tl_finish(&TL);
    return 0;
}

/* ---- polling ---- */

static void test_poll_304_and_changes(void **state)
{
    sim_start(&TL.loop, 38, "v38_nodes_idle_200.json");
    SIM.unchanged = 1;
    cluster cl = open_cluster(38, 30, 1000);
    assert_int_equal(nc_lookup(cl.cache, "n1", NULL), NC_UNKNOWN); /* nothing read yet */
    wait_ready(&cl);
    const sm_node *n;
    assert_int_equal(nc_lookup(cl.cache, "n1", &n), NC_PRESENT);
    assert_int_equal(n->base, SM_NODE_IDLE);
    assert_int_equal(nc_lookup(cl.cache, "nosuch", NULL), NC_ABSENT);
    assert_int_equal(EV.all, 1); /* became readable: "look at everything" */
    run_for(&TL, 200);
    nc_stats st;
    nc_get_stats(cl.cache, &st);
    assert_int_equal(st.full, 1);
    /* every node's entry with its strings, and the map */
    size_t table_bytes = nc_heap_bytes(cl.cache);
    assert_true(table_bytes > st.nodes * (sizeof(sm_node) + 2 * 32));
    assert_true(st.not_modified >= 3);
    /* Only the first poll went without update_time. */
    assert_string_equal(SIM.recs[0].query, "");
    assert_non_null(strstr(SIM.recs[1].query, "update_time="));
    assert_int_equal(EV.count, 0); /* nothing changed, no event */

    /* Slurm changes three nodes: one full answer, one event each. */
    free(SIM.nodes);
    SIM.nodes = sim_fixture("v38_nodes_mixed_states_200.json");
    SIM.unchanged = 0;
    EV.want = 3;
    run_until(&TL, &EV.hit);
    SIM.unchanged = 1;
    run_for(&TL, 100);
    assert_int_equal(EV.count, 3);
    assert_true(fired("n1") && fired("n2") && fired("n3"));
    assert_false(fired("dyn1"));
    assert_int_equal(nc_lookup(cl.cache, "n2", &n), NC_PRESENT);
    assert_true(sm_node_drained(n));
    assert_int_equal(nc_lookup(cl.cache, "n1", &n), NC_PRESENT);
    assert_int_equal(n->base, SM_NODE_DOWN);

    /* A node leaves the table: an event, then ABSENT. */
    free(SIM.nodes);
    SIM.nodes = xstrdup("{\"nodes\":[],\"errors\":[]}");
    SIM.unchanged = 0;
    EV.wait_for = "n1";
    run_until(&TL, &EV.seen);
    assert_int_equal(nc_lookup(cl.cache, "n1", NULL), NC_ABSENT);
    /* the nodes' strings went with them (their entries are kept a while
     * for nc_vanished) */
    assert_true(nc_heap_bytes(cl.cache) < table_bytes);
    close_cluster(&cl);
    sim_stop(&TL);
}

/* Slurm 22.05 answers a changed node table asked with update_time with a
 * 500 (its partition load says "no change"): read the whole table at once
 * instead of going unknown. */
static void test_2205_update_time_quirk(void **state)
{
    sim_start(&TL.loop, 38, "v38_nodes_idle_200.json");
    SIM.quirk_2205 = 1;
    cluster cl = open_cluster(38, 30, 1000);
    wait_ready(&cl);
    free(SIM.nodes);
    SIM.nodes = sim_fixture("v38_nodes_mixed_states_200.json");
    EV.wait_for = "n2";
    run_until(&TL, &EV.seen);
    run_for(&TL, 200);
    const sm_node *n;
    assert_int_equal(nc_lookup(cl.cache, "n2", &n), NC_PRESENT);
    assert_true(sm_node_drained(n));
    nc_stats st;
    nc_get_stats(cl.cache, &st);
    assert_true(st.retried >= 2);
    assert_int_equal(st.errors, 0);
    assert_int_equal(EV.all, 1); /* never went unknown */
    assert_true(nc_ready(cl.cache));
    /* A real failure of the full read still makes it unknown. */
    SIM.nodes_status = 500;
    EV.wait_all = 1;
    run_until(&TL, &EV.all_hit);
    assert_false(nc_ready(cl.cache));
    close_cluster(&cl);
    sim_stop(&TL);
}

/* Errors and an unreachable Slurm make every node unknown (fail closed). */
static void test_fail_closed(void **state)
{
    sim_start(&TL.loop, 42, "v42_nodes_states_200.json");
    cluster cl = open_cluster(42, 30, 1000);
    wait_ready(&cl);
    const sm_node *n;
    assert_int_equal(nc_lookup(cl.cache, "slinky-1", &n), NC_PRESENT);
    assert_true(sm_node_drained(n));

    /* HTTP 200 with an "errors" list. */
    SIM.errors_in_200 = 1;
    EV.wait_all = 1;
    run_until(&TL, &EV.all_hit);
    assert_false(nc_ready(cl.cache));
    assert_int_equal(nc_lookup(cl.cache, "slinky-1", &n), NC_UNKNOWN);
    assert_null(n);
    assert_int_equal(nc_lookup(cl.cache, "nosuch", NULL), NC_UNKNOWN); /* never "absent" */

    /* Back: readable again, "everything" fires. */
    SIM.errors_in_200 = 0;
    EV.all_hit = 0;
    run_until(&TL, &EV.all_hit);
    assert_true(nc_ready(cl.cache));
    assert_int_equal(nc_lookup(cl.cache, "slinky-1", NULL), NC_PRESENT);

    /* A 500 (bad token) too. */
    SIM.nodes_status = 500;
    EV.all_hit = 0;
    run_until(&TL, &EV.all_hit);
    assert_int_equal(nc_lookup(cl.cache, "slinky-0", NULL), NC_UNKNOWN);
    nc_stats st;
    nc_get_stats(cl.cache, &st);
    assert_true(st.errors >= 2);
    SIM.nodes_status = 0;

    /* slurmrestd gone altogether. */
    EV.all_hit = 0;
    run_until(&TL, &EV.all_hit);
    assert_true(nc_ready(cl.cache));
    int done = 0;
    hs_close(SIM.srv, sim_closed, &done);
    run_until(&TL, &done);
    SIM.srv = NULL;
    EV.all_hit = 0;
    run_until(&TL, &EV.all_hit);
    assert_false(nc_ready(cl.cache));
    assert_int_equal(nc_lookup(cl.cache, "slinky-1", NULL), NC_UNKNOWN);
    close_cluster(&cl);
    free(SIM.nodes);
    SIM.nodes = NULL;
}

/* ---- writes ---- */

typedef struct wr {
    int done;
    int status;
} wr;

static void on_write(const char *node, int status, void *data)
{
    wr *w = data;
    w->done = 1;
    w->status = status;
}

static void test_write_settles(void **state)
{
    sim_start(&TL.loop, 42, "v42_nodes_states_200.json");
    SIM.unchanged = 1;
    /* A slow table poll, so the read-back is the single GET. */
    cluster cl = open_cluster(42, 5000, 1000);
    wait_ready(&cl);
    sm_node_update u = {
        .set = SM_UPD_STATE | SM_UPD_REASON, .state = SM_REQ_DRAIN, .reason = "slurm-operator: x"};
    wr w = {0};
    assert_false(nc_settling(cl.cache, "slinky-0"));
    assert_int_equal(nc_update(cl.cache, "slinky-0", &u, on_write, &w), 0);
    assert_true(nc_settling(cl.cache, "slinky-0"));
    /* The same write again while it is in flight: nothing is sent. */
    wr w2 = {0};
    assert_int_equal(nc_update(cl.cache, "slinky-0", &u, on_write, &w2), 1);
    /* A different write is sent. */
    sm_node_update c = {.set = SM_UPD_COMMENT, .comment = "{}"};
    wr w3 = {0};
    assert_int_equal(nc_update(cl.cache, "slinky-0", &c, on_write, &w3), 0);
    run_until(&TL, &w.done);
    assert_int_equal(w.status, 0);
    run_until(&TL, &w3.done);
    /* Read back on its own, then settled (and the owner is told). */
    EV.wait_for = "slinky-0";
    run_until(&TL, &EV.seen);
    assert_false(nc_settling(cl.cache, "slinky-0"));
    assert_int_equal(sim_count("GET", "/node/slinky-0"), 1);
    assert_int_equal(sim_count("POST", "/slurm/v0.0.42/nodes/"), 2);
    assert_false(w2.done);
    /* Settled: the same write may be sent again. */
    wr w4 = {0};
    assert_int_equal(nc_update(cl.cache, "slinky-0", &u, on_write, &w4), 0);
    run_until(&TL, &w4.done);

    /* A write Slurm refuses does not leave the node settling. */
    SIM.missing = "ghost";
    wr w5 = {0};
    assert_int_equal(nc_update(cl.cache, "ghost", &u, on_write, &w5), 0);
    run_until(&TL, &w5.done);
    assert_int_equal(w5.status, OP_ENOTFOUND);
    assert_false(nc_settling(cl.cache, "ghost"));
    assert_int_equal(nc_update(cl.cache, "bad name", &u, on_write, &w5), OP_EINVAL);
    close_cluster(&cl);
    sim_stop(&TL);
}

/* A write of nothing but the comment changes no state: the node does not
 * settle while it is in flight (a drain need not wait for it), the same
 * comment is not sent twice, and once Slurm accepts it the cache holds it
 * without a read back or an event; the next table is Slurm's word again. */
static void test_comment_applied(void **state)
{
    sim_start(&TL.loop, 42, "v42_nodes_states_200.json");
    SIM.unchanged = 1;
    cluster cl = open_cluster(42, 5000, 1000);
    wait_ready(&cl);
    const sm_node *n = NULL;
    assert_int_equal(nc_lookup(cl.cache, "slinky-0", &n), NC_PRESENT);
    char *before = strdup(n->comment ? n->comment : "");
    assert_string_not_equal(before, "{\"podName\":\"p-0\"}");
    int events_before = EV.count;
    sm_node_update c = {.set = SM_UPD_COMMENT, .comment = "{\"podName\":\"p-0\"}"};
    wr w = {0};
    assert_int_equal(nc_update(cl.cache, "slinky-0", &c, on_write, &w), 0);
    assert_false(nc_settling(cl.cache, "slinky-0"));
    wr again = {0};
    assert_int_equal(nc_update(cl.cache, "slinky-0", &c, on_write, &again), 1);
    run_until(&TL, &w.done);
    assert_int_equal(w.status, 0);
    assert_false(nc_settling(cl.cache, "slinky-0"));
    assert_int_equal(nc_lookup(cl.cache, "slinky-0", &n), NC_PRESENT);
    assert_string_equal(n->comment, "{\"podName\":\"p-0\"}");
    run_for(&TL, 100);
    assert_int_equal(sim_count("GET", "/node/slinky-0"), 0);
    assert_int_equal(EV.count, events_before);
    nc_stats st;
    nc_get_stats(cl.cache, &st);
    assert_int_equal(st.local_applies, 1);

    /* Beside a drain in flight: the drain settles and is read back, the
     * comment is applied. */
    sm_node_update d = {
        .set = SM_UPD_STATE | SM_UPD_REASON, .state = SM_REQ_DRAIN, .reason = "slurm-operator: x"};
    sm_node_update c2 = {.set = SM_UPD_COMMENT, .comment = "{}"};
    wr w2 = {0}, w3 = {0};
    assert_int_equal(nc_update(cl.cache, "slinky-1", &d, on_write, &w2), 0);
    assert_int_equal(nc_update(cl.cache, "slinky-1", &c2, on_write, &w3), 0);
    assert_true(nc_settling(cl.cache, "slinky-1"));
    run_until(&TL, &w2.done);
    run_until(&TL, &w3.done);
    EV.wait_for = "slinky-1";
    run_until(&TL, &EV.seen);
    assert_false(nc_settling(cl.cache, "slinky-1"));
    assert_int_equal(sim_count("GET", "/node/slinky-1"), 1);
    assert_false(again.done);

    /* The next whole table (the simulator never stored the comment) is
     * Slurm's word: the old comment is back, and the owner is told. */
    SIM.unchanged = 0;
    EV.seen = 0;
    EV.wait_for = "slinky-0";
    nc_poll_soon(cl.cache);
    run_until(&TL, &EV.seen);
    assert_int_equal(nc_lookup(cl.cache, "slinky-0", &n), NC_PRESENT);
    assert_string_equal(n->comment ? n->comment : "", before);
    free(before);
    close_cluster(&cl);
    sim_stop(&TL);
}

/* Tracked nodes are read on their own while the table poll is slow. */
static void test_track(void **state)
{
    sim_start(&TL.loop, 38, "v38_nodes_idle_200.json");
    SIM.unchanged = 1;
    cluster cl = open_cluster(38, 5000, 50);
    wait_ready(&cl);
    nc_track(cl.cache, "n3", 2000);
    run_for(&TL, 400);
    int reads = sim_count("GET", "/node/n3");
    assert_true(reads >= 4);
    assert_true(reads <= 10);
    assert_int_equal(sim_count("GET", "/nodes"), 1); /* the table was not polled again meanwhile */
    /* A change seen by a single read fires an event. */
    free(SIM.nodes);
    SIM.nodes = sim_fixture("v38_nodes_mixed_states_200.json");
    EV.wait_for = "n3";
    run_until(&TL, &EV.seen);
    const sm_node *n;
    assert_int_equal(nc_lookup(cl.cache, "n3", &n), NC_PRESENT);
    assert_true(n->flags & SM_NF(NOT_RESPONDING));
    close_cluster(&cl);
    sim_stop(&TL);
}

/* More tracked nodes than max_tracked are left to the table's poll; the
 * nodes untracked (their pods being deleted) no longer crowd out the one
 * still waited for, which is read on its own again. */
static void test_untrack(void **state)
{
    sim_start(&TL.loop, 38, "v38_nodes_idle_200.json");
    SIM.unchanged = 1;
    cluster cl = open_cluster(38, 5000, 50);
    wait_ready(&cl);
    char name[16];
    for (int i = 0; i < 40; i++) {
        snprintf(name, sizeof(name), "x%d", i);
        nc_track(cl.cache, name, 60000);
    }
    nc_track(cl.cache, "n3", 60000);
    run_for(&TL, 300);
    assert_int_equal(sim_count("GET", "/node/n3"), 0);
    for (int i = 0; i < 40; i++) {
        snprintf(name, sizeof(name), "x%d", i);
        nc_untrack(cl.cache, name);
    }
    run_for(&TL, 400);
    int reads = sim_count("GET", "/node/n3");
    assert_true(reads >= 4);
    assert_true(reads <= 10);
    assert_int_equal(sim_count("GET", "/node/x0"), 0);
    close_cluster(&cl);
    sim_stop(&TL);
}

/* A scale-in of pods whose slurmd never registered asks a proof by name for each: past max_tracked (32)
 * the rest go in rounds PROOF_ROUND_MS apart once a round is answered, not one round a track_ms (2 s
 * here), so 100 proofs are all answered well within one track_ms. */
static void test_proofs_in_rounds(void **state)
{
    sim_start(&TL.loop, 38, "v38_nodes_idle_200.json");
    SIM.unchanged = 1;
    cluster cl = open_cluster(38, 5000, 2000);
    wait_ready(&cl);
    char name[16];
    for (int i = 0; i < 100; i++) {
        snprintf(name, sizeof(name), "g%d", i);
        assert_int_equal(nc_confirm_gone(cl.cache, name, 60000), 0);
    }
    run_for(&TL, 1500);
    int proved = 0, reads = 0;
    for (int i = 0; i < 100; i++) {
        snprintf(name, sizeof(name), "g%d", i);
        proved += nc_confirm_gone(cl.cache, name, 60000);
        char path[32];
        snprintf(path, sizeof(path), "/node/%s", name);
        reads += sim_count("GET", path);
    }
    assert_int_equal(proved, 100);
    assert_int_equal(reads, 100); /* one read each */
    close_cluster(&cl);
    sim_stop(&TL);
}

/* The v0.0.38 node table of fixture with node's state word replaced. */
static char *table_with_state(const char *fixture, const char *node, const char *state)
{
    char *doc = sim_fixture(fixture);
    cJSON *j = json_parse(doc, strlen(doc), NULL);
    free(doc);
    assert_non_null(j);
    cJSON *n;
    cJSON_ArrayForEach(n, json_child(j, "nodes"))
    {
        if (strcmp(json_get_str_or(n, "name", ""), node) == 0)
            json_set_str(n, "state", state);
    }
    char *out = json_dump(j);
    cJSON_Delete(j);
    return out;
}

/* A cache over the v0.0.38 node table nodes (taken), with jobs on n3 and n1
 * and 41 tracked nodes, past max_tracked: x0 .. x39 and n3. */
static cluster busy_among_many(char *nodes)
{
    sim_start(&TL.loop, 38, NULL);
    sim_set(&SIM.nodes, nodes);
    SIM.unchanged = 1;
    SIM.jobs = sim_fixture("v38_jobs_running_200.json");
    cluster cl = open_cluster(38, 5000, 50);
    wait_ready(&cl);
    EV.wait_for = "n3";
    nc_want_jobs(cl.cache);
    run_until(&TL, &EV.seen);
    assert_int_equal(nc_job_holds(cl.cache, "n3"), 1);
    char name[16];
    for (int i = 0; i < 40; i++) {
        snprintf(name, sizeof(name), "x%d", i);
        nc_track(cl.cache, name, 60000);
    }
    nc_track(cl.cache, "n3", 60000);
    return cl;
}

/* A scale-in tracks every node it drains. Past max_tracked the table's poll
 * serves them, but a tracked node a job holds is still read by name: its
 * job's end is what its pod waits for, and the table may be seconds a
 * read. Without the job it is left to the table like the others. */
static void test_track_busy_among_many(void **state)
{
    cluster cl = busy_among_many(sim_fixture("v38_nodes_idle_200.json"));
    assert_int_equal(nc_job_holds(cl.cache, "n2"), 0);
    nc_track(cl.cache, "n2", 60000);
    run_for(&TL, 400);
    int reads = sim_count("GET", "/node/n3");
    assert_true(reads >= 4);
    assert_true(reads <= 10);
    assert_int_equal(sim_count("GET", "/node/n2"), 0);
    assert_int_equal(sim_count("GET", "/node/x0"), 0);
    close_cluster(&cl);
    sim_stop(&TL);
}

/* Past max_tracked, a tracked node whose job the list shows ended is still
 * read by name while its own reading is not jobless (the list showed the
 * end first), and no longer once a read shows it jobless. */
static void test_track_busy_until_jobless(void **state)
{
    cluster cl = busy_among_many(table_with_state("v38_nodes_idle_200.json", "n3", "allocated"));
    /* The list shows job 1 ended; n3 still reads allocated. */
    char *jobs = sim_fixture("v38_jobs_running_200.json");
    cJSON *jd = json_parse(jobs, strlen(jobs), NULL);
    free(jobs);
    cJSON *j;
    cJSON_ArrayForEach(j, json_child(jd, "jobs"))
    {
        if (json_get_int(j, "job_id", 0) == 1)
            json_set_str(j, "job_state", "COMPLETED");
    }
    SIM.unchanged = 0;
    sim_set(&SIM.jobs, json_dump(jd));
    cJSON_Delete(jd);
    for (int i = 0; i < 400 && nc_job_holds(cl.cache, "n3") != 0; i++)
        run_for(&TL, 5);
    assert_int_equal(nc_job_holds(cl.cache, "n3"), 0);
    int before = sim_count("GET", "/node/n3");
    run_for(&TL, 400);
    int reads = sim_count("GET", "/node/n3") - before;
    assert_true(reads >= 3);
    /* n3 reads idle: left to the table from then on. */
    sim_set(&SIM.nodes, sim_fixture("v38_nodes_idle_200.json"));
    const sm_node *n = NULL;
    for (int i = 0; i < 400; i++) {
        if (nc_lookup(cl.cache, "n3", &n) == NC_PRESENT && sm_node_jobless(n))
            break;
        run_for(&TL, 5);
    }
    assert_int_equal(nc_lookup(cl.cache, "n3", &n), NC_PRESENT);
    assert_true(sm_node_jobless(n));
    run_for(&TL, 100);
    before = sim_count("GET", "/node/n3");
    run_for(&TL, 400);
    assert_true(sim_count("GET", "/node/n3") - before <= 1);
    assert_int_equal(sim_count("GET", "/node/x0"), 0);
    close_cluster(&cl);
    sim_stop(&TL);
}

/* ---- jobs and pings ---- */

/* Absence is not proof: a table that suddenly lacks nodes is held (unknown)
 * until a second read agrees; only Slurm's "Invalid node name" to a read by
 * name proves a node gone, never an empty answer; a write Slurm accepts but
 * that does not show is retried with backoff. */
static void test_absence_not_proof(void **state)
{
    sim_start(&TL.loop, 38, "v38_nodes_idle_200.json");
    cluster cl = open_cluster(38, 30, 50);
    wait_ready(&cl);
    assert_int_equal(nc_lookup(cl.cache, "n1", NULL), NC_PRESENT);

    /* An empty table: held, the cluster reads unknown, n1 never "vanishes". */
    char *full = SIM.nodes;
    SIM.nodes = xstrdup("{\"nodes\":[],\"errors\":[]}");
    for (int i = 0; i < 200 && !nc_suspect(cl.cache); i++)
        run_for(&TL, 5);
    assert_true(nc_suspect(cl.cache));
    assert_int_equal(nc_lookup(cl.cache, "n1", NULL), NC_UNKNOWN);
    assert_false(nc_ready(cl.cache));
    free(SIM.nodes);
    SIM.nodes = full;
    EV.count = 0;
    run_for(&TL, 1300);
    assert_false(nc_suspect(cl.cache));
    assert_int_equal(nc_lookup(cl.cache, "n1", NULL), NC_PRESENT);
    assert_false(fired("n1"));
    nc_stats st;
    nc_get_stats(cl.cache, &st);
    assert_true(st.held >= 1);

    /* A present node is never proved gone; an unknown one is, by name. */
    assert_int_equal(nc_confirm_gone(cl.cache, "n1", 5000), 0);
    assert_int_equal(nc_confirm_gone(cl.cache, "ghost", 5000), 0);
    EV.wait_for = "ghost";
    run_until(&TL, &EV.seen);
    assert_int_equal(nc_confirm_gone(cl.cache, "ghost", 5000), 1);
    run_for(&TL, 20);
    assert_int_equal(nc_confirm_gone(cl.cache, "ghost", 5), 0); /* not fresh enough: read again */

    /* A read by name answered with an empty list proves nothing. */
    SIM.node_empty = 1;
    int reads = sim_count("GET", "/node/ghost2");
    assert_int_equal(nc_confirm_gone(cl.cache, "ghost2", 5000), 0);
    for (int i = 0; i < 400 && sim_count("GET", "/node/ghost2") < reads + 2; i++)
        run_for(&TL, 5);
    assert_true(sim_count("GET", "/node/ghost2") >= reads + 2); /* asked again, by name */
    assert_int_equal(nc_confirm_gone(cl.cache, "ghost2", 5000), 0);
    /* ... and does not make a listed node absent either. */
    nc_read_soon(cl.cache, "n1");
    run_for(&TL, 200);
    assert_int_equal(nc_lookup(cl.cache, "n1", NULL), NC_PRESENT);
    nc_get_stats(cl.cache, &st);
    assert_true(st.bad_reads >= 2);
    SIM.node_empty = 0;

    /* The table asked for shrinks for real: applied once a second read
     * agrees. */
    SIM.nodes = sim_fixture("v38_nodes_idle_200.json");
    free(full);
    cJSON *doc = json_parse(SIM.nodes, strlen(SIM.nodes), NULL);
    cJSON *list = cJSON_DetachItemFromObject(doc, "nodes");
    cJSON *keep = cJSON_CreateArray();
    cJSON_AddItemToArray(keep, cJSON_DetachItemFromArray(list, 0)); /* n1 only */
    cJSON_Delete(list);
    json_set(doc, "nodes", keep);
    free(SIM.nodes);
    SIM.nodes = json_dump(doc);
    cJSON_Delete(doc);
    EV.count = 0;
    EV.wait_for = "n2";
    EV.seen = 0;
    run_until(&TL, &EV.seen);
    assert_int_equal(nc_lookup(cl.cache, "n2", NULL), NC_ABSENT);
    assert_int_equal(nc_lookup(cl.cache, "n1", NULL), NC_PRESENT);
    close_cluster(&cl);
    sim_stop(&TL);
}

/* A node the table listed and then lost (slurmctld restarted without its
 * state) is told apart from one never seen, and whether it was busy. */
static void test_vanished(void **state)
{
    sim_start(&TL.loop, 38, "v38_nodes_idle_200.json");
    /* n1 runs a job. */
    cJSON *doc = json_parse(SIM.nodes, strlen(SIM.nodes), NULL);
    cJSON *n1 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(doc, "nodes"), 0);
    assert_string_equal(json_get_str(n1, "name"), "n1");
    json_set(n1, "state", cJSON_CreateString("allocated"));
    free(SIM.nodes);
    SIM.nodes = json_dump(doc);
    cluster cl = open_cluster(38, 30, 50);
    wait_ready(&cl);
    assert_int_equal(nc_lookup(cl.cache, "n1", NULL), NC_PRESENT);
    assert_int_equal(nc_vanished(cl.cache, "n1", NULL), 0);

    /* Slurm forgets n1 and n2 (n3 and dyn1 stay, so the second read that
     * confirms the shrink is what applies it). */
    cJSON *list = cJSON_GetObjectItemCaseSensitive(doc, "nodes");
    cJSON_DeleteItemFromArray(list, 0);
    cJSON_DeleteItemFromArray(list, 0);
    free(SIM.nodes);
    SIM.nodes = json_dump(doc);
    cJSON_Delete(doc);
    EV.wait_for = "n1";
    EV.seen = 0;
    run_until(&TL, &EV.seen);
    assert_int_equal(nc_lookup(cl.cache, "n1", NULL), NC_ABSENT);
    uint64_t ago = 12345;
    assert_int_equal(nc_vanished(cl.cache, "n1", &ago), 2); /* busy when last seen */
    assert_true(ago < 5000);
    assert_int_equal(nc_vanished(cl.cache, "n2", NULL), 1); /* idle when last seen */
    assert_int_equal(nc_vanished(cl.cache, "n3", NULL), 0); /* still there */
    assert_int_equal(nc_vanished(cl.cache, "ghost", NULL), 0); /* never seen: cannot tell */

    /* Slurm's "no such node" by name confirms the absence but does not
     * make n1 any less lost. */
    assert_int_equal(nc_confirm_gone(cl.cache, "n1", 5000), 0);
    EV.seen = 0;
    run_until(&TL, &EV.seen);
    assert_int_equal(nc_confirm_gone(cl.cache, "n1", 5000), 1);
    assert_int_equal(nc_vanished(cl.cache, "n1", NULL), 2);

    /* It registers again: no longer lost. */
    free(SIM.nodes);
    SIM.nodes = sim_fixture("v38_nodes_idle_200.json");
    EV.seen = 0;
    run_until(&TL, &EV.seen);
    assert_int_equal(nc_lookup(cl.cache, "n1", NULL), NC_PRESENT);
    assert_int_equal(nc_vanished(cl.cache, "n1", NULL), 0);
    close_cluster(&cl);
    sim_stop(&TL);
}

/* An update Slurm accepts but later reads do not show is retried with
 * backoff (1 s, 2 s, ...), and the owner is woken when a try is due. */
static void test_repeat_backoff(void **state)
{
    sim_start(&TL.loop, 42, "v42_nodes_states_200.json");
    SIM.unchanged = 1;
    cluster cl = open_cluster(42, 5000, 50);
    wait_ready(&cl);
    sm_node_update u = {.set = SM_UPD_FEATURES, .features = "never-shows"};
    for (int round = 0; round < 2; round++) {
        wr w = {0};
        assert_int_equal(nc_update(cl.cache, "slinky-0", &u, on_write, &w), 0);
        run_until(&TL, &w.done);
        assert_int_equal(w.status, 0);
        for (int i = 0; i < 400 && nc_settling(cl.cache, "slinky-0"); i++)
            run_for(&TL, 5);
        assert_false(nc_settling(cl.cache, "slinky-0"));
    }
    /* The third ask within the backoff: nothing sent, the owner is woken. */
    int posts = SIM.posts;
    wr w = {0};
    assert_int_equal(nc_update(cl.cache, "slinky-0", &u, on_write, &w), 1);
    EV.wait_for = "slinky-0";
    EV.seen = 0;
    run_until(&TL, &EV.seen);
    assert_int_equal(SIM.posts, posts);
    assert_int_equal(nc_update(cl.cache, "slinky-0", &u, on_write, &w), 0);
    run_until(&TL, &w.done);
    close_cluster(&cl);
    sim_stop(&TL);
}

/* Set one node's reason_changed_at in the simulated table. */
static void sim_set_reason_time(const char *name, int64_t t)
{
    cJSON *doc = json_parse(SIM.nodes, strlen(SIM.nodes), NULL);
    cJSON *n;
    cJSON_ArrayForEach(n, json_child(doc, "nodes"))
    {
        if (strcmp(json_get_str_or(n, "name", ""), name) == 0)
            json_set_int(n, "reason_changed_at", t);
    }
    free(SIM.nodes);
    SIM.nodes = json_dump(doc);
    cJSON_Delete(doc);
}

/* A drain is proved only by a read whose reason time is newer than any
 * seen before the drain was sent: an answer replayed from before (here: the
 * same table again) proves nothing. */
static void test_drain_proof(void **state)
{
    sim_start(&TL.loop, 42, "v42_nodes_states_200.json");
    cluster cl = open_cluster(42, 30, 50);
    wait_ready(&cl);
    const sm_node *n;
    assert_int_equal(nc_lookup(cl.cache, "slinky-1", &n), NC_PRESENT);
    assert_true(sm_node_drained(n));
    assert_false(nc_drain_proved(cl.cache, "slinky-1")); /* drained, but not by a drain of ours */
    assert_int_equal(nc_drain_state(cl.cache, "slinky-1", NULL), 0);
    sm_node_update u = {
        .set = SM_UPD_STATE | SM_UPD_REASON, .state = SM_REQ_DRAIN, .reason = "slurm-operator: y"};
    wr w = {0};
    assert_int_equal(nc_update(cl.cache, "slinky-1", &u, on_write, &w), 0);
    assert_int_equal(nc_drain_state(cl.cache, "slinky-1", NULL), 1);
    run_until(&TL, &w.done);
    assert_int_equal(w.status, 0);
    for (int i = 0; i < 400 && nc_settling(cl.cache, "slinky-1"); i++)
        run_for(&TL, 5);
    run_for(&TL, 100);
    uint64_t ago = 99999;
    assert_int_equal(nc_drain_state(cl.cache, "slinky-1", &ago), 2);
    assert_true(ago < 5000);
    assert_false(nc_drain_proved(cl.cache, "slinky-1")); /* the reads still show the old reason time */
    sim_set_reason_time("slinky-1", n->reason_changed_at + 5);
    for (int i = 0; i < 400 && !nc_drain_proved(cl.cache, "slinky-1"); i++)
        run_for(&TL, 5);
    assert_true(nc_drain_proved(cl.cache, "slinky-1"));
    /* An undrain of ours ends the story. */
    sm_node_update r = {.set = SM_UPD_STATE, .state = SM_REQ_UNDRAIN};
    wr w2 = {0};
    assert_int_equal(nc_update(cl.cache, "slinky-1", &r, on_write, &w2), 0);
    assert_int_equal(nc_drain_state(cl.cache, "slinky-1", NULL), 0);
    assert_false(nc_drain_proved(cl.cache, "slinky-1"));
    run_until(&TL, &w2.done);
    close_cluster(&cl);
    sim_stop(&TL);
}

static void test_jobs_and_ping(void **state)
{
    sim_start(&TL.loop, 38, "v38_nodes_idle_200.json");
    SIM.jobs = sim_fixture("v38_jobs_running_200.json");
    cluster cl = open_cluster(38, 50, 1000);
    wait_ready(&cl);
    assert_false(nc_jobs_ready(cl.cache));
    assert_int_equal(nc_active_controller(cl.cache), OP_EUNKNOWN);
    EV.wait_for = "n3";
    nc_want_jobs(cl.cache);
    nc_want_ping(cl.cache);
    run_until(&TL, &EV.seen);
    assert_true(nc_jobs_ready(cl.cache));
    assert_true(nc_deadline(cl.cache, "n3") > 0);
    assert_true(nc_deadline(cl.cache, "n1") > 0);
    assert_int_equal(nc_deadline(cl.cache, "n2"), 0);
    for (int i = 0; i < 100 && nc_active_controller(cl.cache) == OP_EUNKNOWN; i++)
        run_for(&TL, 10);
    assert_int_equal(nc_active_controller(cl.cache), 0);
    assert_int_equal(EV.pings, 1);
    /* The jobs end: their nodes fire, deadlines go. */
    free(SIM.jobs);
    SIM.jobs = xstrdup("{\"jobs\":[],\"errors\":[]}");
    EV.seen = 0;
    run_until(&TL, &EV.seen);
    assert_int_equal(nc_deadline(cl.cache, "n3"), 0);
    close_cluster(&cl);
    sim_stop(&TL);
}

/* HA: the first controller that responds is active; a change fires. */
static void test_ping_failover(void **state)
{
    sim_start(&TL.loop, 44, "v44_nodes_states_200.json");
    SIM.ping = xstrdup(
        "{\"pings\":[{\"hostname\":\"slurm-controller-0\",\"pinged\":\"DOWN\",\"responding\":false,"
        "\"primary\":true,\"mode\":\"primary\"},{\"hostname\":\"slurm-controller-1\",\"pinged\":\"UP\","
        "\"responding\":true,\"primary\":false,\"mode\":\"backup1\"}],\"errors\":[],\"warnings\":[]}");
    cluster cl = open_cluster(44, 50, 1000);
    nc_want_ping(cl.cache);
    for (int i = 0; i < 200 && nc_active_controller(cl.cache) == OP_EUNKNOWN; i++)
        run_for(&TL, 10);
    assert_int_equal(nc_active_controller(cl.cache), 1);
    assert_int_equal(EV.pings, 1);
    /* The primary comes back. */
    free(SIM.ping);
    SIM.ping = NULL; /* the fixture: controller 0 responds */
    for (int i = 0; i < 200 && nc_active_controller(cl.cache) != 0; i++)
        run_for(&TL, 10);
    assert_int_equal(nc_active_controller(cl.cache), 0);
    assert_int_equal(EV.pings, 2);
    /* Nobody responds. */
    SIM.ping = xstrdup("{\"pings\":[{\"hostname\":\"a\",\"responding\":false}],\"errors\":[]}");
    for (int i = 0; i < 200 && nc_active_controller(cl.cache) != OP_EUNAVAILABLE; i++)
        run_for(&TL, 10);
    assert_int_equal(nc_active_controller(cl.cache), OP_EUNAVAILABLE);
    close_cluster(&cl);
    sim_stop(&TL);
}

/* ---- a big table, applied in slices ---- */

/* A v0.0.38 node table of nodes big0 .. big<listed-1>, all in state st. */
static char *big_table(int listed, const char *st)
{
    size_t cap = (size_t)listed * 96 + 64, len = 0;
    char *s = xmalloc(cap);
    len += (size_t)snprintf(s + len, cap - len, "{\"errors\":[],\"nodes\":[");
    for (int i = 0; i < listed; i++)
        len += (size_t)snprintf(s + len, cap - len,
                                "%s{\"name\":\"big%d\",\"state\":\"%s\",\"state_flags\":[],\"reason\":\"\"}",
                                i ? "," : "", i, st);
    snprintf(s + len, cap - len, "]}");
    return s;
}

/* Which loop iteration the events of a table came in. */
typedef struct iters {
    uv_prepare_t h;
    int now;      /* iterations so far */
    int first;    /* of the first event counted, 0: none yet */
    int last;     /* of the latest */
    int in_now;   /* events in the current iteration */
    int most;     /* the most events in one iteration */
    int old_seen; /* at the first event: big1299 still showed the previous read */
} iters;

static iters IT;
static nc_cache *IT_CACHE;

static void count_iter(uv_prepare_t *h)
{
    (void)h;
    IT.now++;
    IT.in_now = 0;
}

static void on_big_node(const char *name, void *data)
{
    on_node(name, data);
    if (name == NULL)
        return;
    if (IT.first == 0) {
        IT.first = IT.now;
        const sm_node *n;
        IT.old_seen = nc_lookup(IT_CACHE, "big1199", &n) == NC_PRESENT && n->base == SM_NODE_IDLE;
    }
    IT.last = IT.now;
    if (++IT.in_now > IT.most)
        IT.most = IT.in_now;
}

/* A table of 1,300 nodes is applied a slice at a time: the loop runs
 * between slices, each node shows its previous read until its slice is in,
 * nodes the table no longer lists go only once the last slice is in, and a
 * close with a table half applied loses nothing (ASan checks the rest). */
/* ---- the verdict's reads: jobs, contradictions ---- */

/* A v0.0.42 node: state words (JSON list body), reason time, allocated CPUs. */
static void node42(buf_t *b, const char *name, const char *words, int64_t reason_at, int alloc)
{
    int rc = buf_printf(b,
               "%s{\"name\":\"%s\",\"state\":[%s],\"reason\":\"%s\",\"reason_changed_at\":{\"set\":true,"
               "\"infinite\":false,\"number\":%lld},\"alloc_cpus\":%d,\"alloc_memory\":0}",
               b->len && buf_cstr(b)[b->len - 1] != '[' ? "," : "", name, words, reason_at ? "r" : "",
               (long long)reason_at, alloc);
    assert_int_equal(rc, 0);
}

static char *table42(buf_t *b, int64_t last_update)
{
    int rc =
        buf_printf(b, "],\"last_update\":{\"set\":true,\"infinite\":false,\"number\":%lld},\"errors\":[]}",
                   (long long)last_update);
    assert_int_equal(rc, 0);
    char *s = xstrdup(buf_cstr(b));
    buf_free(b);
    return s;
}

static char *jobs42(const char *job_state, const char *nodes, int64_t last_update)
{
    if (!job_state)
        return xasprintf("{\"jobs\":[],\"last_update\":{\"set\":true,\"infinite\":false,\"number\":%lld},"
                         "\"errors\":[]}",
                         (long long)last_update);
    return xasprintf(
        "{\"jobs\":[{\"job_id\":9,\"job_state\":[%s],\"nodes\":\"%s\"}],\"last_update\":{\"set\":"
        "true,\"infinite\":false,\"number\":%lld},\"errors\":[]}",
        job_state, nodes, (long long)last_update);
}

static char *one_table(const char *name, const char *words, int64_t reason_at, int64_t lu)
{
    buf_t b;
    buf_init(&b, BUF_UNLIMITED);
    assert_int_equal(buf_puts(&b, "{\"nodes\":["), 0);
    node42(&b, name, words, reason_at, 0);
    return table42(&b, lu);
}

static void settle(unsigned ms)
{
    run_for(&TL, ms);
}

/* A suspended job leaves its node IDLE+DRAIN; only the job list shows it
 * (issue 39, finding 1). Free once a job read after the drain lists no job
 * that holds it; a list that simply lost the job holds until confirmed. */
static void test_jobs_proof(void **state)
{
    int64_t t = 1700000000;
    sim_start(&TL.loop, 42, NULL);
    sim_set(&SIM.nodes, one_table("v1", "\"IDLE\",\"DRAIN\"", t - 5, t));
    SIM.jobs = jobs42("\"SUSPENDED\"", "v1", t);
    cluster cl = open_cluster(42, 20, 50);
    nc_want_jobs(cl.cache);
    wait_ready(&cl);
    for (int i = 0; i < 200 && !nc_jobs_ready(cl.cache); i++)
        settle(5);
    const sm_node *n;
    assert_int_equal(nc_lookup(cl.cache, "v1", &n), NC_PRESENT);
    assert_true(sm_node_drained(n)); /* the node's own state shows nothing */
    assert_int_equal(nc_job_holds(cl.cache, "v1"), 1);
    assert_false(nc_jobs_free(cl.cache, "v1", 10000));
    /* The job list loses the job without its end: held until a read a
     * second later agrees. */
    sim_set(&SIM.jobs, jobs42(NULL, NULL, t + 1));
    settle(300);
    assert_int_equal(nc_job_holds(cl.cache, "v1"), 1);
    assert_false(nc_jobs_free(cl.cache, "v1", 10000));
    nc_stats st;
    nc_get_stats(cl.cache, &st);
    assert_true(st.contradictions >= 1);
    /* It ends (CANCELLED, still listed): free, and the owner is told. */
    sim_set(&SIM.jobs, jobs42("\"CANCELLED\"", "v1", t + 2));
    EV.wait_for = "v1";
    EV.seen = 0;
    run_until(&TL, &EV.seen);
    for (int i = 0; i < 200 && !nc_jobs_free(cl.cache, "v1", 10000); i++)
        settle(5);
    assert_true(nc_jobs_free(cl.cache, "v1", 10000));
    /* A list older than the one applied is not applied. */
    sim_set(&SIM.jobs, jobs42("\"RUNNING\"", "v1", t));
    settle(200);
    assert_int_equal(nc_job_holds(cl.cache, "v1"), -1); /* the read failed: unknown */
    assert_true(nc_jobs_failed(cl.cache));
    assert_false(nc_jobs_free(cl.cache, "v1", 10000));
    /* Nodes that do not read as a hostlist: nothing is free. */
    sim_set(&SIM.jobs, jobs42("\"COMPLETED\"", "v[1-", t + 3));
    settle(200);
    assert_false(nc_jobs_free(cl.cache, "v1", 10000));
    assert_true(nc_jobs_failed(cl.cache));
    close_cluster(&cl);
    sim_stop(&TL);
}

/* The partitions job records are in (nc_job_in_partition: a NodeSet's
 * partition leaves slurm.conf only once none is): every state counts, ended
 * ones too; a list that loses them keeps them until a read a second later
 * agrees (an empty answer is not slurmctld's purge). */
static void test_job_partitions(void **state)
{
    (void)state;
    int64_t t = 1700000000;
    sim_start(&TL.loop, 42, NULL);
    sim_set(&SIM.nodes, one_table("v1", "\"IDLE\"", 0, t));
    SIM.jobs = xasprintf("{\"jobs\":[{\"job_id\":9,\"job_state\":[\"COMPLETED\"],\"nodes\":\"v1\","
                         "\"partition\":\"gpu,debug\"},{\"job_id\":10,\"job_state\":[\"PENDING\"],"
                         "\"nodes\":\"\",\"partition\":\"cpu\"}],\"last_update\":{\"set\":true,"
                         "\"infinite\":false,\"number\":%lld},\"errors\":[]}",
                         (long long)t);
    cluster cl = open_cluster(42, 20, 50);
    assert_int_equal(nc_job_in_partition(cl.cache, "gpu"), -1); /* not read yet */
    nc_want_jobs(cl.cache);
    wait_ready(&cl);
    for (int i = 0; i < 200 && !nc_jobs_ready(cl.cache); i++)
        settle(5);
    assert_int_equal(nc_job_in_partition(cl.cache, "gpu"), 1);
    assert_int_equal(nc_job_in_partition(cl.cache, "debug"), 1);
    assert_int_equal(nc_job_in_partition(cl.cache, "cpu"), 1); /* pending, no nodes */
    assert_int_equal(nc_job_in_partition(cl.cache, "gp"), 0);
    assert_int_equal(nc_job_holds(cl.cache, "v1"), 0); /* ended: holds nothing */
    /* The records go (purged, or an answer lost them): kept for now ... */
    sim_set(&SIM.jobs, jobs42(NULL, NULL, t + 1));
    settle(300);
    assert_int_equal(nc_job_in_partition(cl.cache, "gpu"), 1);
    /* ... and gone once a read a second later agrees. */
    for (int i = 0; i < 400 && nc_job_in_partition(cl.cache, "gpu") != 0; i++)
        settle(10);
    assert_int_equal(nc_job_in_partition(cl.cache, "gpu"), 0);
    assert_int_equal(nc_job_in_partition(cl.cache, "cpu"), 0);
    /* A failed read: unknown. */
    sim_set(&SIM.jobs, jobs42("\"RUNNING\"", "v1", t));
    settle(200);
    assert_int_equal(nc_job_in_partition(cl.cache, "gpu"), -1);
    close_cluster(&cl);
    sim_stop(&TL);
}

/* A node listed twice in one answer (finding 4): the table is held, the
 * cache not ready, the reason said; a clean answer ends it. */
static void test_duplicate_held(void **state)
{
    int64_t t = 1700000000;
    sim_start(&TL.loop, 42, NULL);
    sim_set(&SIM.nodes, one_table("v1", "\"ALLOCATED\"", 0, t));
    cluster cl = open_cluster(42, 20, 50);
    wait_ready(&cl);
    buf_t b;
    buf_init(&b, BUF_UNLIMITED);
    assert_int_equal(buf_puts(&b, "{\"nodes\":["), 0);
    node42(&b, "v1", "\"ALLOCATED\",\"DRAIN\"", t, 2);
    node42(&b, "v1", "\"IDLE\",\"DRAIN\"", t, 0);
    sim_set(&SIM.nodes, table42(&b, t + 1));
    for (int i = 0; i < 200 && nc_ready(cl.cache); i++)
        settle(5);
    assert_false(nc_ready(cl.cache));
    assert_true(nc_suspect(cl.cache));
    assert_non_null(nc_suspect_why(cl.cache));
    assert_non_null(strstr(nc_suspect_why(cl.cache), "v1 twice"));
    assert_int_equal(nc_lookup(cl.cache, "v1", NULL), NC_UNKNOWN);
    /* Held for good while it repeats (never applied once "confirmed"). */
    settle(1500);
    assert_false(nc_ready(cl.cache));
    nc_stats st;
    nc_get_stats(cl.cache, &st);
    assert_true(st.contradictions >= 2);
    sim_set(&SIM.nodes, one_table("v1", "\"ALLOCATED\",\"DRAIN\"", t, t + 2));
    wait_ready(&cl);
    assert_null(nc_suspect_why(cl.cache));
    const sm_node *n;
    assert_int_equal(nc_lookup(cl.cache, "v1", &n), NC_PRESENT);
    assert_false(sm_node_drained(n));
    close_cluster(&cl);
    sim_stop(&TL);
}

/* A reason time from the future (finding 12): held until a read by name a
 * second later settles it, and never taken into the drain's proof, which
 * it would have blocked for as long as it stayed ahead. */
static void test_future_reason_time(void **state)
{
    int64_t t = 1700000000;
    sim_start(&TL.loop, 42, NULL);
    sim_set(&SIM.nodes, one_table("v1", "\"IDLE\"", 0, t));
    cluster cl = open_cluster(42, 20, 50);
    wait_ready(&cl);
    sim_set(&SIM.nodes, one_table("v1", "\"IDLE\"", t + 3600, t + 1));
    for (int i = 0; i < 200 && !nc_contradicted(cl.cache, "v1"); i++)
        settle(5);
    assert_true(nc_contradicted(cl.cache, "v1"));
    /* The truth again: the hold ends. */
    sim_set(&SIM.nodes, one_table("v1", "\"IDLE\"", 0, t + 2));
    for (int i = 0; i < 400 && nc_contradicted(cl.cache, "v1"); i++)
        settle(5);
    assert_false(nc_contradicted(cl.cache, "v1"));
    /* Our drain: Slurm stamps its own time, which proves it (the future
     * time was never the floor). */
    sm_node_update u = {
        .set = SM_UPD_STATE | SM_UPD_REASON, .state = SM_REQ_DRAIN, .reason = "slurm-operator: x"};
    wr w = {0};
    assert_int_equal(nc_update(cl.cache, "v1", &u, on_write, &w), 0);
    run_until(&TL, &w.done);
    sim_set(&SIM.nodes, one_table("v1", "\"IDLE\",\"DRAIN\"", t + 3, t + 3));
    free(SIM.single);
    SIM.single = NULL;
    for (int i = 0; i < 400 && !nc_drain_proved(cl.cache, "v1"); i++)
        settle(5);
    assert_true(nc_drain_proved(cl.cache, "v1"));
    /* A future time that stays is Slurm's own (a clock that jumped back):
     * the hold is bounded by one confirming read, and it proves nothing. */
    sim_set(&SIM.nodes, one_table("v1", "\"IDLE\",\"DRAIN\"", t + 7200, t + 4));
    for (int i = 0; i < 200 && !nc_contradicted(cl.cache, "v1"); i++)
        settle(5);
    assert_true(nc_contradicted(cl.cache, "v1"));
    assert_false(nc_drain_proved(cl.cache, "v1"));
    for (int i = 0; i < 600 && nc_contradicted(cl.cache, "v1"); i++)
        settle(5);
    assert_false(nc_contradicted(cl.cache, "v1"));
    assert_false(nc_drain_proved(cl.cache, "v1"));
    close_cluster(&cl);
    sim_stop(&TL);
}

/* The property: random truths (node state x drain x the job on it) and
 * answers (honest, empty, partial, a node listed twice, an older answer
 * replayed, a reason time from the future, errors; job lists honest,
 * emptied, replayed, erring, unreadable), each lie lasting one step; reads
 * by name honest. Whenever the drain rule (nsv_judge, fed the cache's facts
 * as nss_condemn feeds them, the drain being a person's) licenses a delete,
 * Slurm's truth of this step or the one before proves the node free:
 * drained, no job base state, nothing completing, no job that holds it (or
 * absent and no job holding it). Slurm's own rule is kept: no job starts on
 * a drained node. */
static int verdict(nc_cache *c, const char *name)
{
    const sm_node *n = NULL;
    nsv_facts f = {.named = 1, .client = NSV_CLIENT_READY, .name_known = 1};
    switch (nc_lookup(c, name, &n)) {
    case NC_UNKNOWN:
        f.found = NSV_UNKNOWN;
        break;
    case NC_ABSENT:
        f.found = NSV_ABSENT;
        f.lost = nc_vanished(c, name, &f.lost_ago_ms);
        break;
    case NC_PRESENT:
        f.found = NSV_PRESENT;
        f.settling = nc_settling(c, name);
        f.contradicted = nc_contradicted(c, name);
        f.drain = sm_node_drain(n);
        f.drained = sm_node_drained(n);
        f.unknown_ago_ms = UINT64_MAX;
        f.fresh = nc_fresh(c, name, NSV_PROOF_FRESH_MS);
        break;
    }
    nsv_verdict v = nsv_judge(&f);
    while (v.step == NSV_ASK_GONE || v.step == NSV_ASK_JOBS) {
        if (v.step == NSV_ASK_GONE) {
            f.gone = nc_confirm_gone(c, name, NSV_PROOF_FRESH_MS);
            f.gone_asked = 1;
        } else {
            f.jobs_free = nc_jobs_free(c, name, NSV_PROOF_FRESH_MS);
            f.job_holds = nc_job_holds(c, name);
            f.jobs_failed = nc_jobs_failed(c);
            f.jobs_asked = 1;
        }
        v = nsv_judge(&f);
    }
    return v.step == NSV_DELETE;
}

typedef struct truth {
    int exists, base, drain, completing, job; /* job: index into JOBS */
} truth;

static const char *const BASES[] = {"\"IDLE\"", "\"ALLOCATED\"", "\"MIXED\"", "\"DOWN\"",
                                    "\"UNKNOWN\"", "\"ERROR\"", "\"FUTURE\""};
static const int BASE_JOBLESS[] = {1, 0, 0, 1, 0, 0, 1};
/* NULL: no job. */
static const char *const JOBS[] = {NULL, "\"RUNNING\"", "\"SUSPENDED\"", "\"COMPLETED\",\"COMPLETING\"",
                                   "\"PENDING\"", "\"COMPLETED\"", "\"CANCELLED\"", "\"SHINY\"",
                                   "\"RUNNING\",\"STOPPED\""};
static const int JOB_HOLDS[] = {0, 1, 1, 1, 1, 0, 0, 1, 1};

static int truth_free(const truth *t)
{
    if (JOB_HOLDS[t->job])
        return 0;
    if (!t->exists)
        return 1;
    return t->drain && BASE_JOBLESS[t->base] && !t->completing;
}

static unsigned prng(unsigned *s)
{
    *s = *s * 1103515245u + 12345u;
    return (*s >> 16) & 0x7fff;
}

#define LIFE 30

static void test_verdict_property(void **state)
{
    unsigned seed = 12345;
    const char *env = getenv("VERDICT_SEED");
    if (env)
        seed = (unsigned)strtoul(env, NULL, 10);
    int steps = 5 * LIFE, licensed = 0, violations = 0;
    int64_t lu = 1700000000, reason_at = lu - 100;
    sim_start(&TL.loop, 42, NULL);
    truth t = {.exists = 1, .base = 1, .drain = 0, .completing = 0, .job = 1};
    char name[16] = "v1";
    char *honest_nodes = NULL, *old_nodes = NULL, *old_jobs = NULL;
    cluster cl = {0};
    for (int s = 0; s < steps; s++) {
        /* The truth moves as Slurm's can: a condemned node, once drained,
         * stays drained (nobody undrains it); no job starts on a drained
         * node or one Slurm no longer has; a node Slurm deleted does not
         * come back under that name; once free it stays free. Each pod's
         * life (LIFE steps) has its own node name. */
        if (s % LIFE == 0) {
            snprintf(name, sizeof(name), "v%d", s / LIFE + 1);
            t = (truth){.exists = 1, .base = 1, .drain = 0, .completing = 0, .job = 1};
        }

        truth nt = t;
        if (prng(&seed) % 3 == 0) nt.base = (int)(prng(&seed) % ARRAY_SIZE(BASES));
        if (prng(&seed) % 4 == 0) nt.drain = 1;
        if (prng(&seed) % 4 == 0) nt.completing = !nt.completing;
        if (prng(&seed) % 15 == 0) nt.exists = 0;
        if (prng(&seed) % 3 == 0) {
            int j = (int)(prng(&seed) % ARRAY_SIZE(JOBS));
            if (!((t.drain || !t.exists) && JOB_HOLDS[j] && !JOB_HOLDS[t.job]))
                nt.job = j;
        }
        if ((t.drain || !t.exists) && !BASE_JOBLESS[nt.base] && BASE_JOBLESS[t.base])
            nt.base = t.base; /* no job starts: no busy base state comes back */
        if (truth_free(&t) && !truth_free(&nt))
            nt = t;
        if (!t.exists)
            nt.exists = 0;
        if (nt.drain && !t.drain)
            reason_at++;
        t = nt;
        lu++;
        buf_t b;
        buf_init(&b, BUF_UNLIMITED);
        assert_int_equal(buf_puts(&b, "{\"nodes\":["), 0);
        char words[128];
        snprintf(words, sizeof(words), "%s%s%s", BASES[t.base], t.drain ? ",\"DRAIN\"" : "",
                 t.completing ? ",\"COMPLETING\"" : "");
        node42(&b, "other", "\"IDLE\"", 0, 0);
        if (t.exists)
            node42(&b, name, words, t.drain ? reason_at : 0, BASE_JOBLESS[t.base] ? 0 : 2);
        char *honest = table42(&b, lu);
        char *hjobs = jobs42(JOBS[t.job], name, lu);
        /* This step's answer (honest for the first steps: a lie can only
         * be caught against what an honest read showed). */
        int mode = s < 3 ? 0 : (int)(prng(&seed) % 12), jmode = s < 3 ? 0 : (int)(prng(&seed) % 8);
        char *nodes = NULL, *jobs = NULL;
        switch (mode) {
        case 1: /* empty */
            nodes =
                xasprintf("{\"nodes\":[],\"last_update\":{\"set\":true,\"infinite\":false,\"number\":%lld},"
                          "\"errors\":[]}",
                          (long long)lu);
            break;
        case 2: /* partial: without v1 */
            buf_init(&b, BUF_UNLIMITED);
            assert_int_equal(buf_puts(&b, "{\"nodes\":["), 0);
            node42(&b, "other", "\"IDLE\"", 0, 0);
            nodes = table42(&b, lu);
            break;
        case 3: /* v1 twice: the truth, then idle and drained */
            buf_init(&b, BUF_UNLIMITED);
            assert_int_equal(buf_puts(&b, "{\"nodes\":["), 0);
            node42(&b, "other", "\"IDLE\"", 0, 0);
            node42(&b, name, words, reason_at, 2);
            node42(&b, name, "\"IDLE\",\"DRAIN\"", reason_at, 0);
            nodes = table42(&b, lu);
            break;
        case 4: /* an older answer replayed */
            nodes = old_nodes ? xstrdup(old_nodes) : NULL;
            break;
        case 5: /* idle, drained, and a reason time from the future */
            buf_init(&b, BUF_UNLIMITED);
            assert_int_equal(buf_puts(&b, "{\"nodes\":["), 0);
            node42(&b, "other", "\"IDLE\"", 0, 0);
            node42(&b, name, "\"IDLE\",\"DRAIN\"", lu + 3600, 0);
            nodes = table42(&b, lu);
            break;
        case 6: /* errors */
            nodes = xstrdup("{\"nodes\":[],\"errors\":[{\"error\":\"x\",\"error_number\":1007}]}");
            break;
        default:
            break;
        }
        switch (jmode) {
        case 1: /* emptied */
            jobs = jobs42(NULL, NULL, lu);
            break;
        case 2: /* replayed */
            jobs = old_jobs ? xstrdup(old_jobs) : NULL;
            break;
        case 3: /* erring */
            jobs = xstrdup("{\"jobs\":[],\"errors\":[{\"error\":\"x\",\"error_number\":1007}]}");
            break;
        case 4: /* unreadable node list */
            jobs = jobs42("\"COMPLETED\"", "v[1-", lu);
            break;
        default:
            break;
        }
        if (s == 0) {
            sim_set(&SIM.nodes, xstrdup(honest));
            SIM.jobs = xstrdup(hjobs);
            cl = open_cluster(42, 20, 50);
            nc_want_jobs(cl.cache);
            wait_ready(&cl);
        }
        sim_set(&SIM.nodes, nodes ? nodes : xstrdup(honest));
        sim_set(&SIM.jobs, jobs ? jobs : xstrdup(hjobs));
        sim_set(&SIM.single, xstrdup(honest));
        /* At least 60 ms, and until the cache has read this step's answers
         * twice (fewer than 60 ms gives on an idle machine): on a
         * loaded one a fixed time saw no read in most steps and licensed
         * nothing, and the property was vacuous. */
        int served = SIM.served;
        for (int k = 0; k < 200 && (k < 12 || SIM.served < served + 2); k++) {
            settle(5);
            if (verdict(cl.cache, name)) {
                licensed++;
                if (!truth_free(&t)) {
                    violations++;
                    print_error("step %d (%s) seed %u: delete licensed; truth exists %d %s drain %d "
                                "completing %d job %s "
                                "(node answer mode %d, job mode %d; cache: job holds %d, lookup %d)\n",
                                s, name, seed, t.exists, BASES[t.base], t.drain, t.completing,
                                JOBS[t.job] ? JOBS[t.job] : "none", mode, jmode, nc_job_holds(cl.cache, name),
                                (int)nc_lookup(cl.cache, name, NULL));
                }
                break;
            }
        }
        if (prng(&seed) % 3 == 0) {
            free(old_nodes);
            old_nodes = xstrdup(honest);
            free(old_jobs);
            old_jobs = xstrdup(hjobs);
        }
        free(honest_nodes);
        honest_nodes = honest;
        free(hjobs);
    }
    print_message("verdict property: %d steps, %d deletes licensed, %d violations\n", steps, licensed,
                  violations);
    assert_int_equal(violations, 0);
    assert_true(licensed > 0); /* the property is not vacuous */
    free(honest_nodes);
    free(old_nodes);
    free(old_jobs);
    close_cluster(&cl);
    sim_stop(&TL);
}

static void test_big_table_slices(void **state)
{
    sim_start(&TL.loop, 38, "v38_nodes_idle_200.json");
    free(SIM.nodes);
    SIM.nodes = big_table(1300, "idle");
    SIM.unchanged = 1;
    cluster cl;
    char url[64];
    sim_url(url, sizeof(url));
    sr_opts o = {.url = url, .key = KEY, .key_len = sizeof(KEY) - 1, .timeout_ms = 5000, .version = 38};
    assert_int_equal(sr_client_new(&TL.loop, &o, &cl.rest), 0);
    nc_opts no = {
        .name = "test/slurm", .rest = cl.rest, .poll_min_ms = 30, .poll_max_ms = 30, .on_node = on_big_node};
    memset(&EV, 0, sizeof(EV));
    memset(&IT, 0, sizeof(IT));
    uv_prepare_init(&TL.loop, &IT.h);
    uv_prepare_start(&IT.h, count_iter);
    assert_int_equal(nc_new(&TL.loop, &no, &cl.cache), 0);
    IT_CACHE = cl.cache;
    wait_ready(&cl);
    nc_stats st;
    nc_get_stats(cl.cache, &st);
    assert_int_equal(st.nodes, 1300);
    assert_int_equal(EV.count, 0); /* the first table: one "everything" event instead */
    assert_int_equal(EV.all, 1);
    const sm_node *n;
    assert_int_equal(nc_lookup(cl.cache, "big1299", &n), NC_PRESENT);

    /* Every node changes, and the last 100 leave (under the 10 % that would
     * hold the table). */
    free(SIM.nodes);
    SIM.nodes = big_table(1200, "down");
    EV.want = 1300;
    SIM.unchanged = 0;
    run_until(&TL, &EV.hit);
    SIM.unchanged = 1;
    assert_int_equal(EV.count, 1300);
    assert_true(IT.last - IT.first >= 2); /* three slices: 512 + 512 + 176 */
    assert_true(IT.most <= 512);
    assert_true(IT.old_seen);
    assert_int_equal(nc_lookup(cl.cache, "big0", &n), NC_PRESENT);
    assert_int_equal(n->base, SM_NODE_DOWN);
    assert_int_equal(nc_lookup(cl.cache, "big1199", &n), NC_PRESENT);
    assert_int_equal(n->base, SM_NODE_DOWN);
    assert_int_equal(nc_lookup(cl.cache, "big1200", NULL), NC_ABSENT);
    assert_int_equal(nc_lookup(cl.cache, "big1299", NULL), NC_ABSENT);
    assert_true(nc_ready(cl.cache));
    run_for(&TL, 100); /* 304s: nothing more */
    assert_int_equal(EV.count, 1300);

    /* A close while a table is half applied. */
    free(SIM.nodes);
    SIM.nodes = big_table(1200, "idle");
    EV.want = 1;
    EV.hit = 0;
    EV.count = 0;
    SIM.unchanged = 0;
    run_until(&TL, &EV.hit);
    assert_true(EV.count <= 512);
    close_cluster(&cl);
    assert_true(EV.count < 1200);
    uv_close((uv_handle_t *)&IT.h, NULL);
    sim_stop(&TL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_poll_304_and_changes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_2205_update_time_quirk, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fail_closed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_job_partitions, setup, teardown),
        cmocka_unit_test_setup_teardown(test_write_settles, setup, teardown),
        cmocka_unit_test_setup_teardown(test_comment_applied, setup, teardown),
        cmocka_unit_test_setup_teardown(test_track, setup, teardown),
        cmocka_unit_test_setup_teardown(test_untrack, setup, teardown),
        cmocka_unit_test_setup_teardown(test_track_busy_among_many, setup, teardown),
        cmocka_unit_test_setup_teardown(test_track_busy_until_jobless, setup, teardown),
        cmocka_unit_test_setup_teardown(test_absence_not_proof, setup, teardown),
        cmocka_unit_test_setup_teardown(test_proofs_in_rounds, setup, teardown),
        cmocka_unit_test_setup_teardown(test_vanished, setup, teardown),
        cmocka_unit_test_setup_teardown(test_repeat_backoff, setup, teardown),
        cmocka_unit_test_setup_teardown(test_drain_proof, setup, teardown),
        cmocka_unit_test_setup_teardown(test_jobs_and_ping, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ping_failover, setup, teardown),
        cmocka_unit_test_setup_teardown(test_big_table_slices, setup, teardown),
        cmocka_unit_test_setup_teardown(test_jobs_proof, setup, teardown),
        cmocka_unit_test_setup_teardown(test_duplicate_held, setup, teardown),
        cmocka_unit_test_setup_teardown(test_future_reason_time, setup, teardown),
        cmocka_unit_test_setup_teardown(test_verdict_property, setup_long, teardown),
    };
    if (getenv("TEST_FILTER"))
        cmocka_set_test_filter(getenv("TEST_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
