/* conn: plain or TLS connections over uv_tcp_t. See conn.h for the contract.
 *
 * Layout of the machinery:
 *  - one heap uv_tcp_t per socket (heap, not embedded, because a client
 *    that falls back to the next address must close one socket and open
 *    another while the conn lives on), two timers (internal: connect,
 *    handshake, end-of-life; user: conn_timer_start) and a uv_prepare that
 *    flushes coalesced writes and runs deferred work before the loop blocks;
 *  - a write queue of entries (pointer, length, release) drained by the
 *    transport: plain TCP hands all of them to one uv_write (writev); TLS
 *    encrypts them into one ciphertext block and writes that;
 *  - a transport vtable with the same semantics for both.
 *
 * Reads go into a per-thread buffer (libuv calls alloc_cb and read_cb back
 * to back, and the loop is single-threaded), so an idle connection holds no
 * read memory. TLS decrypts into a second per-thread buffer. Ciphertext that
 * cannot be consumed because the user stopped reading is copied aside.
 */
#include "core/conn.h"

#include <assert.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/resolve.h"

#ifndef CONN_READ_BUF_SIZE /* tests shrink it to force partial records and leftovers */
#define CONN_READ_BUF_SIZE (64 * 1024)
#endif
#define READ_BUF_SIZE CONN_READ_BUF_SIZE
#define PACK_BLOCK (16 * 1024)
#define END_DRAIN_MS 30000 /* bound on flushing before a graceful close */

enum conn_state {
    CS_RESOLVING,
    CS_CONNECTING,
    CS_HANDSHAKE,
    CS_OPEN,
    CS_FAILED, /* connect failed: waiting for conn_close */
    CS_ENDING, /* conn_end: flushing, then shutdown, then lingering */
    CS_CLOSING,
};

static const char *const state_names[] = {"resolving", "connecting", "handshake", "open",
                                          "failed",    "ending",     "closing"};

typedef struct wentry {
    const char *p;
    size_t len;
    size_t cap; /* > 0: a packing block owned by the conn (p is malloc'd) */
    void (*release)(void *arg);
    void *arg;
} wentry;

typedef struct wreq {
    uv_write_t req;
    struct conn *c;
    size_t bytes;
    size_t n;
    wentry e[];
} wreq;

struct transport {
    const char *name;
    /* Ciphertext or plaintext arrived from the socket. */
    void (*on_bytes)(struct conn *c, const char *p, size_t n);
    /* Hand queued bytes to the socket. */
    void (*flush)(struct conn *c);
    /* Deliver what is buffered inside the transport (after read_start). */
    void (*drain)(struct conn *c);
    /* Last words before shutdown (close_notify). */
    void (*end)(struct conn *c);
};

struct conn {
    uv_loop_t *loop;
    const conn_cbs *cbs;
    void *data;
    const struct transport *tp;
    int state;
    int server;
    int closing;      /* the close path started */
    int ended;        /* conn_end called: no user callbacks but on_close */
    int reading;      /* the user wants on_read */
    int uv_reading;   /* uv_read_start is active */
    int rd_done;      /* the read side ended (EOF or error) */
    int end_reported; /* on_read got its n < 0 */
    int end_code;     /* that n */
    int wr_failed;    /* a write failed: conn_write refuses */
    int connect_reported;
    int pending_err; /* connect error to report from the timer */
    int defer_wanted;
    int drain_armed; /* conn_notify_drain: on_drain once conn_queued() <= drain_low */
    size_t drain_low;
    int drain_wanted;
    int prep_active;
    int shutdown_started;
    int handles; /* open handles (timers, prepare, tcp) */
    int in_api;  /* conn_* calls under way: no user callback may run inside one (conn.h) */
    int gai_active;
    uv_tcp_t *tcp;
    uv_timer_t timer;
    uv_timer_t utimer;
    uv_prepare_t prep;
    rsv_req *gai; /* the lookup in flight (gai_active) */
    uv_connect_t creq;
    uv_shutdown_t sreq;
    struct addrinfo *ai, *ai_next;
    char *host;
    int port;
    unsigned timeout_ms;
    unsigned linger_ms;
    /* write queue: entries [qh, qn) */
    wentry *q;
    size_t qh, qn, qcap;
    size_t q_bytes;        /* bytes in the queue */
    size_t inflight_bytes; /* handed to uv_write, not yet completed */
    size_t tls_off;        /* encrypted prefix of q[qh] after a blocked write */
    /* TLS */
    tls_config *tls_cfg;
    tls_session *tls;
    char *saved; /* ciphertext put aside while reading is stopped */
    size_t saved_len, saved_off;
    char peer[64];
    int peer_done;
    unsigned long long bytes_in, bytes_out;
};

