"""``Verifier.stream``: the same turn as ``run``, its replies streamed (shipped fakes, no HTTP)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from replyguard import (
    ConfigError,
    Delta,
    Done,
    Outcome,
    Reason,
    Reply,
    Retract,
    RunMeta,
    SkipReason,
    Status,
    Turn,
    Verifier,
    VerifierConfig,
)
from replyguard.testing import ScriptedAgent, ScriptedJudge, ScriptedStreamAgent

TURN = Turn(user_message="When is the meeting?")
FAIL = "FAIL [incomplete]: add the date"
MODES = ("buffer", "release")


async def collect(stream: AsyncIterator[Any]) -> list[Any]:
    return [event async for event in stream]


def delivered_text(events: Sequence[Any]) -> str:
    """The text of the deltas after the last Retract."""
    last = max((i for i, e in enumerate(events) if isinstance(e, Retract)), default=-1)
    return "".join(e.text for e in events[last + 1 :] if isinstance(e, Delta))


def outcome_of(events: Sequence[Any]) -> Outcome:
    assert isinstance(events[-1], Done)
    assert not any(isinstance(e, Done) for e in events[:-1])
    return events[-1].outcome


def checked(events: Sequence[Any]) -> Outcome:
    """The outcome, once the stream's invariant holds for it."""
    outcome = outcome_of(events)
    assert delivered_text(events) == outcome.response
    assert all(e.text for e in events if isinstance(e, Delta))
    return outcome


def verifier(make_config: Any, judge: ScriptedJudge, mode: str, **keys: Any) -> Verifier:
    config = make_config(streaming={"mode": mode, "holdBackChars": 8}, **keys)
    return Verifier(config, judge=judge, preload=False)


# -- the same outcome as run ------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_a_passing_reply_streams_to_the_same_outcome_as_run(
    make_config: Any, mode: str
) -> None:
    pieces = ["The meeting ", "is on ", "Monday at 10."]
    streamed = verifier(make_config, ScriptedJudge(["PASS"]), mode, verifyAll=True)
    events = await collect(streamed.stream(ScriptedStreamAgent([pieces]), TURN))
    outcome = checked(events)
    ran = await verifier(make_config, ScriptedJudge(["PASS"]), mode, verifyAll=True).run(
        ScriptedAgent(["".join(pieces)]), TURN
    )
    assert (outcome.status, outcome.response, len(outcome.attempts)) == (
        ran.status,
        ran.response,
        len(ran.attempts),
    )
    assert not any(isinstance(e, Retract) for e in events)


async def test_buffer_mode_shows_nothing_before_the_verdict(make_config: Any) -> None:
    seen_by_judge: list[int] = []
    events: list[Any] = []

    def judge_answer(prompt: Any) -> str:
        seen_by_judge.append(len(events))
        return "PASS"

    streamed = verifier(make_config, ScriptedJudge([judge_answer]), "buffer", verifyAll=True)
    async for event in streamed.stream(ScriptedStreamAgent([["a", "b", "c"]]), TURN):
        events.append(event)
    assert seen_by_judge == [0]
    assert [e.text for e in events if isinstance(e, Delta)] == ["a", "b", "c"]
    assert checked(events).status == Status.PASSED


async def test_release_mode_shows_text_before_the_verdict(make_config: Any) -> None:
    shown_before_judge: list[str] = []
    events: list[Any] = []

    def judge_answer(prompt: Any) -> str:
        shown_before_judge.append(delivered_text(events))
        return "PASS"

    streamed = verifier(make_config, ScriptedJudge([judge_answer]), "release", verifyAll=True)
    async for event in streamed.stream(ScriptedStreamAgent([["Mon", "day ", "at 10."]]), TURN):
        events.append(event)
    assert shown_before_judge == ["Monday at 10."]
    assert checked(events).response == "Monday at 10."


