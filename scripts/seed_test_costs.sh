#!/usr/bin/env bash
# Seeds CTest's record of how long each test takes (BUILD_DIR/Testing/Temporary/CTestCostData.txt)
# from tests/ctest_costs.txt, unless the build dir has its own. With it, `ctest -j` starts the longest
# tests first; without it (a fresh clone: CI) it starts them in declaration order, where a long test
# that happens to start last leaves the other core idle until it ends.
# Refresh the seed after adding slow tests: scripts/seed_test_costs.sh --save build
set -euo pipefail
cd "$(dirname "$0")/.."
seed=tests/ctest_costs.txt
if [[ "${1:-}" == --save ]]; then
  # Only the per-test lines: the list of last run's failures (after "---") is the machine's own.
  sed '/^---$/,$d' "${2:?build dir}/Testing/Temporary/CTestCostData.txt" | sort > "$seed"
  echo "seed_test_costs: $(wc -l < "$seed") tests saved in $seed"
  exit 0
fi
costs="${1:?build dir}/Testing/Temporary/CTestCostData.txt"
if [[ -f "$costs" || ! -f "$seed" ]]; then exit 0; fi
mkdir -p "$(dirname "$costs")"
cp "$seed" "$costs"
