"""LoRA-like adapters: requests and the per-token mapping, sent pickled with the metadata."""

import dataclasses
from typing import Tuple


@dataclasses.dataclass(frozen=True)
class LoRARequest:
    lora_name: str
    lora_int_id: int

    def __hash__(self) -> int:
        return self.lora_int_id


@dataclasses.dataclass(frozen=True)
class LoRAMapping:
    #: Adapter id (0: none) of every input token.
    index_mapping: Tuple[int, ...]
    #: Adapter id of every sampled row.
    prompt_mapping: Tuple[int, ...]
