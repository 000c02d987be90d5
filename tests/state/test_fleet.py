"""Several instances in separate OS processes share one circuit breaker and one spend limit
through a real redis-server (tests/support/redis_server.py), judging through litellm against
the loopback provider server. With ``state``, the judge Router keeps its rpm counters on the
same Redis, under deployment ids every process derives alike: two instances together never
send a deployment more requests a minute than its ``rpm``."""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from replyguard.config._router import RouterConfig
from support.fleet import Instance, fleet_of
from support.provider_server import ProviderServer, Step
from support.redis_server import REDIS_PASSWORD, RedisServer, redis_server

pytestmark = pytest.mark.timing  # scripts/under_load.sh runs these beside CPU-bound work

_prefixes = itertools.count()


@pytest.fixture(scope="module")
def redis() -> Iterator[RedisServer]:
    """One redis-server for the module's tests (each test uses its own ``keyPrefix``)."""
    with redis_server(REDIS_PASSWORD) as server:
        yield server


@pytest.fixture(scope="module")
def fleet(redis: RedisServer) -> Iterator[list[Instance]]:
    """Three instances, each its own OS process, each warmed up by one judged turn (litellm
    imported, its first call made), so that no test's timing depends on whether an earlier
    test warmed them: a cold instance judges seconds later than a warm one."""
    with fleet_of(3) as instances, ProviderServer(default=Step(text="PASS")) as server:
        for instance in instances:
            instance.send(fleet_config(redis, server), turns=1)
        for instance in instances:
            assert [v["reason"] for v in instance.answer()] == [None]
        yield instances


JUDGE = "openai/gpt-4o-mini"  # priced in litellm's map: $0.15 / $0.60 per million tokens
CALL_COST = 900 * 0.15e-6 + 12 * 0.60e-6  # what the provider's usage (900 in, 12 out) costs


def fleet_config(redis: RedisServer, provider: ProviderServer, **keys: Any) -> dict[str, Any]:
    return {
        "enabled": True,
        "model": JUDGE,
        "apiKey": "sk-test-SECRETKEY-0123456789abcdef",
        "apiBase": f"{provider.url}/v1",
        "state": {
            "redisUrl": redis.url(),
            "keyPrefix": f"fleet-test-{next(_prefixes)}:",
            "timeoutMs": 3000,  # generous: this machine may be busy
        },
        **keys,
    }


def test_an_open_circuit_fails_every_instance_open_even_one_that_never_called(
    redis: RedisServer, fleet: list[Instance]
) -> None:
    with ProviderServer(default=Step(text=None, status=503, body=b'{"error": "down"}')) as server:
        config = fleet_config(redis, server, circuitBreaker={"failureThreshold": 3})
        first, *others = fleet
        first.send(config, turns=3)
        assert [v["reason"] for v in first.answer()] == ["judge_error"] * 3
        for instance in others:
            instance.send(config, turns=2)
        reasons = [v["reason"] for instance in others for v in instance.answer()]
        assert reasons == ["circuit_open"] * 4
        assert len(server.seen) == 3  # the other instances never called the judge


def test_after_the_cooldown_one_probe_goes_for_the_whole_fleet(
    redis: RedisServer, fleet: list[Instance]
) -> None:
    failing = Step(text=None, status=503, body=b'{"error": "down"}')
    # The probe's answer takes longer than the judgement may: it is still in flight while
    # every other judgement of the fleet asks, then fails and re-opens the circuit. It stays
    # in flight 4 s, so an instance that a busy machine starts late still finds it there.
    with ProviderServer([failing], default=Step(text="PASS", delay=30.0)) as server:
        config = fleet_config(
            redis,
            server,
            timeoutSeconds=4,
            circuitBreaker={"failureThreshold": 1, "cooldownSeconds": 0.3},
        )
        fleet[0].send(config, turns=1)
        assert [v["reason"] for v in fleet[0].answer()] == ["judge_error"]
        time.sleep(0.35)  # the cool-down is the behaviour under test
        for instance in fleet:
            instance.send(config, turns=4, concurrency=4)
        reasons = sorted(str(v["reason"]) for instance in fleet for v in instance.answer())
        assert reasons == ["circuit_open"] * 11 + ["judge_timeout"]
        assert len(server.seen) == 2  # the failure, then the fleet's one probe


