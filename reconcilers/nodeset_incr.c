#include "reconcilers/nodeset_incr.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/mem.h"

struct nsi_ent {
    nsi_pod f;
    char *ref;
    char uid[]; /* the map key */
};

static void ent_free(void *v)
{
    struct nsi_ent *e = v;
    free(e->ref);
    free(e);
}

static const map_type ent_type = {.val_free = ent_free};

void nsi_init(nsi_state *s)
{
    memset(s, 0, sizeof(*s));
    map_init_type(&s->pods, &ent_type);
    map_init(&s->ended); /* borrows the entries of pods */
}

void nsi_clear(nsi_state *s)
{
    map_free(&s->pods);
    map_free(&s->ended);
    free(s->ord_use);
    nsi_init(s);
}

void nsi_free(nsi_state *s)
{
    nsi_clear(s);
    map_free(&s->pods);
    map_free(&s->ended);
}

nsi_pod nsi_pod_of(const nsb_pod *p, int mode_ok, const char *update_rev, const char *current_rev,
                   const char *nss)
{
    nsi_pod f;
    memset(&f, 0, sizeof(f));
    f.ordinal = p->ordinal;
    f.phase = p->phase;
    f.ready = nsb_pod_running_ready(p) != 0;
    f.terminating = p->terminating;
    f.mode_ok = mode_ok != 0;
    f.updated = nsb_revision_same(p->revision, update_rev, nss) != 0;
    f.current = nsb_revision_same(p->revision, current_rev, nss) != 0;
    return f;
}

static int ended(const nsi_pod *f)
{
    return f->mode_ok && !f->terminating && (f->phase == NSB_PHASE_FAILED || f->phase == NSB_PHASE_SUCCEEDED);
}

/* Add (sign 1) or remove (sign -1) one pod's share of the aggregates. */
static void account(nsi_state *s, const nsi_pod *f, int sign)
{
    int created = f->phase != NSB_PHASE_NONE;
    s->created += sign * created;
    s->ready += sign * (int)f->ready;
    if (created && !f->terminating) {
        s->updated += sign * (int)f->updated;
        s->current += sign * (int)f->current;
    }
    if (f->mode_ok) {
        if (f->terminating)
            s->coming_back += sign;
        else
            s->active += sign;
    } else if (!f->terminating) {
        s->other_mode += sign;
    }
    if (!f->terminating && !f->updated)
        s->old += sign;
    s->slurm_idle += sign * (int)((f->slurm & NSI_SLURM_IDLE) != 0);
    s->slurm_allocated += sign * (int)((f->slurm & NSI_SLURM_ALLOCATED) != 0);
    s->slurm_down += sign * (int)((f->slurm & NSI_SLURM_DOWN) != 0);
    s->slurm_drain += sign * (int)((f->slurm & NSI_SLURM_DRAIN) != 0);
    if (f->ordinal >= NSB_REPLICAS_MAX) {
        s->ord_high += sign;
    } else if (f->ordinal >= 0) {
        size_t o = (size_t)f->ordinal;
        if (o >= s->ord_cap) {
            size_t cap = s->ord_cap ? s->ord_cap : 64;
            while (cap <= o)
                cap *= 2;
            s->ord_use = xrealloc(s->ord_use, cap * sizeof(*s->ord_use));
            memset(s->ord_use + s->ord_cap, 0, (cap - s->ord_cap) * sizeof(*s->ord_use));
            s->ord_cap = cap;
        }
        s->ord_use[o] = (uint32_t)((int64_t)s->ord_use[o] + sign);
    }
}

void nsi_set(nsi_state *s, const char *uid, const char *ref, const nsi_pod *f)
{
    struct nsi_ent *e = map_get(&s->pods, uid);
    if (e) {
        account(s, &e->f, -1);
        if (ended(&e->f))
            map_del(&s->ended, e->uid);
        if (f == NULL) {
            map_drop(&s->pods, e->uid);
            return;
        }
    } else {
        if (f == NULL)
            return;
        size_t n = strlen(uid) + 1;
        e = xmalloc(sizeof(*e) + n);
        memcpy(e->uid, uid, n);
        e->ref = NULL;
        map_put(&s->pods, e->uid, e);
    }
    if (e->ref == NULL || strcmp(e->ref, ref ? ref : "") != 0) {
        free(e->ref);
        e->ref = xstrdup(ref ? ref : "");
    }
    e->f = *f;
    account(s, &e->f, 1);
    if (ended(&e->f))
        map_put(&s->ended, e->uid, e);
}

