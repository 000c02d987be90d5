"""No scope value can reach another counter's keys on Redis: an agent id or run kind is hashed
into its key (32 hex digits), whatever it holds (``:``, ``{``, ``}``, ``held``, unicode, 10 KB),
so agent ``acme:held`` no longer lands on agent ``acme``'s reservations (Redis answered
``WRONGTYPE`` there). And one key's error reply fails that one call, decided on the
instance's own state, never Redis for every agent."""

from __future__ import annotations

import asyncio
import itertools
import re
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replyguard import Turn, Verifier, VerifierConfig
from replyguard.testing import ScriptedJudge, capture_events
from support.redis_server import RedisServer, redis_server

_prefixes = itertools.count()


@pytest.fixture(scope="module")
def redis() -> Iterator[RedisServer]:
    with redis_server() as server:
        yield server


def keyed_verifier(redis: RedisServer, usd: float = 1.0, *, run_kinds: bool = True) -> Verifier:
    config = VerifierConfig.from_dict(
        {
            "enabled": True,
            "model": "openai/replyguard-test-judge",
            "state": {
                "redisUrl": redis.url(),
                "keyPrefix": f"tenant-{next(_prefixes)}:",
                "timeoutMs": 3000,  # generous: a busy machine
            },
            "spendLimits": [
                {"scope": "agentId", "window": "1h", "usd": usd},
                *([{"scope": "runKind", "window": "1d", "usd": usd}] if run_kinds else []),
            ],
        }
    )
    return Verifier(config, judge=ScriptedJudge(["PASS"] * 100, cost_usd=0.01), preload=False)


def every_key(redis: RedisServer) -> set[str]:
    import redis as redis_py

    client = redis_py.Redis.from_url(redis.url(), decode_responses=True)
    try:
        return set(client.keys("*"))
    finally:
        client.close()


async def judged(verifier: Verifier, agent_id: str) -> Any:
    verdict = await verifier.verify(Turn(user_message="Done?", agent_id=agent_id), "Done.")
    state = verifier._state
    assert state is not None
    await state.settled()
    return verdict


HOSTILE = st.one_of(
    st.sampled_from(["acme", "acme:held", "acme:held:held", "{acme}", "}{", ":", "", "held"]),
    st.text(alphabet=st.sampled_from(":{}held\x00é𝄞 "), max_size=12),
    st.text(max_size=40),
    st.integers(1, 10_240).map(lambda n: ("x:" * n)[:n]),
)


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(ids=st.lists(HOSTILE, min_size=1, max_size=4, unique=True))
def test_no_scope_value_reaches_another_counter_or_tenant(
    redis: RedisServer, ids: list[str]
) -> None:
    verifier = keyed_verifier(redis)
    prefix = verifier.config.state.key_prefix  # type: ignore[union-attr]
    before = every_key(redis)

    async def every_id_once() -> list[Any]:
        try:
            return [await judged(verifier, agent_id) for agent_id in ids]
        finally:
            await verifier.aclose()

    verdicts = asyncio.run(every_id_once())
    # Every judgement was decided on Redis (none fell back), within its own counter.
    assert [v.shared_state for v in verdicts] == [None] * len(ids)
    assert [v.fail_open_reason for v in verdicts] == [None] * len(ids)
    # Whatever this tenant wrote lies under its own prefix, in the one shape (a value is only
    # ever hex digits there: nothing of it reaches a neighbour's key or another prefix)...
    written = every_key(redis) - before
    shape = re.compile(re.escape(prefix) + r"spend-v2:(agentId|runKind):1[hd]:\d+:[0-9a-f]{32}")
    assert all(shape.fullmatch(key) for key in written), written
    # ... one counter per distinct agent id, and the run-kind counter.
    assert len(written) == len(ids) + 1


async def test_agents_acme_and_acme_held_have_their_own_limits(redis: RedisServer) -> None:
    verifier = keyed_verifier(redis, usd=0.025, run_kinds=False)
    with capture_events() as events:
        first = [await judged(verifier, "acme:held"), await judged(verifier, "acme")]
        second = [await judged(verifier, "acme:held"), await judged(verifier, "acme")]
        third = await judged(verifier, "acme")
    assert [v.fail_open_reason for v in first + second] == [None] * 4
    assert all(v.shared_state is None for v in (*first, *second, third))
    assert third.fail_open_reason == "spend_limit"  # acme spent 0.02 of its own $0.025
    assert not [e for e in events if e["event"].startswith("shared_state_")]
    await verifier.aclose()


async def test_one_keys_error_reply_fails_that_call_only(redis: RedisServer) -> None:
    import redis as redis_py

    verifier = keyed_verifier(redis, run_kinds=False)
    prefix = verifier.config.state.key_prefix  # type: ignore[union-attr]
    assert (await judged(verifier, "victim")).shared_state is None
    client = redis_py.Redis.from_url(redis.url(), decode_responses=True)
    try:
        (counter,) = client.keys(f"{prefix}spend-v2:agentId:*")
        client.delete(counter)
        client.hset(counter, "not", "a float")  # GET on it now answers WRONGTYPE
        with capture_events() as events:
            victim = await judged(verifier, "victim")
            others = [await judged(verifier, f"agent-{n}") for n in range(3)]
            again = await judged(verifier, "victim")
    finally:
        client.close()
    assert victim.shared_state == "degraded"  # decided on this instance's own state
    assert victim.fail_open_reason is None
    assert [v.shared_state for v in others] == [None] * 3  # Redis is not marked down
    assert again.shared_state == "degraded"
    names = [e["event"] for e in events if e["event"].startswith("shared_state")]
    assert names == ["shared_state_error"]  # once (rate-limited), never "unavailable"
    error = next(e for e in events if e["event"] == "shared_state_error")
    assert "WRONGTYPE" in error["error"]
    assert error["log_level"] == "warning"
    await verifier.aclose()
