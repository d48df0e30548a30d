#include "reconcilers/loginset.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/json.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/thread.h"
#include "reconcilers/cluster_rc.h"
#include "reconcilers/cluster_watch.h"
#include "watchers/slinky.h"
#include "reconcilers/loginset_build.h"
#include "reconcilers/objsync.h"
#include "reconcilers/operator.h"
#include "reconcilers/reconcilers.h"
#include "reconcilers/sshkeys.h"

static void reconcile(crc_pass *p);
static void forget(crc_module *m, const char *key);

static const crc_module module = {
    .name = LOGINSET_CONTROLLER,
    .kind = LSB_KIND,
    .store = OPK_LOGINSETS,
    .res = &SLINKY_LOGINSETS,
    .sync = reconcile,
    .forget = forget,
};

/* One host key generation for one LoginSet. */
struct keygen {
    uv_work_t req; /* embedded; the job lives until after_work */
    loginset_state *ls; /* the state it is counted in */
    char *key;     /* LoginSet key */
    char uid[40];  /* the LoginSet incarnation the keys are for */
    int running;
    int detached; /* forgotten while running: after_work frees it */
    atomic_int cancel; /* set by the loop: the work stops generating */
    int rc;       /* result of sshk_generate_host_keys */
    sshk_host_keys keys;
};

static void keygen_free(struct keygen *j)
{
    sshk_host_keys_free(&j->keys);
    free(j->key);
    free(j);
}

struct loginset_state {
    crc_module m; /* first: crc_state_new */
    map_t jobs; /* LoginSet key -> struct keygen */
    int running;
    /* The operator freed the state (free_late) while generations were
     * still on the threadpool: the last completion frees it. */
    int freeing;
};

static void *state_new(void)
{
    loginset_state *ls = crc_state_new(sizeof(*ls), &module);
    map_init(&ls->jobs);
    return ls;
}

static loginset_state *of(crc_module *m)
{
    return container_of(m, loginset_state, m);
}

loginset_state *loginset_of(const operator *op)
{
    return op_state(op, OPR_LOGINSET);
}

static void state_free(void *state)
{
    loginset_state *ls = state;
    if (ls == NULL)
        return;
    crc_fini(&ls->m);
    /* Normally empty: stop hands the running generations to their
     * completions and frees the rest. Without a stop, do the same here. */
    size_t it = 0;
    const char *k;
    void *v;
    while (map_next(&ls->jobs, &it, &k, &v)) {
        struct keygen *j = v;
        if (j->running) {
            j->detached = 1;
            atomic_store(&j->cancel, 1);
        } else {
            keygen_free(j);
        }
    }
    map_free(&ls->jobs);
    if (ls->running > 0) {
        ls->freeing = 1;
        return;
    }
    free(ls);
}

int loginset_keygen_running(const loginset_state *ls)
{
    return ls->running;
}

/* ------------------------------------------------------------------ */
/* watches: the store handlers get the crc_module as data */

static void on_controller(store *s, const sobj *old_obj, const sobj *new_obj, void *data)
{
    crc_module *m = data;
    const sobj *o = new_obj ? new_obj : old_obj;
    size_t it = 0;
    const sobj *l;
    while ((l = store_next(op_store(m->op, OPK_LOGINSETS), &it))) {
        if (cw_ref_is(l->json, "spec.controllerRef", o->ns, o->name)) /* from any namespace */
            crc_enqueue(m, l->ns, l->name);
    }
}

static void on_secret(store *s, const sobj *old_obj, const sobj *new_obj, void *data)
{
    crc_module *m = data;
    const sobj *o = new_obj ? new_obj : old_obj;
    crc_on_owned(s, old_obj, new_obj, m);
    size_t it = 0;
    const sobj *l;
    store *ctls = op_store(m->op, OPK_CONTROLLERS);
    while ((l = store_next(op_store(m->op, OPK_LOGINSETS), &it))) {
        if (strcmp(l->ns, o->ns) != 0)
            continue;
        const sobj *ctl =
            store_get(ctls, cw_ref_ns(l->json, "spec.controllerRef"), cw_controller_ref(l->json));
        if (cw_loginset_uses_secret(l->json, ctl ? ctl->json : NULL, o->name))
            crc_enqueue(m, l->ns, l->name);
    }
}

