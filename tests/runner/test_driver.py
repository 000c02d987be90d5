"""The turn's one loop (``runner/_driver.drive``) and its attempt sources.

``run`` and ``stream`` differ only in their source of attempts; the loop is the driver's. A
third source, made here from a list of replies, must end every parity scenario as ``run``
ends it; what a source tells the caller comes out in order, before the outcome; a source that
withdraws a reply keeps it out of the retry's history; a cut it reports is decided without a
judge call.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, Sequence
from typing import Any

import pytest

from replyguard import FailCategory, Outcome, Reply, Status, Turn, Verifier
from replyguard.runner._agents import Messages
from replyguard.runner._driver import Retried, Told, drive, outcome_of
from replyguard.runner._run import _Run
from replyguard.runner._turn_scope import with_turn_id
from replyguard.testing import ScriptedJudge
from replyguard.types import Attempt, CheckResult, Delta, Progress, Retract
from support.turn_parity import ASK, Say, Scenario, config_of, seen_outcome, via_run

FAIL = "FAIL [incomplete]: Add the report's date."
FAIL_AGAIN = "FAIL [incomplete]:  add the REPORT'S date. "
A, B, C = Say("Done: the report."), Say("Done: the report, dated."), Say("Done: report v3.")

SCENARIOS = [
    Scenario("pass-first", (A,), ("PASS",)),
    Scenario("fail-then-pass", (A, B), (FAIL, "PASS")),
    Scenario("exhausted", (A, B, C), (FAIL, "FAIL [wrong]: No.", "FAIL [unsafe]: Stop.")),
    Scenario("stagnant-verdict", (A, B), (FAIL, FAIL_AGAIN)),
    Scenario("stagnant-reply", (A, Say(" done: THE report. ")), (FAIL,)),
    Scenario("agent-error-on-retry", (A, RuntimeError("model down")), (FAIL,)),
    Scenario("blank-retry", (A, Say("")), (FAIL,)),
    Scenario("error-report-retry", (A, Say("It broke.", error=True)), (FAIL,)),
    Scenario("judge-error", (A,), (RuntimeError("judge down"),)),
    Scenario("deliver-first", (A, B, C), (FAIL, "FAIL [wrong]: No.", "FAIL [unsafe]: Stop."),
             config={"deliver": "first"}),
    Scenario("side-effects-deliver", (Say("Sent it.", tool=True),), (FAIL,),
             config={"onSideEffects": "deliver"}),
    Scenario("cost-ceiling", (Say("Done.", cost=0.5), Say("Done again.", cost=0.5)), (FAIL,),
             config={"maxCostUsd": 0.005}),
]  # fmt: skip


class Listed:
    """A third source: the retries' replies from a list; records what the driver asked."""

    def __init__(
        self,
        replies: Sequence[Reply | BaseException],
        *,
        keep: bool = True,
        cuts: dict[int, CheckResult] | None = None,
        tell: bool = False,
    ) -> None:
        self.replies = list(replies)
        self.keep = keep
        self.cuts = cuts or {}
        self.tell = tell
        self.histories: list[Messages] = []

    def cut(self, number: int) -> CheckResult | None:
        return self.cuts.get(number)

    def judging(self, number: int) -> Sequence[Told]:
        return (Progress("checking", number),) if self.tell else ()

    def withdraw(self, attempt: Attempt) -> tuple[Sequence[Told], bool]:
        told = (Retract(attempt.number, "fail"),) if self.tell else ()
        return told, self.keep

    async def retry(self, messages: Messages, number: int) -> AsyncGenerator[Told | Retried]:
        self.histories.append(messages)
        if self.tell:
            yield Progress("revising", number)
        step = self.replies.pop(0)
        if isinstance(step, Exception):
            yield Retried(error=step)
            return
        assert isinstance(step, Reply)
        if self.tell:
            yield Delta(step.text)
        yield Retried(step)


