import dataclasses
from typing import Any, Dict, List, Optional, Tuple, Type

import torch

from runnercheck.demo.engine.config import (
    CacheConfig,
    DeviceConfig,
    LoRAConfig,
    ModelConfig,
    ParallelConfig,
    SchedulerConfig,
)
from runnercheck.demo.engine.pooling import PoolingMetadata
from runnercheck.demo.engine.sequence import (
    PoolerOutput,
    PoolingParams,
    SequenceData,
    SequenceGroupMetadata,
)

from .model_runner import GPUModelRunnerBase, ModelInputForGPU
from .model_runner_base import DRIVER_ONLY


@dataclasses.dataclass(frozen=True)
class ModelInputForGPUWithPoolingMetadata(ModelInputForGPU):
    """
    Used by the EmbeddingModelRunner.
    """

    # Pooling happens on the driver worker only; it is never broadcast.
    pooling_metadata: Optional["PoolingMetadata"] = dataclasses.field(
        default=None, metadata=DRIVER_ONLY
    )


class EmbeddingModelRunner(GPUModelRunnerBase[ModelInputForGPUWithPoolingMetadata]):
    _model_input_cls: Type[ModelInputForGPUWithPoolingMetadata] = (
        ModelInputForGPUWithPoolingMetadata
    )

    def __init__(
        self,
        model_config: ModelConfig,
        parallel_config: ParallelConfig,
        scheduler_config: SchedulerConfig,
        device_config: DeviceConfig,
        cache_config: CacheConfig,
        lora_config: Optional[LoRAConfig],
        is_driver_worker: bool = False,
    ):
        super().__init__(
            model_config,
            parallel_config,
            scheduler_config,
            device_config,
            cache_config,
            lora_config=lora_config,
            is_driver_worker=is_driver_worker,
        )

    @torch.inference_mode()
    def execute_model(
        self,
        model_input: ModelInputForGPUWithPoolingMetadata,
        kv_caches: Optional[List[torch.Tensor]],
        num_steps: int = 1,
    ) -> Optional[List[PoolerOutput]]:
        if num_steps > 1:
            raise ValueError("EmbeddingModelRunner does not support multi-step execution.")

        if self.lora_config:
            assert model_input.lora_requests is not None
            assert model_input.lora_mapping is not None
            self.set_active_loras(model_input.lora_requests, model_input.lora_mapping)

        num_layers = self.model_config.get_num_layers(self.parallel_config)
        no_kv_caches: List[Optional[torch.Tensor]] = [None] * num_layers

        execute_model_kwargs: Dict[str, Any] = {
            "input_ids": model_input.input_tokens,
            "positions": model_input.input_positions,
            "kv_caches": no_kv_caches,
            "attn_metadata": model_input.attn_metadata,
            **(model_input.multi_modal_kwargs or {}),
        }

        hidden_states = self.model(**execute_model_kwargs)

        # Only perform pooling in the driver worker.
        if not self.is_driver_worker:
            return []

        assert model_input.pooling_metadata is not None
        return [
            self.model.pooler(
                hidden_states=hidden_states, pooling_metadata=model_input.pooling_metadata
            )
        ]

    def make_model_input_from_broadcasted_tensor_dict(
        self, tensor_dict: Dict[str, Any]
    ) -> ModelInputForGPUWithPoolingMetadata:
        return ModelInputForGPUWithPoolingMetadata.from_broadcasted_tensor_dict(
            tensor_dict,
            attn_backend=self.attn_backend,
        )

    def prepare_model_input(
        self,
        seq_group_metadata_list: List[SequenceGroupMetadata],
        virtual_engine: int = 0,
        finished_requests_ids: Optional[List[str]] = None,
    ) -> ModelInputForGPUWithPoolingMetadata:
        assert seq_group_metadata_list is not None
        model_input = self._prepare_model_input_tensors(
            seq_group_metadata_list, finished_requests_ids
        )
        # Prepare PoolingMetadata.
        assert model_input.seq_lens is not None
        pooling_metadata = self._prepare_pooling(seq_group_metadata_list, model_input.seq_lens)

        return dataclasses.replace(
            model_input, pooling_metadata=pooling_metadata, virtual_engine=virtual_engine
        )

    def _prepare_pooling(
        self,
        seq_group_metadata_list: List[SequenceGroupMetadata],
        prompt_lens: List[int],
    ) -> PoolingMetadata:
        """Prepare PoolingMetadata for the sequence group metadata list."""
        seq_groups: List[Tuple[List[int], PoolingParams]] = []
        for seq_group_metadata in seq_group_metadata_list:
            seq_ids = list(seq_group_metadata.seq_data.keys())
            pooling_params = seq_group_metadata.pooling_params or PoolingParams()
            seq_groups.append((seq_ids, pooling_params))

        seq_data: Dict[int, SequenceData] = {}
        for seq_group_metadata in seq_group_metadata_list:
            seq_data.update(seq_group_metadata.seq_data)

        pooling_metadata = PoolingMetadata(
            seq_groups=seq_groups,
            seq_data=seq_data,
            prompt_lens=prompt_lens,
        )

        return pooling_metadata
