#include "slurmio/nodebatch.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/err.h"
#include "core/list.h"
#include "core/log.h"
#include "core/map.h"
#include "core/mem.h"
#include "slurmio/backend.h"
#include "slurmio/hostlist.h"

typedef struct nb_item {
    list_node link;
    char *node;
    nb_done_cb cb;
    void *data;
} nb_item;

typedef struct nb_group {
    list_node link; /* in one of the batcher's lists while not in flight */
    nb_batcher *b;
    char *key;
    int is_delete;
    int no_split;  /* already a single-node retry: never split again */
    int stateless; /* no state change: throttled */
    int counted;   /* holds a slot of the unbatched throttle */
    sm_node_update u;
    char *str[5];
    list_node items;
    size_t n;
    int status; /* for deferred completion */
    uint64_t sent_ns;
    char *hostlist;
} nb_group;

struct nb_batcher {
    uv_loop_t *loop;
    sr_client *rest;
    sl_backend *lib;
    char *name;
    unsigned max_unbatched;
    uv_prepare_t prep;
    uv_timer_t defer;
    map_t open;          /* key -> group collecting nodes this iteration */
    list_node queued;    /* groups of this iteration, in creation order */
    list_node waiting;   /* flushed, waiting for the REST version */
    list_node throttled; /* stateless single-node groups waiting for a slot */
    list_node failed;    /* completed without a request, to deliver from the timer */
    unsigned unbatched_inflight;
    unsigned in_flight;
    int negotiating;
    int closing;
    int handles_closing;
    void (*close_cb)(void *);
    void *close_data;
    nb_stats stats;
};

static void dispatch(nb_batcher *b, nb_group *g);

/* ---- groups ---- */

static char *dup_or_null(const char *s)
{
    return s ? xstrdup(s) : NULL;
}

static int put_field(buf_t *k, char tag, const char *s)
{
    s = s ? s : "";
    return buf_printf(k, "|%c%zu:%s", tag, strlen(s), s);
}

char *nb_update_key(const sm_node_update *u)
{
    buf_t k;
    buf_init(&k, BUF_UNLIMITED);
    int rc = buf_printf(&k, "U%u", u->set);
    if (u->set & SM_UPD_STATE)
        rc |= buf_printf(&k, "|s%d", u->state);
    if (u->set & SM_UPD_REASON)
        rc |= put_field(&k, 'r', u->reason);
    if (u->set & SM_UPD_COMMENT)
        rc |= put_field(&k, 'c', u->comment);
    if (u->set & SM_UPD_FEATURES)
        rc |= put_field(&k, 'f', u->features);
    if (u->set & SM_UPD_FEATURES_ACT)
        rc |= put_field(&k, 'a', u->features_act);
    if (u->set & SM_UPD_TOPOLOGY)
        rc |= put_field(&k, 't', u->topology);
    (void)rc; /* unlimited buffer */
    return buf_detach(&k, NULL);
}

static nb_group *group_new(nb_batcher *b, const char *key, int is_delete, const sm_node_update *u)
{
    nb_group *g = xcalloc(1, sizeof(*g));
    g->b = b;
    g->key = xstrdup(key);
    g->is_delete = is_delete;
    list_init(&g->link);
    list_init(&g->items);
    if (u) {
        g->u = *u;
        g->u.names = NULL;
        g->u.reason = g->str[0] = dup_or_null(u->reason);
        g->u.comment = g->str[1] = dup_or_null(u->comment);
        g->u.features = g->str[2] = dup_or_null(u->features);
        g->u.features_act = g->str[3] = dup_or_null(u->features_act);
        g->u.topology = g->str[4] = dup_or_null(u->topology);
        g->stateless = !(u->set & SM_UPD_STATE);
    }
    return g;
}

static void group_free(nb_group *g)
{
    list_node *n;
    while ((n = list_first(&g->items))) {
        nb_item *it = list_entry(n, nb_item, link);
        list_remove(n);
        free(it->node);
        free(it);
    }
    for (size_t i = 0; i < ARRAY_SIZE(g->str); i++)
        free(g->str[i]);
    free(g->key);
    free(g->hostlist);
    free(g);
}

static void add_item(nb_group *g, const char *node, nb_done_cb cb, void *data)
{
    nb_item *it = xcalloc(1, sizeof(*it));
    it->node = xstrdup(node);
    it->cb = cb;
    it->data = data;
    list_insert_tail(&g->items, &it->link);
    g->n++;
}

