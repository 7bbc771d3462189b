"""Pooling for embedding models: the driver keeps this; other ranks never need it."""

import dataclasses
from typing import Dict, List, Optional, Tuple

import torch

from runnercheck.demo.engine.sequence import (
    EmbeddingSequenceGroupOutput,
    PoolerOutput,
    PoolingParams,
    SequenceData,
)


@dataclasses.dataclass
class PoolingMetadata:
    seq_groups: Optional[List[Tuple[List[int], PoolingParams]]]
    seq_data: Optional[Dict[int, SequenceData]]
    prompt_lens: Optional[List[int]]


def last_token_pool(hidden_states: torch.Tensor, pooling_metadata: PoolingMetadata) -> PoolerOutput:
    """The (normalised) hidden state of every prompt's last token."""
    assert pooling_metadata.prompt_lens is not None
    assert pooling_metadata.seq_groups is not None
    prompt_lens = torch.tensor(
        pooling_metadata.prompt_lens, dtype=torch.long, device=hidden_states.device
    )
    ends = prompt_lens.cumsum(0) - 1
    pooled = hidden_states[ends]
    outputs: List[EmbeddingSequenceGroupOutput] = []
    for row, (_, params) in zip(pooled, pooling_metadata.seq_groups, strict=True):
        if params.normalize:
            row = torch.nn.functional.normalize(row, dim=-1)
        outputs.append(EmbeddingSequenceGroupOutput([float(x) for x in row.tolist()]))
    return PoolerOutput(outputs)
