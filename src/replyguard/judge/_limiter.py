"""A concurrency limit shared by every event loop and thread of a verifier.

``asyncio.Semaphore`` belongs to one event loop, but one ``Verifier`` serves the host's loop
and ``run_sync``'s own loop in a background thread at once. ``ConcurrencyLimiter`` keeps its
count under a ``threading.Lock``; a caller that must wait parks on a future of its own loop,
and a released slot is handed straight to the first waiter (FIFO) through
``loop.call_soon_threadsafe``.

Waiting is cancellable (``asyncio.timeout`` around ``slot()``). A slot is never lost: a waiter
that is cancelled while still queued leaves the queue; one cancelled at the very moment a slot
was handed to it passes the slot on; a waiter whose loop has closed is skipped.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import deque
from dataclasses import dataclass, field

__all__ = ["ConcurrencyLimiter"]


@dataclass(eq=False)
class _Waiter:
    future: asyncio.Future[None] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )
    granted: bool = False
    """A released slot was handed to this waiter (set under the limiter's lock)."""


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():  # a cancelled waiter passes its slot on itself
        future.set_result(None)


class _Slot:
    """``ConcurrencyLimiter.slot()``: a plain class, not ``@asynccontextmanager`` (whose
    generator and wrapper cost a turn more than the count itself)."""

    __slots__ = ("_limiter",)

    def __init__(self, limiter: ConcurrencyLimiter) -> None:
        self._limiter = limiter

    async def __aenter__(self) -> None:
        await self._limiter._acquire()

    async def __aexit__(self, *exc_info: object) -> None:
        self._limiter._release()


class ConcurrencyLimiter:
    """At most ``limit`` holders of a slot at once, across event loops and threads."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("limit must be at least 1")
        self._limit = limit
        self._lock = threading.Lock()
        self._in_use = 0
        self._waiters: deque[_Waiter] = deque()
        self._slot = _Slot(self)  # holds no state of its own: one serves every caller

    @property
    def limit(self) -> int:
        """How many slots there are."""
        return self._limit

    @property
    def in_use(self) -> int:
        """Slots held now (a slot handed to a waiter that has not woken yet included)."""
        with self._lock:
            return self._in_use

    @property
    def waiting(self) -> int:
        """Callers queued for a slot."""
        with self._lock:
            return len(self._waiters)

    def slot(self) -> contextlib.AbstractAsyncContextManager[None]:
        """Hold one slot for the ``async with`` body, waiting (FIFO) while none is free (the
        slot is released however the body ends; a wait that is cancelled holds none)."""
        return self._slot

    async def _acquire(self) -> None:
        with self._lock:
            if self._in_use < self._limit and not self._waiters:
                self._in_use += 1
                return
            waiter = _Waiter()
            self._waiters.append(waiter)
        try:
            await waiter.future
        except BaseException:  # cancelled, timed out, or the coroutine closed
            with self._lock:
                granted = waiter.granted
                if not granted and waiter in self._waiters:
                    self._waiters.remove(waiter)
            if granted:  # the slot was handed over as we were cancelled: pass it on
                self._release()
            raise

    def _release(self) -> None:
        with self._lock:
            while self._waiters:
                waiter = self._waiters.popleft()
                try:
                    waiter.future.get_loop().call_soon_threadsafe(_wake, waiter.future)
                except RuntimeError:  # its loop is closed: nobody is left to take the slot
                    continue
                waiter.granted = True  # the slot is its now: ``in_use`` is unchanged
                return
            self._in_use -= 1
