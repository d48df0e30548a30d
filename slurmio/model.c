#include "slurmio/model.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/err.h"
#include "core/json.h"
#include "core/mem.h"

/* ---- versions ---- */

static const int supported[] = {SM_V36, SM_V37, SM_V38, SM_V40, SM_V41, SM_V42, SM_V43, SM_V44, SM_V45};

int sm_version_supported(int v)
{
    for (size_t i = 0; i < ARRAY_SIZE(supported); i++)
        if (supported[i] == v)
            return 1;
    return 0;
}

int sm_version_parse(const char *s)
{
    if (!s)
        return OP_EPARSE;
    const char *p = strstr(s, "0.0.");
    if (!p || (p != s && p[-1] != 'v'))
        return OP_EPARSE;
    p += 4;
    if (!isdigit((unsigned char)p[0]))
        return OP_EPARSE;
    char *end;
    long n = strtol(p, &end, 10);
    if (*end != '\0' || n > 1000)
        return OP_EPARSE;
    return sm_version_supported((int)n) ? (int)n : OP_ENOTSUP;
}

const char *sm_version_str(int v)
{
    switch (v) {
    case SM_V36:
        return "v0.0.36";
    case SM_V37:
        return "v0.0.37";
    case SM_V38:
        return "v0.0.38";
    case SM_V40:
        return "v0.0.40";
    case SM_V41:
        return "v0.0.41";
    case SM_V42:
        return "v0.0.42";
    case SM_V43:
        return "v0.0.43";
    case SM_V44:
        return "v0.0.44";
    case SM_V45:
        return "v0.0.45";
    default:
        return "v0.0.?";
    }
}

int sm_version_has(int v, enum sm_op op)
{
    if (!sm_version_supported(v))
        return 0;
    switch (op) {
    case SM_OP_GET_NODES:
    case SM_OP_GET_NODE:
    case SM_OP_GET_JOBS:
    case SM_OP_PING:
    case SM_OP_DIAG:
        return 1;
    case SM_OP_GET_RESERVATIONS:
    case SM_OP_GET_RESERVATION:
        return v >= SM_V37;
    case SM_OP_UPDATE_NODE:
    case SM_OP_DELETE_NODE:
        return v >= SM_V40;
    case SM_OP_UPDATE_NODES:
        return v >= SM_V42;
    case SM_OP_UPDATE_TOPOLOGY:
    case SM_OP_POST_RESERVATION:
    case SM_OP_DELETE_RESERVATION:
        return v >= SM_V43;
    case SM_OP_CREATE_NODES:
        return v >= SM_V44;
    }
    return 0;
}

const char *sm_op_name(enum sm_op op)
{
    switch (op) {
    case SM_OP_GET_NODES:
        return "get-nodes";
    case SM_OP_GET_NODE:
        return "get-node";
    case SM_OP_GET_JOBS:
        return "get-jobs";
    case SM_OP_PING:
        return "ping";
    case SM_OP_GET_RESERVATIONS:
        return "get-reservations";
    case SM_OP_GET_RESERVATION:
        return "get-reservation";
    case SM_OP_UPDATE_NODE:
        return "update-node";
    case SM_OP_UPDATE_NODES:
        return "update-nodes";
    case SM_OP_DELETE_NODE:
        return "delete-node";
    case SM_OP_UPDATE_TOPOLOGY:
        return "update-topology";
    case SM_OP_POST_RESERVATION:
        return "post-reservation";
    case SM_OP_DELETE_RESERVATION:
        return "delete-reservation";
    case SM_OP_DIAG:
        return "diag";
    case SM_OP_CREATE_NODES:
        return "create-nodes";
    }
    return "?";
}

static int put_escaped(buf_t *out, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    int rc = 0;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
            rc |= buf_putc(out, (char)c);
        } else {
            char e[3] = {'%', hex[c >> 4], hex[c & 15]};
            rc |= buf_append(out, e, 3);
        }
    }
    return rc ? OP_ETOOBIG : 0;
}

int sm_path(int v, enum sm_op op, const char *arg, buf_t *out)
{
    if (!sm_version_has(v, op) || op == SM_OP_UPDATE_TOPOLOGY)
        return OP_ENOTSUP;
    /* 22.05 lists its paths without a trailing slash; v0.0.40+ documents
     * list endpoints with one. */
    const char *slash = v >= SM_V40 ? "/" : "";
    const char *fixed = NULL, *prefix = NULL;
    switch (op) {
    case SM_OP_GET_NODES:
    case SM_OP_UPDATE_NODES:
        fixed = "nodes";
        break;
    case SM_OP_GET_JOBS:
        fixed = "jobs";
        break;
    case SM_OP_PING:
        fixed = "ping";
        break;
    case SM_OP_DIAG:
        fixed = "diag";
        break;
    case SM_OP_CREATE_NODES:
        fixed = "new/node";
        break;
    case SM_OP_GET_RESERVATIONS:
        fixed = "reservations";
        break;
    case SM_OP_POST_RESERVATION:
        fixed = "reservation";
        slash = "";
        break;
    case SM_OP_GET_NODE:
    case SM_OP_UPDATE_NODE:
    case SM_OP_DELETE_NODE:
        prefix = "node/";
        break;
    case SM_OP_GET_RESERVATION:
    case SM_OP_DELETE_RESERVATION:
        prefix = "reservation/";
        break;
    case SM_OP_UPDATE_TOPOLOGY:
        return OP_ENOTSUP;
    }
    if ((prefix != NULL) != (arg != NULL && arg[0] != '\0'))
        return OP_EINVAL;
    if (buf_printf(out, "/slurm/%s/", sm_version_str(v)) < 0)
        return OP_ETOOBIG;
    if (fixed)
        return buf_printf(out, "%s%s", fixed, slash) < 0 ? OP_ETOOBIG : 0;
    if (buf_puts(out, prefix) < 0)
        return OP_ETOOBIG;
    return put_escaped(out, arg);
}

