/* A scripted slurmrestd on loopback for the slurmio unit tests (core/httpd).
 *
 * It serves the recorded fixtures of tests/data/slurmrestd/: /openapi/v3 for
 * the version under test, the node table the test sets (with 304 when the
 * test says nothing changed and the request carries update_time), single
 * nodes taken from that table (or Slurm's 2018 error), jobs, pings, diag, and node
 * writes (refused with 2018 when they name a node the test declared missing).
 * Every request is recorded (method, path, query, auth headers, body) so the
 * tests can assert what went over the wire.
 *
 * Include after cmocka.h and http_test_util.h. Everything is static.
 */
#ifndef SLURMRESTD_SIM_H
#define SLURMRESTD_SIM_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/httpd.h"
#include "core/json.h"
#include "core/mem.h"

#define SIM_MAX_RECS 256

typedef struct sim_rec {
    char method[8];
    char path[256];
    char query[256];
    char user[64];
    char token[1024];
    char ctype[64];
    char *body;
} sim_rec;

typedef struct sim {
    hs_server *srv;
    int port;
    int version;         /* 38, 42 or 44: which /openapi/v3 and fixtures */
    int openapi_status;  /* 0 = 200, else answer this status */
    char *nodes;         /* the node table document (a fixture or set by the test) */
    char *jobs;          /* the jobs document */
    char *single;        /* reads of one node take it from this table when set (else from nodes) */
    char *ping;          /* the ping document (NULL: the version's fixture) */
    int unchanged;       /* answer 304 to GET nodes/jobs with update_time */
    int nodes_status;    /* 0 = normal; else answer the bad-token error with this status */
    int errors_in_200;   /* answer GET nodes with HTTP 200 and an "errors" list */
    int hang;            /* accept requests and never answer them */
    int quirk_2205;      /* 22.05's partition quirk: a changed table asked with update_time is a 500 */
    const char *missing; /* node writes naming this node fail with 2018 */
    const char *exists;  /* node creates whose line holds this text fail with 2168 (HTTP 422), as 26.05 */
    int node_empty;      /* answer reads of one node with HTTP 200 and an empty list (a lying proxy) */
    const char *date;    /* a Date header for every JSON answer (22.05 sends none) */
    sim_rec recs[SIM_MAX_RECS];
    int n;
    int served; /* every request answered or not, past SIM_MAX_RECS too */
    int posts;  /* node writes seen */
    int creates; /* node creates seen */
} sim;

static sim SIM;

OP_UNUSED static char *sim_fixture(const char *name)
{
    const char *src = getenv("OP_SOURCE_DIR");
    char path[1024];
    snprintf(path, sizeof(path), "%s/tests/data/slurmrestd/%s", src ? src : ".", name);
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open fixture %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = xmalloc((size_t)n + 1);
    if (fread(s, 1, (size_t)n, f) != (size_t)n)
        fail_msg("short read of %s", path);
    s[n] = '\0';
    fclose(f);
    return s;
}

OP_UNUSED static void sim_set(char **slot, char *doc)
{
    free(*slot);
    *slot = doc;
}

static void sim_json(hs_req *req, int status, const char *body)
{
    char extra[128] = "";
    if (SIM.date)
        snprintf(extra, sizeof(extra), "Date: %s\r\n", SIM.date);
    hs_respond(req, status, "application/json", extra[0] ? extra : NULL, body, strlen(body));
}

static void sim_304(hs_req *req)
{
    char extra[128] = "";
    if (SIM.date)
        snprintf(extra, sizeof(extra), "Date: %s\r\n", SIM.date);
    hs_respond(req, 304, NULL, extra[0] ? extra : NULL, NULL, 0);
}

static void sim_fixture_reply(hs_req *req, int status, const char *name)
{
    char *b = sim_fixture(name);
    sim_json(req, status, b);
    free(b);
}

/* {"nodes":[<the node called name>],"errors":[]} from the current table. */
static char *sim_one_node(const char *name)
{
    const char *table = SIM.single ? SIM.single : SIM.nodes;
    cJSON *doc = json_parse(table, strlen(table), NULL);
    cJSON *out = NULL;
    const cJSON *n;
    cJSON_ArrayForEach(n, json_child(doc, "nodes"))
    {
        if (strcmp(json_get_str_or(n, "name", ""), name) == 0) {
            out = cJSON_CreateObject();
            cJSON *list = cJSON_CreateArray();
            cJSON_AddItemToArray(list, cJSON_Duplicate(n, 1));
            json_set(out, "nodes", list);
            json_set(out, "errors", cJSON_CreateArray());
            break;
        }
    }
    cJSON_Delete(doc);
    if (!out)
        return NULL;
    char *s = json_dump(out);
    cJSON_Delete(out);
    return s;
}

