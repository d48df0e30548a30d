#include "slurmio/rest.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include "core/buf.h"
#include "core/err.h"
#include "core/httpc.h"
#include "core/json.h"
#include "core/list.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/thread.h"
#include "slurmio/hostlist.h"
#include "slurmio/jwt.h"

#define DEF_USER "slurm"
#define DEF_LIFETIME_S 900
#define DEF_TIMEOUT_MS 15000
#define DEF_CONNECT_MS 5000
#define DEF_MAX_CONNS 4
/* Answers at least this big are followed by malloc_trim() once delivered. */
#define TRIM_AFTER_BYTES ((size_t)1 << 20)

enum req_type { RT_OP, RT_NEGOTIATE_WAIT };

typedef struct sr_req {
    list_node link; /* in c->waiting (for the version) or c->done (for delivery) */
    sr_client *c;
    enum req_type type;
    enum sm_op op;
    enum sm_kind kind;
    char *arg;           /* node name, hostlist or reservation name */
    int64_t update_time; /* > 0: ?update_time= */
    /* copies of a write's content, serialised for the version at send time */
    int has_update;
    sm_node_update upd;
    char *upd_str[6];
    int has_resv;
    sm_resv_desc resv;
    char *resv_str[3];
    char *node_conf; /* SM_OP_CREATE_NODES: the node_conf line */
    uint64_t deadline; /* uv_now() ms */
    sr_cb cb;
    void (*ncb)(int status, int version, void *data);
    void *data;
    /* the outcome, for delivery */
    int status;
    sm_response resp;
    /* decoding on the threadpool */
    uv_work_t work;
    char *raw;
    size_t raw_len;
    int http;
    int version;         /* the version the request was sent with */
    int64_t date;        /* the answer's HTTP Date, 0 when none */
    uint64_t sent_hr;    /* uv_hrtime() when it was handed to httpc */
    list_node decode_link; /* in c->decode_q while waiting for the threadpool */
} sr_req;

struct sr_client {
    uv_loop_t *loop;
    hc_pool *pool;
    char *url;
    uint8_t *key;
    size_t key_len;
    char *user;
    unsigned lifetime_s;
    unsigned timeout_ms;
    size_t max_body; /* the cap on an answer's body */
    size_t max_tree; /* the bound on its decoded JSON tree */
    /* slurmctld's clock: the latest reading (an answer's last_update or
     * diag's req_time) and uv_hrtime() when it arrived; see note_time. */
    int64_t clock_time;
    uint64_t clock_hr;
    int clock_syncing; /* a GET diag for the clock is in flight */
    int read_clock;    /* sr_opts.read_clock */
    int forced_version;
    int version;
    int negotiating;
    int64_t (*now)(void *);
    void *now_data;
    void (*on_unauthorized)(void *);
    void *unauthorized_data;
    /* token */
    char *token;
    int64_t token_minted;
    int token_stale;
    /* requests */
    list_node waiting; /* waiting for the version */
    list_node done;    /* completed, to deliver from the timer */
    uv_timer_t defer;
    int works;          /* threadpool jobs in flight (at most one: see start_decode) */
    list_node decode_q; /* bodies waiting for the threadpool */
    int in_http;   /* HTTP requests in flight */
    int in_flight; /* submitted, not yet delivered */
    /* closing */
    int closing;
    int pool_closed;
    int timer_closing;
    void (*close_cb)(void *);
    void *close_data;
    sr_stats stats;
};

static void send_req(sr_client *c, sr_req *r);
static void start_negotiation(sr_client *c);

static int64_t wall_now(sr_client *c)
{
    return c->now ? c->now(c->now_data) : (int64_t)time(NULL);
}

/* ---- delivery ---- */

static void req_free(sr_req *r)
{
    free(r->arg);
    for (size_t i = 0; i < ARRAY_SIZE(r->upd_str); i++)
        free(r->upd_str[i]);
    for (size_t i = 0; i < ARRAY_SIZE(r->resv_str); i++)
        free(r->resv_str[i]);
    free(r->node_conf);
    free(r->raw);
    sm_response_free(&r->resp);
    free(r);
}

