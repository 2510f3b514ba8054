#!/usr/bin/env bash
# Builds everything and runs every test: unit, CLI and e2e tests through CTest; the whole suite again
# built with AddressSanitizer and UndefinedBehaviorSanitizer (ASAN=0 skips it); the unit tests of the
# runtime and of common/ (trace ring, TLS links) under ThreadSanitizer (TSAN=0 skips it); then a short
# libFuzzer run of each fuzz target (FUZZ_SECONDS, default 20; 0 skips it).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build.sh
ctest --test-dir build -j "$(nproc)" --output-on-failure --timeout 300
if [[ "${ASAN:-1}" != 0 ]]; then
  ./scripts/asan.sh
fi
if [[ "${TSAN:-1}" != 0 ]]; then
  ./scripts/tsan.sh
fi
if [[ "${FUZZ_SECONDS:-20}" != 0 ]]; then
  ./scripts/fuzz.sh
fi
