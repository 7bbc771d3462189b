"""A seeded stream of requests: prompts of varying length, some forking, some with an
adapter, some with multimodal-like features."""

import dataclasses
import random
from typing import Iterator, List, Optional

import torch

from runnercheck.demo.engine.config import ModelConfig, WorkloadConfig
from runnercheck.demo.engine.lora import LoRARequest
from runnercheck.demo.engine.sequence import PoolingParams


@dataclasses.dataclass
class Request:
    request_id: str
    prompt_token_ids: List[int]
    max_tokens: int
    best_of: int = 1
    lora_request: Optional[LoRARequest] = None
    multi_modal_data: Optional[torch.Tensor] = None
    pooling_params: Optional[PoolingParams] = None


def request_stream(
    seed: int, model_config: ModelConfig, workload: WorkloadConfig = WorkloadConfig()
) -> Iterator[Request]:
    """An endless, deterministic stream of requests."""
    rng = random.Random(seed)
    features = torch.Generator().manual_seed(seed + 1)
    index = 0
    while True:
        prompt_len = rng.randint(workload.min_prompt_len, workload.max_prompt_len)
        prompt = [rng.randrange(model_config.vocab_size) for _ in range(prompt_len)]
        lora_request = None
        if workload.num_loras and rng.random() < workload.lora_rate:
            lora_id = rng.randint(1, workload.num_loras)
            lora_request = LoRARequest(f"adapter-{lora_id}", lora_id)
        multi_modal_data = None
        if rng.random() < workload.multi_modal_rate:
            rows = min(prompt_len, 2)
            multi_modal_data = torch.randn(rows, model_config.hidden_size, generator=features)
        if workload.embedding:
            yield Request(
                request_id=f"req-{index}",
                prompt_token_ids=prompt,
                max_tokens=0,
                lora_request=lora_request,
                multi_modal_data=multi_modal_data,
                pooling_params=PoolingParams(),
            )
        else:
            yield Request(
                request_id=f"req-{index}",
                prompt_token_ids=prompt,
                max_tokens=rng.randint(workload.min_tokens, workload.max_tokens),
                best_of=2 if rng.random() < workload.fork_rate else 1,
                lora_request=lora_request,
                multi_modal_data=multi_modal_data,
            )
        index += 1
