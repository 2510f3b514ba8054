#!/usr/bin/env bash
# Builds the unit tests of the runtime and of common/ with clang's ThreadSanitizer in build-tsan/ and
# runs them: the trace ring's sequence lock, the watchdog, the comm backends' threads and the TLS
# links' send/receive locking must be race-free without suppressions. Fails on any TSan report.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v clang++ >/dev/null; then
  echo "tsan: clang++ not found; run scripts/setup.sh" >&2
  exit 1
fi
CXX=clang++ CC=clang cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS="-fsanitize=thread" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=thread" >/dev/null
cmake --build build-tsan --target runtime_test trace_c_api_test common_test
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for t in runtime_test trace_c_api_test common_test; do
  if ! TSAN_OPTIONS="halt_on_error=0 second_deadlock_stack=1 handle_segv=0" "build-tsan/bin/$t" >"$log" 2>&1; then
    tail -n 40 "$log"
    echo "tsan: $t failed" >&2
    exit 1
  fi
  reports=$(grep -c "WARNING: ThreadSanitizer" "$log" || true)
  if [[ "$reports" != 0 ]]; then
    grep -A 20 "WARNING: ThreadSanitizer" "$log" | head -n 80
    echo "tsan: $reports ThreadSanitizer reports in $t" >&2
    exit 1
  fi
  echo "tsan: $t clean ($(grep -c '^\[       OK \]' "$log") tests)"
done
