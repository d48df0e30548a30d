/* ks_proto: the Kubernetes protobuf encoding of a few request bodies.
 *
 * kubectl's typed clients send built-in objects as
 * `application/vnd.kubernetes.protobuf` (`kubectl create configmap`,
 * `create secret`, `create namespace`, `create serviceaccount`): the magic
 * "k8s\0" and a runtime.Unknown envelope {typeMeta, raw} whose raw bytes are
 * the object's generated message. kubesim stores JSON, so those bodies are
 * decoded here into the JSON the same client would have sent: field numbers
 * of the generated.proto files, bytes as base64, and the zero values the Go
 * marshaller writes for every non-pointer field (empty strings, 0, false,
 * empty messages) dropped as `omitempty` drops them.
 *
 * Only the kinds in the table below are known; any other kind, or a field
 * number a known message does not list, fails the decode with a message, so
 * nothing is silently lost. Input is untrusted: every length is checked
 * against the remaining bytes and nesting is bounded.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kubesim/ks_int.h"
#include "core/crypto.h"
#include "core/json.h"
#include "core/mem.h"
#include "core/rfc3339.h"

enum pf_type {
    PF_STR,   /* string */
    PF_BYTES, /* bytes -> base64 string */
    PF_BOOL,
    PF_INT,   /* varint int32/int64 */
    PF_MSG,   /* nested message */
    PF_RSTR,  /* repeated string */
    PF_RMSG,  /* repeated message */
    PF_MAP_SS, /* map<string,string> */
    PF_MAP_SB, /* map<string,bytes> */
    PF_TIME,  /* metav1.Time {seconds, nanos} -> RFC 3339 */
    PF_SKIP,  /* known, ignored (managedFields) */
};

typedef struct pb_field {
    int num;
    const char *name;
    enum pf_type type;
    const struct pb_field *msg; /* PF_MSG/PF_RMSG: its fields, terminated by num 0 */
} pb_field;

static const pb_field owner_ref[] = {
    {1, "kind", PF_STR, NULL},       {3, "name", PF_STR, NULL},
    {4, "uid", PF_STR, NULL},        {5, "apiVersion", PF_STR, NULL},
    {6, "controller", PF_BOOL, NULL}, {7, "blockOwnerDeletion", PF_BOOL, NULL},
    {0, NULL, PF_SKIP, NULL},
};

static const pb_field object_meta[] = {
    {1, "name", PF_STR, NULL},
    {2, "generateName", PF_STR, NULL},
    {3, "namespace", PF_STR, NULL},
    {4, "selfLink", PF_STR, NULL},
    {5, "uid", PF_STR, NULL},
    {6, "resourceVersion", PF_STR, NULL},
    {7, "generation", PF_INT, NULL},
    {8, "creationTimestamp", PF_TIME, NULL},
    {9, "deletionTimestamp", PF_TIME, NULL},
    {10, "deletionGracePeriodSeconds", PF_INT, NULL},
    {11, "labels", PF_MAP_SS, NULL},
    {12, "annotations", PF_MAP_SS, NULL},
    {13, "ownerReferences", PF_RMSG, owner_ref},
    {14, "finalizers", PF_RSTR, NULL},
    {17, "managedFields", PF_SKIP, NULL},
    {0, NULL, PF_SKIP, NULL},
};

static const pb_field configmap[] = {
    {1, "metadata", PF_MSG, object_meta}, {2, "data", PF_MAP_SS, NULL},
    {3, "binaryData", PF_MAP_SB, NULL},   {4, "immutable", PF_BOOL, NULL},
    {0, NULL, PF_SKIP, NULL},
};

static const pb_field secret[] = {
    {1, "metadata", PF_MSG, object_meta}, {2, "data", PF_MAP_SB, NULL},   {3, "type", PF_STR, NULL},
    {4, "stringData", PF_MAP_SS, NULL},   {5, "immutable", PF_BOOL, NULL}, {0, NULL, PF_SKIP, NULL},
};

static const pb_field ns_spec[] = {{1, "finalizers", PF_RSTR, NULL}, {0, NULL, PF_SKIP, NULL}};
static const pb_field ns_status[] = {{1, "phase", PF_STR, NULL}, {2, "conditions", PF_SKIP, NULL},
                                     {0, NULL, PF_SKIP, NULL}};
static const pb_field name_ref[] = {{1, "name", PF_STR, NULL}, {0, NULL, PF_SKIP, NULL}};
static const pb_field object_ref[] = {
    {1, "kind", PF_STR, NULL},       {2, "namespace", PF_STR, NULL}, {3, "name", PF_STR, NULL},
    {4, "uid", PF_STR, NULL},        {5, "apiVersion", PF_STR, NULL}, {6, "resourceVersion", PF_STR, NULL},
    {7, "fieldPath", PF_STR, NULL}, {0, NULL, PF_SKIP, NULL},
};

