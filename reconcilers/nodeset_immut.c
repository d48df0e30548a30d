#include "reconcilers/nodeset_immut.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"

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

size_t nsim_check(const nsim_mem *m, const char *uid, const cJSON *nodeset, nsb_msgs *out)
{
    if (m->old == NULL || strcmp(m->uid, uid ? uid : "") != 0)
        return 0;
    /* nodeset is valid on its own: whatever nsb_validate adds here comes
     * from the comparison with the remembered generation. */
    return nsb_validate(nodeset, m->old, out);
}

void nsim_remember(nsim_mem *m, const char *uid, const cJSON *nodeset)
{
    if (m->old && strcmp(m->uid, uid ? uid : "") == 0) {
        /* Same incarnation: its fields passed nsim_check, so they are the
         * remembered ones already. */
        return;
    }
    cJSON_Delete(m->old);
    snprintf(m->uid, sizeof(m->uid), "%s", uid ? uid : "");
    m->old = immutable_of(nodeset);
}

void nsim_forget(nsim_mem *m)
{
    cJSON_Delete(m->old);
    memset(m, 0, sizeof(*m));
}
