#!/usr/bin/env bash
# Builds the libFuzzer targets with clang in build-fuzz/ and runs each for FUZZ_SECONDS (default 20)
# on its seed corpus (tests/fuzz/corpus/<target>); new inputs go to build-fuzz/corpus/.
# Targets: every parser of untrusted input (docs/performance.md, "Fuzzing").
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${FUZZ_SECONDS:-20}
if ! command -v clang++ >/dev/null; then
  echo "fuzz: clang++ not found; run scripts/setup.sh" >&2
  exit 1
fi
CXX=clang++ CC=clang cmake -S . -B build-fuzz -G Ninja -DDSDOCTOR_FUZZ_ONLY=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build-fuzz
for target in framing log hostfile ds_config trace events run_dir agent_request sample_delta pickle; do
  mkdir -p "build-fuzz/corpus/$target"
  echo "fuzz: $target for ${seconds}s"
  "build-fuzz/bin/${target}_fuzz" -max_total_time="$seconds" -max_len=8192 -print_final_stats=1 \
    "build-fuzz/corpus/$target" "tests/fuzz/corpus/$target" 2>&1 | tail -n 12
done
