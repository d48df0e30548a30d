/* TLS: the PKI generator, the in-memory TLS filter, and HTTPS between httpc
 * and httpd on loopback: verification by name and by IP (iPAddress SANs,
 * which mbedtls 2.28 does not match itself), refusals (wrong name, wrong
 * IP, unknown CA, no CA), server_name override, insecure mode, client
 * certificates (required / optional / from a foreign CA), keep-alive, large
 * bodies, streaming and handshake timeouts on both sides. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <mbedtls/oid.h>
#include <mbedtls/x509_crt.h>

#include "core/err.h"
#include "core/log.h"
#include "core/httpc.h"
#include "core/httpd.h"
#include "kubesim/pki.h"
#include "core/tls.h"
#include "core/tls_compat.h"
#include "tests/unit/http_test_util.h"

static pki_pair ca, other_ca, srv_leaf, wrong_leaf, dns_only_leaf, alice, mallory;

static int group_setup(void **state)
{
    (void)state;
    const char *dns[] = {"localhost"};
    const char *ips[] = {"127.0.0.1", "::1"};
    const char *wrong_dns[] = {"other.example"};
    const char *wrong_ips[] = {"10.0.0.1"};
    if (pki_ca_new("slurmop test CA", 1, &ca) || pki_ca_new("someone else", 1, &other_ca))
        return -1;
    pki_leaf_opts s = {
        .cn = "kubesim", .dns = dns, .n_dns = 1, .ips = ips, .n_ips = 2, .usage = PKI_SERVER_AUTH};
    pki_leaf_opts w = {
        .cn = "wrong", .dns = wrong_dns, .n_dns = 1, .ips = wrong_ips, .n_ips = 1, .usage = PKI_SERVER_AUTH};
    pki_leaf_opts d = {.cn = "dnsonly", .dns = dns, .n_dns = 1, .usage = PKI_SERVER_AUTH};
    pki_leaf_opts a = {.cn = "alice", .org = "devs", .usage = PKI_CLIENT_AUTH};
    if (pki_leaf_new(&ca, &s, &srv_leaf) || pki_leaf_new(&ca, &w, &wrong_leaf) ||
        pki_leaf_new(&ca, &d, &dns_only_leaf) || pki_leaf_new(&ca, &a, &alice) ||
        pki_leaf_new(&other_ca, &a, &mallory))
        return -1;
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    pki_pair_free(&ca);
    pki_pair_free(&other_ca);
    pki_pair_free(&srv_leaf);
    pki_pair_free(&wrong_leaf);
    pki_pair_free(&dns_only_leaf);
    pki_pair_free(&alice);
    pki_pair_free(&mallory);
    return 0;
}

/* --- PKI ------------------------------------------------------------------- */

static void parse_crt(mbedtls_x509_crt *c, const char *pem)
{
    mbedtls_x509_crt_init(c);
    assert_int_equal(mbedtls_x509_crt_parse(c, (const unsigned char *)pem, strlen(pem) + 1), 0);
}

static int has_ip_san(const mbedtls_x509_crt *c, const unsigned char *ip, size_t n)
{
    for (const mbedtls_x509_sequence *s = &c->subject_alt_names; s; s = s->next) {
        if (s->buf.p && s->buf.tag == (MBEDTLS_ASN1_CONTEXT_SPECIFIC | MBEDTLS_X509_SAN_IP_ADDRESS) &&
            s->buf.len == n && memcmp(s->buf.p, ip, n) == 0)
            return 1;
    }
    return 0;
}