/* A copy of g's content holding only the item it (which moves over). */
static nb_group *split_one(nb_group *g, nb_item *it)
{
    assert(g->n > 0 && !g->no_split);
    nb_group *s = group_new(g->b, g->key, g->is_delete, g->is_delete ? NULL : &g->u);
    s->no_split = 1;
    list_remove(&it->link);
    g->n--;
    list_insert_tail(&s->items, &it->link);
    s->n = 1;
    return s;
}

/* ---- completion ---- */

static void maybe_finish(nb_batcher *b);

static void pump_throttled(nb_batcher *b)
{
    list_node *n;
    while (!b->closing && b->unbatched_inflight < b->max_unbatched && (n = list_first(&b->throttled))) {
        nb_group *g = list_entry(n, nb_group, link);
        list_remove(n);
        dispatch(b, g);
    }
}

/* Run every node's callback with status and free the group. */
static void finish(nb_batcher *b, nb_group *g, int status)
{
    list_node *n;
    while ((n = list_first(&g->items))) {
        nb_item *it = list_entry(n, nb_item, link);
        list_remove(n);
        g->n--;
        if (status < 0 && status != OP_ECANCELED)
            b->stats.failed++;
        if (it->cb)
            it->cb(it->node, status, it->data);
        free(it->node);
        free(it);
    }
    assert(g->n == 0); /* each node's callback ran once */
    group_free(g);
}

static void deliver_failed(uv_timer_t *t)
{
    nb_batcher *b = t->data;
    list_node *n;
    while ((n = list_first(&b->failed))) {
        nb_group *g = list_entry(n, nb_group, link);
        list_remove(n);
        finish(b, g, g->status);
    }
    maybe_finish(b);
}

/* Complete g later, from the timer (never inside the caller's call). */
static void fail_later(nb_batcher *b, nb_group *g, int status)
{
    /* The handles close only once nothing is pending or in flight, so no
     * group can fail after that. */
    assert(!b->handles_closing && !list_is_linked(&g->link) && status < 0);
    g->status = status;
    list_insert_tail(&b->failed, &g->link);
    if (!b->handles_closing)
        uv_timer_start(&b->defer, deliver_failed, 0, 0);
}

static void request_done(nb_batcher *b, nb_group *g, int status, const char *message, const char *path)
{
    assert(b->in_flight > 0 && !list_is_linked(&g->link));
    b->in_flight--;
    if (g->counted) {
        assert(b->unbatched_inflight > 0);
        g->counted = 0;
        b->unbatched_inflight--;
    }
    double ms = (double)(uv_hrtime() - g->sent_ns) / 1e6;
    if (status < 0 && status != OP_ECANCELED)
        log_info("slurm %s: %s of %s (%zu node%s) via %s failed after %.1f ms: %s", b->name,
                 g->is_delete                   ? "delete"
                 : sm_node_req_name(g->u.state) ? sm_node_req_name(g->u.state)
                                                : "update",
                 g->hostlist, g->n, g->n == 1 ? "" : "s", path, ms, message ? message : err_str(status));
    else
        log_debug("slurm %s: %s of %s (%zu node%s) via %s: %s in %.1f ms", b->name,
                  g->is_delete                   ? "delete"
                  : sm_node_req_name(g->u.state) ? sm_node_req_name(g->u.state)
                                                 : "update",
                  g->hostlist, g->n, g->n == 1 ? "" : "s", path, err_str(status), ms);
    if (status == OP_ENOTFOUND && g->n > 1 && !g->no_split && !b->closing) {
        /* One missing node refuses the whole hostlist: retry node by node
         * so that the others are updated and only that one fails. */
        b->stats.split++;
        list_node *n;
        while ((n = list_first(&g->items)))
            dispatch(b, split_one(g, list_entry(n, nb_item, link)));
        group_free(g);
    } else {
        finish(b, g, status);
    }
    pump_throttled(b);
    maybe_finish(b);
}

static void on_rest_done(int status, sm_response *resp, void *data)
{
    nb_group *g = data;
    request_done(g->b, g, status, resp->err.message, "rest");
}

static void on_lib_done(void *data, const sl_result *res)
{
    nb_group *g = data;
    request_done(g->b, g, res->status, res->message, "libslurm");
}

/* ---- sending ---- */

static enum sb_path path_of(nb_batcher *b, const nb_group *g, int version)
{
    int lib = b->lib != NULL;
    if (g->is_delete)
        return sb_choose(version, lib, SM_OP_DELETE_NODE);
    if (g->u.set & SM_UPD_TOPOLOGY) {
        /* Only REST v0.0.43+ can set topology; it also has the batch endpoint. */
        return sb_choose(version, lib, SM_OP_UPDATE_TOPOLOGY);
    }
    return sb_choose(version, lib, SM_OP_UPDATE_NODES);
}

