"""Each verdict as an OpenTelemetry ``gen_ai.evaluation.result`` event (GenAI semantic
conventions), so dashboards that already read GenAI telemetry show replyguard's verdicts.

The event is a log record named ``gen_ai.evaluation.result`` emitted through the global
``LoggerProvider`` (``opentelemetry._logs``), parented to the span that was current when the
host started the turn (``Verifier.run``, ``stream`` or ``verify``): the host's own span for
the agent call being judged. A turn started outside any span has its events parented to
replyguard's attempt span instead. Attributes:

- ``gen_ai.evaluation.name``: ``replyguard``;
- ``gen_ai.evaluation.score.label``: ``pass`` or ``fail`` (absent when the judgement failed
  open: then ``error.type`` names why, e.g. ``judge_timeout``);
- ``gen_ai.evaluation.score.value``: 1.0 for pass, 0.0 for fail;
- ``gen_ai.evaluation.explanation``: the judge's feedback (else its reasoning), only with
  ``logContent``, like every other text about the reply;
- ``replyguard.category``, ``replyguard.judge_model``, ``replyguard.awaiting_user``,
  ``replyguard.decisive`` (a check decided, no judge was asked).
"""

from __future__ import annotations

from typing import Any

from replyguard.types import Verdict

EVENT_NAME = "gen_ai.evaluation.result"
EVALUATION_NAME = "replyguard"


def evaluation_attributes(verdict: Verdict, with_content: bool) -> dict[str, Any]:
    """The event's attributes for one verdict (None values are left out by the caller)."""
    failed_open = not verdict.readable or verdict.fail_open_reason is not None
    attributes: dict[str, Any] = {
        "gen_ai.evaluation.name": EVALUATION_NAME,
        "replyguard.category": verdict.category,
        "replyguard.judge_model": verdict.model,
        "replyguard.awaiting_user": verdict.awaiting_user,
        "replyguard.decisive": verdict.decisive,
    }
    if failed_open:
        reason = verdict.fail_open_reason
        attributes["error.type"] = reason.value if reason is not None else "unreadable_verdict"
    else:
        attributes["gen_ai.evaluation.score.label"] = "pass" if verdict.passed else "fail"
        attributes["gen_ai.evaluation.score.value"] = 1.0 if verdict.passed else 0.0
    if with_content:
        attributes["gen_ai.evaluation.explanation"] = verdict.feedback or verdict.reasoning
    return attributes
