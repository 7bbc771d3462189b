"""Generated modules with recursive and deep types in broadcast fields, for the tests
(and the benchmark's worst cases): recursive aliases with 1 to 5 recursive branches,
generic or not, mutually recursive aliases, deep nests of dataclasses."""

from __future__ import annotations

from pathlib import Path

#: Recursive branches, in the order an alias with ``k`` branches uses the first ``k``.
BRANCHES = (
    "Dict[str, {ref}]",
    "List[{ref}]",
    "Tuple[{ref}, ...]",
    "Sequence[{ref}]",
    "Mapping[int, {ref}]",
)

HEADER = """\
from dataclasses import dataclass
from typing import (
    Any, Callable, Dict, Generic, List, Mapping, Optional, Self, Sequence, Tuple, TypeVar, Union,
)

import torch

T = TypeVar("T")
"""

TORCH_STUB = """\
from typing import Any

class Tensor:
    def __getattr__(self, name: str) -> Any: ...

class Stream: ...
"""

MYPY_INI = "[mypy]\nplugins = mypy_plugin\npython_version = 3.11\nno_site_packages = True\n"


def tree_alias(name: str, branches: int, generic: bool, leaves: str = "torch.Tensor") -> str:
    """``name = Union[<branches recursive branches>, leaves]``; generic aliases end in
    ``T`` instead of the leaves and refer to themselves as ``name[T]``."""
    ref = f'"{name}[T]"' if generic else f'"{name}"'
    parts = [branch.format(ref=ref) for branch in BRANCHES[:branches]]
    parts.append("T" if generic else leaves)
    return f"{name} = Union[{', '.join(parts)}]\n"


def input_class(name: str, fields: dict[str, str]) -> str:
    """A frozen dataclass that broadcasts every field under its own name."""
    lines = ["@dataclass(frozen=True)", f"class {name}:"]
    lines += [f"    {field}: {annotation}" for field, annotation in fields.items()]
    lines += [
        "",
        "    def as_broadcastable_tensor_dict(self) -> Dict[str, Any]:",
        "        return {",
        *[f'            "{field}": self.{field},' for field in fields],
        "        }",
        "",
        "    @classmethod",
        "    def from_broadcasted_tensor_dict(cls, tensor_dict: Dict[str, Any]) -> Self:",
        "        return cls(**tensor_dict)",
        "",
        "",
    ]
    return "\n".join(lines)


def nested_dataclasses(prefix: str, depth: int, leaf: str) -> str:
    """``{prefix}0`` holds ``{prefix}1`` ... holds ``{prefix}{depth - 1}``, whose field
    ``value`` has type ``leaf``."""
    out = [f"@dataclass\nclass {prefix}{depth - 1}:\n    value: {leaf}\n\n"]
    for level in range(depth - 2, -1, -1):
        out.append(f"@dataclass\nclass {prefix}{level}:\n    child: {prefix}{level + 1}\n\n")
    return "".join(out)


def write_project(root: Path, modules: dict[str, str]) -> Path:
    """``root`` with a mypy.ini enabling the plugin, a small torch stub and ``modules``."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "mypy.ini").write_text(MYPY_INI, encoding="utf-8")
    (root / "torch").mkdir(exist_ok=True)
    (root / "torch" / "__init__.pyi").write_text(TORCH_STUB, encoding="utf-8")
    for name, text in modules.items():
        (root / f"{name}.py").write_text(text, encoding="utf-8")
    return root
