#!/usr/bin/env bash
# The whole test suite, from a fresh Debian 12 machine: install packages,
# build with -Werror, AddressSanitizer and UndefinedBehaviorSanitizer, and
# run every test through ctest. Extra arguments go to ctest (e.g. -L unit).
set -euo pipefail
cd "$(dirname "$0")/.."
bash tests/deps.sh
BUILD=${OP_TEST_BUILD_DIR:-build-test}
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Debug -DOP_WERROR=ON -DOP_ASAN=ON -DOP_UBSAN=ON >/dev/null
cmake --build "$BUILD" -j"$(nproc)"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
cd "$BUILD"
ctest --output-on-failure --timeout 600 -j2 "$@"