/* The versions negotiation may pick, newest first. */
static const int preferred[] = {SM_V45, SM_V44, SM_V43, SM_V42, SM_V41, SM_V40, SM_V38};

int sm_negotiate_paths(const char *const *paths, size_t n)
{
    for (size_t i = 0; i < ARRAY_SIZE(preferred); i++) {
        char want[40];
        int len = snprintf(want, sizeof(want), "/slurm/%s/nodes", sm_version_str(preferred[i]));
        for (size_t k = 0; k < n; k++) {
            const char *p = paths[k];
            if (p && strncmp(p, want, (size_t)len) == 0 && (p[len] == '\0' || strcmp(p + len, "/") == 0))
                return preferred[i];
        }
    }
    return OP_ENOTSUP;
}

int sm_negotiate(const cJSON *openapi)
{
    const cJSON *paths = json_child(openapi, "paths");
    if (!cJSON_IsObject(paths))
        return OP_EPARSE;
    size_t n = (size_t)cJSON_GetArraySize(paths), k = 0;
    const char **v = xcalloc(n ? n : 1, sizeof(char *));
    const cJSON *p;
    cJSON_ArrayForEach(p, paths)
    {
        v[k++] = p->string;
    }
    int rc = sm_negotiate_paths(v, k);
    free(v);
    return rc;
}

/* ---- small JSON readers, tolerant of both generations of shapes ---- */

/* A string field; an array of strings is joined with commas (csv_string);
 * anything else (absent, null) gives "". Always a fresh allocation. */
static char *get_text(const cJSON *o, const char *key)
{
    const cJSON *v = json_child(o, key);
    if (cJSON_IsString(v))
        return xstrdup(v->valuestring);
    if (cJSON_IsArray(v)) {
        buf_t b;
        buf_init(&b, BUF_UNLIMITED);
        const cJSON *e;
        int rc = 0;
        cJSON_ArrayForEach(e, v)
        {
            if (!cJSON_IsString(e))
                continue;
            if (b.len)
                rc |= buf_putc(&b, ',');
            rc |= buf_puts(&b, e->valuestring);
        }
        (void)rc; /* unlimited: cannot fail */
        if (b.data)
            return buf_detach(&b, NULL);
    }
    return xstrdup("");
}

enum { NUM_ABSENT, NUM_NULL, NUM_UNSET, NUM_INFINITE, NUM_VALUE };

/* A number, or a v0.0.40+ no-val struct {set, infinite, number}. */
static int get_num(const cJSON *o, const char *key, int64_t *out)
{
    const cJSON *v = json_child(o, key);
    if (!v)
        return NUM_ABSENT;
    if (cJSON_IsNull(v))
        return NUM_NULL;
    if (cJSON_IsNumber(v)) {
        *out = (int64_t)json_num_ll(v, 0);
        return NUM_VALUE;
    }
    if (cJSON_IsObject(v)) {
        if (json_get_bool(v, "infinite", 0))
            return NUM_INFINITE;
        if (!json_get_bool(v, "set", 0))
            return NUM_UNSET;
        const cJSON *num = json_child(v, "number");
        if (!cJSON_IsNumber(num))
            return NUM_UNSET;
        *out = (int64_t)json_num_ll(num, 0);
        return NUM_VALUE;
    }
    return NUM_ABSENT;
}

static int64_t get_time(const cJSON *o, const char *key, int64_t infinite)
{
    int64_t v = 0;
    switch (get_num(o, key, &v)) {
    case NUM_VALUE:
        return v;
    case NUM_INFINITE:
        return infinite;
    default:
        return 0;
    }
}

static int get_int(const cJSON *o, const char *key, int dflt)
{
    int64_t v;
    return get_num(o, key, &v) == NUM_VALUE && v >= INT32_MIN && v <= INT32_MAX ? (int)v : dflt;
}

/* ---- nodes ---- */

static const char *const base_names[] = {"UNKNOWN", "DOWN", "IDLE", "ALLOCATED", "ERROR", "MIXED", "FUTURE"};
_Static_assert(ARRAY_SIZE(base_names) == SM_NODE_FUTURE + 1, "base_names follows enum sm_node_base");

static const char *const flag_names[] = {
#define SM_NFB_NAME(name, str) str,
    SM_NODE_FLAG_MAP(SM_NFB_NAME)
#undef SM_NFB_NAME
};

const char *sm_node_base_name(int base)
{
    return base >= 0 && (size_t)base < ARRAY_SIZE(base_names) ? base_names[base] : "UNKNOWN";
}

const char *sm_node_flag_name(int bit)
{
    return bit >= 0 && bit < SM_NFB__COUNT ? flag_names[bit] : "OTHER";
}

int sm_node_state_word(const char *s, int *base, int *flag_bit)
{
    /* Short and alternative spellings that Slurm uses in other places
     * (sinfo, scontrol, older plugins). */
    static const struct {
        const char *word;
        int base;
        int bit;
    } alias[] = {
        {"ALLOC", SM_NODE_ALLOCATED, -1},
        {"MIX", SM_NODE_MIXED, -1},
        {"UNK", SM_NODE_UNKNOWN, -1},
        {"MAINT", -1, SM_NFB_MAINTENANCE},
        {"NO_RESPOND", -1, SM_NFB_NOT_RESPONDING},
        {"DRAINED", -1, SM_NFB_DRAIN},
        {"DRAINING", -1, SM_NFB_DRAIN},
        {"REBOOT", -1, SM_NFB_REBOOT_REQUESTED},
        {"REBOOT_CANCELLED", -1, SM_NFB_REBOOT_CANCELED},
        {"INVAL", -1, SM_NFB_INVALID_REG},
        {"COMP", -1, SM_NFB_COMPLETING},
    };
    for (size_t i = 0; i < ARRAY_SIZE(base_names); i++) {
        if (strcasecmp(s, base_names[i]) == 0) {
            *base = (int)i;
            return 1;
        }
    }
    for (int i = 0; i < SM_NFB_OTHER; i++) {
        if (strcasecmp(s, flag_names[i]) == 0) {
            *flag_bit = i;
            return 2;
        }
    }
    for (size_t i = 0; i < ARRAY_SIZE(alias); i++) {
        if (strcasecmp(s, alias[i].word) == 0) {
            if (alias[i].base >= 0) {
                *base = alias[i].base;
                return 1;
            }
            *flag_bit = alias[i].bit;
            return 2;
        }
    }
    return 0;
}

