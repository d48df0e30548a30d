/* ks_kubelet: simulated Nodes, a scheduler and the kubelets.
 *
 * Nodes are ordinary objects; each has a small side record (capacity in
 * use, the pods bound to it, a trimmed copy of the fields core/podfit reads)
 * so that a scheduling decision looks at one candidate node and the few pods
 * on it, not at every pod. Pending pods wait in a FIFO; the scheduler walks
 * the nodes round robin from where the last placement ended, so pods spread
 * and the common case is one predicate evaluation per pod. Pods that fit
 * nowhere wait until a node or pod changes (at most every schedule_retry_ms).
 *
 * The kubelet's work (start, ready, the end of a grace period) is a min-heap
 * of timed actions keyed by pod key and uid, driven by one uv_timer; an
 * action whose pod is gone or was replaced does nothing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kubesim/ks_int.h"
#include "core/crypto.h"
#include "core/json.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/podfit.h"
#include "core/rfc3339.h"

enum pstate { P_PENDING, P_BOUND, P_RUNNING, P_READY, P_DONE };
enum act { A_START, A_READY, A_REMOVE, A_SYNC, A_FORCE_DELETE, A_EVICT, A_NODE_STATUS };

typedef struct ks_node {
    ks_obj *obj;
    list_node pods; /* ks_pod.node_link */
    int gpu_cap, gpu_used;
    int pod_cap, pod_count;
    cJSON *fit; /* {metadata:{name,labels},spec:{taints,unschedulable}} */
    int idx;    /* position in kl->nodes */
    char ip[24];
} ks_node;

typedef struct ks_pod {
    ks_obj *obj;
    list_node sched_link; /* pending or unschedulable queue */
    list_node node_link;
    ks_node *node;
    int gpus;
    enum pstate state;
    cJSON *labels; /* copy, for anti-affinity */
    cJSON *anti;   /* {"affinity":{"podAntiAffinity":...}} when it has required terms */
    int gates;     /* has readiness gates */
    int unsched_marked;
} ks_pod;

typedef struct action {
    long long due;
    unsigned long long seq;
    enum act what;
    ks_res *res;
    char *key;
    char uid[40];
} action;

struct ks_kubelet {
    ks *k;
    list_node pending;
    list_node unsched;
    uv_timer_t sched_timer;
    uv_timer_t act_timer;
    uv_timer_t retry_timer;
    action *heap;
    size_t n, cap;
    unsigned long long seq;
    ks_node **nodes;
    int n_nodes, cap_nodes;
    int rr;
    unsigned ip_next;
    int node_seq;
    ks_res *pods_res, *nodes_res;
    /* Equivalence cache: pods with the same placement constraints that
     * found no node fail again at once until the cluster changes (a node
     * changed, a pod released its node). */
    unsigned long long gen;
    map_t fails; /* constraint key -> struct fail */
};

struct fail {
    unsigned long long gen;
    char *reason;
    char key[];
};

#define KL(k) ((k)->kl)

/* ---- timed actions ----------------------------------------------------- */

static int act_less(const action *a, const action *b)
{
    return a->due < b->due || (a->due == b->due && a->seq < b->seq);
}

static void heap_push(struct ks_kubelet *kl, action a)
{
    if (kl->n == kl->cap) {
        kl->cap = kl->cap ? kl->cap * 2 : 256;
        kl->heap = xrealloc(kl->heap, kl->cap * sizeof(action));
    }
    size_t i = kl->n++;
    kl->heap[i] = a;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!act_less(&kl->heap[i], &kl->heap[p]))
            break;
        action t = kl->heap[i];
        kl->heap[i] = kl->heap[p];
        kl->heap[p] = t;
        i = p;
    }
}

static action heap_pop(struct ks_kubelet *kl)
{
    action top = kl->heap[0];
    kl->heap[0] = kl->heap[--kl->n];
    size_t i = 0;
    while (1) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < kl->n && act_less(&kl->heap[l], &kl->heap[m]))
            m = l;
        if (r < kl->n && act_less(&kl->heap[r], &kl->heap[m]))
            m = r;
        if (m == i)
            break;
        action t = kl->heap[i];
        kl->heap[i] = kl->heap[m];
        kl->heap[m] = t;
        i = m;
    }
    return top;
}

static void act_timer_cb(uv_timer_t *t);

static void arm_actions(struct ks_kubelet *kl)
{
    if (kl->k->closing)
        return;
    if (kl->n == 0) {
        uv_timer_stop(&kl->act_timer);
        return;
    }
    long long now = (long long)uv_now(kl->k->loop);
    long long due = kl->heap[0].due - now;
    uv_timer_start(&kl->act_timer, act_timer_cb, due > 0 ? (uint64_t)due : 0, 0);
}

static void schedule_action(ks *k, ks_obj *o, enum act what, long long delay_ms)
{
    struct ks_kubelet *kl = KL(k);
    action a;
    memset(&a, 0, sizeof(a));
    uv_update_time(k->loop);
    a.due = (long long)uv_now(k->loop) + delay_ms;
    a.seq = kl->seq++;
    a.what = what;
    a.res = o->res;
    a.key = xstrdup(o->key);
    snprintf(a.uid, sizeof(a.uid), "%s", o->uid);
    int first = kl->n == 0 || act_less(&a, &kl->heap[0]);
    heap_push(kl, a);
    if (first)
        arm_actions(kl);
}

/* ---- conditions -------------------------------------------------------- */

static cJSON *find_cond(cJSON *conds, const char *type)
{
    for (cJSON *c = conds ? conds->child : NULL; c; c = c->next)
        if (strcmp(json_get_str_or(c, "type", ""), type) == 0)
            return c;
    return NULL;
}

