"""The agent of a served turn: the upstream model, called with the client's messages whole.

``Verifier.run`` and ``Verifier.stream`` call ``UpstreamTurn.agent`` / ``stream_agent`` with
the messages of the verified turn; each call sends the client's own messages, then what the
verifier added after the turn's user message on a retry (the earlier reply and its feedback),
with the client's parameters. Every upstream answer is recorded, so that the delivered one
is answered with its identity, finish reason and tool calls, and usage is summed over all.

``Upstream`` is the seam to the model: ``LiteLLMUpstream`` (litellm, with the ``serve``
section's endpoint and key) in the server, a scripted one in tests.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from replyguard.adapters._shared import Attempts, retry_conversation
from replyguard.judge._upstream import (
    upstream_completion,
    upstream_error,
    upstream_price,
    upstream_stream,
)
from replyguard.serve._wire import ChatRequest, Recorded, record_completion
from replyguard.types import Outcome, Reply, RunMeta, ToolCallRecord, Turn

__all__ = ["LiteLLMUpstream", "Upstream", "UpstreamTurn"]


class Upstream(Protocol):
    """The agent's model: one ``chat.completion`` as JSON with its cost, or its chunks."""

    def complete(self, request: dict[str, Any]) -> Awaitable[tuple[dict[str, Any], float | None]]:
        """The answer to ``request`` (litellm's ``acompletion`` keywords) and its cost."""
        ...

    def stream(self, request: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        """The ``chat.completion.chunk`` objects answering ``request``, usage last."""
        ...

    def price(self, model: str, usage: dict[str, Any] | None) -> float | None:
        """What a streamed answer with ``usage`` cost (None: unknown)."""
        ...


@dataclass(frozen=True)
class LiteLLMUpstream:
    """The upstream through litellm: ``apiBase`` and ``apiKey`` when the config names them."""

    api_base: str | None = None
    api_key: str | None = None
    secrets: tuple[str, ...] = ()
    """Redacted from an upstream error's message."""

    def _request(self, request: dict[str, Any]) -> dict[str, Any]:
        endpoint = {"api_base": self.api_base, "api_key": self.api_key}
        return {**request, **{k: v for k, v in endpoint.items() if v is not None}}

    async def complete(self, request: dict[str, Any]) -> tuple[dict[str, Any], float | None]:
        try:
            return await upstream_completion(self._request(request))
        except Exception as exc:
            raise upstream_error(exc, self.secrets) from None

    async def stream(self, request: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        try:
            async for chunk in upstream_stream(self._request(request)):
                yield chunk
        except Exception as exc:
            raise upstream_error(exc, self.secrets) from None

    def price(self, model: str, usage: dict[str, Any] | None) -> float | None:
        return upstream_price(model, usage)


class _StreamedAnswer:
    """An upstream answer read from its chunks."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.finish: str | None = None
        self.usage: dict[str, Any] | None = None
        self.head: dict[str, Any] = {}

    def read(self, chunk: dict[str, Any]) -> str:
        """Take one chunk in; its text."""
        for key in ("id", "created", "model", "system_fingerprint"):
            if chunk.get(key) is not None:
                self.head.setdefault(key, chunk[key])
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        piece = ""
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") or {}
            piece += delta.get("content") or ""
            for call in delta.get("tool_calls") or ():
                self._call(call)
            self.finish = choice.get("finish_reason") or self.finish
        self.text.append(piece)
        return piece

    def _call(self, part: dict[str, Any]) -> None:
        call = self.calls.setdefault(
            int(part.get("index") or 0),
            {"id": None, "type": "function", "function": {"name": "", "arguments": ""}},
        )
        call["id"] = part.get("id") or call["id"]
        function = part.get("function") or {}
        call["function"]["name"] += function.get("name") or ""
        call["function"]["arguments"] += function.get("arguments") or ""

    def recorded(self) -> Recorded:
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self.text) or None}
        if self.calls:
            message["tool_calls"] = [self.calls[i] for i in sorted(self.calls)]
        return Recorded(message, self.finish, self.usage, self.head)


class UpstreamTurn:
    """The upstream calls of one served turn, recorded."""

    def __init__(
        self,
        upstream: Upstream,
        request: ChatRequest,
        turn: Turn,
        ledger: tuple[ToolCallRecord, ...],
    ) -> None:
        self.upstream = upstream
        self.request = request
        self.turn = turn
        self.ledger = ledger
        self.records: Attempts[Recorded] = Attempts()
        self.answers: list[Recorded] = []

    def _call(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        sent = [*self.request.messages, *retry_conversation(self.turn, messages)]
        return {**self.request.params, "model": self.request.model, "messages": sent}

    async def agent(self, messages: list[dict[str, Any]]) -> Reply:
        """One attempt, whole (``Verifier.run``'s agent)."""
        response, cost = await self.upstream.complete(self._call(messages))
        recorded = record_completion(response, cost)
        self.records.add(recorded.text, recorded)
        self.answers.append(recorded)
        return recorded.reply(self.ledger)

    async def stream_agent(self, messages: list[dict[str, Any]]) -> AsyncIterator[str | RunMeta]:
        """One attempt, streamed (``Verifier.stream``'s agent): text pieces, then its meta."""
        answer = _StreamedAnswer()
        chunks = self.upstream.stream(self._call(messages))
        try:
            async for chunk in chunks:
                piece = answer.read(chunk)
                if piece:
                    yield piece
        finally:
            closing: Callable[[], Awaitable[None]] | None = getattr(chunks, "aclose", None)
            if closing is not None:
                await closing()
        recorded = answer.recorded()
        recorded.cost_usd = self.upstream.price(self.request.model, recorded.usage)
        self.records.add(recorded.text, recorded)
        self.answers.append(recorded)
        yield recorded.reply(self.ledger).meta

    def delivered(self, outcome: Outcome) -> Recorded | None:
        """The upstream answer whose text was delivered (the newest such)."""
        return self.records.find(outcome)

    def all(self) -> list[Recorded]:
        """Every upstream answer of the turn, in order."""
        return list(self.answers)