static char *hostlist_of(const nb_group *g)
{
    const char **names = xcalloc(g->n ? g->n : 1, sizeof(char *));
    size_t i = 0;
    list_node *n;
    list_foreach(n, &g->items) names[i++] = list_entry(n, nb_item, link)->node;
    assert(i == g->n);
    char *h = hostlist_compress(names, i);
    free(names);
    return h;
}

static void dispatch(nb_batcher *b, nb_group *g)
{
    assert(!list_is_linked(&g->link) && g->n > 0);
    if (b->closing) {
        fail_later(b, g, OP_ECANCELED);
        return;
    }
    int version = sr_version(b->rest);
    enum sb_path path = path_of(b, g, version);
    /* REST deletes and v0.0.40/41 updates name one node per request. */
    int per_node = path == SB_REST_EACH || (path == SB_REST && g->is_delete);
    if (path == SB_NONE) {
        fail_later(b, g, OP_ENOTSUP);
        return;
    }
    if (per_node && g->n > 1) {
        list_node *n;
        while ((n = list_first(&g->items)))
            dispatch(b, split_one(g, list_entry(n, nb_item, link)));
        group_free(g);
        return;
    }
    if (g->stateless && !g->is_delete && !g->counted) {
        if (b->unbatched_inflight >= b->max_unbatched) {
            list_insert_tail(&b->throttled, &g->link);
            return;
        }
        g->counted = 1;
        b->unbatched_inflight++;
        assert(b->unbatched_inflight <= b->max_unbatched);
    }
    free(g->hostlist);
    g->hostlist = hostlist_of(g);
    if (g->hostlist == NULL) {
        if (g->counted) {
            g->counted = 0;
            b->unbatched_inflight--;
        }
        fail_later(b, g, OP_EINVAL);
        return;
    }
    int rc;
    g->sent_ns = uv_hrtime();
    if (path == SB_LIBSLURM) {
        rc = g->is_delete ? sl_delete_nodes(b->lib, g->hostlist, on_lib_done, g)
                          : sl_update_nodes(b->lib, g->hostlist, &g->u, on_lib_done, g);
        if (rc == 0)
            b->stats.lib_requests++;
    } else {
        rc = g->is_delete ? sr_delete_node(b->rest, g->hostlist, on_rest_done, g)
                          : sr_update_nodes(b->rest, g->hostlist, &g->u, on_rest_done, g);
        if (rc == 0)
            b->stats.rest_requests++;
    }
    if (rc < 0) {
        if (g->counted) {
            g->counted = 0;
            b->unbatched_inflight--;
        }
        fail_later(b, g, rc);
        return;
    }
    b->in_flight++;
    b->stats.requests++;
    if (g->n > b->stats.largest)
        b->stats.largest = g->n;
}

static void on_version(int status, int version, void *data)
{
    nb_batcher *b = data;
    assert(b->negotiating);
    b->negotiating = 0;
    list_node q;
    list_init(&q);
    list_splice_tail(&q, &b->waiting);
    list_node *n;
    while ((n = list_first(&q))) {
        nb_group *g = list_entry(n, nb_group, link);
        list_remove(n);
        if (status < 0 || b->closing)
            fail_later(b, g, b->closing ? OP_ECANCELED : status);
        else
            dispatch(b, g);
    }
    maybe_finish(b);
}

static void flush(nb_batcher *b)
{
    map_free(&b->open);
    map_init(&b->open);
    list_node q;
    list_init(&q);
    list_splice_tail(&q, &b->queued);
    list_node *n;
    while ((n = list_first(&q))) {
        nb_group *g = list_entry(n, nb_group, link);
        list_remove(n);
        if (b->closing) {
            fail_later(b, g, OP_ECANCELED);
        } else if (sr_version(b->rest) == 0) {
            list_insert_tail(&b->waiting, &g->link);
        } else {
            dispatch(b, g);
        }
    }
    if (!list_empty(&b->waiting) && !b->negotiating && !b->closing) {
        if (sr_negotiate(b->rest, on_version, b) == 0) {
            b->negotiating = 1;
        } else {
            while ((n = list_first(&b->waiting))) {
                list_remove(n);
                fail_later(b, list_entry(n, nb_group, link), OP_ECANCELED);
            }
        }
    }
}

static void on_prepare(uv_prepare_t *p)
{
    nb_batcher *b = p->data;
    uv_prepare_stop(p);
    flush(b);
}

