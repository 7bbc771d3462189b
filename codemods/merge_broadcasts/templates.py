"""Source text the migration generates: the base module of the merged contract."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Sequence
from typing import Protocol

from codemods.facts.signatures import Import, RunnerSignature
from codemods.toolkit.cstutil import without_optional
from runnercheck.contract import Contract

BASE_MODULE_NAME = "model_runner_base"
WORKER_INPUT_MODULE_NAME = "worker_input"


class HelperText(Protocol):
    """A module-level function the generated base module defines."""

    @property
    def text(self) -> str: ...


def _import_from(module: str, names: list[str], limit: int = 79) -> list[str]:
    line = f"from {module} import {', '.join(names)}"
    if len(line) <= limit:
        return [line]
    out, current = [f"from {module} import ("], "   "
    for name in names:
        if len(current) + len(name) + 2 > limit:
            out.append(current)
            current = "   "
        current += f" {name},"
    return [*out, current, ")"]


def _type_imports(imports: Iterable[Import]) -> list[str]:
    """``import x`` lines, then ``from m import a, b`` per module, sorted as isort does."""
    plain = sorted({imp.module for imp in imports if imp.name is None})
    names: dict[str, set[str]] = {}
    for imp in imports:
        if imp.name is not None:
            names.setdefault("." * imp.level + imp.module, set()).add(imp.name)
    lines = [f"import {module}" for module in plain]
    for module in sorted(names):
        lines += _import_from(module, sorted(names[module]), limit=75)
    return lines


def import_block(stdlib: Sequence[str], typing: Iterable[str], imports: Sequence[Import]) -> str:
    """A generated module's imports: ``stdlib`` lines, the ``typing`` names, and what
    the annotations name from the engine under ``TYPE_CHECKING`` (nothing but the
    standard library is imported at run time)."""
    names = sorted(
        set(typing) | ({"TYPE_CHECKING"} if imports else set()),
        key=lambda name: (not name.isupper(), name),
    )
    lines = [*stdlib, *_import_from("typing", names)]
    if imports:
        lines += ["", "if TYPE_CHECKING:"]
        lines += [f"    {line}" for line in _type_imports(imports)]
    return "\n".join(lines)


def _header(signature: RunnerSignature) -> str:
    return import_block(
        ["import dataclasses", "from abc import ABC, abstractmethod"],
        {"Any", "Dict", "Generic", "Type", "TypeVar"} | set(signature.typing),
        signature.imports,
    )


def quoted(annotation: str, imports: Iterable[Import]) -> str:
    """An annotation naming what is imported only for type checking is a string."""
    imported = {imp.name or imp.module.split(".")[0] for imp in imports}
    words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", annotation))
    return f'"{annotation}"' if words & imported else annotation


def base_module(
    contract: Contract,
    signature: RunnerSignature | None = None,
    helpers: Sequence[HelperText] = (),
    helper_imports: Iterable[Import] = (),
    helper_typing: Iterable[str] = (),
) -> str:
    """``model_runner_base.py``: the input base class and the generic runner base,
    then the (de)serialisation ``helpers`` several inputs share.

    It imports nothing but the standard library at run time (the types it names come
    from the runners' own imports, under ``TYPE_CHECKING``), so any engine can use it."""
    signature = signature or RunnerSignature()
    if helpers:
        signature = dataclasses.replace(
            signature,
            imports=tuple(
                sorted(set(signature.imports) | set(helper_imports), key=Import.statement)
            ),
            typing=signature.typing | frozenset(helper_typing),
        )
    shared = "".join(f"\n\n{helper.text}" for helper in helpers)
    input_base = contract.input_bases[0]
    runner_base = contract.runner_bases[0]
    # the driver always has its requests when it prepares (no Optional here: a
    # runner that accepts None as well still overrides it soundly)
    request = quoted(without_optional(signature.request), signature.imports)
    kv_caches = quoted(signature.kv_caches, signature.imports)
    returns = quoted(signature.returns, signature.imports)
    return f'''"""Base classes of the model-runner broadcast contract.

The driver prepares a model input with ``{contract.prepare_input_method}``
(which must not communicate), the worker broadcasts
``{contract.as_dict_method}()`` together with its own input in one
broadcast, and the other ranks rebuild the input with
``{contract.make_input_method}``. A field that is
deliberately not broadcast is left out of ``{contract.as_dict_method}``
with a ``# Driver-only: ...`` comment above it.
"""

{_header(signature)}

T = TypeVar("T", bound="{input_base}")


@dataclasses.dataclass(frozen=True)
class {input_base}(ABC):
    """An input that travels in one broadcast and is rebuilt on every rank."""

    @abstractmethod
    def {contract.as_dict_method}(self) -> Dict[str, Any]:
        """The values to broadcast (tensors and picklable metadata)."""
        raise NotImplementedError

    @classmethod
    @abstractmethod
    def {contract.from_dict_method}(
        cls: Type[T],
        tensor_dict: Dict[str, Any],
        attn_backend: Any = None,
    ) -> T:
        """Rebuild the input from the broadcast dict (popping its keys)."""
        raise NotImplementedError


class {runner_base}(ABC, Generic[T]):
    """A model runner, generic over its input type."""

    @abstractmethod
    def {contract.make_input_method}(
        self, tensor_dict: Dict[str, Any]
    ) -> T:
        """Rebuild the model input on a rank that received the broadcast."""
        raise NotImplementedError

    @abstractmethod
    def {contract.prepare_input_method}(
        self, seq_group_metadata_list: {request}
    ) -> T:
        """Prepare the model input on the driver. Must not communicate."""
        raise NotImplementedError

    @abstractmethod
    def {contract.execute_method}(
        self, model_input: T, kv_caches: {kv_caches}
    ) -> {returns}:
        """Run the model on the input (every rank)."""
        raise NotImplementedError
{shared}'''
