from typing import Any, Dict, List, Optional, Set, Tuple

import torch

from runnercheck.broadcast import broadcast_tensor_dict
from runnercheck.demo.engine.attention import TinyAttentionMetadata
from runnercheck.demo.engine.config import (
    CacheConfig,
    DeviceConfig,
    LoRAConfig,
    ModelConfig,
    ParallelConfig,
    SchedulerConfig,
)
from runnercheck.demo.engine.lora import LoRAMapping, LoRARequest
from runnercheck.demo.engine.pooling import PoolingMetadata
from runnercheck.demo.engine.sequence import (
    PoolerOutput,
    PoolingParams,
    SequenceData,
    SequenceGroupMetadata,
)

from .model_runner import ModelRunner


class EmbeddingModelRunner(ModelRunner):
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

    # Pools instead of sampling: returns a PoolerOutput where ModelRunner returns a
    # SamplerOutput.
    @torch.inference_mode()
    def execute_model(  # type: ignore[override]
        self,
        seq_group_metadata_list: Optional[List[SequenceGroupMetadata]],
        kv_caches: Optional[List[torch.Tensor]],
    ) -> Optional[PoolerOutput]:
        (
            input_tokens,
            input_positions,
            attn_metadata,
            pooling_metadata,
            lora_requests,
            lora_mapping,
            multi_modal_input,
        ) = self.prepare_input_tensors(seq_group_metadata_list)

        if self.lora_config:
            assert lora_mapping is not None
            self.set_active_loras(lora_requests, lora_mapping)

        num_layers = self.model_config.get_num_layers(self.parallel_config)
        no_kv_caches: List[Optional[torch.Tensor]] = [None] * num_layers

        execute_model_kwargs: Dict[str, Any] = {
            "input_ids": input_tokens,
            "positions": input_positions,
            "kv_caches": no_kv_caches,
            "attn_metadata": attn_metadata,
            **multi_modal_input,
        }
        hidden_states = self.model(**execute_model_kwargs)

        # Only perform pooling in the driver worker.
        if not self.is_driver_worker:
            return None

        return self.model.pooler(hidden_states=hidden_states, pooling_metadata=pooling_metadata)

    # Prepares PoolingMetadata where ModelRunner prepares SamplingMetadata.
    def prepare_input_tensors(  # type: ignore[override]
        self,
        seq_group_metadata_list: Optional[List[SequenceGroupMetadata]],
    ) -> Tuple[
        torch.Tensor,
        torch.Tensor,
        Optional[TinyAttentionMetadata],
        PoolingMetadata,
        Set[LoRARequest],
        Optional[LoRAMapping],
        Dict[str, torch.Tensor],
    ]:
        if self.is_driver_worker:
            assert seq_group_metadata_list is not None
            # Prepare input tensors.
            (
                input_tokens,
                input_positions,
                attn_metadata,
                seq_lens,
                _,
                lora_mapping,
                lora_requests,
                multi_modal_kwargs,
                slot_mapping,
                num_prefill_tokens,
                num_decode_tokens,
                num_prefills,
            ) = self._prepare_model_input(seq_group_metadata_list)
            # Prepare PoolingMetadata
            pooling_metadata = self._prepare_pooling(seq_group_metadata_list, seq_lens)

            metadata_dict: Dict[str, Any] = {
                "input_tokens": input_tokens,
                "input_positions": input_positions,
                "lora_requests": lora_requests,
                "lora_mapping": lora_mapping,
                "multi_modal_kwargs": multi_modal_kwargs,
                "num_prefill_tokens": num_prefill_tokens,
                "num_decode_tokens": num_decode_tokens,
                "slot_mapping": slot_mapping,
                "num_prefills": num_prefills,
            }
            if attn_metadata:
                metadata_dict.update(attn_metadata.asdict_zerocopy())
            broadcast_tensor_dict(metadata_dict, src=0)
        else:
            broadcast_data = broadcast_tensor_dict(src=0)
            assert broadcast_data is not None
            input_tokens = broadcast_data.pop("input_tokens")
            input_positions = broadcast_data.pop("input_positions")
            lora_mapping = broadcast_data.pop("lora_mapping")
            lora_requests = broadcast_data.pop("lora_requests")
            multi_modal_kwargs = broadcast_data.pop("multi_modal_kwargs")
            if broadcast_data:
                attn_metadata = self.attn_backend.make_metadata(**broadcast_data)
            else:
                attn_metadata = None
            pooling_metadata = PoolingMetadata(seq_groups=None, seq_data=None, prompt_lens=None)

        return (
            input_tokens,
            input_positions,
            attn_metadata,
            pooling_metadata,
            lora_requests,
            lora_mapping,
            multi_modal_kwargs,
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
