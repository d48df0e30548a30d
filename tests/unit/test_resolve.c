/* Unit tests for core/resolve: lookups on detached threads that the loop
 * never waits for once abandoned. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>
#include <unistd.h>

#include "core/resolve.h"

typedef struct got {
    int calls;
    int status;
    int family;
} got;

static void on_done(int status, struct addrinfo *res, void *data)
{
    got *g = data;
    g->calls++;
    g->status = status;
    g->family = res ? res->ai_family : -1;
    if (res)
        freeaddrinfo(res);
}

static struct addrinfo stream_hints(void)
{
    struct addrinfo h;
    memset(&h, 0, sizeof(h));
    h.ai_family = AF_UNSPEC;
    h.ai_socktype = SOCK_STREAM;
    return h;
}

static void wait_no_threads(void)
{
    for (int i = 0; i < 2000 && rsv_threads() > 0; i++)
        usleep(1000);
    assert_int_equal(rsv_threads(), 0);
}

/* A name from /etc/hosts resolves, and the answer arrives on the loop. */
static void test_lookup(void **state)
{
    (void)state;
    uv_loop_t loop;
    uv_loop_init(&loop);
    struct addrinfo h = stream_hints();
    got g = {0};
    rsv_req *q = NULL;
    assert_int_equal(rsv_lookup(&loop, "localhost", "6820", &h, on_done, &g, &q), 0);
    assert_non_null(q);
    assert_int_equal(g.calls, 0); /* never inside rsv_lookup */
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(g.calls, 1);
    assert_int_equal(g.status, 0);
    assert_true(g.family == AF_INET || g.family == AF_INET6);
    assert_int_equal(uv_loop_close(&loop), 0);
    wait_no_threads();
}

/* Abandoned: the callback never runs and the loop has nothing left to
 * wait for right away, whatever the thread is doing. */
static void test_abandon(void **state)
{
    (void)state;
    uv_loop_t loop;
    uv_loop_init(&loop);
    struct addrinfo h = stream_hints();
    got g = {0};
    rsv_req *q[8];
    for (int i = 0; i < 8; i++)
        assert_int_equal(rsv_lookup(&loop, "localhost", "80", &h, on_done, &g, &q[i]), 0);
    for (int i = 0; i < 8; i++)
        rsv_abandon(q[i]);
    uint64_t t0 = uv_hrtime();
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_true(uv_hrtime() - t0 < 1000000000ull);
    assert_int_equal(g.calls, 0);
    assert_int_equal(uv_loop_close(&loop), 0);
    wait_no_threads(); /* each thread frees what it got */
    /* Abandoned after the answer arrived but before the loop ran it. */
    uv_loop_init(&loop);
    rsv_req *r;
    assert_int_equal(rsv_lookup(&loop, "localhost", "80", &h, on_done, &g, &r), 0);
    wait_no_threads();
    rsv_abandon(r);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(g.calls, 0);
    assert_int_equal(uv_loop_close(&loop), 0);
}

/* Errors come back as libuv's codes; bad arguments fail at once. */
static void test_errors(void **state)
{
    (void)state;
    uv_loop_t loop;
    uv_loop_init(&loop);
    struct addrinfo h = stream_hints();
    got g = {0};
    rsv_req *q;
    assert_int_equal(rsv_lookup(&loop, "", "80", &h, on_done, &g, &q), UV_EINVAL);
    assert_int_equal(rsv_lookup(&loop, "localhost", "no-such-service-name", &h, on_done, &g, &q), 0);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(g.calls, 1);
    assert_int_equal(g.status, UV_EAI_SERVICE);
    assert_int_equal(g.family, -1);
    assert_int_equal(uv_loop_close(&loop), 0);
    wait_no_threads();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lookup),
        cmocka_unit_test(test_abandon),
        cmocka_unit_test(test_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
