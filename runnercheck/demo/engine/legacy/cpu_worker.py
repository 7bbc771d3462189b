"""A CPU worker class."""

from typing import Any, Dict, List, Optional, Tuple, Union

import torch

from runnercheck.broadcast import broadcast_tensor_dict
from runnercheck.demo.engine.cache import CPUCacheEngine
from runnercheck.demo.engine.config import (
    CacheConfig,
    DeviceConfig,
    LoRAConfig,
    ModelConfig,
    ParallelConfig,
    SchedulerConfig,
)
from runnercheck.demo.engine.parallel import init_distributed_environment
from runnercheck.demo.engine.sequence import ExecuteModelRequest, PoolerOutput, SamplerOutput

from .cpu_model_runner import CPUModelRunner
from .worker_base import LoraNotSupportedWorkerBase


class CPUWorker(LoraNotSupportedWorkerBase):
    """A worker class that executes (a partition of) the model on a CPU socket.

    The KV cache lives in host memory: blocks are copied, never swapped.
    """

    def __init__(
        self,
        model_config: ModelConfig,
        parallel_config: ParallelConfig,
        scheduler_config: SchedulerConfig,
        device_config: DeviceConfig,
        cache_config: CacheConfig,
        local_rank: int,
        rank: int,
        distributed_init_method: str,
        lora_config: Optional[LoRAConfig] = None,
        is_driver_worker: bool = False,
    ) -> None:
        self.model_config = model_config
        self.parallel_config = parallel_config
        self.scheduler_config = scheduler_config
        self.device_config = device_config
        self.cache_config = cache_config
        self.local_rank = local_rank
        self.rank = rank
        self.distributed_init_method = distributed_init_method
        self.lora_config = lora_config
        self.is_driver_worker = is_driver_worker
        if self.is_driver_worker:
            assert self.rank == 0, "The driver worker must have rank 0."

        self.model_runner: CPUModelRunner = CPUModelRunner(
            model_config,
            parallel_config,
            scheduler_config,
            device_config,
            cache_config,
            lora_config=self.lora_config,
            is_driver_worker=is_driver_worker,
        )
        # Uninitialized cache engine. Will be initialized by
        # initialize_cache.
        self.cache_engine: CPUCacheEngine
        self.cpu_cache: List[torch.Tensor]

    def init_device(self) -> None:
        self.init_distributed_environment()

    def load_model(self) -> None:
        self.model_runner.load_model()

    def determine_num_available_blocks(self) -> Tuple[int, int]:
        """The configured number of KV blocks; the CPU worker never swaps, so the
        second number is always 0."""
        assert self.cache_config.num_gpu_blocks is not None
        return self.cache_config.num_gpu_blocks, 0

    def initialize_cache(self, num_gpu_blocks: int, num_cpu_blocks: int) -> None:
        """Initialize the KV cache. Currently, swappable CPU memory is not
        supported."""
        assert num_cpu_blocks == 0
        self.cache_config.num_gpu_blocks = num_gpu_blocks
        self.cache_config.num_cpu_blocks = num_cpu_blocks
        self._init_cache_engine()

    def _init_cache_engine(self) -> None:
        self.cache_engine = CPUCacheEngine(
            self.cache_config, self.model_config, self.parallel_config
        )
        self.cpu_cache = self.cache_engine.cpu_cache

    def cache_copy(
        self,
        blocks_to_copy: torch.Tensor,
    ) -> None:
        if blocks_to_copy.numel() > 0:
            self.cache_engine.copy(blocks_to_copy)

    @torch.inference_mode()
    def execute_model(
        self,
        execute_model_req: Optional[ExecuteModelRequest] = None,
    ) -> Optional[List[Union[SamplerOutput, PoolerOutput]]]:
        if execute_model_req is None:
            seq_group_metadata_list = None
        else:
            seq_group_metadata_list = execute_model_req.seq_group_metadata_list

        if self.is_driver_worker:
            if execute_model_req is None:
                # Tell the other workers to leave their execution loop.
                broadcast_tensor_dict({}, src=0)
                return None
            assert seq_group_metadata_list is not None
            num_seq_groups: int = len(seq_group_metadata_list)
            blocks_to_copy = torch.tensor(
                execute_model_req.blocks_to_copy, device="cpu", dtype=torch.int64
            ).view(-1, 2)
            assert len(execute_model_req.blocks_to_swap_in) == 0
            assert len(execute_model_req.blocks_to_swap_out) == 0
            data: Dict[str, Any] = {
                "num_seq_groups": num_seq_groups,
                "blocks_to_copy": blocks_to_copy,
            }
            broadcast_tensor_dict(data, src=0)
        else:
            broadcast_data = broadcast_tensor_dict(src=0)
            if not broadcast_data:
                return None
            num_seq_groups = broadcast_data["num_seq_groups"]
            blocks_to_copy = broadcast_data["blocks_to_copy"]

        self.cache_copy(blocks_to_copy)

        # If there is no input, we don't need to execute the model.
        if num_seq_groups == 0:
            return []

        output = self.model_runner.execute_model(seq_group_metadata_list, self.cpu_cache)

        # Only the driver worker samples: the other workers have no output.
        if output is None:
            return []
        # CPU worker only supports single-step execution.
        return [output]

    @torch.inference_mode()
    def start_worker_execution_loop(self) -> None:
        """Execute model loop in parallel worker, until the driver sends an empty input."""
        while self.execute_model() is not None:
            pass

    def init_distributed_environment(self) -> None:
        """Initialize the distributed environment."""
        parallel_config = self.parallel_config
        init_distributed_environment(
            parallel_config.world_size,
            self.rank,
            self.distributed_init_method,
            parallel_config.timeout_s,
        )

    def get_cache_block_size_bytes(self) -> int:
        """Return the size in bytes of a single KV cache block."""
        return CPUCacheEngine.get_cache_block_size(
            self.cache_config, self.model_config, self.parallel_config
        )
