"""The verification loop, driven by the shipped fakes (no HTTP here)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from replyguard import (
    CrossFamilyError,
    FailCategory,
    Reason,
    Reply,
    RunMeta,
    SkipReason,
    Status,
    Turn,
    Verifier,
)
from replyguard.context import JudgePrompt
from replyguard.judge import JudgeReply
from replyguard.runner._feedback import feedback_message
from replyguard.testing import ScriptedAgent, ScriptedJudge, ScriptError

FAIL_INCOMPLETE = "Missing the date.\nFAIL [incomplete]: Add the meeting date."
TURN = Turn(user_message="Summarise the meeting notes.")


def section(prompt: JudgePrompt, name: str) -> str | None:
    """The content of one fenced section of a judge prompt, or None when absent."""
    opening, closing = f"<{name}-{prompt.nonce}>\n", f"\n</{name}-{prompt.nonce}>"
    if opening not in prompt.user:
        return None
    return prompt.user.split(opening, 1)[1].split(closing, 1)[0]


# -- when nothing is judged -----------------------------------------------------------------


async def test_disabled_delivers_without_judging(make_config: Any) -> None:
    judge, agent = ScriptedJudge([]), ScriptedAgent(["Done."])
    outcome = await Verifier(make_config(enabled=False), judge=judge).run(agent, TURN)
    assert (outcome.status, outcome.response, len(outcome.attempts)) == (
        Status.DISABLED,
        "Done.",
        1,
    )
    judge.assert_exhausted()


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (Reply(text="Done", meta=RunMeta(pending_tool_calls=2)), SkipReason.TOOL_CALLS),
        (
            Reply(text="Done", meta=RunMeta(sent_via_messaging_tool=True)),
            SkipReason.MESSAGING_TOOL_SENT,
        ),
        (
            Reply(text="Done", meta=RunMeta(streamed_block_keys=frozenset({"b1"}))),
            SkipReason.BLOCK_STREAMING_SENT,
        ),
        (Reply(text="  \n"), SkipReason.EMPTY_RESPONSE),
        (Reply(text="Done?", meta=RunMeta(error="rate limited")), SkipReason.ERROR_RESPONSE),
    ],
)
async def test_prechecks_skip_without_judging(
    make_config: Any, reply: Reply, reason: SkipReason
) -> None:
    judge = ScriptedJudge([])
    outcome = await Verifier(make_config(verifyAll=True), judge=judge).run(
        ScriptedAgent([reply]), TURN
    )
    assert (outcome.status, outcome.skip_reason, outcome.response) == (
        Status.SKIPPED,
        reason,
        reply.text,
    )
    judge.assert_exhausted()


async def test_reply_without_keyword_is_not_judged(make_config: Any) -> None:
    judge = ScriptedJudge([])
    outcome = await Verifier(make_config(), judge=judge).run(
        ScriptedAgent(["Paris is the capital of France."]), TURN
    )
    assert outcome.status == Status.NOT_TRIGGERED
    judge.assert_exhausted()


@pytest.mark.parametrize(
    ("keys", "text"),
    [({"verifyAll": True}, "Paris is the capital."), ({}, "All done: Paris is the capital.")],
    ids=["verify_all", "keyword"],
)
async def test_triggered_reply_is_judged(make_config: Any, keys: dict[str, Any], text: str) -> None:
    judge = ScriptedJudge(["PASS"])
    outcome = await Verifier(make_config(**keys), judge=judge).run(ScriptedAgent([text]), TURN)
    assert outcome.status == Status.PASSED
    judge.assert_exhausted()


# -- the retry loop ------------------------------------------------------------------------


async def test_fail_then_pass_feeds_back_on_a_copy_of_the_messages(make_config: Any) -> None:
    history = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    turn = Turn(user_message="Summarise the notes.", history=history)
    judge = ScriptedJudge([FAIL_INCOMPLETE, "PASS"])
    agent = ScriptedAgent(["Done: summary.", "Done: summary, dated 3 May."])
    outcome = await Verifier(make_config(), judge=judge).run(agent, turn)

    assert (outcome.status, outcome.response) == (Status.PASSED, "Done: summary, dated 3 May.")
    first_verdict = outcome.attempts[0].verdict
    assert first_verdict is not None
    assert agent.calls == [
        [*history, {"role": "user", "content": "Summarise the notes."}],
        [
            *history,
            {"role": "user", "content": "Summarise the notes."},
            {"role": "assistant", "content": "Done: summary."},
            {"role": "user", "content": feedback_message(first_verdict)},
        ],
    ]
    assert turn.history == history and len(turn.history) == 2


async def test_retry_feedback_names_category_and_carries_judge_feedback(make_config: Any) -> None:
    agent = ScriptedAgent(["Done: summary.", "Done: summary, dated."])
    await Verifier(make_config(), judge=ScriptedJudge([FAIL_INCOMPLETE, "PASS"])).run(agent, TURN)
    feedback = agent.calls[1][-1]["content"]
    assert "incomplete" in feedback
    assert "Add the meeting date." in feedback
    assert "change nothing else" in feedback


async def test_second_judgement_sees_previous_feedback(make_config: Any) -> None:
    judge = ScriptedJudge([FAIL_INCOMPLETE, "PASS"])
    await Verifier(make_config(), judge=judge).run(ScriptedAgent(["Done.", "Done, dated."]), TURN)
    assert section(judge.calls[0], "previous_feedback") is None
    assert section(judge.calls[1], "previous_feedback") == (
        "Attempt 1: FAIL [incomplete]: Add the meeting date."
    )
    assert section(judge.calls[1], "assistant_reply") == "Done, dated."


async def test_retry_without_keyword_is_still_judged(make_config: Any) -> None:
    judge = ScriptedJudge([FAIL_INCOMPLETE, "PASS"])
    outcome = await Verifier(make_config(), judge=judge).run(
        ScriptedAgent(["Done.", "Here is the dated summary."]), TURN
    )
    assert outcome.status == Status.PASSED
    judge.assert_exhausted()


async def test_every_attempt_failing_delivers_the_last_reply(make_config: Any) -> None:
    judge = ScriptedJudge([f"FAIL [incomplete]: part {i} is missing." for i in range(3)])
    agent = ScriptedAgent(["Done 1", "Done 2", "Done 3"])
    outcome = await Verifier(make_config(maxAttempts=3), judge=judge).run(agent, TURN)
    assert (outcome.status, outcome.response, outcome.reason) == (Status.EXHAUSTED, "Done 3", None)
    assert [a.verdict.category for a in outcome.attempts if a.verdict] == [
        FailCategory.INCOMPLETE
    ] * 3
    agent.assert_exhausted()
    judge.assert_exhausted()


async def test_single_attempt_never_retries(make_config: Any) -> None:
    agent = ScriptedAgent(["Done."])
    outcome = await Verifier(
        make_config(maxAttempts=1), judge=ScriptedJudge([FAIL_INCOMPLETE])
    ).run(agent, TURN)
    assert (outcome.status, len(outcome.attempts)) == (Status.EXHAUSTED, 1)
    agent.assert_exhausted()


# -- failing open ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (RuntimeError("provider exploded"), Reason.JUDGE_ERROR),
        ("I think it is fine overall.", Reason.UNREADABLE_VERDICT),
        ("", Reason.UNREADABLE_VERDICT),
        (TimeoutError(), Reason.JUDGE_TIMEOUT),
    ],
    ids=["error", "no_verdict_line", "empty", "timeout_error"],
)
async def test_judge_trouble_fails_open_with_the_reply(
    make_config: Any, answer: Any, reason: Reason
) -> None:
    outcome = await Verifier(make_config(), judge=ScriptedJudge([answer])).run(
        ScriptedAgent(["Done: the summary."]), TURN
    )
    assert (outcome.status, outcome.reason, outcome.response) == (
        Status.FAILED_OPEN,
        reason,
        "Done: the summary.",
    )
    verdict = outcome.attempts[0].verdict
    assert verdict is not None and verdict.passed and not verdict.readable


async def test_slow_judge_fails_open_at_the_deadline(make_config: Any) -> None:
    judge = ScriptedJudge(["PASS"], delay=30)
    started = time.monotonic()
    outcome = await Verifier(make_config(timeoutSeconds=0.2), judge=judge).run(
        ScriptedAgent(["Done."]), TURN
    )
    assert (outcome.status, outcome.reason) == (Status.FAILED_OPEN, Reason.JUDGE_TIMEOUT)
    assert time.monotonic() - started < 5
    assert judge.timeouts == [pytest.approx(0.2, abs=0.01)]


async def test_judge_failure_on_retry_delivers_the_retry(make_config: Any) -> None:
    judge = ScriptedJudge([FAIL_INCOMPLETE, RuntimeError("down")])
    outcome = await Verifier(make_config(), judge=judge).run(
        ScriptedAgent(["Done.", "Done, dated."]), TURN
    )
    assert (outcome.status, outcome.reason, outcome.response) == (
        Status.FAILED_OPEN,
        Reason.JUDGE_ERROR,
        "Done, dated.",
    )


async def test_agent_error_on_first_attempt_propagates(make_config: Any) -> None:
    class AgentBroke(Exception):
        pass

    with pytest.raises(AgentBroke):
        await Verifier(make_config(), judge=ScriptedJudge([])).run(
            ScriptedAgent([AgentBroke("boom")]), TURN
        )


async def test_agent_returning_a_wrong_type_is_the_callers_error(make_config: Any) -> None:
    async def agent(messages: list[dict[str, Any]]) -> Any:
        return {"text": "Done"}

    with pytest.raises(TypeError, match="Reply or a str"):
        await Verifier(make_config(), judge=ScriptedJudge([])).run(agent, TURN)


@pytest.mark.parametrize(
    "retry",
    [
        RuntimeError("agent crashed"),
        "",
        Reply(text="Done?", meta=RunMeta(error="overloaded")),
        Reply(text="", meta=RunMeta(pending_tool_calls=1)),
    ],
    ids=["raises", "empty", "error_reply", "tool_call_step"],
)
async def test_agent_trouble_on_retry_delivers_the_previous_reply(
    make_config: Any, retry: Any
) -> None:
    outcome = await Verifier(make_config(), judge=ScriptedJudge([FAIL_INCOMPLETE])).run(
        ScriptedAgent(["Done: first.", retry]), TURN
    )
    assert (outcome.status, outcome.reason, outcome.response) == (
        Status.FAILED_OPEN,
        Reason.AGENT_ERROR,
        "Done: first.",
    )


async def test_retry_already_sent_by_messaging_tool_is_delivered_unjudged(make_config: Any) -> None:
    sent = Reply(text="Done, sent.", meta=RunMeta(sent_via_messaging_tool=True))
    judge = ScriptedJudge([FAIL_INCOMPLETE])
    outcome = await Verifier(make_config(), judge=judge).run(ScriptedAgent(["Done.", sent]), TURN)
    assert (outcome.status, outcome.skip_reason, outcome.response) == (
        Status.SKIPPED,
        SkipReason.MESSAGING_TOOL_SENT,
        "Done, sent.",
    )
    judge.assert_exhausted()


async def test_internal_error_building_the_prompt_fails_open(
    make_config: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise ValueError("template trouble")

    monkeypatch.setattr("replyguard.runner._prompting.build_judge_prompt", broken)
    outcome = await Verifier(make_config(), judge=ScriptedJudge([])).run(
        ScriptedAgent(["Done."]), TURN
    )
    assert (outcome.status, outcome.reason, outcome.response) == (
        Status.FAILED_OPEN,
        Reason.INTERNAL_ERROR,
        "Done.",
    )


# -- cost --------------------------------------------------------------------------------


async def test_cost_adds_judge_and_reported_agent_spend(make_config: Any) -> None:
    agent = ScriptedAgent(
        [Reply(text="Done.", meta=RunMeta(cost_usd=0.002)), Reply(text="Done!", meta=RunMeta())]
    )
    judge = ScriptedJudge([FAIL_INCOMPLETE, "PASS"], cost_usd=0.01)
    outcome = await Verifier(make_config(), judge=judge).run(agent, TURN)
    assert outcome.judge_cost_usd == pytest.approx(0.02)
    assert outcome.cost_usd == pytest.approx(0.022)


async def test_cost_ceiling_stops_before_a_retry_it_cannot_judge(make_config: Any) -> None:
    agent = ScriptedAgent(["Done."])
    judge = ScriptedJudge([FAIL_INCOMPLETE], cost_usd=0.01)
    outcome = await Verifier(make_config(maxCostUsd=0.015), judge=judge).run(agent, TURN)
    assert (outcome.status, outcome.reason, outcome.response) == (
        Status.FAILED_OPEN,
        Reason.COST_BUDGET,
        "Done.",
    )
    agent.assert_exhausted()


async def test_cost_ceiling_allows_retries_it_can_pay_for(make_config: Any) -> None:
    judge = ScriptedJudge([FAIL_INCOMPLETE, "PASS"], cost_usd=0.01)
    outcome = await Verifier(make_config(maxCostUsd=0.02), judge=judge).run(
        ScriptedAgent(["Done.", "Done, dated."]), TURN
    )
    assert outcome.status == Status.PASSED


# -- model families -----------------------------------------------------------------------


def test_same_family_judge_is_refused_at_construction_when_required(make_config: Any) -> None:
    config = make_config(agentModel="anthropic/claude-haiku-4-5", requireCrossFamily=True)
    with pytest.raises(CrossFamilyError, match="anthropic"):
        Verifier(config, judge=ScriptedJudge([]))


def test_same_family_judge_only_warns_when_not_required(
    make_config: Any, replyguard_logs: pytest.LogCaptureFixture
) -> None:
    Verifier(make_config(agentModel="azure/claude-opus-4"), judge=ScriptedJudge([]))
    assert [r.getMessage().split()[0] for r in replyguard_logs.records] == ["judge_same_family"]


async def test_same_family_turn_fails_open_without_a_judge_call(make_config: Any) -> None:
    judge = ScriptedJudge([])
    turn = Turn(user_message="Summarise.", agent_model="claude-3-5-haiku", id="t1")
    outcome = await Verifier(make_config(requireCrossFamily=True), judge=judge).run(
        ScriptedAgent(["Done."]), turn
    )
    assert (outcome.status, outcome.reason) == (Status.FAILED_OPEN, Reason.SAME_FAMILY)
    judge.assert_exhausted()


async def test_unknown_agent_family_warns_once(
    make_config: Any, replyguard_logs: pytest.LogCaptureFixture
) -> None:
    verifier = Verifier(
        make_config(agentModel=None, verifyAll=True), judge=ScriptedJudge(["PASS"] * 2)
    )
    turn = Turn(user_message="Hi", agent_model="house-model-7")
    for _ in range(2):
        await verifier.run(ScriptedAgent(["Hello"]), turn)
    warnings = [r for r in replyguard_logs.records if "agent_family_unknown" in r.getMessage()]
    assert len(warnings) == 1


# -- heartbeat -------------------------------------------------------------------------------


async def test_heartbeat_turn_is_judged_with_its_task_list(
    make_config: Any, tmp_path: Path
) -> None:
    (tmp_path / "HEARTBEAT.md").write_text("- [ ] Rotate the logs\n", encoding="utf-8")
    judge = ScriptedJudge(["FAIL [goal_missed]: Rotate the logs.", "PASS"])
    config = make_config(verifyHeartbeat=True, workspaceDir=str(tmp_path))
    outcome = await Verifier(config, judge=judge).run(
        ScriptedAgent(["Checked; nothing urgent.", "Rotated the logs."]),
        Turn(user_message="tick", heartbeat=True),
    )
    assert outcome.status == Status.PASSED
    assert section(judge.calls[0], "heartbeat_tasks") == "- [ ] Rotate the logs"


async def test_heartbeat_turn_ignores_verify_all_when_heartbeats_are_off(make_config: Any) -> None:
    judge = ScriptedJudge([])
    outcome = await Verifier(make_config(verifyAll=True), judge=judge).run(
        ScriptedAgent(["Done. HEARTBEAT_OK"]), Turn(user_message="tick", heartbeat=True)
    )
    assert outcome.status == Status.NOT_TRIGGERED


async def test_rules_reach_the_judge_from_files_and_code(make_config: Any, tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("Answer in English.", encoding="utf-8")
    judge = ScriptedJudge(["PASS"])
    turn = Turn(user_message="Hi", rules=["Be brief."])
    await Verifier(make_config(verifyAll=True, workspaceDir=str(tmp_path)), judge=judge).run(
        ScriptedAgent(["Hello"]), turn
    )
    assert section(judge.calls[0], "user_rules") == (
        "## AGENTS.md\nAnswer in English.\n\n## rules for this turn\n- Be brief."
    )


# -- verify() --------------------------------------------------------------------------------


async def test_verify_judges_even_when_disabled(make_config: Any) -> None:
    judge = ScriptedJudge([FAIL_INCOMPLETE])
    verdict = await Verifier(make_config(enabled=False), judge=judge).verify(TURN, "Done.")
    assert (verdict.passed, verdict.category, verdict.feedback) == (
        False,
        FailCategory.INCOMPLETE,
        "Add the meeting date.",
    )


async def test_verify_fails_open_as_a_verdict(make_config: Any) -> None:
    verdict = await Verifier(make_config(), judge=ScriptedJudge([RuntimeError("down")])).verify(
        TURN, Reply(text="Done.")
    )
    assert (verdict.passed, verdict.readable, verdict.fail_open_reason) == (
        True,
        False,
        Reason.JUDGE_ERROR,
    )
    assert verdict.error == "RuntimeError: down"


async def test_verdict_carries_model_tokens_cost_and_latency(make_config: Any) -> None:
    answer = JudgeReply(
        text="PASS", model="judge-x", prompt_tokens=900, completion_tokens=3, cost_usd=0.004
    )
    verdict = await Verifier(make_config(), judge=ScriptedJudge([answer])).verify(TURN, "Done.")
    assert (verdict.model, verdict.prompt_tokens, verdict.completion_tokens, verdict.cost_usd) == (
        "judge-x",
        900,
        3,
        0.004,
    )
    assert verdict.latency_ms >= 0


# -- agents of every shape, sync entry, sharing ----------------------------------------------


async def test_sync_agent_runs_off_the_event_loop(make_config: Any) -> None:
    loop_thread = threading.get_ident()
    seen: list[int] = []

    def agent(messages: list[dict[str, Any]]) -> str:
        seen.append(threading.get_ident())
        return "Paris."

    outcome = await Verifier(make_config(), judge=ScriptedJudge([])).run(agent, TURN)
    assert outcome.response == "Paris." and seen and seen[0] != loop_thread


def test_run_sync_works_repeatedly_and_from_threads(make_config: Any) -> None:
    verifier = Verifier(make_config(verifyAll=True), judge=ScriptedJudge(["PASS"] * 11))
    try:
        for _ in range(3):
            assert verifier.run_sync(lambda m: "Hello", TURN).status == Status.PASSED
        with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
            outcomes = list(
                pool.map(lambda i: verifier.run_sync(lambda m: f"r{i}", TURN), range(8))
            )
        assert sorted(o.response for o in outcomes) == sorted(f"r{i}" for i in range(8))
    finally:
        verifier.close()


async def test_run_sync_inside_a_running_loop_is_refused(make_config: Any) -> None:
    verifier = Verifier(make_config(), judge=ScriptedJudge([]))
    with pytest.raises(RuntimeError, match="await run"):
        verifier.run_sync(lambda m: "x", TURN)


def test_verifier_is_immutable(make_config: Any) -> None:
    verifier = Verifier(make_config(), judge=ScriptedJudge([]))
    with pytest.raises(AttributeError, match="immutable"):
        verifier._config = make_config(enabled=False)  # type: ignore[misc]


async def test_hundred_concurrent_turns_share_one_verifier_without_cross_talk(
    make_config: Any,
) -> None:
    turns = 100
    all_in_flight = asyncio.Event()
    in_flight = 0

    async def answer(prompt: JudgePrompt) -> str:
        nonlocal in_flight
        in_flight += 1
        if in_flight == turns:
            all_in_flight.set()
        await asyncio.wait_for(all_in_flight.wait(), timeout=10)  # every judgement overlaps
        number = int((section(prompt, "user_request") or "").split("#")[1])
        reply = section(prompt, "assistant_reply") or ""
        if number % 2 and "fixed" not in reply:
            return f"FAIL [incomplete]: fix turn {number}"
        return "PASS"

    script = [answer] * (turns + turns // 2)
    verifier = Verifier(make_config(verifyAll=True), judge=ScriptedJudge(script))

    def agent_for(number: int) -> Any:
        async def agent(messages: list[dict[str, Any]]) -> str:
            fixed = " fixed" if len(messages) > 1 else ""
            return f"reply to #{number}{fixed}"

        return agent

    async def one(number: int) -> Any:
        turn = Turn(user_message=f"request #{number}", id=str(number))
        return await verifier.run(agent_for(number), turn)

    outcomes = await asyncio.gather(*(one(n) for n in range(turns)))
    for number, outcome in enumerate(outcomes):
        expected = f"reply to #{number} fixed" if number % 2 else f"reply to #{number}"
        assert (outcome.status, outcome.response) == (Status.PASSED, expected)
        assert len(outcome.attempts) == (2 if number % 2 else 1)


def test_scripted_fakes_fail_loudly_when_overcalled() -> None:
    agent = ScriptedAgent(["one"])
    asyncio.run(agent([]))
    with pytest.raises(ScriptError, match="called 2 times but scripted for 1"):
        asyncio.run(agent([]))


# -- a custom judge's answers are checked ----------------------------------------------------


@pytest.mark.parametrize(
    "answer",
    [lambda p: None, lambda p: 42, lambda p: JudgeReply(text="PASS", model="m", cost_usd=None)],
    ids=["none", "number", "bad_cost"],
)
async def test_custom_judge_returning_nonsense_fails_open(make_config: Any, answer: Any) -> None:
    class Odd:
        async def judge(self, prompt: JudgePrompt, *, time_left: float) -> Any:
            return answer(prompt)

    outcome = await Verifier(make_config(verifyAll=True), judge=Odd()).run(  # type: ignore[arg-type]
        ScriptedAgent(["Hello"]), TURN
    )
    assert (outcome.status, outcome.reason, outcome.response) == (
        Status.FAILED_OPEN,
        Reason.JUDGE_ERROR,
        "Hello",
    )


def test_fallback_of_the_agents_family_is_refused_when_cross_family_is_required(
    make_config: Any,
) -> None:
    config = make_config(requireCrossFamily=True, fallbackModels=["azure/gpt-4o-mini"])
    with pytest.raises(CrossFamilyError, match="gpt-4o-mini"):
        Verifier(config, judge=ScriptedJudge([]))


async def test_zero_cost_ceiling_never_pays_a_judge(make_config: Any) -> None:
    judge = ScriptedJudge([])
    outcome = await Verifier(make_config(maxCostUsd=0), judge=judge).run(
        ScriptedAgent(["Done."]), TURN
    )
    assert (outcome.status, outcome.reason) == (Status.FAILED_OPEN, Reason.COST_BUDGET)
    judge.assert_exhausted()


async def test_judge_warmup_is_not_counted_in_the_judgement_deadline(make_config: Any) -> None:
    class SlowStart(ScriptedJudge):
        warm = False

        @property
        def ready(self) -> bool:
            return self.warm

        async def warmup(self) -> None:
            await asyncio.sleep(0.5)  # a cold import of litellm, say
            self.warm = True

    judge = SlowStart(["PASS"])
    outcome = await Verifier(make_config(timeoutSeconds=0.3), judge=judge).run(
        ScriptedAgent(["Done."]), TURN
    )
    assert outcome.status == Status.PASSED
    assert judge.warm


@pytest.mark.parametrize(
    "answer",
    [
        "FAIL [formatting]: use a table.",
        '{"verdict": "FAIL", "category": "formatting", "feedback": "use a table."}',
    ],
    ids=["text", "json"],
)
async def test_a_fail_with_an_unknown_category_reaches_the_agent_readably(
    make_config: Any, answer: str
) -> None:
    agent = ScriptedAgent(["Done: a list.", "Done: a table."])
    verifier = Verifier(make_config(verifyAll=True), judge=ScriptedJudge([answer, "PASS"]))
    outcome = await verifier.run(agent, Turn(user_message="Compare the plans."))
    first = outcome.attempts[0].verdict
    assert first is not None and (first.category, first.feedback) == (
        None,
        "[formatting] use a table.",
    )
    retry_message = agent.calls[1][-1]["content"]
    assert "Reviewer's feedback: [formatting] use a table.\n" in retry_message
