/* bench_http: synchronous HTTP and Kubernetes API calls over the harness
 * loop, and the Prometheus text parser with histogram arithmetic. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "core/err.h"
#include "core/json.h"

/* ------------------------------------------------------------------ */
/* plain HTTP */

struct http_wait {
    int done;
    bx_resp *resp;
};

static void http_done(hc_req *req, int status, const hc_response *r, void *data)
{
    struct http_wait *w = data;
    (void)req;
    w->resp->err = status;
    w->resp->status = r->status;
    w->resp->len = r->body_len;
    w->resp->body = xmalloc(r->body_len + 1);
    memcpy(w->resp->body, r->body, r->body_len);
    w->resp->body[r->body_len] = '\0';
    w->done = 1;
}

static int flag_pred(void *arg)
{
    return *(int *)arg;
}

int bx_http(bx_ctx *x, hc_pool *pool, const char *method, const char *path, const char *content_type,
            const char *body, double timeout_s, bx_resp *resp)
{
    struct http_wait w = {0, resp};
    hc_header h[2] = {{"Accept", "application/json"}, {"Content-Type", content_type ? content_type : ""}};
    hc_req_opts o;
    memset(resp, 0, sizeof(*resp));
    memset(&o, 0, sizeof(o));
    o.method = method;
    o.path = path;
    o.headers = h;
    o.n_headers = body ? 2 : 1;
    o.body = body;
    o.body_len = body ? strlen(body) : 0;
    o.request_timeout_ms = (unsigned)(timeout_s * 1000);
    o.on_done = http_done;
    o.data = &w;
    hc_req *req = hc_request(pool, &o);
    /* the request's own timeout ends it; an interruption cancels it, and
     * its callback (which writes into w) must have run before we return */
    if (bx_wait(x, flag_pred, &w.done, timeout_s + 5) != 0) {
        x->cleanup++;
        hc_cancel(req);
        (void)bx_wait(x, flag_pred, &w.done, 30);
        x->cleanup--;
        if (!w.done)
            abort(); /* cannot happen: cancel completes the request */
    }
    return resp->err;
}

void bx_resp_free(bx_resp *r)
{
    free(r->body);
    r->body = NULL;
}

hc_pool *bx_pool_new(bx_ctx *x, const char *base_url)
{
    int err = 0;
    hc_pool_opts o;
    memset(&o, 0, sizeof(o));
    o.max_conns = 4;
    o.max_body_bytes = 256u << 20;
    hc_pool *p = hc_pool_new(x->loop, base_url, &o, &err);
    if (p == NULL)
        bx_say(x, "bench: bad URL %s: %s", base_url, err_str(err));
    return p;
}

static void pool_closed(void *data)
{
    *(int *)data = 1;
}

void bx_pool_close(bx_ctx *x, hc_pool *pool)
{
    int done = 0;
    if (pool == NULL)
        return;
    x->cleanup++;
    hc_pool_close(pool, pool_closed, &done);
    (void)bx_wait(x, flag_pred, &done, 10);
    x->cleanup--;
}

/* ------------------------------------------------------------------ */
/* the API */

static const char *token_cb(void *data)
{
    return kcfg_token(data, uv_hrtime());
}

static void token_invalidate_cb(void *data)
{
    kcfg_token_invalidate(data);
}

int bx_api_open(bx_ctx *x, const char *kubeconfig_path, bx_api *api)
{
    char err[512];
    memset(api, 0, sizeof(*api));
    int rc = kcfg_load_file(kubeconfig_path, NULL, &api->cfg, err, sizeof(err));
    if (rc) {
        bx_say(x, "bench: kubeconfig %s: %s", kubeconfig_path, err);
        return rc;
    }
    hc_tls_opts tls = {
        .ca_pem = api->cfg->ca_pem,
        .ca_len = api->cfg->ca_len,
        .cert_pem = api->cfg->cert_pem,
        .cert_len = api->cfg->cert_len,
        .key_pem = api->cfg->key_pem,
        .key_len = api->cfg->key_len,
        .server_name = api->cfg->tls_server_name,
        .insecure_skip_verify = api->cfg->insecure,
    };
    kube_client_opts ko = {
        .server = api->cfg->server,
        .tls = api->cfg->tls ? &tls : NULL,
        .token = token_cb,
        .token_invalidate = token_invalidate_cb,
        .token_data = api->cfg,
        .qps = -1,
        .max_conns = 8,
        .request_timeout_ms = 120000,
        .user_agent = "slurmop-bench/" OP_VERSION,
    };
    api->kc = kube_client_new(x->loop, &ko, &rc);
    if (api->kc == NULL) {
        bx_say(x, "bench: API client for %s: %s", api->cfg->server, err_str(rc));
        kcfg_free(api->cfg);
        api->cfg = NULL;
        return rc;
    }
    return 0;
}