/* Upsert a condition; lastTransitionTime changes only when status flips. */
static void set_cond(cJSON *status, const char *type, const char *st, const char *reason, const char *msg)
{
    cJSON *conds = (cJSON *)json_child(status, "conditions");
    if (!cJSON_IsArray(conds)) {
        conds = cJSON_CreateArray();
        json_set(status, "conditions", conds);
    }
    cJSON *c = find_cond(conds, type);
    char now[32];
    rfc3339_now(now, 0);
    if (c == NULL) {
        c = cJSON_CreateObject();
        json_set_str(c, "type", type);
        cJSON_AddItemToArray(conds, c);
        json_set_str(c, "status", st);
        json_set(c, "lastProbeTime", cJSON_CreateNull());
        json_set_str(c, "lastTransitionTime", now);
    } else if (strcmp(json_get_str_or(c, "status", ""), st) != 0) {
        json_set_str(c, "status", st);
        json_set_str(c, "lastTransitionTime", now);
    }
    if (!json_child(c, "lastProbeTime"))
        json_set(c, "lastProbeTime", cJSON_CreateNull());
    if (reason)
        json_set_str(c, "reason", reason);
    else
        json_del(c, "reason");
    if (msg)
        json_set_str(c, "message", msg);
    else
        json_del(c, "message");
}

/* ---- pods -------------------------------------------------------------- */

static int gpu_of(const cJSON *list)
{
    const cJSON *v = json_child(list, "nvidia.com/gpu");
    if (cJSON_IsString(v))
        return atoi(v->valuestring);
    if (cJSON_IsNumber(v))
        return (int)json_num_clamp(v, 0, INT32_MIN, INT32_MAX);
    return -1;
}

/* GPUs a pod asks for: requests, or limits (which imply equal requests). */
static int pod_gpus(const cJSON *spec)
{
    int total = 0;
    const cJSON *cs = json_child(spec, "containers");
    for (const cJSON *c = cs ? cs->child : NULL; c; c = c->next) {
        int n = gpu_of(json_get(c, "resources.requests"));
        if (n < 0)
            n = gpu_of(json_get(c, "resources.limits"));
        if (n > 0)
            total += n;
    }
    return total;
}

static void pod_unbind(ks_pod *p)
{
    if (p->node) {
        list_remove(&p->node_link);
        p->node->gpu_used -= p->gpus;
        p->node->pod_count--;
        p->node = NULL;
    }
}

static ks_node *node_by_name(ks *k, const char *name)
{
    ks_obj *o = obj_find(KL(k)->nodes_res, NULL, name);
    return o ? o->node : NULL;
}

static void pod_bind(ks *k, ks_pod *p, const char *node)
{
    ks_node *n = node_by_name(k, node);
    if (n == NULL || p->node == n)
        return;
    pod_unbind(p);
    p->node = n;
    list_insert_tail(&n->pods, &p->node_link);
    n->gpu_used += p->gpus;
    n->pod_count++;
}

static void sched_cb(uv_timer_t *t);

static void sched_kick(ks *k, unsigned delay)
{
    struct ks_kubelet *kl = KL(k);
    if (!k->closing && !uv_is_active((uv_handle_t *)&kl->sched_timer))
        uv_timer_start(&kl->sched_timer, sched_cb, delay, 0);
}

static void retry_cb(uv_timer_t *t)
{
    ks *k = t->data;
    struct ks_kubelet *kl = KL(k);
    list_splice_tail(&kl->pending, &kl->unsched);
    sched_kick(k, 0);
}

static void fail_free(void *v)
{
    struct fail *f = v;
    free(f->reason);
    free(f);
}

static const map_type fail_type = {.val_free = fail_free};

static void fails_clear(struct ks_kubelet *kl)
{
    map_free(&kl->fails);
}

/* Something changed that may let unschedulable pods fit. */
static void cluster_changed(ks *k)
{
    struct ks_kubelet *kl = KL(k);
    if (kl == NULL)
        return;
    kl->gen++;
    if (list_empty(&kl->unsched) || k->closing || uv_is_active((uv_handle_t *)&kl->retry_timer))
        return;
    uv_timer_start(&kl->retry_timer, retry_cb, k->cfg.schedule_retry_ms, 0);
}

