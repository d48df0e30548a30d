/* httpd: HTTP/1.1 server on conn + llhttp. See httpd.h for the contract.
 *
 * One request per connection is in the handler's hands at a time. The
 * parser pauses at the end of every request (on_message_complete returns
 * HPE_PAUSED), the handler runs outside the parser, and parsing resumes at
 * the pause position only when that request is finished. A handler that
 * answers at once therefore costs nothing extra: pipelined requests are
 * parsed straight out of the read buffer, and their responses are packed
 * into one write by conn. A handler that defers its answer holds the
 * pipeline: the unparsed bytes are copied aside (bounded; reading stops
 * when the bound is hit) and parsed after the answer, from the loop.
 *
 * The request object is embedded in the connection and reused, so a
 * steady stream of requests allocates nothing but growth of the header,
 * URL and body buffers.
 */
#include "core/httpd.h"

#include <arpa/inet.h>
#include <assert.h>
#include <ctype.h>
#include <llhttp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/buf.h"
#include "core/conn.h"
#include "core/err.h"
#include "core/list.h"
#include "core/log.h"
#include "core/map.h"
#include "core/mem.h"
#include "core/tls.h"

#define DEF_MAX_HEADER (64 * 1024)
#define DEF_MAX_BODY (3 * 1024 * 1024)
#define DEF_MAX_WQ (64 * 1024 * 1024)
#define DEF_IDLE_MS 120000
#define DEF_REQUEST_MS 30000
#define DEF_PENDING_OUT (1024 * 1024)
#define DEF_MAX_CONNS 1024
#define BODY_RESERVE_CAP (64 * 1024) /* a declared length is reserved up to this; the rest as it arrives */
#define HANDSHAKE_MS 10000
#define LINGER_MS 2000
#define KEEP_BODY_CAP (64 * 1024) /* larger body buffers are freed between requests */

enum rq_state {
    RQ_PARSING, /* being received */
    RQ_HANDLER, /* with the handler, no response started */
    RQ_STREAMING,
    RQ_DONE,
};

typedef struct hs_conn hs_conn;

/* What the connection's one timer measures now (it is armed when the phase
 * changes, never by the bytes of a request, so a client that trickles
 * cannot push a deadline back). */
enum hc_phase {
    PH_NONE,    /* a request is with the handler (or streaming): no deadline */
    PH_IDLE,    /* waiting for a request: idle_timeout_ms */
    PH_REQUEST, /* a request has begun: request_timeout_ms for all of it */
    PH_OUTPUT,  /* not reading: answers wait for the client: idle_timeout_ms */
};

/* Open connections of one peer address (srv->peers). */
typedef struct peer_count {
    int n;
    char ip[64];
} peer_count;

struct hs_req {
    hs_conn *hc;
    int state;
    buf_t url;    /* raw request target */
    buf_t hdr;    /* "name\0value\0" ... */
    size_t *hoff; /* pairs of offsets into hdr */
    size_t nh, hcap;
    size_t name_off, val_off;
    int field_open;
    size_t hdr_bytes; /* request line + headers, against max_header_bytes */
    buf_t body;
    buf_t path;       /* decoded path */
    size_t query_off; /* into url, or (size_t)-1 */
    buf_t params;     /* decoded "key\0val\0" ... */
    size_t *poff;
    size_t np, pcap;
    int params_done;
    const char *method;
    int head;
    int keep_alive;
    int has_body; /* Content-Length > 0 or chunked */
    int reject; /* 413 / 431 / 400 (or on_head's status) decided by a parser callback */
    void *udata;
    void (*on_close)(hs_req *req, void *data);
    void *close_data;
};

struct hs_conn {
    hs_server *srv;
    conn *c;
    list_node link;
    llhttp_t parser;
    hs_req req;
    buf_t in; /* unparsed bytes held while a request is deferred */
    size_t in_off;
    int paused; /* the current request is with the handler */
    int in_dispatch;
    int closing;
    int read_stopped;
    int out_wait;     /* too many answers queued: neither read nor parsed until they drain */
    int phase;        /* enum hc_phase */
    uint64_t since;   /* loop time of the accept or of the last finished request (eviction order) */
    peer_count *peer; /* NULL once closing */
};

struct hs_server {
    uv_loop_t *loop;
    uv_tcp_t listener;
    hs_opts opts;
    tls_config *tls;
    list_node conns;
    int closing;
    int listener_open;
    int n_conns; /* allocated (closing ones included) */
    int n_live;  /* not closing: what the caps count */
    map_t peers; /* ip -> peer_count, live connections */
    int port;
    void (*on_closed)(void *data);
    void *closed_data;
    hs_stats stats;
    buf_t scratch; /* response head being built */
};

static llhttp_settings_t req_settings;
static int settings_ready;

static void process(hs_conn *hc);
static void set_phase(hs_conn *hc, int phase);

/* --- small helpers ------------------------------------------------------- */

static const char *reason(int status)
{
    switch (status) {
    case 100:
        return "Continue";
    case 200:
        return "OK";
    case 201:
        return "Created";
    case 202:
        return "Accepted";
    case 204:
        return "No Content";
    case 304:
        return "Not Modified";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 408:
        return "Request Timeout";
    case 409:
        return "Conflict";
    case 410:
        return "Gone";
    case 413:
        return "Payload Too Large";
    case 415:
        return "Unsupported Media Type";
    case 422:
        return "Unprocessable Entity";
    case 429:
        return "Too Many Requests";
    case 431:
        return "Request Header Fields Too Large";
    case 500:
        return "Internal Server Error";
    case 501:
        return "Not Implemented";
    case 503:
        return "Service Unavailable";
    case 504:
        return "Gateway Timeout";
    default:
        return status < 300 ? "OK" : status < 400 ? "Redirect" : status < 500 ? "Client Error" : "Error";
    }
}

