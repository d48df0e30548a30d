/* partconf: what a NodeSet may add to its Controller's slurm.conf
 * (docs/compat.md#nodeset-spec-and-status, spec.partition.config).
 *
 * A NodeSet contributes two lines, "NodeSet=<name> Feature=<name>" and, with
 * spec.partition.enabled, "PartitionName=<name> Nodes=<name> <config>". Both
 * come from whoever may write the NodeSet, and slurmctld refuses to start on
 * a slurm.conf it cannot parse (an unknown key is fatal), so the text is
 * checked here before the Controller writes it: a NodeSet whose text does
 * not pass is Valid=False and its text never reaches slurm.conf.
 *
 * The partition config is a list of KEY=VALUE words separated by blanks,
 * the keys those slurm.conf(5) documents for a partition line (union over
 * Slurm 22.05 to 26.05; matched without case, as Slurm does), each at most
 * once; PartitionName and Nodes are the operator's. A value is a run of
 * printable characters without blanks, quotes, '#' or '\', or a double-quoted
 * string of printable characters without quotes, '#' or '\'. Yes/no keys take
 * YES or NO, State one of UP, DOWN, DRAIN, INACTIVE, and count keys a number
 * or UNLIMITED/INFINITE: values slurmctld would stop on. Keys newer than
 * Slurm 22.05 only when the Controller's slurmctld image names a version
 * that has them (clc_image_slurm_version; an image without a version in its
 * tag gets the 22.05 keys only). Names are not checked against Slurm's
 * database: a QOS or account that does not exist is slurmctld's to report.
 */
#ifndef OP_PARTCONF_H
#define OP_PARTCONF_H

#include <stddef.h>

/* The longest partition config accepted (Slurm reads lines of up to 1 MiB;
 * a partition line never needs this much). */
#define PCF_MAX_LEN 4096

/** 0 when config (NULL or "" is fine) is a partition config a slurmctld of
 *  slurm_version (YY * 100 + MM, 0 unknown) accepts, else -1 with a sentence
 *  naming the first bad word in why[0..size-1]. */
int pcf_check(const char *config, int slurm_version, char *why, size_t size);

/** 0 when name (a Slurm NodeSet name, written as NodeSet=, Feature= and
 *  PartitionName=) holds only letters, digits, '-', '_' and '.', at most 253
 *  characters, else -1 with the reason in why. */
int pcf_check_name(const char *name, char *why, size_t size);

#endif
