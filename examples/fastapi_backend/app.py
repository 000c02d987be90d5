"""A chatbot backend whose replies get a second opinion before they are sent.

    REPLYGUARD_CONFIG=verifier.json CHAT_MODEL=openai/gpt-4o-mini uvicorn app:app
    REPLYGUARD_EXAMPLE_OFFLINE=1 uvicorn app:app    # no key, no network: a scripted model and judge

``POST /chat`` takes ``{"conversationId": "...", "message": "..."}`` and answers
``{"conversationId", "reply", "status", "reason", "attempts", "costUsd"}``.
``POST /chat/stream`` takes the same request and answers with Server-Sent Events as the reply
is written (``Verifier.stream``): ``progress`` (``{"phase", "attempt"}``: writing, checking,
revising; no text), ``delta`` (``{"text"}``: append it), ``retract`` (``{"attempt", "reason"}``:
clear the text this reply showed so far; the retry's deltas follow), then one ``done`` carrying
the ``/chat`` answer; ``error`` (``{"detail"}``) instead when the model fails its first reply.
``GET /`` serves ``chat.html``, a one-file chat page that uses it. Each conversation's history
is kept in memory; turns of one conversation run one after another, turns of different
conversations run concurrently. The agent is one litellm call to ``CHAT_MODEL`` (optionally
through ``CHAT_API_BASE``); the verifier comes from the JSON config file named by
``REPLYGUARD_CONFIG``, is warmed up when the app starts and closed when it stops. The startup
logs one line per key (the chat model's, the judge's) saying whether it is set. replyguard's
warnings (a fail-open, a judge error, a missing key) are logged to stderr.

With ``REPLYGUARD_EXAMPLE_OFFLINE=1`` (or ``=buffer``) neither key nor config is needed: the
chat model is a scripted writer and the judge a scripted one that fails each turn's first reply
(it has no example) and passes the retry, so the page shows a FAIL, the withdrawn reply and the
retry (``"release"`` mode; ``buffer`` shows the phases instead of the first reply).

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
    ConfigError,
    Delta,
    Done,
    JudgeReply,
    Outcome,
    Progress,
    Reply,
    Retract,
    RunMeta,
    Turn,
    Verifier,
    VerifierConfig,
    current_turn,
)

CONFIG_ENV = "REPLYGUARD_CONFIG"
MODEL_ENV = "CHAT_MODEL"
API_BASE_ENV = "CHAT_API_BASE"
OFFLINE_ENV = "REPLYGUARD_EXAMPLE_OFFLINE"
DEFAULT_MODEL = "openai/gpt-4o-mini"
NO_ANSWER = "the chat model did not answer"
log = logging.getLogger("chat_example")
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


# -- offline: a scripted chat model and judge, no key and no network ---------------------------

OFFLINE_EXAMPLE = " For example: write the three steps down now and do the first one today."


def offline_reply(question: str, attempt: int) -> str:
    """The scripted model's reply: the first one has no example, a retry adds one."""
    reply = f"Here is a short plan for “{question}”: decide what matters most and do it first."
    return reply + OFFLINE_EXAMPLE if attempt > 1 else reply


def offline_agents(pause: float = 0.05) -> tuple[Agent, StreamingAgent]:
    """The scripted chat model, whole (``/chat``) and streamed word by word (``/chat/stream``),
    ``pause`` seconds between words. It reads the question and the attempt from the turn it
    runs in (``replyguard.current_turn()``)."""

    def reply_now() -> str:
        context = current_turn()
        assert context is not None  # the verifier runs the agent inside its turn
        return offline_reply(context.turn.user_message, context.attempt)

    async def agent(messages: Messages) -> str:
        return reply_now()

    async def streaming_agent(messages: Messages) -> AsyncIterator[str]:
        for word in reply_now().split(" "):
            await asyncio.sleep(pause)
            yield word + " "

    return agent, streaming_agent


class OfflineJudge:
    """A scripted judge: after ``delay`` seconds, FAIL [incomplete] for a reply without an
    example, PASS for one with it (a ``replyguard.Judge``: any object with this ``judge``)."""

    model = "offline/scripted-judge"

    def __init__(self, delay: float = 1.0) -> None:
        self.delay = delay

    async def judge(self, prompt: Any, *, time_left: float) -> JudgeReply:
        await asyncio.sleep(min(self.delay, max(time_left - 0.5, 0)))
        reply = prompt.user.rsplit("<assistant_reply-", 1)[-1]  # the reply under review
        if OFFLINE_EXAMPLE.strip() in reply:
            text = "The plan now has a concrete example.\nPASS"
        else:
            text = "The plan has no concrete example.\nFAIL [incomplete]: Add one concrete example."
        return JudgeReply(text=text, model=self.model)


def offline_mode() -> str | None:
    """``"release"`` or ``"buffer"`` when ``$REPLYGUARD_EXAMPLE_OFFLINE`` asks for the offline
    mode (``1``, ``true``, ``release`` or ``buffer``), else None."""
    value = os.environ.get(OFFLINE_ENV, "").strip().lower()
    if value in ("", "0", "false", "no", "off"):
        return None
    return "buffer" if value == "buffer" else "release"


def offline_verifier(mode: str = "release", judge_delay: float = 1.0) -> Verifier:
    """Every reply judged by ``OfflineJudge``, one retry, text shown as ``mode`` says."""
    config = VerifierConfig.from_dict(
        {
            "enabled": True,
            "verifyAll": True,
            "model": "anthropic/claude-sonnet-4-5",  # named for the family check only
            "agentModel": DEFAULT_MODEL,
            "maxAttempts": 2,
            "streaming": {"mode": mode, "holdBackChars": 0},
        }
    )
    return Verifier(config, judge=OfflineJudge(judge_delay))


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


