"""The shared state on Redis: one Lua script admits a judgement (breaker and spend limits in
one round trip), another settles it (one more round trip, skipped when there is nothing to
say). Both read Redis's own clock (``TIME``), so instances never disagree about time.

Keys, all under ``keyPrefix``::

    {prefix}breaker:{model}                          hash: f failures, o open until (ms),
                                                     p probe in flight until (ms)
    {prefix}spend-v2:{scope}:{window}:{start}:{digest}
                                                     settled USD of one window (a float)
    {prefix}spend-v2:{scope}:{window}:{start}:{digest}:held
                                                     sorted set of reservations
                                                     ("id|amount", scored by expiry in ms)

``{digest}`` is ``scope_digest`` of the scope's value (the agent id, the run kind): 32 hex
digits whatever the value holds (``:``, ``{``, ``}``, ``held``, any unicode, any length), so
no value can reach another counter's key, its reservations' key, or past the prefix. (Before,
values were written as they were: agent ``acme:held``'s counter was agent ``acme``'s
reservations, and Redis answered ``WRONGTYPE``.)

The breaker follows ``replyguard.judge._breaker``'s states fleet-wide: ``failureThreshold``
failures in a row (counted by every instance together) open a model's circuit for every
instance; after the cool-down the first judgement to ask becomes the one probe of the fleet
(only for the first model of its chain that is not closed, and only when no earlier model is
closed); its success closes the circuit, its failure re-opens it, and a probe that never
reports expires after one more cool-down.

redis-py's clients belong to the event loop they were made on: one client per loop.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib
import threading
import uuid
import weakref
from collections.abc import Sequence
from typing import Any

from replyguard.config._state import SpendLimit
from replyguard.state._ticket import Decision, Reservation

__all__ = ["RedisState", "scope_digest"]


def scope_digest(value: str) -> str:
    """A scope's value as it stands in a key: 32 hex digits of its BLAKE2b hash (of its UTF-8
    bytes; a lone surrogate is encoded as it is, so two strings never share a digest)."""
    return hashlib.blake2b(value.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


_ADMIT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local prefix, cooldown = ARGV[1], tonumber(ARGV[2])
local n, i = tonumber(ARGV[3]), 4
local codes, allowed, probe = {}, false, nil
for m = 1, n do
  local key = prefix .. 'breaker:' .. ARGV[i]
  i = i + 1
  local v = redis.call('HMGET', key, 'f', 'o', 'p')
  local f, o, p = tonumber(v[1]) or 0, tonumber(v[2]) or 0, tonumber(v[3]) or 0
  local code = 0
  if o == 0 then
    code = (f == 0) and 1 or 2
    allowed = true
  elseif now >= o and p <= now and not allowed and not probe then
    code = 3
    probe = key
  end
  codes[m] = code
end
if not allowed and not probe then
  return {codes, 0, {}}
end
local limits, estimate = tonumber(ARGV[i]), tonumber(ARGV[i + 1])
local member, ttl = ARGV[i + 2], tonumber(ARGV[i + 3])
i = i + 4
local keys = {}
for l = 1, limits do
  local base, secs, usd, value = ARGV[i], tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2]), ARGV[i + 3]
  i = i + 4
  local key = base .. ':' .. (math.floor(now / 1000 / secs) * secs) .. ':' .. value
  local held_key = key .. ':held'
  redis.call('ZREMRANGEBYSCORE', held_key, '-inf', now)
  local spent = tonumber(redis.call('GET', key) or '0')
  local held = 0
  for _, entry in ipairs(redis.call('ZRANGE', held_key, 0, -1)) do
    held = held + tonumber(string.match(entry, '|(.*)$'))
  end
  if spent + held >= usd or spent + held + estimate > usd then
    return {codes, l, {}}
  end
  keys[l] = {key, held_key, secs}
end
local names = {}
for l = 1, limits do
  local key, held_key, secs = keys[l][1], keys[l][2], keys[l][3]
  redis.call('ZADD', held_key, now + ttl, member)
  redis.call('PEXPIRE', held_key, secs * 1000 + ttl)
  names[l] = key
end
if probe then
  redis.call('HSET', probe, 'p', now + cooldown)
end
return {codes, 0, names, now + ttl}
"""

_SETTLE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local prefix, cooldown = ARGV[1], tonumber(ARGV[2])
local threshold, life = tonumber(ARGV[3]), tonumber(ARGV[4])
local n, i = tonumber(ARGV[5]), 6
for m = 1, n do
  local key, answered = prefix .. 'breaker:' .. ARGV[i], ARGV[i + 1]
  i = i + 2
  if answered == '1' then
    redis.call('DEL', key)
  else
    local f = redis.call('HINCRBY', key, 'f', 1)
    local o = tonumber(redis.call('HGET', key, 'o') or '0')
    if o == 0 then
      if f >= threshold then redis.call('HSET', key, 'o', now + cooldown) end
    elseif now >= o then
      redis.call('HSET', key, 'o', now + cooldown, 'p', 0)
    end
    redis.call('PEXPIRE', key, life)
  end
end
local limits, member, cost = tonumber(ARGV[i]), ARGV[i + 1], ARGV[i + 2]
local expires = tonumber(ARGV[i + 3])
i = i + 4
for l = 1, limits do
  local key, secs = ARGV[i], tonumber(ARGV[i + 1])
  i = i + 2
  -- Once: a reservation still held is settled now; one gone before it expires was settled
  -- already (a settlement sent again after its first reply was lost); one gone after, expired.
  if redis.call('ZREM', key .. ':held', member) == 1 or now >= expires then
    redis.call('INCRBYFLOAT', key, cost)
    redis.call('EXPIRE', key, secs + 3600)
  end
