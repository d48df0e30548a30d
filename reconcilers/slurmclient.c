#include "reconcilers/slurmclient.h"

#include "reconcilers/cluster_rc.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/crypto.h"
#include "core/err.h"
#include "core/file.h"
#include "core/json.h"
#include "core/log.h"
#include "core/map.h"
#include "core/mem.h"
#include "reconcilers/cluster_common.h"
#include "reconcilers/cluster_rc.h"
#include "reconcilers/cluster_watch.h"
#include "reconcilers/reconcilers.h"
#include "reconcilers/tenancy.h"
#include "reconcilers/controller.h"
#include "slurmio/backend.h"
#include "slurmio/rest.h"
#include "slurmio/slurmlib.h"

#define SLURMRESTD_PORT 6820
#define SLURM_USER "slurm"
#define TOKEN_LIFETIME_S 900

/* One Slurm cluster: the client and cache of one Controller. */
typedef struct cluster {
    slurmclient_state *st; /* the completions of its cache and client reach the state through it */
    char *key; /* "ns/ctl" */
    char *url;
    char *restapi_uid;
    uint8_t key_hash[SHA256_LEN];
    sr_client *rest;
    nc_cache *cache;
    int logged_plan;
    int closing; /* 2 closes outstanding, then freed */
} cluster;

struct slurmclient_state {
    operator *op;
    wq_t *q;
    map_t clusters; /* key -> cluster (live ones only) */
    /* key -> why it has no client (a malloc'd "key\0why"), for the
     * NodeSets' DrainBlockedSlurmUnknown message (slurmclient_why) */
    map_t no_client;
    sl_backend *lib;
    int closing_clusters;
    /* The operator freed the state (free_late) while clusters were still
     * closing: the last one to close frees it. */
    int released;
    void (*on_ping)(const char *, void *);
    void *ping_data;
    void (*on_node)(const char *, const char *, void *);
    void *node_data;
    void (*on_resv)(const char *, const char *, void *);
    void *resv_data;
    char *ca_pem; /* --slurmrestd-ca, read at start */
    size_t ca_len;
};

static void *state_new(void)
{
    slurmclient_state *st = xcalloc(1, sizeof(*st));
    map_init(&st->clusters);
    map_init_type(&st->no_client, &map_type_free_val);
    return st;
}

static void state_destroy(slurmclient_state *st)
{
    map_free(&st->clusters);
    map_free(&st->no_client);
    free(st->ca_pem);
    free(st);
}

static void state_free(void *state)
{
    slurmclient_state *st = state;
    if (st == NULL)
        return;
    if (st->closing_clusters > 0) {
        st->released = 1; /* cluster_freed finishes it */
        return;
    }
    state_destroy(st);
}

slurmclient_state *slurmclient_of(const operator *op)
{
    return op_state(op, OPR_SLURMCLIENT);
}

void slurmclient_on_ping(operator *op, void (*fn)(const char *ctl_key, void *data), void *data)
{
    slurmclient_state *st = slurmclient_of(op);
    st->on_ping = fn;
    st->ping_data = data;
}

void slurmclient_on_node(operator *op, void (*fn)(const char *ctl_key, const char *node, void *data),
                         void *data)
{
    slurmclient_state *st = slurmclient_of(op);
    st->on_node = fn;
    st->node_data = data;
}

void slurmclient_on_resv(operator *op, void (*fn)(const char *ctl_key, const char *resv, void *data),
                         void *data)
{
    slurmclient_state *st = slurmclient_of(op);
    st->on_resv = fn;
    st->resv_data = data;
}

static void enqueue(slurmclient_state *st, const char *key)
{
    if (st->q)
        wq_add(st->q, key);
}

/* ---- store handlers (data: the slurmclient_state) ---- */

static void on_controller(store *s, const sobj *old, const sobj *new, void *data)
{
    enqueue(data, (new ? new : old)->key);
}

static void enqueue_ref(slurmclient_state *st, const sobj *o)
{
    const char *ctl = o && o->json ? json_get_str(o->json, "spec.controllerRef.name") : NULL;
    const char *ns = o && o->json ? cw_ref_ns(o->json, "spec.controllerRef") : NULL;
    if (ctl && *ctl && ns) {
        char key[512];
        snprintf(key, sizeof(key), "%s/%s", ns, ctl);
        enqueue(st, key);
    }
}

