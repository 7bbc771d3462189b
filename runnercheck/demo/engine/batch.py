"""Flatten a step's sequence groups into per-token and per-sequence lists.

Both engine shapes start their input preparation here, then turn the lists into tensors
and metadata in their own way."""

import dataclasses
from typing import List, Set

import torch

from runnercheck.demo.engine.lora import LoRARequest
from runnercheck.demo.engine.sequence import SequenceGroupMetadata


@dataclasses.dataclass
class BatchLists:
    input_tokens: List[int] = dataclasses.field(default_factory=list)
    input_positions: List[int] = dataclasses.field(default_factory=list)
    slot_mapping: List[int] = dataclasses.field(default_factory=list)
    #: Per sequence: length after this step, tokens computed this step, tokens cached before.
    seq_lens: List[int] = dataclasses.field(default_factory=list)
    query_lens: List[int] = dataclasses.field(default_factory=list)
    context_lens: List[int] = dataclasses.field(default_factory=list)
    block_tables: List[List[int]] = dataclasses.field(default_factory=list)
    lora_index_mapping: List[int] = dataclasses.field(default_factory=list)
    lora_prompt_mapping: List[int] = dataclasses.field(default_factory=list)
    lora_requests: Set[LoRARequest] = dataclasses.field(default_factory=set)
    image_embeds: List[torch.Tensor] = dataclasses.field(default_factory=list)
    image_token_indices: List[int] = dataclasses.field(default_factory=list)
    num_prefills: int = 0
    num_prefill_tokens: int = 0
    num_decode_tokens: int = 0


def collect_batch(
    seq_group_metadata_list: List[SequenceGroupMetadata], block_size: int
) -> BatchLists:
    """Prefill groups must come before decode groups (the scheduler never mixes them)."""
    batch = BatchLists()
    for seq_group_metadata in seq_group_metadata_list:
        is_prompt = seq_group_metadata.is_prompt
        lora_id = seq_group_metadata.lora_int_id
        if seq_group_metadata.lora_request is not None:
            batch.lora_requests.add(seq_group_metadata.lora_request)
        for seq_id, seq_data in seq_group_metadata.seq_data.items():
            seq_len = seq_data.get_len()
            context_len = 0 if is_prompt else seq_len - 1
            tokens = seq_data.get_token_ids()[context_len:seq_len]
            block_table = seq_group_metadata.block_tables[seq_id]
            if is_prompt and seq_group_metadata.multi_modal_data is not None:
                features = seq_group_metadata.multi_modal_data
                batch.image_embeds.append(features)
                start = len(batch.input_tokens)
                batch.image_token_indices.extend(range(start, start + features.shape[0]))
            batch.input_tokens.extend(tokens)
            batch.input_positions.extend(range(context_len, seq_len))
            for position in range(context_len, seq_len):
                block = block_table[position // block_size]
                batch.slot_mapping.append(block * block_size + position % block_size)
            batch.seq_lens.append(seq_len)
            batch.query_lens.append(seq_len - context_len)
            batch.context_lens.append(context_len)
            batch.block_tables.append(list(block_table))
            batch.lora_index_mapping.extend([lora_id] * len(tokens))
            batch.lora_prompt_mapping.append(lora_id)
            if is_prompt:
                batch.num_prefills += 1
                batch.num_prefill_tokens += len(tokens)
            else:
                batch.num_decode_tokens += len(tokens)
    return batch


def make_block_tables_tensor(block_tables: List[List[int]], device: str = "cpu") -> torch.Tensor:
    width = max((len(table) for table in block_tables), default=0)
    padded = [table + [0] * (width - len(table)) for table in block_tables]
    return torch.tensor(padded, dtype=torch.long, device=device).view(len(block_tables), width)
