"""Generated worst cases for the mypy plugin benchmark, each in sizes that grow.

Every case is a small project (a ``runner_base.py`` shaped like vLLM 0.5.1's, a
torch stub, one generated module) whose types only the plugin walks deeply: the
fields of input classes, which go into the broadcast dict.

* ``aliases``: recursive aliases with 1..5 recursive branches (generic and not, and a
  mutually recursive pair), the shape of vLLM's ``JSONTree`` and ``NestedTensors``;
* ``union``: a union of N dataclass members, in a field, a list and a dict;
* ``nest``: dataclasses nested N deep, each level also holding a recursive alias;
* ``inputs``: N input classes with their runners in one module.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.mypy_plugin.recursive_source import (
    HEADER,
    input_class,
    tree_alias,
    write_project,
)

RUNNER_BASE = """\
from abc import ABC, abstractmethod
from typing import Any, Dict, Generic, List, Self, TypeVar


class ModelRunnerInputBase(ABC):
    @abstractmethod
    def as_broadcastable_tensor_dict(self) -> Dict[str, Any]: ...

    @classmethod
    @abstractmethod
    def from_broadcasted_tensor_dict(cls, tensor_dict: Dict[str, Any]) -> Self: ...


T = TypeVar("T", bound=ModelRunnerInputBase)


class ModelRunnerBase(ABC, Generic[T]):
    @abstractmethod
    def prepare_model_input(self, seq_group_metadata_list: List[int]) -> T: ...

    @abstractmethod
    def make_model_input_from_broadcasted_tensor_dict(self, tensor_dict: Dict[str, Any]) -> T: ...

    def execute_model(self, model_input: T, kv_caches: List[Any]) -> None:
        raise NotImplementedError
"""

HEADER_WITH_BASE = HEADER + "\nfrom runner_base import ModelRunnerBase, ModelRunnerInputBase\n\n"


def _runner(name: str, input_name: str) -> str:
    return (
        f"class {name}(ModelRunnerBase[{input_name}]):\n"
        "    def prepare_model_input(self, seq_group_metadata_list: List[int]) -> "
        f"{input_name}:\n"
        "        raise NotImplementedError\n\n"
        "    def make_model_input_from_broadcasted_tensor_dict(\n"
        f"        self, tensor_dict: Dict[str, Any]\n    ) -> {input_name}:\n"
        f"        return {input_name}.from_broadcasted_tensor_dict(tensor_dict)\n\n\n"
    )


def _input(name: str, fields: dict[str, str]) -> str:
    text = input_class(name, fields)
    return text.replace(f"class {name}:", f"class {name}(ModelRunnerInputBase):", 1)


def aliases(branches: int) -> str:
    parts = [HEADER_WITH_BASE]
    parts.append(tree_alias("Tree", branches, generic=True))
    parts.append(tree_alias("Flat", branches, generic=False))
    parts.append('Node = Dict[str, "Leaves"]\nLeaves = Union[List[Node], torch.Tensor]\n\n\n')
    fields = {"tree": "Tree[torch.Tensor]", "flat": "Flat", "node": "Node"}
    fields["nested"] = "Dict[str, List[Tree[torch.Tensor]]]"
    parts.append(_input("AliasInput", fields))
    parts.append(_runner("AliasRunner", "AliasInput"))
    return "".join(parts)


def union(members: int) -> str:
    parts = [HEADER_WITH_BASE, tree_alias("Flat", 3, generic=False), "\n\n"]
    for index in range(members):
        parts.append(
            f"@dataclass\nclass Member{index}:\n    tensor: torch.Tensor\n"
            f"    count: int\n    tree: Flat\n\n\n"
        )
    parts.append(f"Big = Union[{', '.join(f'Member{i}' for i in range(members))}]\n\n\n")
    fields = {"big": "Big", "many": "List[Big]", "by_name": "Dict[str, Big]"}
    parts.append(_input("UnionInput", fields))
    parts.append(_runner("UnionRunner", "UnionInput"))
    return "".join(parts)


def nest(depth: int) -> str:
    parts = [HEADER_WITH_BASE, tree_alias("Tree", 3, generic=True), "\n\n"]
    parts.append(
        f"@dataclass\nclass Level{depth - 1}:\n    tensor: torch.Tensor\n"
        "    tree: Tree[torch.Tensor]\n\n\n"
    )
    for level in range(depth - 2, -1, -1):
        parts.append(
            f"@dataclass\nclass Level{level}:\n    child: Level{level + 1}\n"
            f"    tree: Tree[torch.Tensor]\n    children: List[Level{level + 1}]\n\n\n"
        )
    parts.append(_input("NestInput", {"top": "Level0", "tops": "Dict[str, Level0]"}))
    parts.append(_runner("NestRunner", "NestInput"))
    return "".join(parts)


def inputs(count: int) -> str:
    parts = [HEADER_WITH_BASE, tree_alias("Tree", 3, generic=True), "\n\n"]
    for index in range(count):
        fields = {
            "input_tokens": "torch.Tensor",
            "seq_lens": "List[int]",
            "extras": "Dict[str, Tree[torch.Tensor]]",
        }
        parts.append(_input(f"Input{index}", fields))
        parts.append(_runner(f"Runner{index}", f"Input{index}"))
    return "".join(parts)


#: Family -> (module text for a size, sizes in --quick, sizes in a full run).
CASES: dict[str, tuple[Callable[[int], str], tuple[int, ...], tuple[int, ...]]] = {
    "aliases": (aliases, (1, 5), (1, 2, 3, 4, 5)),
    "union": (union, (10, 1000), (10, 100, 1000)),
    "nest": (nest, (5, 50), (5, 10, 20, 50)),
    "inputs": (inputs, (10, 1000), (10, 100, 1000)),
}


def write_case(root: Path, family: str, size: int) -> Path:
    """The project of ``family`` at ``size`` under ``root``; returns the module to check."""
    make = CASES[family][0]
    project = write_project(root, {"case": make(size), "runner_base": RUNNER_BASE})
    return project / "case.py"
