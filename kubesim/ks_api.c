/* ks_api: routing, discovery and the verbs of the Kubernetes API.
 *
 * ks_engine.c authenticates and counts; everything that concerns the API
 * itself (paths, content negotiation, validation, preconditions, the
 * generic create/update/patch/delete flows, subresources, LIST and WATCH
 * parameters) is here, following docs/internals/KUBE-API.md.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kubesim/ks_int.h"
#include "core/crypto.h"
#include "core/err.h"
#include "core/json.h"
#include "core/labels.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/rfc3339.h"
#include "core/smp.h"
#include "core/yaml.h"

#define MAX_BODY (3u * 1024 * 1024)

static const char GEN_ALPHABET[] = "bcdfghjklmnpqrstvwxz2456789";

/* ---- small helpers ----------------------------------------------------- */

static char *qparam(const ks_ctx *c, const char *name)
{
    return query_get(c->req->query, name);
}

static void respond_ver(ks_ctx *c, int code, const ks_ver *v)
{
    buf_reset(&c->resp->body);
    c->resp->status = code;
    c->resp->content_type = "application/json";
    if (watch_emit_obj(&c->resp->body, c->res, c->view, v, 1) != 0)
        abort();
}

static void set_verb(ks_ctx *c, const char *verb)
{
    free(c->verb);
    c->verb = xstrdup(verb);
}

static void internal_error(ks_resp *r, const char *msg)
{
    buf_reset(&r->body);
    r->status = 500;
    r->content_type = "application/json";
    char *m = xasprintf("Internal error occurred: %s", msg);
    ks_put(&r->body,
        "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":");
    ks_putq(&r->body, m);
    ks_put(&r->body, ",\"reason\":\"InternalError\",\"details\":{\"causes\":[{\"message\":");
    ks_putq(&r->body, msg);
    ks_put(&r->body, "}]},\"code\":500}\n");
    free(m);
}

static void method_not_allowed(ks_resp *r)
{
    /* The real body carries an empty details object. */
    buf_reset(&r->body);
    r->status = 405;
    r->content_type = "application/json";
    ks_put(&r->body,
           "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":"
           "\"the server does not allow this method on the requested resource\",\"reason\":"
           "\"MethodNotAllowed\",\"details\":{},\"code\":405}\n");
}

static void not_found_plain(ks_resp *r)
{
    resp_plain(r, 404, "404 page not found\n");
}

/* Media types: is this Accept header satisfiable with plain JSON? */
static int accept_json(const char *accept)
{
    if (accept == NULL || *accept == '\0')
        return 1;
    const char *p = accept;
    while (*p) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        char item[512];
        snprintf(item, sizeof(item), "%.*s", (int)(len < sizeof(item) - 1 ? len : sizeof(item) - 1), p);
        char *s = item;
        while (*s == ' ')
            s++;
        char *semi = strchr(s, ';');
        char *params = semi ? semi + 1 : NULL;
        if (semi)
            *semi = '\0';
        char *end = s + strlen(s);
        while (end > s && end[-1] == ' ')
            *--end = '\0';
        int typed_json = strcasecmp(s, "application/json") == 0;
        /* "as=..." asks for a different object shape (Table, APIGroupDiscoveryList, PartialObjectMetadata) */
        int shaped = params && strstr(params, "as=") != NULL;
        if (strcmp(s, "*/*") == 0 || strcasecmp(s, "application/*") == 0 || (typed_json && !shaped))
            return 1;
        p = e ? e + 1 : p + len;
    }
    return 0;
}

static void media_type(const char *ct, char *out, size_t n)
{
    if (ct == NULL) {
        out[0] = '\0';
        return;
    }
    while (*ct == ' ')
        ct++;
    size_t i = 0;
    for (; ct[i] && ct[i] != ';' && ct[i] != ' ' && i + 1 < n; i++)
        out[i] = (char)tolower((unsigned char)ct[i]);
    out[i] = '\0';
}

/* Parse a request body (JSON or YAML by Content-Type). On failure the
 * response is set and NULL returned. */
