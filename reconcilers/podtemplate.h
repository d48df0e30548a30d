/* podtemplate: how user customisation is merged into the pods we build.
 *
 * Slinky's CRDs embed a PodTemplate (`template`) and per-daemon container
 * overrides (`slurmd`, `slurmctld`, `logfile`, ...). The rules, shared by
 * every builder (docs/compat.md#nodeset-pod):
 *  - a container override is strategically merged into the base container:
 *    env, ports, volumeMounts merge by their keys, `args` are appended to the
 *    base args, a probe given by the user replaces the base probe's handler
 *    (httpGet/tcpSocket/exec/grpc) but keeps the base thresholds unless the
 *    user sets them too;
 *  - the user's template.spec is strategically merged over the base pod
 *    spec, except that containers and initContainers are concatenated (so a
 *    same-named container in the template is an additional container, not an
 *    override: customise the daemon through its override field);
 *  - template.metadata labels and annotations are added to the pod's, but
 *    never replace the operator's own (selectors and hashes must hold).
 */
#ifndef OP_PODTEMPLATE_H
#define OP_PODTEMPLATE_H

#include <cjson/cJSON.h>

/** Merge the user's container override into base (in place); user may be
 *  NULL. Returns base. */
cJSON *pt_merge_container(cJSON *base, const cJSON *user);

/** Merge a user PodTemplate ({metadata:{labels,annotations}, spec}) into a
 *  base pod template of the same shape (in place); user may be NULL.
 *  Returns the (possibly new) base. */
cJSON *pt_merge_template(cJSON *base, const cJSON *user);

#endif
