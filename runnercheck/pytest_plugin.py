"""pytest plugin (entry point ``runnercheck``): the ``roundtrip`` fixture.

``roundtrip(InputCls, world_size=2, examples=50, seed=None, device="cpu",
deadline=60.0, **assert_roundtrip_options)`` runs
:func:`runnercheck.testing.assert_roundtrip` on a process group started once per
test session (per world size, device and deadline) and reused by every test.
Importing this module costs nothing: torch loads when a test first uses the fixture.
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
