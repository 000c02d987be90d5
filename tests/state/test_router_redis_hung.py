"""A judge ``router`` on the fleet's Redis, with that Redis paused (SIGSTOP): every turn still
reaches the healthy provider and is judged. The Router's own Redis calls (litellm keeps its
rpm and tpm counters there) are each bounded by ``timeoutMs``, and none is made while Redis is
known down: those judgements route on a local Router, which has no Redis, and say so
(``shared_state == "degraded"``, the ledger's ``"sharedState": "degraded"``).

The bounds are proven against ``timeoutMs``, never against a figure of this machine's: a call
to a paused Redis cannot return before ``timeoutMs``, so a turn faster than that made none.
``timeoutSeconds`` is below litellm's own bound of a Redis call (5 s), so a Router call left
to that bound shows as ``judge_timeout``, and well above what the bounded calls may take.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import os
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import API_KEY, SecretsGuard
from replyguard import Outcome, Status, Turn, Verifier, VerifierConfig
from replyguard.state import _health
from replyguard.testing import ScriptedAgent, capture_events
from support.provider_server import ProviderServer, Seen, Step
from support.redis_server import REDIS_PASSWORD, RedisServer, redis_server

TIMEOUT_MS = 800
"""``state.timeoutMs``: the least a call to the paused Redis takes, and the most it may."""
JUDGEMENT_SECONDS = 4.5
"""``timeoutSeconds``: under litellm's default Redis timeout (5 s), over a few ``timeoutMs``."""
STRATEGIES = ("simple-shuffle", "usage-based-routing-v2")


@pytest.fixture
def own_redis() -> Iterator[RedisServer]:
    """A redis-server of this test's own, to pause (``stop`` resumes it first)."""
    with redis_server(REDIS_PASSWORD) as server:
        yield server


@pytest.fixture(autouse=True)
def litellm_scrubs_its_debug_records(secrets_guard: SecretsGuard) -> Iterator[None]:
    """litellm logs its Redis settings (the URL, password and all) in a DEBUG record's
    arguments as it builds the fleet's Router. The filters litellm puts on its logger scrub
    them when that logger is at DEBUG (``test_fleet``'s password test runs it so); below that
    level the record goes nowhere, and only the guard, which makes every record, sees it
    unscrubbed. Those are forgiven; any other leak still fails the test."""
    yield
    leaks = secrets_guard.forgive()
    unscrubbed = [(leak.logger, leak.level, leak.where) for leak in leaks]
    assert set(unscrubbed) <= {("LiteLLM", logging.DEBUG, "args")}, leaks


@pytest.fixture
def answering(provider: ProviderServer) -> ProviderServer:
    """The healthy judge: PASS to every request."""
    provider.respond_with(lambda seen: Step(text="PASS"))
    return provider


def routed_config(
    redis: RedisServer, provider: ProviderServer, tmp_path: Path, strategy: str
) -> VerifierConfig:
    deployment = {
        "modelName": "judge",
        "model": "openai/gpt-4o-mini",
        "apiBase": f"{provider.url}/v1",
        "apiKey": API_KEY,
        "rpm": 10_000,
        "tpm": 100_000_000,
    }
    return VerifierConfig.from_dict(
        {
            "enabled": True,
            "verifyAll": True,
            "model": "judge",
            "agentModel": "anthropic/claude-sonnet-4-5",
            "timeoutSeconds": JUDGEMENT_SECONDS,
            "router": {"deployments": [deployment], "routingStrategy": strategy},
            "state": {"redisUrl": redis.url(), "timeoutMs": TIMEOUT_MS},
            "ledgerPath": str(tmp_path / "ledger.jsonl"),
        }
    )


async def run_turn(verifier: Verifier) -> Outcome:
    return await verifier.run(ScriptedAgent(["Done: sent."]), Turn(user_message="Send it."))


def judged(outcome: Outcome) -> tuple[Status, str | None, str | None]:
    """Status, reason, and whether the judgement was decided on local state."""
    shared_state = outcome.verdicts[-1].shared_state if outcome.verdicts else "no verdict"
    return outcome.status, outcome.reason, shared_state


