"""LangChain 1.x agent middleware: the agent's final reply judged in its after-model hook.

``ReplyguardMiddleware(verifier)`` goes in ``create_agent(..., middleware=[...])``. After each
model call that ends the agent's turn (an ``AIMessage`` without tool calls) it judges the reply
(checks and judge, as ``Verifier.verify``). On a FAIL it adds the feedback as a human message
and jumps back to the model, up to ``maxAttempts`` replies in all; the retry sees every earlier
reply and feedback, as they stay in the agent's messages. Each reply is decided as
``Verifier.run`` decides it (``runner._policy``, through ``adapters._shared.DrivenTurn``): it
delivers on a PASS, when the attempts run out (``exhausted``, the reply the ``deliver`` policy
picks), when a retry is blank, an error report or the previous reply again, when the model
fails on a retry (the previous reply, ``failed_open``), and whenever the verification itself
goes wrong (``failed_open``). The turn's ``Outcome``
(JSON, as ``Outcome.model_dump(mode="json")``) travels on the final message's
``response_metadata["replyguard"]``.

What it honours of the config: ``enabled``, ``mode`` (``"shadow"``: a FAIL is only flagged),
``maxAttempts``, ``deliver``, ``onExhausted`` (``"raise"`` raises ``VerificationExhausted``
from the agent's ``invoke``), ``maxCostUsd`` (the judge's spend: LangChain reports no cost per
reply), ``maxLatencyMs`` (from the agent's start; it bounds the judge call too),
``onSideEffects``, ``sideEffectTools``, the run kind's profile and the pre-checks. Triggers,
sampling, hooks and the ledger belong to ``Verifier.run``, which drives an agent itself: use
``VerifiedRunnable`` for those. A feedback message carries an id starting with
``replyguard-feedback-``; the judge sees the turn's user message (the last human message that
is not feedback), the messages before it as history, and the tools the turn called.

    agent = create_agent(model, tools, middleware=[ReplyguardMiddleware(verifier)])
    state = await agent.ainvoke({"messages": [HumanMessage("Summarise the ticket.")]})
    outcome = state["messages"][-1].response_metadata["replyguard"]
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Annotated, Any, NotRequired

try:
    from langchain.agents.middleware import AgentMiddleware, AgentState, hook_config
    from langchain.agents.middleware.types import ModelRequest, ModelResponse, PrivateStateAttr
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

from replyguard.adapters._shared import DrivenTurn, call_blocking, make_turn, turn_defaults
from replyguard.adapters.langchain import METADATA_KEY, reply_of, with_outcome
from replyguard.errors import VerificationExhausted
from replyguard.runner._policy import Ending, raises
from replyguard.runner._verifier import Verifier
from replyguard.types import (
    Attempt,
    Reply,
    ToolCallRecord,
    Turn,
)

__all__ = ["FEEDBACK_ID_PREFIX", "METADATA_KEY", "ReplyguardMiddleware", "ReplyguardState"]

FEEDBACK_ID_PREFIX = "replyguard-feedback-"
"""The start of the id of every feedback message the middleware adds."""


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
    """The tool calls in ``messages``, each with its tool message's content as its result; a
    call succeeded unless its tool message is an error."""
    answers = {m.tool_call_id: m for m in messages if isinstance(m, ToolMessage)}

    def record(call: Any) -> ToolCallRecord:
        answer = answers.get(call["id"])
        return ToolCallRecord(
            name=call["name"],
            arguments=call["args"],
            succeeded=answer is None or answer.status != "error",
            result=None if answer is None else answer.content,
        )

    return tuple(
        record(call)
        for message in messages
        if isinstance(message, AIMessage)
        for call in message.tool_calls
    )


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
        if (
            not isinstance(last, AIMessage)
            or last.tool_calls
            or METADATA_KEY in last.response_metadata
        ):
            return None  # a tool step, nothing to judge, or a turn already decided: it ends
        judging = self._judging(state, last)
        start = _turn_start(messages)
        own = reply_of(last)
        ledger = tool_ledger(messages[start + 1 :])
        reply = own.model_copy(update={"meta": own.meta.model_copy(update={"tool_calls": ledger})})
        return await judging.step(reply)

    def wrap_model_call(
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], ModelResponse[Any]]
    ) -> ModelResponse[Any] | AIMessage:
        """A model error on a retry delivers the previous reply (``failed_open``,
        ``agent_error``), as ``Verifier.run`` does; on the first call it is the caller's."""
        try:
            return handler(request)
        except Exception as exc:
            return self._retry_failed(request, exc)

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any] | AIMessage:
        """``wrap_model_call`` for ``ainvoke``."""
        try:
            return await handler(request)
        except Exception as exc:
            return self._retry_failed(request, exc)

    def _retry_failed(self, request: ModelRequest[Any], exc: Exception) -> AIMessage:
        state: Any = request.state
        record = state.get("replyguard_turn")
        if not record or not record["attempts"]:
            raise exc  # the first call: the caller's own error
        last = next(m for m in reversed(state["messages"]) if isinstance(m, AIMessage))
        return self._judging(state, last).retry_failed(exc)

    def _judging(self, state: Any, last: AIMessage) -> _Judging:
        """The turn so far, from the agent's state."""
        messages = state["messages"]
        record = state.get("replyguard_turn") or {"started": time.monotonic(), "attempts": []}
        start = _turn_start(messages)
        before = messages[:start] if start >= 0 else messages[:-1]
        text = str(messages[start].text) if start >= 0 else ""
        turn = make_turn(text, convert_to_openai_messages(before), self._fields)
        return _Judging(self.verifier, turn, record, last)


class _Judging:
    """One after-model decision (a ``DrivenTurn``): the turn so far, the newest reply, what
    happens next."""

    def __init__(
        self, verifier: Verifier, turn: Turn, record: dict[str, Any], last: AIMessage
    ) -> None:
        attempts = [Attempt.model_validate(a) for a in record["attempts"]]
        self.turn = DrivenTurn(verifier, turn, attempts, float(record["started"]))
        self.last = last

    def record(self) -> dict[str, Any]:
        attempts = [a.model_dump(mode="json") for a in self.turn.attempts]
        return {"started": self.turn.started, "attempts": attempts}

    async def step(self, reply: Reply) -> dict[str, Any]:
        decided = await self.turn.step(reply)
        if isinstance(decided, Ending):
            return self.finish(decided)
        feedback = HumanMessage(decided, id=FEEDBACK_ID_PREFIX + uuid.uuid4().hex)
        return {"messages": [feedback], "jump_to": "model", "replyguard_turn": self.record()}

    def retry_failed(self, exc: Exception) -> AIMessage:
        """The final message when the model fails on a retry: the previous reply."""
        outcome = self.turn.outcome(self.turn.retry_failed(exc))
        return AIMessage(
            outcome.response, response_metadata={METADATA_KEY: outcome.model_dump(mode="json")}
        )

    def finish(self, ending: Ending) -> dict[str, Any]:
        outcome = self.turn.outcome(ending)
        if raises(self.turn.config, outcome):
            raise VerificationExhausted(outcome, ending.delivered)
        final = with_outcome(self.last, outcome)
        if outcome.response != reply_of(self.last).text:
            final = final.model_copy(update={"content": outcome.response})
        return {"messages": [final], "replyguard_turn": self.record()}
