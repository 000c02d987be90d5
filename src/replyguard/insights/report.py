"""Reading a ledger and aggregating it into a ``Report`` (pure).

``read_ledger`` parses the JSONL ledger, skipping (and counting) lines that are not entries;
``summarise`` aggregates the entries: totals, run kinds, categories, checks, judge models,
feedback themes, and the suggestions drawn from them.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

from pydantic import ValidationError

from replyguard.insights.drift import drift
from replyguard.insights.stats import (
    NO_CATEGORY,
    SKIPPED_SHOWN,
    UNVERIFIED,
    CategoryStats,
    CheckStats,
    Entry,
    ModelStats,
    PanelMemberStats,
    Report,
    RubricStats,
    RunKindStats,
    Totals,
    kind_of,
    rate,
    themes,
)
from replyguard.insights.suggestions import suggest
from replyguard.types import Reason, Status

# -- reading and aggregating (pure) ------------------------------------------------------------


def read_ledger(path: Path) -> tuple[list[Entry], list[int]]:
    """The entries, and the numbers of the lines that are not entries (blank lines are neither).

    A line that is not UTF-8 (one torn inside a multi-byte character by a write that stopped
    on a full disk) is one more line that is not an entry: the rest of the file still counts.
    Raises ``OSError`` when the file cannot be read.
    """
    entries: list[Entry] = []
    skipped: list[int] = []
    for number, raw in enumerate(path.read_bytes().split(b"\n"), start=1):
        try:
            line = raw.decode("utf-8")
            if line.strip():
                entries.append(Entry.model_validate_json(line))
        except (UnicodeDecodeError, ValidationError):
            skipped.append(number)
    return entries, skipped


def percentile(values: Iterable[float], p: float) -> float | None:
    """The nearest-rank ``p``-th percentile, or None without values."""
    ordered = sorted(values)
    return ordered[max(math.ceil(p / 100 * len(ordered)) - 1, 0)] if ordered else None


def _usd(costs: Iterable[float]) -> float:
    return round(sum(costs), 6)


def _counter(values: Iterable[str | None]) -> dict[str, int]:
    return dict(Counter(v for v in values if v).most_common())


def _run_kind_stats(name: str, entries: list[Entry]) -> RunKindStats:
    done = [e for e in entries if e.status not in UNVERIFIED]
    exhausted = sum(e.status == Status.EXHAUSTED for e in done)
    flagged_all = [e for e in done if e.status == Status.FLAGGED]
    acted = sum(e.reason == Reason.SIDE_EFFECTS for e in flagged_all)
    flagged = len(flagged_all) - acted  # shadow mode's
    first = sum(e.status == Status.PASSED and e.attempts == 1 for e in done)
    return RunKindStats(
        name=name,
        turns=len(entries),
        verified=len(done),
        first_attempt_pass_rate=rate(first, len(done)),
        exhausted=exhausted,
        exhausted_rate=rate(exhausted, len(done)),
        flagged=flagged,
        flagged_rate=rate(flagged, len(done)),
        side_effects_delivered=acted,
        side_effects_delivered_rate=rate(acted, len(done)),
        mean_attempts=rate(sum(e.attempts for e in done), len(done)),
        max_attempts=max((e.attempts for e in done), default=0),
        cost_per_turn_usd=rate(_usd(e.cost_usd for e in done), len(done), 6),
        cost_p95_usd=percentile((e.cost_usd for e in done), 95) or 0.0,
        latency_p95_ms=percentile((e.latency_ms for e in done if e.latency_ms is not None), 95),
        reasons=_counter(e.reason for e in entries),
        categories=_counter(c or NO_CATEGORY for e in entries for c in e.categories),
    )


def _check_stats(name: str, entries: list[Entry]) -> CheckStats:
    run = sum(name in e.checks for e in entries)
    failed = sum(name in e.failed_checks for e in entries)
    failures = sum(e.failed_checks.count(name) for e in entries)
    return CheckStats(
        name=name,
        failures=failures,
        turns_failed=failed,
        turns_run=run,
        failure_rate=rate(failed, run),
    )


def _model_stats(name: str, entries: list[Entry]) -> ModelStats:
    used = [e for e in entries if name in e.judge_models]
    failed_open = sum(e.status == Status.FAILED_OPEN for e in used)
    timeouts = sum(e.reason == Reason.JUDGE_TIMEOUT for e in used)
    return ModelStats(
        name=name,
        turns=len(used),
        failed_open=failed_open,
        fail_open_rate=rate(failed_open, len(used)),
        timeouts=timeouts,
    )


def _rubric_stats(name: str, entries: list[Entry]) -> RubricStats:
    done = [e for e in entries if e.status not in UNVERIFIED]
    first = sum(e.status == Status.PASSED and e.attempts == 1 for e in done)
    exhausted = sum(e.status == Status.EXHAUSTED for e in done)
    stamps = [e.ts for e in entries if e.ts]
    return RubricStats(
        name=name,
        turns=len(entries),
        verified=len(done),
        first_seen=min(stamps, default=None),
        last_seen=max(stamps, default=None),
        first_attempt_pass_rate=rate(first, len(done)),
        exhausted_rate=rate(exhausted, len(done)),
    )


def _rubrics(entries: list[Entry]) -> tuple[list[RubricStats], int]:
    """Each rubric's stats in the order of first appearance, and how often it changed."""
    by_rubric: dict[str, list[Entry]] = {}
    changes, last = 0, None
    for entry in entries:
        if entry.rubric is None:
            continue
        by_rubric.setdefault(entry.rubric, []).append(entry)
        changes += last is not None and entry.rubric != last
        last = entry.rubric
    return [_rubric_stats(name, found) for name, found in by_rubric.items()], changes


