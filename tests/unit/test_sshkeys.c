/* Unit tests for reconcilers/sshkeys: key formats, the SSH wire encoding of
 * the public keys, OpenSSH's own reading of our private keys (ssh-keygen -y,
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

static void test_ecdsa(void **state)
{
    sshk_keypair a, b;
    assert_int_equal(sshk_generate(SSHK_ECDSA_P256, 0, &a), 0);
    assert_int_equal(sshk_generate(SSHK_ECDSA_P256, 0, &b), 0);
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
    assert_int_equal(sshk_generate(SSHK_RSA, 2048, &kp), 0);
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
    assert_int_equal(sshk_generate(SSHK_RSA, 1024, &kp), OP_EINVAL);
    assert_null(kp.private_pem);
    assert_int_equal(sshk_generate(SSHK_RSA, 2049, &kp), OP_EINVAL);
    assert_int_equal(sshk_generate(SSHK_RSA, 16384, &kp), OP_EINVAL);
    assert_int_equal(sshk_generate((sshk_type)7, 0, &kp), OP_EINVAL);
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

static void test_host_keys_and_openssh(void **state)
{
    sshk_host_keys hk;
    assert_int_equal(sshk_generate_host_keys(&hk), 0);
    check_rsa(&hk.rsa, 4096);
    check_ecdsa(&hk.ecdsa);
    const char *keygen = ssh_keygen();
    if (keygen) {
        openssh_reads(keygen, &hk.rsa);
        openssh_reads(keygen, &hk.ecdsa);
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
    j->rc = sshk_generate(j->type, 2048, &j->kp);
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
        jobs[i].type = i < 2 ? SSHK_RSA : SSHK_ECDSA_P256;
        jobs[i].req.data = &jobs[i];
        assert_int_equal(uv_queue_work(&loop, &jobs[i].req, work, after), 0);
    }
    assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
    for (int i = 0; i < 6; i++) {
        assert_true(jobs[i].done);
        assert_int_equal(jobs[i].rc, 0);
        if (jobs[i].type == SSHK_RSA)
            check_rsa(&jobs[i].kp, 2048);
        else
            check_ecdsa(&jobs[i].kp);
        for (int k = 0; k < i; k++)
            assert_string_not_equal(jobs[i].kp.private_pem, jobs[k].kp.private_pem);
    }
    for (int i = 0; i < 6; i++)
        sshk_keypair_free(&jobs[i].kp);
    assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ecdsa),         cmocka_unit_test(test_rsa_2048),
        cmocka_unit_test(test_bad_arguments), cmocka_unit_test(test_host_keys_and_openssh),
        cmocka_unit_test(test_threadpool),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
