"""What a turn leaves behind: each verdict's log event, and its outcome's event and ledger line.

Each judgement is logged as a ``verdict`` event (``report_verdict``). ``_Run.finish`` settles
the outcome (``_policy.settled``), then reports it here: one log event named for its status
(``passed``, ``exhausted`` ...), and, for a turn that was judged, one JSON line in the
ledger, bounded by the time the turn has left.
"""

from __future__ import annotations

import logging
from typing import Any

from replyguard.context._prompt import JudgePrompt
from replyguard.runner._request import Profile, Step
from replyguard.runner._side_effects import done
from replyguard.telemetry._events import Events
from replyguard.telemetry._ledger import TIME_LIMIT as LEDGER_TIME_LIMIT
from replyguard.telemetry._ledger import Ledger, ledger_record, member_votes
from replyguard.types import Outcome, Status, ToolCallRecord, Turn, Verdict

_REPORTED = {
    Status.FAILED_OPEN: (logging.WARNING, "failed_open"),
    Status.EXHAUSTED: (logging.WARNING, "exhausted"),
    Status.PASSED: (logging.INFO, "passed"),
    Status.FLAGGED: (logging.INFO, "flagged"),
    Status.SKIPPED: (logging.DEBUG, "skipped"),
    Status.NOT_TRIGGERED: (logging.DEBUG, "not_triggered"),
    Status.DISABLED: (logging.DEBUG, "disabled"),
}
"""The log level and event name of each outcome."""


def report_outcome(
    events: Events, turn: Turn, run_kind: str | None, outcome: Outcome, *, log_content: bool
) -> None:
    """The outcome's log event (nothing is built when its level is off)."""
    level, event = _REPORTED[outcome.status]
    if not events.enabled(level):
        return
    fields: dict[str, Any] = {
        "turn_id": turn.id,
        "run_kind": run_kind,
        "status": outcome.status,
        "reason": outcome.reason,
        "skip_reason": outcome.skip_reason,
        "attempts": len(outcome.attempts),
        "cost_usd": outcome.cost_usd,
        "latency_ms": round(outcome.latency_ms, 2),
    }
    last = outcome.attempts[-1].verdict if outcome.attempts else None
    if last is not None and last.error:
        fields["error"] = last.error
    if log_content:
        fields["user_message"] = turn.user_message
        fields["response"] = outcome.response
    events.emit_fields(level, event, fields)


async def append_to_ledger(
    ledger: Ledger,
    turn: Turn,
    outcome: Outcome,
    profile: Profile,
    tool_ledger: tuple[ToolCallRecord, ...],
    time_left: float | None,
) -> None:
    """The judged turn's ledger line; bounded by the time the turn has left (at least a
    moment, at most the ledger's default)."""
    config = profile.config
    record = ledger_record(
        turn,
        outcome,
        run_kind=profile.name,
        with_content=config.log_content,
        configured_models=config.judge_models,
        side_effects=[call.name for call in done(tool_ledger)],
        rubric=profile.rubric.digest,
    )
    limit = LEDGER_TIME_LIMIT if time_left is None else min(LEDGER_TIME_LIMIT, max(time_left, 0.05))
    await ledger.append(record, time_limit=limit)


def report_verdict(events: Events, step: Step, verdict: Verdict, prompt: JudgePrompt) -> None:
    """The ``verdict`` event. Its tokens are the judge's usage; the prompt's own count is
    added only when the build already made it (counting a prompt takes milliseconds)."""
    fields: dict[str, Any] = {
        "turn_id": step.turn.id,
        "attempt": step.attempt,
        "passed": verdict.passed,
        "category": verdict.category,
        "readable": verdict.readable,
        "model": verdict.model,
        "prompt_tokens": verdict.prompt_tokens,
        "completion_tokens": verdict.completion_tokens,
        "cost_usd": verdict.cost_usd,
        "latency_ms": round(verdict.latency_ms, 2),
        "trimmed": prompt.trimmed,
    }
    counted = prompt.counted_tokens
    if counted is not None:
        fields["prompt_tokens_counted"] = counted
    if verdict.members:
        fields["panel"] = member_votes(verdict)
    if step.profile.config.log_content:
        fields["feedback"] = verdict.feedback
    events.emit_fields(logging.INFO, "verdict", fields)
