#!/usr/bin/env bash
# Builds everything and runs every test: unit, CLI and e2e tests through CTest, the runtime's unit
# tests under ThreadSanitizer (TSAN=0 skips it), then a short libFuzzer run of each fuzz target
# (FUZZ_SECONDS, default 30; 0 skips it).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build.sh
ctest --test-dir build -j "$(nproc)" --output-on-failure --timeout 300
if [[ "${TSAN:-1}" != 0 ]]; then
  ./scripts/tsan.sh
fi
if [[ "${FUZZ_SECONDS:-30}" != 0 ]]; then
  ./scripts/fuzz.sh
fi
