#!/usr/bin/env bash
# Per-call cost of the PMPI tracer (docs/performance.md): bench/mpi_call_bench under mpirun -np 2
# (shared memory), plain, with libdsdoctor-pmpi.so preloaded but no trace dir (tracing off), and
# tracing into a trace dir. ROUNDS runs of each, interleaved; prints the medians.
# Usage: bench/pmpi_cost.sh [BUILD_DIR] [ROUNDS]
set -euo pipefail
build=${1:-build}
rounds=${2:-5}
lib=$build/lib/dsdoctor/libdsdoctor-pmpi.so
bin=$build/bin/mpi_call_bench
[[ -x $bin && -f $lib ]] || { echo "pmpi_cost: build mpi_call_bench and dsdoctor_pmpi first" >&2; exit 2; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
root=(); [[ $(id -u) -eq 0 ]] && root=(--allow-run-as-root)
run() {  # $1 label, rest: extra mpirun args
  local label=$1; shift
  mpirun "${root[@]}" --oversubscribe -np 2 --bind-to none "$@" "$bin" 200000 | sed "s/^/$label /"
}
for ((i = 0; i < rounds; i++)); do
  run plain
  run preloaded_off -x LD_PRELOAD="$lib"
  rm -f "$dir"/rank-*.trace
  run traced -x LD_PRELOAD="$lib" -x DSDOCTOR_TRACE_DIR="$dir"
done | python3 -c '
import sys, statistics, collections
v = collections.defaultdict(list)
for line in sys.stdin:
    label, name, ns, _ = line.split()
    v[(name, label)].append(float(ns))
for (name, label), xs in sorted(v.items()):
    runs = " ".join("%.1f" % x for x in xs)
    print("%-28s %-14s median %9.1f ns   runs: %s" % (name, label, statistics.median(xs), runs))
'