static void test_pki(void **state)
{
    (void)state;
    mbedtls_x509_crt cac, leaf, cli, other;
    parse_crt(&cac, ca.cert_pem);
    parse_crt(&leaf, srv_leaf.cert_pem);
    parse_crt(&cli, alice.cert_pem);
    parse_crt(&other, other_ca.cert_pem);
    assert_true(tlsc_crt_is_ca(&cac));
    assert_false(tlsc_crt_is_ca(&leaf));
    assert_non_null(strstr(ca.key_pem, "PRIVATE KEY"));
    uint32_t flags = 0;
    /* Chains to its CA and matches the DNS name; not to another CA. */
    assert_int_equal(mbedtls_x509_crt_verify(&leaf, &cac, NULL, "localhost", &flags, NULL, NULL), 0);
    assert_int_not_equal(mbedtls_x509_crt_verify(&leaf, &other, NULL, "localhost", &flags, NULL, NULL), 0);
    assert_true(flags & MBEDTLS_X509_BADCERT_NOT_TRUSTED);
    /* The IP SANs are there, DER-encoded as iPAddress. */
    const unsigned char v4[4] = {127, 0, 0, 1};
    unsigned char v6[16] = {0};
    v6[15] = 1;
    assert_true(has_ip_san(&leaf, v4, 4));
    assert_true(has_ip_san(&leaf, v6, 16));
    /* mbedtls 2.28 itself does not match them (hence our callback); 3.6 does. */
#if TLSC_V3
    assert_int_equal(mbedtls_x509_crt_verify(&leaf, &cac, NULL, "127.0.0.1", &flags, NULL, NULL), 0);
#else
    assert_int_not_equal(mbedtls_x509_crt_verify(&leaf, &cac, NULL, "127.0.0.1", &flags, NULL, NULL), 0);
    assert_true(flags & MBEDTLS_X509_BADCERT_CN_MISMATCH);
#endif
    /* Extended key usage. */
    assert_int_equal(mbedtls_x509_crt_check_extended_key_usage(&leaf, MBEDTLS_OID_SERVER_AUTH,
                                                               MBEDTLS_OID_SIZE(MBEDTLS_OID_SERVER_AUTH)),
                     0);
    assert_int_not_equal(mbedtls_x509_crt_check_extended_key_usage(&leaf, MBEDTLS_OID_CLIENT_AUTH,
                                                                   MBEDTLS_OID_SIZE(MBEDTLS_OID_CLIENT_AUTH)),
                         0);
    assert_int_equal(mbedtls_x509_crt_check_extended_key_usage(&cli, MBEDTLS_OID_CLIENT_AUTH,
                                                               MBEDTLS_OID_SIZE(MBEDTLS_OID_CLIENT_AUTH)),
                     0);
    /* Client subject: CN = user, O = group. */
    char dn[256];
    assert_true(mbedtls_x509_dn_gets(dn, sizeof(dn), &cli.subject) > 0);
    assert_string_equal(dn, "CN=alice, O=devs");
    assert_int_equal(mbedtls_x509_crt_verify(&cli, &cac, NULL, NULL, &flags, NULL, NULL), 0);
    mbedtls_x509_crt_free(&cac);
    mbedtls_x509_crt_free(&leaf);
    mbedtls_x509_crt_free(&cli);
    mbedtls_x509_crt_free(&other);

    /* An explicit validity window in the past gives an expired leaf. */
    pki_pair old;
    pki_leaf_opts o = {.cn = "old", .not_before = time(NULL) - 7200, .not_after = time(NULL) - 3600};
    assert_int_equal(pki_leaf_new(&ca, &o, &old), 0);
    parse_crt(&cac, ca.cert_pem);
    parse_crt(&leaf, old.cert_pem);
    assert_int_not_equal(mbedtls_x509_crt_verify(&leaf, &cac, NULL, NULL, &flags, NULL, NULL), 0);
    assert_true(flags & MBEDTLS_X509_BADCERT_EXPIRED);
    mbedtls_x509_crt_free(&cac);
    mbedtls_x509_crt_free(&leaf);
    pki_pair_free(&old);
    /* Bad input. */
    const char *bad_ip[] = {"not-an-ip"};
    pki_leaf_opts b = {.cn = "x", .ips = bad_ip, .n_ips = 1};
    assert_int_equal(pki_leaf_new(&ca, &b, &old), OP_EINVAL);
    pki_leaf_opts nocn = {.cn = NULL};
    assert_int_equal(pki_leaf_new(&ca, &nocn, &old), OP_EINVAL);
}

/* --- the TLS filter in memory ---------------------------------------------- */

/* Move ciphertext from one session to the other in pieces of `step`. */
static void shuttle(tls_session *from, tls_session *to, size_t step, buf_t *plain_out)
{
    size_t len;
    char *c = tls_sess_take_output(from, &len);
    for (size_t off = 0; off < len; off += step) {
        size_t n = off + step <= len ? step : len - off;
        tls_sess_set_input(to, c + off, n);
        if (!tls_sess_handshake_done(to)) {
            int r = tls_sess_handshake(to);
            assert_true(r == 0 || r == TLS_AGAIN);
        }
        if (tls_sess_handshake_done(to)) {
            char tmp[4096];
            int r;
            while ((r = tls_sess_read(to, tmp, sizeof(tmp))) > 0)
                assert_int_equal(buf_append(plain_out, tmp, (size_t)r), 0);
            assert_true(r == 0 || r == UV_EOF);
        }
        assert_int_equal(tls_sess_input_left(to, NULL), 0); /* everything consumed */
    }
    free(c);
}