static void on_restapi(store *s, const sobj *old, const sobj *new, void *data)
{
    enqueue_ref(data, old);
    enqueue_ref(data, new);
}

static void on_secret(store *s, const sobj *old, const sobj *new, void *data)
{
    slurmclient_state *st = data;
    const sobj *o = new ? new : old;
    size_t it = 0;
    const sobj *ctl;
    while ((ctl = store_next(op_store(st->op, OPK_CONTROLLERS), &it))) {
        if (strcmp(ctl->ns, o->ns) != 0 || !ctl->json)
            continue;
        const char *name = json_get_str(clc_jwt_ref(json_child(ctl->json, "spec")), "name");
        if (name && strcmp(name, o->name) == 0)
            enqueue(st, ctl->key);
    }
}

/* ---- lookups ---- */

/* A CR being deleted still serves while it holds CRC_NODESETS_FINALIZER:
 * NodeSets of its cluster drain through it (its objects stay until then). */
static int serving(const sobj *o)
{
    return !o->deleting || crc_has_finalizer(o->json, CRC_NODESETS_FINALIZER);
}

/* The RestApi serving a Controller: the oldest of those referencing it. */
static const sobj *serving_restapi(operator *op, const char *ns, const char *ctl)
{
    const sobj *best = NULL;
    size_t it = 0;
    const sobj *o;
    const sobj *c = store_get(op_store(op, OPK_CONTROLLERS), ns, ctl);
    while ((o = store_next(op_store(op, OPK_RESTAPIS), &it))) {
        /* controllerRef.namespace: a RestApi may serve a Controller of another
         * namespace that admits it (tenancy.h); any other would let a tenant
         * stand a slurmrestd of theirs between the operator and somebody
         * else's cluster, and answer its drain reads. */
        if (!o->json || !serving(o) || !cw_ref_is(o->json, "spec.controllerRef", ns, ctl) ||
            !tnc_admits(c ? c->json : NULL, o->ns))
            continue;
        if (!best || o->created < best->created ||
            (o->created == best->created && strcmp(o->name, best->name) < 0))
            best = o;
    }
    return best;
}

static int split_key(const char *key, char *ns, size_t nsl, const char **name)
{
    const char *slash = strchr(key, '/');
    if (!slash || (size_t)(slash - key) >= nsl)
        return OP_EINVAL;
    memcpy(ns, key, (size_t)(slash - key));
    ns[slash - key] = '\0';
    *name = slash + 1;
    return 0;
}

int slurmclient_get(operator *op, const char *ctl_key, nc_cache **out)
{
    *out = NULL;
    char ns[256];
    const char *name;
    if (!op_caches_synced(op) || split_key(ctl_key, ns, sizeof(ns), &name) != 0)
        return SC_NOT_READY;
    if (!serving_restapi(op, ns, name))
        return SC_NO_RESTAPI;
    cluster *c = map_get(&slurmclient_of(op)->clusters, ctl_key);
    if (!c)
        return SC_NOT_READY;
    *out = c->cache;
    return SC_READY;
}

int slurmclient_active_controller(operator *op, const char *ctl_key)
{
    nc_cache *cache;
    int st = slurmclient_get(op, ctl_key, &cache);
    if (st == SC_NO_RESTAPI)
        return OP_ENOTFOUND;
    if (st != SC_READY)
        return OP_EUNKNOWN;
    nc_want_ping(cache);
    return nc_active_controller(cache);
}

/* ---- clusters ---- */

static void cluster_freed(void *data)
{
    cluster *c = data;
    assert(c->closing > 0);
    if (--c->closing > 0)
        return;
    slurmclient_state *st = c->st;
    assert(st->closing_clusters > 0);
    log_debug("slurm %s: client closed", c->key);
    free(c->key);
    free(c->url);
    free(c->restapi_uid);
    free(c);
    st->closing_clusters--;
    if (st->closing_clusters == 0 && st->lib && st->q == NULL) {
        /* Stopping, and every cluster is gone: the backend can go too. */
        sl_backend_close(st->lib, NULL, NULL);
        st->lib = NULL;
    }
    if (st->closing_clusters == 0 && st->released)
        state_destroy(st);
}

