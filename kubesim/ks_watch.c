/* ks_watch: watch streams, event fan-out, bookmarks and timeouts.
 *
 * A watch registers with its resource when the request is handled, so the
 * initial state and every later event are captured at that moment (exact RV
 * semantics), and it buffers its output until the caller attaches a sink.
 * Fan-out appends each event line to the watch's pending buffer; the
 * engine's uv_prepare flushes every pending buffer once per loop iteration,
 * so a burst of writes leaves as few large chunks, not one chunk per event.
 * The line of an event is built once and shared by all watches that see the
 * same type.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kubesim/ks_int.h"
#include "core/json.h"
#include "core/log.h"
#include "core/mem.h"

#define WATCH_PENDING_MAX (512u * 1024 * 1024)

enum wstate { W_LIVE, W_ENDING, W_DONE };

struct ks_watch {
    ks *k;
    ks_res *res;
    int view;
    list_node link;  /* res->watches */
    list_node dirty; /* k->dirty_watches */
    char *ns;
    lsel *ls;
    fsel *fs;
    uint64_t covered; /* every change up to this RV has been delivered */
    uint64_t after;   /* deliver only events after this RV (a watch from a future RV) */
    int bookmarks;
    long long deadline_ms;
    long long next_bm_ms;
    long long pre_bm_ms; /* the bookmark shortly before the deadline, 0 once sent */
    uv_timer_t timer;
    buf_t pending;
    ks_sink sink;
    int attached;
    enum wstate state;
    int end_abort; /* when ending before attach */
    int closing;
    int table;        /* TABLE_NONE, or events carry Tables (built per watch) */
    int include;      /* TABLE_INCLUDE_* */
    int headers_sent; /* the first Table carried the column definitions */
};

static const char *type_str[] = {"ADDED", "MODIFIED", "DELETED"};

int watch_emit_obj(buf_t *b, const ks_res *r, int view, const ks_ver *v, int with_header)
{
    int rc = 0;
    if (view == r->storage_view || v->hdr_len == 0) {
        if (with_header || v->hdr_len == 0)
            return buf_append(b, v->data, v->len);
        rc = buf_putc(b, '{');
        return rc ? rc : buf_append(b, v->data + v->hdr_len, v->len - v->hdr_len);
    }
    /* Another served version of a custom resource: same bytes, other apiVersion. */
    rc = buf_printf(b, "{\"apiVersion\":\"%s\",\"kind\":\"%s\",", r->views[view].api_version, r->kind);
    return rc ? rc : buf_append(b, v->data + v->hdr_len, v->len - v->hdr_len);
}

static void event_line(buf_t *b, const ks_res *r, int view, int type, const ks_ver *v)
{
    if (buf_printf(b, "{\"type\":\"%s\",\"object\":", type_str[type]) != 0 ||
        watch_emit_obj(b, r, view, v, 1) != 0 || buf_puts(b, "}\n") != 0)
        abort();
}

/* The event line of one watch: shared bytes for JSON watches, a Table of
 * one row for Table watches (column definitions in the first one only, as
 * kube-apiserver sends them). */
static void watch_line(ks_watch *w, buf_t *b, int type, const ks_ver *v)
{
    if (w->table == TABLE_NONE) {
        event_line(b, w->res, w->view, type, v);
        return;
    }
    if (buf_printf(b, "{\"type\":\"%s\",\"object\":", type_str[type]) != 0)
        abort();
    table_begin(b, w->res, w->view, w->table, v->rv, NULL, -1, w->headers_sent);
    table_row(b, w->res, w->view, w->table, v, 1, w->include);
    if (buf_puts(b, "]}}\n") != 0)
        abort();
    w->headers_sent = 1;
}

static void mark_dirty(ks_watch *w)
{
    if (list_is_linked(&w->dirty))
        return;
    /* the flush handle keeps the loop alive only while output is pending */
    if (list_empty(&w->k->dirty_watches) && !w->k->closing)
        uv_ref((uv_handle_t *)&w->k->flush);
    list_insert_tail(&w->k->dirty_watches, &w->dirty);
}

static void append(ks_watch *w, const char *p, size_t n)
{
    if (w->state != W_LIVE)
        return;
    if (w->pending.len + n > WATCH_PENDING_MAX) {
        log_warn("kubesim: watch output over %u bytes, dropping the watch", WATCH_PENDING_MAX);
        w->state = W_ENDING;
        w->end_abort = 1;
        mark_dirty(w);
        return;
    }
    if (buf_append(&w->pending, p, n) != 0)
        abort();
    mark_dirty(w);
}

