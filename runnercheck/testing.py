"""Round-trip checks for your own test suite.

::

    from runnercheck.testing import assert_roundtrip

    def test_model_input_round_trips():
        assert_roundtrip(ModelInputForGPU, world_size=2, examples=50)

``assert_roundtrip`` raises AssertionError with the fuzz report (problem codes, the
shrunk example, the seed that replays it). With the pytest plugin installed (it comes
with runnercheck), the ``roundtrip`` fixture does the same on process groups that are
started once per test session and reused::

    def test_model_input(roundtrip):
        roundtrip(ModelInputForGPU, examples=50)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from runnercheck.config import Config
from runnercheck.contract import VLLM

__all__ = ["GroupPool", "assert_roundtrip"]


def assert_roundtrip(
    input_cls: type,
    world_size: int = 2,
    examples: int = 50,
    seed: int | None = None,
    device: str = "cpu",
    deadline: float = 60.0,
    attn_backend: Any = None,
    driver_only: Iterable[str] = (),
    strategies: Mapping[Any, Any] | None = None,
    config: Config | None = None,
    group: Any = None,
) -> Any:
    """Fuzz ``input_cls`` through a broadcast among ``world_size`` processes.

    ``driver_only``: extra ``"Class.field"`` names not expected on receivers;
    ``strategies``: ``{type, "TypeName" or "Class.field": strategy}``; ``group``: a
    started :class:`~runnercheck.fuzz.LocalGroup` to reuse (its settings win).
    Returns the :class:`~runnercheck.fuzz.ClassResult`; raises AssertionError with the
    report when a problem is found."""
    from runnercheck.extras import require_fuzz_extra

    require_fuzz_extra("runnercheck.testing.assert_roundtrip")
    from runnercheck.fuzz import FuzzOptions, Target, fuzz
    from runnercheck.fuzz.targets import is_input_class

    base = config or Config()
    contract = base.contract() if config is not None else VLLM
    if not is_input_class(input_cls, contract):
        raise TypeError(
            f"{getattr(input_cls, '__qualname__', input_cls)!r} is not an input class (a concrete "
            f"dataclass with {contract.as_dict_method}() and classmethod "
            f"{contract.from_dict_method}())"
        )
    if driver_only:
        base = dataclasses.replace(base, driver_only=(*base.driver_only, *driver_only))
    if group is not None:
        world_size, device, deadline = (
            group.settings.world_size,
            group.settings.device,
            group.settings.deadline,
        )
    options = FuzzOptions(world_size, device, examples, seed, deadline, attn_backend=attn_backend)
    target = Target(input_cls, f"{input_cls.__module__}:{input_cls.__qualname__}")
    report = fuzz([target], options, base, group, dict(strategies or {}))
    if not report.passed:
        raise AssertionError("round trip failed\n" + report.text())
    return report.results[0]


class GroupPool:
    """Started groups, one per (world size, device, deadline), closed together."""

    def __init__(self) -> None:
        self._groups: dict[tuple[int, str, float], Any] = {}

    def get(self, world_size: int = 2, device: str = "cpu", deadline: float = 60.0) -> Any:
        from runnercheck.extras import require_fuzz_extra

        require_fuzz_extra("the roundtrip fixture")
        from runnercheck.fuzz import LocalGroup
        from runnercheck.fuzz.ranks import Settings

        key = (world_size, device, deadline)
        if key not in self._groups:
            self._groups[key] = LocalGroup(Settings(world_size, device, deadline))
        return self._groups[key]

    def close(self) -> None:
        for group in self._groups.values():
            group.close()
        self._groups.clear()
