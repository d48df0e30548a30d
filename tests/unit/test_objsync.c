/* Unit tests for reconcilers/objsync's context against a scripted httpd on
 * loopback: two contexts keep their own tables (a write in flight in one
 * does not make the other wait), a write that succeeded stays pending until
 * the cache shows it, a create answered AlreadyExists is looked at with a GET
 * only in a cache declared label-filtered (and a foreign object found there
 * is then refused without a request), and a context freed while a write is
 * in flight goes with that write. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http_test_util.h"

#include "core/err.h"
#include "core/httpd.h"
#include "core/json.h"
#include "core/kube.h"
#include "core/store.h"
#include "reconcilers/objsync.h"
#include "watchers/kinds.h"

#define MAX_HELD 8

struct server {
    hs_server *srv;
    int port;
    int hold_writes; /* keep write requests unanswered until released */
    int conflict;    /* answer creates with 409 AlreadyExists */
    hs_req *held[MAX_HELD];
    int n_held;
    int posts, patches, gets;
    char last_patch[4096]; /* the body of the last PATCH */
};

static struct server S;
static test_loop TL;

static const char CREATED[] =
    "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"x\",\"namespace\":\"ns\","
    "\"resourceVersion\":\"7\"}}";
static const char EXISTS[] =
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\",\"reason\":"
    "\"AlreadyExists\",\"message\":\"configmaps \\\"y\\\" already exists\",\"code\":409}";
/* What a GET finds: somebody else's object (no ownerReference, no label). */
static const char FOREIGN[] = "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"y\","
                              "\"namespace\":\"ns\",\"resourceVersion\":\"3\"},\"data\":{\"theirs\":\"1\"}}";

static void held_closed(hs_req *req, void *data)
{
    for (int i = 0; i < S.n_held; i++)
        if (S.held[i] == req)
            S.held[i] = NULL;
}

static void release_held(void)
{
    for (int i = 0; i < S.n_held; i++) {
        if (S.held[i] == NULL)
            continue;
        hs_req_on_close(S.held[i], NULL, NULL);
        hs_respond(S.held[i], 201, "application/json", NULL, CREATED, strlen(CREATED));
        S.held[i] = NULL;
    }
    S.n_held = 0;
}

static void handler(hs_req *req, void *data)
{
    const char *m = hs_req_method(req);
    if (!strcmp(m, "GET")) {
        S.gets++;
        hs_respond(req, 200, "application/json", NULL, FOREIGN, strlen(FOREIGN));
        return;
    }
    if (!strcmp(m, "PATCH")) {
        S.patches++;
        size_t len = 0;
        const char *b = hs_req_body(req, &len);
        snprintf(S.last_patch, sizeof(S.last_patch), "%s", b ? b : "");
    }
    else if (!strcmp(m, "POST"))
        S.posts++;
    if (S.hold_writes) {
        assert_true(S.n_held < MAX_HELD);
        S.held[S.n_held++] = req;
        hs_req_on_close(req, held_closed, NULL);
        return;
    }
    if (S.conflict && !strcmp(m, "POST")) {
        hs_respond(req, 409, "application/json", NULL, EXISTS, strlen(EXISTS));
        return;
    }
    hs_respond(req, 201, "application/json", NULL, CREATED, strlen(CREATED));
}

static kube_client *C;

static int setup(void **state)
{
    int err = 0;
    memset(&S, 0, sizeof(S));
    tl_start(&TL, 20000);
    hs_opts ho = {.handler = handler};
    S.srv = hs_listen(&TL.loop, "127.0.0.1", 0, &ho, &err);
    assert_non_null(S.srv);
    S.port = hs_port(S.srv);
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%d", S.port);
    kube_client_opts o = {.server = url, .qps = 1000, .burst = 1000};
    C = kube_client_new(&TL.loop, &o, &err);
    assert_non_null(C);
    return 0;
}

static int closed;
static void on_closed(void *data)
{
    closed++;
}

