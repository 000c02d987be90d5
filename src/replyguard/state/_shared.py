"""``SharedState``: admit and settle judgements against the spend limits and (with ``state``)
the fleet's circuit breaker, on Redis when it answers, on this process's own state when not.

Redis trouble never blocks a turn. Each Redis call is bounded by ``timeoutMs`` (and the time
the judgement has left); when one fails (down, hung, credentials refused) this process uses its
own state, logs one ``shared_state_unavailable`` warning (at most one a minute) and stops
asking Redis: a background ping every ``RETRY_SECONDS`` finds it again, without a turn waiting
for it (``_health``). A judgement decided on local state carries ``degraded`` (the ledger's
``"sharedState": "degraded"``). Settlements off the turn's path are ``_settlement``'s.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass

from replyguard.config._schema import VerifierConfig
from replyguard.config._state import SpendLimit
from replyguard.state._estimates import CallCost, Estimates
from replyguard.state._health import RedisHealth
from replyguard.state._local import LocalSpend
from replyguard.state._redis import RedisState, scope_digest
from replyguard.state._settlement import Settlements
from replyguard.state._ticket import Ticket
from replyguard.telemetry._events import Events

__all__ = ["RESERVATION_MARGIN", "SharedState", "binding_limits"]

RESERVATION_MARGIN = 10.0
"""How much longer than the judgement's timeout an unsettled reservation lives."""

Counters = tuple[tuple[SpendLimit, str, str], ...]
"""Each binding limit with its counter's base key and this turn's digest of its scope."""


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


@dataclass(frozen=True)
class _Fleet:
    """The fleet's Redis (``state`` configured), its health and its settlements."""

    redis: RedisState
    health: RedisHealth
    settlements: Settlements
    timeout: float
    """The bound of each Redis call, in seconds (``timeoutMs``)."""

    @classmethod
    def of(cls, config: VerifierConfig, events: Events) -> _Fleet | None:
        if config.state is None:
            return None
        timeout = config.state.timeout_ms / 1000
        redis = RedisState(
            config.state.resolve_url(),
            prefix=config.state.key_prefix,
            timeout=timeout,
            failure_threshold=config.circuit_breaker.failure_threshold,
            cooldown_seconds=config.circuit_breaker.cooldown_seconds,
        )
        health = RedisHealth(redis, timeout, events)
        return cls(redis, health, Settlements(redis, health, timeout, events), timeout)


