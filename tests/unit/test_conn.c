/* conn on its own: plain and TLS pairs over loopback, read stop/start with
 * data already buffered (decrypted or not), graceful end with close_notify,
 * zero-copy writes and their release, resolver failures and timeouts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

/* The module is compiled into the test with tiny read buffers, so that
 * TLS records span many reads and the user's read_stop lands with
 * ciphertext left over and plaintext still inside mbedtls. */
#define CONN_READ_BUF_SIZE 1000
#include "core/conn.c"
#include "core/err.h"
#include "kubesim/pki.h"
#include "core/tls.h"
#include "tests/unit/http_test_util.h"

static pki_pair ca, leaf;

static int group_setup(void **state)
{
    (void)state;
    const char *ips[] = {"127.0.0.1"};
    pki_leaf_opts o = {.cn = "conn", .ips = ips, .n_ips = 1};
    return pki_ca_new("conn CA", 1, &ca) || pki_leaf_new(&ca, &o, &leaf) ? -1 : 0;
}

static int group_teardown(void **state)
{
    (void)state;
    pki_pair_free(&ca);
    pki_pair_free(&leaf);
    return 0;
}

/* One side of a pair. */
typedef struct side {
    conn *c;
    int connected;
    int status;
    buf_t in;
    int reads;
    int reads_while_stopped;
    int stopped;
    int stop_after_first; /* stop reading inside the first on_read */
    int ended;            /* n < 0 seen */
    int end_code;
    int closed;
    int timer_fired;
    int deferred;
} side;

static void s_connect(conn *c, int status)
{
    side *s = conn_data(c);
    s->connected = 1;
    s->status = status;
}

static void s_read(conn *c, ssize_t n, const char *p)
{
    side *s = conn_data(c);
    if (n < 0) {
        s->ended = 1;
        s->end_code = (int)n;
        return;
    }
    if (s->stopped)
        s->reads_while_stopped++;
    s->reads++;
    assert_int_equal(buf_append(&s->in, p, (size_t)n), 0);
    if (s->stop_after_first && s->reads == 1) {
        s->stopped = 1;
        conn_read_stop(c);
    }
}

static void s_timer(conn *c)
{
    ((side *)conn_data(c))->timer_fired++;
}

static void s_defer(conn *c)
{
    ((side *)conn_data(c))->deferred++;
}

static void s_close(conn *c)
{
    side *s = conn_data(c);
    s->closed = 1;
    buf_free(&s->in);
}

static const conn_cbs cbs = {s_connect, s_read, s_timer, s_defer, s_close, NULL};

typedef struct pair {
    test_loop tl;
    uv_loop_t *loop;
    uv_tcp_t listener;
    tls_config *srv_tls;
    tls_config *cli_tls;
    side cli, srv;
    int accepted;
} pair;

static void on_accept(uv_stream_t *l, int status)
{
    pair *p = l->data;
    assert_int_equal(status, 0);
    int err = 0;
    p->srv.c = conn_accept(l, p->srv_tls, 2000, &cbs, &p->srv, &err);
    assert_non_null(p->srv.c);
    conn_read_start(p->srv.c);
    p->accepted = 1;
}

static void pair_open(pair *p, int tls)
{
    memset(p, 0, sizeof(*p));
    p->loop = tl_start(&p->tl, 20000);
    buf_init(&p->cli.in, 64 << 20);
    buf_init(&p->srv.in, 64 << 20);
    int err = 0;
    if (tls) {
        tls_server_opts so = {.cert_pem = leaf.cert_pem,
                              .cert_len = strlen(leaf.cert_pem),
                              .key_pem = leaf.key_pem,
                              .key_len = strlen(leaf.key_pem)};
        tls_client_opts co = {.ca_pem = ca.cert_pem, .ca_len = strlen(ca.cert_pem)};
        p->srv_tls = tls_server_config_new(&so, &err);
        p->cli_tls = tls_client_config_new(&co, &err);
        assert_non_null(p->srv_tls);
        assert_non_null(p->cli_tls);
    }
    struct sockaddr_in a;
    uv_ip4_addr("127.0.0.1", 0, &a);
    uv_tcp_init(p->loop, &p->listener);
    p->listener.data = p;
    assert_int_equal(uv_tcp_bind(&p->listener, (const struct sockaddr *)&a, 0), 0);
    assert_int_equal(uv_listen((uv_stream_t *)&p->listener, 8, on_accept), 0);
    int len = sizeof(a);
    uv_tcp_getsockname(&p->listener, (struct sockaddr *)&a, &len);
    conn_connect_opts co = {
        .host = "127.0.0.1", .port = ntohs(a.sin_port), .tls = p->cli_tls, .timeout_ms = 2000};
    p->cli.c = conn_connect(p->loop, &co, &cbs, &p->cli);
    assert_false(p->cli.connected); /* never synchronously */
    conn_read_start(p->cli.c);
    tl_run_until(&p->tl, &p->cli.connected);
    assert_int_equal(p->cli.status, 0);
    tl_run_until(&p->tl, &p->accepted);
}

