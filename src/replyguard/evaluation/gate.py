"""The trust gate: has the judge earned ``"enforce"`` on these labels? (pure)

The operator sets limits on the 95 % intervals of the report's rates (``Threshold``):
``falseFailRate`` and ``falsePassRate`` have a most (the interval's upper bound must be at or
below it), ``accuracy`` (agreement) a least (the lower bound at or above it). Each limit is

- ``met`` when the whole interval is on the right side of it;
- ``breached`` when the whole interval is on the wrong side (more labels would not help: the
  judge is worse than the limit, at 95 %);
- ``undecided`` when the interval straddles it, or no label of its kind exists yet.

The answer: ``UNTRUSTED`` when a limit is breached, else ``INCONCLUSIVE`` when one is
undecided, else ``TRUSTED``. For an undecided limit, ``moreOfKind`` is how many more labels of
the kind the rate counts (any, labelled PASS, labelled FAIL) would decide it if the rate
stayed as observed: the least ``N`` whose Wilson interval at the observed rate clears the limit
on the side the rate lies, less those labelled so far (None when the rate sits on the limit,
or the labels needed exceed ``MAX_LABELS``, or there is no label of the kind yet).
``moreLabels`` scales that to labels of any kind by the kind's share of the labelled records
(rounded up). The gate's ``moreLabels`` is the largest of them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from replyguard.evaluation.stats import Z95, wilson

TRUSTED = "TRUSTED"
UNTRUSTED = "UNTRUSTED"
INCONCLUSIVE = "INCONCLUSIVE"
EXIT_CODES = {TRUSTED: 0, UNTRUSTED: 1, INCONCLUSIVE: 3}
"""``replyguard eval``'s exit code for each answer (2 is a usage or input error)."""
MAX_LABELS = 1_000_000
"""Beyond this many labels of a kind, more labels are not offered as a way to decide."""

Side = Literal["most", "least"]
RATES: dict[str, Side] = {"falseFailRate": "most", "falsePassRate": "most", "accuracy": "least"}
"""The rates a limit can be set on, and which side of it each must be."""
_KINDS = {"falseFailRate": "labelPass", "falsePassRate": "labelFail", "accuracy": "labelled"}


@dataclass(frozen=True)
class Threshold:
    """One limit: ``rate`` (a key of ``RATES``) must be at most / at least ``limit`` (0..1)."""

    rate: str
    limit: float

    def __post_init__(self) -> None:
        if self.rate not in RATES:
            raise ValueError(f"no limit can be set on {self.rate!r} (one of: {', '.join(RATES)})")
        if not 0.0 <= self.limit <= 1.0:
            raise ValueError(f"a limit is a share between 0 and 1, not {self.limit!r}")

    @property
    def side(self) -> Side:
        """``most`` or ``least``."""
        return RATES[self.rate]


def wilson_bounds(rate: float, n: float, z: float = Z95) -> tuple[float, float]:
    """The Wilson interval at an observed ``rate`` after ``n`` labels (``n`` > 0)."""
    z2 = z * z
    scale = 1 + z2 / n
    centre = (rate + z2 / (2 * n)) / scale
    half = z * math.sqrt(max(rate * (1 - rate), 0.0) / n + z2 / (4 * n * n)) / scale
    return max(0.0, centre - half), min(1.0, centre + half)


def labels_to_decide(rate: float, n: int, limit: float) -> int | None:
    """How many more labels would put the Wilson interval at ``rate`` wholly on one side of
    ``limit`` (0: already; None: ``rate`` is the limit, or more than ``MAX_LABELS``)."""
    if rate == limit:
        return None

    def decided(count: int) -> bool:
        low, high = wilson_bounds(rate, count)
        return high <= limit if rate < limit else low > limit

    if decided(max(n, 1)):
        return 0
    low, high = max(n, 1), max(n, 1) * 2
    while not decided(high):
        if high > MAX_LABELS:
            return None
        low, high = high, high * 2
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if decided(middle) else (middle, high)
    return high - n


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def _kind_counts(confusion: dict[str, int]) -> dict[str, int]:
    label_pass = confusion["labelPassJudgedPass"] + confusion["labelPassJudgedFail"]
    label_fail = confusion["labelFailJudgedPass"] + confusion["labelFailJudgedFail"]
    return {"labelPass": label_pass, "labelFail": label_fail, "labelled": label_pass + label_fail}


