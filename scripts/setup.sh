#!/usr/bin/env bash
# Create a virtual environment and install runnercheck in it, editable, with the dev extra
# (the fuzz extra's torch, numpy and hypothesis, and the test and lint tools).
#
#   bash scripts/setup.sh              set up (again)
#   bash scripts/setup.sh --if-needed  only when the environment is missing or out of date
#
#   RUNNERCHECK_VENV         where to make it (default: .venv in the repository)
#   RUNNERCHECK_TORCH_INDEX  a package index to take torch from, e.g. PyTorch's CPU wheel
#                            index https://download.pytorch.org/whl/cpu (its 2.13.0+cpu
#                            satisfies the pin); unset, torch comes from your usual index
#
# constraints.txt pins the torch version the tests run against. A version pin does not
# choose a build: on the public index torch 2.13.0 for Linux x86_64 is the CUDA build.
#
# A finished set-up leaves a stamp in the environment: a hash of what it depends on
# (pyproject.toml, constraints.txt, this script, the build backend, RUNNERCHECK_TORCH_INDEX,
# the Python).
# --if-needed skips the set-up while the stamp matches.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${RUNNERCHECK_VENV:-.venv}"
stamp="$venv/.runnercheck-setup"
wanted="$(python3 - "${RUNNERCHECK_TORCH_INDEX:-}" <<'PY'
import hashlib, sys
digest = hashlib.sha256()
for name in ("pyproject.toml", "constraints.txt", "scripts/setup.sh", "build_backend/runnercheck_build.py"):
    with open(name, "rb") as f:
        digest.update(name.encode() + b"\0" + f.read() + b"\0")
digest.update(sys.argv[1].encode() + b"\0" + sys.version.encode())
print(digest.hexdigest())
PY
)"
if [ "${1:-}" = "--if-needed" ] && [ -x "$venv/bin/python" ] && [ -f "$stamp" ] \
  && [ "$(cat "$stamp")" = "$wanted" ] \
  && "$venv/bin/python" -c "import runnercheck" 2>/dev/null; then
  echo "setup: $venv is up to date (delete $stamp to set up again)"
  exit 0
fi
rm -f "$stamp"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
py="$venv/bin/python"
"$py" -m pip install --quiet --upgrade pip
if [ -n "${RUNNERCHECK_TORCH_INDEX:-}" ]; then
  # torch alone from that index; its dependencies come from the usual index below
  "$py" -m pip install --quiet -c constraints.txt --no-deps \
    --index-url "$RUNNERCHECK_TORCH_INDEX" torch
fi
"$py" -m pip install --quiet -c constraints.txt -e '.[dev]'
echo "$wanted" > "$stamp"
