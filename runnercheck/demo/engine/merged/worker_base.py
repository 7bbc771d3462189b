import dataclasses
from abc import ABC, abstractmethod
from typing import Any, Dict, List, Optional, Set, Tuple, Type, TypeVar, Union

import torch

from runnercheck.broadcast import broadcast_tensor_dict
from runnercheck.demo.engine.lora import LoRARequest
from runnercheck.demo.engine.sequence import ExecuteModelRequest

from .model_runner_base import ModelRunnerBase, ModelRunnerInputBase, StepOutput


class WorkerBase(ABC):
    """Worker interface that allows the engine to cleanly separate implementations for
    different hardware. Also abstracts control plane communication, e.g., to
    communicate request metadata to other workers.
    """

    @abstractmethod
    def init_device(self) -> None:
        """Initialize device state, such as joining the process group."""
        raise NotImplementedError

    @abstractmethod
    def determine_num_available_blocks(self) -> Tuple[int, int]:
        """Determine the number of available blocks for the device KV cache and
        swappable host KV cache."""
        raise NotImplementedError

    @abstractmethod
    def initialize_cache(self, num_gpu_blocks: int, num_cpu_blocks: int) -> None:
        """Initialize the KV cache with the given size in blocks."""
        raise NotImplementedError

    @torch.inference_mode()
    def start_worker_execution_loop(self) -> None:
        """Execute model loop in parallel worker.

        You can stop the loop by executing a driver worker with an empty output.
        """
        while True:
            output = self.execute_model(execute_model_req=None)
            if output is None:
                return None

    @abstractmethod
    def execute_model(
        self, execute_model_req: Optional[ExecuteModelRequest] = None
    ) -> Optional[List[StepOutput]]:
        raise NotImplementedError

    @abstractmethod
    def get_cache_block_size_bytes(self) -> int:
        """Return the size of a single cache block, in bytes."""
        raise NotImplementedError

    @abstractmethod
    def add_lora(self, lora_request: LoRARequest) -> bool:
        raise NotImplementedError

    @abstractmethod
    def remove_lora(self, lora_id: int) -> bool:
        raise NotImplementedError

    @abstractmethod
    def list_loras(self) -> Set[int]:
        raise NotImplementedError


class LoraNotSupportedWorkerBase(WorkerBase):
    """Partial implementation of WorkerBase that raises exceptions when LoRA
    methods are invoked.
    """

    def add_lora(self, lora_request: LoRARequest) -> bool:
        raise ValueError(f"{type(self)} does not support LoRA")

    def remove_lora(self, lora_id: int) -> bool:
        raise ValueError(f"{type(self)} does not support LoRA")

    def list_loras(self) -> Set[int]:
        raise ValueError(f"{type(self)} does not support LoRA")


TWorkerInput = TypeVar("TWorkerInput", bound="WorkerInput")


@dataclasses.dataclass(frozen=True)
class WorkerInput:
    """Local inputs to each worker. May contain device-specific data. These
    fields should be broadcastable to other workers.
    """

    num_seq_groups: Optional[int] = None
    blocks_to_swap_in: Optional[torch.Tensor] = None
    blocks_to_swap_out: Optional[torch.Tensor] = None
    blocks_to_copy: Optional[torch.Tensor] = None
    virtual_engine: int = 0

    @classmethod
    def from_broadcasted_tensor_dict(
        cls: Type[TWorkerInput],
        tensor_dict: Dict[str, Any],
    ) -> TWorkerInput:
        """
        Pop fields from the given tensor_dict and populate a new instance of
        WorkerInput.
        """
        return cls(
            num_seq_groups=tensor_dict.pop("num_seq_groups"),
            blocks_to_swap_in=tensor_dict.pop("blocks_to_swap_in"),
            blocks_to_swap_out=tensor_dict.pop("blocks_to_swap_out"),
            blocks_to_copy=tensor_dict.pop("blocks_to_copy"),
            virtual_engine=tensor_dict["virtual_engine"],
        )

    def as_broadcastable_tensor_dict(self) -> Dict[str, Union[int, torch.Tensor, None]]:
        """
        Extract broadcastable fields.
        """
        tensor_dict: Dict[str, Union[int, torch.Tensor, None]] = {
            "num_seq_groups": self.num_seq_groups,
            "blocks_to_swap_in": self.blocks_to_swap_in,
            "blocks_to_swap_out": self.blocks_to_swap_out,
            "blocks_to_copy": self.blocks_to_copy,
            "virtual_engine": self.virtual_engine,
        }

        return tensor_dict


