"""The engine's speculative-decoding package as it was before ``fold-control-broadcast``:
the shipped package with the wrapper of ``tests/migrate/fixtures/fold-control-broadcast``
(its own control broadcast), for tests and benchmarks that compare before and after; and
the same package with the wrapper shaped as vLLM 0.6.x-0.9.x ship it (``V06_WORKER``:
the scorer first without speculation, the proposer skipped when speculation is disabled
for the batch)."""

from __future__ import annotations

import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SPEC_DECODE = REPO / "runnercheck" / "demo" / "engine" / "spec_decode"
BEFORE = REPO / "tests" / "migrate" / "fixtures" / "fold-control-broadcast"
BEFORE_WORKER = BEFORE / "spec_decode_worker_before.py"
V06_WORKER = BEFORE / "spec_decode_worker_v06.py"


def copy_before(dest: Path, worker: Path | str = BEFORE_WORKER) -> Path:
    """``dest`` (created): the package with the wrapper before the fold (``worker``:
    that wrapper's file, or its text)."""
    shutil.copytree(SPEC_DECODE, dest, ignore=shutil.ignore_patterns("__pycache__"))
    target = dest / "spec_decode_worker.py"
    if isinstance(worker, Path):
        shutil.copy(worker, target)
    else:
        target.write_text(worker)
    return dest
