#!/bin/bash
# DCGM exporter job mapping, epilog: remove the files the prolog wrote for
# the job's GPUs in @JOB_MAPPING_DIR@, so no metric is labelled with a
# finished job. Never fails the job.
dir="@JOB_MAPPING_DIR@"
[ -n "${SLURM_JOB_GPUS:-}" ] || exit 0
IFS=, read -r -a gpus <<<"$SLURM_JOB_GPUS"
for gpu in "${gpus[@]}"; do
	rm -f "$dir/$gpu" || echo "dcgm epilog: cannot remove $dir/$gpu" >&2
done
exit 0
