/* Unit tests for reconcilers/sshkeys: key formats (the OpenSSH key file of
 * Ed25519 field by field), the SSH wire encoding of the public keys,
 * OpenSSH's own reading of our private keys (ssh-keygen -y and -l,
 * when installed) and concurrent generation on the libuv threadpool. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "core/crypto.h"
#include "core/err.h"
#include "reconcilers/sshkeys.h"

/* Split "type base64\n" and decode the blob. */
static uint8_t *blob_of(const char *line, const char *type, size_t *len)
{
    size_t tl = strlen(type);
    assert_memory_equal(line, type, tl);
    assert_int_equal(line[tl], ' ');
    const char *b64 = line + tl + 1;
    const char *nl = strchr(b64, '\n');
    assert_non_null(nl);
    assert_int_equal(nl[1], '\0');
    uint8_t *blob = base64_decode(b64, (size_t)(nl - b64), len);
    assert_non_null(blob);
    return blob;
}

/* Read one RFC 4251 string at *off. */
static const uint8_t *wire_take(const uint8_t *blob, size_t len, size_t *off, size_t *n)
{
    assert_true(*off + 4 <= len);
    *n = (size_t)blob[*off] << 24 | (size_t)blob[*off + 1] << 16 | (size_t)blob[*off + 2] << 8 |
         blob[*off + 3];
    *off += 4;
    assert_true(*off + *n <= len);
    const uint8_t *p = blob + *off;
    *off += *n;
    return p;
}

static void check_rsa(const sshk_keypair *kp, unsigned bits)
{
    assert_non_null(strstr(kp->private_pem, "-----BEGIN RSA PRIVATE KEY-----\n"));
    assert_non_null(strstr(kp->private_pem, "-----END RSA PRIVATE KEY-----\n"));
    size_t len, off = 0, n;
    uint8_t *blob = blob_of(kp->public_ssh, "ssh-rsa", &len);
    const uint8_t *p = wire_take(blob, len, &off, &n);
    assert_int_equal(n, 7);
    assert_memory_equal(p, "ssh-rsa", 7);
    /* e = 65537 as a minimal mpint. */
    p = wire_take(blob, len, &off, &n);
    assert_int_equal(n, 3);
    assert_memory_equal(p, "\x01\x00\x01", 3);
    /* n: top bit set for an RSA modulus of exactly `bits`, so an mpint
     * carries one leading zero byte. */
    p = wire_take(blob, len, &off, &n);
    assert_int_equal(n, bits / 8 + 1);
    assert_int_equal(p[0], 0);
    assert_true(p[1] & 0x80);
    assert_int_equal(off, len);
    free(blob);
}

static void check_ecdsa(const sshk_keypair *kp)
{
    assert_non_null(strstr(kp->private_pem, "-----BEGIN EC PRIVATE KEY-----\n"));
    size_t len, off = 0, n;
    uint8_t *blob = blob_of(kp->public_ssh, "ecdsa-sha2-nistp256", &len);
    const uint8_t *p = wire_take(blob, len, &off, &n);
    assert_int_equal(n, 19);
    assert_memory_equal(p, "ecdsa-sha2-nistp256", 19);
    p = wire_take(blob, len, &off, &n);
    assert_int_equal(n, 8);
    assert_memory_equal(p, "nistp256", 8);
    p = wire_take(blob, len, &off, &n);
    assert_int_equal(n, 65);
    assert_int_equal(p[0], 4); /* uncompressed point */
    assert_int_equal(off, len);
    free(blob);
}