static int hexval(int ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    ch = tolower(ch);
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    return -1;
}

/* Percent-decode s[0..n) onto b; plus_space turns '+' into ' ' (query). */
static int pct_decode(buf_t *b, const char *s, size_t n, int plus_space)
{
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        char ch = s[i];
        if (ch == '%' && i + 2 < n && hexval(s[i + 1]) >= 0 && hexval(s[i + 2]) >= 0) {
            ch = (char)(hexval(s[i + 1]) * 16 + hexval(s[i + 2]));
            i += 2;
        } else if (ch == '+' && plus_space) {
            ch = ' ';
        }
        rc = buf_putc(b, ch);
    }
    return rc;
}

/* --- request lifecycle --------------------------------------------------- */

static void req_init(hs_req *r, hs_conn *hc, const hs_opts *o)
{
    memset(r, 0, sizeof(*r));
    r->hc = hc;
    buf_init(&r->url, o->max_header_bytes);
    buf_init(&r->hdr, o->max_header_bytes + 4096);
    buf_init(&r->body, o->max_body_bytes);
    buf_init(&r->path, o->max_header_bytes);
    buf_init(&r->params, o->max_header_bytes);
    r->query_off = (size_t)-1;
}

/* Forget one request, keep the buffers for the next. */
static void req_reset(hs_req *r)
{
    buf_reset(&r->url);
    buf_reset(&r->hdr);
    if (r->body.cap > KEEP_BODY_CAP)
        buf_free(&r->body);
    else
        buf_reset(&r->body);
    buf_reset(&r->path);
    buf_reset(&r->params);
    r->nh = r->np = 0;
    r->field_open = 0;
    r->hdr_bytes = 0;
    r->query_off = (size_t)-1;
    r->params_done = 0;
    r->method = NULL;
    r->head = 0;
    r->keep_alive = 0;
    r->has_body = 0;
    r->reject = 0;
    r->udata = NULL;
    r->on_close = NULL;
    r->close_data = NULL;
    r->state = RQ_PARSING;
}

static void req_free(hs_req *r)
{
    buf_free(&r->url);
    buf_free(&r->hdr);
    buf_free(&r->body);
    buf_free(&r->path);
    buf_free(&r->params);
    free(r->hoff);
    free(r->poff);
}

/* --- parser callbacks ---------------------------------------------------- */

static hs_req *preq(llhttp_t *p)
{
    return &((hs_conn *)p->data)->req;
}

static int count_hdr(llhttp_t *p, hs_req *r, size_t n)
{
    r->hdr_bytes += n;
    if (r->hdr_bytes > ((hs_conn *)p->data)->srv->opts.max_header_bytes) {
        r->reject = 431;
        llhttp_set_error_reason(p, "request headers too large");
        return HPE_USER;
    }
    return 0;
}

static int on_message_begin(llhttp_t *p)
{
    hs_req *r = preq(p);
    if (r->state != RQ_PARSING)
        req_reset(r);
    /* The request deadline starts with its first byte and stays put. */
    set_phase(p->data, PH_REQUEST);
    return 0;
}

static int on_url(llhttp_t *p, const char *at, size_t n)
{
    hs_req *r = preq(p);
    if (count_hdr(p, r, n) || buf_append(&r->url, at, n) != 0) {
        r->reject = 431;
        return HPE_USER;
    }
    return 0;
}

static int on_header_field(llhttp_t *p, const char *at, size_t n)
{
    hs_req *r = preq(p);
    if (count_hdr(p, r, n))
        return HPE_USER;
    if (!r->field_open) {
        r->field_open = 1;
        r->name_off = r->hdr.len;
    }
    if (buf_append(&r->hdr, at, n) != 0) {
        r->reject = 431;
        return HPE_USER;
    }
    return 0;
}

static int on_header_field_complete(llhttp_t *p)
{
    hs_req *r = preq(p);
    if (!r->field_open) { /* empty name cannot happen, but keep offsets sane */
        r->name_off = r->hdr.len;
    }
    r->field_open = 0;
    if (buf_putc(&r->hdr, '\0') != 0) {
        r->reject = 431;
        return HPE_USER;
    }
    r->val_off = r->hdr.len;
    return 0;
}

static int on_header_value(llhttp_t *p, const char *at, size_t n)
{
    hs_req *r = preq(p);
    if (count_hdr(p, r, n) || buf_append(&r->hdr, at, n) != 0) {
        r->reject = 431;
        return HPE_USER;
    }
    return 0;
}

static int on_header_value_complete(llhttp_t *p)
{
    hs_req *r = preq(p);
    if (count_hdr(p, r, 4) || buf_putc(&r->hdr, '\0') != 0) {
        r->reject = 431;
        return HPE_USER;
    }
    if (r->nh == r->hcap) {
        r->hcap = r->hcap ? r->hcap * 2 : 16;
        r->hoff = xrealloc(r->hoff, r->hcap * 2 * sizeof(size_t));
    }
    assert(r->nh < r->hcap && r->name_off < r->val_off && r->val_off < r->hdr.len);
    r->hoff[2 * r->nh] = r->name_off;
    r->hoff[2 * r->nh + 1] = r->val_off;
    r->nh++;
    return 0;
}

static void write_simple(hs_conn *hc, int status, int keep_alive);

