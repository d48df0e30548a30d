/* ks_admin: the /kubesim/ admin API (faults, counters, kubelet actions,
 * state), request counters and the --state file.
 *
 * Admin endpoints (JSON in, JSON out; no authentication, no faults):
 *   GET  /kubesim/counters            request counts by verb, resource, code
 *   POST /kubesim/counters/reset
 *   GET  /kubesim/stats               objects, watches, rv, history sizes, RSS
 *   GET  /kubesim/faults              current fault settings
 *   POST /kubesim/faults {"rate429":0.1,"rate500":0,"latencyMs":5,"expireWatches":2,"retryAfter":1,
 *                         "faultPath":"/secrets/","writeRate":50} (the 429/500 faults only for paths
 *                         containing it, null or "" for all; writeRate: API writes applied at most
 *                         that many per second, in order, 0 for no limit: ks_write_wait_ms)
 *   POST /kubesim/drop-watches        end every watch now without the chunked terminator ({"clean":true}:
 * with it) POST /kubesim/restart             drop every connection and watch, keep the store, compact the
 * history POST /kubesim/pods/fail {"namespace":"ns","name":"p"|"labelSelector":"a=b","phase":"Failed",
 *                                      "reason":"Error","exitCode":1}
 *   POST /kubesim/nodes/add           {"count":N}
 *   POST /kubesim/nodes/delete        {"names":["node-00001"]}
 *   POST /kubesim/nodes/taint         {"names":[...],"taint":{"key":"k","value":"v","effect":"NoSchedule"},
 *                                      "remove":false}
 *   POST /kubesim/nodes/cordon        {"names":[...],"unschedulable":true}
 *   POST /kubesim/state/save          {"path":"/tmp/x.json"} (default: --state)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kubesim/ks_int.h"
#include "core/err.h"
#include "core/file.h"
#include "core/json.h"
#include "core/labels.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/rfc3339.h"

/* ---- counters ---------------------------------------------------------- */

/* A counter: the map key is the embedded string. */
typedef struct counter {
    unsigned long long n;
    char key[];
} counter;

void admin_count(ks *k, const char *verb, const char *resource, int code)
{
    char key[400];
    snprintf(key, sizeof(key), "%s\t%s\t%d", verb, resource, code);
    counter *c = map_get(&k->counters, key);
    if (c == NULL) {
        c = xmalloc(sizeof(*c) + strlen(key) + 1);
        c->n = 0;
        strcpy(c->key, key);
        map_put(&k->counters, c->key, c);
    }
    c->n++;
}

static void counters_reset(ks *k)
{
    map_free(&k->counters);
    k->n_requests = 0;
}

static void bump(cJSON *o, const char *key, double by)
{
    cJSON *c = cJSON_GetObjectItemCaseSensitive(o, key);
    if (c)
        cJSON_SetNumberValue(c, c->valuedouble + by);
    else
        cJSON_AddItemToObject(o, key, cJSON_CreateNumber(by));
}

