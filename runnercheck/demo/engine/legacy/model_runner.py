from typing import Any, Dict, List, NamedTuple, Optional, Set, Tuple

import torch

from runnercheck.broadcast import broadcast_tensor_dict
from runnercheck.demo.engine.attention import TinyAttentionMetadata, get_attn_backend
from runnercheck.demo.engine.batch import collect_batch, make_block_tables_tensor
from runnercheck.demo.engine.config import (
    CacheConfig,
    DeviceConfig,
    LoRAConfig,
    ModelConfig,
    ParallelConfig,
    SchedulerConfig,
)
from runnercheck.demo.engine.lora import LoRAMapping, LoRARequest
from runnercheck.demo.engine.model import TinyDecoderForCausalLM, get_model
from runnercheck.demo.engine.sampling import SamplingMetadata
from runnercheck.demo.engine.sequence import SamplerOutput, SequenceGroupMetadata

_PAD_SLOT_ID = -1


class ModelInput(NamedTuple):
    input_tokens: torch.Tensor
    input_positions: torch.Tensor
    attn_metadata: Optional[TinyAttentionMetadata]
    seq_lens: List[int]
    query_lens: List[int]
    lora_mapping: Optional[LoRAMapping]
    lora_requests: Set[LoRARequest]
    multi_modal_kwargs: Dict[str, torch.Tensor]
    slot_mapping: torch.Tensor
    num_prefill_tokens: int
    num_decode_tokens: int
    num_prefills: int

    @classmethod
    def empty(cls, device: str) -> "ModelInput":
        return ModelInput(
            input_tokens=torch.empty(0, device=device),
            input_positions=torch.empty(0, device=device),
            attn_metadata=None,
            seq_lens=[],
            query_lens=[],
            lora_mapping=None,
            lora_requests=set(),
            multi_modal_kwargs={},
            slot_mapping=torch.empty(0, device=device),
            num_prefill_tokens=0,
            num_decode_tokens=0,
            num_prefills=0,
        )


