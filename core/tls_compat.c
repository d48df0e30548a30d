/* tls_compat: see tls_compat.h. */
#include "core/tls_compat.h"

#include "core/crypto.h"

int tlsc_rng(void *ctx, unsigned char *out, size_t len)
{
    (void)ctx;
    random_bytes(out, len);
    return 0;
}
