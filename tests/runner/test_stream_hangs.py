"""``Verifier.stream`` with an agent that hangs: the verifier adds no hang of its own.

The agent's own time before its first reply is its own (the turn's clock starts at the first
reply, as in ``run``): the verifier cannot invent a reply, but the caller's cancellation ends
such a turn at once and leaves no task behind. From the first reply on, the turn's deadline
(``maxLatencyMs``) bounds everything, closing the agent's stream included: a retry's stream
whose ``aclose()`` never returns, or a sync iterator whose ``next`` never returns, still ends
the turn at the deadline with the previous reply. Closing a stream cut short by a check is
bounded the same way, and so is closing one when the caller cancels.

Time is the behaviour here, so the bounds are seconds, generous ones: each test would hang
(and fail at its bound) without the bound it checks.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from replyguard import Delta, Done, Outcome, Reason, Retract, Status, Turn, Verifier
from replyguard.context import _tokens as tokens
from replyguard.testing import ScriptedJudge
from support.fault_matrix import tasks_left_behind
from support.stream_agents import HungClose

pytestmark = pytest.mark.timing  # scripts/under_load.sh runs these beside CPU-bound work

TURN = Turn(user_message="When is the meeting?")
FIRST = "The meeting is on Monday."
FAIL = "FAIL [incomplete]: add the time"
MODES = ("buffer", "release")
DEADLINE_MS = 300
BOUND = 10.0
"""How long a test waits for a turn that must end near the deadline before calling it hung."""


@pytest.fixture(autouse=True)
async def _tokenizer_loaded() -> None:
    """The tokenizer loaded before the turn: its first load would spend the short deadline."""
    await asyncio.to_thread(tokens.encoding)


async def _first_reply() -> AsyncIterator[str]:
    yield FIRST


def agent_of(*streams: Any) -> Any:
    """An async agent returning ``streams`` in order, one per call."""
    queue = list(streams)

    async def agent(messages: list[dict[str, Any]]) -> Any:
        return queue.pop(0)

    return agent


def verifier(make_config: Any, answers: list[str], mode: str, **keys: Any) -> Verifier:
    config = make_config(verifyAll=True, streaming={"mode": mode, "holdBackChars": 4}, **keys)
    return Verifier(config, judge=ScriptedJudge(answers), preload=False)


async def collect(stream: AsyncIterator[Any]) -> list[Any]:
    async with asyncio.timeout(BOUND):
        return [event async for event in stream]


async def ended(task: asyncio.Task[Any]) -> bool:
    """Whether ``task``, just cancelled, ended as a cancellation within ``BOUND`` seconds."""
    await asyncio.wait({task}, timeout=BOUND)
    return task.done() and task.cancelled()


def delivered(events: Sequence[Any]) -> Outcome:
    """The outcome, once the stream's invariant holds for it."""
    assert isinstance(events[-1], Done)
    last = max((i for i, e in enumerate(events) if isinstance(e, Retract)), default=-1)
    shown = "".join(e.text for e in events[last + 1 :] if isinstance(e, Delta))
    outcome: Outcome = events[-1].outcome
    assert shown == outcome.response
    return outcome


@pytest.mark.parametrize("mode", MODES)
async def test_a_retry_stream_whose_close_never_returns_ends_at_the_deadline(
    make_config: Any, mode: str
) -> None:
    retry = HungClose(["The meeting is on Monday ", "at"])
    streamed = verifier(make_config, [FAIL], mode, maxLatencyMs=DEADLINE_MS)
    events = await collect(streamed.stream(agent_of(_first_reply(), retry), TURN))
    outcome = delivered(events)
    assert (outcome.status, outcome.reason) == (Status.FAILED_OPEN, Reason.LATENCY_BUDGET)
    assert outcome.response == FIRST
    assert retry.closing.is_set()  # it was asked to close, and not waited for past the bound
    assert tasks_left_behind() == []


@pytest.mark.parametrize("mode", MODES)
async def test_a_stream_cut_by_a_check_whose_close_never_returns_goes_on_to_the_retry(
    make_config: Any, mode: str
) -> None:
    cut = HungClose(["Sure, as an AI I can ", "help"])
    streamed = verifier(
        make_config,
        ["PASS"],
        mode,
        checks=[{"type": "rules", "forbiddenPhrases": ["as an AI"]}],
    )
    events = await collect(streamed.stream(agent_of(cut, _first_reply()), TURN))
    outcome = delivered(events)
    assert (outcome.status, outcome.response) == (Status.PASSED, FIRST)
    assert cut.closing.is_set()