class ModelRunner:
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
        self.device_config = device_config
        self.cache_config = cache_config
        self.lora_config = lora_config
        self.is_driver_worker = is_driver_worker

        self.device = self.device_config.device_type
        self.block_size = cache_config.block_size
        self.attn_backend = get_attn_backend()

        # Lazy initialization
        self.model: TinyDecoderForCausalLM  # Set after load_model

    def load_model(self) -> None:
        self.model = get_model(self.model_config, self.lora_config, self.device_config)

    def _prepare_model_input(
        self,
        seq_group_metadata_list: List[SequenceGroupMetadata],
    ) -> ModelInput:
        """Prepare the model input based on a given sequence group.

        The API assumes seq_group_metadata_list is sorted by prefill -> decode.

        The result tensors and data structure also batches input in prefill
        -> decode order. For example,

        - input_tokens[:num_prefill_tokens] contains prefill tokens.
        - input_tokens[num_prefill_tokens:] contains decode tokens.
        """
        if len(seq_group_metadata_list) == 0:
            return ModelInput.empty(self.device)

        batch = collect_batch(seq_group_metadata_list, self.block_size)

        input_tokens_tensor = torch.tensor(batch.input_tokens, dtype=torch.long, device=self.device)
        input_positions_tensor = torch.tensor(
            batch.input_positions, dtype=torch.long, device=self.device
        )
        slot_mapping_tensor = torch.tensor(batch.slot_mapping, dtype=torch.long, device=self.device)
        seq_lens_tensor = torch.tensor(batch.seq_lens, dtype=torch.int, device=self.device)
        context_lens_tensor = torch.tensor(batch.context_lens, dtype=torch.int, device=self.device)
        query_lens_tensor = torch.tensor(batch.query_lens, dtype=torch.long, device=self.device)
        query_start_loc = torch.zeros(
            query_lens_tensor.shape[0] + 1, dtype=torch.int32, device=self.device
        )
        torch.cumsum(query_lens_tensor, dim=0, dtype=query_start_loc.dtype, out=query_start_loc[1:])
        block_tables = make_block_tables_tensor(batch.block_tables, self.device)

        attn_metadata = self.attn_backend.make_metadata(
            num_prefills=batch.num_prefills,
            slot_mapping=slot_mapping_tensor,
            num_prefill_tokens=batch.num_prefill_tokens,
            num_decode_tokens=batch.num_decode_tokens,
            seq_lens=batch.seq_lens,
            seq_lens_tensor=seq_lens_tensor,
            context_lens_tensor=context_lens_tensor,
            query_start_loc=query_start_loc,
            block_tables=block_tables,
            max_seq_len=max(batch.seq_lens, default=0),
        )

        if self.lora_config:
            lora_mapping = LoRAMapping(
                tuple(batch.lora_index_mapping),
                tuple(batch.lora_prompt_mapping),
            )
        else:
            lora_mapping = None

        multi_modal_kwargs: Dict[str, torch.Tensor] = {}
        if batch.image_embeds:
            multi_modal_kwargs = {
                "image_embeds": torch.cat(batch.image_embeds, dim=0).to(self.device),
                "image_token_indices": torch.tensor(
                    batch.image_token_indices, dtype=torch.long, device=self.device
                ),
            }

        return ModelInput(
            input_tokens=input_tokens_tensor,
            input_positions=input_positions_tensor,
            attn_metadata=attn_metadata,
            seq_lens=batch.seq_lens,
            query_lens=batch.query_lens,
            lora_mapping=lora_mapping,
            lora_requests=batch.lora_requests,
            multi_modal_kwargs=multi_modal_kwargs,
            slot_mapping=slot_mapping_tensor,
            num_prefill_tokens=batch.num_prefill_tokens,
            num_decode_tokens=batch.num_decode_tokens,
            num_prefills=batch.num_prefills,
        )

    def prepare_input_tensors(
        self,
        seq_group_metadata_list: Optional[List[SequenceGroupMetadata]],
    ) -> Tuple[
        torch.Tensor,
        torch.Tensor,
        Optional[TinyAttentionMetadata],
        SamplingMetadata,
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
                query_lens,
                lora_mapping,
                lora_requests,
                multi_modal_kwargs,
                slot_mapping,
                num_prefill_tokens,
                num_decode_tokens,
                num_prefills,
            ) = self._prepare_model_input(seq_group_metadata_list)
            sampling_metadata = SamplingMetadata.prepare(
                seq_group_metadata_list, seq_lens, query_lens, self.device
            )

            metadata_dict: Dict[str, Any] = {
                "input_tokens": input_tokens,
                "input_positions": input_positions,
                "selected_token_indices": sampling_metadata.selected_token_indices,
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
            selected_token_indices = broadcast_data.pop("selected_token_indices")
            lora_mapping = broadcast_data.pop("lora_mapping")
            lora_requests = broadcast_data.pop("lora_requests")
            multi_modal_kwargs = broadcast_data.pop("multi_modal_kwargs")
            if broadcast_data:
                attn_metadata = self.attn_backend.make_metadata(**broadcast_data)
            else:
                attn_metadata = None
            sampling_metadata = SamplingMetadata(
                seq_groups=None,
                selected_token_indices=selected_token_indices,
                num_prompts=0,
            )

        return (
            input_tokens,
            input_positions,
            attn_metadata,
            sampling_metadata,
            lora_requests,
            lora_mapping,
            multi_modal_kwargs,
        )

    @torch.inference_mode()
    def execute_model(
        self,
        seq_group_metadata_list: Optional[List[SequenceGroupMetadata]],
        kv_caches: Optional[List[torch.Tensor]],
    ) -> Optional[SamplerOutput]:
        (
            input_tokens,
            input_positions,
            attn_metadata,
            sampling_metadata,
            lora_requests,
            lora_mapping,
            multi_modal_kwargs,
        ) = self.prepare_input_tensors(seq_group_metadata_list)

        if self.lora_config:
            assert lora_mapping is not None
            self.set_active_loras(lora_requests, lora_mapping)

        hidden_states = self.model(
            input_ids=input_tokens,
            positions=input_positions,
            kv_caches=kv_caches,
            attn_metadata=attn_metadata,
            **multi_modal_kwargs,
        )

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

    def set_active_loras(self, lora_requests: Set[LoRARequest], lora_mapping: LoRAMapping) -> None:
        self.model.set_active_loras(lora_requests, lora_mapping)

    def add_lora(self, lora_request: LoRARequest) -> bool:
        assert self.lora_config is not None
        return lora_request.lora_int_id <= self.lora_config.max_lora_id

    def remove_lora(self, lora_id: int) -> bool:
        return True

    def list_loras(self) -> Set[int]:
        return set(self.model.active_loras)

    @property
    def vocab_size(self) -> int:
        return self.model_config.vocab_size
