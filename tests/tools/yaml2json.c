/* yaml2json: print YAML files as JSON, through the project's own loader.
 *
 *   yaml2json FILE...     prints {"FILE": [doc, doc, ...], ...} on one line
 *   yaml2json -           reads standard input, prints [doc, ...]
 *
 * Python's standard library has no YAML parser, so the deploy manifest test
 * (and anyone checking a chart by hand) reads YAML through core/yaml, which
 * is also what the operator uses for kubeconfigs and CRD loading: a file
 * this tool accepts is one the operator's own loader accepts. The loader
 * refuses anchors and aliases, so manifests must not use them either.
 *
 * Exit status: 0 when every file parsed, 1 when one did not (the message,
 * "FILE: line L column C: problem", goes to stderr), 2 on bad usage.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/file.h"
#include "core/json.h"
#include "core/mem.h"
#include "core/yaml.h"

#define MAX_FILE (16u << 20)

/* Parse one file (or "-") into an array of documents; NULL after printing
 * why to stderr. */
static cJSON *load(const char *path)
{
    char err[512], *text;
    size_t len;
    int rc = strcmp(path, "-") == 0 ? file_read_stream(stdin, MAX_FILE, &text, &len)
                                    : file_read_all(path, MAX_FILE, &text, &len);
    if (rc) {
        fprintf(stderr, "%s: %s\n", path, err_str(rc));
        return NULL;
    }
    cJSON *docs = yaml_parse_all(text, len, err, sizeof(err));
    free(text);
    if (docs == NULL)
        fprintf(stderr, "%s: %s\n", path, err);
    return docs;
}

static int emit(const cJSON *j)
{
    char *s = json_dump(j);
    int ok = s != NULL && puts(s) >= 0 && fflush(stdout) == 0;
    free(s);
    return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        fprintf(stderr, "usage: yaml2json FILE... | yaml2json -\n");
        return 2;
    }
    mem_init();
    if (argc == 2 && strcmp(argv[1], "-") == 0) {
        cJSON *docs = load("-");
        if (docs == NULL)
            return 1;
        int rc = emit(docs);
        cJSON_Delete(docs);
        return rc;
    }
    cJSON *all = cJSON_CreateObject();
    int failed = 0;
    for (int i = 1; i < argc; i++) {
        cJSON *docs = load(argv[i]);
        if (docs == NULL) {
            failed = 1;
            continue;
        }
        cJSON_DeleteItemFromObjectCaseSensitive(all, argv[i]);
        cJSON_AddItemToObject(all, argv[i], docs);
    }
    int rc = failed ? 1 : emit(all);
    cJSON_Delete(all);
    return rc;
}