void kubelet_on_pod(ks *k, ks_obj *o, const ks_ver *old_ver, const ks_ver *new_ver, const cJSON *obj)
{
    struct ks_kubelet *kl = KL(k);
    if (new_ver == NULL || kl == NULL)
        return; /* removal: kubelet_obj_gone */
    const cJSON *spec = json_child(obj, "spec");
    ks_pod *p = o->pod;
    if (p == NULL) {
        p = xcalloc(1, sizeof(*p));
        p->obj = o;
        list_init(&p->sched_link);
        list_init(&p->node_link);
        p->gpus = pod_gpus(spec);
        p->gates = json_len(json_child(spec, "readinessGates")) > 0;
        const cJSON *anti =
            json_get(spec, "affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution");
        if (json_len(anti)) {
            p->anti = cJSON_CreateObject();
            json_set(p->anti, "affinity", cJSON_Duplicate(json_child(spec, "affinity"), 1));
        }
        o->pod = p;
        const char *phase = json_get_str_or(obj, "status.phase", "Pending");
        if (strcmp(phase, "Running") == 0) {
            const cJSON *ready = find_cond((cJSON *)json_get(obj, "status.conditions"), "ContainersReady");
            p->state =
                ready && strcmp(json_get_str_or(ready, "status", ""), "True") == 0 ? P_READY : P_RUNNING;
            if (p->state == P_RUNNING)
                schedule_action(k, o, A_READY, k->cfg.pod_ready_delay_ms);
        } else if (strcmp(phase, "Succeeded") == 0 || strcmp(phase, "Failed") == 0) {
            p->state = P_DONE;
        }
        if (json_get_str(obj, "metadata.deletionTimestamp") && p->state != P_DONE)
            schedule_action(k, o, A_REMOVE, k->cfg.max_grace_ms);
    }
    cJSON_Delete(p->labels);
    p->labels = cJSON_Duplicate(json_get(obj, "metadata.labels"), 1);
    const char *node = json_get_str(spec, "nodeName");
    int deleting = json_get_str(obj, "metadata.deletionTimestamp") != NULL;
    if (node && *node && p->state != P_DONE) {
        if (list_is_linked(&p->sched_link))
            list_remove(&p->sched_link);
        if (p->node == NULL || strcmp(ver_name(p->node->obj->cur), node) != 0)
            pod_bind(k, p, node);
        if (p->state == P_PENDING && p->node) {
            p->state = P_BOUND;
            if (!deleting)
                schedule_action(k, o, A_START, k->cfg.pod_start_delay_ms);
        }
    } else if (p->state == P_PENDING && !deleting && !list_is_linked(&p->sched_link) &&
               strcmp(json_get_str_or(spec, "schedulerName", "default-scheduler"), "default-scheduler") ==
                   0) {
        /* pods for another scheduler wait for someone to bind them */
        list_insert_tail(&kl->pending, &p->sched_link);
        sched_kick(k, 0);
    }
    if (deleting && list_is_linked(&p->sched_link))
        list_remove(&p->sched_link);
    /* readiness gates: a condition written by someone else may change Ready */
    if (p->gates && p->state == P_READY && old_ver && !deleting) {
        cJSON *old = ver_parse(old_ver);
        if (!json_equal(json_get(old, "status.conditions"), json_get(obj, "status.conditions")))
            schedule_action(k, o, A_SYNC, 0);
        cJSON_Delete(old);
    }
}

static void pod_free(ks *k, ks_pod *p)
{
    pod_unbind(p);
    if (list_is_linked(&p->sched_link))
        list_remove(&p->sched_link);
    cJSON_Delete(p->labels);
    cJSON_Delete(p->anti);
    free(p);
    cluster_changed(k);
}

/* ---- nodes ------------------------------------------------------------- */

static void node_fit_view(ks_node *n, const cJSON *obj)
{
    cJSON_Delete(n->fit);
    n->fit = cJSON_CreateObject();
    cJSON *m = cJSON_CreateObject();
    json_set_str(m, "name", json_get_str_or(obj, "metadata.name", ""));
    const cJSON *labels = json_get(obj, "metadata.labels");
    if (labels)
        json_set(m, "labels", cJSON_Duplicate(labels, 1));
    json_set(n->fit, "metadata", m);
    cJSON *s = cJSON_CreateObject();
    const cJSON *taints = json_get(obj, "spec.taints");
    if (taints)
        json_set(s, "taints", cJSON_Duplicate(taints, 1));
    if (json_get_bool(obj, "spec.unschedulable", 0))
        json_set_bool(s, "unschedulable", 1);
    json_set(n->fit, "spec", s);
}

static int quantity_int(const cJSON *v)
{
    if (cJSON_IsString(v))
        return atoi(v->valuestring);
    if (cJSON_IsNumber(v))
        return (int)json_num_clamp(v, 0, INT32_MIN, INT32_MAX);
    return 0;
}

/* The taint manager: pods that do not tolerate a NoExecute taint of their
 * node are deleted. Only taints count: label changes never evict
 * (affinity is IgnoredDuringExecution). tolerationSeconds is not honoured:
 * a toleration with a limit tolerates for good. */
static void evict_untolerated(ks *k, ks_node *n)
{
    const cJSON *taints = json_get(n->fit, "spec.taints");
    int noexec = 0;
    for (const cJSON *t = taints ? taints->child : NULL; t; t = t->next)
        if (strcmp(json_get_str_or(t, "effect", ""), "NoExecute") == 0)
            noexec = 1;
    if (!noexec)
        return;
    char **keys = NULL;
    int nk = 0;
    list_node *ln;
    list_foreach(ln, &n->pods)
    {
        ks_pod *p = list_entry(ln, ks_pod, node_link);
        cJSON *obj = ver_parse(p->obj->cur);
        const cJSON *tols = json_get(obj, "spec.tolerations");
        int evict = 0;
        for (const cJSON *t = taints->child; t && !evict; t = t->next)
            if (strcmp(json_get_str_or(t, "effect", ""), "NoExecute") == 0 && !fit_tolerates(tols, t))
                evict = 1;
        if (evict && !json_get_str(obj, "metadata.deletionTimestamp")) {
            keys = xrealloc(keys, sizeof(char *) * (size_t)(nk + 1));
            keys[nk++] = xstrdup(p->obj->key);
        }
        cJSON_Delete(obj);
    }
    for (int i = 0; i < nk; i++) {
        ks_obj *o = map_get(&KL(k)->pods_res->objs, keys[i]);
        if (o)
            schedule_action(k, o, A_EVICT, 0);
        free(keys[i]);
    }
    free(keys);
}

