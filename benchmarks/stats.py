"""What the benchmarks compute over their samples."""

from __future__ import annotations

from collections.abc import Sequence


def percentile(samples: Sequence[float], fraction: float) -> float:
    """The sample at `fraction` of the way through the sorted samples (the nearest rank below)."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]
