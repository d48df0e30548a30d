#include "reconcilers/nodeset_precreate.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/buf.h"
#include "core/json.h"
#include "core/mem.h"
#include "reconcilers/nodeset_build.h"
#include "slurmio/hostlist.h"

/* The item of conf whose key is key (any case), its value's length in *len; NULL when none. */
static const char *conf_item(const char *conf, const char *key, size_t *len)
{
    size_t kl = strlen(key);
    for (const char *item = conf; item && *item;) {
        const char *end = strchr(item, NSB_CONF_SEP);
        size_t n = end ? (size_t)(end - item) : strlen(item);
        if (n > kl && item[kl] == '=' && strncasecmp(item, key, kl) == 0) {
            *len = n - kl - 1;
            return item + kl + 1;
        }
        item = end ? end + 1 : item + n;
    }
    return NULL;
}

static int declares(const char *conf, const char *key)
{
    size_t len = 0;
    return conf_item(conf, key, &len) != NULL && len > 0;
}

enum nspr_why nspr_check(const char *conf, int gpus, int opted_out)
{
    if (opted_out)
        return NSPR_OPTED_OUT;
    if (!declares(conf, "CPUs"))
        return NSPR_NO_CPUS;
    if (!declares(conf, "RealMemory"))
        return NSPR_NO_MEMORY;
    if (gpus && !declares(conf, "Gres"))
        return NSPR_NO_GRES;
    return NSPR_OK;
}

const char *nspr_why_str(enum nspr_why why)
{
    switch (why) {
    case NSPR_OK:
        return "the pods' --conf declares their hardware";
    case NSPR_NO_CPUS:
        return "the pods' --conf declares no CPUs=";
    case NSPR_NO_MEMORY:
        return "the pods' --conf declares no RealMemory=";
    case NSPR_NO_GRES:
        return "the pods ask for a GPU and their --conf declares no Gres=";
    case NSPR_OPTED_OUT:
        return "the NodeSet's " NSPR_ANNOTATION " annotation is \"false\"";
    }
    return "?";
}

static int wants_gpu(const cJSON *resources)
{
    static const char *const kinds[] = {"requests", "limits"};
    for (size_t k = 0; k < 2; k++) {
        const cJSON *r;
        cJSON_ArrayForEach(r, json_child(resources, kinds[k]))
        {
            const char *slash = r->string ? strchr(r->string, '/') : NULL;
            if (slash && strcmp(slash, "/gpu") == 0)
                return 1;
        }
    }
    return 0;
}

int nspr_template_gpus(const cJSON *pod_spec)
{
    static const char *const lists[] = {"containers", "initContainers"};
    for (size_t l = 0; l < 2; l++) {
        const cJSON *c;
        cJSON_ArrayForEach(c, json_child(pod_spec, lists[l]))
        {
            if (wants_gpu(json_child(c, "resources")))
                return 1;
        }
    }
    return 0;
}

char *nspr_line(const char *conf, const char *const *names, size_t n)
{
    if (n == 0)
        return NULL;
    char *hl = hostlist_compress(names, n);
    if (hl == NULL)
        return NULL;
    buf_t b;
    buf_init(&b, BUF_UNLIMITED);
    int bad = buf_printf(&b, "NodeName=%s State=FUTURE", hl) < 0;
    free(hl);
    for (const char *item = conf; item && *item && !bad;) {
        const char *end = strchr(item, NSB_CONF_SEP);
        size_t len = end ? (size_t)(end - item) : strlen(item);
        /* The line is split at spaces: an item holding one would be read as two. */
        bad = memchr(item, ' ', len) != NULL;
        if (len && !bad)
            bad = buf_printf(&b, " %.*s", (int)len, item) < 0;
        item = end ? end + 1 : item + len;
    }
    if (bad) {
        buf_free(&b);
        return NULL;
    }
    return buf_detach(&b, NULL);
}
