"""CUDA events and streams on a machine without CUDA: an input that makes
``torch.cuda.Event`` in a field's default and records, waits on and queries events and
streams while rebuilt round-trips on the CPU; torch's own classes are back after the
run. With a CUDA device, torch's own events and streams serve (nothing is replaced)."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from runnercheck.config import Config
from runnercheck.fuzz import FuzzOptions, Target, fuzz
from runnercheck.fuzz.cuda_standin import REAL_EVENT, REAL_STREAM, cuda_standins, needed
from tests.fuzz.fixtures.cuda_events import EventInput


@pytest.fixture
def group2(roundtrip_groups: Any) -> Any:
    return roundtrip_groups.get(2, "cpu", 10.0)


def test_an_input_holding_cuda_events_round_trips_on_the_cpu(group2: Any) -> None:
    settings = group2.settings
    report = fuzz(
        [Target(EventInput, "tests.fuzz.fixtures.cuda_events:EventInput")],
        FuzzOptions(settings.world_size, "cpu", 15, 3, settings.deadline),
        Config(),
        group2,
    )
    [result] = report.results
    assert result.error == "", result.error
    assert result.problems == []
    assert result.status == "PASS"
    assert torch.cuda.Event is REAL_EVENT
    assert torch.cuda.Stream is REAL_STREAM


@pytest.mark.skipif(torch.cuda.is_available(), reason="the stand-ins serve only without CUDA")
def test_the_standins_do_what_the_engines_call() -> None:
    assert needed("cpu") and not needed("cuda")
    with cuda_standins("cpu"):
        event = torch.cuda.Event(blocking=True)
        assert isinstance(event, REAL_EVENT)
        side = torch.cuda.Stream()
        assert isinstance(side, REAL_STREAM)
        assert torch.cuda.current_stream() is torch.cuda.default_stream()
        with torch.cuda.stream(side):
            assert torch.cuda.current_stream() is side
            event.record(side)
        assert torch.cuda.current_stream() is not side
        side.wait_event(event)
        side.wait_stream(torch.cuda.current_stream())
        end = side.record_event()
        assert event.query() and side.query()
        event.synchronize()
        side.synchronize()
        assert event.elapsed_time(end) == 0.0
    with pytest.raises(RuntimeError):
        torch.cuda.Event()
