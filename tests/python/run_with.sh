#!/usr/bin/env bash
# run_with.sh PYTHON SCRIPT ARGS...: runs SCRIPT under PYTHON when that interpreter has torch; else exits
# 77 (ctest's skip), or fails when DSDOCTOR_REQUIRE_TORCH says every PyTorch must be there.
python=$1
shift
if ! "$python" -c "import torch.distributed" >/dev/null 2>&1; then
  if [[ -n "${DSDOCTOR_REQUIRE_TORCH:-}" ]]; then
    echo "$python cannot import torch.distributed, and DSDOCTOR_REQUIRE_TORCH is set (scripts/setup.sh installs it)" >&2
    exit 1
  fi
  echo "skipped: $python cannot import torch.distributed" >&2
  exit 77
fi
exec "$python" "$@"
