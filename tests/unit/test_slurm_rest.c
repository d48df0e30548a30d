/* Unit tests for slurmio/rest (the slurmrestd client) and slurmio/nodebatch
 * (one hostlist request per distinct update per loop iteration), against a
 * scripted slurmrestd on loopback serving the recorded fixtures:
 * version negotiation (22.05's v0.0.38, v0.0.42, v0.0.44), the auth headers
 * and the token they carry, 304 on update_time, every error shape decoded as
 * an error (HTTP 200 with "errors" included), deadlines, token re-minting on
 * time and on a key change, large bodies decoded off the loop, closing with
 * requests in flight, batching of 200 drains into one request, and a refused
 * hostlist retried node by node. */
#include <setjmp.h>
#include <signal.h>
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
#include "core/json.h"
#include "slurmio/hostlist.h"
#include "slurmio/jwt.h"
#include "slurmio/nodebatch.h"
#include "slurmio/rest.h"

static test_loop TL;
static const char KEY[] = "0123456789abcdef0123456789abcdef";
static int64_t fake_now = 1795300000;

static int64_t clock_fn(void *data)
{
    (void)data;
    return fake_now;
}

static sr_client *client_capped(int version, unsigned timeout_ms, size_t max_body)
{
    char url[64];
    sim_url(url, sizeof(url));
    sr_opts o = {.url = url,
                 .key = KEY,
                 .key_len = sizeof(KEY) - 1,
                 .timeout_ms = timeout_ms,
                 .max_body = max_body,
                 .version = version,
                 .now = clock_fn};
    sr_client *c = NULL;
    assert_int_equal(sr_client_new(&TL.loop, &o, &c), 0);
    return c;
}

static sr_client *client(int version, unsigned timeout_ms)
{
    return client_capped(version, timeout_ms, 0);
}

static void closed(void *data)
{
    *(int *)data = 1;
}

static void close_client(sr_client *c)
{
    int done = 0;
    sr_client_close(c, closed, &done);
    run_until(&TL, &done);
}

/* One completion, kept for the test to look at. */
typedef struct got {
    int done;
    int status;
    int not_modified;
    size_t n_nodes, n_jobs, n_pings;
    int code;
    int slurm_errno;
    char first[64];
    char message[512];
    int64_t server_time;
    int server_time_src;
} got;

static void on_resp(int status, sm_response *r, void *data)
{
    got *g = data;
    g->done = 1;
    g->status = status;
    g->not_modified = r->not_modified;
    g->n_nodes = r->n_nodes;
    g->n_jobs = r->n_jobs;
    g->n_pings = r->n_pings;
    g->code = r->err.code;
    g->slurm_errno = r->err.slurm_errno;
    snprintf(g->first, sizeof(g->first), "%s", r->n_nodes ? r->nodes[0].name : "");
    snprintf(g->message, sizeof(g->message), "%s", r->err.message ? r->err.message : "");
    g->server_time = r->server_time;
    g->server_time_src = r->server_time_src;
}

static int setup(void **state)
{
    tl_start(&TL, 30000);
    return 0;
}

static int teardown(void **state)
{
    tl_finish(&TL);
    return 0;
}

/* ---- negotiation, headers, token ---- */

static void check_token(const sim_rec *r, const char *key, size_t key_len)
{
    jwt_claims cl;
    assert_string_equal(r->user, "slurm");
    assert_int_equal(jwt_verify(r->token, key, key_len, fake_now, &cl), 0);
    assert_string_equal(cl.sun, "slurm");
    assert_int_equal(cl.exp - cl.iat, 900);
    jwt_claims_free(&cl);
}

static void negotiate_case(int version, const char *nodes_fixture, const char *want_path)
{
    sim_start(&TL.loop, version, nodes_fixture);
    sr_client *c = client(0, 5000);
    assert_int_equal(sr_version(c), 0);
    got g = {0};
    assert_int_equal(sr_get_nodes(c, 0, on_resp, &g), 0);
    assert_false(g.done); /* never from inside the call */
    run_until(&TL, &g.done);
    assert_int_equal(g.status, 0);
    assert_int_equal(sr_version(c), version);
    assert_true(g.n_nodes >= 3);
    assert_int_equal(SIM.n, 2);
    assert_string_equal(SIM.recs[0].path, "/openapi/v3");
    assert_string_equal(SIM.recs[1].path, want_path);
    assert_string_equal(SIM.recs[1].query, "");
    check_token(&SIM.recs[0], KEY, sizeof(KEY) - 1);
    check_token(&SIM.recs[1], KEY, sizeof(KEY) - 1);
    /* A second request does not negotiate again and reuses the token. */
    got g2 = {0};
    sr_get_nodes(c, 0, on_resp, &g2);
    run_until(&TL, &g2.done);
    assert_int_equal(SIM.n, 3);
    assert_string_equal(SIM.recs[2].token, SIM.recs[1].token);
    sr_stats st;
    sr_get_stats(c, &st);
    assert_int_equal(st.negotiations, 1);
    assert_int_equal(st.tokens_minted, 1);
    close_client(c);
    sim_stop(&TL);
}