@pytest.mark.parametrize("mode", MODES)
async def test_a_fail_retries_with_feedback_and_delivers_the_retry(
    make_config: Any, mode: str
) -> None:
    judge = ScriptedJudge([FAIL, "PASS"])
    agent = ScriptedStreamAgent([["The meeting ", "is soon."], ["It is on ", "2026-01-02."]])
    events = await collect(verifier(make_config, judge, mode, verifyAll=True).stream(agent, TURN))
    outcome = checked(events)
    assert (outcome.status, outcome.response) == (Status.PASSED, "It is on 2026-01-02.")
    assert [a.reply.text for a in outcome.attempts] == ["The meeting is soon.", outcome.response]
    retracts = [e for e in events if isinstance(e, Retract)]
    assert retracts == ([Retract(1, "incomplete")] if mode == "release" else [])
    feedback = agent.calls[1][-1]
    assert feedback["role"] == "user" and "add the date" in feedback["content"]


async def test_a_retracted_reply_never_enters_the_retrys_history(make_config: Any) -> None:
    agent = ScriptedStreamAgent([["Soon."], ["On 2026-01-02."]])
    streamed = verifier(make_config, ScriptedJudge([FAIL, "PASS"]), "release", verifyAll=True)
    await collect(streamed.stream(agent, TURN))
    assert all("Soon." not in str(m.get("content")) for m in agent.calls[1])


async def test_exhausted_turn_delivers_per_policy_and_the_deltas_follow(make_config: Any) -> None:
    judge = ScriptedJudge([FAIL, "FAIL [incomplete]: still no date"])
    agent = ScriptedStreamAgent([["First try."], ["Second try."]])
    streamed = verifier(
        make_config, judge, "release", verifyAll=True, maxAttempts=2, deliver="first"
    )
    events = await collect(streamed.stream(agent, TURN))
    outcome = checked(events)
    assert (outcome.status, outcome.response) == (Status.EXHAUSTED, "First try.")
    assert events[-3:-1] == [Retract(2, "exhausted"), Delta("First try.")]


# -- turns that are not judged ------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_a_turn_that_cannot_be_judged_passes_through_as_it_comes(
    make_config: Any, mode: str
) -> None:
    judge = ScriptedJudge([])
    events: list[Any] = []
    agent_progress: list[int] = []
    agent = ScriptedStreamAgent([["one ", "two ", "three"]])
    config = make_config(enabled=False, streaming={"mode": mode})
    async for event in Verifier(config, judge=judge, preload=False).stream(agent, TURN):
        events.append(event)
        agent_progress.append(agent.pulled[0])
    outcome = checked(events)
    assert outcome.status == Status.DISABLED
    assert agent_progress[:3] == [1, 2, 3]  # each delta shown as soon as it came


@pytest.mark.parametrize("mode", MODES)
async def test_a_keyword_turn_is_decided_at_the_end(make_config: Any, mode: str) -> None:
    judge = ScriptedJudge(["PASS"])
    agent = ScriptedStreamAgent([["All ", "do", "ne."]])
    events = await collect(verifier(make_config, judge, mode).stream(agent, TURN))
    assert checked(events).status == Status.PASSED
    judge.assert_exhausted()


async def test_a_stream_ending_in_a_tool_call_is_a_tool_call_step(make_config: Any) -> None:
    chunks = [
        {"choices": [{"index": 0, "delta": {"content": "Let me look."}}]},
        {
            "choices": [
                {
                    "index": 0,
                    "delta": {
                        "tool_calls": [
                            {"index": 0, "id": "c1", "function": {"name": "cal", "arguments": ""}}
                        ]
                    },
                }
            ]
        },
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
    ]
    judge = ScriptedJudge([])
    events = await collect(
        verifier(make_config, judge, "buffer", verifyAll=True).stream(
            ScriptedStreamAgent([chunks]), TURN
        )
    )
    outcome = checked(events)
    assert (outcome.status, outcome.skip_reason, outcome.response) == (
        Status.SKIPPED,
        SkipReason.TOOL_CALLS,
        "Let me look.",
    )
    assert outcome.attempts[0].reply.meta.pending_tool_calls == 1