static int queue(nb_batcher *b, const char *node, const char *key, int is_delete, const sm_node_update *u,
                 nb_done_cb cb, void *data)
{
    assert(!b->closing);
    nb_group *g = map_get(&b->open, key);
    if (g == NULL) {
        g = group_new(b, key, is_delete, u);
        map_put(&b->open, g->key, g);
        list_insert_tail(&b->queued, &g->link);
    }
    add_item(g, node, cb, data);
    b->stats.queued++;
    uv_prepare_start(&b->prep, on_prepare);
    return 0;
}

/* ---- public ---- */

int nb_new(uv_loop_t *loop, const nb_opts *opts, nb_batcher **out)
{
    *out = NULL;
    if (!opts->rest)
        return OP_EINVAL;
    nb_batcher *b = xcalloc(1, sizeof(*b));
    b->loop = loop;
    b->rest = opts->rest;
    b->lib = opts->lib;
    b->name = xstrdup(opts->name ? opts->name : "cluster");
    b->max_unbatched = opts->max_unbatched ? opts->max_unbatched : 2;
    map_init(&b->open);
    list_init(&b->queued);
    list_init(&b->waiting);
    list_init(&b->throttled);
    list_init(&b->failed);
    uv_prepare_init(loop, &b->prep);
    b->prep.data = b;
    uv_timer_init(loop, &b->defer);
    b->defer.data = b;
    *out = b;
    return 0;
}

int nb_update(nb_batcher *b, const char *node, const sm_node_update *u, nb_done_cb cb, void *data)
{
    if (b->closing)
        return OP_ECANCELED;
    if (!node || !hostlist_name_valid(node) || !u || !u->set)
        return OP_EINVAL;
    if ((u->set & SM_UPD_STATE) && (u->state == SM_REQ_DRAIN || u->state == SM_REQ_DOWN) &&
        (!(u->set & SM_UPD_REASON) || !u->reason || !u->reason[0]))
        return OP_EINVAL;
    char *key = nb_update_key(u);
    int rc = queue(b, node, key, 0, u, cb, data);
    free(key);
    return rc;
}

int nb_delete(nb_batcher *b, const char *node, nb_done_cb cb, void *data)
{
    if (b->closing)
        return OP_ECANCELED;
    if (!node || !hostlist_name_valid(node))
        return OP_EINVAL;
    return queue(b, node, "DELETE", 1, NULL, cb, data);
}

void nb_flush(nb_batcher *b)
{
    uv_prepare_stop(&b->prep);
    flush(b);
}

static void on_handle_closed(uv_handle_t *h)
{
    nb_batcher *b = h->data;
    if (--b->handles_closing > 0)
        return;
    assert(b->in_flight == 0 && !b->negotiating && b->unbatched_inflight == 0);
    assert(list_empty(&b->failed) && list_empty(&b->queued) && list_empty(&b->waiting) &&
           list_empty(&b->throttled) && b->open.count == 0);
    void (*cb)(void *) = b->close_cb;
    void *data = b->close_data;
    map_free(&b->open);
    free(b->name);
    free(b);
    if (cb)
        cb(data);
}

static void maybe_finish(nb_batcher *b)
{
    if (!b->closing || b->handles_closing || b->in_flight || b->negotiating || !list_empty(&b->failed) ||
        !list_empty(&b->queued) || !list_empty(&b->waiting) || !list_empty(&b->throttled))
        return;
    b->handles_closing = 2;
    uv_close((uv_handle_t *)&b->prep, on_handle_closed);
    uv_close((uv_handle_t *)&b->defer, on_handle_closed);
}

void nb_close(nb_batcher *b, void (*cb)(void *data), void *data)
{
    if (b->closing)
        return;
    b->closing = 1;
    b->close_cb = cb;
    b->close_data = data;
    uv_prepare_stop(&b->prep);
    map_free(&b->open);
    map_init(&b->open);
    list_node *n;
    while ((n = list_first(&b->queued))) {
        list_remove(n);
        fail_later(b, list_entry(n, nb_group, link), OP_ECANCELED);
    }
    while ((n = list_first(&b->throttled))) {
        list_remove(n);
        fail_later(b, list_entry(n, nb_group, link), OP_ECANCELED);
    }
    /* Groups waiting for the version are failed when the negotiation
     * completes (it is canceled when the REST client closes). Make sure
     * the finish check runs from the loop even when nothing is pending. */
    uv_timer_start(&b->defer, deliver_failed, 0, 0);
}

void nb_get_stats(const nb_batcher *b, nb_stats *out)
{
    *out = b->stats;
    out->in_flight = b->in_flight;
}
