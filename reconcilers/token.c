#include "reconcilers/token.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/crypto.h"
#include "core/err.h"
#include "core/json.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/rfc3339.h"
#include "reconcilers/cluster_rc.h"
#include "reconcilers/cluster_watch.h"
#include "reconcilers/reconcilers.h"
#include "reconcilers/objsync.h"
#include "reconcilers/tenancy.h"
#include "reconcilers/token_build.h"
#include "slurmio/jwt.h"
#include "watchers/slinky.h"

static void reconcile(crc_pass *p);

/* The state is the module alone. */
struct token_state {
    crc_module m; /* first: crc_state_new */
};

static const crc_module module = {
    .name = TOKEN_CONTROLLER,
    .kind = TOKB_KIND,
    .store = OPK_TOKENS,
    .res = &SLINKY_TOKENS,
    .sync = reconcile,
};

static void *state_new(void)
{
    return crc_state_new(sizeof(token_state), &module);
}

token_state *token_of(const operator *op)
{
    return op_state(op, OPR_TOKEN);
}

/* The policy when the operator was given none: tokb_policy_parse's default
 * (any user but root and the SlurmUser, at most a day). */
static const tokb_policy default_policy = {.any = 1, .max_lifetime_s = TOKB_DEFAULT_MAX_LIFETIME_S};

/* ------------------------------------------------------------------ */
/* watches: the store handlers get the crc_module as data */

static void on_secret(store *s, const sobj *old_obj, const sobj *new_obj, void *data)
{
    crc_module *m = data;
    const sobj *o = new_obj ? new_obj : old_obj;
    crc_on_owned(s, old_obj, new_obj, m);
    size_t it = 0;
    const sobj *t;
    while ((t = store_next(op_store(m->op, OPK_TOKENS), &it)))
        if (cw_token_uses_secret(t->json, o->ns, o->name)) /* the key may be in another namespace */
            crc_enqueue(m, t->ns, t->name);
}

/* A Controller's JWT key ref or allowed-namespaces annotation decides which
 * Tokens may sign with the keys of its namespace. */
static void on_controller(store *s, const sobj *old_obj, const sobj *new_obj, void *data)
{
    crc_module *m = data;
    const sobj *o = new_obj ? new_obj : old_obj;
    size_t it = 0;
    const sobj *t;
    while ((t = store_next(op_store(m->op, OPK_TOKENS), &it))) {
        const char *kns = cw_token_key_ns(t->json);
        if (kns && strcmp(kns, o->ns) == 0)
            crc_enqueue(m, t->ns, t->name);
    }
}

static void setup(operator *op)
{
    crc_module *m = &token_of(op)->m;
    crc_setup(m, op);
    store_on_change(op_store(op, OPK_SECRETS), on_secret, m);
    store_on_change(op_store(op, OPK_CONTROLLERS), on_controller, m);
}

/* ------------------------------------------------------------------ */
/* one pass */

/* The base64-decoded value of secret.data[key] (malloc'd, NUL-terminated
 * after len bytes), or NULL. */
static uint8_t *secret_value(const cJSON *secret, const char *key, size_t *len)
{
    const char *v = clc_str(json_child(secret, "data"), key);
    *len = 0;
    if (v == NULL)
        return NULL;
    size_t n = 0;
    uint8_t *raw = base64_decode(v, strlen(v), &n);
    if (raw == NULL)
        return NULL;
    uint8_t *out = xmalloc(n + 1);
    memcpy(out, raw, n);
    out[n] = '\0';
    free(raw);
    *len = n;
    return out;
}

static void wipe_free(uint8_t *p, size_t n)
{
    if (p) {
        volatile uint8_t *v = p;
        for (size_t i = 0; i < n; i++)
            v[i] = 0;
        free(p);
    }
}

/* A Controller of key_ns vouches for the key (tenancy.h: tnc_vouches).
 * key_secret (as stored) may be NULL: then only naming counts. Before the
 * Secret is read, "some Controller there admits us" is enough to read it. */
