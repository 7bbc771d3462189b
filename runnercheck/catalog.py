"""The rule catalog: one place that says what every code means.

A :class:`Rule` holds a code, its name, the tool that reports it, a one-line summary,
why it matters, and a bad and a good example that run as tests (a bad example
produces exactly its code, a good one nothing). The rules of ``runnercheck check``
keep their entries beside their checks (:mod:`runnercheck.rules`); the entries
here are the ones the layering keeps central: the errors of ``check`` itself, the
mypy plugin's rules (``name`` is the mypy error code: ``# type: ignore[name]``,
``disable_error_code``), the runtime validator's, and the reasons ``migrate`` refuses
or skips something. ``runnercheck rules`` lists them all.

An example of several files separates them with ``# file: NAME.py`` lines.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Tool = Literal["check", "mypy", "fuzz", "migrate"]


@dataclass(frozen=True)
class Rule:
    code: str
    name: str
    tool: Tool
    summary: str
    why: str
    bad: str
    good: str
    #: What to change by hand when the tool leaves the code alone (migrate's refusals).
    fix: str = ""
    #: False when the examples only illustrate (the tool reports the code itself, on
    #: input no example can hold, such as an unreadable file or an internal error).
    runnable: bool = True


def _variant(text: str, *edits: tuple[str, str]) -> str:
    """``text`` with each ``old`` (present exactly once) replaced by ``new``: one example
    made from another (a bad one from a good one, or the fix of a bad one), so the source
    shows exactly what differs between them."""
    for old, new in edits:
        if text.count(old) != 1:
            raise ValueError(f"catalog example edit does not match exactly once: {old!r}")
        text = text.replace(old, new)
    return text


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

# ------------------------------------------------------ examples: migrate's reasons
# A legacy (vLLM 0.5.0) worker and runner that each broadcast once per step; migrate
# merges them into one broadcast. Each reason's bad example breaks this pair in one way.

_LEGACY_RUNNER = """\
# file: model_runner.py
from typing import Any, List, Optional, Tuple

import torch

from vllm.distributed import broadcast_tensor_dict


class ModelRunner:
    def __init__(self, model: Any, is_driver_worker: bool = False) -> None:
        self.model = model
        self.is_driver_worker = is_driver_worker

    def prepare_input_tensors(
        self, seq_group_metadata_list: Optional[List[Any]]
    ) -> Tuple[torch.Tensor, torch.Tensor]:
        if self.is_driver_worker:
            assert seq_group_metadata_list is not None
            input_tokens = torch.tensor([s.token for s in seq_group_metadata_list])
            input_positions = torch.tensor([s.position for s in seq_group_metadata_list])
            metadata_dict = {"input_tokens": input_tokens, "input_positions": input_positions}
            broadcast_tensor_dict(metadata_dict, src=0)
        else:
            metadata_dict = broadcast_tensor_dict(src=0)
            input_tokens = metadata_dict.pop("input_tokens")
            input_positions = metadata_dict.pop("input_positions")
        return (input_tokens, input_positions)

    def execute_model(
        self, seq_group_metadata_list: Optional[List[Any]], kv_caches: List[torch.Tensor]
    ) -> Optional[torch.Tensor]:
        input_tokens, input_positions = self.prepare_input_tensors(seq_group_metadata_list)
        return self.model(input_tokens, input_positions, kv_caches)
"""
_LEGACY_WORKER = """\
# file: worker.py
from typing import Any, Dict, List, Optional

import torch

from vllm.distributed import broadcast_tensor_dict

from model_runner import ModelRunner


class Worker:
    def __init__(self, model: Any, is_driver_worker: bool = False) -> None:
        self.is_driver_worker = is_driver_worker
        self.model_runner = ModelRunner(model, is_driver_worker)
        self.gpu_cache: List[torch.Tensor] = []

    def execute_model(self, seq_group_metadata_list: Optional[List[Any]] = None) -> List[Any]:
        if self.is_driver_worker:
            assert seq_group_metadata_list is not None
            num_seq_groups = len(seq_group_metadata_list)
            data: Dict[str, Any] = {"num_seq_groups": num_seq_groups}
            broadcast_tensor_dict(data, src=0)
        else:
            data = broadcast_tensor_dict(src=0)
            num_seq_groups = data["num_seq_groups"]
        if num_seq_groups == 0:
            return []
        output = self.model_runner.execute_model(seq_group_metadata_list, self.gpu_cache)
        return [output]
