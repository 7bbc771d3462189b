#!/usr/bin/env bash
# The GPU check of runnercheck, as one command on a machine with a CUDA GPU:
#
#   bash benchmarks/gpu_check.sh [--out DIR] [--wheelhouse DIR]
#
# It uses the interpreter that already holds CUDA torch ($PYTHON, else python3) as it
# is: no venv, torch never installed. The working tree goes on PYTHONPATH; whatever the
# check needs and that interpreter lacks is installed into a temporary folder, from
# the wheelhouse (default .whl/, made by scripts/gpu_wheelhouse.sh on a machine with
# the package index) without any network, or from the package index when there is no
# wheelhouse. Then the GPU tests, a fuzz sweep on CUDA and the GPU benchmark run, each
# under a hard timeout, within 8 minutes; benchmarks/gpu_check.py says what each part does.
# Output: DIR (else $OUT, else ./gpu-check-out) gets gpu_check.json, gpu_check.log,
# gpu_tests.xml, gpu_sweep.json and gpu_bench.json; the last line printed is the verdict.
#
#   bash benchmarks/gpu_check.sh --rehearse [--out DIR]
#
# The same on a machine without a GPU (CI runs it): a fresh venv holding only what the
# GPU machine has (torch, numpy, hypothesis, pytest, rich; torch is the CPU build that
# constraints.txt pins), a wheelhouse built by scripts/gpu_wheelhouse.sh for that venv,
# then the check with --no-index installs from it; CUDA tests skip and say so, and the
# benchmark runs --quick on the CPU.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT_DIR=""
WHEELHOUSE=""
REHEARSE=0
while [ $# -gt 0 ]; do
  case "$1" in
    --out) OUT_DIR="$2"; shift 2 ;;
    --wheelhouse) WHEELHOUSE="$2"; shift 2 ;;
    --rehearse) REHEARSE=1; shift ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "gpu_check.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
OUT_DIR="${OUT_DIR:-${OUT:-gpu-check-out}}"
mkdir -p "$OUT_DIR"
OUT_DIR="$(cd "$OUT_DIR" && pwd)"
: > "$OUT_DIR/gpu_check.log"

if [ "$REHEARSE" = 0 ]; then
  PY="${PYTHON:-python3}"
  exec "$PY" benchmarks/gpu_check.py --out "$OUT_DIR" --wheelhouse "${WHEELHOUSE:-.whl}"
fi

# ---- rehearsal: an interpreter with only what the GPU machine has
WORK="$(mktemp -d -t runnercheck-gpu-rehearsal-XXXXXX)"
trap 'rm -rf "$WORK"' EXIT
started=$(date +%s)
{
  echo "== rehearsal venv $WORK/venv: torch (CPU build), numpy, hypothesis, pytest, rich"
  python3 -m venv "$WORK/venv"
  "$WORK/venv/bin/python" -m pip install --quiet --no-compile --disable-pip-version-check \
    -c constraints.txt torch numpy hypothesis pytest rich
  echo "== wheelhouse for that venv (with the package index)"
  bash scripts/gpu_wheelhouse.sh --python "$WORK/venv/bin/python" --dest "$WORK/wheelhouse"
  echo "== rehearsal set up in $(( $(date +%s) - started )) s"
} 2>&1 | grep -v "is ignored: it is neither a file nor a directory" | tee -a "$OUT_DIR/gpu_check.log"
"$WORK/venv/bin/python" benchmarks/gpu_check.py --rehearse --out "$OUT_DIR" \
  --wheelhouse "$WORK/wheelhouse"
