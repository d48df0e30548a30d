/* Unit and property tests for reconcilers/nodeset_incr: random event
 * sequences (pods added, changed, removed) update one state incrementally;
 * after every event it must equal the state rebuilt from the whole pod list
 * (the full pass), its counters must equal nsb_count over that list, and its
 * plan and free ordinals must equal what scale_statefulset and
 * rolling_update derive from the list (re-derived here the way they do). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "reconcilers/nodeset_incr.h"

#define NSS "gpu"
#define UPDATE "h1"
#define CURRENT "h2"

/* The world: the pods of one NodeSet, as a full pass would collect them. */
typedef struct world {
    char uid[256][16];
    char ref[256][24];
    nsb_pod pod[256];
    int mode_ok[256];
    unsigned slurm[256]; /* NSI_SLURM_* of the pod's Slurm node */
    size_t n;
    unsigned next_uid;
} world;

static uint64_t rng_state;

static uint32_t rnd(uint32_t n)
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng_state >> 33) % n;
}

static const char *revs[] = {UPDATE, CURRENT, "h3", NULL};

static void random_pod(nsb_pod *p, int *mode_ok)
{
    memset(p, 0, sizeof(*p));
    p->ordinal = rnd(8) == 0 ? -1 : (int)rnd(24);
    p->phase = (enum nsb_phase)rnd(NSB_PHASE_UNKNOWN + 1);
    p->ready = rnd(2);
    p->terminating = rnd(5) == 0;
    p->revision = revs[rnd(6) < 4 ? 0 : rnd(4)];
    *mode_ok = rnd(10) != 0;
}

/* One random change to a pod, as a watch event would bring. */
static void mutate(nsb_pod *p, int *mode_ok)
{
    switch (rnd(6)) {
    case 0:
        p->phase = (enum nsb_phase)rnd(NSB_PHASE_UNKNOWN + 1);
        break;
    case 1:
        p->ready = !p->ready;
        break;
    case 2:
        p->terminating = 1;
        break;
    case 3:
        p->revision = revs[rnd(4)];
        break;
    case 4:
        *mode_ok = !*mode_ok;
        break;
    default:
        random_pod(p, mode_ok);
        break;
    }
}

static nsi_pod facts(const world *w, size_t i)
{
    nsi_pod f = nsi_pod_of(&w->pod[i], w->mode_ok[i], UPDATE, CURRENT, NSS);
    f.slurm = w->slurm[i] & 15u;
    return f;
}

/* A Slurm node as the node cache may show it: unlisted, or one base state
 * (idle, allocated, down) with or without the drain flag. */
static unsigned random_slurm(void)
{
    static const unsigned base[] = {0, NSI_SLURM_IDLE, NSI_SLURM_ALLOCATED, NSI_SLURM_DOWN};
    unsigned b = base[rnd(4)];
    return b && rnd(3) == 0 ? b | NSI_SLURM_DRAIN : b;
}

