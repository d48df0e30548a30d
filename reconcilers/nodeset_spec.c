#include "reconcilers/nodeset_spec.h"

#include <string.h>

#include "core/json.h"
#include "core/rfc3339.h"
#include "reconcilers/cluster_watch.h"

nsp_strategy nsp_strategy_of(const char *type)
{
    if (type == NULL || strcmp(type, "RollingUpdate") == 0)
        return NSP_ROLLING_UPDATE;
    if (strcmp(type, "ScheduledUpdate") == 0)
        return NSP_SCHEDULED_UPDATE;
    return NSP_ON_DELETE;
}

static int32_t int32_field(const cJSON *o, const char *path)
{
    long long v = json_get_int(o, path, 0);
    return v < 0 ? 0 : v > INT32_MAX ? INT32_MAX : (int32_t)v;
}

void nsp_read(const cJSON *ns, nsp_spec *out)
{
    const cJSON *spec = json_get(ns, "spec");
    memset(out, 0, sizeof(*out));
    out->mode = nsb_mode_of(ns);
    out->replicas = nsb_replicas(ns);
    long long pad = json_get_int(spec, "ordinalPadding", 0);
    /* A width beyond what an int32 ordinal can use only makes names longer
     * than Kubernetes accepts. */
    out->ordinal_pad = pad < 0 ? 0 : pad > 64 ? 64 : (int)pad;

    const cJSON *us = json_get(spec, "updateStrategy");
    const char *type = json_get_str(us, "type");
    out->strategy = nsp_strategy_of(type && *type ? type : NULL);
    out->max_unavailable = json_get(us, "rollingUpdate.maxUnavailable");
    const cJSON *sched = json_get(us, "scheduledUpdate");
    out->sched.start = json_get_str_or(sched, "startTime", "");
    out->sched.start_secs = *out->sched.start ? rfc3339_secs(out->sched.start) : 0;
    out->sched.duration = json_get_str_or(sched, "duration", "30m");
    out->sched.flags = json_get(sched, "flags");

    out->min_ready_secs = int32_field(spec, "minReadySeconds");
    out->history_limit = int32_field(spec, "revisionHistoryLimit");
    out->pin_to_node = json_get_bool(spec, "pinToNode", 0);
    out->host_network = json_get_bool(spec, "template.spec.hostNetwork", 0);
    const char *h = json_get_str(spec, "template.spec.hostname");
    out->hostname = h && *h ? h : NULL;
    const cJSON *claims = json_get(spec, "volumeClaimTemplates");
    out->claims = json_len(claims) > 0 ? claims : NULL;
    out->wdp = json_get_bool(spec, "workloadDisruptionProtection", 1);
    out->partition = json_get_bool(spec, "partition.enabled", 0);
    const char *prune = json_get_str_or(spec, "pruneSlurmNodeRecords", "Never");
    out->prune_not_found = strcmp(prune, "NodeNotFound") == 0;
    out->ctl_name = json_get_str_or(spec, "controllerRef.name", "");
    out->ctl_ns = cw_ref_ns(ns, "spec.controllerRef");
}
