"""The plugin's search for unbroadcastable parts, on types of a real mypy build.

Counts the types the search expands (its unit of work, unlike time the same on every
machine): each distinct type at most once per run, so the work grows with the size
of the type graph, never with the number of routes through it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from mypy import build
from mypy.modulefinder import BuildSource
from mypy.nodes import MypyFile, Var
from mypy.options import Options
from mypy.types import Type

from mypy_plugin.broadcastable import BroadcastableTypes
from tests.mypy_plugin.recursive_source import (
    HEADER,
    nested_dataclasses,
    tree_alias,
    write_project,
)

UNION_SIZES = (10, 100, 1000)
DEPTHS = (5, 50, 500)


def _module() -> str:
    parts = [HEADER, "\n"]
    for branches in range(1, 6):
        parts.append(tree_alias(f"Tree{branches}", branches, generic=True))
        parts.append(tree_alias(f"Flat{branches}", branches, generic=False))
        parts.append(f"tree{branches}: Tree{branches}[torch.Tensor]\n")
        parts.append(f"flat{branches}: Flat{branches}\n")
        parts.append(f"bad{branches}: Tree{branches}[Callable[[], int]]\n")
    for size in UNION_SIZES:
        parts.extend(f"class Leaf{size}_{i}(torch.Tensor): ...\n" for i in range(size))
        members = ", ".join(f"Leaf{size}_{i}" for i in range(size))
        parts.append(f"union{size}: Union[{members}]\n")
    for depth in DEPTHS:
        parts.append(nested_dataclasses(f"Nest{depth}_", depth, "Flat5"))
        parts.append(f"nest{depth}: Nest{depth}_0\n")
    parts.append(nested_dataclasses("Bad_", DEPTHS[-1], "Dict[str, List[Callable[[], int]]]"))
    parts.append("badnest: Bad_0\n")
    parts.append('A = Union[List["B"], torch.Tensor]\nB = Dict[str, Union[A, "B"]]\nab: A\n')
    parts.append("@dataclass\nclass Box(Generic[T]):\n    item: T\n")
    parts.append('    inner: Optional["Box[List[T]]"]\n\nbox: Box[torch.Tensor]\n')
    return "".join(parts)


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MypyFile]:
    root = write_project(tmp_path_factory.mktemp("walk"), {"walked": _module()})
    options = Options()
    options.incremental = False
    options.python_version = (3, 11)
    options.no_site_packages = True
    options.mypy_path = [str(root)]
    options.show_traceback = True
    result = build.build([BuildSource(str(root / "walked.py"), "walked", None)], options)
    assert result.errors == []
    yield result.files["walked"]


def _type(tree: MypyFile, name: str) -> Type:
    node = tree.names[name].node
    assert isinstance(node, Var) and node.type is not None
    return node.type


def _work(tree: MypyFile, name: str) -> tuple[int, bool]:
    """(types expanded by a fresh search, whether it found a bad part)."""
    types = BroadcastableTypes()
    found = types.offence(_type(tree, name))
    return types.expanded, found is not None


@pytest.mark.parametrize("branches", range(1, 6))
def test_recursive_alias_costs_its_branches(tree: MypyFile, branches: int) -> None:
    # The alias, its union, and one container per branch: each expanded once.
    for name in (f"tree{branches}", f"flat{branches}"):
        assert _work(tree, name) == (branches + 2, False)
    work, bad = _work(tree, f"bad{branches}")
    assert bad and work <= branches + 2


def test_union_and_nest_costs_grow_linearly(tree: MypyFile) -> None:
    for size in UNION_SIZES:
        assert _work(tree, f"union{size}") == (1, False)  # the members are leaves
    for depth in DEPTHS:
        # Every dataclass once, then the Flat5 alias, its union and its 5 branches.
        assert _work(tree, f"nest{depth}") == (depth + 7, False)


def test_each_type_is_decided_once_per_run(tree: MypyFile) -> None:
    types = BroadcastableTypes()
    names = [f"{kind}{b}" for kind in ("tree", "flat", "bad") for b in range(1, 6)]
    names += [f"nest{depth}" for depth in DEPTHS] + ["ab", "box"]
    verdicts = [types.offence(_type(tree, name)) is None for name in names]
    work = types.expanded
    assert [types.offence(_type(tree, name)) is None for name in names] == verdicts
    assert types.expanded == work  # the second time costs nothing
    assert verdicts == [True] * 10 + [False] * 5 + [True] * (len(DEPTHS) + 2)


def test_class_recursing_with_growing_arguments_ends(tree: MypyFile) -> None:
    work, bad = _work(tree, "box")
    # Box[Tensor], its Optional and list[Tensor] inside Box[list[Tensor]]; Box[list[...]]
    # itself is walked for its arguments only, since Box is on the route already.
    assert not bad and work <= 6


def test_deep_bad_leaf_is_found_with_its_route(tree: MypyFile) -> None:
    types = BroadcastableTypes()
    found = types.offence(_type(tree, "badnest"))
    assert found is not None and str(found.leaf) == "def () -> int"
    route = ['field "child"'] * (DEPTHS[-1] - 1) + ['field "value"', "dict value", "list item"]
    assert found.steps() == route
    assert types.expanded == DEPTHS[-1] + 2