int sm_node_state_str(const sm_node *n, buf_t *out)
{
    int rc = buf_puts(out, sm_node_base_name(n->base));
    for (int i = 0; i < SM_NFB__COUNT; i++)
        if (n->flags & (UINT64_C(1) << i))
            rc |= buf_printf(out, "+%s", flag_names[i]);
    return rc ? OP_ETOOBIG : 0;
}

static void apply_state_word(const char *w, int *base, int *have_base, uint64_t *flags)
{
    int b, f;
    switch (sm_node_state_word(w, &b, &f)) {
    case 1:
        /* The first base word wins. A second, different one is a state
         * Slurm never reports (a node has one base state): the node is
         * marked with an unknown word, which proves it busy. */
        if (!*have_base) {
            *base = b;
            *have_base = 1;
        } else if (b != *base) {
            *flags |= SM_NF(OTHER);
        }
        break;
    case 2:
        *flags |= UINT64_C(1) << f;
        break;
    default:
        *flags |= SM_NF(OTHER);
        break;
    }
}

void sm_node_clear(sm_node *n)
{
    free(n->name);
    free(n->reason);
    free(n->comment);
    free(n->features);
    free(n->active_features);
    free(n->topology);
    free(n->reservation);
    free(n->partitions);
    free(n->address);
    free(n->hostname);
    memset(n, 0, sizeof(*n));
}

static int parse_node(const cJSON *o, sm_node *n)
{
    memset(n, 0, sizeof(*n));
    const char *name = json_get_str(o, "name");
    if (!cJSON_IsObject(o) || !name || !name[0])
        return OP_EPARSE;
    int have_base = 0;
    const cJSON *st = json_child(o, "state");
    if (cJSON_IsString(st)) {
        /* v0.0.36-38: the base state word; the flags are separate. */
        apply_state_word(st->valuestring, &n->base, &have_base, &n->flags);
    } else if (cJSON_IsArray(st)) {
        /* v0.0.40+: base and flags in one list; the list is the whole truth. */
        const cJSON *w;
        cJSON_ArrayForEach(w, st)
        {
            if (cJSON_IsString(w))
                apply_state_word(w->valuestring, &n->base, &have_base, &n->flags);
        }
        n->flags_known = 1;
    } else {
        return OP_EPARSE;
    }
    const cJSON *fl = json_child(o, "state_flags");
    if (cJSON_IsArray(fl)) {
        const cJSON *w;
        cJSON_ArrayForEach(w, fl)
        {
            if (cJSON_IsString(w))
                apply_state_word(w->valuestring, &n->base, &have_base, &n->flags);
        }
        n->flags_known = 1;
    }
    if (!have_base)
        n->base = SM_NODE_UNKNOWN;
    n->name = xstrdup(name);
    n->reason = get_text(o, "reason");
    n->comment = get_text(o, "comment");
    n->features = get_text(o, "features");
    n->active_features = get_text(o, "active_features");
    n->topology = get_text(o, "topology");
    n->reservation = get_text(o, "reservation");
    n->partitions = get_text(o, "partitions");
    n->address = get_text(o, "address");
    n->hostname = get_text(o, "hostname");
    n->cpus = get_int(o, "cpus", -1);
    n->alloc_cpus = get_int(o, "alloc_cpus", -1);
    int64_t mem = -1;
    n->alloc_memory = get_num(o, "alloc_memory", &mem) == NUM_VALUE ? mem : -1;
    n->real_memory = get_num(o, "real_memory", &mem) == NUM_VALUE ? mem : -1;
    /* v0.0.40+ (a state list) count what jobs hold; 22.05 shows 0 while a
     * job runs, so only the newer shape may betray work this way. */
    n->alloc_known = cJSON_IsArray(st);
    n->reason_changed_at = get_time(o, "reason_changed_at", 0);
    n->slurmd_started_at = get_time(o, "slurmd_start_time", 0);
    return 0;
}

/* ---- jobs ---- */

static const char *const job_names[] = {"PENDING",  "RUNNING",       "SUSPENDED", "COMPLETED", "CANCELLED",
                                        "FAILED",   "TIMEOUT",       "NODE_FAIL", "PREEMPTED", "BOOT_FAIL",
                                        "DEADLINE", "OUT_OF_MEMORY", "OTHER"};
_Static_assert(ARRAY_SIZE(job_names) == SM_JOB_OTHER + 1, "job_names follows enum sm_job_state");

const char *sm_job_state_name(int state)
{
    return state >= 0 && (size_t)state < ARRAY_SIZE(job_names) ? job_names[state] : "OTHER";
}

