"""A ``TimeoutError`` the agent raises itself (its HTTP client's, say) is the agent's failure,
not the verifier's latency budget: only a deadline the verifier set (``maxLatencyMs``) that
passed is ``latency_budget``. The same through ``run``, ``run_sync`` and ``stream`` (both
modes), on a retry and on the first attempt (whose error is the caller's, as any other)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from replyguard import Outcome, Reason, Status, Turn, Verifier, VerifierConfig
from replyguard.testing import ScriptedAgent, ScriptedJudge, ScriptedStreamAgent, capture_events

FAIL = "FAIL [incomplete]: Add the date."
TURN = Turn(user_message="Summarise the notes.", id="t-1")
OWN = "the agent's HTTP client timed out"
NO_DEADLINE: dict[str, Any] = {}
LONG_DEADLINE: dict[str, Any] = {"maxLatencyMs": 600_000}  # set, never reached


def config(**keys: Any) -> VerifierConfig:
    return VerifierConfig.from_dict(
        {"enabled": True, "model": "anthropic/claude-sonnet-4-5", "verifyAll": True, **keys}
    )


async def streamed(verifier: Verifier, agent: Any) -> Outcome:
    outcome: Outcome | None = None
    async for event in verifier.stream(agent, TURN):
        outcome = getattr(event, "outcome", outcome)
    assert outcome is not None
    return outcome


async def through(door: str, keys: dict[str, Any], script: Sequence[Any]) -> Outcome:
    """The outcome of one FAIL then the scripted retry, through ``door``."""
    judge = ScriptedJudge([FAIL])
    if door in ("run", "run_sync"):
        verifier = Verifier(config(**keys), judge=judge)
        agent = ScriptedAgent(["Done.", *script])
        if door == "run":
            return await verifier.run(agent, TURN)
        try:
            return await asyncio.to_thread(verifier.run_sync, agent, TURN)
        finally:
            verifier.close()
    verifier = Verifier(config(**keys, streaming={"mode": door}), judge=judge)
    return await streamed(verifier, ScriptedStreamAgent([["Done."], *script]))


@pytest.mark.parametrize("keys", [NO_DEADLINE, LONG_DEADLINE], ids=["no_deadline", "deadline"])
@pytest.mark.parametrize("door", ["run", "run_sync", "buffer", "release"])
async def test_an_agents_own_timeout_on_a_retry_is_an_agent_error(
    door: str, keys: dict[str, Any]
) -> None:
    with capture_events() as events:
        outcome = await through(door, keys, [TimeoutError(OWN)])
    assert (outcome.status, outcome.reason, outcome.response) == (
        Status.FAILED_OPEN,
        Reason.AGENT_ERROR,
        "Done.",
    )
    names = [e["event"] for e in events]
    assert "agent_retry_timed_out" not in names
    (failed,) = [e for e in events if e["event"] == "agent_retry_failed"]
    assert failed["attempt"] == 2 and "TimeoutError" in failed["error"]


@pytest.mark.parametrize("keys", [NO_DEADLINE, LONG_DEADLINE], ids=["no_deadline", "deadline"])
@pytest.mark.parametrize("door", ["buffer", "release"])
async def test_an_agents_own_timeout_in_the_middle_of_a_streamed_retry_is_an_agent_error(
    door: str, keys: dict[str, Any]
) -> None:
    outcome = await through(door, keys, [["Done: the notes", TimeoutError(OWN)]])
    assert (outcome.status, outcome.reason, outcome.response) == (
        Status.FAILED_OPEN,
        Reason.AGENT_ERROR,
        "Done.",
    )


async def test_an_agents_own_timeout_on_the_first_attempt_is_the_callers_in_run() -> None:
    judge = ScriptedJudge([])
    verifier = Verifier(config(), judge=judge)
    with pytest.raises(TimeoutError, match=OWN):
        await verifier.run(ScriptedAgent([TimeoutError(OWN)]), TURN)
    assert judge.call_count == 0


@pytest.mark.parametrize("door", ["buffer", "release"])
async def test_an_agents_own_timeout_in_the_middle_of_the_first_stream_is_the_callers(
    door: str,
) -> None:
    """As any other error of the agent's first attempt (and as ``run``): the partial text is
    neither judged nor delivered as if the stream had ended."""
    judge = ScriptedJudge(["PASS"])
    verifier = Verifier(config(streaming={"mode": door}), judge=judge)
    with pytest.raises(TimeoutError, match=OWN):
        await streamed(verifier, ScriptedStreamAgent([["Done: the notes", TimeoutError(OWN)]]))
    assert judge.call_count == 0


# -- the verifier's own deadline is still the latency budget ---------------------------------


async def _hangs_then_times_out(messages: list[dict[str, Any]]) -> str:
    """A retry that hangs, and turns the deadline's cancellation into a timeout of its own."""
    try:
        await asyncio.sleep(30)
    except asyncio.CancelledError:
        raise TimeoutError(OWN) from None
    return "late"


@pytest.mark.timing
async def test_a_retry_cut_by_max_latency_is_the_latency_budget_whatever_the_agent_raises() -> None:
    judge = ScriptedJudge([FAIL])
    verifier = Verifier(config(maxLatencyMs=300), judge=judge)
    with capture_events() as events:
        outcome = await verifier.run(ScriptedAgent(["Done.", _hangs_then_times_out]), TURN)
    assert (outcome.status, outcome.reason, outcome.response) == (
        Status.FAILED_OPEN,
        Reason.LATENCY_BUDGET,
        "Done.",
    )
    assert "agent_retry_failed" not in [e["event"] for e in events]


class _HangingStream:
    """A stream whose second piece hangs, and which turns the deadline's cancellation into a
    timeout of its own."""

    def __init__(self) -> None:
        self.pieces = 0

    def __aiter__(self) -> _HangingStream:
        return self

    async def __anext__(self) -> str:
        self.pieces += 1
        if self.pieces == 1:
            return "Done: the"
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            raise TimeoutError(OWN) from None
        raise StopAsyncIteration


@pytest.mark.timing
@pytest.mark.parametrize("door", ["buffer", "release"])
async def test_a_streamed_retry_cut_by_max_latency_is_the_latency_budget(door: str) -> None:
    judge = ScriptedJudge([FAIL])
    verifier = Verifier(config(maxLatencyMs=300, streaming={"mode": door}), judge=judge)

    first = ScriptedStreamAgent([["Done."]])

    async def agent(messages: list[dict[str, Any]]) -> Any:
        return await first(messages) if first.call_count == 0 else _HangingStream()

    outcome = await streamed(verifier, agent)
    assert (outcome.status, outcome.reason, outcome.response) == (
        Status.FAILED_OPEN,
        Reason.LATENCY_BUDGET,
        "Done.",
    )
