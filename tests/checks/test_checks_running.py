"""Checks inside the loop: concurrency, crashes, merged feedback, judge gating, results."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from replyguard import FailCategory, Reply, RunMeta, Status, ToolCallRecord, Turn, Verifier
from replyguard.checks.base import CheckResult, FunctionCheck, failed, passed
from replyguard.checks.registry import build_checks
from replyguard.checks.running import run_checks
from replyguard.telemetry import Events
from replyguard.testing import ScriptedAgent, ScriptedJudge

TURN = Turn(user_message="Give me the report as JSON.")


class Probe:
    """A check whose answers come from a script, one per call, recording each reply seen."""

    def __init__(self, name: str, *answers: CheckResult | Exception, required: bool = False):
        self.name = name
        self.required = required
        self._answers = list(answers)
        self.seen: list[str] = []

    async def check(self, turn: Turn, reply: Reply) -> CheckResult:
        self.seen.append(reply.text)
        answer = self._answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def too_long(name: str = "length") -> CheckResult:
    return failed(name, FailCategory.RULE_VIOLATION, "The reply is too long.")


def verifier(make_config: Any, judge: ScriptedJudge, *checks: Any, **keys: Any) -> Verifier:
    return Verifier(make_config(verifyAll=True, checks=[], **keys), judge=judge, checks=checks)


async def test_checks_run_concurrently(make_config: Any) -> None:
    first_started, second_started = asyncio.Event(), asyncio.Event()

    async def waits_for(mine: asyncio.Event, other: asyncio.Event) -> bool:
        mine.set()
        await asyncio.wait_for(other.wait(), timeout=5)  # a serial run would never get here
        return True

    one = FunctionCheck(lambda t, r: waits_for(first_started, second_started), name="one")
    two = FunctionCheck(lambda t, r: waits_for(second_started, first_started), name="two")
    outcome = await verifier(make_config, ScriptedJudge(["PASS"]), one, two).run(
        ScriptedAgent(["{}"]), TURN
    )
    assert outcome.status == Status.PASSED
    assert [(r.name, r.passed, r.error) for r in outcome.attempts[0].checks] == [
        ("one", True, None),
        ("two", True, None),
    ]


async def test_failed_check_fails_the_attempt_without_a_judge_call(make_config: Any) -> None:
    probe = Probe("length", too_long(), passed("length"))
    judge = ScriptedJudge(["PASS"])
    agent = ScriptedAgent(["a very long reply", "short"])
    outcome = await verifier(make_config, judge, probe).run(agent, TURN)
    assert (outcome.status, outcome.response) == (Status.PASSED, "short")
    first = outcome.attempts[0].verdict
    assert first is not None
    assert (first.passed, first.category, first.decisive) == (
        False,
        FailCategory.RULE_VIOLATION,
        True,
    )
    assert judge.call_count == 1  # only the second attempt reached the judge
    assert "[length] The reply is too long." in agent.calls[1][-1]["content"]


async def test_failures_of_one_attempt_merge_into_one_feedback(make_config: Any) -> None:
    checks = (
        Probe(
            "json", failed("json", FailCategory.INCOMPLETE, "Missing field total."), passed("json")
        ),
        Probe("length", too_long(), passed("length")),
        Probe("tone", passed("tone"), passed("tone")),
    )
    agent = ScriptedAgent(["bad", "good"])
    outcome = await verifier(make_config, ScriptedJudge(["PASS"]), *checks).run(agent, TURN)
    verdict = outcome.attempts[0].verdict
    assert verdict is not None
    assert verdict.category == FailCategory.INCOMPLETE  # the first failure's
    assert verdict.feedback == "[json] Missing field total.\n[length] The reply is too long."


async def test_crashing_ordinary_check_is_ignored_and_logged(
    make_config: Any, replyguard_logs: pytest.LogCaptureFixture
) -> None:
    probe = Probe("flaky", RuntimeError("check bug"))
    outcome = await verifier(make_config, ScriptedJudge(["PASS"]), probe).run(
        ScriptedAgent(["fine"]), TURN
    )
    assert outcome.status == Status.PASSED
    (result,) = outcome.attempts[0].checks
    assert (result.passed, result.error) == (True, "RuntimeError: check bug")
    assert any("check_crashed" in r.getMessage() for r in replyguard_logs.records)


async def test_crashing_required_check_counts_as_a_fail_and_the_reply_is_still_delivered(
    make_config: Any,
) -> None:
    probe = Probe("schema", RuntimeError("broken"), RuntimeError("broken"), required=True)
    agent = ScriptedAgent(["one", "two"])
    outcome = await verifier(make_config, ScriptedJudge([]), probe, maxAttempts=2).run(agent, TURN)
    assert (outcome.status, outcome.response) == (Status.EXHAUSTED, "two")
    assert "The required check 'schema' could not verify the reply" in agent.calls[1][-1]["content"]


async def test_hanging_check_times_out_as_a_crash(make_config: Any) -> None:
    async def hangs(turn: Turn, reply: Reply) -> bool:
        await asyncio.sleep(60)
        return True

    outcome = await verifier(
        make_config, ScriptedJudge(["PASS"]), FunctionCheck(hangs), timeoutSeconds=0.2
    ).run(ScriptedAgent(["fine"]), TURN)
    assert outcome.status == Status.PASSED
    assert outcome.attempts[0].checks[0].error == "did not finish within 0.2 s"


async def run_alone(*checks: Any, time_limit: float = 5.0) -> tuple[CheckResult, ...]:
    """The results of ``run_checks`` on one reply, outside any verifier."""
    return await run_checks(checks, TURN, Reply(text="hi"), time_limit=time_limit, events=Events())


async def test_a_check_cancelled_from_inside_is_its_own_crash() -> None:
    async def awaits_a_cancelled_task(turn: Turn, reply: Reply) -> bool:
        inner = asyncio.ensure_future(asyncio.sleep(10))
        inner.cancel()
        await inner
        return True

    (result,) = await run_alone(FunctionCheck(awaits_a_cancelled_task, name="inner"))
    assert (result.passed, result.error) == (True, "CancelledError")


async def test_cancelling_the_run_still_cancels_its_checks() -> None:
    started = asyncio.Event()

    async def waits(turn: Turn, reply: Reply) -> bool:
        started.set()
        await asyncio.sleep(60)
        return True

    task = asyncio.create_task(run_alone(FunctionCheck(waits)))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_an_exception_that_cannot_be_described_is_named_by_its_class() -> None:
    class Unprintable(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no text")

    def raises(turn: Turn, reply: Reply) -> bool:
        raise Unprintable

    (result,) = await run_alone(FunctionCheck(raises, name="odd"))
    assert (result.passed, result.error) == (True, "Unprintable")


class NotMine(Probe):
    """A probe that says up front that no reply is its business, recording each question."""

    def __init__(self, name: str, *, required: bool = False) -> None:
        super().__init__(name, too_long(name), required=required)
        self.asked: list[str] = []

    def applies(self, turn: Turn, reply: Reply) -> bool:
        self.asked.append(reply.text)
        return False


@pytest.mark.parametrize("required", [False, True])
async def test_a_check_that_does_not_apply_is_never_called_and_passes(required: bool) -> None:
    lone, beside = NotMine("lone", required=required), NotMine("beside")
    other = Probe("other", passed("other"))
    alone = await run_alone(lone)
    together = await run_alone(beside, other)
    assert (lone.asked, lone.seen, beside.seen, other.seen) == (["hi"], [], [], ["hi"])
    assert alone == (CheckResult(name="lone", passed=True, required=required),)
    assert together[0] == CheckResult(name="beside", passed=True)
    assert (together[0].error, together[0].feedback, together[0].decisive) == (None, None, False)
    assert together[1].name == "other"


async def test_a_slow_sync_check_does_not_hold_up_the_others() -> None:
    release = threading.Event()

    def waits_for_release(turn: Turn, reply: Reply) -> bool:
        return release.wait(timeout=5)  # inline on the loop, the other check could not run

    async def releases(turn: Turn, reply: Reply) -> bool:
        release.set()
        return True

    results = await run_alone(FunctionCheck(waits_for_release), FunctionCheck(releases))
    assert [r.passed for r in results] == [True, True]


async def test_a_slow_sync_check_times_out_as_a_crash() -> None:
    release = threading.Event()
    try:
        (result,) = await run_alone(
            FunctionCheck(lambda t, r: release.wait(timeout=5), name="slow"), time_limit=0.2
        )
    finally:
        release.set()  # let the abandoned thread end
    assert result.error == "did not finish within 0.2 s"


@pytest.mark.parametrize(
    ("result", "expected"),
    [
        (True, (True, None)),
        (False, (False, "the check 'plain' failed")),
        ((False, "Say hello first."), (False, "Say hello first.")),
        (failed("plain", FailCategory.TONE_MISMATCH, "Warmer."), (False, "Warmer.")),
    ],
    ids=["true", "false", "pair", "result"],
)
async def test_plain_functions_are_checks(make_config: Any, result: Any, expected: Any) -> None:
    def plain(turn: Turn, reply: Reply) -> Any:
        return result

    judge = ScriptedJudge([] if not expected[0] else ["PASS"])
    outcome = await verifier(make_config, judge, plain, maxAttempts=1).run(
        ScriptedAgent(["hi"]), TURN
    )
    (found,) = outcome.attempts[0].checks
    assert (found.passed, found.feedback) == expected


async def test_function_returning_nonsense_is_a_crash(make_config: Any) -> None:
    outcome = await verifier(make_config, ScriptedJudge(["PASS"]), lambda t, r: "yes").run(
        ScriptedAgent(["hi"]), TURN
    )
    assert "expected a CheckResult, a bool or a (bool, message) pair" in (
        outcome.attempts[0].checks[0].error or ""
    )


# -- judgeAfterChecks --------------------------------------------------------------------------


async def test_always_mode_judges_despite_failed_checks_and_merges(make_config: Any) -> None:
    judge = ScriptedJudge(["FAIL [goal_missed]: Wrong report.", "PASS"])
    probe = Probe("length", too_long(), passed("length"))
    agent = ScriptedAgent(["long", "ok"])
    outcome = await verifier(make_config, judge, probe, judgeAfterChecks="always").run(agent, TURN)
    verdict = outcome.attempts[0].verdict
    assert verdict is not None
    assert verdict.feedback == "[length] The reply is too long.\n[judge] Wrong report."
    assert verdict.category == FailCategory.RULE_VIOLATION
    judge.assert_exhausted()


async def test_always_mode_keeps_the_checks_failure_when_the_judge_passes(make_config: Any) -> None:
    judge = ScriptedJudge(["PASS", "PASS"])
    probe = Probe("length", too_long(), passed("length"))
    outcome = await verifier(make_config, judge, probe, judgeAfterChecks="always").run(
        ScriptedAgent(["long", "ok"]), TURN
    )
    assert [a.verdict.passed for a in outcome.attempts if a.verdict] == [False, True]


async def test_never_mode_lets_passing_checks_decide_alone(make_config: Any) -> None:
    judge = ScriptedJudge([])
    outcome = await verifier(
        make_config, judge, Probe("length", passed("length")), judgeAfterChecks="never"
    ).run(ScriptedAgent(["ok"]), TURN)
    verdict = outcome.attempts[0].verdict
    assert (outcome.status, verdict is not None and verdict.decisive) == (Status.PASSED, True)
    judge.assert_exhausted()


async def test_decisive_pass_skips_the_judge(make_config: Any) -> None:
    probe = Probe("heartbeat", passed("heartbeat", decisive=True))
    judge = ScriptedJudge([])
    outcome = await verifier(make_config, judge, probe).run(ScriptedAgent(["HEARTBEAT_OK"]), TURN)
    assert outcome.status == Status.PASSED
    judge.assert_exhausted()


async def test_decisive_pass_does_not_outvote_a_failure(make_config: Any) -> None:
    checks = (
        Probe("heartbeat", passed("heartbeat", decisive=True)),
        Probe("length", too_long()),
    )
    outcome = await verifier(make_config, ScriptedJudge([]), *checks, maxAttempts=1).run(
        ScriptedAgent(["x"]), TURN
    )
    assert outcome.status == Status.EXHAUSTED


# -- what reaches the caller ---------------------------------------------------------------------


async def test_parsed_value_and_repaired_text_reach_the_outcome(make_config: Any) -> None:
    probe = Probe("json", passed("json", value={"total": 3}, deliver_text='{"total": 3}'))
    outcome = await verifier(make_config, ScriptedJudge(["PASS"]), probe).run(
        ScriptedAgent(['Sure! {"total": 3,}']), TURN
    )
    assert (outcome.parsed, outcome.response) == ({"total": 3}, '{"total": 3}')
    assert outcome.attempts[0].reply.text == 'Sure! {"total": 3,}'


async def test_checks_run_on_every_attempt_with_its_own_reply(make_config: Any) -> None:
    probe = Probe("length", too_long(), too_long("size"), passed("length"))
    await verifier(make_config, ScriptedJudge(["PASS"]), probe).run(
        ScriptedAgent(["r1", "r2", "r3"]), TURN
    )
    assert probe.seen == ["r1", "r2", "r3"]


async def test_untriggered_turn_runs_no_checks(make_config: Any) -> None:
    probe = Probe("length")
    outcome = await Verifier(make_config(checks=[]), judge=ScriptedJudge([]), checks=[probe]).run(
        ScriptedAgent(["Paris."]), TURN
    )
    assert (outcome.status, probe.seen) == (Status.NOT_TRIGGERED, [])


async def test_verify_applies_the_checks(make_config: Any) -> None:
    verdict = await verifier(make_config, ScriptedJudge([]), Probe("length", too_long())).verify(
        TURN, "long"
    )
    assert (verdict.passed, verdict.feedback) == (False, "[length] The reply is too long.")


def test_check_names_must_be_unique(make_config: Any) -> None:
    with pytest.raises(ValueError, match="repeated: length"):
        verifier(make_config, ScriptedJudge([]), Probe("length"), Probe("length"))


async def test_checks_from_the_json_config_run_without_a_judge_call(make_config: Any) -> None:
    config = make_config(verifyAll=True, checks=[{"type": "rules", "maxLength": 10}], maxAttempts=1)
    judge = ScriptedJudge([])
    outcome = await Verifier(config, judge=judge).run(ScriptedAgent(["x" * 50]), TURN)
    assert outcome.status == Status.EXHAUSTED
    assert (outcome.attempts[0].verdict.feedback or "").startswith("[rules] ")  # type: ignore[union-attr]
    judge.assert_exhausted()


def test_every_builtin_check_type_builds_from_the_json_config(make_config: Any) -> None:
    config = make_config(
        checks=[
            {"type": "rules", "forbiddenPhrases": ["as an AI"]},
            {"type": "json", "expect": "object", "schema": {"type": "object"}},
            {"type": "http_request", "allowedHosts": ["api.example.com"]},
            {"type": "command", "command": ["true"], "timeoutSeconds": 5},
            {"type": "claims"},
            {"type": "heartbeat", "name": "tasks", "required": True},
        ]
    )
    verifier = Verifier(config, judge=ScriptedJudge([]))
    assert [(c.name, c.required) for c in verifier.checks] == [
        ("rules", False),
        ("json", False),
        ("http_request", False),
        ("command:true", False),
        ("claims", False),
        ("tasks", True),
    ]


def test_default_names_repeated_in_the_config_are_numbered(make_config: Any) -> None:
    ruff = {"type": "command", "command": ["python", "-m", "ruff", "check", "-"]}
    mypy = {"type": "command", "command": ["python", "-m", "mypy", "."], "passReply": "none"}
    checks = build_checks(make_config(checks=[ruff, mypy, ruff]), Events())
    assert [c.name for c in checks] == ["command:python", "command:python#2", "command:python#3"]


def test_a_default_name_steps_aside_for_the_same_name_given_explicitly(make_config: Any) -> None:
    config = make_config(checks=[{"type": "rules"}, {"type": "rules", "name": "rules"}])
    assert [c.name for c in build_checks(config, Events())] == ["rules#2", "rules"]


def test_a_config_with_two_default_command_names_builds_a_verifier(make_config: Any) -> None:
    python = {"type": "command", "command": ["python", "-c", "pass"]}
    verifier = Verifier(make_config(checks=[python, python]), judge=ScriptedJudge([]))
    assert [c.name for c in verifier.checks] == ["command:python", "command:python#2"]


def test_names_repeated_explicitly_in_the_config_are_refused(make_config: Any) -> None:
    config = make_config(checks=[{"type": "rules", "name": "x"}, {"type": "json", "name": "x"}])
    with pytest.raises(ValueError, match="repeated: x"):
        Verifier(config, judge=ScriptedJudge([]))


async def test_claim_backed_by_an_earlier_attempts_tool_call_passes(make_config: Any) -> None:
    sent = Reply(
        text="Done: I sent the invoice.",
        meta=RunMeta(tool_calls=(ToolCallRecord(name="send_email", succeeded=True),)),
    )
    judge = ScriptedJudge(["FAIL [incomplete]: Say which invoice.", "PASS"])
    config = make_config(verifyAll=True, checks=[{"type": "claims"}])
    outcome = await Verifier(config, judge=judge).run(
        ScriptedAgent([sent, "Done: I sent the March invoice."]), TURN
    )
    assert outcome.status == Status.PASSED
    assert outcome.attempts[1].checks[0].passed
