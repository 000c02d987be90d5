"""pydantic-ai adapter: judge an ``Agent``'s output through its own retry path, or wrap its run.

Two ways in, both failing open like the core:

- ``judge_output_validator(verifier)`` is an output validator: it judges each final output and
  raises ``ModelRetry`` with the feedback on a FAIL, so pydantic-ai itself sends the feedback
  back to the model, within the agent's own output retries. On the last allowed retry a FAIL
  delivers the output as it is (an exhausted turn), instead of ending the run in an error. In
  ``"shadow"`` mode a FAIL is only logged.
- ``VerifiedAgent(agent, verifier)`` runs the agent through ``Verifier.run``: triggers,
  budgets and hooks apply, and each retry continues the conversation (``message_history``)
  with the feedback as the next user prompt. ``run`` returns a ``VerifiedRunResult`` holding the
  delivered ``AgentRunResult`` and the ``Outcome``. ``run_stream_events`` streams instead:
  each attempt is an ``Agent.run_stream`` whose text goes through ``Verifier.stream``, and
  comes out as pydantic-ai's own ``PartStartEvent`` / ``PartDeltaEvent`` (a ``TextPart``),
  with a ``Retract`` when text already shown is withdrawn, and a ``VerifiedStreamedRunResult``
  last.

    agent = Agent(model, output_validators=...)
    agent.output_validator(judge_output_validator(verifier))
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from time import monotonic
from typing import Any, Generic, TypeVar, cast

try:
    from pydantic_ai import Agent, AgentRunResult, ModelRetry, RunContext
    from pydantic_ai.messages import (
        ModelMessage,
        ModelRequest,
        ModelResponse,
        PartDeltaEvent,
        PartStartEvent,
        RetryPromptPart,
        SystemPromptPart,
        TextPart,
        TextPartDelta,
        ToolCallPart,
        ToolReturnPart,
        UserContent,
        UserPromptPart,
    )
    from pydantic_ai.result import StreamedRunResult
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "replyguard.adapters.pydantic_ai needs pydantic-ai: pip install 'replyguard[pydantic-ai]'"
    ) from exc

from replyguard.adapters._shared import (
    Attempts,
    DrivenTurn,
    PreparedRun,
    VerifiedResult,
    make_turn,
    operator_message,
    output_text,
    retry_conversation,
    retry_feedback,
    stream_turn,
    turn_defaults,
)
from replyguard.runner._policy import Ending
from replyguard.runner._verifier import Verifier
from replyguard.types import Delta, Outcome, Reply, Retract, RunMeta, ToolCallRecord

__all__ = [
    "VerifiedAgent",
    "VerifiedRunResult",
    "VerifiedStreamedRunResult",
    "judge_output_validator",
    "openai_messages",
]

DepsT = TypeVar("DepsT")
OutputT = TypeVar("OutputT")
Prompt = str | Sequence[UserContent]


def prompt_text(prompt: Prompt | None) -> str:
    """The text of a user prompt (its string parts, when it is a list of content)."""
    if prompt is None:
        return ""
    if isinstance(prompt, str):
        return prompt
    return "\n".join(part for part in prompt if isinstance(part, str))


def _request_messages(request: ModelRequest) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for part in request.parts:
        if isinstance(part, SystemPromptPart):
            out.append({"role": "system", "content": part.content})
        elif isinstance(part, UserPromptPart):
            out.append({"role": "user", "content": prompt_text(part.content)})
        elif isinstance(part, ToolReturnPart):
            content = part.model_response_str()
            out.append({"role": "tool", "tool_call_id": part.tool_call_id, "content": content})
        elif isinstance(part, RetryPromptPart) or part.part_kind == "retry-feedback":
            # Retry prompts (and pydantic-ai 2's retry feedback) reach the model as user text.
            out.append({"role": "user", "content": part.model_response()})
    return out


def _response_message(response: ModelResponse) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": response.text}
    calls = [
        {
            "id": part.tool_call_id,
            "type": "function",
            "function": {"name": part.tool_name, "arguments": part.args_as_json_str()},
        }
        for part in response.parts
        if isinstance(part, ToolCallPart)
    ]
    if calls:
        message["tool_calls"] = calls
    return message


def openai_messages(messages: Sequence[ModelMessage]) -> list[dict[str, Any]]:
    """pydantic-ai messages as OpenAI-style messages, for the judge's history."""
    out: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, ModelRequest):
            out.extend(_request_messages(message))
        else:
            out.append(_response_message(message))
    return out