/* The OpenSSH key file, field by field (PROTOCOL.key). */
static void check_ed25519(const sshk_keypair *kp)
{
    static const char begin[] = "-----BEGIN OPENSSH PRIVATE KEY-----\n";
    static const char end[] = "-----END OPENSSH PRIVATE KEY-----\n";
    const char *t = kp->private_pem;
    assert_memory_equal(t, begin, sizeof(begin) - 1);
    size_t tl = strlen(t);
    assert_true(tl > sizeof(begin) + sizeof(end));
    assert_string_equal(t + tl - (sizeof(end) - 1), end);
    /* Base64 lines of 70 characters, the last one shorter or equal. */
    char b64[1024];
    size_t bn = 0;
    const char *line = t + sizeof(begin) - 1;
    const char *stop = t + tl - (sizeof(end) - 1);
    while (line < stop) {
        const char *nl = strchr(line, '\n');
        assert_non_null(nl);
        size_t n = (size_t)(nl - line);
        if (nl + 1 < stop)
            assert_int_equal(n, 70);
        else
            assert_true(n > 0 && n <= 70);
        assert_true(bn + n < sizeof(b64));
        memcpy(b64 + bn, line, n);
        bn += n;
        line = nl + 1;
    }
    size_t len, off = 15, n;
    uint8_t *bin = base64_decode(b64, bn, &len);
    assert_non_null(bin);
    assert_memory_equal(bin, "openssh-key-v1\0", 15);
    const uint8_t *p = wire_take(bin, len, &off, &n);
    assert_int_equal(n, 4);
    assert_memory_equal(p, "none", 4); /* cipher */
    p = wire_take(bin, len, &off, &n);
    assert_int_equal(n, 4);
    assert_memory_equal(p, "none", 4); /* kdf */
    wire_take(bin, len, &off, &n);
    assert_int_equal(n, 0); /* kdf options */
    assert_true(off + 4 <= len);
    assert_memory_equal(bin + off, "\0\0\0\1", 4); /* one key */
    off += 4;
    size_t pubn;
    const uint8_t *pub = wire_take(bin, len, &off, &pubn);
    /* The header's public blob is the one of the .pub line. */
    size_t plen;
    uint8_t *pblob = blob_of(kp->public_ssh, "ssh-ed25519", &plen);
    assert_int_equal(plen, pubn);
    assert_memory_equal(pblob, pub, pubn);
    size_t po = 0;
    p = wire_take(pblob, plen, &po, &n);
    assert_int_equal(n, 11);
    assert_memory_equal(p, "ssh-ed25519", 11);
    const uint8_t *pk = wire_take(pblob, plen, &po, &n);
    assert_int_equal(n, 32);
    assert_int_equal(po, plen);
    /* The private section: check ints, type, pk, sk = seed || pk, an empty
     * comment, padding 1, 2, 3, ... to a multiple of 8. */
    size_t privn;
    const uint8_t *priv = wire_take(bin, len, &off, &privn);
    assert_int_equal(off, len);
    assert_int_equal(privn % 8, 0);
    assert_true(privn >= 8);
    assert_memory_equal(priv, priv + 4, 4);
    size_t so = 8;
    p = wire_take(priv, privn, &so, &n);
    assert_int_equal(n, 11);
    assert_memory_equal(p, "ssh-ed25519", 11);
    p = wire_take(priv, privn, &so, &n);
    assert_int_equal(n, 32);
    assert_memory_equal(p, pk, 32);
    p = wire_take(priv, privn, &so, &n);
    assert_int_equal(n, 64);
    assert_memory_equal(p + 32, pk, 32);
    wire_take(priv, privn, &so, &n);
    assert_int_equal(n, 0);
    for (uint8_t pad = 1; so < privn; pad++, so++)
        assert_int_equal(priv[so], pad);
    free(pblob);
    free(bin);
}

static void test_ed25519(void **state)
{
    sshk_keypair a, b;
    assert_int_equal(sshk_generate(SSHK_ED25519, 0, NULL, &a), 0);
    assert_int_equal(sshk_generate(SSHK_ED25519, 0, NULL, &b), 0);
    check_ed25519(&a);
    check_ed25519(&b);
    assert_string_not_equal(a.public_ssh, b.public_ssh);
    assert_string_not_equal(a.private_pem, b.private_pem);
    char *pub = NULL;
    assert_int_equal(sshk_public_from_private(a.private_pem, &pub), 0);
    assert_string_equal(pub, a.public_ssh);
    free(pub);
    /* A damaged file is refused, never half read. */
    char *bad = strdup(a.private_pem);
    bad[40] = bad[40] == 'A' ? 'B' : 'A';
    assert_int_equal(sshk_public_from_private(bad, &pub), OP_EPARSE);
    assert_null(pub);
    bad[60] = '\0';
    assert_int_equal(sshk_public_from_private(bad, &pub), OP_EPARSE);
    free(bad);
    sshk_keypair_free(&a);
    sshk_keypair_free(&b);
}

static void test_ecdsa(void **state)
{
    sshk_keypair a, b;
    assert_int_equal(sshk_generate(SSHK_ECDSA_P256, 0, NULL, &a), 0);
    assert_int_equal(sshk_generate(SSHK_ECDSA_P256, 0, NULL, &b), 0);
    check_ecdsa(&a);
    check_ecdsa(&b);
    assert_string_not_equal(a.public_ssh, b.public_ssh);
    char *pub = NULL;
    assert_int_equal(sshk_public_from_private(a.private_pem, &pub), 0);
    assert_string_equal(pub, a.public_ssh);
    free(pub);
    sshk_keypair_free(&a);
    sshk_keypair_free(&b);
    sshk_keypair_free(&b); /* idempotent */
    assert_null(b.private_pem);
}