static _Thread_local char read_buf[READ_BUF_SIZE];
static _Thread_local char plain_buf[READ_BUF_SIZE];

static void conn_flush(conn *c);
static void finish_close(conn *c);
static void schedule_prep(conn *c);

/* --- state --------------------------------------------------------------- */

#define set_state(c, s) set_state_at((c), (s), __LINE__)
/* The transitions conn.h describes: a server conn starts open (and goes
 * back to the handshake when it is TLS), a client one resolving; failed
 * and ending are reached only from the states that lead to them; closing
 * is final. */
static void set_state_at(conn *c, int s, int line)
{
    assert(s >= CS_RESOLVING && s <= CS_CLOSING);
    if (c->state == s)
        return;
    assert(c->state != CS_CLOSING);
    assert(s != CS_OPEN || c->state == CS_CONNECTING || c->state == CS_HANDSHAKE);
    assert(s != CS_HANDSHAKE || c->state == CS_CONNECTING || (c->server && c->state == CS_OPEN));
    assert(s != CS_FAILED || (!c->server && c->state < CS_OPEN));
    assert(s != CS_ENDING || c->state == CS_OPEN);
    log_trace("conn %p %s -> %s (line %d)", (void *)c, state_names[c->state], state_names[s], line);
    c->state = s;
}

static void handle_closed(uv_handle_t *h)
{
    conn *c = h->data;
    assert(c->handles > 0);
    if (h == (uv_handle_t *)c->tcp)
        c->tcp = NULL;
    if (h->type == UV_TCP)
        free(h);
    c->handles--;
    finish_close(c);
}

static void close_tcp(conn *c)
{
    if (c->tcp && !uv_is_closing((uv_handle_t *)c->tcp)) {
        uv_close((uv_handle_t *)c->tcp, handle_closed);
        c->uv_reading = 0;
    }
}

/* --- reading ------------------------------------------------------------- */

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)h;
    (void)suggested;
    buf->base = read_buf;
    buf->len = sizeof(read_buf);
}

static void read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

static void uv_reading_update(conn *c)
{
    if (!c->tcp || c->closing || uv_is_closing((uv_handle_t *)c->tcp))
        return;
    int want = !c->rd_done && (c->reading || c->state == CS_HANDSHAKE || c->state == CS_ENDING);
    if (want && !c->uv_reading) {
        int rc = uv_read_start((uv_stream_t *)c->tcp, alloc_cb, read_cb);
        if (rc == 0)
            c->uv_reading = 1;
    } else if (!want && c->uv_reading) {
        uv_read_stop((uv_stream_t *)c->tcp);
        c->uv_reading = 0;
    }
}

/* The read side is over: tell the user once (now if reading, else when
 * reading starts again). */
static void read_end(conn *c, int code)
{
    assert(code < 0);
    if (c->rd_done)
        return;
    c->rd_done = 1;
    c->end_code = code;
    uv_reading_update(c);
    if (c->reading && !c->ended && !c->closing) {
        c->end_reported = 1;
        assert(c->in_api == 0);
        c->cbs->on_read(c, code, NULL);
    }
}

static void deliver(conn *c, const char *p, size_t n)
{
    assert(n <= READ_BUF_SIZE);
    if (n == 0 || !c->reading || c->closing || c->ended)
        return;
    assert(c->in_api == 0);
    c->cbs->on_read(c, (ssize_t)n, p);
}

static void connect_failed(conn *c, int err)
{
    /* A server conn's failures end its read side instead (handshake_failed). */
    assert(!c->server);
    assert(err < 0);
    if (c->connect_reported || c->closing)
        return;
    c->connect_reported = 1;
    set_state(c, CS_FAILED);
    uv_timer_stop(&c->timer);
    if (c->gai_active) {
        rsv_abandon(c->gai);
        c->gai_active = 0;
    }
    if (c->tcp && c->uv_reading) {
        uv_read_stop((uv_stream_t *)c->tcp);
        c->uv_reading = 0;
    }
    assert(c->in_api == 0);
    c->cbs->on_connect(c, err);
}

static void became_open(conn *c)
{
    assert(c->state == CS_CONNECTING || c->state == CS_HANDSHAKE);
    assert(!c->closing);
    set_state(c, CS_OPEN);
    uv_timer_stop(&c->timer);
    if (!c->server && !c->connect_reported) {
        c->connect_reported = 1;
        assert(c->in_api == 0);
        c->cbs->on_connect(c, 0);
        if (c->closing)
            return;
    }
    uv_reading_update(c);
    if (c->qn > c->qh)
        schedule_prep(c);
}

static void handshake_failed(conn *c, int err)
{
    if (c->server)
        read_end(c, err);
    else
        connect_failed(c, err);
}