PASSED_DEGRADED = (Status.PASSED, None, "degraded")
PASSED_SHARED = (Status.PASSED, None, None)


def _counted(redis: RedisServer) -> int:
    import redis as redis_py

    client = redis_py.Redis.from_url(redis.url())
    try:
        keys = list(client.scan_iter("global_router:*:rpm:*"))
        return sum(int(float(client.get(key) or 0)) for key in keys)
    finally:
        client.close()


async def routed_requests(redis: RedisServer, *, expected: int, within: float = 5.0) -> int:
    """The requests the fleet's Router counted on Redis (its rpm counters, every minute's),
    once they are ``expected`` or ``within`` seconds have passed."""
    until = time.monotonic() + within
    while (counted := await asyncio.to_thread(_counted, redis)) != expected:
        if time.monotonic() > until:
            break
        await asyncio.sleep(0.02)
    return counted


def unavailable(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["event"] == "shared_state_unavailable"]


def ledger_states(config: VerifierConfig) -> list[str | None]:
    text = Path(config.ledger_path or "").read_text()
    return [json.loads(line).get("sharedState") for line in text.splitlines()]


@pytest.mark.parametrize("strategy", STRATEGIES)
async def test_turns_after_redis_pauses_are_judged_on_local_routing_state(
    own_redis: RedisServer, answering: ProviderServer, tmp_path: Path, strategy: str
) -> None:
    config = routed_config(own_redis, answering, tmp_path, strategy)
    verifier = Verifier(config)
    try:
        assert judged(await run_turn(verifier)) == PASSED_SHARED
        assert await routed_requests(own_redis, expected=1) == 1
        own_redis.pause()
        try:
            with capture_events() as events:
                outcomes = [await run_turn(verifier) for _ in range(5)]
        finally:
            own_redis.resume()
        # Read before anything else routes on Redis: what the paused Redis was sent is
        # carried out once it runs again, so a Router call of those turns would count here.
        counted = await routed_requests(own_redis, expected=1)
    finally:
        await verifier.aclose()
    assert [judged(o) for o in outcomes] == [PASSED_DEGRADED] * 5
    assert len(answering.seen) == 6  # every turn reached the provider
    # The first found Redis hung (its admission waited timeoutMs); the later ones waited on
    # no Redis call, the Router's included: each would have taken timeoutMs at least.
    assert [o.latency_ms < TIMEOUT_MS for o in outcomes[1:]] == [True] * 4
    assert counted == 1  # the fleet's counters never heard of the degraded turns
    (warning,) = unavailable(events)
    assert "per instance" in warning["note"]
    assert ledger_states(config) == [None] + ["degraded"] * 5


