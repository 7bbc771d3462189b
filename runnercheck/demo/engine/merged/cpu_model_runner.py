from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Tuple, Type, TypeVar

import torch

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

from .model_runner_base import (
    ModelRunnerBase,
    ModelRunnerInputBase,
    _add_attn_metadata_broadcastable_dict,
    _add_sampling_metadata_broadcastable_dict,
    _init_attn_metadata_from_tensor_dict,
    _init_sampling_metadata_from_tensor_dict,
)

if TYPE_CHECKING:
    from runnercheck.demo.engine.attention import TinyAttentionBackend

TCPUModelInput = TypeVar("TCPUModelInput", bound="CPUModelInput")


@dataclass(frozen=True)
class CPUModelInput(ModelRunnerInputBase):
    """
    Used by the CPUModelRunner.
    """

    input_tokens: Optional[torch.Tensor] = None
    input_positions: Optional[torch.Tensor] = None
    attn_metadata: Optional["TinyAttentionMetadata"] = None
    sampling_metadata: Optional["SamplingMetadata"] = None
    multi_modal_kwargs: Optional[Mapping[str, torch.Tensor]] = None
    virtual_engine: int = 0

    def as_broadcastable_tensor_dict(self) -> Dict[str, Any]:
        tensor_dict: Dict[str, Any] = {
            "input_tokens": self.input_tokens,
            "input_positions": self.input_positions,
            "multi_modal_kwargs": self.multi_modal_kwargs,
            "virtual_engine": self.virtual_engine,
        }
        _add_attn_metadata_broadcastable_dict(tensor_dict, self.attn_metadata)
        _add_sampling_metadata_broadcastable_dict(tensor_dict, self.sampling_metadata)
        return tensor_dict

    @classmethod
    def from_broadcasted_tensor_dict(
        cls: Type[TCPUModelInput],
        tensor_dict: Dict[str, Any],
        attn_backend: Optional["TinyAttentionBackend"] = None,
    ) -> TCPUModelInput:
        tensor_dict = _init_sampling_metadata_from_tensor_dict(tensor_dict)
        if attn_backend is not None:
            tensor_dict = _init_attn_metadata_from_tensor_dict(attn_backend, tensor_dict)
        return cls(**tensor_dict)


class CPUModelRunner(ModelRunnerBase[CPUModelInput]):
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

    def make_model_input_from_broadcasted_tensor_dict(
        self,
        tensor_dict: Dict[str, Any],
    ) -> CPUModelInput:
        return CPUModelInput.from_broadcasted_tensor_dict(
            tensor_dict,
            attn_backend=self.attn_backend,
        )

    def prepare_model_input(
        self,
        seq_group_metadata_list: List[SequenceGroupMetadata],
        virtual_engine: int = 0,
        finished_requests_ids: Optional[List[str]] = None,
    ) -> CPUModelInput:
        multi_modal_kwargs: Dict[str, torch.Tensor] = {}
        if not seq_group_metadata_list:
            return CPUModelInput(virtual_engine=virtual_engine)
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
        return CPUModelInput(
            input_tokens=input_tokens,
            input_positions=input_positions,
            attn_metadata=attn_metadata,
            sampling_metadata=sampling_metadata,
            multi_modal_kwargs=multi_modal_kwargs,
            virtual_engine=virtual_engine,
        )

    @torch.inference_mode()
    def execute_model(
        self,
        model_input: CPUModelInput,
        kv_caches: Optional[List[torch.Tensor]],
        num_steps: int = 1,
    ) -> Optional[List[SamplerOutput]]:
        if num_steps > 1:
            raise ValueError("CPU worker does not support multi-step execution.")

        model_executable = self.model
        execute_model_kwargs: Dict[str, Any] = {
            "input_ids": model_input.input_tokens,
            "positions": model_input.input_positions,
            "kv_caches": kv_caches,
            "attn_metadata": model_input.attn_metadata,
            **(model_input.multi_modal_kwargs or {}),
        }

        hidden_states = model_executable(**execute_model_kwargs)

        # Compute the logits.
        logits = self.model.compute_logits(hidden_states, model_input.sampling_metadata)

        # Only perform sampling in the driver worker.
        if not self.is_driver_worker:
            return []

        # Sample the next token.
        assert model_input.sampling_metadata is not None
        output = self.model.sample(
            logits=logits,
            sampling_metadata=model_input.sampling_metadata,
        )
        return [output]
