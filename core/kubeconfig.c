#include "core/kubeconfig.h"

#include <ctype.h>
#include <errno.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/crypto.h"
#include "core/err.h"
#include "core/file.h"
#include "core/json.h"
#include "core/log.h"
#include "core/map.h"
#include "core/mem.h"
#include "core/yaml.h"

/* Write a message into err and return code. */
static int fail(char *err, size_t errlen, int code, const char *fmt, ...) OP_PRINTF(4, 5);
static int fail(char *err, size_t errlen, int code, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return code;
}

/* Strip leading and trailing whitespace in place; returns s. */
static char *trim(char *s)
{
    size_t n = strlen(s);
    while (n > 0 && isspace((unsigned char)s[n - 1]))
        s[--n] = '\0';
    size_t i = 0;
    while (s[i] && isspace((unsigned char)s[i]))
        i++;
    if (i)
        memmove(s, s + i, n - i + 1);
    return s;
}

static int is_blank(const char *s)
{
    return s == NULL || *s == '\0';
}

static int file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* Read a small text file and trim it. */
static int read_trimmed(const char *path, char **out)
{
    size_t len;
    int rc = file_read_all(path, KCFG_MAX_FILE, out, &len);
    if (rc)
        return rc;
    trim(*out);
    return 0;
}

/* ------------------------------------------------------------- server URL */

/* Split a kubeconfig server URL into the result's server, host, port, tls
 * and path_prefix. A URL without a scheme is taken as https (as client-go
 * does when TLS settings are present, which is every real case). */
static int parse_server(kcfg *c, const char *url, char *what, char *err, size_t errlen)
{
    const char *p = url;
    int tls = 1;
    const char *sep = strstr(url, "://");
    if (sep) {
        size_t sl = (size_t)(sep - url);
        if (sl == 5 && strncasecmp(url, "https", 5) == 0)
            tls = 1;
        else if (sl == 4 && strncasecmp(url, "http", 4) == 0)
            tls = 0;
        else
            return fail(err, errlen, OP_ECONFIG, "%s: server \"%s\": scheme must be https or http", what,
                        url);
        p = sep + 3;
    }
    size_t alen = strcspn(p, "/?#");
    const char *rest = p + alen;
    if (strpbrk(rest, "?#"))
        return fail(err, errlen, OP_ECONFIG, "%s: server \"%s\": a query or fragment is not allowed", what,
                    url);
    if (memchr(p, '@', alen))
        return fail(err, errlen, OP_ECONFIG,
                    "%s: server \"%s\": user information in the URL is not supported", what, url);
    const char *host = p, *hend, *port = NULL;
    if (*p == '[') {
        const char *rb = memchr(p, ']', alen);
        if (rb == NULL)
            return fail(err, errlen, OP_ECONFIG, "%s: server \"%s\": unterminated IPv6 address", what, url);
        host = p + 1;
        hend = rb;
        if (rb + 1 < p + alen) {
            if (rb[1] != ':')
                return fail(err, errlen, OP_ECONFIG, "%s: server \"%s\": bad address", what, url);
            port = rb + 2;
        }
    } else {
        const char *colon = memchr(p, ':', alen);
        hend = colon ? colon : p + alen;
        if (colon)
            port = colon + 1;
    }
    if (hend == host)
        return fail(err, errlen, OP_ECONFIG, "%s: server \"%s\": no host", what, url);
    long pn = tls ? 443 : 80;
    if (port) {
        char *end;
        errno = 0;
        pn = strtol(port, &end, 10);
        if (end == port || end != p + alen || errno || pn < 1 || pn > 65535)
            return fail(err, errlen, OP_ECONFIG, "%s: server \"%s\": bad port", what, url);
    }
    c->tls = tls;
    c->port = (int)pn;
    c->host = xstrndup(host, (size_t)(hend - host));
    int v6 = strchr(c->host, ':') != NULL;
    c->server =
        xasprintf("%s://%s%s%s:%d", tls ? "https" : "http", v6 ? "[" : "", c->host, v6 ? "]" : "", c->port);
    size_t rl = strlen(rest);
    while (rl > 0 && rest[rl - 1] == '/')
        rl--;
    c->path_prefix = xstrndup(rest, rl);
    return 0;
}

/* ---------------------------------------------------------- merged files */

/* A named cluster, user or context and the file it came from. */
struct entry {
    const cJSON *body; /* the "cluster"/"user"/"context" object (may be NULL) */
    const char *file;  /* points into merged.files */
    char *dir;         /* directory of file, for relative paths */
};