end
return 1
"""


def _usd(amount: float) -> str:
    """An amount as Redis and Lua read it (no exponent)."""
    return f"{amount:.12f}"


def _import_redis() -> None:
    importlib.import_module("redis.asyncio")
    importlib.import_module("redis.backoff")


POOL_SIZE = 100
"""Connections to Redis per event loop, at most (redis-py's default)."""

_CODES: dict[int, Decision] = {0: "refused", 1: "closed", 2: "failing", 3: "probe"}


class RedisState:
    """The Lua scripts on one Redis URL, a client per event loop."""

    def __init__(
        self,
        url: str,
        *,
        prefix: str,
        timeout: float,
        failure_threshold: int,
        cooldown_seconds: float,
    ) -> None:
        self._url = url
        self._prefix = prefix
        self._timeout = timeout
        self._threshold = failure_threshold
        self._cooldown_ms = max(int(cooldown_seconds * 1000), 1)
        self._loaded = False
        self._lock = threading.Lock()
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = (
            weakref.WeakKeyDictionary()
        )

    @property
    def loaded(self) -> bool:
        """Whether redis-py's import has finished (it takes about 0.15 s)."""
        return self._loaded

    async def load(self) -> None:
        """Import redis-py off the event loop (not counted against ``timeoutMs``); concurrent
        callers each wait in a thread on the import lock, never on the loop."""
        if not self._loaded:
            await asyncio.to_thread(_import_redis)
            self._loaded = True

    def _client(self) -> Any:
        """This loop's client and scripts (made on first use: no connection before)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            found = self._clients.get(loop)
            if found is None:
                import redis.asyncio
                from redis.asyncio.retry import Retry
                from redis.backoff import NoBackoff

                # A blocking pool: a burst of more judgements than it has connections waits
                # for one (within timeoutMs), where a plain pool raised "Too many
                # connections", which marked Redis down.
                pool = redis.asyncio.BlockingConnectionPool.from_url(
                    self._url,
                    max_connections=POOL_SIZE,
                    timeout=None,
                    socket_timeout=self._timeout,
                    socket_connect_timeout=self._timeout,
                    retry=Retry(NoBackoff(), 0),
                    retry_on_timeout=False,
                )
                client = redis.asyncio.Redis.from_pool(pool)
                found = (client, client.register_script(_ADMIT), client.register_script(_SETTLE))
                self._clients[loop] = found
            return found

    async def admit(
        self,
        models: Sequence[str],
        limits: Sequence[tuple[SpendLimit, str, str]],
        estimate: float,
        ttl: float,
    ) -> tuple[dict[str, Decision], int, Reservation | None]:
        """One round trip: each model's decision, the 1-based index of the limit passed (0:
        none), and the reservation made (None when refused or without limits)."""
        _, admit, _ = self._client()
        member = f"{uuid.uuid4().hex}|{_usd(estimate)}"
        args: list[Any] = [self._prefix, self._cooldown_ms, len(models), *models]
        args += [len(limits), _usd(estimate), member, max(int(ttl * 1000), 1)]
        for limit, base, value in limits:
            args += [base, limit.seconds, _usd(limit.usd), value]
        codes, refused, names, *expires = await admit(args=args)
        decisions = {model: _CODES[int(code)] for model, code in zip(models, codes, strict=True)}
        if refused or not names:
            return decisions, int(refused), None
        windows = tuple(
            (name.decode() if isinstance(name, bytes) else str(name), limit.seconds)
            for name, (limit, _, _) in zip(names, limits, strict=True)
        )
        return decisions, 0, Reservation(member, estimate, windows, int(expires[0]))

    async def settle(
        self, reports: dict[str, bool], reservation: Reservation | None, cost: float
    ) -> None:
        """One round trip: the breaker hears each report, the reservation becomes ``cost``."""
        _, _, settle = self._client()
        life = max(self._cooldown_ms * 4, 3_600_000)
        args: list[Any] = [self._prefix, self._cooldown_ms, self._threshold, life, len(reports)]
        for model, answered in reports.items():
            args += [model, "1" if answered else "0"]
        windows = reservation.windows if reservation is not None else ()
        member = reservation.member if reservation is not None else ""
        expires = reservation.expires_ms if reservation is not None else 0
        args += [len(windows), member, _usd(cost), expires]
        for name, seconds in windows:
            args += [name, seconds]
        await settle(args=args)

    @staticmethod
    def is_outage(exc: BaseException) -> bool:
        """Whether ``exc`` says Redis is unreachable (no connection, no answer in time, the
        credentials refused), not that one command failed there (an error reply such as
        ``WRONGTYPE``, ``OOM`` or ``NOPERM``: Redis answered)."""
        import redis.exceptions as errors

        unreachable = (OSError, TimeoutError, errors.ConnectionError, errors.TimeoutError)
        return isinstance(exc, unreachable)

    async def ping(self) -> None:
        """One round trip that proves Redis answers (and accepts the credentials)."""
        client, _, _ = self._client()
        await client.ping()

    async def aclose(self) -> None:
        """Close the running loop's client (the others are dropped with their loops)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            found = self._clients.pop(loop, None)
        if found is not None:
            await found[0].aclose()
