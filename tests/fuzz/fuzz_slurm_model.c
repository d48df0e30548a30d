/* slurmrestd answers of every version and kind: the first byte picks the
 * version and kind, the second the HTTP status; the rest is the body. An
 * error is never read as success: a failed parse reports a negative code
 * and a successful one holds no error message. */
#include <string.h>

#include "fuzz.h"
#include "slurmio/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const int versions[] = {SM_V36, SM_V37, SM_V38, SM_V40, SM_V41, SM_V42, SM_V43, SM_V44};
    static const int statuses[] = {200, 304, 400, 401, 404, 405, 415, 500};
    if (size < 2 || size > (1u << 20))
        return 0;
    int version = versions[data[0] % 8];
    enum sm_kind kind = (enum sm_kind)((data[0] >> 3) % (SM_KIND_STATUS + 1));
    int status = statuses[data[1] % 8];
    sm_response r;
    int rc = sm_parse(version, kind, status, (const char *)data + 2, size - 2, &r);
    if (rc == 0)
        FUZZ_ASSERT(status == 200 || status == 304);
    else
        FUZZ_ASSERT(rc < 0);
    sm_response_free(&r);
    return 0;
}
