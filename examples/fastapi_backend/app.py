"""A chatbot backend whose replies get a second opinion before they are sent.

    REPLYGUARD_CONFIG=verifier.json CHAT_MODEL=openai/gpt-4o-mini uvicorn app:app

``POST /chat`` takes ``{"conversationId": "...", "message": "..."}`` and answers
``{"conversationId", "reply", "status", "reason", "attempts", "costUsd"}``. Each conversation's
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
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from replyguard import Reply, RunMeta, Turn, Verifier, VerifierConfig

CONFIG_ENV = "REPLYGUARD_CONFIG"
MODEL_ENV = "CHAT_MODEL"
API_BASE_ENV = "CHAT_API_BASE"
DEFAULT_MODEL = "openai/gpt-4o-mini"
SYSTEM_PROMPT = "You are a helpful assistant. Answer the user's request completely."

Messages = list[dict[str, Any]]
Agent = Callable[[Messages], Awaitable[Reply | str] | Reply | str]


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


def create_app(
    *,
    verifier: Verifier | None = None,
    agent: Agent | None = None,
    agent_model: str | None = None,
) -> FastAPI:
    """The chat app. Without a ``verifier`` it loads one from ``$REPLYGUARD_CONFIG`` at
    startup; without an ``agent`` it calls ``$CHAT_MODEL`` through litellm. The app warms the
    verifier up at startup and closes it at shutdown."""
    if agent is None:
        agent_model = os.environ.get(MODEL_ENV, DEFAULT_MODEL)
        agent = litellm_agent(agent_model, api_base=os.environ.get(API_BASE_ENV))

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

    @app.post("/chat", response_model=ChatResponse)
    async def chat(body: ChatRequest, request: Request) -> ChatResponse:
        guard: Verifier = request.app.state.verifier
        conversations: Conversations = request.app.state.conversations
        async with conversations.lock(body.conversation_id):
            history = conversations.history(body.conversation_id)
            turn = Turn(
                user_message=body.message,
                history=history,
                agent_instructions=SYSTEM_PROMPT,
                agent_model=agent_model,
                id=f"{body.conversation_id}:{len(history) // 2}",
            )
            try:
                outcome = await guard.run(agent, turn)
            except Exception as exc:  # the agent's own failure on its first reply
                raise HTTPException(502, "the chat model did not answer") from exc
            conversations.add(body.conversation_id, body.message, outcome.response)
        return ChatResponse(
            conversation_id=body.conversation_id,
            reply=outcome.response,
            status=outcome.status.value,
            reason=outcome.reason.value if outcome.reason else None,
            attempts=len(outcome.attempts),
            cost_usd=outcome.cost_usd,
        )

    return app


app = create_app()