static void on_timer_closed(uv_handle_t *h)
{
    sr_client *c = h->data;
    assert(c->in_flight == 0 && c->works == 0 && c->in_http == 0 && !c->negotiating);
    assert(list_empty(&c->done) && list_empty(&c->waiting) && list_empty(&c->decode_q));
    void (*cb)(void *) = c->close_cb;
    void *data = c->close_data;
    free(c->url);
    free(c->user);
    free(c->key);
    free(c->token);
    free(c);
    if (cb)
        cb(data);
}

static void maybe_finish(sr_client *c)
{
    if (!c->closing || !c->pool_closed || c->works || c->in_http || !list_empty(&c->done) ||
        !list_empty(&c->decode_q) ||
        !list_empty(&c->waiting) || c->timer_closing)
        return;
    c->timer_closing = 1;
    uv_close((uv_handle_t *)&c->defer, on_timer_closed);
}

static void deliver_all(uv_timer_t *t)
{
    sr_client *c = t->data;
    list_node q;
    list_init(&q);
    list_splice_tail(&q, &c->done);
    list_node *n;
    size_t big = 0;
    while ((n = list_first(&q))) {
        sr_req *r = list_entry(n, sr_req, link);
        list_remove(n);
        assert(c->in_flight > 0);
        c->in_flight--;
        if (r->raw_len >= TRIM_AFTER_BYTES)
            big++;
        if (r->status < 0 && r->status != OP_ECANCELED)
            c->stats.errors++;
        if (r->type == RT_NEGOTIATE_WAIT) {
            if (r->ncb)
                r->ncb(r->status, r->status < 0 ? 0 : c->version, r->data);
        } else if (r->cb) {
            if (r->status < 0 && r->resp.err.code == 0) {
                r->resp.err.code = r->status;
                r->resp.err.message = xstrdup(err_str(r->status));
            }
            r->cb(r->status, &r->resp, r->data);
        }
        req_free(r);
    }
#ifdef __GLIBC__
    /* A whole node table (11 MB of JSON at 8,192 nodes) is decoded on the
     * threadpool; its freed pages would stay with malloc and the resident
     * size would show the peak of the biggest answer, not the cache. */
    if (big)
        malloc_trim(0);
#endif
    maybe_finish(c);
}

/* Queue r for its callback on a later loop iteration. */
static void complete(sr_client *c, sr_req *r, int status)
{
    /* Every request completes exactly once (rest.h): never while it is
     * queued anywhere, and never after the timer that delivers is gone. */
    assert(!list_is_linked(&r->link) && !c->timer_closing && status <= 0);
    r->status = status;
    list_insert_tail(&c->done, &r->link);
    if (!c->timer_closing)
        uv_timer_start(&c->defer, deliver_all, 0, 0);
}

/* ---- token ---- */

static const char *token(sr_client *c)
{
    int64_t now = wall_now(c);
    int64_t refresh = (int64_t)c->lifetime_s * 4 / 5;
    /* Re-mint after 80 % of the lifetime, after a key change, and when the
     * clock went backwards (the token's iat would be in the future). */
    if (!c->token || c->token_stale || now >= c->token_minted + refresh || now < c->token_minted - 60) {
        char *t = jwt_mint(c->key, c->key_len, c->user, now, (int64_t)c->lifetime_s);
        if (t) {
            free(c->token);
            c->token = t;
            c->token_minted = now;
            c->token_stale = 0;
            c->stats.tokens_minted++;
        }
    }
    return c->token;
}

/* ---- HTTP ---- */

static unsigned remaining_ms(sr_client *c, const sr_req *r)
{
    uint64_t now = uv_now(c->loop);
    return r->deadline > now ? (unsigned)(r->deadline - now) : 0;
}

static void decode_work(uv_work_t *w)
{
    sr_req *r = container_of(w, sr_req, work);
    thread_background(); /* the loop runs first: core/thread.h */
    sm_parse_bounded(r->version, r->kind, r->http, r->raw, r->raw_len, r->c->max_tree, &r->resp);
}

