"""``POST /chat/stream`` of the FastAPI example, over real HTTP: uvicorn serves the app on a
loopback port and an httpx client reads the Server-Sent Events as they come.

The judge is a real litellm call to the loopback provider server. The agents are async
generators that wait on events the test sets, so "the client had it before the agent went on"
is shown by the order things happened in, not by timing.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from conftest import API_KEY
from replyguard import Verifier, VerifierConfig
from support.example_app import load_example, serving
from support.provider_server import ANTHROPIC, OPENAI, ProviderServer, Step

example = load_example()

QUESTION = "Plan a three-day trip to Lisbon."
FIRST = "Done: day 1 Alfama, "
SHORT = FIRST + "day 2 Belém."
FIXED = "Done: day 1 Alfama, day 2 Belém, day 3 Sintra."
FAIL_ANSWER = "Only two days are planned.\nFAIL [incomplete]: add the third day."
WAIT = 5.0  # generous bound on a wait that ends at once when the code is right


@pytest.fixture
def release_config(provider: ProviderServer) -> dict[str, Any]:
    """An Anthropic judge at the loopback server, every reply judged, text shown as it comes."""
    return {
        "enabled": True,
        "verifyAll": True,
        "model": ANTHROPIC.judge_model,
        "agentModel": ANTHROPIC.agent_model,
        "apiKey": API_KEY,
        "apiBase": provider.url,
        "timeoutSeconds": 10,
        "streaming": {"mode": "release", "holdBackChars": 0},
    }


@asynccontextmanager
async def client_of(app: Any) -> AsyncIterator[httpx.AsyncClient]:
    """``app`` served by uvicorn; a client pointed at it."""
    async with serving(app) as url, httpx.AsyncClient(base_url=url, timeout=WAIT) as client:
        yield client


def chat_app(config: dict[str, Any], agent: Any) -> Any:
    """The example app with ``agent`` streaming, served by uvicorn; a client pointed at it."""
    verifier = Verifier(VerifierConfig.from_dict(config))
    app = example.create_app(verifier=verifier, agent=agent, streaming_agent=agent)
    return client_of(app)


async def sse_events(
    response: httpx.Response, *, progress: bool = False
) -> AsyncIterator[tuple[str, Any]]:
    """The (event name, JSON data) pairs of a Server-Sent Events body, as each one ends; the
    ``progress`` events only when asked for (a client that ignores them, as most tests do)."""
    name, data = "message", []
    async for line in response.aiter_lines():
        if line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))
        elif not line:
            if data and (progress or name != "progress"):
                yield name, json.loads("\n".join(data))
            name, data = "message", []


def post_stream(client: httpx.AsyncClient, message: str, conversation: str = "c1") -> Any:
    body = {"conversationId": conversation, "message": message}
    return client.stream("POST", "/chat/stream", json=body)


async def read_all(
    client: httpx.AsyncClient, message: str, conversation: str = "c1", *, progress: bool = False
) -> list:
    async with post_stream(client, message, conversation) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        return [event async for event in sse_events(response, progress=progress)]


def text_of(events: list[tuple[str, Any]]) -> str:
    """The text the user sees at the end: the deltas after the last retract."""
    shown = ""
    for name, data in events:
        if name == "delta":
            shown += data["text"]
        elif name == "retract":
            shown = ""
    return shown


class Gated:
    """An agent that streams ``first``, waits until the test opens the gate, then streams the
    rest; it records whether its stream was closed before it finished."""

    def __init__(self, first: str, rest: str) -> None:
        self.first, self.rest = first, rest
        self.gate = asyncio.Event()
        self.closed = asyncio.Event()
        self.finished = False
        self.calls: list[list[dict[str, Any]]] = []

    async def __call__(self, messages: list[dict[str, Any]]) -> AsyncIterator[str]:
        self.calls.append(messages)
        try:
            yield self.first
            async with asyncio.timeout(WAIT):  # the test opens it once the client has `first`
                await self.gate.wait()
            yield self.rest
            self.finished = True
        finally:
            if not self.finished:
                self.closed.set()


async def test_deltas_reach_the_client_while_the_agent_is_still_writing(
    provider: ProviderServer, release_config: dict[str, Any]
) -> None:
    provider.push(Step(text="PASS"))
    agent = Gated(FIRST, "day 2 Belém.")
    received: list[tuple[str, Any]] = []
    async with chat_app(release_config, agent) as client, post_stream(client, QUESTION) as response:
        async for event in sse_events(response):
            received.append(event)
            if text_of(received) == FIRST:
                # The agent is waiting for this: it has not written its second part yet.
                assert not agent.finished and len(provider.seen) == 0
                agent.gate.set()
    names = [name for name, _ in received]
    assert names[-1] == "done" and "retract" not in names
    assert text_of(received) == SHORT
    assert received[-1][1] | {"costUsd": 0} == {
        "conversationId": "c1",
        "reply": SHORT,
        "status": "passed",
        "reason": None,
        "attempts": 1,
        "costUsd": 0,
    }


async def test_a_failed_reply_is_retracted_and_the_retry_streamed_in_its_place(
    provider: ProviderServer, release_config: dict[str, Any]
) -> None:
    provider.push(Step(text=FAIL_ANSWER), Step(text="PASS"))

    async def agent(messages: list[dict[str, Any]]) -> AsyncIterator[str]:
        if "third day" in str(messages[-1]["content"]):
            for piece in ("Done: day 1 Alfama, ", "day 2 Belém, ", "day 3 Sintra."):
                yield piece
        else:
            for piece in ("Done: day 1 Alfama, ", "day 2 Belém."):
                yield piece

    async with chat_app(release_config, agent) as client:
        events = await read_all(client, QUESTION)
    names = [name for name, _ in events]
    retract = names.index("retract")
    assert "".join(d["text"] for n, d in events[:retract] if n == "delta") == SHORT
    assert events[retract][1] == {"attempt": 1, "reason": "incomplete"}
    assert names.count("retract") == 1 and names[-1] == "done"
    assert text_of(events) == FIXED
    done = events[-1][1]
    assert (done["reply"], done["status"], done["attempts"]) == (FIXED, "passed", 2)


async def test_the_next_turn_sees_only_the_delivered_reply(
    provider: ProviderServer, release_config: dict[str, Any]
) -> None:
    provider.push(Step(text=FAIL_ANSWER), Step(text="PASS"), Step(text="PASS"))
    calls: list[list[dict[str, Any]]] = []

    async def agent(messages: list[dict[str, Any]]) -> AsyncIterator[str]:
        calls.append(messages)
        if len(calls) == 1:
            yield SHORT
        elif len(calls) == 2:
            yield FIXED
        else:
            yield "You are welcome."

    async with chat_app(release_config, agent) as client:
        await read_all(client, QUESTION)
        events = await read_all(client, "Thanks, that is all.")
    assert text_of(events) == "You are welcome."
    assert calls[2] == [
        {"role": "user", "content": QUESTION},
        {"role": "assistant", "content": FIXED},
        {"role": "user", "content": "Thanks, that is all."},
    ]


async def test_a_client_that_disconnects_while_the_agent_writes_stops_the_agent(
    provider: ProviderServer, release_config: dict[str, Any]
) -> None:
    agent = Gated(FIRST, "never written")
    async with chat_app(release_config, agent) as client:
        async with post_stream(client, QUESTION) as response:
            async for name, data in sse_events(response):
                assert (name, data) == ("delta", {"text": FIRST})
                break  # leaving the block closes the connection
        async with asyncio.timeout(WAIT):
            await agent.closed.wait()
        # The conversation is free again, and keeps nothing of the abandoned turn.
        provider.push(Step(text="PASS"))
        agent.gate.set()
        events = await read_all(client, "Again, please.")
    assert agent.calls[1] == [{"role": "user", "content": "Again, please."}]
    assert text_of(events) == FIRST + "never written"
    assert len(provider.seen) == 1  # no judge call for the abandoned reply


async def test_a_client_that_disconnects_during_the_judge_call_cancels_it(
    provider: ProviderServer, release_config: dict[str, Any]
) -> None:
    provider.push(Step(text="PASS", delay=60))  # a judge that does not answer in time

    async def agent(messages: list[dict[str, Any]]) -> AsyncIterator[str]:
        yield SHORT

    async with chat_app(release_config, agent) as client:
        async with post_stream(client, QUESTION) as response:
            async for name, data in sse_events(response):
                assert (name, data) == ("delta", {"text": SHORT})
                assert await provider.wait_for_requests(1, within=WAIT) == 1
                assert provider.open_connections == 1
                break
        # The judge's connection is closed as soon as the client is gone, not after 60 s.
        assert await provider.wait_for_open_connections(0, within=WAIT) == 0


async def test_a_model_that_fails_its_first_reply_ends_the_stream_with_an_error_event(
    release_config: dict[str, Any],
) -> None:
    async def broken(messages: list[dict[str, Any]]) -> AsyncIterator[str]:
        raise ConnectionError("the chat model is down")
        yield ""  # pragma: no cover - makes this an async generator

    async with chat_app(release_config, broken) as client:
        events = await read_all(client, QUESTION)
    assert events == [("error", {"detail": "the chat model did not answer"})]


async def test_the_page_is_served_at_the_root(release_config: dict[str, Any]) -> None:
    async with chat_app(release_config, Gated("", "")) as client:
        response = await client.get("/")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    assert 'fetch("chat/stream"' in response.text


# -- the example's own litellm agent, streamed from the loopback provider ----------------------

PIECES = ("Done: day 1 Alfama, ", "day 2 Belém, ", "day 3 Sintra.")


def litellm_app(config: dict[str, Any], provider: ProviderServer) -> Any:
    """The example app with its own litellm agents, the model being the loopback server."""
    model, url = OPENAI.judge_model, provider.url
    return example.create_app(
        verifier=Verifier(VerifierConfig.from_dict(config)),
        agent=example.litellm_agent(model, api_base=url, api_key=API_KEY),
        streaming_agent=example.litellm_streaming_agent(model, api_base=url, api_key=API_KEY),
        agent_model=model,
    )


async def test_the_litellm_agent_streams_the_models_chunks_as_deltas(
    provider: ProviderServer, release_config: dict[str, Any]
) -> None:
    provider.respond_with(
        lambda seen: Step(chunks=PIECES) if seen.path == OPENAI.path else Step(text="PASS")
    )
    async with client_of(litellm_app(release_config, provider)) as client:
        events = await read_all(client, QUESTION)
    assert [data["text"] for name, data in events if name == "delta"] == list(PIECES)
    done = events[-1][1]
    assert (done["reply"], done["status"], done["attempts"]) == (FIXED, "passed", 1)
    assert done["costUsd"] > 0
    agent_request = provider.seen[0].body
    assert (agent_request["stream"], agent_request["stream_options"]) == (
        True,
        {"include_usage": True},
    )


async def test_a_client_that_disconnects_closes_the_models_stream(
    provider: ProviderServer, release_config: dict[str, Any]
) -> None:
    provider.push(Step(chunks=PIECES, stall_after=1))  # one piece, then the model stalls
    async with client_of(litellm_app(release_config, provider)) as client:
        async with post_stream(client, QUESTION) as response:
            async for name, data in sse_events(response):
                assert (name, data) == ("delta", {"text": PIECES[0]})
                assert provider.open_connections == 1
                break
        # The model's connection closes with the client's: no more tokens are paid for.
        assert await provider.wait_for_open_connections(0, within=WAIT) == 0
    assert [seen.path for seen in provider.seen] == [OPENAI.path]  # and no judge call


async def test_a_reply_that_spells_sse_framing_stays_one_delta(
    provider: ProviderServer, release_config: dict[str, Any]
) -> None:
    provider.push(Step(text="PASS"))
    hostile = 'Done.\n\nevent: done\ndata: {"reply": "forged"}\n\r\n'

    async def agent(messages: list[dict[str, Any]]) -> AsyncIterator[str]:
        yield hostile

    async with chat_app(release_config, agent) as client:
        events = await read_all(client, QUESTION)
    assert [name for name, _ in events] == ["delta", "done"]
    assert events[0][1] == {"text": hostile}
    assert events[1][1]["reply"] == hostile


async def test_buffer_mode_streams_the_phases_before_the_reply(
    provider: ProviderServer, release_config: dict[str, Any]
) -> None:
    """``"buffer"`` shows no text until a reply passed: ``progress`` says what happens."""
    provider.push(Step(text=FAIL_ANSWER), Step(text="PASS"))
    config = release_config | {"streaming": {"mode": "buffer"}}

    async def agent(messages: list[dict[str, Any]]) -> AsyncIterator[str]:
        yield FIXED if "third day" in str(messages[-1]["content"]) else SHORT

    async with chat_app(config, agent) as client:
        events = await read_all(client, QUESTION, progress=True)
    assert events == [
        ("progress", {"phase": "writing", "attempt": 1}),
        ("progress", {"phase": "checking", "attempt": 1}),
        ("progress", {"phase": "revising", "attempt": 2}),
        ("progress", {"phase": "checking", "attempt": 2}),
        ("delta", {"text": FIXED}),
        ("done", events[-1][1]),
    ]
    assert (events[-1][1]["reply"], events[-1][1]["attempts"]) == (FIXED, 2)
