/* ks_openapi: OpenAPI v3 documents, what kubectl reads before it writes.
 *
 * kubectl asks /openapi/v3 for the group-versions the server documents and
 * then the document of the group-version of each object it sends. It skips
 * client-side schema validation when the PATCH operation of the object's
 * group/version/kind takes the fieldValidation query parameter (the server
 * validates), so every served kind gets its paths and operations with the
 * x-kubernetes-group-version-kind extension and the real parameters.
 * Custom resources are documented with their CRD version's schema (plus
 * apiVersion, kind and metadata, as apiextensions-apiserver adds them);
 * built-in kinds get a permissive object schema. PATCH request bodies list
 * JSON, merge and apply patches but not strategic merge patches, so kubectl
 * builds strategic patches of built-ins from its compiled-in types instead of
 * from these schemas, which carry no patch merge keys.
 *
 * Documents are built per request from the resource table; their cost grows
 * with the number of served kinds, never with the number of objects.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kubesim/ks_int.h"
#include "core/json.h"
#include "core/mem.h"

#define META "io.k8s.apimachinery.pkg.apis.meta.v1."

static int served_view(ks *k, ks_res *r, const char *version)
{
    if (r->removed)
        return -1;
    ks_route *rt = route_find(k, r->group, version, r->plural);
    return rt && rt->res == r ? rt->view : -1;
}

/* Schema name prefix of a group/version: io.k8s.api.core.v1, io.k8s.api.apps.v1,
 * io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1, net.slurm.slinky.v1beta1. */
static char *schema_prefix(const ks_res *r, const char *version)
{
    const char *g = r->group;
    if (!(r->flags & KSR_CUSTOM)) {
        if (*g == '\0')
            return xasprintf("io.k8s.api.core.%s", version);
        if (strcmp(g, "apiextensions.k8s.io") == 0)
            return xasprintf("io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.%s", version);
        size_t n = strcspn(g, ".");
        return xasprintf("io.k8s.api.%.*s.%s", (int)n, g, version);
    }
    /* reversed DNS labels */
    buf_t b;
    buf_init(&b, BUF_UNLIMITED);
    const char *end = g + strlen(g);
    while (end > g) {
        const char *dot = end;
        while (dot > g && dot[-1] != '.')
            dot--;
        if (buf_printf(&b, "%s%.*s", b.len ? "." : "", (int)(end - dot), dot) != 0)
            abort();
        end = dot > g ? dot - 1 : g;
    }
    if (buf_printf(&b, ".%s", version) != 0)
        abort();
    char *s = xstrdup(buf_cstr(&b));
    buf_free(&b);
    return s;
}

static void put_gvk(buf_t *b, const ks_res *r, const char *version, const char *kind)
{
    ks_put(b, "{\"group\":");
    ks_putq(b, r->group);
    ks_put(b, ",\"version\":");
    ks_putq(b, version);
    ks_put(b, ",\"kind\":");
    ks_putq(b, kind);
    ks_put(b, "}");
}

static const char P_DRYRUN[] =
    "{\"name\":\"dryRun\",\"in\":\"query\",\"schema\":{\"type\":\"string\",\"uniqueItems\":true}}";
static const char P_MANAGER[] =
    "{\"name\":\"fieldManager\",\"in\":\"query\",\"schema\":{\"type\":\"string\",\"uniqueItems\":true}}";
static const char P_VALIDATION[] =
    "{\"name\":\"fieldValidation\",\"in\":\"query\",\"schema\":{\"type\":\"string\",\"uniqueItems\":true}}";
static const char P_FORCE[] =
    "{\"name\":\"force\",\"in\":\"query\",\"schema\":{\"type\":\"boolean\",\"uniqueItems\":true}}";