static void test_negotiate_v38(void **state)
{
    negotiate_case(38, "v38_nodes_idle_200.json", "/slurm/v0.0.38/nodes");
}

static void test_negotiate_v42(void **state)
{
    negotiate_case(42, "v42_nodes_states_200.json", "/slurm/v0.0.42/nodes/");
}

static void test_negotiate_v44(void **state)
{
    negotiate_case(44, "v44_nodes_states_200.json", "/slurm/v0.0.44/nodes/");
}

static void test_negotiate_v45(void **state)
{
    negotiate_case(45, "v45_nodes_states_200.json", "/slurm/v0.0.45/nodes/");
}

/* A failed negotiation fails the waiting requests and is tried again. */
static void test_negotiate_retry(void **state)
{
    sim_start(&TL.loop, 38, "v38_nodes_idle_200.json");
    SIM.openapi_status = 503;
    sr_client *c = client(0, 5000);
    got a = {0}, b = {0};
    sr_get_nodes(c, 0, on_resp, &a);
    sr_get_node(c, "n1", on_resp, &b);
    run_until(&TL, &b.done);
    assert_true(a.done);
    assert_true(a.status < 0);
    assert_true(b.status < 0);
    assert_int_equal(sr_version(c), 0);
    assert_int_equal(SIM.n, 1); /* both waited for one negotiation */
    SIM.openapi_status = 0;
    got d = {0};
    sr_get_node(c, "n2", on_resp, &d);
    run_until(&TL, &d.done);
    assert_int_equal(d.status, 0);
    assert_string_equal(d.first, "n2");
    assert_int_equal(sr_version(c), 38);
    close_client(c);
    sim_stop(&TL);
}

/* ---- 304 ---- */

static void test_update_time_304(void **state)
{
    sim_start(&TL.loop, 38, "v38_nodes_idle_200.json");
    SIM.unchanged = 1;
    sr_client *c = client(38, 5000);
    got g = {0};
    sr_get_nodes(c, 1795300000, on_resp, &g);
    run_until(&TL, &g.done);
    assert_int_equal(g.status, 0);
    assert_true(g.not_modified);
    assert_int_equal(g.n_nodes, 0);
    assert_string_equal(SIM.recs[0].query, "update_time=1795300000");
    /* Without update_time the same server sends the table. */
    got h = {0};
    sr_get_nodes(c, 0, on_resp, &h);
    run_until(&TL, &h.done);
    assert_false(h.not_modified);
    assert_int_equal(h.n_nodes, 4);
    sr_stats st;
    sr_get_stats(c, &st);
    assert_int_equal(st.not_modified, 1);
    close_client(c);
    sim_stop(&TL);
}

/* ---- errors are never success ---- */

static void test_errors(void **state)
{
    sim_start(&TL.loop, 42, "v42_nodes_states_200.json");
    sr_client *c = client(42, 5000);

    /* HTTP 200 with an "errors" list (and a node list): an error. */
    SIM.errors_in_200 = 1;
    got g = {0};
    sr_get_nodes(c, 0, on_resp, &g);
    run_until(&TL, &g.done);
    assert_true(g.status < 0);
    assert_int_equal(g.n_nodes, 0);
    assert_int_equal(g.code, g.status);
    SIM.errors_in_200 = 0;

    /* 500 with a bad-token error list. */
    SIM.nodes_status = 500;
    got h = {0};
    sr_get_nodes(c, 0, on_resp, &h);
    run_until(&TL, &h.done);
    assert_int_equal(h.status, OP_ESLURM);
    assert_int_equal(h.n_nodes, 0);
    SIM.nodes_status = 0;

    /* Unknown node: 2018, OP_ENOTFOUND (distinguishable from "cannot ask"). */
    got u = {0};
    sr_get_node(c, "nosuch", on_resp, &u);
    run_until(&TL, &u.done);
    assert_int_equal(u.status, OP_ENOTFOUND);
    assert_int_equal(u.slurm_errno, 2018);

    /* A known node. */
    got k = {0};
    sr_get_node(c, "slinky-2", on_resp, &k);
    run_until(&TL, &k.done);
    assert_int_equal(k.status, 0);
    assert_string_equal(k.first, "slinky-2");
    close_client(c);

    /* A version the server does not have: plain-text 404, OP_ENOTSUP. */
    c = client(44, 5000);
    got v = {0};
    sr_get_nodes(c, 0, on_resp, &v);
    run_until(&TL, &v.done);
    assert_int_equal(v.status, OP_ENOTSUP);
    assert_non_null(strstr(v.message, "404"));
    close_client(c);

    /* Nothing listening: a transport error. */
    sim_stop(&TL);
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d", SIM.port);
    sr_opts o = {.url = url, .key = KEY, .key_len = 8, .version = 38, .timeout_ms = 2000};
    assert_int_equal(sr_client_new(&TL.loop, &o, &c), 0);
    got t = {0};
    sr_ping(c, on_resp, &t);
    run_until(&TL, &t.done);
    assert_true(t.status < 0);
    close_client(c);
}