class SharedState:
    """The spend limits and the shared breaker of one verifier (see module doc)."""

    def __init__(self, config: VerifierConfig, events: Events) -> None:
        """``config.state`` must be resolvable (``Verifier`` checks it first)."""
        self._limits = binding_limits(config.spend_limits)
        self._local = LocalSpend()
        self._estimates = Estimates()
        self._fleet = _Fleet.of(config, events)
        prefix = config.state.key_prefix if config.state is not None else "replyguard:"
        self._bases = tuple(
            f"{prefix}spend-v2:{limit.scope}:{limit.window}" for limit in self._limits
        )

    @property
    def shared(self) -> bool:
        """Whether a Redis is configured (the breaker is then the fleet's)."""
        return self._fleet is not None

    def redis_down(self) -> bool:
        """Whether Redis is known to be unavailable now: no turn asks it then (nor does the
        judge Router, which routes on its local state meanwhile)."""
        return self._fleet is not None and self._fleet.health.down()

    def _counters(self, agent_id: str | None, run_kind: str | None) -> Counters:
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
        counters: Counters,
        estimate: float,
        timeout_seconds: float,
        time_left: float,
    ) -> Ticket:
        local_keys = tuple((limit, f"{base}:{value}") for limit, base, value in counters)
        ttl = timeout_seconds + RESERVATION_MARGIN
        fleet = self._fleet
        if fleet is not None:
            if not fleet.redis.loaded:  # once: like litellm's import, not Redis's time
                async with asyncio.timeout(time_left):
                    await fleet.redis.load()
            if fleet.health.available():
                bound = max(min(fleet.timeout, time_left), 0.0)
                try:
                    async with asyncio.timeout(bound):
                        decisions, refused, held = await fleet.redis.admit(
                            models, counters, estimate, ttl
                        )
                except TimeoutError as exc:
                    if bound >= fleet.timeout:  # else the turn's time ran out, not Redis's
                        fleet.health.unavailable(exc)
                except Exception as exc:
                    fleet.health.failed(exc)
                else:
                    fleet.health.answered()
                    mirror = self._local.hold(local_keys, estimate, ttl) if held else None
                    return Ticket(
                        decisions=decisions,
                        refused=counters[refused - 1][0] if refused else None,
                        reservation=held,
                        shared=True,
                        mirror=mirror,
                    )
        limit, held = self._local.reserve(local_keys, estimate, ttl) if counters else (None, None)
        return Ticket(refused=limit, reservation=held, degraded=fleet is not None)

    def _measured(self, ticket: Ticket, cost: float | None) -> float:
        """Tell the estimates what the ticket's call cost (once); what to count."""
        call, ticket.call = ticket.call, None
        if call is not None:
            self._estimates.measured(call, cost, scout=ticket.scout)
        return cost or 0.0

    async def settle(self, ticket: Ticket, cost: float | None, unanswered: float = 0.0) -> None:
        """Hand a judgement's ticket back: its breaker reports and its real ``cost`` (None:
        no answer came, nothing is known), plus what its requests sent and never answered
        are charged (``unanswered``: counted, but no measure of a call's cost for the
        estimates). At most one round trip (none when there is nothing to say), awaited
        only when the breaker has news (a failure, or the answer of a failing or probed
        model): spend alone is settled in the background. Never raises but for
        cancellation."""
        cost = self._measured(ticket, cost) + unanswered
        if not ticket.shared:
            self._local.settle(ticket.reservation, cost)
            return
        self._local.settle(ticket.mirror, cost)
        reports = ticket.pending_reports()
        fleet = self._fleet
        if fleet is None or (not reports and ticket.reservation is None):
            return
        if not fleet.health.available():
            return  # the reservation expires by itself
        if reports:  # the breaker must know before the next judgement asks
            await fleet.settlements.now(reports, ticket, cost)
            return
        # Spend alone: off the turn's path (the reservation holds until it lands).
        fleet.settlements.later(ticket, cost)

    def abandon(self, ticket: Ticket, cost: float | None, unanswered: float = 0.0) -> None:
        """Settle without waiting (a cancelled turn): this process's own state now, the
        spend on Redis in the background (the breaker's reports are dropped); ``cost`` and
        ``unanswered`` as for ``settle``."""
        cost = self._measured(ticket, cost) + unanswered
        if ticket.shared:
            self._local.settle(ticket.mirror, cost)
            if ticket.reservation is not None and self._fleet is not None:
                self._fleet.settlements.later(ticket, cost)
        else:
            self._local.settle(ticket.reservation, cost)

    async def warmup(self, within: float = 5.0) -> None:
        """Import redis-py off the event loop and open this loop's connection (``within``
        seconds, not ``timeoutMs``), so the first judgement pays for neither. A Redis that
        does not answer is known down from here on (and pinged again in the background)."""
        if self._fleet is not None:
            await self._fleet.health.warmup(within)

    async def settled(self) -> None:
        """Wait until this loop's background settlements have landed (each bounded by
        ``timeoutMs``)."""
        if self._fleet is not None:
            await self._fleet.settlements.settled()

    async def aclose(self) -> None:
        """Let this loop's settlements land, stop its pings and close its Redis client."""
        if self._fleet is None:
            return
        await self._fleet.settlements.settled()
        await self._fleet.health.stop_pings()
        await self._fleet.redis.aclose()
