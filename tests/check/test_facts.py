"""Source facts and the project index, on the multi-file fixtures."""

from __future__ import annotations

from pathlib import Path

from runnercheck.analysis.extract import extract_file, extract_source
from runnercheck.analysis.model import BranchStep, CallStep
from runnercheck.analysis.project import Project

FIXTURES = Path(__file__).parent / "fixtures"


def project_of(directory: Path) -> Project:
    return Project(extract_file(p, display_path=p.name) for p in sorted(directory.glob("*.py")))


def test_legacy_pair_broadcasts_twice_on_each_path() -> None:
    project = project_of(FIXTURES / "paired-broadcast" / "bad")
    pairs = [(w.name, r.name) for w, r in project.worker_runner_pairs()]
    assert pairs == [("Worker", "ModelRunner")]
    worker, runner = project.worker_runner_pairs()[0]
    counts = project.broadcasts_per_step(worker, runner)
    assert [(s.path, s.line) for s in counts["driver"].sites] == [
        ("worker.py", 28),
        ("model_runner.py", 20),
    ]
    assert [(s.path, s.line) for s in counts["non-driver"].sites] == [
        ("worker.py", 35),
        ("model_runner.py", 22),
    ]


def test_merged_pair_broadcasts_once() -> None:
    project = project_of(FIXTURES / "paired-broadcast" / "good")
    worker, runner = project.worker_runner_pairs()[0]
    counts = project.broadcasts_per_step(worker, runner)
    assert counts["driver"].count == 1
    assert counts["non-driver"].count == 1
    model_input = project.resolve_class("ModelInput", "model_runner.py")
    assert model_input is not None
    produced = project.produced(model_input)
    assert produced is not None and set(produced.keys) == {"input_tokens", "input_positions"}
    (receiver,) = project.receivers(model_input)
    assert receiver.target is model_input


def test_steps_record_driver_branches_and_broadcasts() -> None:
    facts = extract_file(FIXTURES / "paired-broadcast" / "bad" / "model_runner.py")
    steps = facts.classes["ModelRunner"].methods["prepare_input_tensors"].steps
    branch = next(s for s in steps if isinstance(s, BranchStep))
    assert (branch.then_role, branch.else_role) == ("driver", "non-driver")
    sent = [s for s in branch.body if isinstance(s, CallStep) and s.step_broadcast]
    received = [s for s in branch.orelse if isinstance(s, CallStep) and s.step_broadcast]
    assert [s.line for s in sent] == [20] and [s.line for s in received] == [22]


def test_syntax_error_is_a_fact_not_an_exception() -> None:
    facts = extract_source("def f(:\n    pass\n", "broken.py")
    assert facts.syntax_error is not None
    assert facts.syntax_error.line == 1
    assert facts.classes == {}


def test_the_analysis_modules_import_one_another_without_a_cycle() -> None:
    """Every ``from runnercheck.analysis.X import`` edge (``TYPE_CHECKING`` ones too):
    the facts model, the recognisers and the migrate-side readers form no cycle."""
    import ast as python_ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "runnercheck" / "analysis"
    edges: dict[str, set[str]] = {}
    for path in root.glob("*.py"):
        tree = python_ast.parse(path.read_text())
        edges[path.stem] = {
            node.module.rsplit(".", 1)[-1]
            for node in python_ast.walk(tree)
            if isinstance(node, python_ast.ImportFrom)
            and node.module
            and node.module.startswith("runnercheck.analysis.")
        }
    state: dict[str, int] = {}

    def visit(name: str, stack: list[str]) -> None:
        state[name] = 1
        for other in sorted(edges.get(name, ())):
            assert state.get(other) != 1, " -> ".join([*stack, name, other])
            if other not in state:
                visit(other, [*stack, name])
        state[name] = 2

    for name in sorted(edges):
        if name not in state:
            visit(name, [])


def test_loaded_names_are_the_names_ast_walk_meets() -> None:
    """Every ``ast.Name`` of the tree, wherever it stands: nested scopes, comprehensions,
    decorators, defaults, annotations, f-strings, ``match`` patterns and ``del``."""
    import ast

    from runnercheck.analysis.syntax import loaded_names

    text = (
        "import os as o\n"
        "@deco(a)\n"
        "class C(Base, metaclass=Meta):\n"
        "    x: Ann = b\n"
        "    def f(self, p=dflt, *q: Q, **r) -> Ret:\n"
        "        g = lambda s=lam: s + t\n"
        "        return [u for u in v if w] or {k: m for k, m in n} or f'{fs!r:{spec}}'\n"
        "match subject:\n"
        "    case Point(x=px) if guard:\n"
        "        del gone\n"
        "    case [*rest]:\n"
        "        pass\n"
    )
    tree = ast.parse(text)
    expected = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    assert loaded_names(tree) == expected
    assert {"a", "Base", "Meta", "dflt", "lam", "fs", "spec", "guard", "gone", "Point"} <= expected