def model_messages(messages: Sequence[dict[str, Any]]) -> list[ModelMessage]:
    """OpenAI-style user and assistant messages with text content as pydantic-ai messages."""
    out: list[ModelMessage] = []
    for message in messages:
        content = message.get("content")
        text = content if isinstance(content, str) else ""
        if message.get("role") == "assistant":
            out.append(ModelResponse(parts=[TextPart(text)]))
        else:
            out.append(ModelRequest(parts=[UserPromptPart(text)]))
    return out


def tool_ledger(messages: Sequence[ModelMessage]) -> tuple[ToolCallRecord, ...]:
    """The tool calls in ``messages``, each with what its return held as its result: a call
    succeeded when a successful return answered it."""
    returns = {
        part.tool_call_id: part
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    }
    return tuple(
        ToolCallRecord(
            name=part.tool_name,
            arguments=part.args,
            succeeded=part.tool_call_id in returns
            and returns[part.tool_call_id].outcome == "success",
            result=_returned(returns.get(part.tool_call_id)),
        )
        for message in messages
        if isinstance(message, ModelResponse)
        for part in message.parts
        if isinstance(part, ToolCallPart)
    )


def _returned(part: ToolReturnPart | None) -> Any:
    """What a tool return held, as JSON-ready data (None when the call was not answered)."""
    if part is None:
        return None
    content = part.content
    if isinstance(content, str | int | float | bool | list | dict) or content is None:
        return content
    return part.model_response_str()


def finish_reason(messages: Sequence[ModelMessage]) -> str | None:
    """The finish reason of the newest model response (``error``: an error report)."""
    for message in reversed(messages):
        if isinstance(message, ModelResponse):
            return message.finish_reason
    return None


def _usage(usage: object) -> dict[str, Any] | None:
    """Token counts of a run's usage (a property in pydantic-ai 2, a method before)."""
    counts = {
        name: value
        for name in ("input_tokens", "output_tokens")
        if isinstance(value := getattr(usage, name, None), int)
    }
    return counts or None


_KEPT_RUNS = 256
"""How many runs' attempts an output validator remembers (a run that ended in an error, so
never delivered, is let go once this many newer runs came)."""


def judge_output_validator(
    verifier: Verifier, **turn_fields: Any
) -> Callable[[RunContext[Any], OutputT], Awaitable[OutputT]]:
    """An output validator that judges each final output and asks for a retry on a FAIL.

    Register it with ``agent.output_validator(...)``. ``turn_fields`` are extra ``Turn`` fields
    (``rules``, ``agent_instructions``, ``agent_model``, ...). The judge sees the run's prompt,
    the conversation before this run, and the tools this run called. Every final output is
    judged while the config is ``enabled`` (triggers do not apply; pre-checks do). Each output
    of a run is decided as ``Verifier.run`` decides a reply (``runner._policy``): a retry
    ends the run's attempts when it is blank, an error report or the previous output again,
    the ``deliver`` policy picks the output an exhausted run returns, ``maxCostUsd``,
    ``maxLatencyMs`` and ``onSideEffects`` apply, and ``maxAttempts`` is capped by the
    agent's own output retries.
    """
    fields = turn_defaults(turn_fields)
    runs: dict[str, tuple[DrivenTurn, list[Any]]] = {}

    async def validate(ctx: RunContext[Any], output: OutputT) -> OutputT:
        if ctx.partial_output:
            return output
        earlier = [m for m in ctx.messages if m.run_id != ctx.run_id]
        this_run = [m for m in ctx.messages if m.run_id == ctx.run_id]
        meta = RunMeta(stop_reason=finish_reason(this_run), tool_calls=tool_ledger(this_run))
        reply = Reply(text=output_text(output), meta=meta)
        key = ctx.run_id or ""
        if key not in runs:
            turn = make_turn(prompt_text(ctx.prompt), openai_messages(earlier), fields)
            config = verifier.config.for_run_kind(turn.run_kind)
            capped = min(config.max_attempts, ctx.max_retries + 1)
            config = config.model_copy(update={"max_attempts": capped})
            runs[key] = (DrivenTurn(verifier, turn, [], monotonic(), config=config), [])
            while len(runs) > _KEPT_RUNS:
                del runs[next(iter(runs))]
        driven, outputs = runs[key]
        outputs.append(output)
        decided = await driven.step(reply)
        if isinstance(decided, str):
            raise ModelRetry(decided)
        runs.pop(key, None)
        outcome = driven.outcome(decided)
        delivered: OutputT = _delivered_output(outcome, driven.attempts, outputs, decided)
        return delivered

    return validate


