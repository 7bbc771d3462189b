"""The verification of a replayed rewrite reads again only what the rewrite can change
(``codemods.framework.verify.rewritten_facts``): every class or function it keeps the facts of
reads the same again. Each case rewrites one class of a module (a copy of its node,
as ``codemods.framework.replay`` makes) and compares the facts and the methods' values with
those of the rewritten module read whole; in each, keeping one more definition would
give other facts than reading gives (so would a verification that reads less)."""

from __future__ import annotations

import ast
import copy
from pathlib import Path

import pytest

from codemods.facts.values import ValueFacts
from codemods.framework import verify
from runnercheck.analysis.extract import FunctionReader, extract_tree
from runnercheck.config import Config
from runnercheck.contract import VLLM

PATH = Path("pkg/runner.py")

#: A class the rewrite changes, then one that calls ``all_reduce``: a collective only
#: when the name is imported from ``torch.distributed`` where the call is read.
CHANGED_THEN_CALLER = """\
import torch


class Input:
    def as_broadcastable_tensor_dict(self):
        return {"a": self.a}


class Runner:
    def execute_model(self, model_input, t):
        all_reduce(t)
        return self.model(model_input)
"""

#: ``Runner`` imports ``all_reduce`` lazily, before the class the rewrite changes,
#: which calls it.
LAZY_BEFORE = """\
import torch


class Runner:
    def load_model(self):
        from torch.distributed import all_reduce

        return all_reduce


class Input:
    def as_broadcastable_tensor_dict(self, t):
        all_reduce(t)
        return {"a": self.a}
"""

#: A lazy import after the class the rewrite changes: the module's imports hold it.
LAZY_AFTER = """\
import torch


class Input:
    def as_broadcastable_tensor_dict(self):
        return {"a": self.a}


class Runner:
    def load_model(self):
        from vllm.model_executor.model_loader.loader import ShardedStateLoader

        return ShardedStateLoader
"""

#: The class the rewrite changes imports lazily what a later class calls.
LAZY_IN_CHANGED = """\
import torch


class Input:
    def as_broadcastable_tensor_dict(self, t):
        from torch.distributed import all_reduce

        return {"a": self.a}


class Runner:
    def execute_model(self, model_input, t):
        all_reduce(t)
        return self.model(model_input)
"""


def _rewrite(
    tree: ast.Module,
    drop_imports: bool = False,
    add_import: bool = False,
    name: str = "Input",
    method: str = "",
) -> ast.Module:
    """``tree`` with class ``name`` copied and changed (``"a"`` -> ``"b"``, the model
    called with ``other``), the other statements its own nodes (``drop_imports``: the
    copy's lazy imports go; ``add_import``: its methods import ``all_reduce`` lazily;
    ``method``: only that method is copied and changed, as the replay does)."""
    body = list(tree.body)
    index = next(i for i, s in enumerate(body) if isinstance(s, ast.ClassDef) and s.name == name)
    if method:
        cls = copy.copy(body[index])
        assert isinstance(cls, ast.ClassDef)
        cls.body = list(cls.body)
        at = next(i for i, s in enumerate(cls.body) if getattr(s, "name", "") == method)
        changed = cls.body[at] = copy.deepcopy(cls.body[at])
        body[index] = cls
    else:
        changed = body[index] = copy.deepcopy(body[index])
    for node in ast.walk(changed):
        if isinstance(node, ast.Constant) and node.value == "a":
            node.value = "b"
        if isinstance(node, ast.Name) and node.id == "model_input":
            node.id = "other"
        if drop_imports and isinstance(node, ast.FunctionDef):
            node.body = [s for s in node.body if not isinstance(s, ast.ImportFrom)]
        if add_import and isinstance(node, ast.FunctionDef):
            lazy = ast.parse("from torch.distributed import all_reduce").body[0]
            node.body.insert(0, ast.copy_location(lazy, node.body[0]))
    return ast.Module(body=body, type_ignores=[])


def _import_at_top(tree: ast.Module, text: str) -> ast.Module:
    """``tree`` with ``from torch.distributed import all_reduce`` added after its first
    import, at that import's position (as the replay places a new import)."""
    added = ast.parse(text).body[0]
    for node in ast.walk(added):
        if "lineno" in node._attributes:
            node.lineno, node.end_lineno = tree.body[0].lineno, tree.body[0].end_lineno  # type: ignore[attr-defined]
            node.col_offset, node.end_col_offset = 0, 0  # type: ignore[attr-defined]
    return ast.Module(body=[tree.body[0], added, *tree.body[1:]], type_ignores=[])