def _panel_members(entries: list[Entry]) -> list[PanelMemberStats]:
    """Each panel member's votes against the panel's decisions, over every panel attempt."""
    seen: dict[str, list[tuple[str | None, str | None]]] = {}
    for entry in entries:
        for line in entry.panel:
            for name, vote in line.votes.items():
                seen.setdefault(name, []).append((vote, line.decision))
    stats = []
    for name, votes in sorted(seen.items()):
        answered = [(vote, decision) for vote, decision in votes if vote is not None]
        decided = [(vote, decision) for vote, decision in answered if decision is not None]
        agreed = sum(vote == decision for vote, decision in decided)
        stats.append(
            PanelMemberStats(
                name=name,
                attempts=len(votes),
                answered=len(answered),
                left_out=len(votes) - len(answered),
                agreed=agreed,
                agreement_rate=rate(agreed, len(decided)),
            )
        )
    return stats


def summarise(
    entries: list[Entry], *, ledger: str, skipped: Sequence[int | str], top: int = 10
) -> Report:
    """Aggregate the entries; ``top`` limits the themes listed (suggestions see them all)."""
    by_kind: dict[str, list[Entry]] = {}
    categories: dict[str, list[str]] = {}
    for entry in entries:
        by_kind.setdefault(kind_of(entry), []).append(entry)
        for category in entry.categories:
            categories.setdefault(category or NO_CATEGORY, []).append(kind_of(entry))
    failed = sum(map(len, categories.values()))
    feedbacks = [f for e in entries for f in e.feedback if f]
    latencies = [e.latency_ms for e in entries if e.latency_ms is not None]
    totals = Totals(
        turns=len(entries),
        by_status=_counter(e.status for e in entries),
        reasons=_counter(e.reason for e in entries),
        cost_usd=_usd(e.cost_usd for e in entries),
        judge_cost_usd=_usd(e.judge_cost_usd for e in entries),
        latency_p50_ms=percentile(latencies, 50),
        latency_p95_ms=percentile(latencies, 95),
        feedbacks=len(feedbacks),
    )
    kinds = sorted(
        (_run_kind_stats(k, v) for k, v in by_kind.items()), key=lambda k: (-k.turns, k.name)
    )
    checks = [_check_stats(c, entries) for c in sorted({c for e in entries for c in e.checks})]
    checks.sort(key=lambda c: (-c.failures, c.name))
    models = [
        _model_stats(m, entries) for m in sorted({m for e in entries for m in e.judge_models})
    ]
    ranked = themes(feedbacks)
    rubrics, rubric_changes = _rubrics(entries)
    return Report(
        ledger=ledger,
        skipped_lines=len(skipped),
        skipped_line_numbers=list(skipped[:SKIPPED_SHOWN]),
        totals=totals,
        run_kinds=kinds,
        categories=[
            CategoryStats(name=n, count=len(w), share=rate(len(w), failed), run_kinds=_counter(w))
            for n, w in sorted(categories.items(), key=lambda c: (-len(c[1]), c[0]))
        ],
        checks=checks,
        judge_models=models,
        rubrics=rubrics,
        rubric_changes=rubric_changes,
        panel_members=_panel_members(entries),
        themes=ranked[:top],
        suggestions=suggest(entries, totals, kinds, checks, models, ranked),
        drift=drift(entries),
    )