static void notify_all(slurmclient_state *st, const char *key)
{
    if (st->on_node)
        st->on_node(key, NULL, st->node_data);
}

static void cluster_close(cluster *c, const char *why)
{
    slurmclient_state *st = c->st;
    log_info("slurm %s: closing the Slurm client (%s)", c->key, why);
    map_del(&st->clusters, c->key);
    c->closing = 2;
    st->closing_clusters++;
    /* The cache first (it stops sending), then the client, which cancels
     * what the cache still has in flight. */
    nc_close(c->cache, cluster_freed, c);
    sr_client_close(c->rest, cluster_freed, c);
}

static void cache_node_event(const char *node, void *data)
{
    cluster *c = data;
    if (node == NULL && !c->logged_plan && nc_ready(c->cache)) {
        buf_t b;
        buf_init(&b, 1024);
        if (sb_describe(nc_version(c->cache), nc_have_lib(c->cache), &b) == 0)
            log_info("slurm %s: %s via %s; backends: %s", c->key, sm_version_str(nc_version(c->cache)),
                     c->url, buf_cstr(&b));
        buf_free(&b);
        c->logged_plan = 1;
    }
    if (c->st->on_node)
        c->st->on_node(c->key, node, c->st->node_data);
}

static void cache_ping_event(void *data)
{
    cluster *c = data;
    controller_enqueue(c->st->op, c->key); /* the Controller reconciler moves the active label */
    if (c->st->on_ping)
        c->st->on_ping(c->key, c->st->ping_data);
}

/* controller_ping_fn for the Controller reconciler: the ordinal of the
 * responding slurmctld; -1 without a RestApi (it then takes pod 0, as
 * Slinky); CONTROLLER_PING_UNKNOWN while Slurm cannot say (the label stays
 * where it is: moving it to pod 0 during a failover could point the Service
 * at the slurmctld that just died). */
static int controller_ping(operator *op, const char *ns, const char *name, int replicas, void *data)
{
    char key[512];
    snprintf(key, sizeof(key), "%s/%s", ns, name);
    int active = slurmclient_active_controller(op, key);
    if (active >= 0 && active < replicas)
        return active;
    return active == OP_ENOTFOUND ? -1 : CONTROLLER_PING_UNKNOWN;
}

static void cache_resv_event(const char *resv, void *data)
{
    cluster *c = data;
    if (c->st->on_resv)
        c->st->on_resv(c->key, resv, c->st->resv_data);
}

/* slurmrestd refused a token: the JWT key Secret may have been rotated
 * since it was last read (a user's Secret is polled, every 30 s by default),
 * so read it again now; the new key reaches the client through the Secret's
 * store handler and the Controller's pass (sr_set_key). */
static void rest_unauthorized(void *data)
{
    cluster *c = data;
    operator *op = c->st->op;
    const sobj *ctl = store_get_key(op_store(op, OPK_CONTROLLERS), c->key);
    if (ctl == NULL || ctl->json == NULL)
        return;
    const char *name = json_get_str(clc_jwt_ref(json_child(ctl->json, "spec")), "name");
    op_ref_refresh(op, OPK_SECRETS, ctl->ns, name);
}