struct merged {
    cJSON **docs;
    char **files;
    size_t n;
    map_t clusters, users, contexts; /* name -> struct entry */
    const char *current_context;
    const char *cc_file;
    char *where; /* "kubeconfig a" or "kubeconfig a:b" for messages */
};

static void entry_free(void *v)
{
    struct entry *e = v;
    free(e->dir);
    free(e);
}

static const map_type entry_type = {.val_free = entry_free};

static void merged_free(struct merged *mg)
{
    map_free(&mg->clusters);
    map_free(&mg->users);
    map_free(&mg->contexts);
    for (size_t i = 0; i < mg->n; i++) {
        cJSON_Delete(mg->docs[i]);
        free(mg->files[i]);
    }
    free(mg->docs);
    free(mg->files);
    free(mg->where);
}

static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (slash == NULL)
        return xstrdup(".");
    if (slash == path)
        return xstrdup("/");
    return xstrndup(path, (size_t)(slash - path));
}

/* Add the entries of one list ("clusters") of one file; the first
 * definition of a name wins. */
static int merge_list(struct merged *mg, const cJSON *doc, const char *file, const char *list,
                      const char *inner, map_t *into, char *err, size_t errlen)
{
    const cJSON *arr = json_child(doc, list);
    if (arr == NULL || cJSON_IsNull(arr))
        return 0;
    if (!cJSON_IsArray(arr))
        return fail(err, errlen, OP_ECONFIG, "kubeconfig %s: \"%s\" must be a list", file, list);
    int i = 0;
    const cJSON *item;
    cJSON_ArrayForEach(item, arr)
    {
        const char *name = json_get_str(item, "name");
        if (!cJSON_IsObject(item) || is_blank(name))
            return fail(err, errlen, OP_ECONFIG, "kubeconfig %s: %s[%d]: missing \"name\"", file, list, i);
        const cJSON *body = json_child(item, inner);
        if (body && !cJSON_IsObject(body) && !cJSON_IsNull(body))
            return fail(err, errlen, OP_ECONFIG, "kubeconfig %s: %s[%d] (\"%s\"): \"%s\" must be a mapping",
                        file, list, i, name, inner);
        if (map_get(into, name) == NULL) {
            struct entry *e = xcalloc(1, sizeof(*e));
            e->body = cJSON_IsObject(body) ? body : NULL;
            e->file = file;
            e->dir = dir_of(file);
            map_put(into, name, e); /* name lives in the doc, which outlives the map */
        }
        i++;
    }
    return 0;
}

static int merge_file(struct merged *mg, const char *path, int must_exist, char *err, size_t errlen)
{
    char *text;
    size_t len;
    int rc = file_read_all(path, KCFG_MAX_FILE, &text, &len);
    if (rc == OP_ERRNO(ENOENT) && !must_exist) {
        log_debug("Kubeconfig file in the list does not exist, skipped. file=%s", path);
        return 0;
    }
    if (rc)
        return fail(err, errlen, rc, "kubeconfig %s: %s", path, err_str(rc));
    char yerr[256];
    cJSON *docs = yaml_parse_all(text, len, yerr, sizeof(yerr));
    free(text);
    if (docs == NULL)
        return fail(err, errlen, OP_EPARSE, "kubeconfig %s: %s", path, yerr);
    cJSON *doc = cJSON_DetachItemFromArray(docs, 0);
    int ndocs = cJSON_GetArraySize(docs);
    cJSON_Delete(docs);
    if (ndocs > 0) {
        cJSON_Delete(doc);
        return fail(err, errlen, OP_ECONFIG, "kubeconfig %s: more than one YAML document", path);
    }
    if (doc == NULL)
        doc = cJSON_CreateObject(); /* an empty file is an empty configuration */
    if (!cJSON_IsObject(doc)) {
        cJSON_Delete(doc);
        return fail(err, errlen, OP_ECONFIG, "kubeconfig %s: the document is not a mapping", path);
    }
    mg->docs = xrealloc(mg->docs, (mg->n + 1) * sizeof(*mg->docs));
    mg->files = xrealloc(mg->files, (mg->n + 1) * sizeof(*mg->files));
    mg->docs[mg->n] = doc;
    mg->files[mg->n] = xstrdup(path);
    const char *file = mg->files[mg->n];
    mg->n++;

    const cJSON *cc = json_child(doc, "current-context");
    if (cc && !cJSON_IsString(cc) && !cJSON_IsNull(cc))
        return fail(err, errlen, OP_ECONFIG, "kubeconfig %s: \"current-context\" must be a string", file);
    if (mg->current_context == NULL && cJSON_IsString(cc) && *cc->valuestring) {
        mg->current_context = cc->valuestring;
        mg->cc_file = file;
    }
    rc = merge_list(mg, doc, file, "clusters", "cluster", &mg->clusters, err, errlen);
    if (rc == 0)
        rc = merge_list(mg, doc, file, "users", "user", &mg->users, err, errlen);
    if (rc == 0)
        rc = merge_list(mg, doc, file, "contexts", "context", &mg->contexts, err, errlen);
    return rc;
}

