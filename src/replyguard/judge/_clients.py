"""The HTTP clients one verifier owns: its own entries in litellm's client cache.

litellm keeps its HTTP clients (openai SDK clients, its own httpx / aiohttp handlers) in one
process-wide cache, keyed by their settings and event loop, so every caller with the same
settings shares one client; ``litellm.close_litellm_async_clients()`` closes every one of
them and leaves them in the cache, closed, for the next caller to fail on ("Cannot send a
request, as the client has been closed"). No verifier can close that cache without breaking
the others.

A ``ClientScope`` gives one verifier clients of its own. While it calls litellm, a context
variable names the scope, and the cache's keys carry that name (the cache's key function is
wrapped once, on that cache object only; outside a scope its keys are what litellm makes).
``aclose`` then closes exactly the scope's entries of the running loop, after the calls in
flight on them have finished, and removes them from the cache; nothing of any other verifier
(or of the host's own litellm calls) is touched. A scope used after ``aclose`` opens new
clients, as litellm always does for a key it has not cached, and logs ``verifier_reopened``
once per ``aclose``.

A scope's clients made on an event loop other than the one ``aclose`` runs on (a loop of the
caller's own ``asyncio.run`` elsewhere) cannot be closed from there: ``close_loop`` closes
them as their own loop shuts down (``replyguard._loop_ends``). The ``run_sync`` loop is
closed by the verifier itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import itertools
import threading
import weakref
from typing import Any

from replyguard.judge._answer_cap import AnswerSessions
from replyguard.telemetry._events import Events, describe_error

_SCOPE: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "replyguard_client_scope", default=None
)
_MARK = "#replyguard-scope="
_WRAPPED = "_replyguard_scoped_keys"
_scope_ids = itertools.count(1)


def _cache(litellm: Any) -> Any:
    """litellm's client cache, its key function wrapped to add the current scope (once)."""
    cache = getattr(litellm, "in_memory_llm_clients_cache", None)
    if cache is None or getattr(cache, _WRAPPED, False):
        return cache
    keyed = getattr(cache, "update_cache_key_with_event_loop", None)
    if keyed is None:  # another litellm: its clients stay shared (and are not closed by us)
        return None

    def scoped_key(key: str) -> str:
        base: str = keyed(key)
        scope = _SCOPE.get()
        return base if scope is None else f"{base}{_MARK}{scope}"

    cache.update_cache_key_with_event_loop = scoped_key
    setattr(cache, _WRAPPED, True)
    return cache


class _Calls:
    """Calls in flight on one event loop, by scope generation; an ``asyncio.Event`` for a
    generation only once ``aclose`` waits for its calls (``before``), set as the last ends."""

    def __init__(self) -> None:
        self.counts: dict[int, int] = {}
        self.idle: dict[int, asyncio.Event] = {}

    def enter(self, generation: int) -> None:
        self.counts[generation] = self.counts.get(generation, 0) + 1

    def leave(self, generation: int) -> None:
        left = self.counts[generation] - 1
        if left:
            self.counts[generation] = left
            return
        del self.counts[generation]
        idle = self.idle.pop(generation, None)
        if idle is not None:
            idle.set()

    def before(self, generation: int) -> list[asyncio.Event]:
        """An event per generation before ``generation`` with calls in flight, set once
        they have all ended."""
        waiting = []
        for g in self.counts:
            if g < generation:
                if g not in self.idle:
                    self.idle[g] = asyncio.Event()
                waiting.append(self.idle[g])
        return waiting


class _Using:
    """One call in a scope: counted in flight for its block, the scope's name set.

    Entered by the call's own task (``ModelCalls._call``), around all it does: the name stays
    set for the rest of that task, whose context ends with it, so no token is kept to reset it
    (one object fewer alive per judge call in flight)."""

    __slots__ = ("_calls", "_generation", "_name")

    def __init__(self, calls: _Calls, generation: int, name: str) -> None:
        self._calls, self._generation, self._name = calls, generation, name

    def __enter__(self) -> None:
        self._calls.enter(self._generation)
        _SCOPE.set(self._name)

    def __exit__(self, *exc: object) -> None:
        self._calls.leave(self._generation)