static cluster *cluster_new(slurmclient_state *st, const char *key, const char *url, const char *restapi_uid,
                            const uint8_t *jwt, size_t jwt_len)
{
    operator *op = st->op;
    cluster *c = xcalloc(1, sizeof(*c));
    c->st = st;
    c->key = xstrdup(key);
    c->url = xstrdup(url);
    c->restapi_uid = xstrdup(restapi_uid);
    sha256(jwt, jwt_len, c->key_hash);
    /* An https URL is verified against --slurmrestd-ca, never against
     * nothing: without the flag the client is not created. */
    hc_tls_opts tls = {.ca_pem = st->ca_pem, .ca_len = st->ca_len};
    int https = strncmp(url, "https://", 8) == 0;
    if (https && st->ca_pem == NULL) {
        log_error("slurm %s: %s is https but no --slurmrestd-ca was given to verify it with", key, url);
        free(c->key);
        free(c->url);
        free(c->restapi_uid);
        free(c);
        return NULL;
    }
    sr_opts ro = {
        .url = url,
        .tls = https ? &tls : NULL,
        .key = jwt,
        .key_len = jwt_len,
        .user = SLURM_USER,
        .token_lifetime_s = TOKEN_LIFETIME_S,
        .max_body = op->opts.slurmrestd_max_body,
        /* 22.05's node tables carry no time: read slurmctld's clock so that
         * update_time is on it, not on ours (skew would hide changes). */
        .read_clock = 1,
        .on_unauthorized = rest_unauthorized,
        .unauthorized_data = c,
    };
    int rc = sr_client_new(op->loop, &ro, &c->rest);
    if (rc < 0) {
        log_warn("slurm %s: cannot create a slurmrestd client for %s: %s", key, url, err_str(rc));
        goto fail;
    }
    nc_opts no = {
        .name = key,
        .rest = c->rest,
        .lib = st->lib,
        .metrics = op->metrics,
        .on_node = cache_node_event,
        .on_ping = cache_ping_event,
        .on_resv = cache_resv_event,
        .data = c,
    };
    rc = nc_new(op->loop, &no, &c->cache);
    if (rc < 0) {
        log_warn("slurm %s: cannot create the node cache: %s", key, err_str(rc));
        goto fail;
    }
    log_info("slurm %s: Slurm client for %s (libslurm backend: %s)", key, url, st->lib ? "yes" : "no");
    return c;
fail:
    if (c->rest) {
        /* Nothing was sent: the client closes on its own. */
        sr_client_close(c->rest, NULL, NULL);
    }
    free(c->key);
    free(c->url);
    free(c->restapi_uid);
    free(c);
    return NULL;
}

/* The JWT key of a Controller from its Secret; malloc'd, NULL when missing
 * (*pending: the Secret's first read is still on its way). */
static uint8_t *jwt_key_of(operator *op, const sobj *ctl, size_t *len, int *pending, char *why, size_t whylen)
{
    const cJSON *ref = clc_jwt_ref(json_child(ctl->json, "spec"));
    const char *name = json_get_str(ref, "name");
    const char *k = json_get_str(ref, "key");
    if (!name || !*name || !k || !*k) {
        snprintf(why, whylen, "the Controller has no jwtKeyRef");
        return NULL;
    }
    const sobj *sec = op_ref_get(op, OPK_SECRETS, ctl->ns, name, pending);
    if (*pending)
        return NULL;
    /* Secret keys may contain dots ("jwt.key"): look them up as keys, not paths. */
    const cJSON *v = sec && sec->json ? json_child(json_child(sec->json, "data"), k) : NULL;
    const char *b64 = cJSON_IsString(v) ? v->valuestring : NULL;
    if (b64 == NULL && sec && sec->json) {
        /* stringData is written by clients, not returned by the API; accept
         * it for stores fed from manifests (tests). */
        const cJSON *sv = json_child(json_child(sec->json, "stringData"), k);
        const char *plain = cJSON_IsString(sv) ? sv->valuestring : NULL;
        if (plain && *plain) {
            *len = strlen(plain);
            uint8_t *out = xmalloc(*len + 1);
            memcpy(out, plain, *len + 1);
            return out;
        }
    }
    if (b64 == NULL) {
        snprintf(why, whylen, "Secret %s/%s has no key %s", ctl->ns, name, k);
        return NULL;
    }
    uint8_t *key = base64_decode(b64, strlen(b64), len);
    if (!key || *len == 0) {
        free(key);
        snprintf(why, whylen, "Secret %s/%s key %s is empty or not base64", ctl->ns, name, k);
        return NULL;
    }
    return key;
}

static char *url_of(const operator *op, const sobj *restapi)
{
    char key[512];
    snprintf(key, sizeof(key), "%s/%s", restapi->ns, restapi->name);
    for (int i = 0; i < op->opts.n_slurmrestd; i++)
        if (strcmp(op->opts.slurmrestd[i].key, key) == 0)
            return xstrdup(op->opts.slurmrestd[i].url);
    return xasprintf("http://%s-restapi.%s:%d", restapi->name, restapi->ns, SLURMRESTD_PORT);
}

/* Remember (why) or forget (NULL) why a Controller has no client. */
static void set_no_client(slurmclient_state *st, const char *key, const char *why)
{
    if (why == NULL) {
        map_drop(&st->no_client, key);
        return;
    }
    size_t kl = strlen(key), wl = strlen(why);
    char *e = xmalloc(kl + wl + 2);
    memcpy(e, key, kl + 1);
    memcpy(e + kl + 1, why, wl + 1);
    map_drop(&st->no_client, key);
    map_put(&st->no_client, e, e);
}