/* ------------------------------------------------------------- fields */

/* A string field: NULL when absent or null, error when another type. */
static int get_string(const cJSON *body, const char *field, const char **out, const char *what, char *err,
                      size_t errlen)
{
    *out = NULL;
    const cJSON *v = json_child(body, field);
    if (v == NULL || cJSON_IsNull(v))
        return 0;
    if (!cJSON_IsString(v))
        return fail(err, errlen, OP_ECONFIG, "%s: field \"%s\" must be a string (quote it)", what, field);
    *out = *v->valuestring ? v->valuestring : NULL;
    return 0;
}

static int get_bool(const cJSON *body, const char *field, int *out, const char *what, char *err,
                    size_t errlen)
{
    *out = 0;
    const cJSON *v = json_child(body, field);
    if (v == NULL || cJSON_IsNull(v))
        return 0;
    if (cJSON_IsBool(v)) {
        *out = cJSON_IsTrue(v);
        return 0;
    }
    if (cJSON_IsString(v) &&
        (strcasecmp(v->valuestring, "true") == 0 || strcasecmp(v->valuestring, "false") == 0)) {
        *out = strcasecmp(v->valuestring, "true") == 0;
        return 0;
    }
    return fail(err, errlen, OP_ECONFIG, "%s: field \"%s\" must be true or false", what, field);
}

/* Load a credential given as "<field>-data" (base64 of the bytes) or
 * "<field>" (a path, relative to dir). The data variant wins. */
static int get_blob(const cJSON *body, const char *field, const char *dir, char **out, size_t *out_len,
                    const char *what, char *err, size_t errlen)
{
    char dfield[64];
    snprintf(dfield, sizeof(dfield), "%s-data", field);
    const char *data, *path;
    int rc = get_string(body, dfield, &data, what, err, errlen);
    if (rc == 0)
        rc = get_string(body, field, &path, what, err, errlen);
    if (rc)
        return rc;
    if (data) {
        if (path)
            log_warn("Both %s and %s are set; %s is used. where=\"%s\"", field, dfield, dfield, what);
        size_t n;
        uint8_t *bytes = base64_decode(data, strlen(data), &n);
        if (bytes == NULL || n == 0) {
            free(bytes);
            return fail(err, errlen, OP_ECONFIG, "%s: field \"%s\" is not valid base64", what, dfield);
        }
        *out = (char *)bytes;
        *out_len = n;
        return 0;
    }
    if (path) {
        char *full = path[0] == '/' ? xstrdup(path) : xasprintf("%s/%s", dir, path);
        size_t n;
        rc = file_read_all(full, KCFG_MAX_FILE, out, &n);
        if (rc) {
            rc = fail(err, errlen, rc, "%s: field \"%s\": %s: %s", what, field, full, err_str(rc));
            free(full);
            return rc;
        }
        free(full);
        *out_len = n;
    }
    return 0;
}

/* Fields we cannot honour, with the reason. Silently ignoring any of them
 * would connect with other credentials or by another route than the user
 * configured. */
struct refused {
    const char *field;
    const char *why;
};

static const struct refused cluster_refused[] = {
    {"proxy-url", "connecting through a proxy is not supported"},
};

static const struct refused user_refused[] = {
    {"exec", "exec credential plugins are not supported"},
    {"auth-provider", "auth-provider plugins are not supported"},
    {"username", "basic authentication is not supported"},
    {"password", "basic authentication is not supported"},
    {"as", "impersonation is not supported"},
    {"as-uid", "impersonation is not supported"},
    {"as-groups", "impersonation is not supported"},
    {"as-user-extra", "impersonation is not supported"},
};

