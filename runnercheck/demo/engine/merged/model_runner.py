import dataclasses
from typing import (
    TYPE_CHECKING,
    Any,
    Dict,
    List,
    Mapping,
    Optional,
    Set,
    Type,
    TypeVar,
)

import torch

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

from .model_runner_base import (
    DRIVER_ONLY,
    ModelRunnerBase,
    ModelRunnerInputBase,
    _add_attn_metadata_broadcastable_dict,
    _add_sampling_metadata_broadcastable_dict,
    _init_attn_metadata_from_tensor_dict,
    _init_sampling_metadata_from_tensor_dict,
)

if TYPE_CHECKING:
    from runnercheck.demo.engine.attention import TinyAttentionBackend

_PAD_SLOT_ID = -1

TModelInputForGPU = TypeVar("TModelInputForGPU", bound="ModelInputForGPU")
TModelInputForGPUWithSamplingMetadata = TypeVar(
    "TModelInputForGPUWithSamplingMetadata", bound="ModelInputForGPUWithSamplingMetadata"
)


@dataclasses.dataclass(frozen=True)
class ModelInputForGPU(ModelRunnerInputBase):
    """
    This base class contains metadata needed for the base model forward pass
    but not metadata for possible additional steps, e.g., sampling. Model
    runners that run additional steps should subclass this method to add
    additional fields.
    """

    input_tokens: Optional[torch.Tensor] = None
    input_positions: Optional[torch.Tensor] = None
    # Only the driver worker needs the per-sequence lengths (for sampling and
    # pooling); the attention metadata carries what the other workers need.
    seq_lens: Optional[List[int]] = dataclasses.field(default=None, metadata=DRIVER_ONLY)
    query_lens: Optional[List[int]] = dataclasses.field(default=None, metadata=DRIVER_ONLY)
    lora_mapping: Optional["LoRAMapping"] = None
    lora_requests: Optional[Set[LoRARequest]] = None
    attn_metadata: Optional["TinyAttentionMetadata"] = None
    multi_modal_kwargs: Optional[Mapping[str, torch.Tensor]] = None
    virtual_engine: int = 0

    def as_broadcastable_tensor_dict(self) -> Dict[str, Any]:
        tensor_dict = {
            "input_tokens": self.input_tokens,
            "input_positions": self.input_positions,
            "lora_requests": self.lora_requests,
            "lora_mapping": self.lora_mapping,
            "multi_modal_kwargs": self.multi_modal_kwargs,
            "virtual_engine": self.virtual_engine,
        }
        _add_attn_metadata_broadcastable_dict(tensor_dict, self.attn_metadata)
        return tensor_dict

    @classmethod
    def from_broadcasted_tensor_dict(
        cls: Type[TModelInputForGPU],
        tensor_dict: Dict[str, Any],
        attn_backend: Optional["TinyAttentionBackend"] = None,
    ) -> TModelInputForGPU:
        if attn_backend is not None:
            tensor_dict = _init_attn_metadata_from_tensor_dict(attn_backend, tensor_dict)
        return cls(**tensor_dict)


@dataclasses.dataclass(frozen=True)
class ModelInputForGPUWithSamplingMetadata(ModelInputForGPU):
    """
    Used by the ModelRunner.
    """

    sampling_metadata: Optional["SamplingMetadata"] = None
    # Whether this step runs prompts. We do not broadcast it because it is only
    # used by the driver worker.
    is_prompt: Optional[bool] = dataclasses.field(default=None, metadata=DRIVER_ONLY)

    def as_broadcastable_tensor_dict(self) -> Dict[str, Any]:
        tensor_dict = super().as_broadcastable_tensor_dict()
        _add_sampling_metadata_broadcastable_dict(tensor_dict, self.sampling_metadata)
        return tensor_dict

    @classmethod
    def from_broadcasted_tensor_dict(
        cls: Type[TModelInputForGPUWithSamplingMetadata],
        tensor_dict: Dict[str, Any],
        attn_backend: Optional["TinyAttentionBackend"] = None,
    ) -> TModelInputForGPUWithSamplingMetadata:
        tensor_dict = _init_sampling_metadata_from_tensor_dict(tensor_dict)
        if attn_backend is not None:
            tensor_dict = _init_attn_metadata_from_tensor_dict(attn_backend, tensor_dict)
        return cls(**tensor_dict)