const char *slurmclient_why(operator *op, const char *ctl_key, char *out, size_t n)
{
    nc_cache *cache = NULL;
    int a = slurmclient_get(op, ctl_key, &cache);
    const char *e = map_get(&slurmclient_of(op)->no_client, ctl_key);
    if (a == SC_READY) {
        switch (nc_unready_why(cache, out, n)) {
        case NC_WHY_FAILED:
        case NC_WHY_NOT_READ:
            return "check that the RestApi's slurmrestd pod runs and answers (its log, and its URL in the "
                   "operator's log), and that slurmctld is up";
        case NC_WHY_STALE:
            return "slurmrestd answers too slowly or not at all: check its pod's load and log";
        case NC_WHY_SUSPECT:
            return "nothing, a second read within seconds settles it; if it stays, read the operator's "
                   "warnings";
        default:
            return "nothing, the next pass decides";
        }
    }
    if (a == SC_NO_RESTAPI) {
        snprintf(out, n, "no RestApi references it");
        return "create a RestApi whose spec.controllerRef names the Controller";
    }
    if (!op_caches_synced(op)) {
        snprintf(out, n, "the operator's caches are still syncing");
        return "nothing, this ends once every watch has listed";
    }
    if (e) {
        snprintf(out, n, "it has no Slurm client: %s", e + strlen(e) + 1);
        return "fix what the Controller's SlurmClientFailed Event names (kubectl describe controller), "
               "usually its jwtKeyRef Secret";
    }
    snprintf(out, n, "its Slurm client is being built");
    return "nothing, it is ready within a second; if it stays, read the operator's log";
}

static wq_result sync_one(slurmclient_state *st, const char *key)
{
    operator *op = st->op;
    cluster *c = map_get(&st->clusters, key);
    const sobj *ctl = store_get_key(op_store(op, OPK_CONTROLLERS), key);
    if (!ctl || !ctl->json || !serving(ctl)) {
        set_no_client(st, key, NULL);
        if (c) {
            cluster_close(c, "the Controller is gone");
            notify_all(st, key);
        }
        return WQ_RESULT_OK;
    }
    const sobj *ra = serving_restapi(op, ctl->ns, ctl->name);
    if (!ra) {
        if (c) {
            cluster_close(c, "no RestApi references the Controller");
            notify_all(st, key);
        }
        return WQ_RESULT_OK;
    }
    char why[512];
    size_t klen = 0;
    int pending = 0;
    uint8_t *jwt = jwt_key_of(op, ctl, &klen, &pending, why, sizeof(why));
    if (!jwt && pending)
        return WQ_RESULT_AFTER(200);
    if (!jwt && c && ctl->deleting) {
        /* The cluster is being deleted and its JWT Secret went first (helm
         * uninstall deletes it with the rest): the key already in hand
         * serves until the NodeSets are drained. */
        log_info("slurm %s: %s; the Controller is being deleted: keeping the key in hand", key, why);
        return WQ_RESULT_OK;
    }
    if (!jwt) {
        if (c) {
            cluster_close(c, why);
            notify_all(st, key);
        }
        set_no_client(st, key, why);
        op_warn(op, ctl, "Controller", "SlurmClientFailed", "Cannot talk to Slurm: %s", why);
        return WQ_RESULT_OK; /* the Secret's arrival (seen by the next poll) queues us */
    }
    char *url = url_of(op, ra);
    uint8_t h[SHA256_LEN];
    sha256(jwt, klen, h);
    if (c && (strcmp(c->url, url) != 0 || strcmp(c->restapi_uid, ra->uid) != 0)) {
        cluster_close(c, "its RestApi or URL changed");
        c = NULL;
    }
    if (c) {
        if (memcmp(h, c->key_hash, sizeof(h)) != 0) {
            log_info("slurm %s: the JWT key changed; new tokens are signed with it", key);
            sr_set_key(c->rest, jwt, klen);
            memcpy(c->key_hash, h, sizeof(h));
            /* refused polls backed off; the new key may be the cure */
            nc_poll_soon(c->cache);
            notify_all(st, key);
        }
    } else {
        c = cluster_new(st, key, url, ra->uid, jwt, klen);
        set_no_client(st, key,
                      c ? NULL : "its slurmrestd client could not be created (see the operator's log)");
        if (c) {
            map_put(&st->clusters, c->key, c);
            notify_all(st, key);
            controller_enqueue(op, key); /* its HA ping can now be asked */
        }
    }
    memset(jwt, 0, klen);
    free(jwt);
    free(url);
    return c ? WQ_RESULT_OK : WQ_RESULT_REQUEUE;
}