static int key_admitted(crc_pass *p, const char *key_ns, const char *name, const char *key,
                        const cJSON *key_secret)
{
    size_t it = 0;
    const sobj *c;
    store *ctls = op_store(p->op, OPK_CONTROLLERS);
    while ((c = store_next(ctls, &it))) {
        if (c->json == NULL || strcmp(c->ns, key_ns) != 0)
            continue;
        if (key_secret ? tnc_vouches(c->json, p->o->ns, name, key, key_secret)
                       : tnc_admits(c->json, p->o->ns))
            return 1;
    }
    return 0;
}

/* Nothing is minted: Valid=False and a KeyRefused Warning. From another
 * namespace the message is the same whatever the reason (tenancy.h). */
static void refuse_key(crc_pass *p, const char *key_ns, const char *name, const char *key, const char *why)
{
    char *m = tnc_key_refused(p->o->ns, key_ns, name, key, why);
    op_warn(p->op, p->o, TOKB_KIND, "KeyRefused", "%s", m);
    free(p->invalid);
    p->invalid = m;
    crc_status(p, NULL);
}

static uint32_t clamp_requeue(int64_t ms)
{
    if (ms < 1000)
        return 1000; /* never 0: see token.h */
    if (ms > (int64_t)TOKEN_MAX_REQUEUE_MS)
        return TOKEN_MAX_REQUEUE_MS;
    return (uint32_t)ms;
}

