"""pytest plugin (entry point ``runnercheck``): the ``roundtrip`` and ``collective_trace``
fixtures.

``roundtrip(InputCls, world_size=2, examples=50, seed=None, device="cpu",
deadline=60.0, **assert_roundtrip_options)`` runs
:func:`runnercheck.testing.assert_roundtrip` on a process group started once per
test session (per world size, device and deadline) and reused by every test.

``collective_trace(deadline=60.0, max_broadcasts_per_step=None, step_methods=None,
timeout=None)`` returns a :class:`runnercheck.trace.TraceSession`: every process the
``with`` block starts has its collectives recorded, a divergence or hang stops them, and
``session.report`` holds the figures afterwards. When the block ends, no traced process
is left running.

Importing this module costs nothing: torch loads when a test first uses a fixture.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def roundtrip_groups() -> Iterator[Any]:
    """The session's process groups (a :class:`runnercheck.testing.GroupPool`)."""
    from runnercheck.testing import GroupPool

    pool = GroupPool()
    try:
        yield pool
    finally:
        pool.close()


@pytest.fixture
def roundtrip(roundtrip_groups: Any) -> Callable[..., Any]:
    """``roundtrip(InputCls, **options)``: assert that InputCls round-trips."""
    from runnercheck.testing import assert_roundtrip

    def check(
        input_cls: type,
        world_size: int = 2,
        device: str = "cpu",
        deadline: float = 60.0,
        **options: Any,
    ) -> Any:
        group = roundtrip_groups.get(world_size, device, deadline)
        return assert_roundtrip(input_cls, group=group, **options)

    return check


@pytest.fixture
def collective_trace() -> Iterator[Callable[..., Any]]:
    """``with collective_trace(deadline=20) as session: ...``, then ``session.report``."""
    from runnercheck.trace import RecorderOptions, TraceOptions, TraceSession

    def start(
        deadline: float = 60.0,
        max_broadcasts_per_step: int | None = None,
        step_methods: tuple[str, ...] | None = None,
        timeout: float | None = None,
    ) -> TraceSession:
        options = TraceOptions(
            recorder=RecorderOptions.from_contract(step_methods=step_methods),
            deadline=deadline,
            timeout=timeout,
            max_broadcasts_per_step=max_broadcasts_per_step,
        )
        return TraceSession(options)

    yield start
