/* slurmconf: the text of slurm.conf, cgroup.conf, slurmdbd.conf, sshd_config
 * and authorized_keys as Slinky generates them (docs/compat.md#generated-files).
 *
 * Every generator is a pure function of its inputs and produces the same
 * bytes as Slinky's builders for the same CRs, so that the config hash
 * annotations (and therefore pod rollouts) follow the same changes. The
 * shared format: one "Key=Value" (sshd: "Key Value") per line, sections
 * introduced by a line "#" and a line "### SECTION ###", a final newline.
 * Text given by users (extraConf, extraSshdConfig, authorized keys, NodeSet
 * partition config) is copied verbatim.
 *
 * All returned strings are malloc'd; the caller frees them.
 */
#ifndef OP_SLURMCONF_H
#define OP_SLURMCONF_H

#include <cjson/cJSON.h>
#include <stddef.h>

#include "reconcilers/cluster_common.h"

/* Paths and names inside the pods. */
#define SCONF_ETC_DIR "/etc/slurm"
#define SCONF_SLURM_CONF "slurm.conf"
#define SCONF_CGROUP_CONF "cgroup.conf"
#define SCONF_SLURMDBD_CONF "slurmdbd.conf"
#define SCONF_JWT_KEY_PARAM "jwt_key=/etc/slurm/jwt.key"
#define SCONF_JWKS_PARAM "jwks=/etc/slurm/jwks.json"
#define SCONF_SPOOL_DIR "/var/spool/slurmctld"

/* One key of the "merged config" rule: the options slurmctld (or slurmdbd)
 * needs for key, whatever the user's extraConf says. */
typedef struct sconf_merge {
    const char *key;            /* e.g. "SlurmctldParameters" */
    const char *const *options; /* required options, e.g. "enable_configless" */
    size_t n_options;
} sconf_merge;

/** The "### MERGED CONFIG ###" body for extra (an extraConf text).
 *
 *  extra is read as slurm.conf lines: "\r" before a newline is dropped,
 *  everything from the first '#' on a line is a comment, trailing blanks
 *  are dropped, a line ending in '\' continues on the next (the backslash is
 *  removed, the pieces are joined without a separator). Each resulting
 *  logical line "Key=Value" is recorded under the lower-cased, trimmed key
 *  (last one wins) unless the trimmed value is empty or contains a space or
 *  newline (a "Key=Value Key2=..." line such as a PartitionName line).
 *
 *  For every key of keys that extra sets (compared case-insensitively),
 *  in bytewise order of the key names, one line "Key=<options>" is emitted:
 *  the set of required options plus each comma-separated option of the
 *  user's value, lower-cased, except empty ones and those whose "name" (the
 *  text before '=', case-insensitively) equals the name of a required
 *  option or of an option already taken; the options sorted bytewise and
 *  joined with ','. Lines are joined with '\n', without a final newline.
 *  Returns "" (malloc'd) when extra sets none of the keys. */
char *sconf_merged_config(const char *extra, const sconf_merge *keys, size_t n_keys);

/* MaxNodeCount (docs/compat.md#maxnodecount): dynamic nodes need one, and
 * slurmctld refuses to register a node past it. */
#define SCONF_MAX_NODES_MIN 1024    /* Slinky's fixed value: small fleets keep it */
#define SCONF_MAX_NODES_LIMIT 65536 /* the most Slurm 24.11 and 26.05 accept */

/** The dynamic nodes one NodeSet may register: spec.replicas (1 when
 *  absent) in StatefulSet mode, status.desired (the eligible Nodes) in
 *  DaemonSet mode; never negative. */
long long sconf_nodeset_fleet(const cJSON *nodeset);

/** MaxNodeCount for a fleet of that many dynamic nodes: fleet plus a quarter
 *  of headroom, rounded up to SCONF_MAX_NODES_MIN times a power of two
 *  (so that scaling rewrites slurm.conf, which restarts slurmctld, only when
 *  the fleet outgrows the value), at least current (the value slurm.conf
 *  has now, 0 when unknown: it never shrinks, as a shrink would restart
 *  slurmctld for nothing), at most SCONF_MAX_NODES_LIMIT. */
long long sconf_max_node_count(long long fleet, long long current);

/** Above a MaxNodeCount of this many (Slurm's own large-cluster guide starts
 *  at 1,024 nodes) the NodeSet section opens with a large fleet's settings. */
#define SCONF_LARGE_FLEET 1024
/** MessageTimeout of a large fleet, seconds (Slurm's default is 10). */
#define SCONF_LARGE_MESSAGE_TIMEOUT 60
/** TreeWidth below which a large fleet's is never set (Slurm's default). */
#define SCONF_TREE_WIDTH_MIN 16

/** The TreeWidth that reaches a fleet of that many nodes within three hops
 *  of slurmd fan-out (w + w^2 + w^3 >= fleet), at least
 *  SCONF_TREE_WIDTH_MIN, at most 65533 (the most Slurm accepts). */
int sconf_tree_width(long long fleet);