static cJSON *counters_json(ks *k)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *verbs = cJSON_CreateObject(), *codes = cJSON_CreateObject(), *res = cJSON_CreateObject();
    cJSON *creates = cJSON_CreateObject(), *list = cJSON_CreateArray();
    double lists = 0, watches = 0, total = 0;
    size_t it = 0;
    const char *key;
    void *val;
    while (map_next(&k->counters, &it, &key, &val)) {
        double n = (double)((counter *)val)->n;
        char verb[64], resource[300];
        int code = 0;
        const char *t1 = strchr(key, '\t');
        const char *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
        if (!t1 || !t2)
            continue;
        snprintf(verb, sizeof(verb), "%.*s", (int)(t1 - key), key);
        snprintf(resource, sizeof(resource), "%.*s", (int)(t2 - t1 - 1), t1 + 1);
        code = atoi(t2 + 1);
        char cs[16];
        snprintf(cs, sizeof(cs), "%d", code);
        total += n;
        bump(verbs, verb, n);
        bump(codes, cs, n);
        if (*resource) {
            cJSON *r = cJSON_GetObjectItemCaseSensitive(res, resource);
            if (r == NULL) {
                r = cJSON_CreateObject();
                cJSON_AddItemToObject(res, resource, r);
            }
            bump(r, verb, n);
        }
        if (strcmp(verb, "create") == 0 && *resource)
            bump(creates, resource, n);
        if (strcmp(verb, "list") == 0)
            lists += n;
        if (strcmp(verb, "watch") == 0)
            watches += n;
        cJSON *e = cJSON_CreateObject();
        json_set_str(e, "verb", verb);
        json_set_str(e, "resource", resource);
        json_set_int(e, "code", code);
        json_set_int(e, "count", (long long)n);
        cJSON_AddItemToArray(list, e);
    }
    json_set_int(o, "total", (long long)total);
    json_set_int(o, "lists", (long long)lists);
    json_set_int(o, "watches", (long long)watches);
    json_set(o, "creates", creates);
    json_set(o, "byVerb", verbs);
    json_set(o, "byCode", codes);
    json_set(o, "byResource", res);
    json_set(o, "requests", list);
    return o;
}

/* ---- faults ------------------------------------------------------------ */

int admin_faults_apply(ks *k, const char *path, ks_resp *resp)
{
    if (k->rate_429 <= 0 && k->rate_500 <= 0)
        return 0;
    if (k->fault_path && strstr(path, k->fault_path) == NULL)
        return 0;
    double r = ks_randf(k);
    if (r < k->rate_429) {
        resp_plain(resp, 429, "Too many requests, please try again later.\n");
        if (buf_printf(&resp->headers, "Retry-After: %u\r\n", k->cfg.retry_after_s) != 0)
            abort();
        admin_count(k, "injected", "", 429);
        return 1;
    }
    if (r < k->rate_429 + k->rate_500) {
        resp_status(resp, 500, "InternalError", "Internal error occurred: kubesim: injected fault", NULL,
                    NULL, NULL, NULL);
        admin_count(k, "injected", "", 500);
        return 1;
    }
    return 0;
}

static cJSON *faults_json(ks *k)
{
    cJSON *o = cJSON_CreateObject();
    json_set(o, "rate429", cJSON_CreateNumber(k->rate_429));
    json_set(o, "rate500", cJSON_CreateNumber(k->rate_500));
    json_set_int(o, "latencyMs", k->latency_ms);
    json_set(o, "writeRate", cJSON_CreateNumber(k->write_rate));
    json_set_int(o, "expireWatches", k->expire_watches);
    json_set_int(o, "retryAfter", k->cfg.retry_after_s);
    json_set(o, "faultPath", k->fault_path ? cJSON_CreateString(k->fault_path) : cJSON_CreateNull());
    return o;
}

/* ---- state ------------------------------------------------------------- */

static int res_rank(const ks_res *r)
{
    if (strcmp(r->plural, "customresourcedefinitions") == 0)
        return 0;
    if (r->group[0] == '\0' && strcmp(r->plural, "namespaces") == 0)
        return 1;
    if (r->group[0] == '\0' && strcmp(r->plural, "nodes") == 0)
        return 2;
    return 3;
}