/* The server's clock in an answer (see sr_cb). An answer's own time is
 * slurmctld's clock and becomes the client's reading of it. An answer
 * without one (22.05's lists) gets a lower bound of slurmctld's clock when
 * the request was sent: the reading plus the time elapsed here since it
 * arrived, measured on the monotonic clock (our wall clock plays no part),
 * minus a second for the truncation to seconds and for drift. slurmctld
 * read its clock before the reading arrived here, so it cannot have been
 * later than that bound when it made this answer. The Date header
 * (slurmrestd's clock, often another host) comes last. */
static void note_time(sr_client *c, sr_req *r)
{
    sm_response *resp = &r->resp;
    if (resp->err.code != 0)
        return;
    uint64_t now = uv_hrtime();
    if (resp->server_time_src == SM_TIME_LAST_UPDATE || resp->server_time_src == SM_TIME_REQ_TIME) {
        c->clock_time = resp->server_time;
        c->clock_hr = now;
        return;
    }
    if (resp->server_time_src != SM_TIME_NONE)
        return;
    if (c->clock_time > 0 && r->sent_hr && now - c->clock_hr <= (uint64_t)SR_CLOCK_MAX_AGE_S * 1000000000u) {
        int64_t d = r->sent_hr >= c->clock_hr
                        ? (int64_t)((r->sent_hr - c->clock_hr) / 1000000000u)
                        : -(int64_t)((c->clock_hr - r->sent_hr + 999999999u) / 1000000000u);
        resp->server_time = c->clock_time + d - 1;
        resp->server_time_src = SM_TIME_ESTIMATE;
    } else if (r->date > 0) {
        resp->server_time = r->date;
        resp->server_time_src = SM_TIME_HTTP_DATE;
    }
}

static void note_status(sr_client *c, sr_req *r);
static void explain_too_big(sr_client *c, sr_req *r, size_t len);

/* A response is decoded: explain, learn from it, deliver it. */
static void decoded(sr_client *c, sr_req *r)
{
    if (r->resp.err.code == OP_ETOOBIG)
        explain_too_big(c, r, r->raw_len);
    note_status(c, r);
    note_time(c, r);
    complete(c, r, r->resp.err.code);
}

/* What a caller reads when an answer does not fit: the limit, and how to
 * raise it. */
static void explain_too_big(sr_client *c, sr_req *r, size_t len)
{
    free(r->resp.err.message);
    if (len)
        r->resp.err.message =
            xasprintf("slurmrestd answer of %zu bytes needs more than %zu bytes to decode (%u x the %zu-byte "
                      "body cap); raise the cap with --slurmrestd-max-body (sr_opts.max_body)",
                      len, c->max_tree, SR_TREE_FACTOR, c->max_body);
    else
        r->resp.err.message = xasprintf("slurmrestd answer larger than the %zu-byte body cap; raise it with "
                                        "--slurmrestd-max-body (sr_opts.max_body)",
                                        c->max_body);
    r->resp.err.code = OP_ETOOBIG;
    log_warn("slurmrestd %s: %s", c->url, r->resp.err.message);
}

static void decode_done(uv_work_t *w, int status);

/* Decode the next queued body on the threadpool. One at a time per client:
 * the memory of a decode (the body, its tree, the model) is bounded by the
 * cap, and two at once would double the bound. */
static void start_decode(sr_client *c)
{
    list_node *n;
    while (c->works == 0 && (n = list_first(&c->decode_q))) {
        sr_req *r = list_entry(n, sr_req, decode_link);
        list_remove(n);
        if (c->closing) {
            free(r->raw);
            r->raw = NULL;
            complete(c, r, OP_ECANCELED);
            continue;
        }
        if (uv_queue_work(c->loop, &r->work, decode_work, decode_done) == 0) {
            c->works++;
            assert(c->works == 1);
            c->stats.offloaded++;
            return;
        }
        decode_work(&r->work);
        free(r->raw);
        r->raw = NULL;
        decoded(c, r);
    }
}

/* Slurm's SLURM_PROTOCOL_AUTHENTICATION_ERROR (slurm_errno.h) */
#define SR_SLURM_EAUTH 1007

/* A token was refused: mint the next one afresh, and tell the owner, whose
 * key may be out of date. */
static void unauthorized(sr_client *c)
{
    c->token_stale = 1;
    if (c->on_unauthorized && !c->closing)
        c->on_unauthorized(c->unauthorized_data);
}

