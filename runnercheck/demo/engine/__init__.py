"""A tiny tensor-parallel LLM engine in two shapes that share the model and scheduler.

* ``legacy`` (as vLLM 0.5.0): two broadcasts per step, worker then model runner.
* ``merged`` (as vLLM 0.5.1): one broadcast per step of the worker's and the runner's
  inputs, driven by ``LocalOrDistributedWorkerBase.execute_model``.

Python API (torch is imported only when an engine runs)::

    from runnercheck.demo.engine import run_engine, engine_source_dir
    result = run_engine("merged", tp=2, steps=16, seed=0)
    result["tokens_sha256"], result["broadcasts_per_step"]
    run_engine(None, tp=2, engine_dir="/tmp/migrated")  # any directory in either shape

Command line: ``python -m runnercheck.demo.engine --shape legacy|merged --tp N --steps K``.
"""

import os
from pathlib import Path
from typing import Any, Dict, Optional

from runnercheck.demo.engine.loader import SHAPES, EngineLoadError, check_engine, shape_source_dir

#: Where an engine can run.
DEVICES = ("cpu", "cuda")

__all__ = [
    "DEVICES",
    "SHAPES",
    "EngineLoadError",
    "EngineRunError",
    "engine_source_dir",
    "run_engine",
    "run_swap_only_scenario",
]


def engine_source_dir(shape: str) -> Path:
    """The directory holding the sources of a built-in shape (``legacy`` or ``merged``);
    copy it elsewhere and run the copy with ``run_engine(None, engine_dir=...)``."""
    return shape_source_dir(shape)


def __getattr__(name: str) -> Any:
    if name == "EngineRunError":
        from runnercheck.demo.engine.launcher import EngineRunError

        return EngineRunError
    raise AttributeError(name)


def run_engine(
    shape: Optional[str] = "legacy",
    tp: int = 1,
    steps: int = 16,
    seed: int = 0,
    *,
    engine_dir: Optional[str] = None,
    worker: str = "default",
    embedding: bool = False,
    timeout_s: float = 60.0,
    warmup_steps: int = 0,
    device: str = "cpu",
    num_speculative_tokens: int = 0,
    spec_decode_dir: Optional[str] = None,
    fork_server: bool = False,
) -> Dict[str, Any]:
    """Run the engine on ``tp`` processes for ``steps`` steps and return its figures:
    ``tokens_sha256``, ``broadcasts_per_step`` (mean, counted on the driver),
    ``tokens_per_s``, ``step_time_s`` (median time of ``worker.execute_model``),
    ``steps``, ``shape``, ``tp`` and more (``scheduler`` activity, per-step lists).
    The first ``warmup_steps`` steps run (and count in the tokens and broadcasts) but are
    left out of ``tokens_per_s`` and ``step_time_s``.

    ``device`` (``cpu`` or ``cuda``) is where the model, its KV cache and the step's
    tensors live (the ``cpu`` worker always runs on the CPU). ``engine_dir`` runs the
    package in that directory instead of a built-in shape.
    ``worker`` is ``default`` (``worker:Worker``), ``cpu`` (``cpu_worker:CPUWorker``) or
    any ``module:Class`` of the package. Raises :class:`EngineRunError` (one-line message
    naming the failing rank) when any rank fails, and :class:`EngineLoadError` on a bad
    shape or directory.

    ``num_speculative_tokens > 0`` runs the merged shape with speculative decoding
    (:mod:`runnercheck.demo.engine.spec_decode`): the result's ``acceptance_rate`` says how
    many draft tokens the scorer accepted; ``spec_decode_dir`` runs the speculative-decoding
    package in that directory instead (e.g. a copy as it was before a codemod).

    ``fork_server`` forks the ranks from a server that imported torch once (repeated
    runs start in a fraction of the time) instead of starting fresh interpreters; a
    trace session sees only ranks it saw start, so it needs the default."""
    from runnercheck.demo.engine.launcher import EngineRunError, EngineSpec, first_error, launch

    check_engine(shape, engine_dir, worker)
    if tp < 1:
        raise ValueError(f"tp must be >= 1, got {tp}")
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    if not 0 <= warmup_steps < steps:
        raise ValueError(f"warmup_steps must be in [0, steps), got {warmup_steps}")
    if device not in DEVICES:
        raise ValueError(f"device must be one of {', '.join(DEVICES)}, got {device!r}")
    if device != "cpu" and worker == "cpu":
        raise ValueError(f"the cpu worker runs on the CPU only, not on {device}")
    if num_speculative_tokens:
        if not 1 <= num_speculative_tokens <= 8:
            raise ValueError(
                f"num_speculative_tokens must be in [1, 8], got {num_speculative_tokens}"
            )
        if shape != "merged" or engine_dir is not None or worker != "default" or embedding:
            raise ValueError("speculative decoding runs on the merged shape's default worker only")
    elif spec_decode_dir is not None:
        raise ValueError("spec_decode_dir needs num_speculative_tokens")
    if spec_decode_dir is not None and not os.path.isfile(
        os.path.join(spec_decode_dir, "__init__.py")
    ):
        raise ValueError(f"{spec_decode_dir}: not a speculative-decoding package")
    spec = EngineSpec(
        shape=shape,
        engine_dir=engine_dir,
        worker=worker,
        tp=tp,
        steps=steps,
        seed=seed,
        embedding=embedding,
        timeout_s=timeout_s,
        warmup_steps=warmup_steps,
        device=device,
        num_speculative_tokens=num_speculative_tokens,
        spec_decode_dir=spec_decode_dir,
        fork_server=fork_server,
        # Room for every sequence and its lookahead slots: a speculative run never swaps.
        num_gpu_blocks=128 if num_speculative_tokens else 40,
    )
    outcome = launch(spec)
    error = first_error(outcome)
    if error is not None:
        raise EngineRunError(error)
    result: Dict[str, Any] = dict(outcome[0][1])
    result.update(
        shape=shape if engine_dir is None else "dir",
        engine_dir=engine_dir,
        worker=worker,
        tp=tp,
        steps=steps,
        seed=seed,
        embedding=embedding,
        device=device,
        num_speculative_tokens=num_speculative_tokens,
        non_drivers=[outcome[rank][1] for rank in range(1, tp)],
    )
    return result


def run_swap_only_scenario(
    shape: Optional[str] = "legacy",
    tp: int = 2,
    seed: int = 0,
    *,
    engine_dir: Optional[str] = None,
    timeout_s: float = 10.0,
) -> Dict[str, Any]:
    """Five steps where step 2 swaps every running group out and schedules nothing
    (``num_seq_groups == 0`` with swap blocks), then the groups come back.

    Returns ``completed`` (the driver finished all steps), ``driver`` (its figures or
    its one-line error) and ``non_drivers`` (per rank: ``received_sizes``, the size of
    every dict its loop received, ``stopped_by_driver``, ``host_blocks_written``)."""
    from runnercheck.demo.engine.launcher import EngineSpec, launch

    check_engine(shape, engine_dir, "default")
    spec = EngineSpec(
        shape=shape,
        engine_dir=engine_dir,
        tp=tp,
        steps=5,
        seed=seed,
        scenario="swap-only",
        timeout_s=timeout_s,
    )
    outcome = launch(spec)
    ok, driver = outcome[0]
    return {
        "completed": ok,
        "driver": driver,
        "non_drivers": [outcome[rank][1] for rank in range(1, tp)],
        "non_drivers_ok": [outcome[rank][0] for rank in range(1, tp)],
    }
