#!/usr/bin/env bash
# The all-reduce probe on Gloo (synchronous pairs, as `check` runs it) against MPI_Allreduce over
# OpenMPI's TCP transport, on the same ranks and sizes, alternating runs. Prints, per rank count, the
# median time per size of each backend and their ratio (goal: Gloo ≤ 1.1× MPI at every size).
# Usage: bench/allreduce_vs_mpi.sh [RUNS] [RANKS...]     (defaults: 5 runs, 2 and 4 ranks)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${BENCH:-$PWD/build/bin/allreduce_bench}
runs=${1:-5}
shift || true
[ $# -gt 0 ] && ranks=("$@") || ranks=(2 4)
sizes=${SIZES:-8-64M}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
work=$(mktemp -d /tmp/dsdoctor-allreduce-vs-mpi.XXXXXX)
trap 'rm -rf "$work"' EXIT
mpi=(mpirun --oversubscribe --bind-to none -np)
for n in "${ranks[@]}"; do
  for r in $(seq "$runs"); do
    rm -rf "$work/store" && mkdir "$work/store"
    "${mpi[@]}" "$n" --mca btl tcp,self "$bin" --backend gloo --sizes "$sizes" --store "$work/store" \
      >"$work/gloo-$n-$r.txt"
    "${mpi[@]}" "$n" --mca btl tcp,self "$bin" --backend mpi --sizes "$sizes" >"$work/mpi-$n-$r.txt"
  done
  python3 - "$work" "$n" "$runs" <<'PY'
import statistics, sys
work, n, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
def times(backend):
    per_size, mode = {}, ""
    for r in range(1, runs + 1):
        for line in open(f"{work}/{backend}-{n}-{r}.txt"):
            if line.startswith("# ") and "all-reduce" in line:
                mode = line[2:].split(" all-reduce")[0]
            f = line.split()
            if len(f) >= 8 and f[0].isdigit():
                per_size.setdefault(int(f[0]), []).append(float(f[4]))
                assert f[7] == "0", f"{backend} {n} ranks: wrong elements at {f[0]} B"
    return mode, {s: statistics.median(v) for s, v in per_size.items()}
gmode, g = times("gloo")
mmode, m = times("mpi")
print(f"# {n} ranks, median of {runs} runs: {gmode} vs {mmode}")
print(f"{'size (B)':>10} {'gloo (us)':>11} {'mpi (us)':>11} {'ratio':>7}")
worst = 0
for s in sorted(g):
    ratio = g[s] / m[s]
    worst = max(worst, ratio)
    print(f"{s:>10} {g[s]:>11.1f} {m[s]:>11.1f} {ratio:>7.2f}")
print(f"# worst ratio {worst:.2f}")
PY
done
