"""``replyguard insights``: what keeps failing in a ledger, and what to change about it.

``read_ledger`` parses the JSONL ledger, skipping (and counting) lines that are not entries.
``summarise`` aggregates the entries into a ``Report`` (pure): totals, run kinds, categories,
checks, judge models, feedback themes, and ``Suggestion`` values whose text is built only from
those numbers. ``render`` prints a report; ``propose`` asks the config's judge model for rule
edits given the aggregated report only, for a human to review: nothing is written or applied.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import re
import sys
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic.alias_generators import to_camel

from replyguard.config import VerifierConfig
from replyguard.errors import ConfigError, JudgeError
from replyguard.judge import close_litellm_clients, import_litellm, read_response
from replyguard.telemetry import describe_error
from replyguard.types import Reason, Status

MIN_TURNS = 5  # a run kind with fewer verified turns gets no suggestion
MIN_EVENTS = 3  # nor does anything (exhausted turns, a reason, a check) seen fewer times
EXHAUSTED_RATE = 0.25  # share of a run kind's verified turns that exhausted their attempts
BUDGET_SHARE = 0.10  # share of a run kind's verified turns stopped by the cost/latency budget
TIMEOUT_SHARE = 0.30  # share of the fail-opens that were judge timeouts
STAGNANT_SHARE = 0.05  # share of all turns stopped as stagnant
CHECK_FAILURE_RATE = 0.20  # share of the turns a check ran in where it failed
THEME_MIN_FEEDBACKS = 5  # feedbacks a theme of two words or more must be in to suggest a rule
THEME_MIN_SHARE = 0.15  # and the share of all feedbacks it must be in
THEME_SUGGESTIONS = 3  # at most this many theme suggestions, on themes sharing no word
SNIPPET_CHARS = 100
SKIPPED_SHOWN = 5
UNVERIFIED = frozenset({Status.SKIPPED, Status.NOT_TRIGGERED, Status.DISABLED})
DEFAULT_KIND = "(default)"
NO_CATEGORY = "(none)"
PROPOSAL_MAX_TOKENS = 1500
PROPOSAL_TIMEOUT_SECONDS = 120.0
PROPOSAL_HEADER = "PROPOSAL by {model}, for a human to review (nothing was changed or applied)"
PROPOSAL_PROMPT = (
    "You review failure statistics of a chat agent whose replies a judge model verifies. "
    "From the JSON summary below, propose concrete edits: rules to add to AGENTS.md (quote "
    "them) and verifier config keys to change (camelCase, with values). Cite the numbers that "
    "justify each edit. A human will review your proposal; do not claim to have applied it."
)
_WORD = re.compile(r"[a-z0-9]+(?:['-][a-z0-9]+)*")
_STOP_WORDS = (
    "a about above after again all also am an and any are as at be because been before being "
    "both but by can can't could did didn't do does doesn't doing don't each either for from "
    "had has have having he her here his how i if in into is isn't it it's its just may me "
    "more most must my need needs no nor not of off on once one only or other our out over "
    "please same she should so some such than that the their them then there these they this "
    "those through to too under until up very was wasn't we were what when where which while "
    "who why will with won't would you your answer response reply user agent asked"
)
STOP_WORDS = frozenset(_STOP_WORDS.split())


class _Value(BaseModel):
    model_config = ConfigDict(
        frozen=True, alias_generator=to_camel, validate_by_name=True, serialize_by_alias=True
    )


class Entry(_Value):
    """One ledger line; unknown keys are ignored, missing ones take these defaults."""

    model_config = ConfigDict(extra="ignore")
    status: str
    run_kind: str | None = None
    reason: str | None = None
    attempts: int = 1
    cost_usd: float = 0.0
    judge_cost_usd: float = 0.0
    latency_ms: float | None = None
    judge_models: tuple[str, ...] = ()
    checks: tuple[str, ...] = ()
    failed_checks: tuple[str, ...] = ()
    categories: tuple[str | None, ...] = ()
    feedback: tuple[str | None, ...] = ()


class Totals(_Value):
    """The whole ledger; ``reasons`` counts why turns failed open or stopped early."""

    turns: int
    by_status: dict[str, int]
    reasons: dict[str, int]
    cost_usd: float
    judge_cost_usd: float
    latency_p50_ms: float | None
    latency_p95_ms: float | None
    feedbacks: int


class RunKindStats(_Value):
    """One run kind; rates, means and p95s are over its verified (not skipped) turns."""

    name: str
    turns: int
    verified: int
    first_attempt_pass_rate: float
    exhausted: int
    exhausted_rate: float
    mean_attempts: float
    max_attempts: int
    cost_per_turn_usd: float
    cost_p95_usd: float
    latency_p95_ms: float | None
    reasons: dict[str, int]
    categories: dict[str, int]


class CategoryStats(_Value):
    """Failed attempts of one category, and in which run kinds."""

    name: str
    count: int
    share: float
    run_kinds: dict[str, int]


class CheckStats(_Value):
    """One check: failures (per attempt), and the turns it failed in of those it ran in."""

    name: str
    failures: int
    turns_failed: int
    turns_run: int
    failure_rate: float


class ModelStats(_Value):
    """One judge model: the turns that used it, and how many of those failed open."""

    name: str
    turns: int
    failed_open: int
    fail_open_rate: float
    timeouts: int


class Theme(_Value):
    """A normalised word n-gram, the feedbacks it is in, and the first such feedback."""

    text: str
    feedbacks: int
    share: float
    example: str


class Suggestion(_Value):
    """What to change, citing the numbers that triggered ``rule``."""

    rule: str
    text: str


class Report(_Value):
    """Everything ``insights`` says about one ledger (``--json`` prints it as it is)."""

    ledger: str
    skipped_lines: int
    skipped_line_numbers: list[int]
    totals: Totals
    run_kinds: list[RunKindStats]
    categories: list[CategoryStats]
    checks: list[CheckStats]
    judge_models: list[ModelStats]
    themes: list[Theme]
    suggestions: list[Suggestion]


# -- reading and aggregating (pure) ------------------------------------------------------------


def read_ledger(path: Path) -> tuple[list[Entry], list[int]]:
    """The entries, and the numbers of the lines that are not entries (blank lines are neither).

    Raises ``OSError`` or ``UnicodeDecodeError`` when the file cannot be read.
    """
    entries: list[Entry] = []
    skipped: list[int] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        try:
            if line.strip():
                entries.append(Entry.model_validate_json(line))
        except ValidationError:
            skipped.append(number)
    return entries, skipped


def percentile(values: Iterable[float], p: float) -> float | None:
    """The nearest-rank ``p``-th percentile, or None without values."""
    ordered = sorted(values)
    return ordered[max(math.ceil(p / 100 * len(ordered)) - 1, 0)] if ordered else None


def _rate(part: float, whole: int, digits: int = 4) -> float:
    return round(part / whole, digits) if whole else 0.0


def _usd(costs: Iterable[float]) -> float:
    return round(sum(costs), 6)


def _kind(entry: Entry) -> str:
    return entry.run_kind or DEFAULT_KIND


def _counter(values: Iterable[str | None]) -> dict[str, int]:
    return dict(Counter(v for v in values if v).most_common())


def _run_kind_stats(name: str, entries: list[Entry]) -> RunKindStats:
    done = [e for e in entries if e.status not in UNVERIFIED]
    exhausted = sum(e.status == Status.EXHAUSTED for e in done)
    first = sum(e.status == Status.PASSED and e.attempts == 1 for e in done)
    return RunKindStats(
        name=name,
        turns=len(entries),
        verified=len(done),
        first_attempt_pass_rate=_rate(first, len(done)),
        exhausted=exhausted,
        exhausted_rate=_rate(exhausted, len(done)),
        mean_attempts=_rate(sum(e.attempts for e in done), len(done)),
        max_attempts=max((e.attempts for e in done), default=0),
        cost_per_turn_usd=_rate(_usd(e.cost_usd for e in done), len(done), 6),
        cost_p95_usd=percentile((e.cost_usd for e in done), 95) or 0.0,
        latency_p95_ms=percentile((e.latency_ms for e in done if e.latency_ms is not None), 95),
        reasons=_counter(e.reason for e in entries),
        categories=_counter(c or NO_CATEGORY for e in entries for c in e.categories),
    )


def _check_stats(name: str, entries: list[Entry]) -> CheckStats:
    run = sum(name in e.checks for e in entries)
    failed = sum(name in e.failed_checks for e in entries)
    failures = sum(e.failed_checks.count(name) for e in entries)
    rate = _rate(failed, run)
    return CheckStats(
        name=name, failures=failures, turns_failed=failed, turns_run=run, failure_rate=rate
    )


def _model_stats(name: str, entries: list[Entry]) -> ModelStats:
    used = [e for e in entries if name in e.judge_models]
    failed_open = sum(e.status == Status.FAILED_OPEN for e in used)
    timeouts = sum(e.reason == Reason.JUDGE_TIMEOUT for e in used)
    rate = _rate(failed_open, len(used))
    return ModelStats(
        name=name, turns=len(used), failed_open=failed_open, fail_open_rate=rate, timeouts=timeouts
    )


def themes(feedbacks: Sequence[str]) -> list[Theme]:
    """Word 1-3-grams (stop words removed) in two feedbacks or more, the most frequent first.

    A gram in exactly as many feedbacks as a longer gram holding it is left out for that one.
    """
    counts: Counter[tuple[str, ...]] = Counter()
    example: dict[tuple[str, ...], str] = {}
    for text in feedbacks:
        words = [w for w in _WORD.findall(text.lower()) if w not in STOP_WORDS and len(w) > 1]
        for gram in {tuple(words[i : i + n]) for n in (1, 2, 3) for i in range(len(words) - n + 1)}:
            counts[gram] += 1
            example.setdefault(gram, " ".join(text.split()))
    inner = {
        gram[i:j]
        for gram, count in counts.items()
        for i in range(len(gram))
        for j in range(i + 1, len(gram) + 1)
        if j - i < len(gram) and counts[gram[i:j]] == count
    }
    ranked = [g for g, c in counts.items() if c >= 2 and g not in inner]
    ranked.sort(key=lambda g: (-counts[g], -len(g), g))
    return [
        Theme(
            text=" ".join(g),
            feedbacks=counts[g],
            share=_rate(counts[g], len(feedbacks)),
            example=_snippet(example[g]),
        )
        for g in ranked
    ]


def _snippet(text: str) -> str:
    return text if len(text) <= SNIPPET_CHARS else text[: SNIPPET_CHARS - 1] + "…"


def summarise(entries: list[Entry], *, ledger: str, skipped: list[int], top: int = 10) -> Report:
    """Aggregate the entries; ``top`` limits the themes listed (suggestions see them all)."""
    by_kind: dict[str, list[Entry]] = {}
    categories: dict[str, list[str]] = {}
    for entry in entries:
        by_kind.setdefault(_kind(entry), []).append(entry)
        for category in entry.categories:
            categories.setdefault(category or NO_CATEGORY, []).append(_kind(entry))
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
    return Report(
        ledger=ledger,
        skipped_lines=len(skipped),
        skipped_line_numbers=skipped[:SKIPPED_SHOWN],
        totals=totals,
        run_kinds=kinds,
        categories=[
            CategoryStats(name=n, count=len(w), share=_rate(len(w), failed), run_kinds=_counter(w))
            for n, w in sorted(categories.items(), key=lambda c: (-len(c[1]), c[0]))
        ],
        checks=checks,
        judge_models=models,
        themes=ranked[:top],
        suggestions=suggest(entries, totals, kinds, checks, models, ranked),
    )


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
        said = [f for e in entries if _kind(e) == kind.name for f in e.feedback if f]
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
        if hits >= MIN_EVENTS and _rate(hits, kind.verified) >= BUDGET_SHARE:
            text = f"Run kind '{kind.name}': {_of(hits, kind.verified, 'turns')} stopped at "
            text += f"{reason}; its p95 per turn is {p95}: raise {_key(kind.name, key)} to at "
            out.append(Suggestion(rule=reason.value, text=f"{text}least that."))
    return out


def _timeouts(totals: Totals, models: list[ModelStats]) -> list[Suggestion]:
    failed_open = totals.by_status.get(Status.FAILED_OPEN, 0)
    timeouts = totals.reasons.get(Reason.JUDGE_TIMEOUT, 0)
    if timeouts < MIN_EVENTS or _rate(timeouts, failed_open) < TIMEOUT_SHARE:
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
    if stagnant < MIN_EVENTS or _rate(stagnant, totals.turns) < STAGNANT_SHARE:
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


# -- printing ----------------------------------------------------------------------------------


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{name} {count}" for name, count in counts.items()) or "none"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f} ms"


def render(report: Report) -> str:
    """The report as text: one section per table, suggestions last."""
    t = report.totals
    lines = [f"replyguard insights: {report.ledger}"]
    if report.skipped_lines:
        more = ", …" if report.skipped_lines > len(report.skipped_line_numbers) else ""
        shown = ", ".join(map(str, report.skipped_line_numbers)) + more
        lines.append(f"skipped {report.skipped_lines} lines that are not entries: {shown}")
    if not t.turns:
        return "\n".join([*lines, "no turns in the ledger"])
    sections = {
        "TOTALS": [
            f"turns {t.turns}: {_counts(t.by_status)}",
            f"reasons: {_counts(t.reasons)}",
            f"cost ${t.cost_usd:.4f} (judge ${t.judge_cost_usd:.4f}), "
            f"latency p50 {_ms(t.latency_p50_ms)}, p95 {_ms(t.latency_p95_ms)}",
        ],
        "BY RUN KIND (rates over verified turns)": [
            f"{k.name}: {k.turns} turns, {k.verified} verified, {k.first_attempt_pass_rate:.0%} "
            f"passed first time, {k.exhausted_rate:.0%} exhausted, {k.mean_attempts:.2f} "
            f"attempts, ${k.cost_per_turn_usd:.4f}/turn"
            for k in report.run_kinds
        ],
        "BY CATEGORY (failed attempts)": [
            f"{c.name}: {c.count} ({c.share:.0%}); {_counts(c.run_kinds)}"
            for c in report.categories
        ],
        "BY CHECK": [
            f"{c.name}: {c.failures} failures, in {c.turns_failed} of {c.turns_run} turns "
            f"({c.failure_rate:.0%})"
            for c in report.checks
        ],
        "BY JUDGE MODEL": [
            f"{m.name}: {m.turns} turns, {m.failed_open} failed open ({m.fail_open_rate:.0%}), "
            f"{m.timeouts} timeouts"
            for m in report.judge_models
        ],
        f"FEEDBACK THEMES (of {t.feedbacks} feedbacks)": [
            f'"{th.text}": {th.feedbacks} ({th.share:.0%}), e.g. "{th.example}"'
            for th in report.themes
        ],
        "SUGGESTIONS": [f"{n}. {s.text}" for n, s in enumerate(report.suggestions, start=1)],
    }
    for title, rows in sections.items():
        lines += ["", title, *(f"  {row}" for row in rows or ["none"])]
    return "\n".join(lines)


# -- proposal (LLM) and command line -----------------------------------------------------------


def proposal_request(report: Report, config: VerifierConfig) -> dict[str, Any]:
    """The ``litellm.acompletion`` keywords: the aggregated report only, no ledger path."""
    summary = report.model_dump(mode="json", exclude={"ledger", "skipped_line_numbers"})
    return {
        "model": config.model,
        "messages": [
            {"role": "system", "content": PROPOSAL_PROMPT},
            {"role": "user", "content": json.dumps(summary, indent=1)},
        ],
        "temperature": 0,
        "max_tokens": PROPOSAL_MAX_TOKENS,
        "drop_params": True,
        "timeout": PROPOSAL_TIMEOUT_SECONDS,
        "max_retries": 0,
        "num_retries": 0,
        "api_base": config.api_base,
        "api_key": config.resolve_api_key(),
    }


async def propose(report: Report, config: VerifierConfig) -> str:
    """The judge model's proposed edits, as text; raises on any failure."""
    litellm = await import_litellm()
    try:
        response = await litellm.acompletion(**proposal_request(report, config))
    finally:
        await close_litellm_clients()
    reply = read_response(response, config.model)
    if not reply.text.strip():
        raise JudgeError(reply.note or "the model answered with no text")
    return reply.text.strip()