static const pb_field namespace_[] = {
    {1, "metadata", PF_MSG, object_meta},
    {2, "spec", PF_MSG, ns_spec},
    {3, "status", PF_MSG, ns_status},
    {0, NULL, PF_SKIP, NULL},
};

static const pb_field service_account[] = {
    {1, "metadata", PF_MSG, object_meta},
    {2, "secrets", PF_RMSG, object_ref},
    {3, "imagePullSecrets", PF_RMSG, name_ref},
    {4, "automountServiceAccountToken", PF_BOOL, NULL},
    {0, NULL, PF_SKIP, NULL},
};

static const struct {
    const char *api_version, *kind;
    const pb_field *msg;
} kinds[] = {
    {"v1", "ConfigMap", configmap},
    {"v1", "Secret", secret},
    {"v1", "Namespace", namespace_},
    {"v1", "ServiceAccount", service_account},
};

/* ---- wire format ---------------------------------------------------------- */

typedef struct rd {
    const uint8_t *p, *end;
} rd;

static int varint(rd *r, uint64_t *out)
{
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (r->p >= r->end)
            return -1;
        uint8_t b = *r->p++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = v;
            return 0;
        }
    }
    return -1;
}

/* The next field: number, wire type and, for length-delimited ones, its bytes. */
static int next_field(rd *r, int *num, int *wt, uint64_t *val, rd *sub)
{
    uint64_t key;
    if (varint(r, &key) != 0 || key >> 3 == 0 || key >> 3 > 536870911)
        return -1;
    *num = (int)(key >> 3);
    *wt = (int)(key & 7);
    switch (*wt) {
    case 0:
        return varint(r, val);
    case 1:
        if (r->end - r->p < 8)
            return -1;
        r->p += 8;
        return 0;
    case 5:
        if (r->end - r->p < 4)
            return -1;
        r->p += 4;
        return 0;
    case 2: {
        uint64_t len;
        if (varint(r, &len) != 0 || len > (uint64_t)(r->end - r->p))
            return -1;
        sub->p = r->p;
        sub->end = r->p + len;
        r->p += len;
        return 0;
    }
    default:
        return -1;
    }
}

static char *dup_bytes(const rd *s)
{
    size_t n = (size_t)(s->end - s->p);
    char *out = xmalloc(n + 1);
    memcpy(out, s->p, n);
    out[n] = '\0';
    return out;
}

static int decode_msg(const pb_field *fields, rd r, cJSON *obj, int depth, char *err, size_t errlen);

/* A map entry {1: key, 2: value} into obj. */
static int map_entry(rd r, cJSON *obj, int bytes, char *err, size_t errlen)
{
    char *key = NULL, *val = NULL;
    size_t vlen = 0;
    while (r.p < r.end) {
        int num, wt;
        uint64_t v;
        rd s;
        if (next_field(&r, &num, &wt, &v, &s) != 0 || wt != 2 || (num != 1 && num != 2)) {
            snprintf(err, errlen, "malformed map entry");
            free(key);
            free(val);
            return -1;
        }
        char **dst = num == 1 ? &key : &val;
        free(*dst);
        *dst = dup_bytes(&s);
        if (num == 2)
            vlen = (size_t)(s.end - s.p);
    }
    if (bytes) {
        char *b64 = base64_encode(val ? val : "", vlen);
        json_set_str(obj, key ? key : "", b64);
        free(b64);
    } else {
        json_set_str(obj, key ? key : "", val ? val : "");
    }
    free(key);
    free(val);
    return 0;
}

static void time_str(rd r, cJSON *obj, const char *name)
{
    uint64_t secs = 0, v;
    int num, wt;
    rd s;
    while (r.p < r.end && next_field(&r, &num, &wt, &v, &s) == 0)
        if (num == 1 && wt == 0)
            secs = v;
    if (secs == 0)
        return;
    char ts[RFC3339_LEN];
    rfc3339_format((int64_t)secs, ts);
    json_set_str(obj, name, ts);
}

