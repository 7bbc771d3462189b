"""The paged KV cache of one rank: device blocks the model uses, host blocks for swapping."""

from typing import List, Optional

import torch

from runnercheck.demo.engine.attention import TinyAttentionBackend
from runnercheck.demo.engine.config import CacheConfig, DeviceConfig, ModelConfig, ParallelConfig


class CacheEngine:
    """Holds one KV tensor per layer on each side and moves blocks between them.

    The device blocks live on ``device_config``'s device (default: the CPU), the host
    blocks on the CPU. ``blocks_to_swap_in``/``blocks_to_swap_out``/``blocks_to_copy`` are
    int64 tensors of shape [n, 2] holding (source block, destination block) pairs."""

    def __init__(
        self,
        cache_config: CacheConfig,
        model_config: ModelConfig,
        parallel_config: ParallelConfig,
        device_config: Optional[DeviceConfig] = None,
    ) -> None:
        assert cache_config.num_gpu_blocks is not None
        self.block_size = cache_config.block_size
        self.num_gpu_blocks = cache_config.num_gpu_blocks
        self.num_cpu_blocks = cache_config.num_cpu_blocks or 0
        self.num_layers = model_config.get_num_layers(parallel_config)
        self.num_heads = model_config.get_num_attention_heads(parallel_config)
        self.head_size = model_config.head_size
        self.dtype = torch.float32
        self.device = torch.device(device_config.device_type if device_config else "cpu")
        self.gpu_cache = self._allocate_kv_cache(self.num_gpu_blocks, self.device)
        self.cpu_cache = self._allocate_kv_cache(self.num_cpu_blocks, torch.device("cpu"))

    def _allocate_kv_cache(self, num_blocks: int, device: torch.device) -> List[torch.Tensor]:
        shape = TinyAttentionBackend.get_kv_cache_shape(
            num_blocks, self.block_size, self.num_heads, self.head_size
        )
        return [torch.zeros(shape, dtype=self.dtype, device=device) for _ in range(self.num_layers)]

    @staticmethod
    def _move(src: List[torch.Tensor], dst: List[torch.Tensor], pairs: torch.Tensor) -> None:
        for src_layer, dst_layer in zip(src, dst, strict=True):
            src_blocks = pairs[:, 0].to(src_layer.device)
            dst_blocks = pairs[:, 1].to(dst_layer.device)
            dst_layer[:, dst_blocks] = src_layer[:, src_blocks].to(dst_layer.device)

    def swap_in(self, src_to_dst: torch.Tensor) -> None:
        self._move(self.cpu_cache, self.gpu_cache, src_to_dst)

    def swap_out(self, src_to_dst: torch.Tensor) -> None:
        self._move(self.gpu_cache, self.cpu_cache, src_to_dst)

    def copy(self, src_to_dsts: torch.Tensor) -> None:
        self._move(self.gpu_cache, self.gpu_cache, src_to_dsts)

    @staticmethod
    def get_cache_block_size(
        cache_config: CacheConfig, model_config: ModelConfig, parallel_config: ParallelConfig
    ) -> int:
        heads = model_config.get_num_attention_heads(parallel_config)
        per_layer = 2 * cache_config.block_size * heads * model_config.head_size
        return per_layer * model_config.get_num_layers(parallel_config) * 4


class CPUCacheEngine(CacheEngine):
    """The CPU worker's cache: the model's blocks live in host memory, so there is
    nothing to swap; only copy-on-write copies happen."""

    def __init__(
        self,
        cache_config: CacheConfig,
        model_config: ModelConfig,
        parallel_config: ParallelConfig,
    ) -> None:
        super().__init__(
            CacheConfig(cache_config.block_size, cache_config.num_gpu_blocks, 0),
            model_config,
            parallel_config,
        )
        self.cpu_cache = self.gpu_cache

    def swap_in(self, src_to_dst: torch.Tensor) -> None:
        raise NotImplementedError("Swap is not supported in CPUCacheEngine.")

    def swap_out(self, src_to_dst: torch.Tensor) -> None:
        raise NotImplementedError("Swap is not supported in CPUCacheEngine.")