class LocalOrDistributedWorkerBase(WorkerBase):
    """
    Partial implementation of WorkerBase that has a default `execute_model`
    definition to perform metadata transfer between workers when in distributed
    mode. Subclasses of this interface should use model runners that inherit
    from ModelRunnerBase, and should only need to implement worker-local logic.
    If custom control plane logic is needed to transfer metadata, or if the
    model runner cannot inherit from ModelRunnerBase, use WorkerBase instead.
    """

    is_driver_worker: bool
    model_runner: ModelRunnerBase[Any]
    #: The wrapper's values that came with the last step's broadcast (non-driver ranks).
    received_extras: Dict[str, Any]

    @property
    @abstractmethod
    def do_metadata_broadcast(self) -> bool:
        """
        Used by the default `execute_model` to check whether broadcast is
        needed to transfer request inputs from the driver worker to other
        workers in the TP group. If WorkerBase subclass only supports
        single-worker execution, then this method should return False.
        """
        raise NotImplementedError

    @property
    @abstractmethod
    def kv_cache(self) -> Optional[List[List[torch.Tensor]]]:
        """
        Gets the list of kv caches to pass to the worker's model runner. Each
        element in the list is a kv cache corresponding to a particular virtual
        engine. Used by the default `execute_model`. If the worker's model runner
        does not follow the ModelRunnerBase interface, then inherit from
        WorkerBase instead.
        """
        raise NotImplementedError

    @abstractmethod
    def prepare_worker_input(self, execute_model_req: ExecuteModelRequest) -> WorkerInput:
        """
        Prepare the inputs to WorkerBase.execute_worker from an execution
        request. This method may move data to the worker's local device. It is
        not allowed to communicate with other workers or devices.
        """
        raise NotImplementedError

    @abstractmethod
    def execute_worker(self, worker_input: WorkerInput) -> None:
        """
        Process an execution request.
        """
        raise NotImplementedError

    def execute_model(
        self,
        execute_model_req: Optional[ExecuteModelRequest] = None,
        received: Optional[Dict[str, Any]] = None,
    ) -> Optional[List[StepOutput]]:
        """Executes at least one model step on the given sequences, unless no
        sequences are provided. ``received``: on a non-driver rank, this step's dict
        when the caller has already received it (a wrapper worker reads its own values
        from it first); None: the step receives it."""
        if self.is_driver_worker:
            if execute_model_req is None:
                if self.do_metadata_broadcast:
                    # This signals that there's no more requests to process for
                    # now. All workers are running infinite loop with
                    # broadcast_tensor_dict, and it stops the loop when the
                    # driver broadcasts an empty input. Send an empty input to
                    # notify all other workers to stop their execution loop.
                    broadcast_tensor_dict({}, src=0)
                return None

            worker_input: WorkerInput = self.prepare_worker_input(
                execute_model_req=execute_model_req
            )
            model_input: ModelRunnerInputBase = self.model_runner.prepare_model_input(
                execute_model_req.seq_group_metadata_list,
                execute_model_req.virtual_engine,
                execute_model_req.finished_requests_ids,
            )
            num_steps = execute_model_req.num_steps

            if self.do_metadata_broadcast:
                broadcast_data: Dict[str, Any] = dict(worker_input.as_broadcastable_tensor_dict())
                broadcast_data.update(model_input.as_broadcastable_tensor_dict())
                broadcast_data["num_steps"] = num_steps
                broadcast_data["broadcast_extras"] = execute_model_req.broadcast_extras
                broadcast_tensor_dict(broadcast_data, src=0)
        else:
            assert self.do_metadata_broadcast
            if received is None:
                received = broadcast_tensor_dict(src=0)
            if not received:
                return None

            num_steps = received.pop("num_steps")
            self.received_extras = received.pop("broadcast_extras")
            worker_input = WorkerInput.from_broadcasted_tensor_dict(received)
            model_input = self.model_runner.make_model_input_from_broadcasted_tensor_dict(received)

        self.execute_worker(worker_input)

        # If there is no input, we don't need to execute the model.
        if worker_input.num_seq_groups == 0:
            return []

        kv_cache = self.kv_cache
        output = self.model_runner.execute_model(
            model_input,
            kv_cache[worker_input.virtual_engine] if kv_cache is not None else None,
            num_steps,
        )

        # Worker only supports single-step execution. Wrap the output in a
        # list to conform to interface.
        return list(output) if output is not None else None
