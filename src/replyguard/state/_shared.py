"""``SharedState``: admit and settle judgements against the spend limits and (with ``state``)
the fleet's circuit breaker, on Redis when it answers, on this process's own state when not.

Redis trouble never blocks a turn. Each Redis call is bounded by ``timeoutMs`` (and the time
the judgement has left); when one fails (down, hung, credentials refused) this process uses its
own state, logs one ``shared_state_unavailable`` warning (at most one a minute) and stops
asking Redis: a background ping every ``RETRY_SECONDS`` finds it again, without a turn waiting
for it. A judgement decided on local state carries ``degraded`` (the ledger's
``"sharedState": "degraded"``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
import time
from collections.abc import Coroutine, Sequence
from typing import Any

from replyguard.config._schema import VerifierConfig
from replyguard.config._state import SpendLimit
from replyguard.state._estimates import CallCost, Estimates
from replyguard.state._local import LocalSpend
from replyguard.state._redis import RedisState, scope_digest
from replyguard.state._ticket import Ticket
from replyguard.telemetry._events import Events, describe_error

__all__ = ["RETRY_SECONDS", "SharedState"]

RETRY_SECONDS = 1.0
"""How often Redis is pinged while it is known to be unavailable."""
WARNING_INTERVAL = 60.0
"""At most one ``shared_state_unavailable`` warning in this many seconds."""
RESERVATION_MARGIN = 10.0
"""How much longer than the judgement's timeout an unsettled reservation lives."""
_PER_INSTANCE = (
    "spend limits and the circuit breaker hold per instance (not fleet-wide) until Redis is back"
)

_ONE_CALL = (
    "Redis refused one call (it answered): that judgement was decided on this instance's own"
    " state; Redis is still asked for every other"
)

_UNSETTLED = (
    "the process was exiting with a spend settlement cut off from its event loop: this"
    " instance counted its cost, the fleet's spend did not (its reservation expires by itself)"
)


def binding_limits(limits: Sequence[SpendLimit]) -> tuple[SpendLimit, ...]:
    """One limit per counter (scope and window): entries of the same scope and window count
    the same spend, so only the lowest of them can ever refuse a judgement. (Each kept its own
    count before, on one key: every cost was counted once per entry.)"""
    lowest: dict[tuple[str, str], SpendLimit] = {}
    for limit in limits:
        kept = lowest.setdefault((limit.scope, limit.window), limit)
        if limit.usd < kept.usd:
            lowest[(limit.scope, limit.window)] = limit
    return tuple(lowest.values())