static cJSON *parse_body(ks_ctx *c, int allow_yaml)
{
    const ks_req *q = c->req;
    if (q->body_len > MAX_BODY) {
        resp_status(c->resp, 413, "RequestEntityTooLarge", "Request entity too large: limit is 3145728", NULL,
                    NULL, NULL, NULL);
        return NULL;
    }
    char mt[128];
    media_type(q->content_type, mt, sizeof(mt));
    int yaml = 0;
    if (mt[0] == '\0' || strcmp(mt, "application/json") == 0) {
        yaml = 0;
    } else if (allow_yaml && strcmp(mt, "application/yaml") == 0) {
        yaml = 1;
    } else if (allow_yaml && strcmp(mt, "application/vnd.kubernetes.protobuf") == 0) {
        /* kubectl's typed clients (kubectl create configmap|secret|namespace|serviceaccount) */
        char err[320];
        cJSON *o = proto_decode(q->body ? q->body : "", q->body_len, err, sizeof(err));
        if (o == NULL)
            resp_statusf(c->resp, 415, "UnsupportedMediaType", "%s", err);
        return o;
    } else {
        resp_statusf(c->resp, 415, "UnsupportedMediaType",
                     "the body of the request was in an unknown format - accepted media types include: "
                     "application/json, application/yaml");
        return NULL;
    }
    cJSON *o;
    if (yaml) {
        char err[256];
        o = yaml_parse(q->body ? q->body : "", q->body_len, err, sizeof(err));
        if (o == NULL) {
            resp_bad_request(c->resp, "the body of the request could not be decoded as YAML: %s", err);
            return NULL;
        }
    } else {
        const char *errpos = NULL;
        o = json_parse_untrusted(q->body ? q->body : "", q->body_len, &errpos);
        if (o == NULL) {
            long off = errpos && q->body ? (long)(errpos - q->body) : 0;
            if (q->body_len == 0)
                resp_bad_request(c->resp,
                                 "couldn't get version/kind; json parse error: unexpected end of JSON input");
            else
                resp_bad_request(
                    c->resp, "couldn't get version/kind; json parse error: invalid JSON near byte offset %ld",
                    off);
            return NULL;
        }
    }
    if (!cJSON_IsObject(o)) {
        resp_bad_request(c->resp,
                         "couldn't get version/kind; json parse error: the body is not a JSON object");
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

/* kind/apiVersion in a body must name this resource; absent ones are filled in. */
static int check_gvk(ks_ctx *c, cJSON *o, const char *want_kind, const char *want_api)
{
    const char *kind = json_get_str(o, "kind");
    const char *api = json_get_str(o, "apiVersion");
    if (kind && *kind && strcmp(kind, want_kind) != 0) {
        resp_bad_request(c->resp,
                         "%s in version \"%s\" cannot be handled as a %s: no kind \"%s\" is registered for "
                         "version \"%s\"",
                         kind, api ? api : "", want_kind, kind, want_api);
        return -1;
    }
    if (api && *api && strcmp(api, want_api) != 0) {
        resp_bad_request(c->resp,
                         "the API version in the data (%s) does not match the expected API version (%s)", api,
                         want_api);
        return -1;
    }
    /* kind and apiVersion lead the object */
    json_del(o, "kind");
    json_del(o, "apiVersion");
    cJSON *k = cJSON_CreateString(want_kind), *a = cJSON_CreateString(want_api);
    k->string = xstrdup("kind");
    a->string = xstrdup("apiVersion");
    k->next = a;
    a->prev = k;
    a->next = o->child;
    if (o->child) {
        k->prev = o->child->prev;
        o->child->prev = a;
    } else {
        k->prev = a;
    }
    o->child = k;
    return 0;
}

static const char *obj_name(const cJSON *o)
{
    return json_get_str_or(o, "metadata.name", "");
}

/* Body namespace vs URL namespace (filled when empty). */
static int check_namespace(ks_ctx *c, cJSON *o)
{
    cJSON *meta = json_obj_ensure(o, "metadata");
    if (!c->res->namespaced) {
        json_del(meta, "namespace");
        return 0;
    }
    const char *ns = json_get_str(meta, "namespace");
    if (ns == NULL || *ns == '\0') {
        json_set_str(meta, "namespace", c->ns);
        return 0;
    }
    if (strcmp(ns, c->ns) != 0) {
        resp_bad_request(c->resp,
                         "the namespace of the object (%s) does not match the namespace on the request (%s)",
                         ns, c->ns);
        return -1;
    }
    return 0;
}

static int check_name(ks_ctx *c, cJSON *o)
{
    cJSON *meta = json_obj_ensure(o, "metadata");
    const char *n = json_get_str(meta, "name");
    if (n == NULL || *n == '\0') {
        json_set_str(meta, "name", c->name);
        return 0;
    }
    if (strcmp(n, c->name) != 0) {
        resp_bad_request(c->resp, "the name of the object (%s) does not match the name on the URL (%s)", n,
                         c->name);
        return -1;
    }
    return 0;
}

static ks_obj *find_namespace(ks *k, const char *ns)
{
    ks_res *nr = res_find(k, "", "namespaces");
    return nr ? obj_find(nr, NULL, ns) : NULL;
}

/* The namespace of a create must exist and not be terminating. */
static int check_ns_exists(ks_ctx *c, const char *name)
{
    if (!c->res->namespaced)
        return 0;
    ks_obj *n = find_namespace(c->k, c->ns);
    if (n == NULL) {
        char *msg = xasprintf("namespaces \"%s\" not found", c->ns);
        resp_status(c->resp, 404, "NotFound", msg, c->ns, NULL, "namespaces", NULL);
        free(msg);
        return -1;
    }
    cJSON *nso = ver_parse(n->cur);
    int terminating = json_get_str(nso, "metadata.deletionTimestamp") != NULL;
    cJSON_Delete(nso);
    if (terminating) {
        buf_t *b = &c->resp->body;
        buf_reset(b);
        c->resp->status = 403;
        c->resp->content_type = "application/json";
        char *msg =
            xasprintf("%s \"%s\" is forbidden: unable to create new content in namespace %s because it is "
                      "being terminated",
                      c->res->qual, name, c->ns);
        char *cm = xasprintf("namespace %s is being terminated", c->ns);
        ks_put(b,
            "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":");
        ks_putq(b, msg);
        ks_put(b, ",\"reason\":\"Forbidden\",\"details\":{\"name\":");
        ks_putq(b, name);
        ks_put(b, ",\"group\":");
        ks_putq(b, c->res->group);
        ks_put(b, ",\"kind\":");
        ks_putq(b, c->res->plural);
        ks_put(b, ",\"causes\":[{\"reason\":\"NamespaceTerminating\",\"message\":");
        ks_putq(b, cm);
        ks_put(b, ",\"field\":\"metadata.namespace\"}]},\"code\":403}\n");
        free(msg);
        free(cm);
        return -1;
    }
    return 0;
}

static void validate_meta(ks_ctx *c, const cJSON *o, ks_errs *e)
{
    const cJSON *labels = json_get(o, "metadata.labels");
    for (const cJSON *l = cJSON_IsObject(labels) ? labels->child : NULL; l; l = l->next) {
        if (!label_key_valid(l->string))
            errs_add(e, "FieldValueInvalid", "metadata.labels",
                     "Invalid value: \"%s\": name part must consist of alphanumeric characters, '-', '_' or "
                     "'.', and "
                     "must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or "
                     "'123-abc', "
                     "regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
                     l->string);
        else if (!cJSON_IsString(l) || !label_value_valid(l->valuestring))
            errs_add(
                e, "FieldValueInvalid", "metadata.labels",
                "Invalid value: \"%s\": a valid label must be an empty string or consist of alphanumeric "
                "characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. "
                "'MyValue',  or 'my_value',  or '12345', regex used for validation is "
                "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
                cJSON_IsString(l) ? l->valuestring : "");
    }
    const cJSON *ann = json_get(o, "metadata.annotations");
    for (const cJSON *a = cJSON_IsObject(ann) ? ann->child : NULL; a; a = a->next)
        if (!cJSON_IsString(a))
            errs_add(e, "FieldValueInvalid", "metadata.annotations",
                     "Invalid value: \"%s\": must be a string", a->string);
    const cJSON *orefs = json_get(o, "metadata.ownerReferences");
    int controllers = 0, i = 0;
    for (const cJSON *r = cJSON_IsArray(orefs) ? orefs->child : NULL; r; r = r->next, i++) {
        char f[96];
        static const char *const req[] = {"apiVersion", "kind", "name", "uid"};
        for (int j = 0; j < 4; j++) {
            const char *v = json_get_str(r, req[j]);
            if (v == NULL || *v == '\0') {
                snprintf(f, sizeof(f), "metadata.ownerReferences.%s", req[j]);
                errs_add(e, "FieldValueInvalid", f, "Invalid value: \"\": %s must not be empty", req[j]);
            }
        }
        if (json_get_bool(r, "controller", 0))
            controllers++;
    }
    if (controllers > 1)
        errs_add(
            e, "FieldValueInvalid", "metadata.ownerReferences",
            "Invalid value: []v1.OwnerReference{...}: Only one reference can have Controller set to true");
    (void)c;
}

static void validate_name(ks_ctx *c, const char *name, ks_errs *e)
{
    if (c->res->bi && (strcmp(c->res->plural, "namespaces") == 0 || strcmp(c->res->plural, "services") == 0))
        return; /* checked by the type with its own rule */
    if (!dns_subdomain_ok(name))
        errs_add(e, "FieldValueInvalid", "metadata.name", "Invalid value: \"%s\": %s", name,
                 dns_subdomain_msg());
}

static int has_status_sub(const ks_ctx *c)
{
    return c->res->views[c->view].has_status;
}

/* ---- generation -------------------------------------------------------- */

/* Did anything that counts for metadata.generation change? CRs: anything
 * outside metadata (and status, with the status subresource); built-ins:
 * the spec. */
static int generation_changed(const ks_res *r, const ks_view *v, const cJSON *a, const cJSON *b)
{
    if (r->flags & KSR_CUSTOM) {
        cJSON *x = cJSON_Duplicate(a, 1), *y = cJSON_Duplicate(b, 1);
        json_del(x, "metadata");
        json_del(y, "metadata");
        if (v->has_status) {
            json_del(x, "status");
            json_del(y, "status");
        }
        int changed = !json_equal(x, y);
        cJSON_Delete(x);
        cJSON_Delete(y);
        return changed;
    }
    return !json_equal(json_child(a, "spec"), json_child(b, "spec"));
}

/* ---- create ------------------------------------------------------------ */

static void gen_name(ks *k, const char *prefix, char *out, size_t n)
{
    char p[64];
    snprintf(p, sizeof(p), "%.58s", prefix);
    char suffix[6];
    for (int i = 0; i < 5; i++)
        suffix[i] = GEN_ALPHABET[ks_rand(k) % (sizeof(GEN_ALPHABET) - 1)];
    suffix[5] = '\0';
    snprintf(out, n, "%s%s", p, suffix);
}

static void strip_server_meta(cJSON *meta)
{
    json_del(meta, "selfLink");
    json_del(meta, "deletionTimestamp");
    json_del(meta, "deletionGracePeriodSeconds");
}

static int dry_run(const ks_ctx *c)
{
    char *d = qparam(c, "dryRun");
    int r = d && strcmp(d, "All") == 0;
    free(d);
    return r;
}

static void add_warning(ks_ctx *c, const buf_t *warn)
{
    if (warn->len == 0)
        return;
    const char *p = warn->data;
    while (*p) {
        const char *e = strchr(p, '\n');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        /* 299 - "text" with quotes escaped */
        ks_put(&c->resp->headers, "Warning: 299 - \"");
        for (size_t i = 0; i < n; i++) {
            if (p[i] == '"' || p[i] == '\\')
                ks_put(&c->resp->headers, "\\");
            if (buf_putc(&c->resp->headers, p[i]) != 0)
                abort();
        }
        ks_put(&c->resp->headers, "\"\r\n");
        p = e ? e + 1 : p + n;
    }
}

/* Prune/default/validate a custom object; 0 or -1 with the response set. */
static int cr_admit(ks_ctx *c, cJSON *o)
{
    const ks_view *v = &c->res->views[c->view];
    buf_t warn;
    buf_init(&warn, BUF_UNLIMITED);
    types_cr_prune_default(v, o, &warn);
    char *fv = qparam(c, "fieldValidation");
    int strict = fv && strcmp(fv, "Strict") == 0, ignore = fv && strcmp(fv, "Ignore") == 0;
    free(fv);
    if (strict && warn.len) {
        char *m = xasprintf("strict decoding error: %s", warn.data);
        for (char *p = m; *p; p++)
            if (*p == '\n')
                *p = ',';
        resp_status(c->resp, 400, "BadRequest", m, NULL, NULL, NULL, NULL);
        free(m);
        buf_free(&warn);
        return -1;
    }
    if (!ignore)
        add_warning(c, &warn);
    buf_free(&warn);
    ks_errs e = {0};
    types_cr_validate(v, o, &e);
    if (e.n) {
        resp_invalid(c->resp, c->res->qual_kind, c->res->group, c->res->kind, obj_name(o), &e);
        errs_free(&e);
        return -1;
    }
    return 0;
}

/* Create obj (parsed body, gvk checked, namespace filled). Takes obj. */
static void do_create_obj(ks_ctx *c, cJSON *o, const char *manager_apply)
{
    ks *k = c->k;
    ks_res *r = c->res;
    cJSON *meta = json_obj_ensure(o, "metadata");
    const char *rv = json_get_str(meta, "resourceVersion");
    if (rv && *rv && strcmp(rv, "0") != 0) {
        internal_error(c->resp, "resourceVersion should not be set on objects to be created");
        cJSON_Delete(o);
        return;
    }
    json_del(meta, "resourceVersion");
    const char *name = json_get_str(meta, "name");
    const char *gen = json_get_str(meta, "generateName");
    ks_errs e = {0};
    if ((name == NULL || !*name) && (gen == NULL || !*gen)) {
        ERR_REQUIRED_D(&e, "metadata.name", "name or generateName is required");
        resp_invalid(c->resp, r->qual_kind, r->group, r->kind, "", &e);
        errs_free(&e);
        cJSON_Delete(o);
        return;
    }
    if (check_ns_exists(c, name && *name ? name : "") != 0) {
        cJSON_Delete(o);
        return;
    }
    int generated = 0;
    if (name == NULL || !*name) {
        char nm[128];
        for (int attempt = 0; attempt < 8; attempt++) {
            gen_name(k, gen, nm, sizeof(nm));
            if (!obj_find(r, c->ns, nm))
                break;
        }
        json_set_str(meta, "name", nm);
        name = json_get_str(meta, "name");
        generated = 1;
    }
    (void)generated;
    validate_name(c, name, &e);
    validate_meta(c, o, &e);
    strip_server_meta(meta);
    char uid[37];
    uuid_v4(uid);
    json_set_str(meta, "uid", uid);
    char ts[32];
    rfc3339_now(ts, 0);
    json_set_str(meta, "creationTimestamp", ts);
    if (r->flags & KSR_GENERATION)
        json_set_int(meta, "generation", 1);
    else
        json_del(meta, "generation");
    if (!manager_apply)
        json_del(meta, "managedFields");
    if (e.n == 0 && r->bi && r->bi->on_create)
        r->bi->on_create(k, r, o, &e);
    if (e.n) {
        resp_invalid(c->resp, r->qual_kind, r->group, r->kind, name, &e);
        errs_free(&e);
        cJSON_Delete(o);
        return;
    }
    if (r->flags & KSR_CUSTOM) {
        if (has_status_sub(c))
            json_del(o, "status");
        if (cr_admit(c, o) != 0) {
            cJSON_Delete(o);
            return;
        }
    }
    if (obj_find(r, c->ns, name)) {
        resp_already_exists(c->resp, r, name);
        cJSON_Delete(o);
        return;
    }
    ks_ver *v = NULL;
    ks_store_create(k, r, o, dry_run(c) ? WR_DRY_RUN : 0, &v);
    respond_ver(c, 201, v);
    ver_unref(v);
}

static int crd_terminating(ks_ctx *c)
{
    if (!(c->res->flags & KSR_CUSTOM))
        return 0;
    ks_res *cr = res_find(c->k, "apiextensions.k8s.io", "customresourcedefinitions");
    ks_obj *crd = cr ? obj_find(cr, NULL, c->res->crd_name) : NULL;
    if (crd == NULL)
        return 0;
    cJSON *o = ver_parse(crd->cur);
    int t = json_get_str(o, "metadata.deletionTimestamp") != NULL;
    cJSON_Delete(o);
    if (t) {
        char *m = xasprintf("create not allowed while custom resource definition is terminating");
        resp_status(c->resp, 405, "MethodNotAllowed", m, NULL, NULL, NULL, NULL);
        free(m);
    }
    return t;
}

static void do_create(ks_ctx *c)
{
    set_verb(c, "create");
    if (c->res->namespaced && c->ns == NULL) {
        method_not_allowed(c->resp);
        return;
    }
    if (crd_terminating(c))
        return;
    cJSON *o = parse_body(c, 1);
    if (o == NULL)
        return;
    if (check_gvk(c, o, c->res->kind, c->res->views[c->view].api_version) != 0 ||
        check_namespace(c, o) != 0) {
        cJSON_Delete(o);
        return;
    }
    do_create_obj(c, o, NULL);
}

/* ---- update ------------------------------------------------------------ */

enum upd_kind { UPD_MAIN, UPD_STATUS };

static int string_in(const cJSON *arr, const char *s)
{
    for (const cJSON *x = arr ? arr->child : NULL; x; x = x->next)
        if (cJSON_IsString(x) && strcmp(x->valuestring, s) == 0)
            return 1;
    return 0;
}

static char *field_manager(const ks_ctx *c)
{
    char *fm = qparam(c, "fieldManager");
    if (fm && *fm)
        return fm;
    free(fm);
    const char *ua = c->req->user_agent;
    if (ua == NULL || *ua == '\0')
        return xstrdup("unknown");
    const char *slash = strchr(ua, '/');
    return xstrndup(ua, slash ? (size_t)(slash - ua) : strlen(ua));
}

/* The common tail of PUT and PATCH: new is the complete desired object
 * (incoming), old the stored one. Takes incoming. */
static void finish_update(ks_ctx *c, ks_obj *o, cJSON *in, enum upd_kind kind, int from_apply)
{
    ks *k = c->k;
    ks_res *r = c->res;
    const ks_view *view = &r->views[c->view];
    cJSON *old = ver_parse(o->cur);
    const char *name = ver_name(o->cur);
    cJSON *meta = json_obj_ensure(in, "metadata");
    const cJSON *ometa = json_child(old, "metadata");

    /* uid: kept when omitted, a different one is a failed precondition */
    const char *uid = json_get_str(meta, "uid");
    if (uid && *uid && strcmp(uid, o->uid) != 0) {
        char *why =
            xasprintf("Precondition failed: UID in precondition: %s, UID in object meta: %s", uid, o->uid);
        resp_conflict(c->resp, r, name, why);
        free(why);
        goto out;
    }

    cJSON *out = NULL;
    if (kind == UPD_STATUS) {
        /* Only the status is taken from the request. */
        out = cJSON_Duplicate(old, 1);
        cJSON *st = cJSON_DetachItemFromObjectCaseSensitive(in, "status");
        if (st)
            json_set(out, "status", st);
        else
            json_del(out, "status");
        if (r->bi && strcmp(r->plural, "pods") == 0 && !*r->group) {
            /* pods/status keeps the spec, deletionTimestamp and ownerReferences but takes other metadata */
            cJSON *nm = cJSON_Duplicate(meta, 1);
            static const char *const keep[] = {"deletionTimestamp", "deletionGracePeriodSeconds",
                                               "ownerReferences",   "uid",
                                               "creationTimestamp", "generation",
                                               "resourceVersion"};
            for (size_t i = 0; i < ARRAY_SIZE(keep); i++) {
                const cJSON *ov = json_child(ometa, keep[i]);
                json_del(nm, keep[i]);
                if (ov)
                    json_set(nm, keep[i], cJSON_Duplicate(ov, 1));
            }
            json_set(out, "metadata", nm);
        }
        const cJSON *mf = json_child(meta, "managedFields");
        if (mf && from_apply)
            json_set(json_obj_ensure(out, "metadata"), "managedFields", cJSON_Duplicate(mf, 1));
        cJSON_Delete(in);
        in = out;
        meta = json_obj_ensure(in, "metadata");
    } else {
        /* server-owned metadata */
        static const char *const owned[] = {
            "uid",     "creationTimestamp", "generation", "deletionTimestamp", "deletionGracePeriodSeconds",
            "selfLink"};
        for (size_t i = 0; i < ARRAY_SIZE(owned); i++) {
            const cJSON *ov = json_child(ometa, owned[i]);
            json_del(meta, owned[i]);
            if (ov)
                json_set(meta, owned[i], cJSON_Duplicate(ov, 1));
        }
        if (!from_apply) {
            json_del(meta, "managedFields");
            const cJSON *mf = json_child(ometa, "managedFields");
            if (mf)
                json_set(meta, "managedFields", cJSON_Duplicate(mf, 1));
        }
        if (view->has_status) {
            json_del(in, "status");
            const cJSON *ost = json_child(old, "status");
            if (ost)
                json_set(in, "status", cJSON_Duplicate(ost, 1));
        }
    }

    ks_errs e = {0};
    /* no new finalizers while deleting */
    if (json_get_str(ometa, "deletionTimestamp")) {
        const cJSON *nf = json_child(meta, "finalizers"), *of = json_child(ometa, "finalizers");
        buf_t added;
        buf_init(&added, BUF_UNLIMITED);
        for (const cJSON *f = nf ? nf->child : NULL; f; f = f->next)
            if (cJSON_IsString(f) && !string_in(of, f->valuestring) &&
                buf_printf(&added, "%s\"%s\"", added.len ? ", " : "", f->valuestring) != 0)
                abort();
        if (added.len)
            errs_add(&e, "FieldValueForbidden", "metadata.finalizers",
                     "Forbidden: no new finalizers can be added if the object is being deleted, found new "
                     "finalizers "
                     "[]string{%s}",
                     added.data);
        buf_free(&added);
    }
    validate_meta(c, in, &e);
    if (e.n == 0 && kind == UPD_MAIN && r->bi && r->bi->on_update)
        r->bi->on_update(k, r, in, old, &e);
    if (e.n) {
        resp_invalid(c->resp, r->qual_kind, r->group, r->kind, name, &e);
        errs_free(&e);
        goto out;
    }
    if ((r->flags & KSR_CUSTOM) && kind == UPD_MAIN && cr_admit(c, in) != 0)
        goto out;
    if ((r->flags & KSR_CUSTOM) && kind == UPD_STATUS) {
        ks_errs e2 = {0};
        types_cr_validate(view, in, &e2);
        if (e2.n) {
            resp_invalid(c->resp, r->qual_kind, r->group, r->kind, name, &e2);
            errs_free(&e2);
            goto out;
        }
    }
    if (kind == UPD_MAIN && (r->flags & KSR_GENERATION) && generation_changed(r, view, in, old))
        json_set_int(meta, "generation", json_get_int(ometa, "generation", 1) + 1);
    if (!from_apply && json_child(ometa, "managedFields")) {
        char *mgr = field_manager(c);
        patch_ssa_record_update(r, c->view, old, in, mgr, kind == UPD_STATUS ? "status" : NULL);
        free(mgr);
    }
    ks_ver *v = NULL;
    int gone = 0;
    ks_store_update(k, o, in, dry_run(c) ? WR_DRY_RUN : 0, &v, &gone);
    in = NULL;
    respond_ver(c, 200, v);
    ver_unref(v);
out:
    cJSON_Delete(in);
    cJSON_Delete(old);
}

/* RV precondition of a PUT/PATCH body. 0 when it may proceed. */
static int check_rv(ks_ctx *c, ks_obj *o, const cJSON *in, int required)
{
    const char *rv = json_get_str(in, "metadata.resourceVersion");
    if (rv == NULL || *rv == '\0') {
        if (required) {
            ks_errs e = {0};
            errs_add(&e, "FieldValueInvalid", "metadata.resourceVersion",
                     "Invalid value: 0x0: must be specified for an update");
            resp_invalid(c->resp, c->res->qual_kind, c->res->group, c->res->kind, ver_name(o->cur), &e);
            errs_free(&e);
            return -1;
        }
        return 0;
    }
    uint64_t n;
    if (parse_u64(rv, &n) != 0 || n != o->cur->rv) {
        resp_conflict_modified(c->resp, c->res, ver_name(o->cur));
        return -1;
    }
    return 0;
}

static void do_update(ks_ctx *c, enum upd_kind kind)
{
    set_verb(c, "update");
    cJSON *in = parse_body(c, 1);
    if (in == NULL)
        return;
    if (check_gvk(c, in, c->res->kind, c->res->views[c->view].api_version) != 0 ||
        check_namespace(c, in) != 0 || check_name(c, in) != 0) {
        cJSON_Delete(in);
        return;
    }
    ks_obj *o = obj_find(c->res, c->ns, c->name);
    if (o == NULL) {
        if ((c->res->flags & KSR_CREATE_ON_UPDATE) && kind == UPD_MAIN) {
            do_create_obj(c, in, NULL);
            return;
        }
        resp_not_found(c->resp, c->res, c->name);
        cJSON_Delete(in);
        return;
    }
    if (check_rv(c, o, in, (c->res->flags & KSR_RV_REQUIRED) != 0) != 0) {
        cJSON_Delete(in);
        return;
    }
    finish_update(c, o, in, kind, 0);
}

/* ---- patch ------------------------------------------------------------- */

enum ptype { P_NONE, P_MERGE, P_JSON, P_SMP, P_APPLY };

static enum ptype patch_type(const char *ct)
{
    char mt[128];
    media_type(ct, mt, sizeof(mt));
    if (strcmp(mt, "application/merge-patch+json") == 0)
        return P_MERGE;
    if (strcmp(mt, "application/json-patch+json") == 0)
        return P_JSON;
    if (strcmp(mt, "application/strategic-merge-patch+json") == 0)
        return P_SMP;
    if (strcmp(mt, "application/apply-patch+yaml") == 0)
        return P_APPLY;
    return P_NONE;
}

static int patch_unsupported(ks_ctx *c, int custom)
{
    resp_statusf(
        c->resp, 415, "UnsupportedMediaType",
        "the body of the request was in an unknown format - accepted media types include: %s",
        custom ? "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
               : "application/json-patch+json, application/merge-patch+json, "
                 "application/strategic-merge-patch+json, application/apply-patch+yaml");
    return -1;
}

/* Apply a non-apply patch to a copy of cur. NULL with the response set on error. */
static cJSON *patch_doc(ks_ctx *c, const cJSON *cur, enum ptype pt)
{
    const ks_req *q = c->req;
    cJSON *doc = cJSON_Duplicate(cur, 1);
    if (pt == P_JSON) {
        char msg[512];
        int rc = patch_json_apply(&doc, q->body ? q->body : "", q->body_len, msg, sizeof(msg));
        if (rc == OP_EPARSE) {
            resp_bad_request(c->resp, "%s", msg);
            cJSON_Delete(doc);
            return NULL;
        }
        if (rc != 0) {
            /* kube-apiserver 1.35 answers every failed operation (test,
             * missing path) with the generic 422 and no cause; the detail
             * goes to kubesim's log only. */
            log_debug("kubesim: JSON patch failed: %s", msg);
            buf_t *b = &c->resp->body;
            buf_reset(b);
            c->resp->status = 422;
            c->resp->content_type = "application/json";
            ks_put(
                b,
                "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
                "\"message\":\"the server rejected our request due to an error in our request\",\"reason\":"
                "\"Invalid\",\"details\":{},\"code\":422}\n");
            cJSON_Delete(doc);
            return NULL;
        }
        return doc;
    }
    const char *errpos = NULL;
    cJSON *p = json_parse_untrusted(q->body ? q->body : "", q->body_len, &errpos);
    if (p == NULL) {
        resp_bad_request(c->resp, "error decoding patch: invalid JSON near byte offset %ld",
                         errpos && q->body ? (long)(errpos - q->body) : 0L);
        cJSON_Delete(doc);
        return NULL;
    }
    if (!cJSON_IsObject(p)) {
        resp_bad_request(c->resp, "error decoding patch: the patch is not a JSON object");
        cJSON_Delete(doc);
        cJSON_Delete(p);
        return NULL;
    }
    if (pt == P_MERGE) {
        doc = json_merge_patch(doc, p);
    } else {
        int err = 0;
        doc = smp_apply(doc, p, 0, &err);
        if (err) {
            resp_bad_request(c->resp, "error applying strategic merge patch: invalid patch directive");
            cJSON_Delete(doc);
            cJSON_Delete(p);
            return NULL;
        }
    }
    cJSON_Delete(p);
    if (!cJSON_IsObject(doc)) {
        resp_bad_request(c->resp, "the patch did not produce an object");
        cJSON_Delete(doc);
        return NULL;
    }
    return doc;
}

static void do_scale_write(ks_ctx *c, ks_obj *o, cJSON *scale);
static cJSON *build_scale(ks_ctx *c, ks_obj *o);

static void do_patch(ks_ctx *c, enum upd_kind kind, int scale)
{
    set_verb(c, "patch");
    ks_res *r = c->res;
    enum ptype pt = patch_type(c->req->content_type);
    int custom = (r->flags & KSR_CUSTOM) != 0;
    if (pt == P_NONE || (pt == P_SMP && custom && !scale)) {
        patch_unsupported(c, custom);
        return;
    }
    if (c->req->body_len > MAX_BODY) {
        resp_status(c->resp, 413, "RequestEntityTooLarge", "Request entity too large: limit is 3145728", NULL,
                    NULL, NULL, NULL);
        return;
    }
    char *force = qparam(c, "force");
    int forced = query_bool(c->req->query, "force", 0);
    if (force && pt != P_APPLY) {
        free(force);
        ks_errs e = {0};
        ERR_FORBIDDEN(&e, "force", "may not be specified for non-apply patch");
        resp_invalid(c->resp, "PatchOptions.meta.k8s.io", "meta.k8s.io", "PatchOptions", "", &e);
        errs_free(&e);
        return;
    }
    free(force);
    char *fm = qparam(c, "fieldManager");
    if (pt == P_APPLY && (fm == NULL || *fm == '\0')) {
        free(fm);
        ks_errs e = {0};
        ERR_REQUIRED_D(&e, "fieldManager", "is required for apply patch");
        resp_invalid(c->resp, "PatchOptions.meta.k8s.io", "meta.k8s.io", "PatchOptions", "", &e);
        errs_free(&e);
        return;
    }
    if (fm && strlen(fm) > 128) {
        free(fm);
        ks_errs e = {0};
        errs_add(&e, "FieldValueTooLong", "fieldManager", "Too long: may not be more than 128 bytes");
        resp_invalid(c->resp, "PatchOptions.meta.k8s.io", "meta.k8s.io", "PatchOptions", "", &e);
        errs_free(&e);
        return;
    }
    ks_obj *o = obj_find(r, c->ns, c->name);
    if (pt == P_APPLY) {
        char err[256];
        cJSON *cfg = yaml_parse(c->req->body ? c->req->body : "", c->req->body_len, err, sizeof(err));
        if (cfg == NULL || !cJSON_IsObject(cfg)) {
            resp_bad_request(c->resp, "error decoding YAML: %s", cfg ? "not an object" : err);
            cJSON_Delete(cfg);
            free(fm);
            return;
        }
        if (scale) {
            /* apply on /scale: treat as a merge of the Scale */
            if (o == NULL) {
                resp_not_found(c->resp, r, c->name);
                cJSON_Delete(cfg);
                free(fm);
                return;
            }
            cJSON *cur = build_scale(c, o);
            cJSON *doc = json_merge_patch(cur, cfg);
            cJSON_Delete(cfg);
            free(fm);
            do_scale_write(c, o, doc);
            return;
        }
        const char *ak = json_get_str(cfg, "kind"), *av = json_get_str(cfg, "apiVersion");
        if (ak == NULL || av == NULL || !*ak || !*av) {
            ks_errs e = {0};
            ERR_REQUIRED(&e, ak == NULL || !*ak ? "kind" : "apiVersion");
            resp_invalid(c->resp, r->qual_kind, r->group, r->kind, c->name, &e);
            errs_free(&e);
            cJSON_Delete(cfg);
            free(fm);
            return;
        }
        if (check_gvk(c, cfg, r->kind, r->views[c->view].api_version) != 0 || check_namespace(c, cfg) != 0 ||
            check_name(c, cfg) != 0) {
            cJSON_Delete(cfg);
            free(fm);
            return;
        }
        if (o && check_rv(c, o, cfg, 0) != 0) {
            cJSON_Delete(cfg);
            free(fm);
            return;
        }
        cJSON *live = o ? ver_parse(o->cur) : NULL;
        char *conflict = NULL;
        cJSON *causes = NULL;
        cJSON *merged = patch_ssa_apply(r, c->view, live, cfg, fm, forced, &conflict, &causes);
        cJSON_Delete(live);
        cJSON_Delete(cfg);
        if (merged == NULL) {
            buf_t *b = &c->resp->body;
            buf_reset(b);
            c->resp->status = 409;
            c->resp->content_type = "application/json";
            ks_put(b, "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
                   "\"message\":");
            ks_putq(b, conflict);
            /* NewApplyConflict: details carry only the causes */
            ks_put(b, ",\"reason\":\"Conflict\",\"details\":{\"causes\":");
            if (json_dump_buf(causes, b) != 0)
                abort();
            ks_put(b, "},\"code\":409}\n");
            free(conflict);
            cJSON_Delete(causes);
            free(fm);
            return;
        }
        free(fm);
        if (o == NULL) {
            if (kind != UPD_MAIN) {
                resp_not_found(c->resp, r, c->name);
                cJSON_Delete(merged);
                return;
            }
            if (crd_terminating(c)) {
                cJSON_Delete(merged);
                return;
            }
            do_create_obj(c, merged, "apply");
            return;
        }
        finish_update(c, o, merged, kind, 1);
        return;
    }
    free(fm);
    if (o == NULL) {
        resp_not_found(c->resp, r, c->name);
        return;
    }
    if (scale) {
        cJSON *cur = build_scale(c, o);
        cJSON *doc = patch_doc(c, cur, pt);
        cJSON_Delete(cur);
        if (doc)
            do_scale_write(c, o, doc);
        return;
    }
    cJSON *cur = ver_parse(o->cur);
    cJSON *doc = patch_doc(c, cur, pt);
    cJSON_Delete(cur);
    if (doc == NULL)
        return;
    /* the patched object must still be this object */
    if (check_gvk(c, doc, r->kind, r->views[c->view].api_version) != 0 || check_namespace(c, doc) != 0 ||
        check_name(c, doc) != 0) {
        cJSON_Delete(doc);
        return;
    }
    /* an RV inside the patch is a precondition */
    if (check_rv(c, o, doc, 0) != 0) {
        cJSON_Delete(doc);
        return;
    }
    finish_update(c, o, doc, kind, 0);
}

/* ---- scale ------------------------------------------------------------- */

static const char *path_of(const char *jp)
{
    return jp && *jp == '.' ? jp + 1 : (jp ? jp : "");
}

static cJSON *build_scale(ks_ctx *c, ks_obj *o)
{
    const ks_view *v = &c->res->views[c->view];
    cJSON *obj = ver_parse(o->cur);
    cJSON *s = cJSON_CreateObject();
    json_set_str(s, "kind", "Scale");
    json_set_str(s, "apiVersion", "autoscaling/v1");
    cJSON *m = cJSON_CreateObject();
    json_set_str(m, "name", ver_name(o->cur));
    if (*ver_ns(o->cur))
        json_set_str(m, "namespace", ver_ns(o->cur));
    json_set_str(m, "uid", o->uid);
    char rv[24];
    snprintf(rv, sizeof(rv), "%llu", (unsigned long long)o->cur->rv);
    json_set_str(m, "resourceVersion", rv);
    const char *ct = json_get_str(obj, "metadata.creationTimestamp");
    if (ct)
        json_set_str(m, "creationTimestamp", ct);
    json_set(s, "metadata", m);
    cJSON *spec = cJSON_CreateObject();
    long long want = json_get_int(obj, path_of(v->spec_replicas_path), 0);
    if (want)
        json_set_int(spec, "replicas", want);
    json_set(s, "spec", spec);
    cJSON *st = cJSON_CreateObject();
    json_set_int(st, "replicas", json_get_int(obj, path_of(v->status_replicas_path), 0));
    if (c->res->flags & KSR_CUSTOM) {
        const char *sel = v->label_selector_path ? json_get_str(obj, path_of(v->label_selector_path)) : NULL;
        if (sel)
            json_set_str(st, "selector", sel);
    } else {
        lsel *ls = NULL;
        if (lsel_from_json(json_get(obj, "spec.selector"), &ls, NULL, 0) == 0) {
            buf_t b;
            buf_init(&b, BUF_UNLIMITED);
            if (lsel_to_buf(ls, &b) == 0 && b.len)
                json_set_str(st, "selector", b.data);
            buf_free(&b);
            lsel_free(ls);
        }
    }
    json_set(s, "status", st);
    cJSON_Delete(obj);
    return s;
}

static void respond_json(ks_ctx *c, int code, cJSON *o)
{
    resp_json_take(c->resp, code, o);
}

/* Set spec replicas on the parent from a Scale document (takes scale). */
static void do_scale_write(ks_ctx *c, ks_obj *o, cJSON *scale)
{
    const ks_view *v = &c->res->views[c->view];
    const char *name = json_get_str(scale, "metadata.name");
    if (name && *name && strcmp(name, c->name) != 0) {
        resp_bad_request(c->resp, "the name of the object (%s) does not match the name on the URL (%s)", name,
                         c->name);
        cJSON_Delete(scale);
        return;
    }
    if (check_rv(c, o, scale, 0) != 0) {
        cJSON_Delete(scale);
        return;
    }
    const cJSON *rep = json_get(scale, "spec.replicas");
    long long n = json_num_ll(rep, 0);
    if (n < 0) {
        ks_errs e = {0};
        errs_add(&e, "FieldValueInvalid", "spec.replicas",
                 "Invalid value: %lld: must be greater than or equal to 0", n);
        resp_invalid(c->resp, "Scale.autoscaling", "autoscaling", "Scale", c->name, &e);
        errs_free(&e);
        cJSON_Delete(scale);
        return;
    }
    cJSON_Delete(scale);
    cJSON *obj = ver_parse(o->cur);
    const char *p = path_of(v->spec_replicas_path);
    const char *dot = strrchr(p, '.');
    cJSON *parent = obj;
    char *head = dot ? xstrndup(p, (size_t)(dot - p)) : NULL;
    if (head)
        parent = json_obj_path_ensure(obj, head);
    json_set_int(parent, dot ? dot + 1 : p, n);
    free(head);
    if ((c->res->flags & KSR_GENERATION)) {
        cJSON *old = ver_parse(o->cur);
        if (generation_changed(c->res, v, obj, old))
            json_set_int(json_obj_ensure(obj, "metadata"), "generation",
                         json_get_int(old, "metadata.generation", 1) + 1);
        if (json_child(json_child(old, "metadata"), "managedFields")) {
            char *mgr = field_manager(c);
            patch_ssa_record_update(c->res, c->view, old, obj, mgr, "scale");
            free(mgr);
        }
        cJSON_Delete(old);
    }
    ks_ver *nv = NULL;
    ks_store_update(c->k, o, obj, dry_run(c) ? WR_DRY_RUN : 0, &nv, NULL);
    ver_unref(nv);
    respond_json(c, 200, build_scale(c, o));
}

static void do_scale(ks_ctx *c, const char *method)
{
    ks_obj *o = obj_find(c->res, c->ns, c->name);
    if (strcmp(method, "GET") == 0) {
        set_verb(c, "get");
        if (o == NULL) {
            resp_not_found(c->resp, c->res, c->name);
            return;
        }
        respond_json(c, 200, build_scale(c, o));
    } else if (strcmp(method, "PUT") == 0) {
        set_verb(c, "update");
        cJSON *in = parse_body(c, 1);
        if (in == NULL)
            return;
        if (o == NULL) {
            resp_not_found(c->resp, c->res, c->name);
            cJSON_Delete(in);
            return;
        }
        const char *kind = json_get_str(in, "kind");
        if (kind && strcmp(kind, "Scale") != 0) {
            resp_bad_request(c->resp, "%s in version \"%s\" cannot be handled as a Scale", kind,
                             json_get_str_or(in, "apiVersion", ""));
            cJSON_Delete(in);
            return;
        }
        do_scale_write(c, o, in);
    } else if (strcmp(method, "PATCH") == 0) {
        do_patch(c, UPD_MAIN, 1);
    } else {
        method_not_allowed(c->resp);
    }
}

/* ---- get, list, watch -------------------------------------------------- */

/* 504 for a resourceVersion the server has not reached, after a wait. */
static void too_large(ks_ctx *c, uint64_t want)
{
    buf_t *b = &c->resp->body;
    buf_reset(b);
    c->resp->status = 504;
    c->resp->content_type = "application/json";
    char *msg = xasprintf("Too large resource version: %llu, current: %llu", (unsigned long long)want,
                          (unsigned long long)c->k->rv);
    ks_put(b,
           "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":");
    ks_putq(b, msg);
    ks_put(b, ",\"reason\":\"Timeout\",\"details\":{\"causes\":[{\"reason\":\"ResourceVersionTooLarge\","
           "\"message\":"
           "\"Too large resource version\"}],\"retryAfterSeconds\":1},\"code\":504}\n");
    ks_put(&c->resp->headers, "Retry-After: 1\r\n");
    c->resp->delay_ms = c->k->cfg.too_large_wait_ms;
    free(msg);
}

/* Parse ?resourceVersion. Returns 0 (set *has, *zero, *n) or -1 with the response set. */
static int parse_rv_param(ks_ctx *c, const char *rv, int *has, int *zero, uint64_t *n, int watch)
{
    *has = rv != NULL && *rv != '\0';
    *zero = *has && strcmp(rv, "0") == 0;
    *n = 0;
    if (!*has || *zero)
        return 0;
    if (parse_u64(rv, n) != 0) {
        if (watch) {
            ks_errs e = {0};
            errs_add(&e, "FieldValueInvalid", "resourceVersion",
                     "Invalid value: \"%s\": strconv.ParseUint: parsing \"%s\": invalid syntax", rv, rv);
            resp_invalid(c->resp, c->res->qual, c->res->group, c->res->plural, "", &e);
            errs_free(&e);
        } else {
            resp_bad_request(
                c->resp, "invalid resource version \"%s\": strconv.ParseUint: parsing \"%s\": invalid syntax",
                rv, rv);
        }
        return -1;
    }
    return 0;
}

static void do_get(ks_ctx *c)
{
    set_verb(c, "get");
    ks_obj *o = obj_find(c->res, c->ns, c->name);
    char *rv = qparam(c, "resourceVersion");
    int has, zero;
    uint64_t n;
    int rc = parse_rv_param(c, rv, &has, &zero, &n, 0);
    free(rv);
    if (rc != 0)
        return;
    if (has && !zero && n > c->k->rv) {
        too_large(c, n);
        return;
    }
    if (o == NULL) {
        resp_not_found(c->resp, c->res, c->name);
        return;
    }
    if (c->table != TABLE_NONE) {
        buf_reset(&c->resp->body);
        c->resp->status = 200;
        c->resp->content_type = "application/json";
        table_begin(&c->resp->body, c->res, c->view, c->table, o->cur->rv, NULL, -1, 0);
        table_row(&c->resp->body, c->res, c->view, c->table, o->cur, 1, c->include);
        ks_put(&c->resp->body, "]}\n");
        return;
    }
    respond_ver(c, 200, o->cur);
}

static void list_options_invalid(ks_ctx *c, ks_errs *e)
{
    resp_invalid(c->resp, "ListOptions.meta.k8s.io", "meta.k8s.io", "ListOptions", "", e);
}

/* Selectors shared by LIST and WATCH; -1 with a 400 set. */
static int parse_selectors(ks_ctx *c, lsel **ls, fsel **fs)
{
    *ls = NULL;
    *fs = NULL;
    char err[512];
    char *l = qparam(c, "labelSelector");
    if (l && *l) {
        if (lsel_parse(l, ls, err, sizeof(err)) != 0) {
            resp_bad_request(c->resp, "%s", err);
            free(l);
            return -1;
        }
        if (lsel_is_empty(*ls)) {
            lsel_free(*ls);
            *ls = NULL;
        }
    }
    free(l);
    char *f = qparam(c, "fieldSelector");
    if (f && *f) {
        if (fsel_parse(c->res, f, fs, err, sizeof(err)) != 0) {
            resp_bad_request(c->resp, "%s", err);
            free(f);
            lsel_free(*ls);
            *ls = NULL;
            return -1;
        }
    }
    free(f);
    return 0;
}

static char *make_token(uint64_t rv, int latest, const ks_ver *last)
{
    buf_t b;
    buf_init(&b, BUF_UNLIMITED);
    char key[600];
    if (*ver_ns(last))
        snprintf(key, sizeof(key), "%s/%s", ver_ns(last), ver_name(last));
    else
        snprintf(key, sizeof(key), "%s", ver_name(last));
    if (latest) {
        ks_put(&b, "{\"v\":\"meta.k8s.io/v1\",\"rv\":-1,\"start\":");
    } else if (buf_printf(&b, "{\"v\":\"meta.k8s.io/v1\",\"rv\":%llu,\"start\":", (unsigned long long)rv) !=
               0) {
        abort();
    }
    /* start = last key + "\0": the next page begins after it */
    ks_putq(&b, key);
    b.len--; /* drop the closing quote to add \u0000 */
    ks_put(&b, "\\u0000\"}");
    char *tok = base64_encode(b.data, b.len);
    buf_free(&b);
    return tok;
}

/* Decode a continue token: rv (-1 = latest) and the (ns, name) after which to resume. */
static int parse_token(const char *tok, long long *rv, char **ns, char **name, char *err, size_t errlen)
{
    size_t len = 0;
    uint8_t *raw = base64_decode(tok, strlen(tok), &len);
    if (raw == NULL) {
        snprintf(err, errlen, "continue key is not valid: illegal base64 data");
        return -1;
    }
    cJSON *o = json_parse((const char *)raw, len, NULL);
    free(raw);
    if (o == NULL || strcmp(json_get_str_or(o, "v", ""), "meta.k8s.io/v1") != 0) {
        snprintf(
            err, errlen,
            "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)");
        cJSON_Delete(o);
        return -1;
    }
    const cJSON *r = json_child(o, "rv");
    const char *start = json_get_str(o, "start");
    if (!cJSON_IsNumber(r) || start == NULL || *start == '\0' || r->valuedouble == 0) {
        snprintf(err, errlen, "continue key is not valid: invalid start or resource version");
        cJSON_Delete(o);
        return -1;
    }
    *rv = json_num_ll(r, 0);
    const char *slash = strchr(start, '/');
    if (slash) {
        *ns = xstrndup(start, (size_t)(slash - start));
        *name = xstrdup(slash + 1);
    } else {
        *ns = xstrdup("");
        *name = xstrdup(start);
    }
    cJSON_Delete(o);
    return 0;
}

static int after_key(const ks_ver *v, const char *ns, const char *name)
{
    int c = strcmp(ver_ns(v), ns);
    return c > 0 || (c == 0 && strcmp(ver_name(v), name) > 0);
}

static void list_header(ks_ctx *c, uint64_t rv, const char *cont, long long remaining)
{
    buf_t *b = &c->resp->body;
    buf_reset(b);
    c->resp->status = 200;
    c->resp->content_type = "application/json";
    if (c->table != TABLE_NONE) {
        table_begin(b, c->res, c->view, c->table, rv, cont, remaining, 0);
        return;
    }
    if (buf_printf(b, "{\"kind\":\"%s\",\"apiVersion\":\"%s\",\"metadata\":{\"resourceVersion\":\"%llu\"",
                   c->res->list_kind, c->res->views[c->view].api_version, (unsigned long long)rv) != 0)
        abort();
    if (cont) {
        ks_put(b, ",\"continue\":");
        ks_putq(b, cont);
    }
    if (remaining >= 0 && buf_printf(b, ",\"remainingItemCount\":%lld", remaining) != 0)
        abort();
    ks_put(b, "},\"items\":[");
}

static void do_watch(ks_ctx *c, int legacy_name_watch);

static void do_list(ks_ctx *c)
{
    ks *k = c->k;
    ks_res *r = c->res;
    if (query_bool(c->req->query, "watch", 0)) {
        do_watch(c, 0);
        return;
    }
    set_verb(c, "list");
    char *rv = qparam(c, "resourceVersion");
    char *rvm = qparam(c, "resourceVersionMatch");
    char *cont = qparam(c, "continue");
    char *sie = qparam(c, "sendInitialEvents");
    char *lim = qparam(c, "limit");
    lsel *ls = NULL;
    fsel *fs = NULL;
    char *tns = NULL, *tname = NULL;
    ks_errs e = {0};
    if (rvm && *rvm) {
        if (rv == NULL || *rv == '\0')
            ERR_FORBIDDEN(&e, "resourceVersionMatch",
                          "resourceVersionMatch is forbidden unless resourceVersion is provided");
        if (cont && *cont)
            ERR_FORBIDDEN(&e, "resourceVersionMatch",
                          "resourceVersionMatch is forbidden when continue is provided");
        if (strcmp(rvm, "Exact") && strcmp(rvm, "NotOlderThan"))
            errs_add(&e, "FieldValueNotSupported", "resourceVersionMatch",
                     "Unsupported value: \"%s\": supported values: \"Exact\", \"NotOlderThan\", \"\"", rvm);
        if (strcmp(rvm, "Exact") == 0 && rv && strcmp(rv, "0") == 0)
            ERR_FORBIDDEN(&e, "resourceVersionMatch",
                          "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"");
    }
    if (sie)
        ERR_FORBIDDEN(&e, "sendInitialEvents", "sendInitialEvents is forbidden for list");
    if (e.n) {
        list_options_invalid(c, &e);
        goto out;
    }
    long long limit = 0;
    if (lim && *lim) {
        char *end;
        limit = strtoll(lim, &end, 10);
        if (*end) {
            resp_bad_request(c->resp,
                             "limit: Invalid value: \"%s\": strconv.ParseInt: parsing \"%s\": invalid syntax",
                             lim, lim);
            goto out;
        }
        if (limit < 0)
            limit = 0;
    }
    int has, zero;
    uint64_t n;
    if (parse_rv_param(c, rv, &has, &zero, &n, 0) != 0)
        goto out;
    if (parse_selectors(c, &ls, &fs) != 0)
        goto out;
    const char *ns = c->ns;
    ks_snap *snap = NULL;
    int own_snap = 0;
    if (cont && *cont) {
        if (has && !zero) {
            resp_bad_request(c->resp, "specifying resource version is not allowed when using continue");
            goto out;
        }
        long long trv;
        char err[256];
        if (parse_token(cont, &trv, &tns, &tname, err, sizeof(err)) != 0) {
            resp_bad_request(c->resp, "%s", err);
            goto out;
        }
        snaps_expire(k, 0);
        if (trv < 0) {
            snap = snap_at(k, r, k->rv);
        } else {
            snap = snap_lookup(k, r, (uint64_t)trv);
        }
        if (snap == NULL) {
            /* Expired: 410 with a token that resumes at the latest RV. */
            buf_t tb;
            buf_init(&tb, BUF_UNLIMITED);
            if (buf_printf(&tb, "{\"v\":\"meta.k8s.io/v1\",\"rv\":-1,\"start\":") != 0)
                abort();
            char key[600];
            snprintf(key, sizeof(key), "%s%s%s", tns, *tns ? "/" : "", tname);
            ks_putq(&tb, key);
            tb.len--;
            ks_put(&tb, "\\u0000\"}");
            char *tok = base64_encode(tb.data, tb.len);
            buf_free(&tb);
            buf_t *b = &c->resp->body;
            buf_reset(b);
            c->resp->status = 410;
            c->resp->content_type = "application/json";
            ks_put(b, "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{\"continue\":");
            ks_putq(b, tok);
            ks_put(b,
                "},\"status\":\"Failure\",\"message\":\"The provided continue parameter is too old to "
                "display a "
                "consistent list result. You can start a new list without the continue parameter, or use the "
                "continue token in this response to retrieve the remainder of the results. Continuing with "
                "the "
                "provided token results in an inconsistent list - objects that were created, modified, or "
                "deleted between the time the first chunk was returned and now may show up in the list.\","
                "\"reason\":\"Expired\",\"code\":410}\n");
            free(tok);
            goto out;
        }
    } else if (has && !zero) {
        int exact = (rvm && strcmp(rvm, "Exact") == 0) || ((rvm == NULL || !*rvm) && limit > 0);
        if (n > k->rv) {
            too_large(c, n);
            goto out;
        }
        if (exact && n != k->rv) {
            snap = snap_at(k, r, n);
            if (snap == NULL) {
                resp_status(c->resp, 410, "Expired", "The resourceVersion for the provided list is too old.",
                            NULL, NULL, NULL, NULL);
                goto out;
            }
        }
    }
    if (snap == NULL && limit > 0)
        snap = snap_at(k, r, k->rv);
    (void)own_snap;

    int with_header = (r->flags & KSR_CUSTOM) != 0;
    if (snap == NULL) {
        /* Whole list of the current state. */
        size_t cnt;
        ks_ver **items = ks_store_sorted(r, ns, &cnt);
        size_t total = 64;
        for (size_t i = 0; i < cnt; i++)
            total += items[i]->len + 2;
        list_header(c, k->rv, NULL, -1);
        if (buf_reserve(&c->resp->body, total) != 0)
            abort();
        int first = 1;
        for (size_t i = 0; i < cnt; i++) {
            if (!obj_matches(items[i], NULL, ls, fs))
                continue;
            if (c->table != TABLE_NONE) {
                table_row(&c->resp->body, r, c->view, c->table, items[i], first, c->include);
                first = 0;
                continue;
            }
            if (!first)
                ks_put(&c->resp->body, ",");
            first = 0;
            if (watch_emit_obj(&c->resp->body, r, c->view, items[i], with_header) != 0)
                abort();
        }
        ks_put(&c->resp->body, "]}\n");
        free(items);
        goto out;
    }
    /* A page of the snapshot. */
    size_t i = 0;
    if (tns) {
        size_t lo = 0, hi = snap->n;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (after_key(snap->items[mid], tns, tname))
                hi = mid;
            else
                lo = mid + 1;
        }
        i = lo;
    }
    buf_t items;
    buf_init(&items, BUF_UNLIMITED);
    long long got = 0;
    const ks_ver *last = NULL;
    for (; i < snap->n; i++) {
        const ks_ver *v = snap->items[i];
        if (!obj_matches(v, ns, NULL, NULL))
            continue;
        if (limit > 0 && got >= limit)
            break;
        last = v;
        if (!obj_matches(v, NULL, ls, fs))
            continue;
        if (c->table != TABLE_NONE) {
            table_row(&items, r, c->view, c->table, v, got++ == 0, c->include);
            continue;
        }
        if (got++ && buf_putc(&items, ',') != 0)
            abort();
        if (watch_emit_obj(&items, r, c->view, v, with_header) != 0)
            abort();
    }
    /* More items in the snapshot (matching or not) means another page. */
    size_t more = 0;
    for (size_t j = i; j < snap->n; j++)
        if (obj_matches(snap->items[j], ns, NULL, NULL))
            more++;
    char *tok = NULL;
    if (more && last)
        tok = make_token(snap->rv, 0, last);
    long long remaining = (tok && !ls && !fs) ? (long long)more : -1;
    list_header(c, snap->rv, tok, remaining);
    if (buf_append(&c->resp->body, items.data ? items.data : "", items.len) != 0)
        abort();
    ks_put(&c->resp->body, "]}\n");
    buf_free(&items);
    free(tok);
out:
    errs_free(&e);
    lsel_free(ls);
    fsel_free(fs);
    free(tns);
    free(tname);
    free(rv);
    free(rvm);
    free(cont);
    free(sie);
    free(lim);
}

static void do_watch(ks_ctx *c, int name_watch)
{
    ks *k = c->k;
    set_verb(c, "watch");
    char *rv = qparam(c, "resourceVersion");
    char *rvm = qparam(c, "resourceVersionMatch");
    char *cont = qparam(c, "continue");
    char *sie = qparam(c, "sendInitialEvents");
    char *ts = qparam(c, "timeoutSeconds");
    ks_watch_opts wo;
    memset(&wo, 0, sizeof(wo));
    wo.table = c->table;
    wo.include = c->include;
    ks_errs e = {0};
    if (sie && (rvm == NULL || strcmp(rvm, "NotOlderThan") != 0))
        ERR_FORBIDDEN(&e, "resourceVersionMatch",
                      "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan");
    if (rvm && *rvm) {
        if (sie == NULL)
            ERR_FORBIDDEN(&e, "resourceVersionMatch",
                          "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided");
        if (strcmp(rvm, "NotOlderThan") != 0)
            errs_add(&e, "FieldValueNotSupported", "resourceVersionMatch",
                     "Unsupported value: \"%s\": supported values: \"NotOlderThan\"", rvm);
        if (cont && *cont)
            ERR_FORBIDDEN(&e, "resourceVersionMatch",
                          "resourceVersionMatch is forbidden when continue is provided");
    }
    if (e.n) {
        list_options_invalid(c, &e);
        goto out;
    }
    int has, zero;
    uint64_t n;
    if (parse_rv_param(c, rv, &has, &zero, &n, 1) != 0)
        goto out;
    if (parse_selectors(c, &wo.ls, &wo.fs) != 0)
        goto out;
    if (name_watch) {
        const char *want = fsel_required(wo.fs, "metadata.name");
        if (want && strcmp(want, c->name) != 0) {
            resp_bad_request(c->resp, "fieldSelector metadata.name=%s conflicts with name \"%s\" in the path",
                             want, c->name);
            goto out;
        }
        if (wo.fs == NULL)
            wo.fs = xcalloc(1, sizeof(fsel));
        if (!want && wo.fs->n < (int)ARRAY_SIZE(wo.fs->t)) {
            wo.fs->t[wo.fs->n].field = xstrdup("metadata.name");
            wo.fs->t[wo.fs->n].value = xstrdup(c->name);
            wo.fs->n++;
        }
    }
    int send_initial = sie ? query_bool(c->req->query, "sendInitialEvents", 0) : -1;
    wo.ns = c->ns;
    wo.bookmarks = query_bool(c->req->query, "allowWatchBookmarks", 0);
    wo.rv_set = has && !zero;
    wo.rv = n;
    if (send_initial == 1) {
        wo.initial = 1;
        wo.send_initial_events = 1;
    } else if (send_initial == 0) {
        wo.initial = 0;
        if (!wo.rv_set) {
            wo.rv_set = 1;
            wo.rv = k->rv;
        }
    } else {
        wo.initial = !wo.rv_set;
    }
    long long tsec = ts ? atoll(ts) : 0;
    if (tsec > 0) {
        wo.timeout_ms = tsec * 1000;
    } else {
        long long min = k->cfg.min_request_timeout_s;
        wo.timeout_ms = (min + (long long)(ks_randf(k) * (double)min)) * 1000;
    }
    if (k->expire_watches > 0) {
        k->expire_watches--;
        wo.expired = 1;
        wo.expired_req = wo.rv;
        wo.expired_have = k->rv;
    } else if (wo.rv_set && !wo.initial && wo.rv < c->res->hist.compacted) {
        wo.expired = 1;
        wo.expired_req = wo.rv;
        wo.expired_have = c->res->hist.compacted;
    }
    c->resp->watch = watch_new(k, c->res, c->view, &wo);
    c->resp->status = 200;
    c->resp->content_type = "application/json";
out:
    errs_free(&e);
    lsel_free(wo.ls);
    fsel_free(wo.fs);
    free(rv);
    free(rvm);
    free(cont);
    free(sie);
    free(ts);
}

/* ---- delete ------------------------------------------------------------ */

static int is_pod(const ks_res *r)
{
    return r->group[0] == '\0' && strcmp(r->plural, "pods") == 0;
}

static void add_finalizer(cJSON *meta, const char *f)
{
    cJSON *fin = (cJSON *)json_child(meta, "finalizers");
    if (!cJSON_IsArray(fin)) {
        fin = cJSON_CreateArray();
        json_set(meta, "finalizers", fin);
    }
    if (!string_in(fin, f))
        cJSON_AddItemToArray(fin, cJSON_CreateString(f));
}

ks_ver *api_obj_delete(ks *k, ks_obj *o, const char *policy, long long grace, int *gone)
{
    ks_res *r = o->res;
    cJSON *obj = ver_parse(o->cur);
    cJSON *meta = json_obj_ensure(obj, "metadata");
    ks_ver *out = NULL;
    *gone = 0;
    if (json_get_str(meta, "deletionTimestamp")) {
        /* Already deleting: a pod's grace period may only get shorter. */
        long long cur = json_get_int(meta, "deletionGracePeriodSeconds", 0);
        if (is_pod(r) && grace >= 0 && grace < cur) {
            char ts[32];
            rfc3339_now(ts, grace);
            json_set_str(meta, "deletionTimestamp", ts);
            json_set_int(meta, "deletionGracePeriodSeconds", grace);
            ks_store_update(k, o, obj, 0, &out, gone);
            if (!*gone)
                kubelet_schedule_removal(k, o, grace);
            return out;
        }
        cJSON_Delete(obj);
        ver_ref(o->cur);
        return o->cur;
    }
    if (policy && strcmp(policy, "Foreground") == 0)
        add_finalizer(meta, "foregroundDeletion");
    else if (policy && strcmp(policy, "Orphan") == 0)
        add_finalizer(meta, "orphan");
    long long effective = 0;
    if (is_pod(r)) {
        const char *node = json_get_str(obj, "spec.nodeName");
        const char *phase = json_get_str_or(obj, "status.phase", "");
        int terminal = strcmp(phase, "Succeeded") == 0 || strcmp(phase, "Failed") == 0;
        effective = grace >= 0 ? grace : json_get_int(obj, "spec.terminationGracePeriodSeconds", 30);
        if (node == NULL || !*node || terminal)
            effective = 0;
    }
    int finalizers = json_len(json_child(meta, "finalizers")) > 0;
    int is_ns = r->group[0] == '\0' && strcmp(r->plural, "namespaces") == 0;
    if (effective > 0 || finalizers || is_ns) {
        char ts[32];
        rfc3339_now(ts, effective);
        json_set_str(meta, "deletionTimestamp", ts);
        json_set_int(meta, "deletionGracePeriodSeconds", effective);
        if ((r->flags & KSR_GENERATION) && json_get_int(meta, "generation", 0) > 0)
            json_set_int(meta, "generation", json_get_int(meta, "generation", 0) + 1);
        if (is_ns)
            json_set_str(json_obj_ensure(obj, "status"), "phase", "Terminating");
        ks_store_update(k, o, obj, 0, &out, gone);
        if (!*gone && effective > 0)
            kubelet_schedule_removal(k, o, effective);
        if (!*gone && is_ns)
            ctrl_gc_kick(k);
        return out;
    }
    cJSON_Delete(obj);
    ks_store_remove(k, o, &out);
    *gone = 1;
    return out;
}

/* DeleteOptions from the body and the query. -1 with the response set. */
static int delete_options(ks_ctx *c, char **policy, long long *grace, char **pre_uid, char **pre_rv)
{
    *policy = NULL;
    *grace = -1;
    *pre_uid = *pre_rv = NULL;
    cJSON *o = NULL;
    if (c->req->body_len > 0) {
        o = parse_body(c, 1);
        if (o == NULL)
            return -1;
    }
    const char *p = json_get_str(o, "propagationPolicy");
    char *qp = qparam(c, "propagationPolicy");
    if (qp && *qp)
        p = qp;
    int orphan = json_get_bool(o, "orphanDependents", -1);
    char *qo = qparam(c, "orphanDependents");
    if (qo)
        orphan = query_bool(c->req->query, "orphanDependents", 0);
    if (p && strcmp(p, "Foreground") && strcmp(p, "Background") && strcmp(p, "Orphan")) {
        ks_errs e = {0};
        errs_add(&e, "FieldValueNotSupported", "propagationPolicy",
                 "Unsupported value: \"%s\": supported values: \"Foreground\", \"Background\", \"Orphan\", "
                 "\"nil\"",
                 p);
        resp_invalid(c->resp, "DeleteOptions.meta.k8s.io", "meta.k8s.io", "DeleteOptions", "", &e);
        errs_free(&e);
        free(qp);
        free(qo);
        cJSON_Delete(o);
        return -1;
    }
    if (p)
        *policy = xstrdup(p);
    else if (orphan == 1)
        *policy = xstrdup("Orphan");
    const cJSON *g = json_child(o, "gracePeriodSeconds");
    if (cJSON_IsNumber(g))
        *grace = json_num_ll(g, 0);
    char *qg = qparam(c, "gracePeriodSeconds");
    if (qg && *qg)
        *grace = atoll(qg);
    if (*grace < 0 && (qg || g))
        *grace = 0;
    const char *u = json_get_str(o, "preconditions.uid"),
               *rv = json_get_str(o, "preconditions.resourceVersion");
    if (u)
        *pre_uid = xstrdup(u);
    if (rv)
        *pre_rv = xstrdup(rv);
    free(qp);
    free(qo);
    free(qg);
    cJSON_Delete(o);
    return 0;
}

static void respond_deleted(ks_ctx *c, ks_ver *v, int gone, const char *uid)
{
    if (!gone || (c->res->flags & KSR_DELETE_RETURNS_OBJ)) {
        respond_ver(c, 200, v);
        return;
    }
    buf_t *b = &c->resp->body;
    buf_reset(b);
    c->resp->status = 200;
    c->resp->content_type = "application/json";
    ks_put(b,
           "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Success\",\"details\":{"
           "\"name\":");
    ks_putq(b, ver_name(v));
    ks_put(b, ",\"group\":");
    ks_putq(b, c->res->group);
    ks_put(b, ",\"kind\":");
    ks_putq(b, c->res->plural);
    ks_put(b, ",\"uid\":");
    ks_putq(b, uid);
    ks_put(b, "}}\n");
}

static void do_delete(ks_ctx *c)
{
    set_verb(c, "delete");
    char *policy, *pre_uid, *pre_rv;
    long long grace;
    if (delete_options(c, &policy, &grace, &pre_uid, &pre_rv) != 0)
        return;
    ks_obj *o = obj_find(c->res, c->ns, c->name);
    if (o == NULL) {
        resp_not_found(c->resp, c->res, c->name);
        goto out;
    }
    if (pre_uid && strcmp(pre_uid, o->uid) != 0) {
        char *why = xasprintf("Precondition failed: UID in precondition: %s, UID in object meta: %s", pre_uid,
                              o->uid);
        char *msg =
            xasprintf("the UID in the precondition (%s) does not match the UID in record (%s). The object "
                      "might have been deleted and then recreated",
                      pre_uid, o->uid);
        resp_status(c->resp, 409, "Conflict", msg, c->name, c->res->group, c->res->plural, NULL);
        free(why);
        free(msg);
        goto out;
    }
    char cur[24];
    snprintf(cur, sizeof(cur), "%llu", (unsigned long long)o->cur->rv);
    if (pre_rv && strcmp(pre_rv, cur) != 0) {
        char *msg =
            xasprintf("the ResourceVersion in the precondition (%s) does not match the ResourceVersion in "
                      "record (%s). The object might have been modified",
                      pre_rv, cur);
        resp_status(c->resp, 409, "Conflict", msg, c->name, c->res->group, c->res->plural, NULL);
        free(msg);
        goto out;
    }
    if (c->res->group[0] == '\0' && strcmp(c->res->plural, "namespaces") == 0 &&
        (strcmp(c->name, "default") == 0 || strcmp(c->name, "kube-system") == 0 ||
         strcmp(c->name, "kube-public") == 0)) {
        char *msg = xasprintf("namespaces \"%s\" is forbidden: this namespace may not be deleted", c->name);
        resp_status(c->resp, 403, "Forbidden", msg, c->name, "", "namespaces", NULL);
        free(msg);
        goto out;
    }
    if (dry_run(c)) {
        respond_ver(c, 200, o->cur);
        goto out;
    }
    char uid[40];
    snprintf(uid, sizeof(uid), "%s", o->uid);
    int gone = 0;
    ks_ver *v = api_obj_delete(c->k, o, policy, grace, &gone);
    respond_deleted(c, v, gone, uid);
    ver_unref(v);
out:
    free(policy);
    free(pre_uid);
    free(pre_rv);
}

static void do_delete_collection(ks_ctx *c)
{
    set_verb(c, "deletecollection");
    if (c->res->namespaced && c->ns == NULL) {
        method_not_allowed(c->resp);
        return;
    }
    char *policy, *pre_uid, *pre_rv;
    long long grace;
    if (delete_options(c, &policy, &grace, &pre_uid, &pre_rv) != 0)
        return;
    lsel *ls = NULL;
    fsel *fs = NULL;
    if (parse_selectors(c, &ls, &fs) != 0)
        goto out;
    size_t n;
    ks_ver **vs = ks_store_sorted(c->res, c->ns, &n);
    char **keys = xcalloc(n + 1, sizeof(char *));
    size_t nk = 0;
    for (size_t i = 0; i < n; i++)
        if (obj_matches(vs[i], NULL, ls, fs))
            keys[nk++] = xstrdup(ver_name(vs[i]));
    free(vs);
    list_header(c, c->k->rv, NULL, -1);
    buf_t items;
    buf_init(&items, BUF_UNLIMITED);
    for (size_t i = 0; i < nk; i++) {
        ks_obj *o = obj_find(c->res, c->ns, keys[i]);
        if (o) {
            int gone;
            ks_ver *v = api_obj_delete(c->k, o, policy, grace, &gone);
            if (items.len && buf_putc(&items, ',') != 0)
                abort();
            if (watch_emit_obj(&items, c->res, c->view, v, (c->res->flags & KSR_CUSTOM) != 0) != 0)
                abort();
            ver_unref(v);
        }
        free(keys[i]);
    }
    free(keys);
    /* the list's RV is the one after the deletions */
    list_header(c, c->k->rv, NULL, -1);
    if (buf_append(&c->resp->body, items.data ? items.data : "", items.len) != 0)
        abort();
    ks_put(&c->resp->body, "]}\n");
    buf_free(&items);
out:
    lsel_free(ls);
    fsel_free(fs);
    free(policy);
    free(pre_uid);
    free(pre_rv);
}

/* ---- pods/binding and pods/eviction ------------------------------------ */

static void status_success(ks_ctx *c, int code)
{
    buf_reset(&c->resp->body);
    c->resp->status = code;
    c->resp->content_type = "application/json";
    if (buf_printf(&c->resp->body,
                   "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Success\","
                   "\"code\":%d}\n",
                   code) != 0)
        abort();
}

static void do_binding(ks_ctx *c)
{
    set_verb(c, "create");
    cJSON *in = parse_body(c, 1);
    if (in == NULL)
        return;
    ks_obj *o = obj_find(c->res, c->ns, c->name);
    const char *node = json_get_str(in, "target.name");
    if (o == NULL) {
        resp_not_found(c->resp, c->res, c->name);
    } else if (node == NULL || !*node) {
        ks_errs e = {0};
        ERR_REQUIRED(&e, "target.name");
        resp_invalid(c->resp, "Binding", "", "Binding", c->name, &e);
        errs_free(&e);
    } else {
        cJSON *obj = ver_parse(o->cur);
        const char *cur = json_get_str(obj, "spec.nodeName");
        if (cur && *cur) {
            char *why = xasprintf("pod %s is already assigned to node \"%s\"", c->name, cur);
            resp_conflict(c->resp, c->res, c->name, why);
            free(why);
            cJSON_Delete(obj);
        } else {
            json_set_str(json_obj_ensure(obj, "spec"), "nodeName", node);
            ks_ver *v = NULL;
            ks_store_update(c->k, o, obj, 0, &v, NULL);
            ver_unref(v);
            status_success(c, 201);
        }
    }
    cJSON_Delete(in);
}

static void do_eviction(ks_ctx *c)
{
    set_verb(c, "create");
    cJSON *in = parse_body(c, 1);
    if (in == NULL)
        return;
    ks_obj *o = obj_find(c->res, c->ns, c->name);
    if (o == NULL) {
        resp_not_found(c->resp, c->res, c->name);
    } else {
        long long grace = json_get_int(in, "deleteOptions.gracePeriodSeconds", -1);
        int gone;
        ks_ver *v = api_obj_delete(c->k, o, NULL, grace, &gone);
        ver_unref(v);
        status_success(c, 201);
    }
    cJSON_Delete(in);
}

/* ---- discovery --------------------------------------------------------- */

/* Kubernetes version priority: v2 > v1 > v1beta2 > v1beta1 > v1alpha1 > others. */
/* Namespaces have no deletecollection (the namespace REST storage). */
static int no_delete_collection(const ks_res *r)
{
    return r->group[0] == '\0' && strcmp(r->plural, "namespaces") == 0;
}

static long version_priority(const char *v)
{
    if (v[0] != 'v' || !isdigit((unsigned char)v[1]))
        return 0;
    char *end;
    long major = strtol(v + 1, &end, 10);
    if (*end == '\0')
        return 3000000 + major * 1000;
    long kind = strncmp(end, "beta", 4) == 0 ? 2 : strncmp(end, "alpha", 5) == 0 ? 1 : 0;
    if (kind == 0)
        return 0;
    long minor = strtol(end + (kind == 2 ? 4 : 5), NULL, 10);
    return kind * 1000000 + major * 1000 + minor;
}

static int view_served(ks *k, ks_res *r, int i)
{
    ks_route *rt = route_find(k, r->group, r->views[i].version, r->plural);
    return rt && rt->res == r && rt->view == i;
}

/* Versions served in group, best first. */
static int group_versions(ks *k, const char *group, const char **out, int max)
{
    int n = 0;
    list_node *ln;
    list_foreach(ln, &k->resources)
    {
        ks_res *r = list_entry(ln, ks_res, link);
        if (r->removed || strcmp(r->group, group) != 0)
            continue;
        for (int i = 0; i < r->n_views; i++) {
            if (!view_served(k, r, i))
                continue;
            int have = 0;
            for (int j = 0; j < n; j++)
                if (strcmp(out[j], r->views[i].version) == 0)
                    have = 1;
            if (!have && n < max)
                out[n++] = r->views[i].version;
        }
    }
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && version_priority(out[j]) > version_priority(out[j - 1]); j--) {
            const char *t = out[j];
            out[j] = out[j - 1];
            out[j - 1] = t;
        }
    return n;
}

static void group_json(ks *k, buf_t *b, const char *group, int with_kind)
{
    const char *vs[32];
    int n = group_versions(k, group, vs, 32);
    if (with_kind)
        ks_put(b, "{\"kind\":\"APIGroup\",\"apiVersion\":\"v1\",\"name\":");
    else
        ks_put(b, "{\"name\":");
    ks_putq(b, group);
    ks_put(b, ",\"versions\":[");
    for (int i = 0; i < n; i++)
        if (buf_printf(b, "%s{\"groupVersion\":\"%s/%s\",\"version\":\"%s\"}", i ? "," : "", group, vs[i],
                       vs[i]) != 0)
            abort();
    ks_put(b, "]");
    if (n && buf_printf(b, ",\"preferredVersion\":{\"groupVersion\":\"%s/%s\",\"version\":\"%s\"}", group,
                        vs[0], vs[0]) != 0)
        abort();
    ks_put(b, "}");
}

static void discovery_groups(ks *k, ks_resp *resp)
{
    buf_t *b = &resp->body;
    buf_reset(b);
    resp->status = 200;
    resp->content_type = "application/json";
    ks_put(b, "{\"kind\":\"APIGroupList\",\"apiVersion\":\"v1\",\"groups\":[");
    const char *seen[256];
    int n = 0;
    list_node *ln;
    list_foreach(ln, &k->resources)
    {
        ks_res *r = list_entry(ln, ks_res, link);
        if (r->removed || r->group[0] == '\0')
            continue;
        int have = 0;
        for (int i = 0; i < n; i++)
            if (strcmp(seen[i], r->group) == 0)
                have = 1;
        if (have || n == 256)
            continue;
        const char *vs[1];
        if (group_versions(k, r->group, vs, 1) == 0)
            continue;
        seen[n++] = r->group;
        if (n > 1)
            ks_put(b, ",");
        group_json(k, b, r->group, 0);
    }
    ks_put(b, "]}\n");
}

static void put_csv_array(buf_t *b, const char *key, const char *csv)
{
    if (csv == NULL)
        return;
    if (buf_printf(b, ",\"%s\":[", key) != 0)
        abort();
    const char *p = csv;
    int first = 1;
    while (*p) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (buf_printf(b, "%s\"%.*s\"", first ? "" : ",", (int)n, p) != 0)
            abort();
        first = 0;
        p = e ? e + 1 : p + n;
    }
    ks_put(b, "]");
}

static void discovery_resources(ks *k, ks_resp *resp, const char *group, const char *version)
{
    buf_t *b = &resp->body;
    buf_reset(b);
    resp->status = 200;
    resp->content_type = "application/json";
    if (buf_printf(
            b,
            "{\"kind\":\"APIResourceList\",%s\"groupVersion\":\"%s%s%s\",\"resources\":[",
            *group ? "\"apiVersion\":\"v1\"," : "", group, *group ? "/" : "", version) != 0)
        abort();
    int first = 1;
    list_node *ln;
    list_foreach(ln, &k->resources)
    {
        ks_res *r = list_entry(ln, ks_res, link);
        if (r->removed || strcmp(r->group, group) != 0)
            continue;
        ks_route *rt = route_find(k, group, version, r->plural);
        if (rt == NULL || rt->res != r)
            continue;
        const ks_view *v = &r->views[rt->view];
        char hsrc[256];
        uint8_t h[SHA256_LEN];
        snprintf(hsrc, sizeof(hsrc), "%s/%s/%s", group, version, r->kind);
        sha256(hsrc, strlen(hsrc), h);
        char *hash = base64_encode(h, 8);
        if (buf_printf(
                b,
                "%s{\"name\":\"%s\",\"singularName\":\"%s\",\"namespaced\":%s,\"kind\":\"%s\",\"verbs\":["
                "\"create\",\"delete\",%s\"get\",\"list\",\"patch\",\"update\",\"watch\"]",
                first ? "" : ",", r->plural, r->singular, r->namespaced ? "true" : "false", r->kind,
                no_delete_collection(r) ? "" : "\"deletecollection\",") != 0)
            abort();
        put_csv_array(b, "shortNames", r->short_names);
        put_csv_array(b, "categories", r->categories);
        if (buf_printf(b, ",\"storageVersionHash\":\"%s\"}", hash) != 0)
            abort();
        free(hash);
        first = 0;
        const char *ns = r->namespaced ? "true" : "false";
        if (v->has_status &&
            buf_printf(b,
                       ",{\"name\":\"%s/status\",\"singularName\":\"\",\"namespaced\":%s,\"kind\":\"%s\","
                       "\"verbs\":[\"get\",\"patch\",\"update\"]}",
                       r->plural, ns, r->kind) != 0)
            abort();
        if (v->has_scale &&
            buf_printf(
                b,
                ",{\"name\":\"%s/scale\",\"singularName\":\"\",\"namespaced\":%s,\"group\":\"autoscaling\","
                "\"version\":\"v1\",\"kind\":\"Scale\",\"verbs\":[\"get\",\"patch\",\"update\"]}",
                r->plural, ns) != 0)
            abort();
        if (is_pod(r))
            ks_put(b,
                ",{\"name\":\"pods/binding\",\"singularName\":\"\",\"namespaced\":true,\"kind\":\"Binding\","
                "\"verbs\":[\"create\"]},{\"name\":\"pods/"
                "eviction\",\"singularName\":\"\",\"namespaced\":true,"
                "\"group\":\"policy\",\"version\":\"v1\",\"kind\":\"Eviction\",\"verbs\":[\"create\"]}");
    }
    ks_put(b, "]}\n");
}

static void version_doc(ks_resp *resp)
{
    buf_reset(&resp->body);
    resp->status = 200;
    resp->content_type = "application/json";
    ks_put(&resp->body,
           "{\"major\":\"1\",\"minor\":\"31\",\"emulationMajor\":\"1\",\"emulationMinor\":\"31\","
           "\"gitVersion\":\"v1.31.0\",\"gitCommit\":\"kubesim\",\"gitTreeState\":\"clean\","
           "\"buildDate\":\"2024-08-13T07:28:49Z\",\"goVersion\":\"go1.22.5\",\"compiler\":\"gc\","
           "\"platform\":\"linux/amd64\"}\n");
}

/* ---- routing ----------------------------------------------------------- */

#define MAX_SEGS 12

static int split_path(const char *path, char *buf, size_t n, char **segs)
{
    snprintf(buf, n, "%s", path);
    int ns = 0;
    char *p = buf;
    while (*p == '/')
        p++;
    while (*p && ns < MAX_SEGS) {
        segs[ns++] = p;
        char *s = strchr(p, '/');
        if (s == NULL)
            break;
        *s = '\0';
        p = s + 1;
    }
    if (*p && ns == MAX_SEGS)
        return -1;
    /* a trailing slash leaves an empty last segment: ignore it */
    if (ns && segs[ns - 1][0] == '\0')
        ns--;
    return ns;
}

static void dispatch(ks_ctx *c, const char *sub, int forced_watch)
{
    const char *m = c->req->method;
    ks_res *r = c->res;
    if (sub) {
        if (strcmp(sub, "status") == 0 && r->views[c->view].has_status) {
            if (strcmp(m, "GET") == 0)
                do_get(c);
            else if (strcmp(m, "PUT") == 0)
                do_update(c, UPD_STATUS);
            else if (strcmp(m, "PATCH") == 0)
                do_patch(c, UPD_STATUS, 0);
            else
                method_not_allowed(c->resp);
        } else if (strcmp(sub, "scale") == 0 && r->views[c->view].has_scale) {
            do_scale(c, m);
        } else if (is_pod(r) && strcmp(sub, "binding") == 0 && strcmp(m, "POST") == 0) {
            do_binding(c);
        } else if (is_pod(r) && strcmp(sub, "eviction") == 0 && strcmp(m, "POST") == 0) {
            do_eviction(c);
        } else {
            not_found_plain(c->resp);
        }
        return;
    }
    if (c->name == NULL) {
        if (strcmp(m, "GET") == 0) {
            if (forced_watch)
                do_watch(c, 0);
            else
                do_list(c);
        } else if (strcmp(m, "POST") == 0 && !forced_watch) {
            do_create(c);
        } else if (strcmp(m, "DELETE") == 0 && !forced_watch && !no_delete_collection(c->res)) {
            do_delete_collection(c);
        } else {
            method_not_allowed(c->resp);
        }
        return;
    }
    if (strcmp(m, "GET") == 0) {
        if (forced_watch || query_bool(c->req->query, "watch", 0))
            do_watch(c, 1);
        else
            do_get(c);
    } else if (forced_watch) {
        method_not_allowed(c->resp);
    } else if (strcmp(m, "PUT") == 0) {
        do_update(c, UPD_MAIN);
    } else if (strcmp(m, "PATCH") == 0) {
        do_patch(c, UPD_MAIN, 0);
    } else if (strcmp(m, "DELETE") == 0) {
        do_delete(c);
    } else {
        method_not_allowed(c->resp);
    }
}

static void not_acceptable(ks_resp *r)
{
    resp_status(r, 406, "NotAcceptable", "only the following media types are accepted: application/json",
                NULL, NULL, NULL, NULL);
}

/* Resource requests below /api/v1 or /apis/g/v: segs are the segments after the version. */
static void resource_request(ks_ctx *c, const char *group, const char *version, char **segs, int n)
{
    int forced_watch = 0;
    if (n > 0 && strcmp(segs[0], "watch") == 0) {
        forced_watch = 1;
        segs++;
        n--;
    }
    if (n == 0) {
        not_found_plain(c->resp);
        return;
    }
    const char *ns = NULL, *plural, *name = NULL, *sub = NULL;
    ks_route *rt = NULL;
    if (strcmp(segs[0], "namespaces") == 0 && n >= 3 &&
        (rt = route_find(c->k, group, version, segs[2])) != NULL && rt->res->namespaced) {
        ns = segs[1];
        plural = segs[2];
        name = n > 3 ? segs[3] : NULL;
        sub = n > 4 ? segs[4] : NULL;
        if (n > 5) {
            not_found_plain(c->resp);
            return;
        }
    } else {
        plural = segs[0];
        name = n > 1 ? segs[1] : NULL;
        sub = n > 2 ? segs[2] : NULL;
        if (n > 3) {
            not_found_plain(c->resp);
            return;
        }
        rt = route_find(c->k, group, version, plural);
        if (rt && rt->res->namespaced && name) {
            not_found_plain(c->resp); /* namespaced objects need /namespaces/{ns}/ */
            return;
        }
    }
    if (rt == NULL || rt->res->removed) {
        not_found_plain(c->resp);
        return;
    }
    int table = table_accept(c->req->accept);
    if (table == TABLE_REFUSED) {
        not_acceptable(c->resp);
        return;
    }
    /* Tables answer reads of the resource itself; other verbs and
     * subresources answer JSON, which every Table Accept kubectl sends allows. */
    if (table != TABLE_NONE && (sub || strcmp(c->req->method ? c->req->method : "GET", "GET") != 0))
        table = TABLE_NONE;
    c->table = table;
    if (table != TABLE_NONE) {
        char *inc = qparam(c, "includeObject");
        int bad = 0;
        if (inc == NULL || *inc == '\0' || strcmp(inc, "Metadata") == 0)
            c->include = TABLE_INCLUDE_METADATA;
        else if (strcmp(inc, "Object") == 0)
            c->include = TABLE_INCLUDE_OBJECT;
        else if (strcmp(inc, "None") == 0)
            c->include = TABLE_INCLUDE_NONE;
        else
            bad = 1;
        if (bad)
            resp_bad_request(
                c->resp,
                "Unable to convert to Table as requested: includeObject: Invalid value: \"%s\": must "
                "be 'Metadata', 'Object', 'None', or empty",
                inc);
        free(inc);
        if (bad)
            return;
    }
    c->res = rt->res;
    c->view = rt->view;
    c->ns = ns;
    c->name = name;
    c->sub = sub;
    if (name && *name == '\0') {
        not_found_plain(c->resp);
        return;
    }
    dispatch(c, sub, forced_watch);
}

static void count(ks_ctx *c)
{
    if (c->verb == NULL || c->res == NULL)
        return;
    char label[300];
    snprintf(label, sizeof(label), "%s%s%s", c->res->qual, c->sub ? "/" : "", c->sub ? c->sub : "");
    admin_count(c->k, c->verb, label, c->resp->status);
}

void api_handle(ks *k, const ks_req *req, ks_resp *resp)
{
    ks_ctx c;
    memset(&c, 0, sizeof(c));
    c.k = k;
    c.req = req;
    c.resp = resp;
    char buf[2048];
    char *segs[MAX_SEGS];
    int n = split_path(req->path ? req->path : "/", buf, sizeof(buf), segs);
    const char *m = req->method ? req->method : "GET";
    if (n < 0) {
        not_found_plain(resp);
        return;
    }
    if (n == 0) {
        resp->status = 200;
        resp->content_type = "application/json";
        ks_put(&resp->body,
               "{\"paths\":[\"/api\",\"/api/v1\",\"/apis\",\"/healthz\",\"/livez\",\"/readyz\",\"/"
               "version\"]}\n");
        return;
    }
    if (strcmp(segs[0], "healthz") == 0 || strcmp(segs[0], "livez") == 0 || strcmp(segs[0], "readyz") == 0) {
        resp_plain(resp, 200, "ok");
        return;
    }
    if (strcmp(segs[0], "version") == 0 && n == 1) {
        version_doc(resp);
        return;
    }
    if (strcmp(segs[0], "openapi") == 0 && n >= 2 && strcmp(segs[1], "v2") == 0 && n == 2) {
        /* Only the JSON form: a client that can take nothing else (kubectl
         * asks for protobuf first, then JSON) gets 406 and uses v3. */
        if (!accept_json(req->accept)) {
            resp_plain(resp, 406, "only application/json is served");
            return;
        }
        resp->status = 200;
        resp->content_type = "application/json";
        ks_put(&resp->body,
               "{\"swagger\":\"2.0\",\"info\":{\"title\":\"Kubernetes\",\"version\":\"v1.31.0\"},"
               "\"paths\":{},\"definitions\":{}}\n");
        return;
    }
    if (strcmp(segs[0], "openapi") == 0 && n >= 2 && strcmp(segs[1], "v3") == 0) {
        if (n == 2) {
            openapi_v3_index(k, resp);
        } else {
            char gv[512];
            size_t off = 0;
            gv[0] = '\0';
            for (int i = 2; i < n && off < sizeof(gv); i++)
                off += (size_t)snprintf(gv + off, sizeof(gv) - off, "%s%s", i > 2 ? "/" : "", segs[i]);
            openapi_v3_doc(k, resp, gv);
        }
        return;
    }
    if (strcmp(segs[0], "api") == 0) {
        if (n == 1 || (n == 2 && strcmp(segs[1], "v1") == 0)) {
            if (strcmp(m, "GET") != 0) {
                method_not_allowed(resp);
                return;
            }
            if (!accept_json(req->accept)) {
                not_acceptable(resp);
                return;
            }
            if (n == 1) {
                resp->status = 200;
                resp->content_type = "application/json";
                ks_put(&resp->body,
                    "{\"kind\":\"APIVersions\",\"versions\":[\"v1\"],\"serverAddressByClientCIDRs\":[{"
                    "\"clientCIDR\":\"0.0.0.0/0\",\"serverAddress\":\"127.0.0.1:6443\"}]}\n");
            } else {
                discovery_resources(k, resp, "", "v1");
            }
            return;
        }
        if (strcmp(segs[1], "v1") != 0) {
            not_found_plain(resp);
            return;
        }
        resource_request(&c, "", "v1", segs + 2, n - 2);
        count(&c);
        free(c.verb);
        return;
    }
    if (strcmp(segs[0], "apis") == 0) {
        if (n <= 3) {
            const char *vs[1];
            if (n >= 2 && group_versions(k, segs[1], vs, 1) == 0) {
                not_found_plain(resp);
                return;
            }
            if (n == 3) {
                int found = 0;
                const char *all[32];
                int nv = group_versions(k, segs[1], all, 32);
                for (int i = 0; i < nv; i++)
                    if (strcmp(all[i], segs[2]) == 0)
                        found = 1;
                if (!found) {
                    not_found_plain(resp);
                    return;
                }
            }
            if (strcmp(m, "GET") != 0) {
                method_not_allowed(resp);
                return;
            }
            if (!accept_json(req->accept)) {
                not_acceptable(resp);
                return;
            }
            if (n == 1) {
                discovery_groups(k, resp);
            } else if (n == 2) {
                resp->status = 200;
                resp->content_type = "application/json";
                group_json(k, &resp->body, segs[1], 1);
                ks_put(&resp->body, "\n");
            } else {
                discovery_resources(k, resp, segs[1], segs[2]);
            }
            return;
        }
        resource_request(&c, segs[1], segs[2], segs + 3, n - 3);
        count(&c);
        free(c.verb);
        return;
    }
    not_found_plain(resp);
}

ks_obj *api_obj_create(ks *k, ks_res *r, cJSON *obj)
{
    cJSON *meta = json_obj_ensure(obj, "metadata");
    char uid[37];
    uuid_v4(uid);
    json_set_str(meta, "uid", uid);
    char ts[32];
    rfc3339_now(ts, 0);
    json_set_str(meta, "creationTimestamp", ts);
    if (r->flags & KSR_GENERATION)
        json_set_int(meta, "generation", 1);
    ks_errs e = {0};
    if (r->bi && r->bi->on_create)
        r->bi->on_create(k, r, obj, &e);
    if (e.n) {
        log_warn("kubesim: internal create of %s %s failed: %s", r->kind, json_get_str_or(meta, "name", ""),
                 e.items[0].message);
        errs_free(&e);
        cJSON_Delete(obj);
        return NULL;
    }
    const char *ns = json_get_str(meta, "namespace");
    if (obj_find(r, ns, json_get_str_or(meta, "name", ""))) {
        cJSON_Delete(obj);
        return NULL;
    }
    return ks_store_create(k, r, obj, 0, NULL);
}