class ClientScope:
    """One verifier's share of litellm's HTTP clients (see the module doc)."""

    def __init__(self, events: Events, *, drain_seconds: float) -> None:
        """``drain_seconds``: the longest ``aclose`` waits for calls in flight (a judgement's
        own deadline bounds them anyway)."""
        self._id = next(_scope_ids)
        self._events = events
        self._drain_seconds = drain_seconds
        self._lock = threading.Lock()
        self._generation = 0
        self._current = self._name(0)
        """The current generation's name (``_name``), made once per generation."""
        self._closed = False
        self._litellm: Any = None
        self._calls: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Calls] = (
            weakref.WeakKeyDictionary()
        )

    def _name(self, generation: int) -> str:
        return f"{self._id}.{generation}"

    def _loop_calls(self) -> _Calls:
        loop = asyncio.get_running_loop()
        with self._lock:
            return self._calls_of(loop)

    def _calls_of(self, loop: asyncio.AbstractEventLoop) -> _Calls:
        """``loop``'s calls in flight (the lock held)."""
        calls = self._calls.get(loop)
        if calls is None:
            calls = self._calls[loop] = _Calls()
        return calls

    def using(self, litellm: Any) -> _Using:
        """Around one litellm call, in the call's own task (a context manager): the clients
        it gets (or makes) are this scope's."""
        _cache(litellm)
        loop = asyncio.get_running_loop()
        with self._lock:
            self._litellm = litellm
            generation, name, reopened = self._generation, self._current, self._closed
            self._closed = False
            calls = self._calls_of(loop)
        if reopened:
            self._events.warning(
                "verifier_reopened",
                detail="used after aclose(): new HTTP clients are opened; aclose() it again",
            )
        return _Using(calls, generation, name)

    def loops(self) -> list[asyncio.AbstractEventLoop]:
        """The event loops this scope has made calls on (and that still exist)."""
        with self._lock:
            return list(self._calls)

    async def aclose(self) -> None:
        """Close this scope's clients of the running loop once its calls there have finished.

        Calls that start meanwhile get new clients (a new generation of the scope) and are not
        waited for.
        """
        with self._lock:
            retired = self._generation = self._generation + 1
            self._current = self._name(retired)
            self._closed = True
        waiting = self._loop_calls().before(retired)
        if waiting:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._drain_seconds):
                    await asyncio.gather(*(event.wait() for event in waiting))
        cache = _cache(self._litellm) if self._litellm is not None else None
        if cache is None:
            return
        await self._close_entries(cache, retired)

    async def close_loop(self) -> None:
        """Close this scope's clients of the running loop, of every generation, as that loop
        shuts down (no call is in flight on it then); the scope stays open: a later call on
        another loop opens clients there without a ``verifier_reopened`` warning."""
        cache = _cache(self._litellm) if self._litellm is not None else None
        if cache is not None:
            with self._lock:
                generations = self._generation + 1
            await self._close_entries(cache, generations)

    async def _close_entries(self, cache: Any, retired: int) -> None:
        """Remove and close this scope's entries of the running loop, of every generation
        before ``retired``."""
        # A key of this loop ends in the loop's token, then the scope's name: make each suffix
        # with the cache's own key function.
        suffixes = []
        for generation in range(retired):
            token = _SCOPE.set(self._name(generation))
            try:
                suffixes.append(cache.update_cache_key_with_event_loop(""))
            finally:
                _SCOPE.reset(token)
        entries, expiries = getattr(cache, "cache_dict", {}), getattr(cache, "ttl_dict", {})
        ours = [key for key in list(entries) if str(key).endswith(tuple(suffixes))]
        for key in ours:
            client = entries.pop(key, None)
            expiries.pop(key, None)
            if client is not None:
                await self._close_client(client)

    async def _close_client(self, client: Any) -> None:
        close = getattr(client, "aclose", None) or getattr(client, "close", None)
        if close is None:
            return
        try:
            result = close()
            if inspect.isawaitable(result):
                await result
        except Exception as exc:  # a client that fails to close is litellm's trouble, not ours
            self._events.debug("http_client_close_failed", error=describe_error(exc))


_RELEASING: set[asyncio.Task[None]] = set()
"""Releases under way (held so that they are not collected while they run)."""


def release_when_collected(owner: object, *parts: ClientScope | AnswerSessions) -> Any:
    """When ``owner`` (a judge) is garbage-collected, close what its ``aclose`` would have:
    each of ``parts`` (its ``ClientScope``, its ``AnswerSessions``) on each event loop it was
    used on that is still running, in a task there. A turn or stream in flight holds its
    verifier, and so its judge, so none is using them then. Without it, litellm's client cache
    keeps such a judge's clients, and their connections to the provider, open for an hour.
    Returns the ``weakref.finalize``."""
    return weakref.finalize(owner, _release, parts)


def _release(parts: tuple[ClientScope | AnswerSessions, ...]) -> None:
    for loop in {loop for part in parts for loop in part.loops()}:
        if loop.is_closed() or not loop.is_running():
            continue  # its clients went with it, or go when it runs its own clean-up
        with contextlib.suppress(RuntimeError):  # closed meanwhile
            loop.call_soon_threadsafe(_start_release, parts)


def _start_release(parts: tuple[ClientScope | AnswerSessions, ...]) -> None:
    task = asyncio.get_running_loop().create_task(_released(parts))
    _RELEASING.add(task)
    task.add_done_callback(_RELEASING.discard)


async def _released(parts: tuple[ClientScope | AnswerSessions, ...]) -> None:
    for part in parts:
        with contextlib.suppress(Exception):
            await part.aclose()
