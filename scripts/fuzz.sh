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
# The targets run side by side, one per core (CI has two); each one's output is kept whole in
# build-fuzz/logs/ and its last lines are printed in order. A target that finds a crash fails the step.
targets=(framing log hostfile ds_config trace events run_dir agent_request sample_delta pickle)
mkdir -p build-fuzz/logs
fuzz_one() {
  local target=$1
  mkdir -p "build-fuzz/corpus/$target"
  "build-fuzz/bin/${target}_fuzz" -max_total_time="$seconds" -max_len=8192 -print_final_stats=1 \
    "build-fuzz/corpus/$target" "tests/fuzz/corpus/$target" > "build-fuzz/logs/$target.log" 2>&1
}
jobs=$(nproc)
declare -A pid_of
failed=()
for target in "${targets[@]}"; do
  while (($(jobs -rp | wc -l) >= jobs)); do wait -n || true; done
  echo "fuzz: $target for ${seconds}s"
  fuzz_one "$target" &
  pid_of[$target]=$!
done
for target in "${targets[@]}"; do
  if ! wait "${pid_of[$target]}"; then failed+=("$target"); fi
  echo "--- fuzz: $target"
  tail -n 12 "build-fuzz/logs/$target.log"
done
if ((${#failed[@]})); then
  echo "fuzz: failed: ${failed[*]} (whole output in build-fuzz/logs/)" >&2
  exit 1
fi
