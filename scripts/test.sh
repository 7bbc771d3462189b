#!/usr/bin/env bash
# Set up (scripts/setup.sh) and run the test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# one test process per core (at most 4): most tests wait on subprocesses
.venv/bin/python -m pytest -n auto --maxprocesses 4 "$@"
