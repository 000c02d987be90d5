"""The agent's model call of ``replyguard serve``: one ``litellm.acompletion`` with the
client's parameters, whole or streamed, and its failure as an HTTP status and a message.

It lives beside the judge's calls because this folder is the only one that reaches litellm;
nothing here decides anything about a turn. Retries are the client's: litellm and the OpenAI
SDK under it are told not to retry, so a failing upstream answers at once.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterable
from typing import Any

from replyguard.judge._litellm import import_litellm
from replyguard.telemetry._events import redact

__all__ = [
    "UpstreamError",
    "upstream_completion",
    "upstream_error",
    "upstream_price",
    "upstream_stream",
]

_NO_RETRIES = {"max_retries": 0, "num_retries": 0}


class UpstreamError(Exception):
    """The upstream model call failed: the HTTP ``status`` to answer with, a ``message``
    with every secret redacted, and an OpenAI error ``type``."""

    def __init__(self, status: int, message: str, kind: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind = kind


def _dump(value: Any) -> dict[str, Any]:
    dumped = value.model_dump() if hasattr(value, "model_dump") else dict(value)
    return dumped if isinstance(dumped, dict) else {}


async def upstream_completion(request: dict[str, Any]) -> tuple[dict[str, Any], float | None]:
    """The upstream's ``chat.completion`` as JSON, and its cost when litellm can price it.
    Raises what litellm raises."""
    litellm = await import_litellm()
    response = await litellm.acompletion(**request, **_NO_RETRIES)
    hidden = getattr(response, "_hidden_params", None) or {}
    cost = hidden.get("response_cost") if isinstance(hidden, dict) else None
    return _dump(response), float(cost) if isinstance(cost, int | float) else None


async def upstream_stream(request: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
    """The upstream's ``chat.completion.chunk`` objects as JSON, usage included (the last
    one). Closing the iterator closes the upstream connection. Raises what litellm raises."""
    litellm = await import_litellm()
    options = {**(request.get("stream_options") or {}), "include_usage": True}
    stream = await litellm.acompletion(
        **{**request, "stream": True, "stream_options": options}, **_NO_RETRIES
    )
    try:
        async for chunk in stream:
            yield _dump(chunk)
    finally:
        await stream.aclose()


def upstream_price(model: str, usage: dict[str, Any] | None) -> float | None:
    """What a streamed answer cost, from its usage and litellm's price map (None: unknown)."""
    litellm = sys.modules.get("litellm")
    if litellm is None or not usage:
        return None
    try:
        prompt, completion = litellm.cost_per_token(
            model=model,
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
        )
    except Exception:  # an unknown model or price: the cost is unknown, not an error
        return None
    return float(prompt) + float(completion)


def upstream_error(exc: BaseException, secrets: Iterable[str]) -> UpstreamError:
    """What the client is told of a failed upstream call: the upstream's own status when it
    gave one (else 502, or 504 for a timeout) and its message, every secret redacted."""
    status = getattr(exc, "status_code", None)
    timeout = isinstance(exc, TimeoutError) or "timeout" in type(exc).__name__.lower()
    if not isinstance(status, int) or not 400 <= status <= 599:
        status = 504 if timeout else 502
    raw = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    message = redact(" ".join(str(raw).split()), secrets)[:1000]  # redacted before the cut
    if status in (401, 403):
        kind = "authentication_error"
    elif 400 <= status < 500 and status != 429:
        kind = "invalid_request_error"
    else:
        kind = "upstream_error"
    return UpstreamError(status, f"upstream model call failed: {message}", kind)
