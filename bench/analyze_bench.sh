#!/usr/bin/env bash
# `dsdoctor analyze` throughput against `grep -c` over the same files (docs/performance.md):
#   - a run dir of 64 rank logs x 50 MB (rank-<r>.log)
#   - one combined 2 GB log (torchrun [rankN]: prefixes)
# and peak RSS at 200 MB vs 2 GB (it must not grow with the input). Files are written by
# bench/make_training_log.py into a temporary folder (removed at exit); each command runs 3 times
# on a warm page cache and the best time is kept.
# usage: bench/analyze_bench.sh [BUILD_DIR]   (SIZE_SCALE=0.1 for a quick run)
set -euo pipefail
build=${1:-build}
dsd="$build/bin/dsdoctor"
scale=${SIZE_SCALE:-1}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dsd-analyze-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
here=$(dirname "$0")
mb() { /usr/bin/python3 -c "print(int($1 * $scale))"; }

mkdir -p "$tmp/run"
per_rank=$(mb 50)
for r in $(seq 0 63); do /usr/bin/python3 "$here/make_training_log.py" "$tmp/run/rank-$r.log" "$per_rank" --rank "$r" --errors 1; done
/usr/bin/python3 "$here/make_training_log.py" "$tmp/combined.log" "$(mb 2048)" --prefix torchrun --ranks 64
/usr/bin/python3 "$here/make_training_log.py" "$tmp/small.log" "$(mb 200)" --prefix torchrun --ranks 64

best() {  # best wall seconds of 3 runs of "$@" (exit status ignored: analyze exits 1 on findings)
  local b=999999
  for _ in 1 2 3; do
    local s e
    # Not /dev/null: GNU grep stops at the first match when its output is /dev/null.
    s=$(date +%s.%N); "$@" > "$tmp/out" 2>&1 || true; e=$(date +%s.%N)
    b=$(/usr/bin/python3 -c "print(min($b, $e - $s))")
  done
  echo "$b"
}
rss() { /usr/bin/time -f "%M" "$@" 2>&1 > /dev/null | tail -1; }
bytes() { du -cb "$@" | tail -1 | cut -f1; }
row() {  # name bytes seconds
  /usr/bin/python3 -c "import sys; n, b, t = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]); print(f'| {n} | {t:.3f} s | {b / t / 1e6:.0f} MB/s |')" "$1" "$2" "$3"
}

cat "$tmp"/run/*.log "$tmp/combined.log" > /dev/null  # warm the page cache
dir_bytes=$(bytes "$tmp"/run/*.log)
file_bytes=$(bytes "$tmp/combined.log")
echo "run dir: 64 logs, $((dir_bytes / 1000000)) MB; combined file: $((file_bytes / 1000000)) MB"
echo "| command | best of 3 | throughput |"
echo "|---|---|---|"
g1=$(best grep -c "NCCL WARN" "$tmp"/run/*.log); row "grep -c 'NCCL WARN' (run dir)" "$dir_bytes" "$g1"
g2=$(best grep -cE "NCCL WARN|Traceback|Error|error" "$tmp"/run/*.log); row "grep -cE 'NCCL WARN|Traceback|Error|error' (run dir)" "$dir_bytes" "$g2"
a1=$(best "$dsd" analyze "$tmp/run"); row "dsdoctor analyze (run dir)" "$dir_bytes" "$a1"
a1r=$(best env DSDOCTOR_LOG_SCANNER=re2 "$dsd" analyze "$tmp/run"); row "dsdoctor analyze, RE2 pre-scan only (run dir)" "$dir_bytes" "$a1r"
g3=$(best grep -c "NCCL WARN" "$tmp/combined.log"); row "grep -c 'NCCL WARN' (2 GB file)" "$file_bytes" "$g3"
g4=$(best grep -cE "NCCL WARN|Traceback|Error|error" "$tmp/combined.log"); row "grep -cE … (2 GB file)" "$file_bytes" "$g4"
a2=$(best "$dsd" analyze "$tmp/combined.log"); row "dsdoctor analyze (2 GB file)" "$file_bytes" "$a2"
/usr/bin/python3 -c "print(f'ratio to grep -c literal: run dir {$g1 / $a1:.2f}x, file {$g3 / $a2:.2f}x; to grep -cE: run dir {$g2 / $a1:.2f}x, file {$g4 / $a2:.2f}x')"
echo "peak RSS: 200 MB file $(rss "$dsd" analyze "$tmp/small.log") KB, 2 GB file $(rss "$dsd" analyze "$tmp/combined.log") KB, run dir $(rss "$dsd" analyze "$tmp/run") KB"
"$dsd" analyze "$tmp/combined.log" --json | /usr/bin/python3 -c "import json,sys; r=json.load(sys.stdin); print('findings in the 2 GB file:', [(f['code'], f['ranks']) for f in r['findings']])"
