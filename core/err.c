#include "core/err.h"

#include <uv.h>

static const char *const messages[] = {
#define OP_ERR_MSG(name, msg) msg,
    OP_ERR_MAP(OP_ERR_MSG)
#undef OP_ERR_MSG
};

static const char *const names[] = {
#define OP_ERR_NAME(name, msg) "E" #name,
    OP_ERR_MAP(OP_ERR_NAME)
#undef OP_ERR_NAME
};

static int is_ours(int code)
{
    return code > OP__ERR_FIRST && code < OP__ERR_LAST;
}

const char *err_str(int code)
{
    if (code == 0)
        return "success";
    if (is_ours(code))
        return messages[code - OP__ERR_FIRST - 1];
    return uv_strerror(code);
}

const char *err_name(int code)
{
    if (code == 0)
        return "OK";
    if (is_ours(code))
        return names[code - OP__ERR_FIRST - 1];
    return uv_err_name(code);
}