static void reconcile(crc_pass *p)
{
    vclu_result r;
    memset(&r, 0, sizeof(r));
    int rc = vclu_token(p->cr, crc_accepted(p), &r);
    if (crc_validated(p, rc, &r)) {
        crc_status(p, NULL);
        return;
    }
    tokb_settings s;
    tokb_settings_get(p->cr, &s, NULL);
    const tokb_policy *policy = p->op->opts.token_policy ? p->op->opts.token_policy : &default_policy;
    char *denied = NULL;
    if (tokb_policy_check(policy, &s, &denied) != 0) {
        /* Nothing is minted: a Token is how anybody allowed to create one
         * gets a JWT that slurmrestd trusts without question. */
        op_warn(p->op, p->o, TOKB_KIND, "PolicyDenied", "%s", denied);
        p->invalid = denied;
        crc_status(p, NULL);
        return;
    }
    store *secrets = op_store(p->op, OPK_SECRETS);
    const char *key_name = json_get_str_or(s.jwt_ref, "name", "");
    const char *key_key = json_get_str_or(s.jwt_ref, "key", "");
    int key_pending = 0;
    const char *key_ns = cw_token_key_ns(p->cr); /* jwtKeyRef.namespace, else the Token's */
    if (key_ns == NULL)
        key_ns = p->o->ns;
    /* Only a Controller's JWT key signs, and only for namespaces that
     * Controller admits: anything else lets whoever may create a Token sign
     * for a cluster not theirs, or use any Secret value (a database
     * password) as an HMAC key and recover it offline. A Secret of another
     * namespace is not even read unless a Controller there admits us. */
    if (!key_admitted(p, key_ns, key_name, key_key, NULL)) {
        refuse_key(p, key_ns, key_name, key_key, "no Controller of the namespace names it as its JWT key");
        return;
    }
    const sobj *key_sec = op_ref_get(p->op, OPK_SECRETS, key_ns, key_name, &key_pending);
    if (key_pending == OP_REF_FULL) {
        crc_ref_full(p, "Secret", key_ns, key_name); /* waits: never "not found" */
        return;
    }
    if (key_pending) {
        crc_ref_wait(p); /* the key Secret's first read is on its way */
        return;
    }
    size_t klen = 0;
    uint8_t *key = key_sec ? secret_value(key_sec->json, key_key, &klen) : NULL;
    if (key_sec && !key_admitted(p, key_ns, key_name, key_key, key_sec->json)) {
        wipe_free(key, klen);
        refuse_key(p, key_ns, key_name, key_key,
                   "no Controller of the namespace names or owns it as its JWT key");
        return;
    }
    if (key == NULL || klen < TNC_JWT_KEY_MIN_BYTES) {
        /* The Secret's creation or change (seen by the next poll) queues
         * us again. */
        char why[96];
        if (key == NULL)
            snprintf(why, sizeof(why), "the Secret or its key is not there");
        else
            snprintf(why, sizeof(why), "the key is %zu bytes long", klen);
        wipe_free(key, klen);
        refuse_key(p, key_ns, key_name, key_key, why);
        return;
    }

    const sobj *cur = store_get(secrets, p->o->ns, s.secret_name);
    if (cur && cur->json && !objsync_owned_by(cur->json, key_sec->uid) &&
        !objsync_owned_by(cur->json, p->o->uid)) {
        /* Somebody else's Secret: neither read as our token nor written. */
        crc_not_owned(p, &KUBE_SECRETS, s.secret_name);
        wipe_free(key, klen);
        crc_status(p, NULL);
        return;
    }
    size_t tlen = 0;
    uint8_t *stored = cur ? secret_value(cur->json, s.secret_key, &tlen) : NULL;
    jwt_claims cl;
    memset(&cl, 0, sizeof(cl));
    int valid = stored && jwt_decode((const char *)stored, key, klen, &cl) == 0;
    int64_t now_ms = (int64_t)time(NULL) * 1000;
    int immutable = cur && json_get_bool(cur->json, "immutable", 0);
    int mint = 0;
    const char *why = NULL;

    if (cur == NULL) {
        mint = 1;
        why = "created";
    } else if (immutable) {
        /* refresh: false — the token lives as it was made. */
    } else if (!valid) {
        mint = 1;
        why = stored ? "the stored token does not verify with the current key" : "the Secret holds no token";
    } else if (s.refresh) {
        tokb_plan plan = tokb_refresh_plan(cl.exp, now_ms, s.lifetime_ms);
        if (plan.refresh_now) {
            mint = 1;
            why = "due for refresh";
        } else {
            crc_requeue_after(p, clamp_requeue(plan.requeue_ms));
        }
    }

    char *jwt = NULL;
    if (mint) {
        int64_t life = s.lifetime_ms / 1000;
        jwt = jwt_mint(key, klen, s.username, now_ms / 1000, life > 0 ? life : 1);
        if (jwt == NULL)
            crc_step_failed(p, "Secret", OP_EINVAL,
                            xasprintf("cannot mint a JWT for user \"%s\"", s.username));
        else
            log_info("token %s: minting a JWT for %s (%s)", p->o->key, s.username, why);
        if (s.refresh) {
            tokb_plan plan = tokb_refresh_plan(now_ms / 1000 + (life > 0 ? life : 1), now_ms, s.lifetime_ms);
            crc_requeue_after(p, clamp_requeue(plan.requeue_ms));
        }
    }
    if (!immutable && (jwt || valid)) {
        /* With the stored token this only converges metadata (labels,
         * owner); data changes only when a new token was minted. */
        cJSON *desired = NULL;
        char *err = NULL;
        rc = tokb_secret(p->cr, jwt ? jwt : (const char *)stored, key_sec->json, &desired, &err);
        crc_apply(p, "Secret", rc, err, OPK_SECRETS, &KUBE_SECRETS, desired);
    }
    if (jwt) {
        memset(jwt, 0, strlen(jwt));
        free(jwt);
    }

    /* issuedAt describes the token in the Secret now; a new one shows up
     * with the Secret's watch event. */
    cJSON *st = NULL;
    if (valid) {
        char t[32];
        rfc3339_format(cl.iat, t);
        st = cJSON_CreateObject();
        json_set_str(st, "issuedAt", t);
    }
    jwt_claims_free(&cl);
    wipe_free(stored, tlen);
    wipe_free(key, klen);
    crc_status(p, st);
}

static int start(operator *op)
{
    return crc_start(&token_of(op)->m);
}

static void stop(operator *op)
{
    crc_stop(&token_of(op)->m);
}

const op_reconciler RC_TOKEN = {
    .name = TOKEN_CONTROLLER,
    .slot = OPR_TOKEN,
    .new_state = state_new,
    .free_state = crc_state_free,
    .setup = setup,
    .start = start,
    .stop = stop,
};