/* 22.05 has no node writes over REST: ENOTSUP, never a silent success. */
static void test_no_rest_writes_on_v38(void **state)
{
    sim_start(&TL.loop, 38, "v38_nodes_idle_200.json");
    sr_client *c = client(38, 5000);
    sm_node_update u = {.set = SM_UPD_STATE | SM_UPD_REASON, .state = SM_REQ_DRAIN, .reason = "x"};
    got g = {0};
    assert_int_equal(sr_update_nodes(c, "n1", &u, on_resp, &g), 0);
    run_until(&TL, &g.done);
    assert_int_equal(g.status, OP_ENOTSUP);
    assert_int_equal(SIM.n, 0);
    close_client(c);
    sim_stop(&TL);
}

/* ---- deadlines and closing ---- */

static void test_deadline(void **state)
{
    sim_start(&TL.loop, 38, "v38_nodes_idle_200.json");
    SIM.hang = 1;
    sr_client *c = client(38, 300);
    got g = {0};
    uint64_t t0 = uv_now(&TL.loop);
    sr_get_nodes(c, 0, on_resp, &g);
    run_until(&TL, &g.done);
    assert_int_equal(g.status, OP_ETIMEOUT);
    assert_true(uv_now(&TL.loop) - t0 < 2000);
    close_client(c);
    sim_stop(&TL);
}

static void test_close_in_flight(void **state)
{
    sim_start(&TL.loop, 38, "v38_nodes_idle_200.json");
    SIM.hang = 1;
    sr_client *c = client(0, 10000); /* still negotiating when closed */
    got a = {0}, b = {0};
    sr_get_nodes(c, 0, on_resp, &a);
    run_for(&TL, 50);
    int done = 0;
    sr_client_close(c, closed, &done);
    assert_int_equal(sr_get_node(c, "n1", on_resp, &b), OP_ECANCELED);
    run_until(&TL, &done);
    assert_true(a.done);
    assert_int_equal(a.status, OP_ECANCELED);
    assert_false(b.done);
    sim_stop(&TL);
}

/* ---- token ---- */

static void test_token_remint(void **state)
{
    sim_start(&TL.loop, 38, "v38_nodes_idle_200.json");
    sr_client *c = client(38, 5000);
    got a = {0}, b = {0}, d = {0}, e = {0};
    sr_ping(c, on_resp, &a);
    run_until(&TL, &a.done);
    assert_int_equal(a.status, 0);
    assert_int_equal(a.n_pings, 1);
    /* 10 minutes later (under 80 % of 15 min): same token. */
    fake_now += 600;
    sr_ping(c, on_resp, &b);
    run_until(&TL, &b.done);
    assert_string_equal(SIM.recs[0].token, SIM.recs[1].token);
    /* 12 minutes after minting: a new token, valid now. */
    fake_now += 120;
    sr_ping(c, on_resp, &d);
    run_until(&TL, &d.done);
    assert_string_not_equal(SIM.recs[1].token, SIM.recs[2].token);
    check_token(&SIM.recs[2], KEY, sizeof(KEY) - 1);
    /* A new key: the next request is signed with it at once. */
    static const char KEY2[] = "another key, 32 bytes long......";
    assert_int_equal(sr_set_key(c, KEY2, sizeof(KEY2) - 1), 0);
    sr_ping(c, on_resp, &e);
    run_until(&TL, &e.done);
    check_token(&SIM.recs[3], KEY2, sizeof(KEY2) - 1);
    jwt_claims cl;
    assert_int_equal(jwt_verify(SIM.recs[3].token, KEY, sizeof(KEY) - 1, fake_now, &cl), OP_EUNAUTHORIZED);
    sr_stats st;
    sr_get_stats(c, &st);
    assert_int_equal(st.tokens_minted, 3);
    close_client(c);
    sim_stop(&TL);
}

/* A 401 re-mints the token and tells the owner (whose key may be stale),
 * once per refused answer; other errors do not. */
static void count_call(void *data)
{
    (*(int *)data)++;
}

