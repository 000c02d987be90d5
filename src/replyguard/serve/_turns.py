"""The two doors of the server into a verified turn, as values (the routes make HTTP of them).

``chat_turn``: ``POST /v1/chat/completions``, the upstream model as the agent of a turn that
``Verifier.run`` (or ``Verifier.stream`` in its ``"buffer"`` mode, for ``"stream": true``)
drives; the turn policy decides everything, this module only translates. ``verify_turn``:
``POST /v1/verify``, one judgement of a host's own reply (``runner._judgement.judge_one``, the
``verify`` command's), no retry.

Never worse: an upstream failure on the first attempt is the agent failing (the upstream's
status and message); anything else that goes wrong delivers the upstream's reply unchanged
(``failed_open``, ``internal_error``).
"""

from __future__ import annotations

from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

from replyguard._records import RecordError, TurnRecord, parse_record
from replyguard.errors import VerificationExhausted
from replyguard.judge._upstream import UpstreamError
from replyguard.runner._judgement import FAILED_OPEN, PASSED, SKIPPED, judge_one
from replyguard.runner._verifier import Verifier
from replyguard.serve._agent import Upstream, UpstreamTurn
from replyguard.serve._metrics import Metrics
from replyguard.serve._wire import (
    ChatRequest,
    WireError,
    completion_answer,
    error_body,
    parse_json_object,
    replyguard_object,
    tool_ledger,
    turn_of,
)
from replyguard.telemetry._events import Events, describe_error
from replyguard.types import Delta, Done, Outcome, Reason, Retract, Status

__all__ = ["Answer", "chat_turn", "verify_turn"]

INTERNAL = Reason.INTERNAL_ERROR.value


@dataclass(frozen=True)
class Answer:
    """What the client gets: a status, a JSON body, the replyguard status header, and for a
    stream the text pieces as the agent wrote them (None: answer with JSON)."""

    status: int
    body: dict[str, Any]
    guard_status: str | None = None
    pieces: list[str] | None = field(default=None)
    include_usage: bool = False
    """A streamed answer ends with the usage (``stream_options.include_usage``)."""


def _error(status: int, message: str, kind: str, param: str | None = None) -> Answer:
    return Answer(status, error_body(message, kind, param))


async def _streamed(verifier: Verifier, calls: UpstreamTurn) -> tuple[Outcome, list[str]]:
    """The turn through ``Verifier.stream``: its outcome and the deltas that spell it."""
    pieces: list[str] = []
    outcome: Outcome | None = None
    async with aclosing(verifier.stream(calls.stream_agent, calls.turn)) as events:
        async for event in events:
            if isinstance(event, Retract):
                pieces.clear()
            elif isinstance(event, Delta):
                pieces.append(event.text)
            elif isinstance(event, Done):
                outcome = event.outcome
    if outcome is None:
        raise RuntimeError("the stream ended without its outcome")
    return outcome, pieces


async def chat_turn(
    verifier: Verifier, upstream: Upstream, metrics: Metrics, request: ChatRequest
) -> Answer:
    """One ``POST /v1/chat/completions``, verified."""
    turn = turn_of(request)
    calls = UpstreamTurn(upstream, request, turn, tool_ledger(request.messages))
    pieces: list[str] | None = None
    try:
        if request.stream:
            outcome, pieces = await _streamed(verifier, calls)
        else:
            outcome = await verifier.run(calls.agent, turn)
    except VerificationExhausted as exc:
        outcome = exc.outcome
    except UpstreamError as exc:
        return _error(exc.status, exc.message, exc.kind)
    except Exception as exc:
        return _unjudged(verifier, metrics, calls, request, exc)
    delivered = calls.delivered(outcome)
    if delivered is None:  # no upstream answer was recorded: nothing to deliver
        return _unjudged(verifier, metrics, calls, request, RuntimeError("no upstream answer"))
    metrics.count_outcome(outcome)
    body = completion_answer(delivered, calls.all(), outcome, replyguard_object(outcome))
    streamed = pieces if request.stream else None
    return Answer(200, body, outcome.status.value, streamed, request.include_usage)


