/* nodeset_spec: the fields of a NodeSet's spec that the reconcile acts on,
 * read once per reconcile into a struct (nsp_read), so that the pass and the
 * Slurm rules test fields instead of looking up dotted paths, and each
 * field's default is written in one place.
 *
 * Read from the NodeSet *with defaults applied* (nsb_with_defaults), so the
 * defaults here only matter for a field that defaulting leaves absent.
 * Strings and cJSON members are borrowed from that object: a spec lives no
 * longer than the cJSON it was read from, which is why it is read per
 * reconcile and not kept in the NodeSet's record across updates. Reading it
 * is a few dozen lookups, nothing beside a pass.
 *
 * The pod template itself stays JSON: nodeset_build turns it into pods and
 * reads it whole. */
#ifndef OP_NODESET_SPEC_H
#define OP_NODESET_SPEC_H

#include <stdint.h>

#include <cjson/cJSON.h>

#include "reconcilers/nodeset_build.h"

typedef enum nsp_strategy {
    NSP_ROLLING_UPDATE,   /* "RollingUpdate", the default */
    NSP_SCHEDULED_UPDATE, /* "ScheduledUpdate": a rolling update inside a Slurm maintenance reservation */
    NSP_ON_DELETE,        /* "OnDelete", and any other word: pods take the new revision when recreated */
} nsp_strategy;

typedef struct nsp_spec {
    enum nsb_mode mode;           /* spec.scalingMode */
    int replicas;                 /* spec.replicas, as nsb_replicas bounds it */
    int ordinal_pad;              /* spec.ordinalPadding, 0..64 */
    nsp_strategy strategy;        /* spec.updateStrategy.type */
    const cJSON *max_unavailable; /* spec.updateStrategy.rollingUpdate.maxUnavailable, NULL when absent */
    struct {
        const char *start;    /* startTime as written, "" when absent */
        int64_t start_secs;   /* ... in seconds since the epoch, <= 0 when absent or not RFC 3339 */
        const char *duration; /* "30m" when absent */
        const cJSON *flags;   /* an array of reservation flag words, NULL when absent */
    } sched;                  /* spec.updateStrategy.scheduledUpdate */
    int32_t min_ready_secs;   /* spec.minReadySeconds, 0 */
    int32_t history_limit;    /* spec.revisionHistoryLimit, 0 */
    int pin_to_node;          /* spec.pinToNode, 0 */
    int host_network;         /* spec.template.spec.hostNetwork, 0 */
    const char *hostname;     /* spec.template.spec.hostname, NULL when absent or "" */
    const cJSON *claims;      /* spec.volumeClaimTemplates, NULL when absent or empty */
    int wdp;                  /* spec.workloadDisruptionProtection, 1 */
    int partition;            /* spec.partition.enabled, 0 */
    int prune_not_found;      /* spec.pruneSlurmNodeRecords is "NodeNotFound" (default "Never") */
    const char *ctl_name;     /* spec.controllerRef.name, "" when absent */
    const char *ctl_ns;       /* its namespace, else the NodeSet's own; NULL when neither is set */
} nsp_spec;

/** Read the spec of ns (a NodeSet with defaults) into out; every field is
 *  set, to its default when ns lacks it (ns may be NULL: all defaults). */
void nsp_read(const cJSON *ns, nsp_spec *out);

/** The strategy a spec.updateStrategy.type word names (NULL: the default). */
nsp_strategy nsp_strategy_of(const char *type);

#endif