def _delivered_output(
    outcome: Outcome, attempts: Sequence[Any], outputs: list[Any], ending: Ending
) -> Any:
    """The output of the delivered attempt (a text output: the delivered response, which a
    check may have repaired)."""
    index = next(
        (i for i, a in enumerate(attempts) if a.reply is ending.delivered), len(outputs) - 1
    )
    chosen = outputs[min(index, len(outputs) - 1)]
    return outcome.response if isinstance(chosen, str) else chosen


@dataclass(frozen=True)
class VerifiedRunResult(VerifiedResult[AgentRunResult[OutputT]]):
    """A verified run: the delivered attempt's ``AgentRunResult`` (its messages hold the
    earlier attempts too) and the ``Outcome``."""

    history_length: int
    """How many messages of ``all_messages()`` were given as ``message_history``."""

    @property
    def output(self) -> OutputT:
        """The delivered output (the operator's message, a ``str``, when ``onExhausted``
        delivered one instead of every attempt)."""
        said = operator_message(self.outcome)
        return cast(OutputT, said) if said is not None else self.result.output

    def all_messages(self) -> list[ModelMessage]:
        """The whole conversation up to the delivered output, for the next ``message_history``."""
        return self.result.all_messages()

    def new_messages(self) -> list[ModelMessage]:
        """The messages of this verified run: every attempt and feedback, after the history."""
        return self.all_messages()[self.history_length :]


@dataclass(frozen=True)
class VerifiedStreamedRunResult(VerifiedResult[StreamedRunResult[Any, Any] | None]):
    """The last item of ``VerifiedAgent.run_stream_events``: the ``StreamedRunResult`` of the
    delivered attempt (None if none ran to its end) and the ``Outcome``."""

    history_length: int
    """How many messages of ``all_messages()`` were given as ``message_history``."""

    @property
    def output(self) -> str:
        """The delivered text (``outcome.response``)."""
        return self.outcome.response

    def all_messages(self) -> list[ModelMessage]:
        """The conversation up to the delivered output, for the next ``message_history``. A
        withdrawn reply is not part of it."""
        return self.result.all_messages() if self.result is not None else []

    def new_messages(self) -> list[ModelMessage]:
        """The messages of this verified run, after the history."""
        return self.all_messages()[self.history_length :]


StreamedItem = PartStartEvent | PartDeltaEvent | Retract | VerifiedStreamedRunResult
"""What ``VerifiedAgent.run_stream_events`` yields."""