/* The event type this watch sees, or -1 (filtered out). For a DELETED caused
 * by a selector transition, *restamp is set: the previous state must carry
 * the new RV. */
static int classify(const ks_watch *w, const ks_event *ev, int *restamp)
{
    *restamp = 0;
    if (ev->type == KS_ADDED)
        return obj_matches(ev->obj, w->ns, w->ls, w->fs) ? KS_ADDED : -1;
    if (ev->type == KS_DELETED)
        return obj_matches(ev->prev ? ev->prev : ev->obj, w->ns, w->ls, w->fs) ? KS_DELETED : -1;
    int was = obj_matches(ev->prev, w->ns, w->ls, w->fs);
    int is = obj_matches(ev->obj, w->ns, w->ls, w->fs);
    if (was && is)
        return KS_MODIFIED;
    if (!was && is)
        return KS_ADDED;
    if (was && !is) {
        *restamp = 1;
        return KS_DELETED;
    }
    return -1;
}

void watch_dispatch(ks *k, ks_res *r, const ks_event *ev)
{
    if (list_empty(&r->watches))
        return;
    buf_t lines[3];
    for (int i = 0; i < 3; i++)
        buf_init(&lines[i], BUF_UNLIMITED);
    ks_ver *gone = NULL;
    buf_t gone_line;
    buf_init(&gone_line, BUF_UNLIMITED);
    list_node *n;
    list_foreach(n, &r->watches)
    {
        ks_watch *w = list_entry(n, ks_watch, link);
        if (w->state != W_LIVE || ev->rv <= w->after)
            continue;
        int restamp;
        int t = classify(w, ev, &restamp);
        if (ev->rv > w->covered)
            w->covered = ev->rv;
        if (t < 0)
            continue;
        if (w->view != r->storage_view || w->table != TABLE_NONE) {
            buf_t tmp;
            buf_init(&tmp, BUF_UNLIMITED);
            ks_ver *v = restamp ? ver_restamp(ev->prev, ev->rv) : NULL;
            watch_line(w, &tmp, t, v ? v : ev->obj);
            ver_unref(v);
            append(w, tmp.data, tmp.len);
            buf_free(&tmp);
            continue;
        }
        buf_t *line = restamp ? &gone_line : &lines[t];
        if (line->len == 0) {
            if (restamp) {
                gone = ver_restamp(ev->prev, ev->rv);
                event_line(line, r, w->view, t, gone);
            } else {
                event_line(line, r, w->view, t, ev->obj);
            }
        }
        append(w, line->data, line->len);
    }
    ver_unref(gone);
    buf_free(&gone_line);
    for (int i = 0; i < 3; i++)
        buf_free(&lines[i]);
}

static void bookmark(ks_watch *w, int initial_end)
{
    buf_t b;
    buf_init(&b, BUF_UNLIMITED);
    const ks_view *v = &w->res->views[w->view];
    if (w->table != TABLE_NONE) {
        /* A Table whose one row is the bookmark object. */
        cJSON *o = cJSON_CreateObject();
        cJSON *meta = json_obj_ensure(o, "metadata");
        char rv[32];
        snprintf(rv, sizeof(rv), "%llu", (unsigned long long)w->covered);
        json_set_str(meta, "resourceVersion", rv);
        if (initial_end)
            json_set_str(json_obj_ensure(meta, "annotations"), "k8s.io/initial-events-end", "true");
        if (buf_puts(&b, "{\"type\":\"BOOKMARK\",\"object\":") != 0)
            abort();
        table_begin(&b, w->res, w->view, w->table, w->covered, NULL, -1, w->headers_sent);
        table_row_obj(&b, w->res, w->view, w->table, o, NULL, 1, w->include);
        if (buf_puts(&b, "]}}\n") != 0)
            abort();
        w->headers_sent = 1;
        cJSON_Delete(o);
        append(w, b.data, b.len);
        buf_free(&b);
        return;
    }
    if (buf_printf(&b,
                   "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"%s\",\"apiVersion\":\"%s\",\"metadata\":{"
                   "\"resourceVersion\":\"%llu\"%s}}}\n",
                   w->res->kind, v->api_version, (unsigned long long)w->covered,
                   initial_end ? ",\"annotations\":{\"k8s.io/initial-events-end\":\"true\"}" : "") != 0)
        abort();
    append(w, b.data, b.len);
    buf_free(&b);
}