"""
#: The pair as migrate accepts it (the fixed version of most bad examples below).
_LEGACY_PAIR = _LEGACY_RUNNER + _LEGACY_WORKER
_RUNNER_DICT = '            metadata_dict = {"input_tokens": input_tokens, "input_positions": input_positions}\n'
_RUNNER_RETURN = "        return (input_tokens, input_positions)\n"
_RECEIVE_POSITIONS = '            input_positions = metadata_dict.pop("input_positions")\n'

_MIG101_BAD = _variant(
    _LEGACY_PAIR,
    (
        _RUNNER_DICT + "            broadcast_tensor_dict(metadata_dict, src=0)\n",
        '            metadata_dict = {"input_tokens": input_tokens}\n'
        "            broadcast_tensor_dict(metadata_dict, src=0)\n"
        '            broadcast_tensor_dict({"input_positions": input_positions}, src=0)\n',
    ),
    (
        _RECEIVE_POSITIONS,
        '            input_positions = broadcast_tensor_dict(src=0)["input_positions"]\n',
    ),
)
_MIG102_BAD = _variant(
    _LEGACY_PAIR,
    (
        _RUNNER_DICT,
        "            metadata_dict = {\n"
        '                "input_tokens": input_tokens,\n'
        '                "input_positions": input_positions,\n'
        '                "num_seqs": len(seq_group_metadata_list),\n'
        "            }\n",
    ),
)
_MIG103_BAD = _variant(
    _LEGACY_WORKER,
    ("from model_runner import", "from vllm.worker.model_runner import"),
)
_MIG105_BAD = _variant(
    _LEGACY_PAIR, (_RUNNER_RETURN, "        return (input_tokens, input_positions.long())\n")
)
_MIG105_GOOD = _variant(
    _LEGACY_PAIR,
    (_RUNNER_RETURN, "        input_positions = input_positions.long()\n" + _RUNNER_RETURN),
)
_MIG106_BAD = _variant(
    _LEGACY_PAIR,
    (
        _RECEIVE_POSITIONS,
        '            input_positions = metadata_dict.pop("input_positions").to(self.device)\n',
    ),
)
_MIG107_BAD = _variant(
    _LEGACY_PAIR,
    ("-> Tuple[torch.Tensor, torch.Tensor]:", "-> Tuple[torch.Tensor, int]:"),
    (
        "            input_positions = torch.tensor([s.position for s in seq_group_metadata_list])\n",
        "            num_seq_groups = len(seq_group_metadata_list)\n",
    ),
    (
        _RUNNER_DICT,
        '            metadata_dict = {"input_tokens": input_tokens, "num_seq_groups": num_seq_groups}\n',
    ),
    (_RECEIVE_POSITIONS, '            num_seq_groups = metadata_dict.pop("num_seq_groups")\n'),
    (_RUNNER_RETURN, "        return (input_tokens, num_seq_groups)\n"),
    (
        "        input_tokens, input_positions = self.prepare_input_tensors(seq_group_metadata_list)\n"
        "        return self.model(input_tokens, input_positions, kv_caches)\n",
        "        input_tokens, num_seq_groups = self.prepare_input_tensors(seq_group_metadata_list)\n"
        "        return self.model(input_tokens, kv_caches)[:num_seq_groups]\n",
    ),
)
_MIG107_GOOD = _variant(
    _MIG107_BAD,
    (
        'input_tokens, "num_seq_groups": num_seq_groups}',
        'input_tokens, "num_seqs": num_seq_groups}',
    ),
    ('metadata_dict.pop("num_seq_groups")', 'metadata_dict.pop("num_seqs")'),
)
_MIG108_BAD = _variant(
    _LEGACY_PAIR,
    (
        "\n\nclass ModelRunner:",
        "\n#: What prepare_input_tensors returns.\n"
        "ModelRunnerInput = Tuple[torch.Tensor, torch.Tensor]\n\n\nclass ModelRunner:",
    ),
    ("    ) -> Tuple[torch.Tensor, torch.Tensor]:\n", "    ) -> ModelRunnerInput:\n"),
)
_MIG109_BAD = _variant(
    _LEGACY_PAIR,
    (
        "        return self.model(input_tokens, input_positions, kv_caches)\n",
        "        return self.model(input_tokens, input_positions, kv_caches)\n\n"
        "    def profile_run(self, seq_group_metadata_list: List[Any]) -> None:\n"
        "        self.prepare_input_tensors(seq_group_metadata_list)\n",
    ),
)
_CALLER_TEST = """\
# file: test_runner.py
from model_runner import ModelRunner


