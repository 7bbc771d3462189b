#!/usr/bin/env bash
# Set up (scripts/setup.sh, skipped while the environment is up to date) and run the
# test suite: every test but those marked slow. `scripts/test.sh -m slow` runs the slow
# ones (installs, pre-commit, the stress runs; CI runs both), `scripts/test.sh PATH...`
# the tests named, slow or not; other arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --if-needed
marks=(-m "not slow")
for arg in "$@"; do
    case "$arg" in
        -m | -m* | tests* | */*.py*) marks=() ;; # the caller chose
    esac
done
# one test process per core (at most 4): most tests wait on subprocesses
.venv/bin/python -m pytest -n auto --maxprocesses 4 "${marks[@]}" "$@"