class VerifiedAgent(Generic[DepsT, OutputT]):
    """A pydantic-ai ``Agent`` whose ``run`` and ``run_sync`` go through ``Verifier.run``.

    ``turn_fields`` are extra ``Turn`` fields (``rules``, ``agent_instructions``, ...).
    Keyword arguments of ``run`` other than ``message_history`` go to every ``Agent.run`` call.
    """

    def __init__(
        self, agent: Agent[DepsT, OutputT], verifier: Verifier, **turn_fields: Any
    ) -> None:
        self.agent = agent
        self.verifier = verifier
        self._fields = turn_defaults(turn_fields)

    def _prepare(
        self,
        user_prompt: Prompt,
        message_history: Sequence[ModelMessage] | None,
        run_kwargs: dict[str, Any],
    ) -> PreparedRun[VerifiedRunResult[OutputT]]:
        history = list(message_history or [])
        attempts: Attempts[AgentRunResult[OutputT]] = Attempts()

        async def attempt(messages: list[dict[str, Any]]) -> Reply:
            prompt: Prompt = user_prompt
            before = history
            if attempts:
                prompt, before = retry_feedback(messages), attempts.last.all_messages()
            result = await self.agent.run(prompt, message_history=before, **run_kwargs)
            new = result.new_messages()
            meta = RunMeta(
                stop_reason=finish_reason(new),
                tool_calls=tool_ledger(new),
                usage=_usage(result.usage),
            )
            text = output_text(result.output)
            attempts.add(text, result)
            return Reply(text=text, meta=meta)

        def finish(outcome: Outcome) -> VerifiedRunResult[OutputT]:
            return VerifiedRunResult(attempts.delivered(outcome), outcome, len(history))

        turn = make_turn(prompt_text(user_prompt), openai_messages(history), self._fields)
        return PreparedRun(attempt, turn, finish)

    async def run(
        self,
        user_prompt: Prompt,
        *,
        message_history: Sequence[ModelMessage] | None = None,
        **run_kwargs: Any,
    ) -> VerifiedRunResult[OutputT]:
        """Run the agent, verify its output, retry with the feedback, deliver."""
        return await self._prepare(user_prompt, message_history, run_kwargs).run(self.verifier)

    def run_sync(
        self,
        user_prompt: Prompt,
        *,
        message_history: Sequence[ModelMessage] | None = None,
        **run_kwargs: Any,
    ) -> VerifiedRunResult[OutputT]:
        """``run`` for code without an event loop (on the verifier's ``run_sync`` loop)."""
        return self._prepare(user_prompt, message_history, run_kwargs).run_sync(self.verifier)

    async def run_stream_events(
        self,
        user_prompt: Prompt,
        *,
        message_history: Sequence[ModelMessage] | None = None,
        **run_kwargs: Any,
    ) -> AsyncGenerator[StreamedItem, None]:
        """Stream a verified run of an agent with text output, as ``Verifier.stream`` shows it.

        Each attempt is an ``Agent.run_stream`` (tools run as usual; the text of its final
        response streams). The text the user may see comes as pydantic-ai's own events: a
        ``PartStartEvent`` with a ``TextPart`` (index 0) for the first piece, then
        ``PartDeltaEvent`` with a ``TextPartDelta``. A ``Retract`` means the text shown so far
        is withdrawn: clear it; the next piece is a new ``PartStartEvent`` at index 0, which
        replaces the part, as pydantic-ai's protocol says. The last item is a
        ``VerifiedStreamedRunResult``. A retry runs on the history, the prompt, the replies the
        user did not see and the feedback (``streaming.mode`` decides what is shown). Closing
        the iterator closes the agent's run and any judge call in flight.
        """
        history = list(message_history or [])
        turn = make_turn(prompt_text(user_prompt), openai_messages(history), self._fields)
        attempts: Attempts[StreamedRunResult[Any, Any]] = Attempts()
        calls = 0

        async def attempt(messages: list[dict[str, Any]]) -> AsyncIterator[str | RunMeta]:
            nonlocal calls
            calls += 1
            prompt: Prompt = user_prompt
            before = history
            if calls > 1:
                added = retry_conversation(turn, messages)
                asked = ModelRequest(parts=[UserPromptPart(user_prompt)])
                prompt, before = (
                    retry_feedback(messages),
                    [*history, asked, *model_messages(added[:-1])],
                )
            pieces: list[str] = []
            async with self.agent.run_stream(
                prompt, message_history=before, **run_kwargs
            ) as result:
                async for piece in result.stream_text(delta=True, debounce_by=None):
                    pieces.append(piece)
                    yield piece
            attempts.add("".join(pieces), result)
            yield RunMeta(tool_calls=tool_ledger(result.new_messages()), usage=_usage(result.usage))

        showing = False
        async with aclosing(stream_turn(self.verifier, attempt, turn)) as events:
            async for event in events:
                if isinstance(event, Delta):
                    if showing:
                        yield PartDeltaEvent(index=0, delta=TextPartDelta(event.text))
                    else:
                        showing = True
                        yield PartStartEvent(index=0, part=TextPart(event.text))
                elif isinstance(event, Retract):
                    showing = False
                    yield event
                else:
                    found = attempts.find(event.outcome)
                    yield VerifiedStreamedRunResult(found, event.outcome, len(history))
