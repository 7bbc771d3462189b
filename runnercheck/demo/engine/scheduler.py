"""Continuous batching over a paged KV cache, with swapping and copy-on-write.

Each step is either a prefill step (new prompts) or a decode step (one token for every
running sequence), as in vLLM's default scheduler. When a decode step runs out of device
blocks the most recent groups are swapped out to host blocks; they are swapped back in
when blocks free up. A prompt with ``best_of == 2`` forks into two sequences that share
the prompt's blocks; the first write into a shared block copies it (``blocks_to_copy``).
"""

import collections
import dataclasses
from typing import Deque, Dict, List, Optional, Tuple

from runnercheck.demo.engine.config import CacheConfig, ModelConfig, SchedulerConfig
from runnercheck.demo.engine.sequence import (
    ExecuteModelRequest,
    PoolerOutput,
    SamplerOutput,
    SequenceData,
    SequenceGroupMetadata,
)
from runnercheck.demo.engine.workload import Request


class BlockAllocator:
    """Reference-counted blocks of one device; free blocks are reused lowest first."""

    def __init__(self, num_blocks: int) -> None:
        self.num_blocks = num_blocks
        self.free_blocks: List[int] = list(range(num_blocks))
        self.ref_counts: Dict[int, int] = {}

    def allocate(self) -> int:
        if not self.free_blocks:
            raise RuntimeError("out of KV cache blocks")
        block = self.free_blocks.pop(0)
        self.ref_counts[block] = 1
        return block

    def fork(self, block: int) -> None:
        self.ref_counts[block] += 1

    def free(self, block: int) -> None:
        self.ref_counts[block] -= 1
        if self.ref_counts[block] == 0:
            del self.ref_counts[block]
            self.free_blocks.append(block)
            self.free_blocks.sort()

    def num_free(self) -> int:
        return len(self.free_blocks)


