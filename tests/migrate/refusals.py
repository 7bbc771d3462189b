"""The trees ``migrate`` refuses, built at test time from ``fixtures/engine/before``
(its GPU and pooling files, :data:`BASE_FILES`) and one edit each, so that they follow
the engine.

``fixtures/refusals/<name>.diff`` is the edit (a unified diff that must apply exactly,
as :mod:`tests.migrate.variants` reads it) and ``<name>.expected`` the refusal lines
``migrate`` prints on the tree. ``python -m tests.migrate.refusals NAME DIR`` writes a
refusal's diff from a tree.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tests.migrate.variants import Tree, apply_diff, make_diff, read
from tests.migrate.variants import write as write_tree

FIXTURES = Path(__file__).parent / "fixtures"
BASE = FIXTURES / "engine" / "before"
DIFFS = FIXTURES / "refusals"
#: the files of ``fixtures/engine/before`` every refused tree starts from
BASE_FILES = ("__init__.py", "model_runner.py", "pooling_model_runner.py", "worker.py")
#: the refused trees: a second broadcast on the driver path (MIG101), a worker whose
#: runner is not in the given paths (MIG103, MIG104), a sent key that is not traced to
#: a returned value (MIG102)
NAMES = ("extra-broadcast", "missing-runner", "untraceable-key")


def _base() -> Tree:
    return {name: (BASE / name).read_text() for name in BASE_FILES}


def tree(name: str) -> Tree:
    """The refused tree ``name`` (relative path -> text)."""
    diff = DIFFS / f"{name}.diff"
    return apply_diff(_base(), diff.read_text(), str(diff))


def expected(name: str) -> list[str]:
    """The refusal lines ``migrate`` prints on the tree ``name``."""
    return (DIFFS / f"{name}.expected").read_text().splitlines()


def write(name: str, target: Path) -> Path:
    """The refused tree ``name`` as files under ``target`` (made; it must not exist)."""
    return write_tree(tree(name), target)


def write_all(target: Path) -> Path:
    """Every refused tree, each in the directory of its name under ``target``."""
    target.mkdir(parents=True)
    for name in NAMES:
        write(name, target / name)
    return target


if __name__ == "__main__":
    refused, directory = sys.argv[1:]
    (DIFFS / f"{refused}.diff").write_text(make_diff(_base(), read(Path(directory))))