static int check_refused(const cJSON *body, const struct refused *list, size_t n, const char *what, char *err,
                         size_t errlen)
{
    for (size_t i = 0; i < n; i++) {
        const cJSON *v = json_child(body, list[i].field);
        if (v && !cJSON_IsNull(v) && !(cJSON_IsString(v) && *v->valuestring == '\0'))
            return fail(err, errlen, OP_ENOTSUP, "%s: %s (field \"%s\")", what, list[i].why, list[i].field);
    }
    return 0;
}

static int load_cluster(kcfg *c, const char *name, const struct entry *e, char *err, size_t errlen)
{
    char what[512];
    snprintf(what, sizeof(what), "kubeconfig %s: cluster \"%s\"", e->file, name);
    const cJSON *b = e->body;
    int rc = check_refused(b, cluster_refused, ARRAY_SIZE(cluster_refused), what, err, errlen);
    if (rc)
        return rc;
    const char *server, *sni;
    if ((rc = get_string(b, "server", &server, what, err, errlen)) != 0)
        return rc;
    if (server == NULL)
        return fail(err, errlen, OP_ECONFIG, "%s: no \"server\"", what);
    if ((rc = parse_server(c, server, what, err, errlen)) != 0)
        return rc;
    if ((rc = get_string(b, "tls-server-name", &sni, what, err, errlen)) != 0)
        return rc;
    c->tls_server_name = sni ? xstrdup(sni) : NULL;
    if ((rc = get_bool(b, "insecure-skip-tls-verify", &c->insecure, what, err, errlen)) != 0)
        return rc;
    if ((rc = get_blob(b, "certificate-authority", e->dir, &c->ca_pem, &c->ca_len, what, err, errlen)) != 0)
        return rc;
    if (c->insecure && c->ca_pem)
        return fail(err, errlen, OP_ECONFIG,
                    "%s: insecure-skip-tls-verify cannot be combined with a certificate authority "
                    "(certificate-authority or certificate-authority-data)",
                    what);
    return 0;
}

static int load_user(kcfg *c, const char *name, const struct entry *e, char *err, size_t errlen)
{
    char what[512];
    snprintf(what, sizeof(what), "kubeconfig %s: user \"%s\"", e->file, name);
    const cJSON *b = e->body;
    int rc = check_refused(b, user_refused, ARRAY_SIZE(user_refused), what, err, errlen);
    if (rc)
        return rc;
    if ((rc = get_blob(b, "client-certificate", e->dir, &c->cert_pem, &c->cert_len, what, err, errlen)) != 0)
        return rc;
    if ((rc = get_blob(b, "client-key", e->dir, &c->key_pem, &c->key_len, what, err, errlen)) != 0)
        return rc;
    if (!c->cert_pem != !c->key_pem)
        return fail(err, errlen, OP_ECONFIG, "%s: %s is set without %s", what,
                    c->cert_pem ? "client-certificate" : "client-key",
                    c->cert_pem ? "client-key" : "client-certificate");
    const char *token, *token_file;
    if ((rc = get_string(b, "token", &token, what, err, errlen)) != 0)
        return rc;
    if ((rc = get_string(b, "tokenFile", &token_file, what, err, errlen)) != 0)
        return rc;
    if (token)
        c->_token = xstrdup(token);
    if (token_file) {
        /* As client-go: the file is read now (it must be readable) and
         * its contents replace a static token given alongside. */
        c->token_file = token_file[0] == '/' ? xstrdup(token_file) : xasprintf("%s/%s", e->dir, token_file);
        char *t;
        rc = read_trimmed(c->token_file, &t);
        if (rc)
            return fail(err, errlen, rc, "%s: field \"tokenFile\": %s: %s", what, c->token_file,
                        err_str(rc));
        if (*t == '\0') {
            free(t);
            return fail(err, errlen, OP_ECONFIG, "%s: field \"tokenFile\": %s is empty", what, c->token_file);
        }
        free(c->_token);
        c->_token = t;
    }
    return 0;
}

