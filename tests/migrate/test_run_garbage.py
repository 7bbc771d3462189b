"""A ``migrate`` (or ``check``) run lets go of what it read when it ends: no reference
cycle holds its syntax trees, facts, project view or caught exceptions, so they are
freed then, not by a later garbage collection that walks them all again (once per run,
in the run's own time). A closure that calls itself is such a cycle (the function holds
the cell that holds it), and holds whatever it reads from around it: the walks of the
analysis and the codemods are functions of their own instead."""

from __future__ import annotations

import ast
import gc
import shutil
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import FunctionType

import libcst as cst
import pytest

from codemods.framework.pipeline import MigrateResult, migrate
from codemods.toolkit import cstutil, node_index
from runnercheck import collector
from runnercheck.analysis.model import CallSite, ClassFacts, FunctionFacts, ModuleFacts
from runnercheck.analysis.project import Project
from runnercheck.check.pipeline import CheckResult, check_paths
from runnercheck.demo.engine import engine_source_dir
from tests.migrate import refusals

#: What a run reads and must not leave to the garbage collector.
_RUN_OBJECTS = (
    ast.AST,
    cst.CSTNode,
    ModuleFacts,
    ClassFacts,
    FunctionFacts,
    CallSite,
    Project,
    BaseException,
)


def _held(garbage: list[object]) -> Counter[str]:
    """The run's objects among ``garbage``, and the analysis's functions (a closure that
    calls itself is garbage only through its cycle)."""
    return Counter(
        type(o).__name__ if isinstance(o, _RUN_OBJECTS) else o.__qualname__
        for o in garbage
        if isinstance(o, _RUN_OBJECTS)
        or (isinstance(o, FunctionType) and o.__module__.startswith("runnercheck."))
    )


def _cyclic_garbage(run: Callable[[], object]) -> tuple[object, list[object]]:
    """What ``run`` returns, and what a garbage collection right after it finds."""
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        result = run()
        gc.collect()
        return result, list(gc.garbage)
    finally:
        gc.garbage.clear()
        gc.set_debug(0)
        gc.enable()


@pytest.mark.slow
@pytest.mark.parametrize(
    "engine",
    [
        # two groups, a worker whose step cannot be shared (its reason is kept),
        # verification walking the values of every rank
        engine_source_dir("legacy"),
        # a group whose planning is refused (the refusal is kept for the run)
        "extra-broadcast",
    ],
    ids=["legacy-engine", "refused-plan"],
)
def test_a_run_leaves_no_cycle_that_holds_its_trees(engine: Path | str, tmp_path: Path) -> None:
    if isinstance(engine, str):
        tree = refusals.write(engine, tmp_path / "engine")
    else:
        tree = shutil.copytree(engine, tmp_path / "engine")
    migrate([str(tree)])  # imports, first-use caches
    result, garbage = _cyclic_garbage(lambda: migrate([str(tree)]))
    assert isinstance(result, MigrateResult)
    assert result.changes or result.refusals  # the run did something
    assert _held(garbage) == Counter()


@pytest.mark.slow
def test_a_check_run_leaves_no_cycle_that_holds_its_facts(tmp_path: Path) -> None:
    # the legacy engine: findings across files, collectives reached through helpers
    tree = shutil.copytree(engine_source_dir("legacy"), tmp_path / "engine")
    check_paths([str(tree)])
    result, garbage = _cyclic_garbage(lambda: check_paths([str(tree)]))
    assert isinstance(result, CheckResult)
    assert result.findings
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
