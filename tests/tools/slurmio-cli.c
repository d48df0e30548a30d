/* slurmio-cli: the slurmio modules from the command line, for tests and people.
 *
 *   slurmio-cli token --key FILE [--user root] [--lifetime 3600] [--now EPOCH]
 *   slurmio-cli verify --key FILE TOKEN            claims as JSON; exit 1 when refused
 *   slurmio-cli expand [--max N] EXPR              one name per line
 *   slurmio-cli compress NAME... | -               the hostlist expression ("-": names on stdin)
 *   slurmio-cli parse --version V --kind K [--status 200] FILE
 *                                                  a slurmrestd body as the model, in JSON
 *                                                  (K: nodes node jobs ping reservations status)
 *   slurmio-cli negotiate FILE                     the version to use from an /openapi/v3 document
 *   slurmio-cli plan --version V                   which backend serves which write
 * With libslurm (node lists are hostlist expressions):
 *   slurmio-cli [--slurm-conf PATH] [--timeout MS] [--each] drain --reason R NODES
 *   ... undrain [--reason R] NODES | resume NODES | down --reason R NODES | idle NODES
 *   ... comment --comment C NODES | features [--features F] [--active A] NODES | delete NODES
 *   ... resv-create --name N --nodes H --users U [--start EPOCH] [--duration MIN] [--flags MAINT,...]
 *   ... resv-update --name N [--nodes H] [--users U] [--start EPOCH] [--duration MIN] [--flags F]
 *   ... resv-delete NAME
 * --each sends one request per node (for comparison with one hostlist request).
 * Exit status: 0 success, 1 failure (the error is printed), 2 usage.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <uv.h>

#include "core/buf.h"
#include "core/err.h"
#include "core/json.h"
#include "core/log.h"
#include "core/mem.h"
#include "slurmio/backend.h"
#include "slurmio/hostlist.h"
#include "slurmio/jwt.h"
#include "slurmio/model.h"
#include "slurmio/slurmlib.h"

static void usage(void)
{
    fputs("usage: slurmio-cli COMMAND [options] (see the comment at the top of tests/tools/slurmio-cli.c)\n"
          "commands: token verify expand compress parse negotiate plan\n"
          "          drain undrain resume down idle comment features delete resv-create resv-update "
          "resv-delete\n",
          stderr);
    exit(2);
}

static char *read_file(const char *path, size_t *len, size_t max)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "slurmio-cli: cannot open %s\n", path);
        exit(1);
    }
    buf_t b;
    buf_init(&b, max);
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
        if (buf_append(&b, chunk, n) < 0) {
            fprintf(stderr, "slurmio-cli: %s is larger than %zu bytes\n", path, max);
            exit(1);
        }
    }
    if (f != stdin)
        fclose(f);
    *len = b.len;
    return b.data ? buf_detach(&b, NULL) : xstrdup("");
}

static void print_json(cJSON *o)
{
    char *s = json_dump(o);
    puts(s);
    free(s);
    cJSON_Delete(o);
}

/* ---- offline commands ---- */

static int cmd_token(int argc, char **argv)
{
    const char *key = NULL, *user = "root";
    long long lifetime = 3600, now = (long long)time(NULL);
    static const struct option lo[] = {
        {"key", 1, 0, 'k'}, {"user", 1, 0, 'u'}, {"lifetime", 1, 0, 'l'}, {"now", 1, 0, 'n'}, {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "k:u:l:n:", lo, NULL)) != -1) {
        switch (c) {
        case 'k':
            key = optarg;
            break;
        case 'u':
            user = optarg;
            break;
        case 'l':
            lifetime = atoll(optarg);
            break;
        case 'n':
            now = atoll(optarg);
            break;
        default:
            usage();
        }
    }
    if (!key)
        usage();
    size_t klen;
    char *k = read_file(key, &klen, 1 << 16);
    char *tok;
    if (lifetime > 0) {
        tok = jwt_mint(k, klen, user, now, lifetime);
    } else {
        /* An already expired token, for tests: issued -lifetime+60 s ago. */
        jwt_claims cl = {.sun = (char *)user,
                         .iat = now + lifetime - 60,
                         .nbf = now + lifetime - 60,
                         .exp = now + lifetime};
        tok = jwt_mint_claims(k, klen, &cl);
    }
    free(k);
    if (!tok) {
        fprintf(stderr, "slurmio-cli: cannot mint a token for user '%s'\n", user);
        return 1;
    }
    puts(tok);
    free(tok);
    return 0;
}

