"""Helpers shared by the benchmarks."""

from __future__ import annotations

import statistics


def spread(samples: list[float]) -> dict[str, float]:
    """Median, min, max and count of repeated measurements (or of per-pair ratios)."""
    return {
        "median": statistics.median(samples),
        "min": min(samples),
        "max": max(samples),
        "n": len(samples),
    }
