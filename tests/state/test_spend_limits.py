"""Spend limits in one process (no Redis): windows aligned to UTC, reservations held before
the judge call and settled with the real cost after, expiring when never settled."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest

from replyguard import Turn, Verifier, VerifierConfig
from replyguard.config._state import SpendLimit
from replyguard.state._local import LocalSpend
from replyguard.testing import ScriptedJudge
from replyguard.types import Reason

HOUR = SpendLimit(scope="global", window="1h", usd=1.0)


class Clocks:
    """A wall clock (Unix time) and a monotonic clock, moved by hand."""

    def __init__(self, wall: float) -> None:
        self.wall = wall
        self.mono = 0.0


def spend(clocks: Clocks) -> LocalSpend:
    return LocalSpend(wall=lambda: clocks.wall, clock=lambda: clocks.mono)


def unix(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


def test_an_hour_window_starts_on_the_utc_hour() -> None:
    clocks = Clocks(unix("2026-11-25 10:59:59"))
    local = spend(clocks)
    refused, held = local.reserve([(HOUR, "k")], 0.6, ttl=30)
    assert refused is None
    local.settle(held, 0.6)
    assert local.reserve([(HOUR, "k")], 0.6, ttl=30)[0] == HOUR  # 1.2 would pass 1.0
    clocks.wall = unix("2026-11-25 11:00:00")  # a new window: the count starts again
    assert local.reserve([(HOUR, "k")], 0.6, ttl=30)[0] is None


def test_a_day_window_starts_at_midnight_utc() -> None:
    day = SpendLimit(scope="global", window="1d", usd=1.0)
    clocks = Clocks(unix("2026-11-25 00:00:00"))
    local = spend(clocks)
    local.settle(local.reserve([(day, "k")], 0.0, ttl=30)[1], 1.0)
    clocks.wall = unix("2026-11-25 23:59:59")
    assert local.reserve([(day, "k")], 0.0, ttl=30)[0] == day  # used up: even a free call
    clocks.wall = unix("2026-11-26 00:00:00")
    assert local.reserve([(day, "k")], 0.0, ttl=30)[0] is None


def test_reservations_count_until_settled_and_expire_when_never_settled() -> None:
    clocks = Clocks(unix("2026-11-25 10:00:00"))
    local = spend(clocks)
    first = local.reserve([(HOUR, "k")], 0.5, ttl=30)
    assert first[0] is None
    assert local.reserve([(HOUR, "k")], 0.5, ttl=30)[0] is None
    assert local.reserve([(HOUR, "k")], 0.5, ttl=30)[0] == HOUR  # two held: 1.0
    clocks.mono += 31  # neither was settled: both expired
    assert local.reserve([(HOUR, "k")], 0.5, ttl=30)[0] is None


def test_settling_replaces_the_estimate_with_the_real_cost() -> None:
    clocks = Clocks(unix("2026-11-25 10:00:00"))
    local = spend(clocks)
    _, held = local.reserve([(HOUR, "k")], 0.9, ttl=30)
    local.settle(held, 0.1)
    assert local.reserve([(HOUR, "k")], 0.85, ttl=30)[0] is None  # 0.1 + 0.85 fits


def test_each_scope_value_has_its_own_counter() -> None:
    agent = SpendLimit(scope="agentId", window="1h", usd=1.0)
    clocks = Clocks(unix("2026-11-25 10:00:00"))
    local = spend(clocks)
    local.settle(local.reserve([(agent, "a")], 0.0, ttl=30)[1], 1.0)
    assert local.reserve([(agent, "a")], 0.1, ttl=30)[0] == agent
    assert local.reserve([(agent, "b")], 0.1, ttl=30)[0] is None


def judged(**keys: Any) -> VerifierConfig:
    # A judge model the price map does not know: its first call is held at nothing, the
    # later ones at what the earlier ones cost (the scripted judge's cost).
    base = {"enabled": True, "verifyAll": True, "model": "openai/replyguard-test-judge"}
    return VerifierConfig.from_dict({**base, **keys})


async def test_a_judgement_that_would_pass_the_limit_fails_open_without_a_judge_call() -> None:
    config = judged(spendLimits=[{"scope": "global", "window": "1h", "usd": 0.05}])
    judge = ScriptedJudge(["PASS"] * 2, cost_usd=0.02)
    verifier = Verifier(config, judge=judge, preload=False)
    verdicts = [await verifier.verify(Turn(user_message="hi"), "done") for _ in range(3)]
    # A third call, held at 0.02 like the two before it, would pass 0.05.
    assert [v.fail_open_reason for v in verdicts] == [None, None, Reason.SPEND_LIMIT]
    assert "global spend limit of $0.05 per 1h" in (verdicts[-1].error or "")
    assert sum(v.cost_usd for v in verdicts) <= 0.05 + 0.02
    judge.assert_exhausted()
    assert verdicts[-1].shared_state is None  # no Redis configured: nothing is degraded


async def test_concurrent_judgements_hold_their_estimates() -> None:
    config = judged(spendLimits=[{"scope": "agentId", "window": "1d", "usd": 0.35}])
    release, started = asyncio.Event(), asyncio.Semaphore(0)

    async def slow(_prompt: object) -> str:
        started.release()
        await release.wait()
        return "PASS"

    judge = ScriptedJudge(["PASS", slow, slow, "PASS"], cost_usd=0.1)
    verifier = Verifier(config, judge=judge, preload=False)
    turn = Turn(user_message="hi", agent_id="agent-7")
    assert (await verifier.verify(turn, "done")).fail_open_reason is None  # measured: 0.1
    # Held at 0.1 a call: two calls in flight hold 0.2 of the 0.25 left.
    running = [asyncio.create_task(verifier.verify(turn, "done")) for _ in range(2)]
    for _ in running:
        await started.acquire()
    third = await verifier.verify(turn, "done")  # 0.4 would pass 0.35
    other = await verifier.verify(Turn(user_message="hi", agent_id="agent-8"), "done")
    release.set()
    assert [v.fail_open_reason for v in await asyncio.gather(*running)] == [None, None]
    assert third.fail_open_reason == Reason.SPEND_LIMIT
    assert other.fail_open_reason is None  # another agent's counter
    judge.assert_exhausted()


@pytest.mark.parametrize(
    ("entry", "field"),
    [
        ({"scope": "team", "window": "1h", "usd": 5}, "spendLimits.0.scope"),
        ({"scope": "global", "window": "7h", "usd": 5}, "spendLimits.0.window"),
        ({"scope": "global", "window": "hourly", "usd": 5}, "spendLimits.0.window"),
        ({"scope": "global", "window": "1h", "usd": -1}, "spendLimits.0.usd"),
        ({"scope": "global", "window": "1h"}, "spendLimits.0.usd"),
    ],
)
def test_a_bad_entry_names_its_field(entry: dict[str, Any], field: str) -> None:
    from replyguard.errors import ConfigError

    with pytest.raises(ConfigError) as caught:
        VerifierConfig.from_dict({"spendLimits": [entry]})
    assert field in str(caught.value)