static void note_status(sr_client *c, sr_req *r)
{
    /* A path this version should have is gone: the server behind the URL
     * may now be another Slurm release. Negotiate again next time. */
    if (r->http == 404 && r->resp.err.code == OP_ENOTSUP && !c->forced_version && c->version == r->version) {
        log_warn("slurmrestd %s: %s answered 404; negotiating the API version again", c->url,
                 sm_version_str(r->version));
        c->version = 0;
        c->clock_time = 0; /* and its clock is another's */
    }
    /* A refused token. slurmrestd itself refuses with 401; a token it passes
     * on and slurmctld refuses comes back as HTTP 511 with Slurm's
     * authentication error (1007, seen on 24.11 and 26.05) or, on 22.05's
     * v0.0.38, as HTTP 500 with the generic error (-1). 22.05 gives that
     * same 500 to a list asked with update_time when only the nodes changed
     * (see nodecache.c), which is no refusal; any other counts (the owner's
     * reaction, a read of the key Secret, is cheap and rate-limited). */
    if (r->http == 401 || r->http == 511 || r->resp.err.slurm_errno == SR_SLURM_EAUTH ||
        (r->http == 500 && r->version == SM_V38 && r->update_time == 0 && r->resp.err.slurm_errno == -1))
        unauthorized(c);
}

static void decode_done(uv_work_t *w, int status)
{
    sr_req *r = container_of(w, sr_req, work);
    sr_client *c = r->c;
    assert(c->works == 1);
    c->works--;
    free(r->raw);
    r->raw = NULL;
    if (c->closing) {
        sm_response_free(&r->resp);
        complete(c, r, OP_ECANCELED);
        start_decode(c);
        return;
    }
    decoded(c, r);
    start_decode(c);
}

static void on_http_done(hc_req *hr, int status, const hc_response *resp, void *data)
{
    sr_req *r = data;
    sr_client *c = r->c;
    assert(c->in_http > 0 && !list_is_linked(&r->link));
    c->in_http--;
    if (status < 0) {
        if (status == OP_ETOOBIG && !c->closing) {
            /* Over the cap: an error, never a partial table. The body may
             * have grown to the cap before it was refused (no
             * Content-Length): give that memory back after delivery. */
            explain_too_big(c, r, 0);
            r->raw_len = c->max_body;
        }
        complete(c, r, c->closing ? OP_ECANCELED : status);
        if (c->closing)
            maybe_finish(c);
        return;
    }
    c->stats.bytes_in += resp->body_len;
    if (resp->status == 304)
        c->stats.not_modified++;
    r->http = resp->status;
    const char *date = hc_header_get(resp, "Date");
    r->date = date ? sm_http_date(date) : 0;
    if (resp->body_len >= SR_OFFLOAD_BYTES && !c->closing) {
        /* Taken, not copied: a copy would be one more body's worth of
         * memory at the peak. */
        r->raw = hc_take_body(hr, &r->raw_len);
        if (r->raw) {
            list_insert_tail(&c->decode_q, &r->decode_link);
            start_decode(c);
            return;
        }
    }
    sm_parse_bounded(r->version, r->kind, resp->status, resp->body, resp->body_len, c->max_tree, &r->resp);
    r->raw_len = resp->body_len;
    decoded(c, r);
}

static void fill_write_body(sr_client *c, sr_req *r, buf_t *body, int *rc)
{
    *rc = 0;
    if (r->has_update) {
        sm_node_update u = r->upd;
        u.names = r->op == SM_OP_UPDATE_NODES ? r->arg : NULL;
        *rc = sm_node_update_json(c->version, &u, body);
    } else if (r->has_resv) {
        *rc = sm_resv_desc_json(c->version, &r->resv, body);
    } else if (r->node_conf) {
        *rc = sm_node_create_json(r->node_conf, body);
    }
}

static const char *method_of(enum sm_op op)
{
    switch (op) {
    case SM_OP_UPDATE_NODE:
    case SM_OP_UPDATE_NODES:
    case SM_OP_POST_RESERVATION:
    case SM_OP_CREATE_NODES:
        return "POST";
    case SM_OP_DELETE_NODE:
    case SM_OP_DELETE_RESERVATION:
        return "DELETE";
    default:
        return "GET";
    }
}