static void read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    conn *c = s->data;
    (void)buf;
    if (nread == 0 || c->closing || (uv_tcp_t *)s != c->tcp)
        return;
    assert(nread < 0 || (buf->base == read_buf && (size_t)nread <= sizeof(read_buf)));
    if (nread < 0) {
        if (c->state == CS_ENDING) {
            conn_close(c);
        } else if (c->state == CS_HANDSHAKE) {
            handshake_failed(c, nread == UV_EOF ? OP_ECLOSED : (int)nread);
        } else {
            if (c->tls && nread == UV_EOF)
                log_debug("conn %p: TCP EOF without close_notify", (void *)c);
            read_end(c, (int)nread);
        }
        return;
    }
    c->bytes_in += (unsigned long long)nread;
    if (c->state == CS_ENDING)
        return; /* lingering: discard */
    c->tp->on_bytes(c, buf->base, (size_t)nread);
}

/* --- writing ------------------------------------------------------------- */

static void release_entry(wentry *e)
{
    if (e->cap)
        free((void *)e->p);
    else if (e->release)
        e->release(e->arg);
}

static void drop_queue(conn *c)
{
    assert(c->qh <= c->qn && c->qn <= c->qcap);
    for (size_t i = c->qh; i < c->qn; i++)
        release_entry(&c->q[i]);
    c->qh = c->qn = 0;
    c->q_bytes = 0;
    c->tls_off = 0;
}

static wentry *queue_push(conn *c)
{
    if (c->qh == c->qn)
        c->qh = c->qn = 0;
    if (c->qn == c->qcap) {
        if (c->qh > 0) {
            memmove(c->q, c->q + c->qh, (c->qn - c->qh) * sizeof(wentry));
            c->qn -= c->qh;
            c->qh = 0;
        } else {
            c->qcap = c->qcap ? c->qcap * 2 : 8;
            c->q = xrealloc(c->q, c->qcap * sizeof(wentry));
        }
    }
    assert(c->qn < c->qcap);
    wentry *e = &c->q[c->qn++];
    memset(e, 0, sizeof(*e));
    return e;
}

static void write_failed(conn *c, int err)
{
    if (c->wr_failed)
        return;
    c->wr_failed = 1;
    drop_queue(c);
    log_debug("conn %p: write failed: %s", (void *)c, err_str(err));
    if (c->state == CS_ENDING) {
        conn_close(c);
        return;
    }
    if (c->state == CS_HANDSHAKE) {
        handshake_failed(c, err);
        return;
    }
    read_end(c, err);
}

static void check_drain(conn *c)
{
    if (!c->drain_armed || c->closing || c->ended || c->q_bytes + c->inflight_bytes > c->drain_low)
        return;
    c->drain_armed = 0;
    assert(c->in_api == 0);
    if (c->cbs->on_drain)
        c->cbs->on_drain(c);
}

static void write_cb(uv_write_t *req, int status)
{
    wreq *w = container_of(req, wreq, req);
    conn *c = w->c;
    assert(c->inflight_bytes >= w->bytes);
    c->inflight_bytes -= w->bytes;
    if (status == 0)
        c->bytes_out += w->bytes;
    for (size_t i = 0; i < w->n; i++)
        release_entry(&w->e[i]);
    free(w);
    if (status < 0 && status != UV_ECANCELED && !c->closing)
        write_failed(c, status);
    check_drain(c);
}

/* Hand entries [from, to) to one uv_write; they leave the queue. */
static void submit(conn *c, const wentry *e, size_t n)
{
    if (n == 0)
        return;
    wreq *w = xmalloc(sizeof(*w) + n * sizeof(wentry));
    uv_buf_t small[16];
    uv_buf_t *bufs = n <= ARRAY_SIZE(small) ? small : xmalloc(n * sizeof(uv_buf_t));
    w->c = c;
    w->n = n;
    w->bytes = 0;
    for (size_t i = 0; i < n; i++) {
        w->e[i] = e[i];
        bufs[i] = uv_buf_init((char *)e[i].p, (unsigned)e[i].len);
        w->bytes += e[i].len;
    }
    int rc = c->tcp ? uv_write(&w->req, (uv_stream_t *)c->tcp, bufs, (unsigned)n, write_cb) : UV_EBADF;
    if (bufs != small)
        free(bufs);
    if (rc < 0) {
        for (size_t i = 0; i < n; i++)
            release_entry(&w->e[i]);
        free(w);
        write_failed(c, rc);
        return;
    }
    c->inflight_bytes += w->bytes;
}

static int queue_check(conn *c)
{
    if (c->closing || c->ended || c->wr_failed || c->state == CS_FAILED)
        return OP_ECLOSED;
    return 0;
}

