#!/usr/bin/env bash
# Set up (scripts/setup.sh, skipped while the environment is up to date) and run the
# test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --if-needed
# one test process per core (at most 4): most tests wait on subprocesses
.venv/bin/python -m pytest -n auto --maxprocesses 4 "$@"