static void setup(operator *op)
{
    crc_module *m = &loginset_of(op)->m;
    crc_setup(m, op);
    store_on_change(op_store(op, OPK_DEPLOYMENTS), crc_on_owned, m);
    store_on_change(op_store(op, OPK_SERVICES), crc_on_owned, m);
    store_on_change(op_store(op, OPK_CONFIGMAPS), crc_on_owned, m);
    store_on_change(op_store(op, OPK_SECRETS), on_secret, m);
    store_on_change(op_store(op, OPK_CONTROLLERS), on_controller, m);
}

/* ------------------------------------------------------------------ */
/* host key generation on the threadpool */

/* Drop the job of key: now, or when its work is done. */
static void forget(crc_module *m, const char *key)
{
    struct keygen *j = map_del(&of(m)->jobs, key);
    if (j == NULL)
        return;
    if (j->running) {
        j->detached = 1;
        atomic_store(&j->cancel, 1); /* nobody wants these keys any more */
    } else {
        keygen_free(j);
    }
}

static void keygen_work(uv_work_t *req)
{
    struct keygen *j = container_of(req, struct keygen, req);
    thread_background(); /* the loop runs first: core/thread.h */
    j->rc = sshk_generate_host_keys(&j->keys, &j->cancel);
}

static void keygen_done(uv_work_t *req, int status)
{
    struct keygen *j = container_of(req, struct keygen, req);
    loginset_state *ls = j->ls;
    assert(j->running && ls->running > 0); /* one completion per generation started */
    j->running = 0;
    ls->running--;
    if (j->detached) {
        keygen_free(j);
        if (ls->freeing && ls->running == 0)
            free(ls);
        return;
    }
    if (status == UV_ECANCELED)
        j->rc = OP_ECANCELED;
    log_info("loginset %s: SSH host keys %s", j->key, j->rc ? err_str(j->rc) : "generated");
    crc_enqueue_key(&ls->m, j->key);
}

/* The host key Secret: the cached one, or one built from generated keys,
 * or NULL while keys are being generated (then the caller waits). *built
 * receives a new object to create (the caller ensures it). */
static const cJSON *host_keys(crc_pass *p, cJSON **built)
{
    *built = NULL;
    char *name = lsb_host_keys_name(p->o->name);
    const sobj *cur = store_get(op_store(p->op, OPK_SECRETS), p->o->ns, name);
    const sobj *theirs = NULL;
    if (cur == NULL && map_get(&of(p->m)->jobs, p->o->key) == NULL) {
        /* Not in the cache of our Secrets: one without our label may still
         * be there, made for this LoginSet by Slinky before slurmop took
         * over. Its keys are the ones its login pods run with: read it
         * before any are generated (objsync.h, Adoption). */
        int pending = 0;
        theirs = op_ref_get(p->op, OPK_SECRETS, p->o->ns, name, &pending);
        if (pending == OP_REF_FULL) {
            crc_ref_full(p, "Secret", p->o->ns, name);
        } else if (pending) {
            crc_ref_wait(p);
            free(name);
            return NULL;
        }
    }
    free(name);
    if (theirs && theirs->json && objsync_owned_by(theirs->json, p->o->uid))
        return theirs->json;
    loginset_state *ls = of(p->m);
    struct keygen *j = map_get(&ls->jobs, p->o->key);
    if (j && strcmp(j->uid, p->o->uid) != 0) {
        forget(p->m, p->o->key); /* keys of an earlier incarnation */
        j = NULL;
    }
    if (cur) {
        if (j && !j->running)
            forget(p->m, p->o->key); /* the Secret is in the cache: the keys did their job */
        return cur->json;
    }
    if (j == NULL) {
        j = xcalloc(1, sizeof(*j));
        j->ls = ls;
        j->key = xstrdup(p->o->key);
        snprintf(j->uid, sizeof(j->uid), "%s", p->o->uid);
        j->running = 1;
        ls->running++;
        map_put(&ls->jobs, j->key, j);
        int rc = uv_queue_work(p->op->loop, &j->req, keygen_work, keygen_done);
        if (rc) {
            ls->running--;
            j->running = 0;
            map_del(&ls->jobs, j->key);
            keygen_free(j);
            crc_step_failed(p, "SSH host keys", rc,
                            xasprintf("cannot start key generation: %s", err_str(rc)));
            return NULL;
        }
        log_info("loginset %s: generating SSH host keys", p->o->key);
        return NULL;
    }
    if (j->running)
        return NULL;
    if (j->rc) {
        crc_step_failed(p, "SSH host keys", j->rc,
                        xasprintf("key generation failed: %s", err_str(j->rc)));
        forget(p->m, p->o->key);
        return NULL;
    }
    lsb_host_keys hk;
    memset(&hk, 0, sizeof(hk));
    hk.rsa.private_key = j->keys.rsa.private_pem;
    hk.rsa.public_key = j->keys.rsa.public_ssh;
    hk.ecdsa.private_key = j->keys.ecdsa.private_pem;
    hk.ecdsa.public_key = j->keys.ecdsa.public_ssh;
    hk.ed25519.private_key = j->keys.ed25519.private_pem;
    hk.ed25519.public_key = j->keys.ed25519.public_ssh;
    char *why = NULL;
    int rc = lsb_host_keys_secret(p->cr, &hk, built, &why);
    if (rc < 0) {
        crc_step_failed(p, "SSH host keys", rc, why);
        return NULL;
    }
    free(why);
    return *built;
}