/* Handshake a fresh pair of sessions in memory; returns the client. */
static tls_session *pair_up(tls_config *cc, tls_config *sc, const char *host, tls_session **sv_out)
{
    int err = 0;
    tls_session *cl = tls_sess_new(cc, host, &err);
    tls_session *sv = tls_sess_new(sc, NULL, &err);
    assert_non_null(cl);
    assert_non_null(sv);
    buf_t a, b;
    buf_init(&a, 1 << 20);
    buf_init(&b, 1 << 20);
    assert_int_equal(tls_sess_handshake(cl), TLS_AGAIN);
    for (int round = 0; round < 10 && !(tls_sess_handshake_done(cl) && tls_sess_handshake_done(sv));
         round++) {
        shuttle(cl, sv, 512, &a);
        shuttle(sv, cl, 512, &b);
    }
    assert_true(tls_sess_handshake_done(cl));
    assert_true(tls_sess_handshake_done(sv));
    buf_free(&a);
    buf_free(&b);
    *sv_out = sv;
    return cl;
}

/* One connection: resumed or not as expected; the server knows the client
 * certificate either way, and data flows. */
static void connect_once(tls_config *cc, tls_config *sc, const char *host, int resumed)
{
    tls_session *sv, *cl = pair_up(cc, sc, host, &sv);
    assert_int_equal(tls_sess_resumed(cl), resumed);
    assert_false(tls_sess_resumed(sv));
    assert_string_equal(tls_sess_peer_cn(sv), "alice");
    buf_t got;
    buf_init(&got, 1 << 16);
    assert_int_equal(tls_sess_write(cl, "ping", 4), 4);
    shuttle(cl, sv, 64, &got);
    assert_int_equal(got.len, 4);
    assert_memory_equal(got.data, "ping", 4);
    buf_free(&got);
    tls_sess_free(cl);
    tls_sess_free(sv);
}

/* The second connection of a client config resumes the first one's session
 * (a ticket): no certificate is checked again, the server still knows the
 * client's certificate, and data flows. Another name gets a full handshake. */
static void test_session_resumption(void **state)
{
    (void)state;
    int err = 0;
    tls_client_opts co = {.ca_pem = ca.cert_pem,
                          .ca_len = strlen(ca.cert_pem),
                          .cert_pem = alice.cert_pem,
                          .cert_len = strlen(alice.cert_pem),
                          .key_pem = alice.key_pem,
                          .key_len = strlen(alice.key_pem)};
    tls_server_opts so = {.cert_pem = srv_leaf.cert_pem,
                          .cert_len = strlen(srv_leaf.cert_pem),
                          .key_pem = srv_leaf.key_pem,
                          .key_len = strlen(srv_leaf.key_pem),
                          .client_ca_pem = ca.cert_pem,
                          .client_ca_len = strlen(ca.cert_pem),
                          .require_client_cert = 1};
    tls_config *cc = tls_client_config_new(&co, &err);
    tls_config *sc = tls_server_config_new(&so, &err);
    assert_non_null(cc);
    assert_non_null(sc);
    connect_once(cc, sc, "127.0.0.1", 0);
    connect_once(cc, sc, "127.0.0.1", 1);
    /* A restarted server (a new ticket key) cannot read the ticket: a full
     * handshake, not a failure; the next connection resumes the new one. */
    tls_config *sc2 = tls_server_config_new(&so, &err);
    assert_non_null(sc2);
    connect_once(cc, sc2, "127.0.0.1", 0);
    connect_once(cc, sc2, "127.0.0.1", 1);
    /* Another server name: the saved session is not offered. */
    connect_once(cc, sc, "localhost", 0);
    tls_config_unref(cc);
    tls_config_unref(sc);
    tls_config_unref(sc2);
}

#if TLSC_TLS13
/* A bare mbedtls client that offers TLS 1.3 only, fed through memory (the peer is our server). */
typedef struct raw13 {
    mbedtls_ssl_config conf;
    mbedtls_ssl_context ssl;
    buf_t in, out;
    size_t in_off;
} raw13;

static int r13_send(void *ctx, const unsigned char *p, size_t len)
{
    raw13 *r = ctx;
    return buf_append(&r->out, p, len) == 0 ? (int)len : MBEDTLS_ERR_SSL_INTERNAL_ERROR;
}

static int r13_recv(void *ctx, unsigned char *p, size_t len)
{
    raw13 *r = ctx;
    size_t left = r->in.len - r->in_off;
    if (left == 0)
        return MBEDTLS_ERR_SSL_WANT_READ;
    size_t n = len < left ? len : left;
    memcpy(p, r->in.data + r->in_off, n);
    r->in_off += n;
    return (int)n;
}
#endif

/* Which protocol each side speaks: built against mbedtls 3.6 our server negotiates TLS 1.3 with a
 * client that offers it, and our client stays at 1.2 (tls.c says why); against 2.28 both are 1.2. */