static void on_clock(int status, sm_response *resp, void *data)
{
    sr_client *c = data;
    c->clock_syncing = 0;
    if (status < 0 && status != OP_ECANCELED)
        log_debug("slurmrestd %s: GET diag for slurmctld's clock failed: %s", c->url,
                  resp->err.message ? resp->err.message : err_str(status));
}

static int simple(sr_client *c, enum sm_op op, enum sm_kind kind, const char *arg, int64_t update_time,
                  sr_cb cb, void *data);

/* 22.05's lists carry no time: keep a reading of slurmctld's clock no older
 * than SR_CLOCK_MAX_AGE_S, read from diag in the background, so that their
 * answers get an estimate (note_time). The first poll may go without. */
static void maybe_sync_clock(sr_client *c, enum sm_op op)
{
    if (!c->read_clock || (op != SM_OP_GET_NODES && op != SM_OP_GET_JOBS) || c->version >= SM_V40 ||
        c->clock_syncing || c->closing)
        return;
    if (c->clock_time > 0 && uv_hrtime() - c->clock_hr < (uint64_t)SR_CLOCK_MAX_AGE_S * 1000000000u)
        return;
    if (simple(c, SM_OP_DIAG, SM_KIND_DIAG, NULL, 0, on_clock, c) == 0) {
        c->clock_syncing = 1;
        c->stats.clock_reads++;
    }
}

static void send_req(sr_client *c, sr_req *r)
{
    unsigned left = remaining_ms(c, r);
    if (left == 0) {
        complete(c, r, OP_ETIMEOUT);
        return;
    }
    r->version = c->version;
    enum sm_op op = r->op;
    /* Before v0.0.42 a single node is updated at node/{name}. */
    if (op == SM_OP_UPDATE_NODES && !sm_version_has(c->version, SM_OP_UPDATE_NODES) &&
        sm_version_has(c->version, SM_OP_UPDATE_NODE) && hostlist_name_valid(r->arg))
        op = r->op = SM_OP_UPDATE_NODE;
    if (r->has_update && (r->upd.set & SM_UPD_TOPOLOGY) &&
        !sm_version_has(c->version, SM_OP_UPDATE_TOPOLOGY)) {
        complete(c, r, OP_ENOTSUP);
        return;
    }
    buf_t path, body;
    buf_init(&path, 8192);
    buf_init(&body, (size_t)16 << 20);
    const char *arg =
        (op == SM_OP_GET_NODES || op == SM_OP_GET_JOBS || op == SM_OP_PING || op == SM_OP_GET_RESERVATIONS ||
         op == SM_OP_UPDATE_NODES || op == SM_OP_POST_RESERVATION || op == SM_OP_DIAG ||
         op == SM_OP_CREATE_NODES)
            ? NULL
            : r->arg;
    int rc = sm_path(c->version, op, arg, &path);
    if (rc == 0 && r->update_time > 0)
        rc = buf_printf(&path, "?update_time=%" PRId64, r->update_time) < 0 ? OP_ETOOBIG : 0;
    if (rc == 0)
        fill_write_body(c, r, &body, &rc);
    if (rc < 0) {
        buf_free(&path);
        buf_free(&body);
        complete(c, r, rc);
        return;
    }
    const char *tok = token(c);
    if (tok == NULL) {
        buf_free(&path);
        buf_free(&body);
        complete(c, r, OP_ECONFIG);
        return;
    }
    hc_header h[4] = {
        {"X-SLURM-USER-NAME", c->user},
        {"X-SLURM-USER-TOKEN", tok},
        {"Accept", "application/json"},
        {"Content-Type", "application/json"}, /* exactly this: 22.05 refuses a charset parameter */
    };
    int has_body = body.len > 0;
    hc_req_opts o = {
        .method = method_of(op),
        .path = buf_cstr(&path),
        .headers = h,
        .n_headers = has_body ? 4 : 3,
        .body = has_body ? body.data : NULL,
        .body_len = body.len,
        .request_timeout_ms = left,
        .total_timeout_ms = left, /* the caller's bound covers the queue too */
        .on_done = on_http_done,
        .data = r,
    };
    c->in_http++;
    c->stats.requests++;
    log_trace("slurmrestd %s: %s %s", c->url, o.method, o.path);
    r->sent_hr = uv_hrtime();
    hc_request(c->pool, &o);
    maybe_sync_clock(c, op);
    buf_free(&path);
    buf_free(&body);
}

