"""Agreement between the judge and human labels, and 95 % intervals around it: pure functions
over ``(label, judged)`` pairs.

Each value is ``"PASS"`` or ``"FAIL"``. Edge cases, by definition:

- no labelled record: ``accuracy``, ``kappa`` and both rates are None;
- ``falseFailRate`` (judged FAIL among labelled PASS) is None without a labelled PASS, and
  ``falsePassRate`` (judged PASS among labelled FAIL) None without a labelled FAIL;
- Cohen's kappa is ``(po - pe) / (1 - pe)``; when ``pe`` is 1 (judge and labels each gave one
  and the same answer to every record: no variance) kappa is undefined and None, while
  ``accuracy`` is 1.

Intervals are 95 %: a rate's is the Wilson score interval (inside [0, 1], never empty at 0 or
all), kappa's a percentile bootstrap with a fixed seed (deterministic; about 0.4 s per thousand
labels). ``labels_for_half_width`` says how many more labels would narrow a rate's interval to
a given half-width. No scipy: the formulas are closed-form, with ``z = 1.959964``.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from replyguard._intervals import Z95 as Z95
from replyguard._intervals import Interval as Interval
from replyguard._intervals import wilson as wilson

PASS = "PASS"
FAIL = "FAIL"
UNCATEGORISED = "uncategorised"


@dataclass(frozen=True)
class Confusion:
    """Counts of labelled records by (label, judged)."""

    pass_pass: int = 0
    """Labelled PASS, judged PASS."""
    pass_fail: int = 0
    """Labelled PASS, judged FAIL (a false FAIL)."""
    fail_pass: int = 0
    """Labelled FAIL, judged PASS (a false PASS)."""
    fail_fail: int = 0
    """Labelled FAIL, judged FAIL."""

    @property
    def total(self) -> int:
        """How many labelled records."""
        return self.pass_pass + self.pass_fail + self.fail_pass + self.fail_fail


def confusion(pairs: Iterable[tuple[str, str]]) -> Confusion:
    """The confusion matrix of ``(label, judged)`` pairs."""
    counts = {(PASS, PASS): 0, (PASS, FAIL): 0, (FAIL, PASS): 0, (FAIL, FAIL): 0}
    for pair in pairs:
        counts[pair] += 1
    return Confusion(counts[PASS, PASS], counts[PASS, FAIL], counts[FAIL, PASS], counts[FAIL, FAIL])


def _ratio(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def accuracy(matrix: Confusion) -> float | None:
    """Share of labelled records the judge agreed with."""
    return _ratio(matrix.pass_pass + matrix.fail_fail, matrix.total)


def false_fail_rate(matrix: Confusion) -> float | None:
    """Judged FAIL among labelled PASS."""
    return _ratio(matrix.pass_fail, matrix.pass_pass + matrix.pass_fail)


def false_pass_rate(matrix: Confusion) -> float | None:
    """Judged PASS among labelled FAIL."""
    return _ratio(matrix.fail_pass, matrix.fail_pass + matrix.fail_fail)


def kappa(matrix: Confusion) -> float | None:
    """Cohen's kappa of judge and labels over PASS/FAIL (None: no records or no variance)."""
    n = matrix.total
    if not n:
        return None
    observed = (matrix.pass_pass + matrix.fail_fail) / n
    label_pass = (matrix.pass_pass + matrix.pass_fail) / n
    judged_pass = (matrix.pass_pass + matrix.fail_pass) / n
    expected = label_pass * judged_pass + (1 - label_pass) * (1 - judged_pass)
    if expected >= 1:
        return None
    return (observed - expected) / (1 - expected)


@dataclass(frozen=True)
class Categorised:
    """One record's FAIL categories: the judge's and the label's (None where not a FAIL)."""

    judged: str | None
    labelled: str | None


def by_category(rows: Sequence[Categorised]) -> dict[str, dict[str, int]]:
    """``{category: {"judged", "labelled", "agreed"}}`` over every record, sorted by name.

    ``judged`` counts records the judge failed in the category, ``labelled`` records labelled
    FAIL in it, ``agreed`` records where both did; a FAIL without a known category counts as
    ``uncategorised``.
    """
    names = sorted({n for row in rows for n in (row.judged, row.labelled) if n is not None})
    return {
        name: {
            "judged": sum(row.judged == name for row in rows),
            "labelled": sum(row.labelled == name for row in rows),
            "agreed": sum(row.judged == name == row.labelled for row in rows),
        }
        for name in names
    }


# -- 95 % intervals -----------------------------------------------------------------------------

KAPPA_RESAMPLES = 2000
"""Bootstrap resamples behind kappa's interval."""
KAPPA_SEED = 20261128
"""The bootstrap's fixed seed: the same labels always give the same interval."""


def wilson_half_width(rate: float, n: int, z: float = Z95) -> float:
    """Half the width of the Wilson interval at the observed ``rate`` after ``n`` labels."""
    z2 = z * z
    return z * math.sqrt(rate * (1 - rate) / n + z2 / (4 * n * n)) / (1 + z2 / n)


def labels_for_half_width(rate: float, n: int, half: float = 0.05, z: float = Z95) -> int:
    """How many more labels would bring the Wilson interval at ``rate`` to ``±half``: the
    least ``N`` whose half-width at ``rate`` is at most ``half``, less the ``n`` labelled so
    far (0 when already there). The rate is taken to stay as observed.

    The half-width falls as ``N`` grows, so a doubling search then a bisection find ``N``.
    """
    if wilson_half_width(rate, max(n, 1), z) <= half:
        return 0
    low, high = max(n, 1), max(n, 1) * 2
    while wilson_half_width(rate, high, z) > half:
        low, high = high, high * 2
    while high - low > 1:
        middle = (low + high) // 2
        if wilson_half_width(rate, middle, z) > half:
            low = middle
        else:
            high = middle
    return high - n


def kappa_interval(
    matrix: Confusion, *, resamples: int = KAPPA_RESAMPLES, seed: int = KAPPA_SEED
) -> Interval | None:
    """A percentile bootstrap 95 % interval for Cohen's kappa (None when kappa is undefined).

    Each resample draws ``matrix.total`` labelled records with replacement (a multinomial
    draw over the four cells of the confusion matrix) from a ``random.Random(seed)``, so the
    interval is deterministic. A resample with no variance (kappa undefined) is left out; the
    bounds are the 2.5th and 97.5th percentiles of the rest (nearest rank).
    """
    n = matrix.total
    if kappa(matrix) is None:
        return None
    rng = random.Random(seed)
    cells = (matrix.pass_pass, matrix.pass_fail, matrix.fail_pass, matrix.fail_fail)
    cumulative = list(itertools.accumulate(cells))
    values: list[float] = []
    for _ in range(resamples):
        drawn = rng.choices(range(4), cum_weights=cumulative, k=n)
        value = kappa(Confusion(*(drawn.count(cell) for cell in range(4))))
        if value is not None:
            values.append(value)
    if not values:  # every resample without variance: no interval to give
        return None
    values.sort()
    low = values[max(0, math.ceil(0.025 * len(values)) - 1)]
    high = values[min(len(values) - 1, math.ceil(0.975 * len(values)) - 1)]
    return Interval(low, high, n)