async def test_usage_and_cost_of_the_final_chunk_count_in_the_outcome(make_config: Any) -> None:
    chunks = [
        {"choices": [{"index": 0, "delta": {"content": "On Monday."}}]},
        {
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 3, "cost": 0.002},
        },
    ]
    judge = ScriptedJudge(["PASS"], cost_usd=0.001)
    streamed = verifier(make_config, judge, "buffer", verifyAll=True)
    outcome = checked(await collect(streamed.stream(ScriptedStreamAgent([chunks]), TURN)))
    meta = outcome.attempts[0].reply.meta
    assert (meta.stop_reason, meta.usage, meta.cost_usd) == (
        "stop",
        {"prompt_tokens": 12, "completion_tokens": 3, "cost": 0.002},
        0.002,
    )
    assert outcome.cost_usd == pytest.approx(0.003)


async def test_metadata_yielded_after_the_text_wins(make_config: Any) -> None:
    pieces = ["Sent it.", RunMeta(sent_via_messaging_tool=True, cost_usd=0.01)]
    streamed = verifier(make_config, ScriptedJudge([]), "release", verifyAll=True)
    outcome = checked(await collect(streamed.stream(ScriptedStreamAgent([pieces]), TURN)))
    assert (outcome.status, outcome.skip_reason, outcome.cost_usd) == (
        Status.SKIPPED,
        SkipReason.MESSAGING_TOOL_SENT,
        0.01,
    )


async def test_a_non_streaming_agent_is_one_delta(make_config: Any) -> None:
    streamed = verifier(make_config, ScriptedJudge(["PASS"]), "release", verifyAll=True)
    events = await collect(streamed.stream(ScriptedAgent([Reply(text="Monday.")]), TURN))
    assert checked(events).response == "Monday."


# -- failing open --------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_a_judge_error_releases_the_reply(make_config: Any, mode: str) -> None:
    judge = ScriptedJudge([RuntimeError("provider down")])
    agent = ScriptedStreamAgent([["On ", "Monday."]])
    events = await collect(verifier(make_config, judge, mode, verifyAll=True).stream(agent, TURN))
    outcome = checked(events)
    assert (outcome.status, outcome.reason, outcome.response) == (
        Status.FAILED_OPEN,
        Reason.JUDGE_ERROR,
        "On Monday.",
    )


@pytest.mark.parametrize("mode", MODES)
async def test_a_retry_stream_that_errors_midway_delivers_the_previous_reply(
    make_config: Any, mode: str
) -> None:
    agent = ScriptedStreamAgent([["Soon."], ["It is on ", RuntimeError("connection reset")]])
    streamed = verifier(make_config, ScriptedJudge([FAIL]), mode, verifyAll=True)
    events = await collect(streamed.stream(agent, TURN))
    outcome = checked(events)
    assert (outcome.status, outcome.reason, outcome.response) == (
        Status.FAILED_OPEN,
        Reason.AGENT_ERROR,
        "Soon.",
    )
    assert agent.closed == 2


@pytest.mark.parametrize("mode", MODES)
async def test_the_agents_error_on_the_first_attempt_is_the_callers(
    make_config: Any, mode: str
) -> None:
    agent = ScriptedStreamAgent([["On ", ValueError("agent bug")]])
    streamed = verifier(make_config, ScriptedJudge([]), mode, verifyAll=True)
    with pytest.raises(ValueError, match="agent bug"):
        await collect(streamed.stream(agent, TURN))
    assert agent.closed == 1


async def test_something_not_text_from_the_agent_is_its_error(make_config: Any) -> None:
    streamed = verifier(make_config, ScriptedJudge([]), "buffer", verifyAll=True)
    with pytest.raises(TypeError, match="streaming agent yielded int"):
        await collect(streamed.stream(ScriptedStreamAgent([["On ", 42]]), TURN))


# -- config -----------------------------------------------------------------------------------


def test_streaming_defaults_to_buffer_with_a_documented_window() -> None:
    config = VerifierConfig()
    assert (config.streaming.mode, config.streaming.hold_back_chars) == ("buffer", 64)


