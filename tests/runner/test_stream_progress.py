"""``Verifier.stream(..., progress=True)``: ``Progress`` events say what the turn is doing
(writing, checking, revising) at each phase change, carry no text, and change nothing else."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from replyguard import Delta, Done, Progress, Retract, Turn, Verifier
from replyguard.testing import ScriptedJudge, ScriptedStreamAgent

TURN = Turn(user_message="When is the meeting?")
FAIL = "FAIL [incomplete]: add the date"
FIRST = ["The meeting ", "is on Monday."]
RETRY = ["The meeting is on ", "Monday 3 March at 10."]


async def collect(stream: AsyncIterator[Any]) -> list[Any]:
    return [event async for event in stream]


def shape(events: Sequence[Any]) -> list[str]:
    """Each event in a word: the phase of a ``Progress``, else the event's kind."""
    return [e.phase if isinstance(e, Progress) else type(e).__name__ for e in events]


def delivered_text(events: Sequence[Any]) -> str:
    last = max((i for i, e in enumerate(events) if isinstance(e, Retract)), default=-1)
    return "".join(e.text for e in events[last + 1 :] if isinstance(e, Delta))


def verifier(make_config: Any, judge: ScriptedJudge, mode: str, **keys: Any) -> Verifier:
    config = make_config(streaming={"mode": mode, "holdBackChars": 0}, verifyAll=True, **keys)
    return Verifier(config, judge=judge, preload=False)


async def fail_then_pass(make_config: Any, mode: str, *, progress: bool) -> list[Any]:
    streamed = verifier(make_config, ScriptedJudge([FAIL, "PASS"]), mode)
    agent = ScriptedStreamAgent([FIRST, RETRY])
    return await collect(streamed.stream(agent, TURN, progress=progress))


async def test_buffer_mode_says_what_happens_while_it_shows_nothing(make_config: Any) -> None:
    events = await fail_then_pass(make_config, "buffer", progress=True)
    assert shape(events) == [
        "writing",
        "checking",
        "revising",
        "checking",
        "Delta",
        "Delta",
        "Done",
    ]
    assert [(e.phase, e.attempt) for e in events if isinstance(e, Progress)] == [
        ("writing", 1),
        ("checking", 1),
        ("revising", 2),
        ("checking", 2),
    ]
    assert delivered_text(events) == events[-1].outcome.response == "".join(RETRY)


async def test_release_mode_interleaves_the_phases_with_the_text(make_config: Any) -> None:
    events = await fail_then_pass(make_config, "release", progress=True)
    assert shape(events) == [
        "writing",
        "Delta",
        "Delta",
        "checking",
        "Retract",
        "revising",
        "Delta",
        "Delta",
        "checking",
        "Done",
    ]
    assert delivered_text(events) == events[-1].outcome.response


@pytest.mark.parametrize("mode", ["buffer", "release"])
async def test_without_progress_the_events_are_the_same_less_the_progress(
    make_config: Any, mode: str
) -> None:
    """The default is unchanged; a consumer that skips unknown events sees the same turn."""
    plain = await fail_then_pass(make_config, mode, progress=False)
    with_progress = await fail_then_pass(make_config, mode, progress=True)
    assert not any(isinstance(e, Progress) for e in plain)
    kept = [e for e in with_progress if not isinstance(e, Progress)]
    assert [e for e in kept if not isinstance(e, Done)] == [
        e for e in plain if not isinstance(e, Done)
    ]
    assert kept[-1].outcome.response == plain[-1].outcome.response
    assert kept[-1].outcome.status == plain[-1].outcome.status


async def test_checking_reaches_the_consumer_before_the_judge_is_asked(
    make_config: Any,
) -> None:
    received: list[Any] = []

    def judge_sees(prompt: Any) -> str:
        assert shape(received) == ["writing", "checking"]  # the page says so while it waits
        return "PASS"

    streamed = verifier(make_config, ScriptedJudge([judge_sees]), "buffer")
    async for event in streamed.stream(ScriptedStreamAgent([FIRST]), TURN, progress=True):
        received.append(event)
    assert shape(received) == ["writing", "checking", "Delta", "Delta", "Done"]


async def test_a_turn_that_is_not_judged_only_says_writing(make_config: Any) -> None:
    config = make_config(enabled=False)
    streamed = Verifier(config, judge=ScriptedJudge([]), preload=False)
    events = await collect(streamed.stream(ScriptedStreamAgent([FIRST]), TURN, progress=True))
    assert shape(events) == ["writing", "Delta", "Delta", "Done"]


async def test_a_stream_cut_by_a_check_goes_straight_to_revising(make_config: Any) -> None:
    streamed = verifier(
        make_config,
        ScriptedJudge([]),
        "buffer",
        judgeAfterChecks="never",
        checks=[{"type": "rules", "forbiddenPhrases": ["as an AI"]}],
    )
    agent = ScriptedStreamAgent([["Well, as an AI I ", "cannot."], ["Booked for 8 pm."]])
    events = await collect(streamed.stream(agent, TURN, progress=True))
    assert shape(events) == ["writing", "revising", "checking", "Delta", "Done"]
    assert events[-1].outcome.response == "Booked for 8 pm."


async def test_progress_carries_no_text() -> None:
    event = Progress("checking", 2)
    assert (event.phase, event.attempt) == ("checking", 2)
    assert repr(event) == "Progress(phase='checking', attempt=2)"
    assert not hasattr(event, "text")
