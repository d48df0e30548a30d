#include "slurmio/slurmlib.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/err.h"
#include "core/list.h"
#include "core/log.h"
#include "core/mem.h"

#ifndef OP_HAVE_LIBSLURM

/* Without libslurm there is no backend to create; the rest exists only so
 * that callers link. */
int sl_backend_new(uv_loop_t *loop, const sl_options *opts, sl_backend **out)
{
    *out = NULL;
    return OP_ENOTSUP;
}

void sl_backend_close(sl_backend *b, sl_close_cb cb, void *data)
{
}

int sl_update_nodes(sl_backend *b, const char *hostlist, const sm_node_update *u, sl_done_cb cb, void *data)
{
    return OP_ENOTSUP;
}

int sl_delete_nodes(sl_backend *b, const char *hostlist, sl_done_cb cb, void *data)
{
    return OP_ENOTSUP;
}

int sl_create_reservation(sl_backend *b, const sm_resv_desc *d, sl_done_cb cb, void *data)
{
    return OP_ENOTSUP;
}

int sl_update_reservation(sl_backend *b, const sm_resv_desc *d, sl_done_cb cb, void *data)
{
    return OP_ENOTSUP;
}

int sl_delete_reservation(sl_backend *b, const char *name, sl_done_cb cb, void *data)
{
    return OP_ENOTSUP;
}

unsigned sl_backend_pending(const sl_backend *b)
{
    return 0;
}

void sl_library_fini(void)
{
}

int sl_available(void)
{
    return 0;
}

#else /* OP_HAVE_LIBSLURM */

#include <pthread.h>
#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>

#define DEFAULT_TIMEOUT_MS 60000
#define DEFAULT_CONF "/etc/slurm/slurm.conf"

enum sl_op_kind {
    SL_OP_UPDATE_NODES,
    SL_OP_DELETE_NODES,
    SL_OP_RESV_CREATE,
    SL_OP_RESV_UPDATE,
    SL_OP_RESV_DELETE,
};

typedef struct sl_op {
    list_node link; /* in b->queue while waiting */
    uv_work_t work;
    sl_backend *b;
    enum sl_op_kind kind;
    uint64_t deadline; /* uv_now() milliseconds */
    sl_done_cb cb;
    void *data;
    int delivered;

    /* Inputs, owned copies; read by the worker. */
    char *names; /* hostlist, or the reservation name */
    uint32_t node_state;
    int has_state;
    char *reason, *comment, *features, *features_act;
    char *users, *node_list;
    int64_t start_time, duration;
    uint64_t resv_flags;

    /* Results, written by the worker, read after it finished. */
    int rc;
    int slurm_errno;
    char errtext[256];
    char *resv_name;
    uint64_t elapsed_ns;
} sl_op;

struct sl_backend {
    uv_loop_t *loop;
    uv_timer_t timer; /* the earliest deadline; also the deferred close */
    list_node queue;  /* sl_op waiting, in submission order */
    sl_op *running;   /* handed to the threadpool; may be delivered (timed out) already */
    unsigned timeout_ms;
    unsigned pending;
    int closing;
    int timer_closing;
    sl_close_cb close_cb;
    void *close_data;
};

/* libslurm is used by one thread at a time in the whole process (see the
 * header); the same lock guards the one-time slurm_init(). */
static pthread_mutex_t lib_lock = PTHREAD_MUTEX_INITIALIZER;
static char *lib_conf; /* the configuration the process uses */
static int lib_inited;

static const char *resolve_conf(const char *conf)
{
    if (conf && conf[0])
        return conf;
    const char *env = getenv("SLURM_CONF");
    return env && env[0] ? env : DEFAULT_CONF;
}

