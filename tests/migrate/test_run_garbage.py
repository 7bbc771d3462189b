"""A ``migrate`` run lets go of what it read when it ends: no reference cycle holds its
syntax trees, facts or caught exceptions, so they are freed then, not by a later
garbage collection that walks them all again (once per run, in the run's own time)."""

from __future__ import annotations

import ast
import gc
import shutil
from collections import Counter
from pathlib import Path

import libcst as cst
import pytest

from codemods import cstutil, node_index
from codemods.pipeline import migrate
from runnercheck import collector
from runnercheck.demo.engine import engine_source_dir


def _held(garbage: list[object]) -> Counter[str]:
    kinds = (ast.Module, cst.Module, BaseException)
    return Counter(type(o).__name__ for o in garbage if isinstance(o, kinds))


FIXTURES = Path(__file__).parent / "fixtures"


@pytest.mark.parametrize(
    "engine",
    [
        # two groups, a worker whose step cannot be shared (its reason is kept),
        # verification walking the values of every rank
        engine_source_dir("legacy"),
        # a group whose planning is refused (the refusal is kept for the run)
        FIXTURES / "refusals" / "extra-broadcast",
    ],
    ids=["legacy-engine", "refused-plan"],
)
def test_a_run_leaves_no_cycle_that_holds_its_trees(engine: Path, tmp_path: Path) -> None:
    tree = shutil.copytree(engine, tmp_path / "engine")
    migrate([str(tree)])  # imports, first-use caches
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        result = migrate([str(tree)])
        gc.collect()
        garbage = list(gc.garbage)
    finally:
        gc.garbage.clear()
        gc.set_debug(0)
        gc.enable()
    assert result.changes or result.refusals  # the run did something
    assert _held(garbage) == Counter()


def test_the_texts_of_printed_modules_are_forgotten_at_the_end_of_a_run(
    tmp_path: Path,
) -> None:
    tree = shutil.copytree(engine_source_dir("legacy"), tmp_path / "engine")
    migrate([str(tree)])
    assert cstutil._TEXTS == {}
    module = cstutil.parse_module(b"x = 1\n")
    assert cstutil.module_code(module) == "x = 1\n"
    assert cstutil._TEXTS
    cstutil.forget_codes()
    node_index.forget()
    assert cstutil._TEXTS == {}


def test_a_run_collects_seldom_and_puts_the_collector_back(tmp_path: Path) -> None:
    tree = shutil.copytree(engine_source_dir("legacy"), tmp_path / "engine")
    before = gc.get_threshold()
    during: list[tuple[int, ...]] = []
    migrate([str(tree)], progress=lambda done, total: during.append(gc.get_threshold()))
    assert during and set(during) == {collector.LIBCST_THRESHOLD}
    assert gc.get_threshold() == before != collector.LIBCST_THRESHOLD
