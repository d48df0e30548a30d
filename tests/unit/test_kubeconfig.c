/* Unit tests for core/kubeconfig: kind-style files, tokens, relative paths,
 * $KUBECONFIG merging, error messages, in-cluster configuration, resolution
 * order and bearer-token re-reading. Files live in a fresh temp directory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/crypto.h"
#include "core/err.h"
#include "core/kubeconfig.h"
#include "core/log.h"

#define SEC 1000000000ull

static const char CA_PEM[] =
    "-----BEGIN CERTIFICATE-----\nMIIBdzCCAR2gAwIBAgIBADAKBggqhkjOPQQDAjAVMRMwEQYDVQQDEwprdWJlcm5l\n"
    "dGVzMB4XDTI0MDUwMTEwMDAwMFoXDTM0MDQyOTEwMDAwMFowFTETMBEGA1UEAxMK\n"
    "-----END CERTIFICATE-----\n";
static const char CERT_PEM[] = "-----BEGIN CERTIFICATE-----\nMIIBkTCCATegAwIBAgIIclient0123456789abcdef\n"
                               "-----END CERTIFICATE-----\n";
static const char KEY_PEM[] =
    "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIKeyMaterialNotRealButShapedLikeIt0000\n"
    "-----END EC PRIVATE KEY-----\n";

struct fixture {
    char dir[64];
    char err[512];
};

static struct fixture fx;

static void write_file(const char *rel, const char *content)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", fx.dir, rel);
    /* create intermediate directories */
    for (char *p = path + strlen(fx.dir) + 1; (p = strchr(p, '/')) != NULL; p++) {
        *p = '\0';
        mkdir(path, 0700);
        *p = '/';
    }
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(content, f);
    fclose(f);
}

static char *path_of(const char *rel)
{
    static char bufs[4][512];
    static int i;
    char *p = bufs[i++ % 4];
    snprintf(p, 512, "%s/%s", fx.dir, rel);
    return p;
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
    return remove(p);
}

static void clear_env(void)
{
    unsetenv("KUBECONFIG");
    unsetenv("KUBERNETES_SERVICE_HOST");
    unsetenv("KUBERNETES_SERVICE_PORT");
}

static int setup(void **state)
{
    strcpy(fx.dir, "/tmp/kcfg-test-XXXXXX");
    assert_non_null(mkdtemp(fx.dir));
    fx.err[0] = '\0';
    clear_env();
    setenv("HOME", fx.dir, 1); /* no ~/.kube/config unless a test writes one */
    log_setup(-1, LOGF_TEXT);  /* expected failures log */
    return 0;
}

