"""Which rows of the hidden states to turn into tokens, and the greedy sampler."""

import dataclasses
from typing import List, Optional

import torch

from runnercheck.demo.engine.sequence import (
    CompletionSequenceGroupOutput,
    SamplerOutput,
    SequenceGroupMetadata,
    SequenceOutput,
)


@dataclasses.dataclass
class SequenceGroupToSample:
    seq_ids: List[int]
    is_prompt: bool
    best_of: int
    #: Rows of the selected logits that belong to this group (one per sequence).
    sample_indices: List[int]


@dataclasses.dataclass
class SamplingMetadata:
    """Driver-side: ``seq_groups`` says who gets which token. Other ranks only need
    ``selected_token_indices`` to compute the same logits."""

    seq_groups: Optional[List[SequenceGroupToSample]] = dataclasses.field(
        metadata={"runnercheck": "driver-only"}
    )
    selected_token_indices: torch.Tensor
    num_prompts: int = dataclasses.field(default=0, metadata={"runnercheck": "driver-only"})

    @staticmethod
    def prepare(
        seq_group_metadata_list: List[SequenceGroupMetadata],
        seq_lens: List[int],
        query_lens: List[int],
        device: str = "cpu",
    ) -> "SamplingMetadata":
        """``seq_lens``/``query_lens`` hold one entry per sequence, in batch order."""
        seq_groups: List[SequenceGroupToSample] = []
        selected: List[int] = []
        token_start = 0
        seq_index = 0
        num_prompts = 0
        for seq_group_metadata in seq_group_metadata_list:
            seq_ids = list(seq_group_metadata.seq_data.keys())
            sample_indices: List[int] = []
            for _ in seq_ids:
                query_len = query_lens[seq_index]
                sample_indices.append(len(selected))
                selected.append(token_start + query_len - 1)
                token_start += query_len
                seq_index += 1
            num_prompts += int(seq_group_metadata.is_prompt)
            seq_groups.append(
                SequenceGroupToSample(
                    seq_ids=seq_ids,
                    is_prompt=seq_group_metadata.is_prompt,
                    best_of=seq_group_metadata.best_of,
                    sample_indices=sample_indices,
                )
            )
        return SamplingMetadata(
            seq_groups=seq_groups,
            selected_token_indices=torch.tensor(selected, dtype=torch.long, device=device),
            num_prompts=num_prompts,
        )


def greedy_sample(logits: torch.Tensor, sampling_metadata: SamplingMetadata) -> SamplerOutput:
    """Argmax per sequence; a prompt with ``best_of == 2`` gets its two best tokens."""
    assert sampling_metadata.seq_groups is not None, "sampling needs the driver's seq_groups"
    outputs: List[CompletionSequenceGroupOutput] = []
    for group in sampling_metadata.seq_groups:
        samples: List[SequenceOutput] = []
        if group.is_prompt and group.best_of > 1:
            row = logits[group.sample_indices[0]]
            for token in torch.topk(row, group.best_of).indices.tolist():
                samples.append(SequenceOutput(group.seq_ids[0], int(token)))
        else:
            for seq_id, index in zip(group.seq_ids, group.sample_indices, strict=True):
                samples.append(SequenceOutput(seq_id, int(torch.argmax(logits[index]))))
        outputs.append(CompletionSequenceGroupOutput(samples))
    return SamplerOutput(outputs)