static void apply_job_word(const char *w, int *state, int *have_state, uint32_t *flags)
{
    for (int i = 0; i < SM_JOB_OTHER; i++) {
        if (strcasecmp(w, job_names[i]) == 0) {
            if (!*have_state) {
                *state = i;
                *have_state = 1;
            } else if (*state != i) {
                *flags |= SM_JF_OTHER; /* two states at once: Slurm never says that */
            }
            return;
        }
    }
    static const struct {
        const char *w;
        uint32_t f;
    } words[] = {
        {"COMPLETING", SM_JF_COMPLETING}, {"REQUEUED", SM_JF_REQUEUED},     {"REQUEUE_HOLD", SM_JF_REQUEUED},
        {"REQUEUE_FED", SM_JF_REQUEUED},  {"SPECIAL_EXIT", SM_JF_REQUEUED}, {"STOPPED", SM_JF_STOPPED},
        {"SIGNALING", SM_JF_SIGNALING},   {"STAGE_OUT", SM_JF_STAGE_OUT},   {"RESIZING", SM_JF_RESIZING},
        {"UPDATE_DB", SM_JF_BENIGN},      {"REVOKED", SM_JF_BENIGN},        {"LAUNCH_FAILED", SM_JF_BENIGN},
        {"RECONFIG_FAIL", SM_JF_BENIGN},  {"POWER_UP_NODE", SM_JF_BENIGN},  {"RESV_DEL_HOLD", SM_JF_BENIGN},
        {"EXPEDITING", SM_JF_BENIGN},
    };
    for (size_t i = 0; i < ARRAY_SIZE(words); i++) {
        if (strcasecmp(w, words[i].w) == 0) {
            *flags |= words[i].f;
            return;
        }
    }
    if (strcasecmp(w, "CONFIGURING") == 0) {
        /* A configuring job holds its nodes; 22.05 writes only this word
         * for a running job whose nodes are still booting. */
        *flags |= SM_JF_CONFIGURING;
        if (!*have_state) {
            *state = SM_JOB_RUNNING;
            *have_state = 1;
        }
    } else {
        *flags |= SM_JF_OTHER;
    }
}

static int parse_job(const cJSON *o, sm_job *j)
{
    memset(j, 0, sizeof(*j));
    const cJSON *id = json_child(o, "job_id");
    if (!cJSON_IsNumber(id) || id->valuedouble < 0 || id->valuedouble > UINT32_MAX)
        return OP_EPARSE;
    j->id = (uint32_t)id->valuedouble;
    int have = 0;
    j->state = SM_JOB_OTHER;
    const cJSON *st = json_child(o, "job_state");
    if (cJSON_IsString(st)) {
        apply_job_word(st->valuestring, &j->state, &have, &j->flags);
    } else if (cJSON_IsArray(st)) {
        const cJSON *w;
        cJSON_ArrayForEach(w, st)
        {
            if (cJSON_IsString(w))
                apply_job_word(w->valuestring, &j->state, &have, &j->flags);
        }
    } else {
        return OP_EPARSE;
    }
    j->nodes = get_text(o, "nodes");
    j->partition = get_text(o, "partition");
    j->start_time = get_time(o, "start_time", 0);
    int64_t lim = 0;
    /* v0.0.38: null means unlimited; v0.0.40+: infinite, or not set. */
    j->time_limit = get_num(o, "time_limit", &lim) == NUM_VALUE ? lim : SM_INFINITE;
    int64_t nc = 0;
    j->node_count = get_num(o, "node_count", &nc) == NUM_VALUE && nc > 0 && nc <= INT32_MAX ? (int32_t)nc : 0;
    j->reason = get_text(o, "state_reason");
    return 0;
}

int sm_job_holds_nodes(const sm_job *j)
{
    switch (j->state) {
    case SM_JOB_COMPLETED:
    case SM_JOB_CANCELLED:
    case SM_JOB_FAILED:
    case SM_JOB_TIMEOUT:
    case SM_JOB_NODE_FAIL:
    case SM_JOB_PREEMPTED:
    case SM_JOB_BOOT_FAIL:
    case SM_JOB_DEADLINE:
    case SM_JOB_OUT_OF_MEMORY:
        /* Ended; its nodes are free once nothing of it runs there any more
         * (COMPLETING: epilog, processes being killed) and nothing is on
         * its way to them. REQUEUED on an ended job means it goes back to
         * PENDING: it holds nothing on the node then (slurmctld clears
         * its node list), but until then it is the kill phase. */
        return (j->flags & ~(SM_JF_BENIGN | SM_JF_CONFIGURING)) != 0;
    default:
        /* PENDING (a requeued job keeps its nodes listed until they are
         * released), RUNNING, SUSPENDED (processes stopped on the node, the
         * node reads IDLE: found on 22.05), OTHER (a state word this module
         * does not know, or only a flag such as 22.05's COMPLETING). */
        return 1;
    }
}

int64_t sm_job_deadline(const sm_job *j)
{
    if (j->time_limit == SM_INFINITE || j->time_limit < 0 || j->start_time <= 0)
        return SM_INFINITE;
    if (j->time_limit > (SM_INFINITE - j->start_time) / 60)
        return SM_INFINITE;
    return j->start_time + j->time_limit * 60;
}

/* ---- ping ---- */

static int parse_ping(const cJSON *o, sm_ping *p)
{
    memset(p, 0, sizeof(*p));
    if (!cJSON_IsObject(o))
        return OP_EPARSE;
    p->hostname = get_text(o, "hostname");
    p->mode = get_text(o, "mode");
    const cJSON *r = json_child(o, "responding");
    if (cJSON_IsBool(r)) {
        p->responding = cJSON_IsTrue(r);
    } else {
        /* "pinged" (v0.0.40) or "ping" (22.05): "UP" or "DOWN". v0.0.45
         * has neither: it always sends "responding" and "primary". */
        const char *s = json_get_str(o, "pinged");
        if (!s)
            s = json_get_str(o, "ping");
        p->responding = s && strcasecmp(s, "UP") == 0;
    }
    const cJSON *pr = json_child(o, "primary");
    p->primary = cJSON_IsBool(pr) ? cJSON_IsTrue(pr) : strcmp(p->mode, "primary") == 0;
    p->latency_us = get_int(o, "latency", -1);
    return 0;
}