static int on_headers_complete(llhttp_t *p)
{
    hs_conn *hc = p->data;
    hs_req *r = &hc->req;
    r->method = llhttp_method_name((llhttp_method_t)p->method);
    r->head = p->method == HTTP_HEAD;
    /* Split the target into decoded path and raw query. */
    const char *u = buf_cstr(&r->url);
    size_t ulen = r->url.len;
    const char *q = memchr(u, '?', ulen);
    const char *hash = memchr(u, '#', ulen);
    size_t plen = q ? (size_t)(q - u) : hash ? (size_t)(hash - u) : ulen;
    if (q) {
        r->query_off = (size_t)(q - u) + 1;
        if (hash && hash > q)
            r->url.data[hash - u] = '\0'; /* drop a fragment */
    }
    if (pct_decode(&r->path, u, plen, 0) != 0) {
        r->reject = 431;
        return HPE_USER;
    }

    uint64_t want = p->content_length;
    int has_body = (p->flags & F_CHUNKED) || ((p->flags & F_CONTENT_LENGTH) && want > 0);
    r->has_body = has_body;
    hs_server *srv = hc->srv;
    if (srv->opts.on_head) {
        /* Before the body: a request refused here costs its headers only. */
        int status = srv->opts.on_head(r, srv->opts.data);
        if (status) {
            srv->stats.head_refused++;
            r->reject = status >= 400 && status < 600 ? status : 400;
            llhttp_set_error_reason(p, "refused before the body");
            return HPE_USER;
        }
    }
    if ((p->flags & F_CONTENT_LENGTH) && want > srv->opts.max_body_bytes) {
        r->reject = 413;
        llhttp_set_error_reason(p, "request body too large");
        return HPE_USER;
    }
    if ((p->flags & F_CONTENT_LENGTH) && want > 0) {
        /* A declared length costs nothing until its bytes come. */
        size_t reserve = want < BODY_RESERVE_CAP ? (size_t)want : BODY_RESERVE_CAP;
        if (buf_reserve(&r->body, reserve) != 0) {
            r->reject = 413;
            return HPE_USER;
        }
    }
    if (has_body && p->http_major == 1 && p->http_minor >= 1) {
        const char *exp = hs_req_header(r, "Expect");
        if (exp && strcasecmp(exp, "100-continue") == 0) {
            /* Every earlier response is already queued (one request at a
             * time), so the interim response goes out in order. */
            static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
            (void)conn_write(hc->c, cont, sizeof(cont) - 1);
        }
    }
    return 0;
}

static int on_body(llhttp_t *p, const char *at, size_t n)
{
    hs_req *r = preq(p);
    if (buf_append(&r->body, at, n) != 0) {
        r->reject = 413;
        llhttp_set_error_reason(p, "request body too large");
        return HPE_USER;
    }
    return 0;
}

static int on_message_complete(llhttp_t *p)
{
    hs_req *r = preq(p);
    /* The parser runs only while no request is with the handler. */
    assert(r->state == RQ_PARSING && !((hs_conn *)p->data)->paused);
    r->keep_alive = llhttp_should_keep_alive(p);
    r->state = RQ_HANDLER;
    /* Hand the request over outside the parser. */
    return HPE_PAUSED;
}

static void settings_init(void)
{
    if (settings_ready)
        return;
    llhttp_settings_init(&req_settings);
    req_settings.on_message_begin = on_message_begin;
    req_settings.on_url = on_url;
    req_settings.on_header_field = on_header_field;
    req_settings.on_header_field_complete = on_header_field_complete;
    req_settings.on_header_value = on_header_value;
    req_settings.on_header_value_complete = on_header_value_complete;
    req_settings.on_headers_complete = on_headers_complete;
    req_settings.on_body = on_body;
    req_settings.on_message_complete = on_message_complete;
    settings_ready = 1;
}

/* --- connection ---------------------------------------------------------- */

void hs_peer_ip(const char *peer, char *out, size_t cap)
{
    const char *end = strrchr(peer, ':');
    size_t n = end ? (size_t)(end - peer) : strlen(peer);
    if (n >= 2 && peer[0] == '[' && peer[n - 1] == ']') {
        peer++;
        n -= 2;
    }
    if (n >= cap)
        n = cap - 1;
    memcpy(out, peer, n);
    out[n] = '\0';
}

static void peer_release(hs_conn *hc)
{
    peer_count *pc = hc->peer;
    assert(pc == NULL || (pc->n > 0 && map_get(&hc->srv->peers, pc->ip) == pc));
    hc->peer = NULL;
    if (pc && --pc->n == 0) {
        map_del(&hc->srv->peers, pc->ip);
        free(pc);
    }
}

/* The one way a connection ends. linger < 0: now (also when a graceful end
 * is already lingering); otherwise flush what was answered, then close
 * within linger ms. The caps stop counting it at once. */
static void close_hc(hs_conn *hc, int linger, const char *why)
{
    if (hc->closing) {
        if (linger < 0)
            conn_close(hc->c);
        return;
    }
    assert(hc->srv->n_live > 0);
    hc->closing = 1;
    hc->srv->n_live--;
    peer_release(hc);
    if (why)
        log_debug("httpd %s: closing: %s", conn_peer(hc->c), why);
    if (linger < 0)
        conn_close(hc->c);
    else
        conn_end(hc->c, (unsigned)linger);
}