/* ------------------------------------------------------------------ */
/* one pass */

/* Status: replicas of the Deployment and the pods' selector. */
static cJSON *status_of(crc_pass *p)
{
    cJSON *st = cJSON_CreateObject();
    const sobj *d = store_get(op_store(p->op, OPK_DEPLOYMENTS), p->o->ns, p->o->name);
    long long replicas = 0;
    if (d && d->owner_kind && strcmp(d->owner_kind, LSB_KIND) == 0)
        replicas = json_get_int(d->json, "status.replicas", 0);
    json_set_int(st, "replicas", replicas);
    char *sel = xasprintf("%s=%s,%s=%s", CLC_LABEL_INSTANCE, p->o->name, CLC_LABEL_NAME, LSB_APP);
    json_set_str(st, "selector", sel);
    free(sel);
    return st;
}

static void reconcile(crc_pass *p)
{
    vclu_result r;
    memset(&r, 0, sizeof(r));
    int rc = vclu_loginset(p->cr, crc_accepted(p), &r);
    if (crc_validated(p, rc, &r)) {
        /* The CRD requires status.selector (the scale subresource): without
         * it the API server refuses the Valid=False status too. */
        crc_status(p, status_of(p));
        return;
    }

    cJSON *keys_new = NULL;
    const cJSON *keys = host_keys(p, &keys_new);
    /* The Deployment hashes the key Secret: keep a copy of a new one. */
    cJSON *keys_copy = keys_new ? cJSON_Duplicate(keys_new, 1) : NULL;
    if (keys_new)
        crc_ensure(p, OPK_SECRETS, &KUBE_SECRETS, keys_new);
    if (keys_copy)
        keys = keys_copy;

    cJSON *cfg = NULL;
    char *why = NULL;
    rc = lsb_ssh_config(p->cr, &cfg, &why);
    cJSON *cfg_copy = rc == 0 && cfg ? cJSON_Duplicate(cfg, 1) : NULL;
    crc_apply(p, "SSH Config", rc, why, OPK_CONFIGMAPS, &KUBE_CONFIGMAPS, cfg);

    cJSON *obj = NULL;
    why = NULL;
    rc = lsb_service(p->cr, &obj, &why);
    crc_apply(p, "Service", rc, why, OPK_SERVICES, &KUBE_SERVICES, obj);

    if (keys) {
        obj = NULL;
        why = NULL;
        rc = lsb_deployment(p->cr, keys, cfg_copy, &p->env, &obj, &why);
        crc_apply(p, "Deployment", rc, why, OPK_DEPLOYMENTS, &KUBE_DEPLOYMENTS, obj);
    }
    cJSON_Delete(keys_copy);
    cJSON_Delete(cfg_copy);

    crc_status(p, status_of(p));
}

static int start(operator *op)
{
    return crc_start(&loginset_of(op)->m);
}

static void stop(operator *op)
{
    loginset_state *ls = loginset_of(op);
    crc_stop(&ls->m);
    const char *k;
    void *v;
    size_t it = 0;
    while (map_next(&ls->jobs, &it, &k, &v)) {
        struct keygen *j = v;
        if (j->running) {
            /* A shutdown waits for the work: queued, it is dropped; running,
             * it stops at its next draw of randomness. */
            j->detached = 1;
            atomic_store(&j->cancel, 1);
            uv_cancel((uv_req_t *)&j->req);
        } else {
            keygen_free(j);
        }
    }
    map_free(&ls->jobs);
}

const op_reconciler RC_LOGINSET = {
    .name = LOGINSET_CONTROLLER,
    .slot = OPR_LOGINSET,
    .new_state = state_new,
    .free_state = state_free,
    .free_late = 1, /* a host key generation on the threadpool frees it */
    .setup = setup,
    .start = start,
    .stop = stop,
};