def test_prepare(runner: ModelRunner, seqs: list) -> None:
    input_tokens, input_positions = runner.prepare_input_tensors(seqs)
    assert input_tokens.shape == input_positions.shape
"""
_MIG112_BAD = _LEGACY_PAIR + _variant(
    _CALLER_TEST,
    (
        "    input_tokens, input_positions = runner.prepare_input_tensors(seqs)\n"
        "    assert input_tokens.shape == input_positions.shape\n",
        "    assert runner.prepare_input_tensors(seqs)[0] is not None\n",
    ),
)
#: (the caller is rewritten with the group: ``model_input = runner.prepare_model_input(seqs)``)
_MIG112_GOOD = _LEGACY_PAIR + _CALLER_TEST

_MIG201_GOOD = """\
# file: model_input.py
from dataclasses import dataclass
from typing import Any, Dict, Optional

import torch


@dataclass(frozen=True)
class ModelInputForGPU:
    input_tokens: Optional[torch.Tensor] = None

    def as_broadcastable_tensor_dict(self) -> Dict[str, Any]:
        tensor_dict = {"input_tokens": self.input_tokens}
        return tensor_dict
# file: xpu_model_input.py
from dataclasses import dataclass
from typing import Any, Dict, Optional

import torch

from model_input import ModelInputForGPU


@dataclass(frozen=True)
class ModelInputForXPU(ModelInputForGPU):
    selected_token_indices: Optional[torch.Tensor] = None

    def as_broadcastable_tensor_dict(self) -> Dict[str, Any]:
        tensor_dict = super().as_broadcastable_tensor_dict()
        tensor_dict["selected_token_indices"] = self.selected_token_indices
        return tensor_dict
"""
_MIG201_BAD = _variant(
    _MIG201_GOOD.partition("# file: xpu_model_input.py\n")[2],
    ("from model_input import", "from vllm.worker.model_runner import"),
)

_MIG202_BAD = """\
from dataclasses import dataclass
from typing import Any, Dict, Optional

import torch

from vllm.attention import AttentionMetadata
from vllm.worker.model_runner_base import _add_attn_metadata_broadcastable_dict


@dataclass(frozen=True)
class ModelInputForGPU:
    input_tokens: Optional[torch.Tensor] = None
    attn_metadata: Optional[AttentionMetadata] = None

    def as_broadcastable_tensor_dict(self) -> Dict[str, Any]:
        tensor_dict = {"input_tokens": self.input_tokens}
        _add_attn_metadata_broadcastable_dict(tensor_dict, self.attn_metadata)
        return tensor_dict


@dataclass(frozen=True)
class ModelInputForGPUWithSamplingMetadata(ModelInputForGPU):
    selected_token_indices: Optional[torch.Tensor] = None

    def as_broadcastable_tensor_dict(self) -> Dict[str, Any]:
        tensor_dict = {
            "input_tokens": self.input_tokens,
            "selected_token_indices": self.selected_token_indices,
        }
        _add_attn_metadata_broadcastable_dict(tensor_dict, self.attn_metadata)
        return tensor_dict
"""
_MIG202_GOOD = _variant(
    _MIG202_BAD,
    (
        "        tensor_dict = {\n"
        '            "input_tokens": self.input_tokens,\n'
        '            "selected_token_indices": self.selected_token_indices,\n'
        "        }\n"
        "        _add_attn_metadata_broadcastable_dict(tensor_dict, self.attn_metadata)\n",
        '        tensor_dict = {"input_tokens": self.input_tokens}\n'
        "        _add_attn_metadata_broadcastable_dict(tensor_dict, self.attn_metadata)\n"
        '        tensor_dict["selected_token_indices"] = self.selected_token_indices\n',
    ),
)

#: MIG204's examples up to the wrapper's control values: an inner worker whose step
#: carries the request's extras, and a wrapper that steps it (the tests build on it).
MIG204_WORKERS = """\
from vllm.distributed import broadcast_tensor_dict


class Worker:
    received_extras: dict

    def __init__(self, is_driver_worker):
        self.is_driver_worker = is_driver_worker

    def execute_model(self, execute_model_req=None):
        if self.is_driver_worker:
            if execute_model_req is None:
                broadcast_tensor_dict({}, src=0)
                return None
            data = {
                "tokens": execute_model_req.tokens,
                "broadcast_extras": execute_model_req.broadcast_extras,
            }
            broadcast_tensor_dict(data, src=0)
        else:
            data = broadcast_tensor_dict(src=0)
            if not data:
                return None
            self.received_extras = data.pop("broadcast_extras")
        return [data["tokens"]]