static int conn_write_in(conn *c, const void *p, size_t len)
{
    assert(p != NULL || len == 0);
    int rc = queue_check(c);
    if (rc || len == 0)
        return rc;
    wentry *last = c->qn > c->qh ? &c->q[c->qn - 1] : NULL;
    /* Pack into the last block when it has room, unless TLS already
     * encrypted part of it (then it must not change under mbedtls). */
    if (last && last->cap && last->cap - last->len >= len && !(c->tls && c->qn - 1 == c->qh && c->tls_off)) {
        memcpy((char *)last->p + last->len, p, len);
        last->len += len;
        assert(last->len <= last->cap);
    } else {
        wentry *e = queue_push(c);
        e->cap = len < PACK_BLOCK ? PACK_BLOCK : len;
        char *blk = xmalloc(e->cap);
        memcpy(blk, p, len);
        e->p = blk;
        e->len = len;
    }
    c->q_bytes += len;
    if (c->state == CS_OPEN || c->state == CS_ENDING)
        schedule_prep(c);
    return 0;
}

/* The calls that do work count themselves in c->in_api, and every user
 * callback site asserts it is 0: a callback run from inside a conn_* call
 * (conn.h forbids it) trips a debug build at once. */
int conn_write(conn *c, const void *p, size_t len)
{
    c->in_api++;
    int rc = conn_write_in(c, p, len);
    c->in_api--;
    return rc;
}

static int conn_write_ref_in(conn *c, const char *p, size_t len, void (*release)(void *arg), void *arg)
{
    assert(p != NULL || len == 0);
    int rc = queue_check(c);
    if (rc || len == 0) {
        if (release)
            release(arg);
        return rc;
    }
    wentry *e = queue_push(c);
    e->p = p;
    e->len = len;
    e->release = release;
    e->arg = arg;
    c->q_bytes += len;
    if (c->state == CS_OPEN || c->state == CS_ENDING)
        schedule_prep(c);
    return 0;
}

int conn_write_ref(conn *c, const char *p, size_t len, void (*release)(void *arg), void *arg)
{
    c->in_api++;
    int rc = conn_write_ref_in(c, p, len, release, arg);
    c->in_api--;
    return rc;
}

size_t conn_queued(const conn *c)
{
    return c->q_bytes + c->inflight_bytes;
}

void conn_notify_drain(conn *c, size_t low)
{
    if (c->closing || c->ended)
        return;
    c->drain_armed = 1;
    c->drain_low = low;
    schedule_prep(c); /* checked after the next flush */
}

static void conn_flush(conn *c)
{
    if (c->closing || c->wr_failed || (c->state != CS_OPEN && c->state != CS_ENDING))
        return;
    c->tp->flush(c);
}

/* --- plain TCP transport ------------------------------------------------- */

static void tcp_on_bytes(conn *c, const char *p, size_t n)
{
    deliver(c, p, n);
}

static void tcp_flush(conn *c)
{
    assert(c->qh <= c->qn && c->tls_off == 0);
    size_t n = c->qn - c->qh;
    if (n == 0)
        return;
    wentry *e = c->q + c->qh;
    c->qh = c->qn = 0;
    c->q_bytes = 0;
    submit(c, e, n);
}

static void tcp_drain(conn *c)
{
    (void)c;
}

static void tcp_end(conn *c)
{
    (void)c;
}

static const struct transport tcp_transport = {"tcp", tcp_on_bytes, tcp_flush, tcp_drain, tcp_end};

/* --- TLS transport ------------------------------------------------------- */

static void tls_send_cipher(conn *c)
{
    size_t len;
    char *p = tls_sess_take_output(c->tls, &len);
    if (!p)
        return;
    wentry e = {.p = p, .len = len, .release = free, .arg = p};
    submit(c, &e, 1);
}

/* Decrypt and deliver until mbedtls wants more input or the user stops. */
static void tls_read_all(conn *c)
{
    size_t have = 0;
    while (c->reading && !c->closing && !c->ended && !c->rd_done) {
        int r = tls_sess_read(c->tls, plain_buf + have, sizeof(plain_buf) - have);
        if (r > 0) {
            have += (size_t)r;
            if (have < sizeof(plain_buf))
                continue;
        }
        if (have) {
            size_t n = have;
            have = 0;
            deliver(c, plain_buf, n);
            if (r > 0)
                continue;
        }
        if (r >= 0)
            break; /* 0: mbedtls wants more ciphertext */
        read_end(c, r);
        break;
    }
}