static void test_protocol_versions(void **state)
{
    (void)state;
    int err = 0;
    tls_client_opts co = {.ca_pem = ca.cert_pem, .ca_len = strlen(ca.cert_pem)};
    tls_server_opts so = {.cert_pem = srv_leaf.cert_pem,
                          .cert_len = strlen(srv_leaf.cert_pem),
                          .key_pem = srv_leaf.key_pem,
                          .key_len = strlen(srv_leaf.key_pem)};
    tls_config *cc = tls_client_config_new(&co, &err);
    tls_config *sc = tls_server_config_new(&so, &err);
    assert_non_null(cc);
    assert_non_null(sc);
    tls_session *sv = NULL;
    tls_session *cl = pair_up(cc, sc, "127.0.0.1", &sv);
    assert_string_equal(tls_sess_version(cl), "TLSv1.2");
    assert_string_equal(tls_sess_version(sv), "TLSv1.2");
    assert_false(tls_sess_is_tls13(sv));
    tls_sess_free(cl);
    tls_sess_free(sv);
#if TLSC_TLS13
    raw13 r;
    memset(&r, 0, sizeof(r));
    buf_init(&r.in, 1 << 20);
    buf_init(&r.out, 1 << 20);
    mbedtls_ssl_config_init(&r.conf);
    mbedtls_ssl_init(&r.ssl);
    assert_int_equal(mbedtls_ssl_config_defaults(&r.conf, MBEDTLS_SSL_IS_CLIENT, MBEDTLS_SSL_TRANSPORT_STREAM,
                                                 MBEDTLS_SSL_PRESET_DEFAULT),
                     0);
    mbedtls_ssl_conf_rng(&r.conf, tlsc_rng, NULL);
    mbedtls_ssl_conf_authmode(&r.conf, MBEDTLS_SSL_VERIFY_NONE);
    mbedtls_ssl_conf_min_tls_version(&r.conf, MBEDTLS_SSL_VERSION_TLS1_3);
    mbedtls_ssl_conf_max_tls_version(&r.conf, MBEDTLS_SSL_VERSION_TLS1_3);
    assert_int_equal(mbedtls_ssl_setup(&r.ssl, &r.conf), 0);
    mbedtls_ssl_set_bio(&r.ssl, &r, r13_send, r13_recv, NULL);
    sv = tls_sess_new(sc, NULL, &err);
    assert_non_null(sv);
    int crc = MBEDTLS_ERR_SSL_WANT_READ;
    for (int round = 0; round < 20 && !(crc == 0 && tls_sess_handshake_done(sv)); round++) {
        if (crc != 0)
            crc = mbedtls_ssl_handshake(&r.ssl);
        assert_true(crc == 0 || crc == MBEDTLS_ERR_SSL_WANT_READ);
        tls_sess_set_input(sv, r.out.data, r.out.len);
        r.out.len = 0;
        int srv = tls_sess_handshake(sv);
        assert_true(srv == 0 || srv == TLS_AGAIN);
        size_t len;
        char *c = tls_sess_take_output(sv, &len);
        if (c)
            assert_int_equal(buf_append(&r.in, c, len), 0);
        free(c);
    }
    assert_int_equal(crc, 0);
    assert_true(tls_sess_handshake_done(sv));
    assert_string_equal(mbedtls_ssl_get_version(&r.ssl), "TLSv1.3");
    assert_string_equal(tls_sess_version(sv), "TLSv1.3");
    assert_true(tls_sess_is_tls13(sv));
    /* Application data both ways over the 1.3 session. */
    assert_int_equal(mbedtls_ssl_write(&r.ssl, (const unsigned char *)"ping", 4), 4);
    tls_sess_set_input(sv, r.out.data, r.out.len);
    r.out.len = 0;
    char got[16];
    assert_int_equal(tls_sess_read(sv, got, sizeof(got)), 4);
    assert_memory_equal(got, "ping", 4);
    assert_int_equal(tls_sess_write(sv, "pong", 4), 4);
    size_t len;
    char *c = tls_sess_take_output(sv, &len);
    assert_int_equal(buf_append(&r.in, c, len), 0);
    free(c);
    unsigned char back[16];
    int n;
    do /* the server's session tickets come first; the client ignores them */
        n = mbedtls_ssl_read(&r.ssl, back, sizeof(back));
    while (n == MBEDTLS_ERR_SSL_WANT_READ && r.in_off < r.in.len);
    assert_int_equal(n, 4);
    assert_memory_equal(back, "pong", 4);
    tls_sess_free(sv);
    mbedtls_ssl_free(&r.ssl);
    mbedtls_ssl_config_free(&r.conf);
    buf_free(&r.in);
    buf_free(&r.out);
#endif
    tls_config_unref(cc);
    tls_config_unref(sc);
}

