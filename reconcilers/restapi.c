#include "reconcilers/restapi.h"

#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "core/mem.h"
#include "reconcilers/cluster_rc.h"
#include "reconcilers/cluster_watch.h"
#include "reconcilers/reconcilers.h"
#include "watchers/slinky.h"
#include "reconcilers/restapi_build.h"

static void reconcile(crc_pass *p);

/* The state is the module alone. */
struct restapi_state {
    crc_module m; /* first: crc_state_new */
};

/* A RestApi serves its controllerRef's cluster: the NodeSets of that
 * Controller drain through it, so it outlives them. */
static void cluster_of(const sobj *o, const char **ns, const char **name)
{
    *ns = cw_ref_ns(o->json, "spec.controllerRef");
    *name = cw_controller_ref(o->json);
}

static const crc_module module = {
    .name = RESTAPI_CONTROLLER,
    .kind = RAB_KIND,
    .store = OPK_RESTAPIS,
    .res = &SLINKY_RESTAPIS,
    .sync = reconcile,
    .cluster_of = cluster_of,
};

static void *state_new(void)
{
    return crc_state_new(sizeof(restapi_state), &module);
}

restapi_state *restapi_of(const operator *op)
{
    return op_state(op, OPR_RESTAPI);
}

/* ------------------------------------------------------------------ */
/* watches: the store handlers get the crc_module as data */

/* The RestApis, of any namespace, whose controllerRef is ns/ctl. */
static void enqueue_of_controller(crc_module *m, const char *ns, const char *ctl)
{
    size_t it = 0;
    const sobj *r;
    while ((r = store_next(op_store(m->op, OPK_RESTAPIS), &it))) {
        if (cw_ref_is(r->json, "spec.controllerRef", ns, ctl))
            crc_enqueue(m, r->ns, r->name);
    }
}

static void on_controller(store *s, const sobj *old_obj, const sobj *new_obj, void *data)
{
    const sobj *o = new_obj ? new_obj : old_obj;
    enqueue_of_controller(data, o->ns, o->name);
}

static void on_secret(store *s, const sobj *old_obj, const sobj *new_obj, void *data)
{
    crc_module *m = data;
    const sobj *o = new_obj ? new_obj : old_obj;
    crc_on_owned(s, old_obj, new_obj, m);
    size_t it = 0;
    const sobj *r;
    store *ctls = op_store(m->op, OPK_CONTROLLERS);
    while ((r = store_next(op_store(m->op, OPK_RESTAPIS), &it))) {
        if (strcmp(r->ns, o->ns) != 0)
            continue;
        const sobj *ctl =
            store_get(ctls, cw_ref_ns(r->json, "spec.controllerRef"), cw_controller_ref(r->json));
        if (ctl && cw_restapi_uses_secret(r->json, ctl->json, o->name))
            crc_enqueue(m, r->ns, r->name);
    }
}

/* A NodeSet added or gone: the RestApis of its Controller take or may drop
 * CRC_NODESETS_FINALIZER. */
static void on_nodeset(store *s, const sobj *old_obj, const sobj *new_obj, void *data)
{
    if (old_obj && new_obj)
        return;
    const sobj *o = new_obj ? new_obj : old_obj;
    const char *ns = cw_ref_ns(o->json, "spec.controllerRef"), *ctl = cw_controller_ref(o->json);
    if (ns && ctl)
        enqueue_of_controller(data, ns, ctl);
}

static void setup(operator *op)
{
    crc_module *m = &restapi_of(op)->m;
    crc_setup(m, op);
    store_on_change(op_store(op, OPK_DEPLOYMENTS), crc_on_owned, m);
    store_on_change(op_store(op, OPK_SERVICES), crc_on_owned, m);
    store_on_change(op_store(op, OPK_CONFIGMAPS), crc_on_owned, m);
    store_on_change(op_store(op, OPK_SECRETS), on_secret, m);
    store_on_change(op_store(op, OPK_CONTROLLERS), on_controller, m);
    store_on_change(op_store(op, OPK_NODESETS), on_nodeset, m);
}

/* ------------------------------------------------------------------ */
/* one pass */

static void reconcile(crc_pass *p)
{
    vclu_result r;
    memset(&r, 0, sizeof(r));
    int rc = vclu_restapi(p->cr, crc_accepted(p), &r);
    if (crc_validated(p, rc, &r)) {
        crc_status(p, NULL);
        return;
    }
    cJSON *obj = NULL;
    char *why = NULL;
    rc = rab_service(p->cr, &obj, &why);
    crc_apply(p, "Service", rc, why, OPK_SERVICES, &KUBE_SERVICES, obj);

    obj = NULL;
    why = NULL;
    rc = rab_deployment(p->cr, &p->env, &obj, &why);
    crc_apply(p, "Deployment", rc, why, OPK_DEPLOYMENTS, &KUBE_DEPLOYMENTS, obj);
    crc_status(p, NULL);
}

static int start(operator *op)
{
    return crc_start(&restapi_of(op)->m);
}

static void stop(operator *op)
{
    crc_stop(&restapi_of(op)->m);
}

const op_reconciler RC_RESTAPI = {
    .name = RESTAPI_CONTROLLER,
    .slot = OPR_RESTAPI,
    .new_state = state_new,
    .free_state = crc_state_free,
    .setup = setup,
    .start = start,
    .stop = stop,
};
