#!/usr/bin/env bash
# Wall time of `dsdoctor check --local 8` in a private network namespace: healthy, and with one
# DROP rule. The DROP run must stay bounded by one connect timeout (pairs are probed in
# parallel), not N of them. Needs root (unshare -n, iptables). Usage: bench/check_wall.sh [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${DSD:-build/bin/dsdoctor}
runs=${1:-5}
timeout_ms=2000
measure() {  # $1 = iptables rule or empty, $2 = extra check arguments
  unshare -n bash -c "
    ip link set lo up
    ${1:+iptables -A OUTPUT $1}
    for i in \$(seq $runs); do
      s=\$(date +%s%N); $bin check --local 8 --agent-port 47000 --no-bandwidth --connect-timeout-ms $timeout_ms ${2:-} --json /dev/null >/dev/null 2>&1 || true
      e=\$(date +%s%N); echo \$(( (e - s) / 1000000 ))
    done" | sort -n | awk '{a[NR]=$1} END {printf "min %.3f s, median %.3f s, max %.3f s over %d runs\n", a[1]/1000, a[int((NR+1)/2)]/1000, a[NR]/1000, NR}'
}
echo "check --local 8, healthy:            $(measure '')"
echo "check --local 8, one DROP rule:      $(measure '-s 127.0.0.3 -d 127.0.0.4 -p tcp --dport 47000 -j DROP')"
echo "check --local 8, node-2 fully DROPped: $(measure '-d 127.0.0.4 -p tcp --dport 47000 -j DROP')"
echo "check --local 8 --launcher mpirun:   $(measure '' '--launcher mpirun')"
echo "(connect timeout ${timeout_ms} ms)"
