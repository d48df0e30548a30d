#!/usr/bin/env bash
# Install the Debian 12 packages slurmop needs to build, test and benchmark.
# Idempotent: does nothing when everything is present. Needs root (or sudo)
# only when something is missing.
set -euo pipefail

PKGS=(build-essential cmake pkg-config libuv1-dev node-llhttp libmbedtls-dev libsodium-dev libyaml-dev libcjson-dev
      libcmocka-dev libslurm-dev slurmctld slurmd slurmrestd slurm-client slurm-wlm-basic-plugins
      slurm-wlm-jwt-plugin munge python3 curl procps iproute2 openssh-client
      debootstrap # debootstrap: the Slurm 24.11/26.05 labs (tests/slurm/slurmlab.sh)
      containerd runc containernetworking-plugins iptables conntrack) # real Nodes (tests/k8s/nodes.sh)

missing=()
for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "deps: installing ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "deps: need root to install: ${missing[*]}" >&2; exit 1; }
    SUDO=sudo
fi
# The Slurm and munge packages try to start their daemons from postinst; we
# start our own on loopback, so forbid service starts during the install.
created_policy=0
if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
    $SUDO chmod +x /usr/sbin/policy-rc.d
    created_policy=1
fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
[ $created_policy -eq 1 ] && $SUDO rm -f /usr/sbin/policy-rc.d
exit 0
