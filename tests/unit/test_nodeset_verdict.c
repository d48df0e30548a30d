/* Unit tests for reconcilers/nodeset_verdict: the drain-before-delete rule.
 * A table of verdicts, one row per case the rule names; then every
 * combination of the facts, walked as condemn() walks them (asking for the
 * two facts that cost a read when the rule wants them), checked against the
 * safety rule stated independently of the code: a delete needs the opt-out,
 * or no Slurm node at all, or a fresh proof from Slurm that no job of any
 * state holds the node. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "reconcilers/nodeset_verdict.h"

/* A row starts from a named case (DRAINED, ABSENT_GONE) and overrides the
 * fields it is about: the base case stays readable in every row. */
#if defined(__clang__)
#pragma clang diagnostic ignored "-Winitializer-overrides"
#elif defined(__GNUC__)
#pragma GCC diagnostic ignored "-Woverride-init"
#endif

#define NEVER UINT64_MAX
/* A ready client and a named pod: the rows below add the node's facts. */
#define READY .named = 1, .client = NSV_CLIENT_READY
#define ABSENT_GONE READY, .found = NSV_ABSENT, .gone_asked = 1, .gone = 1, .name_known = 1
#define DRAINED                                                                                              \
    READY, .found = NSV_PRESENT, .drain = 1, .our_reason = 1, .drain_proved = 1, .drained = 1,               \
           .unknown_ago_ms = NEVER, .fresh = 1
#define JOBS_FREE .jobs_asked = 1, .jobs_free = 1, .job_holds = 0

struct row {
    const char *what;
    nsv_facts f;
    nsv_step step;
    nsv_cause cause;
    unsigned acts;
    uint64_t after_ms;
};