/* ---- negotiation ---- */

static void flush_waiting(sr_client *c, int status)
{
    list_node q;
    list_init(&q);
    list_splice_tail(&q, &c->waiting);
    list_node *n;
    while ((n = list_first(&q))) {
        sr_req *r = list_entry(n, sr_req, link);
        list_remove(n);
        if (status < 0 || r->type == RT_NEGOTIATE_WAIT)
            complete(c, r, status < 0 ? status : 0);
        else
            send_req(c, r);
    }
}

static void on_openapi(hc_req *hr, int status, const hc_response *resp, void *data)
{
    sr_client *c = data;
    assert(c->in_http > 0 && c->negotiating);
    c->in_http--;
    c->negotiating = 0;
    if (c->closing) {
        flush_waiting(c, OP_ECANCELED);
        maybe_finish(c);
        return;
    }
    int rc = status;
    if (rc == 0) {
        c->stats.bytes_in += resp->body_len;
        if (resp->status != 200) {
            sm_response tmp;
            rc = sm_parse(SM_V38, SM_KIND_STATUS, resp->status, resp->body, resp->body_len, &tmp);
            log_warn("slurmrestd %s: GET /openapi/v3 failed: %s", c->url,
                     tmp.err.message ? tmp.err.message : err_str(rc));
            sm_response_free(&tmp);
            if (rc == 0)
                rc = OP_EHTTP;
            if (resp->status == 401)
                unauthorized(c);
        } else {
            cJSON *doc = json_parse(resp->body, resp->body_len, NULL);
            rc = doc ? sm_negotiate(doc) : OP_EPARSE;
            cJSON_Delete(doc);
            if (rc > 0) {
                c->version = rc;
                log_info("slurmrestd %s: using data_parser %s", c->url, sm_version_str(rc));
                rc = 0;
            } else {
                log_warn("slurmrestd %s: no usable API version offered (%s)", c->url, err_str(rc));
            }
        }
    } else {
        log_debug("slurmrestd %s: GET /openapi/v3: %s", c->url, err_str(rc));
    }
    flush_waiting(c, rc);
}

static void start_negotiation(sr_client *c)
{
    if (c->negotiating || c->closing)
        return;
    const char *tok = token(c);
    if (tok == NULL) {
        flush_waiting(c, OP_ECONFIG);
        return;
    }
    c->negotiating = 1;
    hc_header h[3] = {
        {"X-SLURM-USER-NAME", c->user},
        {"X-SLURM-USER-TOKEN", tok},
        {"Accept", "application/json"},
    };
    hc_req_opts o = {
        .method = "GET",
        .path = "/openapi/v3",
        .headers = h,
        .n_headers = 3,
        .request_timeout_ms = c->timeout_ms,
        .on_done = on_openapi,
        .data = c,
    };
    c->in_http++;
    c->stats.requests++;
    c->stats.negotiations++;
    hc_request(c->pool, &o);
}

/* Submit a request: send it now, or after the version is known. */
static int submit(sr_client *c, sr_req *r)
{
    r->c = c;
    r->deadline = uv_now(c->loop) + c->timeout_ms;
    list_init(&r->link);
    c->in_flight++;
    if (c->version) {
        if (r->type == RT_NEGOTIATE_WAIT)
            complete(c, r, 0);
        else
            send_req(c, r);
        return 0;
    }
    list_insert_tail(&c->waiting, &r->link);
    start_negotiation(c);
    return 0;
}

static sr_req *new_req(enum sm_op op, enum sm_kind kind, const char *arg, sr_cb cb, void *data)
{
    sr_req *r = xcalloc(1, sizeof(*r));
    r->type = RT_OP;
    r->op = op;
    r->kind = kind;
    r->arg = arg ? xstrdup(arg) : NULL;
    r->cb = cb;
    r->data = data;
    list_init(&r->link);
    return r;
}

/* ---- public ---- */

