"""The speculative-decoding worker: a worker that wraps a proposer worker and a scorer
worker, as vLLM 0.5.1's ``SpecDecodeWorker`` does.

One engine step on the driver:

1. put this worker's own control values (``num_lookahead_slots``,
   ``disable_all_speculation``) in the request's ``broadcast_extras``: the first inner
   step's broadcast carries them to the other ranks, which need them to know how many
   proposer steps follow;
2. prefill (no lookahead): the proposer's and the scorer's ``execute_model`` once each;
3. decode with ``k`` lookahead slots: the proposer's ``execute_model`` ``k`` times (one
   draft token each), then the scorer's once on the expanded batch; greedy verification
   keeps the longest agreeing prefix of the proposals plus the scorer's next token.

Each inner ``execute_model`` broadcasts its inputs (merged shape: once), so a step costs
``k + 1`` broadcasts when decoding and ``1 + 1`` when prefilling. The other ranks run
:meth:`SpecDecodeWorker._run_non_driver_rank` per step: the proposer's first step, whose
broadcast brings the control values (or the driver's empty stop dict), then the proposer
``max(k, 1) - 1`` more times and the scorer once, each receiving its broadcast.
"""

from typing import Any, Dict, List, Optional, Tuple

import torch

from runnercheck.broadcast import broadcast_tensor_dict
from runnercheck.demo.engine.merged.model_runner_base import StepOutput
from runnercheck.demo.engine.merged.worker import Worker
from runnercheck.demo.engine.merged.worker_base import LoraNotSupportedWorkerBase
from runnercheck.demo.engine.sequence import (
    CompletionSequenceGroupOutput,
    ExecuteModelRequest,
    SamplerOutput,
    SequenceOutput,
)

from .batch_expansion import BatchExpansionTop1Scorer
from .interfaces import SpeculativeProposals, SpeculativeScores
from .multi_step_worker import MultiStepWorker

#: Token of a position that verification rejected.
REJECTED = -1


def create_spec_worker(
    *args: Any, num_speculative_tokens: int, **kwargs: Any
) -> "SpecDecodeWorker":
    """Build the scorer (a plain ``Worker``) and the proposer (a ``MultiStepWorker`` on
    the same configuration) from the usual worker arguments, and wrap them."""
    if num_speculative_tokens < 1:
        raise ValueError(f"num_speculative_tokens must be >= 1, got {num_speculative_tokens}")
    scorer_worker = Worker(*args, **kwargs)
    proposer_worker = MultiStepWorker(*args, **kwargs)
    return SpecDecodeWorker(proposer_worker, scorer_worker, num_speculative_tokens)


