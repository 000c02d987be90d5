"""A cap on what a judge's answer may cost: the bytes read from the provider, per call.

litellm reads a provider's whole body and parses it on the event loop before it returns: a
50 MB answer blocked the loop for over half a second. A verdict needs a few kilobytes. So every
judge call hands litellm a session of ours whose responses stop at ``MAX_ANSWER_BYTES`` (as its
``shared_session`` argument, on the routes that take it, such as OpenAI's; on Anthropic's,
which ignores that argument, as the ``client``: litellm's own handler over that session). A
larger ``Content-Length`` is refused before the body is read, and a body without one stops
being read once it passes the cap. The call then fails with ``AnswerTooLarge``, and its
``CallTicket`` says so (``too_large``) whatever exception litellm wraps it in: the call's task
is started in ``capped_context`` (the caller's context, the ticket set in a copy of it).

Each verifier has one session per event loop it judges on (aiohttp sessions belong to their
loop), made on its first judge call there and closed by ``Verifier.aclose`` (and the
``run_sync`` loop's shutdown). Limits: a route that takes neither keeps litellm's own,
uncapped client; with ``litellm.disable_aiohttp_transport`` (httpx transport) no session is
used; a judge that is not ``LiteLLMJudge`` reads as it likes. The judgement's deadline still
bounds such answers, their verdict is parsed off the loop, and a text longer than the cap is
unreadable unparsed (``JudgeReply.verdict``).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import sys
import weakref
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

MAX_ANSWER_BYTES = 1024 * 1024
"""The most bytes of one judge answer's body that are read (a verdict needs a few KB)."""


@dataclass
class CallTicket:
    """What the cap did during one judge call."""

    too_large: bool = False


_TICKET: contextvars.ContextVar[CallTicket | None] = contextvars.ContextVar(
    "replyguard_answer_ticket", default=None
)
# Every capped session alive (weakly held), so that ``close_every_session`` can find them.
_ALL: weakref.WeakSet[Any] = weakref.WeakSet()


def _trip() -> None:
    ticket = _TICKET.get()
    if ticket is not None:
        ticket.too_large = True


def capped_context(ticket: CallTicket) -> contextvars.Context:
    """The context to start one judge call's task in: a copy of the current one, where
    ``ticket`` says whether the call's answer passed the cap. Only the call's task (and what
    it starts) reads the ticket, so nothing is set, nor kept to reset, in the caller's: a turn
    holds no token and no context manager while its judge call is in flight."""
    context = contextvars.copy_context()
    context.run(_TICKET.set, ticket)
    return context


@functools.cache
def _classes() -> tuple[type[Exception], type[Any]]:
    """The exception and response classes, built on first use (aiohttp comes with litellm)."""
    import aiohttp

    class AnswerTooLarge(aiohttp.ClientPayloadError):
        """The judge's answer passed ``MAX_ANSWER_BYTES``."""

    class CappedReader:
        """The response body's reader, refusing to hand out more than the cap."""

        def __init__(self, reader: aiohttp.StreamReader) -> None:
            self._reader = reader

        def __getattr__(self, name: str) -> Any:
            return getattr(self._reader, name)

        def _check(self) -> None:
            if self._reader.total_bytes > MAX_ANSWER_BYTES:
                _trip()
                raise AnswerTooLarge(f"the answer passed {MAX_ANSWER_BYTES} bytes")

        async def read(self, n: int = -1) -> bytes:
            if n < 0:  # read in pieces, so the cap is checked as the body arrives
                parts = []
                while part := await self.read(64 * 1024):
                    parts.append(part)
                return b"".join(parts)
            self._check()
            data = await self._reader.read(n)
            self._check()
            return data

        async def readany(self) -> bytes:
            return await self.read(64 * 1024)

        async def _pieces(self, n: int) -> AsyncIterator[bytes]:
            while part := await self.read(n):
                yield part

        def iter_chunked(self, n: int) -> AsyncIterator[bytes]:
            return self._pieces(n)

        def iter_any(self) -> AsyncIterator[bytes]:
            return self._pieces(64 * 1024)

    class CappedResponse(aiohttp.ClientResponse):
        async def start(self, connection: Any) -> aiohttp.ClientResponse:
            await super().start(connection)
            length = self.content_length
            if length is not None and length > MAX_ANSWER_BYTES:
                _trip()
                raise AnswerTooLarge(f"the answer is {length} bytes, over {MAX_ANSWER_BYTES}")
            self.content = CappedReader(self.content)  # type: ignore[assignment]  # a proxy
            return self

    return AnswerTooLarge, CappedResponse


