#!/usr/bin/env bash
# GPU check of `runnercheck fuzz`, ready to run as one command on a machine with one
# CUDA GPU (or more), in under 8 minutes:
#
#   bash benchmarks/gpu_check.sh          # logs in $OUT if set, else in a temp directory
#
# What it exercises on ONE GPU (NCCL refuses two ranks on the same device):
#   * world size 2, --device cuda: CUDA tensors generated on rank 0's GPU go through the
#     reference broadcast over gloo (host copies), are rebuilt as CUDA tensors on rank 1
#     and compared with their device type (tests/fuzz/test_cuda.py);
#   * world size 1 on NCCL: an NCCL communicator is built and every dtype is broadcast
#     through it (the dtype probe), then inputs round-trip on that rank;
#   * with 2+ GPUs, world size 2 on NCCL as well;
#   * the round-trip benchmark with --device cuda (benchmarks/bench_fuzz.py).
# The tests fail instead of skipping when torch sees no CUDA device.
set -euo pipefail
cd "$(dirname "$0")/.."
LOGS="${OUT:-$(mktemp -d -t runnercheck-gpu-XXXXXX)}"
mkdir -p "$LOGS"
VENV="${GPU_CHECK_VENV:-${TMPDIR:-/tmp}/runnercheck-gpu-venv}"
exec > >(tee "$LOGS/gpu_check.log") 2>&1

echo "== machine"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv || echo "nvidia-smi not found"

echo "== venv $VENV (system site packages: a CUDA torch already installed is reused)"
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv --system-site-packages "$VENV"
fi
PY="$VENV/bin/python"
if ! "$PY" -c 'import sys, torch; sys.exit(0 if torch.version.cuda and torch.cuda.is_available() else 1)' 2>/dev/null; then
  echo "installing a CUDA build of torch from the package index"
  "$PY" -m pip install --quiet "torch>=2.2"
fi
# the project's constraints, except torch (they pin the CPU build)
grep -v -i '^torch' constraints.txt > "$LOGS/constraints-gpu.txt"
"$PY" -m pip install --quiet -c "$LOGS/constraints-gpu.txt" -e '.[dev]'
"$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "devices", torch.cuda.device_count())'

echo "== CUDA/NCCL tests"
RUNNERCHECK_REQUIRE_CUDA=1 timeout 300 "$PY" -m pytest -q -rs -p no:cacheprovider \
  tests/fuzz/test_cuda.py tests/test_broadcast.py --junitxml "$LOGS/gpu_tests.xml"

echo "== round-trip benchmark on CUDA"
timeout 150 "$PY" benchmarks/bench_fuzz.py --device cuda --examples 200 --reps 3 \
  --json "$LOGS/bench_fuzz_cuda.json"
echo "== done: logs in $LOGS"
