"""An agent's streamed reply, read piece by piece.

``open_stream`` calls the agent (as ``call_agent`` would: a sync callable in the verifier's
agent threads) and gives an async iterator of what it streams: ``str`` deltas, litellm /
OpenAI stream chunks (``ModelResponseStream``, ``ChatCompletionChunk``, or their dict form),
and, after the text, a ``RunMeta`` or ``Reply`` carrying the metadata a non-streaming agent
returns. An agent that returns a plain ``str`` or ``Reply`` streams it as one piece; one that
returns a sync iterator is read in the agent threads, piece by piece.

``Collected`` keeps one attempt's text and what the stream said about it: the finish reason,
tool calls asked for (a stream that ends in one is a tool-call step), the usage and cost of the
final chunk, and the metadata yielded at the end (which wins over what the chunks said).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import functools
import inspect
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from replyguard.runner._agents import Agent, Messages, StreamingAgent, copy_messages
from replyguard.runner._threads import ThreadPool
from replyguard.types import Reply, RunMeta

_END = object()


async def open_stream(
    agent: StreamingAgent | Agent, messages: Messages, pool: ThreadPool
) -> AsyncIterator[Any]:
    """Call ``agent`` on a copy of ``messages``; what it streams, as an async iterator."""
    private = copy_messages(messages)
    direct = (
        inspect.iscoroutinefunction(agent)
        or inspect.isasyncgenfunction(agent)
        or inspect.iscoroutinefunction(getattr(agent, "__call__", None))  # noqa: B004
        or inspect.isasyncgenfunction(getattr(agent, "__call__", None))  # noqa: B004
    )
    if direct:
        result: Any = agent(private)
    else:
        result = await pool.call(agent, private)
    if inspect.isawaitable(result):
        result = await result
    if hasattr(result, "__anext__"):
        return result  # type: ignore[no-any-return]
    if hasattr(result, "__aiter__"):
        return result.__aiter__()  # type: ignore[no-any-return]
    if isinstance(result, str | Reply):
        return _one(result)
    if hasattr(result, "__iter__") and not isinstance(result, bytes | dict):
        return _threaded(iter(result), pool)
    raise TypeError(
        f"a streaming agent must return an async iterator of text, not {type(result).__name__}"
    )


async def _one(value: str | Reply) -> AsyncIterator[Any]:
    yield value


async def _threaded(iterator: Iterator[Any], pool: ThreadPool) -> AsyncIterator[Any]:
    """A sync iterator read in the agent threads, so a blocking ``next`` never blocks the loop.
    Closed at the end, in the agent threads too (a generator's ``finally`` may block), without
    waiting for it; if a ``next`` is still running in its thread (the caller cancelled or the
    deadline passed), closed in that thread once it returns, so the cancellation stays one.
    """
    running: concurrent.futures.Future[Any] | None = None
    try:
        while True:
            context = contextvars.copy_context()  # current_turn() in the agent's thread
            step = functools.partial(context.run, next, iterator, _END)
            running = pool.executor().submit(step)
            item = await asyncio.wrap_future(running)
            running = None
            if item is _END:
                return
            yield item
    finally:
        close = getattr(iterator, "close", None)
        if callable(close):
            # The iterator's clean-up runs in the turn's context, as its next calls do.
            closing = functools.partial(_quietly, contextvars.copy_context(), close)
            if running is None:
                _close_in(pool, closing)
            else:  # runs at once if that next has just returned
                running.add_done_callback(lambda _: closing())


def _close_in(pool: ThreadPool, closing: Callable[[], None]) -> None:
    """Close a sync iterator in the agent threads, not waiting for it (here when the pool has
    been shut down meanwhile)."""
    try:
        pool.executor().submit(closing)
    except RuntimeError:  # the pool was shut down (Verifier.aclose) under the turn
        closing()


def _quietly(context: contextvars.Context, close: Callable[[], Any]) -> None:
    """Close a sync iterator in ``context``; one that fails to close is left to its owner."""
    with contextlib.suppress(Exception):
        context.run(close)


CLOSE_SECONDS = 1.0
"""The longest an agent's stream is waited for to close (``aclose``); then it is left to its
owner and the turn goes on."""
CLOSE_FLOOR = 0.1
"""The least time a stream gets to close, even past the turn's deadline (a provider stream
closes in a few milliseconds)."""


def close_within(time_left: float | None) -> float:
    """How long to wait for a stream to close with ``time_left`` seconds to the turn's
    deadline (None: no deadline): what is left, at least ``CLOSE_FLOOR``, at most
    ``CLOSE_SECONDS``."""
    if time_left is None:
        return CLOSE_SECONDS
    return min(CLOSE_SECONDS, max(time_left, CLOSE_FLOOR))


async def close_stream(stream: Any, *, within: float = CLOSE_SECONDS) -> bool:
    """Close an agent's stream (its provider call with it): ``aclose``, else ``close``, waiting
    at most ``within`` seconds (a close still running then is cancelled). A stream that fails
    to close, or does not close in time, is left to its owner: the turn goes on. Returns False
    when the close ran out of time.

    The close runs in the caller's task, never in one of its own: a stream holding anyio cancel
    scopes (httpx's, pydantic-ai's) must be closed in the task that iterated it. A close that
    swallows its cancellation therefore holds the turn: no deadline can end it.

    A caller's cancellation that arrives while the close runs still ends the close at once
    and propagates; one that came before (the close runs in the ``finally`` of a cancelled
    read) gets the same bounded close.
    """
    try:
        aclose = getattr(stream, "aclose", None)
        close = aclose if callable(aclose) else getattr(stream, "close", None)
        if callable(close):
            result = close()
            if inspect.isawaitable(result):
                bound = asyncio.timeout(max(within, 0.0))
                try:
                    async with bound:
                        await result
                except TimeoutError:
                    if bound.expired():
                        return False
                    raise
    except Exception:  # the stream's own error: it is left to its owner
        pass
    return True


def _field(value: Any, name: str) -> Any:
    """``value[name]`` of a dict, else the attribute ``name`` (None when absent). A pydantic
    model's field is read from where pydantic keeps it (litellm's chunks keep theirs among the
    extras), never through ``__getattr__``: on litellm's objects that takes microseconds."""
    if isinstance(value, dict):
        return value.get(name)
    extra = getattr(value, "__pydantic_extra__", None)
    if extra and name in extra:
        return extra[name]
    own = getattr(value, "__dict__", None)
    if own is not None and name in own:
        return own[name]
    if hasattr(type(value), "__pydantic_fields__"):
        return None  # a model without it
    return getattr(value, name, None)


