#!/usr/bin/env bash
# GPU checks, for a machine with NVIDIA GPUs (CI has none): NCCL found and its bootstrap, the real
# NCCL communicator test, then the NCCL all-reduce probe across every GPU with busbw printed, then
# the same probe with dsdoctor's NCCL profiler plugin loaded: the ring must hold NCCL's collectives,
# completed by their kernels' channel events (docs/trace.md, "The NCCL profiler plugin"), and the
# plugin's cost shows as the difference in busbw.
# Writes its logs to ${OUT:-.}/gpu_check.log. Usage: scripts/gpu_check.sh [SIZES]
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-.}
sizes=${1:-8-1G}
{
  nvidia-smi -L || true
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DDSDOCTOR_BUILD_TESTS=ON >/dev/null && \
    cmake --build build --target dsdoctor probe_test nccl_allreduce_bench dsdoctor_nccl_profiler -j "$(nproc)" 2>&1 | tail -n 3
  ./build/bin/dsdoctor report
  ./build/bin/probe_test --gtest_filter='NcclCommunicatorTest.*:RealNccl*:RealCuda*:RealNvml*'
  ./build/bin/nccl_allreduce_bench --sizes "$sizes"
  echo "== with the NCCL profiler plugin (trace in $out/nccl-plugin-trace)"
  rm -rf "$out/nccl-plugin-trace" && mkdir -p "$out/nccl-plugin-trace"
  NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV NCCL_PROFILER_PLUGIN="$PWD/build/lib/dsdoctor/libdsdoctor-nccl-profiler.so" \
    DSDOCTOR_TRACE_DIR="$out/nccl-plugin-trace" RANK=0 ./build/bin/nccl_allreduce_bench --sizes "$sizes" 2>&1 |
    grep -E "PROFILER|Profiler|busbw|^ *[0-9]" || true
  # The ring, read by its documented layout (docs/trace.md): records begun, ops, states.
  python3 - "$out/nccl-plugin-trace/rank-0.trace" <<'PY' || echo "plugin check: FAILED (no readable trace)"
import collections, struct, sys
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"DSDTRACE", "not a trace"
cap = struct.unpack_from("<I", data, 20)[0]
begun = struct.unpack_from("<Q", data, 128)[0]
ops, states = collections.Counter(), collections.Counter()
for i in range(max(0, begun - cap), begun):
    rec = 4096 + (i % cap) * 128
    op, dtype, red, state = struct.unpack_from("<BBBB", data, rec + 72)
    ops[op] += 1
    states[state] += 1
print("plugin check: %d records begun; ops %s; states %s (3 = completed)" % (begun, dict(ops), dict(states)))
print("plugin check:", "ok" if begun > 0 and states.get(3, 0) > 0 else "FAILED")
PY
} 2>&1 | tee "$out/gpu_check.log"
