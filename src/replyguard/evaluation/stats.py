"""Agreement between the judge and human labels: pure functions over ``(label, judged)`` pairs.

Each value is ``"PASS"`` or ``"FAIL"``. Edge cases, by definition:

- no labelled record: ``accuracy``, ``kappa`` and both rates are None;
- ``falseFailRate`` (judged FAIL among labelled PASS) is None without a labelled PASS, and
  ``falsePassRate`` (judged PASS among labelled FAIL) None without a labelled FAIL;
- Cohen's kappa is ``(po - pe) / (1 - pe)``; when ``pe`` is 1 (judge and labels each gave one
  and the same answer to every record: no variance) kappa is undefined and None, while
  ``accuracy`` is 1.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

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
