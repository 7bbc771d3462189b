"""The engine's speculative-decoding package as it was before ``fold-control-broadcast``:
the shipped package with the wrapper as it was (``BEFORE_WORKER``: its own control
broadcast), for tests and benchmarks that compare before and after; and the same package
with the wrapper shaped as vLLM 0.6.x-0.9.x ship it (``V06_WORKER``: the scorer first
without speculation, the proposer skipped when speculation is disabled for the batch).

Both wrappers are built at test time as edits (``tests/migrate/fixtures/
fold-control-broadcast/*.diff``, applied exactly as :mod:`tests.migrate.variants` reads
them): ``spec_decode_worker_before.diff`` of the shipped wrapper, and
``spec_decode_worker_v06.diff`` of ``BEFORE_WORKER``."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.migrate.variants import apply_diff

REPO = Path(__file__).resolve().parent.parent
SPEC_DECODE = REPO / "runnercheck" / "demo" / "engine" / "spec_decode"
DIFFS = REPO / "tests" / "migrate" / "fixtures" / "fold-control-broadcast"
WRAPPER = "spec_decode_worker.py"


def _edited(text: str, name: str) -> str:
    diff = DIFFS / f"{name}.diff"
    return apply_diff({WRAPPER: text}, diff.read_text(), str(diff))[WRAPPER]


BEFORE_WORKER = _edited((SPEC_DECODE / WRAPPER).read_text(), "spec_decode_worker_before")
V06_WORKER = _edited(BEFORE_WORKER, "spec_decode_worker_v06")


def copy_before(dest: Path, worker: str = BEFORE_WORKER) -> Path:
    """``dest`` (created): the package with the wrapper before the fold (``worker``:
    that wrapper's text)."""
    shutil.copytree(SPEC_DECODE, dest, ignore=shutil.ignore_patterns("__pycache__"))
    (dest / WRAPPER).write_text(worker)
    return dest


def write_wrappers(target: Path) -> Path:
    """``target`` (created) holding the two wrappers alone, as
    ``spec_decode_worker_before.py`` and ``spec_decode_worker_v06.py``."""
    target.mkdir(parents=True)
    (target / "spec_decode_worker_before.py").write_text(BEFORE_WORKER)
    (target / "spec_decode_worker_v06.py").write_text(V06_WORKER)
    return target