static int teardown(void **state)
{
    closed = 0;
    kube_client_close(C, on_closed, NULL);
    tl_run_until(&TL, &closed);
    release_held();
    closed = 0;
    hs_close(S.srv, on_closed, NULL);
    tl_run_until(&TL, &closed);
    tl_finish(&TL);
    return 0;
}

struct result {
    int done;
    int err;
};

static void on_synced(int err, const char *key, void *data)
{
    struct result *r = data;
    r->done++;
    r->err = err;
}

static cJSON *desired_cm(const char *name)
{
    cJSON *o = cJSON_CreateObject();
    json_set_str(o, "apiVersion", "v1");
    json_set_str(o, "kind", "ConfigMap");
    cJSON *md = json_obj_ensure(o, "metadata");
    json_set_str(md, "name", name);
    json_set_str(md, "namespace", "ns");
    json_set_str(json_obj_ensure(o, "data"), "k", "v");
    return o;
}

static void test_contexts_keep_their_own_tables(void **state)
{
    store *cache = store_new(&KIND_FULL_NAMESPACED);
    objsync *a = objsync_new(C), *b = objsync_new(C);
    cJSON *x = desired_cm("x");
    struct result ra = {0}, rb = {0};
    S.hold_writes = 1;
    assert_int_equal(objsync_ensure(a, cache, &KUBE_CONFIGMAPS, x, on_synced, &ra), OBJSYNC_WRITING);
    /* the same object again in the same context: one write at a time */
    assert_int_equal(objsync_ensure(a, cache, &KUBE_CONFIGMAPS, x, on_synced, &ra), OBJSYNC_PENDING);
    /* another context knows nothing of a's write */
    assert_int_equal(objsync_ensure(b, cache, &KUBE_CONFIGMAPS, x, on_synced, &rb), OBJSYNC_WRITING);
    assert_int_equal(objsync_in_flight(a), 1);
    assert_int_equal(objsync_in_flight(b), 1);
    tl_run_until_count(&TL, &S.posts, 2);
    assert_int_equal(S.posts, 2);

    S.hold_writes = 0;
    release_held();
    tl_run_until(&TL, &ra.done);
    tl_run_until(&TL, &rb.done);
    assert_int_equal(ra.err, 0);
    assert_int_equal(rb.err, 0);
    assert_int_equal(ra.done, 1);
    assert_int_equal(objsync_in_flight(a), 0);
    assert_int_equal(objsync_in_flight(b), 0);
    /* The creates succeeded but the cache does not show them yet: both
     * contexts wait rather than create again. */
    assert_int_equal(objsync_ensure(a, cache, &KUBE_CONFIGMAPS, x, on_synced, &ra), OBJSYNC_PENDING);
    assert_int_equal(objsync_ensure(b, cache, &KUBE_CONFIGMAPS, x, on_synced, &rb), OBJSYNC_PENDING);
    tl_run_for(&TL, 50);
    assert_int_equal(S.posts, 2);
    cJSON_Delete(x);
    objsync_free(a);
    objsync_free(b);
    store_free(cache);
}