static void set_phase(hs_conn *hc, int phase)
{
    assert(phase >= PH_NONE && phase <= PH_OUTPUT);
    if (hc->closing || hc->phase == phase)
        return;
    hc->phase = phase;
    const hs_opts *o = &hc->srv->opts;
    unsigned ms = phase == PH_REQUEST ? o->request_timeout_ms : phase == PH_NONE ? 0 : o->idle_timeout_ms;
    if (ms)
        conn_timer_start(hc->c, ms);
    else
        conn_timer_stop(hc->c);
}

/* Nothing is under way: the idle deadline runs (from now, unless it already
 * ran: bytes that start no request, such as empty lines, do not restart it). */
static void settle(hs_conn *hc)
{
    if (!hc->paused && !hc->out_wait && hc->phase == PH_NONE)
        set_phase(hc, PH_IDLE);
}

/* Read unless answers wait for the client, or the input held aside while a
 * request is with the handler is past the header cap already. */
static void update_reading(hs_conn *hc)
{
    if (hc->closing)
        return;
    size_t pending = hc->in.len - hc->in_off;
    int stop = hc->out_wait || (hc->paused && pending > hc->srv->opts.max_header_bytes);
    if (stop && !hc->read_stopped) {
        hc->read_stopped = 1;
        conn_read_stop(hc->c);
    } else if (!stop && hc->read_stopped) {
        hc->read_stopped = 0;
        conn_read_start(hc->c);
    }
}

/* Too many answers queued to this client: stop taking its requests until
 * half of them were sent. Without this a client that pipelines requests
 * and never reads makes the server queue answers without end. */
static int out_blocked(hs_conn *hc)
{
    if (hc->out_wait)
        return 1;
    size_t cap = hc->srv->opts.max_pending_out;
    if (conn_queued(hc->c) <= cap)
        return 0;
    hc->out_wait = 1;
    hc->srv->stats.reads_paused++;
    set_phase(hc, PH_OUTPUT);
    update_reading(hc);
    conn_notify_drain(hc->c, cap / 2);
    return 1;
}

/* Answer a request the parser refused, then close. */
static void write_simple(hs_conn *hc, int status, int keep_alive)
{
    char head[256];
    const char *msg = reason(status);
    int n = snprintf(head, sizeof(head),
                     "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n%s\r\n%s\n",
                     status, msg, strlen(msg) + 1, keep_alive ? "" : "Connection: close\r\n", msg);
    (void)conn_write(hc->c, head, (size_t)n);
}

static void reject(hs_conn *hc, int status)
{
    log_debug("httpd %s: rejecting request with %d", conn_peer(hc->c), status);
    write_simple(hc, status, 0);
    close_hc(hc, LINGER_MS, NULL);
}

/* A request was finished (responded, stream ended or aborted). */
static void req_finished(hs_req *r)
{
    hs_conn *hc = r->hc;
    assert(r->state == RQ_HANDLER || r->state == RQ_STREAMING);
    r->state = RQ_DONE;
    if (hc->closing)
        return;
    hc->since = uv_now(conn_loop(hc->c));
    if (!r->keep_alive) {
        close_hc(hc, LINGER_MS, NULL);
        return;
    }
    if (!hc->in_dispatch && hc->paused) {
        /* Resume the pipeline from the loop, never from inside hs_*. */
        conn_defer(hc->c);
    }
}

static void dispatch(hs_conn *hc)
{
    hs_server *srv = hc->srv;
    hs_req *r = &hc->req;
    /* Each request reaches the handler once, and never from inside the
     * handler of another. */
    assert(!hc->in_dispatch && hc->paused && r->state == RQ_HANDLER);
    srv->stats.requests++;
    set_phase(hc, PH_NONE);
    hc->in_dispatch = 1;
    srv->opts.handler(r, srv->opts.data);
    hc->in_dispatch = 0;
}

/* Parse from p[0..n); returns how many bytes were consumed. Stops when a
 * request stays with the handler, answers pile up unread, or the
 * connection ends. */
static size_t parse(hs_conn *hc, const char *p, size_t n)
{
    size_t done = 0;
    while (done < n && !hc->closing && !hc->paused && !out_blocked(hc)) {
        llhttp_errno_t err = llhttp_execute(&hc->parser, p + done, n - done);
        if (err == HPE_OK) {
            done = n;
            break;
        }
        if (err == HPE_PAUSED_UPGRADE) {
            /* The request asked to switch protocols (or was a CONNECT). It
             * has been answered; what follows is not HTTP/1.1, which is all
             * we speak, so the connection ends here. */
            close_hc(hc, 0, NULL);
            return n;
        }
        if (err != HPE_PAUSED) {
            hs_req *r = &hc->req;
            int status = r->reject ? r->reject : 400;
            if (!r->reject)
                log_debug("httpd %s: bad request: %s (%s)", conn_peer(hc->c), llhttp_errno_name(err),
                          llhttp_get_error_reason(&hc->parser));
            reject(hc, status);
            return n;
        }
        const char *pos = llhttp_get_error_pos(&hc->parser);
        assert(pos >= p + done && pos <= p + n);
        done = (size_t)(pos - p);
        llhttp_resume(&hc->parser);
        hc->paused = 1;
        dispatch(hc);
        if (hc->closing)
            return n;
        if (hc->req.state == RQ_DONE)
            hc->paused = 0; /* answered at once: keep going in place */
    }
    return done;
}

/* Keep p[0..n) for later, compacting so that a long pipeline costs linear
 * time overall. */