class SpecWorker:
    def __init__(self, proposer: Worker, scorer: Worker, rank):
        self.proposer = proposer
        self.scorer = scorer
        self.rank = rank

    def execute_model(self, execute_model_req=None):
        if self.rank != 0:
            self._run_non_driver()
            return []
        if execute_model_req is None:
            broadcast_tensor_dict({}, src=0)
            return []
"""
_MIG204_WORKER = MIG204_WORKERS + "        prefill = execute_model_req.lookahead == 0\n"
_MIG204_BAD = (
    _MIG204_WORKER
    + """\
        broadcast_tensor_dict({"prefill": prefill}, src=0)
        if prefill:
            return self.scorer.execute_model(execute_model_req)
        self.proposer.execute_model(execute_model_req)
        return self.scorer.execute_model(execute_model_req)

    def _run_non_driver(self):
        data = broadcast_tensor_dict(src=0)
        if not data:
            return False
        # which worker's step comes first depends on the control values
        if not data["prefill"]:
            self.proposer.execute_model()
        self.scorer.execute_model()
        return True
"""
)
_MIG204_GOOD = (
    _MIG204_WORKER
    + """\
        # the proposer's step carries the control values on every step
        execute_model_req.broadcast_extras = {"prefill": prefill}
        self.proposer.execute_model(execute_model_req)
        return self.scorer.execute_model(execute_model_req)

    def _run_non_driver(self):
        if self.proposer.execute_model() is None:
            return False
        self.scorer.execute_model()
        return True
"""
)

_MIG203_BAD = """\
from dataclasses import dataclass
from typing import Any, Dict, Optional

import torch

from vllm.model_executor.pooling_metadata import PoolingMetadata


@dataclass(frozen=True)
class ModelInputForGPU:
    input_tokens: Optional[torch.Tensor] = None
    input_positions: Optional[torch.Tensor] = None

    def as_broadcastable_tensor_dict(self) -> Dict[str, Any]:
        tensor_dict = {
            "input_tokens": self.input_tokens,
            "input_positions": self.input_positions,
        }
        return tensor_dict


@dataclass(frozen=True)
class ModelInputForGPUWithPoolingMetadata(ModelInputForGPU):
    pooling_metadata: Optional[PoolingMetadata] = None

    def as_broadcastable_tensor_dict(self) -> Dict[str, Any]:
        tensor_dict = {
            "input_tokens": self.input_tokens,
            "pooling_metadata": self.pooling_metadata,
        }
        return tensor_dict
"""
_MIG203_GOOD = _variant(
    _MIG203_BAD,
    (
        '            "input_tokens": self.input_tokens,\n'
        '            "pooling_metadata": self.pooling_metadata,\n',
        '            "input_tokens": self.input_tokens,\n'
        '            "input_positions": self.input_positions,\n'
        '            "pooling_metadata": self.pooling_metadata,\n',
    ),
)


_CENTRAL: tuple[Rule, ...] = (
    Rule(
        code="RC001",
        name="syntax-error",
        tool="check",
        summary="A source file could not be read or parsed; it was not analysed.",
        why="A file the tools cannot read may hide any other finding; the run reports it and exits non-zero instead of silently skipping it. `migrate` reports the same code for a file it cannot read or parse, and leaves that file alone (MIG001 and MIG002, its codes before, are still accepted in `ignore`, `select`, `per_file_ignores`, inline comments and baselines, as RC001).",
        bad="""\