static int cmd_verify(int argc, char **argv)
{
    const char *key = NULL;
    static const struct option lo[] = {{"key", 1, 0, 'k'}, {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "k:", lo, NULL)) != -1) {
        if (c == 'k')
            key = optarg;
        else
            usage();
    }
    if (!key || optind != argc - 1)
        usage();
    size_t klen;
    char *k = read_file(key, &klen, 1 << 16);
    jwt_claims cl;
    int rc = jwt_verify(argv[optind], k, klen, (int64_t)time(NULL), &cl);
    free(k);
    if (rc < 0) {
        fprintf(stderr, "slurmio-cli: token refused: %s\n", err_str(rc));
        return 1;
    }
    cJSON *o = cJSON_CreateObject();
    json_set_str(o, "sun", cl.sun);
    if (cl.iss)
        json_set_str(o, "iss", cl.iss);
    if (cl.jti)
        json_set_str(o, "jti", cl.jti);
    json_set_int(o, "iat", cl.iat);
    json_set_int(o, "nbf", cl.nbf);
    json_set_int(o, "exp", cl.exp);
    jwt_claims_free(&cl);
    print_json(o);
    return 0;
}

static int cmd_expand(int argc, char **argv)
{
    size_t max = 0;
    static const struct option lo[] = {{"max", 1, 0, 'm'}, {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "m:", lo, NULL)) != -1) {
        if (c == 'm')
            max = (size_t)atoll(optarg);
        else
            usage();
    }
    if (optind != argc - 1)
        usage();
    hostlist_names hn;
    int rc = hostlist_expand(argv[optind], max, &hn);
    if (rc < 0) {
        fprintf(stderr, "slurmio-cli: %s: %s\n", argv[optind], err_str(rc));
        return 1;
    }
    for (size_t i = 0; i < hn.n; i++)
        puts(hn.names[i]);
    hostlist_names_free(&hn);
    return 0;
}

static int cmd_compress(int argc, char **argv)
{
    size_t n = 0, cap = 16;
    char **v = xmalloc(cap * sizeof(char *));
    char *input = NULL;
    if (argc == 2 && strcmp(argv[1], "-") == 0) {
        size_t len;
        input = read_file("-", &len, 64u << 20);
        for (char *save = NULL, *t = strtok_r(input, " \t\r\n,", &save); t;
             t = strtok_r(NULL, " \t\r\n,", &save)) {
            if (n == cap)
                v = xrealloc(v, (cap *= 2) * sizeof(char *));
            v[n++] = t;
        }
    } else {
        for (int i = 1; i < argc; i++) {
            if (n == cap)
                v = xrealloc(v, (cap *= 2) * sizeof(char *));
            v[n++] = argv[i];
        }
    }
    char *s = hostlist_compress((const char *const *)v, n);
    free(v);
    free(input);
    if (!s) {
        fputs("slurmio-cli: a name cannot appear in a hostlist\n", stderr);
        return 1;
    }
    puts(s);
    free(s);
    return 0;
}

static int parse_kind(const char *s)
{
    static const char *const names[] = {"nodes",        "node",        "jobs",  "ping",
                                        "reservations", "reservation", "status"};
    static const int kinds[] = {SM_KIND_NODES,        SM_KIND_NODE,        SM_KIND_JOBS,  SM_KIND_PING,
                                SM_KIND_RESERVATIONS, SM_KIND_RESERVATION, SM_KIND_STATUS};
    for (size_t i = 0; i < ARRAY_SIZE(names); i++)
        if (strcmp(s, names[i]) == 0)
            return kinds[i];
    return -1;
}

static cJSON *time_or_null(int64_t t)
{
    return t == SM_INFINITE ? cJSON_CreateNull() : cJSON_CreateNumber((double)t);
}