void bx_api_close(bx_ctx *x, bx_api *api)
{
    int done = 0;
    if (api->kc) {
        x->cleanup++;
        kube_client_close(api->kc, pool_closed, &done);
        (void)bx_wait(x, flag_pred, &done, 10);
        x->cleanup--;
    }
    kcfg_free(api->cfg);
    memset(api, 0, sizeof(*api));
}

struct kwait {
    int done;
    int err;
    cJSON *obj;
    kube_status st;
};

static void kcb(int err, const cJSON *obj, const kube_status *st, void *data)
{
    struct kwait *w = data;
    w->err = err;
    w->obj = obj ? cJSON_Duplicate(obj, 1) : NULL;
    if (st)
        w->st = *st;
    w->done = 1;
}

static int kfinish(bx_ctx *x, struct kwait *w, const char *what, cJSON **out)
{
    if (bx_wait(x, flag_pred, &w->done, 180) != 0) {
        bx_say(x, "bench: %s: no answer in 180 s", what);
        return OP_ETIMEOUT; /* w stays referenced: leak, the run is failing anyway */
    }
    if (out)
        *out = w->obj;
    else
        cJSON_Delete(w->obj);
    return w->err;
}

int bx_get(bx_ctx *x, bx_api *api, const kube_res *res, const char *ns, const char *name, cJSON **out)
{
    struct kwait *w = xcalloc(1, sizeof(*w));
    kube_get(api->kc, res, ns, name, NULL, kcb, w);
    int rc = kfinish(x, w, "GET", out);
    if (rc != OP_ETIMEOUT)
        free(w);
    return rc;
}

int bx_list(bx_ctx *x, bx_api *api, const kube_res *res, const char *ns, const char *query, cJSON **out)
{
    struct kwait *w = xcalloc(1, sizeof(*w));
    kube_list(api->kc, res, ns, query, kcb, w);
    int rc = kfinish(x, w, "LIST", out);
    if (rc != OP_ETIMEOUT)
        free(w);
    return rc;
}

int bx_create(bx_ctx *x, bx_api *api, const kube_res *res, const char *ns, const cJSON *obj, cJSON **out)
{
    struct kwait *w = xcalloc(1, sizeof(*w));
    kube_create(api->kc, res, ns, obj, kcb, w);
    int rc = kfinish(x, w, "POST", out);
    if (rc && rc != OP_ETIMEOUT && rc != OP_EEXISTS)
        bx_say(x, "bench: create %s: %s (%s)", res->plural, err_str(rc), w->st.message);
    if (rc != OP_ETIMEOUT)
        free(w);
    return rc;
}

int bx_patch(bx_ctx *x, bx_api *api, const kube_res *res, const char *ns, const char *name, const char *sub,
             const char *patch_json, cJSON **out)
{
    cJSON *patch = cJSON_Parse(patch_json);
    if (patch == NULL)
        return OP_EINVAL;
    struct kwait *w = xcalloc(1, sizeof(*w));
    kube_patch(api->kc, res, ns, name, sub, KUBE_PATCH_MERGE, patch, NULL, 0, kcb, w);
    cJSON_Delete(patch);
    int rc = kfinish(x, w, "PATCH", out);
    if (rc && rc != OP_ETIMEOUT)
        bx_say(x, "bench: patch %s/%s: %s (%s)", res->plural, name, err_str(rc), w->st.message);
    if (rc != OP_ETIMEOUT)
        free(w);
    return rc;
}