/* Keep unconsumed ciphertext when we stop early (reading stopped). */
static void tls_keep_leftover(conn *c)
{
    const char *p;
    size_t left = tls_sess_input_left(c->tls, &p);
    if (c->saved && p >= c->saved && p <= c->saved + c->saved_len) {
        c->saved_off = (size_t)(p - c->saved);
        assert(c->saved_off <= c->saved_len);
        if (c->saved_off == c->saved_len) {
            free(c->saved);
            c->saved = NULL;
            c->saved_len = c->saved_off = 0;
        }
    } else if (left) {
        free(c->saved);
        c->saved = xmalloc(left);
        memcpy(c->saved, p, left);
        c->saved_len = left;
        c->saved_off = 0;
    }
    tls_sess_set_input(c->tls, NULL, 0);
}

static void tls_pump(conn *c)
{
    if (!tls_sess_handshake_done(c->tls)) {
        int r = tls_sess_handshake(c->tls);
        tls_send_cipher(c);
        if (r == TLS_AGAIN) {
            tls_keep_leftover(c);
            return;
        }
        if (r < 0) {
            tls_sess_set_input(c->tls, NULL, 0);
            handshake_failed(c, r);
            return;
        }
        log_trace("conn %p: TLS handshake done alpn=%s", (void *)c,
                  tls_sess_alpn(c->tls) ? tls_sess_alpn(c->tls) : "-");
        became_open(c);
        if (c->closing) {
            tls_sess_set_input(c->tls, NULL, 0);
            return;
        }
    }
    tls_read_all(c);
    if (!c->closing) {
        tls_send_cipher(c); /* alerts, renegotiation refusals */
        tls_keep_leftover(c);
    }
}

static void tls_on_bytes(conn *c, const char *p, size_t n)
{
    if (c->saved) {
        /* Older ciphertext first: append and feed from the saved copy. */
        size_t left = c->saved_len - c->saved_off;
        char *nb = xmalloc(left + n);
        memcpy(nb, c->saved + c->saved_off, left);
        memcpy(nb + left, p, n);
        free(c->saved);
        c->saved = nb;
        c->saved_len = left + n;
        c->saved_off = 0;
        tls_sess_set_input(c->tls, c->saved, c->saved_len);
    } else {
        tls_sess_set_input(c->tls, p, n);
    }
    tls_pump(c);
}

static void tls_flush(conn *c)
{
    while (c->qn > c->qh) {
        wentry *e = &c->q[c->qh];
        /* A fully encrypted entry leaves the queue at once (below). */
        assert(c->tls_off < e->len);
        int r = tls_sess_write(c->tls, e->p + c->tls_off, e->len - c->tls_off);
        if (r == 0)
            break; /* retried later with the same pointer and length */
        if (r < 0) {
            tls_send_cipher(c);
            write_failed(c, r);
            return;
        }
        assert((size_t)r <= e->len - c->tls_off && (size_t)r <= c->q_bytes);
        c->tls_off += (size_t)r;
        c->q_bytes -= (size_t)r;
        if (c->tls_off == e->len) {
            wentry done = *e;
            c->qh++;
            c->tls_off = 0;
            release_entry(&done);
        }
    }
    if (c->qh == c->qn)
        c->qh = c->qn = 0;
    tls_send_cipher(c);
}

static void tls_drain(conn *c)
{
    if (!tls_sess_handshake_done(c->tls))
        return;
    if (c->saved)
        tls_sess_set_input(c->tls, c->saved + c->saved_off, c->saved_len - c->saved_off);
    tls_pump(c);
}

static void tls_end(conn *c)
{
    tls_sess_close_notify(c->tls);
    tls_send_cipher(c);
}

static const struct transport tls_transport = {"tls", tls_on_bytes, tls_flush, tls_drain, tls_end};

/* --- prepare: coalesced flush and deferred work -------------------------- */

static void prep_cb(uv_prepare_t *h)
{
    conn *c = h->data;
    assert(c->prep_active);
    uv_prepare_stop(h);
    c->prep_active = 0;
    if (c->closing)
        return;
    if (c->defer_wanted) {
        c->defer_wanted = 0;
        assert(c->in_api == 0);
        if (!c->ended && c->cbs->on_defer)
            c->cbs->on_defer(c);
        if (c->closing)
            return;
    }
    if (c->drain_wanted) {
        c->drain_wanted = 0;
        if (c->reading && !c->ended) {
            if (c->rd_done && !c->end_reported) {
                c->end_reported = 1;
                assert(c->in_api == 0);
                c->cbs->on_read(c, c->end_code, NULL);
                if (c->closing)
                    return;
            } else if (!c->rd_done && c->state == CS_OPEN) {
                c->tp->drain(c);
                if (c->closing)
                    return;
            }
        }
    }
    conn_flush(c);
    check_drain(c);
}

static void schedule_prep(conn *c)
{
    if (c->prep_active || c->closing)
        return;
    c->prep_active = 1;
    uv_prepare_start(&c->prep, prep_cb);
}

