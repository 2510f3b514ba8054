#!/usr/bin/env bash
# Per-call cost of the PMPI tracer (docs/performance.md): bench/mpi_call_bench under mpirun -np 2,
# plain, with libdsdoctor-pmpi.so preloaded but no trace dir (tracing off), and tracing into a trace
# dir; ROUNDS rounds, the variants interleaved within each round so that the machine's drift falls
# on all of them alike.
# - shm: Open MPI's default transports (shared memory between the two ranks): every loop.
# - tcp: `--mca pml ob1 --mca btl self,tcp`, the ranks talking over the kernel's TCP stack as ranks on
#   two nodes do: the 1 KiB all-reduce loop only.
# Prints, per loop and transport, each variant's median and range, and the traced/plain ratio of
# each round (paired) as a median and range: a ratio whose range holds 1.0 is no measurable change.
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
tcp=(--mca pml ob1 --mca btl self,tcp)
run() {  # $1 round, $2 transport, $3 variant; rest: mpirun args, then the program's
  local round=$1 transport=$2 variant=$3; shift 3
  mpirun "${root[@]}" --oversubscribe -np 2 --bind-to none "$@" | sed "s/^/$round $transport $variant /"
}
for ((i = 0; i < rounds; i++)); do
  # The order flips every round: on a small VM the second of two back-to-back runs is often slower.
  variants=(plain preloaded_off traced)
  ((i % 2)) && variants=(traced preloaded_off plain)
  for variant in "${variants[@]}"; do
    env=()
    [[ $variant != plain ]] && env+=(-x LD_PRELOAD="$lib")
    [[ $variant == traced ]] && env+=(-x DSDOCTOR_TRACE_DIR="$dir")
    rm -f "$dir"/rank-*.trace
    run "$i" shm "$variant" "${env[@]}" "$bin" 2000000
    # Over TCP a call takes ~10 us: 10x the calls, so each run lasts a second or more.
    [[ $variant != preloaded_off ]] && run "$i" tcp "$variant" "${tcp[@]}" "${env[@]}" "$bin" 1000000 world
  done
done | python3 -c '
import sys, statistics, collections
ns = collections.defaultdict(dict)  # (loop, transport, variant) -> round -> ns per call
for line in sys.stdin:
    rnd, transport, variant, loop, value, _ = line.split()
    ns[(loop, transport, variant)][rnd] = float(value)
def span(xs): return "%.1f-%.1f" % (min(xs), max(xs))
for (loop, transport, variant), by_round in sorted(ns.items()):
    xs = list(by_round.values())
    line = "%-26s %-4s %-14s median %9.1f ns  range %s" % (loop, transport, variant, statistics.median(xs), span(xs))
    plain = ns.get((loop, transport, "plain"), {})
    if variant != "plain" and plain:
        ratios = [by_round[r] / plain[r] for r in by_round if r in plain]
        line += "   vs plain, paired: median %+.2f %% range %+.2f..%+.2f %%" % (
            100 * (statistics.median(ratios) - 1), 100 * (min(ratios) - 1), 100 * (max(ratios) - 1))
    print(line)
'