const nsi_pod *nsi_get(const nsi_state *s, const char *uid)
{
    const struct nsi_ent *e = map_get(&s->pods, uid);
    return e ? &e->f : NULL;
}

void nsi_rebuild(nsi_state *s, const char *const *uids, const char *const *refs, const nsi_pod *pods,
                 size_t n)
{
    nsi_clear(s);
    for (size_t i = 0; i < n; i++)
        nsi_set(s, uids[i], refs ? refs[i] : NULL, &pods[i]);
}

static int same_pod(const nsi_pod *a, const nsi_pod *b)
{
    return a->ordinal == b->ordinal && a->phase == b->phase && a->ready == b->ready &&
           a->terminating == b->terminating && a->mode_ok == b->mode_ok && a->updated == b->updated &&
           a->current == b->current && a->slurm == b->slurm;
}

#define DIFF(field)                                                                                          \
    do {                                                                                                     \
        if (a->field != b->field) {                                                                          \
            snprintf(why, why_len, #field ": %ld != %ld", (long)a->field, (long)b->field);                   \
            return 0;                                                                                        \
        }                                                                                                    \
    } while (0)

int nsi_equal(const nsi_state *a, const nsi_state *b, char *why, size_t why_len)
{
    DIFF(created);
    DIFF(ready);
    DIFF(updated);
    DIFF(current);
    DIFF(active);
    DIFF(coming_back);
    DIFF(other_mode);
    DIFF(old);
    DIFF(ord_high);
    DIFF(slurm_idle);
    DIFF(slurm_allocated);
    DIFF(slurm_down);
    DIFF(slurm_drain);
    DIFF(pods.count);
    DIFF(ended.count);
    size_t it = 0;
    const char *k;
    void *v;
    while (map_next(&a->pods, &it, &k, &v)) {
        const struct nsi_ent *x = v, *y = map_get(&b->pods, k);
        if (y == NULL || !same_pod(&x->f, &y->f) || strcmp(x->ref, y->ref) != 0) {
            snprintf(why, why_len, "pod %s: %s", k, y ? "facts differ" : "missing");
            return 0;
        }
    }
    it = 0;
    while (map_next(&a->ended, &it, &k, &v))
        if (map_get(&b->ended, k) == NULL) {
            snprintf(why, why_len, "ended pod %s missing", k);
            return 0;
        }
    size_t cap = a->ord_cap > b->ord_cap ? a->ord_cap : b->ord_cap;
    for (size_t o = 0; o < cap; o++) {
        uint32_t x = o < a->ord_cap ? a->ord_use[o] : 0, y = o < b->ord_cap ? b->ord_use[o] : 0;
        if (x != y) {
            snprintf(why, why_len, "ordinal %zu: %u pods != %u", o, x, y);
            return 0;
        }
    }
    return 1;
}

void nsi_counts(const nsi_state *s, int32_t desired, nsb_counts *out)
{
    memset(out, 0, sizeof(*out));
    out->replicas = s->created;
    out->ready = s->ready;
    out->available = s->ready;
    out->updated = s->updated;
    out->current = s->current;
    out->desired = desired;
    out->unavailable = out->replicas > out->available ? out->replicas - out->available : 0;
}

nsi_plan_t nsi_plan(const nsi_state *s, int replicas, int rolling)
{
    nsi_plan_t pl = {NSI_FULL, 0};
    /* A full pass condemns pods of another mode, picks scale-in victims and
     * rolling-update victims: orders over every pod. */
    if (s->other_mode > 0 || s->active > replicas || (rolling && s->old > 0))
        return pl;
    int diff = s->active - replicas;
    if (diff < 0 && diff + s->coming_back >= 0) {
        pl.action = NSI_WAIT;
    } else if (diff < 0) {
        pl.action = NSI_CREATE;
        pl.want = -diff - s->coming_back;
    } else if (s->ended.count > 0) {
        pl.action = NSI_REPLACE;
    } else {
        pl.action = NSI_NONE;
    }
    return pl;
}

size_t nsi_free_ordinals(const nsi_state *s, int want, int *out)
{
    size_t k = 0;
    for (int o = 0; (int)k < want && o < NSB_REPLICAS_MAX; o++)
        if ((size_t)o >= s->ord_cap || s->ord_use[o] == 0)
            out[k++] = o;
    return k;
}

const char *nsi_ended_next(const nsi_state *s, size_t *it, const char **ref)
{
    const char *k;
    void *v;
    if (!map_next(&s->ended, it, &k, &v))
        return NULL;
    if (ref)
        *ref = ((const struct nsi_ent *)v)->ref;
    return k;
}
