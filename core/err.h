/* err: the one error convention of the project.
 *
 * Functions return 0 on success or a negative code. Codes from libuv
 * (UV_E*, i.e. negated errno) pass through unchanged; the project's own codes
 * live below OP_ERR_BASE so the two ranges never overlap. err_str() and
 * err_name() accept both. Convert errno with OP_ERRNO() and nothing else.
 */
#ifndef OP_ERR_H
#define OP_ERR_H

#include <errno.h>

#define OP_ERR_BASE (-10000)

/* X(name, message) */
#define OP_ERR_MAP(X)                                                                                        \
    X(NOMEM, "out of memory")                                                                                \
    X(INVAL, "invalid argument")                                                                             \
    X(TOOBIG, "size limit exceeded")                                                                         \
    X(PARSE, "malformed input")                                                                              \
    X(PROTO, "protocol error")                                                                               \
    X(TIMEOUT, "timed out")                                                                                  \
    X(CLOSED, "connection closed by peer")                                                                   \
    X(CANCELED, "operation canceled")                                                                        \
    X(TLS, "TLS error")                                                                                      \
    X(CERT, "certificate verification failed")                                                               \
    X(HTTP, "unexpected HTTP status")                                                                        \
    X(NOTFOUND, "not found")                                                                                 \
    X(EXISTS, "already exists")                                                                              \
    X(CONFLICT, "conflict")                                                                                  \
    X(GONE, "resource version expired")                                                                      \
    X(UNAUTHORIZED, "unauthorized")                                                                          \
    X(FORBIDDEN, "forbidden")                                                                                \
    X(INVALID, "rejected as invalid")                                                                        \
    X(RATELIMIT, "rate limited")                                                                             \
    X(UNAVAILABLE, "service unavailable")                                                                    \
    X(SERVER, "server error")                                                                                \
    X(NOTSUP, "not supported")                                                                               \
    X(CONFIG, "bad configuration")                                                                           \
    X(BUSY, "busy")                                                                                          \
    X(SLURM, "Slurm reported an error")                                                                      \
    X(IO, "I/O error")                                                                                       \
    X(UNKNOWN, "state unknown")

enum err_code {
    OP_OK = 0,
    OP__ERR_FIRST = OP_ERR_BASE,
#define OP_ERR_ENUM(name, msg) OP_E##name,
    OP_ERR_MAP(OP_ERR_ENUM)
#undef OP_ERR_ENUM
        OP__ERR_LAST
};

/** Negate errno into the project's convention (same as libuv's UV__ERR). */
#define OP_ERRNO(e) (-(e))

/** Human-readable message for any code (project, libuv or negated errno). */
const char *err_str(int code);
/** Short symbolic name: "ETIMEOUT", "ECONNREFUSED", ... */
const char *err_name(int code);

#endif
