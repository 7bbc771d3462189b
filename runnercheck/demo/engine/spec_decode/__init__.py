"""Speculative decoding on top of the merged engine, wrapped the way vLLM 0.5.1 wraps it.

``SpecDecodeWorker`` holds two merged workers: a proposer (``MultiStepWorker``, the same
tiny model with perturbed weights as a draft) and a scorer (the plain ``Worker``). Every
engine step the driver runs the proposer once per lookahead slot and the scorer once, and
each of those broadcasts its inputs; the wrapper's own control values
(``num_lookahead_slots``, ``disable_all_speculation``) travel as extras of the first
proposer step's broadcast, as ``runnercheck migrate --select fold-control-broadcast``
rewrote them. Broadcasts per step with ``k`` speculative tokens: ``k + 1`` on a decode
step, 2 on a prefill step (one proposer step, the scorer); ``k + 2`` and 3 before.
"""

from .spec_decode_worker import (
    SpecDecodeWorker,
    create_spec_worker,
)

__all__ = ["SpecDecodeWorker", "create_spec_worker"]
