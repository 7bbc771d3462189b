"""The model-runner broadcast contract: every name the tools look for.

Defaults match vLLM (0.5.1 and later) and its forks, so a vLLM tree needs no
configuration. A project that names things differently overrides them under
``[tool.runnercheck]`` in its ``pyproject.toml`` (see :mod:`runnercheck.config`).

The contract, in one picture::

    driver:     prepare_model_input(seq_group_metadata_list) -> model_input
                model_input.as_broadcastable_tensor_dict() --one broadcast-->
    non-driver: make_model_input_from_broadcasted_tensor_dict(tensor_dict) -> model_input
    everyone:   execute_model(model_input, kv_caches) -> output

Driver-only fields
------------------
A field of an input dataclass that is deliberately *not* broadcast (non-driver
ranks never need it, e.g. vLLM's ``seq_lens`` or pooling metadata) is declared
driver-only in one of three ways, none of which makes the target code import
runnercheck at run time:

* a comment right above the field, as ``migrate`` writes it (the field is simply
  left out of the broadcast dict, as vLLM does)::

      # Driver-only: not broadcast; the other ranks get None.
      seq_lens: Optional[List[int]] = None

* dataclass field metadata::

      seq_lens: Optional[List[int]] = dataclasses.field(
          default=None, metadata={"driver_only": True})

  (the key is ``driver_only_key`` in the config; the older
  ``{"runnercheck": "driver-only"}`` is honoured as well),
* or a ``driver_only = ["ModelInputForGPU.seq_lens"]`` list in the config.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

#: Key of the older dataclass field metadata that marks a field driver-only.
DRIVER_ONLY_METADATA_KEY = "runnercheck"
#: Value under :data:`DRIVER_ONLY_METADATA_KEY` that marks a field driver-only.
DRIVER_ONLY_METADATA_VALUE = "driver-only"
#: The default key of the neutral marker ``{"driver_only": True}`` (what the codemods
#: write; the configuration's ``driver_only_key`` changes it).
DRIVER_ONLY_KEY = "driver_only"


_DRIVER_ONLY_COMMENT = re.compile(r"#\s*driver-only\b", re.IGNORECASE)


def is_driver_only_comment(lines: Sequence[str], lineno: int) -> bool:
    """True if the comment lines right above line ``lineno`` (1-based) of ``lines``
    (a field's first line) say ``# Driver-only: ...``."""
    index = lineno - 2
    while 0 <= index < len(lines) and lines[index].lstrip().startswith("#"):
        if _DRIVER_ONLY_COMMENT.match(lines[index].lstrip()):
            return True
        index -= 1
    return False


def is_driver_only_metadata(metadata: Any, key: str = DRIVER_ONLY_KEY) -> bool:
    """True if a dataclass field's ``metadata`` mapping declares it driver-only:
    ``{key: True}`` (``{"driver_only": True}`` by default) or the older
    ``{"runnercheck": "driver-only"}``."""
    try:
        return bool(
            metadata.get(key) is True
            or metadata.get(DRIVER_ONLY_METADATA_KEY) == DRIVER_ONLY_METADATA_VALUE
        )
    except AttributeError:
        return False


@dataclass(frozen=True)
class Contract:
    """Names of the classes, methods and functions that make up the contract.

    A plain frozen dataclass: reading the contract costs no pydantic import. Values
    from a configuration file are validated (with pydantic) in :mod:`runnercheck.config`.
    """

    #: How pydantic validates this class (unknown keys are errors, lists become tuples).
    __pydantic_config__: ClassVar[dict[str, Any]] = {"extra": "forbid"}

    #: Base classes of model runners (generic over their input type).
    runner_bases: tuple[str, ...] = ("ModelRunnerBase", "GPUModelRunnerBase")
    #: Base classes of model-runner input dataclasses.
    input_bases: tuple[str, ...] = ("ModelRunnerInputBase",)
    #: Base classes of workers that drive runners.
    worker_bases: tuple[str, ...] = ("WorkerBase", "LocalOrDistributedWorkerBase")
    #: The worker's own broadcastable input (swap/copy blocks, sequence-group count).
    worker_input: str = "WorkerInput"
    #: The function that broadcasts a dict of tensors and metadata from the driver.
    broadcast_function: str = "broadcast_tensor_dict"
    #: Instance method of an input: ``self -> dict`` to broadcast.
    as_dict_method: str = "as_broadcastable_tensor_dict"
    #: Classmethod of an input: ``dict -> Self`` on the receiving side.
    from_dict_method: str = "from_broadcasted_tensor_dict"
    #: Runner method on non-driver ranks: ``dict -> T``.
    make_input_method: str = "make_model_input_from_broadcasted_tensor_dict"
    #: Runner method on the driver: ``seq_group_metadata_list -> T``; must not communicate.
    prepare_input_method: str = "prepare_model_input"
    #: Runner method on every rank: ``(T, kv_caches) -> output``.
    execute_method: str = "execute_model"
    #: Attribute that tells the driver worker from the others.
    driver_flag: str = "is_driver_worker"
    #: Worker methods a concrete worker must implement (vLLM's LocalOrDistributedWorkerBase).
    worker_methods: tuple[str, ...] = (
        "prepare_worker_input",
        "execute_worker",
    )
    #: Runner methods a concrete runner must implement.
    runner_methods: tuple[str, ...] = (
        "make_model_input_from_broadcasted_tensor_dict",
        "prepare_model_input",
        "execute_model",
    )
    #: Fields declared driver-only by configuration, as ``"Class.field"``.
    driver_only: tuple[str, ...] = ()
    #: Key of the dataclass field metadata ``{key: True}`` that declares a field
    #: driver-only (``{"runnercheck": "driver-only"}`` counts too; the codemods write
    #: vLLM's comment instead, see :func:`is_driver_only_comment`).
    driver_only_key: str = DRIVER_ONLY_KEY

    def is_driver_only(self, class_name: str, field_name: str) -> bool:
        return f"{class_name}.{field_name}" in self.driver_only


#: The contract with vLLM's names.
VLLM = Contract()