static int load_merged(struct merged *mg, const char *context, kcfg **out, char *err, size_t errlen)
{
    const char *ctx_name = !is_blank(context) ? context : mg->current_context;
    if (ctx_name == NULL)
        return fail(err, errlen, OP_ECONFIG, "%s: no current-context is set and no context was given",
                    mg->where);
    const struct entry *ce = map_get(&mg->contexts, ctx_name);
    if (ce == NULL)
        return fail(err, errlen, OP_ECONFIG, "%s: context \"%s\" is not defined%s", mg->where, ctx_name,
                    is_blank(context) ? " (it is the current-context)" : "");
    char what[512];
    snprintf(what, sizeof(what), "kubeconfig %s: context \"%s\"", ce->file, ctx_name);
    const char *cluster, *user, *ns;
    int rc = get_string(ce->body, "cluster", &cluster, what, err, errlen);
    if (rc == 0)
        rc = get_string(ce->body, "user", &user, what, err, errlen);
    if (rc == 0)
        rc = get_string(ce->body, "namespace", &ns, what, err, errlen);
    if (rc)
        return rc;
    if (cluster == NULL)
        return fail(err, errlen, OP_ECONFIG, "%s: no \"cluster\"", what);
    const struct entry *cle = map_get(&mg->clusters, cluster);
    if (cle == NULL)
        return fail(err, errlen, OP_ECONFIG, "%s: cluster \"%s\" is not defined in %s", what, cluster,
                    mg->where);
    const struct entry *ue = NULL;
    if (user) {
        ue = map_get(&mg->users, user);
        if (ue == NULL)
            return fail(err, errlen, OP_ECONFIG, "%s: user \"%s\" is not defined in %s", what, user,
                        mg->where);
    }

    kcfg *c = xcalloc(1, sizeof(*c));
    rc = load_cluster(c, cluster, cle, err, errlen);
    if (rc == 0 && ue)
        rc = load_user(c, user, ue, err, errlen);
    if (rc) {
        kcfg_free(c);
        return rc;
    }
    c->namespace = ns ? xstrdup(ns) : NULL;
    c->source = xasprintf("%s (context %s)", mg->where, ctx_name);
    *out = c;
    return 0;
}

static int load_files(const char *paths, const char *context, int explicit_path, kcfg **out, char *err,
                      size_t errlen)
{
    *out = NULL;
    if (is_blank(paths))
        return fail(err, errlen, OP_EINVAL, "no kubeconfig path given");
    struct merged mg;
    memset(&mg, 0, sizeof(mg));
    map_init_type(&mg.clusters, &entry_type);
    map_init_type(&mg.users, &entry_type);
    map_init_type(&mg.contexts, &entry_type);
    mg.where = xasprintf("kubeconfig %s", paths);

    int rc = 0;
    char *list = xstrdup(paths), *save = NULL;
    for (char *p = strtok_r(list, ":", &save); p && rc == 0; p = strtok_r(NULL, ":", &save))
        rc = merge_file(&mg, p, explicit_path, err, errlen);
    free(list);
    if (rc == 0 && mg.n == 0)
        rc = fail(err, errlen, OP_ENOTFOUND, "%s: none of the files exists", mg.where);
    if (rc == 0)
        rc = load_merged(&mg, context, out, err, errlen);
    merged_free(&mg);
    return rc;
}

int kcfg_load_file(const char *paths, const char *context, kcfg **out, char *err, size_t errlen)
{
    return load_files(paths, context, 0, out, err, errlen);
}

/* ------------------------------------------------------------- in-cluster */

int kcfg_in_cluster(const char *sa_dir, kcfg **out, char *err, size_t errlen)
{
    *out = NULL;
    const char *host = getenv("KUBERNETES_SERVICE_HOST");
    const char *port = getenv("KUBERNETES_SERVICE_PORT");
    if (is_blank(host) || is_blank(port))
        return fail(err, errlen, OP_ENOTFOUND,
                    "not running in a cluster (KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not "
                    "both set)");
    if (sa_dir == NULL)
        sa_dir = KCFG_SA_DIR;
    char *end;
    errno = 0;
    long pn = strtol(port, &end, 10);
    if (*end || errno || pn < 1 || pn > 65535)
        return fail(err, errlen, OP_ECONFIG, "in-cluster: KUBERNETES_SERVICE_PORT \"%s\" is not a port",
                    port);
    size_t hl = strlen(host);
    if (host[0] == '[' && hl > 2 && host[hl - 1] == ']') {
        host++;
        hl -= 2;
    }

    kcfg *c = xcalloc(1, sizeof(*c));
    c->host = xstrndup(host, hl);
    c->port = (int)pn;
    c->tls = 1;
    c->path_prefix = xstrdup("");
    int v6 = strchr(c->host, ':') != NULL;
    c->server = xasprintf("https://%s%s%s:%d", v6 ? "[" : "", c->host, v6 ? "]" : "", c->port);
    c->token_file = xasprintf("%s/token", sa_dir);
    c->source = xasprintf("in-cluster (service account %s)", sa_dir);

    int rc = read_trimmed(c->token_file, &c->_token);
    if (rc) {
        rc =
            fail(err, errlen, rc, "in-cluster: service account token %s: %s", c->token_file, err_str(rc));
        goto bad;
    }
    if (*c->_token == '\0') {
        rc = fail(err, errlen, OP_ECONFIG, "in-cluster: service account token %s is empty", c->token_file);
        goto bad;
    }
    char *ca_path = xasprintf("%s/ca.crt", sa_dir);
    rc = file_read_all(ca_path, KCFG_MAX_FILE, &c->ca_pem, &c->ca_len);
    if (rc) {
        rc = fail(err, errlen, rc, "in-cluster: CA bundle %s: %s", ca_path, err_str(rc));
        free(ca_path);
        goto bad;
    }
    free(ca_path);
    char *ns_path = xasprintf("%s/namespace", sa_dir);
    char *ns;
    if (read_trimmed(ns_path, &ns) == 0) {
        if (*ns)
            c->namespace = ns;
        else
            free(ns);
    }
    free(ns_path);
    *out = c;
    return 0;
bad:
    kcfg_free(c);
    return rc;
}

