"""What the scheduler hands to the workers and what they hand back."""

import dataclasses
from typing import Any, Dict, List, Optional, Tuple

import torch

from runnercheck.demo.engine.lora import LoRARequest


@dataclasses.dataclass
class SequenceData:
    prompt_token_ids: List[int]
    output_token_ids: List[int] = dataclasses.field(default_factory=list)

    def get_len(self) -> int:
        return len(self.prompt_token_ids) + len(self.output_token_ids)

    def get_prompt_len(self) -> int:
        return len(self.prompt_token_ids)

    def get_token_ids(self) -> List[int]:
        return self.prompt_token_ids + self.output_token_ids

    def get_last_token_id(self) -> int:
        if self.output_token_ids:
            return self.output_token_ids[-1]
        return self.prompt_token_ids[-1]

    def copy(self) -> "SequenceData":
        return SequenceData(list(self.prompt_token_ids), list(self.output_token_ids))


@dataclasses.dataclass(frozen=True)
class PoolingParams:
    """Embedding requests: pool the hidden state of the last prompt token."""

    normalize: bool = True


@dataclasses.dataclass
class SequenceGroupMetadata:
    """One request's sequences as one step sees them."""

    request_id: str
    is_prompt: bool
    seq_data: Dict[int, SequenceData]
    block_tables: Dict[int, List[int]]
    #: Sequences to sample at the end of a prompt (2: the prompt forks into two).
    best_of: int = 1
    lora_request: Optional[LoRARequest] = None
    #: Multimodal-like input: one feature row per leading prompt token.
    multi_modal_data: Optional[torch.Tensor] = None
    pooling_params: Optional[PoolingParams] = None

    @property
    def lora_int_id(self) -> int:
        return self.lora_request.lora_int_id if self.lora_request else 0


@dataclasses.dataclass
class ExecuteModelRequest:
    seq_group_metadata_list: List[SequenceGroupMetadata]
    blocks_to_swap_in: List[Tuple[int, int]] = dataclasses.field(default_factory=list)
    blocks_to_swap_out: List[Tuple[int, int]] = dataclasses.field(default_factory=list)
    blocks_to_copy: List[Tuple[int, int]] = dataclasses.field(default_factory=list)
    virtual_engine: int = 0
    num_steps: int = 1
    finished_requests_ids: List[str] = dataclasses.field(default_factory=list)
    #: Values a wrapper worker (speculative decoding) sends to the other ranks with this
    #: step's broadcast instead of a broadcast of its own; they read them back from
    #: the worker's ``received_extras``.
    broadcast_extras: Dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class SequenceOutput:
    parent_seq_id: int
    output_token: int


@dataclasses.dataclass
class CompletionSequenceGroupOutput:
    samples: List[SequenceOutput]


@dataclasses.dataclass
class SamplerOutput:
    outputs: List[CompletionSequenceGroupOutput]


@dataclasses.dataclass
class EmbeddingSequenceGroupOutput:
    embeddings: List[float]


@dataclasses.dataclass
class PoolerOutput:
    outputs: List[EmbeddingSequenceGroupOutput]
