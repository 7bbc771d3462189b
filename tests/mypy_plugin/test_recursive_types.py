"""Recursive and deep types in broadcast fields, with real mypy and the plugin.

Recursive aliases with one to five recursive branches (generic and not), mutually
recursive aliases and generic classes that recurse with growing arguments are
broadcastable when their leaves are: nothing is reported, and the run ends (a walk
that follows every branch takes 3**16 paths for one three-branch alias). A value
that cannot be broadcast is reported at any depth (40 nested dataclasses, deeper
than any fixed cut-off), with the route to it.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.mypy_plugin.mypy_run import mypy
from tests.mypy_plugin.recursive_source import (
    HEADER,
    input_class,
    nested_dataclasses,
    tree_alias,
    write_project,
)

DEPTH = 40
HOOKS = "Dict[str, List[Callable[[], int]]]"


def trees_module() -> str:
    parts = [HEADER, "\n"]
    for branches in range(1, 6):
        parts.append(tree_alias(f"Tree{branches}", branches, generic=True))
        parts.append(tree_alias(f"Flat{branches}", branches, generic=False))
    parts.append(
        'Node = Dict[str, "Leaves"]\n'
        "Leaves = Union[List[Node], Tuple[Node, ...], torch.Tensor]\n"
        'GNode = Dict[str, "GLeaves[T]"]\n'
        'GLeaves = Union[List["GNode[T]"], Tuple["GNode[T]", ...], T]\n'
        # Y is bad through its second member; X reaches Y, so it is bad as well.
        'Y = Union[List["X"], Callable[[], int]]\n'
        "X = List[Y]\n\n\n"
        "@dataclass\nclass Hooked:\n    hook: Optional[Callable[[], None]]\n\n\n"
        'Chain = Union[Dict[str, "Chain"], List["Chain"], Tuple["Chain", ...], Hooked, int]\n\n\n'
        "@dataclass\nclass Box(Generic[T]):\n"
        '    item: T\n    inner: Optional["Box[List[T]]"]\n\n\n'
    )
    parts.append(nested_dataclasses("Fine", DEPTH, "Flat3"))
    parts.append(nested_dataclasses("Deep", DEPTH, HOOKS))
    clean: dict[str, str] = {}
    for branches in range(1, 6):
        clean[f"tree{branches}"] = f"Tree{branches}[torch.Tensor]"
        clean[f"flat{branches}"] = f"Flat{branches}"
    clean.update(node="Node", gnode="GNode[int]", box="Box[torch.Tensor]", fine="Fine0")
    parts.append(input_class("CleanTrees", clean))
    bad = {f"bad{b}": f"Tree{b}[Callable[[], int]]" for b in (1, 5)}
    bad.update(
        hooks=HOOKS,
        y="Y",
        x="X",
        chain="Chain",
        box="Box[Callable[[], int]]",
        deep="Deep0",
    )
    parts.append(input_class("BadTrees", bad))
    return "".join(parts)


def value_error(key: str, shown: str, route: str | None, leaf: str = "Callable[[], int]") -> str:
    where = f" at {route}" if route else ""
    return (
        f'error: Value for key "{key}" in the dict of "BadTrees.as_broadcastable_tensor_dict" '
        f'cannot be broadcast: its type "{shown}" contains "{leaf}"{where}, which is a function'
        "  [unbroadcastable-value]"
    )


def test_recursive_and_deep_types(tmp_path: Path) -> None:
    root = write_project(tmp_path / "project", {"trees": trees_module()})
    proc = mypy(root, "trees.py", timeout=300)
    assert proc.stderr == ""
    lines = [re.sub(r"^trees\.py:\d+: ", "", line) for line in proc.stdout.splitlines()]
    deep_route = " -> ".join(['field "child"'] * (DEPTH - 1) + ['field "value"'])
    assert lines == [
        value_error("bad1", "Tree1[Callable[[], int]]", "union member 2"),
        value_error("bad5", "Tree5[Callable[[], int]]", "union member 6"),
        value_error("hooks", "dict[str, list[Callable[[], int]]]", "dict value -> list item"),
        value_error("y", "Y", "union member 2"),
        # X was walked (and found good so far) inside Y's walk: that verdict assumed Y.
        # The route goes through the union Y to its member, not only to the list item.
        value_error("x", "X", "list item -> union member 2"),
        value_error(
            "chain",
            "Chain",
            'union member 4 -> field "hook" -> union member 1',
            leaf="Callable[[], None]",
        ),
        value_error("box", "Box[Callable[[], int]]", 'field "item"'),
        value_error("deep", "Deep0", f"{deep_route} -> dict value -> list item"),
        "Found 8 errors in 1 file (checked 1 source file)",
    ]
