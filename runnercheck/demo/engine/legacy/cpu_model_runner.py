from typing import Any, Dict, List, Optional, Tuple

import torch

from runnercheck.broadcast import broadcast_tensor_dict
from runnercheck.demo.engine.attention import TinyAttentionMetadata, get_attn_backend
from runnercheck.demo.engine.batch import BatchLists, collect_batch, make_block_tables_tensor
from runnercheck.demo.engine.config import (
    CacheConfig,
    DeviceConfig,
    LoRAConfig,
    ModelConfig,
    ParallelConfig,
    SchedulerConfig,
)
from runnercheck.demo.engine.model import TinyDecoderForCausalLM, get_model
from runnercheck.demo.engine.sampling import SamplingMetadata
from runnercheck.demo.engine.sequence import SamplerOutput, SequenceGroupMetadata


class CPUModelRunner:
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
        self.model_config = model_config
        self.parallel_config = parallel_config
        self.scheduler_config = scheduler_config
        # Currently, CPU worker doesn't support chunked prefill.
        assert self.scheduler_config.chunked_prefill_enabled is False
        self.device_config = device_config
        self.cache_config = cache_config
        self.lora_config = lora_config
        self.is_driver_worker = is_driver_worker

        self.device = self.device_config.device_type
        self.block_size = cache_config.block_size
        self.attn_backend = get_attn_backend()

        # Lazy initialization.
        self.model: TinyDecoderForCausalLM  # Set after load_model

    def load_model(self) -> None:
        self.model = get_model(self.model_config)

    def _make_attn_metadata(self, batch: BatchLists) -> TinyAttentionMetadata:
        query_lens = torch.tensor(batch.query_lens, dtype=torch.long)
        query_start_loc = torch.zeros(len(batch.query_lens) + 1, dtype=torch.int32)
        torch.cumsum(query_lens, dim=0, dtype=query_start_loc.dtype, out=query_start_loc[1:])
        return self.attn_backend.make_metadata(
            num_prefills=batch.num_prefills,
            slot_mapping=torch.tensor(batch.slot_mapping, dtype=torch.long, device=self.device),
            num_prefill_tokens=batch.num_prefill_tokens,
            num_decode_tokens=batch.num_decode_tokens,
            seq_lens=batch.seq_lens,
            seq_lens_tensor=torch.tensor(batch.seq_lens, dtype=torch.int, device=self.device),
            context_lens_tensor=torch.tensor(batch.context_lens, dtype=torch.int),
            query_start_loc=query_start_loc,
            block_tables=make_block_tables_tensor(batch.block_tables),
            max_seq_len=max(batch.seq_lens, default=0),
        )

    def _prepare_prompt(
        self,
        seq_group_metadata_list: List[SequenceGroupMetadata],
    ) -> Tuple[
        torch.Tensor, torch.Tensor, TinyAttentionMetadata, List[int], Dict[str, torch.Tensor]
    ]:
        assert len(seq_group_metadata_list) > 0
        batch = collect_batch(seq_group_metadata_list, self.block_size)
        assert batch.num_decode_tokens == 0
        multi_modal_kwargs: Dict[str, torch.Tensor] = {}
        if batch.image_embeds:
            multi_modal_kwargs = {
                "image_embeds": torch.cat(batch.image_embeds, dim=0),
                "image_token_indices": torch.tensor(batch.image_token_indices, dtype=torch.long),
            }
        input_tokens = torch.tensor(batch.input_tokens, dtype=torch.long, device=self.device)
        input_positions = torch.tensor(batch.input_positions, dtype=torch.long, device=self.device)
        attn_metadata = self._make_attn_metadata(batch)
        return (input_tokens, input_positions, attn_metadata, batch.seq_lens, multi_modal_kwargs)

    def _prepare_decode(
        self,
        seq_group_metadata_list: List[SequenceGroupMetadata],
    ) -> Tuple[torch.Tensor, torch.Tensor, TinyAttentionMetadata]:
        assert len(seq_group_metadata_list) > 0
        batch = collect_batch(seq_group_metadata_list, self.block_size)
        assert batch.num_prefills == 0
        input_tokens = torch.tensor(batch.input_tokens, dtype=torch.long, device=self.device)
        input_positions = torch.tensor(batch.input_positions, dtype=torch.long, device=self.device)
        attn_metadata = self._make_attn_metadata(batch)
        return (input_tokens, input_positions, attn_metadata)

    def prepare_input_tensors(
        self,
        seq_group_metadata_list: Optional[List[SequenceGroupMetadata]],
    ) -> Tuple[
        torch.Tensor, torch.Tensor, TinyAttentionMetadata, SamplingMetadata, Dict[str, torch.Tensor]
    ]:
        multi_modal_kwargs: Dict[str, torch.Tensor] = {}
        if self.is_driver_worker:
            assert seq_group_metadata_list is not None
            # NOTE: We assume that all sequences in the group are all prompts or
            # all decodes.
            is_prompt = seq_group_metadata_list[0].is_prompt
            # Prepare input tensors.
            if is_prompt:
                (input_tokens, input_positions, attn_metadata, seq_lens, multi_modal_kwargs) = (
                    self._prepare_prompt(seq_group_metadata_list)
                )
                query_lens = seq_lens
            else:
                (input_tokens, input_positions, attn_metadata) = self._prepare_decode(
                    seq_group_metadata_list
                )
                seq_lens = attn_metadata.seq_lens or []
                query_lens = [1] * len(seq_lens)
            sampling_metadata = SamplingMetadata.prepare(
                seq_group_metadata_list, seq_lens, query_lens, self.device
            )
            # Broadcast the metadata.
            metadata_dict: Dict[str, Any] = {
                "input_tokens": input_tokens,
                "input_positions": input_positions,
                "selected_token_indices": sampling_metadata.selected_token_indices,
                "multi_modal_kwargs": multi_modal_kwargs,
            }
            metadata_dict.update(attn_metadata.asdict_zerocopy())
            broadcast_tensor_dict(metadata_dict, src=0)
        else:
            broadcast_data = broadcast_tensor_dict(src=0)
            assert broadcast_data is not None
            input_tokens = broadcast_data.pop("input_tokens")
            input_positions = broadcast_data.pop("input_positions")
            selected_token_indices = broadcast_data.pop("selected_token_indices")
            multi_modal_kwargs = broadcast_data.pop("multi_modal_kwargs")
            attn_metadata = self.attn_backend.make_metadata(**broadcast_data)
            sampling_metadata = SamplingMetadata(
                seq_groups=None,
                selected_token_indices=selected_token_indices,
                num_prompts=0,
            )

        return (input_tokens, input_positions, attn_metadata, sampling_metadata, multi_modal_kwargs)

    @torch.inference_mode()
    def execute_model(
        self,
        seq_group_metadata_list: Optional[List[SequenceGroupMetadata]],
        kv_caches: List[torch.Tensor],
    ) -> Optional[SamplerOutput]:
        (input_tokens, input_positions, attn_metadata, sampling_metadata, multi_modal_input) = (
            self.prepare_input_tensors(seq_group_metadata_list)
        )

        model_executable = self.model
        execute_model_kwargs = {
            "input_ids": input_tokens,
            "positions": input_positions,
            "kv_caches": kv_caches,
            "attn_metadata": attn_metadata,
            **multi_modal_input,
        }

        hidden_states = model_executable(**execute_model_kwargs)

        # Compute the logits.
        logits = self.model.compute_logits(hidden_states, sampling_metadata)

        # Only perform sampling in the driver worker.
        if not self.is_driver_worker:
            return None

        # Sample the next token.
        output = self.model.sample(
            logits=logits,
            sampling_metadata=sampling_metadata,
        )
        return output