static void test_unauthorized_hook(void **state)
{
    static const struct {
        int version, status;
        int64_t update_time;
        int refused;
    } cases[] = {
        {42, 500, 0, 0}, /* a Slurm error from v0.0.40 on: not about the token */
        {42, 401, 0, 1},
        {42, 511, 0, 1}, /* slurmctld refused it (24.11, 26.05) */
        {38, 401, 0, 1},
        {38, 500, 0, 1},   /* 22.05's answer to a bad token */
        {38, 500, 123, 0}, /* 22.05's answer to update_time when only nodes changed */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        sim_start(&TL.loop, cases[i].version,
                  cases[i].version == 38 ? "v38_nodes_idle_200.json" : "v42_nodes_states_200.json");
        char url[64];
        sim_url(url, sizeof(url));
        int calls = 0;
        sr_opts o = {.url = url,
                     .key = KEY,
                     .key_len = sizeof(KEY) - 1,
                     .version = cases[i].version,
                     .now = clock_fn,
                     .on_unauthorized = count_call,
                     .unauthorized_data = &calls};
        sr_client *c = NULL;
        assert_int_equal(sr_client_new(&TL.loop, &o, &c), 0);
        got a = {0}, b = {0};
        SIM.nodes_status = cases[i].status;
        sr_get_nodes(c, cases[i].update_time, on_resp, &a);
        run_until(&TL, &a.done);
        assert_int_not_equal(a.status, 0);
        assert_int_equal(calls, cases[i].refused);
        SIM.nodes_status = 0;
        sr_get_nodes(c, 0, on_resp, &b);
        run_until(&TL, &b.done);
        assert_int_equal(b.status, 0);
        assert_int_equal(calls, cases[i].refused);
        sr_stats st;
        sr_get_stats(c, &st);
        /* a refused token is minted afresh for the next request */
        assert_int_equal(st.tokens_minted, cases[i].refused ? 2 : 1);
        close_client(c);
        sim_stop(&TL);
    }
}

/* ---- large bodies are decoded off the loop ---- */

static void test_offload(void **state)
{
    sim_start(&TL.loop, 38, NULL);
    /* 2,000 nodes: about 1 MB, above SR_OFFLOAD_BYTES. */
    char *one = sim_fixture("v38_node_n1_idle_200.json");
    cJSON *doc = json_parse(one, strlen(one), NULL);
    free(one);
    const cJSON *proto = json_child(doc, "nodes")->child;
    cJSON *out = cJSON_CreateObject(), *list = cJSON_CreateArray();
    for (int i = 0; i < 2000; i++) {
        cJSON *n = cJSON_Duplicate(proto, 1);
        char name[32];
        snprintf(name, sizeof(name), "g%05d", i + 1);
        json_set_str(n, "name", name);
        cJSON_AddItemToArray(list, n);
    }
    json_set(out, "nodes", list);
    json_set(out, "errors", cJSON_CreateArray());
    free(SIM.nodes);
    SIM.nodes = json_dump(out);
    assert_true(strlen(SIM.nodes) > SR_OFFLOAD_BYTES);
    cJSON_Delete(out);
    cJSON_Delete(doc);
    sr_client *c = client(38, 10000);
    got g = {0};
    sr_get_nodes(c, 0, on_resp, &g);
    run_until(&TL, &g.done);
    assert_int_equal(g.status, 0);
    assert_int_equal(g.n_nodes, 2000);
    assert_string_equal(g.first, "g00001");
    sr_stats st;
    sr_get_stats(c, &st);
    assert_int_equal(st.offloaded, 1);
    close_client(c);
    sim_stop(&TL);
}

/* A v0.0.38 table of n copies of n1, named g00001 ... */
static char *big_table(int n)
{
    char *one = sim_fixture("v38_node_n1_idle_200.json");
    cJSON *doc = json_parse(one, strlen(one), NULL);
    free(one);
    const cJSON *proto = json_child(doc, "nodes")->child;
    cJSON *out = cJSON_CreateObject(), *list = cJSON_CreateArray();
    for (int i = 0; i < n; i++) {
        cJSON *x = cJSON_Duplicate(proto, 1);
        char name[32];
        snprintf(name, sizeof(name), "g%05d", i + 1);
        json_set_str(x, "name", name);
        cJSON_AddItemToArray(list, x);
    }
    json_set(out, "nodes", list);
    json_set(out, "errors", cJSON_CreateArray());
    char *s = json_dump(out);
    cJSON_Delete(out);
    cJSON_Delete(doc);
    return s;
}

/* An answer over the body cap is an error naming the cap and the flag that
 * raises it, with no nodes at all; the client goes on working. */
static void test_body_over_cap(void **state)
{
    sim_start(&TL.loop, 38, NULL);
    sim_set(&SIM.nodes, big_table(2000)); /* ~1 MB */
    size_t cap = (size_t)256 << 10;
    assert_true(strlen(SIM.nodes) > cap);
    sr_client *c = client_capped(38, 10000, cap);
    got g = {0};
    sr_get_nodes(c, 0, on_resp, &g);
    run_until(&TL, &g.done);
    assert_int_equal(g.status, OP_ETOOBIG);
    assert_int_equal(g.code, OP_ETOOBIG);
    assert_int_equal(g.n_nodes, 0);
    assert_non_null(strstr(g.message, "262144-byte body cap"));
    assert_non_null(strstr(g.message, "--slurmrestd-max-body"));
    /* Under the cap again: a whole table. */
    sim_set(&SIM.nodes, big_table(100));
    got g2 = {0};
    sr_get_nodes(c, 0, on_resp, &g2);
    run_until(&TL, &g2.done);
    assert_int_equal(g2.status, 0);
    assert_int_equal(g2.n_nodes, 100);
    sr_stats st;
    sr_get_stats(c, &st);
    assert_int_equal(st.errors, 1);
    close_client(c);
    sim_stop(&TL);
}