int sl_backend_new(uv_loop_t *loop, const sl_options *opts, sl_backend **out)
{
    *out = NULL;
    const char *conf = resolve_conf(opts ? opts->conf : NULL);
    /* slurm_init() ends the process (fatal()) on a missing file; refuse here
     * instead, with an error the caller can report. */
    if (access(conf, R_OK) != 0) {
        log_error("libslurm backend: cannot read slurm.conf path=%s err=%s", conf, strerror(errno));
        return OP_ECONFIG;
    }
    pthread_mutex_lock(&lib_lock);
    int rc = 0;
    if (!lib_conf)
        lib_conf = xstrdup(conf);
    else if (strcmp(lib_conf, conf) != 0)
        rc = OP_ECONFIG;
    pthread_mutex_unlock(&lib_lock);
    if (rc < 0) {
        log_error("libslurm backend: this process already uses another slurm.conf path=%s", conf);
        return rc;
    }
    sl_backend *b = xcalloc(1, sizeof(*b));
    b->loop = loop;
    list_init(&b->queue);
    b->timeout_ms = opts && opts->timeout_ms ? opts->timeout_ms : DEFAULT_TIMEOUT_MS;
    uv_timer_init(loop, &b->timer);
    *out = b;
    return 0;
}

unsigned sl_backend_pending(const sl_backend *b)
{
    return b->pending;
}

int sl_available(void)
{
    return 1;
}

void sl_library_fini(void)
{
    pthread_mutex_lock(&lib_lock);
    if (lib_inited)
        slurm_fini();
    lib_inited = 0;
    free(lib_conf);
    lib_conf = NULL;
    pthread_mutex_unlock(&lib_lock);
}

/* ---- the worker side ---- */

static uint64_t map_resv_flags(uint64_t f)
{
    static const struct {
        uint64_t sm;
        uint64_t slurm;
    } map[] = {
        {SM_RF(MAINT), RESERVE_FLAG_MAINT},       {SM_RF(IGNORE_JOBS), RESERVE_FLAG_IGN_JOBS},
        {SM_RF(HOURLY), RESERVE_FLAG_HOURLY},     {SM_RF(DAILY), RESERVE_FLAG_DAILY},
        {SM_RF(WEEKLY), RESERVE_FLAG_WEEKLY},     {SM_RF(WEEKDAY), RESERVE_FLAG_WEEKDAY},
        {SM_RF(WEEKEND), RESERVE_FLAG_WEEKEND},   {SM_RF(ANY_NODES), RESERVE_FLAG_ANY_NODES},
        {SM_RF(STATIC), RESERVE_FLAG_STATIC},     {SM_RF(PART_NODES), RESERVE_FLAG_PART_NODES},
        {SM_RF(OVERLAP), RESERVE_FLAG_OVERLAP},   {SM_RF(FLEX), RESERVE_FLAG_FLEX},
        {SM_RF(MAGNETIC), RESERVE_FLAG_MAGNETIC}, {SM_RF(PURGE_COMP), RESERVE_FLAG_PURGE_COMP},
    };
    uint64_t out = 0;
    for (size_t i = 0; i < ARRAY_SIZE(map); i++)
        if (f & map[i].sm)
            out |= map[i].slurm;
    return out;
}

static void fill_resv(const sl_op *op, resv_desc_msg_t *d)
{
    slurm_init_resv_desc_msg(d);
    d->name = op->names;
    if (op->start_time > 0)
        d->start_time = (time_t)op->start_time;
    if (op->duration == SM_INFINITE)
        d->duration = INFINITE;
    else if (op->duration > 0)
        d->duration = (uint32_t)op->duration;
    if (op->resv_flags)
        d->flags = map_resv_flags(op->resv_flags);
    d->users = op->users;
    d->node_list = op->node_list;
}

