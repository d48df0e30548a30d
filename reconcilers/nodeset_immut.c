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
static map_t remembered = MAP_TYPED(&immut_type); /* key -> struct immut */

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

size_t nsim_check(const char *key, const char *uid, const cJSON *nodeset, nsb_msgs *out)
{
    struct immut *m = map_get(&remembered, key);
    if (m == NULL || strcmp(m->uid, uid ? uid : "") != 0)
        return 0;
    /* nodeset is valid on its own: whatever nsb_validate adds here comes
     * from the comparison with the remembered generation. */
    return nsb_validate(nodeset, m->old, out);
}

void nsim_remember(const char *key, const char *uid, const cJSON *nodeset)
{
    struct immut *m = map_get(&remembered, key);
    if (m && strcmp(m->uid, uid ? uid : "") == 0) {
        /* Same incarnation: its fields passed nsim_check, so they are the
         * remembered ones already. */
        return;
    }
    if (m == NULL) {
        m = xcalloc(1, sizeof(*m));
        m->key = xstrdup(key);
        map_put(&remembered, m->key, m);
    }
    cJSON_Delete(m->old);
    snprintf(m->uid, sizeof(m->uid), "%s", uid ? uid : "");
    m->old = immutable_of(nodeset);
}

void nsim_forget(const char *key)
{
    map_drop(&remembered, key);
}

void nsim_free_all(void)
{
    map_free(&remembered);
}
