"""A tiny decoder whose linears are split across tensor-parallel ranks.

Every rank draws the full weights from one generator seeded with ``ModelConfig.seed`` (so
they are identical everywhere) and keeps its slice: column-parallel linears keep a block
of output rows, row-parallel linears a block of input columns and all-reduce their output.
"""

from typing import List, Optional, Set

import torch
from torch import nn

from runnercheck.demo.engine.attention import TinyAttentionMetadata, paged_attention
from runnercheck.demo.engine.config import DeviceConfig, LoRAConfig, ModelConfig
from runnercheck.demo.engine.lora import LoRAMapping, LoRARequest
from runnercheck.demo.engine.parallel import (
    get_tensor_model_parallel_rank,
    get_tensor_model_parallel_world_size,
    tensor_model_parallel_all_reduce,
)
from runnercheck.demo.engine.pooling import PoolingMetadata, last_token_pool
from runnercheck.demo.engine.sampling import SamplingMetadata, greedy_sample
from runnercheck.demo.engine.sequence import PoolerOutput, SamplerOutput


class WeightSource:
    """Draws full-size weights in a fixed order from one seeded generator."""

    def __init__(self, seed: int) -> None:
        self.generator = torch.Generator().manual_seed(seed)

    def normal(self, *shape: int, scale: float) -> torch.Tensor:
        return torch.randn(shape, generator=self.generator, dtype=torch.float32) * scale