int sr_client_new(uv_loop_t *loop, const sr_opts *opts, sr_client **out)
{
    *out = NULL;
    if (!opts->url || !opts->key || opts->key_len == 0)
        return OP_EINVAL;
    if (opts->version && !sm_version_supported(opts->version))
        return OP_EINVAL;
    sr_client *c = xcalloc(1, sizeof(*c));
    c->loop = loop;
    c->url = xstrdup(opts->url);
    c->key = xmalloc(opts->key_len);
    memcpy(c->key, opts->key, opts->key_len);
    c->key_len = opts->key_len;
    c->user = xstrdup(opts->user && opts->user[0] ? opts->user : DEF_USER);
    c->lifetime_s = opts->token_lifetime_s ? opts->token_lifetime_s : DEF_LIFETIME_S;
    c->timeout_ms = opts->timeout_ms ? opts->timeout_ms : DEF_TIMEOUT_MS;
    c->max_body = opts->max_body ? opts->max_body : SR_DEFAULT_MAX_BODY;
    c->max_tree = sr_max_tree(c->max_body);
    c->read_clock = opts->read_clock;
    c->forced_version = opts->version;
    c->version = opts->version;
    c->now = opts->now;
    c->now_data = opts->now_data;
    c->on_unauthorized = opts->on_unauthorized;
    c->unauthorized_data = opts->unauthorized_data;
    list_init(&c->waiting);
    list_init(&c->done);
    list_init(&c->decode_q);
    hc_pool_opts po = {
        .max_conns = opts->max_conns > 0 ? opts->max_conns : DEF_MAX_CONNS,
        .max_body_bytes = c->max_body,
        .connect_timeout_ms = opts->connect_timeout_ms ? opts->connect_timeout_ms : DEF_CONNECT_MS,
        .tls = opts->tls,
    };
    int err = 0;
    c->pool = hc_pool_new(loop, c->url, &po, &err);
    if (c->pool == NULL) {
        free(c->url);
        free(c->key);
        free(c->user);
        free(c);
        return err ? err : OP_EINVAL;
    }
    uv_timer_init(loop, &c->defer);
    c->defer.data = c;
    *out = c;
    return 0;
}

static void on_pool_closed(void *data)
{
    sr_client *c = data;
    c->pool_closed = 1;
    maybe_finish(c);
}

void sr_client_close(sr_client *c, void (*cb)(void *data), void *data)
{
    if (c->closing)
        return;
    c->closing = 1;
    c->close_cb = cb;
    c->close_data = data;
    flush_waiting(c, OP_ECANCELED);
    hc_pool_close(c->pool, on_pool_closed, c);
    c->pool = NULL;
}

int sr_set_key(sr_client *c, const void *key, size_t len)
{
    if (!key || !len)
        return OP_EINVAL;
    if (len == c->key_len && memcmp(key, c->key, len) == 0)
        return 0;
    free(c->key);
    c->key = xmalloc(len);
    memcpy(c->key, key, len);
    c->key_len = len;
    c->token_stale = 1;
    return 0;
}

int sr_version(const sr_client *c)
{
    return c->version;
}

int sr_negotiate(sr_client *c, void (*cb)(int status, int version, void *data), void *data)
{
    if (c->closing)
        return OP_ECANCELED;
    sr_req *r = xcalloc(1, sizeof(*r));
    r->type = RT_NEGOTIATE_WAIT;
    r->ncb = cb;
    r->data = data;
    return submit(c, r);
}

static int simple(sr_client *c, enum sm_op op, enum sm_kind kind, const char *arg, int64_t update_time,
                  sr_cb cb, void *data)
{
    if (c->closing)
        return OP_ECANCELED;
    sr_req *r = new_req(op, kind, arg, cb, data);
    r->update_time = update_time;
    return submit(c, r);
}

int sr_get_nodes(sr_client *c, int64_t update_time, sr_cb cb, void *data)
{
    return simple(c, SM_OP_GET_NODES, SM_KIND_NODES, NULL, update_time, cb, data);
}

int sr_get_node(sr_client *c, const char *name, sr_cb cb, void *data)
{
    if (!name || !*name)
        return OP_EINVAL;
    return simple(c, SM_OP_GET_NODE, SM_KIND_NODE, name, 0, cb, data);
}