static cJSON *node_json(const sm_node *n)
{
    cJSON *o = cJSON_CreateObject();
    buf_t st;
    buf_init(&st, 1024);
    (void)sm_node_state_str(n, &st);
    json_set_str(o, "name", n->name);
    json_set_str(o, "state", buf_cstr(&st));
    buf_free(&st);
    json_set_str(o, "base", sm_node_base_name(n->base));
    cJSON *fl = cJSON_CreateArray();
    for (int i = 0; i < SM_NFB__COUNT; i++)
        if (n->flags & (UINT64_C(1) << i))
            cJSON_AddItemToArray(fl, cJSON_CreateString(sm_node_flag_name(i)));
    json_set(o, "flags", fl);
    json_set_bool(o, "flags_known", n->flags_known);
    json_set_bool(o, "busy", sm_node_busy(n));
    json_set_bool(o, "drain", sm_node_drain(n));
    json_set_bool(o, "drained", sm_node_drained(n));
    json_set_bool(o, "draining", sm_node_draining(n));
    json_set_str(o, "reason", n->reason);
    json_set_str(o, "comment", n->comment);
    json_set_str(o, "features", n->features);
    json_set_str(o, "active_features", n->active_features);
    json_set_str(o, "topology", n->topology);
    json_set_str(o, "reservation", n->reservation);
    json_set_str(o, "address", n->address);
    json_set_str(o, "hostname", n->hostname);
    json_set_int(o, "cpus", n->cpus);
    json_set_int(o, "alloc_cpus", n->alloc_cpus);
    return o;
}

static cJSON *response_json(const sm_response *r, int rc)
{
    cJSON *o = cJSON_CreateObject();
    json_set_bool(o, "ok", rc == 0);
    json_set_str(o, "version", sm_version_str(r->version));
    if (rc < 0) {
        json_set_str(o, "code", err_name(rc));
        json_set_int(o, "http_status", r->err.http_status);
        json_set_int(o, "slurm_errno", r->err.slurm_errno);
        json_set_str(o, "message", r->err.message ? r->err.message : "");
        return o;
    }
    json_set_bool(o, "not_modified", r->not_modified);
    if (r->last_update)
        json_set_int(o, "last_update", r->last_update);
    if (r->n_warnings)
        json_set_int(o, "warnings", (long long)r->n_warnings);
    if (r->nodes) {
        cJSON *a = cJSON_CreateArray();
        for (size_t i = 0; i < r->n_nodes; i++)
            cJSON_AddItemToArray(a, node_json(&r->nodes[i]));
        json_set(o, "nodes", a);
    }
    if (r->jobs) {
        cJSON *a = cJSON_CreateArray();
        for (size_t i = 0; i < r->n_jobs; i++) {
            const sm_job *j = &r->jobs[i];
            cJSON *e = cJSON_CreateObject();
            json_set_int(e, "id", j->id);
            json_set_str(e, "state", sm_job_state_name(j->state));
            json_set_bool(e, "completing", !!(j->flags & SM_JF_COMPLETING));
            json_set_str(e, "nodes", j->nodes);
            json_set_int(e, "start_time", j->start_time);
            json_set(e, "time_limit", time_or_null(j->time_limit));
            json_set(e, "deadline", time_or_null(sm_job_deadline(j)));
            cJSON_AddItemToArray(a, e);
        }
        json_set(o, "jobs", a);
    }
    if (r->pings) {
        cJSON *a = cJSON_CreateArray();
        for (size_t i = 0; i < r->n_pings; i++) {
            cJSON *e = cJSON_CreateObject();
            json_set_str(e, "hostname", r->pings[i].hostname);
            json_set_str(e, "mode", r->pings[i].mode);
            json_set_bool(e, "responding", r->pings[i].responding);
            json_set_bool(e, "primary", r->pings[i].primary);
            json_set_int(e, "latency_us", r->pings[i].latency_us);
            cJSON_AddItemToArray(a, e);
        }
        json_set(o, "pings", a);
    }
    if (r->resvs) {
        cJSON *a = cJSON_CreateArray();
        for (size_t i = 0; i < r->n_resvs; i++) {
            const sm_resv *s = &r->resvs[i];
            cJSON *e = cJSON_CreateObject();
            json_set_str(e, "name", s->name);
            json_set_int(e, "start_time", s->start_time);
            json_set(e, "end_time", time_or_null(s->end_time));
            json_set(e, "duration", time_or_null(sm_resv_duration(s)));
            json_set_str(e, "flags", s->flags_str);
            json_set_str(e, "users", s->users);
            json_set_str(e, "node_list", s->node_list);
            cJSON_AddItemToArray(a, e);
        }
        json_set(o, "reservations", a);
    }
    return o;
}

