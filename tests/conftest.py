"""Suite-wide: the slow tests start first, the longest of them before the others.

``scripts/test.sh`` runs every test but those marked ``slow``; ``scripts/test.sh -m
slow`` runs those (CI runs both). A slow test may say about how long it takes,
``@pytest.mark.slow(seconds=150)``: with two test processes, a two-minute test started
last would end the run alone, so the longest are handed out first.
"""

from __future__ import annotations

import pytest


def _cost(item: pytest.Item) -> float:
    marker = item.get_closest_marker("slow")
    if marker is None:
        return 0.0
    return float(marker.kwargs.get("seconds", 1.0))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=_cost, reverse=True)  # stable: the rest keep the order collected
