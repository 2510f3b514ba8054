#!/usr/bin/env bash
# Builds the whole test suite with clang's AddressSanitizer and UndefinedBehaviorSanitizer in
# build-asan/ and runs it: every memory error or undefined behaviour in our code fails the step.
# - Leaks are checked too. OpenMPI, hwloc and PMIx keep state until exit by design; their reports are
#   suppressed in scripts/lsan.supp. Those libraries have no frame pointers, so the tests that run
#   programs under mpirun unwind malloc stacks the slow way (a second pass) for the suppressions to
#   match.
# - Deliberate crashes (tests of SIGSEGV reporting) must stay signals: handle_segv=0.
# - The vptr check is off: its type-cache misses probe memory through a pipe, so a test that uses up
#   the descriptors on purpose (the acceptor's EMFILE back-off) gets a false "invalid vptr".
# - Python ranks cannot load a sanitized libdsdoctor_pytrace.so (the sanitizer runtime must be the
#   first library of the process). The tests that trace real PyTorch and DeepSpeed programs therefore
#   run only in the plain build (scripts/test.sh); ASAN_SKIP lists them. So does the PMPI tracer's
#   mpi4py tests (Python again); its tests of C++ MPI programs run, the program sanitized too.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v clang++ >/dev/null; then
  echo "asan: clang++ not found; run scripts/setup.sh" >&2
  exit 1
fi
# -O1 and line tables only: what sanitizer reports need, at about half the compile time of
# RelWithDebInfo. The build type "Asan" adds no flags of its own (CMake knows no CMAKE_CXX_FLAGS_ASAN).
flags="-O1 -gline-tables-only -fsanitize=address,undefined -fno-sanitize=vptr -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
CXX=clang++ CC=clang cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Asan -DDSDOCTOR_BUILD_BENCH=OFF \
  -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
  -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
cmake --build build-asan
./scripts/seed_test_costs.sh build-asan
ASAN_SKIP='^PythonTracerTest/|^TorchE2eTest[./]|^DeepSpeedE2eTest[./]|^RunE2eTest/RunPlacementTest[.]Pytorch|^AnalyzeE2eTest[.]RealMpirunTorch|^MpiTraceE2eTest[.]Mpi4py|^Launchers/MpiRunE2eTest[.]Mpi4py'
MPIRUN='Mpirun|MpiBackend|Mpi[A-Z][a-z]*Test|MpiTraceE2eTest|MpiRunE2eTest'
asan="abort_on_error=0:halt_on_error=1:detect_leaks=1:handle_segv=0:detect_stack_use_after_return=0"
export LSAN_OPTIONS="suppressions=$PWD/scripts/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
ASAN_OPTIONS="$asan" ctest --test-dir build-asan -j2 -E "$ASAN_SKIP|$MPIRUN" --output-on-failure
ASAN_OPTIONS="$asan:fast_unwind_on_malloc=0" ctest --test-dir build-asan -j2 -R "$MPIRUN" -E "$ASAN_SKIP" \
  --output-on-failure