static void hold(hs_conn *hc, const char *p, size_t n)
{
    assert(hc->in_off <= hc->in.len);
    if (n == 0)
        return;
    if (hc->in_off && hc->in_off >= hc->in.len / 2) {
        buf_consume(&hc->in, hc->in_off);
        hc->in_off = 0;
    }
    if (buf_append(&hc->in, p, n) != 0) {
        /* The bound is the header and body caps together: a client this far
         * ahead of a deferred response is not an HTTP client we serve (and
         * an error response now would jump the queue). */
        close_hc(hc, -1, "too far ahead of its answers");
        return;
    }
    update_reading(hc);
}

static void process(hs_conn *hc)
{
    while (!hc->closing && !hc->paused && !out_blocked(hc) && hc->in.len > hc->in_off) {
        size_t used = parse(hc, hc->in.data + hc->in_off, hc->in.len - hc->in_off);
        if (hc->closing)
            return;
        hc->in_off += used;
        assert(hc->in_off <= hc->in.len);
    }
    if (hc->closing)
        return;
    if (hc->in_off >= hc->in.len) {
        buf_reset(&hc->in);
        hc->in_off = 0;
    }
    update_reading(hc);
    settle(hc);
}

static void on_read(conn *c, ssize_t nread, const char *bytes)
{
    hs_conn *hc = conn_data(c);
    if (hc->closing)
        return;
    if (nread < 0) {
        if (hc->paused) {
            /* The client went away while its request was being handled:
             * close so that on_close reaches the handler. */
            close_hc(hc, -1, NULL);
        } else if (nread == UV_EOF && hc->req.state != RQ_PARSING) {
            close_hc(hc, 0, NULL); /* flush what was answered, then close */
        } else {
            close_hc(hc, -1, NULL);
        }
        return;
    }
    if (hc->paused || hc->out_wait || hc->in.len > hc->in_off) {
        hold(hc, bytes, (size_t)nread);
        if (!hc->paused && !hc->out_wait)
            process(hc);
        return;
    }
    size_t used = parse(hc, bytes, (size_t)nread);
    if (hc->closing)
        return;
    if (used < (size_t)nread)
        hold(hc, bytes + used, (size_t)nread - used);
    settle(hc);
}

static void on_defer(conn *c)
{
    hs_conn *hc = conn_data(c);
    if (hc->closing || hc->req.state != RQ_DONE)
        return;
    hc->paused = 0;
    process(hc);
}

/* Half of the queued answers went out: take requests again. */
static void on_drain(conn *c)
{
    hs_conn *hc = conn_data(c);
    if (hc->closing || !hc->out_wait)
        return;
    assert(hc->srv->stats.reads_paused > 0);
    hc->out_wait = 0;
    hc->srv->stats.reads_paused--;
    set_phase(hc, PH_NONE);
    process(hc);
}

static void on_timer(conn *c)
{
    hs_conn *hc = conn_data(c);
    if (hc->paused)
        return; /* a request is being handled: not idle */
    hc->srv->stats.timeouts++;
    switch (hc->phase) {
    case PH_REQUEST:
        /* Answered, for an honest but slow client; the close does not wait
         * for a client that does not read. */
        write_simple(hc, 408, 0);
        close_hc(hc, 0, "request not complete in time");
        break;
    case PH_OUTPUT:
        close_hc(hc, -1, "answers left unread too long");
        break;
    default:
        close_hc(hc, -1, "idle timeout");
        break;
    }
}

static void maybe_free_server(hs_server *srv);

static void on_conn_close(conn *c)
{
    hs_conn *hc = conn_data(c);
    hs_server *srv = hc->srv;
    hs_req *r = &hc->req;
    assert(hc->closing && hc->peer == NULL && srv->n_conns > 0);
    if (!hc->closing) { /* not through close_hc: cannot happen, keep the counts right anyway */
        hc->closing = 1;
        srv->n_live--;
        peer_release(hc);
    }
    if (hc->out_wait)
        srv->stats.reads_paused--;
    if (r->state == RQ_STREAMING)
        srv->stats.open_streams--;
    if ((r->state == RQ_HANDLER || r->state == RQ_STREAMING) && r->on_close) {
        r->state = RQ_DONE;
        r->on_close(r, r->close_data);
    }
    list_remove(&hc->link);
    srv->n_conns--;
    srv->stats.open_conns--;
    req_free(r);
    buf_free(&hc->in);
    free(hc);
    maybe_free_server(srv);
}

static const conn_cbs hs_conn_cbs = {
    .on_read = on_read,
    .on_timer = on_timer,
    .on_defer = on_defer,
    .on_close = on_conn_close,
    .on_drain = on_drain,
};

/* The connection that has waited longest for its next request, of one peer
 * (pc) or of all (NULL). One with the handler or streaming is never taken:
 * that would cut a request off. */
static hs_conn *oldest_waiting(hs_server *srv, const peer_count *pc)
{
    hs_conn *best = NULL;
    list_node *pos;
    list_foreach(pos, &srv->conns)
    {
        hs_conn *hc = list_entry(pos, hs_conn, link);
        if (hc->closing || hc->paused || hc->req.state == RQ_STREAMING || (pc && hc->peer != pc))
            continue;
        if (best == NULL || hc->since < best->since)
            best = hc;
    }
    return best;
}

/* Make room for a new connection from pc (NULL: a new peer). 0, or -1
 * when a cap is reached and nothing can be taken. */