static void pair_close(pair *p)
{
    if (!p->cli.closed)
        conn_close(p->cli.c);
    if (!p->srv.closed)
        conn_close(p->srv.c);
    uv_close((uv_handle_t *)&p->listener, NULL);
    tl_run_until(&p->tl, &p->cli.closed);
    tl_run_until(&p->tl, &p->srv.closed);
    tls_config_unref(p->srv_tls);
    tls_config_unref(p->cli_tls);
    tl_finish(&p->tl);
}

static int released;
static void count_release(void *arg)
{
    (void)arg;
    released++;
}

static void stop_start(int tls)
{
    pair p;
    pair_open(&p, tls);
    /* 1 MB from server to client in many pieces, one loop turn. */
    size_t total = 1 << 20;
    char *data = xmalloc(total);
    for (size_t i = 0; i < total; i++)
        data[i] = (char)(i * 31 + i / 1000);
    for (size_t off = 0; off < total; off += 1000)
        assert_int_equal(conn_write(p.srv.c, data + off, off + 1000 <= total ? 1000 : total - off), 0);
    assert_int_equal(conn_queued(p.srv.c), total); /* nothing sent from inside conn_write */
    p.cli.stop_after_first = 1;
    /* Wait for the first read, then make sure nothing more is delivered
     * while stopped, although bytes are waiting (in the kernel, or
     * decrypted inside mbedtls). */
    while (p.cli.reads == 0)
        uv_run(p.loop, UV_RUN_ONCE);
    tl_run_for(&p.tl, 100);
    assert_int_equal(p.cli.reads_while_stopped, 0);
    assert_true(p.cli.in.len < total);
    p.cli.stopped = 0;
    conn_read_start(p.cli.c);
    while (p.cli.in.len < total)
        uv_run(p.loop, UV_RUN_ONCE);
    assert_memory_equal(p.cli.in.data, data, total);
    assert_int_equal(conn_queued(p.srv.c), 0);
    /* A short message, all of it read from the socket before the stop:
     * what is left sits in conn/mbedtls and must come out on restart
     * without any new bytes from the kernel. */
    buf_reset(&p.cli.in);
    p.cli.reads = 0;
    assert_int_equal(conn_write(p.srv.c, data, 5000), 0);
    while (p.cli.reads == 0)
        uv_run(p.loop, UV_RUN_ONCE);
    tl_run_for(&p.tl, 50);
    assert_int_equal(p.cli.reads_while_stopped, 0);
    if (tls)
        assert_true(p.cli.in.len < 5000); /* the test's point: leftovers exist */
    p.cli.stopped = 0;
    conn_read_start(p.cli.c);
    while (p.cli.in.len < 5000)
        uv_run(p.loop, UV_RUN_ONCE);
    assert_memory_equal(p.cli.in.data, data, 5000);
    p.cli.stop_after_first = 0;
    buf_reset(&p.cli.in);
    /* Zero-copy writes are released once written. */
    released = 0;
    static const char msg[] = "static bytes";
    assert_int_equal(conn_write_ref(p.cli.c, msg, sizeof(msg) - 1, count_release, NULL), 0);
    assert_int_equal(conn_write_ref(p.cli.c, msg, sizeof(msg) - 1, count_release, NULL), 0);
    while (p.srv.in.len < 2 * (sizeof(msg) - 1))
        uv_run(p.loop, UV_RUN_ONCE);
    assert_string_equal(buf_cstr(&p.srv.in), "static bytesstatic bytes");
    assert_int_equal(released, 2);
    /* Graceful end from the server: the client sees a clean EOF after the
     * last bytes (close_notify for TLS). */
    assert_int_equal(conn_write(p.srv.c, "bye", 3), 0);
    conn_end(p.srv.c, 0);
    assert_int_equal(conn_write(p.srv.c, "late", 4), OP_ECLOSED);
    while (!p.cli.ended)
        uv_run(p.loop, UV_RUN_ONCE);
    assert_int_equal(p.cli.end_code, UV_EOF);
    assert_string_equal(buf_cstr(&p.cli.in), "bye");
    tl_run_until(&p.tl, &p.srv.closed);
    free(data);
    pair_close(&p);
}