def test_concurrent_spend_of_the_fleet_stays_within_the_limit_plus_one_call_per_instance(
    redis: RedisServer, fleet: list[Instance]
) -> None:
    import redis as redis_py

    limit = 20 * CALL_COST
    with ProviderServer(default=Step(text="PASS")) as server:
        config = fleet_config(
            redis, server, spendLimits=[{"scope": "global", "window": "1h", "usd": limit}]
        )
        for instance in fleet:
            instance.send(config, turns=16, concurrency=8)
        verdicts = [v for instance in fleet for v in instance.answer()]
    spent = sum(v["cost"] for v in verdicts)
    judged = [v for v in verdicts if v["reason"] is None]
    refused = [v for v in verdicts if v["reason"] == "spend_limit"]
    assert len(judged) + len(refused) == len(verdicts) == 48
    assert refused, "the limit was never reached"
    assert spent <= limit + len(fleet) * CALL_COST
    assert all(v["sharedState"] is None for v in verdicts), verdicts
    # Redis's counter of the window holds exactly what the instances say they spent.
    client = redis_py.Redis.from_url(redis.url())
    prefix = config["state"]["keyPrefix"]
    # The window has one counter, and a sorted set of the reservations still held while the
    # last settlements land in the background; once they all land the set is gone.
    keys = client.keys(f"{prefix}spend-v2:global:1h:*")
    counters = [key for key in keys if not key.endswith(b":held")]
    assert len(counters) == 1, keys
    until = time.monotonic() + 30
    while float(client.get(counters[0]) or 0) != pytest.approx(spent, abs=1e-9):
        assert time.monotonic() < until, "Redis's counter never reached the instances' spend"
        time.sleep(0.01)
    while client.exists(counters[0] + b":held"):
        assert time.monotonic() < until, "a reservation was never settled"
        time.sleep(0.01)
    client.close()


# -- the judge Router on the fleet's Redis -----------------------------------------------------

RPM = 5


def test_a_deployment_has_the_same_id_in_every_process_and_its_key_never_in_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("JUDGE_KEY", "plainvalue-without-key-shape-123")
    judge = {"modelName": "judge", "model": "openai/gpt-4o-mini"}
    section = {
        "deployments": [
            {**judge, "apiKey": "sk-test-SECRETKEY-0123456789abcdef"},
            {**judge, "apiKey": "env:JUDGE_KEY"},
        ]
    }
    first = RouterConfig.model_validate(section, by_alias=True)
    second = RouterConfig.model_validate(section, by_alias=True)
    ids = [
        [d["model_info"]["id"] for d in config.router_arguments(name)[0]["model_list"]]
        for config, name in ((first, "replyguard-a"), (second, "replyguard-b"))
    ]
    assert ids[0] == ids[1]
    assert len(set(ids[0])) == 2
    assert "SECRETKEY" not in "".join(ids[0])


def test_two_processes_never_pass_a_deployments_rpm_together(
    redis: RedisServer, fleet: list[Instance]
) -> None:
    second = datetime.now(UTC).second
    if second >= 55:  # litellm counts per clock minute: stay inside one
        time.sleep(61 - second)
    with ProviderServer(default=Step(text="PASS")) as server:
        config = {
            "enabled": True,
            "model": "judge",
            "router": {
                "deployments": [
                    {
                        "modelName": "judge",
                        "model": "openai/gpt-4o-mini",
                        "apiBase": f"{server.url}/v1",
                        "apiKey": "sk-test-SECRETKEY-0123456789abcdef",
                        "rpm": RPM,
                    }
                ],
                "routingStrategy": "usage-based-routing-v2",
            },
            "state": {"redisUrl": redis.url(), "timeoutMs": 3000},
            # The Router's refusals are not the model's failures: the circuit stays closed.
            "circuitBreaker": {"failureThreshold": 1},
        }
        first, other = fleet[:2]
        first.send(config, turns=RPM - 2)  # most of the minute's requests
        assert [v["reason"] for v in first.answer()] == [None] * (RPM - 2)
        other.send(config, turns=4)
        reasons = [v["reason"] for v in other.answer()]
    # litellm refuses a deployment once one more request would reach its rpm; never past it.
    assert reasons[0] is None
    assert reasons[-1] == "judge_error"  # refused by the Router: a 429 that was never sent
    assert len(server.seen) == RPM - 2 + reasons.count(None) <= RPM


