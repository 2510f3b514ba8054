#!/usr/bin/env bash
# The all-reduce probe on Gloo (synchronous pairs, as `check` runs it) against MPI_Allreduce over
# OpenMPI's TCP transport, side by side in one run: the same ranks alternate the two size by size,
# ROUNDS times, so that a slow spell of this shared machine falls on both. Prints, per rank count,
# each backend's median time per size and the median of the rounds' ratios (goal: Gloo ≤ 1.1× MPI
# at every size). Exits non-zero if either backend sums a wrong element.
# Usage: bench/allreduce_vs_mpi.sh [ROUNDS] [RANKS...]     (defaults: 7 rounds, 2 and 4 ranks)
# SIZES (default 8-64M) and EXTRA (more allreduce_bench flags, e.g. "--budget 1G") from the environment.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${BENCH:-$PWD/build/bin/allreduce_bench}
rounds=${1:-7}
shift || true
[ $# -gt 0 ] && ranks=("$@") || ranks=(2 4)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
work=$(mktemp -d /tmp/dsdoctor-allreduce-vs-mpi.XXXXXX)
trap 'rm -rf "$work"' EXIT
for n in "${ranks[@]}"; do
  rm -rf "$work/store" && mkdir "$work/store"
  # shellcheck disable=SC2086 # EXTRA is a list of flags
  mpirun --oversubscribe --bind-to none -np "$n" --mca btl tcp,self "$bin" --backend both \
    --sizes "${SIZES:-8-64M}" --store "$work/store" --rounds "$rounds" ${EXTRA:-}
done
