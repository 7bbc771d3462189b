"""A worker class that executes (a partition of) the model."""

from typing import Any, Dict, List, Optional, Set, Tuple, Union

import torch
import torch.distributed

from runnercheck.broadcast import broadcast_tensor_dict
from runnercheck.demo.engine.cache import CacheEngine
from runnercheck.demo.engine.config import (
    CacheConfig,
    DeviceConfig,
    LoRAConfig,
    ModelConfig,
    ParallelConfig,
    SchedulerConfig,
)
from runnercheck.demo.engine.lora import LoRARequest
from runnercheck.demo.engine.parallel import init_distributed_environment
from runnercheck.demo.engine.sequence import ExecuteModelRequest, PoolerOutput, SamplerOutput

from .embedding_model_runner import EmbeddingModelRunner
from .model_runner import ModelRunner
from .worker_base import WorkerBase


class Worker(WorkerBase):
    """A worker class that executes (a partition of) the model.

    The worker is responsible for maintaining the KV cache and executing the model. In
    case of distributed inference, each worker is assigned a partition of the model.
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

        ModelRunnerClass = EmbeddingModelRunner if self.model_config.embedding_mode else ModelRunner
        self.model_runner = ModelRunnerClass(
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
        self.cache_engine: CacheEngine
        # Initialize gpu_cache as embedding models don't initialize kv_caches
        self.gpu_cache: Optional[List[torch.Tensor]] = None

    def init_device(self) -> None:
        self.device = torch.device(self.device_config.device_type)
        # Initialize the distributed environment.
        init_worker_distributed_environment(
            self.parallel_config, self.rank, self.distributed_init_method
        )

    def load_model(self) -> None:
        self.model_runner.load_model()

    def determine_num_available_blocks(self) -> Tuple[int, int]:
        """The configured numbers of device and host KV blocks."""
        assert self.cache_config.num_gpu_blocks is not None
        return self.cache_config.num_gpu_blocks, self.cache_config.num_cpu_blocks or 0

    def initialize_cache(self, num_gpu_blocks: int, num_cpu_blocks: int) -> None:
        """Allocate device and host KV cache with the specified number of blocks."""
        raise_if_cache_size_invalid(
            num_gpu_blocks, self.cache_config.block_size, self.model_config.max_model_len
        )
        self.cache_config.num_gpu_blocks = num_gpu_blocks
        self.cache_config.num_cpu_blocks = num_cpu_blocks
        self._init_cache_engine()

    def _init_cache_engine(self) -> None:
        assert self.cache_config.num_gpu_blocks is not None
        self.cache_engine = CacheEngine(
            self.cache_config, self.model_config, self.parallel_config, self.device_config
        )
        self.gpu_cache = self.cache_engine.gpu_cache

    def cache_swap(
        self,
        blocks_to_swap_in: Optional[torch.Tensor],
        blocks_to_swap_out: Optional[torch.Tensor],
        blocks_to_copy: Optional[torch.Tensor],
    ) -> None:
        # Issue cache operations.
        if blocks_to_swap_in is not None and blocks_to_swap_in.numel() > 0:
            self.cache_engine.swap_in(blocks_to_swap_in)
        if blocks_to_swap_out is not None and blocks_to_swap_out.numel() > 0:
            self.cache_engine.swap_out(blocks_to_swap_out)
        if blocks_to_copy is not None and blocks_to_copy.numel() > 0:
            self.cache_engine.copy(blocks_to_copy)

    @torch.inference_mode()
    def execute_model(
        self, execute_model_req: Optional[ExecuteModelRequest] = None
    ) -> List[Union[SamplerOutput, PoolerOutput]]:
        if not self.is_driver_worker:
            self._execute_model_non_driver()
            return []

        if execute_model_req is None:
            # This signals that there's no more requests to process for now.
            # All workers are running infinite loop with broadcast_tensor_dict,
            # and it stops the loop when the driver broadcasts an empty input.
            # Send an empty input to notify all other workers to stop their
            # execution loop.
            broadcast_tensor_dict({}, src=0)
            return []

        seq_group_metadata_list = execute_model_req.seq_group_metadata_list
        num_seq_groups = len(seq_group_metadata_list)
        # `blocks_to_swap_in` and `blocks_to_swap_out` are host tensors.
        blocks_to_swap_in = torch.tensor(
            execute_model_req.blocks_to_swap_in, device="cpu", dtype=torch.int64
        ).view(-1, 2)
        blocks_to_swap_out = torch.tensor(
            execute_model_req.blocks_to_swap_out, device="cpu", dtype=torch.int64
        ).view(-1, 2)
        # `blocks_to_copy` lives on the device: the source and target blocks of a
        # copy are on the same device.
        blocks_to_copy = torch.tensor(
            execute_model_req.blocks_to_copy, device=self.device, dtype=torch.int64
        ).view(-1, 2)
        data: Dict[str, Any] = {
            "num_seq_groups": num_seq_groups,
            "blocks_to_swap_in": blocks_to_swap_in,
            "blocks_to_swap_out": blocks_to_swap_out,
            "blocks_to_copy": blocks_to_copy,
        }
        broadcast_tensor_dict(data, src=0)

        self.cache_swap(blocks_to_swap_in, blocks_to_swap_out, blocks_to_copy)

        # If there is no input, we don't need to execute the model.
        if num_seq_groups == 0:
            return []

        output = self.model_runner.execute_model(seq_group_metadata_list, self.gpu_cache)
        # The driver worker always has the output of the step.
        assert output is not None

        # Worker only supports single-step execution. Wrap the output in a list
        # to conform to interface.
        return [output]

    @torch.inference_mode()
    def start_worker_execution_loop(self) -> None:
        """Execute model loop in parallel worker.

        You can stop the loop by executing a driver worker with an empty output.
        """
        while self._execute_model_non_driver():
            pass

    def _execute_model_non_driver(self) -> bool:
        """Execute model in parallel worker.

        Returns True iff there are remaining sequences to process.
        """
        assert not self.is_driver_worker
        data = broadcast_tensor_dict(src=0)
        if not data:
            return False

        num_seq_groups = data.get("num_seq_groups", 0)
        blocks_to_swap_in = data.get("blocks_to_swap_in")
        blocks_to_swap_out = data.get("blocks_to_swap_out")
        blocks_to_copy = data.get("blocks_to_copy")
        self.cache_swap(blocks_to_swap_in, blocks_to_swap_out, blocks_to_copy)

        # If there is no input, we don't need to execute the model.
        if num_seq_groups == 0:
            return False

        self.model_runner.execute_model(None, self.gpu_cache)
        return True

    def add_lora(self, lora_request: LoRARequest) -> bool:
        return self.model_runner.add_lora(lora_request)

    def remove_lora(self, lora_id: int) -> bool:
        return self.model_runner.remove_lora(lora_id)

    def list_loras(self) -> Set[int]:
        return self.model_runner.list_loras()

    @property
    def max_model_len(self) -> int:
        return self.model_config.max_model_len

    @property
    def vocab_size(self) -> int:
        return self.model_runner.vocab_size

    def get_cache_block_size_bytes(self) -> int:
        """Get the size of the KV cache block size in bytes."""
        return CacheEngine.get_cache_block_size(
            self.cache_config, self.model_config, self.parallel_config
        )


def init_worker_distributed_environment(
    parallel_config: ParallelConfig,
    rank: int,
    distributed_init_method: Optional[str] = None,
) -> None:
    """Initialize the distributed environment."""
    init_distributed_environment(
        parallel_config.world_size, rank, distributed_init_method, parallel_config.timeout_s
    )


def raise_if_cache_size_invalid(num_gpu_blocks: int, block_size: int, max_model_len: int) -> None:
    if num_gpu_blocks <= 0:
        raise ValueError("No available memory for the cache blocks.")
    max_seq_len = block_size * num_gpu_blocks
    if max_model_len > max_seq_len:
        raise ValueError(
            f"The model's max seq len ({max_model_len}) "
            "is larger than the maximum number of tokens that can be "
            f"stored in KV cache ({max_seq_len})."
        )
