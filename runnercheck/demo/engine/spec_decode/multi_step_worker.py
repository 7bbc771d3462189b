"""The proposer: a merged ``Worker`` that runs its (draft) model several steps in a row.

The draft is the same tiny model with its weights perturbed by seeded noise, so it agrees
with the scorer on most tokens but not all. Each of its steps is a full
``execute_model`` of the merged worker: on more than one rank, one broadcast each.
"""

import dataclasses
from typing import List

import torch

from runnercheck.demo.engine.merged.worker import Worker
from runnercheck.demo.engine.sequence import (
    ExecuteModelRequest,
    SamplerOutput,
    SequenceGroupMetadata,
)

from .interfaces import SpeculativeProposals, clone_request

#: Relative scale of the noise added to the draft's weights.
DRAFT_NOISE = 0.1


class MultiStepWorker(Worker):
    """Runs the draft model ``sample_len`` times, feeding each sampled token back."""

    def load_model(self) -> None:
        super().load_model()
        generator = torch.Generator().manual_seed(self.model_config.seed + 7919 * (self.rank + 1))
        with torch.no_grad():
            for param in self.model_runner.model.parameters():
                if param.numel() > 1:
                    noise = torch.randn(param.shape, generator=generator, dtype=param.dtype)
                    param.add_(noise * param.std() * DRAFT_NOISE)

    @torch.inference_mode()
    def sampler_output(
        self, execute_model_req: ExecuteModelRequest, sample_len: int
    ) -> List[SamplerOutput]:
        """Run the draft ``sample_len`` steps on a copy of the batch; cache operations of
        the request run with the first step only."""
        copied_seq_group_metadata_list = self._shallow_copy_inputs(
            execute_model_req.seq_group_metadata_list
        )
        copied_execute_model_req = clone_request(
            execute_model_req, seq_group_metadata_list=copied_seq_group_metadata_list
        )
        model_outputs: List[SamplerOutput] = []
        for _ in range(sample_len):
            model_output = self.execute_model(execute_model_req=copied_execute_model_req)
            assert model_output is not None and len(model_output) == 1
            sampler_output = model_output[0]
            assert isinstance(sampler_output, SamplerOutput)
            self._append_new_tokens(sampler_output, copied_seq_group_metadata_list)
            model_outputs.append(sampler_output)
            copied_execute_model_req = clone_request(
                copied_execute_model_req,
                blocks_to_swap_in=[],
                blocks_to_swap_out=[],
                blocks_to_copy=[],
            )
        return model_outputs

    def get_spec_proposals(
        self, execute_model_req: ExecuteModelRequest, num_lookahead_slots: int
    ) -> SpeculativeProposals:
        """``num_lookahead_slots`` draft tokens for every sequence of the batch."""
        outputs = self.sampler_output(execute_model_req, num_lookahead_slots)
        proposals: List[List[int]] = []
        for group_index, seq_group_metadata in enumerate(execute_model_req.seq_group_metadata_list):
            for seq_id in seq_group_metadata.seq_data:
                tokens = []
                for output in outputs:
                    samples = output.outputs[group_index].samples
                    tokens.append(
                        next(s.output_token for s in samples if s.parent_seq_id == seq_id)
                    )
                proposals.append(tokens)
        return SpeculativeProposals(proposal_token_ids=proposals)

    @staticmethod
    def _append_new_tokens(
        model_output: SamplerOutput, seq_group_metadata_list: List[SequenceGroupMetadata]
    ) -> None:
        """Given model output from a single run, append the tokens to the sequences.
        This is normally done outside of the worker, but it is required if the worker is
        to perform multiple forward passes."""
        for seq_group_metadata, sequence_group_outputs in zip(
            seq_group_metadata_list, model_output.outputs, strict=True
        ):
            seq_group_metadata.is_prompt = False
            for seq_output in sequence_group_outputs.samples:
                seq = seq_group_metadata.seq_data[seq_output.parent_seq_id]
                seq.output_token_ids.append(seq_output.output_token)

    @staticmethod
    def _shallow_copy_inputs(
        seq_group_metadata_list: List[SequenceGroupMetadata],
    ) -> List[SequenceGroupMetadata]:
        """Copy the groups and their sequence data, so that appending the draft's tokens
        leaves the scheduler's sequences untouched."""
        return [
            dataclasses.replace(
                seq_group_metadata,
                seq_data={
                    seq_id: data.copy() for seq_id, data in seq_group_metadata.seq_data.items()
                },
            )
            for seq_group_metadata in seq_group_metadata_list
        ]
