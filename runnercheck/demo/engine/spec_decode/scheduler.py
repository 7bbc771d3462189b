"""The scheduler of a speculative run: decode steps reserve lookahead slots, and a step's
output may hold several tokens per sequence."""

import dataclasses
from typing import List, Optional, Sequence, Tuple

from runnercheck.demo.engine.config import CacheConfig, ModelConfig, SchedulerConfig
from runnercheck.demo.engine.scheduler import Scheduler, SequenceGroup
from runnercheck.demo.engine.sequence import CompletionSequenceGroupOutput, SamplerOutput

from .interfaces import SpecExecuteModelRequest, clone_request
from .spec_decode_worker import REJECTED


class SpecScheduler(Scheduler):
    """Every decode step reserves ``num_lookahead_slots`` slots beyond the next token of
    every running sequence: the proposer and the scorer write keys and values there."""

    def __init__(
        self,
        scheduler_config: SchedulerConfig,
        cache_config: CacheConfig,
        model_config: ModelConfig,
        num_lookahead_slots: int,
    ) -> None:
        super().__init__(scheduler_config, cache_config, model_config)
        self.num_lookahead_slots = num_lookahead_slots

    def schedule(self) -> SpecExecuteModelRequest:
        request = super().schedule()
        decoding = bool(request.seq_group_metadata_list) and not (
            request.seq_group_metadata_list[0].is_prompt
        )
        return clone_request(
            request, num_lookahead_slots=self.num_lookahead_slots if decoding else 0
        )

    def _slot_range(self, group: SequenceGroup) -> List[Tuple[int, int]]:
        """(sequence, length once a token is written) for every slot a step writes."""
        return [
            (seq.seq_id, seq_len)
            for seq in group.unfinished()
            for seq_len in range(
                seq.data.get_len(), seq.data.get_len() + self.num_lookahead_slots + 1
            )
        ]

    def _append_need(self, group: SequenceGroup) -> int:
        manager = self.block_manager
        need = 0
        for seq in group.unfinished():
            table = manager.block_tables[seq.seq_id]
            first = (seq.data.get_len() - 1) // manager.block_size
            last = manager.blocks_for(seq.data.get_len() + self.num_lookahead_slots)
            need += max(0, last - len(table))
            need += sum(manager.gpu.ref_counts[block] > 1 for block in table[first:last])
        return need

    def _append_slots(self, group: SequenceGroup) -> List[Tuple[int, int]]:
        copies: List[Tuple[int, int]] = []
        for seq_id, seq_len in self._slot_range(group):
            copy = self.block_manager.append_slot(seq_id, seq_len)
            if copy is not None:
                copies.append(copy)
        return copies

    def process_spec_outputs(self, outputs: Optional[Sequence[SamplerOutput]]) -> int:
        """Apply a step's outputs (one per position; :data:`REJECTED` tokens and tokens
        past a sequence's ``max_tokens`` are dropped); returns the new tokens."""
        groups = self._scheduled
        if not outputs:
            return self.process_outputs(None)
        new_tokens = 0
        for output in outputs:
            self._scheduled = groups
            new_tokens += self.process_outputs(self._keep_live_tokens(groups, output))
        return new_tokens

    @staticmethod
    def _keep_live_tokens(groups: List[SequenceGroup], output: SamplerOutput) -> SamplerOutput:
        kept: List[CompletionSequenceGroupOutput] = []
        for group, group_output in zip(groups, output.outputs, strict=True):
            live = {seq.seq_id for seq in group.unfinished()}
            samples = [
                sample
                for sample in group_output.samples
                if sample.output_token != REJECTED
                and (sample.parent_seq_id in live or not group.prefilled)
            ]
            kept.append(dataclasses.replace(group_output, samples=samples))
        return SamplerOutput(kept)
