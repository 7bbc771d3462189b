"""Source text the migration generates: the base module of the merged contract."""

from __future__ import annotations

from runnercheck.contract import Contract

BASE_MODULE_NAME = "model_runner_base"


def base_module(contract: Contract) -> str:
    """``model_runner_base.py``: the input base class and the generic runner base.

    It depends on nothing but the standard library, so any engine can use it."""
    input_base = contract.input_bases[0]
    runner_base = contract.runner_bases[0]
    return f'''"""Base classes of the model-runner broadcast contract.

The driver prepares a model input with ``{contract.prepare_input_method}``
(which must not communicate), the worker broadcasts
``{contract.as_dict_method}()`` together with its own input in one
broadcast, and the other ranks rebuild the input with
``{contract.make_input_method}``. A field that is
deliberately not broadcast is declared driver-only with the dataclass field
metadata ``{contract.driver_only_marker}``.
"""

import dataclasses
from abc import ABC, abstractmethod
from typing import Any, Dict, Generic, List, Type, TypeVar

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
        self, seq_group_metadata_list: List[Any]
    ) -> T:
        """Prepare the model input on the driver. Must not communicate."""
        raise NotImplementedError

    @abstractmethod
    def {contract.execute_method}(self, model_input: T, kv_caches: Any) -> Any:
        """Run the model on the input (every rank)."""
        raise NotImplementedError
'''
