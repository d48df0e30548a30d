#include "reconcilers/nodeset_immut.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "core/map.h"
#include "core/mem.h"

/* One remembered NodeSet: a minimal NodeSet object holding only the
 * immutable fields, so that nsb_validate compares it as an old object. */
struct immut {
    char *key;
    char uid[64];
    cJSON *old;
};

static void immut_free(void *v)
{
    struct immut *m = v;
    cJSON_Delete(m->old);
    free(m->key);
    free(m);
}

static const map_type immut_type = {.val_free = immut_free};

struct nsim_table {
    map_t remembered; /* key -> struct immut */
};

nsim_table *nsim_new(void)
{
    nsim_table *t = xcalloc(1, sizeof(*t));
    map_init_type(&t->remembered, &immut_type);
    return t;
}

void nsim_free(nsim_table *t)
{
    if (t == NULL)
        return;
    map_free(&t->remembered);
    free(t);
}

static const char *const fields[] = {"controllerRef", "volumeClaimTemplates"};

static cJSON *immutable_of(const cJSON *nodeset)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *spec = json_obj_ensure(o, "spec");
    const cJSON *s = json_child(nodeset, "spec");
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        const cJSON *v = json_child(s, fields[i]);
        if (v)
            json_set(spec, fields[i], cJSON_Duplicate(v, 1));
    }
    return o;
}

size_t nsim_check(const nsim_table *t, const char *key, const char *uid, const cJSON *nodeset, nsb_msgs *out)
{
    struct immut *m = map_get(&t->remembered, key);
    if (m == NULL || strcmp(m->uid, uid ? uid : "") != 0)
        return 0;
    /* nodeset is valid on its own: whatever nsb_validate adds here comes
     * from the comparison with the remembered generation. */
    return nsb_validate(nodeset, m->old, out);
}

void nsim_remember(nsim_table *t, const char *key, const char *uid, const cJSON *nodeset)
{
    struct immut *m = map_get(&t->remembered, key);
    if (m && strcmp(m->uid, uid ? uid : "") == 0) {
        /* Same incarnation: its fields passed nsim_check, so they are the
         * remembered ones already. */
        return;
    }
    if (m == NULL) {
        m = xcalloc(1, sizeof(*m));
        m->key = xstrdup(key);
        map_put(&t->remembered, m->key, m);
    }
    cJSON_Delete(m->old);
    snprintf(m->uid, sizeof(m->uid), "%s", uid ? uid : "");
    m->old = immutable_of(nodeset);
}

void nsim_forget(nsim_table *t, const char *key)
{
    map_drop(&t->remembered, key);
}

void nsim_clear(nsim_table *t)
{
    map_free(&t->remembered);
}
