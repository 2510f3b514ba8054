#!/usr/bin/env bash
# Steps/s of the bundled runtime's data-parallel job (train_healthy, Gloo) with N ranks on this
# machine, started by examples/run_local.sh (no watcher) and by `dsdoctor run` (an agent sampling
# every rank 5 times a second, the coordinator diagnosing), alternating, ROUNDS times each.
# Steps/s come from rank 0's log (its first and last step lines), so start-up is not counted.
# Usage: bench/run_overhead.sh [RANKS=64] [STEPS=60] [ROUNDS=3]
set -euo pipefail
cd "$(dirname "$0")/.."
ranks=${1:-64} steps=${2:-60} rounds=${3:-3}
bin=$PWD/build/bin
dir=$(mktemp -d /tmp/dsdoctor-run-overhead.XXXXXX)
trap 'rm -rf "$dir"' EXIT
rate() {  # steps/s between rank 0's first and last "step N loss" lines
  python3 - "$1" <<'PY'
import datetime, re, sys
pts = []
for line in open(sys.argv[1]):
    m = re.match(r"(\S+) info +\[runtime\] rank 0: step (\d+) loss", line)
    if m:
        pts.append((datetime.datetime.fromisoformat(m.group(1)), int(m.group(2))))
(t0, s0), (t1, s1) = pts[0], pts[-1]
print(f"{(s1 - s0) / (t1 - t0).total_seconds():.3f}")
PY
}
plain=() watched=()
for ((i = 0; i < rounds; i++)); do
  rm -rf "$dir"/*
  LOG_DIR=$dir/plain "$PWD/examples/run_local.sh" "$ranks" "$bin/train_healthy" --steps "$steps" >/dev/null
  plain+=("$(rate "$dir/plain/rank-0.log")")
  "$bin/dsdoctor" run --local 1 --slots "$ranks" --log-dir "$dir/watched" --serve off -- \
    "$bin/train_healthy" --steps "$steps" >/dev/null 2>&1
  watched+=("$(rate "$(find "$dir/watched" -name rank-0.log | head -1)")")
  echo "round $i: run_local.sh ${plain[-1]} steps/s, dsdoctor run ${watched[-1]} steps/s"
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
mp=$(median "${plain[@]}") mw=$(median "${watched[@]}")
# Each round's two runs are back to back, so their ratio cancels a slow spell of the machine that
# lasts longer than a round; the median of those ratios is the steadier figure.
ratios=()
for ((i = 0; i < rounds; i++)); do ratios+=("$(awk -v p="${plain[i]}" -v w="${watched[i]}" 'BEGIN {print w / p}')"); done
mr=$(median "${ratios[@]}")
awk -v p="$mp" -v w="$mw" -v r="$mr" -v n="$ranks" \
  'BEGIN {printf "%d ranks, median: run_local.sh %.3f steps/s, dsdoctor run %.3f steps/s (%+.1f%%); median of the rounds\x27 ratios %+.1f%%\n", n, p, w, (w - p) / p * 100, (r - 1) * 100}'