/* {"nodes":[0,0,...]} of about len bytes: a tree of ~30 times its text. */
static char *hostile(size_t len)
{
    char *s = xmalloc(len + 32);
    size_t k = (size_t)snprintf(s, 32, "{\"nodes\":[");
    while (k < len)
        s[k++] = '0', s[k++] = ',';
    memcpy(s + k, "0]}", 4);
    return s;
}

/* Under the body cap but over the tree bound (SR_TREE_FACTOR x the cap):
 * refused whole, on the loop (small) and on the threadpool (large). */
static void test_tree_over_bound(void **state)
{
    sim_start(&TL.loop, 38, NULL);
    struct {
        size_t cap, len;
        uint64_t offloaded;
    } cases[] = {{(size_t)64 << 10, (size_t)60 << 10, 0}, {(size_t)1 << 20, (size_t)900 << 10, 1}};
    for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
        sim_set(&SIM.nodes, hostile(cases[i].len));
        sr_client *c = client_capped(38, 10000, cases[i].cap);
        got g = {0};
        sr_get_nodes(c, 0, on_resp, &g);
        run_until(&TL, &g.done);
        assert_int_equal(g.status, OP_ETOOBIG);
        assert_int_equal(g.n_nodes, 0);
        assert_non_null(strstr(g.message, "needs more than"));
        assert_non_null(strstr(g.message, "--slurmrestd-max-body"));
        sr_stats st;
        sr_get_stats(c, &st);
        assert_int_equal(st.offloaded, cases[i].offloaded);
        close_client(c);
    }
    sim_stop(&TL);
}

/* Big answers are decoded one at a time per client, each in full. */
static void test_offload_serial(void **state)
{
    sim_start(&TL.loop, 38, NULL);
    sim_set(&SIM.nodes, big_table(2000));
    sr_client *c = client(38, 10000);
    got g[4] = {{0}};
    for (int i = 0; i < 4; i++)
        sr_get_nodes(c, 0, on_resp, &g[i]);
    for (int i = 0; i < 4; i++) {
        run_until(&TL, &g[i].done);
        assert_int_equal(g[i].status, 0);
        assert_int_equal(g[i].n_nodes, 2000);
    }
    sr_stats st;
    sr_get_stats(c, &st);
    assert_int_equal(st.offloaded, 4);
    /* Closed with decodes queued: every one completes (canceled or not). */
    got h[3] = {{0}};
    for (int i = 0; i < 3; i++)
        sr_get_nodes(c, 0, on_resp, &h[i]);
    while (SIM.n < 4 + 3 + 0)
        run_for(&TL, 5);
    close_client(c);
    for (int i = 0; i < 3; i++)
        assert_true(h[i].done);
    sim_stop(&TL);
}

/* The server's clock: 22.05's node answers carry none (no Date header, no
 * last_update); diag's req_time does in every version, and later answers
 * get a lower bound from that reading; v0.0.40+ lists carry last_update; a
 * Date header is used only when nothing else is known. */
