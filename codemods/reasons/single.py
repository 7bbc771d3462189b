"""The reasons the single-class codemods refuse or leave a shape alone (MIG2xx):
``self-return`` (MIG201, MIG202), ``super-dict`` (MIG203) and ``fold-control-broadcast``
(MIG204), each with a bad and a good example that run as tests."""

from __future__ import annotations

from runnercheck.catalog import Rule, _variant
from runnercheck.rules.wrapper_control_broadcast import MIG204_WORKERS

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


RULES: tuple[Rule, ...] = (
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
