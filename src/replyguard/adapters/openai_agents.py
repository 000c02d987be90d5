"""OpenAI Agents SDK adapter: a verified ``Runner.run`` and an output guardrail.

- ``VerifiedRunner(verifier)`` runs an agent through ``Verifier.run``: triggers, budgets and
  hooks apply, and each retry runs the agent again on the previous run's input list plus the
  feedback as a user message (with a ``session`` or a server-side conversation, on the feedback
  alone). ``run`` returns a ``VerifiedRunResult`` holding the delivered ``RunResult`` and the
  ``Outcome``. ``run_streamed`` streams instead, as the SDK's ``Runner.run_streamed`` does:
  each attempt is a ``Runner.run_streamed`` whose text goes through ``Verifier.stream``;
  ``stream_events()`` yields the SDK's own ``RawResponsesStreamEvent`` holding a
  ``ResponseTextDeltaEvent`` for the text the user may see, and a ``Retract`` when text
  already shown is withdrawn.
- ``judge_output_guardrail(verifier)`` is an ``OutputGuardrail``: a FAIL trips it
  (``OutputGuardrailTripwireTriggered``), with the ``Verdict`` as its ``output_info``. The
  verifier's own trouble never trips it, nor does a FAIL in ``"shadow"`` mode (only logged).

The two are alternatives: ``VerifiedRunner`` refuses an agent that carries the guardrail, which
would trip inside the run instead of a retry and judge every output twice.

    result = await VerifiedRunner(verifier).run(Agent(name="support"), "Summarise the ticket.")
    # or
    agent = Agent(name="support", output_guardrails=[judge_output_guardrail(verifier)])
    result = await Runner.run(agent, "Summarise the ticket.")
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from contextlib import aclosing
from typing import Any

try:
    from agents import (
        Agent,
        GuardrailFunctionOutput,
        OutputGuardrail,
        RawResponsesStreamEvent,
        RunContextWrapper,
        Runner,
        RunResult,
        RunResultStreaming,
        TResponseInputItem,
    )
    from openai.types.responses import ResponseTextDeltaEvent
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "replyguard.adapters.openai_agents needs the OpenAI Agents SDK: "
        "pip install 'replyguard[openai-agents]'"
    ) from exc

from replyguard.adapters._shared import (
    Attempts,
    PreparedRun,
    VerifiedResult,
    acts_on,
    judge_output,
    make_turn,
    operator_message,
    output_text,
    retry_conversation,
    retry_feedback,
    stream_turn,
    turn_defaults,
)
from replyguard.runner._verifier import Verifier
from replyguard.types import Delta, Outcome, Reply, Retract, RunMeta, ToolCallRecord, Turn

__all__ = [
    "VerifiedRunResult",
    "VerifiedRunResultStreaming",
    "VerifiedRunner",
    "judge_output_guardrail",
    "openai_messages",
]

Input = str | list[TResponseInputItem]
# Run options that keep the conversation on the server or in a session: a retry then sends the
# feedback alone.
_STATEFUL = ("session", "conversation_id", "previous_response_id", "auto_previous_response_id")


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def openai_messages(items: Sequence[Any]) -> list[dict[str, Any]]:
    """Agents SDK input items as OpenAI-style messages, for the judge's history."""
    out: list[dict[str, Any]] = []
    for item in items:
        kind, role = item.get("type"), item.get("role")
        if role in ("user", "assistant", "system", "developer"):
            out.append({"role": role, "content": _text(item.get("content"))})
        elif kind == "function_call":
            call = {"name": item.get("name"), "arguments": item.get("arguments")}
            tool_calls = [{"id": item.get("call_id"), "type": "function", "function": call}]
            out.append({"role": "assistant", "content": None, "tool_calls": tool_calls})
        elif kind == "function_call_output":
            output = item.get("output")
            content = output if isinstance(output, str) else _text(output)
            out.append({"role": "tool", "tool_call_id": item.get("call_id"), "content": content})
    return out


def tool_ledger(items: Sequence[Any]) -> tuple[ToolCallRecord, ...]:
    """The function calls among ``items``, each with its output as its result: a call
    succeeded when an output answered it."""
    outputs = {
        i.get("call_id"): i.get("output") for i in items if i.get("type") == "function_call_output"
    }
    return tuple(
        ToolCallRecord(
            name=str(i.get("name")),
            arguments=i.get("arguments"),
            succeeded=i.get("call_id") in outputs,
            result=outputs.get(i.get("call_id")),
        )
        for i in items
        if i.get("type") == "function_call"
    )


