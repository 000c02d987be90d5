"""Spend limits, honest in both directions, in one process and on Redis alike: a call is held
at what this judge's recent calls cost (not the worst case, 7 to 30 times more; not nothing for
a model the price map does not know), with one unmeasured call at a time; so a limit worth N
calls admits about N of a burst, and the spend stays under the limit plus one call's cost per
instance. Entries of one scope and window count each cost once, and a settlement lands however
the host runs its event loops."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Iterator
from typing import Any

import pytest

from replyguard import Turn, Verdict, Verifier, VerifierConfig
from replyguard.testing import ScriptedJudge
from support.provider_server import ProviderServer, Step
from support.redis_server import RedisServer, redis_server

_prefixes = itertools.count()

JUDGE = "openai/gpt-4o-mini"  # priced in litellm's map: $0.15 / $0.60 per million tokens
CALL_COST = 900 * 0.15e-6 + 12 * 0.60e-6  # what the provider's usage (900 in, 12 out) costs
UNPRICED = "openai/replyguard-test-judge"  # a model litellm's price map does not know


@pytest.fixture(scope="module")
def redis() -> Iterator[RedisServer]:
    with redis_server() as server:
        yield server


@pytest.fixture(params=["local", "redis"])
def where(request: pytest.FixtureRequest, redis: RedisServer) -> dict[str, Any]:
    """The config keys of the spend limits' home: this process, or a Redis of the fleet."""
    if request.param == "local":
        return {}
    prefix = f"honest-{next(_prefixes)}:"
    return {"state": {"redisUrl": redis.url(), "keyPrefix": prefix, "timeoutMs": 3000}}


def limited(where: dict[str, Any], *limits: dict[str, Any], **keys: Any) -> VerifierConfig:
    base = {"enabled": True, "model": UNPRICED, "spendLimits": list(limits)}
    return VerifierConfig.from_dict({**base, **where, **keys})


def hourly(usd: float, scope: str = "global") -> dict[str, Any]:
    return {"scope": scope, "window": "1h", "usd": usd}


async def burst(verifier: Verifier, turns: int) -> list[Verdict]:
    """``turns`` judgements at once (each its own task), all on Redis when it is configured."""
    turn = Turn(user_message="Is the report done?")
    verdicts = await asyncio.gather(*(verifier.verify(turn, "Done.") for _ in range(turns)))
    assert all(v.shared_state is None for v in verdicts), "decided on local state"
    return list(verdicts)


def admitted(verdicts: list[Verdict]) -> int:
    reasons = [v.fail_open_reason for v in verdicts]
    assert set(reasons) <= {None, "spend_limit"}, reasons
    return reasons.count(None)


async def test_an_unpriced_judge_spends_at_most_one_call_past_the_limit(
    where: dict[str, Any],
) -> None:
    # The case: 20 concurrent turns spent $0.40 against $0.05 (each held at $0).
    config = limited(where, hourly(0.05))
    verifier = Verifier(config, judge=ScriptedJudge(["PASS"] * 20, cost_usd=0.02, delay=0.05))
    verdicts = await burst(verifier, 20)
    spent = sum(v.cost_usd for v in verdicts)
    assert spent <= 0.05 + 0.02
    assert admitted(verdicts) == 2  # a third, held at $0.02 like the others, would pass it
    await verifier.aclose()


@pytest.mark.parametrize(("calls", "turns"), [(4, 12), (25, 150)])
async def test_a_limit_worth_n_calls_admits_most_of_a_burst(
    where: dict[str, Any], calls: int, turns: int
) -> None:
    # Held at each call's worst case (its prompt's size bound in, 512 tokens out: about 10
    # times its real cost here), a limit worth 3 calls admitted none, one worth 25 admitted 4.
    # The first call is held at its prompt's size bound (about 3,400 bytes since the rubric's
    # grounding point): the smallest limit must hold that one call, so it is worth 4 calls.
    limit = (calls + 0.5) * CALL_COST
    with ProviderServer(default=Step(text="PASS", delay=0.05)) as server:
        config = limited(
            where,
            hourly(limit),
            model=JUDGE,
            apiKey="sk-test-SECRETKEY-0123456789abcdef",
            apiBase=f"{server.url}/v1",
            timeoutSeconds=60,  # 150 calls on a busy machine
        )
        verifier = Verifier(config, preload=False)
        verdicts = await burst(verifier, turns)
        await verifier.aclose()
    assert admitted(verdicts) >= 0.8 * calls
    assert sum(v.cost_usd for v in verdicts) <= limit + CALL_COST
    assert len(server.seen) == admitted(verdicts)  # a refused turn never called the judge