static void test_tls_filter_in_memory(void **state)
{
    (void)state;
    int err = 0;
    tls_client_opts co = {.ca_pem = ca.cert_pem, .ca_len = strlen(ca.cert_pem)};
    tls_server_opts so = {.cert_pem = srv_leaf.cert_pem,
                          .cert_len = strlen(srv_leaf.cert_pem),
                          .key_pem = srv_leaf.key_pem,
                          .key_len = strlen(srv_leaf.key_pem)};
    tls_config *cc = tls_client_config_new(&co, &err);
    tls_config *sc = tls_server_config_new(&so, &err);
    assert_non_null(cc);
    assert_non_null(sc);
    tls_session *cl = tls_sess_new(cc, "127.0.0.1", &err);
    tls_session *sv = tls_sess_new(sc, NULL, &err);
    assert_non_null(cl);
    assert_non_null(sv);
    tls_config_unref(cc); /* the sessions hold references */
    tls_config_unref(sc);
    buf_t to_srv, to_cli;
    buf_init(&to_srv, 1 << 20);
    buf_init(&to_cli, 1 << 20);
    assert_int_equal(tls_sess_handshake(cl), TLS_AGAIN); /* ClientHello */
    for (int round = 0; round < 10 && !(tls_sess_handshake_done(cl) && tls_sess_handshake_done(sv));
         round++) {
        shuttle(cl, sv, 1, &to_srv); /* one byte at a time: records split everywhere */
        shuttle(sv, cl, 7, &to_cli);
    }
    assert_true(tls_sess_handshake_done(cl));
    assert_true(tls_sess_handshake_done(sv));
    assert_string_equal(tls_sess_alpn(cl), "http/1.1");
    assert_string_equal(tls_sess_alpn(sv), "http/1.1");
    assert_null(tls_sess_peer_cn(sv)); /* no client certificate */

    /* 100 KB in one call: written in record-sized parts. */
    size_t total = 100 * 1024;
    char *big = xmalloc(total);
    for (size_t i = 0; i < total; i++)
        big[i] = (char)('a' + i % 26);
    size_t off = 0;
    int calls = 0;
    while (off < total) {
        int r = tls_sess_write(cl, big + off, total - off);
        assert_true(r > 0);
        assert_true((size_t)r <= 16384);
        off += (size_t)r;
        calls++;
    }
    assert_true(calls >= 7);
    shuttle(cl, sv, 1000, &to_srv);
    assert_int_equal(to_srv.len, total);
    assert_memory_equal(to_srv.data, big, total);
    /* close_notify is a clean EOF. */
    tls_sess_close_notify(cl);
    size_t len;
    char *c = tls_sess_take_output(cl, &len);
    assert_non_null(c);
    tls_sess_set_input(sv, c, len);
    char tmp[64];
    assert_int_equal(tls_sess_read(sv, tmp, sizeof(tmp)), UV_EOF);
    free(c);
    free(big);
    buf_free(&to_srv);
    buf_free(&to_cli);
    tls_sess_free(cl);
    tls_sess_free(sv);

    /* Bad PEM and key/cert mismatch are configuration errors. */
    tls_client_opts bad = {.ca_pem = "garbage", .ca_len = 7};
    assert_null(tls_client_config_new(&bad, &err));
    assert_int_equal(err, OP_ECONFIG);
    tls_server_opts mism = {.cert_pem = srv_leaf.cert_pem,
                            .cert_len = strlen(srv_leaf.cert_pem),
                            .key_pem = alice.key_pem,
                            .key_len = strlen(alice.key_pem)};
    assert_null(tls_server_config_new(&mism, &err));
    assert_int_equal(err, OP_ECONFIG);
}

/* --- HTTPS ----------------------------------------------------------------- */

static hs_req *held;

static void tick_stream(uv_timer_t *t)
{
    static int n;
    if (!held)
        return;
    char line[32];
    int len = snprintf(line, sizeof(line), "line %d\n", n);
    assert_int_equal(hs_stream_write(held, line, (size_t)len), 0);
    if (++n == 3) {
        n = 0;
        uv_timer_stop(t);
        hs_stream_end(held);
        held = NULL;
    }
}

static uv_timer_t stream_timer;