static const struct row rows[] = {
    {"opted out: delete, said",
     {.no_drain = 1, .client = NSV_CLIENT_UNREADY},
     NSV_DELETE,
     NSV_CAUSE_NO_DRAIN,
     0,
     0},
    {"never bound: no Slurm node", {.client = NSV_CLIENT_UNREADY}, NSV_DELETE, NSV_CAUSE_NEVER_BOUND, 0, 0},
    {"no RestApi", {.named = 1, .client = NSV_CLIENT_NO_RESTAPI}, NSV_WAIT, NSV_CAUSE_NO_RESTAPI, 0, 0},
    {"table contradicts itself",
     {.named = 1, .client = NSV_CLIENT_SUSPECT, .found = NSV_PRESENT, .drained = 1},
     NSV_WAIT,
     NSV_CAUSE_SUSPECT,
     0,
     0},
    {"Slurm unreadable", {.named = 1, .client = NSV_CLIENT_UNREADY}, NSV_WAIT, NSV_CAUSE_UNREADABLE, 0, 0},
    {"not known to the cache yet", {READY, .found = NSV_UNKNOWN}, NSV_WAIT, NSV_CAUSE_NONE, 0, 0},
    /* Absent from the table */
    {"absent: ask Slurm by name first", {READY, .found = NSV_ABSENT}, NSV_ASK_GONE, NSV_CAUSE_NONE, 0, 0},
    {"absent, Slurm still has it by name",
     {READY, .found = NSV_ABSENT, .gone_asked = 1},
     NSV_WAIT,
     NSV_CAUSE_NONE,
     0,
     0},
    {"no such node, but only a derived name",
     {ABSENT_GONE, .name_known = 0},
     NSV_WAIT,
     NSV_CAUSE_NAME_UNPROVED,
     0,
     0},
    {"lost while busy", {ABSENT_GONE, .lost = 2, .lost_ago_ms = 999999}, NSV_WAIT, NSV_CAUSE_NODE_LOST, 0, 0},
    {"lost while jobless, 5 s ago: the grace",
     {ABSENT_GONE, .lost = 1, .lost_ago_ms = 5000},
     NSV_WAIT,
     NSV_CAUSE_NONE,
     0,
     NSV_REGISTER_GRACE_MS - 5000 + 100},
    {"gone: the job list next", {ABSENT_GONE}, NSV_ASK_JOBS, NSV_CAUSE_NONE, 0, 0},
    {"lost while jobless long ago: the job list next",
     {ABSENT_GONE, .lost = 1, .lost_ago_ms = 60000},
     NSV_ASK_JOBS,
     NSV_CAUSE_NONE,
     0,
     0},
    {"gone, a job still holds the name",
     {ABSENT_GONE, .jobs_asked = 1, .job_holds = 1},
     NSV_WAIT,
     NSV_CAUSE_NONE,
     0,
     0},
    {"gone, job list unreadable",
     {ABSENT_GONE, .jobs_asked = 1, .job_holds = -1, .jobs_failed = 1},
     NSV_WAIT,
     NSV_CAUSE_JOBS_UNREADABLE,
     0,
     0},
    {"gone, job list not current yet",
     {ABSENT_GONE, .jobs_asked = 1, .job_holds = -1},
     NSV_WAIT,
     NSV_CAUSE_NONE,
     0,
     0},
    {"gone and no job: delete", {ABSENT_GONE, JOBS_FREE}, NSV_DELETE, NSV_CAUSE_GONE, 0, 0},
    /* In the table */
    {"a write not read back", {DRAINED, .settling = 1, JOBS_FREE}, NSV_WAIT, NSV_CAUSE_NONE, 0, 0},
    {"a reason time from the future",
     {DRAINED, .contradicted = 1, JOBS_FREE},
     NSV_WAIT,
     NSV_CAUSE_CONTRADICTED,
     0,
     0},
    {"idle, not drained: drain it",
     {READY, .found = NSV_PRESENT, .fresh = 1, .unknown_ago_ms = NEVER},
     NSV_WAIT,
     NSV_CAUSE_NONE,
     NSV_DRAIN | NSV_TRACK,
     0},
    {"a person's drain, jobs running: left as it is",
     {READY, .found = NSV_PRESENT, .drain = 1, .unknown_ago_ms = NEVER},
     NSV_WAIT,
     NSV_CAUSE_NONE,
     NSV_TRACK,
     0},
    {"our reason, unproved, none sent: drain again",
     {DRAINED, .drain_proved = 0, JOBS_FREE},
     NSV_WAIT,
     NSV_CAUSE_NONE,
     NSV_DRAIN | NSV_TRACK,
     0},
    {"our reason, unproved, in flight",
     {DRAINED, .drain_proved = 0, .drain_state = 1},
     NSV_WAIT,
     NSV_CAUSE_NONE,
     NSV_TRACK,
     0},
    {"our reason, unproved, accepted 3 s ago",
     {DRAINED, .drain_proved = 0, .drain_state = 2, .drain_ago_ms = 3000},
     NSV_WAIT,
     NSV_CAUSE_NONE,
     NSV_TRACK,
     0},
    {"our reason, unproved, accepted 12 s ago: again",
     {DRAINED, .drain_proved = 0, .drain_state = 2, .drain_ago_ms = 12000},
     NSV_WAIT,
     NSV_CAUSE_NONE,
     NSV_DRAIN | NSV_TRACK,
     0},
    {"a person's drain, drained: ours to delete after the proof",
     {DRAINED, .our_reason = 0, .drain_proved = 0},
     NSV_ASK_JOBS,
     NSV_CAUSE_NONE,
     0,
     0},
    {"drained, UNKNOWN 2 s ago: the grace",
     {DRAINED, .unknown_ago_ms = 2000},
     NSV_WAIT,
     NSV_CAUSE_NONE,
     0,
     NSV_REGISTER_GRACE_MS - 2000 + 100},
    {"drained, the reading too old", {DRAINED, .fresh = 0}, NSV_WAIT, NSV_CAUSE_NONE, NSV_READ_SOON, 0},
    {"drained: the job list next", {DRAINED}, NSV_ASK_JOBS, NSV_CAUSE_NONE, 0, 0},
    {"drained, only the read after the drain missing",
     {DRAINED, .jobs_asked = 1, .job_holds = 0},
     NSV_WAIT_READ,
     NSV_CAUSE_NONE,
     0,
     0},
    {"drained, a suspended job holds it",
     {DRAINED, .jobs_asked = 1, .job_holds = 1},
     NSV_WAIT,
     NSV_CAUSE_NONE,
     NSV_TRACK,
     0},
    {"drained, job list unreadable",
     {DRAINED, .jobs_asked = 1, .job_holds = -1, .jobs_failed = 1},
     NSV_WAIT,
     NSV_CAUSE_JOBS_UNREADABLE,
     NSV_TRACK,
     0},
    {"drained, fresh, no job: delete", {DRAINED, JOBS_FREE}, NSV_DELETE, NSV_CAUSE_DRAINED, NSV_UNTRACK, 0},
};

