"""What a judge call is held at against the spend limits: a realistic estimate, learnt from
the calls of this instance, with one unmeasured call at a time.

A worst case (the prompt, and ``max_tokens`` out, at the price map's prices) is 7 to 30 times
what a judge call really costs: held for every call in flight, it let a limit worth 25 calls
admit 3 of 150 simultaneous turns, and a limit worth 3 calls none. And a model the price map
does not know had no worst case at all: held at nothing, 20 concurrent turns spent 8 times the
limit. So each chain of judge models (a verifier's, a run kind's, a panel member's) keeps the
costs of its recent calls here, each with the prompt's size: a call is held at the most any of
them cost, scaled up to its own prompt when that is larger. A chain with none measured yet
sends one call at a time (its *scout*, held at the price of its prompt alone, nothing when the
model is unpriced); the others wait for its cost, which is then known. So what a window can
spend beyond its limit is what the calls in flight cost beyond their estimates: at most the
one scout per instance, unless calls come to cost more than any recent call did.

Thread-safe, and serves every event loop: a waiting call is woken on its own loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import deque
from dataclasses import dataclass, field

__all__ = ["HISTORY", "CallCost", "Estimates"]


@dataclass(frozen=True)
class CallCost:
    """What is known of a judge call's cost before it is made."""

    chain: tuple[str, ...]
    """The judge models it may go to, in order (its estimates are learnt per chain)."""
    prompt_tokens: int
    """The prompt's size in tokens (counted, or bounded)."""
    prompt_only: float
    """The price map's price of the prompt alone (nothing for an unpriced model)."""


HISTORY = 16
"""How many recent calls of a chain its estimate is taken from."""


@dataclass
class _Chain:
    seen: deque[tuple[int, float]] = field(default_factory=lambda: deque(maxlen=HISTORY))
    """Recent calls: the prompt's tokens (at least 1) and what the call cost."""
    scouting: bool = False
    """A call with nothing measured before it is in flight."""
    waiting: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = field(
        default_factory=list
    )


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class Estimates:
    """The recent costs of each chain of judge models of one verifier."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._chains: dict[tuple[str, ...], _Chain] = {}

    def _chain(self, call: CallCost) -> _Chain:
        return self._chains.setdefault(call.chain, _Chain())

    async def hold(self, call: CallCost) -> tuple[float, bool]:
        """What to hold for ``call``, and whether it is its chain's scout (then ``measured``
        must follow, whatever becomes of it). Waits while another call is the scout."""
        while True:
            with self._lock:
                chain = self._chain(call)
                if chain.seen:
                    tokens = max(call.prompt_tokens, 1)
                    return max(cost * max(1.0, tokens / seen) for seen, cost in chain.seen), False
                if not chain.scouting:
                    chain.scouting = True
                    return call.prompt_only, True
                loop = asyncio.get_running_loop()
                woken: asyncio.Future[None] = loop.create_future()
                chain.waiting.append((loop, woken))
            try:
                await woken
            finally:
                with self._lock:
                    if (loop, woken) in chain.waiting:
                        chain.waiting.remove((loop, woken))

    def measured(self, call: CallCost, cost: float | None, *, scout: bool) -> None:
        """A call of ``call``'s chain ended: ``cost`` is what it cost (None: unknown, no
        answer came); a scout's end lets the calls waiting for it go."""
        with self._lock:
            chain = self._chain(call)
            if cost is not None:
                chain.seen.append((max(call.prompt_tokens, 1), max(cost, 0.0)))
            if not scout:
                return
            chain.scouting = False
            waiting, chain.waiting = chain.waiting, []
        for loop, woken in waiting:
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits there now
                loop.call_soon_threadsafe(_wake, woken)