int ks_state_save(ks *k, const char *path)
{
    if (path == NULL)
        path = k->cfg.state_file;
    if (path == NULL)
        return OP_EINVAL;
    buf_t b;
    buf_init(&b, BUF_UNLIMITED);
    if (buf_printf(&b,
                   "{\"kind\":\"KubesimState\",\"apiVersion\":\"kubesim/"
                   "v1\",\"resourceVersion\":\"%llu\",\"objects\":[\n",
                   (unsigned long long)k->rv) != 0)
        abort();
    int first = 1;
    for (int rank = 0; rank < 4; rank++) {
        list_node *n;
        list_foreach(n, &k->resources)
        {
            ks_res *r = list_entry(n, ks_res, link);
            if (r->removed || res_rank(r) != rank)
                continue;
            size_t cnt;
            ks_ver **vs = ks_store_sorted(r, NULL, &cnt);
            for (size_t i = 0; i < cnt; i++) {
                if (!first)
                    ks_put(&b, ",\n");
                first = 0;
                if (buf_append(&b, vs[i]->data, vs[i]->len) != 0)
                    abort();
            }
            free(vs);
        }
    }
    ks_put(&b, "\n]}\n");
    char *tmp = xasprintf("%s.tmp.%d", path, (int)getpid());
    FILE *f = fopen(tmp, "w");
    int rc = 0;
    if (f == NULL) {
        rc = OP_ERRNO(errno);
    } else {
        if (fwrite(b.data, 1, b.len, f) != b.len)
            rc = OP_EIO;
        if (fclose(f) != 0 && rc == 0)
            rc = OP_EIO;
        if (rc == 0 && rename(tmp, path) != 0)
            rc = OP_ERRNO(errno);
    }
    if (rc)
        unlink(tmp);
    free(tmp);
    buf_free(&b);
    return rc;
}

int admin_state_load(ks *k, const char *path)
{
    char *data = NULL;
    size_t len = 0;
    int rc = file_read_all(path, (size_t)4 << 30, &data, &len);
    if (rc)
        return rc;
    cJSON *doc = json_parse(data, len, NULL);
    free(data);
    if (doc == NULL || strcmp(json_get_str_or(doc, "kind", ""), "KubesimState") != 0) {
        cJSON_Delete(doc);
        return OP_EPARSE;
    }
    k->loading = 1;
    uint64_t rv = 0;
    parse_u64(json_get_str_or(doc, "resourceVersion", "0"), &rv);
    cJSON *objs = (cJSON *)json_child(doc, "objects");
    int n = 0, skipped = 0;
    while (objs && objs->child) {
        cJSON *o = cJSON_DetachItemViaPointer(objs, objs->child);
        ks_res *r = res_by_kind(k, json_get_str(o, "apiVersion"), json_get_str_or(o, "kind", ""));
        if (r == NULL) {
            skipped++;
            cJSON_Delete(o);
            continue;
        }
        uint64_t orv = 0;
        parse_u64(json_get_str_or(o, "metadata.resourceVersion", "0"), &orv);
        if (orv > rv)
            rv = orv;
        ks_store_load(k, r, o);
        n++;
    }
    cJSON_Delete(doc);
    if (rv > k->rv)
        k->rv = rv;
    /* Everything before the restart is history the server no longer has. */
    hist_compact_all(k);
    k->loading = 0;
    log_info("kubesim: loaded %d objects from %s (rv %llu, %d of unknown kinds skipped)", n, path,
             (unsigned long long)k->rv, skipped);
    return 0;
}

/* ---- admin endpoints --------------------------------------------------- */

static void reply(ks_resp *resp, int code, cJSON *o)
{
    resp_json_take(resp, code, o);
}

static cJSON *ok_obj(void)
{
    cJSON *o = cJSON_CreateObject();
    json_set_str(o, "status", "ok");
    return o;
}

static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    while (f && fgets(line, sizeof(line), f))
        if (strncmp(line, "VmRSS:", 6) == 0)
            v = atol(line + 6);
    if (f)
        fclose(f);
    return v;
}