/* One operation. action: get list watchlist post put patch delete deletecollection. */
static void put_op(buf_t *b, const char *method, const ks_res *r, const char *version, const char *kind,
                   const char *action, const char *schema, const char *op_id)
{
    if (buf_printf(b, "\"%s\":{\"operationId\":\"%s\",\"x-kubernetes-action\":\"%s\",", method, op_id,
                   action) != 0)
        abort();
    ks_put(b, "\"x-kubernetes-group-version-kind\":");
    put_gvk(b, r, version, kind);
    ks_put(b, ",\"parameters\":[");
    int write = strcmp(action, "post") == 0 || strcmp(action, "put") == 0 || strcmp(action, "patch") == 0;
    if (write) {
        ks_put(b, P_DRYRUN);
        ks_put(b, ",");
        ks_put(b, P_MANAGER);
        ks_put(b, ",");
        ks_put(b, P_VALIDATION);
        if (strcmp(action, "patch") == 0) {
            ks_put(b, ",");
            ks_put(b, P_FORCE);
        }
    }
    ks_put(b, "]");
    if (strcmp(action, "patch") == 0) {
        ks_put(b, ",\"requestBody\":{\"content\":{");
        static const char *const types[] = {"application/apply-patch+yaml", "application/json-patch+json",
                                            "application/merge-patch+json"};
        for (size_t i = 0; i < 3; i++)
            if (buf_printf(b, "%s\"%s\":{\"schema\":{\"$ref\":\"#/components/schemas/" META "Patch\"}}",
                           i ? "," : "", types[i]) != 0)
                abort();
        ks_put(b, "},\"required\":true}");
    } else if (write) {
        if (buf_printf(
                b,
                ",\"requestBody\":{\"content\":{\"*/*\":{\"schema\":{\"$ref\":\"#/components/schemas/%s\"}}},"
                "\"required\":true}",
                schema) != 0)
            abort();
    }
    if (buf_printf(
            b,
            ",\"responses\":{\"200\":{\"description\":\"OK\",\"content\":{\"application/json\":{\"schema\":"
            "{\"$ref\":\"#/components/schemas/%s\"}}}}}}",
            schema) != 0)
        abort();
}

static void put_paths(buf_t *b, int *first, const ks_res *r, int view, const char *prefix)
{
    const ks_view *v = &r->views[view];
    char base[400], coll[1024];
    if (*r->group)
        snprintf(base, sizeof(base), "/apis/%s/%s", r->group, v->version);
    else
        snprintf(base, sizeof(base), "/api/%s", v->version);
    snprintf(coll, sizeof(coll), "%s%s/%s", base, r->namespaced ? "/namespaces/{namespace}" : "", r->plural);
    char *kind_schema = xasprintf("%s.%s", prefix, r->kind);
    char *list_schema = xasprintf("%s.%s", prefix, r->list_kind);
    char id[600];
    /* collection */
    if (buf_printf(b, "%s\"%s\":{", *first ? "" : ",", coll) != 0)
        abort();
    *first = 0;
    snprintf(id, sizeof(id), "list%s", r->kind);
    put_op(b, "get", r, v->version, r->kind, "list", list_schema, id);
    ks_put(b, ",");
    snprintf(id, sizeof(id), "create%s", r->kind);
    put_op(b, "post", r, v->version, r->kind, "post", kind_schema, id);
    ks_put(b, ",");
    snprintf(id, sizeof(id), "deletecollection%s", r->kind);
    put_op(b, "delete", r, v->version, r->kind, "deletecollection", META "Status", id);
    ks_put(b, "}");
    /* object */
    if (buf_printf(b, ",\"%s/{name}\":{", coll) != 0)
        abort();
    snprintf(id, sizeof(id), "read%s", r->kind);
    put_op(b, "get", r, v->version, r->kind, "get", kind_schema, id);
    ks_put(b, ",");
    snprintf(id, sizeof(id), "replace%s", r->kind);
    put_op(b, "put", r, v->version, r->kind, "put", kind_schema, id);
    ks_put(b, ",");
    snprintf(id, sizeof(id), "patch%s", r->kind);
    put_op(b, "patch", r, v->version, r->kind, "patch", kind_schema, id);
    ks_put(b, ",");
    snprintf(id, sizeof(id), "delete%s", r->kind);
    put_op(b, "delete", r, v->version, r->kind, "delete", META "Status", id);
    ks_put(b, "}");
    int has_status = (r->flags & KSR_CUSTOM) ? v->has_status : (r->bi && r->bi->status);
    int has_scale = (r->flags & KSR_CUSTOM) ? v->has_scale : (r->bi && r->bi->scale);
    if (has_status) {
        if (buf_printf(b, ",\"%s/{name}/status\":{", coll) != 0)
            abort();
        snprintf(id, sizeof(id), "read%sStatus", r->kind);
        put_op(b, "get", r, v->version, r->kind, "get", kind_schema, id);
        ks_put(b, ",");
        snprintf(id, sizeof(id), "replace%sStatus", r->kind);
        put_op(b, "put", r, v->version, r->kind, "put", kind_schema, id);
        ks_put(b, ",");
        snprintf(id, sizeof(id), "patch%sStatus", r->kind);
        put_op(b, "patch", r, v->version, r->kind, "patch", kind_schema, id);
        ks_put(b, "}");
    }
    if (has_scale) {
        static const ks_res scale_res = {.group = (char *)"autoscaling"};
        if (buf_printf(b, ",\"%s/{name}/scale\":{", coll) != 0)
            abort();
        snprintf(id, sizeof(id), "read%sScale", r->kind);
        put_op(b, "get", &scale_res, "v1", "Scale", "get", "io.k8s.api.autoscaling.v1.Scale", id);
        ks_put(b, ",");
        snprintf(id, sizeof(id), "replace%sScale", r->kind);
        put_op(b, "put", &scale_res, "v1", "Scale", "put", "io.k8s.api.autoscaling.v1.Scale", id);
        ks_put(b, ",");
        snprintf(id, sizeof(id), "patch%sScale", r->kind);
        put_op(b, "patch", &scale_res, "v1", "Scale", "patch", "io.k8s.api.autoscaling.v1.Scale", id);
        ks_put(b, "}");
    }
    free(kind_schema);
    free(list_schema);
}

