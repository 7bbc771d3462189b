#!/usr/bin/env bash
# Create .venv and install runnercheck with its dev extra. constraints.txt pins the
# CPU build of torch on machines without a GPU; drop it to keep your own torch.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -c constraints.txt --config-settings editable_mode=compat -e '.[dev]'
