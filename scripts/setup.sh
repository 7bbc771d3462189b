#!/usr/bin/env bash
# Create a virtual environment and install runnercheck in it, editable, with the dev extra
# (the fuzz extra's torch, numpy and hypothesis, and the test and lint tools).
#
#   RUNNERCHECK_VENV         where to make it (default: .venv in the repository)
#   RUNNERCHECK_TORCH_INDEX  a package index to take torch from, e.g. PyTorch's CPU wheel
#                            index https://download.pytorch.org/whl/cpu (its 2.13.0+cpu
#                            satisfies the pin); unset, torch comes from your usual index
#
# constraints.txt pins the torch version the tests run against. A version pin does not
# choose a build: on the public index torch 2.13.0 for Linux x86_64 is the CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${RUNNERCHECK_VENV:-.venv}"
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
