"""The plugin's rules (RC2xx): each code's name (the mypy error code:
``# type: ignore[name]``, ``disable_error_code``), summary, why it matters, and a bad and
a good example that run as tests (``tests/test_catalog_examples.py``).
:mod:`mypy_plugin.errors` declares one mypy error code per entry; the registry
(:mod:`runnercheck.catalog`) finds them through the entry point ``mypy`` of the group
``runnercheck.rules``.
"""

from __future__ import annotations

from runnercheck.catalog import Rule, _variant

# ----------------------------------------------------- examples: the mypy plugin
# They import the contract's bases from ``vllm.worker.model_runner_base`` (vLLM 0.5.1).

_RC201_BAD = """\
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from vllm.worker.model_runner_base import ModelRunnerBase, ModelRunnerInputBase


@dataclass(frozen=True)
class ModelInputForCPU(ModelRunnerInputBase):
    input_tokens: Optional[List[int]] = None

    def as_broadcastable_tensor_dict(self) -> Dict[str, Any]:
        return {"input_tokens": self.input_tokens}

    @staticmethod
    def from_broadcasted_tensor_dict(
        tensor_dict: Dict[str, Any], attn_backend: Any = None
    ) -> "ModelInputForCPU":
        return ModelInputForCPU(**tensor_dict)


class CPUModelRunner(ModelRunnerBase[ModelInputForCPU]):
    def make_model_input_from_broadcasted_tensor_dict(
        self, tensor_dict: Dict[str, Any]
    ) -> ModelInputForCPU:
        return ModelInputForCPU.from_broadcasted_tensor_dict(tensor_dict)
"""
_RC201_GOOD = _variant(
    _RC201_BAD,
    ("List, Optional\n", "List, Optional, Self\n"),
    ("    @staticmethod\n", "    @classmethod\n"),
    ("        tensor_dict: Dict", "        cls, tensor_dict: Dict"),
    (
        '    ) -> "ModelInputForCPU":\n        return ModelInputForCPU(**tensor_dict)',
        "    ) -> Self:\n        return cls(**tensor_dict)",
    ),
)

_RC202_BAD = """\
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from vllm.worker.model_runner_base import ModelRunnerInputBase


@dataclass(frozen=True)
class ModelInputForGPU(ModelRunnerInputBase):
    input_tokens: Optional[List[int]] = None

    def as_broadcastable_tensor_dict(self) -> Dict[str, Any]:
        return {"input_tokens": self.input_tokens}

    @classmethod
    def from_broadcasted_tensor_dict(
        cls, tensor_dict: Dict[str, Any], attn_backend: Any = None
    ) -> "ModelInputForGPU":
        return ModelInputForGPU(**tensor_dict)


@dataclass(frozen=True)
class ModelInputForGPUWithSamplingMetadata(ModelInputForGPU):
    selected_token_indices: Optional[List[int]] = None
"""
_RC202_GOOD = _variant(
    _RC202_BAD,
    ("List, Optional\n", "List, Optional, Self\n"),
    (
        '    ) -> "ModelInputForGPU":\n        return ModelInputForGPU(**tensor_dict)',
        "    ) -> Self:\n        return cls(**tensor_dict)",
    ),
)

#: An input class that keeps the contract (the runner examples' ``T``).
_GPU_INPUT = """\
@dataclass(frozen=True)
class ModelInputForGPU(ModelRunnerInputBase):
    input_tokens: Optional[List[int]] = None

    def as_broadcastable_tensor_dict(self) -> Dict[str, Any]:
        return {"input_tokens": self.input_tokens}

    @classmethod
    def from_broadcasted_tensor_dict(
        cls, tensor_dict: Dict[str, Any], attn_backend: Any = None
    ) -> Self:
        return cls(**tensor_dict)
"""
_LOOSE_HEADER = """\
from dataclasses import dataclass
from typing import Any, Dict, Generic, List, Optional, Self, TypeVar

from vllm.worker.model_runner_base import ModelRunnerInputBase

TModelInputForGPU = TypeVar("TModelInputForGPU", bound=ModelRunnerInputBase)


"""

