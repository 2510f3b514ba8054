#!/usr/bin/env bash
# Installs every build, test and runtime dependency of dsdoctor on a fresh Debian 12 machine.
# As root it runs apt-get itself; otherwise it prints the exact command and exits non-zero.
set -euo pipefail

APT_PACKAGES=(
  # toolchain
  build-essential cmake ninja-build pkg-config clang libclang-rt-14-dev
  # libraries found with find_package
  libspdlog-dev libfmt-dev nlohmann-json3-dev libcli11-dev libncurses-dev
  libgtest-dev libgmock-dev libbenchmark-dev libgloo-dev libopenmpi-dev openmpi-bin
  # tools the tests drive for real
  iproute2 iptables procps util-linux openssh-server openssh-client tmux gdb
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
