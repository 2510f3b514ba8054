#!/usr/bin/env bash
# Time to finding of `dsdoctor run` on an MPI program (docs/performance.md): tests/mpi/mpi_scenarios
# under `dsdoctor run --local 2 --slots 2` (4 ranks; mpirun starts them through rank-exec, the PMPI
# tracer in each), each fault ROUNDS times. Prints, per scenario, the median seconds from the start
# of `dsdoctor run` (agents, mpirun and MPI_Init included) to the finding's line, to the end of the
# run (the report printed, mpirun gone), and how long the culprit had been blocked in the call the
# finding names when it was made (the finding's own "for N s"; none for an exit).
# Usage: bench/mpi_run_latency.sh [BUILD_DIR] [ROUNDS] [AGENT_LAUNCHER]
set -euo pipefail
build=${1:-build}
rounds=${2:-5}
launcher=${3:-local}
bin=$build/bin
[[ -x $bin/dsdoctor && -x $bin/mpi_scenarios ]] || { echo "mpi_run_latency: build dsdoctor and mpi_scenarios first" >&2; exit 2; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
python3 - "$bin" "$rounds" "$launcher" "$dir" <<'PY'
import re, statistics, subprocess, sys, time
bin_dir, rounds, launcher, tmp = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
cases = [("count_mismatch", "COLLECTIVE_MISMATCH"), ("skip_barrier", "COLLECTIVE_MISMATCH"),
         ("send_deadlock", "P2P_DEADLOCK"), ("kill", "RANK_EXITED"), ("bcast_vs_allreduce", "COLLECTIVE_MISMATCH")]
print(f"{'scenario':20} {'finding':20} {'to finding s':>12} {'to end s':>9} {'blocked s':>9}")
for mode, code in cases:
    found, ended, blocked = [], [], []
    for i in range(rounds):
        cmd = [f"{bin_dir}/dsdoctor", "run", "--local", "2", "--slots", "2", "--launcher", launcher,
               "--log-dir", f"{tmp}/{mode}-{i}", "--hang-after", "2", "--timeout", "3",
               "--mpirun-opts", "--mca btl tcp,self", "--", f"{bin_dir}/mpi_scenarios", mode]
        start = time.monotonic()
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1)
        at = None
        in_finding = False
        waits = []
        for line in p.stdout:
            if line.startswith(("error ", "warning ")):
                in_finding = line.startswith(("error " + code, "warning " + code))
                if in_finding and at is None:
                    at = time.monotonic() - start
            elif in_finding:
                waits += [float(x) for x in re.findall(r" for ([0-9.]+) s", line)]
        if waits:
            blocked.append(max(waits))
        p.wait()
        ended.append(time.monotonic() - start)
        if at is not None:
            found.append(at)
    f = f"{statistics.median(found):.2f}" if found else "none"
    b = f"{statistics.median(blocked):.2f}" if blocked else "-"
    print(f"{mode:20} {code:20} {f:>12} {statistics.median(ended):9.2f} {b:>9}  ({len(found)}/{rounds} found)")
PY