def _check(text: str, after_of, marked: dict[str, frozenset[str]] | None = None) -> set[str]:
    """Compares the narrowed reading with the whole one; returns the classes it kept."""
    before = ast.parse(text)
    read = extract_tree(before, str(PATH), text, VLLM, names=True, loaded=False)
    after = after_of(before)
    readers: dict[int, FunctionReader] = {}
    facts, methods = verify.rewritten_facts(
        PATH, before, read, after, text, Config(), marked or {}, readers
    )
    whole = extract_tree(after, str(PATH), text, VLLM, names=True, loaded=False)
    assert facts.classes == whole.classes
    assert facts.functions == whole.functions
    assert list(facts.imports.items()) == list(whole.imports.items())
    assert (facts.typevars, facts.top_level_names) == (whole.typevars, whole.top_level_names)
    # the values of every method: carried over where kept, read again elsewhere
    base = ValueFacts({PATH: before}, VLLM)
    narrowed = base.changed({PATH: after}, methods, readers)
    fresh = ValueFacts({PATH: after}, VLLM)
    # a method not carried over was read again, and its walk is at hand
    every = {
        id(item)
        for stmt in after.body
        if isinstance(stmt, ast.ClassDef)
        for item in stmt.body
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
    }
    assert every <= methods | set(readers)
    for cls in whole.classes.values():
        for method in cls.methods.values():
            assert narrowed.of(method) == fresh.of(method)
    return {name for name, cls in facts.classes.items() if cls is read.classes.get(name)}


def test_the_classes_a_rewrite_leaves_alone_keep_their_facts() -> None:
    assert _check(CHANGED_THEN_CALLER, _rewrite) == {"Runner"}


def test_the_values_of_a_rewritten_method_are_read_again() -> None:
    assert _check(CHANGED_THEN_CALLER, lambda tree: _rewrite(tree, name="Runner")) == {"Input"}


#: ``Runner`` has a method the rewrite changes and one it leaves alone.
TWO_METHODS = CHANGED_THEN_CALLER.replace(
    "class Runner:\n",
    "class Runner:\n    def profile_run(self, t):\n        return self.model(t)\n\n",
)


def test_the_values_of_the_methods_a_rewrite_leaves_alone_carry_over() -> None:
    rewrite = lambda tree: _rewrite(tree, name="Runner", method="execute_model")  # noqa: E731
    before = ast.parse(TWO_METHODS)
    read = extract_tree(before, str(PATH), TWO_METHODS, VLLM, names=True, loaded=False)
    after = rewrite(before)
    _facts, methods = verify.rewritten_facts(PATH, before, read, after, TWO_METHODS, Config(), {})
    runner = after.body[-1]
    assert isinstance(runner, ast.ClassDef)
    # profile_run carries over, not the rewritten execute_model
    assert id(runner.body[0]) in methods and id(runner.body[1]) not in methods
    assert _check(TWO_METHODS, rewrite) == {"Input"}


def test_a_class_that_names_a_newly_imported_name_is_read_again() -> None:
    """The rewrite imports ``all_reduce`` from ``torch.distributed``: ``Runner``'s call
    becomes a collective."""
    line = "from torch.distributed import all_reduce\n"
    kept = _check(CHANGED_THEN_CALLER, lambda tree: _import_at_top(_rewrite(tree), line))
    assert kept == set()


def test_a_rewrite_that_imports_lazily_has_the_classes_after_it_read_again() -> None:
    assert _check(CHANGED_THEN_CALLER, lambda tree: _rewrite(tree, add_import=True)) == set()


def test_a_lazy_import_before_a_rewritten_class_is_read_again() -> None:
    assert _check(LAZY_BEFORE, _rewrite) == set()


def test_a_lazy_import_after_the_rewritten_classes_stays_in_the_imports() -> None:
    assert _check(LAZY_AFTER, _rewrite) == {"Runner"}


def test_a_lazy_import_after_the_rewritten_classes_and_a_new_import() -> None:
    line = "from torch.distributed import all_reduce\n"
    kept = _check(LAZY_AFTER, lambda tree: _import_at_top(_rewrite(tree), line))
    assert kept == {"Runner"}


@pytest.mark.parametrize("drop", [False, True])
def test_a_rewritten_class_that_imports_lazily_has_the_classes_after_it_read_again(
    drop: bool,
) -> None:
    """Dropped or kept by the rewrite, ``Input``'s lazy import decides what ``Runner``'s
    call is."""
    assert _check(LAZY_IN_CHANGED, lambda tree: _rewrite(tree, drop_imports=drop)) == set()


def test_marked_fields_read_as_driver_only() -> None:
    text = """\
from dataclasses import dataclass


@dataclass(frozen=True)
class Input:
    a: int = 0
    b: int = 0
"""
    before = ast.parse(text)
    read = extract_tree(before, str(PATH), text, VLLM, names=True, loaded=False)
    facts, _methods = verify.rewritten_facts(
        PATH, before, read, before, text, Config(), {"Input": frozenset({"b"})}
    )
    assert [(f.name, f.driver_only) for f in facts.classes["Input"].fields] == [
        ("a", False),
        ("b", True),
    ]
    assert not read.classes["Input"].fields[1].driver_only  # (the facts read are left)