/* Runs on a threadpool thread: only the op's own fields are touched. */
static void work_cb(uv_work_t *w)
{
    sl_op *op = container_of(w, sl_op, work);
    pthread_mutex_lock(&lib_lock);
    if (!lib_inited) {
        slurm_init(lib_conf);
        lib_inited = 1;
    }
    uint64_t t0 = uv_hrtime();
    int ok = 0;
    errno = 0;
    assert(op->kind >= SL_OP_UPDATE_NODES && op->kind <= SL_OP_RESV_DELETE);
    switch (op->kind) {
    case SL_OP_UPDATE_NODES:
    case SL_OP_DELETE_NODES: {
        update_node_msg_t m;
        slurm_init_update_node_msg(&m);
        m.node_names = op->names;
        if (op->kind == SL_OP_DELETE_NODES) {
            ok = slurm_delete_node(&m) == SLURM_SUCCESS;
            break;
        }
        if (op->has_state)
            m.node_state = op->node_state;
        m.reason = op->reason;
        m.comment = op->comment;
        m.features = op->features;
        m.features_act = op->features_act;
        ok = slurm_update_node(&m) == SLURM_SUCCESS;
        break;
    }
    case SL_OP_RESV_CREATE: {
        resv_desc_msg_t d;
        fill_resv(op, &d);
        char *name = slurm_create_reservation(&d);
        if (name) {
            /* slurm.h: "caller must free the memory"; libslurm strdup()s it
             * (plain malloc, not its own xmalloc). */
            op->resv_name = xstrdup(name);
            free(name);
            ok = 1;
        }
        break;
    }
    case SL_OP_RESV_UPDATE: {
        resv_desc_msg_t d;
        fill_resv(op, &d);
        ok = slurm_update_reservation(&d) == SLURM_SUCCESS;
        break;
    }
    case SL_OP_RESV_DELETE: {
        reservation_name_msg_t r = {.name = op->names};
        ok = slurm_delete_reservation(&r) == SLURM_SUCCESS;
        break;
    }
    }
    op->elapsed_ns = uv_hrtime() - t0;
    if (!ok) {
        /* Slurm reports its error numbers through errno (thread-local), so
         * it must be read here, on the thread that made the call. */
        int e = slurm_get_errno();
        op->slurm_errno = e;
        snprintf(op->errtext, sizeof(op->errtext), "%s", e ? slurm_strerror(e) : "unknown Slurm error");
        op->rc = e ? sm_errno_code(e) : OP_ESLURM;
    }
    pthread_mutex_unlock(&lib_lock);
}

/* ---- the loop side ---- */

static void sl_op_free(sl_op *op)
{
    /* Every op's callback ran (or was due) before it goes: once, and never
     * while the threadpool still has it. */
    assert(op->delivered && op->b->running != op && !list_is_linked(&op->link));
    free(op->names);
    free(op->reason);
    free(op->comment);
    free(op->features);
    free(op->features_act);
    free(op->users);
    free(op->node_list);
    free(op->resv_name);
    free(op);
}

static void deliver(sl_op *op, int status, const char *message)
{
    if (op->delivered)
        return; /* timed out already: the late result is dropped */
    assert(op->b->pending > 0);
    op->delivered = 1;
    op->b->pending--;
    sl_result r = {.status = status,
                   .slurm_errno = status == op->rc ? op->slurm_errno : 0,
                   .message = message
                                  ? message
                                  : (status == op->rc && op->errtext[0] ? op->errtext : err_str(status)),
                   .resv_name = status == 0 ? op->resv_name : NULL,
                   .elapsed_ns = op->elapsed_ns};
    sl_done_cb cb = op->cb;
    op->cb = NULL;
    if (cb)
        cb(op->data, &r);
}

static void on_timer(uv_timer_t *t);
static void after_work_cb(uv_work_t *w, int status);

static void on_timer_closed(uv_handle_t *h)
{
    sl_backend *b = container_of((uv_timer_t *)h, sl_backend, timer);
    assert(b->closing && b->running == NULL && list_empty(&b->queue) && b->pending == 0);
    sl_close_cb cb = b->close_cb;
    void *data = b->close_data;
    free(b);
    if (cb)
        cb(data);
}

static void maybe_finish(sl_backend *b)
{
    if (b->running || !list_empty(&b->queue) || b->timer_closing)
        return;
    b->timer_closing = 1;
    uv_close((uv_handle_t *)&b->timer, on_timer_closed);
}

/* Arm the timer for the earliest deadline: ops share one timeout, so the
 * running op (if still waited for) or else the queue's head is the earliest. */
static void arm_timer(sl_backend *b)
{
    if (b->closing)
        return;
    const sl_op *first = NULL;
    if (b->running && !b->running->delivered)
        first = b->running;
    else if (!list_empty(&b->queue))
        first = container_of(list_first(&b->queue), sl_op, link);
    if (!first) {
        uv_timer_stop(&b->timer);
        return;
    }
    uv_update_time(b->loop);
    uint64_t now = uv_now(b->loop);
    uv_timer_start(&b->timer, on_timer, first->deadline > now ? first->deadline - now : 0, 0);
}