def missing_keys(chat_model: str | None, config: VerifierConfig) -> tuple[str | None, str | None]:
    """What is missing of the chat model's key and of the judge's (None: set, or not needed),
    as litellm reads keys from the environment; ``apiKey`` in the config is the judge's."""
    import litellm

    def missing(model: str, key: str | None = None) -> str | None:
        names = litellm.validate_environment(model=model, api_key=key)["missing_keys"]
        return f"{' and '.join(names)} is not set" if names else None

    try:
        judge = missing(config.model, config.resolve_api_key())
    except ConfigError as exc:  # apiKey "env:NAME" with NAME unset
        judge = "; ".join(message for _, message in exc.problems)
    return (missing(chat_model) if chat_model else None), judge


def report_keys(chat_model: str | None, config: VerifierConfig) -> str | None:
    """Log one line per key (the chat model's, when it is called, and the judge's): set, or
    what is missing and what it means. Returns what the chat model's key lacks."""
    chat, judge = missing_keys(chat_model, config)
    log.setLevel(logging.INFO)  # these lines show with logging at WARNING too
    if chat_model is not None and chat is None:
        log.info("chat model %s: its key is set", chat_model)
    elif chat_model is not None:
        log.warning(
            "chat model %s: %s; every message will get an error (set it, or try the example "
            "offline: %s=1)",
            *(chat_model, chat, OFFLINE_ENV),
        )
    if judge is None:
        log.info("judge %s: its key is set", config.model)
    else:
        log.warning(
            "judge %s: %s; replies are delivered unjudged (failed_open)", config.model, judge
        )
    return chat


def agent_failure(exc: Exception, missing_key: str | None) -> str:
    """What the page is told when the model fails its first reply; logged in one line when the
    provider refused (a missing or wrong key, a rate limit), with a traceback otherwise."""
    if hasattr(exc, "status_code") or hasattr(exc, "llm_provider"):
        first = (str(exc).strip().splitlines() or [""])[0][:300]
        log.error("%s: %s: %s", NO_ANSWER, type(exc).__name__, first)
    else:
        log.exception(NO_ANSWER)
    return f"{NO_ANSWER}: {missing_key}" if missing_key else NO_ANSWER


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


def sse(event: Delta | Retract | Done | Progress, conversation_id: str) -> ServerSentEvent:
    """One event of ``Verifier.stream`` as a Server-Sent Event (its data is JSON)."""
    if isinstance(event, Progress):
        return ServerSentEvent(
            event="progress", data={"phase": event.phase, "attempt": event.attempt}
        )
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
    ``agent``). The app warms the verifier up at startup and closes it at shutdown.

    With ``$REPLYGUARD_EXAMPLE_OFFLINE`` set, the verifier and agents not handed in are the
    offline ones (``offline_verifier``, ``offline_agents``); otherwise the startup logs whether
    the chat model's key (when it calls ``$CHAT_MODEL``) and the judge's key are set."""
    offline = offline_mode()
    if offline is not None:
        verifier = verifier if verifier is not None else offline_verifier(offline)
        if agent is None:
            agent, streaming_agent = offline_agents()
            agent_model = DEFAULT_MODEL
    chat_model = None  # the model whose key the startup checks: litellm's, when it is called
    if agent is None:
        agent_model = chat_model = os.environ.get(MODEL_ENV, DEFAULT_MODEL)
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
        if offline is not None:
            log.warning(
                "offline: a scripted chat model and judge, no key needed (%s mode)", offline
            )
            app.state.missing_key = None
        else:
            app.state.missing_key = report_keys(chat_model, app.state.verifier.config)
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
                detail = agent_failure(exc, request.app.state.missing_key)
                raise HTTPException(502, detail) from None
            conversations.add(body.conversation_id, body.message, outcome.response)
        return chat_response(body.conversation_id, outcome)

    @app.post("/chat/stream", response_class=EventSourceResponse)
    async def chat_stream(body: ChatRequest, request: Request) -> AsyncIterator[ServerSentEvent]:
        """The turn as Server-Sent Events: ``progress``, ``delta``, ``retract``, then ``done``
        (or ``error``).

        A client that goes away cancels this generator: closing the verifier's stream closes
        the agent's stream and any judge call in flight, and the turn is not kept."""
        guard: Verifier = request.app.state.verifier
        conversations: Conversations = request.app.state.conversations
        async with conversations.lock(body.conversation_id):
            turn = turn_of(body, conversations.history(body.conversation_id))
            try:
                async with aclosing(guard.stream(stream_with, turn, progress=True)) as events:
                    async for event in events:
                        if isinstance(event, Done):
                            reply = event.outcome.response
                            conversations.add(body.conversation_id, body.message, reply)
                        yield sse(event, body.conversation_id)
            except Exception as exc:  # the agent's own failure on its first reply
                detail = agent_failure(exc, request.app.state.missing_key)
                yield ServerSentEvent(event="error", data={"detail": detail})

    @app.get("/", response_class=HTMLResponse)
    async def chat_page() -> HTMLResponse:
        """The chat page (one file: its script reads ``/chat/stream``)."""
        return HTMLResponse(CHAT_PAGE.read_text(encoding="utf-8"))

    return app


app = create_app()
