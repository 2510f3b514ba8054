#!/usr/bin/env bash
# Builds everything and runs every test: unit, CLI and e2e tests through CTest; the whole suite again
# built with AddressSanitizer and UndefinedBehaviorSanitizer (ASAN=0 skips it); the unit tests of the
# runtime and of common/ (trace ring, TLS links) under ThreadSanitizer (TSAN=0 skips it); then a short
# libFuzzer run of each fuzz target (FUZZ_SECONDS, default 20; 0 skips it).
set -euo pipefail
cd "$(dirname "$0")/.."
# The tests leave their run dirs under /tmp for a failing test's evidence; the whole suite leaves
# about 1 GB, and CI's disk is shared. At exit, what this run made under /tmp (absent at its start,
# ours, with the names our tests and Python's tempfile give) is removed.
before=$(mktemp /tmp/dsd-suite-before.XXXXXX)
ls -A /tmp > "$before"
sweep() {
  local name
  while IFS= read -r name; do
    case "$name" in dsd-* | dsd_* | dsdtrace-* | pymp-* | tmp*) ;; *) continue ;; esac
    if [[ -O "/tmp/$name" ]]; then rm -rf -- "/tmp/$name"; fi
  done < <(ls -A /tmp | grep -vxF -f "$before")
  rm -f "$before"
}
trap sweep EXIT
# Each step's wall time, for keeping CI's whole run in its budget (docs/performance.md, "CI time").
step() {
  local start=$SECONDS
  "$@"
  echo "test.sh: $* took $((SECONDS - start)) s"
}
step ./scripts/build.sh
./scripts/seed_test_costs.sh build
step ctest --test-dir build -j "$(nproc)" --output-on-failure --timeout 300
if [[ "${ASAN:-1}" != 0 ]]; then
  step ./scripts/asan.sh
fi
if [[ "${TSAN:-1}" != 0 ]]; then
  step ./scripts/tsan.sh
fi
if [[ "${FUZZ_SECONDS:-20}" != 0 ]]; then
  step ./scripts/fuzz.sh
fi