static void handler(hs_req *req, void *data)
{
    (void)data;
    const char *path = hs_req_path(req);
    if (strcmp(path, "/cn") == 0) {
        const char *cn = hs_req_client_cn(req);
        hs_respond(req, 200, "text/plain", NULL, cn ? cn : "(none)", strlen(cn ? cn : "(none)"));
    } else if (strcmp(path, "/echo") == 0) {
        size_t len;
        const char *b = hs_req_body(req, &len);
        hs_respond(req, 200, "application/octet-stream", NULL, b, len);
    } else if (strcmp(path, "/stream") == 0) {
        held = req;
        hs_stream_begin(req, 200, "text/plain", NULL);
        uv_timer_start(&stream_timer, tick_stream, 10, 10);
    } else {
        hs_respond(req, 404, NULL, NULL, "", 0);
    }
}

typedef struct tsrv {
    hs_server *srv;
    int port;
    int closed;
} tsrv;

static void tsrv_closed(void *d)
{
    ((tsrv *)d)->closed = 1;
}

static const char *listen_host = "127.0.0.1";

static void tsrv_start(uv_loop_t *loop, tsrv *t, const pki_pair *leaf, const char *client_ca, int require,
                       unsigned idle_ms)
{
    hs_tls_opts to = {.cert_pem = leaf->cert_pem,
                      .cert_len = strlen(leaf->cert_pem),
                      .key_pem = leaf->key_pem,
                      .key_len = strlen(leaf->key_pem),
                      .client_ca_pem = client_ca,
                      .client_ca_len = client_ca ? strlen(client_ca) : 0,
                      .require_client_cert = require};
    hs_opts o = {.tls = &to, .handler = handler, .idle_timeout_ms = idle_ms, .max_body_bytes = 8 << 20};
    int err = 0;
    memset(t, 0, sizeof(*t));
    t->srv = hs_listen(loop, listen_host, 0, &o, &err);
    assert_non_null(t->srv);
    t->port = hs_port(t->srv);
}

static void tsrv_stop(test_loop *tl, tsrv *t)
{
    hs_close(t->srv, tsrv_closed, t);
    tl_run_until(tl, &t->closed);
}

typedef struct result {
    int done;
    int status;
    int http_status;
    buf_t body;
    int data_calls;
} result;

static void on_done(hc_req *req, int status, const hc_response *resp, void *data)
{
    result *r = data;
    (void)req;
    r->done++;
    r->status = status;
    r->http_status = resp->status;
    if (resp->body_len)
        assert_int_equal(buf_append(&r->body, resp->body, resp->body_len), 0);
}

static int on_data(hc_req *req, const char *p, size_t n, void *data)
{
    result *r = data;
    (void)req;
    r->data_calls++;
    assert_int_equal(buf_append(&r->body, p, n), 0);
    return 0;
}

typedef struct copts {
    const char *host;
    const pki_pair *ca;   /* NULL: no CA bundle */
    const pki_pair *cert; /* client certificate */
    const char *server_name;
    int insecure;
    unsigned connect_ms;
    int max_conns;
} copts;

static hc_pool *tclient(uv_loop_t *loop, int port, const copts *c)
{
    char url[128];
    snprintf(url, sizeof(url), "https://%s:%d", c->host, port);
    hc_tls_opts to = {
        .ca_pem = c->ca ? c->ca->cert_pem : NULL,
        .ca_len = c->ca ? strlen(c->ca->cert_pem) : 0,
        .cert_pem = c->cert ? c->cert->cert_pem : NULL,
        .cert_len = c->cert ? strlen(c->cert->cert_pem) : 0,
        .key_pem = c->cert ? c->cert->key_pem : NULL,
        .key_len = c->cert ? strlen(c->cert->key_pem) : 0,
        .server_name = c->server_name,
        .insecure_skip_verify = c->insecure,
    };
    hc_pool_opts po = {.tls = &to, .connect_timeout_ms = c->connect_ms, .max_conns = c->max_conns};
    int err = 0;
    hc_pool *p = hc_pool_new(loop, url, &po, &err);
    assert_non_null(p);
    return p;
}

static int pool_done;
static void pool_closed_cb(void *d)
{
    (void)d;
    pool_done = 1;
}

static void tclose(test_loop *tl, hc_pool *p)
{
    pool_done = 0;
    hc_pool_close(p, pool_closed_cb, NULL);
    tl_run_until(tl, &pool_done);
}

/* One GET of path; returns the status and copies the body into out. */
static int fetch(test_loop *tl, hc_pool *p, const char *path, char *out, size_t outlen)
{
    result r;
    memset(&r, 0, sizeof(r));
    buf_init(&r.body, 1 << 20);
    hc_req_opts o = {
        .method = "GET", .path = path, .request_timeout_ms = 5000, .on_done = on_done, .data = &r};
    hc_request(p, &o);
    tl_run_until(tl, &r.done);
    if (out)
        snprintf(out, outlen, "%s", buf_cstr(&r.body));
    buf_free(&r.body);
    return r.status ? r.status : r.http_status;
}

