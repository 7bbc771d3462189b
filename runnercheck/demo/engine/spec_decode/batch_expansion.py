"""The scorer: every proposal prefix becomes its own one-token sequence, so one decode
step of the target model scores all ``k + 1`` positions of every sequence at once."""

from typing import Dict, List

from runnercheck.demo.engine.merged.worker import Worker
from runnercheck.demo.engine.sequence import (
    ExecuteModelRequest,
    SamplerOutput,
    SequenceData,
    SequenceGroupMetadata,
)

from .interfaces import SpeculativeProposals, SpeculativeScores, clone_request


class BatchExpansionTop1Scorer:
    """Scores proposals with the scorer worker's ``execute_model`` on an expanded batch.

    A sequence of length ``L`` with proposals ``p1..pk`` expands into ``k + 1`` sequences
    ``T``, ``T+p1``, ..., ``T+p1..pk`` that share its block table; each writes the key and
    value of its last token (positions ``L-1 .. L+k-1``, reserved by the scheduler as
    lookahead slots) and samples the token after it."""

    def __init__(self, scorer_worker: Worker) -> None:
        self._scorer_worker = scorer_worker

    def score_proposals(
        self, execute_model_req: ExecuteModelRequest, proposals: SpeculativeProposals
    ) -> SpeculativeScores:
        expanded = self._expand_batch(
            execute_model_req.seq_group_metadata_list, proposals.proposal_token_ids
        )
        target_execute_model_req = clone_request(
            execute_model_req, seq_group_metadata_list=expanded, num_lookahead_slots=0
        )
        outputs = self._scorer_worker.execute_model(execute_model_req=target_execute_model_req)
        assert outputs is not None and len(outputs) == 1
        sampler_output = outputs[0]
        assert isinstance(sampler_output, SamplerOutput)
        tokens = [group.samples[0].output_token for group in sampler_output.outputs]
        width = len(proposals.proposal_token_ids[0]) + 1 if proposals.proposal_token_ids else 0
        return SpeculativeScores(
            token_ids=[tokens[i : i + width] for i in range(0, len(tokens), width)]
        )

    @staticmethod
    def _expand_batch(
        seq_group_metadata_list: List[SequenceGroupMetadata],
        proposal_token_ids: List[List[int]],
    ) -> List[SequenceGroupMetadata]:
        next_seq_id = 1 + max(
            (seq_id for group in seq_group_metadata_list for seq_id in group.seq_data),
            default=0,
        )
        expanded: List[SequenceGroupMetadata] = []
        proposals = iter(proposal_token_ids)
        for seq_group_metadata in seq_group_metadata_list:
            for seq_id, seq_data in seq_group_metadata.seq_data.items():
                tokens = next(proposals)
                for prefix_len in range(len(tokens) + 1):
                    new_data: Dict[int, SequenceData] = {
                        next_seq_id: SequenceData(
                            list(seq_data.prompt_token_ids),
                            list(seq_data.output_token_ids) + tokens[:prefix_len],
                        )
                    }
                    expanded.append(
                        SequenceGroupMetadata(
                            request_id=f"{seq_group_metadata.request_id}/{seq_id}+{prefix_len}",
                            is_prompt=False,
                            seq_data=new_data,
                            block_tables={next_seq_id: seq_group_metadata.block_tables[seq_id]},
                            lora_request=seq_group_metadata.lora_request,
                        )
                    )
                    next_seq_id += 1
        return expanded