static int cmd_parse(int argc, char **argv)
{
    int version = SM_V38, kind = SM_KIND_NODES, status = 200;
    static const struct option lo[] = {
        {"version", 1, 0, 'v'}, {"kind", 1, 0, 'k'}, {"status", 1, 0, 's'}, {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "v:k:s:", lo, NULL)) != -1) {
        switch (c) {
        case 'v':
            version = sm_version_parse(optarg);
            break;
        case 'k':
            kind = parse_kind(optarg);
            break;
        case 's':
            status = atoi(optarg);
            break;
        default:
            usage();
        }
    }
    if (version < 0 || kind < 0 || optind != argc - 1)
        usage();
    size_t len;
    char *body = read_file(argv[optind], &len, 256u << 20);
    sm_response r;
    int rc = sm_parse(version, (enum sm_kind)kind, status, body, len, &r);
    free(body);
    print_json(response_json(&r, rc));
    sm_response_free(&r);
    return rc < 0 ? 1 : 0;
}

static int cmd_negotiate(int argc, char **argv)
{
    if (argc != 2)
        usage();
    size_t len;
    char *body = read_file(argv[1], &len, 64u << 20);
    cJSON *doc = json_parse(body, len, NULL);
    free(body);
    int v = doc ? sm_negotiate(doc) : OP_EPARSE;
    cJSON_Delete(doc);
    if (v < 0) {
        fprintf(stderr, "slurmio-cli: no usable version: %s\n", err_str(v));
        return 1;
    }
    puts(sm_version_str(v));
    return 0;
}

static int cmd_plan(int argc, char **argv)
{
    int version = SM_V38;
    static const struct option lo[] = {{"version", 1, 0, 'v'}, {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "v:", lo, NULL)) != -1) {
        if (c == 'v')
            version = sm_version_parse(optarg);
        else
            usage();
    }
    if (version < 0)
        usage();
    buf_t b;
    buf_init(&b, 4096);
    (void)sb_describe(version, sl_available(), &b);
    puts(buf_cstr(&b));
    buf_free(&b);
    return 0;
}

/* ---- libslurm commands ---- */

typedef struct run {
    uv_loop_t loop;
    sl_backend *b;
    int kind; /* 0 update, 1 delete, 2 resv create, 3 resv delete, 4 resv update */
    sm_node_update upd;
    sm_resv_desc resv;
    const char *target;  /* hostlist or reservation name */
    hostlist_names each; /* --each: the nodes, one request per node */
    size_t next;
    size_t done, failed;
    int first_error;
    uint64_t t0, lib_ns;
} run;

static int submit(run *r, const char *target);

static void on_done(void *data, const sl_result *res)
{
    run *r = data;
    r->done++;
    r->lib_ns += res->elapsed_ns;
    if (res->status < 0) {
        r->failed++;
        if (!r->first_error)
            r->first_error = res->status;
        const char *what = r->each.n ? r->each.names[r->next - 1] : r->target;
        if (!what)
            what = r->resv.name ? r->resv.name : "reservation";
        fprintf(stderr, "slurmio-cli: %s: %s (%s, slurm errno %d)\n", what, res->message,
                err_name(res->status), res->slurm_errno);
    } else if (res->resv_name) {
        printf("reservation %s\n", res->resv_name);
    }
    /* --each: the next request goes out when this one is done, so that each
     * is timed on its own and none waits in the queue. */
    if (r->each.n && r->next < r->each.n) {
        int rc = submit(r, r->each.names[r->next++]);
        if (rc == 0)
            return;
        r->first_error = rc;
    }
    sl_backend_close(r->b, NULL, NULL);
}

