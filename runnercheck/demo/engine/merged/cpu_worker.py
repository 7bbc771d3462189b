"""A CPU worker class."""

from typing import List, Optional, Tuple

import torch

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
from runnercheck.demo.engine.sequence import ExecuteModelRequest

from .cpu_model_runner import CPUModelRunner
from .worker_base import LocalOrDistributedWorkerBase, LoraNotSupportedWorkerBase, WorkerInput


class CPUWorker(LoraNotSupportedWorkerBase, LocalOrDistributedWorkerBase):
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
        self.cache_engine: List[CPUCacheEngine]
        self.cpu_cache: List[List[torch.Tensor]]

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
        self.cache_engine = [
            CPUCacheEngine(self.cache_config, self.model_config, self.parallel_config)
        ]
        self.cpu_cache = [engine.cpu_cache for engine in self.cache_engine]

    @property
    def do_metadata_broadcast(self) -> bool:
        return self.parallel_config.tensor_parallel_size > 1

    @property
    def kv_cache(self) -> Optional[List[List[torch.Tensor]]]:
        return self.cpu_cache

    def execute_worker(
        self,
        worker_input: WorkerInput,
    ) -> None:
        if worker_input.blocks_to_copy is not None and worker_input.blocks_to_copy.numel() > 0:
            self.cache_engine[worker_input.virtual_engine].copy(worker_input.blocks_to_copy)

    @torch.inference_mode()
    def prepare_worker_input(self, execute_model_req: ExecuteModelRequest) -> WorkerInput:
        assert execute_model_req is not None
        virtual_engine = execute_model_req.virtual_engine
        num_seq_groups: int = len(execute_model_req.seq_group_metadata_list)
        blocks_to_copy = torch.tensor(
            execute_model_req.blocks_to_copy, device="cpu", dtype=torch.int64
        ).view(-1, 2)
        assert len(execute_model_req.blocks_to_swap_in) == 0
        assert len(execute_model_req.blocks_to_swap_out) == 0
        return WorkerInput(
            num_seq_groups=num_seq_groups,
            blocks_to_copy=blocks_to_copy,
            virtual_engine=virtual_engine,
        )

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