class SpecDecodeWorker(LoraNotSupportedWorkerBase):
    """Runs the proposer and the scorer and verifies the proposals (greedy)."""

    def __init__(
        self,
        proposer_worker: MultiStepWorker,
        scorer_worker: Worker,
        num_speculative_tokens: int,
    ) -> None:
        self.proposer_worker = proposer_worker
        self.scorer_worker = scorer_worker
        self.num_speculative_tokens = num_speculative_tokens
        self.scorer = BatchExpansionTop1Scorer(scorer_worker)
        self.num_proposed_tokens = 0
        self.num_accepted_tokens = 0

    @property
    def rank(self) -> int:
        return self.scorer_worker.rank

    @property
    def _driver_rank(self) -> int:
        return 0

    def init_device(self) -> None:
        self.scorer_worker.init_device()
        self.proposer_worker.init_device()

    def load_model(self) -> None:
        self.scorer_worker.load_model()
        self.proposer_worker.load_model()

    def determine_num_available_blocks(self) -> Tuple[int, int]:
        return self.scorer_worker.determine_num_available_blocks()

    def initialize_cache(self, num_gpu_blocks: int, num_cpu_blocks: int) -> None:
        """Both workers get a cache of the same size: one block table serves both."""
        self.scorer_worker.initialize_cache(num_gpu_blocks, num_cpu_blocks)
        self.proposer_worker.initialize_cache(num_gpu_blocks, num_cpu_blocks)

    def get_cache_block_size_bytes(self) -> int:
        return self.scorer_worker.get_cache_block_size_bytes()

    @torch.inference_mode()
    def execute_model(
        self, execute_model_req: Optional[ExecuteModelRequest] = None
    ) -> Optional[List[StepOutput]]:
        """Perform speculative decoding on the input batch."""
        if self.rank != self._driver_rank:
            self._run_non_driver_rank()
            return []

        if execute_model_req is None:
            # This signals that there's no more requests to process for now.
            # All workers are running infinite loop with broadcast_tensor_dict,
            # and it stops the loop when the driver broadcasts an empty input.
            broadcast_tensor_dict({}, src=0)
            return []

        num_lookahead_slots = getattr(execute_model_req, "num_lookahead_slots", 0)
        disable_all_speculation = False

        # Broadcast how many lookahead slots are scheduled for this step, and
        # whether all speculation is disabled, to all non-driver workers: they cannot
        # know otherwise how many times the proposer runs.
        broadcast_dict: Dict[str, Any] = dict(
            num_lookahead_slots=num_lookahead_slots,
            disable_all_speculation=disable_all_speculation,
        )
        # The control values travel with the first inner step's broadcast.
        execute_model_req.broadcast_extras = broadcast_dict

        if (
            num_lookahead_slots == 0
            or len(execute_model_req.seq_group_metadata_list) == 0
            or disable_all_speculation
        ):
            return self._run_no_spec(execute_model_req)

        return self._run_speculative_decoding_step(execute_model_req, num_lookahead_slots)

    @torch.inference_mode()
    def start_worker_execution_loop(self) -> None:
        """Execute model loop to perform speculative decoding in parallel worker."""
        while self._run_non_driver_rank():
            pass

    def _run_no_spec(self, execute_model_req: ExecuteModelRequest) -> List[StepOutput]:
        """One step without speculation (prefill): the proposer runs too, so that its
        KV cache holds the prompts."""
        self.proposer_worker.execute_model(execute_model_req)
        sampler_output = self.scorer_worker.execute_model(execute_model_req)
        assert sampler_output is not None
        return sampler_output

    def _run_non_driver_rank(self) -> bool:
        """Run the proposer and the scorer on a non-driver rank, for speculative and
        non-speculative steps alike. Returns True iff there are more steps."""
        assert self.rank != self._driver_rank

        # The control values come with the first proposer_worker step's broadcast.
        if self.proposer_worker.execute_model() is None:
            return False
        data = self.proposer_worker.received_extras
        num_lookahead_slots = data["num_lookahead_slots"]

        # The proposer runs once per lookahead slot (once when there is none: it keeps
        # its KV cache in step with the scorer's).
        for _ in range(max(num_lookahead_slots, 1) - 1):
            self.proposer_worker.execute_model()

        self.scorer_worker.execute_model()
        return True

    def _run_speculative_decoding_step(
        self, execute_model_req: ExecuteModelRequest, num_lookahead_slots: int
    ) -> List[StepOutput]:
        """Propose ``k`` tokens per sequence, score them in one step, keep the accepted
        ones: a list of ``k + 1`` outputs, one token per sequence each (or
        :data:`REJECTED`)."""
        proposals = self.proposer_worker.get_spec_proposals(execute_model_req, num_lookahead_slots)
        proposal_scores = self.scorer.score_proposals(execute_model_req, proposals)
        accepted = self._verify_tokens(proposals, proposal_scores)
        return self._create_output_sampler_list(execute_model_req, accepted, num_lookahead_slots)

    def _verify_tokens(
        self, proposals: SpeculativeProposals, proposal_scores: SpeculativeScores
    ) -> List[List[int]]:
        """Greedy verification: the longest prefix of the proposals that the scorer
        agrees with, then the scorer's own next token."""
        accepted: List[List[int]] = []
        for proposed, scored in zip(
            proposals.proposal_token_ids, proposal_scores.token_ids, strict=True
        ):
            num_accepted = 0
            while num_accepted < len(proposed) and proposed[num_accepted] == scored[num_accepted]:
                num_accepted += 1
            accepted.append([*proposed[:num_accepted], scored[num_accepted]])
            self.num_proposed_tokens += len(proposed)
            self.num_accepted_tokens += num_accepted
        return accepted

    @staticmethod
    def _create_output_sampler_list(
        execute_model_req: ExecuteModelRequest, accepted: List[List[int]], k: int
    ) -> List[StepOutput]:
        outputs: List[StepOutput] = []
        for position in range(k + 1):
            tokens = iter(accepted)
            groups: List[CompletionSequenceGroupOutput] = []
            for seq_group_metadata in execute_model_req.seq_group_metadata_list:
                samples: List[SequenceOutput] = []
                for seq_id in seq_group_metadata.seq_data:
                    seq_tokens = next(tokens)
                    token = seq_tokens[position] if position < len(seq_tokens) else REJECTED
                    samples.append(SequenceOutput(seq_id, token))
                groups.append(CompletionSequenceGroupOutput(samples))
            outputs.append(SamplerOutput(groups))
        return outputs

    def acceptance_rate(self) -> float:
        if not self.num_proposed_tokens:
            return 0.0
        return self.num_accepted_tokens / self.num_proposed_tokens