static int submit(run *r, const char *target)
{
    switch (r->kind) {
    case 0:
        return sl_update_nodes(r->b, target, &r->upd, on_done, r);
    case 1:
        return sl_delete_nodes(r->b, target, on_done, r);
    case 2:
        return sl_create_reservation(r->b, &r->resv, on_done, r);
    case 3:
        return sl_delete_reservation(r->b, target, on_done, r);
    case 4:
        return sl_update_reservation(r->b, &r->resv, on_done, r);
    }
    return OP_EINVAL;
}

static int cmd_backend(const char *cmd, int argc, char **argv, const char *conf, unsigned timeout_ms,
                       int each)
{
    run r;
    memset(&r, 0, sizeof(r));
    static const struct option lo[] = {{"reason", 1, 0, 'r'},
                                       {"comment", 1, 0, 'c'},
                                       {"features", 1, 0, 'f'},
                                       {"active", 1, 0, 'a'},
                                       {"name", 1, 0, 'N'},
                                       {"nodes", 1, 0, 'H'},
                                       {"users", 1, 0, 'U'},
                                       {"start", 1, 0, 'S'},
                                       {"duration", 1, 0, 'D'},
                                       {"flags", 1, 0, 'F'},
                                       {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "r:c:f:a:N:H:U:S:D:F:", lo, NULL)) != -1) {
        switch (c) {
        case 'r':
            r.upd.reason = optarg;
            r.upd.set |= SM_UPD_REASON;
            break;
        case 'c':
            r.upd.comment = optarg;
            r.upd.set |= SM_UPD_COMMENT;
            break;
        case 'f':
            r.upd.features = optarg;
            r.upd.set |= SM_UPD_FEATURES;
            break;
        case 'a':
            r.upd.features_act = optarg;
            r.upd.set |= SM_UPD_FEATURES_ACT;
            break;
        case 'N':
            r.resv.name = optarg;
            break;
        case 'H':
            r.resv.node_list = optarg;
            break;
        case 'U':
            r.resv.users = optarg;
            break;
        case 'S':
            r.resv.start_time = atoll(optarg);
            break;
        case 'D':
            r.resv.duration = atoll(optarg);
            break;
        case 'F':
            for (char *save = NULL, *t = strtok_r(optarg, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                int bit = sm_resv_flag_bit(t);
                if (bit < 0) {
                    fprintf(stderr, "slurmio-cli: unknown reservation flag %s\n", t);
                    return 2;
                }
                r.resv.flags |= UINT64_C(1) << bit;
            }
            break;
        default:
            usage();
        }
    }
    static const struct {
        const char *cmd;
        int state;
    } states[] = {{"drain", SM_REQ_DRAIN},
                  {"undrain", SM_REQ_UNDRAIN},
                  {"resume", SM_REQ_RESUME},
                  {"down", SM_REQ_DOWN},
                  {"idle", SM_REQ_IDLE}};
    for (size_t i = 0; i < ARRAY_SIZE(states); i++) {
        if (strcmp(cmd, states[i].cmd) == 0) {
            r.upd.set |= SM_UPD_STATE;
            r.upd.state = states[i].state;
        }
    }
    if (strcmp(cmd, "delete") == 0)
        r.kind = 1;
    else if (strcmp(cmd, "resv-create") == 0)
        r.kind = 2;
    else if (strcmp(cmd, "resv-delete") == 0)
        r.kind = 3;
    else if (strcmp(cmd, "resv-update") == 0)
        r.kind = 4;
    if (r.kind == 2) {
        /* A new reservation starts in an hour and lasts an hour unless told. */
        if (!r.resv.start_time)
            r.resv.start_time = (int64_t)time(NULL) + 3600;
        if (!r.resv.duration)
            r.resv.duration = 60;
    }
    if (r.kind == 4) {
        if (!r.resv.name)
            usage();
    } else if (r.kind != 2) {
        if (optind != argc - 1)
            usage();
        r.target = argv[optind];
    }
    if (each && r.kind <= 1) {
        int rc = hostlist_expand(r.target, 0, &r.each);
        if (rc < 0 || r.each.n == 0) {
            fprintf(stderr, "slurmio-cli: bad node list %s\n", r.target);
            return 2;
        }
    }

    uv_loop_init(&r.loop);
    sl_options opts = {.conf = conf, .timeout_ms = timeout_ms};
    int rc = sl_backend_new(&r.loop, &opts, &r.b);
    if (rc < 0) {
        fprintf(stderr, "slurmio-cli: libslurm backend: %s\n", err_str(rc));
        uv_loop_close(&r.loop);
        hostlist_names_free(&r.each);
        return 1;
    }
    r.t0 = uv_hrtime();
    size_t total = 1;
    if (r.each.n) {
        total = r.each.n;
        rc = submit(&r, r.each.names[r.next++]);
    } else {
        rc = submit(&r, r.target);
    }
    if (rc < 0) {
        fprintf(stderr, "slurmio-cli: %s refused: %s\n", cmd, err_str(rc));
        sl_backend_close(r.b, NULL, NULL);
        r.first_error = rc;
    }
    uv_run(&r.loop, UV_RUN_DEFAULT);
    double ms = (double)(uv_hrtime() - r.t0) / 1e6;
    if (uv_loop_close(&r.loop) != 0)
        fputs("slurmio-cli: handles left open at exit\n", stderr);
    sl_library_fini();
    size_t nodes = 1;
    if (r.kind <= 1 && !r.each.n) {
        if (hostlist_count(r.target, 0, &nodes) < 0)
            nodes = 0;
    } else if (r.each.n) {
        nodes = r.each.n;
    }
    if (!r.failed && !r.first_error)
        printf("ok %s %s: %zu node(s), %zu request(s) in %.1f ms (%.1f ms in libslurm)\n", cmd,
               r.target ? r.target : (r.resv.node_list ? r.resv.node_list : r.resv.name),
               r.kind <= 1 ? nodes : 0, total, ms, (double)r.lib_ns / 1e6);
    hostlist_names_free(&r.each);
    return r.failed || r.first_error ? 1 : 0;
}