_RC203_BAD = (
    _LOOSE_HEADER
    + _GPU_INPUT
    + """

class GPUModelRunnerBase(Generic[TModelInputForGPU]):
    \"\"\"Shared GPU runner code, annotated with the input base class only.\"\"\"

    def prepare_model_input(self, seq_group_metadata_list: List[Any]) -> ModelRunnerInputBase:
        raise NotImplementedError


class ModelRunner(GPUModelRunnerBase[ModelInputForGPU]):
    def prepare_model_input(self, seq_group_metadata_list: List[Any]) -> ModelRunnerInputBase:
        return ModelInputForGPU(input_tokens=[s.token for s in seq_group_metadata_list])
"""
)
_RC203_GOOD = _variant(
    _RC203_BAD,
    (
        "List[Any]) -> ModelRunnerInputBase:\n        return",
        "List[Any]) -> ModelInputForGPU:\n        return",
    ),
)

_RC204_BAD = (
    _LOOSE_HEADER
    + _GPU_INPUT
    + """

@dataclass(frozen=True)
class ModelInputForGPUWithSamplingMetadata(ModelInputForGPU):
    selected_token_indices: Optional[List[int]] = None

    def as_broadcastable_tensor_dict(self) -> Dict[str, Any]:
        tensor_dict = super().as_broadcastable_tensor_dict()
        tensor_dict["selected_token_indices"] = self.selected_token_indices
        return tensor_dict


class GPUModelRunnerBase(Generic[TModelInputForGPU]):
    \"\"\"Shared GPU runner code, annotated loosely.\"\"\"

    def execute_model(self, model_input: Any, kv_caches: Optional[List[Any]]) -> Any:
        raise NotImplementedError


class ModelRunner(GPUModelRunnerBase[ModelInputForGPU]):
    def execute_model(
        self, model_input: ModelInputForGPUWithSamplingMetadata, kv_caches: Optional[List[Any]]
    ) -> Optional[List[int]]:
        return model_input.selected_token_indices
"""
)
_RC204_GOOD = _variant(
    _RC204_BAD,
    (
        "class ModelRunner(GPUModelRunnerBase[ModelInputForGPU]):",
        "class ModelRunner(GPUModelRunnerBase[ModelInputForGPUWithSamplingMetadata]):",
    ),
)

_RC207_BAD = (
    """\
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Self

from vllm.worker.model_runner_base import ModelRunnerBase, ModelRunnerInputBase


"""
    + _GPU_INPUT
    + """

class ModelRunner(ModelRunnerBase):
    def make_model_input_from_broadcasted_tensor_dict(
        self, tensor_dict: Dict[str, Any]
    ) -> ModelInputForGPU:
        return ModelInputForGPU.from_broadcasted_tensor_dict(tensor_dict)

    def prepare_model_input(self, seq_group_metadata_list: List[Any]) -> ModelInputForGPU:
        return ModelInputForGPU(input_tokens=[s.token for s in seq_group_metadata_list])

    def execute_model(
        self, model_input: ModelInputForGPU, kv_caches: Optional[List[Any]]
    ) -> Optional[List[int]]:
        return model_input.input_tokens
"""
)
_RC207_GOOD = _variant(
    _RC207_BAD,
    (
        "class ModelRunner(ModelRunnerBase):",
        "class ModelRunner(ModelRunnerBase[ModelInputForGPU]):",
    ),
)

_RC205_BAD = """\
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Self, Type

from vllm.worker.model_runner_base import ModelRunnerInputBase


class AttentionBackend:
    \"\"\"Chosen by each rank for its own device.\"\"\"


@dataclass(frozen=True)
class ModelInputForGPU(ModelRunnerInputBase):
    input_tokens: Optional[List[int]] = None
    attn_backend: Optional[Type[AttentionBackend]] = None

    def as_broadcastable_tensor_dict(self) -> Dict[str, Any]:
        return {"input_tokens": self.input_tokens, "attn_backend": self.attn_backend}

    @classmethod
    def from_broadcasted_tensor_dict(
        cls, tensor_dict: Dict[str, Any], attn_backend: Any = None
    ) -> Self:
        return cls(**tensor_dict)
"""
_RC205_GOOD = _variant(
    _RC205_BAD,
    (', "attn_backend": self.attn_backend}', "}"),
    ("return cls(**tensor_dict)", "return cls(**tensor_dict, attn_backend=attn_backend)"),
)