class AnswerSessions:
    """One verifier's capped sessions, one per event loop it judged on; ``aclose`` closes the
    running loop's (``Verifier.aclose`` and the ``run_sync`` loop's shutdown call it)."""

    def __init__(self) -> None:
        self._sessions: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = (
            weakref.WeakKeyDictionary()
        )
        self._handlers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = (
            weakref.WeakKeyDictionary()
        )

    def loops(self) -> list[asyncio.AbstractEventLoop]:
        """The event loops with a session of this verifier's."""
        return list(self._sessions)

    def session(self, litellm: Any) -> Any | None:
        """The running loop's capped session (made on first use), or None when litellm does
        not use aiohttp (``disable_aiohttp_transport``)."""
        if getattr(litellm, "disable_aiohttp_transport", False):
            return None
        loop = asyncio.get_running_loop()
        session = self._sessions.get(loop)
        if session is None or session.closed:
            session = self._sessions[loop] = _new_session(litellm)
        return session

    def handler(self, session: Any, timeout: float) -> Any:
        """litellm's own HTTP handler over ``session`` (the running loop's capped session,
        ``session()``), for the routes that take a ``client`` and ignore ``shared_session``
        (Anthropic's)."""
        loop = asyncio.get_running_loop()
        handler = self._handlers.get(loop)
        if handler is None or getattr(handler, "shared_session", None) is not session:
            from litellm.llms.custom_httpx.http_handler import AsyncHTTPHandler

            handler = self._handlers[loop] = AsyncHTTPHandler(
                timeout=timeout, shared_session=session
            )
        return handler

    async def aclose(self) -> None:
        """Close the running loop's session (and handler), if one was made."""
        loop = asyncio.get_running_loop()
        handler = self._handlers.pop(loop, None)
        if handler is not None:
            await handler.close()
        session = self._sessions.pop(loop, None)
        if session is not None and not session.closed:
            await session.close()


# litellm's own sessions' connection pool, from its constants (read from the environment at its
# import): a session of aiohttp's defaults holds at most 100 connections, so a burst of judge
# calls queued behind them where litellm's own client would have sent them all at once.
_POOL_SETTINGS = (
    ("keepalive_timeout", "AIOHTTP_KEEPALIVE_TIMEOUT", 15),
    ("ttl_dns_cache", "AIOHTTP_TTL_DNS_CACHE", 300),
    ("limit", "AIOHTTP_CONNECTOR_LIMIT", 1000),
    ("limit_per_host", "AIOHTTP_CONNECTOR_LIMIT_PER_HOST", 500),
)


def _pool(litellm: Any) -> dict[str, Any]:
    """The connector's pool settings as litellm sets its own (a limit of 0 or less: aiohttp's)."""
    constants = getattr(litellm, "constants", None)
    settings = {
        keyword: getattr(constants, name, default) for keyword, name, default in _POOL_SETTINGS
    }
    for limit in ("limit", "limit_per_host"):
        if not isinstance(settings[limit], int) or settings[limit] <= 0:
            del settings[limit]
    return settings


def _new_session(litellm: Any) -> Any:
    import aiohttp  # litellm's dependency, imported only here

    _, response_class = _classes()
    session = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(ssl=_ssl(litellm), **_pool(litellm)),
        response_class=response_class,
        cookie_jar=aiohttp.DummyCookieJar(),
        trust_env=bool(getattr(litellm, "aiohttp_trust_env", False)),
    )
    _ALL.add(session)
    return session


def _ssl(litellm: Any) -> Any:
    """litellm's own SSL configuration (its CA bundle, ``ssl_verify``), or aiohttp's default."""
    try:
        from litellm.llms.custom_httpx.http_handler import get_ssl_configuration

        return get_ssl_configuration()
    except Exception:  # an older or newer litellm: aiohttp's default verification
        return True


async def close_every_session() -> None:
    """Close every verifier's capped session of the running loop (for a one-shot command, or a
    test's teardown; a verifier closes its own with ``aclose``)."""
    loop = asyncio.get_running_loop()
    for session in list(_ALL):
        if getattr(session, "_loop", None) is loop and not session.closed:
            await session.close()


def is_too_large(exc: BaseException) -> bool:
    """Whether ``exc`` (or what it wraps) is the cap refusing an answer."""
    if "aiohttp" not in sys.modules:
        return False
    too_large = _classes()[0]
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, too_large):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False
