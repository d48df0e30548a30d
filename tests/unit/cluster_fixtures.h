/* Test fixtures shared by the cluster builder tests (not a test program
 * itself): an in-memory clc_env, JSON literals written with single quotes,
 * and golden files under tests/data/golden/.
 *
 * Golden files: compare against $OP_SOURCE_DIR/tests/data/golden/<name>.
 * With OP_UPDATE_GOLDEN=1 in the environment the file is (re)written
 * instead; review every rewritten file against docs/compat.md before
 * committing it.
 */
#ifndef TEST_CLUSTER_FIXTURES_H
#define TEST_CLUSTER_FIXTURES_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "reconcilers/cluster_common.h"

/* Parse JSON written with ' instead of " (no apostrophes inside values). */
OP_UNUSED static cJSON *JQ(const char *text)
{
    char *s = strdup(text);
    for (char *p = s; *p; p++)
        if (*p == '\'')
            *p = '"';
    const char *errpos = NULL;
    cJSON *o = json_parse(s, strlen(s), &errpos);
    if (o == NULL)
        fprintf(stderr, "bad JSON near: %.40s\n", errpos ? errpos : "?");
    assert_non_null(o);
    free(s);
    return o;
}

typedef struct tenv {
    cJSON *objs; /* {"Kind/name": object} */
    clc_env env;
} tenv;

OP_UNUSED static const cJSON *tenv_get(void *ud, const char *kind, const char *name)
{
    tenv *t = ud;
    char key[512];
    snprintf(key, sizeof(key), "%s/%s", kind, name);
    return json_child(t->objs, key);
}

OP_UNUSED static void tenv_init(tenv *t)
{
    t->objs = cJSON_CreateObject();
    t->env.get = tenv_get;
    t->env.ud = t;
    t->env.cluster_domain = NULL;
}

/* Add an object (JQ syntax); replaces an existing one. */
OP_UNUSED static void tenv_add(tenv *t, const char *kind, const char *name, const char *jq)
{
    char key[512];
    snprintf(key, sizeof(key), "%s/%s", kind, name);
    json_set(t->objs, key, JQ(jq));
}

OP_UNUSED static void tenv_del(tenv *t, const char *kind, const char *name)
{
    char key[512];
    snprintf(key, sizeof(key), "%s/%s", kind, name);
    json_del(t->objs, key);
}

OP_UNUSED static void tenv_free(tenv *t)
{
    cJSON_Delete(t->objs);
    t->objs = NULL;
}

OP_UNUSED static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    size_t got = fread(s, 1, (size_t)n, f);
    s[got] = '\0';
    fclose(f);
    return s;
}

OP_UNUSED static void golden(const char *name, const char *got)
{
    const char *src = getenv("OP_SOURCE_DIR");
    char path[1024];
    snprintf(path, sizeof(path), "%s/tests/data/golden/%s", src ? src : ".", name);
    const char *upd = getenv("OP_UPDATE_GOLDEN");
    if (upd && strcmp(upd, "1") == 0) {
        FILE *f = fopen(path, "wb");
        assert_non_null(f);
        fputs(got, f);
        fclose(f);
        return;
    }
    char *want = read_file(path);
    if (want == NULL)
        fail_msg("golden file %s missing (run with OP_UPDATE_GOLDEN=1 and review it)", path);
    if (strcmp(want, got) != 0)
        fprintf(stderr, "golden %s differs; got:\n%s\n", name, got);
    assert_string_equal(got, want);
    free(want);
}

/* Golden JSON: pretty-printed with cJSON's formatter plus a final newline. */
OP_UNUSED static void golden_json(const char *name, const cJSON *o)
{
    char *s = cJSON_Print(o);
    size_t n = strlen(s);
    char *t = malloc(n + 2);
    memcpy(t, s, n);
    t[n] = '\n';
    t[n + 1] = '\0';
    golden(name, t);
    free(t);
    free(s);
}

#endif
