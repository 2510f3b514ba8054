#!/usr/bin/env bash
# GPU checks, for a machine with NVIDIA GPUs (CI has none): NCCL found and its bootstrap, the real
# NCCL communicator test, then the NCCL all-reduce probe across every GPU with busbw printed.
# Writes its logs to ${OUT:-.}/gpu_check.log. Usage: scripts/gpu_check.sh [SIZES]
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-.}
sizes=${1:-8-1G}
{
  nvidia-smi -L || true
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DDSDOCTOR_BUILD_TESTS=ON >/dev/null && \
    cmake --build build --target dsdoctor probe_test nccl_allreduce_bench -j "$(nproc)" 2>&1 | tail -n 3
  ./build/bin/dsdoctor report
  ./build/bin/probe_test --gtest_filter='NcclCommunicatorTest.*:RealNccl*:RealCuda*:RealNvml*'
  ./build/bin/nccl_allreduce_bench --sizes "$sizes"
} 2>&1 | tee "$out/gpu_check.log"