void kubelet_on_node(ks *k, ks_obj *o, const ks_ver *old_ver, const ks_ver *new_ver)
{
    struct ks_kubelet *kl = KL(k);
    if (new_ver == NULL || kl == NULL)
        return;
    cJSON *obj = ver_parse(new_ver);
    ks_node *n = o->node;
    if (n == NULL) {
        n = xcalloc(1, sizeof(*n));
        n->obj = o;
        list_init(&n->pods);
        o->node = n;
        if (kl->n_nodes == kl->cap_nodes) {
            kl->cap_nodes = kl->cap_nodes ? kl->cap_nodes * 2 : 1024;
            kl->nodes = xrealloc(kl->nodes, sizeof(ks_node *) * (size_t)kl->cap_nodes);
        }
        n->idx = kl->n_nodes;
        kl->nodes[kl->n_nodes++] = n;
        if (!json_get(obj, "status.conditions"))
            schedule_action(k, o, A_NODE_STATUS, 0);
    }
    const cJSON *alloc = json_get(obj, "status.allocatable");
    n->gpu_cap = quantity_int(json_child(alloc, "nvidia.com/gpu"));
    n->pod_cap = alloc && json_child(alloc, "pods") ? quantity_int(json_child(alloc, "pods")) : 110;
    const cJSON *addrs = json_get(obj, "status.addresses");
    for (const cJSON *a = addrs ? addrs->child : NULL; a; a = a->next)
        if (strcmp(json_get_str_or(a, "type", ""), "InternalIP") == 0)
            snprintf(n->ip, sizeof(n->ip), "%s", json_get_str_or(a, "address", ""));
    cJSON *oldfit = n->fit ? cJSON_Duplicate(n->fit, 1) : NULL;
    node_fit_view(n, obj);
    if (!json_equal(oldfit, n->fit)) {
        cluster_changed(k);
        if (oldfit)
            evict_untolerated(k, n);
    }
    cJSON_Delete(oldfit);
    cJSON_Delete(obj);
    (void)old_ver;
}

static void node_free(ks *k, ks_node *n)
{
    struct ks_kubelet *kl = KL(k);
    /* pods bound to a node that is gone are deleted (pod GC) */
    list_node *ln, *tmp;
    list_foreach_safe(ln, tmp, &n->pods)
    {
        ks_pod *p = list_entry(ln, ks_pod, node_link);
        if (!k->closing)
            schedule_action(k, p->obj, A_FORCE_DELETE, 0);
        list_remove(&p->node_link);
        p->node = NULL;
    }
    kl->nodes[n->idx] = kl->nodes[--kl->n_nodes];
    kl->nodes[n->idx]->idx = n->idx;
    kl->gen++;
    if (kl->rr >= kl->n_nodes)
        kl->rr = 0;
    cJSON_Delete(n->fit);
    free(n);
}

void kubelet_obj_gone(ks *k, ks_obj *o)
{
    if (o->pod) {
        pod_free(k, o->pod);
        o->pod = NULL;
    }
    if (o->node) {
        node_free(k, o->node);
        o->node = NULL;
    }
}

/* ---- scheduler --------------------------------------------------------- */

static int anti_ok(ks_node *n, const cJSON *spec, const char *ns, const cJSON *labels)
{
    list_node *ln;
    int has_anti =
        json_len(json_get(spec, "affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution")) >
        0;
    list_foreach(ln, &n->pods)
    {
        ks_pod *q = list_entry(ln, ks_pod, node_link);
        const char *qns = ver_ns(q->obj->cur);
        if (has_anti && fit_anti_affinity_conflict(spec, ns, q->labels, qns))
            return 0;
        if (q->anti && fit_anti_affinity_conflict(q->anti, qns, labels, ns))
            return 0;
    }
    return 1;
}

static int node_fits(ks_node *n, ks_pod *p, const cJSON *spec, const char *ns, const cJSON *labels,
                     const char **reason)
{
    fit_result fr;
    fit_schedule(spec, n->fit, &fr);
    if (!fr.should_run) {
        *reason = fr.reason;
        return 0;
    }
    if (n->pod_count >= n->pod_cap) {
        *reason = "Too many pods";
        return 0;
    }
    if (p->gpus > 0 && n->gpu_used + p->gpus > n->gpu_cap) {
        *reason = "Insufficient nvidia.com/gpu";
        return 0;
    }
    if (!anti_ok(n, spec, ns, labels)) {
        *reason = "node(s) didn't match pod anti-affinity rules";
        return 0;
    }
    return 1;
}

/* The placement constraints of a pod as a string (NULL when the pod has
 * pod anti-affinity, whose outcome depends on where other pods are). */
static char *constraint_key(const ks_pod *p, const cJSON *spec)
{
    if (p->anti)
        return NULL;
    buf_t b;
    buf_init(&b, BUF_UNLIMITED);
    static const char *const fields[] = {"nodeSelector", "affinity", "tolerations"};
    int rc = buf_printf(&b, "%d", p->gpus);
    for (size_t i = 0; i < ARRAY_SIZE(fields) && rc == 0; i++) {
        const cJSON *v = json_child(spec, fields[i]);
        rc = buf_putc(&b, '|');
        if (v && rc == 0)
            rc = json_dump_buf(v, &b);
    }
    if (rc)
        abort();
    return buf_detach(&b, NULL);
}

