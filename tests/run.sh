#!/usr/bin/env bash
# The whole test suite, from a fresh Debian 12 machine: install packages,
# build with -Werror, AddressSanitizer and UndefinedBehaviorSanitizer, and
# run every test through ctest. Extra arguments go to ctest (e.g. -L unit).
#
# The real Kubernetes control plane (tests/k8s/) is built first: a no-op when
# its binaries are cached, exit 77 when Go is missing, in which case the k8s
# tests (label k8s: integration.k8s.*, integration.k8s_*) skip themselves.
# As root, the images of deploy/images/build.sh (both Slurm versions, built
# in the background from the start) and the real Nodes' binaries
# (tests/k8s/build-node.sh) are made for the tests of label pods. Then Slinky's manager (tests/slinky/build.sh, for slinky_parity), cached the
# same way: v1.2.1 from its source archives when they are there, and v1.1.0
# from the module proxy; SLURMOP_SLINKY=0 leaves them out, and a failed or
# impossible build only warns (the test then skips or falls back, saying so).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tests/deps.sh
BUILD=${OP_TEST_BUILD_DIR:-build-test}
mkdir -p "$BUILD"
img_pid=""
if [ "$(id -u)" = 0 ] && [ -f deploy/images/build.sh ]; then
    # The images of the pods and images tests. A cold build is mostly
    # debootstrap's downloads and buildah's apt steps, so it runs beside the
    # compile and the Go builds below instead of after them (a fresh machine's
    # first run is then shorter by most of it); a no-op in seconds when warm.
    ( bash deploy/images/build.sh --slurm 26.05 all &&
      bash deploy/images/build.sh --slurm 24.11 slurm ) >"$BUILD/images-build.log" 2>&1 &
    img_pid=$!
fi
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Debug -DOP_WERROR=ON -DOP_ASAN=ON -DOP_UBSAN=ON >/dev/null
cmake --build "$BUILD" -j"$(nproc)"
rc=0
bash tests/k8s/build.sh >/dev/null || rc=$?
case $rc in
    0) ;;
    77) echo "tests/run.sh: Go is missing: the k8s tests will be skipped" >&2 ;;
    *) echo "tests/run.sh: tests/k8s/build.sh failed (exit $rc)" >&2; exit "$rc" ;;
esac
if [ "$rc" = 0 ]; then
    # promtool for integration.alerts (the chart's alert rules' unit tests),
    # from its Go module into the same cache: a no-op when warm.
    bash tests/alerts/build.sh >/dev/null ||
        echo "tests/run.sh: WARNING: tests/alerts/build.sh failed: integration.alerts will fail" >&2
fi
if [ "$rc" = 0 ] && [ "$(id -u)" = 0 ]; then
    # The real-pod tests (label pods): the node binaries and the images,
    # cached outside the clone like the control plane (a no-op when warm).
    bash tests/k8s/build-node.sh >/dev/null
fi
if [ "$rc" = 0 ] && [ "${SLURMOP_SLINKY:-1}" != 0 ]; then
    # Slinky is the peer we compare with, not the product: when its module
    # cannot be fetched or built, slinky_parity skips (say so loudly) and
    # the rest of the suite still runs.
    # v1.2.1 (the default) is built from source archives that may be absent
    # (exit 77, saying so); v1.1.0 comes from the module proxy.
    for v in v1.2.1 v1.1.0; do
        src=0
        bash tests/slinky/build.sh --version "$v" >/dev/null || src=$?
        case $src in
            0) ;;
            77) echo "tests/run.sh: WARNING: Slinky $v cannot be built here (see above)" >&2 ;;
            *) echo "tests/run.sh: WARNING: tests/slinky/build.sh --version $v failed (exit $src)" >&2 ;;
        esac
    done
fi
if [ -n "$img_pid" ] && ! wait "$img_pid"; then
    # The tests that need an image then fail, saying which one is missing.
    echo "tests/run.sh: WARNING: deploy/images/build.sh failed (log: $BUILD/images-build.log)" >&2
    tail -n 20 "$BUILD/images-build.log" >&2 || true
fi
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
cd "$BUILD"
# Most tests wait on an API server, a Slurm lab or a kubelet rather than
# compute, so more run at once than there are cores (OP_TEST_JOBS); the
# Slurm labs, whose checks are timing-bound, are held to OP_TEST_LABS at once
# by the resource spec below (tests/CMakeLists.txt, RESOURCE_GROUPS slurmlab).
# Their turns are the suite's critical path, so two run at once: one at a
# time, the labs' turns alone took 40 minutes of a 50-minute warm run (the
# real-pod tests held a lab slot too); two at once, with the real-pod tests
# beside them, 20 minutes. A lab's job whose end never reaches slurmctld
# would show as a timed-out job wait, whose message has slurmctld's and
# every slurmd's log (Lab.job_report); OP_TEST_LABS=1 is the slower, quieter
# run. Labs beside the suite must share its port reservation file
# (SLURMOP_TEST_PORTS), and a lab's stop signals only its own processes.
# Their ports are reserved host-wide outside the ephemeral range
# (tests/lib/ports.py). Four tests at once: two labs, the real-pod tests
# and the rest; the machine stays under a load of about 3.5 on 2 cores.
jobs=${OP_TEST_JOBS:-4}
labs=${OP_TEST_LABS:-2}
printf '{"version":{"major":1,"minor":0},"local":[{"slurmlab":[{"id":"labs","slots":%d}]}]}\n' "$labs" \
    >resource-spec.json
# The JUnit report is what .ci/run checks for skipped tests (tests/ci_skips.py).
ctest --output-on-failure --timeout 600 -j"$jobs" --resource-spec-file resource-spec.json \
    --output-junit "$PWD/ctest-junit.xml" "$@"
