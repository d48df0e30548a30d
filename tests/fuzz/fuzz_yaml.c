/* YAML documents (kubeconfigs, CRDs, apply bodies): any input either parses
 * into JSON documents that serialise and re-parse, or fails with a message. */
#include <string.h>

#include "core/json.h"
#include "core/yaml.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[256];
    if (size > (1u << 20))
        return 0;
    cJSON *docs = yaml_parse_all((const char *)data, size, err, sizeof(err));
    if (docs == NULL) {
        FUZZ_ASSERT(err[0] != '\0');
        return 0;
    }
    char *s = json_dump(docs);
    cJSON *again = json_parse(s, strlen(s), NULL);
    FUZZ_ASSERT(again != NULL);
    FUZZ_ASSERT(json_equal(docs, again));
    cJSON_Delete(again);
    free(s);
    cJSON_Delete(docs);
    return 0;
}
