"""The engine's speculative-decoding package as it was before ``fold-control-broadcast``:
the shipped package with the wrapper of ``tests/migrate/fixtures/fold-control-broadcast``
(its own control broadcast), for tests and benchmarks that compare before and after."""

from __future__ import annotations

import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SPEC_DECODE = REPO / "runnercheck" / "demo" / "engine" / "spec_decode"
BEFORE = REPO / "tests" / "migrate" / "fixtures" / "fold-control-broadcast"
BEFORE_WORKER = BEFORE / "spec_decode_worker_before.py"


def copy_before(dest: Path) -> Path:
    """``dest`` (created): the package with the wrapper before the fold."""
    shutil.copytree(SPEC_DECODE, dest, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(BEFORE_WORKER, dest / "spec_decode_worker.py")
    return dest