static int decode_msg(const pb_field *fields, rd r, cJSON *obj, int depth, char *err, size_t errlen)
{
    if (depth > 16) {
        snprintf(err, errlen, "nesting too deep");
        return -1;
    }
    while (r.p < r.end) {
        int num, wt;
        uint64_t v = 0;
        rd s = {NULL, NULL};
        if (next_field(&r, &num, &wt, &v, &s) != 0) {
            snprintf(err, errlen, "malformed protobuf");
            return -1;
        }
        const pb_field *f = fields;
        while (f->num && f->num != num)
            f++;
        if (f->num == 0) {
            snprintf(err, errlen, "field %d is not known to kubesim", num);
            return -1;
        }
        if (f->type == PF_SKIP)
            continue;
        int want_wt = (f->type == PF_BOOL || f->type == PF_INT) ? 0 : 2;
        if (wt != want_wt) {
            snprintf(err, errlen, "field %s: unexpected wire type %d", f->name, wt);
            return -1;
        }
        switch (f->type) {
        case PF_STR:
            if (s.end > s.p) {
                char *str = dup_bytes(&s);
                json_set_str(obj, f->name, str);
                free(str);
            }
            break;
        case PF_BYTES:
            if (s.end > s.p) {
                char *b64 = base64_encode(s.p, (size_t)(s.end - s.p));
                json_set_str(obj, f->name, b64);
                free(b64);
            }
            break;
        case PF_BOOL:
            if (v)
                json_set_bool(obj, f->name, 1);
            break;
        case PF_INT:
            if (v)
                json_set_int(obj, f->name, (long long)(int64_t)v);
            break;
        case PF_TIME:
            time_str(s, obj, f->name);
            break;
        case PF_MSG: {
            cJSON *sub = cJSON_CreateObject();
            if (decode_msg(f->msg, s, sub, depth + 1, err, errlen) != 0) {
                cJSON_Delete(sub);
                return -1;
            }
            if (sub->child)
                json_set(obj, f->name, sub);
            else
                cJSON_Delete(sub);
            break;
        }
        case PF_RSTR:
        case PF_RMSG: {
            cJSON *arr = (cJSON *)json_child(obj, f->name);
            if (arr == NULL) {
                arr = cJSON_CreateArray();
                json_set(obj, f->name, arr);
            }
            if (f->type == PF_RSTR) {
                char *str = dup_bytes(&s);
                cJSON_AddItemToArray(arr, cJSON_CreateString(str));
                free(str);
            } else {
                cJSON *sub = cJSON_CreateObject();
                cJSON_AddItemToArray(arr, sub);
                if (decode_msg(f->msg, s, sub, depth + 1, err, errlen) != 0)
                    return -1;
            }
            break;
        }
        case PF_MAP_SS:
        case PF_MAP_SB: {
            cJSON *m = (cJSON *)json_child(obj, f->name);
            if (m == NULL) {
                m = cJSON_CreateObject();
                json_set(obj, f->name, m);
            }
            if (map_entry(s, m, f->type == PF_MAP_SB, err, errlen) != 0)
                return -1;
            break;
        }
        case PF_SKIP:
            break;
        }
    }
    return 0;
}

cJSON *proto_decode(const void *body, size_t len, char *err, size_t errlen)
{
    const uint8_t *b = body;
    if (len < 4 || memcmp(b, "k8s\0", 4) != 0) {
        snprintf(err, errlen, "not a Kubernetes protobuf body (no \"k8s\\0\" prefix)");
        return NULL;
    }
    rd r = {b + 4, b + len};
    char *api_version = NULL, *kind = NULL;
    rd raw = {NULL, NULL};
    while (r.p < r.end) {
        int num, wt;
        uint64_t v;
        rd s = {NULL, NULL};
        if (next_field(&r, &num, &wt, &v, &s) != 0) {
            snprintf(err, errlen, "malformed protobuf envelope");
            goto fail;
        }
        if (num == 1 && wt == 2) {
            rd t = s;
            while (t.p < t.end) {
                int tn, tw;
                uint64_t tv;
                rd ts = {NULL, NULL};
                if (next_field(&t, &tn, &tw, &tv, &ts) != 0 || tw != 2) {
                    snprintf(err, errlen, "malformed protobuf typeMeta");
                    goto fail;
                }
                char **dst = tn == 1 ? &api_version : tn == 2 ? &kind : NULL;
                if (dst) {
                    free(*dst);
                    *dst = dup_bytes(&ts);
                }
            }
        } else if (num == 2 && wt == 2) {
            raw = s;
        }
    }
    const pb_field *msg = NULL;
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
        if (kind && api_version && strcmp(kinds[i].kind, kind) == 0 &&
            strcmp(kinds[i].api_version, api_version) == 0)
            msg = kinds[i].msg;
    if (msg == NULL) {
        snprintf(
            err, errlen,
            "kubesim decodes protobuf bodies of v1 ConfigMap, Secret, Namespace and ServiceAccount only, not "
            "%s %s; send application/json",
            api_version ? api_version : "?", kind ? kind : "?");
        goto fail;
    }
    cJSON *o = cJSON_CreateObject();
    json_set_str(o, "kind", kind);
    json_set_str(o, "apiVersion", api_version);
    char why[160];
    if (raw.p && decode_msg(msg, raw, o, 0, why, sizeof(why)) != 0) {
        snprintf(err, errlen, "cannot decode the protobuf %s: %s", kind, why);
        cJSON_Delete(o);
        goto fail;
    }
    free(api_version);
    free(kind);
    return o;
fail:
    free(api_version);
    free(kind);
    return NULL;
}