static void sim_handler(hs_req *req, void *data)
{
    (void)data;
    const char *path = hs_req_path(req);
    const char *method = hs_req_method(req);
    size_t blen;
    const char *body = hs_req_body(req, &blen);
    SIM.served++;
    if (SIM.n < SIM_MAX_RECS) {
        sim_rec *r = &SIM.recs[SIM.n++];
        const char *u = hs_req_header(req, "X-SLURM-USER-NAME");
        const char *t = hs_req_header(req, "X-SLURM-USER-TOKEN");
        const char *ct = hs_req_header(req, "Content-Type");
        snprintf(r->method, sizeof(r->method), "%s", method);
        snprintf(r->path, sizeof(r->path), "%s", path);
        snprintf(r->query, sizeof(r->query), "%s", hs_req_query(req));
        snprintf(r->user, sizeof(r->user), "%s", u ? u : "");
        snprintf(r->token, sizeof(r->token), "%s", t ? t : "");
        snprintf(r->ctype, sizeof(r->ctype), "%s", ct ? ct : "");
        r->body = blen ? xstrndup(body, blen) : NULL;
    }
    if (SIM.hang)
        return; /* finished by the connection closing */
    if (!hs_req_header(req, "X-SLURM-USER-NAME") || !hs_req_header(req, "X-SLURM-USER-TOKEN")) {
        hs_respond(req, 401, "text/plain", "Connection: Close\r\n", "Authentication failure", 22);
        return;
    }
    char prefix[32];
    snprintf(prefix, sizeof(prefix), "/slurm/v0.0.%d/", SIM.version);
    if (strcmp(path, "/openapi/v3") == 0) {
        if (SIM.openapi_status) {
            hs_respond(req, SIM.openapi_status, "text/plain", NULL, "unavailable", 11);
            return;
        }
        char name[64];
        if (SIM.version == 38)
            snprintf(name, sizeof(name), "openapi_v3_200.json");
        else
            snprintf(name, sizeof(name), "openapi_v0.0.%d_paths.json", SIM.version);
        sim_fixture_reply(req, 200, name);
        return;
    }
    if (strncmp(path, prefix, strlen(prefix)) != 0) {
        hs_respond(req, 404, "text/plain", "Connection: Close\r\n",
                   "Unable find requested URL. Please view /openapi/v3 for API reference.", 70);
        return;
    }
    const char *rest = path + strlen(prefix);
    char fx[128];
    if (!strcmp(method, "GET") && (!strcmp(rest, "nodes") || !strcmp(rest, "nodes/"))) {
        if (SIM.nodes_status) {
            snprintf(fx, sizeof(fx), "v38_err_bad_token_nodes_500.json");
            sim_fixture_reply(req, SIM.nodes_status, fx);
        } else if (SIM.errors_in_200) {
            snprintf(fx, sizeof(fx), "v%d_nodes_with_errors_200.json", SIM.version < 40 ? 42 : SIM.version);
            sim_fixture_reply(req, 200, fx);
        } else if (SIM.unchanged && hs_req_param(req, "update_time")) {
            sim_304(req);
        } else if (SIM.quirk_2205 && hs_req_param(req, "update_time")) {
            sim_fixture_reply(req, 500, "v38_err_bad_token_nodes_500.json");
        } else {
            sim_json(req, 200, SIM.nodes);
        }
    } else if (!strcmp(method, "GET") && !strncmp(rest, "node/", 5)) {
        if (SIM.nodes_status) {
            sim_fixture_reply(req, SIM.nodes_status, "v38_err_bad_token_nodes_500.json");
            return;
        }
        char *one = SIM.node_empty ? NULL : sim_one_node(rest + 5);
        if (SIM.node_empty) {
            sim_json(req, 200, "{\"nodes\":[],\"errors\":[]}");
        } else if (one) {
            sim_json(req, 200, one);
            free(one);
        } else {
            snprintf(fx, sizeof(fx), "v%d_err_unknown_node_500.json", SIM.version);
            sim_fixture_reply(req, 500, fx);
        }
    } else if (!strcmp(method, "GET") && (!strcmp(rest, "jobs") || !strcmp(rest, "jobs/"))) {
        if (SIM.unchanged && hs_req_param(req, "update_time"))
            sim_304(req);
        else
            sim_json(req, 200, SIM.jobs ? SIM.jobs : "{\"jobs\":[],\"errors\":[]}");
    } else if (!strcmp(method, "GET") && (!strcmp(rest, "ping") || !strcmp(rest, "ping/"))) {
        snprintf(fx, sizeof(fx), "v%d_ping_200.json", SIM.version);
        if (SIM.ping)
            sim_json(req, 200, SIM.ping);
        else
            sim_fixture_reply(req, 200, fx);
    } else if (!strcmp(method, "GET") && (!strcmp(rest, "diag") || !strcmp(rest, "diag/"))) {
        snprintf(fx, sizeof(fx), "v%d_diag_200.json", SIM.version);
        sim_fixture_reply(req, 200, fx);
    } else if (!strcmp(method, "POST") && (!strcmp(rest, "nodes/") || !strncmp(rest, "node/", 5))) {
        SIM.posts++;
        const char *names = rest[4] == '/' ? rest + 5 : NULL;
        cJSON *doc = json_parse(body ? body : "", blen, NULL);
        const cJSON *nm = json_child(doc, "name");
        if (!names && cJSON_IsArray(nm) && nm->child && cJSON_IsString(nm->child))
            names = nm->child->valuestring;
        int refuse = SIM.missing && names && strstr(names, SIM.missing) != NULL;
        /* "ghost" inside a compressed list such as "ghost,n[1-3]": any
         * occurrence refuses the whole request, as slurmctld does. */
        cJSON_Delete(doc);
        snprintf(fx, sizeof(fx), refuse ? "v%d_err_unknown_node_500.json" : "v%d_update_node_200.json",
                 SIM.version);
        sim_fixture_reply(req, refuse ? 500 : 200, fx);
    } else if (!strcmp(method, "POST") && !strcmp(rest, "new/node/") && SIM.version >= 44) {
        SIM.creates++;
        cJSON *doc = json_parse(body ? body : "", blen, NULL);
        const char *line = json_get_str_or(doc, "node_conf", "");
        int refuse = SIM.exists && strstr(line, SIM.exists) != NULL;
        cJSON_Delete(doc);
        if (refuse)
            sim_fixture_reply(req, 422, "v45_err_create_node_exists_422.json");
        else
            sim_fixture_reply(req, 200, "v45_create_node_200.json");
    } else {
        hs_respond(req, 405, "text/plain", "Connection: Close\r\n",
                   "Requested REST method is not defined at URL. Please view /openapi/v3 for API reference.",
                   86);
    }
}

