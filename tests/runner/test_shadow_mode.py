"""Shadow mode: the checks and the judge run and are recorded, but never change a reply.

A FAIL delivers the first reply unchanged with status ``flagged`` (the verdict kept in the
attempts), a PASS is ``passed``, a fail-open stays ``failed_open``, and ``onExhausted: "raise"``
never raises. A run kind may set its own ``mode``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conftest import API_KEY
from replyguard import FailCategory, Reason, Status, Turn, Verifier, VerifierConfig
from replyguard.errors import ConfigError
from replyguard.insights.report import read_ledger, summarise
from replyguard.testing import ScriptedAgent, ScriptedJudge
from replyguard.types import Attempt
from support.provider_server import ANTHROPIC, ProviderServer, Step

FAIL_INCOMPLETE = "Missing the date.\nFAIL [incomplete]: Add the meeting date."
TURN = Turn(user_message="Summarise the meeting notes.", id="t-1")
REPLY = "Done: the notes are summarised."

MakeConfig = Callable[..., VerifierConfig]


async def test_a_fail_is_flagged_and_the_reply_delivered_unchanged(
    make_config: MakeConfig,
) -> None:
    judge, agent = ScriptedJudge([FAIL_INCOMPLETE]), ScriptedAgent([REPLY])
    config = make_config(mode="shadow", verifyAll=True, maxAttempts=3)
    outcome = await Verifier(config, judge=judge).run(agent, TURN)
    assert (outcome.status, outcome.reason, outcome.response) == (Status.FLAGGED, None, REPLY)
    assert len(outcome.attempts) == 1
    verdict = outcome.attempts[0].verdict
    assert verdict is not None and not verdict.passed
    assert verdict.category == FailCategory.INCOMPLETE
    assert verdict.feedback == "Add the meeting date."
    agent.assert_exhausted()
    judge.assert_exhausted()


async def test_a_pass_in_shadow_is_passed(make_config: MakeConfig) -> None:
    judge, agent = ScriptedJudge(["PASS"]), ScriptedAgent([REPLY])
    outcome = await Verifier(make_config(mode="shadow", verifyAll=True), judge=judge).run(
        agent, TURN
    )
    assert (outcome.status, outcome.reason, outcome.response) == (Status.PASSED, None, REPLY)


async def test_a_fail_open_in_shadow_stays_failed_open(make_config: MakeConfig) -> None:
    judge = ScriptedJudge([RuntimeError("provider down")])
    outcome = await Verifier(make_config(mode="shadow", verifyAll=True), judge=judge).run(
        ScriptedAgent([REPLY]), TURN
    )
    assert (outcome.status, outcome.reason) == (Status.FAILED_OPEN, Reason.JUDGE_ERROR)


async def test_a_failed_check_in_shadow_is_flagged_without_a_retry(
    make_config: MakeConfig,
) -> None:
    config = make_config(mode="shadow", verifyAll=True, checks=[{"type": "rules", "maxLength": 10}])
    judge, agent = ScriptedJudge([]), ScriptedAgent([REPLY])
    outcome = await Verifier(config, judge=judge).run(agent, TURN)
    assert (outcome.status, outcome.response) == (Status.FLAGGED, REPLY)
    assert [r.passed for r in outcome.attempts[0].checks] == [False]
    judge.assert_exhausted()


async def test_on_exhausted_raise_never_raises_in_shadow(make_config: MakeConfig) -> None:
    config = make_config(mode="shadow", verifyAll=True, maxAttempts=1, onExhausted="raise")
    outcome = await Verifier(config, judge=ScriptedJudge([FAIL_INCOMPLETE])).run(
        ScriptedAgent([REPLY]), TURN
    )
    assert outcome.status == Status.FLAGGED


async def test_hooks_see_the_verdict_but_no_retry(make_config: MakeConfig) -> None:
    seen: list[str] = []

    def on_verdict(turn: Turn, attempt: Attempt) -> None:
        seen.append(f"verdict {attempt.number} passed={attempt.verdict and attempt.verdict.passed}")

    def on_retry(turn: Turn, attempt: Attempt, feedback: str) -> None:
        seen.append("retry")

    verifier = Verifier(
        make_config(mode="shadow", verifyAll=True),
        judge=ScriptedJudge([FAIL_INCOMPLETE]),
        on_verdict=on_verdict,
        on_retry=on_retry,
    )
    await verifier.run(ScriptedAgent([REPLY]), TURN)
    verifier.close()
    assert seen == ["verdict 1 passed=False"]


async def test_a_flagged_turn_is_logged_and_written_to_the_ledger(
    make_config: MakeConfig, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    ledger = tmp_path / "ledger.jsonl"
    config = make_config(mode="shadow", verifyAll=True, ledgerPath=str(ledger))
    with caplog.at_level(logging.INFO, logger="replyguard"):
        await Verifier(config, judge=ScriptedJudge([FAIL_INCOMPLETE])).run(
            ScriptedAgent([REPLY]), TURN
        )
    events = [r.replyguard["event"] for r in caplog.records if hasattr(r, "replyguard")]
    assert "verdict" in events and "flagged" in events and "retry" not in events
    record = json.loads(ledger.read_text(encoding="utf-8"))
    assert (record["status"], record["reason"], record["categories"]) == (
        "flagged",
        None,
        ["incomplete"],
    )
    entries, skipped = read_ledger(ledger)
    report = summarise(entries, ledger=str(ledger), skipped=skipped)
    assert report.totals.by_status == {"flagged": 1}
    assert (report.run_kinds[0].verified, report.run_kinds[0].flagged) == (1, 1)


async def test_a_run_kind_can_shadow_while_the_default_enforces(make_config: MakeConfig) -> None:
    config = make_config(verifyAll=True, runKinds={"trial": {"mode": "shadow"}})
    judge = ScriptedJudge([FAIL_INCOMPLETE, FAIL_INCOMPLETE, "PASS"])
    verifier = Verifier(config, judge=judge)
    trial = await verifier.run(
        ScriptedAgent([REPLY]), TURN.model_copy(update={"run_kind": "trial"})
    )
    enforced = await verifier.run(ScriptedAgent([REPLY, "Done: dated 3 May."]), TURN)
    assert (trial.status, len(trial.attempts)) == (Status.FLAGGED, 1)
    assert (enforced.status, len(enforced.attempts)) == (Status.PASSED, 2)


def test_mode_is_validated_by_name(make_config: MakeConfig) -> None:
    with pytest.raises(ConfigError) as caught:
        make_config(mode="audit")
    assert [key for key, _ in caught.value.problems] == ["mode"]
    assert make_config().mode == "enforce"


async def test_shadow_end_to_end_through_the_provider_wire(
    make_config: MakeConfig, provider: ProviderServer
) -> None:
    provider.push(Step(text=FAIL_INCOMPLETE, prompt_tokens=900, completion_tokens=20))
    config = make_config(
        mode="shadow",
        verifyAll=True,
        model=ANTHROPIC.judge_model,
        agentModel=ANTHROPIC.agent_model,
        apiKey=API_KEY,
        apiBase=provider.url,
    )
    verifier = Verifier(config)
    agent = ScriptedAgent([REPLY])
    outcome = await verifier.run(agent, TURN)
    await verifier.aclose()
    assert (outcome.status, outcome.response) == (Status.FLAGGED, REPLY)
    assert len(provider.seen) == 1
    verdict: Any = outcome.attempts[0].verdict
    assert (verdict.prompt_tokens, verdict.completion_tokens) == (900, 20)
    assert outcome.judge_cost_usd > 0
    agent.assert_exhausted()