async def test_entries_of_one_scope_and_window_count_each_cost_once(
    where: dict[str, Any],
) -> None:
    # A $5/h entry next to a $1/h one stopped the $1 one at $0.60: each cost counted twice.
    config = limited(where, hourly(1.0), hourly(5.0), hourly(1.0, "agentId"))
    verifier = Verifier(config, judge=ScriptedJudge(["PASS"] * 8, cost_usd=0.125))
    turn = Turn(user_message="Is the report done?", agent_id="agent-1")
    state = verifier._state
    verdicts = []
    for _ in range(9):
        verdicts.append(await verifier.verify(turn, "Done."))
        if state is not None:  # on Redis: each spend lands before the next turn asks
            await state.settled()
    seen = "; ".join(f"{v.fail_open_reason} {v.cost_usd} {v.error}" for v in verdicts)
    assert [v.fail_open_reason for v in verdicts] == [None] * 8 + ["spend_limit"], seen
    assert "$1 per 1h" in (verdicts[-1].error or "")  # the one that binds is named
    await verifier.aclose()


def redis_spend(redis: RedisServer, prefix: str) -> float:
    """The fleet's settled spend in this hour's global counter."""
    import redis as redis_py

    client = redis_py.Redis.from_url(redis.url(), decode_responses=True)
    try:
        keys = client.keys(f"{prefix}spend-v2:global:1h:*")
        return sum(float(client.get(key) or 0) for key in keys if not key.endswith(":held"))
    finally:
        client.close()


def test_a_loop_per_turn_without_aclose_loses_no_settlement(redis: RedisServer) -> None:
    """A host runs each turn in ``asyncio.run`` and never calls ``aclose``: the spend of
    every turn reaches the fleet's counter (before, the loop's end cancelled the background
    settlement, and the fleet never counted that spend)."""
    where = {"state": {"redisUrl": redis.url(), "keyPrefix": "loops:", "timeoutMs": 3000}}
    config = limited(where, hourly(100.0), verifyAll=True)
    verifier = Verifier(config, judge=ScriptedJudge(["PASS"] * 6, cost_usd=0.01))
    for _ in range(6):
        verdict = asyncio.run(verifier.verify(Turn(user_message="q"), "Done."))
        assert verdict.fail_open_reason is None and verdict.shared_state is None
    until = time.monotonic() + 30
    while redis_spend(redis, "loops:") < 0.06 - 1e-9:
        assert time.monotonic() < until, f"counted {redis_spend(redis, 'loops:')} of 0.06"
        time.sleep(0.01)
    assert redis_spend(redis, "loops:") == pytest.approx(0.06)
    verifier.close()


async def test_when_redis_goes_away_the_calls_in_flight_still_count_here() -> None:
    """The fleet's reservations are mirrored in the instance's own windows: should Redis go
    away mid-burst, the local fallback counts the judgements in flight (before, it counted
    only settled spend, and admitted a limit's worth more)."""
    release, started = asyncio.Event(), asyncio.Semaphore(0)

    async def slow(_prompt: object) -> str:
        started.release()
        await release.wait()
        return "PASS"

    with redis_server() as server:
        where = {"state": {"redisUrl": server.url(), "timeoutMs": 3000}}
        judge = ScriptedJudge(["PASS", slow, slow], cost_usd=0.1)
        verifier = Verifier(limited(where, hourly(0.35)), judge=judge)
        turn = Turn(user_message="Is the report done?")
        assert (await verifier.verify(turn, "Done.")).shared_state is None  # measured: 0.1
        running = [asyncio.create_task(verifier.verify(turn, "Done.")) for _ in range(2)]
        for _ in running:
            await started.acquire()
        server.kill()
        third = await verifier.verify(turn, "Done.")  # 0.1 spent + 0.2 in flight + 0.1
    release.set()
    assert [v.shared_state for v in await asyncio.gather(*running)] == [None, None]
    assert (third.shared_state, third.fail_open_reason) == ("degraded", "spend_limit")
    judge.assert_exhausted()
    await verifier.aclose()


async def test_a_cancelled_turn_gives_its_reservation_back_at_once(where: dict[str, Any]) -> None:
    """A turn cancelled mid-judgement: its reservation is settled (on Redis in the
    background), not left to expire ``timeoutSeconds`` + 10 s later, holding the room."""
    started = asyncio.Event()

    async def hanging(_prompt: object) -> str:
        started.set()
        await asyncio.sleep(60)
        return "PASS"

    judge = ScriptedJudge(["PASS", hanging, "PASS", "PASS"], cost_usd=0.1)
    verifier = Verifier(limited(where, hourly(0.35)), judge=judge)
    turn = Turn(user_message="Is the report done?")
    assert (await verifier.verify(turn, "Done.")).fail_open_reason is None  # measured: 0.1
    cancelled = asyncio.create_task(verifier.verify(turn, "Done."))
    await started.wait()
    cancelled.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    state = verifier._state
    assert state is not None
    await state.settled()
    # 0.1 spent, nothing held: two more calls fit (with 0.1 still held, the second would
    # make 0.2 spent, 0.1 held and 0.1 more: 0.4).
    verdicts = [await verifier.verify(turn, "Done.") for _ in range(2)]
    assert [v.fail_open_reason for v in verdicts] == [None, None]
    assert all(v.shared_state is None for v in verdicts)
    judge.assert_exhausted()
    await verifier.aclose()