OP_UNUSED static void sim_start(uv_loop_t *loop, int version, const char *nodes_fixture)
{
    for (int i = 0; i < SIM.n; i++)
        free(SIM.recs[i].body);
    free(SIM.nodes);
    free(SIM.jobs);
    free(SIM.ping);
    free(SIM.single);
    memset(&SIM, 0, sizeof(SIM));
    SIM.version = version;
    SIM.nodes = nodes_fixture ? sim_fixture(nodes_fixture) : xstrdup("{\"nodes\":[],\"errors\":[]}");
    hs_opts o = {.handler = sim_handler};
    int err = 0;
    SIM.srv = hs_listen(loop, "127.0.0.1", 0, &o, &err);
    assert_non_null(SIM.srv);
    SIM.port = hs_port(SIM.srv);
}

OP_UNUSED static void sim_url(char *out, size_t n)
{
    snprintf(out, n, "http://127.0.0.1:%d", SIM.port);
}

/* tl_run_until, for completions that arrive from timers: uv_run(ONCE)
 * would otherwise sleep in poll after the timer phase set the flag. A
 * 5 ms ticker bounds that sleep. */
static void sim_tick(uv_timer_t *t)
{
    (void)t;
}

OP_UNUSED static void run_until(test_loop *tl, const int *flag)
{
    uv_timer_t *t = xmalloc(sizeof(*t));
    uv_timer_init(&tl->loop, t);
    uv_timer_start(t, sim_tick, 5, 5);
    tl_run_until(tl, flag);
    uv_close((uv_handle_t *)t, (uv_close_cb)free);
}

/* Run the loop for ms milliseconds. */
OP_UNUSED static void run_for(test_loop *tl, unsigned ms)
{
    uv_timer_t *t = xmalloc(sizeof(*t));
    uv_timer_init(&tl->loop, t);
    uv_timer_start(t, sim_tick, 5, 5);
    tl_run_for(tl, ms);
    uv_close((uv_handle_t *)t, (uv_close_cb)free);
}

static void sim_closed(void *data)
{
    *(int *)data = 1;
}

/* Close the server and run the loop until it is gone. */
OP_UNUSED static void sim_stop(test_loop *tl)
{
    int done = 0;
    hs_close(SIM.srv, sim_closed, &done);
    run_until(tl, &done);
    for (int i = 0; i < SIM.n; i++) {
        free(SIM.recs[i].body);
        SIM.recs[i].body = NULL;
    }
    free(SIM.nodes);
    free(SIM.jobs);
    free(SIM.ping);
    free(SIM.single);
    SIM.nodes = SIM.jobs = SIM.ping = SIM.single = NULL;
    SIM.srv = NULL;
}

/* Requests whose path ends with suffix and whose method is m (NULL: any). */
OP_UNUSED static int sim_count(const char *m, const char *suffix)
{
    int k = 0;
    size_t ls = strlen(suffix);
    for (int i = 0; i < SIM.n; i++) {
        size_t lp = strlen(SIM.recs[i].path);
        if ((m == NULL || strcmp(SIM.recs[i].method, m) == 0) && lp >= ls &&
            strcmp(SIM.recs[i].path + lp - ls, suffix) == 0)
            k++;
    }
    return k;
}

#endif
