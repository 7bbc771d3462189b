"""The engine's speculative-decoding mode generates exactly the plain engine's tokens
(greedy verification), with some draft tokens accepted and some rejected."""

from __future__ import annotations

import pytest

from runnercheck.demo.engine import run_engine


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