static void submit_next(sl_backend *b)
{
    if (b->running || b->closing || list_empty(&b->queue))
        return;
    sl_op *op = container_of(list_first(&b->queue), sl_op, link);
    list_remove(&op->link);
    b->running = op;
    int rc = uv_queue_work(b->loop, &op->work, work_cb, after_work_cb);
    if (rc < 0) {
        /* Cannot happen with a valid loop; fail the op rather than hang. */
        b->running = NULL;
        deliver(op, rc, NULL);
        sl_op_free(op);
    }
}

static void after_work_cb(uv_work_t *w, int status)
{
    sl_op *op = container_of(w, sl_op, work);
    sl_backend *b = op->b;
    assert(b->running == op); /* one libslurm call at a time */
    b->running = NULL;
    if (op->delivered && status == 0)
        log_warn("libslurm call finished after its timeout; result dropped names=%s rc=%s ms=%.1f",
                 op->names ? op->names : "", err_name(op->rc), (double)op->elapsed_ns / 1e6);
    else
        log_debug("libslurm call done kind=%d names=%s rc=%s ms=%.1f", (int)op->kind,
                  op->names ? op->names : "", err_name(op->rc), (double)op->elapsed_ns / 1e6);
    deliver(op, status == UV_ECANCELED ? OP_ECANCELED : op->rc, NULL);
    sl_op_free(op);
    if (b->closing) {
        maybe_finish(b);
        return;
    }
    submit_next(b);
    arm_timer(b);
}

static void on_timer(uv_timer_t *t)
{
    sl_backend *b = container_of(t, sl_backend, timer);
    if (b->closing) {
        while (!list_empty(&b->queue)) {
            sl_op *op = container_of(list_first(&b->queue), sl_op, link);
            list_remove(&op->link);
            deliver(op, OP_ECANCELED, NULL);
            sl_op_free(op);
        }
        maybe_finish(b);
        return;
    }
    uint64_t now = uv_now(b->loop);
    if (b->running && !b->running->delivered && b->running->deadline <= now) {
        char msg[96];
        snprintf(msg, sizeof(msg), "no answer from libslurm within %u ms", b->timeout_ms);
        deliver(b->running, OP_ETIMEOUT, msg);
        if (b->closing)
            return; /* the callback closed us; the close path takes over */
    }
    while (!list_empty(&b->queue)) {
        sl_op *op = container_of(list_first(&b->queue), sl_op, link);
        if (op->deadline > now)
            break;
        list_remove(&op->link);
        deliver(op, OP_ETIMEOUT, "timed out waiting behind an earlier libslurm call");
        sl_op_free(op);
        if (b->closing)
            return;
    }
    arm_timer(b);
}

void sl_backend_close(sl_backend *b, sl_close_cb cb, void *data)
{
    if (!b || b->closing)
        return;
    b->closing = 1;
    b->close_cb = cb;
    b->close_data = data;
    if (b->running)
        uv_cancel((uv_req_t *)&b->running->work); /* succeeds only if no thread picked it up */
    /* Everything else happens on the next tick, never inside this call. */
    uv_timer_stop(&b->timer);
    uv_timer_start(&b->timer, on_timer, 0, 0);
}

static sl_op *sl_op_new(sl_backend *b, enum sl_op_kind kind, sl_done_cb cb, void *data)
{
    sl_op *op = xcalloc(1, sizeof(*op));
    list_init(&op->link);
    op->b = b;
    op->kind = kind;
    op->cb = cb;
    op->data = data;
    return op;
}

static int enqueue(sl_backend *b, sl_op *op)
{
    uv_update_time(b->loop);
    op->deadline = uv_now(b->loop) + b->timeout_ms;
    list_insert_tail(&b->queue, &op->link);
    b->pending++;
    submit_next(b);
    arm_timer(b);
    return 0;
}

static char *dup_or_null(const char *s)
{
    return s ? xstrdup(s) : NULL;
}