def _background(work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
    """A task of the running loop for ``work``, which ends by itself (bounded by
    ``timeoutMs``). A loop closed while it is pending drops it: it says so itself, so asyncio's
    "Task was destroyed but it is pending!" is turned off for it."""
    task = asyncio.get_running_loop().create_task(work)
    # A documented-in-code attribute of asyncio's Task (C and Python): its destroy warning.
    task._log_destroy_pending = False  # type: ignore[attr-defined]
    return task


class SharedState:
    """The spend limits and the shared breaker of one verifier (see module doc)."""

    def __init__(self, config: VerifierConfig, events: Events) -> None:
        """``config.state`` must be resolvable (``Verifier`` checks it first)."""
        self._limits = binding_limits(config.spend_limits)
        self._events = events
        self._local = LocalSpend()
        self._estimates = Estimates()
        self._redis: RedisState | None = None
        self._timeout = 0.0
        prefix = "replyguard:"
        if config.state is not None:
            prefix = config.state.key_prefix
            self._timeout = config.state.timeout_ms / 1000
            self._redis = RedisState(
                config.state.resolve_url(),
                prefix=prefix,
                timeout=self._timeout,
                failure_threshold=config.circuit_breaker.failure_threshold,
                cooldown_seconds=config.circuit_breaker.cooldown_seconds,
            )
        self._bases = tuple(
            f"{prefix}spend-v2:{limit.scope}:{limit.window}" for limit in self._limits
        )
        self._lock = threading.Lock()
        self._down_until: float | None = None  # time.monotonic; None: Redis is answering
        self._warned_at: float | None = None
        self._error_at: float | None = None
        self._pings: set[asyncio.Task[None]] = set()
        self._settling: set[asyncio.Task[None]] = set()
        self._warned_unsettled = False

    @property
    def shared(self) -> bool:
        """Whether a Redis is configured (the breaker is then the fleet's)."""
        return self._redis is not None

    def redis_down(self) -> bool:
        """Whether Redis is known to be unavailable now: no turn asks it then (nor does the
        judge Router, which routes on its local state meanwhile)."""
        return self._down_until is not None

    def _counters(
        self, agent_id: str | None, run_kind: str | None
    ) -> tuple[tuple[SpendLimit, str, str], ...]:
        """Each limit with its counter's base key and this turn's value of its scope (its
        digest: any string, whatever it holds, is 32 hex digits there)."""
        values = {"global": "", "agentId": agent_id or "", "runKind": run_kind or ""}
        return tuple(
            (limit, base, scope_digest(values[limit.scope]))
            for limit, base in zip(self._limits, self._bases, strict=True)
        )

    async def admit(
        self,
        models: Sequence[str],
        *,
        agent_id: str | None,
        run_kind: str | None,
        call: CallCost | None,
        timeout_seconds: float,
        time_left: float,
    ) -> Ticket:
        """One judgement's ticket: the breaker's decisions (with Redis), the limit it would
        pass or the spend held for it (``call``'s estimate: ``Estimates.hold``, which may wait
        for its chain's first measured call). At most one round trip, bounded by ``timeoutMs``
        and ``time_left``; never raises but for cancellation."""
        counters = self._counters(agent_id, run_kind)
        estimate, scout = 0.0, False
        if counters and call is not None:
            until = time.monotonic() + time_left
            estimate, scout = await self._estimates.hold(call)
            time_left = max(until - time.monotonic(), 0.001)
        try:
            ticket = await self._admitted(models, counters, estimate, timeout_seconds, time_left)
        except BaseException:
            if call is not None and scout:
                self._estimates.measured(call, None, scout=True)
            raise
        if counters:
            ticket.call, ticket.scout = call, scout
        return ticket

    async def _admitted(
        self,
        models: Sequence[str],
        counters: tuple[tuple[SpendLimit, str, str], ...],
        estimate: float,
        timeout_seconds: float,
        time_left: float,
    ) -> Ticket:
        local_keys = tuple((limit, f"{base}:{value}") for limit, base, value in counters)
        ttl = timeout_seconds + RESERVATION_MARGIN
        if self._redis is not None:
            if not self._redis.loaded:  # once: like litellm's import, not Redis's time
                async with asyncio.timeout(time_left):
                    await self._redis.load()
            if self._available():
                bound = max(min(self._timeout, time_left), 0.0)
                try:
                    async with asyncio.timeout(bound):
                        decisions, refused, held = await self._redis.admit(
                            models, counters, estimate, ttl
                        )
                except TimeoutError as exc:
                    if bound >= self._timeout:  # else the turn's time ran out, not Redis's
                        self._unavailable(exc)
                except Exception as exc:
                    self._failed(exc)
                else:
                    self._answered()
                    mirror = self._local.hold(local_keys, estimate, ttl) if held else None
                    return Ticket(
                        decisions=decisions,
                        refused=counters[refused - 1][0] if refused else None,
                        reservation=held,
                        shared=True,
                        mirror=mirror,
                    )
        limit, held = self._local.reserve(local_keys, estimate, ttl) if counters else (None, None)
        degraded = self._redis is not None
        return Ticket(refused=limit, reservation=held, degraded=degraded)

    def _measured(self, ticket: Ticket, cost: float | None) -> float:
        """Tell the estimates what the ticket's call cost (once); what to count."""
        call, ticket.call = ticket.call, None
        if call is not None:
            self._estimates.measured(call, cost, scout=ticket.scout)
        return cost or 0.0

    async def settle(self, ticket: Ticket, cost: float | None) -> None:
        """Hand a judgement's ticket back: its breaker reports and its real ``cost`` (None:
        no answer came, nothing is known). At most one round trip (none when there is
        nothing to say), awaited only when the breaker has news (a failure, or the answer of
        a failing or probed model): spend alone is settled in the background. Never raises
        but for cancellation."""
        cost = self._measured(ticket, cost)
        if not ticket.shared:
            self._local.settle(ticket.reservation, cost)
            return
        self._local.settle(ticket.mirror, cost)
        reports = ticket.pending_reports()
        if self._redis is None or (not reports and ticket.reservation is None):
            return
        if not self._available():
            return  # the reservation expires by itself
        if reports:  # the breaker must know before the next judgement asks
            await self._settle_on_redis(reports, ticket, cost)
            return
        # Spend alone: off the turn's path (the reservation holds until it lands).
        self._in_background(ticket, cost)

    def _in_background(self, ticket: Ticket, cost: float) -> None:
        """Settle the ticket's spend on Redis in a task of the running loop; one that the
        loop's end cancels (``asyncio.run`` returning) lands from a thread of its own."""
        task = _background(self._settle_in_background(ticket, cost))
        self._settling.add(task)
        task.add_done_callback(self._settling.discard)
        task.add_done_callback(functools.partial(self._cut_off, ticket, cost))

    def _cut_off(self, ticket: Ticket, cost: float, task: asyncio.Task[None]) -> None:
        if task.cancelled():
            self._settle_elsewhere(ticket, cost)

    async def _settle_on_redis(self, reports: dict[str, bool], ticket: Ticket, cost: float) -> None:
        assert self._redis is not None
        try:
            async with asyncio.timeout(self._timeout):
                await self._redis.settle(reports, ticket.reservation, cost)
        except Exception as exc:
            self._failed(exc)

    async def _settle_in_background(self, ticket: Ticket, cost: float) -> None:
        """A spend settlement off the turn's path. One dropped, pending, with its closed
        loop lands from a thread of its own (a cancelled one too: ``_cut_off``)."""
        try:
            await self._settle_on_redis({}, ticket, cost)
        except GeneratorExit:
            self._settle_elsewhere(ticket, cost)
            raise

    def _settle_elsewhere(self, ticket: Ticket, cost: float) -> None:
        """Settle on a loop and a Redis connection of a new thread's own, closed after (each
        call bounded by ``timeoutMs``), whatever became of the loop the settlement was
        made on. Redis counts a settlement once, even one sent twice (the first may have
        landed before its loop ended). Only a process past starting threads (exiting) logs
        it as unsettled."""

        def settle() -> None:
            asyncio.run(self._settle_alone(ticket, cost))

        try:  # not a daemon: a process that exits waits for it (bounded by timeoutMs)
            threading.Thread(target=settle, name="replyguard-settlement").start()
        except RuntimeError:  # the interpreter is shutting down
            self._unsettled(cost)

    async def _settle_alone(self, ticket: Ticket, cost: float) -> None:
        assert self._redis is not None
        try:
            await self._settle_on_redis({}, ticket, cost)
        finally:
            await self._redis.aclose()  # this thread's loop's client

    def _unsettled(self, cost: float) -> None:
        with self._lock:
            warned, self._warned_unsettled = self._warned_unsettled, True
        if not warned:
            self._events.warning(
                "shared_spend_unsettled",
                cost_usd=cost,
                note=_UNSETTLED,
            )

    def abandon(self, ticket: Ticket, cost: float | None) -> None:
        """Settle without waiting (a cancelled turn): this process's own state now, the
        spend on Redis in the background (the breaker's reports are dropped)."""
        cost = self._measured(ticket, cost)
        if ticket.shared:
            self._local.settle(ticket.mirror, cost)
            if ticket.reservation is not None and self._redis is not None:
                self._in_background(ticket, cost)
        else:
            self._local.settle(ticket.reservation, cost)

    # -- Redis's availability ------------------------------------------------------------

    def _available(self) -> bool:
        """Whether to ask Redis now; while it is known down, start a background ping when due."""
        with self._lock:
            down_until = self._down_until
            if down_until is None:
                return True
            if time.monotonic() < down_until or self._pings:
                return False
            self._down_until = time.monotonic() + RETRY_SECONDS
        task = _background(self._ping())
        self._pings.add(task)
        task.add_done_callback(self._pings.discard)
        return False

    async def _ping(self) -> None:
        assert self._redis is not None
        try:
            async with asyncio.timeout(self._timeout):
                await self._redis.ping()
        except Exception as exc:
            self._unavailable(exc)
        else:
            self._answered()

    def _answered(self) -> None:
        with self._lock:
            was_down, self._down_until = self._down_until is not None, None
        if was_down:
            self._events.info("shared_state_restored", note="limits are fleet-wide again")

    def _failed(self, exc: Exception) -> None:
        """A Redis call failed: Redis is down when it could not be reached; an error reply (one
        key's ``WRONGTYPE``, say) fails only this call, which is then decided on this
        instance's own state, and is logged (at most once a minute) as
        ``shared_state_error``: every other judgement still asks Redis."""
        assert self._redis is not None
        if self._redis.is_outage(exc):
            self._unavailable(exc)
            return
        now = time.monotonic()
        with self._lock:
            warn = self._error_at is None or now - self._error_at >= WARNING_INTERVAL
            if warn:
                self._error_at = now
        if warn:
            error = describe_error(exc, self._events.secrets) if str(exc) else type(exc).__name__
            self._events.warning("shared_state_error", error=error, note=_ONE_CALL)

    def _unavailable(self, exc: BaseException) -> None:
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

    async def warmup(self, within: float = 5.0) -> None:
        """Import redis-py off the event loop and open this loop's connection (``within``
        seconds, not ``timeoutMs``), so the first judgement pays for neither. A Redis that
        does not answer is known down from here on (and pinged again in the background)."""
        if self._redis is None:
            return
        await self._redis.load()
        try:
            async with asyncio.timeout(within):
                await self._redis.ping()
        except Exception as exc:
            self._unavailable(exc)

    async def settled(self) -> None:
        """Wait until this loop's background settlements have landed (each bounded by
        ``timeoutMs``)."""
        loop = asyncio.get_running_loop()
        settling = [t for t in list(self._settling) if t.get_loop() is loop]
        if settling:
            await asyncio.wait(settling)

    async def aclose(self) -> None:
        """Let this loop's settlements land, stop its pings and close its Redis client."""
        await self.settled()
        loop = asyncio.get_running_loop()
        for task in [t for t in list(self._pings) if t.get_loop() is loop]:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self._redis is not None:
            await self._redis.aclose()
