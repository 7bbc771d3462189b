"""The analysis's decision of which files a codemod may change (``codemods.framework.decision``)
is sound: ``migrate --check`` gives the same exit code, JSON and new bytes with it as
without it (every file through every single-class codemod with LibCST), and it spares
LibCST the files no codemod changes (``exact=False``: the new bytes are made, see
``test_exact_check.py`` for the files ``--check`` settles without them).
``benchmarks/migrate_decision.py`` runs the same comparison on the cached vLLM
releases."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from codemods.framework import registry, report
from codemods.framework.decision import every_file, single_targets
from codemods.framework.pipeline import MigrateResult
from codemods.framework.run import apply
from runnercheck.analysis.extract import extract_source
from runnercheck.analysis.project import Project
from runnercheck.contract import VLLM
from runnercheck.demo.engine import engine_source_dir
from tests.migrate import refusals
from tests.migrate.conftest import FIXTURES
from tests.spec_decode_fixture import write_wrappers

CHECK_FIXTURES = Path(__file__).parents[1] / "check" / "fixtures"
#: The demo engine's two shapes, and fixtures where each single-class codemod changes
#: or refuses something (the benchmark runs every fixture tree); a tree built at test
#: time is the function that writes it.
TREES: dict[str, Path | Callable[[Path], Path]] = {
    "demo-legacy": engine_source_dir("legacy"),
    "demo-merged": engine_source_dir("merged"),
    "single-class codemods": FIXTURES / "single",
    "refusals": refusals.write_all,
    "fold-control-broadcast": write_wrappers,
    "super-dict (RC104)": CHECK_FIXTURES / "parent-dict-drift",
    "driver-only (RC103)": CHECK_FIXTURES / "unbroadcast-field",
    "self-return": CHECK_FIXTURES / "recursive-from-dict",
}


def tree_of(name: str, target: Path) -> Path:
    """A copy of :data:`TREES`'s tree ``name`` at ``target`` (built where it is a diff)."""
    source = TREES[name]
    if isinstance(source, Path):
        return shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
    return source(target)


def outcome(result: MigrateResult) -> dict[str, Any]:
    return {
        "exit": result.exit_code,
        "json": report.as_json(result, "check", []),
        "new": {str(p): c.new for p, c in result.changes.items()},
    }


@pytest.mark.parametrize("name", sorted(TREES))
def test_the_same_result_with_and_without_the_decision(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree = tree_of(name, tmp_path / "tree")
    monkeypatch.chdir(tmp_path)
    without = apply([tree], mode="check", decide=False, exact=False)
    with_ = apply([tree], mode="check", decide=True, exact=False)
    assert outcome(with_) == outcome(without)
    assert with_.files_cst <= without.files_cst


def test_a_merged_tree_needs_no_libcst_with_the_decision(tmp_path: Path) -> None:
    """Without the decision every file of the merged engine goes through LibCST; with
    it, none does (nothing would change)."""
    tree = shutil.copytree(engine_source_dir("merged"), tmp_path / "engine")
    without = apply([tree], mode="check", decide=False)
    with_ = apply([tree], mode="check", decide=True)
    assert without.files_cst > 0 and with_.files_cst == 0
    assert not with_.changes and with_.exit_code == 0


SOURCE = """\
from dataclasses import dataclass


@dataclass(frozen=True)
class Fixed:
    x: int = 0

    def as_broadcastable_tensor_dict(self):
        return {"x": self.x}

    @classmethod
    def from_broadcasted_tensor_dict(cls, tensor_dict) -> "Fixed":
        return Fixed(**tensor_dict)


@dataclass(frozen=True)
class Typed:
    x: int = 0

    def as_broadcastable_tensor_dict(self):
        return {"x": self.x}

    @classmethod
    def from_broadcasted_tensor_dict(cls, tensor_dict):
        return cls(**tensor_dict)
"""


def test_the_decision_names_each_codemod_that_may_change_a_file() -> None:
    """A fixed-class return is a "maybe" for ``self-return``; a class with nothing to do
    is a "no"; without the decision every file is a "maybe" for every codemod."""
    project = Project([extract_source(SOURCE, "inputs.py", VLLM)], VLLM)
    assert single_targets(project, registry.NAMES) == {"inputs.py": {"self-return"}}
    assert single_targets(project, ["driver-only"]) == {}
    assert every_file(["inputs.py"], ["self-return", "merge-broadcasts"]) == {
        "inputs.py": {"self-return"}
    }


def test_a_shadowed_definition_is_a_maybe(tmp_path: Path) -> None:
    """The facts keep the last ``Fixed``; ``self-return`` also rewrites the first one
    (a fixed return) that it shadows, so the file is not a "no"."""
    first = SOURCE.split("@dataclass(frozen=True)\nclass Typed")[0]
    second = SOURCE.split("\n\n\n@dataclass(frozen=True)\nclass Typed")[1].replace("Typed", "Fixed")
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "inputs.py").write_text(first + "\n@dataclass(frozen=True)\nclass Fixed" + second)
    without = apply([package], mode="check", decide=False, exact=False)
    with_ = apply([package], mode="check", decide=True, exact=False)
    assert [p.name for p in without.changes] == ["inputs.py"]
    assert outcome(with_) == outcome(without)