def after_last_user(items: Sequence[Any]) -> list[Any]:
    """The items after the last user message (all of them when there is none): this turn's."""
    for index in range(len(items) - 1, -1, -1):
        if items[index].get("role") == "user":
            return list(items[index + 1 :])
    return list(items)


def split_input(items: Sequence[Any]) -> tuple[str, list[dict[str, Any]]]:
    """The last user message's text and the messages before it."""
    messages = openai_messages(items)
    for index in range(len(messages) - 1, -1, -1):
        if messages[index]["role"] == "user":
            return messages[index]["content"], messages[:index]
    return "", messages


def _items(value: Input) -> list[Any]:
    return [{"role": "user", "content": value}] if isinstance(value, str) else list(value)


def _turn(agent: Agent[Any], items: Sequence[Any], fields: dict[str, Any]) -> Turn:
    """The turn of a run: its last user message, the input before it, the instructions."""
    user_message, history = split_input(items)
    extra = dict(fields)
    if isinstance(agent.instructions, str):
        extra.setdefault("agent_instructions", agent.instructions)
    return make_turn(user_message, history, extra)


class JudgeGuardrail(OutputGuardrail[Any]):
    """The output guardrail ``judge_output_guardrail`` makes."""


def judge_guardrails(agent: Agent[Any], run_kwargs: dict[str, Any]) -> list[str]:
    """The names of the agents (or the run config) that carry a ``JudgeGuardrail``.

    The agent is looked at with every ``Agent`` in its handoffs, and theirs (a ``Handoff``
    object names its agent only when invoked, so it is not looked into).
    """
    found: list[str] = []
    run_config = run_kwargs.get("run_config")
    if any(isinstance(g, JudgeGuardrail) for g in getattr(run_config, "output_guardrails", [])):
        found.append("run_config")
    pending, seen = [agent], set()
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if any(isinstance(g, JudgeGuardrail) for g in current.output_guardrails):
            found.append(f"agent {current.name!r}")
        pending.extend(h for h in current.handoffs if isinstance(h, Agent))
    return found


def judge_output_guardrail(
    verifier: Verifier, *, name: str = "replyguard", **turn_fields: Any
) -> OutputGuardrail[Any]:
    """An output guardrail tripped by the judge's FAIL, with the ``Verdict`` as ``output_info``.

    The judge sees the run's last user message, the input before it, the agent's instructions
    when they are a string, and the tool calls among the input items after the last user
    message. The SDK does not show an output guardrail the tool calls of the run itself, so a
    ``claims`` check cannot see them: run the agent through ``VerifiedRunner`` for that.
    ``turn_fields`` are extra ``Turn`` fields. Every final output is judged while the config
    is ``enabled`` (triggers do not apply; pre-checks do); ``output_info`` is None when nothing
    was judged.
    """
    fields = turn_defaults(turn_fields)

    async def guard(
        context: RunContextWrapper[Any], agent: Agent[Any], output: Any
    ) -> GuardrailFunctionOutput:
        turn = _turn(agent, context.turn_input, fields)
        meta = RunMeta(tool_calls=tool_ledger(after_last_user(context.turn_input)))
        assessed = await judge_output(verifier, turn, Reply(text=output_text(output), meta=meta))
        tripped = acts_on(verifier, turn, assessed)
        verdict = assessed.verdict if assessed is not None else None
        return GuardrailFunctionOutput(output_info=verdict, tripwire_triggered=tripped)

    return JudgeGuardrail(guardrail_function=guard, name=name)


class VerifiedRunResult(VerifiedResult[RunResult]):
    """A verified run: the delivered attempt's ``RunResult`` and the ``Outcome``."""

    @property
    def final_output(self) -> Any:
        """The delivered run's final output (the operator's message when ``onExhausted``
        delivered one instead of every attempt)."""
        said = operator_message(self.outcome)
        return said if said is not None else self.result.final_output

    def to_input_list(self) -> list[TResponseInputItem]:
        """The conversation up to the delivered output, as input for the next run."""
        return self.result.to_input_list()