void conn_defer(conn *c)
{
    if (c->closing || c->ended)
        return;
    c->defer_wanted = 1;
    schedule_prep(c);
}

/* --- timers -------------------------------------------------------------- */

static void timer_cb(uv_timer_t *t)
{
    conn *c = t->data;
    if (c->closing)
        return;
    switch (c->state) {
    case CS_RESOLVING:
    case CS_CONNECTING:
        connect_failed(c, c->pending_err ? c->pending_err : OP_ETIMEOUT);
        break;
    case CS_HANDSHAKE:
        log_debug("conn %p: TLS handshake timed out", (void *)c);
        handshake_failed(c, OP_ETIMEOUT);
        break;
    case CS_ENDING:
        conn_close(c);
        break;
    default:
        break;
    }
}

static void utimer_cb(uv_timer_t *t)
{
    conn *c = t->data;
    assert(c->in_api == 0);
    if (!c->closing && !c->ended && c->cbs->on_timer)
        c->cbs->on_timer(c);
}

void conn_timer_start(conn *c, unsigned ms)
{
    if (c->closing || c->ended)
        return;
    uv_timer_start(&c->utimer, utimer_cb, ms, 0);
}

void conn_timer_stop(conn *c)
{
    if (!c->closing)
        uv_timer_stop(&c->utimer);
}

/* --- construction -------------------------------------------------------- */

static conn *conn_alloc(uv_loop_t *loop, const conn_cbs *cbs, void *data)
{
    conn *c = xcalloc(1, sizeof(*c));
    c->loop = loop;
    c->cbs = cbs;
    c->data = data;
    c->tp = &tcp_transport;
    uv_timer_init(loop, &c->timer);
    uv_timer_init(loop, &c->utimer);
    uv_prepare_init(loop, &c->prep);
    c->timer.data = c->utimer.data = c->prep.data = c;
    c->handles = 3;
    return c;
}

static int new_tcp(conn *c)
{
    c->tcp = xmalloc(sizeof(*c->tcp));
    int rc = uv_tcp_init(c->loop, c->tcp);
    if (rc < 0) {
        free(c->tcp);
        c->tcp = NULL;
        return rc;
    }
    c->tcp->data = c;
    c->handles++;
    return 0;
}

static int start_tls(conn *c, const char *host)
{
    int err = 0;
    c->tls = tls_sess_new(c->tls_cfg, host, &err);
    if (!c->tls)
        return err;
    c->tp = &tls_transport;
    return 0;
}

static void try_connect(conn *c);

static void connect_cb(uv_connect_t *req, int status)
{
    conn *c = req->data;
    if (c->closing || status == UV_ECANCELED || c->state != CS_CONNECTING)
        return;
    if (status < 0) {
        log_debug("conn %p: connect to %s:%d failed: %s", (void *)c, c->host, c->port, err_str(status));
        if (c->ai_next) {
            close_tcp(c);
            c->tcp = NULL;
            try_connect(c);
            return;
        }
        connect_failed(c, status);
        return;
    }
    uv_tcp_nodelay(c->tcp, 1);
    uv_tcp_keepalive(c->tcp, 1, 60);
    if (c->tls) {
        set_state(c, CS_HANDSHAKE);
        uv_reading_update(c);
        tls_pump(c); /* ClientHello */
        return;
    }
    became_open(c);
}

static int connect_addr(conn *c, const struct sockaddr *sa)
{
    int rc = new_tcp(c);
    if (rc < 0)
        return rc;
    c->creq.data = c;
    return uv_tcp_connect(&c->creq, c->tcp, sa, connect_cb);
}

/* Try the remaining resolved addresses in order until one connect starts. */
static void try_connect(conn *c)
{
    int rc = UV_EADDRNOTAVAIL;
    while (c->ai_next) {
        struct addrinfo *ai = c->ai_next;
        c->ai_next = ai->ai_next;
        rc = connect_addr(c, ai->ai_addr);
        if (rc == 0)
            return;
        close_tcp(c);
        c->tcp = NULL;
    }
    connect_failed(c, rc);
}

static void gai_cb(int status, struct addrinfo *res, void *data)
{
    conn *c = data;
    /* An abandoned lookup never calls back (core/resolve.h), and both
     * conn_close and connect_failed abandon it. */
    assert(c->gai_active && c->gai != NULL);
    c->gai_active = 0;
    c->gai = NULL;
    if (c->closing || c->state != CS_RESOLVING) {
        if (res)
            freeaddrinfo(res);
        finish_close(c);
        return;
    }
    if (status < 0) {
        connect_failed(c, status);
        return;
    }
    c->ai = res;
    c->ai_next = res;
    set_state(c, CS_CONNECTING);
    try_connect(c);
}