static void test_label_filtered_cache(void **state)
{
    store *plain = store_new(&KIND_FULL_NAMESPACED), *filtered = store_new(&KIND_FULL_NAMESPACED);
    objsync *os = objsync_new(C);
    assert_int_equal(objsync_label_filtered(os, filtered), 0);
    S.conflict = 1;

    /* A plain cache answered AlreadyExists is only behind: no GET, no error. */
    cJSON *x = desired_cm("x");
    struct result r = {0};
    assert_int_equal(objsync_ensure(os, plain, &KUBE_CONFIGMAPS, x, on_synced, &r), OBJSYNC_WRITING);
    tl_run_until(&TL, &r.done);
    assert_int_equal(r.err, 0);
    assert_int_equal(S.gets, 0);

    /* A label-filtered cache cannot show a foreign object: objsync reads it,
     * finds it is not ours, reports OP_EEXISTS, and then refuses the name
     * without a request. */
    cJSON *y = desired_cm("y");
    struct result ry = {0};
    assert_int_equal(objsync_ensure(os, filtered, &KUBE_CONFIGMAPS, y, on_synced, &ry), OBJSYNC_WRITING);
    tl_run_until(&TL, &ry.done);
    assert_int_equal(ry.err, OP_EEXISTS);
    assert_int_equal(S.gets, 1);
    assert_int_equal(S.patches, 0);
    int posts = S.posts;
    assert_int_equal(objsync_ensure(os, filtered, &KUBE_CONFIGMAPS, y, on_synced, &ry), OBJSYNC_NOT_OWNED);
    /* a fresh context has not seen it and tries again */
    objsync *other = objsync_new(C);
    memset(&ry, 0, sizeof(ry));
    assert_int_equal(objsync_ensure(other, plain, &KUBE_CONFIGMAPS, y, on_synced, &ry), OBJSYNC_WRITING);
    tl_run_until(&TL, &ry.done);
    assert_int_equal(ry.err, 0);
    assert_int_equal(S.posts, posts + 1);
    assert_int_equal(S.gets, 1);

    cJSON_Delete(x);
    cJSON_Delete(y);
    objsync_free(os);
    objsync_free(other);
    store_free(plain);
    store_free(filtered);
}

/* A StatefulSet that another operator (Slinky) made for the same owner: it
 * has the owner's ownerReference but not our label. The first write adopts
 * it as it is (label and hash only, none of its spec); while what we want is
 * unchanged nothing more is written, and objsync_adopted_keeps says so (the
 * Controller does not replace it over its serviceName); once what we want
 * changes it converges and the mark goes. */