static void schedule_one(ks *k, ks_pod *p)
{
    struct ks_kubelet *kl = KL(k);
    ks_obj *o = p->obj;
    cJSON *obj = ver_parse(o->cur);
    const cJSON *spec = json_child(obj, "spec");
    const char *ns = ver_ns(o->cur);
    const cJSON *labels = json_get(obj, "metadata.labels");
    ks_node *chosen = NULL;
    const char *reason = NULL;
    int reasons = 0;
    char *ckey = constraint_key(p, spec);
    struct fail *cached = ckey ? map_get(&kl->fails, ckey) : NULL;
    if (cached && cached->gen == kl->gen) {
        reason = cached->reason;
        goto unschedulable;
    }
    for (int i = 0; i < kl->n_nodes; i++) {
        ks_node *n = kl->nodes[(kl->rr + i) % kl->n_nodes];
        const char *why = NULL;
        if (node_fits(n, p, spec, ns, labels, &why)) {
            chosen = n;
            kl->rr = (n->idx + 1) % kl->n_nodes;
            break;
        }
        if (why && reason != why) {
            reason = why;
            reasons++;
        }
    }
    if (chosen) {
        free(ckey);
        json_set_str(json_obj_ensure(obj, "spec"), "nodeName", ver_name(chosen->obj->cur));
        set_cond(json_obj_ensure(obj, "status"), "PodScheduled", "True", NULL, NULL);
        ks_ver *v = NULL;
        ks_store_update(k, o, obj, 0, &v, NULL);
        ver_unref(v);
        return;
    }
    if (ckey) {
        if (kl->fails.count > 4096)
            fails_clear(kl);
        struct fail *f = map_get(&kl->fails, ckey);
        if (f == NULL) {
            f = xcalloc(1, sizeof(*f) + strlen(ckey) + 1);
            strcpy(f->key, ckey);
            map_put(&kl->fails, f->key, f);
        }
        f->gen = kl->gen;
        free(f->reason);
        f->reason = reason ? xstrdup(reason) : NULL;
        reason = f->reason;
    }
unschedulable:
    free(ckey);
    (void)reasons;
    cJSON *status = json_obj_ensure(obj, "status");
    list_insert_tail(&kl->unsched, &p->sched_link);
    char msg[256];
    snprintf(msg, sizeof(msg), "0/%d nodes are available: %d %s.", kl->n_nodes, kl->n_nodes,
             reason ? reason : "node(s) were not ready");
    set_cond(status, "PodScheduled", "False", "Unschedulable", msg);
    ks_ver *v = NULL;
    ks_store_update(k, o, obj, 0, &v, NULL);
    ver_unref(v);
}

static void sched_cb(uv_timer_t *t)
{
    ks *k = t->data;
    struct ks_kubelet *kl = KL(k);
    uint64_t start = uv_hrtime();
    int done = 0;
    while (!list_empty(&kl->pending)) {
        ks_pod *p = list_entry(kl->pending.next, ks_pod, sched_link);
        list_remove(&p->sched_link);
        schedule_one(k, p);
        /* bounded work per loop iteration so requests keep flowing */
        if (++done % 64 == 0 && uv_hrtime() - start > 20 * 1000 * 1000)
            break;
    }
    if (!list_empty(&kl->pending))
        sched_kick(k, 0);
}

/* ---- kubelet actions --------------------------------------------------- */

static void pod_start(ks *k, ks_obj *o)
{
    struct ks_kubelet *kl = KL(k);
    ks_pod *p = o->pod;
    cJSON *obj = ver_parse(o->cur);
    cJSON *status = json_obj_ensure(obj, "status");
    char now[32];
    rfc3339_now(now, 0);
    unsigned n = kl->ip_next++;
    char ip[32];
    snprintf(ip, sizeof(ip), "10.%u.%u.%u", 244 + (n >> 16) % 10, (n >> 8) & 255, (n & 255));
    json_set_str(status, "phase", "Running");
    if (p->node && p->node->ip[0]) {
        json_set_str(status, "hostIP", p->node->ip);
        cJSON *hips = cJSON_CreateArray(), *h = cJSON_CreateObject();
        json_set_str(h, "ip", p->node->ip);
        cJSON_AddItemToArray(hips, h);
        json_set(status, "hostIPs", hips);
    }
    json_set_str(status, "podIP", ip);
    cJSON *pips = cJSON_CreateArray(), *pi = cJSON_CreateObject();
    json_set_str(pi, "ip", ip);
    cJSON_AddItemToArray(pips, pi);
    json_set(status, "podIPs", pips);
    json_set_str(status, "startTime", now);
    set_cond(status, "PodReadyToStartContainers", "True", NULL, NULL);
    set_cond(status, "Initialized", "True", NULL, NULL);
    set_cond(status, "Ready", "False", "ContainersNotReady", "containers with unready status: [main]");
    set_cond(status, "ContainersReady", "False", "ContainersNotReady",
             "containers with unready status: [main]");
    set_cond(status, "PodScheduled", "True", NULL, NULL);
    cJSON *css = cJSON_CreateArray();
    const cJSON *cs = json_get(obj, "spec.containers");
    buf_t names;
    buf_init(&names, BUF_UNLIMITED);
    for (const cJSON *c = cs ? cs->child : NULL; c; c = c->next) {
        cJSON *st = cJSON_CreateObject();
        const char *name = json_get_str_or(c, "name", "");
        json_set_str(st, "name", name);
        cJSON *state = cJSON_CreateObject(), *running = cJSON_CreateObject();
        json_set_str(running, "startedAt", now);
        json_set(state, "running", running);
        json_set(st, "state", state);
        json_set(st, "lastState", cJSON_CreateObject());
        json_set_bool(st, "ready", 0);
        json_set_int(st, "restartCount", 0);
        json_set_str(st, "image", json_get_str_or(c, "image", ""));
        json_set_str(st, "imageID", json_get_str_or(c, "image", ""));
        uint8_t rnd[16];
        random_bytes(rnd, sizeof(rnd));
        char hex[33], cid[64];
        hex_encode(rnd, sizeof(rnd), hex);
        snprintf(cid, sizeof(cid), "containerd://%s", hex);
        json_set_str(st, "containerID", cid);
        json_set_bool(st, "started", 1);
        cJSON_AddItemToArray(css, st);
        if (buf_printf(&names, "%s%s", names.len ? " " : "", name) != 0)
            abort();
    }
    char msg[512];
    snprintf(msg, sizeof(msg), "containers with unready status: [%s]", buf_cstr(&names));
    set_cond(status, "Ready", "False", "ContainersNotReady", msg);
    set_cond(status, "ContainersReady", "False", "ContainersNotReady", msg);
    buf_free(&names);
    json_set(status, "containerStatuses", css);
    p->state = P_RUNNING;
    ks_ver *v = NULL;
    ks_store_update(k, o, obj, 0, &v, NULL);
    ver_unref(v);
    schedule_action(k, o, A_READY, k->cfg.pod_ready_delay_ms);
}