def _fields(value: Any, first: str, second: str) -> tuple[Any, Any]:
    """``(_field(value, first), _field(value, second))``, the extras looked up once for both
    (a litellm chunk's choice and delta keep their fields there; every piece reads two of each)."""
    if isinstance(value, dict):
        return value.get(first), value.get(second)
    extra = getattr(value, "__pydantic_extra__", None)
    if extra and first in extra and second in extra:
        return extra[first], extra[second]
    return _field(value, first), _field(value, second)


def _plain(value: Any) -> dict[str, Any] | None:
    """Usage as a plain dict (a pydantic model's dump, a dict's copy)."""
    if value is None:
        return None
    if isinstance(value, dict):
        return dict(value)
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        dumped = dump()
        return dumped if isinstance(dumped, dict) else None
    return None


_TEXT, _META, _REPLY, _CHUNK = "text", "meta", "reply", "chunk"
_KINDS: dict[type, str] = {str: _TEXT}
"""What a streamed item of each class is, decided once per class: an ``isinstance`` of a
pydantic model's class takes about 140 ns, and a stream would ask two of them of every piece."""


def _kind(cls: type) -> str:
    """What an item of class ``cls`` is (as ``isinstance`` finds it), noted in ``_KINDS``."""
    if len(_KINDS) > 256:  # classes made on the fly: the cache stays small
        _KINDS.clear()
        _KINDS[str] = _TEXT
    if issubclass(cls, str):
        kind = _TEXT
    elif issubclass(cls, RunMeta):
        kind = _META
    elif issubclass(cls, Reply):
        kind = _REPLY
    else:
        kind = _CHUNK
    _KINDS[cls] = kind
    return kind


class Collected:
    """One attempt's streamed text and metadata, gathered as the pieces come."""

    __slots__ = ("_calls", "_cost", "_finish", "_given", "_usage", "length", "parts")

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.length = 0
        self._finish: str | None = None
        self._calls: set[Any] = set()
        self._usage: dict[str, Any] | None = None
        self._cost: float | None = None
        self._given: RunMeta | None = None

    def text_of(self, item: Any) -> str:
        """The text ``item`` adds (``""`` for none), noting what else it says."""
        cls = item.__class__  # what ``isinstance`` reads too (a mock's spec, say)
        kind = _KINDS.get(cls) or _kind(cls)
        if kind == _TEXT:
            return item if type(item) is str else str(item)
        if kind == _META:
            self._given = item
            return ""
        if kind == _REPLY:
            self._given = item.meta
            return "" if self.parts else item.text
        choices = _field(item, "choices")
        if not isinstance(choices, list | tuple):
            raise TypeError(
                f"a streaming agent yielded {type(item).__name__}: not text, a stream chunk, "
                "a RunMeta or a Reply"
            )
        if not choices:
            self._chunk_extras(item)  # the final chunk: usage, and litellm's cost
            return ""
        finish, delta = _fields(choices[0], "finish_reason", "delta")
        if finish:
            self._finish = str(finish)
            self._chunk_extras(item)
        if delta is None:
            return ""
        calls, content = _fields(delta, "tool_calls", "content")
        if calls:
            for position, call in enumerate(calls):
                index = _field(call, "index")
                self._calls.add(position if index is None else index)
        return content if isinstance(content, str) else ""

    def _chunk_extras(self, chunk: Any) -> None:
        usage = _plain(_field(chunk, "usage"))
        if not usage:
            return
        self._usage = usage
        costs = [usage.get("cost")]
        private = getattr(chunk, "__pydantic_private__", None)  # litellm's hidden params
        hidden = private.get("_hidden_params") if isinstance(private, dict) else None
        if isinstance(hidden, dict):
            costs.append(hidden.get("response_cost"))
        for cost in costs:
            if isinstance(cost, int | float) and not isinstance(cost, bool) and cost >= 0:
                self._cost = float(cost)

    def add(self, text: str) -> None:
        self.parts.append(text)
        self.length += len(text)

    @property
    def asks_tools(self) -> bool:
        """Whether the stream has asked for a tool call (then it is a tool-call step)."""
        return bool(self._calls)

    @property
    def text(self) -> str:
        return "".join(self.parts)

    def reply(self) -> Reply:
        """The attempt as a ``Reply``: the text so far and the stream's metadata."""
        found: dict[str, Any] = {}
        if self._finish is not None:
            found["stop_reason"] = self._finish
        if self._calls:
            found["pending_tool_calls"] = len(self._calls)
        if self._usage is not None:
            found["usage"] = self._usage
        if self._cost is not None:
            found["cost_usd"] = self._cost
        given = self._given
        if given is not None:
            found.update({name: getattr(given, name) for name in given.model_fields_set})
        return Reply(text=self.text, meta=RunMeta(**found) if found else RunMeta())
