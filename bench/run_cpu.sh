#!/usr/bin/env bash
# CPU time dsdoctor itself spends watching a real job: `dsdoctor run --local 1 --slots N` on the
# bundled runtime's data-parallel job (train_healthy, Gloo), the coordinator and its agent read
# from /proc (utime + stime) every 0.2 s while they run; the ranks' own CPU is not counted.
# Prints each process's CPU seconds, the job's wall time and the share of one core per rank.
# Usage: bench/run_cpu.sh [RANKS=64] [STEPS=60] [ROUNDS=3]
set -euo pipefail
cd "$(dirname "$0")/.."
ranks=${1:-64} steps=${2:-60} rounds=${3:-3}
bin=$PWD/build/bin
dir=$(mktemp -d /tmp/dsdoctor-run-cpu.XXXXXX)
trap 'rm -rf "$dir"' EXIT
hz=$(getconf CLK_TCK)
cpu_ticks() {  # utime + stime of a pid (fields 14 and 15, after the parenthesised comm)
  local s
  s=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  s=${s##*) }
  set -- $s
  echo $((${12} + ${13}))
}
for ((i = 0; i < rounds; i++)); do
  rm -rf "${dir:?}"/*
  start=$(date +%s.%N)
  "$bin/dsdoctor" run --local 1 --slots "$ranks" --log-dir "$dir/logs" --serve off -- \
    "$bin/train_healthy" --steps "$steps" >/dev/null 2>&1 &
  coordinator=$!
  agent="" coordinator_ticks=0 agent_ticks=0
  while kill -0 "$coordinator" 2>/dev/null; do
    [[ -z $agent ]] && agent=$(pgrep -P "$coordinator" -f "dsdoctor agent" | head -1 || true)
    t=$(cpu_ticks "$coordinator") && coordinator_ticks=$t
    [[ -n $agent ]] && t=$(cpu_ticks "$agent") && agent_ticks=$t
    sleep 0.2
  done
  wait "$coordinator" || true
  wall=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN {print b - a}')
  awk -v c="$coordinator_ticks" -v a="$agent_ticks" -v hz="$hz" -v w="$wall" -v n="$ranks" 'BEGIN {
    printf "round: coordinator %.2f s, agent %.2f s of CPU over %.1f s: %.2f %% of one core, %.4f %% per rank\n",
      c / hz, a / hz, w, (c + a) / hz / w * 100, (c + a) / hz / w * 100 / n }'
done