static void test_server_time(void **state)
{
    sim_start(&TL.loop, 38, "v38_nodes_idle_200.json");
    SIM.date = "Wed, 25 Nov 2026 03:12:16 GMT";
    sr_client *c = client(38, 5000);
    got g = {0};
    sr_get_nodes(c, 0, on_resp, &g);
    run_until(&TL, &g.done);
    assert_int_equal(g.status, 0);
    assert_int_equal(g.server_time_src, SM_TIME_HTTP_DATE);
    assert_int_equal(g.server_time, 1795576336);
    SIM.date = NULL;
    got g0 = {0};
    sr_get_nodes(c, 0, on_resp, &g0);
    run_until(&TL, &g0.done);
    assert_int_equal(g0.server_time, 0);
    assert_int_equal(g0.server_time_src, SM_TIME_NONE);
    assert_int_equal(SIM.n, 2); /* nothing read behind our back */

    got d = {0};
    assert_int_equal(sr_get_diag(c, on_resp, &d), 0);
    run_until(&TL, &d.done);
    assert_int_equal(d.status, 0);
    assert_int_equal(d.server_time_src, SM_TIME_REQ_TIME);
    assert_true(d.server_time > 1795000000);
    assert_string_equal(SIM.recs[SIM.n - 1].path, "/slurm/v0.0.38/diag");

    /* From now on: the reading plus the time since (under a second), minus 1. */
    SIM.date = "Wed, 25 Nov 2026 03:12:16 GMT";
    got h = {0};
    sr_get_nodes(c, 0, on_resp, &h);
    run_until(&TL, &h.done);
    assert_int_equal(h.status, 0);
    assert_int_equal(h.server_time_src, SM_TIME_ESTIMATE);
    assert_int_equal(h.server_time, d.server_time - 1);
    /* A 304 gets it too, and no data. */
    SIM.unchanged = 1;
    got u = {0};
    sr_get_nodes(c, h.server_time, on_resp, &u);
    run_until(&TL, &u.done);
    assert_int_equal(u.status, 0);
    assert_true(u.not_modified);
    assert_int_equal(u.server_time_src, SM_TIME_ESTIMATE);
    assert_int_equal(u.server_time, d.server_time - 1);
    /* diag's own time wins over the estimate. */
    got d2 = {0};
    sr_get_diag(c, on_resp, &d2);
    run_until(&TL, &d2.done);
    assert_int_equal(d2.server_time_src, SM_TIME_REQ_TIME);
    assert_int_equal(d2.server_time, d.server_time);
    /* Errors carry no time. */
    SIM.nodes_status = 500;
    got e = {0};
    sr_get_nodes(c, 0, on_resp, &e);
    run_until(&TL, &e.done);
    assert_true(e.status < 0);
    assert_int_equal(e.server_time, 0);
    close_client(c);
    sim_stop(&TL);

    /* read_clock: the client reads diag by itself, once per reading. */
    sim_start(&TL.loop, 38, "v38_nodes_idle_200.json");
    char url[64];
    sim_url(url, sizeof(url));
    sr_opts o = {
        .url = url, .key = KEY, .key_len = sizeof(KEY) - 1, .version = 38, .read_clock = 1, .now = clock_fn};
    assert_int_equal(sr_client_new(&TL.loop, &o, &c), 0);
    got r1 = {0};
    sr_get_nodes(c, 0, on_resp, &r1);
    run_until(&TL, &r1.done);
    /* The first may go without (the diag is sent after it), or get an
     * estimate when the diag's answer came first. */
    assert_true(r1.server_time_src == SM_TIME_NONE || r1.server_time_src == SM_TIME_ESTIMATE);
    while (sim_count("GET", "/diag") < 1)
        run_for(&TL, 5);
    run_for(&TL, 20);
    for (int i = 0; i < 3; i++) {
        got r2 = {0};
        sr_get_jobs(c, 0, on_resp, &r2);
        run_until(&TL, &r2.done);
        assert_int_equal(r2.status, 0);
        assert_int_equal(r2.server_time_src, SM_TIME_ESTIMATE);
        assert_true(r2.server_time > 1795000000);
    }
    sr_stats st;
    sr_get_stats(c, &st);
    assert_int_equal(st.clock_reads, 1);
    assert_int_equal(sim_count("GET", "/diag"), 1);
    close_client(c);
    sim_stop(&TL);

    sim_start(&TL.loop, 44, "v44_nodes_states_200.json");
    SIM.date = "Wed, 25 Nov 2026 03:12:16 GMT";
    c = client(44, 5000);
    got n = {0};
    sr_get_nodes(c, 0, on_resp, &n);
    run_until(&TL, &n.done);
    assert_int_equal(n.status, 0);
    assert_int_equal(n.server_time_src, SM_TIME_LAST_UPDATE);
    assert_int_equal(n.server_time, 1795300000);
    got d4 = {0};
    sr_get_diag(c, on_resp, &d4);
    run_until(&TL, &d4.done);
    assert_int_equal(d4.status, 0);
    assert_int_equal(d4.server_time_src, SM_TIME_REQ_TIME);
    assert_int_equal(d4.server_time, 1795300007);
    assert_string_equal(SIM.recs[SIM.n - 1].path, "/slurm/v0.0.44/diag/");
    close_client(c);
    sim_stop(&TL);
}

/* ---- batching ---- */

typedef struct nodes_done {
    int target; /* reached is set once count gets there */
    int reached;
    int count;
    int ok;
    int notfound;
    int other;
    char notfound_name[32];
} nodes_done;

static void on_node_done(const char *node, int status, void *data)
{
    nodes_done *d = data;
    d->count++;
    if (d->target && d->count >= d->target)
        d->reached = 1;
    if (status == 0)
        d->ok++;
    else if (status == OP_ENOTFOUND) {
        d->notfound++;
        snprintf(d->notfound_name, sizeof(d->notfound_name), "%s", node);
    } else
        d->other++;
}

static void batcher_closed(void *data)
{
    *(int *)data = 1;
}

