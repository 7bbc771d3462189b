"""The global random generators during a search: seeded for each example as Hypothesis
seeds them, saved and restored once (runnercheck.fuzz.prng)."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, Verbosity, given, seed, settings
from hypothesis import strategies as st
from hypothesis.internal import entropy

from runnercheck.fuzz import prng


def _draws_in_examples(examples: int = 30) -> list[tuple[Any, ...]]:
    """What each example sees of the global generators (numpy's, ``random``'s), drawn
    from inside the test as a constructor or a test body would."""
    seen: list[tuple[Any, ...]] = []

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        phases=(Phase.generate,),
        suppress_health_check=list(HealthCheck),
        verbosity=Verbosity.quiet,
    )
    @seed(3)
    @given(st.integers(0, 1000))
    def test(value: int) -> None:
        seen.append((value, int(np.random.randint(1 << 30)), random.random()))

    test()
    return seen


def _states() -> tuple[Any, Any]:
    numpy_state = np.random.get_state()
    return (numpy_state[0], numpy_state[1].tolist(), *numpy_state[2:]), random.getstate()


def test_each_example_sees_the_generators_as_hypothesis_seeds_them() -> None:
    np.random.seed(12345)
    random.seed(12345)
    plain = _draws_in_examples()
    np.random.seed(777)  # the state outside does not matter inside: each example is seeded
    random.seed(777)
    with prng.seeded_once():
        once = _draws_in_examples()
    assert len(plain) == 30
    assert once == plain
    # seeded for each example: every example draws the same values
    assert len({drawn[1:] for drawn in once}) == 1


def test_the_states_are_restored_when_the_search_ends() -> None:
    np.random.seed(4242)
    random.seed(4242)
    before = _states()
    with prng.seeded_once():
        _draws_in_examples(5)
        np.random.randint(10)  # drawn between examples: the state still comes back
        random.random()
    assert _states() == before
    assert not any(isinstance(g, prng._SeedOnly) for g in entropy.RANDOMS_TO_MANAGE.values())


def test_the_states_are_restored_when_the_search_fails() -> None:
    random.seed(99)
    before = _states()
    with pytest.raises(RuntimeError), prng.seeded_once():
        random.random()
        raise RuntimeError("the search ends early")
    assert _states() == before


def test_no_state_is_copied_for_each_example(monkeypatch: pytest.MonkeyPatch) -> None:
    copies: list[str] = []
    real_get_state = np.random.get_state

    def counted() -> Any:
        copies.append("numpy")
        return real_get_state()

    monkeypatch.setattr(np.random, "get_state", counted)
    # the registry's numpy wrapper reads get_state when it is made: make it see the count
    numpy_wrappers = [
        g for g in entropy.RANDOMS_TO_MANAGE.values() if isinstance(g, entropy.NumpyRandomWrapper)
    ]
    for wrapper in numpy_wrappers:
        monkeypatch.setattr(wrapper, "getstate", counted)
    _draws_in_examples(10)
    assert len(copies) >= 10  # Hypothesis alone: one for each example
    copies.clear()
    with prng.seeded_once():
        _draws_in_examples(10)
    assert len(copies) == 1  # once, for the whole search


def test_a_search_inside_a_search_leaves_the_outer_one_in_charge() -> None:
    random.seed(5)
    before = _states()
    with prng.seeded_once():
        with prng.seeded_once():
            inner = _draws_in_examples(5)
        assert any(isinstance(g, prng._SeedOnly) for g in entropy.RANDOMS_TO_MANAGE.values())
        outer = _draws_in_examples(5)
    assert inner == outer
    assert _states() == before


def test_with_a_registry_it_does_not_know_the_search_runs_as_hypothesis_runs_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    plain = _draws_in_examples(5)
    monkeypatch.delattr(entropy, "RANDOMS_TO_MANAGE")
    with prng.seeded_once():
        pass  # nothing to wrap, nothing raised
    monkeypatch.undo()
    odd = {0: object()}  # an entry without the methods a generator has
    monkeypatch.setattr(entropy, "RANDOMS_TO_MANAGE", odd)
    with prng.seeded_once():
        assert not isinstance(odd[0], prng._SeedOnly)
    monkeypatch.undo()
    with prng.seeded_once():
        assert _draws_in_examples(5) == plain


def test_a_hypothesis_whose_seeder_fails_runs_the_search_unchanged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def changed(seed: int) -> None:  # say, a seed became required
        raise TypeError("missing seed")

    monkeypatch.setattr(entropy, "get_seeder_and_restorer", changed)
    with prng.seeded_once():
        assert not any(isinstance(g, prng._SeedOnly) for g in entropy.RANDOMS_TO_MANAGE.values())
