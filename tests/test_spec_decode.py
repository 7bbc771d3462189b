"""The engine's speculative-decoding mode generates exactly the plain engine's tokens
(greedy verification), with some draft tokens accepted and some rejected; folding the
wrapper's control broadcast into the first proposer step changes no token."""

from __future__ import annotations

from pathlib import Path

import pytest

from runnercheck.demo.engine import run_engine
from tests.spec_decode_fixture import copy_before


def test_speculative_tokens_equal_the_plain_engines() -> None:
    plain = run_engine("merged", tp=1, steps=30, seed=3)
    spec = run_engine("merged", tp=1, steps=10, seed=3, num_speculative_tokens=3)
    assert 0.0 < spec["acceptance_rate"] < 1.0
    both = sorted(set(plain["finished_outputs"]) & set(spec["finished_outputs"]))
    assert len(both) >= 5
    assert {r: spec["finished_outputs"][r] for r in both} == {
        r: plain["finished_outputs"][r] for r in both
    }
    # More tokens per step than one per sequence: the accepted drafts.
    assert spec["num_tokens"] / spec["steps"] > plain["num_tokens"] / plain["steps"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"num_speculative_tokens": 9}, "num_speculative_tokens must be in [1, 8]"),
        ({"num_speculative_tokens": 2, "worker": "cpu"}, "merged shape's default worker only"),
    ],
)
def test_speculative_options_are_checked(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        run_engine("merged", tp=1, steps=2, **kwargs)  # type: ignore[arg-type]


@pytest.mark.slow
def test_folded_control_broadcast_keeps_the_tokens_and_saves_one_broadcast_per_step(
    tmp_path: Path,
) -> None:
    """At tp 2, the wrapper before ``fold-control-broadcast`` (its own control broadcast)
    and the shipped one generate the same tokens; the engine's counter sees k + 2 and 3
    broadcasts per decode and prefill step before, k + 1 and 2 after."""
    k = 3
    before_dir = copy_before(tmp_path / "spec_before")
    before = run_engine(
        "merged", tp=2, steps=6, seed=3, num_speculative_tokens=k, spec_decode_dir=str(before_dir)
    )
    after = run_engine("merged", tp=2, steps=6, seed=3, num_speculative_tokens=k)
    assert after["num_tokens"] == before["num_tokens"] > 0
    assert after["tokens_sha256"] == before["tokens_sha256"]
    assert set(before["broadcasts_per_step_list"]) == {k + 2, 3}
    assert [n - 1 for n in before["broadcasts_per_step_list"]] == after["broadcasts_per_step_list"]


def test_spec_decode_dir_is_checked(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not a speculative-decoding package"):
        run_engine("merged", tp=1, steps=2, num_speculative_tokens=2, spec_decode_dir=str(tmp_path))
    with pytest.raises(ValueError, match="spec_decode_dir needs num_speculative_tokens"):
        run_engine("merged", tp=1, steps=2, spec_decode_dir=str(tmp_path))
