"""Spend limits kept in this process: the embedded default, and the fallback while Redis is
unavailable (the limits then hold per instance).

Each limit's window has a settled total and the reservations not yet settled; a reservation
expires by itself after its time to live. Windows start at multiples of their length since the
Unix epoch (UTC), so a 1 h window starts on the hour and a 1 d window at midnight UTC.
Thread-safe: every method takes one lock.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from replyguard.config._state import SpendLimit
from replyguard.state._ticket import Reservation

__all__ = ["LocalSpend", "over_limit"]

_ids = itertools.count(1)


def over_limit(spent: float, held: float, estimate: float, usd: float) -> bool:
    """Whether a judgement estimated at ``estimate`` may not be made: the window is used up,
    or the estimate would pass the limit (the same rule as the Redis script's)."""
    return spent + held >= usd or spent + held + estimate > usd


@dataclass
class _Window:
    spent: float = 0.0
    held: dict[str, tuple[float, float]] = field(default_factory=dict)
    """Reservations by member: amount, and when it expires (``time.monotonic``)."""
    ends: float = 0.0
    """When the window ends (Unix time): then it is dropped."""

    def holding(self, now: float) -> float:
        for member in [m for m, (_, until) in self.held.items() if until <= now]:
            del self.held[member]
        return sum(amount for amount, _ in self.held.values())


class LocalSpend:
    """Spend windows of one process."""

    def __init__(
        self,
        *,
        wall: Callable[[], float] = time.time,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._wall = wall
        self._clock = clock
        self._lock = threading.Lock()
        self._windows: dict[str, _Window] = {}

    def _window(self, key: str, seconds: int, now: float) -> tuple[str, _Window]:
        start = int(now // seconds) * seconds
        name = f"{key}:{start}"
        window = self._windows.get(name)
        if window is None:
            window = self._windows[name] = _Window(ends=start + seconds)
        return name, window

    def reserve(
        self,
        limits: Sequence[tuple[SpendLimit, str]],
        estimate: float,
        ttl: float,
    ) -> tuple[SpendLimit | None, Reservation | None]:
        """Hold ``estimate`` in each limit's current window (``limits``: each limit with its
        counter's key), or name the first limit it would pass and hold nothing."""
        with self._lock:
            now, clock = self._wall(), self._clock()
            self._drop_ended(now)
            windows = [(limit, *self._window(key, limit.seconds, now)) for limit, key in limits]
            for limit, _, window in windows:
                if over_limit(window.spent, window.holding(clock), estimate, limit.usd):
                    return limit, None
            return None, self._held(windows, estimate, clock + ttl)

    def hold(
        self, limits: Sequence[tuple[SpendLimit, str]], estimate: float, ttl: float
    ) -> Reservation:
        """Hold ``estimate`` in each limit's current window whatever they hold already: the
        shared state's reservation, mirrored here, so that this process's own totals count
        the judgements in flight should Redis go away."""
        with self._lock:
            now, clock = self._wall(), self._clock()
            self._drop_ended(now)
            windows = [(limit, *self._window(key, limit.seconds, now)) for limit, key in limits]
            return self._held(windows, estimate, clock + ttl)

    @staticmethod
    def _held(
        windows: Sequence[tuple[SpendLimit, str, _Window]], estimate: float, until: float
    ) -> Reservation:
        member = f"local-{next(_ids)}"
        for _, _, window in windows:
            window.held[member] = (estimate, until)
        names = tuple((name, limit.seconds) for limit, name, _ in windows)
        return Reservation(member, estimate, names)

    def settle(self, reservation: Reservation | None, cost: float) -> None:
        """Release a reservation of this process's and count the real ``cost`` instead."""
        if reservation is None:
            return
        with self._lock:
            for name, _ in reservation.windows:
                window = self._windows.get(name)
                if window is not None:
                    window.held.pop(reservation.member, None)
                    window.spent += cost

    def _drop_ended(self, now: float) -> None:
        ended = [name for name, window in self._windows.items() if window.ends <= now]
        for name in ended:
            del self._windows[name]