static void test_table(void **state)
{
    (void)state;
    int bad = 0;
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        const struct row *r = &rows[i];
        nsv_verdict v = nsv_judge(&r->f);
        if (v.step != r->step || v.cause != r->cause || v.acts != r->acts || v.after_ms != r->after_ms) {
            print_error("%s: got %s cause %d acts %#x after %llu; want %s cause %d acts %#x after %llu\n",
                        r->what, nsv_step_name(v.step), (int)v.cause, v.acts, (unsigned long long)v.after_ms,
                        nsv_step_name(r->step), (int)r->cause, r->acts, (unsigned long long)r->after_ms);
            bad++;
        }
    }
    assert_int_equal(bad, 0);
}

/* Every keep cause names the condition a person sees; the others none. */
static void test_cause_reasons(void **state)
{
    (void)state;
    for (int c = 0; c < NSV_N_CAUSES; c++) {
        int keeps = c == NSV_CAUSE_NO_RESTAPI || c == NSV_CAUSE_SUSPECT || c == NSV_CAUSE_UNREADABLE ||
                    c == NSV_CAUSE_NAME_UNPROVED || c == NSV_CAUSE_NODE_LOST || c == NSV_CAUSE_CONTRADICTED ||
                    c == NSV_CAUSE_JOBS_UNREADABLE;
        const char *r = nsv_cause_reason((nsv_cause)c);
        if (keeps) {
            assert_non_null(r);
            assert_true(strncmp(r, "Drain", 5) == 0);
        } else {
            assert_null(r);
        }
    }
}

/* The answers the cache would give to the two asks. */
struct answers {
    int gone, jobs_free, job_holds, jobs_failed;
};

/* The walk condemn() makes: ask, fill in, ask again. Returns the verdict
 * and counts the asks; fails when an ask repeats or the walk runs on. */
static nsv_verdict walk(nsv_facts f, const struct answers *a, int *asks)
{
    nsv_verdict v = nsv_judge(&f);
    *asks = 0;
    while (v.step == NSV_ASK_GONE || v.step == NSV_ASK_JOBS) {
        assert_true(++*asks <= 2);
        if (v.step == NSV_ASK_GONE) {
            assert_false(f.gone_asked);
            assert_int_equal(f.found, NSV_ABSENT); /* never asked of a node the table lists */
            f.gone = a->gone;
            f.gone_asked = 1;
        } else {
            assert_false(f.jobs_asked);
            f.jobs_free = a->jobs_free;
            f.job_holds = a->job_holds;
            f.jobs_failed = a->jobs_failed;
            f.jobs_asked = 1;
        }
        v = nsv_judge(&f);
    }
    return v;
}

/* The safety rule, written from DRAIN-SAFETY.md rather than from the code:
 * may this pod be deleted with these facts and answers? */
static int may_delete(const nsv_facts *f, const struct answers *a)
{
    if (f->no_drain || !f->named)
        return 1;
    if (f->client != NSV_CLIENT_READY)
        return 0;
    /* a job list read after the drain, listing no job of any state */
    int jobs_clear = a->jobs_free && a->job_holds != 1;
    if (f->found == NSV_ABSENT)
        return a->gone && f->name_known && f->lost != 2 &&
               !(f->lost == 1 && f->lost_ago_ms < NSV_REGISTER_GRACE_MS) && jobs_clear;
    if (f->found == NSV_PRESENT)
        return f->drained && f->fresh && !f->settling && !f->contradicted &&
               !(f->our_reason && !f->drain_proved) && f->unknown_ago_ms >= NSV_REGISTER_GRACE_MS &&
               jobs_clear;
    return 0;
}

struct tally {
    unsigned long combos, deletes, cordonless;
};

