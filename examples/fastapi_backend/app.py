"""A chatbot backend whose replies get a second opinion before they are sent.

    REPLYGUARD_CONFIG=verifier.json CHAT_MODEL=openai/gpt-4o-mini uvicorn app:app

``POST /chat`` takes ``{"conversationId": "...", "message": "..."}`` and answers
``{"conversationId", "reply", "status", "reason", "attempts", "costUsd"}``.
``POST /chat/stream`` takes the same request and answers with Server-Sent Events as the reply
is written (``Verifier.stream``): ``delta`` (``{"text"}``: append it), ``retract``
(``{"attempt", "reason"}``: clear the text this reply showed so far; the retry's deltas follow),
then one ``done`` carrying the ``/chat`` answer; ``error`` instead when the model fails its
first reply. ``GET /`` serves ``chat.html``, a one-file chat page that uses it. Each conversation's
history is kept in memory; turns of one conversation run one after another, turns of different
conversations run concurrently. The agent is one litellm call to ``CHAT_MODEL`` (optionally
through ``CHAT_API_BASE``); the verifier comes from the JSON config file named by
``REPLYGUARD_CONFIG``, is warmed up when the app starts and closed when it stops. replyguard's
warnings (a fail-open, a judge error, a missing key) are logged to stderr.

``create_app(verifier=..., agent=...)`` builds the same app from pieces handed in (tests do).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing, asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse
from fastapi.sse import EventSourceResponse, ServerSentEvent
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from replyguard import (
    Delta,
    Done,
    Outcome,
    Reply,
    Retract,
    RunMeta,
    Turn,
    Verifier,
    VerifierConfig,
)

CONFIG_ENV = "REPLYGUARD_CONFIG"
MODEL_ENV = "CHAT_MODEL"
API_BASE_ENV = "CHAT_API_BASE"
DEFAULT_MODEL = "openai/gpt-4o-mini"
SYSTEM_PROMPT = "You are a helpful assistant. Answer the user's request completely."

CHAT_PAGE = Path(__file__).with_name("chat.html")

Messages = list[dict[str, Any]]
Agent = Callable[[Messages], Awaitable[Reply | str] | Reply | str]
StreamingAgent = Callable[[Messages], AsyncIterator[Any]] | Agent
"""What ``/chat/stream`` calls: an async iterator of text (``str`` or litellm stream chunks,
then optionally a ``RunMeta``), or any ``Agent`` (its whole reply is one piece)."""


class _Camel(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, validate_by_name=True, extra="forbid")


class ChatRequest(_Camel):
    conversation_id: str = Field(min_length=1, max_length=200)
    message: str = Field(min_length=1)


class ChatResponse(_Camel):
    conversation_id: str
    reply: str
    """The text to send to the user (always deliverable)."""
    status: str
    """passed, skipped, not_triggered, disabled, failed_open, exhausted or flagged."""
    reason: str | None
    """Why a turn failed open or stopped early."""
    attempts: int
    """Agent replies this turn (1 when the first reply was delivered)."""
    cost_usd: float


def litellm_agent(model: str, *, api_base: str | None = None, api_key: str | None = None) -> Agent:
    """The chat agent: one litellm call to ``model`` with the system prompt in front."""

    async def agent(messages: Messages) -> Reply:
        import litellm  # already imported by the verifier's warm-up

        response = await litellm.acompletion(
            model=model,
            messages=[{"role": "system", "content": SYSTEM_PROMPT}, *messages],
            api_base=api_base,
            api_key=api_key,
        )
        text = response.choices[0].message.content or ""
        cost = response._hidden_params.get("response_cost")
        return Reply(text=text, meta=RunMeta(cost_usd=cost))

    return agent


def litellm_streaming_agent(
    model: str, *, api_base: str | None = None, api_key: str | None = None
) -> StreamingAgent:
    """The chat agent for ``/chat/stream``: the same call, streamed; it yields litellm's chunks
    as they arrive (the last one carries the usage) and closes the stream when it is stopped."""

    async def agent(messages: Messages) -> AsyncIterator[Any]:
        import litellm

        stream = await litellm.acompletion(
            model=model,
            messages=[{"role": "system", "content": SYSTEM_PROMPT}, *messages],
            api_base=api_base,
            api_key=api_key,
            stream=True,
            stream_options={"include_usage": True},
        )
        try:
            async for chunk in stream:
                yield chunk
        finally:
            await stream.aclose()

    return agent


class Conversations:
    """Each conversation's messages, in memory, with one lock per conversation."""

    def __init__(self) -> None:
        self._history: dict[str, Messages] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    def lock(self, conversation_id: str) -> asyncio.Lock:
        return self._locks.setdefault(conversation_id, asyncio.Lock())

    def history(self, conversation_id: str) -> Messages:
        return list(self._history.get(conversation_id, []))

    def add(self, conversation_id: str, user: str, assistant: str) -> None:
        self._history.setdefault(conversation_id, []).extend(
            [{"role": "user", "content": user}, {"role": "assistant", "content": assistant}]
        )


