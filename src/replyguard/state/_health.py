"""``RedisHealth``: whether to ask Redis now, and saying so when it stops or starts answering.

A Redis call that could not reach Redis (down, hung past ``timeoutMs``, credentials refused)
marks it unavailable: no turn asks it for ``RETRY_SECONDS``, then a background ping (never a
turn) finds it again. Each change is logged: ``shared_state_unavailable`` (at most once a
minute), ``shared_state_restored``. An error reply (one key's ``WRONGTYPE``, say) fails only
its call: ``shared_state_error``, at most once a minute; Redis is still asked for every other.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Coroutine
from typing import Any

from replyguard.state._redis import RedisState
from replyguard.telemetry._events import Events, describe_error

__all__ = ["RETRY_SECONDS", "WARNING_INTERVAL", "RedisHealth", "background"]

RETRY_SECONDS = 1.0
"""How often Redis is pinged while it is known to be unavailable."""
WARNING_INTERVAL = 60.0
"""At most one ``shared_state_unavailable`` (or ``shared_state_error``) warning in this many
seconds."""

_PER_INSTANCE = (
    "spend limits and the circuit breaker hold per instance (not fleet-wide) until Redis is back"
)
_ONE_CALL = (
    "Redis refused one call (it answered): that judgement was decided on this instance's own"
    " state; Redis is still asked for every other"
)


def background(work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
    """A task of the running loop for ``work``, which ends by itself (bounded by
    ``timeoutMs``). A loop closed while it is pending drops it: it says so itself, so asyncio's
    "Task was destroyed but it is pending!" is turned off for it."""
    task = asyncio.get_running_loop().create_task(work)
    # A documented-in-code attribute of asyncio's Task (C and Python): its destroy warning.
    task._log_destroy_pending = False  # type: ignore[attr-defined]
    return task


class RedisHealth:
    """Whether one verifier's Redis answers (see module doc)."""

    def __init__(self, redis: RedisState, timeout: float, events: Events) -> None:
        """``timeout``: the bound of each Redis call, in seconds (``timeoutMs``)."""
        self._redis = redis
        self._timeout = timeout
        self._events = events
        self._lock = threading.Lock()
        self._down_until: float | None = None  # time.monotonic; None: Redis is answering
        self._warned_at: float | None = None
        self._error_at: float | None = None
        self.pings: set[asyncio.Task[None]] = set()
        """The background pings in flight (at most one at a time)."""

    def down(self) -> bool:
        """Whether Redis is known to be unavailable now."""
        return self._down_until is not None

    def available(self) -> bool:
        """Whether to ask Redis now; while it is known down, start a background ping when due."""
        with self._lock:
            down_until = self._down_until
            if down_until is None:
                return True
            if time.monotonic() < down_until or self.pings:
                return False
            self._down_until = time.monotonic() + RETRY_SECONDS
        task = background(self._ping())
        self.pings.add(task)
        task.add_done_callback(self.pings.discard)
        return False

    async def _ping(self) -> None:
        try:
            async with asyncio.timeout(self._timeout):
                await self._redis.ping()
        except Exception as exc:
            self.unavailable(exc)
        else:
            self.answered()

    def answered(self) -> None:
        """Redis answered a call: it is available (again)."""
        with self._lock:
            was_down, self._down_until = self._down_until is not None, None
        if was_down:
            self._events.info("shared_state_restored", note="limits are fleet-wide again")

    def failed(self, exc: Exception) -> None:
        """A Redis call failed: Redis is down when it could not be reached; an error reply
        fails only this call, which is then decided on this instance's own state, and is
        logged (at most once a minute) as ``shared_state_error``."""
        if self._redis.is_outage(exc):
            self.unavailable(exc)
            return
        now = time.monotonic()
        with self._lock:
            warn = self._error_at is None or now - self._error_at >= WARNING_INTERVAL
            if warn:
                self._error_at = now
        if warn:
            error = describe_error(exc, self._events.secrets) if str(exc) else type(exc).__name__
            self._events.warning("shared_state_error", error=error, note=_ONE_CALL)

    def unavailable(self, exc: BaseException) -> None:
        """Redis could not be reached (``exc``): known down for ``RETRY_SECONDS`` from now."""
        now = time.monotonic()
        with self._lock:
            self._down_until = now + RETRY_SECONDS
            warn = self._warned_at is None or now - self._warned_at >= WARNING_INTERVAL
            if warn:
                self._warned_at = now
        if warn:
            error = describe_error(exc, self._events.secrets) if str(exc) else type(exc).__name__
            if isinstance(exc, TimeoutError):
                error = f"no answer within {self._timeout * 1000:g} ms"
            self._events.warning("shared_state_unavailable", error=error, note=_PER_INSTANCE)

    async def warmup(self, within: float) -> None:
        """Import redis-py off the event loop and open this loop's connection (``within``
        seconds, not ``timeoutMs``). A Redis that does not answer is known down from here on
        (and pinged again in the background)."""
        await self._redis.load()
        try:
            async with asyncio.timeout(within):
                await self._redis.ping()
        except Exception as exc:
            self.unavailable(exc)

    async def stop_pings(self) -> None:
        """Cancel this loop's background pings and wait for them to end."""
        loop = asyncio.get_running_loop()
        for task in [t for t in list(self.pings) if t.get_loop() is loop]:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
