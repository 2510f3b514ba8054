#!/usr/bin/env bash
# Starts N ranks of a program on this machine the way torchrun does (env://: RANK, WORLD_SIZE,
# LOCAL_RANK, LOCAL_SIZE, MASTER_ADDR=127.0.0.1, MASTER_PORT), each rank's output in
# ${LOG_DIR:-./logs}/rank-<r>.log and its trace in the same folder; waits for all and exits with
# the first non-zero exit code, each rank's status in rank-<r>.exit (for `dsdoctor analyze`).
# Ctrl-C ends every rank it started.
#   examples/run_local.sh 4 build/bin/train_healthy --steps 50
set -uo pipefail
n=${1:?usage: run_local.sh N PROGRAM [ARGS...]}
shift
log_dir=${LOG_DIR:-./logs}
mkdir -p "$log_dir"
port=${MASTER_PORT:-$((29500 + RANDOM % 1000))}
pids=()
trap 'kill "${pids[@]}" 2>/dev/null' INT TERM
for ((r = 0; r < n; r++)); do
  RANK=$r LOCAL_RANK=$r WORLD_SIZE=$n LOCAL_SIZE=$n MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    DSDOCTOR_TRACE_DIR="$log_dir" "$@" >"$log_dir/rank-$r.log" 2>&1 &
  pids+=($!)
done
rc=0
for ((r = 0; r < n; r++)); do
  wait "${pids[$r]}"
  code=$?
  echo "$code" >"$log_dir/rank-$r.exit"  # for `dsdoctor analyze`
  echo "rank $r: exit $code (log $log_dir/rank-$r.log)"
  [[ $rc -eq 0 && $code -ne 0 ]] && rc=$code
done
exit $rc