static int teardown(void **state)
{
    nftw(fx.dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    clear_env();
    log_setup(LOGL_INFO, LOGF_TEXT);
    return 0;
}

static char *b64(const char *s)
{
    return base64_encode(s, strlen(s));
}

/* kind's admin.conf: everything inline as *-data. */
static void write_kind(const char *rel, const char *server)
{
    char *ca = b64(CA_PEM), *cert = b64(CERT_PEM), *key = b64(KEY_PEM);
    char text[4096];
    snprintf(text, sizeof(text),
             "apiVersion: v1\n"
             "kind: Config\n"
             "preferences: {}\n"
             "current-context: kind-dev\n"
             "clusters:\n"
             "- cluster:\n"
             "    certificate-authority-data: %s\n"
             "    server: %s\n"
             "  name: kind-dev\n"
             "contexts:\n"
             "- context:\n"
             "    cluster: kind-dev\n"
             "    user: kind-dev\n"
             "  name: kind-dev\n"
             "users:\n"
             "- name: kind-dev\n"
             "  user:\n"
             "    client-certificate-data: %s\n"
             "    client-key-data: %s\n",
             ca, server, cert, key);
    write_file(rel, text);
    free(ca);
    free(cert);
    free(key);
}

static void test_kind_file(void **state)
{
    write_kind("kind.yaml", "https://127.0.0.1:41235");
    kcfg *c = NULL;
    assert_int_equal(kcfg_load_file(path_of("kind.yaml"), NULL, &c, fx.err, sizeof(fx.err)), 0);
    assert_string_equal(c->server, "https://127.0.0.1:41235");
    assert_string_equal(c->host, "127.0.0.1");
    assert_int_equal(c->port, 41235);
    assert_true(c->tls);
    assert_string_equal(c->path_prefix, "");
    assert_int_equal(c->ca_len, strlen(CA_PEM));
    assert_memory_equal(c->ca_pem, CA_PEM, c->ca_len);
    assert_int_equal(c->cert_len, strlen(CERT_PEM));
    assert_memory_equal(c->cert_pem, CERT_PEM, c->cert_len);
    assert_string_equal(c->key_pem, KEY_PEM);
    assert_null(kcfg_token(c, 1));
    assert_null(c->token_file);
    assert_null(c->namespace);
    assert_null(c->tls_server_name);
    assert_false(c->insecure);
    assert_non_null(strstr(c->source, "kind.yaml"));
    assert_non_null(strstr(c->source, "kind-dev"));
    kcfg_free(c);

    /* The same through the resolution order, as an explicit path. */
    kcfg_opts o = {.kubeconfig = path_of("kind.yaml")};
    assert_int_equal(kcfg_load(&o, &c, fx.err, sizeof(fx.err)), 0);
    assert_string_equal(c->server, "https://127.0.0.1:41235");
    kcfg_free(c);

    /* JSON is valid YAML, and kubeconfigs may be written as JSON. */
    write_file("json.conf",
               "{\"apiVersion\": \"v1\", \"kind\": \"Config\", \"current-context\": \"j\",\n"
               " \"clusters\": [{\"name\": \"j\", \"cluster\": {\"server\": \"https://[::1]:7443\",\n"
               "   \"insecure-skip-tls-verify\": true}}],\n"
               " \"contexts\": [{\"name\": \"j\", \"context\": {\"cluster\": \"j\", \"user\": \"j\"}}],\n"
               " \"users\": [{\"name\": \"j\", \"user\": {\"token\": \"json-token\"}}]}\n");
    assert_int_equal(kcfg_load_file(path_of("json.conf"), NULL, &c, fx.err, sizeof(fx.err)), 0);
    assert_string_equal(c->server, "https://[::1]:7443");
    assert_true(c->insecure);
    assert_string_equal(kcfg_token(c, 1), "json-token");
    kcfg_free(c);

    /* IPv6 loopback, default port, path prefix and trailing slashes. */
    const struct {
        const char *url, *server, *host, *prefix;
    } urls[] = {
        {"https://[::1]:6443", "https://[::1]:6443", "::1", ""},
        {"https://kube.example.com", "https://kube.example.com:443", "kube.example.com", ""},
        {"http://127.0.0.1:8080/", "http://127.0.0.1:8080", "127.0.0.1", ""},
        {"https://rancher.example/k8s/clusters/c-1/", "https://rancher.example:443", "rancher.example",
         "/k8s/clusters/c-1"},
        {"10.0.0.1:6443", "https://10.0.0.1:6443", "10.0.0.1", ""},
    };
    for (size_t i = 0; i < sizeof(urls) / sizeof(urls[0]); i++) {
        write_kind("v6.yaml", urls[i].url);
        assert_int_equal(kcfg_load_file(path_of("v6.yaml"), NULL, &c, fx.err, sizeof(fx.err)), 0);
        assert_string_equal(c->server, urls[i].server);
        assert_string_equal(c->host, urls[i].host);
        assert_string_equal(c->path_prefix, urls[i].prefix);
        kcfg_free(c);
    }
}

static void test_token_and_token_file(void **state)
{
    write_file("tok/secret", "  file-token-1\n\n");
    write_file("cfg/config", "current-context: a\n"
                             "clusters:\n"
                             "- name: c\n"
                             "  cluster:\n"
                             "    server: https://10.0.0.1:6443\n"
                             "    insecure-skip-tls-verify: true\n"
                             "    tls-server-name: kubernetes.default\n"
                             "contexts:\n"
                             "- name: a\n"
                             "  context: {cluster: c, user: static, namespace: team-a}\n"
                             "- name: b\n"
                             "  context: {cluster: c, user: file}\n"
                             "- name: both\n"
                             "  context: {cluster: c, user: both}\n"
                             "users:\n"
                             "- name: static\n"
                             "  user:\n"
                             "    token: \"0123456789\"\n"
                             "- name: file\n"
                             "  user:\n"
                             "    tokenFile: ../tok/secret\n"
                             "- name: both\n"
                             "  user:\n"
                             "    token: static-token\n"
                             "    tokenFile: ../tok/secret\n");
    kcfg *c;
    assert_int_equal(kcfg_load_file(path_of("cfg/config"), NULL, &c, fx.err, sizeof(fx.err)), 0);
    assert_string_equal(kcfg_token(c, 5), "0123456789");
    assert_null(c->token_file);
    assert_string_equal(c->namespace, "team-a");
    assert_true(c->insecure);
    assert_null(c->ca_pem);
    assert_string_equal(c->tls_server_name, "kubernetes.default");
    kcfg_free(c);

    assert_int_equal(kcfg_load_file(path_of("cfg/config"), "b", &c, fx.err, sizeof(fx.err)), 0);
    assert_string_equal(kcfg_token(c, 5), "file-token-1");
    assert_string_equal(c->token_file, path_of("cfg/../tok/secret"));
    kcfg_free(c);

    /* tokenFile wins over token. */
    assert_int_equal(kcfg_load_file(path_of("cfg/config"), "both", &c, fx.err, sizeof(fx.err)), 0);
    assert_string_equal(kcfg_token(c, 5), "file-token-1");
    kcfg_free(c);
}

static void test_relative_paths_and_data_precedence(void **state)
{
    write_file("conf/certs/ca.pem", CA_PEM);
    write_file("conf/certs/client.crt", CERT_PEM);
    write_file("keys/client.key", KEY_PEM);
    write_file("conf/kubeconfig", "current-context: x\n"
                                  "clusters:\n"
                                  "- name: x\n"
                                  "  cluster:\n"
                                  "    server: https://api.example:6443\n"
                                  "    certificate-authority: certs/ca.pem\n"
                                  "contexts:\n"
                                  "- name: x\n"
                                  "  context: {cluster: x, user: x}\n"
                                  "- name: y\n"
                                  "  context: {cluster: y, user: x}\n"
                                  "users:\n"
                                  "- name: x\n"
                                  "  user:\n"
                                  "    client-certificate: certs/client.crt\n"
                                  "    client-key: ../keys/client.key\n");
    kcfg *c;
    assert_int_equal(kcfg_load_file(path_of("conf/kubeconfig"), NULL, &c, fx.err, sizeof(fx.err)), 0);
    assert_string_equal(c->ca_pem, CA_PEM);
    assert_string_equal(c->cert_pem, CERT_PEM);
    assert_string_equal(c->key_pem, KEY_PEM);
    kcfg_free(c);

    /* *-data wins over the path, even when the path does not exist. */
    char *ca = b64("inline CA\n");
    char text[1024];
    snprintf(text, sizeof(text),
             "current-context: x\n"
             "clusters:\n"
             "- name: x\n"
             "  cluster:\n"
             "    server: https://api.example:6443\n"
             "    certificate-authority: does/not/exist.pem\n"
             "    certificate-authority-data: %s\n"
             "contexts:\n"
             "- {name: x, context: {cluster: x}}\n",
             ca);
    free(ca);
    write_file("data/kubeconfig", text);
    assert_int_equal(kcfg_load_file(path_of("data/kubeconfig"), NULL, &c, fx.err, sizeof(fx.err)), 0);
    assert_string_equal(c->ca_pem, "inline CA\n");
    assert_null(c->cert_pem);
    kcfg_free(c);
}

static void test_kubeconfig_merge_precedence(void **state)
{
    write_file("one/config", "current-context: ctx1\n"
                             "clusters:\n"
                             "- name: c1\n"
                             "  cluster: {server: https://one.example:1111}\n"
                             "users:\n"
                             "- name: u1\n"
                             "  user: {token: token-one}\n"
                             "contexts:\n"
                             "- name: ctx1\n"
                             "  context: {cluster: c1, user: u1, namespace: ns-one}\n"
                             "- name: ctx2\n"
                             "  context: {cluster: c2, user: u1}\n");
    write_file("two/ca.pem", "CA of file two\n");
    write_file("two/config", "current-context: ctx3\n"
                             "clusters:\n"
                             "- name: c1\n"
                             "  cluster: {server: https://ignored.example:2222}\n"
                             "- name: c2\n"
                             "  cluster: {server: https://two.example:3333, certificate-authority: ca.pem}\n"
                             "users:\n"
                             "- name: u1\n"
                             "  user: {token: ignored}\n"
                             "- name: u2\n"
                             "  user: {token: token-two}\n"
                             "contexts:\n"
                             "- name: ctx1\n"
                             "  context: {cluster: c2, user: u2}\n"
                             "- name: ctx3\n"
                             "  context: {cluster: c2, user: u2, namespace: ns-three}\n");
    write_file("three/config", "clusters: []\nusers: null\n");
    char env[1024];
    snprintf(env, sizeof(env), "%s:%s:%s", path_of("one/config"), path_of("missing/config"),
             path_of("two/config"));
    setenv("KUBECONFIG", env, 1);

    kcfg *c;
    kcfg_opts o = {0};
    assert_int_equal(kcfg_load(&o, &c, fx.err, sizeof(fx.err)), 0);
    /* current-context and every name from the first file that has it. */
    assert_string_equal(c->server, "https://one.example:1111");
    assert_string_equal(kcfg_token(c, 1), "token-one");
    assert_string_equal(c->namespace, "ns-one");
    kcfg_free(c);

    /* ctx2 (file one) names c2, which only file two defines; its CA path is
     * relative to file two's directory. */
    o.context = "ctx2";
    assert_int_equal(kcfg_load(&o, &c, fx.err, sizeof(fx.err)), 0);
    assert_string_equal(c->server, "https://two.example:3333");
    assert_string_equal(c->ca_pem, "CA of file two\n");
    assert_string_equal(kcfg_token(c, 1), "token-one");
    kcfg_free(c);

    o.context = "ctx3";
    assert_int_equal(kcfg_load(&o, &c, fx.err, sizeof(fx.err)), 0);
    assert_string_equal(kcfg_token(c, 1), "token-two");
    assert_string_equal(c->namespace, "ns-three");
    kcfg_free(c);

    /* A first file without current-context leaves it to the next one. */
    snprintf(env, sizeof(env), "%s:%s", path_of("three/config"), path_of("two/config"));
    setenv("KUBECONFIG", env, 1);
    o.context = NULL;
    assert_int_equal(kcfg_load(&o, &c, fx.err, sizeof(fx.err)), 0);
    assert_non_null(strstr(c->source, "context ctx3"));
    assert_string_equal(c->server, "https://two.example:3333");
    assert_string_equal(c->namespace, "ns-three");
    kcfg_free(c);

    /* An explicit path beats $KUBECONFIG. */
    o.kubeconfig = path_of("one/config");
    assert_int_equal(kcfg_load(&o, &c, fx.err, sizeof(fx.err)), 0);
    assert_string_equal(c->server, "https://one.example:1111");
    kcfg_free(c);

    /* Every file missing. */
    snprintf(env, sizeof(env), "%s:%s", path_of("nope1"), path_of("nope2"));
    setenv("KUBECONFIG", env, 1);
    o.kubeconfig = NULL;
    assert_int_equal(kcfg_load(&o, &c, fx.err, sizeof(fx.err)), OP_ENOTFOUND);
    assert_null(c);
    assert_non_null(strstr(fx.err, "none of the files exists"));
}

/* Load a file with the given body and expect a failure with code and a
 * message containing each of the given fragments. */
static void expect_error(const char *body, const char *context, int code, const char *frag1,
                         const char *frag2)
{
    write_file("bad/config", body);
    kcfg *c = (kcfg *)(uintptr_t)1;
    fx.err[0] = '\0';
    int rc = kcfg_load_file(path_of("bad/config"), context, &c, fx.err, sizeof(fx.err));
    if (rc != code || (frag1 && !strstr(fx.err, frag1)) || (frag2 && !strstr(fx.err, frag2)))
        fprintf(stderr, "rc=%d (%s) err=%s\n", rc, err_name(rc), fx.err);
    assert_int_equal(rc, code);
    assert_null(c);
    assert_non_null(strstr(fx.err, path_of("bad/config")));
    if (frag1)
        assert_non_null(strstr(fx.err, frag1));
    if (frag2)
        assert_non_null(strstr(fx.err, frag2));
}

#define BASE_CLUSTER "clusters:\n- name: c\n  cluster: {server: \"https://k:6443\"}\n"
#define BASE_CTX "contexts:\n- name: x\n  context: {cluster: c, user: u}\n"

static void test_errors(void **state)
{
    expect_error(BASE_CLUSTER BASE_CTX "users:\n- name: u\n  user: {token: t}\n", NULL, OP_ECONFIG,
                 "no current-context", NULL);
    expect_error("current-context: x\n" BASE_CLUSTER BASE_CTX "users:\n- name: u\n  user: {token: t}\n",
                 "nope", OP_ECONFIG, "context \"nope\" is not defined", NULL);
    expect_error("current-context: gone\n" BASE_CLUSTER BASE_CTX, NULL, OP_ECONFIG, "context \"gone\"",
                 "current-context");
    expect_error("current-context: x\n" BASE_CTX "users:\n- name: u\n  user: {token: t}\n", NULL, OP_ECONFIG,
                 "cluster \"c\" is not defined", NULL);
    expect_error("current-context: x\n" BASE_CLUSTER BASE_CTX, NULL, OP_ECONFIG, "user \"u\" is not defined",
                 NULL);
    expect_error(
        "current-context: x\nclusters:\n- name: c\n  cluster: {insecure-skip-tls-verify: true}\n" BASE_CTX
        "users:\n- name: u\n  user: {token: t}\n",
        NULL, OP_ECONFIG, "cluster \"c\"", "no \"server\"");
    expect_error("current-context: x\n" BASE_CLUSTER BASE_CTX
                 "users:\n- name: u\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1\n"
                 "      command: aws\n",
                 NULL, OP_ENOTSUP, "user \"u\"", "\"exec\"");
    expect_error("current-context: x\n" BASE_CLUSTER BASE_CTX
                 "users:\n- name: u\n  user:\n    auth-provider: {name: gcp}\n",
                 NULL, OP_ENOTSUP, "\"auth-provider\"", NULL);
    expect_error("current-context: x\n" BASE_CLUSTER BASE_CTX
                 "users:\n- name: u\n  user: {username: a, password: b}\n",
                 NULL, OP_ENOTSUP, "basic authentication", NULL);
    expect_error("current-context: x\nclusters:\n- name: c\n  cluster: {server: \"https://k\", proxy-url: "
                 "\"http://proxy:3128\"}\n" BASE_CTX "users:\n- name: u\n  user: {token: t}\n",
                 NULL, OP_ENOTSUP, "\"proxy-url\"", NULL);
    char *ca = b64(CA_PEM);
    char body[2048];
    snprintf(body, sizeof(body),
             "current-context: x\nclusters:\n- name: c\n  cluster:\n    server: https://k\n"
             "    insecure-skip-tls-verify: true\n    certificate-authority-data: %s\n" BASE_CTX
             "users:\n- name: u\n  user: {token: t}\n",
             ca);
    free(ca);
    expect_error(body, NULL, OP_ECONFIG, "insecure-skip-tls-verify", "certificate authority");
    expect_error("current-context: x\n" BASE_CLUSTER BASE_CTX
                 "users:\n- name: u\n  user: {client-certificate-data: \"aGVsbG8=\"}\n",
                 NULL, OP_ECONFIG, "client-certificate is set without client-key", NULL);
    expect_error("current-context: x\n" BASE_CLUSTER BASE_CTX
                 "users:\n- name: u\n  user: {client-key-data: \"!!!not base64!!!\"}\n",
                 NULL, OP_ECONFIG, "\"client-key-data\"", "base64");
    expect_error("current-context: x\nclusters:\n- name: c\n  cluster: {server: \"https://k\", "
                 "certificate-authority: missing-ca.pem}\n" BASE_CTX
                 "users:\n- name: u\n  user: {token: t}\n",
                 NULL, OP_ERRNO(ENOENT), "missing-ca.pem", "certificate-authority");
    expect_error("current-context: x\n" BASE_CLUSTER BASE_CTX
                 "users:\n- name: u\n  user: {tokenFile: no-such}\n",
                 NULL, OP_ERRNO(ENOENT), "tokenFile", "no-such");
    expect_error("current-context: x\nclusters:\n- name: c\n  cluster: {server: \"ftp://k\"}\n" BASE_CTX
                 "users:\n- name: u\n  user: {token: t}\n",
                 NULL, OP_ECONFIG, "scheme", NULL);
    expect_error(
        "current-context: x\nclusters:\n- name: c\n  cluster: {server: \"https://k:99999\"}\n" BASE_CTX
        "users:\n- name: u\n  user: {token: t}\n",
        NULL, OP_ECONFIG, "bad port", NULL);
    expect_error("current-context: x\n" BASE_CLUSTER BASE_CTX "users:\n- name: u\n  user: {token: 12345}\n",
                 NULL, OP_ECONFIG, "\"token\"", "string");
    expect_error("clusters: {a: b}\n", NULL, OP_ECONFIG, "\"clusters\" must be a list", NULL);
    expect_error("clusters:\n- cluster: {server: https://k}\n", NULL, OP_ECONFIG, "clusters[0]", "name");
    expect_error("clusters:\n  - name: [unclosed\n", NULL, OP_EPARSE, "line", NULL);

    /* An explicit path that does not exist is an error, not a skip. */
    kcfg *c;
    kcfg_opts o = {.kubeconfig = path_of("nothing-here")};
    assert_int_equal(kcfg_load(&o, &c, fx.err, sizeof(fx.err)), OP_ERRNO(ENOENT));
    assert_non_null(strstr(fx.err, "nothing-here"));
}

static void write_sa(const char *token)
{
    write_file("sa/token", token);
    write_file("sa/ca.crt", CA_PEM);
    write_file("sa/namespace", "slurm\n");
}

static void test_in_cluster(void **state)
{
    write_sa("eyJhbGciOi.sa-token-1\n");
    kcfg *c;
    /* Not in a cluster. */
    assert_int_equal(kcfg_in_cluster(path_of("sa"), &c, fx.err, sizeof(fx.err)), OP_ENOTFOUND);
    setenv("KUBERNETES_SERVICE_HOST", "fd00:10:96::1", 1);
    assert_int_equal(kcfg_in_cluster(path_of("sa"), &c, fx.err, sizeof(fx.err)), OP_ENOTFOUND);
    setenv("KUBERNETES_SERVICE_PORT", "443", 1);

    assert_int_equal(kcfg_in_cluster(path_of("sa"), &c, fx.err, sizeof(fx.err)), 0);
    assert_string_equal(c->server, "https://[fd00:10:96::1]:443");
    assert_string_equal(c->host, "fd00:10:96::1");
    assert_int_equal(c->port, 443);
    assert_string_equal(kcfg_token(c, 1), "eyJhbGciOi.sa-token-1");
    assert_string_equal(c->ca_pem, CA_PEM);
    assert_string_equal(c->namespace, "slurm");
    assert_string_equal(c->token_file, path_of("sa/token"));
    assert_null(c->cert_pem);
    assert_non_null(strstr(c->source, "in-cluster"));
    kcfg_free(c);

    setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
    setenv("KUBERNETES_SERVICE_PORT", "6443", 1);
    assert_int_equal(kcfg_in_cluster(path_of("sa"), &c, fx.err, sizeof(fx.err)), 0);
    assert_string_equal(c->server, "https://10.96.0.1:6443");
    kcfg_free(c);

    setenv("KUBERNETES_SERVICE_PORT", "https", 1);
    assert_int_equal(kcfg_in_cluster(path_of("sa"), &c, fx.err, sizeof(fx.err)), OP_ECONFIG);
    assert_non_null(strstr(fx.err, "KUBERNETES_SERVICE_PORT"));
    setenv("KUBERNETES_SERVICE_PORT", "443", 1);

    /* Unusable service account: a clear error naming the file. */
    unlink(path_of("sa/ca.crt"));
    assert_int_equal(kcfg_in_cluster(path_of("sa"), &c, fx.err, sizeof(fx.err)), OP_ERRNO(ENOENT));
    assert_non_null(strstr(fx.err, "ca.crt"));
    unlink(path_of("sa/token"));
    assert_int_equal(kcfg_in_cluster(path_of("sa"), &c, fx.err, sizeof(fx.err)), OP_ERRNO(ENOENT));
    assert_non_null(strstr(fx.err, "token"));
    /* ... which kcfg_load reports when there is no ~/.kube/config either. */
    kcfg_opts o = {.sa_dir = path_of("sa")};
    assert_int_equal(kcfg_load(&o, &c, fx.err, sizeof(fx.err)), OP_ERRNO(ENOENT));
    assert_non_null(strstr(fx.err, "in-cluster"));
}

static void test_resolution_order(void **state)
{
    kcfg *c;
    kcfg_opts o = {.sa_dir = path_of("sa")};
    /* Nothing at all. */
    assert_int_equal(kcfg_load(&o, &c, fx.err, sizeof(fx.err)), OP_ENOTFOUND);
    assert_non_null(strstr(fx.err, ".kube/config"));

    /* ~/.kube/config when not in a cluster. */
    write_kind(".kube/config", "https://127.0.0.1:1001");
    assert_int_equal(kcfg_load(&o, &c, fx.err, sizeof(fx.err)), 0);
    assert_string_equal(c->server, "https://127.0.0.1:1001");
    kcfg_free(c);

    /* In-cluster beats ~/.kube/config. */
    write_sa("sa-token\n");
    setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
    setenv("KUBERNETES_SERVICE_PORT", "443", 1);
    assert_int_equal(kcfg_load(&o, &c, fx.err, sizeof(fx.err)), 0);
    assert_string_equal(c->server, "https://10.96.0.1:443");
    kcfg_free(c);

    /* $KUBECONFIG beats in-cluster. */
    write_kind("env.yaml", "https://127.0.0.1:1002");
    setenv("KUBECONFIG", path_of("env.yaml"), 1);
    assert_int_equal(kcfg_load(&o, &c, fx.err, sizeof(fx.err)), 0);
    assert_string_equal(c->server, "https://127.0.0.1:1002");
    kcfg_free(c);

    /* The explicit path beats everything. */
    write_kind("flag.yaml", "https://127.0.0.1:1003");
    o.kubeconfig = path_of("flag.yaml");
    assert_int_equal(kcfg_load(&o, &c, fx.err, sizeof(fx.err)), 0);
    assert_string_equal(c->server, "https://127.0.0.1:1003");
    kcfg_free(c);
}

static void test_token_reread(void **state)
{
    write_file("t/token", "first\n");
    char body[512];
    snprintf(body, sizeof(body),
             "current-context: x\n" BASE_CLUSTER BASE_CTX "users:\n- name: u\n  user: {tokenFile: %s}\n",
             path_of("t/token"));
    write_file("t/config", body);
    kcfg *c;
    assert_int_equal(kcfg_load_file(path_of("t/config"), NULL, &c, fx.err, sizeof(fx.err)), 0);
    uint64_t t0 = 1000 * SEC;
    assert_string_equal(kcfg_token(c, t0), "first");

    /* Rotated on disk: not picked up before a minute has passed ... */
    write_file("t/token", "  second \n");
    assert_string_equal(kcfg_token(c, t0 + 30 * SEC), "first");
    assert_string_equal(kcfg_token(c, t0 + 59 * SEC), "first");
    /* ... and picked up (trimmed) once it has. */
    assert_string_equal(kcfg_token(c, t0 + 60 * SEC), "second");

    /* After a 401 the next call re-reads at once. */
    write_file("t/token", "third");
    assert_string_equal(kcfg_token(c, t0 + 61 * SEC), "second");
    kcfg_token_invalidate(c);
    assert_string_equal(kcfg_token(c, t0 + 61 * SEC), "third");
    write_file("t/token", "fourth");
    assert_string_equal(kcfg_token(c, t0 + 62 * SEC), "third"); /* the minute restarted */

    /* A failed re-read keeps the last good token. */
    unlink(path_of("t/token"));
    kcfg_token_invalidate(c);
    assert_string_equal(kcfg_token(c, t0 + 63 * SEC), "third");
    write_file("t/token", "   \n");
    kcfg_token_invalidate(c);
    assert_string_equal(kcfg_token(c, t0 + 64 * SEC), "third");
    write_file("t/token", "fifth\n");
    assert_string_equal(kcfg_token(c, t0 + 100 * SEC), "third");
    assert_string_equal(kcfg_token(c, t0 + 124 * SEC), "fifth");
    kcfg_free(c);

    /* In-cluster tokens rotate the same way. */
    write_sa("sa-1\n");
    setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
    setenv("KUBERNETES_SERVICE_PORT", "443", 1);
    assert_int_equal(kcfg_in_cluster(path_of("sa"), &c, fx.err, sizeof(fx.err)), 0);
    /* invalidated before first use: read at once */
    write_file("sa/token", "sa-2\n");
    kcfg_token_invalidate(c);
    assert_string_equal(kcfg_token(c, 5 * SEC), "sa-2");
    write_file("sa/token", "sa-3\n");
    assert_string_equal(kcfg_token(c, 64 * SEC), "sa-2");
    assert_string_equal(kcfg_token(c, 65 * SEC), "sa-3");
    kcfg_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_kind_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_token_and_token_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_relative_paths_and_data_precedence, setup, teardown),
        cmocka_unit_test_setup_teardown(test_kubeconfig_merge_precedence, setup, teardown),
        cmocka_unit_test_setup_teardown(test_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_in_cluster, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resolution_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_token_reread, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
