/* backend: which way each Slurm operation goes, for the REST version in use.
 *
 * Reads always go over REST (slurmrestd, nonblocking on the loop); writes go
 * over REST when the negotiated data_parser version has them, and otherwise
 * through the libslurm backend (slurmlib.h) when the build has it:
 *
 *   operation                 v0.0.38 (Slurm 22.05)   v0.0.40/41            v0.0.42            v0.0.43-45
 *   GET nodes/node/jobs/ping  REST                    REST                  REST               REST
 *   GET reservation(s)        REST                    REST                  REST               REST
 *   update one node           libslurm                REST node/{name}      REST               REST
 *   update many (hostlist)    libslurm (one RPC)      libslurm, else REST   REST nodes/ with   REST nodes/
 *                                                     node/{name} per node  "name" hostlist
 *   delete node               libslurm                REST                  REST               REST
 *   set topology              -                       -                     -                  REST
 *   create nodes              -                       -                     -                  v0.0.44+: REST
 *   create/update/delete      libslurm                libslurm              libslurm           REST
 *     reservation
 *
 * ("-": nobody can; the reconciler skips that write and says so.) The
 * libslurm backend is built against Slurm 22.05's headers and speaks its RPC
 * protocol; Slurm talks only to clients up to two major releases older, so
 * it is meant for 22.05 clusters and does not reach Slurm 24.05+ (whose REST
 * API has every write anyway). The plan is logged once at start, so an
 * operator can see which path drains will take.
 */
#ifndef OP_SLURM_BACKEND_H
#define OP_SLURM_BACKEND_H

#include "core/buf.h"
#include "slurmio/model.h"

enum sb_path {
    SB_NONE = 0,  /* nobody can do it with this version and build */
    SB_REST,      /* slurmrestd, the endpoint of sm_op */
    SB_REST_EACH, /* slurmrestd, one request per node (no batch endpoint) */
    SB_LIBSLURM,  /* slurmlib.h */
};

/**
 * The way op goes for rest_version (a negotiated SM_V*) when the libslurm
 * backend is (have_libslurm) or is not available. For SM_OP_UPDATE_NODES it
 * answers how a batch of nodes goes.
 */
enum sb_path sb_choose(int rest_version, int have_libslurm, enum sm_op op);

/** "rest", "rest-per-node", "libslurm", "none". */
const char *sb_path_name(enum sb_path p);

/** Append a one-line summary of the plan ("update-node=libslurm
 *  update-nodes=libslurm ...") for the start log. */
int sb_describe(int rest_version, int have_libslurm, buf_t *out);

#endif
