/* Unit tests for slurmio/slurmlib's asynchronous side: completions on the
 * loop thread, one at a time and in order, bounded waits, cancellation on
 * close, synchronous refusal of bad requests, and a clean loop afterwards.
 *
 * libslurm talks to a fake slurmctld on loopback (a thread that either closes
 * every connection at once, so calls fail fast, or holds it open, so calls
 * hang until MessageTimeout), with AuthType=auth/none, so no munge or real
 * Slurm is needed. The end-to-end path against a real slurmctld is covered
 * by tests/integration/test_slurm_lab.py. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/mem.h"
#include "slurmio/slurmlib.h"

#ifdef OP_HAVE_LIBSLURM
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <unistd.h>

enum { MODE_CLOSE, MODE_HOLD };
static atomic_int mode = MODE_CLOSE;
static int listen_fd = -1;
static pthread_t ctld_thread;
static char conf_path[256];
static char dir[64];

/* The fake slurmctld: accept, then close at once or keep the connection
 * until the next one arrives (the peer then sees no answer). */
static void *fake_ctld(void *arg)
{
    int held = -1;
    for (;;) {
        int fd = accept(listen_fd, NULL, NULL);
        if (fd < 0)
            break;
        if (held >= 0)
            close(held);
        held = -1;
        if (atomic_load(&mode) == MODE_CLOSE)
            close(fd);
        else
            held = fd;
    }
    if (held >= 0)
        close(held);
    return NULL;
}

static int setup(void **state)
{
    listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    if (bind(listen_fd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(listen_fd, 64) != 0 ||
        getsockname(listen_fd, (struct sockaddr *)&a, &len) != 0)
        return -1;
    pthread_create(&ctld_thread, NULL, fake_ctld, NULL);
    snprintf(dir, sizeof(dir), "/tmp/test_slurmlib.XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    snprintf(conf_path, sizeof(conf_path), "%s/slurm.conf", dir);
    FILE *f = fopen(conf_path, "w");
    fprintf(f,
            "ClusterName=unit\nSlurmctldHost=localhost\nSlurmctldPort=%d\nAuthType=auth/none\n"
            "CredType=cred/none\nMessageTimeout=1\nStateSaveLocation=%s\nSlurmdSpoolDir=%s\n"
            "NodeName=n[1-3] NodeAddr=127.0.0.1 CPUs=1 State=UNKNOWN\nPartitionName=p Nodes=ALL\n",
            ntohs(a.sin_port), dir, dir);
    fclose(f);
    return 0;
}

static int teardown(void **state)
{
    sl_library_fini();
    shutdown(listen_fd, SHUT_RDWR);
    close(listen_fd);
    pthread_join(ctld_thread, NULL);
    unlink(conf_path);
    rmdir(dir);
    return 0;
}

typedef struct rec {
    int order[16];
    int status[16];
    int errnos[16];
    int n;
    int closed;
    int in_submit; /* set while a submission call runs: callbacks must not fire then */
    sl_backend *b;
    int close_after;
} rec;

typedef struct tag {
    rec *r;
    int id;
} tag;

static void on_done(void *data, const sl_result *res)
{
    tag *t = data;
    rec *r = t->r;
    assert_false(r->in_submit);
    assert_non_null(res->message);
    assert_true(r->n < 16);
    r->order[r->n] = t->id;
    r->status[r->n] = res->status;
    r->errnos[r->n] = res->slurm_errno;
    r->n++;
    if (r->close_after && r->n == r->close_after)
        sl_backend_close(r->b, NULL, NULL);
}

static void on_closed(void *data)
{
    ((rec *)data)->closed++;
}

static sl_backend *new_backend(uv_loop_t *loop, unsigned timeout_ms)
{
    sl_options o = {.conf = conf_path, .timeout_ms = timeout_ms};
    sl_backend *b = NULL;
    assert_int_equal(sl_backend_new(loop, &o, &b), 0);
    assert_non_null(b);
    return b;
}

static void finish(uv_loop_t *loop)
{
    uv_run(loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(loop), 0);
}

static const sm_node_update drain = {
    .set = SM_UPD_STATE | SM_UPD_REASON, .state = SM_REQ_DRAIN, .reason = "slurm-operator: unit test"};

static void test_refused_synchronously(void **state)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    rec r = {0};
    tag t = {&r, 0};
    sl_backend *b = new_backend(&loop, 5000);
    sm_node_update noreason = {.set = SM_UPD_STATE, .state = SM_REQ_DRAIN};
    sm_node_update topo = {.set = SM_UPD_TOPOLOGY, .topology = "x"};
    sm_node_update empty = {0};
    assert_int_equal(sl_update_nodes(b, "", &drain, on_done, &t), OP_EINVAL);
    assert_int_equal(sl_update_nodes(b, "n1", &noreason, on_done, &t), OP_EINVAL);
    assert_int_equal(sl_update_nodes(b, "n1", &empty, on_done, &t), OP_EINVAL);
    assert_int_equal(sl_update_nodes(b, "n1", &topo, on_done, &t), OP_ENOTSUP);
    assert_int_equal(sl_delete_nodes(b, NULL, on_done, &t), OP_EINVAL);
    sm_resv_desc d = {.name = "x"};
    assert_int_equal(sl_create_reservation(b, &d, on_done, &t), OP_EINVAL);
    d.name = NULL;
    assert_int_equal(sl_update_reservation(b, &d, on_done, &t), OP_EINVAL);
    assert_int_equal(sl_delete_reservation(b, "", on_done, &t), OP_EINVAL);
    assert_int_equal(sl_backend_pending(b), 0);
    sl_backend_close(b, on_closed, &r);
    sl_backend_close(b, on_closed, &r); /* idempotent */
    assert_int_equal(r.closed, 0);      /* never inside the call */
    finish(&loop);
    assert_int_equal(r.n, 0);
    assert_int_equal(r.closed, 1);

    sl_options bad = {.conf = "/nonexistent/slurm.conf"};
    sl_backend *nb = NULL;
    assert_int_equal(sl_backend_new(&loop, &bad, &nb), OP_ECONFIG);
    assert_null(nb);
}

/* Calls that fail fast: results come back one by one, in order, with
 * Slurm's error, and the backend closes cleanly from a callback. */
static void test_order_and_errors(void **state)
{
    atomic_store(&mode, MODE_CLOSE);
    uv_loop_t loop;
    uv_loop_init(&loop);
    rec r = {0};
    r.b = new_backend(&loop, 30000);
    r.close_after = 4;
    tag t[4];
    r.in_submit = 1;
    for (int i = 0; i < 4; i++) {
        t[i] = (tag){&r, i};
        if (i == 3)
            assert_int_equal(sl_delete_nodes(r.b, "n3", on_done, &t[i]), 0);
        else
            assert_int_equal(sl_update_nodes(r.b, i == 1 ? "n[1-3]" : "n1", &drain, on_done, &t[i]), 0);
    }
    r.in_submit = 0;
    assert_int_equal(sl_backend_pending(r.b), 4);
    finish(&loop);
    assert_int_equal(r.n, 4);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(r.order[i], i);
        assert_true(r.status[i] < 0);
        assert_int_not_equal(r.status[i], OP_ETIMEOUT);
        assert_int_not_equal(r.status[i], OP_ECANCELED);
        assert_int_not_equal(r.errnos[i], 0); /* Slurm's own error number came through */
    }
}

