"""The global random generators during a search: seeded for every example, as Hypothesis
seeds them, but saved and restored once for the whole search instead of once per example.

Hypothesis runs every example with the global generators it manages (``random``, its
own, ``numpy.random`` once numpy is imported, and any registered with
``register_random``) seeded to one fixed state, and puts back the state each had
before. Saving a state copies it: ``numpy.random.get_state()`` and ``set_state()`` cost
about 35 µs each and ``random.getstate()`` about 7 µs, near a third of Hypothesis's own
cost per example, and torch imports numpy, so every search pays it.

:func:`seeded_once` saves each state once, lets Hypothesis seed the generators for each
example exactly as before (so code that draws from them while an example is made sees
the same values), makes its per-example save and restore do nothing, and restores every
state when the search ends. What runs between two examples (under torchrun, the round
trip of an example collected after the search ended) sees the generators as the last
example left them instead of as they were before the search: seeded in neither case.

Hypothesis offers no public way to do this: the generators it manages are in
``hypothesis.internal.entropy.RANDOMS_TO_MANAGE``. Where that registry is not what this
module expects (another Hypothesis), the search runs as Hypothesis runs it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, MutableMapping
from typing import Any

#: What a generator's per-example save gives (restoring it does nothing).
_UNCHANGED = object()


class _SeedOnly:
    """A managed generator seen through this wrapper: seeded as before, its state never
    copied."""

    def __init__(self, generator: Any) -> None:
        self.generator = generator

    def seed(self, value: Any) -> None:
        self.generator.seed(value)

    def getstate(self) -> object:
        return _UNCHANGED

    def setstate(self, state: object) -> None:
        if state is not _UNCHANGED:  # the seeded state Hypothesis sets for an example
            self.generator.setstate(state)


def _registry() -> MutableMapping[Any, Any] | None:
    """Hypothesis's registry of the generators it manages, where it is the one known."""
    try:
        from hypothesis.internal import entropy

        # numpy's generator joins the registry when Hypothesis first makes a seeder
        entropy.get_seeder_and_restorer()
        registry = entropy.RANDOMS_TO_MANAGE
    except Exception:  # another Hypothesis: run as it runs
        return None
    if not isinstance(registry, MutableMapping):
        return None
    return registry


@contextlib.contextmanager
def seeded_once() -> Iterator[None]:
    """Inside, Hypothesis seeds the global generators for each example but copies none
    of their states; every state is as it was when the block ends."""
    registry = _registry()
    generators = dict(registry.items()) if registry is not None else {}
    if registry is None or not all(
        all(hasattr(g, name) for name in ("seed", "getstate", "setstate"))
        and not isinstance(g, _SeedOnly)  # already inside: the outer block restores
        for g in generators.values()
    ):
        yield
        return
    assert registry is not None
    states = {key: g.getstate() for key, g in generators.items()}
    wrappers = {key: _SeedOnly(g) for key, g in generators.items()}
    try:
        for key, wrapper in wrappers.items():
            registry[key] = wrapper
        yield
    finally:
        for key, generator in generators.items():
            if registry.get(key) is wrappers[key]:
                registry[key] = generator
            generator.setstate(states[key])