int main(int argc, char **argv)
{
    mem_init();
    log_setup(getenv("SLURMIO_CLI_DEBUG") ? LOGL_DEBUG : LOGL_WARN, LOGF_TEXT);
    const char *conf = NULL;
    unsigned timeout_ms = 0;
    int each = 0, i = 1;
    /* Global options come before the command. */
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (strcmp(argv[i], "--slurm-conf") == 0 && i + 1 < argc)
            conf = argv[++i];
        else if (strcmp(argv[i], "--timeout") == 0 && i + 1 < argc)
            timeout_ms = (unsigned)atoi(argv[++i]);
        else if (strcmp(argv[i], "--each") == 0)
            each = 1;
        else
            usage();
    }
    if (i >= argc)
        usage();
    const char *cmd = argv[i];
    int sub_argc = argc - i;
    char **sub_argv = argv + i;
    optind = 1;
    if (strcmp(cmd, "token") == 0)
        return cmd_token(sub_argc, sub_argv);
    if (strcmp(cmd, "verify") == 0)
        return cmd_verify(sub_argc, sub_argv);
    if (strcmp(cmd, "expand") == 0)
        return cmd_expand(sub_argc, sub_argv);
    if (strcmp(cmd, "compress") == 0)
        return cmd_compress(sub_argc, sub_argv);
    if (strcmp(cmd, "parse") == 0)
        return cmd_parse(sub_argc, sub_argv);
    if (strcmp(cmd, "negotiate") == 0)
        return cmd_negotiate(sub_argc, sub_argv);
    if (strcmp(cmd, "plan") == 0)
        return cmd_plan(sub_argc, sub_argv);
    static const char *const backend_cmds[] = {"drain",       "undrain",     "resume",     "down",
                                               "idle",        "comment",     "features",   "delete",
                                               "resv-create", "resv-delete", "resv-update"};
    for (size_t k = 0; k < ARRAY_SIZE(backend_cmds); k++)
        if (strcmp(cmd, backend_cmds[k]) == 0)
            return cmd_backend(cmd, sub_argc, sub_argv, conf, timeout_ms, each);
    usage();
    return 2;
}