/* Report an error found inside conn_connect from the loop instead. */
static void fail_soon(conn *c, int err)
{
    c->pending_err = err;
    uv_timer_start(&c->timer, timer_cb, 0, 0);
}

static void connect_begin(conn *c, const conn_connect_opts *o)
{
    c->state = CS_RESOLVING;
    c->host = xstrdup(o->host ? o->host : "");
    c->port = o->port;
    c->timeout_ms = o->timeout_ms;
    /* Strip brackets from an IPv6 literal. */
    size_t hl = strlen(c->host);
    if (hl >= 2 && c->host[0] == '[' && c->host[hl - 1] == ']') {
        memmove(c->host, c->host + 1, hl - 2);
        c->host[hl - 2] = '\0';
    }
    if (o->tls) {
        c->tls_cfg = tls_config_ref(o->tls);
        int rc = tls_config_is_server(o->tls) ? OP_EINVAL : start_tls(c, c->host);
        if (rc) {
            fail_soon(c, rc);
            return;
        }
    }
    if (!*c->host || o->port <= 0 || o->port > 65535) {
        fail_soon(c, OP_EINVAL);
        return;
    }
    if (o->timeout_ms)
        uv_timer_start(&c->timer, timer_cb, o->timeout_ms, 0);

    union {
        struct sockaddr sa;
        struct sockaddr_in in4;
        struct sockaddr_in6 in6;
    } addr;
    if (uv_ip4_addr(c->host, o->port, &addr.in4) == 0 || uv_ip6_addr(c->host, o->port, &addr.in6) == 0) {
        /* Numeric: no resolver, no threadpool. */
        set_state(c, CS_CONNECTING);
        int rc = connect_addr(c, &addr.sa);
        if (rc < 0) {
            close_tcp(c);
            c->tcp = NULL;
            fail_soon(c, rc);
        }
        return;
    }
    char port[16];
    snprintf(port, sizeof(port), "%d", o->port);
    struct addrinfo hints;
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_ADDRCONFIG;
    int rc = rsv_lookup(c->loop, c->host, port, &hints, gai_cb, c, &c->gai);
    if (rc < 0)
        fail_soon(c, rc);
    else
        c->gai_active = 1;
}

conn *conn_connect(uv_loop_t *loop, const conn_connect_opts *o, const conn_cbs *cbs, void *data)
{
    conn *c = conn_alloc(loop, cbs, data);
    c->in_api++;
    connect_begin(c, o);
    c->in_api--;
    return c;
}

conn *conn_accept(uv_stream_t *server, tls_config *tls, unsigned handshake_timeout_ms, const conn_cbs *cbs,
                  void *data, int *err)
{
    conn *c = conn_alloc(server->loop, cbs, data);
    c->server = 1;
    c->state = CS_OPEN;
    c->host = xstrdup("");
    c->closing = 0;
    int rc = new_tcp(c);
    if (rc == 0)
        rc = uv_accept(server, (uv_stream_t *)c->tcp);
    if (rc == 0 && tls) {
        c->tls_cfg = tls_config_ref(tls);
        rc = start_tls(c, NULL);
    }
    if (rc < 0) {
        /* Nothing was reported to the user: close silently. */
        static const conn_cbs silent = {0};
        c->cbs = &silent;
        conn_close(c);
        *err = rc;
        return NULL;
    }
    uv_tcp_nodelay(c->tcp, 1);
    if (c->tls) {
        set_state(c, CS_HANDSHAKE);
        if (handshake_timeout_ms)
            uv_timer_start(&c->timer, timer_cb, handshake_timeout_ms, 0);
        uv_reading_update(c);
    }
    return c;
}

/* --- accessors ----------------------------------------------------------- */

void *conn_data(const conn *c)
{
    return c->data;
}

void conn_set_data(conn *c, void *data)
{
    c->data = data;
}

uv_loop_t *conn_loop(const conn *c)
{
    return c->loop;
}

int conn_is_tls(const conn *c)
{
    return c->tls != NULL;
}

int conn_is_closing(const conn *c)
{
    return c->closing || c->ended;
}

const char *conn_peer_cn(conn *c)
{
    return c->tls ? tls_sess_peer_cn(c->tls) : NULL;
}

const char *conn_peer(conn *c)
{
    if (c->peer_done || !c->tcp)
        return c->peer;
    c->peer_done = 1;
    struct sockaddr_storage ss;
    int len = sizeof(ss);
    if (uv_tcp_getpeername(c->tcp, (struct sockaddr *)&ss, &len) != 0)
        return c->peer;
    char ip[INET6_ADDRSTRLEN + 1] = "";
    if (ss.ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;
        uv_ip4_name(a, ip, sizeof(ip));
        snprintf(c->peer, sizeof(c->peer), "%s:%u", ip, (unsigned)ntohs(a->sin_port));
    } else if (ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ss;
        uv_ip6_name(a, ip, sizeof(ip));
        snprintf(c->peer, sizeof(c->peer), "[%s]:%u", ip, (unsigned)ntohs(a->sin6_port));
    }
    return c->peer;
}

