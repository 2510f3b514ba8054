#!/usr/bin/env bash
# An agent under unauthenticated load (docs/performance.md, "Agent under hostile connections").
# It starts 4 agents in a private network namespace and times a normal `check --launcher attach`
# against them, first quiet and then while node-0 holds 1,000 idle connections and takes 100
# frames of 16 MiB sent before any hello (half behind a plaintext dsdoctor header, half behind a
# TLS record header). It reports node-0's peak and current RSS. Then one address (127.0.0.9)
# churns one-byte connections unthrottled (hostile_client.py churn: 2 processes, connect, 1 byte,
# reset) at node-0 and at a running job's viewer port: `check` must still succeed 10 times in 10
# (the same findings as quiet) and `tui --attach --dump` 5 times in 5 (the per-source limits of
# common/tls_link.h; before them 6 checks in 10 failed).
# Needs root (unshare -n). Usage: bench/agent_preauth.sh [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(realpath "${DSD:-build/bin/dsdoctor}")
hostile=$(realpath tests/e2e/hostile_client.py)
runs=${1:-5}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
unshare -n bash -c "
  set -e
  ip link set lo up
  ulimit -n 8192
  umask 077; head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > $dir/token
  pids=
  for i in 2 3 4 5; do
    $bin agent --listen 127.0.0.\$i:47700 --name node-\$((i-2)) --token-file $dir/token > $dir/a\$i.out 2> $dir/a\$i.err &
    pids=\"\$pids \$!\"
  done
  for i in \$(seq 100); do [ \$(cat $dir/a*.out | grep -c READY) -eq 4 ] && break; sleep 0.05; done
  A=\$(echo \$pids | cut -d' ' -f1)
  agents=127.0.0.2:47700,127.0.0.3:47700,127.0.0.4:47700,127.0.0.5:47700
  check() {
    s=\$(date +%s%N)
    $bin check --launcher attach --agents \$agents --token-file $dir/token --sizes 4K,1M --p2p-seconds 0.1 \
      --json /dev/null > /dev/null 2>&1 && rc=0 || rc=\$?
    e=\$(date +%s%N); echo \$(( (e - s) / 1000000 ))
    # On one machine all agents share a hostname: exit 1 (DUPLICATE_HOSTNAME) is the expected verdict.
    [ \$rc -le 1 ] || echo \"check exit \$rc\" >&2
  }
  rss() { awk '/VmRSS/ {r=\$2} /VmHWM/ {h=\$2} END {printf \"%.1f MiB now, %.1f MiB peak\", r/1024, h/1024}' /proc/\$A/status; }
  echo \"node-0 RSS before: \$(rss)\"
  for i in \$(seq $runs); do check; done > $dir/quiet
  python3 $hostile flood --to 127.0.0.2:47700 --idle 1000 --oversized 100 --mix-tls --hold 600 > $dir/flood.out 2>&1 &
  F=\$!
  for i in \$(seq 600); do grep -q flood-ready $dir/flood.out && break; sleep 0.05; done
  echo \"flood: \$(cat $dir/flood.out | head -1)\"
  for i in \$(seq $runs); do check; done > $dir/loaded
  echo \"node-0 RSS under load: \$(rss)\"
  kill \$F; wait \$F 2>/dev/null || true
  kill -0 \$A && echo 'node-0 still up'
  echo \"node-0 refusals logged: \$(grep -c 'refused connection' $dir/a2.err), summaries: \$(grep -c 'more unauthenticated' $dir/a2.err || true)\"

  # Churn from one address. A check succeeds when its report has the quiet run's errors (the
  # churn takes both cores, so a bandwidth warning is an honest measurement, not a failure).
  codes() { python3 -c 'import json,sys; print(\" \".join(sorted(f[\"code\"] for f in json.load(open(sys.argv[1]))[\"findings\"] if f[\"severity\"] == \"error\")))' \$1; }
  $bin check --launcher attach --agents \$agents --token-file $dir/token --sizes 4K --p2p-seconds 0.1 --json $dir/q.json > /dev/null 2>&1 || true
  want=\$(codes $dir/q.json)
  # churn_start TO OUT: one address churning at TO until churn_stop; its rate goes to OUT.
  churn_start() {
    python3 $hostile churn --to \$1 --source 127.0.0.9 --procs 2 --seconds 600 > \$2 2>&1 &
    C=\$!
    for i in \$(seq 100); do grep -q churn-ready \$2 && break; sleep 0.05; done
    sleep 1
  }
  churn_stop() { kill \$C; wait \$C 2>/dev/null || true; echo \"churn at \$1: \$(tail -1 \$2)\"; }
  churn_start 127.0.0.2:47700 $dir/churn.out
  ok=0
  for i in \$(seq 10); do
    rm -f $dir/c.json
    timeout 120 $bin check --launcher attach --agents \$agents --token-file $dir/token --sizes 4K --p2p-seconds 0.1 \
      --json $dir/c.json > /dev/null 2>&1 || true
    got=\$([ -s $dir/c.json ] && codes $dir/c.json || echo 'no report')
    if [ \"\$got\" = \"\$want\" ]; then ok=\$((ok+1)); else echo \"check under churn: \$got (quiet: \$want)\" >&2; fi
  done
  echo \"check under an unthrottled churn from one address: \$ok of 10 with the quiet run's errors (\$want)\"
  churn_stop node-0 $dir/churn.out

  # The viewer port of a running job, churned the same way.
  mkdir -p $dir/run
  $bin run --local 1 --slots 1 --quiet --serve 127.0.0.6:47800 --log-dir $dir/run -- sleep 300 > /dev/null 2>&1 &
  R=\$!
  for i in \$(seq 200); do [ -s $dir/run/viewer.token ] && break; sleep 0.05; done
  churn_start 127.0.0.6:47800 $dir/churn2.out
  ok=0
  for i in \$(seq 5); do
    timeout 60 $bin tui --attach 127.0.0.6:47800 --token-file $dir/run/viewer.token --dump > $dir/v.out 2>&1 && ok=\$((ok+1)) || tail -2 $dir/v.out >&2
  done
  echo \"viewer attaches under the same churn: \$ok of 5\"
  churn_stop 'the viewer port' $dir/churn2.out
  kill \$R; wait \$R 2>/dev/null || true
  kill \$pids; wait 2>/dev/null || true
"
stats() { sort -n "$1" | awk '{a[NR]=$1} END {printf "min %.3f s, median %.3f s, max %.3f s over %d runs", a[1]/1000, a[int((NR+1)/2)]/1000, a[NR]/1000, NR}'; }
q=$(sort -n "$dir/quiet" | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
l=$(sort -n "$dir/loaded" | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
echo "check, quiet:                     $(stats "$dir/quiet")"
echo "check, under hostile connections: $(stats "$dir/loaded")"
awk -v q="$q" -v l="$l" 'BEGIN {printf "median ratio loaded/quiet: %.2f\n", l/q}'
