"""``migrate --check`` settles a file without LibCST when the analysis replays what the
single-class codemods do to it (``codemods.framework.replay``): its whole output (the lines it
prints, the JSON, the exit code) is the one the LibCST rewrite gives, and a rewrite
the verification refuses, or a shape the replay does not follow, still goes through
LibCST. ``benchmarks/migrate_decision.py`` runs the same comparison on the cached vLLM
releases and every fixture tree."""

from __future__ import annotations

import ast
import itertools
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from codemods.framework import registry, report
from codemods.framework.pipeline import MigrateResult
from codemods.framework.run import apply
from runnercheck.analysis.model import ModuleFacts
from tests.migrate.test_decision import SOURCE, TREES, tree_of


def output(result: MigrateResult) -> dict[str, object]:
    """What ``migrate --check`` prints (not a terminal), its JSON and its exit code."""
    lines = report.refusal_lines(result) + report.detail_lines(result)
    lines += report.file_lines(result, "check", []) + report.summary_lines(result, "check")
    return {
        "lines": lines,
        "json": report.as_json(result, "check", []),
        "exit": result.exit_code,
    }


def both(tree: Path, select: tuple[str, ...] = registry.NAMES) -> tuple[MigrateResult, ...]:
    """(through LibCST, settled by the analysis where it can)."""
    return (
        apply([tree], select, mode="check", exact=False),
        apply([tree], select, mode="check"),
    )