static void test_adopt(void **state)
{
    store *cache = store_new(&KIND_FULL_NAMESPACED);
    objsync *os = objsync_new(C);
    cJSON *want =
        cJSON_Parse("{\"apiVersion\":\"apps/v1\",\"kind\":\"StatefulSet\",\"metadata\":{\"name\":"
                    "\"slurm-controller\",\"namespace\":\"ns\",\"labels\":{\"app\":\"slurmctld\"},"
                    "\"ownerReferences\":[{\"kind\":\"Controller\",\"name\":\"slurm\",\"uid\":\"u1\"}]},"
                    "\"spec\":{\"serviceName\":\"slurm-controller-internal\",\"replicas\":1}}");
    cJSON *live =
        cJSON_Parse("{\"apiVersion\":\"apps/v1\",\"kind\":\"StatefulSet\",\"metadata\":{\"name\":"
                    "\"slurm-controller\",\"namespace\":\"ns\",\"resourceVersion\":\"10\",\"uid\":\"s1\","
                    "\"labels\":{\"app\":\"slurmctld\"},"
                    "\"ownerReferences\":[{\"kind\":\"Controller\",\"name\":\"slurm\",\"uid\":\"u1\"}]},"
                    "\"spec\":{\"serviceName\":\"slurm-controller\",\"replicas\":1}}");
    assert_non_null(want);
    assert_non_null(live);
    assert_true(store_upsert(cache, live) >= 0);
    assert_true(objsync_adopted_keeps(want, live));

    struct result r = {0};
    assert_int_equal(objsync_ensure(os, cache, &KUBE_STATEFULSETS, want, on_synced, &r), OBJSYNC_WRITING);
    tl_run_until(&TL, &r.done);
    assert_int_equal(S.patches, 1);
    cJSON *patch = cJSON_Parse(S.last_patch);
    assert_non_null(patch);
    assert_null(json_child(patch, "spec")); /* nothing of the spec: serviceName stays */
    const cJSON *labels = json_get(patch, "metadata.labels");
    assert_string_equal(cJSON_GetObjectItem(labels, OBJSYNC_MANAGED_BY_LABEL)->valuestring,
                        OBJSYNC_MANAGED_BY);
    const cJSON *mark =
        cJSON_GetObjectItem(json_get(patch, "metadata.annotations"), OBJSYNC_ADOPTED_ANNOTATION);
    char h[OBJSYNC_HASH_MAX];
    objsync_adopted_hash(want, h);
    assert_string_equal(mark->valuestring, h);
    cJSON_Delete(patch);

    /* The cache shows the adoption: in sync, no write, kept. */
    json_set_str(json_obj_ensure(json_obj_ensure(live, "metadata"), "labels"), OBJSYNC_MANAGED_BY_LABEL,
                 OBJSYNC_MANAGED_BY);
    json_set_str(json_obj_ensure(json_obj_ensure(live, "metadata"), "annotations"),
                 OBJSYNC_ADOPTED_ANNOTATION, h);
    json_set_str(json_obj_ensure(live, "metadata"), "resourceVersion", "11");
    assert_true(store_upsert(cache, live) >= 0);
    assert_int_equal(objsync_ensure(os, cache, &KUBE_STATEFULSETS, want, on_synced, &r), OBJSYNC_IN_SYNC);
    assert_int_equal(S.patches, 1);
    assert_true(objsync_adopted_keeps(want, live));

    /* What we want changes: converge, and the mark goes. */
    json_set_int(json_obj_ensure(want, "spec"), "replicas", 2);
    assert_false(objsync_adopted_keeps(want, live));
    memset(&r, 0, sizeof(r));
    assert_int_equal(objsync_ensure(os, cache, &KUBE_STATEFULSETS, want, on_synced, &r), OBJSYNC_WRITING);
    tl_run_until(&TL, &r.done);
    assert_int_equal(S.patches, 2);
    patch = cJSON_Parse(S.last_patch);
    assert_int_equal(json_get_int(patch, "spec.replicas", 0), 2);
    assert_string_equal(json_get_str(patch, "spec.serviceName"), "slurm-controller-internal");
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(json_get(patch, "metadata.annotations"),
                                                 OBJSYNC_ADOPTED_ANNOTATION)));
    cJSON_Delete(patch);

    /* Our own object (label, no mark) is never "kept". */
    cJSON *mine = cJSON_Duplicate(live, 1);
    cJSON_DeleteItemFromObject(cJSON_GetObjectItem(mine, "metadata"), "annotations");
    assert_false(objsync_adopted_keeps(want, mine));
    /* Nor somebody else's (no owner of ours). */
    cJSON *foreign = cJSON_Parse(FOREIGN);
    assert_false(objsync_adopted_keeps(want, foreign));

    cJSON_Delete(foreign);
    cJSON_Delete(mine);
    cJSON_Delete(want);
    cJSON_Delete(live);
    objsync_free(os);
    store_free(cache);
}

static void test_free_with_write_in_flight(void **state)
{
    store *cache = store_new(&KIND_FULL_NAMESPACED);
    objsync *os = objsync_new(C);
    cJSON *x = desired_cm("x");
    struct result r = {0};
    S.hold_writes = 1;
    assert_int_equal(objsync_ensure(os, cache, &KUBE_CONFIGMAPS, x, on_synced, &r), OBJSYNC_WRITING);
    tl_run_until_count(&TL, &S.n_held, 1);
    assert_int_equal(S.n_held, 1);
    /* freed first: the context stays until its write is answered (ASan
     * reports a use after free or a leak otherwise) */
    objsync_free(os);
    release_held();
    tl_run_until(&TL, &r.done);
    assert_int_equal(r.err, 0);
    cJSON_Delete(x);
    store_free(cache);
    objsync_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_contexts_keep_their_own_tables, setup, teardown),
        cmocka_unit_test_setup_teardown(test_label_filtered_cache, setup, teardown),
        cmocka_unit_test_setup_teardown(test_adopt, setup, teardown),
        cmocka_unit_test_setup_teardown(test_free_with_write_in_flight, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