/* Connect with c to a server using leaf; return fetch("/cn"). */
static int try_verify(const pki_pair *leaf, const copts *c, char *cn, size_t cnlen)
{
    test_loop tl;
    uv_loop_t *loop = tl_start(&tl, 20000);
    tsrv s;
    tsrv_start(loop, &s, leaf, NULL, 0, 0);
    hc_pool *p = tclient(loop, s.port, c);
    int rc = fetch(&tl, p, "/cn", cn, cnlen);
    tclose(&tl, p);
    tsrv_stop(&tl, &s);
    tl_finish(&tl);
    return rc;
}

static void test_https_verification(void **state)
{
    (void)state;
    char cn[64];
    copts by_name = {.host = "localhost", .ca = &ca};
    copts by_ip = {.host = "127.0.0.1", .ca = &ca};
    copts by_ip6 = {.host = "[::1]", .ca = &ca};
    assert_int_equal(try_verify(&srv_leaf, &by_name, cn, sizeof(cn)), 200);
    assert_string_equal(cn, "(none)");
    assert_int_equal(try_verify(&srv_leaf, &by_ip, cn, sizeof(cn)), 200);
    /* IPv6: the server listens on ::1, the client verifies the ::1 SAN. */
    listen_host = "::1";
    assert_int_equal(try_verify(&srv_leaf, &by_ip6, cn, sizeof(cn)), 200);
    assert_int_equal(try_verify(&wrong_leaf, &by_ip6, NULL, 0), OP_ECERT);
    listen_host = "127.0.0.1";
    /* A certificate for other names and addresses is refused both ways. */
    assert_int_equal(try_verify(&wrong_leaf, &by_ip, NULL, 0), OP_ECERT);
    assert_int_equal(try_verify(&wrong_leaf, &by_name, NULL, 0), OP_ECERT);
    /* A DNS-only certificate does not pass for an IP (no accidental
     * acceptance), unless the caller names the server explicitly. */
    assert_int_equal(try_verify(&dns_only_leaf, &by_ip, NULL, 0), OP_ECERT);
    copts override = {.host = "127.0.0.1", .ca = &ca, .server_name = "localhost"};
    assert_int_equal(try_verify(&dns_only_leaf, &override, NULL, 0), 200);
    copts override_bad = {.host = "127.0.0.1", .ca = &ca, .server_name = "other.example"};
    assert_int_equal(try_verify(&srv_leaf, &override_bad, NULL, 0), OP_ECERT);
    /* Unknown CA, no CA at all, and the explicit insecure escape hatch. */
    copts foreign = {.host = "localhost", .ca = &other_ca};
    assert_int_equal(try_verify(&srv_leaf, &foreign, NULL, 0), OP_ECERT);
    copts none = {.host = "localhost"};
    assert_int_equal(try_verify(&srv_leaf, &none, NULL, 0), OP_ECERT);
    copts insecure = {.host = "127.0.0.1", .ca = &other_ca, .insecure = 1};
    assert_int_equal(try_verify(&wrong_leaf, &insecure, NULL, 0), 200);
}

static void test_https_client_certificates(void **state)
{
    (void)state;
    char cn[64];
    for (int require = 1; require >= 0; require--) {
        test_loop tl;
        uv_loop_t *loop = tl_start(&tl, 20000);
        tsrv s;
        tsrv_start(loop, &s, &srv_leaf, ca.cert_pem, require, 0);
        copts anon = {.host = "localhost", .ca = &ca};
        copts with = {.host = "localhost", .ca = &ca, .cert = &alice};
        copts foreign = {.host = "localhost", .ca = &ca, .cert = &mallory};
        hc_pool *p = tclient(loop, s.port, &anon);
        int rc = fetch(&tl, p, "/cn", cn, sizeof(cn));
        if (require) {
            assert_true(rc < 0); /* refused in the handshake */
        } else {
            assert_int_equal(rc, 200);
            assert_string_equal(cn, "(none)");
        }
        tclose(&tl, p);
        p = tclient(loop, s.port, &with);
        assert_int_equal(fetch(&tl, p, "/cn", cn, sizeof(cn)), 200);
        assert_string_equal(cn, "alice");
        tclose(&tl, p);
        /* A certificate from another CA never yields a CN. */
        p = tclient(loop, s.port, &foreign);
        rc = fetch(&tl, p, "/cn", cn, sizeof(cn));
        if (require) {
            assert_true(rc < 0);
        } else {
            assert_int_equal(rc, 200);
            assert_string_equal(cn, "(none)");
        }
        tclose(&tl, p);
        tsrv_stop(&tl, &s);
        tl_finish(&tl);
    }
}

