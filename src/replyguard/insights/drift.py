"""Drift: do verdicts on byte-identical replies change when the judge does? (pure)

Every ledger line records each judged attempt's reply hash and vote (``judged``), the models
whose verdict counted (``judgeModels``), the rubric's hash and the installed litellm version.
Their triple is the line's judge setup. Setups are taken in the order they first appear (by
``ts``, then by line); for each setup and the one before it, every reply hash voted on under
both is compared: the last vote under the earlier setup against the first under the later one.
Fail-open attempts carry no vote and are left out. As a yardstick, the same comparison between
two successive votes of one hash under the earlier setup alone measures the judge's own noise.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from replyguard._intervals import wilson
from replyguard.insights.stats import DriftStats, Entry, JudgeSetup

MAX_FLIPS_SHOWN = 10
_FIELDS = ("judgeModels", "rubric", "litellm")
Vote = tuple[JudgeSetup, str, str, str | None]
"""``(setup, reply hash, vote, ts)`` of one judged attempt."""


def setup_of(entry: Entry) -> JudgeSetup:
    """The judge setup of a ledger line."""
    return JudgeSetup(
        judge_models=tuple(sorted(entry.judge_models)), rubric=entry.rubric, litellm=entry.litellm
    )


def _votes(entries: Sequence[Entry]) -> list[Vote]:
    """``(setup, reply hash, vote, ts)`` of every judged attempt with a vote, in time order."""
    ordered = sorted(enumerate(entries), key=lambda pair: (pair[1].ts or "", pair[0]))
    return [
        (setup_of(entry), judged.reply_sha256, judged.vote, entry.ts)
        for _, entry in ordered
        for judged in entry.judged
        if judged.reply_sha256 and judged.vote in ("PASS", "FAIL")
    ]


def _changed(before: JudgeSetup, after: JudgeSetup) -> list[str]:
    pairs = zip(
        _FIELDS,
        (before.judge_models, before.rubric, before.litellm),
        (after.judge_models, after.rubric, after.litellm),
        strict=True,
    )
    return [name for name, old, new in pairs if old != new]


def _noise(
    votes: Sequence[tuple[JudgeSetup, str, str, str | None]], setup: JudgeSetup
) -> tuple[int, int]:
    last: dict[str, str] = {}
    compared = flipped = 0
    for seen, digest, vote, _ in votes:
        if seen != setup:
            continue
        if digest in last:
            compared += 1
            flipped += last[digest] != vote
        last[digest] = vote
    return compared, flipped


def drift(entries: Sequence[Entry]) -> list[DriftStats]:
    """One ``DriftStats`` per change of setup that has a reply voted on under both sides."""
    votes = _votes(entries)
    order: list[JudgeSetup] = []
    since: dict[JudgeSetup, str | None] = {}
    for setup, _, _, ts in votes:
        if setup not in since:
            order.append(setup)
            since[setup] = ts
    found: list[DriftStats] = []
    for before, after in itertools.pairwise(order):
        last_before: dict[str, str] = {}
        first_after: dict[str, str] = {}
        for setup, digest, vote, _ in votes:
            if setup == before:
                last_before[digest] = vote
            elif setup == after:
                first_after.setdefault(digest, vote)
        common = [d for d in first_after if d in last_before]
        if not common:
            continue
        flips = [f"{last_before[d]}->{first_after[d]} {d[:12]}" for d in common
                 if last_before[d] != first_after[d]]  # fmt: skip
        interval = wilson(len(flips), len(common))
        compared, flipped = _noise(votes, before)
        found.append(
            DriftStats(
                before=before,
                after=after,
                changed=_changed(before, after),
                since=since[after],
                compared=len(common),
                flipped=len(flips),
                flip_rate=round(len(flips) / len(common), 4),
                low=None if interval is None else round(interval.low, 4),
                high=None if interval is None else round(interval.high, 4),
                same_setup_compared=compared,
                same_setup_flipped=flipped,
                flips=flips[:MAX_FLIPS_SHOWN],
            )
        )
    return found