int bx_delete(bx_ctx *x, bx_api *api, const kube_res *res, const char *ns, const char *name)
{
    struct kwait *w = xcalloc(1, sizeof(*w));
    kube_delete_opts o = {.grace_seconds = -1};
    kube_delete(api->kc, res, ns, name, &o, kcb, w);
    int rc = kfinish(x, w, "DELETE", NULL);
    if (rc != OP_ETIMEOUT)
        free(w);
    return rc;
}

/* ------------------------------------------------------------------ */
/* Prometheus text */

void bx_metrics_parse(const char *text, bx_metrics *m)
{
    size_t cap = 256;
    m->n = 0;
    m->v = xmalloc(cap * sizeof(*m->v));
    const char *p = text;
    while (p && *p) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        if (len && *p != '#') {
            const char *q = p, *end = p + len;
            while (q < end && *q != '{' && *q != ' ')
                q++;
            const char *name_end = q, *lab = q, *lab_end = q;
            if (q < end && *q == '{') {
                lab = q + 1;
                /* label values may hold '}' inside quotes */
                int inq = 0;
                for (q = lab; q < end; q++) {
                    if (*q == '\\' && inq)
                        q++;
                    else if (*q == '"')
                        inq = !inq;
                    else if (*q == '}' && !inq)
                        break;
                }
                lab_end = q;
                if (q < end)
                    q++;
            }
            while (q < end && *q == ' ')
                q++;
            if (q < end) {
                if (m->n == cap) {
                    cap *= 2;
                    m->v = xrealloc(m->v, cap * sizeof(*m->v));
                }
                bx_sample *s = &m->v[m->n++];
                s->name = xstrndup(p, (size_t)(name_end - p));
                s->labels = xstrndup(lab, (size_t)(lab_end - lab));
                char *num = xstrndup(q, (size_t)(end - q));
                if (strncmp(num, "+Inf", 4) == 0)
                    s->v = INFINITY;
                else if (strncmp(num, "-Inf", 4) == 0)
                    s->v = -INFINITY;
                else if (strncmp(num, "NaN", 3) == 0)
                    s->v = NAN;
                else
                    s->v = strtod(num, NULL);
                free(num);
            }
        }
        p = eol ? eol + 1 : NULL;
    }
}

void bx_metrics_free(bx_metrics *m)
{
    for (size_t i = 0; i < m->n; i++) {
        free(m->v[i].name);
        free(m->v[i].labels);
    }
    free(m->v);
    m->v = NULL;
    m->n = 0;
}

/* Every comma-separated term of filter appears among the labels. Terms are
 * `k="v"`; a label set matches a term when it holds it as a whole pair. */
static int labels_match(const char *labels, const char *filter)
{
    if (filter == NULL || *filter == '\0')
        return 1;
    const char *f = filter;
    while (*f) {
        const char *comma = strchr(f, ',');
        size_t n = comma ? (size_t)(comma - f) : strlen(f);
        int found = 0;
        for (const char *t = labels; *t && !found; t++)
            found = (t == labels || t[-1] == ',') && strncmp(t, f, n) == 0 && (t[n] == ',' || t[n] == '\0');
        if (!found)
            return 0;
        f += n;
        if (*f == ',')
            f++;
    }
    return 1;
}

double bx_metric(const bx_metrics *m, const char *name, const char *filter)
{
    double sum = 0;
    for (size_t i = 0; i < m->n; i++)
        if (strcmp(m->v[i].name, name) == 0 && labels_match(m->v[i].labels, filter))
            sum += m->v[i].v;
    return sum;
}

int bx_metric_has(const bx_metrics *m, const char *name, const char *filter)
{
    for (size_t i = 0; i < m->n; i++)
        if (strcmp(m->v[i].name, name) == 0 && labels_match(m->v[i].labels, filter))
            return 1;
    return 0;
}

static double le_of(const char *labels)
{
    const char *p = strstr(labels, "le=\"");
    if (p == NULL)
        return NAN;
    p += 4;
    if (strncmp(p, "+Inf", 4) == 0)
        return INFINITY;
    return strtod(p, NULL);
}

