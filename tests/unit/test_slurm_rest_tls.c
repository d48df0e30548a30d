/* slurmrestd over HTTPS: an https URL is verified with the CA given in
 * sr_opts.tls (slurmop's --slurmrestd-ca). Against an in-process TLS server
 * (core/httpd) with a throwaway CA (kubesim/pki): the right CA gets the
 * ping through with the JWT header; another CA, or a certificate for another
 * name, fails the handshake and the server never sees a request; an https
 * URL without TLS options is refused at creation. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/file.h"
#include "core/httpc.h"
#include "core/httpd.h"
#include "kubesim/pki.h"
#include "slurmio/rest.h"
#include "tests/unit/http_test_util.h"

static test_loop TL;
static pki_pair ca, other_ca, leaf, wrong_name;
static int served;
static char token_seen[16];
static char *ping_doc;
static size_t ping_len;

static int setup_all(void **state)
{
    const char *ip[] = {"127.0.0.1"};
    const char *other[] = {"10.9.9.9"};
    pki_leaf_opts s = {.cn = "slurmrestd", .ips = ip, .n_ips = 1, .usage = PKI_SERVER_AUTH};
    pki_leaf_opts w = {.cn = "elsewhere", .ips = other, .n_ips = 1, .usage = PKI_SERVER_AUTH};
    if (pki_ca_new("slurmrestd test CA", 1, &ca) || pki_ca_new("someone else", 1, &other_ca) ||
        pki_leaf_new(&ca, &s, &leaf) || pki_leaf_new(&ca, &w, &wrong_name))
        return -1;
    char path[1024];
    const char *src = getenv("OP_SOURCE_DIR");
    snprintf(path, sizeof(path), "%s/tests/data/slurmrestd/v38_ping_200.json", src ? src : ".");
    return file_read_all(path, 1 << 20, &ping_doc, &ping_len) == 0 ? 0 : -1;
}

static int teardown_all(void **state)
{
    pki_pair_free(&ca);
    pki_pair_free(&other_ca);
    pki_pair_free(&leaf);
    pki_pair_free(&wrong_name);
    free(ping_doc);
    return 0;
}

static void handler(hs_req *req, void *data)
{
    served++;
    const char *tok = hs_req_header(req, "X-SLURM-USER-TOKEN");
    snprintf(token_seen, sizeof(token_seen), "%s", tok ? tok : "");
    if (strstr(hs_req_path(req), "/ping"))
        hs_respond(req, 200, "application/json", NULL, ping_doc, ping_len);
    else
        hs_respond(req, 404, "text/plain", NULL, "no\n", 3);
}

typedef struct got {
    int done;
    int status;
} got;

static void on_resp(int status, sm_response *resp, void *data)
{
    got *g = data;
    g->status = status;
    g->done = 1;
}

static int closed, both_closed;
static void on_closed(void *data)
{
    if (++closed == 2)
        both_closed = 1;
}

/* One ping through an https client trusting trust_ca, against a server
 * presenting srv. Returns the ping's status. */
static int ping_with(const pki_pair *srv, const pki_pair *trust_ca)
{
    uv_loop_t *loop = tl_start(&TL, 10000);
    hs_tls_opts st = {.cert_pem = srv->cert_pem,
                      .cert_len = strlen(srv->cert_pem),
                      .key_pem = srv->key_pem,
                      .key_len = strlen(srv->key_pem)};
    hs_opts ho = {.tls = &st, .handler = handler};
    int err = 0;
    hs_server *hs = hs_listen(loop, "127.0.0.1", 0, &ho, &err);
    assert_non_null(hs);
    char url[64];
    snprintf(url, sizeof(url), "https://127.0.0.1:%d", hs_port(hs));
    hc_tls_opts tls = {.ca_pem = trust_ca->cert_pem, .ca_len = strlen(trust_ca->cert_pem)};
    sr_opts o = {.url = url, .tls = &tls, .key = "k3y-k3y-", .key_len = 8, .version = 38, .timeout_ms = 5000};
    sr_client *c = NULL;
    assert_int_equal(sr_client_new(loop, &o, &c), 0);
    got g = {0};
    served = 0;
    token_seen[0] = '\0';
    assert_int_equal(sr_ping(c, on_resp, &g), 0);
    tl_run_until(&TL, &g.done);
    closed = both_closed = 0;
    sr_client_close(c, on_closed, NULL);
    hs_close(hs, on_closed, NULL);
    tl_run_until(&TL, &both_closed);
    return g.status;
}

static void test_https_verified(void **state)
{
    assert_int_equal(ping_with(&leaf, &ca), 0);
    assert_int_equal(served, 1);
    assert_true(strlen(token_seen) > 0); /* the JWT crossed, encrypted */
    tl_finish(&TL);
}

static void test_https_other_ca_refused(void **state)
{
    assert_true(ping_with(&leaf, &other_ca) < 0);
    assert_int_equal(served, 0);
    tl_finish(&TL);
}

static void test_https_wrong_name_refused(void **state)
{
    assert_true(ping_with(&wrong_name, &ca) < 0);
    assert_int_equal(served, 0);
    tl_finish(&TL);
}

static void test_https_needs_tls_options(void **state)
{
    uv_loop_t *loop = tl_start(&TL, 5000);
    sr_opts o = {.url = "https://127.0.0.1:1", .key = "k3y-k3y-", .key_len = 8, .version = 38};
    sr_client *c = NULL;
    assert_true(sr_client_new(loop, &o, &c) < 0);
    assert_null(c);
    tl_finish(&TL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_https_verified),
        cmocka_unit_test(test_https_other_ca_refused),
        cmocka_unit_test(test_https_wrong_name_refused),
        cmocka_unit_test(test_https_needs_tls_options),
    };
    return cmocka_run_group_tests(tests, setup_all, teardown_all);
}
