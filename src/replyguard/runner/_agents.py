"""Calling the caller's agent: sync or async, on a private copy of the messages.

A sync agent runs in the verifier's own pool (``agentThreads`` threads,
``replyguard.runner._threads``), not in asyncio's default executor, so slow sync agents queue
behind each other, never in front of the checks' and the host's own work there.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from inspect import CO_COROUTINE
from types import FunctionType
from typing import Any

from replyguard.runner._threads import ThreadPool
from replyguard.types import Reply

Messages = list[dict[str, Any]]
Agent = Callable[[Messages], "Reply | str | Awaitable[Reply | str]"]
"""Takes OpenAI-style messages, returns a ``Reply`` or a ``str`` (sync or async)."""
StreamingAgent = Callable[
    [Messages], "AsyncIterator[Any] | Iterator[Any] | Awaitable[AsyncIterator[Any]] | Reply | str"
]
"""Takes OpenAI-style messages, returns an (async) iterator of text deltas (``str`` or stream
chunks, then optionally a ``RunMeta`` or ``Reply``); a plain ``Agent`` is accepted too."""


def as_reply(value: Any) -> Reply:
    """A ``Reply`` from what an agent returned; anything but a Reply or str is a TypeError."""
    if isinstance(value, Reply):
        return value
    if isinstance(value, str):
        return Reply(text=value)
    raise TypeError(f"the agent must return a Reply or a str, not {type(value).__name__}")


_NESTED = (dict, list)
_LEAVES = frozenset((str, int, float, bool, type(None)))
"""Exact types that never hold a dict or a list, told by one set look-up: ``isinstance`` with
``_NESTED`` on a str, the messages' usual value, costs more than copying a dict (each type
it fails on has the value's ``__class__`` looked up)."""


def _copy(value: Any) -> Any:
    """A plain dict or list copy of ``value`` (a dict or a list), the dicts and lists in it
    copied the same way, anything else kept as it is."""
    if isinstance(value, dict):
        fresh: Any = value.copy() if type(value) is dict else dict(value.items())
        for key, item in value.items():
            if type(item) not in _LEAVES and isinstance(item, _NESTED):
                fresh[key] = _copy(item)
        return fresh
    fresh = list(value)
    for index, item in enumerate(fresh):
        if type(item) not in _LEAVES and isinstance(item, _NESTED):
            fresh[index] = _copy(item)
    return fresh


def copy_any_depth(root: Any) -> Any:
    """``_copy`` without recursion: nesting of any depth, and a cycle copied as a cycle."""
    if not isinstance(root, _NESTED):
        return root
    made: dict[int, Any] = {}  # each container's copy, by the original's id (kept alive by root)
    pending: list[tuple[Any, Any]] = []

    def copy_of(value: Any) -> Any:
        if not isinstance(value, _NESTED):
            return value
        fresh = made.get(id(value))
        if fresh is None:
            fresh = made[id(value)] = {} if isinstance(value, dict) else []
            pending.append((value, fresh))
        return fresh

    top = copy_of(root)
    while pending:
        source, target = pending.pop()
        if isinstance(source, dict):
            for key, item in source.items():
                target[key] = copy_of(item)
        else:
            target.extend(copy_of(item) for item in source)
    return top


def copy_messages(messages: Messages) -> Messages:
    """A deep copy of JSON-like messages, so an agent's edits never reach the caller.

    A plain dict message is copied with ``dict.copy``, and only its values that are a dict or
    a list (content parts, tool calls) are copied recursively; anything else is copied whole.
    Messages nested deeper than the interpreter's recursion limit, or holding a cycle (a
    careless host's, never JSON's), are copied without recursion (it raised RecursionError
    out of ``run`` before the agent was called).
    """
    copied: Messages = []
    try:
        for message in messages:
            if type(message) is dict:  # the usual message: copied here, without a call
                fresh = message.copy()
                for key, value in message.items():
                    if type(value) not in _LEAVES and isinstance(value, _NESTED):
                        fresh[key] = _copy(value)
                copied.append(fresh)
            else:
                copied.append(_copy(message) if isinstance(message, _NESTED) else message)
    except RecursionError:
        return [copy_any_depth(message) for message in messages]
    return copied


def _is_async(agent: Agent) -> bool:
    """Whether calling ``agent`` gives a coroutine to await (an ``async def`` function or
    ``__call__``): a plain function's own flag read at once, anything else asked of
    ``inspect``."""
    if type(agent) is FunctionType and agent.__code__.co_flags & CO_COROUTINE:
        return True
    return inspect.iscoroutinefunction(agent) or inspect.iscoroutinefunction(
        getattr(agent, "__call__", None)  # noqa: B004 - an async __call__ method, not callability
    )


async def call_agent(agent: Agent, messages: Messages, pool: ThreadPool | None = None) -> Reply:
    """Call a sync or async agent on a copy of ``messages``; a sync one runs in a thread of
    ``pool`` (asyncio's default executor without one), in a copy of the caller's context."""
    private = copy_messages(messages)
    if _is_async(agent):
        result: Any = await agent(private)  # type: ignore[misc]
    else:
        if pool is None:
            result = await asyncio.to_thread(agent, private)
        else:
            result = await pool.call(agent, private)
        if inspect.isawaitable(result):
            result = await result
    return as_reply(result)