static cJSON *stats_json(ks *k)
{
    ks_stats st;
    ks_get_stats(k, &st);
    cJSON *o = cJSON_CreateObject();
    char rv[24];
    snprintf(rv, sizeof(rv), "%llu", (unsigned long long)k->rv);
    json_set_str(o, "resourceVersion", rv);
    json_set_int(o, "objects", (long long)st.objects);
    json_set_int(o, "watches", (long long)st.watches);
    json_set_int(o, "historyEvents", (long long)st.history_events);
    json_set_int(o, "jsonBytes", (long long)st.json_bytes);
    json_set_int(o, "rssKiB", rss_kib());
    cJSON *per = cJSON_CreateObject();
    list_node *n;
    list_foreach(n, &k->resources)
    {
        ks_res *r = list_entry(n, ks_res, link);
        if (r->removed)
            continue;
        cJSON *e = cJSON_CreateObject();
        json_set_int(e, "objects", (long long)r->objs.count);
        json_set_int(e, "history", (long long)r->hist.n);
        json_set_int(e, "compacted", (long long)r->hist.compacted);
        cJSON_AddItemToObject(per, r->qual, e);
    }
    json_set(o, "resources", per);
    return o;
}

static cJSON *body_json(const ks_req *req)
{
    if (req->body_len == 0)
        return cJSON_CreateObject();
    return json_parse_untrusted(req->body, req->body_len, NULL);
}

static int names_of(const cJSON *body, char ***out)
{
    const cJSON *names = json_child(body, "names");
    int n = json_len(names), i = 0;
    *out = xcalloc((size_t)n + 1, sizeof(char *));
    for (const cJSON *x = names ? names->child : NULL; x; x = x->next)
        if (cJSON_IsString(x))
            (*out)[i++] = xstrdup(x->valuestring);
    return i;
}