unsigned long long conn_bytes_in(const conn *c)
{
    return c->bytes_in;
}

unsigned long long conn_bytes_out(const conn *c)
{
    return c->bytes_out;
}

/* --- read control -------------------------------------------------------- */

static void conn_read_start_in(conn *c)
{
    if (c->closing || c->ended || c->reading)
        return;
    c->reading = 1;
    if (c->rd_done) {
        if (!c->end_reported) {
            c->drain_wanted = 1;
            schedule_prep(c);
        }
        return;
    }
    if (c->state == CS_OPEN) {
        uv_reading_update(c);
        if (c->tls && (c->saved || tls_sess_pending(c->tls))) {
            c->drain_wanted = 1;
            schedule_prep(c);
        }
    }
}

void conn_read_start(conn *c)
{
    c->in_api++;
    conn_read_start_in(c);
    c->in_api--;
}

void conn_read_stop(conn *c)
{
    if (!c->reading)
        return;
    c->reading = 0;
    if (c->state == CS_OPEN)
        uv_reading_update(c);
}

/* --- ending and closing -------------------------------------------------- */

static void shutdown_cb(uv_shutdown_t *req, int status)
{
    conn *c = req->data;
    if (c->closing)
        return;
    if (status < 0 || c->linger_ms == 0 || c->rd_done) {
        conn_close(c);
        return;
    }
    uv_timer_start(&c->timer, timer_cb, c->linger_ms, 0);
}

static void conn_end_in(conn *c, unsigned linger_ms)
{
    /* Only conn_close may follow conn_end, and nothing but a user's
     * conn_close or conn_end starts the close path. */
    assert(!c->closing && !c->ended);
    if (c->closing || c->ended)
        return;
    c->ended = 1;
    c->reading = 0;
    uv_timer_stop(&c->utimer);
    if (c->state != CS_OPEN || c->wr_failed || !c->tcp) {
        conn_close(c);
        return;
    }
    set_state(c, CS_ENDING);
    c->linger_ms = linger_ms;
    conn_flush(c);
    if (c->closing)
        return;
    c->tp->end(c);
    if (c->closing || c->wr_failed)
        return;
    c->sreq.data = c;
    c->shutdown_started = 1;
    if (uv_shutdown(&c->sreq, (uv_stream_t *)c->tcp, shutdown_cb) != 0) {
        conn_close(c);
        return;
    }
    uv_reading_update(c); /* keep reading to see the peer's EOF */
    uv_timer_start(&c->timer, timer_cb, END_DRAIN_MS, 0);
}

void conn_end(conn *c, unsigned linger_ms)
{
    c->in_api++;
    conn_end_in(c, linger_ms);
    c->in_api--;
}

/* A second call is a legitimate no-op: the ending paths above reach it from
 * several callbacks, and a server cuts a lingering conn_end short with it
 * (core/httpd close_hc). */
static void conn_close_in(conn *c)
{
    if (c->closing)
        return;
    c->closing = 1;
    c->reading = 0;
    set_state(c, CS_CLOSING);
    drop_queue(c);
    if (c->gai_active) {
        rsv_abandon(c->gai); /* nothing waits for it: see core/resolve.h */
        c->gai_active = 0;
    }
    uv_close((uv_handle_t *)&c->timer, handle_closed);
    uv_close((uv_handle_t *)&c->utimer, handle_closed);
    uv_close((uv_handle_t *)&c->prep, handle_closed);
    close_tcp(c);
}

void conn_close(conn *c)
{
    c->in_api++;
    conn_close_in(c);
    c->in_api--;
}

/* Free once every handle is closed and the resolver has answered. Pending
 * write, connect and shutdown callbacks run (with UV_ECANCELED) before the
 * TCP close callback, so by now nothing refers to the conn. */
static void finish_close(conn *c)
{
    assert(c->handles >= 0);
    if (!c->closing || c->handles > 0 || c->gai_active)
        return;
    /* Every write callback ran (cancelled ones too) before the last handle
     * closed, and nothing is queued after conn_close. */
    assert(c->state == CS_CLOSING);
    assert(c->inflight_bytes == 0 && c->q_bytes == 0 && c->qh == c->qn);
    assert(c->in_api == 0);
    if (c->cbs->on_close)
        c->cbs->on_close(c);
    if (c->ai)
        freeaddrinfo(c->ai);
    tls_sess_free(c->tls);
    tls_config_unref(c->tls_cfg);
    free(c->saved);
    free(c->q);
    free(c->host);
    free(c);
}