static void test_plain_stop_start_end(void **state)
{
    (void)state;
    stop_start(0);
}

static void test_tls_stop_start_end(void **state)
{
    (void)state;
    stop_start(1);
}

static void test_timer_defer_peer(void **state)
{
    (void)state;
    pair p;
    pair_open(&p, 1);
    conn_defer(p.cli.c);
    conn_defer(p.cli.c); /* coalesced */
    assert_int_equal(p.cli.deferred, 0);
    conn_timer_start(p.cli.c, 20);
    while (!p.cli.timer_fired)
        uv_run(p.loop, UV_RUN_ONCE);
    assert_int_equal(p.cli.deferred, 1);
    assert_true(conn_is_tls(p.cli.c));
    assert_int_equal(strncmp(conn_peer(p.srv.c), "127.0.0.1:", 10), 0);
    assert_null(conn_peer_cn(p.srv.c));
    assert_true(conn_bytes_in(p.srv.c) > 0 && conn_bytes_out(p.srv.c) > 0);
    /* A closed conn refuses writes and releases zero-copy bytes at once. */
    conn_close(p.cli.c);
    released = 0;
    assert_int_equal(conn_write_ref(p.cli.c, "x", 1, count_release, NULL), OP_ECLOSED);
    assert_int_equal(released, 1);
    tl_run_until(&p.tl, &p.cli.closed);
    /* The server sees the end. */
    while (!p.srv.ended)
        uv_run(p.loop, UV_RUN_ONCE);
    pair_close(&p);
}

static void test_connect_failures(void **state)
{
    (void)state;
    test_loop tl;
    uv_loop_t *loop = tl_start(&tl, 20000);
    side s[3];
    memset(s, 0, sizeof(s));
    for (int i = 0; i < 3; i++)
        buf_init(&s[i].in, 1024);
    /* A name that cannot resolve (RFC 2606 .invalid): an error or, if the
     * resolver is unreachable, the timeout; bounded either way. */
    conn_connect_opts o1 = {.host = "no-such-host.invalid", .port = 80, .timeout_ms = 3000};
    conn *c1 = conn_connect(loop, &o1, &cbs, &s[0]);
    /* Bad arguments are reported asynchronously too. */
    conn_connect_opts o2 = {.host = "127.0.0.1", .port = 0};
    conn *c2 = conn_connect(loop, &o2, &cbs, &s[1]);
    /* Closing while resolving. */
    conn_connect_opts o3 = {.host = "localhost", .port = 1, .timeout_ms = 3000};
    conn *c3 = conn_connect(loop, &o3, &cbs, &s[2]);
    conn_close(c3);
    assert_int_equal(s[1].connected, 0);
    tl_run_until(&tl, &s[1].connected);
    assert_int_equal(s[1].status, OP_EINVAL);
    tl_run_until(&tl, &s[0].connected);
    assert_true(s[0].status < 0);
    conn_close(c1);
    conn_close(c2);
    tl_run_until(&tl, &s[0].closed);
    tl_run_until(&tl, &s[1].closed);
    tl_run_until(&tl, &s[2].closed);
    assert_int_equal(s[2].connected, 0); /* no callback after close */
    tl_finish(&tl);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plain_stop_start_end),
        cmocka_unit_test(test_tls_stop_start_end),
        cmocka_unit_test(test_timer_defer_peer),
        cmocka_unit_test(test_connect_failures),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