class GPUModelRunnerBase(ModelRunnerBase[TModelInputForGPU]):
    """
    Helper class for shared methods between model runners.
    """

    _model_input_cls: Type[TModelInputForGPU]

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

    def _prepare_model_input_tensors(
        self,
        seq_group_metadata_list: List[SequenceGroupMetadata],
        finished_requests_ids: Optional[List[str]] = None,
    ) -> TModelInputForGPU:
        """Helper method to prepare the model input based on a given sequence
        group. Prepares metadata needed for the base model forward pass but not
        metadata for possible additional steps, e.g., sampling.

        The API assumes seq_group_metadata_list is sorted by prefill -> decode.

        The result tensors and data structure also batches input in prefill
        -> decode order. For example,

        - input_tokens[:num_prefill_tokens] contains prefill tokens.
        - input_tokens[num_prefill_tokens:] contains decode tokens.
        """
        if len(seq_group_metadata_list) == 0:
            return self._model_input_cls()

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

        lora_mapping: Optional[LoRAMapping]
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

        return self._model_input_cls(
            input_tokens=input_tokens_tensor,
            input_positions=input_positions_tensor,
            attn_metadata=attn_metadata,
            seq_lens=batch.seq_lens,
            query_lens=batch.query_lens,
            lora_mapping=lora_mapping,
            lora_requests=batch.lora_requests,
            multi_modal_kwargs=multi_modal_kwargs,
        )

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


class ModelRunner(GPUModelRunnerBase[ModelInputForGPUWithSamplingMetadata]):
    """
    Model runner with sampling step.
    """

    _model_input_cls: Type[ModelInputForGPUWithSamplingMetadata] = (
        ModelInputForGPUWithSamplingMetadata
    )

    def make_model_input_from_broadcasted_tensor_dict(
        self,
        tensor_dict: Dict[str, Any],
    ) -> ModelInputForGPUWithSamplingMetadata:
        model_input = ModelInputForGPUWithSamplingMetadata.from_broadcasted_tensor_dict(
            tensor_dict,
            attn_backend=self.attn_backend,
        )
        return model_input

    def prepare_model_input(
        self,
        seq_group_metadata_list: List[SequenceGroupMetadata],
        virtual_engine: int = 0,
        finished_requests_ids: Optional[List[str]] = None,
    ) -> ModelInputForGPUWithSamplingMetadata:
        """Prepare the model input based on a given sequence group, including
        metadata for the sampling step.

        The API assumes seq_group_metadata_list is sorted by prefill -> decode.

        The result tensors and data structure also batches input in prefill
        -> decode order. For example,

        - input_tokens[:num_prefill_tokens] contains prefill tokens.
        - input_tokens[num_prefill_tokens:] contains decode tokens.
        """
        model_input = self._prepare_model_input_tensors(
            seq_group_metadata_list, finished_requests_ids
        )
        sampling_metadata = SamplingMetadata.prepare(
            seq_group_metadata_list,
            model_input.seq_lens or [],
            model_input.query_lens or [],
            self.device,
        )
        is_prompt = seq_group_metadata_list[0].is_prompt if seq_group_metadata_list else None
        return dataclasses.replace(
            model_input,
            sampling_metadata=sampling_metadata,
            is_prompt=is_prompt,
            virtual_engine=virtual_engine,
        )

    @torch.inference_mode()
    def execute_model(
        self,
        model_input: ModelInputForGPUWithSamplingMetadata,
        kv_caches: Optional[List[torch.Tensor]],
        num_steps: int = 1,
    ) -> Optional[List[SamplerOutput]]:
        if num_steps > 1:
            raise ValueError("num_steps > 1 is not supported in ModelRunner")

        if self.lora_config:
            assert model_input.lora_requests is not None
            assert model_input.lora_mapping is not None
            self.set_active_loras(model_input.lora_requests, model_input.lora_mapping)

        assert model_input.attn_metadata is not None
        assert kv_caches is not None
        multi_modal_kwargs = model_input.multi_modal_kwargs or {}
        hidden_states = self.model(
            input_ids=model_input.input_tokens,
            positions=model_input.input_positions,
            kv_caches=kv_caches,
            attn_metadata=model_input.attn_metadata,
            **multi_modal_kwargs,
        )

        # Compute the logits.
        logits = self.model.compute_logits(hidden_states, model_input.sampling_metadata)

        # Only perform sampling in the driver worker.
        if not self.is_driver_worker:
            return []

        # Sample the next token.
        assert model_input.sampling_metadata is not None
        output: SamplerOutput = self.model.sample(
            logits=logits,
            sampling_metadata=model_input.sampling_metadata,
        )

        return [output]