/* Ready (docs/internals/KUBE-API.md#pod-ready): containers ready and every readiness gate True. */
static void compute_ready(cJSON *obj, cJSON *status)
{
    const cJSON *gates = json_get(obj, "spec.readinessGates");
    cJSON *conds = (cJSON *)json_child(status, "conditions");
    for (const cJSON *g = gates ? gates->child : NULL; g; g = g->next) {
        const char *t = json_get_str_or(g, "conditionType", "");
        cJSON *c = find_cond(conds, t);
        char msg[512];
        if (c == NULL) {
            snprintf(msg, sizeof(msg), "corresponding condition of pod readiness gate \"%s\" does not exist.",
                     t);
            set_cond(status, "Ready", "False", "ReadinessGatesNotReady", msg);
            return;
        }
        const char *st = json_get_str_or(c, "status", "");
        if (strcmp(st, "True") != 0) {
            snprintf(msg, sizeof(msg), "the status of pod readiness gate \"%s\" is not \"True\", but %s", t,
                     st);
            set_cond(status, "Ready", "False", "ReadinessGatesNotReady", msg);
            return;
        }
    }
    set_cond(status, "Ready", "True", NULL, NULL);
}

static void pod_ready(ks *k, ks_obj *o)
{
    cJSON *obj = ver_parse(o->cur);
    cJSON *status = json_obj_ensure(obj, "status");
    cJSON *css = (cJSON *)json_child(status, "containerStatuses");
    for (cJSON *c = css ? css->child : NULL; c; c = c->next)
        json_set_bool(c, "ready", 1);
    set_cond(status, "ContainersReady", "True", NULL, NULL);
    compute_ready(obj, status);
    o->pod->state = P_READY;
    ks_ver *v = NULL;
    ks_store_update(k, o, obj, 0, &v, NULL);
    ver_unref(v);
}

static void pod_sync(ks *k, ks_obj *o)
{
    cJSON *obj = ver_parse(o->cur);
    compute_ready(obj, json_obj_ensure(obj, "status"));
    ks_ver *v = NULL;
    ks_store_update(k, o, obj, 0, &v, NULL);
    ver_unref(v);
}

static void pod_remove(ks *k, ks_obj *o)
{
    cJSON *obj = ver_parse(o->cur);
    if (!json_get_str(obj, "metadata.deletionTimestamp")) {
        cJSON_Delete(obj);
        return;
    }
    /* containers stopped: the kubelet's final delete with grace period 0 */
    json_set_int(json_obj_ensure(obj, "metadata"), "deletionGracePeriodSeconds", 0);
    ks_ver *v = NULL;
    ks_store_update(k, o, obj, 0, &v, NULL);
    ver_unref(v);
}

static void node_status(ks *k, ks_obj *o);

static void run_action(ks *k, action *a)
{
    ks_obj *o = a->res->removed ? NULL : map_get(&a->res->objs, a->key);
    if (o == NULL || strcmp(o->uid, a->uid) != 0)
        return;
    if (a->what == A_NODE_STATUS) {
        node_status(k, o);
        return;
    }
    if (o->pod == NULL)
        return;
    cJSON *obj = NULL;
    int deleting;
    switch (a->what) {
    case A_START:
        obj = ver_parse(o->cur);
        deleting = json_get_str(obj, "metadata.deletionTimestamp") != NULL;
        cJSON_Delete(obj);
        if (o->pod->state == P_BOUND && !deleting)
            pod_start(k, o);
        break;
    case A_READY:
        obj = ver_parse(o->cur);
        deleting = json_get_str(obj, "metadata.deletionTimestamp") != NULL;
        cJSON_Delete(obj);
        if (o->pod->state == P_RUNNING && !deleting)
            pod_ready(k, o);
        break;
    case A_SYNC:
        if (o->pod->state == P_READY)
            pod_sync(k, o);
        break;
    case A_REMOVE:
        pod_remove(k, o);
        break;
    case A_FORCE_DELETE: /* pod GC of a pod whose node is gone: grace 0 */
    case A_EVICT: {      /* taint manager: an ordinary (graceful) delete */
        int gone;
        ks_ver *v = api_obj_delete(k, o, NULL, a->what == A_EVICT ? -1 : 0, &gone);
        ver_unref(v);
        break;
    }
    default:
        break;
    }
}

static void act_timer_cb(uv_timer_t *t)
{
    ks *k = t->data;
    struct ks_kubelet *kl = KL(k);
    long long now = (long long)uv_now(k->loop);
    int budget = 4096;
    while (kl->n && kl->heap[0].due <= now && budget-- > 0) {
        action a = heap_pop(kl);
        run_action(k, &a);
        free(a.key);
    }
    arm_actions(kl);
}

void kubelet_schedule_removal(ks *k, ks_obj *pod, long long grace_s)
{
    if (KL(k) == NULL)
        return;
    schedule_action(k, pod, A_REMOVE, kubelet_grace_ms(k, grace_s));
}

