"""Clocks for tests where time is the behaviour, chosen so that a busy machine cannot fail them.

- ``Ticker``: how long the event loop was held, as the CPU time its own thread spent between
  two wake-ups of a task that sleeps 5 ms (``time.thread_time``). Work that holds the loop
  without yielding (parsing 50 MB on it, a blocking read) costs the loop's thread CPU time, or
  a blocked system call's wait, the same on an idle and a loaded machine; waiting for a CPU
  that other processes hold costs it nothing. The wall-clock lateness of the same wake-ups is
  kept too (``late``), for the bound of a deadline.
- ``Witness``: a timer set for the same moment as a deadline under test, on the same loop.
  When the machine is busy it fires late by as much as the deadline's own timer does, so a
  bound of "deadline + slack + how late the witness fired" holds under any load and still
  fails when the code under test does not keep its deadline at all.

A blocked system call (a read of a hung disk) shows in ``late`` and not in ``stall``: tests of
those use a ``Witness`` or events instead.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

PERIOD = 0.005


class Ticker:
    """A task that wakes every 5 ms; ``stall`` is the most CPU time the loop's thread spent
    between two wake-ups (the loop's longest hold, give or take one tick's own work), ``late``
    the most a wake-up came after it was due, by the wall clock."""

    def __init__(self) -> None:
        self.stall = 0.0
        self.late = 0.0
        self._cpu = time.thread_time()
        self._wall = time.monotonic()

    async def run(self) -> None:
        while True:
            await asyncio.sleep(PERIOD)
            self.mark()

    def reset(self) -> None:
        """Forget what happened so far (set-up, warm-up): measure from now."""
        self.stall = self.late = 0.0
        self._cpu, self._wall = time.thread_time(), time.monotonic()

    def mark(self) -> None:
        cpu, wall = time.thread_time(), time.monotonic()
        self.stall = max(self.stall, cpu - self._cpu)
        self.late = max(self.late, wall - self._wall - PERIOD)
        self._cpu, self._wall = cpu, wall

    async def stopped(self) -> float:
        """The longest stall, counting the stretch up to now."""
        await asyncio.sleep(0)
        self.mark()
        return self.stall


@asynccontextmanager
async def ticking() -> AsyncIterator[Ticker]:
    """A ``Ticker`` running on the current loop for the block's duration."""
    ticker = Ticker()
    task = asyncio.create_task(ticker.run())
    try:
        yield ticker
    finally:
        task.cancel()


class Witness:
    """A timer that fires ``seconds`` after it is made, on the running loop; ``lateness`` is how
    long after that it actually ran (0 until it has)."""

    def __init__(self, seconds: float) -> None:
        loop = asyncio.get_running_loop()
        self.due = loop.time() + seconds
        self.lateness = 0.0
        self.fired = False
        self._handle = loop.call_at(self.due, self._fire)

    def _fire(self) -> None:
        self.lateness = max(asyncio.get_running_loop().time() - self.due, 0.0)
        self.fired = True

    def cancel(self) -> None:
        self._handle.cancel()


class Timed:
    """``async with Timed(deadline) as t:`` times the block by the loop's clock, with a
    ``Witness`` set for ``deadline``; ``t.within(slack)`` says whether the block ended within
    ``deadline + slack`` plus however late the witness fired (the machine's own delay)."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.seconds = 0.0
        self._witness: Witness | None = None

    async def __aenter__(self) -> Timed:
        loop = asyncio.get_running_loop()
        self._witness = Witness(self.deadline)
        self._started = loop.time()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.seconds = asyncio.get_running_loop().time() - self._started
        assert self._witness is not None
        self._witness.cancel()

    @property
    def late(self) -> float:
        """How late the witness fired (0 when the block ended before the deadline)."""
        return 0.0 if self._witness is None else self._witness.lateness

    def within(self, slack: float) -> bool:
        return self.seconds <= self.deadline + slack + self.late
