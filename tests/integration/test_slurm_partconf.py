#!/usr/bin/env python3
"""What slurmop lets a NodeSet add to a partition line is what a real
slurmctld takes (issue 39, finding 7).

A NodeSet's spec.partition.config goes into its Controller's slurm.conf, and
slurmctld refuses to start on a key it does not know (Slinky copies the text
verbatim). slurmop checks the text first (reconcilers/partconf.h). Here, for
the lab's Slurm version (SLURMLAB_VERSION: 22.05, 24.11, 26.05), one sample
per partition key is put through that check (tests/tools/partconf-check);
every sample it accepts goes, as one PartitionName line each, into one lab's
slurm.conf, and slurmctld must start and show every partition. Then the
samples it refuses, one lab each (a few; Bogus=1 always among them): each
must make slurmctld refuse to start, so the check refuses nothing Slurm
takes... for the keys where that was measured (a value slurmctld refuses
for want of accounting, QOS=normal without slurmdbd, is left out: names are
slurmctld's to check).

Exit 77 (skipped) when the lab cannot run here (tests/lib/slurmlab.py).
"""
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))

from slurmlab import VERSION, Lab, skip_unless_runnable  # noqa: E402
from slurmop import tool_binary  # noqa: E402

NODE = "pc-0"
SAMPLES = [
    "AllocNodes=" + NODE, "AllowAccounts=ALL", "AllowGroups=ALL", "AllowQos=ALL", "Alternate=p0", "CpuBind=cores",
    "Default=NO", "DefaultTime=10", "DefCpuPerGPU=1", "DefMemPerCPU=100", "DefMemPerGPU=100", "DefMemPerNode=100",
    "DenyAccounts=nobodyacct", "DisableRootJobs=NO", "ExclusiveTopo=NO", "ExclusiveUser=NO", "GraceTime=1",
    "Hidden=NO", "LLN=NO", "MaxCPUsPerNode=UNLIMITED", "MaxCPUsPerSocket=UNLIMITED", "MaxMemPerCPU=UNLIMITED",
    "MaxMemPerNode=UNLIMITED", "MaxNodes=UNLIMITED", "MaxTime=UNLIMITED", "MinNodes=1", "OverSubscribe=NO",
    "OverTimeLimit=1", "PowerDownOnIdle=NO", "PreemptMode=OFF", "PriorityJobFactor=1", "PriorityTier=1",
    "ReqResv=NO", "ResumeTimeout=60", "RootOnly=NO", "SelectTypeParameters=CR_Core", "State=UP",
    "SuspendTime=INFINITE", "SuspendTimeout=60", "Topology=default", 'TRESBillingWeights="CPU=1.0"',
    "MaxTime=1-00:00:00 State=UP Default=YES", "Bogus=1", "NodeName=x",
]


def lab_starts(lines):
    tmp = tempfile.mkdtemp(prefix="test_slurm_partconf.")
    os.chmod(tmp, 0o755)
    lab = Lab(tmp, [NODE], extra_env={"SLURMLAB_EXTRA_CONF": "\n".join(lines)})
    t0 = time.monotonic()
    try:
        try:
            lab.start()
        except AssertionError as e:
            # slurmctld's death is seen, not waited out: the lab's poll gives
            # up after 20 s, and a refused line stops slurmctld at once.
            took = time.monotonic() - t0
            assert "did not start" not in str(e) or took < 15, \
                "a slurmctld that refused its slurm.conf was found dead only after %.1f s" % took
            return None
        out = subprocess.run([lab.bin + "/scontrol", "show", "partition"], env=lab.cli_env, capture_output=True,
                             text=True).stdout
        return sum(1 for line in out.splitlines() if line.startswith("PartitionName=p"))
    finally:
        lab.stop()


def main():
    skip_unless_runnable()
    p = subprocess.run([tool_binary("partconf-check"), VERSION] + SAMPLES, capture_output=True, text=True)
    verdicts = p.stdout.splitlines()
    assert len(verdicts) == len(SAMPLES), p.stdout + p.stderr
    accepted = [s for s, v in zip(SAMPLES, verdicts) if v == "ok"]
    refused = [s for s, v in zip(SAMPLES, verdicts) if v != "ok"]
    print("Slurm %s: %d samples accepted, refused: %s" % (VERSION, len(accepted), refused))
    assert "Bogus=1" in refused and "NodeName=x" in refused, refused
    lines = ["PartitionName=p%d Nodes=%s %s" % (i, NODE, s) for i, s in enumerate(accepted)]
    n = lab_starts(lines)
    assert n == len(accepted), "slurmctld %s with every accepted sample: %s" % (
        VERSION, "did not start" if n is None else "%d of %d partitions" % (n, len(accepted)))
    print("ok: slurmctld %s starts with all %d accepted partition lines" % (VERSION, n))
    for s in refused:
        n = lab_starts(["PartitionName=p0 Nodes=%s %s" % (NODE, s)])
        print("refused %-28s slurmctld %s: %s" % (s, VERSION, "refuses to start" if n is None else "starts"))
        if s in ("Bogus=1", "NodeName=x"):
            assert n is None, "slurmctld started with %s: the check refuses a line Slurm takes" % s
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