/* The kind's schema: the CRD's (with apiVersion, kind, metadata) or a permissive object. */
static void put_kind_schema(buf_t *b, const ks_res *r, int view, const char *prefix)
{
    const ks_view *v = &r->views[view];
    cJSON *s = v->schema ? cJSON_Duplicate(v->schema, 1) : cJSON_CreateObject();
    if (v->schema == NULL) {
        json_set_str(s, "description",
                     "kubesim documents built-in kinds without their fields; the server validates them.");
        json_set_str(s, "type", "object");
        json_set_bool(s, "x-kubernetes-preserve-unknown-fields", 1);
    }
    cJSON *props = json_obj_ensure(s, "properties");
    cJSON *av = cJSON_CreateObject();
    json_set_str(av, "type", "string");
    json_set(props, "apiVersion", av);
    cJSON *kd = cJSON_CreateObject();
    json_set_str(kd, "type", "string");
    json_set(props, "kind", kd);
    cJSON *md = cJSON_CreateObject();
    cJSON *all = cJSON_AddArrayToObject(md, "allOf");
    cJSON *ref = cJSON_CreateObject();
    json_set_str(ref, "$ref", "#/components/schemas/" META "ObjectMeta");
    cJSON_AddItemToArray(all, ref);
    json_set(props, "metadata", md);
    cJSON *gvks = cJSON_CreateArray();
    cJSON *gvk = cJSON_CreateObject();
    json_set_str(gvk, "group", r->group);
    json_set_str(gvk, "kind", r->kind);
    json_set_str(gvk, "version", v->version);
    cJSON_AddItemToArray(gvks, gvk);
    json_set(s, "x-kubernetes-group-version-kind", gvks);
    if (buf_printf(b, ",\"%s.%s\":", prefix, r->kind) != 0 || json_dump_buf(s, b) != 0)
        abort();
    cJSON_Delete(s);
    if (buf_printf(b,
                   ",\"%s.%s\":{\"type\":\"object\",\"required\":[\"items\"],\"properties\":{\"apiVersion\":{"
                   "\"type\":\"string\"},\"items\":{\"type\":\"array\",\"items\":{\"$ref\":\"#/components/"
                   "schemas/%s.%s\"}},\"kind\":{\"type\":\"string\"},\"metadata\":{\"allOf\":[{\"$ref\":\"#/"
                   "components/schemas/" META "ListMeta\"}]}},\"x-kubernetes-group-version-kind\":[",
                   prefix, r->list_kind, prefix, r->kind) != 0)
        abort();
    put_gvk(b, r, v->version, r->list_kind);
    ks_put(b, "]}");
}

