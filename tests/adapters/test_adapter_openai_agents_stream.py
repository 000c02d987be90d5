"""``VerifiedRunner.run_streamed``: the OpenAI Agents SDK's streamed runs through
``Verifier.stream``. The agent's model is the SDK's own chat-completions model, streaming from the
loopback provider server (OpenAI's chunk format); the judge is the scripted judge."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

import pytest
from agents import (
    Agent,
    OpenAIChatCompletionsModel,
    RawResponsesStreamEvent,
    SQLiteSession,
    set_tracing_disabled,
)
from openai import AsyncOpenAI
from openai.types.responses import ResponseTextDeltaEvent

from conftest import API_KEY
from replyguard import Retract, Status, Verifier
from replyguard.adapters.openai_agents import VerifiedRunner, VerifiedRunResultStreaming
from replyguard.testing import ScriptedJudge
from support.provider_server import ProviderServer, Seen, Step

set_tracing_disabled(True)

BAD = ("Done: ", "the report.")
GOOD = ("Done: ", "the report, ", "dated 2026-01-02.")
FEEDBACK = "Add the report's date."
FAIL = f"FAIL [incomplete]: {FEEDBACK}"
RELEASE = {"mode": "release", "holdBackChars": 0}
WAIT = 5.0


def answer(seen: Seen) -> Step:
    """BAD in pieces until the judge's feedback reaches the model, GOOD after."""
    return Step(chunks=GOOD if FEEDBACK in seen.prompt else BAD)


@pytest.fixture
async def model(provider: ProviderServer) -> AsyncIterator[OpenAIChatCompletionsModel]:
    async with AsyncOpenAI(base_url=provider.url, api_key=API_KEY, max_retries=0) as client:
        yield OpenAIChatCompletionsModel("gpt-4o", client)


def text_of(event: Any) -> str:
    assert isinstance(event, RawResponsesStreamEvent)
    assert isinstance(event.data, ResponseTextDeltaEvent)
    return event.data.delta


def shown(events: list[Any]) -> str:
    text = ""
    for event in events:
        text = "" if isinstance(event, Retract) else text + text_of(event)
    return text


async def collect(streamed: VerifiedRunResultStreaming) -> list[Any]:
    return [event async for event in streamed.stream_events()]


async def test_a_failed_reply_is_retracted_and_the_retry_streams_in_its_place(
    make_config: Any, model: OpenAIChatCompletionsModel, provider: ProviderServer
) -> None:
    provider.respond_with(answer)
    judge = ScriptedJudge([FAIL, "PASS"])
    runner = VerifiedRunner(Verifier(make_config(verifyAll=True, streaming=RELEASE), judge=judge))
    agent = Agent(name="reporter", instructions="Write reports.", model=model)
    streamed = runner.run_streamed(agent, "Write the weekly report.")
    events = await collect(streamed)
    retract = events.index(Retract(1, "incomplete"))
    assert [text_of(e) for e in events[:retract]] == list(BAD)
    assert [text_of(e) for e in events[retract + 1 :]] == list(GOOD)
    first_ids = {e.data.item_id for e in events[:retract]}
    assert len(first_ids) == 1 and first_ids.isdisjoint(
        e.data.item_id for e in events[retract + 1 :]
    )
    assert streamed.outcome is not None and streamed.outcome.status == Status.PASSED
    assert (streamed.final_output, streamed.response) == ("".join(GOOD), "".join(GOOD))
    # The retry's request holds the feedback, not the reply the user saw withdrawn.
    retry = provider.seen[1].body["messages"]
    assert all(m.get("content") != "".join(BAD) for m in retry)
    assert FEEDBACK in retry[-1]["content"] and retry[-1]["role"] == "user"
    assert provider.seen[1].body["stream"] is True
    assert streamed.to_input_list()[-1]["content"][0]["text"] == "".join(GOOD)  # type: ignore[index]
    assert "Write reports." in judge.calls[0].user
    judge.assert_exhausted()


async def test_buffer_mode_streams_only_the_delivered_reply(
    make_config: Any, model: OpenAIChatCompletionsModel, provider: ProviderServer
) -> None:
    provider.respond_with(answer)
    judge = ScriptedJudge([FAIL, "PASS"])
    runner = VerifiedRunner(Verifier(make_config(verifyAll=True), judge=judge))
    streamed = runner.run_streamed(Agent(name="a", model=model), "Write the weekly report.")
    events = await collect(streamed)
    assert not any(isinstance(e, Retract) for e in events)
    assert shown(events) == "".join(GOOD)
    # Never shown, so not withdrawn: the retry sees its earlier reply, as in Verifier.run.
    assert {"role": "assistant", "content": "".join(BAD)} in provider.seen[1].body["messages"]


async def test_text_arrives_while_the_model_streams_and_closing_cancels_the_model_call(
    make_config: Any, model: OpenAIChatCompletionsModel, provider: ProviderServer
) -> None:
    provider.push(Step(chunks=GOOD, stall_after=1))  # one piece, then the model stalls
    judge = ScriptedJudge([])
    runner = VerifiedRunner(Verifier(make_config(verifyAll=True, streaming=RELEASE), judge=judge))
    streamed = runner.run_streamed(Agent(name="a", model=model), "Write the weekly report.")
    async with aclosing(streamed.stream_events()) as events:
        async for event in events:
            assert text_of(event) == GOOD[0]
            assert provider.open_connections == 1  # the model is still streaming
            break
    # Closing the stream cancelled the run: the model's connection is closed, nothing judged.
    assert await provider.wait_for_open_connections(0, within=WAIT) == 0
    assert streamed.outcome is None
    judge.assert_exhausted()


async def test_options_that_keep_the_conversation_elsewhere_are_refused(
    make_config: Any, model: OpenAIChatCompletionsModel
) -> None:
    runner = VerifiedRunner(Verifier(make_config(verifyAll=True), judge=ScriptedJudge([])))
    session = SQLiteSession("support-chat")
    try:
        with pytest.raises(ValueError, match="session"):
            runner.run_streamed(Agent(name="a", model=model), "Hi.", session=session)
    finally:
        session.close()