static void test_rsa_2048(void **state)
{
    sshk_keypair kp;
    assert_int_equal(sshk_generate(SSHK_RSA, 2048, NULL, &kp), 0);
    check_rsa(&kp, 2048);
    char *pub = NULL;
    assert_int_equal(sshk_public_from_private(kp.private_pem, &pub), 0);
    assert_string_equal(pub, kp.public_ssh);
    free(pub);
    sshk_keypair_free(&kp);
}

static void test_bad_arguments(void **state)
{
    sshk_keypair kp;
    assert_int_equal(sshk_generate(SSHK_RSA, 1024, NULL, &kp), OP_EINVAL);
    assert_null(kp.private_pem);
    assert_int_equal(sshk_generate(SSHK_RSA, 2049, NULL, &kp), OP_EINVAL);
    assert_int_equal(sshk_generate(SSHK_RSA, 16384, NULL, &kp), OP_EINVAL);
    assert_int_equal(sshk_generate((sshk_type)7, 0, NULL, &kp), OP_EINVAL);
    char *pub = NULL;
    assert_int_equal(sshk_public_from_private("not a key", &pub), OP_EPARSE);
    assert_null(pub);
    assert_int_equal(sshk_public_from_private(NULL, &pub), OP_EPARSE);
}

/* ssh-keygen -y -f <private> prints the public key: it must be ours. */
static const char *ssh_keygen(void)
{
    static const char *const paths[] = {"/usr/bin/ssh-keygen", "/bin/ssh-keygen",
                                        "/usr/local/bin/ssh-keygen"};
    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
        if (access(paths[i], X_OK) == 0)
            return paths[i];
    return NULL;
}

static void openssh_reads(const char *keygen, const sshk_keypair *kp)
{
    char path[] = "/tmp/slurmop-sshk-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(fchmod(fd, 0600), 0);
    size_t n = strlen(kp->private_pem);
    assert_int_equal(write(fd, kp->private_pem, n), (ssize_t)n);
    close(fd);
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "%s -y -f %s 2>&1", keygen, path);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char out[4096] = {0};
    size_t got = fread(out, 1, sizeof(out) - 1, p);
    int status = pclose(p);
    unlink(path);
    out[got] = '\0';
    if (status != 0)
        fprintf(stderr, "ssh-keygen: %s\n", out);
    assert_int_equal(status, 0);
    /* ssh-keygen prints "<type> <base64>[ comment]\n"; ours has no comment. */
    size_t want = strlen(kp->public_ssh) - 1;
    assert_true(got >= want);
    assert_memory_equal(out, kp->public_ssh, want);
    assert_true(out[want] == '\n' || out[want] == ' ');
}

/* ssh-keygen -l -f <file>: "<bits> SHA256:<fp> <comment> (<TYPE>)\n". The
 * private key and the .pub line must give the same fingerprint. */
static void fingerprint(const char *keygen, const char *text, char *out, size_t cap)
{
    char path[] = "/tmp/slurmop-sshk-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(fchmod(fd, 0600), 0);
    size_t n = strlen(text);
    assert_int_equal(write(fd, text, n), (ssize_t)n);
    close(fd);
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "%s -l -E sha256 -f %s 2>&1", keygen, path);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t got = fread(out, 1, cap - 1, p);
    int status = pclose(p);
    unlink(path);
    out[got] = '\0';
    if (status != 0)
        fprintf(stderr, "ssh-keygen -l: %s\n", out);
    assert_int_equal(status, 0);
}

static void openssh_fingerprints(const char *keygen, const sshk_keypair *kp, const char *bits_type)
{
    char a[512], b[512];
    fingerprint(keygen, kp->private_pem, a, sizeof(a));
    fingerprint(keygen, kp->public_ssh, b, sizeof(b));
    /* "<bits> SHA256:<43 chars> ": compare up to the comment, which
     * differs (the file name or "no comment"). */
    assert_non_null(strstr(a, " SHA256:"));
    const char *sp = strchr(strstr(a, " SHA256:") + 1, ' ');
    assert_non_null(sp);
    assert_memory_equal(a, b, (size_t)(sp - a));
    assert_memory_equal(a, bits_type, strlen(bits_type));
    assert_non_null(strstr(a, "(ED25519)"));
}