unsigned kubelet_grace_ms(ks *k, long long grace_s)
{
    long long ms = grace_s * 1000;
    if (ms > (long long)k->cfg.max_grace_ms)
        ms = k->cfg.max_grace_ms;
    return ms < 0 ? 0 : (unsigned)ms;
}

int kubelet_set_phase(ks *k, ks_obj *o, const char *phase, const char *reason, int exit_code)
{
    cJSON *obj = ver_parse(o->cur);
    cJSON *status = json_obj_ensure(obj, "status");
    char now[32];
    rfc3339_now(now, 0);
    json_set_str(status, "phase", phase);
    int failed = strcmp(phase, "Failed") == 0;
    cJSON *css = (cJSON *)json_child(status, "containerStatuses");
    if (!cJSON_IsArray(css)) {
        css = cJSON_CreateArray();
        const cJSON *cs = json_get(obj, "spec.containers");
        for (const cJSON *c = cs ? cs->child : NULL; c; c = c->next) {
            cJSON *st = cJSON_CreateObject();
            json_set_str(st, "name", json_get_str_or(c, "name", ""));
            json_set_str(st, "image", json_get_str_or(c, "image", ""));
            json_set_int(st, "restartCount", 0);
            cJSON_AddItemToArray(css, st);
        }
        json_set(status, "containerStatuses", css);
    }
    for (cJSON *c = css->child; c; c = c->next) {
        cJSON *state = cJSON_CreateObject(), *term = cJSON_CreateObject();
        json_set_int(term, "exitCode", exit_code);
        json_set_str(term, "reason", reason ? reason : (failed ? "Error" : "Completed"));
        json_set_str(term, "startedAt", json_get_str_or(c, "state.running.startedAt", now));
        json_set_str(term, "finishedAt", now);
        json_set(state, "terminated", term);
        json_set(c, "state", state);
        json_set_bool(c, "ready", 0);
        json_set_bool(c, "started", 0);
    }
    const char *r = failed ? "PodFailed" : "PodCompleted";
    set_cond(status, "Ready", "False", r, NULL);
    set_cond(status, "ContainersReady", "False", r, NULL);
    if (o->pod) {
        o->pod->state = P_DONE;
        if (list_is_linked(&o->pod->sched_link))
            list_remove(&o->pod->sched_link);
        /* a terminated pod no longer holds node resources */
        pod_unbind(o->pod);
        cluster_changed(k);
    }
    ks_ver *v = NULL;
    ks_store_update(k, o, obj, 0, &v, NULL);
    ver_unref(v);
    return 0;
}

/* ---- node objects ------------------------------------------------------ */

static void fill_node_status(ks *k, cJSON *obj, int idx)
{
    char now[32];
    rfc3339_now(now, 0);
    cJSON *status = json_obj_ensure(obj, "status");
    const char *name = json_get_str_or(obj, "metadata.name", "");
    cJSON *cap = cJSON_CreateObject();
    json_set_str(cap, "cpu", "64");
    json_set_str(cap, "memory", "263921532Ki");
    json_set_str(cap, "ephemeral-storage", "1055762868Ki");
    json_set_str(cap, "hugepages-1Gi", "0");
    json_set_str(cap, "hugepages-2Mi", "0");
    json_set_str(cap, "pods", "110");
    if (k->cfg.node_gpus > 0) {
        char g[16];
        snprintf(g, sizeof(g), "%d", k->cfg.node_gpus);
        json_set_str(cap, "nvidia.com/gpu", g);
    }
    if (!json_child(status, "capacity"))
        json_set(status, "capacity", cJSON_Duplicate(cap, 1));
    if (!json_child(status, "allocatable"))
        json_set(status, "allocatable", cap);
    else
        cJSON_Delete(cap);
    static const char *const pressure[][3] = {
        {"MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"},
        {"DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"},
        {"PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"}};
    cJSON *conds = cJSON_CreateArray();
    for (int i = 0; i < 4; i++) {
        cJSON *c = cJSON_CreateObject();
        json_set_str(c, "type", i < 3 ? pressure[i][0] : "Ready");
        json_set_str(c, "status", i < 3 ? "False" : "True");
        json_set_str(c, "lastHeartbeatTime", now);
        json_set_str(c, "lastTransitionTime", now);
        json_set_str(c, "reason", i < 3 ? pressure[i][1] : "KubeletReady");
        json_set_str(c, "message", i < 3 ? pressure[i][2] : "kubelet is posting ready status");
        cJSON_AddItemToArray(conds, c);
    }
    json_set(status, "conditions", conds);
    char ip[32];
    snprintf(ip, sizeof(ip), "172.18.%d.%d", (idx >> 8) & 255, idx & 255);
    cJSON *addrs = cJSON_CreateArray(), *a1 = cJSON_CreateObject(), *a2 = cJSON_CreateObject();
    json_set_str(a1, "type", "InternalIP");
    json_set_str(a1, "address", ip);
    json_set_str(a2, "type", "Hostname");
    json_set_str(a2, "address", name);
    cJSON_AddItemToArray(addrs, a1);
    cJSON_AddItemToArray(addrs, a2);
    json_set(status, "addresses", addrs);
    cJSON *de = cJSON_CreateObject(), *ke = cJSON_CreateObject();
    json_set_int(ke, "Port", 10250);
    json_set(de, "kubeletEndpoint", ke);
    json_set(status, "daemonEndpoints", de);
    cJSON *ni = cJSON_CreateObject();
    char id[37];
    uuid_v4(id);
    json_set_str(ni, "machineID", id);
    json_set_str(ni, "systemUUID", id);
    json_set_str(ni, "bootID", id);
    json_set_str(ni, "kernelVersion", "6.1.0-kubesim");
    json_set_str(ni, "osImage", "Debian GNU/Linux 12 (bookworm)");
    json_set_str(ni, "containerRuntimeVersion", "containerd://1.7.18");
    json_set_str(ni, "kubeletVersion", "v1.31.0");
    json_set_str(ni, "kubeProxyVersion", "v1.31.0");
    json_set_str(ni, "operatingSystem", "linux");
    json_set_str(ni, "architecture", "amd64");
    json_set(status, "nodeInfo", ni);
}

