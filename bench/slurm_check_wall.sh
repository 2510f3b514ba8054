#!/usr/bin/env bash
# `dsdoctor check` through Slurm (docs/performance.md, "check through Slurm"): on the namespace Slurm
# cluster of tests/e2e/slurm_cluster.sh (slurmctld, one slurmd and munged per node, each node its own
# network, UTS and mount namespace), the wall time of
#   inside   salloc -N N --ntasks-per-node=1 dsdoctor check --no-bandwidth  (srun's agent step to report)
#   outside  dsdoctor check --slurm-args "-N N" --no-bandwidth              (salloc asked for by dsdoctor)
#   local    dsdoctor check --local N --no-bandwidth                        (the local launcher, no Slurm)
# RUNS times each, for each node count. Needs root and namespaces (as the e2e test).
# Usage: bench/slurm_check_wall.sh [RUNS] [NODES…]   (defaults: 3 4 24)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(realpath "${DSD:-build/bin/dsdoctor}")
runs=${1:-3}
shift $(( $# > 0 ? 1 : 0 )) || true
sizes=("$@")
[ ${#sizes[@]} -eq 0 ] && sizes=(4 24)
thresh=$(cat /proc/sys/net/ipv4/neigh/default/gc_thresh3 2> /dev/null || echo 1024)
for n in "${sizes[@]}"; do
  # Every node's ARP entries count against this one kernel's neighbour table.
  if (( n * (n - 1) > thresh * 3 / 4 )); then
    echo "$n nodes: skipped: they need ~$((n * (n - 1))) neighbour entries of this kernel's $thresh (gc_thresh3)" >&2
    continue
  fi
  KEEP="$(pwd):$(dirname "$(dirname "$bin")")" DSD="$bin" RUNS="$runs" N="$n" \
    bash tests/e2e/slurm_cluster.sh "dsdbench$$" "$n" 2 -- bash -c '
      t() { local s e; s=$(date +%s.%N); "$@" > /dev/null 2>&1 || echo "  (exit $?: $*)" >&2; e=$(date +%s.%N); echo "$e - $s" | bc; }
      for kind in inside outside local; do
        times=()
        for i in $(seq "$RUNS"); do
          case $kind in
            inside) times+=("$(t salloc -N "$N" --ntasks-per-node=1 "$DSD" check --no-bandwidth)");;
            outside) times+=("$(t "$DSD" check --slurm-args "-N $N --ntasks-per-node=1" --no-bandwidth)");;
            local) times+=("$(t "$DSD" check --local "$N" --no-bandwidth)");;
          esac
        done
        printf "%s nodes, %-7s wall s: %s\n" "$N" "$kind" "${times[*]}"
      done' 2>&1 | grep -E "nodes,|exit"
done