def _unjudged(
    verifier: Verifier,
    metrics: Metrics,
    calls: UpstreamTurn,
    request: ChatRequest,
    exc: Exception,
) -> Answer:
    """replyguard's own failure: the newest upstream answer unchanged, failing open."""
    secrets = verifier.config.secrets()
    Events(secrets).warning("serve_turn_failed", error=describe_error(exc, secrets))
    answers = calls.all()
    metrics.count(FAILED_OPEN, INTERNAL, ())
    if not answers:
        return _error(500, "replyguard could not serve the request", "server_error")
    latest = answers[-1]
    guard = {"status": FAILED_OPEN, "reason": INTERNAL, "attempts": len(answers), "verdict": None}
    outcome = Outcome(response=latest.text, status=Status.FAILED_OPEN, reason=Reason.INTERNAL_ERROR)
    body = completion_answer(latest, answers, outcome, guard)
    streamed = [latest.text] if request.stream else None
    return Answer(200, body, FAILED_OPEN, streamed, request.include_usage)


_VERIFY_KEYS = ("turn", "reply")


def _verify_record(body: bytes) -> TurnRecord:
    """The turn and reply of a ``/v1/verify`` body; ``WireError`` (400) naming the key."""
    data = parse_json_object(body)
    for key in sorted(data.keys() - set(_VERIFY_KEYS)):
        raise WireError(400, f"{key}: unknown key (known: turn, reply)", key)
    turn, reply = data.get("turn"), data.get("reply")
    if not isinstance(turn, dict):
        raise WireError(400, "turn: required, a JSON object (the Turn JSON shape)", "turn")
    if "reply" not in data:
        raise WireError(400, "reply: required, a string or a JSON object {text, meta}", "reply")
    if "reply" in turn:
        raise WireError(
            400, "turn.reply: unknown key (the reply goes beside the turn)", "turn.reply"
        )
    try:
        return parse_record(TurnRecord, {**turn, "reply": reply}, path="request")
    except RecordError as exc:
        unknown = [p for p in exc.problems if p[1].startswith("unknown key")]
        key, message = (unknown or exc.problems)[0]
        param = key if key.startswith("reply") or not key else f"turn.{key}"
        raise WireError(400, f"{param or 'turn'}: {message}", param or "turn") from None


async def verify_turn(verifier: Verifier, metrics: Metrics, body: bytes) -> Answer:
    """One ``POST /v1/verify``: the ``verify`` command's judgement of the host's reply."""
    try:
        record = _verify_record(body)
    except WireError as exc:
        return _error(exc.status, exc.message, "invalid_request_error", exc.param)
    try:
        judgement = await judge_one(verifier, record.turn(), record.agent_reply())
    except Exception as exc:
        secrets = verifier.config.secrets()
        Events(secrets).warning("serve_verify_failed", error=describe_error(exc, secrets))
        metrics.count(FAILED_OPEN, INTERNAL, ())
        unjudged: dict[str, Any] = {"status": FAILED_OPEN, "verdict": None, "category": None}
        unjudged.update(feedback=None, awaitingUser=False, reason=INTERNAL)
        return Answer(200, unjudged, FAILED_OPEN)
    verdict = judgement.verdict
    metrics.count(judgement.status, judgement.reason, (verdict,) if verdict is not None else ())
    judged = judgement.status not in (SKIPPED, FAILED_OPEN)
    data = judgement.to_json()
    answer: dict[str, Any] = {
        "status": judgement.status,
        "verdict": ("PASS" if judgement.status == PASSED else "FAIL") if judged else None,
        "category": data["category"],
        "feedback": data["feedback"],
        "awaitingUser": judgement.awaiting_user,
        "reason": judgement.reason,
    }
    if "retryMessage" in data:  # the message a host hands its agent for the retry
        answer["retryMessage"] = data["retryMessage"]
    return Answer(200, answer, judgement.status)
