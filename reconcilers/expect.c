#include "reconcilers/expect.h"

#include <stdlib.h>
#include <string.h>

#include "core/mem.h"

void exp_drop(exp_owner *e)
{
    if (e->uid)
        map_free(&e->dels);
    free(e->uid);
    memset(e, 0, sizeof(*e));
}

/* e made for uid (an older incarnation's expectations dropped first), and
 * its clock restarted. */
static exp_owner *get(exp_owner *e, const char *uid, uint64_t now_ms)
{
    if (e->uid && strcmp(e->uid, uid) != 0)
        exp_drop(e);
    if (e->uid == NULL) {
        e->uid = xstrdup(uid);
        map_init_type(&e->dels, &map_type_free_val);
    }
    e->set_at = now_ms;
    return e;
}

void exp_expect_creations(exp_owner *e, const char *uid, int adds, uint64_t now_ms)
{
    get(e, uid, now_ms)->adds += adds;
}

void exp_expect_deletion(exp_owner *e, const char *uid, const char *dep_key, uint64_t now_ms)
{
    get(e, uid, now_ms);
    if (map_get(&e->dels, dep_key) == NULL) {
        char *k = xstrdup(dep_key);
        map_put(&e->dels, k, k);
    }
}

void exp_creation_observed(exp_owner *e)
{
    if (e->uid && e->adds > 0)
        e->adds--;
}

void exp_deletion_observed(exp_owner *e, const char *dep_key)
{
    if (e->uid)
        map_drop(&e->dels, dep_key);
}

int exp_deletion_pending(const exp_owner *e, const char *dep_key)
{
    return e->uid && map_get(&e->dels, dep_key) != NULL;
}

int exp_satisfied(exp_owner *e, const char *uid, uint64_t now_ms)
{
    if (e->uid == NULL)
        return 1;
    if (strcmp(e->uid, uid) != 0 || now_ms - e->set_at > EXPECT_TTL_MS ||
        (e->adds <= 0 && e->dels.count == 0)) {
        exp_drop(e);
        return 1;
    }
    return 0;
}

void exp_pending(const exp_owner *e, int *adds, int *dels)
{
    *adds = e->uid ? e->adds : 0;
    *dels = e->uid ? (int)e->dels.count : 0;
}
