"""The speculative-decoding wrapper shaped as vLLM 0.6.x-0.9.x ship it
(``tests.spec_decode_fixture.V06_WORKER``, an edit of the wrapper before the fold): the
scorer runs first on a prefill or with speculation disabled for the batch, the proposer
is skipped when speculation is disabled, and otherwise runs ``max(k, 1)`` times before
the scorer; a control broadcast tells the other ranks which. Run for real at tp 2 (gloo),
and read by ``check``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runnercheck.check import check_paths
from runnercheck.demo.engine import run_engine
from tests.spec_decode_fixture import V06_WORKER, copy_before

K = 3
#: Engine steps that run every path of the wrapper with seed 3 (a batch of 8 groups
#: disables speculation: a prefill without the proposer, decodes without speculation).
STEPS = 10
#: The driver's broadcasts per step on each path: the control dict, then the inner steps.
SPECULATIVE, PREFILL, DISABLED = K + 2, 3, 2

#: The same wrapper whose other ranks run the proposer even where the driver skips it.
HANG = V06_WORKER.replace(
    """        if not data["disable_all_speculation"]:
            # The proposer runs once per lookahead slot (once when there is none: it
            # keeps its KV cache in step with the scorer's).
            for _ in range(max(num_lookahead_slots, 1)):
                self.proposer_worker.execute_model()
""",
    """        # The proposer runs once per lookahead slot (once when there is none: it
        # keeps its KV cache in step with the scorer's).
        for _ in range(max(num_lookahead_slots, 1)):
            self.proposer_worker.execute_model()
""",
)


def _outputs(result: dict[str, Any]) -> dict[str, list[list[int]]]:
    return {request: seqs for request, seqs in result["token_ids"]}


def _prefixes_of(short: dict[str, list[list[int]]], long: dict[str, list[list[int]]]) -> list[str]:
    """The requests of ``short`` with a token whose tokens are not a prefix of
    ``long``'s (a request not prefilled yet has not forked yet)."""
    return [
        request
        for request, seqs in short.items()
        if any(seqs)
        and (
            request not in long
            or len(seqs) != len(long[request])
            or any(s != t[: len(s)] for s, t in zip(seqs, long[request], strict=True))
        )
    ]


@pytest.mark.slow
def test_the_v06_wrapper_generates_the_plain_engines_tokens_on_every_path(
    tmp_path: Path,
) -> None:
    package = copy_before(tmp_path / "spec_v06", V06_WORKER)
    spec = run_engine(
        "merged", tp=2, steps=STEPS, seed=3, num_speculative_tokens=K, spec_decode_dir=str(package)
    )
    plain = run_engine("merged", tp=2, steps=4 * STEPS, seed=3)
    # every path ran: a speculative step, a prefill with the proposer, one without
    assert set(spec["broadcasts_per_step_list"]) == {SPECULATIVE, PREFILL, DISABLED}
    assert spec["num_tokens"] > 0 and 0.0 < spec["acceptance_rate"] < 1.0
    outputs = _outputs(spec)
    assert sum(1 for seqs in outputs.values() if any(seqs)) >= 8
    assert _prefixes_of(outputs, _outputs(plain)) == []


def _check(tmp_path: Path, worker: str) -> list[tuple[str, str]]:
    package = copy_before(tmp_path / "spec_decode", worker)
    result = check_paths([package])
    return sorted(
        (f.code, f.severity)
        for f in result.findings
        if Path(f.path).name == "spec_decode_worker.py" and f.severity == "error"
    )


def test_check_gives_no_schedule_error_on_the_v06_wrapper(tmp_path: Path) -> None:
    assert ("RC112", "error") not in _check(tmp_path, V06_WORKER)


def test_check_reports_the_hang_where_the_other_ranks_run_the_skipped_proposer(
    tmp_path: Path,
) -> None:
    assert HANG != V06_WORKER
    assert ("RC112", "error") in _check(tmp_path, HANG)
