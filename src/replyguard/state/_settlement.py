"""``Settlements``: hand judgements' tickets back to Redis, on the turn's path or off it.

A ticket whose breaker has news is settled on the turn's path (the next judgement must know).
Spend alone is settled in a task of the running loop; one that loop drops (``asyncio.run``
returning, a careless host's closed loop) lands from a thread of its own, on a loop and a Redis
connection of that thread's own. Redis counts a settlement once, even one sent twice. Only a
process already exiting (no new threads) leaves one unsettled: ``shared_spend_unsettled``, once.
"""

from __future__ import annotations

import asyncio
import functools
import threading

from replyguard.state._health import RedisHealth, background
from replyguard.state._redis import RedisState
from replyguard.state._ticket import Ticket
from replyguard.telemetry._events import Events

__all__ = ["Settlements"]

_UNSETTLED = (
    "the process was exiting with a spend settlement cut off from its event loop: this"
    " instance counted its cost, the fleet's spend did not (its reservation expires by itself)"
)


class Settlements:
    """The Redis settlements of one verifier's tickets (see module doc)."""

    def __init__(
        self, redis: RedisState, health: RedisHealth, timeout: float, events: Events
    ) -> None:
        """``timeout``: the bound of each Redis call, in seconds (``timeoutMs``)."""
        self._redis = redis
        self._health = health
        self._timeout = timeout
        self._events = events
        self._lock = threading.Lock()
        self._warned_unsettled = False
        self.tasks: set[asyncio.Task[None]] = set()
        """The background settlements in flight, on any loop."""

    async def now(self, reports: dict[str, bool], ticket: Ticket, cost: float) -> None:
        """Settle the breaker's ``reports`` and the ticket's spend on Redis, bounded by
        ``timeoutMs``. A failure is Redis's health's to judge; never raises but for
        cancellation."""
        try:
            async with asyncio.timeout(self._timeout):
                await self._redis.settle(reports, ticket.reservation, cost)
        except Exception as exc:
            self._health.failed(exc)

    def later(self, ticket: Ticket, cost: float) -> None:
        """Settle the ticket's spend on Redis in a task of the running loop; one that the
        loop's end cancels (``asyncio.run`` returning) lands from a thread of its own."""
        task = background(self._in_background(ticket, cost))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        task.add_done_callback(functools.partial(self._cut_off, ticket, cost))

    async def settled(self) -> None:
        """Wait until this loop's background settlements have landed (each bounded by
        ``timeoutMs``)."""
        loop = asyncio.get_running_loop()
        settling = [t for t in list(self.tasks) if t.get_loop() is loop]
        if settling:
            await asyncio.wait(settling)

    def _cut_off(self, ticket: Ticket, cost: float, task: asyncio.Task[None]) -> None:
        if task.cancelled():
            self._elsewhere(ticket, cost)

    async def _in_background(self, ticket: Ticket, cost: float) -> None:
        """A spend settlement off the turn's path. One dropped, pending, with its closed
        loop lands from a thread of its own (a cancelled one too: ``_cut_off``)."""
        try:
            await self.now({}, ticket, cost)
        except GeneratorExit:
            self._elsewhere(ticket, cost)
            raise

    def _elsewhere(self, ticket: Ticket, cost: float) -> None:
        """Settle on a loop and a Redis connection of a new thread's own, closed after (each
        call bounded by ``timeoutMs``), whatever became of the loop the settlement was
        made on. Only a process past starting threads (exiting) logs it as unsettled."""

        def settle() -> None:
            asyncio.run(self._alone(ticket, cost))

        try:  # not a daemon: a process that exits waits for it (bounded by timeoutMs)
            threading.Thread(target=settle, name="replyguard-settlement").start()
        except RuntimeError:  # the interpreter is shutting down
            self._unsettled(cost)

    async def _alone(self, ticket: Ticket, cost: float) -> None:
        try:
            await self.now({}, ticket, cost)
        finally:
            await self._redis.aclose()  # this thread's loop's client

    def _unsettled(self, cost: float) -> None:
        with self._lock:
            warned, self._warned_unsettled = self._warned_unsettled, True
        if not warned:
            self._events.warning("shared_spend_unsettled", cost_usd=cost, note=_UNSETTLED)