def _turn_of(verifier: Verifier, turn: Turn) -> _Run:
    profile = verifier._profile(turn)
    return _Run(verifier._parts, with_turn_id(turn), profile, time.perf_counter())


def _first(messages: Sequence[Any]) -> Messages:
    return [dict(m) for m in messages]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
async def test_a_third_source_ends_every_scenario_as_run_does(scenario: Scenario) -> None:
    expected = await via_run(scenario)
    steps = [s.reply() if isinstance(s, Say) else s for s in scenario.replies]
    first, rest = steps[0], steps[1:]
    assert isinstance(first, Reply)
    verifier = Verifier(config_of(scenario), judge=scenario.judge())
    source = Listed(rest)
    history: Messages = [{"role": "user", "content": ASK}]
    outcome = await outcome_of(_turn_of(verifier, Turn(user_message=ASK)), source, history, first)
    feedback = [str(h[-1]["content"]) for h in source.histories]
    assert seen_outcome(outcome, feedback) == expected


async def test_what_a_source_tells_comes_out_in_order_and_the_outcome_last(
    make_config: Any,
) -> None:
    judge = ScriptedJudge([FAIL, "PASS"])
    verifier = Verifier(make_config(verifyAll=True), judge=judge)
    source = Listed([Reply(text="Done: the report, dated.")], tell=True)
    run = _turn_of(verifier, Turn(user_message=ASK))
    seen: list[object] = []
    history: Messages = [{"role": "user", "content": ASK}]
    async for step in drive(run, source, history, Reply(text="Done: the report.")):
        seen.append(step)
    assert [type(s).__name__ for s in seen] == [
        "Progress",  # checking 1
        "Retract",  # attempt 1 withdrawn
        "Progress",  # revising 2
        "Delta",  # attempt 2's text
        "Progress",  # checking 2
        "Outcome",
    ]
    assert [s.phase for s in seen if isinstance(s, Progress)] == [
        "checking",
        "revising",
        "checking",
    ]
    outcome = seen[-1]
    assert isinstance(outcome, Outcome) and outcome.status == Status.PASSED
    judge.assert_exhausted()


@pytest.mark.parametrize("keep", [True, False])
async def test_a_withdrawn_reply_stays_out_of_the_retrys_history(
    make_config: Any, keep: bool
) -> None:
    verifier = Verifier(make_config(verifyAll=True), judge=ScriptedJudge([FAIL, "PASS"]))
    source = Listed([Reply(text="Done: the report, dated.")], keep=keep)
    history: Messages = [{"role": "user", "content": ASK}]
    run = _turn_of(verifier, Turn(user_message=ASK))
    await outcome_of(run, source, history, Reply(text="Done: the report."))
    (seen,) = source.histories
    roles = [m["role"] for m in seen]
    assert roles == (["user", "assistant", "user"] if keep else ["user", "user"])
    assert history == [{"role": "user", "content": ASK}]  # the caller's list is not changed


async def test_a_cut_the_source_reports_is_decided_without_a_judge_call(
    make_config: Any,
) -> None:
    judge = ScriptedJudge(["PASS"])  # only the retry is judged
    verifier = Verifier(make_config(verifyAll=True), judge=judge)
    cut = CheckResult(
        name="no_promises",
        passed=False,
        category=FailCategory.RULE_VIOLATION,
        feedback="Do not promise.",
    )
    source = Listed([Reply(text="Done: the report, dated.")], cuts={1: cut})
    run = _turn_of(verifier, Turn(user_message=ASK))
    history: Messages = [{"role": "user", "content": ASK}]
    outcome = await outcome_of(run, source, history, Reply(text="I promise it"))
    assert outcome.status == Status.PASSED and outcome.response == "Done: the report, dated."
    first = outcome.attempts[0]
    assert first.verdict is not None and not first.verdict.passed and first.checks == (cut,)
    judge.assert_exhausted()
