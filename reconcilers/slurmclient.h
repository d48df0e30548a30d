/* slurmclient: one Slurm client per Controller (docs/compat.md#slurm-client-per-controller).
 *
 * For every Controller that a RestApi references, this reconciler keeps a
 * slurmrestd client (slurmio/rest.h) and the node cache built on it
 * (slurmio/nodecache.h), shared by the NodeSet and Controller reconcilers:
 *  - the RestApi is the one whose spec.controllerRef names the Controller
 *    (the oldest by creationTimestamp, then name, when several do);
 *  - its URL is the one given with --slurmrestd <ns>/<restapi>=<url>, else
 *    http://<restapi>-restapi.<ns>:6820 (the RestApi's Service);
 *  - the JWT key is the Controller's jwtKeyRef (else jwtHs256KeyRef) Secret
 *    key, read from the cache; tokens are minted for user "slurm"; a token
 *    Slurm refuses (sr_opts.on_unauthorized) reads a user's key Secret again
 *    at once (op_ref_refresh) instead of at its next poll, so a rotated key
 *    is taken within seconds;
 *  - node and reservation writes that the server's REST version cannot do
 *    go through the operator's libslurm backend, created at start when
 *    --slurm-conf (or $SLURM_CONF) is given and libslurm is built in.
 * A change of the URL replaces the client; a new key is used at once by
 * the existing one; the client is removed when the Controller, its RestApi
 * or its key goes. Replacing or removing a client queues the Controller's
 * NodeSets, which then see the new state.
 *
 * Availability is answered from the caches at the time of the call, so a
 * NodeSet pass never mistakes "no client yet" for "no RestApi at all": the
 * latter (and only the latter) lets a NodeSet delete pods without draining,
 * as Slinky does; the former means wait. Until every cache has synced the
 * answer is never SC_NO_RESTAPI.
 */
#ifndef OP_SLURMCLIENT_H
#define OP_SLURMCLIENT_H

#include "reconcilers/operator.h"
#include "slurmio/nodecache.h"

#define SLURMCLIENT_CONTROLLER "slurmclient-controller"

extern const op_reconciler RC_SLURMCLIENT;

/** The reconciler's state (its queue, the clusters by Controller key, the
 *  libslurm backend, the --slurmrestd-ca bundle, the three hooks below),
 *  made before setup and freed once the operator's client has closed,
 *  through the registry (RC_SLURMCLIENT). A cluster's cache and client call
 *  back into it through the cluster, and their closes complete after stop,
 *  so it is freed late (free_late): freed while some are still closing, it
 *  is left to the last of them. */
typedef struct slurmclient_state slurmclient_state;
/** op's (never NULL from op_start on). */
slurmclient_state *slurmclient_of(const operator *op);

enum sc_avail {
    SC_NO_RESTAPI = 0, /* no RestApi references the Controller: Slurm cannot be asked at all */
    SC_NOT_READY,      /* a RestApi exists, but no client (yet): its key is missing, or it is being built */
    SC_READY,          /* a client and its node cache exist (the cache may still say "unknown") */
};

/**
 * The Slurm node cache of Controller ctl_key ("ns/name").
 * @param out  receives the cache when SC_READY, else NULL; valid until the
 *             loop runs again (look it up at every pass, never keep it).
 * @return enum sc_avail.
 */
int slurmclient_get(operator *op, const char *ctl_key, nc_cache **out);

/** Why Slurm of Controller ctl_key cannot be read now, as one clause
 *  naming the cause that applies (no client and why, the node cache's
 *  nc_unready_why), written to out (n bytes, always terminated). Returns
 *  the next step for that cause (a static sentence). */
const char *slurmclient_why(operator *op, const char *ctl_key, char *out, size_t n);

/**
 * Controller HA (docs/compat.md#active-slurmctld-ha): which slurmctld is active.
 * The first call for a Controller starts pinging it (every 5 s); later calls
 * answer from the last ping, never waiting.
 * @return the index (0-based, the order of SlurmctldHost in slurm.conf,
 *         i.e. the slurmctld pod ordinal) of the first controller that
 *         responds; OP_ENOTFOUND when the Controller has no RestApi (Slinky
 *         then takes pod 0 as active); OP_EUNKNOWN while no ping result is
 *         known (no client yet, Slurm unreachable: leave the labels alone);
 *         OP_EUNAVAILABLE when no controller responds.
 */
int slurmclient_active_controller(operator *op, const char *ctl_key);

/** Called with the Controller key whenever the answer of
 *  slurmclient_active_controller changes (one optional hook per operator,
 *  kept in op's state; so are the two below). The Controller
 *  reconciler needs none: slurmclient registers itself with
 *  controller_set_ping_hook() at setup and calls controller_enqueue() on
 *  every change of the answer. */
void slurmclient_on_ping(operator *op, void (*fn)(const char *ctl_key, void *data), void *data);

/** Called for every node event of a Controller's cache (node NULL: look at
 *  everything of that Controller), and when a client is created, replaced
 *  or removed (node NULL). One hook; nodeset_slurm registers it. */
void slurmclient_on_node(operator *op, void (*fn)(const char *ctl_key, const char *node, void *data),
                         void *data);

/** Called when a reservation of a Controller's cluster appears, changes or
 *  vanishes. One hook; nodeset_slurm registers it. */
void slurmclient_on_resv(operator *op, void (*fn)(const char *ctl_key, const char *resv, void *data),
                         void *data);

#endif
