#!/usr/bin/env bash
# Steps/s of a real PyTorch DDP job (tests/e2e/programs/torch_train.py, SCENARIO=bench: 2 ranks,
# gloo, a DataLoader, one gradient bucket and one metrics all-reduce per step) under `dsdoctor run`
# with the collective tracer and with --no-trace, alternating, ROUNDS times each. Prints every
# figure and the medians. Usage: bench/torch_ddp_overhead.sh [ROUNDS=5] [STEPS=400]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
steps=${2:-400}
prog=tests/e2e/programs/torch_train.py
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
run() {  # $1: extra flag
  SCENARIO=bench STEPS=$steps ./build/bin/dsdoctor run --local 1 --slots 2 --log-dir "$dir/logs" --serve off $1 -- /usr/bin/python3 "$prog" 2>/dev/null |
    sed -n 's/.*steps_per_s \([0-9.]*\).*/\1/p'
}
traced=() untraced=()
for ((i = 0; i < rounds; i++)); do
  traced+=("$(run "")")
  untraced+=("$(run --no-trace)")
  echo "round $i: traced ${traced[-1]} steps/s, untraced ${untraced[-1]} steps/s"
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
mt=$(median "${traced[@]}") mu=$(median "${untraced[@]}")
awk -v t="$mt" -v u="$mu" 'BEGIN {printf "median: traced %.1f steps/s, untraced %.1f steps/s (%+.1f%%)\n", t, u, (t - u) / u * 100}'