/* scale_statefulset then rolling_update, re-derived from the pod list. */
static nsi_plan_t reference_plan(const world *w, int replicas, int rolling, size_t *n_ended)
{
    int active = 0, coming = 0, other = 0, old = 0;
    *n_ended = 0;
    for (size_t i = 0; i < w->n; i++) {
        const nsb_pod *p = &w->pod[i];
        if (!w->mode_ok[i]) {
            other += !p->terminating;
            continue;
        }
        if (p->terminating) {
            coming++;
            continue;
        }
        active++;
        if (p->phase == NSB_PHASE_FAILED || p->phase == NSB_PHASE_SUCCEEDED)
            (*n_ended)++;
    }
    for (size_t i = 0; i < w->n; i++)
        old += !w->pod[i].terminating && !nsb_revision_same(w->pod[i].revision, UPDATE, NSS);
    nsi_plan_t pl = {NSI_FULL, 0};
    if (other > 0 || active > replicas || (rolling && old > 0))
        return pl;
    int diff = active - replicas;
    if (diff < 0 && diff + coming >= 0)
        pl.action = NSI_WAIT;
    else if (diff < 0)
        pl = (nsi_plan_t){NSI_CREATE, -diff - coming};
    else
        pl.action = *n_ended ? NSI_REPLACE : NSI_NONE;
    return pl;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* The lowest free ordinals the way scale_statefulset finds them. */
static int reference_free(const world *w, int want, int *out)
{
    int used[256];
    size_t n_used = 0, u = 0;
    int made = 0;
    for (size_t i = 0; i < w->n; i++)
        if (w->pod[i].ordinal >= 0)
            used[n_used++] = w->pod[i].ordinal;
    qsort(used, n_used, sizeof(int), cmp_int);
    for (int ord = 0; made < want; ord++) {
        while (u < n_used && used[u] < ord)
            u++;
        if (u < n_used && used[u] == ord)
            continue;
        out[made++] = ord;
    }
    return made;
}

static void check(const world *w, const nsi_state *incr, unsigned step)
{
    nsi_state full;
    nsi_pod f[256];
    const char *uids[256], *refs[256];
    char why[256];
    for (size_t i = 0; i < w->n; i++) {
        f[i] = facts(w, i);
        uids[i] = w->uid[i];
        refs[i] = w->ref[i];
    }
    nsi_init(&full);
    nsi_rebuild(&full, uids, refs, f, w->n);
    if (!nsi_equal(incr, &full, why, sizeof(why)))
        fail_msg("step %u: incremental state != full pass: %s", step, why);
    nsi_free(&full);

    int32_t si = 0, sa = 0, sd = 0, sr = 0;
    for (size_t i = 0; i < w->n; i++) {
        si += (w->slurm[i] & NSI_SLURM_IDLE) != 0;
        sa += (w->slurm[i] & NSI_SLURM_ALLOCATED) != 0;
        sd += (w->slurm[i] & NSI_SLURM_DOWN) != 0;
        sr += (w->slurm[i] & NSI_SLURM_DRAIN) != 0;
    }
    if (incr->slurm_idle != si || incr->slurm_allocated != sa || incr->slurm_down != sd ||
        incr->slurm_drain != sr)
        fail_msg("step %u: Slurm counts %d/%d/%d/%d, full pass %d/%d/%d/%d", step, incr->slurm_idle,
                 incr->slurm_allocated, incr->slurm_down, incr->slurm_drain, si, sa, sd, sr);

    nsb_counts want, got;
    int32_t replicas = (int32_t)rnd(20);
    nsb_count(w->pod, w->n, UPDATE, CURRENT, NSS, NSB_STATEFULSET, replicas, 0, 1000, &want);
    nsi_counts(incr, replicas, &got);
    if (memcmp(&want, &got, sizeof(want)) != 0)
        fail_msg("step %u: counts differ from nsb_count (ready %d/%d, updated %d/%d, current %d/%d)", step,
                 got.ready, want.ready, got.updated, want.updated, got.current, want.current);

    for (int rolling = 0; rolling < 2; rolling++) {
        size_t n_ended;
        nsi_plan_t rp = reference_plan(w, replicas, rolling, &n_ended);
        nsi_plan_t ip = nsi_plan(incr, replicas, rolling);
        if (rp.action != ip.action || rp.want != ip.want)
            fail_msg("step %u: plan %d/%d, full pass %d/%d", step, ip.action, ip.want, rp.action, rp.want);
        if (ip.action == NSI_REPLACE) {
            /* The ended set names exactly the pods a full pass deletes. */
            size_t it = 0, k = 0;
            const char *uid, *ref;
            while ((uid = nsi_ended_next(incr, &it, &ref))) {
                size_t j = 0;
                while (j < w->n && strcmp(w->uid[j], uid) != 0)
                    j++;
                assert_true(j < w->n);
                assert_string_equal(ref, w->ref[j]);
                k++;
            }
            assert_int_equal(k, n_ended);
        }
        if (ip.action == NSI_CREATE) {
            int a[64], b[64];
            int want_n = ip.want < 64 ? ip.want : 64;
            size_t na = nsi_free_ordinals(incr, want_n, a);
            int nb = reference_free(w, want_n, b);
            assert_int_equal((int)na, nb);
            assert_memory_equal(a, b, (size_t)nb * sizeof(int));
        }
    }
}

static void run_sequence(uint64_t seed, unsigned steps)
{
    world *w = calloc(1, sizeof(*w));
    nsi_state s;
    nsi_init(&s);
    rng_state = seed;
    for (unsigned step = 0; step < steps; step++) {
        uint32_t op = rnd(10);
        if ((op < 4 || w->n == 0) && w->n < 256) {
            size_t i = w->n++;
            snprintf(w->uid[i], sizeof(w->uid[i]), "u%u", w->next_uid++);
            random_pod(&w->pod[i], &w->mode_ok[i]);
            w->slurm[i] = random_slurm();
            snprintf(w->ref[i], sizeof(w->ref[i]), "default/" NSS "-%d", w->pod[i].ordinal);
            nsi_pod f = facts(w, i);
            nsi_set(&s, w->uid[i], w->ref[i], &f);
        } else if (op < 8) {
            size_t i = rnd((uint32_t)w->n);
            if (rnd(4) == 0)
                w->slurm[i] = random_slurm(); /* its Slurm node changed */
            else
                mutate(&w->pod[i], &w->mode_ok[i]);
            nsi_pod f = facts(w, i);
            nsi_set(&s, w->uid[i], w->ref[i], &f);
        } else if (op < 9) {
            size_t i = rnd((uint32_t)w->n);
            nsi_set(&s, w->uid[i], NULL, NULL);
            w->n--;
            memcpy(w->uid[i], w->uid[w->n], sizeof(w->uid[i]));
            memcpy(w->ref[i], w->ref[w->n], sizeof(w->ref[i]));
            w->pod[i] = w->pod[w->n];
            w->mode_ok[i] = w->mode_ok[w->n];
            w->slurm[i] = w->slurm[w->n];
        } else {
            /* An event that changes nothing (a Node event for its pod). */
            size_t i = rnd((uint32_t)w->n);
            nsi_pod f = facts(w, i);
            nsi_set(&s, w->uid[i], w->ref[i], &f);
        }
        check(w, &s, step);
    }
    /* Forgetting a pod never seen is a no-op. */
    nsi_set(&s, "never-seen", NULL, NULL);
    check(w, &s, steps);
    nsi_free(&s);
    free(w);
}

static void test_random_sequences(void **state)
{
    for (uint64_t seed = 1; seed <= 200; seed++)
        run_sequence(seed, 400);
}

static void test_plan_basics(void **state)
{
    nsi_state s;
    nsi_init(&s);
    nsb_pod p;
    memset(&p, 0, sizeof(p));
    p.phase = NSB_PHASE_RUNNING;
    p.ready = 1;
    p.revision = UPDATE;
    for (int i = 0; i < 3; i++) {
        char uid[8], ref[16];
        snprintf(uid, sizeof(uid), "u%d", i);
        snprintf(ref, sizeof(ref), "d/gpu-%d", i);
        p.ordinal = i == 2 ? 5 : i;
        nsi_pod f = nsi_pod_of(&p, 1, UPDATE, CURRENT, NSS);
        nsi_set(&s, uid, ref, &f);
    }
    assert_int_equal(nsi_plan(&s, 3, 1).action, NSI_NONE);
    assert_int_equal(nsi_plan(&s, 2, 1).action, NSI_FULL); /* scale-in: victims */
    nsi_plan_t pl = nsi_plan(&s, 6, 1);
    assert_int_equal(pl.action, NSI_CREATE);
    assert_int_equal(pl.want, 3);
    int ords[3];
    assert_int_equal(nsi_free_ordinals(&s, 3, ords), 3);
    assert_int_equal(ords[0], 2);
    assert_int_equal(ords[1], 3);
    assert_int_equal(ords[2], 4);
    /* A pod fails: replaced at the right size. */
    p.ordinal = 1;
    p.phase = NSB_PHASE_FAILED;
    nsi_pod f = nsi_pod_of(&p, 1, UPDATE, CURRENT, NSS);
    nsi_set(&s, "u1", "d/gpu-1", &f);
    assert_int_equal(nsi_plan(&s, 3, 1).action, NSI_REPLACE);
    size_t it = 0;
    const char *ref;
    assert_string_equal(nsi_ended_next(&s, &it, &ref), "u1");
    assert_string_equal(ref, "d/gpu-1");
    assert_null(nsi_ended_next(&s, &it, &ref));
    /* Deleted: terminating, its ordinal comes back. */
    p.terminating = 1;
    f = nsi_pod_of(&p, 1, UPDATE, CURRENT, NSS);
    nsi_set(&s, "u1", "d/gpu-1", &f);
    assert_int_equal(nsi_plan(&s, 3, 1).action, NSI_WAIT);
    nsi_set(&s, "u1", NULL, NULL);
    pl = nsi_plan(&s, 3, 1);
    assert_int_equal(pl.action, NSI_CREATE);
    assert_int_equal(pl.want, 1);
    assert_int_equal(nsi_free_ordinals(&s, 1, ords), 1);
    assert_int_equal(ords[0], 1);
    /* An old revision: a rolling update needs every pod. */
    p.terminating = 0;
    p.phase = NSB_PHASE_RUNNING;
    p.revision = "h9";
    f = nsi_pod_of(&p, 1, UPDATE, CURRENT, NSS);
    nsi_set(&s, "u1", "d/gpu-1", &f);
    assert_int_equal(nsi_plan(&s, 3, 1).action, NSI_FULL);
    assert_int_equal(nsi_plan(&s, 3, 0).action, NSI_NONE); /* OnDelete */
    /* An ordinal beyond the maximum is counted, not indexed. */
    p.ordinal = NSB_REPLICAS_MAX + 7;
    f = nsi_pod_of(&p, 1, UPDATE, CURRENT, NSS);
    nsi_set(&s, "u9", "d/gpu-x", &f);
    assert_int_equal(s.ord_high, 1);
    assert_true(s.ord_cap <= 64);
    nsi_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plan_basics),
        cmocka_unit_test(test_random_sequences),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
