"""One judgement of one reply and the status it gets: what ``replyguard verify``,
``replyguard heartbeat`` and ``eval`` decide (``Judgement``), with ``runner._policy``'s rule.

A one-shot door has no second attempt: where ``Verifier.run`` would retry, its status is
``failed`` (the reply must change); everything else (``passed``, ``failed_open``, ``flagged``
in shadow mode or after side effects under ``onSideEffects: "deliver"``) is the status
``run`` gives the same verdict (``verdict_status``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from replyguard.gate._prechecks import skip_reason
from replyguard.runner._feedback import feedback_message
from replyguard.runner._policy import verdict_status
from replyguard.runner._side_effects import done as done_calls
from replyguard.runner._verifier import Verifier
from replyguard.types import Reason, Reply, SkipReason, ToolCallRecord, Turn, Verdict

FAILED = "failed"
FLAGGED = "flagged"
PASSED = "passed"
SKIPPED = "skipped"
FAILED_OPEN = "failed_open"


@dataclass(frozen=True)
class Judgement:
    """What was decided about one reply, with the status a command prints."""

    status: str
    verdict: Verdict | None
    skip: SkipReason | None
    mode: str
    heartbeat: bool = False
    """The reply was a heartbeat run's (its retry message speaks of the task list)."""
    done: tuple[ToolCallRecord, ...] = ()
    """The reply's successful side-effecting tool calls, each once."""
    on_side_effects: str = "notice"
    """The turn's ``onSideEffects``."""
    categories: Mapping[str, str] = field(default_factory=dict)
    """The config's custom categories (their guidance goes into the retry message)."""

    @property
    def judged_fail(self) -> bool:
        """The judge (or a check) failed the reply, whether enforced or only flagged."""
        return self.status in (FAILED, FLAGGED)

    @property
    def awaiting_user(self) -> bool:
        """A PASS that rightly waits for the user (a clarifying question, a justified
        refusal)."""
        return self.status == PASSED and self.verdict is not None and self.verdict.awaiting_user

    @property
    def reason(self) -> str | None:
        """Why it was skipped or failed open."""
        if self.skip is not None:
            return self.skip.value
        if self.status == FLAGGED and self.mode != "shadow":
            return Reason.SIDE_EFFECTS.value
        reason = self.verdict.fail_open_reason if self.verdict is not None else None
        return reason.value if reason is not None else None

    def to_json(self) -> dict[str, Any]:
        """The CLI verdict output (camelCase keys)."""
        v = self.verdict
        data: dict[str, Any] = {
            "status": self.status,
            "reason": self.reason,
            "passed": not self.judged_fail,
            "category": str(v.category) if v is not None and v.category is not None else None,
            "feedback": v.feedback if v is not None else None,
            "costUsd": round(v.cost_usd, 8) if v is not None else 0.0,
            "mode": self.mode,
            "model": v.model if v is not None else None,
            "latencyMs": round(v.latency_ms, 2) if v is not None else 0.0,
            "decisive": v.decisive if v is not None else False,
            "suspectedInjection": list(v.suspected_injection) if v is not None else [],
            "error": v.error if v is not None else None,
            "awaitingUser": self.awaiting_user,
        }
        if v is not None and self.judged_fail:
            notice = self.done if self.on_side_effects == "notice" else ()
            data["retryMessage"] = feedback_message(
                v, heartbeat=self.heartbeat, done=notice, categories=self.categories
            )
        return data


def decide(
    verdict: Verdict | None,
    skip: SkipReason | None,
    mode: str,
    *,
    heartbeat: bool = False,
    done: tuple[ToolCallRecord, ...] = (),
    on_side_effects: str = "notice",
    categories: Mapping[str, str] | None = None,
) -> Judgement:
    """The status of one judgement under ``mode`` (``"enforce"`` or ``"shadow"``), and, for a
    FAIL after side effects (``done``), under ``on_side_effects``."""
    if skip is not None or verdict is None:
        return Judgement(SKIPPED, None, skip, mode, heartbeat, categories=dict(categories or {}))
    decided, _ = verdict_status(verdict, mode, acted=bool(done), on_side_effects=on_side_effects)
    status = FAILED if decided is None else decided.value
    return Judgement(
        status, verdict, None, mode, heartbeat, done, on_side_effects, dict(categories or {})
    )


async def judge_one(verifier: Verifier, turn: Turn, reply: Reply) -> Judgement:
    """Pre-checks, then checks and judge: one judgement, never raising for the judge's faults."""
    skip = skip_reason(reply)
    assessed = None if skip is not None else await verifier._assess(turn, reply)
    config = verifier.config.for_run_kind(turn.run_kind)
    return decide(
        assessed.verdict if assessed is not None else None,
        skip,
        config.mode,
        heartbeat=turn.heartbeat,
        done=done_calls(assessed.tool_calls) if assessed is not None else (),
        on_side_effects=config.on_side_effects,
        categories=verifier.config.categories,
    )