static void test_batch_one_request(void **state)
{
    sim_start(&TL.loop, 42, "v42_nodes_states_200.json");
    sr_client *c = client(0, 5000);
    nb_batcher *b = NULL;
    nb_opts bo = {.rest = c, .name = "test"};
    assert_int_equal(nb_new(&TL.loop, &bo, &b), 0);
    const char *reason = "slurm-operator: Pod (slurm/x) is pending termination for scale-in";
    sm_node_update drain = {.set = SM_UPD_STATE | SM_UPD_REASON, .state = SM_REQ_DRAIN, .reason = reason};
    sm_node_update other = {.set = SM_UPD_STATE | SM_UPD_REASON, .state = SM_REQ_DRAIN, .reason = "another"};
    nodes_done d = {0};
    /* 200 drains in one loop iteration, in no particular order, and one with
     * another reason: two requests. */
    for (int i = 200; i >= 1; i--) {
        char name[16];
        snprintf(name, sizeof(name), "g%03d", i);
        assert_int_equal(nb_update(b, name, &drain, on_node_done, &d), 0);
    }
    assert_int_equal(nb_update(b, "n9", &other, on_node_done, &d), 0);
    assert_int_equal(nb_update(b, "bad,name", &other, on_node_done, &d), OP_EINVAL);
    sm_node_update noreason = {.set = SM_UPD_STATE, .state = SM_REQ_DRAIN};
    assert_int_equal(nb_update(b, "n1", &noreason, on_node_done, &d), OP_EINVAL);
    assert_int_equal(d.count, 0);
    d.target = 201;
    run_until(&TL, &d.reached);
    assert_int_equal(d.ok, 201);
    assert_int_equal(SIM.posts, 2);
    assert_int_equal(sim_count("POST", "/slurm/v0.0.42/nodes/"), 2);
    /* The first write carries every drained node as one hostlist. */
    int found = 0;
    for (int i = 0; i < SIM.n; i++) {
        if (strcmp(SIM.recs[i].method, "POST") != 0)
            continue;
        cJSON *body = json_parse(SIM.recs[i].body, strlen(SIM.recs[i].body), NULL);
        assert_non_null(body);
        const char *names = json_child(body, "name")->child->valuestring;
        const char *r = json_get_str(body, "reason");
        assert_string_equal(SIM.recs[i].ctype, "application/json");
        if (strcmp(r, reason) == 0) {
            assert_string_equal(names, "g[001-200]");
            assert_string_equal(json_child(body, "state")->child->valuestring, "DRAIN");
            found++;
        } else {
            assert_string_equal(names, "n9");
        }
        cJSON_Delete(body);
    }
    assert_int_equal(found, 1);
    nb_stats st;
    nb_get_stats(b, &st);
    assert_int_equal(st.requests, 2);
    assert_int_equal(st.largest, 200);
    assert_int_equal(st.rest_requests, 2);
    int done = 0;
    nb_close(b, batcher_closed, &done);
    run_until(&TL, &done);
    close_client(c);
    sim_stop(&TL);
}

/* One missing node refuses the hostlist: the rest still get drained. */
static void test_batch_split_on_missing(void **state)
{
    sim_start(&TL.loop, 44, "v44_nodes_states_200.json");
    SIM.missing = "ghost";
    sr_client *c = client(44, 5000);
    nb_batcher *b = NULL;
    nb_opts bo = {.rest = c};
    assert_int_equal(nb_new(&TL.loop, &bo, &b), 0);
    sm_node_update drain = {.set = SM_UPD_STATE | SM_UPD_REASON, .state = SM_REQ_DRAIN, .reason = "r"};
    nodes_done d = {0};
    const char *names[] = {"slinky-0", "slinky-1", "ghost", "slinky-3"};
    for (size_t i = 0; i < 4; i++)
        nb_update(b, names[i], &drain, on_node_done, &d);
    d.target = 4;
    run_until(&TL, &d.reached);
    assert_int_equal(d.ok, 3);
    assert_int_equal(d.notfound, 1);
    assert_string_equal(d.notfound_name, "ghost");
    assert_int_equal(SIM.posts, 5); /* one refused hostlist, then one per node */
    nb_stats st;
    nb_get_stats(b, &st);
    assert_int_equal(st.split, 1);
    int done = 0;
    nb_close(b, batcher_closed, &done);
    run_until(&TL, &done);
    close_client(c);
    sim_stop(&TL);
}

/* Node records made first: one POST new/node/ with the line as "node_conf"; a line naming a node that
 * exists is refused whole (2168 -> OP_EEXISTS); before v0.0.44 there is no such endpoint. */
static void test_create_nodes(void **state)
{
    const char *line = "NodeName=gpu-[0-3] State=FUTURE CPUs=4 RealMemory=16000 Features=gpu";
    sim_start(&TL.loop, 45, "v45_nodes_states_200.json");
    sr_client *c = client(45, 5000);
    got g = {0};
    assert_int_equal(sr_create_nodes(c, line, on_resp, &g), 0);
    run_until(&TL, &g.done);
    assert_int_equal(g.status, 0);
    assert_int_equal(SIM.creates, 1);
    const sim_rec *r = &SIM.recs[SIM.n - 1];
    assert_string_equal(r->method, "POST");
    assert_string_equal(r->path, "/slurm/v0.0.45/new/node/");
    cJSON *body = json_parse(r->body, strlen(r->body), NULL);
    assert_string_equal(json_get_str_or(body, "node_conf", ""), line);
    cJSON_Delete(body);
    SIM.exists = "gpu-";
    got e = {0};
    sr_create_nodes(c, line, on_resp, &e);
    run_until(&TL, &e.done);
    assert_int_equal(e.status, OP_EEXISTS);
    assert_int_equal(e.slurm_errno, 2168);
    assert_int_equal(sr_create_nodes(c, "", on_resp, &e), OP_EINVAL);
    close_client(c);
    sim_stop(&TL);

    sim_start(&TL.loop, 42, "v42_nodes_states_200.json");
    c = client(42, 5000);
    got old = {0};
    assert_int_equal(sr_create_nodes(c, line, on_resp, &old), 0);
    run_until(&TL, &old.done);
    assert_int_equal(old.status, OP_ENOTSUP);
    assert_int_equal(SIM.creates, 0);
    close_client(c);
    sim_stop(&TL);
}

