"""LangChain 1.x agent middleware: the agent's final reply judged in its after-model hook.

``ReplyguardMiddleware(verifier)`` goes in ``create_agent(..., middleware=[...])``. After each
model call that ends the agent's turn (an ``AIMessage`` without tool calls) it judges the reply
(checks and judge, as ``Verifier.verify``). On a FAIL it adds the feedback as a human message
and jumps back to the model, up to ``maxAttempts`` replies in all; the retry sees every earlier
reply and feedback, as they stay in the agent's messages. It delivers on a PASS, when the
attempts run out (``exhausted``, the reply the ``deliver`` policy picks), and whenever the
verification itself goes wrong (``failed_open``, the reply as it is). The turn's ``Outcome``
(JSON, as ``Outcome.model_dump(mode="json")``) travels on the final message's
``response_metadata["replyguard"]``.

What it honours of the config: ``enabled``, ``mode`` (``"shadow"``: a FAIL is only flagged),
``maxAttempts``, ``deliver``, ``onExhausted`` (``"raise"`` raises ``VerificationExhausted``
from the agent's ``invoke``), ``maxCostUsd``, ``maxLatencyMs`` (from the agent's start), the
run kind's profile and the pre-checks. Triggers, sampling, hooks and the ledger belong to
``Verifier.run``, which drives an agent itself: use ``VerifiedRunnable`` for those. A feedback
message carries an id starting with ``replyguard-feedback-``; the judge sees the turn's user
message (the last human message that is not feedback), the messages before it as history, and
the tools the turn called.

    agent = create_agent(model, tools, middleware=[ReplyguardMiddleware(verifier)])
    state = await agent.ainvoke({"messages": [HumanMessage("Summarise the ticket.")]})
    outcome = state["messages"][-1].response_metadata["replyguard"]
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Sequence
from typing import Annotated, Any, NotRequired

try:
    from langchain.agents.middleware import AgentMiddleware, AgentState, hook_config
    from langchain.agents.middleware.types import PrivateStateAttr
    from langchain_core.messages import (
        AIMessage,
        AnyMessage,
        HumanMessage,
        ToolMessage,
        convert_to_openai_messages,
    )
    from langgraph.channels.untracked_value import UntrackedValue
    from langgraph.runtime import Runtime
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "replyguard.adapters.langchain_agents needs langchain 1.x: "
        "pip install 'replyguard[langchain-agents]'"
    ) from exc

from replyguard.adapters._shared import call_blocking, make_turn, turn_defaults
from replyguard.adapters.langchain import METADATA_KEY, reply_of, with_outcome
from replyguard.errors import VerificationExhausted
from replyguard.gate._prechecks import skip_reason
from replyguard.runner._feedback import feedback_message
from replyguard.runner._verifier import Verifier
from replyguard.telemetry._events import Events, describe_error
from replyguard.types import (
    Attempt,
    Outcome,
    Reason,
    Reply,
    SkipReason,
    Status,
    ToolCallRecord,
    Turn,
    Verdict,
)

__all__ = ["FEEDBACK_ID_PREFIX", "METADATA_KEY", "ReplyguardMiddleware", "ReplyguardState"]

FEEDBACK_ID_PREFIX = "replyguard-feedback-"
"""The start of the id of every feedback message the middleware adds."""

_LEVELS = {
    Status.EXHAUSTED: logging.WARNING,
    Status.FAILED_OPEN: logging.WARNING,
    Status.PASSED: logging.INFO,
    Status.FLAGGED: logging.INFO,
}


class ReplyguardState(AgentState[Any]):
    """The agent's state with the middleware's own (private, not checkpointed) turn record."""

    replyguard_turn: NotRequired[Annotated[dict[str, Any], UntrackedValue, PrivateStateAttr]]
    """``{"started": monotonic seconds, "attempts": [Attempt as JSON, ...]}`` of this run."""


def is_feedback(message: AnyMessage) -> bool:
    """Whether ``message`` is a feedback message the middleware added."""
    return isinstance(message, HumanMessage) and str(message.id or "").startswith(
        FEEDBACK_ID_PREFIX
    )


def _turn_start(messages: Sequence[AnyMessage]) -> int:
    """The index of the turn's user message (the last human message that is not feedback)."""
    for index in range(len(messages) - 1, -1, -1):
        if isinstance(messages[index], HumanMessage) and not is_feedback(messages[index]):
            return index
    return -1