/* Build the document of group/version into b; 0 when nothing is served there. */
static int build_doc(ks *k, buf_t *b, const char *group, const char *version)
{
    int n = 0, custom = 0;
    list_node *ln;
    list_foreach(ln, &k->resources)
    {
        ks_res *r = list_entry(ln, ks_res, link);
        if (strcmp(r->group, group) == 0 && served_view(k, r, version) >= 0) {
            n++;
            custom |= (r->flags & KSR_CUSTOM) != 0;
        }
    }
    if (n == 0)
        return 0;
    if (buf_printf(b, "{\"openapi\":\"3.0.0\",\"info\":{\"title\":\"%s\",\"version\":\"%s\"},\"paths\":{",
                   custom ? "Kubernetes CRD Swagger" : "Kubernetes", custom ? "v0.1.0" : "v1.31.0") != 0)
        abort();
    int first = 1;
    list_foreach(ln, &k->resources)
    {
        ks_res *r = list_entry(ln, ks_res, link);
        int view = strcmp(r->group, group) == 0 ? served_view(k, r, version) : -1;
        if (view < 0)
            continue;
        char *prefix = schema_prefix(r, version);
        put_paths(b, &first, r, view, prefix);
        free(prefix);
    }
    ks_put(b, "},\"components\":{\"schemas\":{");
    ks_put(b, "\"" META
              "ObjectMeta\":{\"description\":\"ObjectMeta is metadata that all persisted resources must "
              "have, which includes all objects users must create.\",\"type\":\"object\","
              "\"x-kubernetes-preserve-unknown-fields\":true}");
    ks_put(b, ",\"" META "ListMeta\":{\"type\":\"object\",\"x-kubernetes-preserve-unknown-fields\":true}");
    ks_put(b,
           ",\"" META "Patch\":{\"description\":\"Patch is provided to give a concrete name and type to the "
           "Kubernetes PATCH request body.\",\"type\":\"object\"}");
    ks_put(b, ",\"" META "Status\":{\"type\":\"object\",\"x-kubernetes-preserve-unknown-fields\":true,"
           "\"x-kubernetes-group-version-kind\":[{\"group\":\"\",\"kind\":\"Status\",\"version\":\"v1\"}]}");
    ks_put(
        b,
        ",\"io.k8s.api.autoscaling.v1.Scale\":{\"type\":\"object\",\"x-kubernetes-preserve-unknown-fields\":"
        "true,\"x-kubernetes-group-version-kind\":[{\"group\":\"autoscaling\",\"kind\":\"Scale\",\"version\":"
        "\"v1\"}]}");
    list_foreach(ln, &k->resources)
    {
        ks_res *r = list_entry(ln, ks_res, link);
        int view = strcmp(r->group, group) == 0 ? served_view(k, r, version) : -1;
        if (view < 0)
            continue;
        char *prefix = schema_prefix(r, version);
        put_kind_schema(b, r, view, prefix);
        free(prefix);
    }
    ks_put(b, "}}}\n");
    return 1;
}

/* FNV-1a of a document: the hash in its URL changes when the document does. */
static unsigned long long doc_hash(const buf_t *b)
{
    unsigned long long h = 1469598103934665603ULL;
    for (size_t i = 0; i < b->len; i++) {
        h ^= (unsigned char)b->data[i];
        h *= 1099511628211ULL;
    }
    return h;
}

void openapi_v3_index(ks *k, ks_resp *resp)
{
    buf_t *out = &resp->body;
    buf_reset(out);
    resp->status = 200;
    resp->content_type = "application/json";
    ks_put(out, "{\"paths\":{");
    /* Every distinct served group/version, in resource order. */
    char seen[128][300];
    int n = 0;
    buf_t doc;
    buf_init(&doc, BUF_UNLIMITED);
    list_node *ln;
    list_foreach(ln, &k->resources)
    {
        ks_res *r = list_entry(ln, ks_res, link);
        for (int i = 0; i < r->n_views && n < 128; i++) {
            if (served_view(k, r, r->views[i].version) != i)
                continue;
            char gv[300];
            if (*r->group)
                snprintf(gv, sizeof(gv), "apis/%s/%s", r->group, r->views[i].version);
            else
                snprintf(gv, sizeof(gv), "api/%s", r->views[i].version);
            int have = 0;
            for (int j = 0; j < n && !have; j++)
                have = strcmp(seen[j], gv) == 0;
            if (have)
                continue;
            snprintf(seen[n], sizeof(seen[n]), "%s", gv);
            buf_reset(&doc);
            build_doc(k, &doc, r->group, r->views[i].version);
            if (buf_printf(out, "%s\"%s\":{\"serverRelativeURL\":\"/openapi/v3/%s?hash=%016llX\"}",
                           n ? "," : "", gv, gv, doc_hash(&doc)) != 0)
                abort();
            n++;
        }
    }
    buf_free(&doc);
    ks_put(out, "}}\n");
}

void openapi_v3_doc(ks *k, ks_resp *resp, const char *gv)
{
    char group[256], version[64];
    if (strncmp(gv, "api/", 4) == 0 && strchr(gv + 4, '/') == NULL) {
        group[0] = '\0';
        snprintf(version, sizeof(version), "%s", gv + 4);
    } else if (strncmp(gv, "apis/", 5) == 0 && strchr(gv + 5, '/') && !strchr(strchr(gv + 5, '/') + 1, '/')) {
        const char *sl = strchr(gv + 5, '/');
        snprintf(group, sizeof(group), "%.*s", (int)(sl - gv - 5), gv + 5);
        snprintf(version, sizeof(version), "%s", sl + 1);
    } else {
        resp_plain(resp, 404, "404 page not found\n");
        return;
    }
    buf_reset(&resp->body);
    if (!build_doc(k, &resp->body, group, version)) {
        buf_reset(&resp->body);
        resp_plain(resp, 404, "404 page not found\n");
        return;
    }
    resp->status = 200;
    resp->content_type = "application/json";
}
