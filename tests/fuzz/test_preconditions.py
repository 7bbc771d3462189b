"""What an input's conversion asserts of the input it sends (what the driver always
builds) is met by every example: one that breaks it is never sent, so it is no
finding; a class whose conversion asserts nothing is generated as before."""

from __future__ import annotations

from typing import Any

import pytest

from runnercheck.config import Config
from runnercheck.fuzz import FuzzOptions, Target, fuzz
from runnercheck.fuzz.search import sender_precondition
from tests.fuzz.fixtures.preconditions import FrozenInput, WrappingInput


@pytest.fixture
def group2(roundtrip_groups: Any) -> Any:
    return roundtrip_groups.get(2, "cpu", 10.0)


def test_examples_meet_what_the_conversion_asserts(group2: Any) -> None:
    settings = group2.settings
    report = fuzz(
        [Target(WrappingInput, "tests.fuzz.fixtures.preconditions:WrappingInput")],
        FuzzOptions(settings.world_size, "cpu", 15, 3, settings.deadline),
        Config(),
        group2,
    )
    [result] = report.results
    assert result.problems == [], result.problems
    assert result.status == "PASS" and result.examples > 0


def test_only_a_conversion_that_asserts_has_a_precondition() -> None:
    assert sender_precondition(FrozenInput, "as_broadcastable_tensor_dict") is None
    accepts = sender_precondition(WrappingInput, "as_broadcastable_tensor_dict")
    assert accepts is not None
    assert not accepts(WrappingInput())
    assert accepts(WrappingInput(FrozenInput()))
