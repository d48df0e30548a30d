#include "reconcilers/nodeset_choose.h"

#include <assert.h>

nsc_step nsc_choose(const nsc_facts *f)
{
    /* A pass over half-filled caches would create pods that already exist
     * or delete ones it cannot see yet. */
    if (!f->synced)
        return NSC_UNSYNCED;
    if (!f->exists)
        return NSC_FORGET;
    /* A deletion goes ahead whatever the webhook and the spec say: a
     * NodeSet made invalid after its pods existed must still be deletable. */
    if (!f->deleting && !f->covered)
        return NSC_SCOPE_WAIT;
    if (!f->deleting && f->invalid)
        return NSC_INVALID;
    if (f->deleting)
        return f->ctl_found && f->ctl_refuses ? NSC_DELETE_REFUSED : NSC_DELETE;
    if (!f->ctl_found)
        return NSC_NO_CONTROLLER;
    if (f->writes_pending && !f->pending_done)
        return NSC_PENDING;
    if (f->writes_pending && f->wait_ms > 0)
        return NSC_WAIT;
    if (!f->incr_tried)
        return NSC_INCR;
    if (f->slurm_busy && f->gap_ms > 0)
        return NSC_K8S_SHARE;
    return NSC_FULL;
}

const char *nsc_step_name(nsc_step s)
{
    static const char *const names[NSC_N_STEPS] = {
        [NSC_UNSYNCED] = "unsynced",
        [NSC_FORGET] = "forget",
        [NSC_SCOPE_WAIT] = "scope-wait",
        [NSC_INVALID] = "invalid",
        [NSC_DELETE_REFUSED] = "delete-refused",
        [NSC_DELETE] = "delete",
        [NSC_NO_CONTROLLER] = "no-controller",
        [NSC_PENDING] = "pending",
        [NSC_WAIT] = "wait",
        [NSC_INCR] = "incremental",
        [NSC_K8S_SHARE] = "kubernetes-share",
        [NSC_FULL] = "full",
    };
    assert(s >= 0 && s < NSC_N_STEPS);
    return s >= 0 && s < NSC_N_STEPS ? names[s] : "?";
}