static void test_host_keys_and_openssh(void **state)
{
    sshk_host_keys hk;
    assert_int_equal(sshk_generate_host_keys(&hk, NULL), 0);
    check_rsa(&hk.rsa, 4096);
    check_ecdsa(&hk.ecdsa);
    check_ed25519(&hk.ed25519);
    const char *keygen = ssh_keygen();
    if (keygen) {
        openssh_reads(keygen, &hk.rsa);
        openssh_reads(keygen, &hk.ecdsa);
        openssh_reads(keygen, &hk.ed25519);
        openssh_fingerprints(keygen, &hk.ed25519, "256 SHA256:");
    } else {
        fprintf(stderr, "ssh-keygen not installed (package openssh-client): OpenSSH cross-check skipped\n");
    }
    sshk_host_keys_free(&hk);
    sshk_host_keys_free(&hk);
    if (keygen == NULL)
        skip();
}

/* Generation is meant for uv_queue_work: run several at once on the
 * threadpool and check every result on the loop thread. */
typedef struct job {
    uv_work_t req;
    sshk_type type;
    int rc;
    sshk_keypair kp;
    int done;
} job;

static void work(uv_work_t *req)
{
    job *j = req->data;
    j->rc = sshk_generate(j->type, 2048, NULL, &j->kp);
}

static void after(uv_work_t *req, int status)
{
    job *j = req->data;
    assert_int_equal(status, 0);
    j->done = 1;
}

static void test_threadpool(void **state)
{
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    job jobs[6];
    memset(jobs, 0, sizeof(jobs));
    for (int i = 0; i < 6; i++) {
        jobs[i].type = i < 2 ? SSHK_RSA : i < 4 ? SSHK_ECDSA_P256 : SSHK_ED25519;
        jobs[i].req.data = &jobs[i];
        assert_int_equal(uv_queue_work(&loop, &jobs[i].req, work, after), 0);
    }
    assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
    for (int i = 0; i < 6; i++) {
        assert_true(jobs[i].done);
        assert_int_equal(jobs[i].rc, 0);
        if (jobs[i].type == SSHK_RSA)
            check_rsa(&jobs[i].kp, 2048);
        else if (jobs[i].type == SSHK_ECDSA_P256)
            check_ecdsa(&jobs[i].kp);
        else
            check_ed25519(&jobs[i].kp);
        for (int k = 0; k < i; k++)
            assert_string_not_equal(jobs[i].kp.private_pem, jobs[k].kp.private_pem);
    }
    for (int i = 0; i < 6; i++)
        sshk_keypair_free(&jobs[i].kp);
    assert_int_equal(uv_loop_close(&loop), 0);
}

/* A generation cut short from another thread: RSA 8192 (tens of seconds
 * under the sanitizers) returns OP_ECANCELED soon after the flag is set,
 * with nothing left allocated. */
typedef struct cancel_job {
    uv_work_t req;
    atomic_int cancel;
    int rc;
    sshk_keypair kp;
    int done;
} cancel_job;

static void cancel_work(uv_work_t *req)
{
    cancel_job *j = (cancel_job *)req;
    j->rc = sshk_generate(SSHK_RSA, 8192, &j->cancel, &j->kp);
}

static void cancel_after(uv_work_t *req, int status)
{
    (void)status;
    ((cancel_job *)req)->done = 1;
}

static void cancel_set(uv_timer_t *t)
{
    atomic_store(&((cancel_job *)t->data)->cancel, 1);
}

static void test_cancel(void **state)
{
    (void)state;
    uv_loop_t loop;
    uv_loop_init(&loop);
    cancel_job j;
    memset(&j, 0, sizeof(j));
    uv_timer_t t;
    uv_timer_init(&loop, &t);
    t.data = &j;
    uv_timer_start(&t, cancel_set, 50, 0);
    assert_int_equal(uv_queue_work(&loop, &j.req, cancel_work, cancel_after), 0);
    uint64_t t0 = uv_hrtime();
    while (!j.done)
        uv_run(&loop, UV_RUN_ONCE);
    double s = (double)(uv_hrtime() - t0) / 1e9;
    assert_int_equal(j.rc, OP_ECANCELED);
    assert_null(j.kp.private_pem);
    assert_null(j.kp.public_ssh);
    assert_true(s < 5.0);
    uv_close((uv_handle_t *)&t, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ed25519),       cmocka_unit_test(test_ecdsa),
        cmocka_unit_test(test_rsa_2048),
        cmocka_unit_test(test_bad_arguments), cmocka_unit_test(test_host_keys_and_openssh),
        cmocka_unit_test(test_threadpool),    cmocka_unit_test(test_cancel),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
