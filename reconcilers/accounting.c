#include "reconcilers/accounting.h"

#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "core/mem.h"
#include "reconcilers/accounting_build.h"
#include "reconcilers/cluster_rc.h"
#include "reconcilers/cluster_watch.h"
#include "reconcilers/reconcilers.h"
#include "reconcilers/tenancy.h"
#include "watchers/slinky.h"

static void reconcile(crc_pass *p);

/* The state is the module alone. */
struct accounting_state {
    crc_module m; /* first: crc_state_new */
};

/* The NodeSets of every Controller (deleting ones too) whose accountingRef
 * names the Accounting: while they drain, slurm.conf must keep its
 * accounting lines (docs/compat.md#deleting-a-cluster). Only Controllers
 * the Accounting admits count: another namespace's tenant must not keep it
 * from being deleted by naming it. */
static size_t nodesets_served(operator *op, const sobj *o)
{
    size_t n = 0, it = 0;
    const sobj *c;
    while ((c = store_next(op_store(op, OPK_CONTROLLERS), &it)))
        if (c->json && cw_controller_uses_accounting(c->json, o->ns, o->name) && tnc_admits(o->json, c->ns))
            n += crc_nodesets_of(op, c->ns, c->name);
    return n;
}

static const crc_module module = {
    .name = ACCOUNTING_CONTROLLER,
    .kind = ACB_KIND,
    .store = OPK_ACCOUNTINGS,
    .res = &SLINKY_ACCOUNTINGS,
    .sync = reconcile,
    .nodesets_served = nodesets_served,
};

static void *state_new(void)
{
    return crc_state_new(sizeof(accounting_state), &module);
}

accounting_state *accounting_of(const operator *op)
{
    return op_state(op, OPR_ACCOUNTING);
}

/* ------------------------------------------------------------------ */
/* watches: the store handlers get the crc_module as data */

typedef int (*uses_fn)(const cJSON *accounting, const char *name);

static void enqueue_users(crc_module *m, const char *ns, const char *name, uses_fn uses)
{
    size_t it = 0;
    const sobj *a;
    while ((a = store_next(op_store(m->op, OPK_ACCOUNTINGS), &it)))
        if (strcmp(a->ns, ns) == 0 && uses(a->json, name))
            crc_enqueue(m, a->ns, a->name);
}

static void on_secret(store *s, const sobj *old_obj, const sobj *new_obj, void *data)
{
    const sobj *o = new_obj ? new_obj : old_obj;
    crc_on_owned(s, old_obj, new_obj, data);
    enqueue_users(data, o->ns, o->name, cw_accounting_uses_secret);
}

static void on_configmap(store *s, const sobj *old_obj, const sobj *new_obj, void *data)
{
    const sobj *o = new_obj ? new_obj : old_obj;
    enqueue_users(data, o->ns, o->name, cw_accounting_uses_configmap);
}

/* The Accounting that a Controller's accountingRef names (in the
 * reference's namespace, by default the Controller's). */
static void enqueue_of(crc_module *m, const sobj *ctl)
{
    if (ctl == NULL || ctl->json == NULL)
        return;
    const char *name = json_get_str(ctl->json, "spec.accountingRef.name");
    const char *ns = cw_ref_ns(ctl->json, "spec.accountingRef");
    if (name && *name && ns)
        crc_enqueue(m, ns, name);
}

/* A Controller added, gone or naming another Accounting: the Accountings it
 * named and names take or may drop CRC_NODESETS_FINALIZER. */
static void on_controller(store *s, const sobj *old_obj, const sobj *new_obj, void *data)
{
    enqueue_of(data, old_obj);
    enqueue_of(data, new_obj);
}

/* A NodeSet added or gone: so may the Accounting of its Controller. */
static void on_nodeset(store *s, const sobj *old_obj, const sobj *new_obj, void *data)
{
    if (old_obj && new_obj)
        return;
    crc_module *m = data;
    const sobj *o = new_obj ? new_obj : old_obj;
    const char *ns = cw_ref_ns(o->json, "spec.controllerRef"), *ctl = cw_controller_ref(o->json);
    if (ns && ctl)
        enqueue_of(m, store_get(op_store(m->op, OPK_CONTROLLERS), ns, ctl));
}

static void setup(operator *op)
{
    crc_module *m = &accounting_of(op)->m;
    crc_setup(m, op);
    store_on_change(op_store(op, OPK_STATEFULSETS), crc_on_owned, m);
    store_on_change(op_store(op, OPK_SERVICES), crc_on_owned, m);
    store_on_change(op_store(op, OPK_SECRETS), on_secret, m);
    store_on_change(op_store(op, OPK_CONFIGMAPS), on_configmap, m);
    store_on_change(op_store(op, OPK_CONTROLLERS), on_controller, m);
    store_on_change(op_store(op, OPK_NODESETS), on_nodeset, m);
}

/* ------------------------------------------------------------------ */
/* one pass */

static void reconcile(crc_pass *p)
{
    vclu_result r;
    memset(&r, 0, sizeof(r));
    int rc = vclu_accounting(p->cr, crc_accepted(p), &r);
    if (crc_validated(p, rc, &r)) {
        crc_status(p, NULL);
        return;
    }
    cJSON *obj = NULL;
    char *why = NULL;
    rc = acb_service(p->cr, &obj, &why);
    crc_apply(p, "Service", rc, why, OPK_SERVICES, &KUBE_SERVICES, obj);

    /* The StatefulSet hashes the Secret built now, so a slurmdbd.conf change
     * rolls the pod in this pass. */
    cJSON *conf = NULL;
    why = NULL;
    rc = acb_config_secret(p->cr, &p->env, &conf, &why);
    if (rc < 0) {
        crc_step_failed(p, "Config", rc, why);
        conf = NULL;
    } else {
        free(why);
    }
    cJSON *sts = NULL;
    why = NULL;
    int sts_rc = acb_statefulset(p->cr, conf, &p->env, &sts, &why);
    crc_ensure(p, OPK_SECRETS, &KUBE_SECRETS, conf);
    crc_apply(p, "StatefulSet", sts_rc, why, OPK_STATEFULSETS, &KUBE_STATEFULSETS, sts);
    crc_status(p, NULL);
}

static int start(operator *op)
{
    return crc_start(&accounting_of(op)->m);
}

static void stop(operator *op)
{
    crc_stop(&accounting_of(op)->m);
}

const op_reconciler RC_ACCOUNTING = {
    .name = ACCOUNTING_CONTROLLER,
    .slot = OPR_ACCOUNTING,
    .new_state = state_new,
    .free_state = crc_state_free,
    .setup = setup,
    .start = start,
    .stop = stop,
};