class BlockManager:
    def __init__(self, block_size: int, num_gpu_blocks: int, num_cpu_blocks: int) -> None:
        self.block_size = block_size
        self.gpu = BlockAllocator(num_gpu_blocks)
        self.cpu = BlockAllocator(num_cpu_blocks)
        #: Device block table of every sequence that lives on the device.
        self.block_tables: Dict[int, List[int]] = {}
        #: Host block table of every swapped-out sequence.
        self.cpu_block_tables: Dict[int, List[int]] = {}

    def blocks_for(self, num_tokens: int) -> int:
        return -(-num_tokens // self.block_size)

    def can_allocate(self, num_tokens: int) -> bool:
        return self.blocks_for(num_tokens) <= self.gpu.num_free()

    def allocate(self, seq_id: int, num_tokens: int) -> None:
        self.block_tables[seq_id] = [
            self.gpu.allocate() for _ in range(self.blocks_for(num_tokens))
        ]

    def fork(self, parent_id: int, child_id: int) -> None:
        table = list(self.block_tables[parent_id])
        for block in table:
            self.gpu.fork(block)
        self.block_tables[child_id] = table

    def _slot_needs_block(self, seq_id: int, seq_len: int) -> bool:
        table = self.block_tables[seq_id]
        if len(table) * self.block_size < seq_len:
            return True
        return self.gpu.ref_counts[table[(seq_len - 1) // self.block_size]] > 1

    def blocks_needed_to_append(self, seqs: List[Tuple[int, int]]) -> int:
        return sum(self._slot_needs_block(seq_id, seq_len) for seq_id, seq_len in seqs)

    def append_slot(self, seq_id: int, seq_len: int) -> Optional[Tuple[int, int]]:
        """Make room for token ``seq_len - 1``; returns a (src, dst) copy if the block
        that receives it was shared."""
        table = self.block_tables[seq_id]
        if len(table) * self.block_size < seq_len:
            table.append(self.gpu.allocate())
            return None
        index = (seq_len - 1) // self.block_size
        block = table[index]
        if self.gpu.ref_counts[block] == 1:
            return None
        new_block = self.gpu.allocate()
        self.gpu.free(block)
        table[index] = new_block
        return (block, new_block)

    def free(self, seq_id: int) -> None:
        for block in self.block_tables.pop(seq_id, []):
            self.gpu.free(block)
        for block in self.cpu_block_tables.pop(seq_id, []):
            self.cpu.free(block)

    @staticmethod
    def _unique_blocks(tables: List[List[int]]) -> List[int]:
        return sorted({block for table in tables for block in table})

    def can_swap_out(self, seq_ids: List[int]) -> bool:
        tables = [self.block_tables[s] for s in seq_ids]
        return len(self._unique_blocks(tables)) <= self.cpu.num_free()

    def can_swap_in(self, seq_ids: List[int]) -> bool:
        tables = [self.cpu_block_tables[s] for s in seq_ids]
        # Room for the blocks and for one more token per sequence.
        return len(self._unique_blocks(tables)) + len(seq_ids) <= self.gpu.num_free()

    def _move(
        self,
        seq_ids: List[int],
        source_tables: Dict[int, List[int]],
        target_tables: Dict[int, List[int]],
        source: BlockAllocator,
        target: BlockAllocator,
    ) -> List[Tuple[int, int]]:
        mapping: Dict[int, int] = {}
        for seq_id in seq_ids:
            new_table: List[int] = []
            for block in source_tables.pop(seq_id):
                if block in mapping:
                    target.fork(mapping[block])
                else:
                    mapping[block] = target.allocate()
                new_table.append(mapping[block])
                source.free(block)
            target_tables[seq_id] = new_table
        return sorted(mapping.items())

    def swap_out(self, seq_ids: List[int]) -> List[Tuple[int, int]]:
        return self._move(seq_ids, self.block_tables, self.cpu_block_tables, self.gpu, self.cpu)

    def swap_in(self, seq_ids: List[int]) -> List[Tuple[int, int]]:
        return self._move(seq_ids, self.cpu_block_tables, self.block_tables, self.cpu, self.gpu)


@dataclasses.dataclass
class Sequence:
    seq_id: int
    data: SequenceData
    finished: bool = False


@dataclasses.dataclass
class SequenceGroup:
    request: Request
    seqs: List[Sequence]
    prefilled: bool = False
    embedding: Optional[List[float]] = None

    @property
    def request_id(self) -> str:
        return self.request.request_id

    def unfinished(self) -> List[Sequence]:
        return [seq for seq in self.seqs if not seq.finished]

    def is_finished(self) -> bool:
        return all(seq.finished for seq in self.seqs)


@dataclasses.dataclass
class SchedulerStats:
    prefill_steps: int = 0
    decode_steps: int = 0
    swap_only_steps: int = 0
    blocks_swapped_in: int = 0
    blocks_swapped_out: int = 0
    blocks_copied: int = 0
    steps_with_swap_or_copy: int = 0


class Scheduler:
    def __init__(
        self,
        scheduler_config: SchedulerConfig,
        cache_config: CacheConfig,
        model_config: ModelConfig,
    ) -> None:
        assert cache_config.num_gpu_blocks is not None
        self.scheduler_config = scheduler_config
        self.model_config = model_config
        self.block_manager = BlockManager(
            cache_config.block_size, cache_config.num_gpu_blocks, cache_config.num_cpu_blocks or 0
        )
        self.waiting: Deque[SequenceGroup] = collections.deque()
        self.running: List[SequenceGroup] = []
        self.swapped: Deque[SequenceGroup] = collections.deque()
        self.finished: List[SequenceGroup] = []
        self.stats = SchedulerStats()
        self._next_seq_id = 0
        self._scheduled: List[SequenceGroup] = []

    # ------------------------------------------------------------------ requests
    def add_request(self, request: Request) -> None:
        max_len = self.model_config.max_model_len
        if len(request.prompt_token_ids) + request.max_tokens > max_len:
            raise ValueError(f"{request.request_id} does not fit in max_model_len={max_len}")
        seq = Sequence(self._new_seq_id(), SequenceData(list(request.prompt_token_ids)))
        self.waiting.append(SequenceGroup(request, [seq]))

    def _new_seq_id(self) -> int:
        self._next_seq_id += 1
        return self._next_seq_id - 1

    def num_unfinished(self) -> int:
        return len(self.waiting) + len(self.running) + len(self.swapped)

    def all_groups(self) -> List[SequenceGroup]:
        groups = self.finished + self.running + list(self.swapped) + list(self.waiting)
        return sorted(groups, key=lambda g: int(g.request_id.split("-")[-1]))

    # ------------------------------------------------------------------ scheduling
    def schedule(self) -> ExecuteModelRequest:
        """The next step: a prefill batch if anything can start, else a decode batch."""
        if not self.swapped:
            prefills = self._schedule_prefills()
            if prefills:
                self.stats.prefill_steps += 1
                return self._request(prefills, is_prompt=True)
        return self._schedule_decodes()

    def _schedule_prefills(self) -> List[SequenceGroup]:
        config = self.scheduler_config
        num_seqs = sum(len(g.unfinished()) for g in self.running)
        num_tokens = 0
        scheduled: List[SequenceGroup] = []
        while self.waiting:
            group = self.waiting[0]
            prompt_len = group.seqs[0].data.get_len()
            if num_seqs + 1 > config.max_num_seqs:
                break
            if num_tokens + prompt_len > config.max_num_batched_tokens:
                break
            if not self.block_manager.can_allocate(prompt_len):
                break
            self.waiting.popleft()
            self.block_manager.allocate(group.seqs[0].seq_id, prompt_len)
            scheduled.append(group)
            num_seqs += 1
            num_tokens += prompt_len
        return scheduled

    def _append_need(self, group: SequenceGroup) -> int:
        seqs = [(seq.seq_id, seq.data.get_len()) for seq in group.unfinished()]
        return self.block_manager.blocks_needed_to_append(seqs)

    def _schedule_decodes(self) -> ExecuteModelRequest:
        blocks_to_swap_out: List[Tuple[int, int]] = []
        blocks_to_copy: List[Tuple[int, int]] = []
        blocks_to_swap_in: List[Tuple[int, int]] = []
        queue = collections.deque(self.running)
        running: List[SequenceGroup] = []
        preempted = False
        while queue:
            group = queue.popleft()
            while self._append_need(group) > self.block_manager.gpu.num_free():
                victim = queue.pop() if queue else group
                blocks_to_swap_out += self._swap_out(victim)
                preempted = True
                if victim is group:
                    break
            else:
                blocks_to_copy += self._append_slots(group)
                running.append(group)
        if not preempted:
            num_seqs = sum(len(g.unfinished()) for g in running)
            while self.swapped:
                group = self.swapped[0]
                seq_ids = [seq.seq_id for seq in group.unfinished()]
                if num_seqs + len(seq_ids) > self.scheduler_config.max_num_seqs:
                    break
                if not self.block_manager.can_swap_in(seq_ids):
                    break
                self.swapped.popleft()
                blocks_to_swap_in += self.block_manager.swap_in(seq_ids)
                blocks_to_copy += self._append_slots(group)
                running.append(group)
                num_seqs += len(seq_ids)
        self.running = running
        if running:
            self.stats.decode_steps += 1
        else:
            self.stats.swap_only_steps += 1
        return self._request(
            running,
            is_prompt=False,
            blocks_to_swap_in=blocks_to_swap_in,
            blocks_to_swap_out=blocks_to_swap_out,
            blocks_to_copy=blocks_to_copy,
        )

    def _append_slots(self, group: SequenceGroup) -> List[Tuple[int, int]]:
        copies: List[Tuple[int, int]] = []
        for seq in group.unfinished():
            copy = self.block_manager.append_slot(seq.seq_id, seq.data.get_len())
            if copy is not None:
                copies.append(copy)
        return copies

    def _swap_out(self, group: SequenceGroup) -> List[Tuple[int, int]]:
        seq_ids = [seq.seq_id for seq in group.unfinished()]
        if not self.block_manager.can_swap_out(seq_ids):
            raise RuntimeError(
                f"out of KV cache blocks: cannot swap out {group.request_id} "
                f"({self.block_manager.cpu.num_free()} host blocks free)"
            )
        self.swapped.appendleft(group)
        return self.block_manager.swap_out(seq_ids)

    def preempt_all(self) -> ExecuteModelRequest:
        """Swap every running group out at once: a step with swaps and no sequences."""
        blocks_to_swap_out: List[Tuple[int, int]] = []
        for group in reversed(self.running):
            blocks_to_swap_out += self._swap_out(group)
        self.running = []
        self.stats.swap_only_steps += 1
        return self._request([], is_prompt=False, blocks_to_swap_out=blocks_to_swap_out)

    def _request(
        self,
        groups: List[SequenceGroup],
        is_prompt: bool,
        blocks_to_swap_in: Optional[List[Tuple[int, int]]] = None,
        blocks_to_swap_out: Optional[List[Tuple[int, int]]] = None,
        blocks_to_copy: Optional[List[Tuple[int, int]]] = None,
    ) -> ExecuteModelRequest:
        swap_in = sorted(blocks_to_swap_in or [])
        swap_out = sorted(blocks_to_swap_out or [])
        copy = blocks_to_copy or []
        self.stats.blocks_swapped_in += len(swap_in)
        self.stats.blocks_swapped_out += len(swap_out)
        self.stats.blocks_copied += len(copy)
        self.stats.steps_with_swap_or_copy += bool(swap_in or swap_out or copy)
        self._scheduled = groups
        metadata: List[SequenceGroupMetadata] = []
        for group in groups:
            seqs = group.unfinished()
            metadata.append(
                SequenceGroupMetadata(
                    request_id=group.request_id,
                    is_prompt=is_prompt,
                    seq_data={seq.seq_id: seq.data for seq in seqs},
                    block_tables={
                        seq.seq_id: self.block_manager.block_tables[seq.seq_id] for seq in seqs
                    },
                    best_of=group.request.best_of,
                    lora_request=group.request.lora_request,
                    multi_modal_data=group.request.multi_modal_data if is_prompt else None,
                    pooling_params=group.request.pooling_params,
                )
            )
        if is_prompt:
            self.running.extend(groups)
        return ExecuteModelRequest(
            seq_group_metadata_list=metadata,
            blocks_to_swap_in=swap_in,
            blocks_to_swap_out=swap_out,
            blocks_to_copy=copy,
            finished_requests_ids=[],
        )

    # ------------------------------------------------------------------ outputs
    def process_outputs(self, output: Optional[object]) -> int:
        """Apply the step's sampler (or pooler) output; returns the new tokens."""
        groups, self._scheduled = self._scheduled, []
        if not groups:
            return 0
        if isinstance(output, PoolerOutput):
            for group, result in zip(groups, output.outputs, strict=True):
                group.embedding = result.embeddings
                group.prefilled = True
                for seq in group.seqs:
                    seq.finished = True
            self._retire()
            return 0
        if not isinstance(output, SamplerOutput):
            raise TypeError(f"expected a SamplerOutput, got {type(output).__name__}")
        new_tokens = 0
        for group, group_output in zip(groups, output.outputs, strict=True):
            seqs = {seq.seq_id: seq for seq in group.seqs}
            if not group.prefilled:
                group.prefilled = True
                parent = group.seqs[0]
                first, *rest = group_output.samples
                for sample in rest:
                    child = Sequence(self._new_seq_id(), parent.data.copy())
                    child.data.output_token_ids.append(sample.output_token)
                    self.block_manager.fork(parent.seq_id, child.seq_id)
                    group.seqs.append(child)
                    new_tokens += 1
                parent.data.output_token_ids.append(first.output_token)
                new_tokens += 1
            else:
                for sample in group_output.samples:
                    seqs[sample.parent_seq_id].data.output_token_ids.append(sample.output_token)
                    new_tokens += 1
            for seq in group.unfinished():
                if len(seq.data.output_token_ids) >= group.request.max_tokens:
                    seq.finished = True
                    self.block_manager.free(seq.seq_id)
        self._retire()
        return new_tokens

    def _retire(self) -> None:
        still_running: List[SequenceGroup] = []
        for group in self.running:
            if group.is_finished():
                for seq in group.seqs:
                    self.block_manager.free(seq.seq_id)
                self.finished.append(group)
            else:
                still_running.append(group)
        self.running = still_running