/* A call that hangs: the caller hears OP_ETIMEOUT on time, the calls queued
 * behind it too, and closing waits for the hung call before freeing. */
static void test_timeout(void **state)
{
    atomic_store(&mode, MODE_HOLD);
    uv_loop_t loop;
    uv_loop_init(&loop);
    rec r = {0};
    r.b = new_backend(&loop, 150);
    r.close_after = 3;
    tag t[3];
    for (int i = 0; i < 3; i++) {
        t[i] = (tag){&r, i};
        assert_int_equal(sl_update_nodes(r.b, "n2", &drain, on_done, &t[i]), 0);
    }
    uint64_t t0 = uv_hrtime();
    /* Run until the three timeouts are in (the hung call is still inside
     * libslurm then, so the loop stays alive for it). */
    while (r.n < 3)
        uv_run(&loop, UV_RUN_ONCE);
    double ms = (double)(uv_hrtime() - t0) / 1e6;
    assert_true(ms < 1000); /* MessageTimeout is 1 s: we did not wait for it */
    for (int i = 0; i < 3; i++) {
        assert_int_equal(r.order[i], i);
        assert_int_equal(r.status[i], OP_ETIMEOUT);
    }
    finish(&loop);
    assert_int_equal(r.n, 3); /* the late result of the hung call is dropped */
    atomic_store(&mode, MODE_CLOSE);
}

/* Close with calls queued: they complete with OP_ECANCELED after close()
 * returns, the one inside libslurm with its own result, then the close
 * callback, once; later submissions are refused. */
static void test_close_cancels(void **state)
{
    atomic_store(&mode, MODE_CLOSE);
    uv_loop_t loop;
    uv_loop_init(&loop);
    rec r = {0};
    r.b = new_backend(&loop, 30000);
    tag t[5];
    for (int i = 0; i < 5; i++) {
        t[i] = (tag){&r, i};
        assert_int_equal(sl_update_nodes(r.b, "n1", &drain, on_done, &t[i]), 0);
    }
    r.in_submit = 1;
    sl_backend_close(r.b, on_closed, &r);
    assert_int_equal(sl_update_nodes(r.b, "n1", &drain, on_done, &t[0]), OP_ECANCELED);
    r.in_submit = 0;
    assert_int_equal(r.n, 0);
    finish(&loop);
    assert_int_equal(r.n, 5);
    assert_int_equal(r.closed, 1);
    int canceled = 0;
    for (int i = 0; i < 5; i++)
        canceled += r.status[i] == OP_ECANCELED;
    assert_true(canceled >= 4); /* all but (at most) the one a worker had picked up */
}
#endif

int main(void)
{
#ifdef OP_HAVE_LIBSLURM
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refused_synchronously),
        cmocka_unit_test(test_order_and_errors),
        cmocka_unit_test(test_timeout),
        cmocka_unit_test(test_close_cancels),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
#else
    uv_loop_t loop;
    uv_loop_init(&loop);
    sl_backend *b = (sl_backend *)1;
    int rc = sl_backend_new(&loop, NULL, &b);
    uv_loop_close(&loop);
    printf("built without libslurm: sl_backend_new -> %s\n", err_name(rc));
    return rc == OP_ENOTSUP && b == NULL ? 0 : 1;
#endif
}