static int make_room(hs_server *srv, const peer_count *pc)
{
    if (pc && pc->n >= srv->opts.max_conns_per_peer) {
        hs_conn *victim = oldest_waiting(srv, pc);
        if (victim == NULL)
            return -1;
        srv->stats.evicted++;
        close_hc(victim, -1, "its peer's connection cap: a newer connection takes its place");
    }
    if (srv->n_live >= srv->opts.max_conns) {
        hs_conn *victim = oldest_waiting(srv, NULL);
        if (victim == NULL)
            return -1;
        srv->stats.evicted++;
        close_hc(victim, -1, "the connection cap: a newer connection takes its place");
    }
    return 0;
}

static void on_connection(uv_stream_t *server, int status)
{
    hs_server *srv = server->data;
    if (status < 0 || srv->closing) {
        log_warn("httpd: accept failed: %s", err_str(status));
        return;
    }
    hs_conn *hc = xcalloc(1, sizeof(*hc));
    int err = 0;
    unsigned hs_ms = HANDSHAKE_MS;
    if (srv->opts.idle_timeout_ms && srv->opts.idle_timeout_ms < hs_ms)
        hs_ms = srv->opts.idle_timeout_ms;
    if (srv->opts.request_timeout_ms && srv->opts.request_timeout_ms < hs_ms)
        hs_ms = srv->opts.request_timeout_ms;
    hc->c = conn_accept(server, srv->tls, hs_ms, &hs_conn_cbs, hc, &err);
    if (!hc->c) {
        log_warn("httpd: accept failed: %s", err_str(err));
        free(hc);
        return;
    }
    hc->srv = srv;
    hc->since = uv_now(srv->loop);
    list_init(&hc->link);
    list_insert_tail(&srv->conns, &hc->link);
    llhttp_init(&hc->parser, HTTP_REQUEST, &req_settings);
    hc->parser.data = hc;
    req_init(&hc->req, hc, &srv->opts);
    buf_init(&hc->in, srv->opts.max_header_bytes + srv->opts.max_body_bytes + 65536);
    srv->n_conns++;
    srv->stats.connections++;
    srv->stats.open_conns++;

    char ip[sizeof(((peer_count *)0)->ip)];
    hs_peer_ip(conn_peer(hc->c), ip, sizeof(ip));
    peer_count *pc = map_get(&srv->peers, ip);
    int room = make_room(srv, pc);
    pc = map_get(&srv->peers, ip); /* an eviction may have freed it */
    if (room != 0) {
        /* Every connection in the way is mid-request: this one waits for
         * none of them. */
        srv->stats.refused++;
        log_debug("httpd %s: connection cap reached (%d open, %d from %s): refused", conn_peer(hc->c),
                  srv->n_live, pc ? pc->n : 0, ip);
        hc->closing = 1; /* never counted */
        write_simple(hc, 503, 0);
        conn_end(hc->c, 0);
        return;
    }
    if (pc == NULL) {
        pc = xcalloc(1, sizeof(*pc));
        memcpy(pc->ip, ip, sizeof(ip));
        map_put(&srv->peers, pc->ip, pc);
    }
    pc->n++;
    hc->peer = pc;
    srv->n_live++;
    conn_read_start(hc->c);
    set_phase(hc, PH_IDLE);
}

/* --- server -------------------------------------------------------------- */

static void maybe_free_server(hs_server *srv)
{
    if (!srv->closing || srv->listener_open || srv->n_conns > 0)
        return;
    assert(list_empty(&srv->conns) && srv->n_live == 0 && srv->peers.count == 0);
    void (*cb)(void *) = srv->on_closed;
    void *data = srv->closed_data;
    tls_config_unref(srv->tls);
    buf_free(&srv->scratch);
    map_free(&srv->peers); /* empty: every connection released its peer */
    free(srv);
    if (cb)
        cb(data);
}

static tls_config *server_tls(const hs_tls_opts *t, int *rc)
{
    tls_server_opts to = {
        .cert_pem = t->cert_pem,
        .cert_len = t->cert_len,
        .key_pem = t->key_pem,
        .key_len = t->key_len,
        .client_ca_pem = t->client_ca_pem,
        .client_ca_len = t->client_ca_len,
        .require_client_cert = t->require_client_cert,
    };
    return tls_server_config_new(&to, rc);
}

int hs_set_tls(hs_server *srv, const hs_tls_opts *tls)
{
    int rc = 0;
    if (srv->tls == NULL || tls == NULL)
        return OP_EINVAL;
    tls_config *cfg = server_tls(tls, &rc);
    if (cfg == NULL)
        return rc;
    /* Each connection holds its own reference (conn.c), so the ones made
     * with the old certificate keep it until they close. */
    tls_config_unref(srv->tls);
    srv->tls = cfg;
    return 0;
}

static void listener_closed(uv_handle_t *h)
{
    hs_server *srv = h->data;
    srv->listener_open = 0;
    maybe_free_server(srv);
}