static void node_status(ks *k, ks_obj *o)
{
    cJSON *obj = ver_parse(o->cur);
    fill_node_status(k, obj, KL(k)->node_seq++);
    ks_ver *v = NULL;
    ks_store_update(k, o, obj, 0, &v, NULL);
    ver_unref(v);
}

void kubelet_create_nodes(ks *k, int first, int count)
{
    struct ks_kubelet *kl = KL(k);
    for (int i = first; i < first + count; i++) {
        char name[32];
        snprintf(name, sizeof(name), "node-%05d", i);
        if (obj_find(kl->nodes_res, NULL, name))
            continue;
        cJSON *obj = cJSON_CreateObject();
        json_set_str(obj, "kind", "Node");
        json_set_str(obj, "apiVersion", "v1");
        cJSON *meta = json_obj_ensure(obj, "metadata");
        json_set_str(meta, "name", name);
        cJSON *labels = json_obj_ensure(meta, "labels");
        json_set_str(labels, "beta.kubernetes.io/arch", "amd64");
        json_set_str(labels, "beta.kubernetes.io/os", "linux");
        json_set_str(labels, "kubernetes.io/arch", "amd64");
        json_set_str(labels, "kubernetes.io/hostname", name);
        json_set_str(labels, "kubernetes.io/os", "linux");
        for (int j = 0; j < k->cfg.n_node_labels; j++) {
            const char *kv = k->cfg.node_labels[j];
            const char *eq = strchr(kv, '=');
            char *key = xstrndup(kv, eq ? (size_t)(eq - kv) : strlen(kv));
            json_set_str(labels, key, eq ? eq + 1 : "");
            free(key);
        }
        cJSON *spec = json_obj_ensure(obj, "spec");
        char cidr[32], pid[64];
        snprintf(cidr, sizeof(cidr), "10.244.%d.0/24", i % 256);
        json_set_str(spec, "podCIDR", cidr);
        cJSON *cidrs = cJSON_CreateArray();
        cJSON_AddItemToArray(cidrs, cJSON_CreateString(cidr));
        json_set(spec, "podCIDRs", cidrs);
        snprintf(pid, sizeof(pid), "kubesim://%s", name);
        json_set_str(spec, "providerID", pid);
        if (k->cfg.n_node_taints) {
            cJSON *taints = cJSON_CreateArray();
            for (int j = 0; j < k->cfg.n_node_taints; j++) {
                /* k=v:Effect or k:Effect */
                const char *s = k->cfg.node_taints[j];
                const char *colon = strrchr(s, ':');
                const char *eq = strchr(s, '=');
                cJSON *t = cJSON_CreateObject();
                size_t klen = eq && (!colon || eq < colon) ? (size_t)(eq - s)
                              : colon                      ? (size_t)(colon - s)
                                                           : strlen(s);
                char *key = xstrndup(s, klen);
                json_set_str(t, "key", key);
                free(key);
                if (eq && (!colon || eq < colon)) {
                    char *val = xstrndup(eq + 1, colon ? (size_t)(colon - eq - 1) : strlen(eq + 1));
                    json_set_str(t, "value", val);
                    free(val);
                }
                json_set_str(t, "effect", colon ? colon + 1 : "NoSchedule");
                cJSON_AddItemToArray(taints, t);
            }
            json_set(spec, "taints", taints);
        }
        fill_node_status(k, obj, i);
        kl->node_seq = i + 1 > kl->node_seq ? i + 1 : kl->node_seq;
        api_obj_create(k, kl->nodes_res, obj);
    }
}

/* ---- lifecycle --------------------------------------------------------- */

static void kl_closed(uv_handle_t *h)
{
    ks__handle_closed(h->data);
}

int kubelet_init(ks *k)
{
    struct ks_kubelet *kl = xcalloc(1, sizeof(*kl));
    kl->k = k;
    list_init(&kl->pending);
    list_init(&kl->unsched);
    uv_timer_init(k->loop, &kl->sched_timer);
    uv_timer_init(k->loop, &kl->act_timer);
    uv_timer_init(k->loop, &kl->retry_timer);
    kl->sched_timer.data = kl->act_timer.data = kl->retry_timer.data = k;
    k->pending_closes += 3;
    map_init_type(&kl->fails, &fail_type);
    kl->pods_res = res_find(k, "", "pods");
    kl->nodes_res = res_find(k, "", "nodes");
    k->kl = kl;
    return 0;
}

void kubelet_close(ks *k)
{
    struct ks_kubelet *kl = KL(k);
    uv_timer_stop(&kl->sched_timer);
    uv_timer_stop(&kl->act_timer);
    uv_timer_stop(&kl->retry_timer);
    uv_close((uv_handle_t *)&kl->sched_timer, kl_closed);
    uv_close((uv_handle_t *)&kl->act_timer, kl_closed);
    uv_close((uv_handle_t *)&kl->retry_timer, kl_closed);
}

void kubelet_free(ks *k)
{
    struct ks_kubelet *kl = KL(k);
    if (kl == NULL)
        return;
    for (size_t i = 0; i < kl->n; i++)
        free(kl->heap[i].key);
    free(kl->heap);
    fails_clear(kl);
    map_free(&kl->fails);
    free(kl->nodes);
    free(kl);
    k->kl = NULL;
}