def test_a_run_kind_may_stream_differently() -> None:
    config = VerifierConfig.from_dict(
        {"runKinds": {"chat": {"streaming": {"mode": "release", "holdBackChars": 16}}}}
    )
    assert config.for_run_kind("chat").streaming.mode == "release"
    assert config.for_run_kind(None).streaming.mode == "buffer"


@pytest.mark.parametrize(
    ("data", "key"),
    [
        ({"streaming": {"mode": "trickle"}}, "streaming.mode"),
        ({"streaming": {"holdBackChars": -1}}, "streaming.holdBackChars"),
        ({"streaming": {"holdBack": 3}}, "streaming.holdBack"),
        ({"runKinds": {"chat": {"streaming": {"mode": 1}}}}, "runKinds.chat.streaming.mode"),
    ],
)
def test_streaming_config_errors_name_the_key_inside_it(data: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        VerifierConfig.from_dict(data)
    assert key in str(caught.value)


# -- incremental checks cut a bad stream short ---------------------------------------------------


def rules_config(make_config: Any, mode: str, **rules: Any) -> Any:
    return make_config(
        verifyAll=True,
        checks=[{"type": "rules", **rules}],
        streaming={"mode": mode, "holdBackChars": 8},
    )


@pytest.mark.parametrize("mode", MODES)
async def test_a_violation_closes_the_stream_at_once_and_retries_without_a_judge_call(
    make_config: Any, mode: str
) -> None:
    judge = ScriptedJudge(["PASS"])  # for the retry only
    agent = ScriptedStreamAgent(
        [["Well, ", "as an ", "AI, ", "I cannot", " say more", " and more"], ["Monday at 10."]]
    )
    config = rules_config(make_config, mode, forbiddenPhrases=["as an AI"])
    events = await collect(Verifier(config, judge=judge, preload=False).stream(agent, TURN))
    outcome = checked(events)
    assert (outcome.status, outcome.response) == (Status.PASSED, "Monday at 10.")
    assert agent.pulled[0] == 3 and agent.closed == 2  # nothing read after the deciding chunk
    judge.assert_exhausted()  # one judge call: the retry's
    first = outcome.attempts[0]
    assert first.reply.text == "Well, as an AI, "
    assert first.verdict is not None and first.verdict.decisive and not first.verdict.passed
    assert "as an AI" in (first.verdict.feedback or "")
    assert "as an AI" in agent.calls[1][-1]["content"]
    if mode == "release":
        assert [e for e in events if isinstance(e, Retract)] == [Retract(1, "rules")]
        # "Well, as an " had come: all but the last 8 characters were shown.
        assert delivered_text(events[: events.index(Retract(1, "rules"))]) == "Well"


class Shouting:
    """A check of its own that decides on a prefix: three capitals in a row."""

    name, required = "no_shouting", False

    async def check(self, turn: Turn, reply: Reply) -> Any:
        from replyguard.checks import failed, passed

        shouting = any(w.isupper() and len(w) >= 3 for w in reply.text.split())
        return (
            failed(self.name, "tone_mismatch", "Do not shout.") if shouting else passed(self.name)
        )

    def scanner(self, turn: Turn) -> Any:
        return ShoutScanner()


class ShoutScanner:
    def __init__(self) -> None:
        self.scanned, self.pending_from, self.run = 0, None, 0

    def feed(self, text: str) -> Any:
        from replyguard.checks import failed

        for char in text:
            self.scanned += 1
            self.run = self.run + 1 if char.isupper() else 0
            if self.run >= 3:
                return failed("no_shouting", "tone_mismatch", "Do not shout.")
        return None

    def finish(self) -> Any:
        return None


async def test_a_check_of_its_own_may_declare_itself_incremental(make_config: Any) -> None:
    agent = ScriptedStreamAgent([["calm ", "then L", "OU", "D and more"], ["calm."]])
    config = make_config(verifyAll=True, judgeAfterChecks="never")
    streamed = Verifier(config, judge=ScriptedJudge([]), checks=[Shouting()], preload=False)
    outcome = checked(await collect(streamed.stream(agent, TURN)))
    assert (outcome.response, agent.pulled[0]) == ("calm.", 3)
    assert outcome.attempts[0].checks[0].name == "no_shouting"


@pytest.mark.parametrize("mode", MODES)
async def test_a_crashing_incremental_check_fails_open_to_the_end_check(
    make_config: Any, mode: str
) -> None:
    class Broken(ShoutScanner):
        def feed(self, text: str) -> Any:
            raise RuntimeError("scanner bug")

    class BrokenShouting(Shouting):
        def scanner(self, turn: Turn) -> Any:
            return Broken()

    agent = ScriptedStreamAgent([["all ", "LOUD", " here"], ["calm."]])
    config = make_config(verifyAll=True, judgeAfterChecks="never")
    streamed = Verifier(config, judge=ScriptedJudge([]), checks=[BrokenShouting()], preload=False)
    outcome = checked(await collect(streamed.stream(agent, TURN)))
    assert outcome.response == "calm."  # the whole-reply check still caught it
    assert agent.pulled[0] == 3


async def test_a_pattern_out_of_time_on_a_piece_is_left_to_the_end_check(
    make_config: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from replyguard.checks import rules

    monkeypatch.setattr(rules, "_FEED_TIME_LIMIT", -1.0)  # every piece's search runs out
    config = rules_config(make_config, "release", mustNotMatch=[r"\d{3}-\d{4}"])
    agent = ScriptedStreamAgent([["Call 555-", "1234 ", "today."], ["Call the front desk."]])
    streamed = Verifier(config, judge=ScriptedJudge(["PASS"]), preload=False)
    outcome = checked(await collect(streamed.stream(agent, TURN)))
    assert agent.pulled[0] == 3  # not cut: the pattern was left to the whole reply
    assert outcome.response == "Call the front desk."  # which the end check caught


async def test_a_violation_in_a_tool_call_step_does_not_cut_it(make_config: Any) -> None:
    tool = {
        "choices": [
            {"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"name": "f"}}]}}
        ]
    }
    pieces = [tool, "as an AI ", "model", RunMeta(stop_reason="tool_calls")]
    config = rules_config(make_config, "buffer", forbiddenPhrases=["as an AI"])
    streamed = Verifier(config, judge=ScriptedJudge([]), preload=False)
    outcome = checked(await collect(streamed.stream(ScriptedStreamAgent([pieces]), TURN)))
    assert (outcome.status, outcome.skip_reason) == (Status.SKIPPED, SkipReason.TOOL_CALLS)


# -- careless hosts, cancellation, replyguard's own trouble ---------------------------------------


def other_tasks(before: set[Any]) -> set[Any]:
    import asyncio

    return {t for t in asyncio.all_tasks() if t not in before and not t.done()}


@pytest.mark.parametrize("mode", MODES)
async def test_closing_the_stream_early_closes_the_agents_stream(
    make_config: Any, mode: str
) -> None:
    import asyncio
    import contextlib

    before = asyncio.all_tasks()
    agent = ScriptedStreamAgent([["one ", "two ", "three ", "four"]])
    config = make_config(enabled=False, streaming={"mode": mode})
    streamed = Verifier(config, judge=ScriptedJudge([]), preload=False)
    async with contextlib.aclosing(streamed.stream(agent, TURN)) as events:
        async for event in events:
            assert event == Delta("one ")
            break
    assert (agent.pulled[0], agent.closed) == (1, 1)
    assert other_tasks(before) == set()


@pytest.mark.parametrize("mode", MODES)
async def test_cancelling_the_consumer_during_the_judgement_closes_it_all(
    make_config: Any, mode: str
) -> None:
    import asyncio

    judging, cancelled = asyncio.Event(), asyncio.Event()

    async def slow_judge(prompt: Any) -> str:
        judging.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "PASS"

    agent = ScriptedStreamAgent([["On ", "Monday."]])
    streamed = verifier(make_config, ScriptedJudge([slow_judge]), mode, verifyAll=True)
    before = asyncio.all_tasks()

    async def consume() -> list[Any]:
        return await collect(streamed.stream(agent, TURN))

    task = asyncio.create_task(consume())
    await judging.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cancelled.is_set() and agent.closed == 1
    assert other_tasks(before) == set()


async def test_cancelling_the_consumer_while_the_agent_streams_closes_its_stream(
    make_config: Any,
) -> None:
    import asyncio

    started, closed = asyncio.Event(), asyncio.Event()

    async def agent(messages: Any) -> Any:
        try:
            yield "first "
            started.set()
            await asyncio.Event().wait()
            yield "never"
        finally:
            closed.set()

    streamed = verifier(make_config, ScriptedJudge([]), "release", verifyAll=True)
    task = asyncio.create_task(collect(streamed.stream(agent, TURN)))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert closed.is_set()


@pytest.mark.parametrize("mode", MODES)
async def test_replyguards_own_fault_while_judging_releases_the_reply(
    make_config: Any, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from replyguard.runner._assessment import Assessor

    async def broken(self: Any, step: Any) -> Any:
        raise RuntimeError("a bug in the assessment")

    monkeypatch.setattr(Assessor, "assess", broken)
    agent = ScriptedStreamAgent([["On ", "Monday."]])
    streamed = verifier(make_config, ScriptedJudge([]), mode, verifyAll=True)
    outcome = checked(await collect(streamed.stream(agent, TURN)))
    assert (outcome.status, outcome.reason, outcome.response) == (
        Status.FAILED_OPEN,
        Reason.INTERNAL_ERROR,
        "On Monday.",
    )


@pytest.mark.parametrize("mode", MODES)
async def test_replyguards_own_fault_mid_stream_passes_the_rest_through(
    make_config: Any, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from replyguard.runner import _stream_source

    real_add = _stream_source.Collected.add

    def add(self: Any, text: str) -> None:
        if text == "two ":
            raise RuntimeError("a bug while reading")
        real_add(self, text)

    monkeypatch.setattr(_stream_source.Collected, "add", add)
    agent = ScriptedStreamAgent([["one ", "two ", "three ", "four"]])
    config = rules_config(make_config, mode, forbiddenPhrases=["five"])
    streamed = Verifier(config, judge=ScriptedJudge([]), preload=False)
    events = await collect(streamed.stream(agent, TURN))
    outcome = checked(events)
    assert (outcome.status, outcome.reason) == (Status.FAILED_OPEN, Reason.INTERNAL_ERROR)
    assert outcome.response == "one three four"  # what reached replyguard, nothing twice
    assert agent.closed == 1


async def test_the_deadline_during_a_retry_stream_delivers_the_previous_reply(
    make_config: Any,
) -> None:
    import asyncio

    async def stalls(messages: Any) -> Any:
        yield "It is on "
        await asyncio.Event().wait()

    first = ScriptedStreamAgent([["Soon."]])
    calls = 0

    async def agent(messages: Any) -> Any:
        nonlocal calls
        calls += 1
        return await first(messages) if calls == 1 else stalls(messages)

    streamed = verifier(
        make_config, ScriptedJudge([FAIL]), "release", verifyAll=True, maxLatencyMs=200
    )
    outcome = checked(await collect(streamed.stream(agent, TURN)))
    assert (outcome.status, outcome.reason, outcome.response) == (
        Status.FAILED_OPEN,
        Reason.LATENCY_BUDGET,
        "Soon.",
    )


async def test_on_exhausted_raise_raises_from_the_stream(make_config: Any) -> None:
    from replyguard import VerificationExhausted

    agent = ScriptedStreamAgent([["Soon."]])
    streamed = verifier(
        make_config,
        ScriptedJudge([FAIL]),
        "buffer",
        verifyAll=True,
        maxAttempts=1,
        onExhausted="raise",
    )
    with pytest.raises(VerificationExhausted):
        await collect(streamed.stream(agent, TURN))


@pytest.mark.parametrize("mode", MODES)
async def test_shadow_mode_passes_the_stream_through_and_flags_it(
    make_config: Any, mode: str
) -> None:
    events: list[Any] = []
    agent = ScriptedStreamAgent([["as an AI ", "I would ", "say no."]])
    config = make_config(
        mode="shadow",
        verifyAll=True,
        checks=[{"type": "rules", "forbiddenPhrases": ["as an AI"]}],
        streaming={"mode": mode},
    )
    streamed = Verifier(config, judge=ScriptedJudge([]), preload=False)
    async for event in streamed.stream(agent, TURN):
        events.append(event)
        if isinstance(event, Delta):
            assert agent.pulled[0] == len(events)  # shown as it came, never cut
    outcome = checked(events)
    assert (outcome.status, outcome.response) == (Status.FLAGGED, "as an AI I would say no.")


async def test_a_sampled_out_turn_passes_through_as_it_comes(make_config: Any) -> None:
    events: list[Any] = []
    agent = ScriptedStreamAgent([["one ", "two"]])
    config = make_config(verifyAll=True, sampleRate=0.0, streaming={"mode": "buffer"})
    async for event in Verifier(config, judge=ScriptedJudge([]), preload=False).stream(agent, TURN):
        events.append(event)
        if isinstance(event, Delta):
            assert agent.pulled[0] == len(events)
    outcome = checked(events)
    assert (outcome.status, outcome.reason) == (Status.NOT_TRIGGERED, Reason.SAMPLED_OUT)


async def test_a_sync_agent_returning_a_sync_iterator_is_read_off_the_loop(
    make_config: Any,
) -> None:
    import threading

    threads: list[str] = []

    def pieces() -> Any:
        for piece in ("On ", "Monday."):
            threads.append(threading.current_thread().name)
            yield piece

    def agent(messages: list[dict[str, Any]]) -> Any:
        return pieces()

    streamed = verifier(make_config, ScriptedJudge(["PASS"]), "release", verifyAll=True)
    outcome = checked(await collect(streamed.stream(agent, TURN)))
    assert outcome.response == "On Monday."
    assert threads and all(name.startswith("replyguard-agent") for name in threads)


@pytest.mark.parametrize("mode", MODES)
async def test_a_judge_timeout_releases_the_reply(make_config: Any, mode: str) -> None:
    judge = ScriptedJudge(["PASS"], delay=5.0)
    agent = ScriptedStreamAgent([["On ", "Monday."]])
    streamed = verifier(make_config, judge, mode, verifyAll=True, timeoutSeconds=0.05)
    outcome = checked(await collect(streamed.stream(agent, TURN)))
    assert (outcome.status, outcome.reason, outcome.response) == (
        Status.FAILED_OPEN,
        Reason.JUDGE_TIMEOUT,
        "On Monday.",
    )


async def test_a_repaired_json_reply_replaces_what_was_shown(make_config: Any) -> None:
    agent = ScriptedStreamAgent([['```json\n{"total": 12,', "}\n```"]])
    config = make_config(
        verifyAll=True,
        judgeAfterChecks="never",
        checks=[{"type": "json", "expect": "object", "deliverRepaired": True}],
        streaming={"mode": "release", "holdBackChars": 0},
    )
    events = await collect(
        Verifier(config, judge=ScriptedJudge([]), preload=False).stream(agent, TURN)
    )
    outcome = checked(events)
    assert outcome.response == '{"total": 12}'
    assert Retract(1, "passed") in events


async def test_cancelling_while_a_sync_iterator_blocks_stays_a_cancellation(
    make_config: Any,
) -> None:
    """A sync agent's ``next`` blocked in its thread cannot be closed at once: the caller's
    cancellation still ends the turn as a cancellation, and the iterator is closed as soon as
    its blocked ``next`` returns."""
    import asyncio
    import threading

    blocked, unblock, closed = threading.Event(), threading.Event(), threading.Event()

    def pieces() -> Any:
        try:
            yield "first "
            blocked.set()
            unblock.wait(timeout=30)
            yield "late"
        finally:
            closed.set()

    def agent(messages: list[dict[str, Any]]) -> Any:
        return pieces()

    streamed = verifier(make_config, ScriptedJudge([]), "release", verifyAll=True)
    task = asyncio.create_task(collect(streamed.stream(agent, TURN)))
    await asyncio.to_thread(blocked.wait, 30)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    unblock.set()
    assert await asyncio.to_thread(closed.wait, 30)
