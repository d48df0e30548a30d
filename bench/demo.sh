#!/usr/bin/env bash
# The demo, from a fresh Debian 12 machine: install packages, build, start
# kubesim (the in-repo API server simulator) and slurmop, apply the CRDs and
# a small Slurm cluster, scale its NodeSet up and down, and print what
# happens. Everything runs on loopback and stops at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tests/deps.sh
BUILD=${OP_DEMO_BUILD_DIR:-build-release}
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=ON >/dev/null
cmake --build "$BUILD" -j"$(nproc)" --target slurmop kubesim yaml2json >/dev/null
OP_BUILD_DIR="$PWD/$BUILD" OP_SOURCE_DIR="$PWD" python3 bench/demo.py "$@"
