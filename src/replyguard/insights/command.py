"""Printing a report, asking a model for proposed rule edits, and the ``insights`` command.

The proposal sends only the aggregated report (feedback as short snippets) and prints the
answer for a human to review: nothing is written or applied.
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from replyguard.config._schema import VerifierConfig
from replyguard.errors import ConfigError, JudgeError
from replyguard.insights.report import (
    read_ledger,
    summarise,
)
from replyguard.insights.stats import (
    PROPOSAL_HEADER,
    PROPOSAL_MAX_TOKENS,
    PROPOSAL_PROMPT,
    PROPOSAL_TIMEOUT_SECONDS,
    DriftStats,
    Entry,
    JudgeSetup,
    Report,
    RunKindStats,
)
from replyguard.judge._litellm import one_completion
from replyguard.telemetry._events import describe_error, redact

# -- printing ----------------------------------------------------------------------------------


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{name} {count}" for name, count in counts.items()) or "none"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f} ms"


def _flagged(kind: RunKindStats) -> str:
    """The flagged turns of a run kind, shadow mode's apart from side effects delivered."""
    text = f"{kind.flagged_rate:.0%} flagged (shadow)"
    if kind.side_effects_delivered:
        text += f", {kind.side_effects_delivered_rate:.0%} flagged (side effects, not retried)"
    return text


def _setup(setup: JudgeSetup, changed: list[str]) -> str:
    values = {
        "judgeModels": ",".join(setup.judge_models) or "?",
        "rubric": setup.rubric or "?",
        "litellm": setup.litellm or "?",
    }
    return " ".join(f"{name} {values[name]}" for name in changed)


def _drift(d: DriftStats) -> str:
    """One change of judge setup and the flips on the replies judged on both sides."""
    rate = (
        f"{d.flip_rate:.1%}, 95 % interval {d.low:.1%} to {d.high:.1%}"
        if d.low is not None
        else "-"
    )
    noise = (
        f"; the same setup twice: {d.same_setup_flipped} of {d.same_setup_compared} flipped"
        if d.same_setup_compared
        else ""
    )
    shown = f" ({', '.join(d.flips)})" if d.flips else ""
    return (
        f"{_setup(d.before, d.changed)} -> {_setup(d.after, d.changed)} (from {d.since or '?'}): "
        f"{d.flipped} of {d.compared} identical replies flipped ({rate}){noise}{shown}"
    )


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
            f"passed first time, {k.exhausted_rate:.0%} exhausted, "
            f"{_flagged(k)}, {k.mean_attempts:.2f} attempts, ${k.cost_per_turn_usd:.4f}/turn"
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
        f"RUBRICS ({report.rubric_changes} changes; rates over verified turns)": [
            f"{r.name}: {r.turns} turns, {r.first_seen or '?'} to {r.last_seen or '?'}, "
            f"{r.first_attempt_pass_rate:.0%} passed first time, "
            f"{r.exhausted_rate:.0%} exhausted"
            for r in report.rubrics
        ],
        "BY PANEL MEMBER (agreement with the panel's decision)": [
            f"{m.name}: {m.agreed} of {m.answered} votes agreed ({m.agreement_rate:.0%}), "
            f"left out {m.left_out} of {m.attempts} attempts"
            for m in report.panel_members
        ],
        f"FEEDBACK THEMES (of {t.feedbacks} feedbacks)": [
            f'"{th.text}": {th.feedbacks} ({th.share:.0%}), e.g. "{th.example}"'
            for th in report.themes
        ],
        "DRIFT (verdicts on byte-identical replies, before and after a change of judge)": [
            _drift(d) for d in report.drift
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
    reply = await one_completion(proposal_request(report, config))
    if not reply.text.strip():
        raise JudgeError(reply.note or "the model answered with no text")
    return redact(reply.text.strip(), config.secrets())  # a key it echoes is never printed


def _positive(value: str) -> int:
    if not value.isdigit() or int(value) < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1, not {value!r}")
    return int(value)


def ledger_paths(arguments: Sequence[str]) -> tuple[list[Path], str | None]:
    """The ledger files the arguments name, in order, each once: a path as it is, a glob
    (``*``, ``?``, ``[``) expanded and sorted. Also the first glob that matches nothing."""
    paths: list[Path] = []
    for argument in arguments:
        if glob.has_magic(argument):
            matched = sorted(glob.glob(argument))
            if not matched:
                return [], argument
            paths += map(Path, matched)
        else:
            paths.append(Path(argument))
    return list(dict.fromkeys(paths)), None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``replyguard insights``."""
    parser.add_argument(
        "ledger",
        nargs="+",
        help="the JSONL ledger file(s): several paths or a quoted glob (one per instance)",
    )
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
    paths, unmatched = ledger_paths(args.ledger)
    if unmatched is not None:
        print(f"replyguard insights: no ledger file matches {unmatched}", file=sys.stderr)
        return 2
    entries: list[Entry] = []
    skipped: list[int | str] = []
    for path in paths:
        try:
            more, unread = read_ledger(path)
        except OSError as exc:
            problem = "file not found" if isinstance(exc, FileNotFoundError) else type(exc).__name__
            print(f"replyguard insights: cannot read ledger {path}: {problem}", file=sys.stderr)
            return 2
        entries += more
        skipped += [f"{path}:{number}" if len(paths) > 1 else number for number in unread]
    label = ", ".join(map(str, paths))
    report = summarise(entries, ledger=label, skipped=skipped, top=args.top)
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
