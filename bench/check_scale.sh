#!/usr/bin/env bash
# Scale of `dsdoctor check` (docs/performance.md, "check at scale"):
#  1. real agents: `check --local N --no-bandwidth` with a fixed agent port (every agent listens on
#     the same port at its own 127.0.0.x, as on a cluster), RUNS times: wall, CPU (coordinator and
#     agents together, all on this machine), peak RSS of the coordinator, and every finding (a
#     healthy local cluster must have none: a false PORT_BLOCKED would show here);
#  2. coordinator only: `check --agents …` against bench/check_sim_agents, which answers as N
#     agents on one port, so the figures are the coordinator's alone (CPU, peak RSS, wall); a second
#     run blocks one node's port from everyone, and its finding must be one PORT_BLOCKED naming it.
# Runs in a private network namespace when it can (unshare -n), else on the host's loopback.
# Usage: bench/check_scale.sh [RUNS] [LOCAL_NODES] [SIM_NODES…]   (defaults: 10 250 1000 4000 16000)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(realpath "${DSD:-build/bin/dsdoctor}")
sim=$(realpath "${SIM:-build/bin/check_sim_agents}")
runs=${1:-10}
local_nodes=${2:-250}
shift $(( $# > 2 ? 2 : $# )) || true
sim_sizes=("$@")
[ ${#sim_sizes[@]} -eq 0 ] && sim_sizes=(1000 4000 16000)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
ns=()
if [ "$(id -u)" = 0 ] && unshare -n true 2>/dev/null; then ns=(unshare -n); fi

real_runs() {
  "${ns[@]}" bash -c '
    ip link set lo up 2>/dev/null || true
    for i in $(seq '"$runs"'); do
      /usr/bin/time -f "%e %U %S %M" -o '"$work"'/time '"$bin"' check --local '"$local_nodes"' --no-bandwidth \
        --agent-port 47000 --json '"$work"'/real.json >/dev/null 2>'"$work"'/err || true
      findings=$(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(len(d[\"findings\"]), \" \".join(sorted(set(f[\"code\"] for f in d[\"findings\"]))))" '"$work"'/real.json)
      echo "$(tail -1 '"$work"'/time) $findings"
    done'
}

echo "== check --local $local_nodes --no-bandwidth --agent-port 47000, $runs runs (wall s, user s, sys s, coordinator+agents max RSS KB, findings)"
real_runs | tee "$work/real.txt"
python3 - "$work/real.txt" <<'PY'
import sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
wall = sorted(float(r[0]) for r in rows)
cpu = sum(float(r[1]) + float(r[2]) for r in rows) / len(rows)
findings = sum(int(r[4]) for r in rows)
print("wall median %.2f s, max %.2f s; CPU %.1f s per run; findings over all runs: %d" % (wall[(len(wall) - 1) // 2], wall[-1], cpu, findings))
PY

for n in "${sim_sizes[@]}"; do
  head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$work/token"
  chmod 600 "$work/token"
  for blocked in -1 7; do
    "$sim" --token-file "$work/token" --blocked "$blocked" > "$work/sim.out" 2>"$work/sim.err" &
    sim_pid=$!
    for _ in $(seq 100); do grep -q port= "$work/sim.out" 2>/dev/null && break; sleep 0.05; done
    port=$(sed -n 's/port=//p' "$work/sim.out")
    # From a file: 16,000 entries exceed the kernel's 128 KiB limit for one argument.
    python3 -c "print('\n'.join(['127.0.0.1:$port']*$n))" > "$work/agents"
    /usr/bin/time -f "%e %U %S %M" -o "$work/time" "$bin" check --launcher attach --agents "@$work/agents" \
      --token-file "$work/token" --no-bandwidth --json "$work/sim.json" >/dev/null 2>"$work/err" || true
    kill "$sim_pid" 2>/dev/null || true
    wait "$sim_pid" 2>/dev/null || true
    read -r wall user sys rss < <(tail -1 "$work/time")
    summary=$(python3 -c "
import json,sys
d=json.load(open(sys.argv[1]))
c=d['connectivity']['agent']
print('%d pairs probed, %d ok; findings: %s' % (c['probed'], c['ok'], '; '.join('%s %s' % (f['code'], ','.join(f['nodes'])) for f in d['findings']) or 'none'))" "$work/sim.json")
    printf "== coordinator only, %d simulated nodes%s: wall %.2f s, CPU %.2f s (user %.2f + sys %.2f), peak RSS %d MiB; %s\n" \
      "$n" "$([ "$blocked" -ge 0 ] && echo ", node-$blocked blocked")" "$wall" "$(echo "$user + $sys" | bc)" "$user" "$sys" $((rss / 1024)) "$summary"
  done
done
