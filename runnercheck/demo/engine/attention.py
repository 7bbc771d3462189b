"""Attention metadata and a paged attention that gathers each sequence's KV from its blocks."""

import dataclasses
from typing import Any, Dict, List, Optional, Type

import torch


@dataclasses.dataclass
class TinyAttentionMetadata:
    """Per-step attention metadata. Prefill tokens come first, then decode tokens."""

    num_prefills: int
    num_prefill_tokens: int
    num_decode_tokens: int
    #: Cache slot (block * block_size + offset) of every input token.
    slot_mapping: torch.Tensor
    #: Length of every sequence once this step's tokens are in the cache.
    seq_lens_tensor: Optional[torch.Tensor] = None
    #: Tokens of every sequence already in the cache before this step.
    context_lens_tensor: Optional[torch.Tensor] = None
    #: Start of every sequence's query tokens in the batch (length num_seqs + 1).
    query_start_loc: Optional[torch.Tensor] = None
    #: Block numbers of every sequence, padded with 0.
    block_tables: Optional[torch.Tensor] = None
    max_seq_len: int = 0
    #: Python copy of seq_lens_tensor.
    seq_lens: Optional[List[int]] = None

    def asdict_zerocopy(self) -> Dict[str, Any]:
        """The fields, without copying tensors."""
        return {field.name: getattr(self, field.name) for field in dataclasses.fields(self)}

    @property
    def num_seqs(self) -> int:
        assert self.seq_lens_tensor is not None
        return int(self.seq_lens_tensor.shape[0])


class TinyAttentionBackend:
    @staticmethod
    def get_name() -> str:
        return "tiny-paged"

    @staticmethod
    def get_metadata_cls() -> Type[TinyAttentionMetadata]:
        return TinyAttentionMetadata

    @staticmethod
    def make_metadata(**kwargs: Any) -> TinyAttentionMetadata:
        return TinyAttentionMetadata(**kwargs)

    @staticmethod
    def get_kv_cache_shape(
        num_blocks: int, block_size: int, num_heads: int, head_size: int
    ) -> tuple[int, ...]:
        return (2, num_blocks, block_size, num_heads, head_size)


def get_attn_backend() -> TinyAttentionBackend:
    return TinyAttentionBackend()


def paged_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    kv_cache: Optional[torch.Tensor],
    attn_metadata: TinyAttentionMetadata,
) -> torch.Tensor:
    """Write this step's keys/values into their slots, then attend causally over each
    sequence's cached keys/values. ``query``/``key``/``value``: [tokens, heads, head_size].

    Without a cache (embedding models) every sequence is a prompt attending to itself."""
    assert attn_metadata.query_start_loc is not None
    assert attn_metadata.seq_lens_tensor is not None
    starts = attn_metadata.query_start_loc.tolist()
    seq_lens = attn_metadata.seq_lens_tensor.tolist()
    scale = query.shape[-1] ** -0.5
    block_tables = attn_metadata.block_tables
    if kv_cache is not None:
        block_size = kv_cache.shape[2]
        flat = kv_cache.view(2, -1, kv_cache.shape[3], kv_cache.shape[4])
        flat[0].index_copy_(0, attn_metadata.slot_mapping, key)
        flat[1].index_copy_(0, attn_metadata.slot_mapping, value)
    out = torch.empty_like(query)
    for i, seq_len in enumerate(seq_lens):
        start, end = starts[i], starts[i + 1]
        if kv_cache is not None:
            assert block_tables is not None
            num_blocks = -(-seq_len // block_size)
            blocks = block_tables[i, :num_blocks]
            keys = kv_cache[0, blocks].flatten(0, 1)[:seq_len]
            values = kv_cache[1, blocks].flatten(0, 1)[:seq_len]
        else:
            keys, values = key[start:end], value[start:end]
        q = query[start:end]
        context = seq_len - (end - start)
        scores = torch.einsum("qhd,khd->hqk", q, keys) * scale
        q_pos = torch.arange(end - start, device=query.device).unsqueeze(1) + context
        k_pos = torch.arange(seq_len, device=query.device).unsqueeze(0)
        scores = scores.masked_fill(k_pos > q_pos, float("-inf"))
        out[start:end] = torch.einsum("hqk,khd->qhd", scores.softmax(dim=-1), values)
    return out
