"""The ASGI app of ``replyguard serve`` (Starlette): its routes, the keys, the body limit,
and one ``Verifier`` for the life of the worker.

Routes: ``POST /v1/chat/completions``, ``POST /v1/verify``, ``GET /healthz`` (no key: load
balancers ask it), ``GET /metrics`` (behind the keys when they are set). A request body over
``serve.maxBodyBytes`` is refused with 413 before it is read whole; every error is
OpenAI-shaped. A client that disconnects while its turn runs cancels the turn (and with it
the upstream and judge calls in flight).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from replyguard.config._schema import VerifierConfig
from replyguard.config._serve import DEFAULT_MAX_BODY_BYTES
from replyguard.runner._verifier import Verifier
from replyguard.serve._agent import LiteLLMUpstream, Upstream
from replyguard.serve._auth import authorized
from replyguard.serve._metrics import CONTENT_TYPE, Metrics
from replyguard.serve._turns import Answer, chat_turn, verify_turn
from replyguard.serve._wire import WireError, answer_chunks, error_body, parse_chat

__all__ = ["Served", "build_app", "serving_config"]

STATUS_HEADER = "x-replyguard-status"


def serving_config(config: VerifierConfig) -> VerifierConfig:
    """``config`` as the server verifies with it: streams in ``"buffer"`` mode, the run
    kinds' too (a plain OpenAI client cannot take back text it was shown)."""
    streaming = config.streaming.model_copy(update={"mode": "buffer"})
    kinds = {
        name: kind
        if kind.streaming is None
        else kind.model_copy(
            update={"streaming": kind.streaming.model_copy(update={"mode": "buffer"})}
        )
        for name, kind in config.run_kinds.items()
    }
    return config.model_copy(update={"streaming": streaming, "run_kinds": kinds})


@dataclass
class Served:
    """What one worker serves with."""

    verifier: Verifier
    upstream: Upstream
    metrics: Metrics
    keys: tuple[str, ...] = ()
    """The clients' keys, resolved (empty: no key asked for)."""
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    ready: bool = False
    on_ready: Callable[[], None] | None = field(default=None, repr=False)

    @classmethod
    def from_config(cls, config: VerifierConfig, **parts: Any) -> Served:
        """The parts for ``config``: its verifier, its upstream, its keys (``ConfigError`` for
        an unset ``env:`` variable)."""
        config = serving_config(config)
        serve = config.serve
        keys = serve.resolve_api_keys() if serve is not None else ()
        upstream = serve.upstream if serve is not None else None
        if "upstream" not in parts:
            parts["upstream"] = LiteLLMUpstream(
                upstream.api_base if upstream is not None else None,
                upstream.resolve_api_key() if upstream is not None else None,
                config.secrets(),
            )
        limit = serve.max_body_bytes if serve is not None else DEFAULT_MAX_BODY_BYTES
        parts.setdefault("metrics", Metrics())
        judge = parts.pop("judge", None)
        return cls(Verifier(config, judge=judge), keys=keys, max_body_bytes=limit, **parts)


def _json(answer: Answer) -> Response:
    headers = {STATUS_HEADER: answer.guard_status} if answer.guard_status else None
    if answer.pieces is None or answer.status != 200:
        return JSONResponse(answer.body, answer.status, headers)
    return StreamingResponse(
        _events(answer), 200, headers, media_type="text/event-stream; charset=utf-8"
    )


def _events(answer: Answer) -> Iterator[str]:
    chunks = answer_chunks(answer.body, answer.pieces or [], include_usage=answer.include_usage)
    for chunk in chunks:
        yield f"data: {json.dumps(chunk, ensure_ascii=False, separators=(',', ':'))}\n\n"
    yield "data: [DONE]\n\n"


def _error(status: int, message: str, kind: str, param: str | None = None) -> Response:
    return JSONResponse(error_body(message, kind, param), status)


async def _body(request: Request, limit: int) -> bytes:
    """The request body, at most ``limit`` bytes; ``WireError`` (413) beyond."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise WireError(413, f"the request body is larger than {limit} bytes")
    body = bytearray()
    async for piece in request.stream():
        body += piece
        if len(body) > limit:
            raise WireError(413, f"the request body is larger than {limit} bytes")
    return bytes(body)


async def _until_disconnected(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def _unless_disconnected(request: Request, work: Awaitable[Answer]) -> Answer | None:
    """``work``'s answer, or None when the client went away first (``work`` is cancelled)."""
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(_until_disconnected(request))
    try:
        await asyncio.wait((task, watcher), return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    return task.result() if not task.cancelled() else None


_UNAUTHORIZED = "a valid API key is required (Authorization: Bearer)"


def _guarded(
    served: Served, handler: Callable[[bytes], Awaitable[Answer]]
) -> Callable[[Request], Awaitable[Response]]:
    """An endpoint that checks the key, reads the body within its limit, and runs
    ``handler`` on it unless the client goes away first."""

    async def endpoint(request: Request) -> Response:
        if not authorized(served.keys, request.headers):
            return _error(401, _UNAUTHORIZED, "invalid_request_error")
        try:
            body = await _body(request, served.max_body_bytes)
        except WireError as exc:
            return _error(exc.status, exc.message, "invalid_request_error", exc.param)
        answer = await _unless_disconnected(request, handler(body))
        return _json(answer) if answer is not None else Response(status_code=499)

    return endpoint


def _lifespan(
    served: Served,
) -> Callable[[Starlette], contextlib.AbstractAsyncContextManager[None]]:
    """Warm the verifier up before serving, mark the worker ready; close it after."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await served.verifier.warmup()
        served.ready = True
        if served.on_ready is not None:
            served.on_ready()
        try:
            yield
        finally:
            served.ready = False
            await served.verifier.aclose()
            served.metrics.close()

    return lifespan


def build_app(served: Served) -> Starlette:
    """The app serving ``served`` (its verifier is warmed up at startup, closed at shutdown)."""

    async def chat(body: bytes) -> Answer:
        try:
            chat_request = parse_chat(body)
        except WireError as exc:
            return Answer(exc.status, error_body(exc.message, "invalid_request_error", exc.param))
        return await chat_turn(served.verifier, served.upstream, served.metrics, chat_request)

    async def verify(body: bytes) -> Answer:
        return await verify_turn(served.verifier, served.metrics, body)

    async def healthz(request: Request) -> Response:
        ready = served.ready
        return JSONResponse({"status": "ok" if ready else "starting"}, 200 if ready else 503)

    async def metrics(request: Request) -> Response:
        if not authorized(served.keys, request.headers):
            return _error(401, _UNAUTHORIZED, "invalid_request_error")
        return Response(served.metrics.render(), media_type=CONTENT_TYPE)

    routes = [
        Route("/v1/chat/completions", _guarded(served, chat), methods=["POST"]),
        Route("/v1/verify", _guarded(served, verify), methods=["POST"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/metrics", metrics, methods=["GET"]),
    ]
    return Starlette(routes=routes, lifespan=_lifespan(served))