/* Without a batch endpoint (v0.0.38, no libslurm) nothing can write. */
static void test_batch_no_backend(void **state)
{
    sim_start(&TL.loop, 38, "v38_nodes_idle_200.json");
    sr_client *c = client(38, 5000);
    nb_batcher *b = NULL;
    nb_opts bo = {.rest = c};
    nb_new(&TL.loop, &bo, &b);
    sm_node_update drain = {.set = SM_UPD_STATE | SM_UPD_REASON, .state = SM_REQ_DRAIN, .reason = "r"};
    nodes_done d = {0};
    nb_update(b, "n1", &drain, on_node_done, &d);
    nb_update(b, "n2", &drain, on_node_done, &d);
    d.target = 2;
    run_until(&TL, &d.reached);
    assert_int_equal(d.other, 2);
    assert_int_equal(SIM.n, 0);
    /* Closing with writes queued cancels them. */
    nb_update(b, "n3", &drain, on_node_done, &d);
    int done = 0;
    nb_close(b, batcher_closed, &done);
    assert_int_equal(d.count, 2);
    run_until(&TL, &done);
    assert_int_equal(d.count, 3);
    close_client(c);
    sim_stop(&TL);
}

/* Comments (one per node, no state) are throttled behind state changes. */
static void test_batch_throttle(void **state)
{
    sim_start(&TL.loop, 42, "v42_nodes_states_200.json");
    sr_client *c = client(42, 5000);
    nb_batcher *b = NULL;
    nb_opts bo = {.rest = c, .max_unbatched = 2};
    nb_new(&TL.loop, &bo, &b);
    nodes_done d = {0};
    char cm[20][32];
    for (int i = 0; i < 20; i++) {
        char name[16];
        snprintf(name, sizeof(name), "c%02d", i);
        snprintf(cm[i], sizeof(cm[i]), "{\"podName\":\"p%d\"}", i);
        sm_node_update u = {.set = SM_UPD_COMMENT, .comment = cm[i]};
        nb_update(b, name, &u, on_node_done, &d);
    }
    sm_node_update drain = {.set = SM_UPD_STATE | SM_UPD_REASON, .state = SM_REQ_DRAIN, .reason = "r"};
    nb_update(b, "z1", &drain, on_node_done, &d);
    nb_update(b, "z2", &drain, on_node_done, &d);
    nb_flush(b);
    nb_stats st;
    nb_get_stats(b, &st);
    assert_int_equal(st.in_flight, 3); /* two comments + one drain of two nodes */
    d.target = 22;
    run_until(&TL, &d.reached);
    assert_int_equal(d.ok, 22);
    assert_int_equal(SIM.posts, 21);
    int done = 0;
    nb_close(b, batcher_closed, &done);
    run_until(&TL, &done);
    close_client(c);
    sim_stop(&TL);
}

int main(void)
{
    /* The client hangs up on an answer over its cap while the scripted
     * server is still writing it; the operator ignores SIGPIPE too. */
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_negotiate_v38, setup, teardown),
        cmocka_unit_test_setup_teardown(test_negotiate_v42, setup, teardown),
        cmocka_unit_test_setup_teardown(test_negotiate_v44, setup, teardown),
        cmocka_unit_test_setup_teardown(test_negotiate_v45, setup, teardown),
        cmocka_unit_test_setup_teardown(test_negotiate_retry, setup, teardown),
        cmocka_unit_test_setup_teardown(test_update_time_304, setup, teardown),
        cmocka_unit_test_setup_teardown(test_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_rest_writes_on_v38, setup, teardown),
        cmocka_unit_test_setup_teardown(test_deadline, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_in_flight, setup, teardown),
        cmocka_unit_test_setup_teardown(test_token_remint, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unauthorized_hook, setup, teardown),
        cmocka_unit_test_setup_teardown(test_offload, setup, teardown),
        cmocka_unit_test_setup_teardown(test_body_over_cap, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tree_over_bound, setup, teardown),
        cmocka_unit_test_setup_teardown(test_offload_serial, setup, teardown),
        cmocka_unit_test_setup_teardown(test_server_time, setup, teardown),
        cmocka_unit_test_setup_teardown(test_batch_one_request, setup, teardown),
        cmocka_unit_test_setup_teardown(test_batch_split_on_missing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_batch_no_backend, setup, teardown),
        cmocka_unit_test_setup_teardown(test_create_nodes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_batch_throttle, setup, teardown),
    };
    if (getenv("TEST_FILTER"))
        cmocka_set_test_filter(getenv("TEST_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
