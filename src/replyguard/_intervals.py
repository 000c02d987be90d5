"""95 % intervals for a share (Wilson score), shared by ``eval`` and ``insights`` (pure).

No scipy: closed form, with ``z = 1.959964``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

Z95 = 1.959964
"""The standard normal quantile for a two-sided 95 % interval."""


@dataclass(frozen=True)
class Interval:
    """A 95 % interval ``[low, high]`` around a figure, and ``n``, the labels behind it."""

    low: float
    high: float
    n: int


def wilson(successes: int, n: int, z: float = Z95) -> Interval | None:
    """The Wilson score interval of ``successes`` out of ``n`` (None when ``n`` is 0).

    Unlike the normal approximation it stays inside [0, 1] and is not empty at 0 or ``n``
    successes: 8 of 10 gives [0.490, 0.943], 10 of 10 gives [0.722, 1].
    """
    if n <= 0:
        return None
    rate, z2 = successes / n, z * z
    scale = 1 + z2 / n
    centre = (rate + z2 / (2 * n)) / scale
    half = z * math.sqrt(rate * (1 - rate) / n + z2 / (4 * n * n)) / scale
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return Interval(low, high, n)