def show_replyguard_warnings() -> None:
    """Show replyguard's WARNING and ERROR events (a fail-open, a judge error, a bad key) on
    stderr. replyguard logs through the stdlib logger "replyguard" and prints nothing until the
    host configures logging; uvicorn configures only its own loggers. ``basicConfig`` does
    nothing when logging is already set up (under pytest, say)."""
    logging.basicConfig(
        level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )


def _verifier_from_env() -> Verifier:
    path = os.environ.get(CONFIG_ENV)
    if not path:
        raise RuntimeError(f"set {CONFIG_ENV} to the path of the verifier's JSON config file")
    return Verifier(VerifierConfig.load(path))


def chat_response(conversation_id: str, outcome: Outcome) -> ChatResponse:
    """What ``/chat`` answers (and ``/chat/stream``'s ``done`` event carries) for a turn."""
    return ChatResponse(
        conversation_id=conversation_id,
        reply=outcome.response,
        status=outcome.status.value,
        reason=outcome.reason.value if outcome.reason else None,
        attempts=len(outcome.attempts),
        cost_usd=outcome.cost_usd,
    )


def sse(event: Delta | Retract | Done, conversation_id: str) -> ServerSentEvent:
    """One event of ``Verifier.stream`` as a Server-Sent Event (its data is JSON)."""
    if isinstance(event, Delta):
        return ServerSentEvent(event="delta", data={"text": event.text})
    if isinstance(event, Retract):
        return ServerSentEvent(
            event="retract", data={"attempt": event.attempt, "reason": event.reason}
        )
    done = chat_response(conversation_id, event.outcome)
    return ServerSentEvent(event="done", data=done.model_dump(by_alias=True))


def create_app(
    *,
    verifier: Verifier | None = None,
    agent: Agent | None = None,
    streaming_agent: StreamingAgent | None = None,
    agent_model: str | None = None,
) -> FastAPI:
    """The chat app. Without a ``verifier`` it loads one from ``$REPLYGUARD_CONFIG`` at
    startup; without an ``agent`` it calls ``$CHAT_MODEL`` through litellm (streamed for
    ``/chat/stream``; given an ``agent`` and no ``streaming_agent``, ``/chat/stream`` calls the
    ``agent``). The app warms the verifier up at startup and closes it at shutdown."""
    if agent is None:
        agent_model = os.environ.get(MODEL_ENV, DEFAULT_MODEL)
        api_base = os.environ.get(API_BASE_ENV)
        agent = litellm_agent(agent_model, api_base=api_base)
        if streaming_agent is None:
            streaming_agent = litellm_streaming_agent(agent_model, api_base=api_base)
    stream_with: StreamingAgent = streaming_agent if streaming_agent is not None else agent

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        show_replyguard_warnings()
        app.state.verifier = verifier if verifier is not None else _verifier_from_env()
        app.state.conversations = Conversations()
        await app.state.verifier.warmup()
        try:
            yield
        finally:
            await app.state.verifier.aclose()

    app = FastAPI(title="chat with a second opinion", lifespan=lifespan)

    def turn_of(body: ChatRequest, history: Messages) -> Turn:
        return Turn(
            user_message=body.message,
            history=history,
            agent_instructions=SYSTEM_PROMPT,
            agent_model=agent_model,
            id=f"{body.conversation_id}:{len(history) // 2}",
        )

    @app.post("/chat", response_model=ChatResponse)
    async def chat(body: ChatRequest, request: Request) -> ChatResponse:
        guard: Verifier = request.app.state.verifier
        conversations: Conversations = request.app.state.conversations
        async with conversations.lock(body.conversation_id):
            turn = turn_of(body, conversations.history(body.conversation_id))
            try:
                outcome = await guard.run(agent, turn)
            except Exception as exc:  # the agent's own failure on its first reply
                raise HTTPException(502, "the chat model did not answer") from exc
            conversations.add(body.conversation_id, body.message, outcome.response)
        return chat_response(body.conversation_id, outcome)

    @app.post("/chat/stream", response_class=EventSourceResponse)
    async def chat_stream(body: ChatRequest, request: Request) -> AsyncIterator[ServerSentEvent]:
        """The turn as Server-Sent Events: ``delta``, ``retract``, then ``done`` (or ``error``).

        A client that goes away cancels this generator: closing the verifier's stream closes
        the agent's stream and any judge call in flight, and the turn is not kept."""
        guard: Verifier = request.app.state.verifier
        conversations: Conversations = request.app.state.conversations
        async with conversations.lock(body.conversation_id):
            turn = turn_of(body, conversations.history(body.conversation_id))
            try:
                async with aclosing(guard.stream(stream_with, turn)) as events:
                    async for event in events:
                        if isinstance(event, Done):
                            reply = event.outcome.response
                            conversations.add(body.conversation_id, body.message, reply)
                        yield sse(event, body.conversation_id)
            except Exception:  # the agent's own failure on its first reply
                logging.getLogger(__name__).exception("the chat model did not answer")
                detail = {"detail": "the chat model did not answer"}
                yield ServerSentEvent(event="error", data=detail)

    @app.get("/", response_class=HTMLResponse)
    async def chat_page() -> HTMLResponse:
        """The chat page (one file: its script reads ``/chat/stream``)."""
        return HTMLResponse(CHAT_PAGE.read_text(encoding="utf-8"))

    return app


app = create_app()
