"""The verification's value reader starts from the walk of each method body that the
facts' reader made (:func:`extract_tree`'s ``readers``): a method read for its facts is
not walked again for its values, on the side as read nor on the rewritten side, and its
values are those of a fresh walk."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest

from codemods.facts.values import ValueFacts
from codemods.framework.pipeline import migrate
from runnercheck.analysis.extract import FunctionReader, extract_tree
from runnercheck.contract import VLLM
from runnercheck.demo.engine import engine_source_dir

FIXTURES = Path(__file__).parent / "fixtures"

#: Files with methods of every kind the walk records: branches on the driver flag,
#: early returns, loops, ``try``, conditional expressions, nested functions.
#: (Only the files that have a method: the others have nothing to compare.)
FILES = sorted(
    path
    for path in [
        *engine_source_dir("legacy").glob("*.py"),
        *engine_source_dir("merged").glob("*.py"),
        *(FIXTURES / "engine" / "before").rglob("*.py"),
    ]
    if any(
        isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
        for stmt in ast.parse(path.read_text()).body
        if isinstance(stmt, ast.ClassDef)
        for item in stmt.body
    )
)

ODD = """
class Runner:
    def execute_model(self, seqs, kv_caches):
        if not self.is_driver_worker:
            return None
        out = self.model(x=seqs) if kv_caches else self.model(y=seqs)
        x = kv_caches and self.is_driver_worker and self.sampler(out)
        for i in range(2):
            try:
                self.cache_engine.copy(i)
            except ValueError:
                return self.sampler(out, x)
        def inner():
            return self.model(z=1)
        return inner()

    async def run(self, data):
        assert self.is_driver_worker
        return self.model(data)


class Runner:
    def execute_model(self, seqs):
        return self.model(seqs)
"""


def _methods(tree: ast.Module) -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    return [
        (f"{stmt.name}.{item.name}", item)
        for stmt in tree.body
        if isinstance(stmt, ast.ClassDef)
        for item in stmt.body
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
    ]


def _read(source: str, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Whether some method has values (each compared with a fresh walk's)."""
    path = Path("module.py")
    tree = ast.parse(source)
    readers: dict[int, FunctionReader] = {}
    facts = extract_tree(tree, str(path), source, VLLM, names=True, readers=readers)
    methods = _methods(tree)
    assert {id(node) for _, node in methods} == set(readers)
    fresh = ValueFacts({path: ast.parse(source)}, VLLM)
    with monkeypatch.context() as patched:  # nothing is walked again
        patched.setattr(FunctionReader, "read_roles", _walked_again)
        reused = ValueFacts({path: tree}, VLLM, readers=readers)
        found = {
            f.qualname: reused.of(f) for cls in facts.classes.values() for f in cls.methods.values()
        }
    for name, values in found.items():
        func = next(
            f for cls in facts.classes.values() for f in cls.methods.values() if f.qualname == name
        )
        assert values == fresh.of(func), name
    return any(v.bindings or v.sinks for v in found.values())


def _walked_again(self: FunctionReader) -> None:
    raise AssertionError(f"{self.facts.qualname} walked again")


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_values_from_the_facts_walk_are_those_of_a_fresh_walk(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _read(path.read_text(), monkeypatch)


def test_the_files_compared_have_values(monkeypatch: pytest.MonkeyPatch) -> None:
    with_values = [p.name for p in FILES if _read(p.read_text(), monkeypatch)]
    assert {"model_runner.py", "worker.py", "cpu_worker.py"} <= set(with_values)


def test_values_of_odd_shapes_and_names_defined_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _read(ODD, monkeypatch)


def test_a_reader_of_another_tree_is_not_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    path = Path("module.py")
    tree, other = ast.parse(ODD), ast.parse(ODD.replace("self.model(", "self.sampler("))
    readers: dict[int, FunctionReader] = {}
    extract_tree(other, str(path), ODD, VLLM, names=True, readers=readers)
    # the other tree's readers, under the ids of this tree's methods
    mine = [node for _, node in _methods(tree)]
    theirs = [readers[id(node)] for _, node in _methods(other)]
    facts = extract_tree(tree, str(path), ODD, VLLM, names=True)
    values = ValueFacts(
        {path: tree}, VLLM, readers={id(n): r for n, r in zip(mine, theirs, strict=True)}
    )
    fresh = ValueFacts({path: tree}, VLLM)
    for cls in facts.classes.values():
        for func in cls.methods.values():
            assert values.of(func) == fresh.of(func)


@pytest.mark.parametrize(
    ("engine", "exact"),
    [
        # two groups rewritten with LibCST: the values of both sides
        (engine_source_dir("legacy"), False),
        # ``--check``: single-class rewrites the analysis replays
        (FIXTURES / "single", True),
    ],
    ids=["merge", "replayed"],
)
def test_a_run_walks_each_method_once(
    engine: Path, exact: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree = shutil.copytree(engine, tmp_path / "engine")
    walked: list[str] = []
    read_roles = FunctionReader.read_roles

    def counted(self: FunctionReader) -> None:
        walked.append(self.facts.qualname)
        read_roles(self)

    monkeypatch.setattr(FunctionReader, "read_roles", counted)
    result = migrate([str(tree)], exact=exact, plain_mypy=False)
    assert result.changes  # the verification ran, and passed
    assert walked == []