def _positive(value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1, not {value!r}")
    return int(value)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``replyguard insights``."""
    parser.add_argument("ledger", help="the JSONL ledger file")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument(
        "--propose",
        action="store_true",
        help="ask the config's judge model for rule edits (printed for review, never applied)",
    )
    parser.add_argument("--config", metavar="FILE", help="the verifier config (for --propose)")
    parser.add_argument(
        "--top", type=_positive, default=10, metavar="N", help="feedback themes listed (10)"
    )


def main(args: argparse.Namespace) -> int:
    """Run ``replyguard insights``: 0 done, 1 the proposal failed, 2 usage or unreadable file."""
    if args.propose and not args.config:
        print("replyguard insights: --propose needs --config FILE", file=sys.stderr)
        return 2
    try:
        entries, skipped = read_ledger(Path(args.ledger))
    except (OSError, UnicodeDecodeError) as exc:
        problem = "file not found" if isinstance(exc, FileNotFoundError) else type(exc).__name__
        print(f"replyguard insights: cannot read ledger {args.ledger}: {problem}", file=sys.stderr)
        return 2
    report = summarise(entries, ledger=args.ledger, skipped=skipped, top=args.top)
    data: dict[str, Any] = report.model_dump(mode="json")
    text = render(report)
    if args.propose:
        try:
            config = VerifierConfig.load(args.config)
        except ConfigError as exc:
            print(f"replyguard insights: {exc}", file=sys.stderr)
            return 2
        try:
            proposal = asyncio.run(propose(report, config))
        except Exception as exc:  # any failure of the call: a message, never a traceback
            error = describe_error(exc, config.secrets())
            print(f"replyguard insights: the proposal failed: {error}", file=sys.stderr)
            return 1
        header = PROPOSAL_HEADER.format(model=config.model)
        data["proposal"] = {"header": header, "model": config.model, "text": proposal}
        text += f"\n\n{header}\n{proposal}"
    print(json.dumps(data, indent=2) if args.json else text)
    return 0
