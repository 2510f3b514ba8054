#!/usr/bin/env bash
# CPU use of the live view while nothing changes on screen (docs/performance.md): the hung 4-rank
# rank0_only_checkpoint job under `dsdoctor run --tui` (2 simulated nodes, in a private tmux), a
# viewer attached to it (`dsdoctor tui --attach`), and a replay parked at the end of the recording.
# Usage: bench/tui_idle_cpu.sh [BUILD_DIR]   (SECS=10: the measuring window)
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
secs=${SECS:-10}
tmp=$(mktemp -d)
sock="dsd-idle-$$"
tmux_() { tmux -L "$sock" "$@"; }
cleanup() {
  tmux_ kill-server 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT
hz=$(getconf CLK_TCK)
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }  # utime + stime
# CPU percent of the processes in "$@" over the window.
measure() {
  local before=0 after=0 p
  for p in "$@"; do before=$((before + $(ticks "$p"))); done
  sleep "$secs"
  for p in "$@"; do after=$((after + $(ticks "$p"))); done
  awk -v d=$((after - before)) -v hz="$hz" -v s="$secs" 'BEGIN { printf "%.2f%%", 100 * d / hz / s }'
}
wait_screen() {  # session word
  for _ in $(seq 150); do
    tmux_ capture-pane -p -t "$1" | grep -q "$2" && return 0
    sleep 0.2
  done
  echo "timed out waiting for '$2' in $1" >&2
  tmux_ capture-pane -p -t "$1" >&2
  return 1
}

tmux_ new-session -d -s run -x 100 -y 30 "$build/bin/dsdoctor run --tui --local 2 --slots 2 --log-dir $tmp/logs -- $build/bin/rank0_only_checkpoint"
wait_screen run COLLECTIVE_MISMATCH
sleep 1
run_pid=$(pgrep -n -f "dsdoctor run --tui --local 2 --slots 2 --log-dir $tmp/logs")
agents=$(pgrep -P "$run_pid" -f "dsdoctor agent" | tr '\n' ' ')
echo "window: ${secs}s, 2 nodes x 2 ranks, hung (rank 0 in save_checkpoint's barrier)"
echo "dsdoctor run --tui (coordinator):      $(measure "$run_pid")"
# shellcheck disable=SC2086
echo "its 2 agents (sampling every 200 ms):  $(measure $agents)"

tmux_ new-session -d -s attach -x 100 -y 30 "$build/bin/dsdoctor tui --attach $tmp/logs"
wait_screen attach COLLECTIVE_MISMATCH
viewer_pid=$(pgrep -n -f "dsdoctor tui --attach $tmp/logs")
echo "dsdoctor tui --attach (viewer):        $(measure "$viewer_pid")"

tmux_ new-session -d -s replay -x 100 -y 30 "$build/bin/dsdoctor tui --replay $tmp/logs --at 100000"
wait_screen replay COLLECTIVE_MISMATCH
replay_pid=$(pgrep -n -f "dsdoctor tui --replay $tmp/logs")
echo "dsdoctor tui --replay (at its end):    $(measure "$replay_pid")"
echo "events.jsonl so far: $(wc -c < "$tmp/logs/events.jsonl") bytes, $(wc -l < "$tmp/logs/events.jsonl") events"
tmux_ send-keys -t run q
sleep 4
