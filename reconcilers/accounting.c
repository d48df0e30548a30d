#include "reconcilers/accounting.h"

#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "core/mem.h"
#include "reconcilers/accounting_build.h"
#include "reconcilers/cluster_rc.h"
#include "reconcilers/cluster_watch.h"
#include "watchers/slinky.h"

static void reconcile(crc_pass *p);

/* The state is the module alone. */
struct accounting_state {
    crc_module m; /* first: crc_state_new */
};

static const crc_module module = {
    .name = ACCOUNTING_CONTROLLER,
    .kind = ACB_KIND,
    .store = OPK_ACCOUNTINGS,
    .res = &SLINKY_ACCOUNTINGS,
    .sync = reconcile,
};

accounting_state *accounting_state_new(void)
{
    return crc_state_new(sizeof(accounting_state), &module);
}

void accounting_state_free(accounting_state *st)
{
    crc_state_free(st);
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

static void setup(operator *op)
{
    crc_module *m = &op->accounting->m;
    crc_setup(m, op);
    store_on_change(op_store(op, OPK_STATEFULSETS), crc_on_owned, m);
    store_on_change(op_store(op, OPK_SERVICES), crc_on_owned, m);
    store_on_change(op_store(op, OPK_SECRETS), on_secret, m);
    store_on_change(op_store(op, OPK_CONFIGMAPS), on_configmap, m);
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
    return crc_start(&op->accounting->m);
}

static void stop(operator *op)
{
    crc_stop(&op->accounting->m);
}

const op_reconciler RC_ACCOUNTING = {
    .name = ACCOUNTING_CONTROLLER,
    .setup = setup,
    .start = start,
    .stop = stop,
};
