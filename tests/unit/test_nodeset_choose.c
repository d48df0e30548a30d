/* Unit tests for reconcilers/nodeset_choose: the step a NodeSet reconcile
 * takes for each combination of facts, as a table, and the walk the
 * reconcile makes through it (pending share, then incremental, then the
 * Kubernetes share or a full pass). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "reconcilers/nodeset_choose.h"

/* Shorthands for the facts of a row. */
#define SYNCED .synced = 1
#define LIVE .synced = 1, .exists = 1, .covered = 1
#define CTL .ctl_found = 1

struct row {
    const char *what;
    nsc_facts f;
    nsc_step want;
};

static const struct row rows[] = {
    {"caches not synced: nothing else counts", {.exists = 1, .deleting = 1, .invalid = 1}, NSC_UNSYNCED},
    {"gone", {SYNCED}, NSC_FORGET},
    {"gone, whatever else was set", {SYNCED, .deleting = 1, .ctl_found = 1}, NSC_FORGET},
    {"namespace not covered by the webhook", {SYNCED, .exists = 1, CTL}, NSC_SCOPE_WAIT},
    {"not covered and invalid: the webhook first", {SYNCED, .exists = 1, .invalid = 1}, NSC_SCOPE_WAIT},
    {"deleting, not covered: the deletion goes on", {SYNCED, .exists = 1, .deleting = 1, CTL}, NSC_DELETE},
    {"invalid spec", {LIVE, .invalid = 1, CTL}, NSC_INVALID},
    {"invalid before a missing Controller", {LIVE, .invalid = 1}, NSC_INVALID},
    {"invalid with writes pending", {LIVE, .invalid = 1, CTL, .writes_pending = 1}, NSC_INVALID},
    {"deleting with an invalid spec: drained all the same", {LIVE, .deleting = 1, .invalid = 1, CTL},
     NSC_DELETE},
    {"deleting without a Controller", {LIVE, .deleting = 1}, NSC_DELETE},
    {"deleting, Controller refuses the namespace", {LIVE, .deleting = 1, CTL, .ctl_refuses = 1},
     NSC_DELETE_REFUSED},
    {"deleting, refusal without a Controller means nothing", {LIVE, .deleting = 1, .ctl_refuses = 1},
     NSC_DELETE},
    {"no Controller", {LIVE}, NSC_NO_CONTROLLER},
    {"no Controller, writes pending", {LIVE, .writes_pending = 1}, NSC_NO_CONTROLLER},
    {"writes pending: the pending share first", {LIVE, CTL, .writes_pending = 1}, NSC_PENDING},
    {"pending share taken, a pass ran too recently",
     {LIVE, CTL, .writes_pending = 1, .pending_done = 1, .wait_ms = 5}, NSC_WAIT},
    {"pending share taken, a pass may run", {LIVE, CTL, .writes_pending = 1, .pending_done = 1}, NSC_INCR},
    {"wait_ms without writes pending means nothing", {LIVE, CTL, .wait_ms = 5}, NSC_INCR},
    {"nothing in flight: incremental first", {LIVE, CTL}, NSC_INCR},
    {"incremental could not finish", {LIVE, CTL, .incr_tried = 1}, NSC_FULL},
    {"incremental could not finish, Slurm busy, in the gap",
     {LIVE, CTL, .incr_tried = 1, .slurm_busy = 1, .gap_ms = 7}, NSC_K8S_SHARE},
    {"Slurm busy, the gap is over", {LIVE, CTL, .incr_tried = 1, .slurm_busy = 1}, NSC_FULL},
    {"a gap without Slurm busy means nothing", {LIVE, CTL, .incr_tried = 1, .gap_ms = 7}, NSC_FULL},
    {"after the pending share and a failed incremental",
     {LIVE, CTL, .writes_pending = 1, .pending_done = 1, .incr_tried = 1}, NSC_FULL},
};

static void test_table(void **state)
{
    (void)state;
    int bad = 0;
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        nsc_step got = nsc_choose(&rows[i].f);
        if (got != rows[i].want) {
            print_error("%s: got %s, want %s\n", rows[i].what, nsc_step_name(got),
                        nsc_step_name(rows[i].want));
            bad++;
        }
    }
    assert_int_equal(bad, 0);
}

/* The walk a reconcile makes: every step that does not end it changes a
 * fact the next choice reads, so it can never choose the same step twice
 * and always ends. */
static void test_walk_ends(void **state)
{
    (void)state;
    for (unsigned bits = 0; bits < (1u << 6); bits++) {
        nsc_facts f = {.synced = 1, .exists = 1, .covered = 1, .ctl_found = 1};
        f.writes_pending = (bits & 1) != 0;
        unsigned wait_after = (bits & 2) != 0, incr_fails = (bits & 4) != 0, busy = (bits & 8) != 0;
        unsigned gap = (bits & 16) != 0;
        nsc_step seen[16];
        size_t n = 0;
        for (;;) {
            nsc_step s = nsc_choose(&f);
            for (size_t k = 0; k < n; k++)
                assert_int_not_equal(seen[k], s);
            assert_true(n < 16);
            seen[n++] = s;
            if (s == NSC_PENDING) {
                f.pending_done = 1;
                f.wait_ms = wait_after ? 3 : 0;
            } else if (s == NSC_INCR && incr_fails) {
                f.incr_tried = 1;
                f.slurm_busy = busy;
                f.gap_ms = busy && gap ? 9 : 0;
            } else {
                break;
            }
        }
        nsc_step last = seen[n - 1];
        if (f.writes_pending && wait_after)
            assert_int_equal(last, NSC_WAIT);
        else if (!incr_fails)
            assert_int_equal(last, NSC_INCR);
        else if (busy && gap)
            assert_int_equal(last, NSC_K8S_SHARE);
        else
            assert_int_equal(last, NSC_FULL);
    }
}

static void test_names(void **state)
{
    (void)state;
    assert_string_equal(nsc_step_name(NSC_FULL), "full");
    assert_string_equal(nsc_step_name(NSC_INCR), "incremental");
    assert_string_equal(nsc_step_name(NSC_K8S_SHARE), "kubernetes-share");
    for (int s = 0; s < NSC_N_STEPS; s++)
        assert_non_null(nsc_step_name((nsc_step)s));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_walk_ends),
        cmocka_unit_test(test_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
