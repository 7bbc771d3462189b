"""Speculative decoding on top of the merged engine, wrapped the way vLLM 0.5.1 wraps it.

``SpecDecodeWorker`` holds two merged workers: a proposer (``MultiStepWorker``, the same
tiny model with perturbed weights as a draft) and a scorer (the plain ``Worker``). Every
engine step the driver broadcasts the wrapper's own control dict, then runs the proposer
once per lookahead slot and the scorer once, and each of those broadcasts its inputs
again. Broadcasts per step with ``k`` speculative tokens: ``k + 2`` on a decode step,
3 on a prefill step (control, one proposer step, the scorer).
"""

from runnercheck.demo.engine.spec_decode.spec_decode_worker import (
    SpecDecodeWorker,
    create_spec_worker,
)

__all__ = ["SpecDecodeWorker", "create_spec_worker"]
