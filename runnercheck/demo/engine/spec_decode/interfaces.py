"""What the proposer hands the scorer, and what the scorer hands back."""

import dataclasses
from typing import List

from runnercheck.demo.engine.sequence import ExecuteModelRequest


@dataclasses.dataclass
class SpecExecuteModelRequest(ExecuteModelRequest):
    """A step's request with the number of lookahead slots the scheduler reserved
    (0 on prefill steps: no speculation)."""

    num_lookahead_slots: int = 0


def clone_request(request: ExecuteModelRequest, **changes: object) -> SpecExecuteModelRequest:
    """A copy of ``request`` as a :class:`SpecExecuteModelRequest` with ``changes``."""
    values = {field.name: getattr(request, field.name) for field in dataclasses.fields(request)}
    values.update(changes)
    return SpecExecuteModelRequest(**values)


@dataclasses.dataclass
class SpeculativeProposals:
    """``proposal_token_ids[i]``: the draft tokens of the i-th sequence of the batch
    (sequences in group order, then in ``seq_data`` order)."""

    proposal_token_ids: List[List[int]]


@dataclasses.dataclass
class SpeculativeScores:
    """``token_ids[i][j]``: the scorer's token after the i-th sequence extended by its
    first ``j`` proposal tokens (``k + 1`` per sequence)."""

    token_ids: List[List[int]]