class ColumnParallelLinear(nn.Module):
    """y = x W^T with W's output rows split across ranks; the output stays split."""

    def __init__(self, full_weight: torch.Tensor) -> None:
        super().__init__()
        tp_size = get_tensor_model_parallel_world_size()
        rank = get_tensor_model_parallel_rank()
        rows = full_weight.shape[0] // tp_size
        self.weight = nn.Parameter(full_weight[rank * rows : (rank + 1) * rows].clone(), False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.weight.t()


class RowParallelLinear(nn.Module):
    """y = x W^T with W's input columns split across ranks; partial outputs are summed."""

    def __init__(self, full_weight: torch.Tensor) -> None:
        super().__init__()
        tp_size = get_tensor_model_parallel_world_size()
        rank = get_tensor_model_parallel_rank()
        cols = full_weight.shape[1] // tp_size
        self.weight = nn.Parameter(full_weight[:, rank * cols : (rank + 1) * cols].clone(), False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return tensor_model_parallel_all_reduce(x @ self.weight.t())


class RMSNorm(nn.Module):
    def __init__(self, hidden_size: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size), False)
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class TinyAttention(nn.Module):
    def __init__(self, config: ModelConfig, weights: WeightSource) -> None:
        super().__init__()
        hidden = config.hidden_size
        scale = hidden**-0.5
        self.head_size = config.head_size
        self.num_heads = config.num_attention_heads // get_tensor_model_parallel_world_size()
        self.q_proj = ColumnParallelLinear(weights.normal(hidden, hidden, scale=scale))
        self.k_proj = ColumnParallelLinear(weights.normal(hidden, hidden, scale=scale))
        self.v_proj = ColumnParallelLinear(weights.normal(hidden, hidden, scale=scale))
        self.o_proj = RowParallelLinear(weights.normal(hidden, hidden, scale=scale))

    def forward(
        self,
        hidden_states: torch.Tensor,
        kv_cache: Optional[torch.Tensor],
        attn_metadata: TinyAttentionMetadata,
    ) -> torch.Tensor:
        shape = (-1, self.num_heads, self.head_size)
        q = self.q_proj(hidden_states).view(shape)
        k = self.k_proj(hidden_states).view(shape)
        v = self.v_proj(hidden_states).view(shape)
        out = paged_attention(q, k, v, kv_cache, attn_metadata)
        output: torch.Tensor = self.o_proj(out.reshape(hidden_states.shape[0], -1))
        return output


class TinyMLP(nn.Module):
    def __init__(self, config: ModelConfig, weights: WeightSource) -> None:
        super().__init__()
        hidden, inter = config.hidden_size, config.intermediate_size
        self.gate_proj = ColumnParallelLinear(weights.normal(inter, hidden, scale=hidden**-0.5))
        self.up_proj = ColumnParallelLinear(weights.normal(inter, hidden, scale=hidden**-0.5))
        self.down_proj = RowParallelLinear(weights.normal(hidden, inter, scale=inter**-0.5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        output: torch.Tensor = self.down_proj(
            nn.functional.silu(self.gate_proj(x)) * self.up_proj(x)
        )
        return output


class TinyDecoderLayer(nn.Module):
    def __init__(self, config: ModelConfig, weights: WeightSource) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(config.hidden_size)
        self.self_attn = TinyAttention(config, weights)
        self.post_attention_layernorm = RMSNorm(config.hidden_size)
        self.mlp = TinyMLP(config, weights)

    def forward(
        self,
        hidden_states: torch.Tensor,
        kv_cache: Optional[torch.Tensor],
        attn_metadata: TinyAttentionMetadata,
    ) -> torch.Tensor:
        hidden_states = hidden_states + self.self_attn(
            self.input_layernorm(hidden_states), kv_cache, attn_metadata
        )
        output: torch.Tensor = hidden_states + self.mlp(
            self.post_attention_layernorm(hidden_states)
        )
        return output


class TinyDecoderForCausalLM(nn.Module):
    """Embeddings (tokens + learned positions), decoder layers, a replicated LM head.

    LoRA-like adapters: adapter ``i`` adds a seeded bias to the embeddings of the tokens
    mapped to it (see :meth:`set_active_loras`). Multimodal-like input: ``image_embeds``
    rows are added to the embeddings at ``image_token_indices``."""

    def __init__(self, config: ModelConfig, lora_config: Optional[LoRAConfig] = None) -> None:
        super().__init__()
        self.config = config
        weights = WeightSource(config.seed)
        hidden = config.hidden_size
        self.embed_tokens = nn.Parameter(
            weights.normal(config.vocab_size, hidden, scale=1.0), False
        )
        self.embed_positions = nn.Parameter(
            weights.normal(config.max_model_len, hidden, scale=0.5), False
        )
        self.layers = nn.ModuleList(
            TinyDecoderLayer(config, weights) for _ in range(config.num_layers)
        )
        self.norm = RMSNorm(hidden)
        self.lm_head = nn.Parameter(
            weights.normal(config.vocab_size, hidden, scale=hidden**-0.5), False
        )
        max_lora_id = lora_config.max_lora_id if lora_config else 0
        lora_biases = weights.normal(max_lora_id + 1, hidden, scale=0.5)
        lora_biases[0] = 0.0
        self.lora_biases = nn.Parameter(lora_biases, False)
        self.active_lora_index: Optional[torch.Tensor] = None
        self.active_loras: Set[int] = set()

    def set_active_loras(self, lora_requests: Set[LoRARequest], mapping: LoRAMapping) -> None:
        ids = {request.lora_int_id for request in lora_requests}
        unknown = set(mapping.index_mapping) - ids - {0}
        if unknown:
            raise ValueError(f"LoRA mapping uses adapters {sorted(unknown)} that are not active")
        self.active_loras = ids
        self.active_lora_index = torch.tensor(
            mapping.index_mapping, dtype=torch.long, device=self.lora_biases.device
        )

    def forward(
        self,
        input_ids: torch.Tensor,
        positions: torch.Tensor,
        kv_caches: List[Optional[torch.Tensor]],
        attn_metadata: TinyAttentionMetadata,
        image_embeds: Optional[torch.Tensor] = None,
        image_token_indices: Optional[torch.Tensor] = None,
    ) -> torch.Tensor:
        hidden_states = self.embed_tokens[input_ids] + self.embed_positions[positions]
        if self.active_lora_index is not None:
            hidden_states = hidden_states + self.lora_biases[self.active_lora_index]
        if image_embeds is not None and image_token_indices is not None:
            hidden_states = hidden_states.index_add(0, image_token_indices, image_embeds)
        for layer, kv_cache in zip(self.layers, kv_caches, strict=True):
            hidden_states = layer(hidden_states, kv_cache, attn_metadata)
        output: torch.Tensor = self.norm(hidden_states)
        return output

    def compute_logits(
        self, hidden_states: torch.Tensor, sampling_metadata: Optional[SamplingMetadata]
    ) -> torch.Tensor:
        if sampling_metadata is not None:
            hidden_states = hidden_states.index_select(0, sampling_metadata.selected_token_indices)
        return hidden_states @ self.lm_head.t()

    def sample(self, logits: torch.Tensor, sampling_metadata: SamplingMetadata) -> SamplerOutput:
        return greedy_sample(logits, sampling_metadata)

    def pooler(
        self, hidden_states: torch.Tensor, pooling_metadata: PoolingMetadata
    ) -> PoolerOutput:
        return last_token_pool(hidden_states, pooling_metadata)


def get_model(
    model_config: ModelConfig,
    lora_config: Optional[LoRAConfig] = None,
    device_config: Optional[DeviceConfig] = None,
) -> TinyDecoderForCausalLM:
    """Build the model for this rank (call after joining the process group). The weights
    are drawn on the CPU, so every device gets the same values, then moved to the device."""
    model = TinyDecoderForCausalLM(model_config, lora_config)
    if device_config is not None:
        model.to(device_config.device_type)
    model.eval()
    return model