/* ---- reservations ---- */

static const char *const resv_flag_names[] = {
#define SM_RFB_NAME(name, str) str,
    SM_RESV_FLAG_MAP(SM_RFB_NAME)
#undef SM_RFB_NAME
};

int sm_resv_flag_bit(const char *s)
{
    for (int i = 0; i < SM_RFB_OTHER; i++)
        if (strcasecmp(s, resv_flag_names[i]) == 0)
            return i;
    return -1;
}

int64_t sm_resv_duration(const sm_resv *r)
{
    if (r->end_time == SM_INFINITE || r->end_time < r->start_time)
        return SM_INFINITE;
    return (r->end_time - r->start_time) / 60;
}

static int parse_resv(const cJSON *o, sm_resv *r)
{
    memset(r, 0, sizeof(*r));
    const char *name = json_get_str(o, "name");
    if (!cJSON_IsObject(o) || !name || !name[0])
        return OP_EPARSE;
    r->name = xstrdup(name);
    r->start_time = get_time(o, "start_time", SM_INFINITE);
    r->end_time = get_time(o, "end_time", SM_INFINITE);
    const cJSON *fl = json_child(o, "flags");
    const cJSON *w;
    cJSON_ArrayForEach(w, fl)
    {
        if (!cJSON_IsString(w))
            continue;
        int bit = sm_resv_flag_bit(w->valuestring);
        r->flags |= bit >= 0 ? UINT64_C(1) << bit : SM_RF(OTHER);
    }
    r->flags_str = get_text(o, "flags");
    r->users = get_text(o, "users");
    r->node_list = get_text(o, "node_list");
    return 0;
}

static void resv_clear(sm_resv *r)
{
    free(r->name);
    free(r->flags_str);
    free(r->users);
    free(r->node_list);
}

/* ---- responses ---- */

void sm_response_free(sm_response *r)
{
    for (size_t i = 0; i < r->n_nodes; i++)
        sm_node_clear(&r->nodes[i]);
    free(r->nodes);
    for (size_t i = 0; i < r->n_jobs; i++) {
        free(r->jobs[i].nodes);
        free(r->jobs[i].partition);
        free(r->jobs[i].reason);
    }
    free(r->jobs);
    for (size_t i = 0; i < r->n_pings; i++) {
        free(r->pings[i].hostname);
        free(r->pings[i].mode);
    }
    free(r->pings);
    for (size_t i = 0; i < r->n_resvs; i++)
        resv_clear(&r->resvs[i]);
    free(r->resvs);
    free(r->err.message);
    free(r->err.no_such_node);
    memset(r, 0, sizeof(*r));
}

/* Days from 1970-01-01 to y-m-d (proleptic Gregorian; H. Hinnant's
 * days_from_civil), so no TZ or locale is involved. */
