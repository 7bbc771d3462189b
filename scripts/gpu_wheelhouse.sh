#!/usr/bin/env bash
# Download the wheels the GPU check needs and the GPU machine lacks, on a machine with
# the package index, into an ignored folder that travels with the working tree:
#
#   bash scripts/gpu_wheelhouse.sh                  # CPython 3.12, manylinux x86-64 -> .whl/
#   bash scripts/gpu_wheelhouse.sh --python PY --dest DIR   # for that interpreter instead
#   bash scripts/gpu_wheelhouse.sh --all            # also libcst and mypy (check, migrate)
#
# What is needed: benchmarks/gpu_requirements.py (runnercheck's dependencies and pytest,
# without the static tools). What the machine has: scripts/gpu_machine_packages.txt, or,
# with --python, what that interpreter has installed. The wheels of the missing
# distributions are resolved with their dependencies; a dependency the machine already
# has is kept too, as a fallback in case its version there is too old (pip prefers the
# installed one when it satisfies). Prints every wheel, why it is there, and the total.
set -euo pipefail
cd "$(dirname "$0")/.."

DEST=.whl
PYTHON=""
ALL=()
while [ $# -gt 0 ]; do
  case "$1" in
    --dest) DEST="$2"; shift 2 ;;
    --python) PYTHON="$2"; shift 2 ;;
    --all) ALL=(--all); shift ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "gpu_wheelhouse.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

WORK=$(mktemp -d -t runnercheck-wheelhouse-XXXXXX)
trap 'rm -rf "$WORK"' EXIT
if [ -n "$PYTHON" ]; then
  python3 benchmarks/gpu_requirements.py present-of "$PYTHON" > "$WORK/present.txt"
  DOWNLOAD=("$PYTHON" -m pip download)
  TARGET="$("$PYTHON" -c 'import sys; print("CPython %d.%d" % sys.version_info[:2])') (this machine)"
else
  cp scripts/gpu_machine_packages.txt "$WORK/present.txt"
  PLATFORMS=()
  for tag in manylinux1 manylinux2010 manylinux2014 manylinux_2_17 manylinux_2_24 \
             manylinux_2_27 manylinux_2_28 manylinux_2_31 manylinux_2_34 manylinux_2_35; do
    PLATFORMS+=(--platform "${tag}_x86_64")
  done
  DOWNLOAD=(python3 -m pip download --python-version 3.12 --implementation cp --abi cp312
            "${PLATFORMS[@]}")
  TARGET="CPython 3.12, manylinux x86-64 (the GPU machine)"
fi
python3 benchmarks/gpu_requirements.py missing "${ALL[@]}" --present "$WORK/present.txt" \
  > "$WORK/missing.txt"

mkdir -p "$DEST"
rm -f "$DEST"/*.whl
echo "wheelhouse $DEST for $TARGET"
if [ ! -s "$WORK/missing.txt" ]; then
  echo "nothing missing: the machine has every distribution the GPU check needs"
  exit 0
fi
echo "missing there: $(tr '\n' ' ' < "$WORK/missing.txt")"
"${DOWNLOAD[@]}" --quiet --only-binary=:all: --dest "$WORK/wheels" -r "$WORK/missing.txt"
mv "$WORK"/wheels/*.whl "$DEST"/

python3 - "$DEST" "$WORK/present.txt" <<'EOF'
import sys
from pathlib import Path

sys.path.insert(0, ".")
from benchmarks.gpu_requirements import normalize, read_list

dest, present = Path(sys.argv[1]), read_list(Path(sys.argv[2]))
total = 0
for wheel in sorted(dest.glob("*.whl")):
    size = wheel.stat().st_size
    total += size
    why = "fallback (on the machine; used if its version there is too old)" if normalize(
        wheel.name.split("-")[0]) in present else "missing"
    print(f"  {wheel.name}  {size / 1e6:.2f} MB  {why}")
print(f"total {total / 1e6:.2f} MB in {dest}")
EOF