RULES: tuple[Rule, ...] = (
    Rule(
        code="RC201",
        name="runner-input-protocol",
        tool="mypy",
        summary="A runner's input type does not satisfy the broadcastable protocol.",
        why="The runner's `T` (or its bound) must provide the instance method `as_broadcastable_tensor_dict()` (no required argument, returns a dict) and the classmethod `from_broadcasted_tensor_dict(tensor_dict, ...)` (the dict as its one required argument), or non-driver ranks cannot rebuild it. Reported at the runner, naming the member and why, also when the `T` is outside the base's bound: mypy's [type-var] only says \"must be a subtype\", and `# type: ignore[type-var]` would hide even that.",
        bad=_RC201_BAD,
        good=_RC201_GOOD,
    ),
    Rule(
        code="RC202",
        name="from-dict-fixed-return",
        tool="mypy",
        summary="`from_broadcasted_tensor_dict` is declared to return, or builds, a fixed class instead of `Self` / `cls(...)`.",
        why="Subclasses inherit a classmethod typed to return the parent, so every caller needs `cast()`; building `ModelInput(...)` instead of `cls(...)` also loses the subclass at run time. Checked on every class that defines the classmethod.",
        bad=_RC202_BAD,
        good=_RC202_GOOD,
    ),
    Rule(
        code="RC203",
        name="runner-input-covariance",
        tool="mypy",
        summary="A runner's `prepare_model_input`/`make_model_input_...` does not return its `T`.",
        why="The worker passes what these return to `execute_model(model_input: T)`; a looser return type (e.g. the input base class) hides a mismatch plain mypy accepts when the base's annotation is loose too. Overrides mypy already rejects are its [override].",
        bad=_RC203_BAD,
        good=_RC203_GOOD,
    ),
    Rule(
        code="RC204",
        name="execute-input-mismatch",
        tool="mypy",
        summary="`execute_model`'s `model_input` parameter does not accept the runner's `T`.",
        why="The worker calls `execute_model` with what `prepare_model_input` produced; a parameter typed for another input class is a latent AttributeError (reported where plain mypy accepts the override, e.g. when the base takes `Any`).",
        bad=_RC204_BAD,
        good=_RC204_GOOD,
    ),
    Rule(
        code="RC205",
        name="unbroadcastable-value",
        tool="mypy",
        summary="A value in the broadcast dict has a type that cannot be broadcast.",
        why="Broadcast values must be tensors (torch, numpy), numbers, str, bytes, bool, None, enum members, or containers, dataclasses, msgspec Structs, named tuples and typed dicts of these (plus `broadcastable_types`); functions, classes and other objects fail to pickle or arrive as a different object.",
        bad=_RC205_BAD,
        good=_RC205_GOOD,
    ),
    Rule(
        code="RC206",
        name="runnercheck-internal",
        tool="mypy",
        summary="The plugin met a state it did not expect; the message says where.",
        why="The plugin never crashes mypy: an internal surprise is reported so it can be filed, and the rest of the run goes on.",
        bad="(reported by the plugin itself)",
        good="(no such error)",
        runnable=False,
    ),
    Rule(
        code="RC207",
        name="runner-input-unbound",
        tool="mypy",
        summary="A runner leaves its input type `T` unbound: `class R(ModelRunnerBase)` or `ModelRunnerBase[Any]`.",
        why="With `T` as `Any` nothing about the runner's input can be checked: mypy accepts any input anywhere, and the plugin's RC201, RC203 and RC204 have no type to check against. Reported at the class statement that writes the `Any` (its subclasses inherit it and are not reported again); a generic intermediate that passes its own type variable on (`class Base(ModelRunnerBase[T], Generic[T])`) binds `T`. Left to mypy under `disallow_any_generics` ([type-arg]) and `disallow_any_explicit`. An unpacked type variable tuple (`ModelRunnerBase[Unpack[Ts]]`, `[*Ts]`) is not one type: mypy says [valid-type] and goes on with `Any`, which this names.",
        bad=_RC207_BAD,
        good=_RC207_GOOD,
    ),
)

#: The entries by code.
BY_CODE: dict[str, Rule] = {rule.code: rule for rule in RULES}
