"""A stream cut by an incremental check never delivers its fragment, and ``stream`` ends as ``run``.

Each scenario (``support.stream_cuts``) is played through both doors with the same script:
``Verifier.run`` with whole replies, ``Verifier.stream`` with the same replies in pieces, the
same judge answers (the shipped ``ScriptedJudge`` here; the fault matrix plays them against a
loopback provider). A rules check forbids "as an AI"; the violating reply's fragment up to
the phrase ("... as an AI I can") says the opposite of the whole reply ("... cannot book
tables").

- An attempt no retry can follow (the last by ``maxAttempts``, or one that would be stagnant)
  is not cut: it is read whole and judged whole, and both doors end alike.
- A cut attempt followed by a retry that raises or runs out of time: ``run`` delivers the whole
  reply the stream never read (it was closed at the violation); the stream delivers the latest
  complete reply instead, or an empty response when there is none, with the same status,
  reason and attempts.

Time is proven with events: the stalled retry waits on an event that never fires, and the
turn's deadline is what ends it; the only bound is a generous hang guard.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from replyguard import (
    Delta,
    Reason,
    Retract,
    Status,
    Verifier,
    current_turn,
    idempotency_key,
)
from replyguard.context import _tokens as tokens
from replyguard.testing import ScriptedJudge
from support.fault_matrix import tasks_left_behind
from support.stream_agents import HungClose
from support.stream_cuts import (
    BOUND,
    FAIL,
    FRAGMENT,
    GOOD,
    SCENARIOS,
    TURN,
    UNCLEAR,
    VIOLATING,
    WHOLE,
    Doors,
    Scenario,
    expected,
    last_retract,
    streamed,
    summary,
)

MODES = ("buffer", "release")


@pytest.fixture(autouse=True)
async def _tokenizer_loaded() -> None:
    """The tokenizer loaded before the turn: its first load would spend a short deadline."""
    await asyncio.to_thread(tokens.encoding)


def verifier(make_config: Any, scenario: Scenario, mode: str) -> Verifier:
    keys = {"maxAttempts": 3, **scenario.keys}
    config = make_config(
        verifyAll=True,
        checks=[{"type": "rules", "forbiddenPhrases": ["as an AI"]}],
        streaming={"mode": mode, "holdBackChars": 16},
        **keys,
    )
    return Verifier(config, judge=ScriptedJudge(list(scenario.answers)), preload=False)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
async def test_the_streamed_outcome_is_runs_and_never_a_fragment(
    make_config: Any, scenario: Scenario, mode: str
) -> None:
    doors = Doors(scenario.script)
    async with asyncio.timeout(BOUND):
        ran = await verifier(make_config, scenario, mode).run(doors.whole, TURN)
    events, outcome = await streamed(verifier(make_config, scenario, mode), doors.pieces)
    assert summary(outcome) == expected(scenario, summary(ran))
    assert outcome.response != FRAGMENT
    assert doors.calls["stream"] == doors.calls["run"]
    # Text shown and then withdrawn never held the violation: the window kept it back.
    withdrawn = "".join(e.text for e in events[: last_retract(events)] if isinstance(e, Delta))
    assert "as an AI" not in withdrawn


@pytest.mark.parametrize("mode", MODES)
async def test_an_attempt_no_retry_can_follow_is_read_whole_not_cut(
    make_config: Any, mode: str
) -> None:
    """``maxAttempts`` 1: the whole reply is read (no piece is left unread) and judged whole;
    release mode showed nothing of the violation before the outcome."""
    doors = Doors([VIOLATING])
    scenario = Scenario("last", (VIOLATING,), keys={"maxAttempts": 1})
    events, outcome = await streamed(verifier(make_config, scenario, mode), doors.pieces)
    assert summary(outcome) == (Status.EXHAUSTED, None, WHOLE, 1)
    assert outcome.attempts[0].reply.text == WHOLE
    assert not any(isinstance(e, Retract) for e in events)
    if mode == "release":
        decided = events.index(next(e for e in events if isinstance(e, Delta) and "AI" in e.text))
        assert all(not isinstance(e, Delta) or "as" not in e.text for e in events[:decided])


@pytest.mark.parametrize("mode", MODES)
async def test_a_cut_retry_followed_by_a_failing_one_falls_back_to_the_last_complete_reply(
    make_config: Any, mode: str
) -> None:
    """The cut attempt stays in ``outcome.attempts`` (its fragment, its check's verdict), but
    the delivered reply is the complete one before it."""
    doors = Doors([UNCLEAR, VIOLATING, RuntimeError("down")])
    scenario = Scenario("fallback", tuple(doors.script), (FAIL,))
    events, outcome = await streamed(verifier(make_config, scenario, mode), doors.pieces)
    assert summary(outcome) == (Status.FAILED_OPEN, Reason.AGENT_ERROR, "".join(UNCLEAR), 2)
    assert outcome.attempts[1].reply.text == FRAGMENT
    if mode == "release":
        assert any(isinstance(e, Retract) for e in events)


async def test_replyguards_own_fault_after_a_cut_delivers_the_complete_reply(
    make_config: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fault ends the turn on the cut attempt (fail open): its fragment is not delivered."""
    from replyguard.runner._run import _Run

    real_feedback = _Run.feedback

    async def feedback(self: _Run, attempt: Any, so_far: list[str]) -> str:
        if attempt.number == 2:
            raise RuntimeError("a bug while writing the feedback")
        return await real_feedback(self, attempt, so_far)

    monkeypatch.setattr(_Run, "feedback", feedback)
    doors = Doors([UNCLEAR, VIOLATING, GOOD])
    scenario = Scenario("own-fault", tuple(doors.script), (FAIL, "PASS"))
    _, outcome = await streamed(verifier(make_config, scenario, "release"), doors.pieces)
    assert (outcome.status, outcome.reason) == (Status.FAILED_OPEN, Reason.INTERNAL_ERROR)
    assert outcome.response == "".join(UNCLEAR)


# -- an agent's clean-up runs inside its turn ------------------------------------------


def cut_config(make_config: Any, mode: str, hold: int = 16, **keys: Any) -> Any:
    return make_config(
        verifyAll=True,
        checks=[{"type": "rules", "forbiddenPhrases": ["as an AI"]}],
        streaming={"mode": mode, "holdBackChars": hold},
        **keys,
    )


def seen_by_cleanup() -> tuple[Any, str | None]:
    """What a clean-up sees of its turn: ``current_turn()`` and an idempotency key."""
    scope = current_turn()
    try:
        key: str | None = idempotency_key("release_table", {"table": 4})
    except RuntimeError:
        key = None
    return scope, key


@pytest.mark.parametrize("mode", MODES)
async def test_a_cut_async_agents_cleanup_runs_inside_its_turn(make_config: Any, mode: str) -> None:
    cleanups: list[tuple[Any, str | None]] = []
    keys: list[str] = []
    calls = 0

    async def pieces(entry: Sequence[str]) -> AsyncIterator[str]:
        try:
            keys.append(idempotency_key("release_table", {"table": 4}))
            for piece in entry:
                yield piece
        finally:
            cleanups.append(seen_by_cleanup())

    async def agent(messages: list[dict[str, Any]]) -> AsyncIterator[str]:
        nonlocal calls
        calls += 1
        return pieces(VIOLATING if calls == 1 else GOOD)

    streamer = Verifier(cut_config(make_config, mode), judge=ScriptedJudge(["PASS"]))
    _, outcome = await streamed(streamer, agent)
    assert outcome.status == Status.PASSED
    first, second = cleanups
    assert first[0] is not None and (first[0].turn_id, first[0].attempt) == (TURN.id, 1)
    assert second[0] is not None and second[0].attempt == 2
    assert first[1] == keys[0] == keys[1]  # the same key, outside the cut stream's reads too


@pytest.mark.parametrize("mode", MODES)
async def test_a_cut_sync_agents_cleanup_runs_inside_its_turn(make_config: Any, mode: str) -> None:
    import threading

    done = threading.Event()
    cleanups: list[tuple[Any, str | None]] = []
    calls: list[int] = []

    def cut_reply() -> Any:
        try:
            yield from VIOLATING
        finally:
            cleanups.append(seen_by_cleanup())
            done.set()

    def agent(messages: list[dict[str, Any]]) -> Any:
        calls.append(len(messages))
        return cut_reply() if len(calls) == 1 else iter(GOOD)

    streamer = Verifier(cut_config(make_config, mode), judge=ScriptedJudge(["PASS"]))
    try:
        _, outcome = await streamed(streamer, agent)
        assert outcome.status == Status.PASSED
        assert await asyncio.to_thread(done.wait, BOUND)  # closed in the agent threads
    finally:
        await streamer.aclose()
    ((scope, key),) = cleanups
    assert scope is not None and (scope.turn_id, scope.attempt) == (TURN.id, 1)
    assert key is not None


async def test_a_consumer_closing_early_runs_the_agents_cleanup_inside_its_turn(
    make_config: Any,
) -> None:
    cleanups: list[tuple[Any, str | None]] = []

    async def agent(messages: list[dict[str, Any]]) -> AsyncIterator[str]:
        try:
            for piece in ("The table ", "is booked ", "for eight ", "tonight."):
                yield piece
        finally:
            cleanups.append(seen_by_cleanup())

    streamer = Verifier(cut_config(make_config, "release", hold=0), judge=ScriptedJudge([]))
    stream = streamer.stream(agent, TURN)
    async with asyncio.timeout(BOUND):
        async for event in stream:
            if isinstance(event, Delta):
                break
        await stream.aclose()  # type: ignore[attr-defined]
    ((scope, key),) = cleanups
    assert scope is not None and scope.attempt == 1 and key is not None


@pytest.mark.parametrize("mode", MODES)
async def test_a_cut_retry_stream_whose_aclose_never_returns_ends_at_the_deadline(
    make_config: Any, mode: str
) -> None:
    """The retry is cut; closing it takes what is left of the deadline and no more; the turn
    then ends with the complete first reply, never the retry's fragment."""
    retry = HungClose(VIOLATING)
    streams: list[Any] = []

    async def first() -> AsyncIterator[str]:
        yield "".join(UNCLEAR)

    async def agent(messages: list[dict[str, Any]]) -> Any:
        streams.append(first() if not streams else retry)
        return streams[-1]

    streamer = Verifier(
        cut_config(make_config, mode, maxLatencyMs=300, maxAttempts=3),
        judge=ScriptedJudge([FAIL]),
    )
    _, outcome = await streamed(streamer, agent)
    # The deadline passed before the cut attempt was recorded, as in run before a judgement.
    assert summary(outcome) == (Status.FAILED_OPEN, Reason.LATENCY_BUDGET, "".join(UNCLEAR), 1)
    assert retry.closing.is_set()
    assert len(streams) == 2  # no third attempt once the deadline had passed
    assert tasks_left_behind() == []