def _part_whole(rate: str, c: dict[str, int]) -> tuple[int, int]:
    if rate == "accuracy":
        agreed = c["labelPassJudgedPass"] + c["labelFailJudgedFail"]
        return agreed, agreed + c["labelPassJudgedFail"] + c["labelFailJudgedPass"]
    if rate == "falseFailRate":
        return c["labelPassJudgedFail"], c["labelPassJudgedPass"] + c["labelPassJudgedFail"]
    return c["labelFailJudgedPass"], c["labelFailJudgedPass"] + c["labelFailJudgedFail"]


def _check(threshold: Threshold, report: dict[str, Any]) -> dict[str, Any]:
    part, n = _part_whole(threshold.rate, report["confusion"])
    interval = wilson(part, n)
    value = part / n if n else None
    low, high = (interval.low, interval.high) if interval is not None else (None, None)
    line: dict[str, Any] = {
        "rate": threshold.rate,
        "side": threshold.side,
        "limit": threshold.limit,
        "value": _round(value),
        "low": _round(low),
        "high": _round(high),
        "n": n,
        "moreOfKind": None,
        "moreLabels": None,
    }
    if value is None or low is None or high is None:
        return {**line, "status": "undecided"}
    bound_ok = high <= threshold.limit if threshold.side == "most" else low >= threshold.limit
    bound_bad = low > threshold.limit if threshold.side == "most" else high < threshold.limit
    if bound_ok or bound_bad:
        return {**line, "status": "met" if bound_ok else "breached"}
    more = labels_to_decide(value, n, threshold.limit)
    counts = _kind_counts(report["confusion"])
    share = counts[_KINDS[threshold.rate]] / counts["labelled"] if counts["labelled"] else 0
    total = None if more is None or not share else math.ceil(more / share)
    return {**line, "status": "undecided", "moreOfKind": more, "moreLabels": total}


def trust(report: dict[str, Any], thresholds: Sequence[Threshold]) -> dict[str, Any] | None:
    """The gate's answer on ``report`` (``report.json``'s figures), or None without limits:
    ``{"verdict", "exitCode", "moreLabels", "thresholds": [...]}``."""
    if not thresholds:
        return None
    checks = [_check(t, report) for t in thresholds]
    statuses = {c["status"] for c in checks}
    if "breached" in statuses:
        verdict = UNTRUSTED
    elif "undecided" in statuses:
        verdict = INCONCLUSIVE
    else:
        verdict = TRUSTED
    needed = [c["moreLabels"] for c in checks if c["status"] == "undecided"]
    more = None if verdict != INCONCLUSIVE or None in needed else max(needed, default=0)
    return {
        "verdict": verdict,
        "exitCode": EXIT_CODES[verdict],
        "level": 0.95,
        "moreLabels": more,
        "thresholds": checks,
    }


def describe(gate: dict[str, Any]) -> list[str]:
    """The gate's answer as lines of text: the verdict, then one line per limit."""
    lines = [f"trust gate: {gate['verdict']}"]
    if gate["verdict"] == INCONCLUSIVE:
        more = gate["moreLabels"]
        lines[0] += (
            f" (about {more} more labels would decide it, if the rates stay as observed)"
            if more is not None
            else " (more labels cannot be counted on to decide it: see below)"
        )
    for c in gate["thresholds"]:
        bound = "upper" if c["side"] == "most" else "lower"
        shown = (
            f"95 % interval {100 * c['low']:.1f} to {100 * c['high']:.1f} %"
            if c["low"] is not None
            else "no labels of its kind yet"
        )
        line = (
            f"  {c['rate']} {c['side']} {100 * c['limit']:.1f} % ({bound} bound): "
            f"{c['status']}, {shown}, n {c['n']}"
        )
        if c["status"] == "undecided" and c["moreOfKind"] is not None:
            line += f"; {c['moreOfKind']} more of its kind (about {c['moreLabels']} labels)"
        elif c["status"] == "undecided" and c["low"] is not None:
            line += "; the observed rate sits on the limit or too near it to decide"
        lines.append(line)
    return lines