@pytest.mark.parametrize("name", sorted(TREES))
def test_the_same_output_with_and_without_libcst(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree = tree_of(name, tmp_path / "tree")
    monkeypatch.chdir(tmp_path)
    cst, exact = both(tree)
    assert output(exact) == output(cst)
    assert exact.files_cst <= cst.files_cst


def test_the_single_class_fixtures_need_no_libcst(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each single-class codemod changes a file of the fixtures; --check names them all
    with no file parsed by LibCST, and the rewrite makes the same files."""
    tree = shutil.copytree(TREES["single-class codemods"], tmp_path / "tree")
    monkeypatch.chdir(tmp_path)
    cst, exact = both(tree, registry.SINGLE)
    assert output(exact) == output(cst)
    assert cst.files_cst > 0 and exact.files_cst == 0
    assert exact.changes.keys() == cst.changes.keys()
    assert all(change.exact and not change.new for change in exact.changes.values())
    assert {c for change in exact.changes.values() for c in change.codemods} == {
        "self-return",
        "driver-only",
        "super-dict",
    }


def test_facts_from_the_cache_settle_the_same_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second run reads the facts from the cache (no ``ast`` of the files): the replay
    parses the file and the verification keeps the cached facts of what it leaves alone."""
    tree = shutil.copytree(TREES["single-class codemods"], tmp_path / "tree")
    monkeypatch.chdir(tmp_path)
    cst = apply([tree], registry.SINGLE, mode="check", exact=False)
    for _run in range(2):
        cached = apply([tree], registry.SINGLE, mode="check", cache_root=tmp_path)
        assert output(cached) == output(cst)
        assert cached.files_cst == 0
    assert any((tmp_path / ".runnercheck_cache").iterdir())


def _package(tmp_path: Path, source: str) -> Path:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "inputs.py").write_text(source)
    return package


def test_a_fixed_return_is_an_exact_yes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    cst, exact = both(_package(tmp_path, SOURCE))
    assert [p.name for p in exact.changes] == ["inputs.py"] and exact.exit_code == 1
    assert exact.files_cst == 0 and cst.files_cst == 1
    assert output(exact) == output(cst)


#: ``ast.parse`` reads it, ``compile()`` refuses it: the rewrite's verification refuses
#: the file (MIG110, citing a line of the rewritten text).
REFUSED = SOURCE + "\n\ndef helper():\n    x = 1\n    global x\n"


def test_a_rewrite_the_verification_refuses_goes_through_libcst(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    cst, exact = both(_package(tmp_path, REFUSED))
    assert not cst.changes and [r.code for r in cst.refusals] == ["MIG110"]
    assert exact.files_cst == 1
    assert output(exact) == output(cst)


#: ``cls(**...)`` builds ``Sub``, whose ``a`` is not an ``__init__`` argument: the new
#: finding (RC102) is on ``Sub``, a class the rewrite leaves alone and whose facts it keeps.
SUBCLASS_BREAKS = """\
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Fixed:
    a: int = 0

    def as_broadcastable_tensor_dict(self):
        return {"a": self.a}

    @classmethod
    def from_broadcasted_tensor_dict(cls, tensor_dict) -> "Fixed":
        return Fixed(**tensor_dict)


@dataclass(frozen=True)
class Sub(Fixed):
    a: int = field(default=0, init=False)
"""


def test_a_new_finding_on_a_class_the_rewrite_leaves_alone_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The verification re-reads only the rewritten class, and still re-checks every
    class: the refusal stands, and LibCST says it (its message cites the new text)."""
    monkeypatch.chdir(tmp_path)
    cst, exact = both(_package(tmp_path, SUBCLASS_BREAKS))
    assert not cst.changes and [r.code for r in cst.refusals] == ["MIG110"]
    assert "Sub" in cst.refusals[0].message
    assert exact.files_cst == 1
    assert output(exact) == output(cst)


def test_a_class_defined_twice_goes_through_libcst(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The facts keep one class of a name: the replay does not guess which."""
    monkeypatch.chdir(tmp_path)
    twice = SOURCE + "\n\nif True:\n    class Typed:\n        pass\n"
    cst, exact = both(_package(tmp_path, twice))
    assert exact.files_cst == 1
    assert output(exact) == output(cst)


def test_a_drifted_copy_is_refused_without_libcst(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A subclass dict that re-lists only part of its parent's keys: super-dict's
    refusal (MIG203) follows from the analysis."""
    source = """\
from dataclasses import dataclass


@dataclass(frozen=True)
class Base:
    a: int = 0
    b: int = 0

    def as_broadcastable_tensor_dict(self):
        tensor_dict = {"a": self.a, "b": self.b}
        return tensor_dict

    @classmethod
    def from_broadcasted_tensor_dict(cls, tensor_dict):
        return cls(**tensor_dict)


@dataclass(frozen=True)
class Child(Base):
    c: int = 0

    def as_broadcastable_tensor_dict(self):
        tensor_dict = {"a": self.a, "c": self.c}
        return tensor_dict
"""
    monkeypatch.chdir(tmp_path)
    cst, exact = both(_package(tmp_path, source))
    assert [r.code for r in cst.refusals] == ["MIG203"]
    assert exact.files_cst == 0 and cst.files_cst == 1
    assert output(exact) == output(cst)


# ------------------------------------------------ the replay is the rewrite


def _replayed_and_rewritten(tree: Path) -> list[tuple[tuple[object, object], ...]]:
    """Per file the LibCST rewrite changes, (replayed, rewritten) pairs of: the ``ast``,
    the lines right below each ``# Driver-only`` comment, and the facts the verification
    reads (without positions). The replay is given each file's tree after the analysis
    read it, as the pipeline gives it."""
    from codemods.framework import decision, replay, verify
    from runnercheck.analysis.extract import extract_tree
    from runnercheck.analysis.project import Project
    from runnercheck.config import Config
    from runnercheck.contract import VLLM

    rewritten = apply([tree], registry.SINGLE, mode="check", exact=False)
    texts = {p: p.read_text() for p in sorted(tree.resolve().rglob("*.py"))}
    trees = {p: ast.parse(text) for p, text in texts.items()}
    modules = [
        extract_tree(trees[p], str(p), text, VLLM, names=True, loaded=False)
        for p, text in texts.items()
    ]
    project = Project(modules, VLLM)
    targets = decision.single_targets(project, registry.SINGLE)
    out = []
    for path, change in rewritten.changes.items():
        wanted = targets[str(path)]
        found = replay.replay(
            project, path, texts[path], registry.SINGLE, wanted, VLLM, trees[path]
        )
        assert found is not None, path
        new = change.new.decode()
        facts, _kept = verify.rewritten_facts(
            path,
            found.read,
            project.modules[str(path)],
            found.tree,
            texts[path],
            Config(),
            found.marked,
        )
        read = extract_tree(ast.parse(new), str(path), new, VLLM, names=True, loaded=False)
        out.append(
            (
                (ast.dump(found.tree), ast.dump(ast.parse(new))),
                (_marked(found.text), _marked(new)),
                (_facts(facts), _facts(read)),
            )
        )
    return out


def _facts(facts: ModuleFacts) -> str:
    """The facts the verification reads (the classes, functions and imports), without
    positions."""
    found = repr((facts.classes, facts.functions, facts.imports, facts.typevars))
    found = re.sub(r"\b(line|col|end_line|end_col)=\d+", "", found)
    return re.sub(r"@\d+(:\d+)?", "@", found)  # (pseudo names: ``<return@12>``)


def _marked(text: str) -> list[str]:
    lines = [line.strip() for line in text.splitlines()]
    return [after for line, after in itertools.pairwise(lines) if line.startswith("# Driver-only")]


TYPING = "from typing import Optional, Type\n"
SELF = "from typing_extensions import Self\n"
DRIVER_ONLY = """\
from dataclasses import dataclass
from typing import List, Optional


@dataclass(frozen=True)
class Step:
    tokens: int = 0
    # the lengths
    seq_lens: Optional[List[int]] = None

    def as_broadcastable_tensor_dict(self):
        return {"tokens": self.tokens}

    @classmethod
    def from_broadcasted_tensor_dict(cls, tensor_dict) -> "Step":
        return Step(**tensor_dict)
"""
#: An unbroadcast field above a runner whose RC105 message cites a line of its own: the
#: comment ``driver-only`` writes moves that line (a finding is compared without its
#: positions, wherever its message cites them).
MOVED_FINDING = (
    DRIVER_ONLY
    + """

class XPUModelRunner:
    def prepare_model_input(self, seq_group_metadata_list):
        if self.is_driver_worker:
            broadcast_tensor_dict({"tokens": 1}, src=0)
        else:
            broadcast_tensor_dict(src=0)
        return Step()
"""
)


def test_a_finding_whose_message_cites_a_moved_line_is_not_new(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    cst, exact = both(_package(tmp_path, MOVED_FINDING))
    assert output(exact) == output(cst)
    assert [p.name for p in cst.changes] == ["inputs.py"] and not cst.refusals
    assert exact.files_cst == 0


#: the built instance's method called: the analysis remembers ``Chained(...)`` on the call
CHAINED = SOURCE.replace("Fixed", "Chained").replace(
    "return Chained(**tensor_dict)", "return Chained(**tensor_dict).checked()"
)
CASES = {
    "a call on the built instance": CHAINED,
    "a TypeVar and a new typing import": SOURCE,
    "an existing typing import extended": SOURCE.replace("\n\n\n", "\n" + TYPING + "\n\n", 1),
    "Self imported": SOURCE.replace("\n\n\n", "\n" + SELF + "\n\n", 1),
    "a driver-only comment and a fixed return": DRIVER_ONLY,
    "CRLF line endings": DRIVER_ONLY.replace("\n", "\r\n"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_replay_is_the_rewrite(name: str, tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "inputs.py").write_bytes(CASES[name].encode())
    (found,) = _replayed_and_rewritten(package)
    for replayed, rewritten in found:
        assert replayed == rewritten


def test_the_replay_is_the_rewrite_on_the_fixtures(tmp_path: Path) -> None:
    tree = shutil.copytree(TREES["single-class codemods"], tmp_path / "tree")
    found = _replayed_and_rewritten(tree)
    assert len(found) >= 2 and any(marks[0] for _tree, marks, _facts in found)
    for pairs in found:
        for replayed, rewritten in pairs:
            assert replayed == rewritten


#: What ``--check`` has no use for: LibCST, rich, plain mypy's runner, the results of
#: groups (none is planned here), the writing and recovering machinery, and the readers
#: of configuration files a tree without a project directory does not have.
UNUSED = (
    "libcst",
    "rich",
    "codemods.framework.typecheck",
    "codemods.framework.results",
    "runnercheck.writes.transaction",
    "runnercheck.writes.recovery",
    "hashlib",
    "tomllib",
    "configparser",
    "subprocess",
)


def test_check_settles_the_single_class_fixtures_without_importing_libcst(
    tmp_path: Path,
) -> None:
    tree = shutil.copytree(TREES["single-class codemods"], tmp_path / "tree")
    code = (
        "import sys; from runnercheck.cli import main; code = main(sys.argv[1:]); "
        f"print('exit', code, *[m for m in {UNUSED!r} if m in sys.modules])"
    )
    select = ",".join(registry.SINGLE)
    proc = subprocess.run(
        [sys.executable, "-c", code, "migrate", "--check", "--select", select, str(tree)],
        capture_output=True,
        text=True,
        check=True,
    )
    lines = proc.stdout.splitlines()
    assert lines[-1] == "exit 1"
    assert any(line.startswith("would migrate ") for line in lines)


def _judged_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, list[int]]:
    """A package in a project with a mypy configuration, the current directory, and the
    list each plain-mypy judgement of a run appends to."""
    from codemods.framework import typecheck

    (tmp_path / "pyproject.toml").write_text("[tool.mypy]\ncheck_untyped_defs = true\n")
    package = _package(tmp_path, SOURCE)
    monkeypatch.chdir(tmp_path)
    runs: list[int] = []
    real = typecheck.new_errors
    monkeypatch.setattr(typecheck, "new_errors", lambda changed: runs.append(1) or real(changed))
    return package, runs


def test_check_in_a_project_with_a_mypy_configuration_runs_no_mypy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--check`` says whether files would change; the new plain-mypy errors of the
    rewritten text are ``--diff``'s and the write's to report. So a project with a mypy
    configuration (every vLLM checkout) is settled without LibCST, and mypy never runs."""
    package, runs = _judged_project(tmp_path, monkeypatch)
    checked = apply([package], mode="check")
    assert [p.name for p in checked.changes] == ["inputs.py"] and checked.exit_code == 1
    assert checked.files_cst == 0 and runs == []
    shown = apply([package], mode="diff")
    assert shown.changes.keys() == checked.changes.keys() and runs == [1]
    assert shown.files_cst == 1 and shown.changes[package / "inputs.py"].new


def test_no_mypy_runs_no_plain_mypy_and_rewrites_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--no-mypy``: the old and new texts are not judged by plain mypy (for a tree
    mypy checks next anyway, as the demo's next stage does); the rewrite is the same."""
    from runnercheck.cli import main

    package, runs = _judged_project(tmp_path, monkeypatch)
    judged = apply([package], mode="diff")
    assert runs == [1]
    skipped = apply([package], mode="diff", plain_mypy=False)
    assert runs == [1]
    assert {p: c.new for p, c in skipped.changes.items()} == {
        p: c.new for p, c in judged.changes.items()
    }
    capsys.readouterr()
    assert main(["migrate", "--diff", "--no-mypy", "--no-cache", str(package)]) == 1
    assert runs == [1] and "+++ " in capsys.readouterr().out
    assert main(["migrate", "--diff", "--no-cache", str(package)]) == 1
    assert runs == [1, 1]