async def test_cancelling_while_the_stream_would_not_close_is_prompt(make_config: Any) -> None:
    """The caller's cancellation closes the agent's stream, but does not wait on it forever."""
    stream = HungClose(["The meeting ", "is on "])
    streamed = verifier(make_config, [], "release")
    started = asyncio.Event()

    async def consume() -> None:
        async for event in streamed.stream(agent_of(stream), TURN):
            if isinstance(event, Delta):
                started.set()

    task = asyncio.create_task(consume())
    async with asyncio.timeout(BOUND):
        await started.wait()
    await asyncio.sleep(0)  # the read now waits on the agent's next piece
    task.cancel()
    assert await ended(task)
    assert stream.closing.is_set()
    assert tasks_left_behind() == []


def _blocked_iterator(
    blocked: threading.Event, unblock: threading.Event, closed: threading.Event
) -> Any:
    try:
        blocked.set()
        unblock.wait(timeout=60)
        yield "late"
    finally:
        closed.set()


@pytest.mark.parametrize("mode", MODES)
async def test_a_sync_retry_blocked_on_its_first_next_ends_at_the_deadline(
    make_config: Any, mode: str
) -> None:
    blocked, unblock, closed = threading.Event(), threading.Event(), threading.Event()
    calls: list[int] = []

    def agent(messages: list[dict[str, Any]]) -> Any:
        calls.append(len(messages))
        return iter([FIRST]) if len(calls) == 1 else _blocked_iterator(blocked, unblock, closed)

    streamed = verifier(make_config, [FAIL], mode, maxLatencyMs=DEADLINE_MS)
    try:
        events = await collect(streamed.stream(agent, TURN))
    finally:
        unblock.set()
    outcome = delivered(events)
    assert (outcome.status, outcome.reason, outcome.response) == (
        Status.FAILED_OPEN,
        Reason.LATENCY_BUDGET,
        FIRST,
    )
    assert blocked.is_set()
    assert tasks_left_behind() == []
    assert await asyncio.to_thread(closed.wait, BOUND)  # closed in its thread once next returned
    await streamed.aclose()


async def test_cancelling_a_sync_agent_blocked_on_its_first_next_is_prompt(
    make_config: Any,
) -> None:
    """Before the first reply the agent's time is its own (no deadline applies), but the
    caller's cancellation ends the turn at once, with no task left; the blocked iterator is
    closed in its thread when its ``next`` returns, and ``aclose()`` does not wait for it."""
    blocked, unblock, closed = threading.Event(), threading.Event(), threading.Event()

    def agent(messages: list[dict[str, Any]]) -> Any:
        return _blocked_iterator(blocked, unblock, closed)

    streamed = verifier(make_config, [], "release", maxLatencyMs=DEADLINE_MS)
    task = asyncio.create_task(collect(streamed.stream(agent, TURN)))
    try:
        assert await asyncio.to_thread(blocked.wait, BOUND)
        task.cancel()
        assert await ended(task)
        assert tasks_left_behind() == []
        async with asyncio.timeout(BOUND):
            await streamed.aclose()
        assert not closed.is_set()  # still blocked: the agent's own
    finally:
        unblock.set()
    assert await asyncio.to_thread(closed.wait, BOUND)


@pytest.mark.parametrize("mode", MODES)
async def test_a_sync_iterator_whose_close_blocks_is_closed_off_the_event_loop(
    make_config: Any, mode: str
) -> None:
    """A sync agent's generator cut short by a check is closed in the agent threads, like its
    ``next`` calls: a ``finally`` that blocks there never blocks the turn (or the loop)."""
    release, closed = threading.Event(), threading.Event()

    def cut_reply() -> Any:
        try:
            yield "Sure, as an AI I can "
            yield "help"
        finally:
            release.wait(timeout=BOUND)
            closed.set()

    calls: list[int] = []

    def agent(messages: list[dict[str, Any]]) -> Any:
        calls.append(len(messages))
        return cut_reply() if len(calls) == 1 else iter([FIRST])

    streamed = verifier(
        make_config,
        ["PASS"],
        mode,
        checks=[{"type": "rules", "forbiddenPhrases": ["as an AI"]}],
    )
    try:
        events = await collect(streamed.stream(agent, TURN))
        closed_during_the_turn = closed.is_set()
    finally:
        release.set()
    outcome = delivered(events)
    assert (outcome.status, outcome.response) == (Status.PASSED, FIRST)
    assert not closed_during_the_turn
    assert await asyncio.to_thread(closed.wait, BOUND)
    await streamed.aclose()