int bx_hist_read(const bx_metrics *m, const char *name, const char *filter, bx_hist *h)
{
    char bname[256], sname[256], cname[256];
    snprintf(bname, sizeof(bname), "%s_bucket", name);
    snprintf(sname, sizeof(sname), "%s_sum", name);
    snprintf(cname, sizeof(cname), "%s_count", name);
    memset(h, 0, sizeof(*h));
    for (size_t i = 0; i < m->n; i++) {
        if (strcmp(m->v[i].name, bname) != 0 || !labels_match(m->v[i].labels, filter))
            continue;
        double le = le_of(m->v[i].labels);
        if (isnan(le))
            continue;
        /* keep the buckets sorted by bound; equal bounds (several children) add up */
        int k;
        for (k = 0; k < h->n && h->le[k] < le; k++)
            ;
        if (k < h->n && h->le[k] == le) {
            h->cum[k] += m->v[i].v;
            continue;
        }
        if (h->n == BX_HIST_MAX)
            continue;
        memmove(&h->le[k + 1], &h->le[k], (size_t)(h->n - k) * sizeof(double));
        memmove(&h->cum[k + 1], &h->cum[k], (size_t)(h->n - k) * sizeof(double));
        h->le[k] = le;
        h->cum[k] = m->v[i].v;
        h->n++;
    }
    if (h->n == 0)
        return OP_ENOTFOUND;
    h->sum = bx_metric(m, sname, filter);
    h->count = bx_metric(m, cname, filter);
    return 0;
}

int bx_hist_delta(const bx_metrics *m0, const bx_metrics *m1, const char *name, const char *filter,
                  bx_hist *h)
{
    int rc = bx_hist_read(m1, name, filter, h);
    bx_hist h0;
    if (rc == 0 && bx_hist_read(m0, name, filter, &h0) == 0)
        bx_hist_sub(h, &h0);
    return rc;
}

double bx_metric_delta(const bx_metrics *m0, const bx_metrics *m1, const char *name, const char *filter)
{
    if (!bx_metric_has(m1, name, filter))
        return NAN;
    return bx_metric(m1, name, filter) - bx_metric(m0, name, filter);
}

cJSON *bx_metric_deltas(const bx_metrics *m0, const bx_metrics *m1, const char *name)
{
    cJSON *o = cJSON_CreateObject();
    for (size_t i = 0; o && i < m1->n; i++) {
        const bx_sample *s = &m1->v[i];
        if (strcmp(s->name, name) != 0)
            continue;
        double d = s->v - bx_metric(m0, name, s->labels);
        if (d > 0)
            cJSON_AddNumberToObject(o, s->labels, d);
    }
    return o;
}

void bx_hist_sub(bx_hist *a, const bx_hist *b)
{
    for (int i = 0; i < a->n; i++)
        for (int j = 0; j < b->n; j++)
            if (b->le[j] == a->le[i])
                a->cum[i] -= b->cum[j];
    a->sum -= b->sum;
    a->count -= b->count;
}

double bx_hist_quantile(const bx_hist *h, double q)
{
    if (h->n == 0)
        return NAN;
    double total = h->cum[h->n - 1];
    if (total <= 0)
        return NAN;
    double rank = q * total;
    double lo = 0, below = 0;
    for (int i = 0; i < h->n; i++) {
        if (h->cum[i] >= rank && h->cum[i] > below) {
            if (isinf(h->le[i]))
                return i > 0 ? h->le[i - 1] : NAN;
            double in = h->cum[i] - below;
            return lo + (h->le[i] - lo) * ((rank - below) / in);
        }
        lo = isinf(h->le[i]) ? lo : h->le[i];
        below = h->cum[i];
    }
    return lo;
}

double bx_hist_max_bound(const bx_hist *h)
{
    if (h->n == 0 || h->cum[h->n - 1] <= 0)
        return NAN;
    for (int i = 0; i < h->n; i++)
        if (h->cum[i] >= h->cum[h->n - 1])
            return h->le[i];
    return INFINITY;
}

double bx_hist_frac_le(const bx_hist *h, double le)
{
    if (h->n == 0 || h->cum[h->n - 1] <= 0)
        return NAN;
    double best = 0;
    for (int i = 0; i < h->n; i++)
        if (h->le[i] <= le)
            best = h->cum[i];
    return best / h->cum[h->n - 1];
}