/** slurm.conf for a Controller that runs in Kubernetes (docs/compat.md#slurmconf).
 *
 *  controller: the Controller CR as stored (defaults applied on the fly).
 *  nodesets: the NodeSet CRs that reference the Controller (the caller
 *    picks them, from any namespace); those whose spec.controllerRef.name is
 *    not the Controller's name are ignored; the
 *    rest are emitted in bytewise order of metadata.name as
 *    "NodeSet=<n> Feature=<n>" and, with spec.partition.enabled,
 *    "PartitionName=<n> Nodes=<n> <spec.partition.config>" (Slinky joins the
 *    three with spaces, so an empty config leaves a trailing space), where
 *    <n> is clc_nodeset_name().
 *  env: looks up the Accounting named by spec.accountingRef (absent:
 *    accounting_storage/none; external Accounting: its externalConfig host
 *    and port instead of the in-cluster Service, `<name>-accounting`, which
 *    gets `.<namespace>` when the Accounting's namespace is not the
 *    Controller's) and the ConfigMaps of
 *    prologScriptRefs, epilogScriptRefs, prologSlurmctldScriptRefs and
 *    epilogSlurmctldScriptRefs (their data keys are the script file names:
 *    all names of one kind sorted bytewise; Prolog/Epilog are bare names,
 *    PrologSlurmctld/EpilogSlurmctld are under /etc/slurm).
 *  MaxNodeCount is sconf_max_node_count() of the sum of sconf_nodeset_fleet()
 *  over those NodeSets, with current read from the MaxNodeCount line of the
 *  stored `<name>-config` ConfigMap that env resolves; the line is left out
 *  when spec.extraConf sets MaxNodeCount (the user's value then stands).
 *  A MaxNodeCount above SCONF_LARGE_FLEET (our value, also when extraConf
 *  sets its own) opens the NodeSet section with "# a large fleet",
 *  MessageTimeout=SCONF_LARGE_MESSAGE_TIMEOUT and TreeWidth=
 *  sconf_tree_width(MaxNodeCount), each left out when extraConf sets it;
 *  being in that section they are, as MaxNodeCount, outside
 *  sconf_without_nodesets() (a growing fleet never rolls slurmctld for
 *  them), and they change only when MaxNodeCount does.
 *  Returns 0 and the text in *out, or OP_ENOTFOUND when a script ConfigMap
 *  is missing (message in *why). For an external Controller this is the
 *  minimal configuration of sconf_slurm_conf_external(). */
int sconf_slurm_conf(const cJSON *controller, const cJSON *const *nodesets, size_t n_nodesets,
                     const clc_env *env, char **out, char **why);

/** conf (a sconf_slurm_conf() text) without what the NodeSets contribute:
 *  the generated MaxNodeCount line of the GENERAL section and the whole
 *  "NODESET & PARTITION" section (up to the next section or the end).
 *  Everything else, the user's text included, is kept byte for byte. The
 *  slurmctld pod template hashes this view (controller_build.h), so that a
 *  NodeSet created, deleted, scaled or repartitioned reaches slurmctld by
 *  `scontrol reconfigure` and never restarts it. */
char *sconf_without_nodesets(const char *conf);

/** The minimal slurm.conf of an external Controller (docs/compat.md#slurmconf), read only by
 *  slurmrestd: ClusterName, SlurmUser, SlurmctldHost/Port from
 *  spec.externalConfig, the auth plugins, the accounting lines for
 *  accounting (NULL: none). */
char *sconf_slurm_conf_external(const cJSON *controller, const cJSON *accounting);

/** The default cgroup.conf: "CgroupPlugin=cgroup/v2\nIgnoreSystemd=yes\n". */
char *sconf_cgroup_conf(void);

/** Whether any ConfigMap of spec.configFileRefs (looked up in env) has the
 *  data key file. Missing ConfigMaps are skipped here (the Controller
 *  builder reports them). */
int sconf_config_files_have(const cJSON *controller, const clc_env *env, const char *file);

/** slurmdbd.conf for an Accounting CR (docs/compat.md#slurmdbdconf): DbdHost=<name>-accounting-0,
 *  DbdPort, SlurmUser, the auth plugins, storage (port 3306 and database
 *  slurm_acct_db by default, StoragePass = storage_pass verbatim, NULL as
 *  ""), LogFile=/dev/null, spec.extraConf and the merged block for AuthInfo
 *  and AuthAltParameters. */
char *sconf_slurmdbd_conf(const cJSON *accounting, const char *storage_pass);

/** sshd_config of a LoginSet (docs/compat.md#sshd_config): Include of /etc/ssh/sshd_config.d (all *.conf
 * files), UsePAM yes, X11Forwarding yes, Subsystem sftp internal-sftp, then the
 *  "### EXTRA CONFIG ###" section with extra (NULL as ""; the section is
 *  always present, so an empty extra leaves an empty line). */
char *sconf_login_sshd_config(const char *extra);

/** sshd_config of a NodeSet with ssh.enabled (docs/compat.md#sshd_config): Include, UsePAM yes,
 *  Subsystem sftp internal-sftp, AuthenticationMethods "publickey password",
 *  then the extra section as for the LoginSet. */
char *sconf_worker_sshd_config(const char *extra);

/** /root/.ssh/authorized_keys of a LoginSet: "#", "### SLINKY ###", keys. */
char *sconf_authorized_keys(const char *keys);

#endif