/* ------------------------------------------------------------- resolution */

static char *home_config(void)
{
    const char *home = getenv("HOME");
    if (is_blank(home)) {
        struct passwd *pw = getpwuid(getuid());
        home = pw ? pw->pw_dir : NULL;
    }
    return is_blank(home) ? NULL : xasprintf("%s/.kube/config", home);
}

int kcfg_load(const kcfg_opts *opts, kcfg **out, char *err, size_t errlen)
{
    kcfg_opts none = {0};
    if (opts == NULL)
        opts = &none;
    *out = NULL;
    if (!is_blank(opts->kubeconfig))
        return load_files(opts->kubeconfig, opts->context, 1, out, err, errlen);
    const char *env = getenv("KUBECONFIG");
    if (!is_blank(env))
        return load_files(env, opts->context, 0, out, err, errlen);

    char icerr[512];
    int ic = kcfg_in_cluster(opts->sa_dir, out, icerr, sizeof(icerr));
    if (ic == 0)
        return 0;
    char *home = home_config();
    if (home && file_exists(home)) {
        int rc = load_files(home, opts->context, 1, out, err, errlen);
        free(home);
        return rc;
    }
    int rc;
    if (ic != OP_ENOTFOUND) {
        /* The environment says we run in a pod but its service account is
         * unusable: that is the problem to report. */
        rc = fail(err, errlen, ic, "%s", icerr);
    } else {
        rc = fail(
            err, errlen, OP_ENOTFOUND,
            "no Kubernetes client configuration: no --kubeconfig, $KUBECONFIG is not set, not in a cluster, "
            "and %s does not exist",
            home ? home : "~/.kube/config");
    }
    free(home);
    return rc;
}

void kcfg_free(kcfg *c)
{
    if (c == NULL)
        return;
    free(c->server);
    free(c->path_prefix);
    free(c->host);
    free(c->ca_pem);
    free(c->cert_pem);
    free(c->key_pem);
    free(c->token_file);
    free(c->tls_server_name);
    free(c->namespace);
    free(c->source);
    free(c->_token);
    free(c);
}

/* ------------------------------------------------------------- tokens */

const char *kcfg_token(kcfg *c, uint64_t now)
{
    if (c->token_file == NULL)
        return c->_token;
    if (!c->_token_at_set && !c->_token_stale) {
        /* The file was read at load time; the minute counts from the first use. */
        c->_token_at = now;
        c->_token_at_set = 1;
        return c->_token;
    }
    if (!c->_token_stale && now >= c->_token_at && now - c->_token_at < KCFG_TOKEN_REREAD_NS)
        return c->_token;
    c->_token_at = now;
    c->_token_at_set = 1;
    c->_token_stale = 0;
    char *t;
    int rc = read_trimmed(c->token_file, &t);
    if (rc == 0 && *t) {
        free(c->_token);
        c->_token = t;
    } else {
        if (rc == 0)
            free(t);
        log_warn("Could not re-read the bearer token file; keeping the previous token. file=%s err=%s",
                 c->token_file, rc ? err_str(rc) : "file is empty");
    }
    return c->_token;
}

void kcfg_token_invalidate(kcfg *c)
{
    c->_token_stale = 1;
}
