"""Configuration of the tiny engine, split the way vLLM splits its configs."""

import dataclasses
from typing import Optional


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """Shape of the tiny decoder. Weights come from a generator seeded with ``seed``."""

    vocab_size: int = 512
    hidden_size: int = 64
    num_layers: int = 2
    num_attention_heads: int = 4
    intermediate_size: int = 128
    max_model_len: int = 64
    seed: int = 0
    #: Run the model as an embedding model (pooling instead of sampling).
    embedding_mode: bool = False

    @property
    def head_size(self) -> int:
        return self.hidden_size // self.num_attention_heads

    def get_num_attention_heads(self, parallel_config: "ParallelConfig") -> int:
        """Heads held by one tensor-parallel rank."""
        return self.num_attention_heads // parallel_config.tensor_parallel_size

    def get_num_layers(self, parallel_config: "ParallelConfig") -> int:
        return self.num_layers

    def verify_with_parallel_config(self, parallel_config: "ParallelConfig") -> None:
        tp = parallel_config.tensor_parallel_size
        if tp < 1:
            raise ValueError(f"tensor_parallel_size must be >= 1, got {tp}")
        if self.num_attention_heads % tp or self.intermediate_size % tp:
            raise ValueError(
                f"num_attention_heads ({self.num_attention_heads}) and intermediate_size "
                f"({self.intermediate_size}) must be divisible by tensor_parallel_size ({tp})"
            )


@dataclasses.dataclass(frozen=True)
class ParallelConfig:
    tensor_parallel_size: int = 1
    #: Seconds a rendezvous or a collective may take before it fails.
    timeout_s: float = 60.0

    @property
    def world_size(self) -> int:
        return self.tensor_parallel_size


@dataclasses.dataclass(frozen=True)
class SchedulerConfig:
    max_num_seqs: int = 8
    max_num_batched_tokens: int = 256
    chunked_prefill_enabled: bool = False


@dataclasses.dataclass(frozen=True)
class DeviceConfig:
    device_type: str = "cpu"


@dataclasses.dataclass
class CacheConfig:
    """Paged KV cache. ``num_gpu_blocks`` are the blocks the model reads and writes;
    ``num_cpu_blocks`` the swap space (0: no swapping)."""

    block_size: int = 4
    num_gpu_blocks: Optional[int] = 40
    num_cpu_blocks: Optional[int] = 64


@dataclasses.dataclass(frozen=True)
class LoRAConfig:
    """Adapters are small seeded biases added to the embeddings of their tokens."""

    max_loras: int = 2
    max_lora_id: int = 4


@dataclasses.dataclass(frozen=True)
class WorkloadConfig:
    """The seeded request stream (see :mod:`runnercheck.demo.engine.workload`)."""

    min_prompt_len: int = 3
    max_prompt_len: int = 24
    min_tokens: int = 4
    max_tokens: int = 16
    #: Share of requests that fork into two sequences after the prompt.
    fork_rate: float = 0.3
    lora_rate: float = 0.3
    num_loras: int = 2
    multi_modal_rate: float = 0.25
    embedding: bool = False