/* One combination: bits are the boolean facts, the rest index the
 * many-valued ones. */
static void check_case(unsigned bits, nsv_client client, int found, int lost, size_t ago, int holds,
                       unsigned ans, struct tally *t)
{
    static const uint64_t agos[] = {0, NSV_REGISTER_GRACE_MS - 1, NSV_REGISTER_GRACE_MS, NEVER};
    nsv_facts f = {
        .no_drain = (bits & 1) && (bits & 2), /* rarer: most combinations are about the drain */
        .named = !((bits & 4) && (bits & 8)),
        .client = client,
        .found = (nsv_found)found,
        .name_known = (bits >> 4) & 1,
        .lost = lost,
        .lost_ago_ms = agos[ago],
        .settling = (bits >> 5) & 1,
        .contradicted = (bits >> 6) & 1,
        .drain = (bits >> 7) & 1,
        .our_reason = (bits >> 8) & 1,
        .drain_proved = (bits >> 9) & 1,
        .drain_state = (int)(ago % 3),
        .drain_ago_ms = agos[ago],
        .drained = ((bits >> 7) & 1) && ((bits >> 10) & 1),
        .unknown_ago_ms = agos[(ago + (size_t)(holds + 1)) % 4],
        .fresh = !((bits >> 3) & 1),
    };
    struct answers a = {.gone = ans & 1,
                        .jobs_free = (ans >> 1) & 1,
                        .job_holds = holds,
                        .jobs_failed = holds < 0 && (ans & 1)};
    if (a.jobs_free)
        a.job_holds = 0; /* a proof and a holder at once is no list */
    int asks;
    nsv_verdict v = walk(f, &a, &asks);
    t->combos++;
    int may = may_delete(&f, &a);
    if (v.step == NSV_DELETE) {
        t->deletes++;
        assert_false(v.acts & (NSV_DRAIN | NSV_TRACK));
    } else {
        assert_true(v.step == NSV_WAIT || v.step == NSV_WAIT_READ);
        t->cordonless += v.step == NSV_WAIT_READ;
    }
    if ((v.step == NSV_DELETE) != may) {
        /* an unsafe delete, or a provably free pod kept */
        print_error("%s: bits %#x client %d found %d lost %d ago %zu holds %d answers %u\n",
                    may ? "kept a provably free pod" : "unsafe delete", bits, (int)client, found, lost, ago,
                    holds, ans);
        fail();
    }
}

static void test_every_combination_is_safe(void **state)
{
    (void)state;
    static const nsv_client clients[] = {NSV_CLIENT_READY, NSV_CLIENT_NO_RESTAPI, NSV_CLIENT_SUSPECT,
                                         NSV_CLIENT_UNREADY};
    struct tally t = {0};
    for (unsigned bits = 0; bits < (1u << 11); bits++)
        for (size_t c = 0; c < 4; c++)
            for (int found = NSV_UNKNOWN; found <= NSV_PRESENT; found++)
                for (int lost = 0; lost <= 2; lost++)
                    for (size_t ago = 0; ago < 4; ago++)
                        for (int holds = -1; holds <= 1; holds++)
                            for (unsigned ans = 0; ans < 4; ans++)
                                check_case(bits, clients[c], found, lost, ago, holds, ans, &t);
    assert_true(t.combos > 1000000);
    assert_true(t.deletes > 0 && t.cordonless > 0);
}

/* A busy node costs no job read: the job list is asked only once the node
 * reads drained (or gone by name). */
static void test_no_job_read_for_a_busy_node(void **state)
{
    (void)state;
    nsv_facts f = {READY,           .found = NSV_PRESENT, .drain = 1,
                   .our_reason = 1, .drain_proved = 1,    .unknown_ago_ms = NEVER,
                   .fresh = 1};
    nsv_verdict v = nsv_judge(&f);
    assert_int_equal(v.step, NSV_WAIT);
    assert_int_equal(v.acts, NSV_TRACK);
    f.drained = 1;
    assert_int_equal(nsv_judge(&f).step, NSV_ASK_JOBS);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_cause_reasons),
        cmocka_unit_test(test_every_combination_is_safe),
        cmocka_unit_test(test_no_job_read_for_a_busy_node),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