int sr_get_jobs(sr_client *c, int64_t update_time, sr_cb cb, void *data)
{
    return simple(c, SM_OP_GET_JOBS, SM_KIND_JOBS, NULL, update_time, cb, data);
}

int sr_ping(sr_client *c, sr_cb cb, void *data)
{
    return simple(c, SM_OP_PING, SM_KIND_PING, NULL, 0, cb, data);
}

int sr_get_diag(sr_client *c, sr_cb cb, void *data)
{
    return simple(c, SM_OP_DIAG, SM_KIND_DIAG, NULL, 0, cb, data);
}

size_t sr_max_tree(size_t max_body)
{
    return max_body > SIZE_MAX / SR_TREE_FACTOR ? SIZE_MAX : max_body * SR_TREE_FACTOR;
}

int sr_get_reservations(sr_client *c, sr_cb cb, void *data)
{
    return simple(c, SM_OP_GET_RESERVATIONS, SM_KIND_RESERVATIONS, NULL, 0, cb, data);
}

int sr_get_reservation(sr_client *c, const char *name, sr_cb cb, void *data)
{
    if (!name || !*name)
        return OP_EINVAL;
    return simple(c, SM_OP_GET_RESERVATION, SM_KIND_RESERVATION, name, 0, cb, data);
}

static char *dup_or_null(const char *s)
{
    return s ? xstrdup(s) : NULL;
}

int sr_update_nodes(sr_client *c, const char *hostlist, const sm_node_update *u, sr_cb cb, void *data)
{
    if (c->closing)
        return OP_ECANCELED;
    if (!hostlist || !*hostlist || !u || !u->set)
        return OP_EINVAL;
    sr_req *r = new_req(SM_OP_UPDATE_NODES, SM_KIND_STATUS, hostlist, cb, data);
    r->has_update = 1;
    r->upd = *u;
    r->upd.names = NULL;
    r->upd.reason = r->upd_str[0] = dup_or_null(u->reason);
    r->upd.comment = r->upd_str[1] = dup_or_null(u->comment);
    r->upd.features = r->upd_str[2] = dup_or_null(u->features);
    r->upd.features_act = r->upd_str[3] = dup_or_null(u->features_act);
    r->upd.topology = r->upd_str[4] = dup_or_null(u->topology);
    return submit(c, r);
}

int sr_delete_node(sr_client *c, const char *name, sr_cb cb, void *data)
{
    if (!name || !*name)
        return OP_EINVAL;
    return simple(c, SM_OP_DELETE_NODE, SM_KIND_STATUS, name, 0, cb, data);
}

int sr_create_nodes(sr_client *c, const char *node_conf, sr_cb cb, void *data)
{
    if (c->closing)
        return OP_ECANCELED;
    if (!node_conf || !*node_conf)
        return OP_EINVAL;
    sr_req *r = new_req(SM_OP_CREATE_NODES, SM_KIND_STATUS, NULL, cb, data);
    r->node_conf = xstrdup(node_conf);
    return submit(c, r);
}

int sr_post_reservation(sr_client *c, const sm_resv_desc *d, sr_cb cb, void *data)
{
    if (c->closing)
        return OP_ECANCELED;
    if (!d || !d->name || !*d->name)
        return OP_EINVAL;
    sr_req *r = new_req(SM_OP_POST_RESERVATION, SM_KIND_STATUS, NULL, cb, data);
    r->has_resv = 1;
    r->resv = *d;
    r->resv.name = r->resv_str[0] = xstrdup(d->name);
    r->resv.users = r->resv_str[1] = dup_or_null(d->users);
    r->resv.node_list = r->resv_str[2] = dup_or_null(d->node_list);
    return submit(c, r);
}

int sr_delete_reservation(sr_client *c, const char *name, sr_cb cb, void *data)
{
    if (!name || !*name)
        return OP_EINVAL;
    return simple(c, SM_OP_DELETE_RESERVATION, SM_KIND_STATUS, name, 0, cb, data);
}

void sr_get_stats(const sr_client *c, sr_stats *out)
{
    *out = c->stats;
    out->in_flight = c->in_flight;
}
