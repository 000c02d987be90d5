"""What a verifier and its judge hold on an event loop, closed when that loop shuts down.

litellm, aiohttp and redis-py tie their clients to the event loop they were made on. A host
that runs each request in an event loop of its own (``asyncio.run`` per request, as sync web
frameworks do) left a verifier's clients of every finished loop open: litellm's cache keeps
them for its TTL (an hour), each with its connection to the provider and a file descriptor
(measured: 60 such requests, 60 connections still open at the provider, 120 more descriptors).

A loop that shuts down the usual way (the end of ``asyncio.run`` or of an ``asyncio.Runner``,
or ``loop.shutdown_asyncgens()`` before ``loop.close()``) first closes the async generators
started on it. So a verifier starts one on each event loop it runs on, suspended until then,
whose ``finally`` closes the verifier's clients of that loop (``close``). It refers to the
clients, never to the verifier, so it keeps no verifier alive. A loop closed without that
(``loop.close()`` alone) leaves them to litellm's cache, as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable

CLOSE_SECONDS = 5.0
"""The longest a loop's shutdown waits for a verifier's clients there to close (a provider or
a Redis server that stopped answering must not hold up the host's ``asyncio.run``)."""


async def _until_the_loop_ends(close: Callable[[], Awaitable[None]]) -> AsyncIterator[None]:
    try:
        yield
    finally:  # the loop's shutdown closes this generator: the loop still runs here
        with contextlib.suppress(Exception):
            async with asyncio.timeout(CLOSE_SECONDS):
                await close()


class LoopEnds:
    """Runs ``close`` on each event loop ``watch`` was called on, as that loop shuts down."""

    def __init__(self, close: Callable[[], Awaitable[None]]) -> None:
        self._close = close
        self._lock = threading.Lock()
        self._last: weakref.ref[asyncio.AbstractEventLoop] | None = None
        # Each loop's generator, held here as long as the loop exists (a loop holds its async
        # generators weakly): it is closed by the loop's shutdown, not by the collector.
        self._watches: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, AsyncIterator[None]] = (
            weakref.WeakKeyDictionary()
        )

    def watch(self, loop: asyncio.AbstractEventLoop) -> None:
        """Called on ``loop``, running: close this verifier's clients there when it ends."""
        last = self._last
        if last is not None and last() is loop:  # the usual case: one identity check
            return
        hooks = sys.get_asyncgen_hooks()
        with self._lock:
            self._last = weakref.ref(loop)
            if loop in self._watches or hooks.firstiter is None:  # watched; or a loop that
                return  # closes no async generator as it ends: nothing to watch with
            watch = _until_the_loop_ends(self._close)
            self._watches[loop] = watch
        # Its first step, here and now (no task, which a loop ending at once could cancel
        # before it ran): that registers it with the running loop, whose shutdown closes it.
        # The loop's finalizer is not given to it: it would refer to the loop, and the loop
        # would live as long as this verifier (a host's loop dropped unclosed never freed,
        # nor its descriptors). Dropped with its loop, it is simply let go.
        sys.set_asyncgen_hooks(firstiter=hooks.firstiter, finalizer=_let_go)
        try:
            step = watch.asend(None)  # type: ignore[attr-defined]
        finally:
            sys.set_asyncgen_hooks(*hooks)
        with contextlib.suppress(StopIteration):
            step.send(None)


def _let_go(watch: object) -> None:
    """A watch collected with its loop, which never shut down: nothing to close it on."""