static void on_timer_closed(uv_handle_t *h)
{
    ks_watch *w = container_of(h, ks_watch, timer);
    ks *k = w->k;
    buf_free(&w->pending);
    lsel_free(w->ls);
    fsel_free(w->fs);
    free(w->ns);
    free(w);
    ks__handle_closed(k);
}

static void watch_free(ks_watch *w)
{
    if (w->closing)
        return;
    w->closing = 1;
    w->state = W_DONE;
    if (list_is_linked(&w->link))
        list_remove(&w->link);
    if (list_is_linked(&w->dirty))
        list_remove(&w->dirty);
    w->k->n_watches--;
    uv_timer_stop(&w->timer);
    uv_close((uv_handle_t *)&w->timer, on_timer_closed);
}

/* Write what is pending; finish the stream when it is ending. */
static void flush_one(ks_watch *w)
{
    if (list_is_linked(&w->dirty))
        list_remove(&w->dirty);
    if (!w->attached || w->closing)
        return;
    if (w->pending.len) {
        int rc = w->sink.write(w->sink.ctx, w->pending.data, w->pending.len);
        /* keep a small buffer for the steady state; give back the memory of a large initial burst */
        if (w->pending.len > (1u << 20))
            buf_free(&w->pending);
        else
            buf_reset(&w->pending);
        if (rc != 0) {
            w->sink.end(w->sink.ctx, 1);
            watch_free(w);
            return;
        }
    }
    if (w->state == W_ENDING) {
        w->sink.end(w->sink.ctx, w->end_abort);
        watch_free(w);
    }
}

void watch_flush_all(ks *k)
{
    while (!list_empty(&k->dirty_watches)) {
        ks_watch *w = list_entry(k->dirty_watches.next, ks_watch, dirty);
        flush_one(w);
    }
    uv_unref((uv_handle_t *)&k->flush);
}

static void watch_end(ks_watch *w, int abort_stream)
{
    if (w->state != W_LIVE)
        return;
    w->state = W_ENDING;
    w->end_abort = abort_stream;
    if (list_is_linked(&w->link))
        list_remove(&w->link);
    mark_dirty(w);
}

static void on_timer(uv_timer_t *t);

static void arm(ks_watch *w)
{
    long long now = (long long)uv_now(w->k->loop);
    long long next = w->deadline_ms;
    if (w->bookmarks) {
        if (w->next_bm_ms && w->next_bm_ms < next)
            next = w->next_bm_ms;
        if (w->pre_bm_ms && w->pre_bm_ms < next)
            next = w->pre_bm_ms;
    }
    long long due = next > now ? next - now : 0;
    uv_timer_start(&w->timer, on_timer, (uint64_t)due, 0);
}

static void on_timer(uv_timer_t *t)
{
    ks_watch *w = container_of(t, ks_watch, timer);
    ks *k = w->k;
    long long now = (long long)uv_now(k->loop);
    if (w->state != W_LIVE)
        return;
    if (now >= w->deadline_ms) {
        watch_end(w, 0);
        return;
    }
    int due = 0;
    if (w->pre_bm_ms && now >= w->pre_bm_ms) {
        w->pre_bm_ms = 0;
        due = 1;
    }
    if (w->next_bm_ms && now >= w->next_bm_ms) {
        w->next_bm_ms = now + k->cfg.bookmark_interval_ms;
        due = 1;
    }
    /* Nothing is sent at an RV the watch has already covered. */
    if (due && k->rv > w->covered) {
        w->covered = k->rv;
        bookmark(w, 0);
    }
    arm(w);
}