hs_server *hs_listen(uv_loop_t *loop, const char *host, int port, const hs_opts *opts, int *err)
{
    settings_init();
    hs_server *srv = xcalloc(1, sizeof(*srv));
    srv->loop = loop;
    srv->opts = *opts;
    srv->opts.tls = NULL;
    if (!srv->opts.max_header_bytes)
        srv->opts.max_header_bytes = DEF_MAX_HEADER;
    if (!srv->opts.max_body_bytes)
        srv->opts.max_body_bytes = DEF_MAX_BODY;
    if (!srv->opts.max_write_queue)
        srv->opts.max_write_queue = DEF_MAX_WQ;
    if (!srv->opts.idle_timeout_ms)
        srv->opts.idle_timeout_ms = DEF_IDLE_MS;
    if (!srv->opts.max_pending_out)
        srv->opts.max_pending_out = DEF_PENDING_OUT;
    if (!srv->opts.request_timeout_ms)
        srv->opts.request_timeout_ms = DEF_REQUEST_MS;
    if (srv->opts.max_conns <= 0)
        srv->opts.max_conns = DEF_MAX_CONNS;
    if (srv->opts.max_conns_per_peer <= 0 || srv->opts.max_conns_per_peer > srv->opts.max_conns)
        srv->opts.max_conns_per_peer = srv->opts.max_conns;
    list_init(&srv->conns);
    map_init(&srv->peers);
    buf_init(&srv->scratch, BUF_UNLIMITED);
    int rc = 0;
    if (!opts->handler) {
        *err = OP_EINVAL;
        buf_free(&srv->scratch);
        free(srv);
        return NULL;
    }
    if (opts->tls) {
        srv->tls = server_tls(opts->tls, &rc);
        if (!srv->tls) {
            *err = rc;
            buf_free(&srv->scratch);
            free(srv);
            return NULL;
        }
    }
    uv_tcp_init(loop, &srv->listener);
    srv->listener.data = srv;
    srv->listener_open = 1;

    union {
        struct sockaddr sa;
        struct sockaddr_in in4;
        struct sockaddr_in6 in6;
        struct sockaddr_storage ss;
    } addr;
    const char *h = host && *host ? host : "0.0.0.0";
    if (strcmp(h, "localhost") == 0)
        h = "127.0.0.1";
    if (uv_ip4_addr(h, port, &addr.in4) != 0 && uv_ip6_addr(h, port, &addr.in6) != 0)
        rc = OP_EINVAL;
    if (rc == 0)
        rc = uv_tcp_bind(&srv->listener, &addr.sa, 0);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&srv->listener, 511, on_connection);
    if (rc == 0) {
        int len = sizeof(addr.ss);
        rc = uv_tcp_getsockname(&srv->listener, &addr.sa, &len);
        if (rc == 0)
            srv->port = ntohs(addr.sa.sa_family == AF_INET6 ? addr.in6.sin6_port : addr.in4.sin_port);
    }
    if (rc != 0) {
        *err = rc;
        /* The handle is initialised: free through the close path. */
        srv->closing = 1;
        uv_close((uv_handle_t *)&srv->listener, listener_closed);
        return NULL;
    }
    return srv;
}

int hs_get_only(hs_req *req, void *data)
{
    (void)data;
    const char *m = hs_req_method(req);
    if (strcmp(m, "GET") != 0 && strcmp(m, "HEAD") != 0)
        return 405;
    return hs_req_has_body(req) ? 413 : 0;
}

void hs_opts_get_only(hs_opts *o)
{
    /* Scrapers and probes send a few hundred bytes of headers and read
     * what they asked for; nothing here needs more. */
    memset(o, 0, sizeof(*o));
    o->max_header_bytes = 16 * 1024;
    o->max_body_bytes = 1; /* 0 would mean the default; hs_get_only refuses any body first */
    o->max_pending_out = 256 * 1024;
    o->idle_timeout_ms = 60000;
    o->request_timeout_ms = 10000;
    o->max_conns = 128;
    o->max_conns_per_peer = 32;
    o->on_head = hs_get_only;
}

int hs_port(const hs_server *srv)
{
    return srv->port;
}

void hs_drop_connections(hs_server *srv)
{
    list_node *pos, *tmp;
    list_foreach_safe(pos, tmp, &srv->conns)
    {
        hs_conn *hc = list_entry(pos, hs_conn, link);
        close_hc(hc, -1, NULL);
    }
}

void hs_close(hs_server *srv, void (*on_closed)(void *data), void *data)
{
    if (srv->closing)
        return;
    srv->closing = 1;
    srv->on_closed = on_closed;
    srv->closed_data = data;
    uv_close((uv_handle_t *)&srv->listener, listener_closed);
    hs_drop_connections(srv);
}

void hs_server_stats(const hs_server *srv, hs_stats *out)
{
    *out = srv->stats;
    out->queued_out = 0;
    const list_node *pos;
    list_foreach(pos, &srv->conns)
    {
        const hs_conn *hc = list_entry(pos, hs_conn, link);
        out->queued_out += conn_queued(hc->c);
    }
}

/* --- request accessors --------------------------------------------------- */

const char *hs_req_method(const hs_req *req)
{
    return req->method ? req->method : "";
}

const char *hs_req_path(const hs_req *req)
{
    return buf_cstr(&req->path);
}

const char *hs_req_query(const hs_req *req)
{
    if (req->query_off == (size_t)-1)
        return "";
    return req->url.data + req->query_off;
}

static void parse_params(hs_req *r)
{
    r->params_done = 1;
    const char *q = hs_req_query(r);
    while (*q) {
        const char *amp = strchr(q, '&');
        size_t n = amp ? (size_t)(amp - q) : strlen(q);
        if (n) {
            const char *eq = memchr(q, '=', n);
            size_t kn = eq ? (size_t)(eq - q) : n;
            size_t koff = r->params.len;
            if (pct_decode(&r->params, q, kn, 1) || buf_putc(&r->params, '\0'))
                return;
            size_t voff = r->params.len;
            if ((eq && pct_decode(&r->params, eq + 1, n - kn - 1, 1)) || buf_putc(&r->params, '\0'))
                return;
            if (r->np == r->pcap) {
                r->pcap = r->pcap ? r->pcap * 2 : 8;
                r->poff = xrealloc(r->poff, r->pcap * 2 * sizeof(size_t));
            }
            r->poff[2 * r->np] = koff;
            r->poff[2 * r->np + 1] = voff;
            r->np++;
        }
        q += n;
        if (*q == '&')
            q++;
    }
}

