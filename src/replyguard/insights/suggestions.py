"""Suggestions drawn from a report: every number in their text comes from the ledger."""

from __future__ import annotations

from replyguard.insights.stats import (
    BUDGET_SHARE,
    CHECK_FAILURE_RATE,
    DEFAULT_KIND,
    EXHAUSTED_RATE,
    MIN_EVENTS,
    MIN_TURNS,
    NO_CATEGORY,
    STAGNANT_SHARE,
    THEME_MIN_FEEDBACKS,
    THEME_MIN_SHARE,
    THEME_SUGGESTIONS,
    TIMEOUT_SHARE,
    CheckStats,
    Entry,
    ModelStats,
    RunKindStats,
    Suggestion,
    Theme,
    Totals,
    kind_of,
    rate,
    themes,
)
from replyguard.types import Reason, Status

# -- suggestions (pure; every number in them comes from the ledger) ----------------------------


def _key(kind: str, key: str) -> str:
    return key if kind == DEFAULT_KIND else f"runKinds.{kind}.{key}"


def _of(part: int, whole: int, noun: str) -> str:
    return f"{part} of {whole} {noun} ({part / whole:.0%})"


def suggest(
    entries: list[Entry],
    totals: Totals,
    kinds: list[RunKindStats],
    checks: list[CheckStats],
    models: list[ModelStats],
    ranked: list[Theme],
) -> list[Suggestion]:
    """What to change, each citing the numbers that triggered it (thresholds above)."""
    out: list[Suggestion] = []
    for kind in (k for k in kinds if k.verified >= MIN_TURNS):
        said = [f for e in entries if kind_of(e) == kind.name for f in e.feedback if f]
        out += _exhausted(kind, said) + _budgets(kind)
    out += _timeouts(totals, models) + _stagnant(totals, kinds)
    out += [s for check in checks for s in _check(check)]
    return out + _theme_rules(ranked, totals.feedbacks)


def _exhausted(kind: RunKindStats, feedbacks: list[str]) -> list[Suggestion]:
    if kind.exhausted < MIN_EVENTS or kind.exhausted_rate < EXHAUSTED_RATE:
        return []
    top, count = next(iter(kind.categories.items()), (NO_CATEGORY, 0))
    found = themes(feedbacks)
    about = f' (top theme: "{found[0].text}")' if found else ""
    if top == "incomplete":
        fix = f"raise {_key(kind.name, 'maxAttempts')} above {kind.max_attempts}, or add a "
        fix += f"completeness rule to AGENTS.md{about}"
    else:
        fix = f"more attempts rarely fix that: add a rule to AGENTS.md against '{top}'{about}"
    text = f"Run kind '{kind.name}': {_of(kind.exhausted, kind.verified, 'turns')} exhausted, "
    text += f"mostly '{top}' ({count} of {sum(kind.categories.values())} failed attempts): "
    return [Suggestion(rule="exhausted", text=f"{text}{fix}.")]


def _budgets(kind: RunKindStats) -> list[Suggestion]:
    out = []
    for reason, key, p95 in (
        (Reason.COST_BUDGET, "maxCostUsd", f"${kind.cost_p95_usd:.4f}"),
        (Reason.LATENCY_BUDGET, "maxLatencyMs", f"{kind.latency_p95_ms or 0:.0f} ms"),
    ):
        hits = kind.reasons.get(reason, 0)
        if hits >= MIN_EVENTS and rate(hits, kind.verified) >= BUDGET_SHARE:
            text = f"Run kind '{kind.name}': {_of(hits, kind.verified, 'turns')} stopped at "
            text += f"{reason} (p95 per turn {p95}, cut short by the ceiling itself): if those "
            text += f"turns matter, raise {_key(kind.name, key)} well above it, or lower "
            text += "maxAttempts so fewer retries are started."
            out.append(Suggestion(rule=reason.value, text=text))
    return out


def _timeouts(totals: Totals, models: list[ModelStats]) -> list[Suggestion]:
    failed_open = totals.by_status.get(Status.FAILED_OPEN, 0)
    timeouts = totals.reasons.get(Reason.JUDGE_TIMEOUT, 0)
    if timeouts < MIN_EVENTS or rate(timeouts, failed_open) < TIMEOUT_SHARE:
        return []
    text = f"{_of(timeouts, failed_open, 'fail-opens')} were judge_timeout"
    fix = "raise timeoutSeconds, or add fallbackModels"
    # A judgement that timed out names no model: only turns judged earlier on can point to one.
    slow = max(models, key=lambda m: (m.timeouts, m.name), default=None)
    if slow is not None and slow.timeouts:
        text += f", {slow.timeouts} in turns judged by {slow.name}, which failed open in "
        text += _of(slow.failed_open, slow.turns, "turns")
        fix += f" to replace {slow.name}"
    return [Suggestion(rule=Reason.JUDGE_TIMEOUT.value, text=f"{text}: {fix}.")]


def _stagnant(totals: Totals, kinds: list[RunKindStats]) -> list[Suggestion]:
    stagnant = totals.reasons.get(Reason.STAGNANT, 0)
    if stagnant < MIN_EVENTS or rate(stagnant, totals.turns) < STAGNANT_SHARE:
        return []
    where = max(kinds, key=lambda k: (k.reasons.get(Reason.STAGNANT, 0), k.name))
    text = f"{_of(stagnant, totals.turns, 'turns')} stopped as stagnant (the agent repeated its "
    text += f"reply), {where.reasons[Reason.STAGNANT]} in run kind '{where.name}': try another "
    text += f"agent model for '{where.name}', or more specific feedback."
    return [Suggestion(rule=Reason.STAGNANT.value, text=text)]


def _check(check: CheckStats) -> list[Suggestion]:
    if check.turns_failed < MIN_EVENTS or check.failure_rate < CHECK_FAILURE_RATE:
        return []
    ran = _of(check.turns_failed, check.turns_run, "turns it ran in")
    text = f"Check '{check.name}' failed in {ran}, {check.failures} failures in all: fix the "
    text += f"agent's prompt so that its replies pass '{check.name}' the first time."
    return [Suggestion(rule="check", text=text)]


def _theme_rules(ranked: list[Theme], feedbacks: int) -> list[Suggestion]:
    out: list[Suggestion] = []
    quoted: set[str] = set()
    for theme in ranked:
        often = theme.feedbacks >= THEME_MIN_FEEDBACKS and theme.share >= THEME_MIN_SHARE
        if not often or len(out) == THEME_SUGGESTIONS:
            break
        words = set(theme.text.split())
        if len(words) > 1 and not words & quoted:
            quoted |= words
            text = f'"{theme.text}" comes up in {_of(theme.feedbacks, feedbacks, "feedbacks")}'
            text += f', e.g. "{theme.example}": add an explicit rule about it to AGENTS.md.'
            out.append(Suggestion(rule="theme", text=text))
    return out