static void free_names(char **v, int n)
{
    for (int i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

static void node_edit(ks *k, ks_resp *resp, const cJSON *body, int taint)
{
    ks_res *nr = res_find(k, "", "nodes");
    char **names;
    int n = names_of(body, &names);
    int changed = 0;
    for (int i = 0; i < n; i++) {
        ks_obj *o = obj_find(nr, NULL, names[i]);
        if (o == NULL)
            continue;
        cJSON *obj = ver_parse(o->cur);
        cJSON *spec = json_obj_ensure(obj, "spec");
        if (taint) {
            const cJSON *t = json_child(body, "taint");
            const char *key = json_get_str_or(t, "key", "");
            const char *eff = json_get_str_or(t, "effect", "NoSchedule");
            cJSON *taints = (cJSON *)json_child(spec, "taints");
            if (!cJSON_IsArray(taints)) {
                taints = cJSON_CreateArray();
                json_set(spec, "taints", taints);
            }
            int idx = 0, found = -1;
            for (cJSON *x = taints->child; x; x = x->next, idx++)
                if (strcmp(json_get_str_or(x, "key", ""), key) == 0 &&
                    strcmp(json_get_str_or(x, "effect", ""), eff) == 0)
                    found = idx;
            if (found >= 0)
                cJSON_DeleteItemFromArray(taints, found);
            if (!json_get_bool(body, "remove", 0)) {
                cJSON *nt = cJSON_CreateObject();
                json_set_str(nt, "key", key);
                if (json_get_str(t, "value"))
                    json_set_str(nt, "value", json_get_str(t, "value"));
                json_set_str(nt, "effect", eff);
                if (strcmp(eff, "NoExecute") == 0) {
                    char ts[32];
                    rfc3339_now(ts, 0);
                    json_set_str(nt, "timeAdded", ts);
                }
                cJSON_AddItemToArray(taints, nt);
            }
            if (json_len(taints) == 0)
                json_del(spec, "taints");
        } else {
            if (json_get_bool(body, "unschedulable", 1))
                json_set_bool(spec, "unschedulable", 1);
            else
                json_del(spec, "unschedulable");
        }
        ks_ver *v = NULL;
        ks_store_update(k, o, obj, 0, &v, NULL);
        ver_unref(v);
        changed++;
    }
    free_names(names, n);
    cJSON *o = ok_obj();
    json_set_int(o, "changed", changed);
    reply(resp, 200, o);
}

static void pods_fail(ks *k, ks_resp *resp, const cJSON *body)
{
    ks_res *pr = res_find(k, "", "pods");
    const char *ns = json_get_str(body, "namespace");
    const char *name = json_get_str(body, "name");
    const char *sel = json_get_str(body, "labelSelector");
    const char *phase = json_get_str_or(body, "phase", "Failed");
    if (strcmp(phase, "Failed") && strcmp(phase, "Succeeded")) {
        resp_bad_request(resp, "phase must be Failed or Succeeded");
        return;
    }
    lsel *ls = NULL;
    char err[256];
    if (sel && lsel_parse(sel, &ls, err, sizeof(err)) != 0) {
        resp_bad_request(resp, "%s", err);
        return;
    }
    /* One pod by name: a lookup, not a sort of every pod (a churn of 1,000
     * failures a second at 16,384 pods was applied at a fifth of that rate
     * when each one sorted the store). */
    int direct = name && ns && !ls;
    size_t n = 0, nk = 0;
    ks_ver **vs = direct ? NULL : ks_store_sorted(pr, ns, &n);
    char **keys = xcalloc(n + 2, sizeof(char *));
    if (direct) {
        char kb[600];
        obj_key(kb, sizeof(kb), ns, name);
        if (map_get(&pr->objs, kb))
            keys[nk++] = xstrdup(kb);
    }
    for (size_t i = 0; i < n; i++) {
        if (name && strcmp(ver_name(vs[i]), name) != 0)
            continue;
        if (!name && !ls)
            continue;
        if (ls && !obj_matches(vs[i], NULL, ls, NULL))
            continue;
        char kb[600];
        obj_key(kb, sizeof(kb), ver_ns(vs[i]), ver_name(vs[i]));
        keys[nk++] = xstrdup(kb);
    }
    free(vs);
    int done = 0;
    for (size_t i = 0; i < nk; i++) {
        ks_obj *o = map_get(&pr->objs, keys[i]);
        if (o &&
            kubelet_set_phase(k, o, phase, json_get_str(body, "reason"),
                              (int)json_get_int(body, "exitCode", strcmp(phase, "Failed") == 0 ? 1 : 0)) == 0)
            done++;
        free(keys[i]);
    }
    free(keys);
    lsel_free(ls);
    cJSON *o = ok_obj();
    json_set_int(o, "updated", done);
    reply(resp, done || (!name && !ls) ? 200 : 404, o);
}

void admin_handle(ks *k, const ks_req *req, ks_resp *resp)
{
    const char *p = req->path + strlen("/kubesim");
    const char *m = req->method;
    int get = strcmp(m, "GET") == 0, post = strcmp(m, "POST") == 0 || strcmp(m, "PUT") == 0;
    cJSON *body = NULL;
    if (post) {
        body = body_json(req);
        if (body == NULL || !cJSON_IsObject(body)) {
            resp_bad_request(resp, "admin requests take a JSON object");
            cJSON_Delete(body);
            return;
        }
    }
    if (get && strcmp(p, "/counters") == 0) {
        reply(resp, 200, counters_json(k));
    } else if (post && strcmp(p, "/counters/reset") == 0) {
        counters_reset(k);
        reply(resp, 200, ok_obj());
    } else if (get && strcmp(p, "/stats") == 0) {
        reply(resp, 200, stats_json(k));
    } else if (get && strcmp(p, "/faults") == 0) {
        reply(resp, 200, faults_json(k));
    } else if (post && strcmp(p, "/faults") == 0) {
        const cJSON *v;
        if ((v = json_child(body, "rate429")) && cJSON_IsNumber(v))
            k->rate_429 = v->valuedouble;
        if ((v = json_child(body, "rate500")) && cJSON_IsNumber(v))
            k->rate_500 = v->valuedouble;
        if ((v = json_child(body, "latencyMs")) && cJSON_IsNumber(v))
            k->latency_ms = (unsigned)json_num_clamp(v, 0, 0, 3600000);
        if ((v = json_child(body, "writeRate")) && cJSON_IsNumber(v))
            k->write_rate = v->valuedouble > 0 ? v->valuedouble : 0;
        if ((v = json_child(body, "expireWatches")) && cJSON_IsNumber(v))
            k->expire_watches = (int)json_num_clamp(v, 0, 0, 1000000);
        if ((v = json_child(body, "retryAfter")) && cJSON_IsNumber(v))
            k->cfg.retry_after_s = (unsigned)json_num_clamp(v, 1, 0, 3600);
        if ((v = json_child(body, "faultPath"))) {
            free(k->fault_path);
            k->fault_path = cJSON_IsString(v) && v->valuestring[0] ? xstrdup(v->valuestring) : NULL;
        }
        reply(resp, 200, faults_json(k));
    } else if (post && strcmp(p, "/drop-watches") == 0) {
        size_t n = (size_t)k->n_watches;
        watch_end_all(k, !json_get_bool(body, "clean", 0));
        cJSON *o = ok_obj();
        json_set_int(o, "dropped", (long long)n);
        reply(resp, 200, o);
    } else if (post && strcmp(p, "/restart") == 0) {
        watch_end_all(k, 1);
        hist_compact_all(k);
        resp->after = KS_AFTER_DROP_CONNECTIONS;
        cJSON *o = ok_obj();
        char rv[24];
        snprintf(rv, sizeof(rv), "%llu", (unsigned long long)k->rv);
        json_set_str(o, "resourceVersion", rv);
        reply(resp, 200, o);
        ks_put(&resp->headers, "Connection: close\r\n");
    } else if (post && strcmp(p, "/pods/fail") == 0) {
        pods_fail(k, resp, body);
    } else if (post && strcmp(p, "/nodes/add") == 0) {
        int count = (int)json_get_int(body, "count", 1);
        ks_res *nr = res_find(k, "", "nodes");
        int first = 1;
        while (1) {
            char name[32];
            snprintf(name, sizeof(name), "node-%05d", first);
            if (!obj_find(nr, NULL, name))
                break;
            first++;
        }
        /* continue after the highest existing index */
        size_t it = 0;
        const char *key;
        void *val;
        while (map_next(&nr->objs, &it, &key, &val)) {
            int idx;
            if (sscanf(key, "node-%d", &idx) == 1 && idx >= first)
                first = idx + 1;
        }
        kubelet_create_nodes(k, first, count);
        cJSON *o = ok_obj();
        cJSON *names = cJSON_CreateArray();
        for (int i = first; i < first + count; i++) {
            char name[32];
            snprintf(name, sizeof(name), "node-%05d", i);
            cJSON_AddItemToArray(names, cJSON_CreateString(name));
        }
        json_set(o, "added", names);
        reply(resp, 200, o);
    } else if (post && strcmp(p, "/nodes/delete") == 0) {
        ks_res *nr = res_find(k, "", "nodes");
        char **names;
        int n = names_of(body, &names), done = 0;
        for (int i = 0; i < n; i++) {
            ks_obj *o = obj_find(nr, NULL, names[i]);
            if (o) {
                int gone;
                ks_ver *v = api_obj_delete(k, o, NULL, -1, &gone);
                ver_unref(v);
                done++;
            }
        }
        free_names(names, n);
        cJSON *o = ok_obj();
        json_set_int(o, "deleted", done);
        reply(resp, 200, o);
    } else if (post && strcmp(p, "/nodes/taint") == 0) {
        node_edit(k, resp, body, 1);
    } else if (post && strcmp(p, "/nodes/cordon") == 0) {
        node_edit(k, resp, body, 0);
    } else if (post && strcmp(p, "/state/save") == 0) {
        const char *path = json_get_str(body, "path");
        int rc = ks_state_save(k, path);
        if (rc) {
            resp_statusf(resp, 500, "InternalError", "saving state: %s", err_str(rc));
        } else {
            cJSON *o = ok_obj();
            json_set_str(o, "path", path ? path : k->cfg.state_file);
            reply(resp, 200, o);
        }
    } else {
        resp_plain(resp, 404, "404 page not found\n");
    }
    cJSON_Delete(body);
}