static wq_result handle(const char *key, uint64_t first_add_ns, void *data)
{
    slurmclient_state *st = data;
    uint64_t t0 = uv_hrtime();
    wq_result r = sync_one(st, key);
    op_observe_reconcile(st->op, SLURMCLIENT_CONTROLLER, r, (double)(uv_hrtime() - t0) / 1e9);
    return r;
}

/* ---- module ---- */

static void setup(operator *op)
{
    slurmclient_state *st = slurmclient_of(op);
    st->op = op;
    store_on_change(op_store(op, OPK_CONTROLLERS), on_controller, st);
    store_on_change(op_store(op, OPK_RESTAPIS), on_restapi, st);
    store_on_change(op_store(op, OPK_SECRETS), on_secret, st);
    controller_set_ping_hook(op, controller_ping, NULL);
}

static int start(operator *op)
{
    slurmclient_state *st = slurmclient_of(op);
    int err = 0;
    if (op->opts.slurm_conf && *op->opts.slurm_conf && !st->lib) {
        if (!sl_available()) {
            log_warn("--slurm-conf %s given, but this build has no libslurm backend", op->opts.slurm_conf);
        } else {
            sl_options so = {.conf = op->opts.slurm_conf};
            int rc = sl_backend_new(op->loop, &so, &st->lib);
            if (rc < 0)
                log_error("libslurm backend with %s: %s", op->opts.slurm_conf, err_str(rc));
            else
                log_info("libslurm backend: %s (node and reservation writes that the REST API cannot do)",
                         op->opts.slurm_conf);
        }
    }
    if (op->opts.slurmrestd_ca && *op->opts.slurmrestd_ca && st->ca_pem == NULL) {
        int rc = file_read_all(op->opts.slurmrestd_ca, 4u << 20, &st->ca_pem, &st->ca_len);
        if (rc < 0)
            log_error("--slurmrestd-ca %s: %s; https slurmrestd URLs cannot be verified",
                      op->opts.slurmrestd_ca, err_str(rc));
    }
    wq_opts o = {.name = SLURMCLIENT_CONTROLLER, .handler = handle, .data = st, .metrics = op->metrics};
    st->q = wq_new(op->loop, &o, &err);
    if (st->q == NULL)
        return err;
    size_t it = 0;
    const sobj *c;
    while ((c = store_next(op_store(op, OPK_CONTROLLERS), &it)))
        wq_add(st->q, c->key);
    return 0;
}

static void stop(operator *op)
{
    slurmclient_state *st = slurmclient_of(op);
    if (st->q)
        wq_shutdown(st->q, NULL, NULL);
    st->q = NULL;
    /* Collect first: closing removes from the map. */
    size_t n = st->clusters.count, i = 0, it = 0;
    cluster **all = xcalloc(n + 1, sizeof(*all));
    const char *k;
    void *v;
    while (map_next(&st->clusters, &it, &k, &v))
        all[i++] = v;
    for (i = 0; i < n; i++)
        cluster_close(all[i], "stopping");
    free(all);
    map_free(&st->clusters);
    map_init(&st->clusters);
    free(st->ca_pem);
    st->ca_pem = NULL;
    st->ca_len = 0;
    if (st->closing_clusters == 0 && st->lib) {
        sl_backend_close(st->lib, NULL, NULL);
        st->lib = NULL;
    }
}

const op_reconciler RC_SLURMCLIENT = {
    .name = SLURMCLIENT_CONTROLLER,
    .slot = OPR_SLURMCLIENT,
    .new_state = state_new,
    .free_state = state_free,
    .free_late = 1, /* the last cluster to close frees it */
    .setup = setup,
    .start = start,
    .stop = stop,
};