def tool_ledger(messages: Sequence[AnyMessage]) -> tuple[ToolCallRecord, ...]:
    """The tool calls in ``messages``; a call succeeded unless its tool message is an error."""
    failed = {
        m.tool_call_id for m in messages if isinstance(m, ToolMessage) and m.status == "error"
    }
    return tuple(
        ToolCallRecord(
            name=call["name"], arguments=call["args"], succeeded=call["id"] not in failed
        )
        for message in messages
        if isinstance(message, AIMessage)
        for call in message.tool_calls
    )


def _same_fail(before: Verdict | None, now: Verdict) -> bool:
    """The same category failed again with the same feedback: another retry will not help."""
    if before is None or before.passed or now.passed or before.category != now.category:
        return False
    return " ".join((before.feedback or "").split()) == " ".join((now.feedback or "").split())


def _check_failed(verdict: Verdict) -> bool:
    """A deterministic FAIL (a check's, or the injection rule's), not the judge's."""
    return not verdict.passed and verdict.decisive


class ReplyguardMiddleware(AgentMiddleware[ReplyguardState, Any, Any]):
    """Judges the agent's final reply after the model call; retries with the feedback.

    ``turn_fields`` are extra ``Turn`` fields (``rules``, ``agent_instructions``,
    ``run_kind``, ...).
    """

    state_schema = ReplyguardState

    def __init__(self, verifier: Verifier, **turn_fields: Any) -> None:
        super().__init__()
        self.verifier = verifier
        self._fields = turn_defaults(turn_fields)

    # -- hooks --------------------------------------------------------------------------------

    def before_agent(self, state: ReplyguardState, runtime: Runtime[Any]) -> dict[str, Any]:
        """Start the turn's record."""
        return {"replyguard_turn": {"started": time.monotonic(), "attempts": []}}

    async def abefore_agent(self, state: ReplyguardState, runtime: Runtime[Any]) -> dict[str, Any]:
        """Start the turn's record."""
        return self.before_agent(state, runtime)

    @hook_config(can_jump_to=["model"])
    def after_model(self, state: ReplyguardState, runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Judge a final reply on the verifier's ``run_sync`` loop (see ``aafter_model``)."""
        return call_blocking(self.verifier, lambda: self.aafter_model(state, runtime))

    @hook_config(can_jump_to=["model"])
    async def aafter_model(
        self, state: ReplyguardState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Judge a final reply: deliver it with its ``Outcome``, or jump back to the model."""
        messages = state["messages"]
        last = messages[-1] if messages else None
        if not isinstance(last, AIMessage) or last.tool_calls:
            return None  # a tool step, or nothing to judge: the agent goes on
        record = state.get("replyguard_turn") or {"started": time.monotonic(), "attempts": []}
        start = _turn_start(messages)
        before = messages[:start] if start >= 0 else messages[:-1]
        text = str(messages[start].text) if start >= 0 else ""
        turn = make_turn(text, convert_to_openai_messages(before), self._fields)
        own = reply_of(last)
        ledger = tool_ledger(messages[start + 1 :])
        reply = own.model_copy(update={"meta": own.meta.model_copy(update={"tool_calls": ledger})})
        return await _Judging(self.verifier, turn, record, last).step(reply)


class _Judging:
    """One after-model decision: the turn so far, the newest reply, what happens next."""

    def __init__(
        self, verifier: Verifier, turn: Turn, record: dict[str, Any], last: AIMessage
    ) -> None:
        self.verifier = verifier
        self.turn = turn
        self.config = verifier.config.for_run_kind(turn.run_kind)
        self.started = float(record["started"])
        self.attempts = [Attempt.model_validate(a) for a in record["attempts"]]
        self.last = last
        self.events = Events(self.config.secrets())

    def record(self) -> dict[str, Any]:
        attempts = [a.model_dump(mode="json") for a in self.attempts]
        return {"started": self.started, "attempts": attempts}

    async def step(self, reply: Reply) -> dict[str, Any]:
        number = len(self.attempts) + 1
        if not self.verifier.config.enabled:
            self.attempts.append(Attempt(number=number, reply=reply))
            return self.finish(Status.DISABLED, reply)
        skip = skip_reason(reply)
        if skip is not None:
            self.attempts.append(Attempt(number=number, reply=reply, skip_reason=skip))
            return self.finish(Status.SKIPPED, reply, skip=skip)
        budget = self.config.max_latency_ms
        if budget is not None and (time.monotonic() - self.started) * 1000 > budget:
            self.attempts.append(Attempt(number=number, reply=reply))
            return self.finish(Status.FAILED_OPEN, self.delivery(reply), Reason.LATENCY_BUDGET)
        verdict = await self.verify(reply)
        previous = self.attempts[-1].verdict if self.attempts else None
        self.attempts.append(Attempt(number=number, reply=reply, verdict=verdict))
        if verdict.fail_open_reason is not None:
            return self.finish(Status.FAILED_OPEN, reply, verdict.fail_open_reason)
        if verdict.passed:
            return self.finish(Status.PASSED, reply)
        if self.config.mode == "shadow":
            return self.finish(Status.FLAGGED, reply)
        if _same_fail(previous, verdict):
            return self.finish(Status.EXHAUSTED, self.delivery(reply), Reason.STAGNANT)
        if number >= self.config.max_attempts:
            return self.finish(Status.EXHAUSTED, self.delivery(reply))
        ceiling = self.config.max_cost_usd
        if ceiling is not None and self.judge_cost() + verdict.cost_usd > ceiling:
            return self.finish(Status.FAILED_OPEN, self.delivery(reply), Reason.COST_BUDGET)
        self.events.info("retry", turn_id=self.turn.id, attempt=number + 1)
        message = feedback_message(verdict, categories=self.config.categories)
        feedback = HumanMessage(message, id=FEEDBACK_ID_PREFIX + uuid.uuid4().hex)
        return {"messages": [feedback], "jump_to": "model", "replyguard_turn": self.record()}

    async def verify(self, reply: Reply) -> Verdict:
        """The verdict on ``reply``; the verifier's own trouble is a fail-open verdict."""
        try:
            return await self.verifier.verify(self.turn, reply)
        except Exception as exc:
            error = describe_error(exc, self.config.secrets())
            self.events.warning("middleware_verify_failed", error=error)
            return Verdict(
                passed=True, readable=False, fail_open_reason=Reason.INTERNAL_ERROR, error=error
            )

    def judge_cost(self) -> float:
        return sum(a.verdict.cost_usd for a in self.attempts if a.verdict is not None)

    def delivery(self, latest: Reply) -> Reply:
        """What a turn out of attempts, money or time delivers, per the ``deliver`` policy."""
        policy = self.config.deliver
        if policy == "first" and self.attempts:
            return self.attempts[0].reply
        if policy == "best":
            # As the runner: the newest judged reply no deterministic check failed.
            clean = [
                a for a in self.attempts if a.verdict is not None and not _check_failed(a.verdict)
            ]
            if clean:
                return clean[-1].reply
        return latest

    def finish(
        self,
        status: Status,
        delivered: Reply,
        reason: Reason | None = None,
        skip: SkipReason | None = None,
    ) -> dict[str, Any]:
        cost = self.judge_cost()
        outcome = Outcome(
            response=delivered.text,
            status=status,
            reason=reason,
            attempts=tuple(self.attempts),
            skip_reason=skip,
            cost_usd=cost,
            judge_cost_usd=cost,
            latency_ms=(time.monotonic() - self.started) * 1000,
        )
        level = _LEVELS.get(status, logging.DEBUG)
        if self.events.enabled(level):
            self.events.emit(
                level,
                str(status),
                turn_id=self.turn.id,
                reason=reason,
                skip_reason=skip,
                attempts=len(self.attempts),
                cost_usd=cost,
            )
        if status == Status.EXHAUSTED and self.config.on_exhausted == "raise":
            raise VerificationExhausted(outcome, delivered)
        final = with_outcome(self.last, outcome)
        if delivered.text != reply_of(self.last).text:
            final = final.model_copy(update={"content": delivered.text})
        return {"messages": [final], "replyguard_turn": self.record()}