def prepare_model_input(self, seq_group_metadata_list:
    return None
""",
        good="""\
def prepare_model_input(self, seq_group_metadata_list):
    return None
""",
    ),
    Rule(
        code="RC002",
        name="internal-error",
        tool="check",
        summary="The checker failed on this file or class; it was not (fully) analysed.",
        why="An internal error must not hide the rest of the run: it is reported for the file it happened in, the other files are still checked, and the run exits non-zero.",
        bad="(reported by runnercheck itself, with the exception)",
        good="(no such finding)",
        runnable=False,
    ),
    Rule(
        code="RC003",
        name="half-applied-migration",
        tool="check",
        summary="An interrupted `runnercheck migrate` left a worker/runner group half-applied.",
        why="Some files of the group are in the merged shape and some are not: every file "
        "compiles, but the old worker calls the new runner with the old arguments and fails "
        "at run time. `runnercheck migrate --recover` puts the old contents back. A journal "
        "that is not as `migrate` writes it (a symbolic link, a file outside its tree, a "
        "field of the wrong type or range) is reported too, and left alone.",
        bad="# worker.py still calls execute_model(seq_group_metadata_list, kv_caches)\n"
        "# model_runner.py already defines execute_model(model_input, kv_caches)",
        good="# both files old, or both files migrated",
        runnable=False,
    ),
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
    Rule(
        code="RC301",
        name="roundtrip-lost-field",
        tool="fuzz",
        summary="A field arrives on a receiving rank as its default instead of the sent value.",
        why="The field is not in the broadcast dict (or not read back), so non-driver ranks compute with different input from the driver.",
        bad="# as_broadcastable_tensor_dict omits 'lora_mapping'",
        good="# every non-driver-only field is broadcast and read back",
        runnable=False,
    ),
    Rule(
        code="RC302",
        name="roundtrip-exception",
        tool="fuzz",
        summary="Converting, broadcasting or rebuilding the input raised on some rank.",
        why="Recursion, unknown keyword arguments and unpicklable values only fail with several ranks; the fuzzer shows which rank raised what.",
        bad="return cls.from_broadcasted_tensor_dict(tensor_dict)",
        good="return cls(**tensor_dict)",
        runnable=False,
    ),
    Rule(
        code="RC303",
        name="roundtrip-altered-value",
        tool="fuzz",
        summary="A field arrives with another type, dtype, shape, value or device type.",
        why="A silent conversion (e.g. int64 -> int32, a list to a tuple) changes what the model computes on non-driver ranks.",
        bad="'input_positions': self.input_positions.to(torch.int32)",
        good="'input_positions': self.input_positions",
        runnable=False,
    ),
    Rule(
        code="RC304",
        name="roundtrip-nondeterministic",
        tool="fuzz",
        summary="The same input round-tripped twice gives different results.",
        why="Ranks must rebuild identical inputs; order- or time-dependent conversion makes tensor-parallel ranks diverge.",
        bad="return {k: v for k, v in zip(random.sample(keys, len(keys)), values)}",
        good="return {k: getattr(self, k) for k in keys}",
        runnable=False,
    ),
    Rule(
        code="RC305",
        name="roundtrip-mutates-sender",
        tool="fuzz",
        summary="`as_broadcastable_tensor_dict` changes the object it is called on.",
        why="The driver keeps using its input after broadcasting it; a conversion that pops or rewrites its own fields corrupts the driver's step.",
        bad="d = self.__dict__; d.pop('seq_lens'); return d",
        good="d = dict(self.__dict__); d.pop('seq_lens'); return d",
        runnable=False,
    ),
    Rule(
        code="RC306",
        name="rank-failure",
        tool="fuzz",
        summary="A rank died, or a collective missed its deadline.",
        why="A rank that raises or blocks makes the others wait forever in the real engine; the fuzzer reports it instead of hanging.",
        bad="if rank != 0: raise RuntimeError('only on non-driver')",
        good="(every rank completes the round trip)",
        runnable=False,
    ),
    Rule(
        code="MIG003",
        name="symlink-outside",
        tool="migrate",
        summary="A path leads outside the given paths (a symbolic link, a directory swapped during the run, a file with other hard links); skipped.",
        why="migrate writes only inside the paths it was given: it never follows a link out of them, never writes through a directory replaced while it runs, and never writes a file in place whose other hard links may lie outside (`--replace-hard-links` writes a new file instead).",
        bad="(see summary)",
        good="(see summary)",
        runnable=False,
    ),
    Rule(
        code="MIG004",
        name="read-only",
        tool="migrate",
        summary="A file of the group is read-only (`--force` rewrites it).",
        why="A read-only file is usually read-only on purpose; migrate does not rewrite it without being told to.",
        bad="(reported by migrate itself, on the state of the files on disk)",
        good="(no such refusal)",
        runnable=False,
    ),
    Rule(
        code="MIG005",
        name="changed-on-disk",
        tool="migrate",
        summary="A file of the group changed while the run planned or wrote it; the group is as it was.",
        why="An edit made during the run must never be lost: every file is compared with what was planned, under the tree lock, right before it is replaced.",
        bad="(reported by migrate itself, on the state of the files on disk)",
        good="(no such refusal)",
        runnable=False,
    ),
    Rule(
        code="MIG006",
        name="write-failed",
        tool="migrate",
        summary="A file of the group could not be written; the group was put back as it was.",
        why="A group is one transaction: a failed write rolls back the files already written, so the tree is never half old and half new.",
        bad="(reported by migrate itself, on the state of the files on disk)",
        good="(no such refusal)",
        runnable=False,
    ),
    Rule(
        code="MIG007",
        name="half-applied",
        tool="migrate",
        summary="An interrupted run left the group half-applied (`migrate` rolls it back).",
        why="A kill in the middle of a group's writes leaves its journal; the next run (or `--recover`) rolls the group back, or forward when that is what keeps the user's edits. Without a journal (an editor saved a buffer read before the run), a legacy worker driving a migrated runner, or the reverse, is reported as well: it fails at its first step, and only a person knows which version of each file to keep. A journal that is not as `migrate` writes it is reported and left alone.",
        bad="(reported by migrate itself, on the state of the files on disk)",
        good="(no such refusal)",
        runnable=False,
    ),
    Rule(
        code="MIG101",
        name="extra-broadcast",
        tool="migrate",
        summary="A broadcast the planner does not recognise.",
        why="The merged shape has exactly one broadcast per step; a broadcast the planner cannot place (a second one in the runner, one outside the driver/non-driver split) would be lost or duplicated.",
        bad=_MIG101_BAD,
        good=_LEGACY_PAIR,
        fix="One broadcast in the driver branch of the `if self.is_driver_worker:` split and one receive at the top of the other branch; a further one only as `if <cond>: ...; broadcast(<value>)` on the driver and `if <cond>: <d> = broadcast(); ...` on the other ranks, with <cond> read from values the first broadcast carries.",
    ),
    Rule(
        code="MIG102",
        name="untraceable-key",
        tool="migrate",
        summary="A broadcast key whose value or use cannot be traced.",
        why="Every broadcast key must become a field of the new input class with a traceable value; a key whose value or use cannot be traced could change what non-driver ranks compute.",
        bad=_MIG102_BAD,
        good=_LEGACY_PAIR,
        fix="Build the broadcast dict as a literal whose values are the values the method returns (or values the tail after the split reads), and read the received dict only by literal key or through one `**dict` call.",
    ),
    Rule(
        code="MIG103",
        name="missing-runner",
        tool="migrate",
        summary="A runner the worker drives cannot be found.",
        why="The worker and every runner it drives are rewritten together; a runner outside the given paths would keep the old calling convention.",
        bad=_MIG103_BAD,
        good=_LEGACY_PAIR,
        fix="Give migrate the directory that holds every runner the worker drives.",
    ),
    Rule(
        code="MIG104",
        name="missing-worker",
        tool="migrate",
        summary="A runner broadcasts but no worker that drives it was found.",
        why="A runner that broadcasts but that no worker drives cannot be merged into a worker's broadcast.",
        bad=_LEGACY_RUNNER,
        good=_LEGACY_PAIR,
        fix="Give migrate the worker that drives the runner too.",
    ),
    Rule(
        code="MIG105",
        name="unrecognised-shape",
        tool="migrate",
        summary="A method does not have the driver/non-driver shape.",
        why="The rewrite moves the driver's and the non-driver's code into new methods; a method without the recognised driver/non-driver shape cannot be split safely.",
        bad=_MIG105_BAD,
        good=_MIG105_GOOD,
        fix="Write the method as `if self.is_driver_worker: <prepare; dict literal; broadcast> else: <receive; rebuild>`, then any statements every rank runs, then `return (a, b, ...)`.",
    ),
    Rule(
        code="MIG106",
        name="non-driver-state",
        tool="migrate",
        summary="The non-driver path reads runner state other than the attention backend.",
        why="Non-driver ranks rebuild the input from the broadcast dict alone; state the non-driver path reads from the runner would be missing there.",
        bad=_MIG106_BAD,
        good=_LEGACY_PAIR,
        fix="Send the value in the broadcast dict instead of reading it from `self` on the other ranks.",
    ),
    Rule(
        code="MIG107",
        name="key-collision",
        tool="migrate",
        summary="The worker and a runner broadcast the same key.",
        why="The worker's and the runner's keys travel in one dict after the merge; the same key from both would overwrite one value.",
        bad=_MIG107_BAD,
        good=_MIG107_GOOD,
        fix="Rename one of the two keys.",
    ),
    Rule(
        code="MIG108",
        name="name-taken",
        tool="migrate",
        summary="A name the merged shape needs is already used.",
        why="The merged shape adds classes, methods and a base module; a name already in use would be shadowed.",
        bad=_MIG108_BAD,
        good=_LEGACY_PAIR,
        fix="Rename the existing name (or delete the half-written merged API).",
    ),
    Rule(
        code="MIG109",
        name="unmigrated-caller",
        tool="migrate",
        summary="The runner calls its legacy input method outside `execute_model`.",
        why="The legacy input method becomes `prepare_model_input` (driver) and `make_model_input_from_broadcasted_tensor_dict` (other ranks), and only `execute_model` is rewritten to call them; any other caller (a profiling or warm-up run) would be left calling a method that no longer exists.",
        bad=_MIG109_BAD,
        good=_LEGACY_PAIR,
        fix="Call the legacy method only from `execute_model`.",
    ),
    Rule(
        code="MIG110",
        name="verify-failed",
        tool="migrate",
        summary="The rewritten sources did not re-parse, compile or re-analyse as migrated.",
        why="Nothing is written unless the rewritten sources compile and re-analyse as migrated, with no finding the old sources lacked.",
        bad="(see summary)",
        good="(see summary)",
        runnable=False,
    ),
    Rule(
        code="MIG111",
        name="non-driver-value-changed",
        tool="migrate",
        summary="The rewrite would change what a non-driver rank holds at an entry point of the step.",
        why="At every entry point of the step (the worker's step, `profile_run`, a dummy run) and on each role, the values that reach the model call, the sampler and the cache operations must keep their source: a literal flag the old non-driver path gave an object (`SamplingMetadata(..., perform_sampling=False)`) stays that literal, and a value a rank received (`blocks_to_copy`) must not become a constant or a default. A non-driver that now prepares locally gets the driver's value instead, and may run the sampler on logits only rank 0 holds.",
        bad="(see summary)",
        good="(see summary)",
        runnable=False,
        fix="`migrate` keeps a flag itself where the driver branch, or a helper of the runner it calls (vLLM 0.4's `_prepare_sample`), builds the object with the opposite literal or leaves it to a class default it can read (an `__init__` or dataclass field literal); otherwise (a default it cannot read, a factory, a helper of another class) give the flag in the driver branch (`SamplingMetadata(..., perform_sampling=True)`) and run `migrate` again, or keep that entry point on the old path.",
    ),
    Rule(
        code="MIG112",
        name="caller-not-rewritten",
        tool="migrate",
        summary="Code elsewhere in the project calls a runner method the migration removes, in a way it cannot rewrite.",
        why="The migration removes the legacy input method (`prepare_input_tensors`) and rewrites every call of it in the project as a rename refactor would (`model_input = runner.prepare_model_input(x)`, then each unpacked name from its field); a call whose result is not unpacked into names, unpacks another number of values, or keeps a value that is no field any more would fail at run time after the migration (a test that no longer runs).",
        bad=_MIG112_BAD,
        good=_MIG112_GOOD,
        fix="Unpack the call's result into names (`a, b, _ = runner.prepare_input_tensors(x)`) and run `migrate` again, or call `prepare_model_input` and read the input's fields by hand.",
    ),
    Rule(
        code="MIG199",
        name="internal-error",
        tool="migrate",
        summary="The planner failed on this group (a bug; please report it); the group was left alone.",
        why="A planner failure must not take other groups down: the group is left alone and the error is reported.",
        bad="(see summary)",
        good="(see summary)",
        runnable=False,
    ),
    Rule(
        code="MIG201",
        name="parent-not-found",
        tool="migrate",
        summary="The parent class needed by a single-class codemod is not in the given paths.",
        why="The codemod needs the parent's broadcast dict to know which fields travel; it does not guess when the parent is not in the given paths.",
        bad=_MIG201_BAD,
        good=_MIG201_GOOD,
    ),
    Rule(
        code="MIG202",
        name="order-dependent",
        tool="migrate",
        summary="The rewrite would change which value wins for a key.",
        why="super() runs the parent's statements first; when the child adds keys before them, or reorders them, the merged dict would change.",
        bad=_MIG202_BAD,
        good=_MIG202_GOOD,
    ),
    Rule(
        code="MIG203",
        name="drifted-copy",
        tool="migrate",
        summary="A subclass dict re-lists only part of its parent's keys; calling super() would change what it broadcasts.",
        why="A partial copy of the parent's keys has already drifted; calling super() would start broadcasting keys the subclass dropped.",
        bad=_MIG203_BAD,
        good=_MIG203_GOOD,
    ),
    Rule(
        code="MIG204",
        name="control-values-unplaced",
        tool="migrate",
        summary="The step model cannot show that every rank reads a wrapper worker's control values from the same inner step.",
        why="Folding the control broadcast into the first inner step's broadcast is safe only when every path that sends or receives the control values runs the same inner worker's step first, unconditionally, and that step carries the request's extras; otherwise a rank would read them from another step's dict, or never, and hang. Where the step model shows the fold cannot apply (the plan refuses), no codemod can remove that broadcast: `migrate` reports MIG204 as a note, which fails no run (`--check` included), as `check` reports RC110 there as a note; a shape the plan accepts but whose statements the rewrite cannot read is a refusal, as RC110 is an error there.",
        bad=_MIG204_BAD,
        good=_MIG204_GOOD,
        fix="Run the same inner worker's step first on every path (e.g. the proposer before the scorer), outside any condition on the control values, and give its step the extras channel (the request's `broadcast_extras` in its merged dict, `received_extras` on the other ranks).",
    ),
)


def central() -> tuple[Rule, ...]:
    """The central entries (every code but the rules of ``runnercheck check``)."""
    return _CENTRAL


#: The codes and names of the rules of ``runnercheck check`` (their entries live beside
#: their checks, a layer above): what a configuration may name in ``select``/``ignore``,
#: validated where the configuration is read. A test keeps it equal to those entries.
CHECK_RULE_NAMES: dict[str, str] = {
    "RC003": "half-applied-migration",
    "RC101": "recursive-from-dict",
    "RC102": "unaccepted-broadcast-key",
    "RC103": "unbroadcast-field",
    "RC104": "parent-dict-drift",
    "RC105": "collective-in-prepare",
    "RC106": "paired-broadcast",
    "RC107": "missing-contract-method",
    "RC108": "unpicklable-broadcast-value",
    "RC109": "merged-dict-leak",
    "RC110": "wrapper-control-broadcast",
    "RC111": "unsent-broadcast-key",
    "RC112": "role-schedules-differ",
}


#: Codes a configuration, a baseline or an inline comment may still name, and the code
#: each one is now: ``migrate`` reports a file it cannot read or parse as ``check``
#: does.
ALIASES: dict[str, str] = {"MIG001": "RC001", "MIG002": "RC001"}


def canonical(code: str) -> str:
    """The code ``code`` names (itself, or the code an alias stands for)."""
    return ALIASES.get(code.upper(), code)


def rule_words() -> tuple[set[str], set[str]]:
    """Every code and every name a ``select``/``ignore`` entry may use (central rules
    and the rules of ``check``; a migrate reason is named by its code only)."""
    codes = {rule.code for rule in _CENTRAL} | set(CHECK_RULE_NAMES) | set(ALIASES)
    names = {rule.name for rule in _CENTRAL if rule.tool != "migrate"}
    return codes, names | set(CHECK_RULE_NAMES.values())


_BY_CODE = {rule.code: rule for rule in _CENTRAL}
_BY_NAME = {rule.name: rule for rule in _CENTRAL if rule.tool != "migrate"}


def lookup(rules: tuple[Rule, ...], code_or_name: str) -> Rule:
    """A rule of ``rules`` by code (``RC101``) or name (``recursive-from-dict``);
    KeyError otherwise."""
    key = code_or_name.strip()
    code = canonical(key.upper())
    for rule in rules:
        if rule.code == code or (rule.tool != "migrate" and rule.name == key.lower()):
            return rule
    raise KeyError(code_or_name)


def get(code_or_name: str) -> Rule:
    """A central rule by code or name; KeyError otherwise."""
    key = code_or_name.strip()
    rule = _BY_CODE.get(canonical(key.upper())) or _BY_NAME.get(key.lower())
    if rule is None:
        raise KeyError(code_or_name)
    return rule


def for_tool(tool: Tool, rules: tuple[Rule, ...] = _CENTRAL) -> tuple[Rule, ...]:
    return tuple(rule for rule in rules if rule.tool == tool)


def markdown_table(rules: tuple[Rule, ...]) -> str:
    """The README's rule table."""
    lines = ["| code | name | tool | summary |", "| --- | --- | --- | --- |"]
    for rule in rules:
        lines.append(f"| {rule.code} | `{rule.name}` | {rule.tool} | {rule.summary} |")
    return "\n".join(lines)
