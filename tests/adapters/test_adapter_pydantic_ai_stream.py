"""``VerifiedAgent.run_stream_events``: pydantic-ai's streamed runs through ``Verifier.stream``,
driven by pydantic-ai's FunctionModel (streaming) and TestModel, with the scripted judge."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    PartDeltaEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
)
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel
from pydantic_ai.models.test import TestModel

from replyguard import Retract, Status, Verifier
from replyguard.adapters.pydantic_ai import StreamedItem, VerifiedAgent, VerifiedStreamedRunResult
from replyguard.testing import ScriptedJudge

BAD = ("Done: ", "the report.")
GOOD = ("Done: ", "the report, ", "dated 2026-01-02.")
FEEDBACK = "Add the report's date."
FAIL = f"FAIL [incomplete]: {FEEDBACK}"
RELEASE = {"mode": "release", "holdBackChars": 0}
WAIT = 5.0


def request_texts(messages: list[ModelMessage]) -> list[str]:
    return [
        str(part.content)
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(getattr(part, "content", None), str)
    ]


class Streamer:
    """A FunctionModel stream body: BAD in pieces, GOOD once the feedback reached the model."""

    def __init__(self) -> None:
        self.seen: list[list[ModelMessage]] = []
        self.__name__ = "streamer"

    async def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        self.seen.append(messages)
        improved = any(FEEDBACK in text for text in request_texts(messages))
        for piece in GOOD if improved else BAD:
            yield piece


def shown(items: list[StreamedItem]) -> str:
    """The text a UI following pydantic-ai's part protocol shows at the end."""
    text = ""
    for item in items:
        if isinstance(item, PartStartEvent):
            assert isinstance(item.part, TextPart) and item.index == 0
            text = item.part.content  # a new start at the same index replaces the part
        elif isinstance(item, PartDeltaEvent):
            assert isinstance(item.delta, TextPartDelta)
            text += item.delta.content_delta
        elif isinstance(item, Retract):
            text = ""
    return text


async def collect(verified: VerifiedAgent[Any, Any], prompt: str, **kwargs: Any) -> list[Any]:
    return [item async for item in verified.run_stream_events(prompt, **kwargs)]


async def test_a_failed_reply_is_retracted_and_the_retry_streams_in_its_place(
    make_config: Any,
) -> None:
    judge = ScriptedJudge([FAIL, "PASS"])
    streamer = Streamer()
    verifier = Verifier(make_config(verifyAll=True, streaming=RELEASE), judge=judge)
    items = await collect(
        VerifiedAgent(Agent(FunctionModel(stream_function=streamer)), verifier),
        "Write the weekly report.",
    )
    retract = next(i for i, item in enumerate(items) if isinstance(item, Retract))
    assert shown(items[:retract]) == "".join(BAD)
    assert items[retract] == Retract(1, "incomplete")
    assert isinstance(items[retract + 1], PartStartEvent)  # the retry's text starts a new part
    assert shown(items) == "".join(GOOD)
    result = items[-1]
    assert isinstance(result, VerifiedStreamedRunResult)
    assert (result.outcome.status, result.output) == (Status.PASSED, "".join(GOOD))
    # The retry saw the feedback, not the withdrawn reply; nor does the conversation keep it.
    retry_texts = request_texts(streamer.seen[1])
    assert any(FEEDBACK in text for text in retry_texts)
    assert all("".join(BAD) not in str(m) for m in streamer.seen[1])
    assert all("".join(BAD) not in str(m) for m in result.all_messages())
    assert result.all_messages()[-1].parts == [TextPart("".join(GOOD))]  # type: ignore[union-attr]
    judge.assert_exhausted()


async def test_text_reaches_the_caller_while_the_model_still_streams(make_config: Any) -> None:
    reached = asyncio.Event()

    async def slow(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        yield "Done: "
        async with asyncio.timeout(WAIT):
            await reached.wait()  # set by the caller once it has the first piece
        yield "the report."

    judge = ScriptedJudge(["PASS"])
    verifier = Verifier(make_config(verifyAll=True, streaming=RELEASE), judge=judge)
    verified = VerifiedAgent(Agent(FunctionModel(stream_function=slow)), verifier)
    items: list[Any] = []
    async for item in verified.run_stream_events("Write the weekly report."):
        items.append(item)
        if isinstance(item, PartStartEvent):
            assert judge.call_count == 0
            reached.set()
    assert shown(items) == "Done: the report."
    assert items[-1].outcome.status == Status.PASSED


async def test_buffer_mode_shows_only_the_delivered_reply(make_config: Any) -> None:
    judge = ScriptedJudge([FAIL, "PASS"])
    streamer = Streamer()
    verifier = Verifier(make_config(verifyAll=True), judge=judge)  # streaming.mode "buffer"
    items = await collect(
        VerifiedAgent(Agent(FunctionModel(stream_function=streamer)), verifier),
        "Write the weekly report.",
    )
    assert not any(isinstance(item, Retract) for item in items)
    assert shown(items) == "".join(GOOD)
    assert isinstance(items[0], PartStartEvent) and items[0].part.content.startswith("Done: ")
    # Not shown, so not withdrawn: the retry sees its earlier reply, as Verifier.run's does.
    assert "".join(BAD) in str(streamer.seen[1])


async def test_closing_the_stream_early_closes_the_models_stream(make_config: Any) -> None:
    closed = asyncio.Event()

    async def endless(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        try:
            yield "Done: "
            await asyncio.Event().wait()  # never set: only closing ends it
            yield "never"  # pragma: no cover
        finally:
            closed.set()

    judge = ScriptedJudge([])
    verifier = Verifier(make_config(verifyAll=True, streaming=RELEASE), judge=judge)
    verified = VerifiedAgent(Agent(FunctionModel(stream_function=endless)), verifier)
    async with aclosing(verified.run_stream_events("Write the weekly report.")) as items:
        async for item in items:
            assert isinstance(item, PartStartEvent)
            break
    async with asyncio.timeout(WAIT):
        await closed.wait()
    judge.assert_exhausted()


async def test_tool_calls_of_a_streamed_run_reach_the_outcome(make_config: Any) -> None:
    async def with_tool(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Any]:
        if len(messages) == 1:
            yield {0: DeltaToolCall(name="lookup", json_args="{}", tool_call_id="call-1")}
        else:
            yield "Done: "
            yield "the report."

    agent = Agent(FunctionModel(stream_function=with_tool))

    @agent.tool_plain
    def lookup() -> str:
        return "2026-01-02"

    judge = ScriptedJudge(["PASS"])
    verified = VerifiedAgent(agent, Verifier(make_config(verifyAll=True), judge=judge))
    items = await collect(verified, "Write the weekly report.")
    result = items[-1]
    assert shown(items) == "Done: the report."
    assert [call.name for call in result.outcome.attempts[0].reply.meta.tool_calls] == ["lookup"]
    assert result.outcome.attempts[0].reply.meta.tool_calls[0].succeeded


async def test_a_test_model_streams_through_unverified(make_config: Any) -> None:
    verified = VerifiedAgent(
        Agent(TestModel(custom_output_text="Hi! How can I help?")),
        Verifier(make_config(), judge=ScriptedJudge([])),  # no trigger fires
    )
    items = await collect(verified, "Hello there.")
    assert shown(items) == "Hi! How can I help?"
    assert items[-1].outcome.status == Status.NOT_TRIGGERED