const char *hs_req_param(hs_req *req, const char *name)
{
    if (!req->params_done)
        parse_params(req);
    for (size_t i = 0; i < req->np; i++) {
        if (strcmp(req->params.data + req->poff[2 * i], name) == 0)
            return req->params.data + req->poff[2 * i + 1];
    }
    return NULL;
}

const char *hs_req_header(const hs_req *req, const char *name)
{
    for (size_t i = 0; i < req->nh; i++) {
        if (strcasecmp(req->hdr.data + req->hoff[2 * i], name) == 0)
            return req->hdr.data + req->hoff[2 * i + 1];
    }
    return NULL;
}

const char *hs_req_body(const hs_req *req, size_t *len)
{
    if (len)
        *len = req->body.len;
    return buf_cstr(&req->body);
}

int hs_req_has_body(const hs_req *req)
{
    return req->has_body;
}

const char *hs_req_client_cn(const hs_req *req)
{
    return conn_peer_cn(req->hc->c);
}

const char *hs_req_peer(const hs_req *req)
{
    return conn_peer(req->hc->c);
}

void hs_req_set_data(hs_req *req, void *data)
{
    req->udata = data;
}

void *hs_req_get_data(const hs_req *req)
{
    return req->udata;
}

void hs_req_on_close(hs_req *req, void (*cb)(hs_req *req, void *data), void *data)
{
    req->on_close = cb;
    req->close_data = data;
}

/* --- responses ----------------------------------------------------------- */

static int write_head(hs_req *r, int status, const char *ctype, const char *extra, const char *framing)
{
    hs_server *srv = r->hc->srv;
    buf_t *b = &srv->scratch;
    buf_reset(b);
    int rc = buf_printf(b, "HTTP/1.1 %d %s\r\n", status, reason(status));
    if (rc == 0 && ctype && *ctype)
        rc = buf_printf(b, "Content-Type: %s\r\n", ctype);
    if (rc == 0)
        rc = buf_puts(b, framing);
    if (rc == 0 && !r->keep_alive)
        rc = buf_puts(b, "Connection: close\r\n");
    if (rc == 0 && extra && *extra)
        rc = buf_puts(b, extra);
    if (rc == 0)
        rc = buf_puts(b, "\r\n");
    if (rc == 0)
        rc = conn_write(r->hc->c, b->data, b->len);
    if (b->cap > 65536)
        buf_free(b);
    return rc;
}

void hs_respond(hs_req *req, int status, const char *content_type, const char *extra_headers,
                const char *body, size_t len)
{
    /* Exactly one answer per request (httpd.h); a release build logs and
     * ignores a second one. */
    assert(req->state == RQ_HANDLER);
    if (req->state != RQ_HANDLER) {
        log_error("httpd: hs_respond on a request in state %d (ignored)", req->state);
        return;
    }
    if (!req->hc->closing) {
        char framing[64];
        int bodyless = status == 204 || status == 304 || (status >= 100 && status < 200);
        if (bodyless)
            framing[0] = '\0';
        else
            snprintf(framing, sizeof(framing), "Content-Length: %zu\r\n", len);
        if (write_head(req, status, content_type, extra_headers, framing) == 0 && len && !req->head &&
            !bodyless)
            (void)conn_write(req->hc->c, body, len);
    }
    req_finished(req);
}

void hs_stream_begin(hs_req *req, int status, const char *content_type, const char *extra_headers)
{
    assert(req->state == RQ_HANDLER);
    if (req->state != RQ_HANDLER) {
        log_error("httpd: hs_stream_begin on a request in state %d (ignored)", req->state);
        return;
    }
    req->state = RQ_STREAMING;
    req->hc->srv->stats.open_streams++;
    if (!req->hc->closing)
        (void)write_head(req, status, content_type, extra_headers, "Transfer-Encoding: chunked\r\n");
}

int hs_stream_write(hs_req *req, const char *bytes, size_t len)
{
    if (req->state != RQ_STREAMING)
        return OP_EINVAL;
    hs_conn *hc = req->hc;
    if (hc->closing)
        return OP_ECLOSED;
    if (len == 0 || req->head)
        return 0;
    if (conn_queued(hc->c) + len > hc->srv->opts.max_write_queue) {
        log_warn("httpd %s: client too slow (%zu bytes queued), dropping it", conn_peer(hc->c),
                 conn_queued(hc->c));
        close_hc(hc, -1, NULL);
        return OP_ETOOBIG;
    }
    char head[24];
    int n = snprintf(head, sizeof(head), "%zx\r\n", len);
    int rc = conn_write(hc->c, head, (size_t)n);
    if (rc == 0)
        rc = conn_write(hc->c, bytes, len);
    if (rc == 0)
        rc = conn_write(hc->c, "\r\n", 2);
    return rc;
}

void hs_stream_end(hs_req *req)
{
    if (req->state != RQ_STREAMING)
        return;
    assert(req->hc->srv->stats.open_streams > 0);
    req->hc->srv->stats.open_streams--;
    if (!req->hc->closing && !req->head)
        (void)conn_write(req->hc->c, "0\r\n\r\n", 5);
    req_finished(req);
}

void hs_stream_abort(hs_req *req)
{
    if (req->state != RQ_STREAMING)
        return;
    req->hc->srv->stats.open_streams--;
    req->state = RQ_DONE; /* finished by the handler: no on_close */
    close_hc(req->hc, -1, NULL);
}