async def test_a_verifier_warmed_up_while_redis_is_paused_routes_locally_until_it_answers(
    own_redis: RedisServer,
    answering: ProviderServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The fleet's Router is not built while Redis is known down (its construction would ask
    the paused Redis on the event loop); once Redis answers it is, and counts there."""
    monkeypatch.setattr(_health, "RETRY_SECONDS", 0.02)  # ping a Redis known down every 20 ms
    config = routed_config(own_redis, answering, tmp_path, "usage-based-routing-v2")
    verifier = Verifier(config)
    own_redis.pause()
    try:
        try:
            await verifier.warmup()  # finds Redis hung (within timeoutMs): known down
            outcomes = [await run_turn(verifier) for _ in range(3)]
        finally:
            own_redis.resume()
        until, after = time.monotonic() + 10, []
        while not after or judged(after[-1]) != PASSED_SHARED:
            assert time.monotonic() < until, "the verifier never went back to Redis"
            after.append(await run_turn(verifier))
            await asyncio.sleep(0.01)
        counted = await routed_requests(own_redis, expected=1)
    finally:
        await verifier.aclose()
    assert [judged(o) for o in outcomes] == [PASSED_DEGRADED] * 3
    assert [o.latency_ms < TIMEOUT_MS for o in outcomes] == [True] * 3
    assert [judged(o) for o in after[:-1]] == [PASSED_DEGRADED] * (len(after) - 1)
    assert len(answering.seen) == 3 + len(after)
    assert counted == 1  # the one turn routed on Redis, by the Router built then


@pytest.mark.parametrize("strategy", STRATEGIES)
async def test_a_redis_that_hangs_during_a_routed_judgement_holds_it_timeoutms_a_call(
    own_redis: RedisServer, provider: ProviderServer, tmp_path: Path, strategy: str
) -> None:
    """Redis stops while the judge answers the second turn: that judgement's Router calls
    to Redis after the answer (its rpm and tpm counts) each end at ``timeoutMs``, and the
    turn is judged; the next turn finds Redis hung and routes locally."""

    def answer(seen: Seen) -> Step:
        if len(provider.seen) == 2:
            own_redis.pause()
        return Step(text="PASS")

    provider.respond_with(answer)
    config = routed_config(own_redis, provider, tmp_path, strategy)
    verifier = Verifier(config)
    try:
        try:
            outcomes = [await run_turn(verifier) for _ in range(4)]
        finally:
            own_redis.resume()
    finally:
        await verifier.aclose()
    assert judged(outcomes[0]) == PASSED_SHARED
    assert outcomes[1].status is Status.PASSED and outcomes[1].reason is None
    assert [judged(o) for o in outcomes[2:]] == [PASSED_DEGRADED] * 2
    assert outcomes[3].latency_ms < TIMEOUT_MS
    assert len(provider.seen) == 4


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def _connected(redis: RedisServer) -> int:
    import redis as redis_py

    client = redis_py.Redis.from_url(redis.url())
    try:
        return int(client.info("clients")["connected_clients"]) - 1  # not this one
    finally:
        client.close()


async def redis_connections(redis: RedisServer, *, within: float = 10.0) -> int:
    """The connections the Redis serves (this test's own aside), once none is left or
    ``within`` seconds have passed (a paused Redis sees a close once it runs again)."""
    until = time.monotonic() + within
    connected = await asyncio.to_thread(_connected, redis)
    while connected and time.monotonic() < until:
        await asyncio.sleep(0.05)
        connected = await asyncio.to_thread(_connected, redis)
    return connected


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts /proc/self/fd")
async def test_a_long_pause_under_concurrent_turns_leaves_no_connection_behind(
    own_redis: RedisServer, answering: ProviderServer, tmp_path: Path
) -> None:
    """Turns 20 at a time while Redis stays paused: the fleet's Router, left alone meanwhile
    (litellm's own background work still tries Redis, and gives up after ``timeoutMs``), does
    not pile up connections, and ``aclose`` closes every Redis connection the verifier's
    Routers and shared state opened (``usage-based-routing-v2`` keeps a client of its own)."""
    config = routed_config(own_redis, answering, tmp_path, "usage-based-routing-v2")
    verifier = Verifier(config)

    async def batches(count: int) -> list[Outcome]:
        outcomes: list[Outcome] = []
        for _ in range(count):
            outcomes += await asyncio.gather(*(run_turn(verifier) for _ in range(20)))
        return outcomes

    try:
        warm = await batches(2)  # on Redis (a loaded machine may miss timeoutMs in a few)
        assert {o.status for o in warm} == {Status.PASSED}
        assert PASSED_SHARED in {judged(o) for o in warm}
        own_redis.pause()
        try:
            first = await batches(5)  # the local Router's connections to the provider
            during = open_descriptors()
            later = await batches(10)
            after = open_descriptors()
        finally:
            own_redis.resume()
    finally:
        await verifier.aclose()
    paused = Counter(judged(o) for o in first + later)
    assert set(paused) == {PASSED_DEGRADED}, paused
    assert len(answering.seen) == 40 + 300
    # A descriptor a turn (or one every 20 turns) would be 200 (10) more here; litellm's
    # retries of Redis in the background and the provider's connections hold a few at any
    # moment.
    assert after - during < 10, (during, after)
    # litellm's native Redis client (the Router's counters) has no close of its own: its
    # connection goes when the retired Router is collected.
    gc.collect()
    assert await redis_connections(own_redis) == 0