async def test_the_router_gets_the_fleets_redis_without_logging_its_password(
    redis: RedisServer,
) -> None:
    # litellm logs its Redis settings (the URL, password and all) at DEBUG: with its logger at
    # DEBUG, every record reaches handlers (and the secrets guard of conftest) redacted.
    from replyguard import Verifier, VerifierConfig

    config = VerifierConfig.from_dict(
        {
            "router": {"deployments": [{"modelName": "judge", "model": "openai/gpt-4o-mini"}]},
            "model": "judge",
            # Generous: the Router's Redis calls (its first connection too) end at timeoutMs.
            "state": {"redisUrl": redis.url(), "timeoutMs": 3000},
        }
    )
    logger = logging.getLogger("LiteLLM")
    seen: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: seen.append(record.getMessage())  # type: ignore[method-assign]
    level = logger.level
    logger.setLevel(logging.DEBUG)
    logger.addHandler(handler)
    import asyncio

    import redis as redis_py

    watcher = redis_py.Redis.from_url(redis.url())
    before = watcher.info("clients")["connected_clients"]
    try:
        verifier = Verifier(config, preload=False)
        await verifier.warmup()  # builds the Router, which opens its Redis pool
        # Waits, not bounds (a loaded machine may take seconds): its first ping connects in
        # a task of its own.
        deadline = time.monotonic() + 30
        while watcher.info("clients")["connected_clients"] <= before < 1000:
            assert time.monotonic() < deadline, "the Router never connected to Redis"
            await asyncio.sleep(0.02)
        await verifier.aclose()
        # aclose closes the Router's Redis connections too (they were left to the collector,
        # which closed them in whatever later test it ran in, as a ResourceWarning there).
        deadline = time.monotonic() + 30
        while watcher.info("clients")["connected_clients"] > before:
            assert time.monotonic() < deadline, "the Router's Redis connections stayed open"
            await asyncio.sleep(0.02)
    finally:
        watcher.close()
        logger.removeHandler(handler)
        logger.setLevel(level)
    about_redis = [text for text in seen if "redis" in text.lower()]
    assert about_redis, "litellm said nothing of its Redis: was the URL handed over?"
    assert not any(REDIS_PASSWORD in text for text in seen)


def test_a_loop_per_request_leaves_no_redis_connection_open_when_each_loop_ends(
    redis: RedisServer,
) -> None:
    """A host that runs each request in a loop of its own (``asyncio.run``): the shared
    state's Redis client of each loop closes as that loop shuts down; before, each finished
    loop's client was left to the collector, its connection open until then."""
    import asyncio
    import gc

    import redis as redis_py

    from replyguard import Status, Turn, Verifier, VerifierConfig
    from replyguard.testing import ScriptedJudge

    with ProviderServer(default=Step(text="PASS")) as server:
        config = VerifierConfig.from_dict({**fleet_config(redis, server), "verifyAll": True})
    verifier = Verifier(config, judge=ScriptedJudge(["PASS"] * 12))
    watcher = redis_py.Redis.from_url(redis.url())
    try:
        before = watcher.info("clients")["connected_clients"]
        kept = []  # the loops stay alive, as a host's finished loops may: not the collector
        for _ in range(12):
            loop = asyncio.new_event_loop()
            kept.append(loop)
            runner = asyncio.Runner(loop_factory=lambda loop=loop: loop)
            with runner:
                outcome = runner.run(verifier.run(lambda m: "Done.", Turn(user_message="q")))
            assert outcome.status == Status.PASSED
        gc.collect()
        deadline = time.monotonic() + 30
        while watcher.info("clients")["connected_clients"] > before and time.monotonic() < deadline:
            time.sleep(0.05)
        # At most as many as before: other tests' connections may close meanwhile.
        assert watcher.info("clients")["connected_clients"] <= before
    finally:
        watcher.close()
        verifier.close()
