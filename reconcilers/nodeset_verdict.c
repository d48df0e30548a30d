#include "reconcilers/nodeset_verdict.h"

#include <assert.h>
#include <stddef.h>

static nsv_verdict wait(nsv_cause cause, unsigned acts)
{
    return (nsv_verdict){.step = NSV_WAIT, .cause = cause, .acts = acts};
}

static nsv_verdict wait_grace(uint64_t ago_ms)
{
    return (nsv_verdict){.step = NSV_WAIT, .after_ms = NSV_REGISTER_GRACE_MS - ago_ms + 100u};
}

/* The node reads drained, or Slurm has no such node: the job list must say
 * the same, since a node's state does not show every job that holds it (a
 * SUSPENDED job leaves it IDLE, its processes stopped there). */
static nsv_verdict jobs_not_free(const nsv_facts *f, unsigned acts_if_held)
{
    nsv_cause cause = f->job_holds < 0 && f->jobs_failed ? NSV_CAUSE_JOBS_UNREADABLE : NSV_CAUSE_NONE;
    return wait(cause, acts_if_held);
}

static nsv_verdict absent(const nsv_facts *f)
{
    if (!f->gone_asked)
        return (nsv_verdict){.step = NSV_ASK_GONE};
    /* Not in the table is no proof of anything; only Slurm's "no such node"
     * to a fresh read of this very name is, and only when the name is the
     * one slurmd registered. */
    if (!f->gone)
        return wait(NSV_CAUSE_NONE, 0);
    if (!f->name_known)
        return wait(NSV_CAUSE_NAME_UNPROVED, 0);
    /* Unless Slurm lost a node it had: slurmd may still run jobs slurmctld
     * forgot. One that was busy is kept until it registers again; one that
     * was jobless gets the time slurmd needs to register again. */
    if (f->lost == 2)
        return wait(NSV_CAUSE_NODE_LOST, 0);
    if (f->lost == 1 && f->lost_ago_ms < NSV_REGISTER_GRACE_MS)
        return wait_grace(f->lost_ago_ms);
    if (!f->jobs_asked)
        return (nsv_verdict){.step = NSV_ASK_JOBS};
    if (!f->jobs_free)
        return jobs_not_free(f, 0);
    return (nsv_verdict){.step = NSV_DELETE, .cause = NSV_CAUSE_GONE};
}

static nsv_verdict present(const nsv_facts *f)
{
    if (f->settling)
        return wait(NSV_CAUSE_NONE, 0); /* decide on fresh data */
    if (f->contradicted)
        return wait(NSV_CAUSE_CONTRADICTED, 0);
    if (f->drain && f->our_reason && !f->drain_proved) {
        /* Our reason, but no drain of ours seen accepted and read back with a
         * newer reason time: the answer may be an older one replayed, or an
         * earlier life's drain since undone. Drain again and let the reason
         * time prove it; again after a while if no read proves it (a replay
         * may go on; the reason time has a 1 s resolution). */
        int again = f->drain_state == 0 || (f->drain_state == 2 && f->drain_ago_ms >= NSV_REDRAIN_MS);
        return wait(NSV_CAUSE_NONE, (again ? NSV_DRAIN : 0u) | NSV_TRACK);
    }
    if (f->drained) {
        /* Lately UNKNOWN: slurmctld restarted, maybe without its state; jobs
         * it forgot may run until slurmd has registered and been told to kill
         * them. */
        if (f->unknown_ago_ms < NSV_REGISTER_GRACE_MS)
            return wait_grace(f->unknown_ago_ms);
        if (!f->fresh)
            return wait(NSV_CAUSE_NONE, NSV_READ_SOON);
        if (!f->jobs_asked)
            return (nsv_verdict){.step = NSV_ASK_JOBS};
        if (!f->jobs_free) {
            if (f->job_holds == 0) /* only the read after the drain is missing, and it was sent */
                return (nsv_verdict){.step = NSV_WAIT_READ};
            return jobs_not_free(f, NSV_TRACK);
        }
        return (nsv_verdict){.step = NSV_DELETE, .cause = NSV_CAUSE_DRAINED, .acts = NSV_UNTRACK};
    }
    /* A person's drain is left as it is: its reason is never turned into ours. */
    return wait(NSV_CAUSE_NONE, (f->drain ? 0u : NSV_DRAIN) | NSV_TRACK);
}

nsv_verdict nsv_judge(const nsv_facts *f)
{
    assert(f != NULL);
    if (f->no_drain)
        return (nsv_verdict){.step = NSV_DELETE, .cause = NSV_CAUSE_NO_DRAIN};
    if (!f->named)
        return (nsv_verdict){.step = NSV_DELETE, .cause = NSV_CAUSE_NEVER_BOUND};
    switch (f->client) {
    case NSV_CLIENT_READY:
        break;
    case NSV_CLIENT_NO_RESTAPI:
        return wait(NSV_CAUSE_NO_RESTAPI, 0);
    case NSV_CLIENT_SUSPECT:
        return wait(NSV_CAUSE_SUSPECT, 0);
    case NSV_CLIENT_UNREADY:
    default:
        return wait(NSV_CAUSE_UNREADABLE, 0);
    }
    switch (f->found) {
    case NSV_ABSENT:
        return absent(f);
    case NSV_PRESENT:
        return present(f);
    case NSV_UNKNOWN:
    default:
        return wait(NSV_CAUSE_NONE, 0);
    }
}

const char *nsv_cause_reason(nsv_cause c)
{
    switch (c) {
    case NSV_CAUSE_NO_RESTAPI:
        return "DrainBlockedNoRestApi";
    case NSV_CAUSE_SUSPECT:
    case NSV_CAUSE_CONTRADICTED:
        return "DrainHeldSlurmContradiction";
    case NSV_CAUSE_UNREADABLE:
    case NSV_CAUSE_JOBS_UNREADABLE:
        return "DrainBlockedSlurmUnknown";
    case NSV_CAUSE_NAME_UNPROVED:
        return "DrainBlockedNameUnproved";
    case NSV_CAUSE_NODE_LOST:
        return "DrainBlockedNodeLost";
    default:
        return NULL;
    }
}

const char *nsv_step_name(nsv_step s)
{
    static const char *const names[] = {
        [NSV_ASK_GONE] = "ask-gone", [NSV_ASK_JOBS] = "ask-jobs",   [NSV_DELETE] = "delete",
        [NSV_WAIT] = "wait",         [NSV_WAIT_READ] = "wait-read",
    };
    assert((unsigned)s < sizeof(names) / sizeof(names[0]));
    return (unsigned)s < sizeof(names) / sizeof(names[0]) ? names[s] : "?";
}
