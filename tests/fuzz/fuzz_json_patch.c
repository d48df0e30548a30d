/* JSON merge patches and strategic merge patches: the input is two JSON
 * documents separated by a NUL byte. Properties: applying the merge diff of
 * (a, b) to a gives b; strategic merge never crashes on any pair. */
#include <string.h>

#include "core/json.h"
#include "core/smp.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *sep = memchr(data, 0, size);
    if (sep == NULL || size > (1u << 18))
        return 0;
    size_t na = (size_t)(sep - data);
    cJSON *a = json_parse_untrusted((const char *)data, na, NULL);
    cJSON *b = json_parse_untrusted((const char *)sep + 1, size - na - 1, NULL);
    if (a && b && cJSON_IsObject(a) && cJSON_IsObject(b)) {
        cJSON *diff = json_merge_diff(a, b);
        cJSON *t = cJSON_Duplicate(a, 1);
        if (diff)
            t = json_merge_patch(t, diff);
        /* Merge patches cannot express a null value inside b: skip those. */
        char *bs = json_dump(b);
        if (strstr(bs, "null") == NULL)
            FUZZ_ASSERT(json_equal(t, b));
        free(bs);
        cJSON_Delete(t);
        cJSON_Delete(diff);
    }
    if (a && b) {
        int err = 0;
        cJSON *t = smp_apply(cJSON_Duplicate(a, 1), b, 0, &err);
        cJSON_Delete(t);
        t = smp_apply(cJSON_Duplicate(a, 1), b, SMP_CONCAT_CONTAINERS, &err);
        cJSON_Delete(t);
    }
    cJSON_Delete(a);
    cJSON_Delete(b);
    return 0;
}
