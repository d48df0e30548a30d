#include "slurmio/backend.h"

#include "core/err.h"

enum sb_path sb_choose(int v, int have_libslurm, enum sm_op op)
{
    if (!sm_version_supported(v))
        return SB_NONE;
    switch (op) {
    case SM_OP_GET_NODES:
    case SM_OP_GET_NODE:
    case SM_OP_GET_JOBS:
    case SM_OP_PING:
    case SM_OP_GET_RESERVATIONS:
    case SM_OP_GET_RESERVATION:
    case SM_OP_DIAG:
        return sm_version_has(v, op) ? SB_REST : SB_NONE;
    case SM_OP_UPDATE_NODE:
    case SM_OP_DELETE_NODE:
        if (sm_version_has(v, op))
            return SB_REST;
        return have_libslurm ? SB_LIBSLURM : SB_NONE;
    case SM_OP_UPDATE_NODES:
        /* One request for the whole batch is what keeps 8,192 drains under a
         * second: prefer any path that has one. */
        if (sm_version_has(v, op))
            return SB_REST;
        if (have_libslurm)
            return SB_LIBSLURM;
        return sm_version_has(v, SM_OP_UPDATE_NODE) ? SB_REST_EACH : SB_NONE;
    case SM_OP_UPDATE_TOPOLOGY:
        /* 22.05's update_node_msg_t has no topology field. */
        return sm_version_has(v, op) ? SB_REST : SB_NONE;
    case SM_OP_POST_RESERVATION:
    case SM_OP_DELETE_RESERVATION:
        if (sm_version_has(v, op))
            return SB_REST;
        return have_libslurm ? SB_LIBSLURM : SB_NONE;
    case SM_OP_CREATE_NODES:
        /* Only an optimisation (node records made before their slurmd
         * register): without the endpoint the nodes register as they do. */
        return sm_version_has(v, op) ? SB_REST : SB_NONE;
    }
    return SB_NONE;
}

const char *sb_path_name(enum sb_path p)
{
    switch (p) {
    case SB_REST:
        return "rest";
    case SB_REST_EACH:
        return "rest-per-node";
    case SB_LIBSLURM:
        return "libslurm";
    case SB_NONE:
        break;
    }
    return "none";
}

int sb_describe(int v, int have_libslurm, buf_t *out)
{
    static const enum sm_op ops[] = {SM_OP_GET_NODES,         SM_OP_UPDATE_NODE,     SM_OP_UPDATE_NODES,
                                     SM_OP_DELETE_NODE,       SM_OP_UPDATE_TOPOLOGY, SM_OP_POST_RESERVATION,
                                     SM_OP_DELETE_RESERVATION, SM_OP_CREATE_NODES};
    int rc = buf_printf(out, "rest=%s libslurm=%s", sm_version_str(v), have_libslurm ? "yes" : "no");
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
        rc |=
            buf_printf(out, " %s=%s", sm_op_name(ops[i]), sb_path_name(sb_choose(v, have_libslurm, ops[i])));
    return rc ? OP_ETOOBIG : 0;
}
