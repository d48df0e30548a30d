/* Label selectors: a string that parses prints back to a form that parses
 * to the same selector (same canonical text). */
#include <string.h>

#include "core/labels.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char in[4096], err[256];
    if (size >= sizeof(in))
        return 0;
    memcpy(in, data, size);
    in[size] = '\0';
    lsel *s = NULL;
    if (lsel_parse(in, &s, err, sizeof(err)) != 0)
        return 0;
    buf_t b1, b2;
    buf_init(&b1, 1u << 16);
    buf_init(&b2, 1u << 16);
    FUZZ_ASSERT(lsel_to_buf(s, &b1) == 0);
    lsel *s2 = NULL;
    FUZZ_ASSERT(lsel_parse(buf_cstr(&b1), &s2, err, sizeof(err)) == 0);
    FUZZ_ASSERT(lsel_to_buf(s2, &b2) == 0);
    FUZZ_ASSERT(strcmp(buf_cstr(&b1), buf_cstr(&b2)) == 0);
    buf_free(&b1);
    buf_free(&b2);
    lsel_free(s);
    lsel_free(s2);
    return 0;
}
