#!/usr/bin/env bash
# dsdoctor's p2p probe against iperf3 on the same link: two nodes of a namespace cluster
# (tests/e2e/netns_cluster.sh, no shaping), node-0 -> node-1, one TCP stream each, SECONDS long.
# Needs root. Usage: bench/p2p_vs_iperf3.sh [SECONDS] [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
export DSD=${DSD:-$PWD/build/bin/dsdoctor}
secs=${1:-2} runs=${2:-3}
tests/e2e/netns_cluster.sh dsdbench 2 -1 0 -- bash -c '
  secs=$1 runs=$2 prefix=dsdbench
  ip netns exec $prefix-n1 iperf3 -s -D -B 198.18.0.11 -p 5201 --pidfile /tmp/dsdbench-iperf3.pid
  sleep 0.3
  for i in $(seq $runs); do
    ip netns exec $prefix-n0 iperf3 -c 198.18.0.11 -B 198.18.0.10 -p 5201 -t $secs -J |
      python3 -c "import json,sys; print(\"iperf3   %.2f Gbit/s\" % (json.load(sys.stdin)[\"end\"][\"sum_received\"][\"bits_per_second\"]/1e9))"
    $DSD check --launcher attach --agents $AGENTS --token-file $TOKEN_FILE --sizes 4K --p2p-seconds $secs --json /tmp/dsdbench.json >/dev/null || true
    python3 -c "import json; d=json.load(open(\"/tmp/dsdbench.json\")); p=[x for x in d[\"bandwidth\"][\"p2p\"] if x[\"from\"]==\"node-0\"][0]; print(\"dsdoctor %.2f Gbit/s\" % p[\"gbit_s\"])"
  done
  kill $(cat /tmp/dsdbench-iperf3.pid); rm -f /tmp/dsdbench-iperf3.pid /tmp/dsdbench.json
' _ "$secs" "$runs"