def _run_meta(result: RunResult | RunResultStreaming) -> RunMeta:
    """The tools a run called and its token usage."""
    usage = result.context_wrapper.usage
    return RunMeta(
        tool_calls=tool_ledger([item.to_input_item() for item in result.new_items]),
        usage={"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens},
    )


def _text_event(text: str, item_id: str, sequence: int) -> RawResponsesStreamEvent:
    """``text`` as the SDK streams text: a raw ``response.output_text.delta`` event."""
    delta = ResponseTextDeltaEvent(
        type="response.output_text.delta",
        item_id=item_id,
        output_index=0,
        content_index=0,
        delta=text,
        logprobs=[],
        sequence_number=sequence,
    )
    return RawResponsesStreamEvent(data=delta)


class VerifiedRunResultStreaming:
    """A verified streamed run, as ``VerifiedRunner.run_streamed`` returns it: iterate
    ``stream_events()``; once it ends, ``outcome``, ``result`` and ``final_output`` are set.

    The text comes as ``RawResponsesStreamEvent`` events holding a ``ResponseTextDeltaEvent``;
    its ``item_id`` changes after each ``Retract``, which says the text shown so far is
    withdrawn: clear it, the events that follow replace it. Only text is streamed (the SDK's
    other events of each attempt stay inside it); a run whose model writes text before calling
    a tool streams that text too.
    """

    def __init__(
        self, events: AsyncGenerator[RawResponsesStreamEvent | Retract | Outcome, None]
    ) -> None:
        self._events = events
        self.outcome: Outcome | None = None
        """What the verifier decided; set when the stream has ended."""
        self.result: RunResultStreaming | None = None
        """The SDK's result of the delivered attempt (None if none ran to its end)."""

    @property
    def final_output(self) -> Any:
        """The delivered run's final output (the delivered text when no attempt ended)."""
        if (
            self.result is not None
            and self.outcome is not None
            and output_text(self.result.final_output) == self.outcome.response
        ):
            return self.result.final_output
        return self.outcome.response if self.outcome is not None else None

    @property
    def response(self) -> str | None:
        """The delivered text, once the stream has ended."""
        return self.outcome.response if self.outcome is not None else None

    def to_input_list(self) -> list[TResponseInputItem]:
        """The conversation up to the delivered output, as input for the next run."""
        if self.result is None:
            raise RuntimeError("no attempt of this run ended: there is no input list")
        return self.result.to_input_list()

    async def stream_events(self) -> AsyncGenerator[RawResponsesStreamEvent | Retract, None]:
        """The text events and retractions, as they come. Stopping early (``aclose``, or
        cancelling the consumer) cancels the attempt's run and any judge call in flight."""
        async with aclosing(self._events) as events:
            async for event in events:
                if isinstance(event, Outcome):
                    self.outcome = event
                else:
                    yield event


class VerifiedRunner:
    """``Runner.run`` and ``Runner.run_sync`` through ``Verifier.run``.

    ``turn_fields`` are extra ``Turn`` fields (``rules``, ``agent_instructions``, ...). Keyword
    arguments of ``run`` go to every ``Runner.run`` call. An agent (or ``run_config``) carrying
    ``judge_output_guardrail`` is refused with a ``ValueError``: the runner judges the output
    itself, and the guardrail would trip inside the run instead of a retry.
    """

    def __init__(self, verifier: Verifier, **turn_fields: Any) -> None:
        self.verifier = verifier
        self._fields = turn_defaults(turn_fields)

    def _prepare(
        self, agent: Agent[Any], input: Input, run_kwargs: dict[str, Any]
    ) -> PreparedRun[VerifiedRunResult]:
        carriers = judge_guardrails(agent, run_kwargs)
        if carriers:
            raise ValueError(
                f"{', '.join(carriers)} carries judge_output_guardrail: VerifiedRunner judges "
                "the output itself (a FAIL is retried), so use one or the other, not both"
            )
        attempts: Attempts[RunResult] = Attempts()
        stateful = any(run_kwargs.get(key) for key in _STATEFUL)

        async def attempt(messages: list[dict[str, Any]]) -> Reply:
            run_input, options = input, dict(run_kwargs)
            if attempts:
                last, feedback = attempts.last, retry_feedback(messages)
                if stateful:
                    run_input = feedback
                    if options.get("previous_response_id") or options.get(
                        "auto_previous_response_id"
                    ):
                        options["previous_response_id"] = last.last_response_id
                else:
                    run_input = [*last.to_input_list(), {"role": "user", "content": feedback}]
            result = await Runner.run(agent, run_input, **options)
            text = output_text(result.final_output)
            attempts.add(text, result)
            return Reply(text=text, meta=_run_meta(result))

        def finish(outcome: Outcome) -> VerifiedRunResult:
            return VerifiedRunResult(attempts.delivered(outcome), outcome)

        return PreparedRun(attempt, _turn(agent, _items(input), self._fields), finish)

    async def run(self, agent: Agent[Any], input: Input, **run_kwargs: Any) -> VerifiedRunResult:
        """Run the agent, verify its final output, retry with the feedback, deliver."""
        return await self._prepare(agent, input, run_kwargs).run(self.verifier)

    def run_sync(self, agent: Agent[Any], input: Input, **run_kwargs: Any) -> VerifiedRunResult:
        """``run`` for code without an event loop (on the verifier's ``run_sync`` loop)."""
        return self._prepare(agent, input, run_kwargs).run_sync(self.verifier)

    def run_streamed(
        self, agent: Agent[Any], input: Input, **run_kwargs: Any
    ) -> VerifiedRunResultStreaming:
        """Run the agent streamed, through ``Verifier.stream``; iterate the result's
        ``stream_events()``.

        A retry runs on the input, the replies the user was not shown, and the feedback.
        Options that keep the conversation elsewhere (``session``, ``conversation_id``,
        ``previous_response_id``, ``auto_previous_response_id``) are refused with a
        ``ValueError``: a withdrawn reply would stay in that conversation.
        """
        stored = sorted(key for key in _STATEFUL if run_kwargs.get(key))
        if stored:
            raise ValueError(
                f"run_streamed keeps no conversation elsewhere ({', '.join(stored)}): a reply "
                "withdrawn from the user would stay in it; use run, or pass the input list"
            )
        carriers = judge_guardrails(agent, run_kwargs)
        if carriers:
            raise ValueError(
                f"{', '.join(carriers)} carries judge_output_guardrail: VerifiedRunner judges "
                "the output itself (a FAIL is retried), so use one or the other, not both"
            )
        items = _items(input)
        turn = _turn(agent, items, self._fields)
        attempts: Attempts[RunResultStreaming] = Attempts()
        calls = 0

        async def attempt(messages: list[dict[str, Any]]) -> AsyncIterator[str | RunMeta]:
            nonlocal calls
            calls += 1
            run_input: Input = input
            if calls > 1:
                added = retry_conversation(turn, messages)
                said: list[Any] = [{"role": m["role"], "content": m["content"]} for m in added]
                run_input = [*items, *said]
            result = Runner.run_streamed(agent, run_input, **run_kwargs)
            pieces: list[str] = []
            events = result.stream_events()
            ended = False
            try:
                async for event in events:
                    if event.type == "raw_response_event" and isinstance(
                        event.data, ResponseTextDeltaEvent
                    ):
                        pieces.append(event.data.delta)
                        yield event.data.delta
                ended = True
            finally:
                if not ended:
                    # Cancelled first: closing the events of a run still going waits for it.
                    result.cancel()  # the model's stream and the run's tasks with it
                # stream_events is an async generator, though typed as an AsyncIterator.
                await events.aclose()  # type: ignore[attr-defined]
            attempts.add("".join(pieces), result)
            yield _run_meta(result)

        async def events() -> AsyncGenerator[RawResponsesStreamEvent | Retract | Outcome, None]:
            shown, sequence = 0, 0
            async with aclosing(stream_turn(self.verifier, attempt, turn)) as verified:
                async for event in verified:
                    if isinstance(event, Delta):
                        sequence += 1
                        yield _text_event(event.text, f"replyguard-{shown}", sequence)
                    elif isinstance(event, Retract):
                        shown += 1
                        yield event
                    else:
                        found = attempts.find(event.outcome)
                        streamed.result = found
                        yield event.outcome

        streamed = VerifiedRunResultStreaming(events())
        return streamed
