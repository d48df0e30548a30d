#!/bin/bash
# DCGM exporter job mapping, prolog: one file per GPU of the job, named by
# the GPU index and holding the job id, in @JOB_MAPPING_DIR@ (which
# dcgm-exporter reads with --hpc-job-mapping-dir). Never fails the job.
dir="@JOB_MAPPING_DIR@"
[ -n "${SLURM_JOB_GPUS:-}" ] || exit 0
mkdir -p "$dir" || exit 0
IFS=, read -r -a gpus <<<"$SLURM_JOB_GPUS"
for gpu in "${gpus[@]}"; do
	printf '%s' "${SLURM_JOB_ID:-0}" >"$dir/$gpu" || echo "dcgm prolog: cannot write $dir/$gpu" >&2
done
exit 0