ks_watch *watch_new(ks *k, ks_res *r, int view, ks_watch_opts *o)
{
    ks_watch *w = xcalloc(1, sizeof(*w));
    w->k = k;
    w->res = r;
    w->view = view;
    list_init(&w->link);
    list_init(&w->dirty);
    buf_init(&w->pending, BUF_UNLIMITED);
    w->ns = o->ns ? xstrdup(o->ns) : NULL;
    w->ls = o->ls;
    w->fs = o->fs;
    o->ls = NULL;
    o->fs = NULL;
    w->bookmarks = o->bookmarks;
    w->table = o->table;
    w->include = o->include;
    uv_timer_init(k->loop, &w->timer);
    k->pending_closes++;
    k->n_watches++;
    w->state = W_LIVE;

    if (o->expired) {
        buf_t b;
        buf_init(&b, BUF_UNLIMITED);
        if (buf_printf(
                &b,
                "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},"
                "\"status\":\"Failure\",\"message\":\"too old resource version: %llu (%llu)\","
                "\"reason\":\"Expired\",\"code\":410}}\n",
                (unsigned long long)o->expired_req, (unsigned long long)o->expired_have) != 0)
            abort();
        append(w, b.data, b.len);
        buf_free(&b);
        watch_end(w, 0);
        return w;
    }

    list_insert_tail(&r->watches, &w->link);
    w->covered = k->rv;
    if (o->initial) {
        size_t it = 0;
        const char *key;
        void *val;
        buf_t line;
        buf_init(&line, BUF_UNLIMITED);
        while (map_next(&r->objs, &it, &key, &val)) {
            ks_obj *ob = val;
            if (!obj_matches(ob->cur, w->ns, w->ls, w->fs))
                continue;
            buf_reset(&line);
            watch_line(w, &line, KS_ADDED, ob->cur);
            append(w, line.data, line.len);
        }
        buf_free(&line);
        if (o->send_initial_events && o->bookmarks) {
            if (o->rv_set && o->rv > w->covered)
                w->covered = o->rv;
            bookmark(w, 1);
        }
    } else if (o->rv_set) {
        /* Exactly the changes after rv. */
        ks_hist *h = &r->hist;
        buf_t line;
        buf_init(&line, BUF_UNLIMITED);
        for (size_t i = 0; i < h->n; i++) {
            ks_event *ev = &h->ring[(h->start + i) % h->cap];
            if (ev->rv <= o->rv)
                continue;
            int restamp;
            int t = classify(w, ev, &restamp);
            if (t < 0)
                continue;
            ks_ver *v = restamp ? ver_restamp(ev->prev, ev->rv) : NULL;
            buf_reset(&line);
            watch_line(w, &line, t, v ? v : ev->obj);
            ver_unref(v);
            append(w, line.data, line.len);
        }
        buf_free(&line);
        if (o->rv > w->covered) {
            /* a future RV: nothing up to it is sent */
            w->covered = o->rv;
            w->after = o->rv;
        }
    }

    long long now = (long long)uv_now(k->loop);
    long long timeout = o->timeout_ms;
    w->deadline_ms = now + timeout;
    if (w->bookmarks) {
        w->next_bm_ms = now + k->cfg.bookmark_interval_ms;
        long long lead = timeout / 2 < 2000 ? timeout / 2 : 2000;
        w->pre_bm_ms = w->deadline_ms - lead;
    }
    arm(w);
    return w;
}

void ks_watch_attach(ks_watch *w, const ks_sink *sink)
{
    w->sink = *sink;
    w->attached = 1;
    /* Initial output (or an immediate end) goes out from the loop's prepare
     * phase, never from inside this call. */
    mark_dirty(w);
}

void ks_watch_cancel(ks_watch *w)
{
    w->attached = 0;
    if (w->state == W_LIVE && list_is_linked(&w->link))
        list_remove(&w->link);
    watch_free(w);
}

void watch_end_all(ks *k, int abort_stream)
{
    list_node *n;
    list_foreach(n, &k->resources)
    {
        ks_res *r = list_entry(n, ks_res, link);
        while (!list_empty(&r->watches)) {
            ks_watch *w = list_entry(r->watches.next, ks_watch, link);
            watch_end(w, abort_stream);
        }
    }
}

void watch_end_res(ks *k, ks_res *r)
{
    (void)k;
    while (!list_empty(&r->watches)) {
        ks_watch *w = list_entry(r->watches.next, ks_watch, link);
        watch_end(w, 0);
    }
}

/* Shutdown: end every stream now, attached or not. */
void watch_shutdown(ks *k)
{
    watch_end_all(k, 1);
    while (!list_empty(&k->dirty_watches)) {
        ks_watch *w = list_entry(k->dirty_watches.next, ks_watch, dirty);
        list_remove(&w->dirty);
        if (w->closing)
            continue;
        if (w->attached)
            w->sink.end(w->sink.ctx, 1);
        /* An unattached watch is still owned by a request the caller will
         * cancel; keep it alive until then unless the engine is going away. */
        watch_free(w);
    }
}