static int64_t days_from_civil(int64_t y, int m, int d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

int64_t sm_http_date(const char *s)
{
    static const char *const wdays[] = {"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"};
    static const char *const months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                         "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    /* "Sun, 06 Nov 1994 08:49:37 GMT": exactly 29 characters. */
    if (!s || strlen(s) != 29 || s[3] != ',' || s[4] != ' ' || s[7] != ' ' || s[11] != ' ' || s[16] != ' ' ||
        s[19] != ':' || s[22] != ':' || s[25] != ' ' || strcmp(s + 26, "GMT") != 0)
        return 0;
    int wday_ok = 0, mon = -1;
    for (size_t i = 0; i < ARRAY_SIZE(wdays); i++)
        wday_ok |= strncmp(s, wdays[i], 3) == 0;
    for (size_t i = 0; i < ARRAY_SIZE(months); i++)
        if (strncmp(s + 8, months[i], 3) == 0)
            mon = (int)i + 1;
    static const int digits[] = {5, 6, 12, 13, 14, 15, 17, 18, 20, 21, 23, 24};
    for (size_t i = 0; i < ARRAY_SIZE(digits); i++)
        if (!isdigit((unsigned char)s[digits[i]]))
            return 0;
    if (!wday_ok || mon < 0)
        return 0;
#define D2(i) ((s[i] - '0') * 10 + (s[(i) + 1] - '0'))
    int day = D2(5), year = D2(12) * 100 + D2(14), hh = D2(17), mm = D2(20), ss = D2(23);
#undef D2
    static const int mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (year < 1970 || day < 1 || day > mdays[mon - 1] || hh > 23 || mm > 59 || ss > 60)
        return 0;
    return days_from_civil(year, mon, day) * 86400 + hh * 3600 + mm * 60 + ss;
}

int sm_errno_code(int e)
{
    switch (e) {
    case 2017: /* ESLURM_INVALID_JOB_ID */
    case 2018: /* ESLURM_INVALID_NODE_NAME */
    case 2053: /* ESLURM_RESERVATION_INVALID */
        return OP_ENOTFOUND;
    case 2082: /* ESLURM_RESERVATION_NAME_DUP */
    case 2168: /* "Node already exists in the node table" (a create naming one) */
        return OP_EEXISTS;
    case 2016: /* ESLURM_NODES_BUSY */
    case 2055: /* ESLURM_RESERVATION_BUSY */
        return OP_EBUSY;
    case 2058: /* ESLURM_RESERVATION_OVERLAP */
        return OP_ECONFLICT;
    case 2028: /* ESLURM_INVALID_NODE_STATE */
    case 2180: /* 26.05: "Invalid node state transition" (HTTP 422) */
    case 2054: /* ESLURM_INVALID_TIME_VALUE */
        return OP_EINVALID;
    case 1007: /* SLURM_PROTOCOL_AUTHENTICATION_ERROR */
    case 2002: /* ESLURM_ACCESS_DENIED */
    case 2010: /* ESLURM_USER_ID_MISSING */
    case 2052: /* ESLURM_RESERVATION_ACCESS */
        return OP_EFORBIDDEN;
    default:
        break;
    }
    if (e >= 1800 && e < 1900) /* SLURMCTLD_COMMUNICATIONS_* */
        return OP_EUNAVAILABLE;
    if (e >= 6000 && e < 6100) /* ESLURM_AUTH_* */
        return OP_EFORBIDDEN;
    return OP_ESLURM;
}

static int status_code(int status)
{
    switch (status) {
    case 400:
        return OP_EINVALID;
    case 401:
        return OP_EUNAUTHORIZED;
    case 403:
        return OP_EFORBIDDEN;
    case 404:
    case 405:
        return OP_ENOTSUP;
    case 415:
        return OP_EPROTO;
    case 429:
        return OP_ERATELIMIT;
    case 502:
    case 503:
    case 504:
        return OP_EUNAVAILABLE;
    default:
        return status >= 500 && status < 600 ? OP_ESERVER : OP_EHTTP;
    }
}

/* The error number of one "errors" entry, under whichever key this version
 * uses. */
static int entry_errno(const cJSON *e)
{
    static const char *const keys[] = {"error_number", "errno", "error_code"};
    for (size_t i = 0; i < ARRAY_SIZE(keys); i++) {
        const cJSON *v = json_child(e, keys[i]);
        if (cJSON_IsNumber(v))
            return (int)json_num_clamp(v, 0, INT32_MIN, INT32_MAX);
    }
    return 0;
}

static int fail(sm_response *out, int code, int slurm_errno, char *message)
{
    out->err.code = code;
    out->err.slurm_errno = slurm_errno;
    out->err.message = message;
    return code;
}

/* 24.11 and later answer a read of a node slurmctld has no record of with
 * HTTP 200, no node list and one error numbered 0 ("No error") described
 * "Failure to query node <name>": the load succeeded and found nothing.
 * Errors of a load that failed carry a Slurm error number. */
#define NO_RECORD_PREFIX "Failure to query node "

static const char *no_record_of(const cJSON *errors)
{
    const cJSON *e;
    if (json_len(errors) != 1)
        return NULL;
    e = errors->child;
    const char *desc = json_get_str(e, "description");
    if (entry_errno(e) != 0 || !desc || strncmp(desc, NO_RECORD_PREFIX, strlen(NO_RECORD_PREFIX)) != 0)
        return NULL;
    desc += strlen(NO_RECORD_PREFIX);
    return *desc && !strchr(desc, ' ') ? desc : NULL;
}

/* Build the error from a non-empty "errors" list. */
static int fail_from_list(sm_response *out, int status, const cJSON *errors)
{
    buf_t m;
    buf_init(&m, 4096); /* a message for logs: long lists are cut */
    int first = 0, rc = buf_printf(&m, "HTTP %d:", status);
    const cJSON *e;
    cJSON_ArrayForEach(e, errors)
    {
        int num = entry_errno(e);
        if (!first && num)
            first = num;
        const char *msg = json_get_str(e, "error");
        const char *desc = json_get_str(e, "description");
        const char *src = json_get_str(e, "source");
        rc |= buf_printf(&m, " %s", msg && msg[0] ? msg : "error");
        if (desc && desc[0])
            rc |= buf_printf(&m, " (%s)", desc);
        if (num)
            rc |= buf_printf(&m, " [%d]", num);
        if (src && src[0])
            rc |= buf_printf(&m, " in %s", src);
        rc |= buf_putc(&m, ';');
    }
    (void)rc; /* a truncated message is still a message */
    int code;
    if (status == 400 || status == 401 || status == 403 || status == 429)
        code = status_code(status);
    else
        code = first ? sm_errno_code(first) : OP_ESLURM;
    char *s = m.data ? buf_detach(&m, NULL) : xasprintf("HTTP %d", status);
    size_t n = strlen(s);
    if (n && s[n - 1] == ';')
        s[n - 1] = '\0';
    return fail(out, code, first, s);
}

/* Error text from a plain-text body: the first line, cut short. */
static char *text_message(int status, const char *body, size_t len)
{
    size_t n = 0;
    while (n < len && n < 200 && body[n] != '\n' && body[n] != '\r' && body[n] != '\0')
        n++;
    if (n == 0)
        return xasprintf("HTTP %d", status);
    return xasprintf("HTTP %d: %.*s", status, (int)n, body);
}

/* Parse the data list of kind into out. */
static int parse_list(int version, enum sm_kind kind, const cJSON *doc, sm_response *out)
{
    const char *key = NULL;
    switch (kind) {
    case SM_KIND_NODES:
    case SM_KIND_NODE:
        key = "nodes";
        break;
    case SM_KIND_JOBS:
        key = "jobs";
        break;
    case SM_KIND_PING:
        key = "pings";
        break;
    case SM_KIND_RESERVATIONS:
    case SM_KIND_RESERVATION:
        key = "reservations";
        break;
    case SM_KIND_STATUS:
        return 0;
    case SM_KIND_DIAG: {
        /* Only the clock is read: req_time is slurmctld's time() when it
         * answered (a number before v0.0.40, a no-val struct after). */
        const cJSON *st = json_child(doc, "statistics");
        int64_t t = 0;
        if (!cJSON_IsObject(st) || get_num(st, "req_time", &t) != NUM_VALUE || t <= 0)
            return fail(
                out, OP_EPARSE, 0,
                xasprintf("%s diag response without \"statistics\".\"req_time\"", sm_version_str(version)));
        out->server_time = t;
        out->server_time_src = SM_TIME_REQ_TIME;
        return 0;
    }
    }
    const cJSON *list = json_child(doc, key);
    if (!cJSON_IsArray(list))
        return fail(out, OP_EPARSE, 0,
                    xasprintf("%s response without a \"%s\" list", sm_version_str(version), key));
    size_t n = (size_t)cJSON_GetArraySize(list), k = 0;
    const cJSON *e;
    int rc = 0;
    switch (kind) {
    case SM_KIND_NODES:
    case SM_KIND_NODE:
        out->nodes = xcalloc(n ? n : 1, sizeof(sm_node));
        cJSON_ArrayForEach(e, list)
        {
            if ((rc = parse_node(e, &out->nodes[k])) < 0)
                break;
            k++;
        }
        out->n_nodes = k;
        break;
    case SM_KIND_JOBS:
        out->jobs = xcalloc(n ? n : 1, sizeof(sm_job));
        cJSON_ArrayForEach(e, list)
        {
            if ((rc = parse_job(e, &out->jobs[k])) < 0)
                break;
            k++;
        }
        out->n_jobs = k;
        break;
    case SM_KIND_PING:
        out->pings = xcalloc(n ? n : 1, sizeof(sm_ping));
        cJSON_ArrayForEach(e, list)
        {
            if ((rc = parse_ping(e, &out->pings[k])) < 0)
                break;
            k++;
        }
        out->n_pings = k;
        if (rc == 0 && k == 0)
            return fail(out, OP_EPARSE, 0, xstrdup("ping response without controllers"));
        break;
    case SM_KIND_RESERVATIONS:
    case SM_KIND_RESERVATION:
        out->resvs = xcalloc(n ? n : 1, sizeof(sm_resv));
        cJSON_ArrayForEach(e, list)
        {
            if ((rc = parse_resv(e, &out->resvs[k])) < 0)
                break;
            k++;
        }
        out->n_resvs = k;
        break;
    case SM_KIND_STATUS:
    case SM_KIND_DIAG:
        break;
    }
    if (rc < 0)
        return fail(out, rc, 0, xasprintf("malformed entry %zu of \"%s\"", k, key));
    if ((kind == SM_KIND_NODE && out->n_nodes == 0) || (kind == SM_KIND_RESERVATION && out->n_resvs == 0))
        return fail(out, OP_ENOTFOUND, 0, xasprintf("empty \"%s\" list", key));
    return 0;
}

/* Drop whatever data was parsed: an error response carries none. */
static void drop_data(sm_response *out)
{
    sm_error keep = out->err;
    int version = out->version;
    out->err.message = NULL;
    sm_response_free(out);
    out->err = keep;
    out->version = version;
}

int sm_parse(int version, enum sm_kind kind, int status, const char *body, size_t len, sm_response *out)
{
    return sm_parse_bounded(version, kind, status, body, len, 0, out);
}

int sm_parse_json(int version, enum sm_kind kind, int status, const cJSON *doc, sm_response *out)
{
    memset(out, 0, sizeof(*out));
    out->version = version;
    out->err.http_status = status;
    if (status == 304) {
        out->not_modified = 1;
        return 0;
    }
    const cJSON *errors = cJSON_IsObject(doc) ? json_child(doc, "errors") : NULL;
    if (errors && !cJSON_IsArray(errors)) {
        /* An error list we cannot read is not an empty one. */
        return fail(out, OP_EPARSE, 0, xasprintf("HTTP %d: \"errors\" is not a list", status));
    }
    out->n_warnings = (size_t)json_len(cJSON_IsObject(doc) ? json_child(doc, "warnings") : NULL);
    if (status < 200 || status > 299) {
        if (json_len(errors) > 0)
            return fail_from_list(out, status, errors);
        return fail(out, status_code(status), 0, xasprintf("HTTP %d", status));
    }
    if (!cJSON_IsObject(doc))
        return fail(out, OP_EPARSE, 0, xasprintf("HTTP %d with a body that is not a JSON object", status));
    if (json_len(errors) > 0) {
        const char *none = kind == SM_KIND_NODE && status == 200 && json_len(json_child(doc, "nodes")) == 0
                               ? no_record_of(errors)
                               : NULL;
        int rc = fail_from_list(out, status, errors);
        if (none) {
            out->err.code = rc = OP_ENOTFOUND;
            out->err.no_such_node = xstrdup(none);
        }
        return rc;
    }
    int64_t lu = 0;
    if (kind == SM_KIND_JOBS && get_num(doc, "last_update", &lu) == NUM_VALUE && lu == 0 &&
        json_len(json_child(doc, "jobs")) == 0) {
        /* 24.11 and later answer a job poll whose update_time is not older
         * than the last change with HTTP 200, "jobs": [], "last_update" 0
         * and a warning "No job changes since update_time[...]", not with
         * 304 as 22.05 does. A real list, even an empty one, is stamped
         * with the time slurmctld packed it: read as "no job runs", this
         * answer would clear every deadline on every other poll. */
        out->not_modified = 1;
        return 0;
    }
    out->last_update = get_time(doc, "last_update", 0);
    if (out->last_update > 0) {
        /* slurmctld stamps a list with time() when it packs it. */
        out->server_time = out->last_update;
        out->server_time_src = SM_TIME_LAST_UPDATE;
    }
    int rc = parse_list(version, kind, doc, out);
    if (rc < 0)
        drop_data(out);
    return rc;
}

int sm_parse_bounded(int version, enum sm_kind kind, int status, const char *body, size_t len,
                     size_t max_tree, sm_response *out)
{
    /* The model copies what it keeps, so the tree is parsed into an arena
     * and dropped at once: a whole node table at 8,192 nodes is 11 MB of
     * JSON, and one malloc and free per node and string of it was most of
     * the cost of a poll. The arena grows in chunks up to max_tree: a tree
     * that does not fit is an error, never a table cut short. */
    json_arena *arena = len && status != 304 ? json_arena_new() : NULL;
    if (arena)
        json_arena_set_limit(arena, max_tree);
    cJSON *doc = arena ? json_arena_parse(arena, body, len, NULL) : NULL;
    size_t tree = json_arena_peak(arena);
    if (json_arena_exhausted(arena)) {
        memset(out, 0, sizeof(*out));
        out->version = version;
        out->err.http_status = status;
        out->tree_bytes = tree;
        json_arena_free(arena);
        return fail(out, OP_ETOOBIG, 0,
                    xasprintf("HTTP %d: a %zu-byte answer needs more than %zu bytes to decode", status, len,
                              max_tree));
    }
    if (doc && !cJSON_IsObject(doc))
        doc = NULL;
    int rc = sm_parse_json(version, kind, status, doc, out);
    out->tree_bytes = tree;
    /* Plain-text errors (400, 401, 404, 405, 415) say what went wrong in
     * their body: keep it in the message. */
    if (rc < 0 && !doc && len && status != 304 && (status < 200 || status > 299)) {
        free(out->err.message);
        out->err.message = text_message(status, body, len);
    }
    json_arena_free(arena);
    return rc;
}

/* ---- writes ---- */

const char *sm_node_req_name(int req)
{
    switch (req) {
    case SM_REQ_DRAIN:
        return "DRAIN";
    case SM_REQ_UNDRAIN:
        return "UNDRAIN";
    case SM_REQ_RESUME:
        return "RESUME";
    case SM_REQ_DOWN:
        return "DOWN";
    case SM_REQ_IDLE:
        return "IDLE";
    default:
        return NULL;
    }
}

/* A comma-separated list as a JSON array of strings (csv_string). */
static void csv_array(cJSON *o, const char *key, const char *csv)
{
    cJSON *a = cJSON_CreateArray();
    const char *p = csv ? csv : "";
    while (*p) {
        const char *c = strchr(p, ',');
        size_t n = c ? (size_t)(c - p) : strlen(p);
        if (n) {
            char *item = xstrndup(p, n);
            cJSON_AddItemToArray(a, cJSON_CreateString(item));
            free(item);
        }
        p += n;
        if (*p == ',')
            p++;
    }
    json_set(o, key, a);
}

static cJSON *no_val(int64_t v)
{
    cJSON *o = cJSON_CreateObject();
    json_set_bool(o, "set", v != SM_INFINITE);
    json_set_bool(o, "infinite", v == SM_INFINITE);
    json_set_int(o, "number", v == SM_INFINITE ? 0 : v);
    return o;
}

static int emit(cJSON *o, buf_t *out)
{
    int rc = json_dump_buf(o, out);
    cJSON_Delete(o);
    return rc < 0 ? OP_ETOOBIG : 0;
}

int sm_node_update_json(int version, const sm_node_update *u, buf_t *out)
{
    if (!sm_version_has(version, SM_OP_UPDATE_NODE))
        return OP_ENOTSUP;
    if ((u->set & SM_UPD_TOPOLOGY) && !sm_version_has(version, SM_OP_UPDATE_TOPOLOGY))
        return OP_ENOTSUP;
    if (u->names && !sm_version_has(version, SM_OP_UPDATE_NODES))
        return OP_ENOTSUP;
    if (!u->set)
        return OP_EINVAL;
    const char *state = NULL;
    if (u->set & SM_UPD_STATE) {
        state = sm_node_req_name(u->state);
        if (!state)
            return OP_EINVAL;
        /* slurmctld refuses DRAIN and DOWN without a reason; say so here. */
        if ((u->state == SM_REQ_DRAIN || u->state == SM_REQ_DOWN) &&
            (!(u->set & SM_UPD_REASON) || !u->reason || !u->reason[0]))
            return OP_EINVAL;
    }
    cJSON *o = cJSON_CreateObject();
    if (u->names) {
        cJSON *a = cJSON_CreateArray();
        cJSON_AddItemToArray(a, cJSON_CreateString(u->names));
        json_set(o, "name", a);
    }
    if (state) {
        cJSON *a = cJSON_CreateArray();
        cJSON_AddItemToArray(a, cJSON_CreateString(state));
        json_set(o, "state", a);
    }
    if (u->set & SM_UPD_REASON)
        json_set_str(o, "reason", u->reason ? u->reason : "");
    if (u->set & SM_UPD_COMMENT)
        json_set_str(o, "comment", u->comment ? u->comment : "");
    if (u->set & SM_UPD_FEATURES)
        csv_array(o, "features", u->features);
    if (u->set & SM_UPD_FEATURES_ACT)
        csv_array(o, "features_act", u->features_act);
    if (u->set & SM_UPD_TOPOLOGY)
        json_set_str(o, "topology_str", u->topology ? u->topology : "");
    return emit(o, out);
}

int sm_resv_desc_json(int version, const sm_resv_desc *d, buf_t *out)
{
    if (!sm_version_has(version, SM_OP_POST_RESERVATION))
        return OP_ENOTSUP;
    if (!d->name || !d->name[0])
        return OP_EINVAL;
    cJSON *o = cJSON_CreateObject();
    json_set_str(o, "name", d->name);
    json_set(o, "start_time", no_val(d->start_time));
    json_set(o, "duration", no_val(d->duration));
    cJSON *fl = cJSON_CreateArray();
    for (int i = 0; i < SM_RFB_OTHER; i++)
        if (d->flags & (UINT64_C(1) << i))
            cJSON_AddItemToArray(fl, cJSON_CreateString(resv_flag_names[i]));
    json_set(o, "flags", fl);
    csv_array(o, "users", d->users);
    if (d->node_list && d->node_list[0]) {
        cJSON *a = cJSON_CreateArray();
        cJSON_AddItemToArray(a, cJSON_CreateString(d->node_list));
        json_set(o, "node_list", a);
    }
    return emit(o, out);
}

int sm_node_create_json(const char *node_conf, buf_t *out)
{
    if (!node_conf || !*node_conf)
        return OP_EINVAL;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "node_conf", node_conf);
    return emit(o, out);
}