static void test_https_keepalive_bodies_streaming(void **state)
{
    (void)state;
    test_loop tl;
    uv_loop_t *loop = tl_start(&tl, 30000);
    uv_timer_init(loop, &stream_timer);
    tsrv s;
    tsrv_start(loop, &s, &srv_leaf, NULL, 0, 0);
    copts c = {.host = "127.0.0.1", .ca = &ca, .max_conns = 1};
    hc_pool *p = tclient(loop, s.port, &c);
    for (int i = 0; i < 10; i++)
        assert_int_equal(fetch(&tl, p, "/cn", NULL, 0), 200);
    /* 3 MB each way through the filter. */
    size_t total = 3 << 20;
    char *big = xmalloc(total);
    for (size_t i = 0; i < total; i++)
        big[i] = (char)(i * 7 + i / 4096);
    result r;
    memset(&r, 0, sizeof(r));
    buf_init(&r.body, 8 << 20);
    hc_req_opts o = {
        .method = "POST", .path = "/echo", .body = big, .body_len = total, .on_done = on_done, .data = &r};
    hc_request(p, &o);
    tl_run_until(&tl, &r.done);
    assert_int_equal(r.status, 0);
    assert_int_equal(r.body.len, total);
    assert_memory_equal(r.body.data, big, total);
    hc_stats st;
    hc_pool_stats(p, &st);
    assert_int_equal((int)st.connects, 1);
    assert_int_equal((int)st.reused, 10);
    buf_free(&r.body);
    free(big);
    /* Streaming over TLS. */
    memset(&r, 0, sizeof(r));
    buf_init(&r.body, 1 << 20);
    hc_req_opts so = {.method = "GET", .path = "/stream", .on_done = on_done, .on_data = on_data, .data = &r};
    hc_request(p, &so);
    tl_run_until(&tl, &r.done);
    assert_int_equal(r.status, 0);
    assert_string_equal(buf_cstr(&r.body), "line 0\nline 1\nline 2\n");
    assert_true(r.data_calls >= 2);
    buf_free(&r.body);
    tclose(&tl, p);
    uv_close((uv_handle_t *)&stream_timer, NULL);
    tsrv_stop(&tl, &s);
    tl_finish(&tl);
}

static void silent(raw_conn *rc, const char *req, size_t len, int idx, void *data)
{
    (void)rc;
    (void)req;
    (void)len;
    (void)idx;
    (void)data;
}

static void test_handshake_timeouts(void **state)
{
    (void)state;
    test_loop tl;
    uv_loop_t *loop = tl_start(&tl, 20000);
    /* Server side: a TCP client that never says hello is closed. */
    tsrv s;
    tsrv_start(loop, &s, &srv_leaf, NULL, 0, 150);
    uint64_t t0 = uv_hrtime();
    raw_client *cl = rcl_connect(loop, s.port, NULL, 0);
    uv_ref((uv_handle_t *)&tl.watchdog);
    while (!cl->eof)
        uv_run(loop, UV_RUN_ONCE);
    uint64_t ms = (uv_hrtime() - t0) / 1000000;
    assert_true(ms >= 140 && ms < 5000);
    rcl_close(cl);
    /* Client side: a TCP server that never answers the ClientHello. */
    raw_server *rs = raw_listen(loop, silent, NULL);
    copts c = {.host = "127.0.0.1", .ca = &ca, .connect_ms = 150};
    hc_pool *p = tclient(loop, rs->port, &c);
    t0 = uv_hrtime();
    assert_int_equal(fetch(&tl, p, "/", NULL, 0), OP_ETIMEOUT);
    ms = (uv_hrtime() - t0) / 1000000;
    assert_true(ms >= 140 && ms < 5000);
    tclose(&tl, p);
    raw_server_close(rs);
    tsrv_stop(&tl, &s);
    tl_finish(&tl);
}

int main(void)
{
    if (getenv("TLS_TEST_DEBUG"))
        log_setup(getenv("TLS_TEST_DEBUG")[0] == '2' ? LOGL_TRACE : LOGL_DEBUG, LOGF_TEXT);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pki),
        cmocka_unit_test(test_tls_filter_in_memory),
        cmocka_unit_test(test_protocol_versions),
        cmocka_unit_test(test_https_verification),
        cmocka_unit_test(test_https_client_certificates),
        cmocka_unit_test(test_https_keepalive_bodies_streaming),
        cmocka_unit_test(test_handshake_timeouts),
        cmocka_unit_test(test_session_resumption),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