int sl_update_nodes(sl_backend *b, const char *hostlist, const sm_node_update *u, sl_done_cb cb, void *data)
{
    if (b->closing)
        return OP_ECANCELED;
    if (!hostlist || !hostlist[0] || !u || !u->set)
        return OP_EINVAL;
    if (u->set & SM_UPD_TOPOLOGY)
        return OP_ENOTSUP;
    uint32_t state = 0;
    if (u->set & SM_UPD_STATE) {
        switch (u->state) {
        case SM_REQ_DRAIN:
            state = NODE_STATE_DRAIN;
            break;
        case SM_REQ_UNDRAIN:
            state = NODE_STATE_UNDRAIN;
            break;
        case SM_REQ_RESUME:
            state = NODE_RESUME;
            break;
        case SM_REQ_DOWN:
            state = NODE_STATE_DOWN;
            break;
        case SM_REQ_IDLE:
            state = NODE_STATE_IDLE;
            break;
        default:
            return OP_EINVAL;
        }
        /* slurmctld refuses these without a reason ("You must specify a
         * reason"); refuse before the round trip. */
        if ((u->state == SM_REQ_DRAIN || u->state == SM_REQ_DOWN) &&
            (!(u->set & SM_UPD_REASON) || !u->reason || !u->reason[0]))
            return OP_EINVAL;
    }
    sl_op *op = sl_op_new(b, SL_OP_UPDATE_NODES, cb, data);
    op->names = xstrdup(hostlist);
    op->has_state = !!(u->set & SM_UPD_STATE);
    op->node_state = state;
    if (u->set & SM_UPD_REASON)
        op->reason = xstrdup(u->reason ? u->reason : "");
    if (u->set & SM_UPD_COMMENT)
        op->comment = xstrdup(u->comment ? u->comment : "");
    if (u->set & SM_UPD_FEATURES)
        op->features = xstrdup(u->features ? u->features : "");
    if (u->set & SM_UPD_FEATURES_ACT)
        op->features_act = xstrdup(u->features_act ? u->features_act : "");
    return enqueue(b, op);
}

int sl_delete_nodes(sl_backend *b, const char *hostlist, sl_done_cb cb, void *data)
{
    if (b->closing)
        return OP_ECANCELED;
    if (!hostlist || !hostlist[0])
        return OP_EINVAL;
    sl_op *op = sl_op_new(b, SL_OP_DELETE_NODES, cb, data);
    op->names = xstrdup(hostlist);
    return enqueue(b, op);
}

static sl_op *resv_op(sl_backend *b, enum sl_op_kind kind, const sm_resv_desc *d, sl_done_cb cb, void *data)
{
    sl_op *op = sl_op_new(b, kind, cb, data);
    op->names = dup_or_null(d->name && d->name[0] ? d->name : NULL);
    op->users = dup_or_null(d->users);
    op->node_list = dup_or_null(d->node_list);
    op->start_time = d->start_time;
    op->duration = d->duration;
    op->resv_flags = d->flags;
    return op;
}

int sl_create_reservation(sl_backend *b, const sm_resv_desc *d, sl_done_cb cb, void *data)
{
    if (b->closing)
        return OP_ECANCELED;
    if (!d || !d->node_list || !d->node_list[0] || !d->users || !d->users[0] || d->duration == 0)
        return OP_EINVAL;
    return enqueue(b, resv_op(b, SL_OP_RESV_CREATE, d, cb, data));
}

int sl_update_reservation(sl_backend *b, const sm_resv_desc *d, sl_done_cb cb, void *data)
{
    if (b->closing)
        return OP_ECANCELED;
    if (!d || !d->name || !d->name[0])
        return OP_EINVAL;
    return enqueue(b, resv_op(b, SL_OP_RESV_UPDATE, d, cb, data));
}

int sl_delete_reservation(sl_backend *b, const char *name, sl_done_cb cb, void *data)
{
    if (b->closing)
        return OP_ECANCELED;
    if (!name || !name[0])
        return OP_EINVAL;
    sl_op *op = sl_op_new(b, SL_OP_RESV_DELETE, cb, data);
    op->names = xstrdup(name);
    return enqueue(b, op);
}

#endif /* OP_HAVE_LIBSLURM */
