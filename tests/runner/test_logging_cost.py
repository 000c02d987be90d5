"""Logging on is nearly free: events are built only for enabled levels, and the verdict event
never tokenizes the prompt to report its size."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from replyguard import Turn, Verifier
from replyguard.context import JudgePrompt
from replyguard.judge import JudgeReply
from replyguard.telemetry import Events
from replyguard.testing import ScriptedAgent, capture_events

TURN = Turn(user_message="Summarise the notes.", id="t-log")


class RecordingJudge:
    """Passes every reply, keeping the prompts it was given."""

    def __init__(self) -> None:
        self.prompts: list[JudgePrompt] = []

    async def judge(self, prompt: JudgePrompt, *, time_left: float) -> JudgeReply:
        self.prompts.append(prompt)
        return JudgeReply(text="PASS", model="judge/x", prompt_tokens=321, completion_tokens=2)


async def test_the_verdict_event_reports_the_judge_s_usage_without_counting_the_prompt(
    make_config: Any,
) -> None:
    judge = RecordingJudge()
    verifier = Verifier(make_config(verifyAll=True), judge=judge)
    with capture_events() as events:
        await verifier.run(ScriptedAgent(["Done: the notes, summarised."]), TURN)
    (verdict,) = [e for e in events if e["event"] == "verdict"]
    assert verdict["prompt_tokens"] == 321
    assert "prompt_tokens_counted" not in verdict
    (prompt,) = judge.prompts
    assert prompt.counted_tokens is None  # nobody tokenized the prompt to log it


async def test_the_verdict_event_reports_a_count_the_build_already_made(
    make_config: Any,
) -> None:
    judge = RecordingJudge()
    verifier = Verifier(make_config(verifyAll=True, contextTokenBudget=1000), judge=judge)
    with capture_events() as events:
        await verifier.run(ScriptedAgent(["Done: " + "the notes, summarised. " * 400]), TURN)
    (verdict,) = [e for e in events if e["event"] == "verdict"]
    (prompt,) = judge.prompts
    assert prompt.counted_tokens is not None
    assert verdict["prompt_tokens_counted"] == prompt.counted_tokens


@pytest.mark.parametrize("checks", [[], [{"type": "rules", "maxLength": 500}]], ids=["", "rules"])
async def test_with_logging_off_a_verified_turn_builds_no_event(
    make_config: Any, monkeypatch: pytest.MonkeyPatch, checks: list[dict[str, Any]]
) -> None:
    built: list[str] = []
    monkeypatch.setattr(Events, "emit", lambda self, level, event, **fields: built.append(event))
    # The suite's secrets guard has every logger make every record; a host's logger does not.
    monkeypatch.setattr(
        logging.Logger, "isEnabledFor", lambda self, level: level >= self.getEffectiveLevel()
    )
    monkeypatch.setattr(logging.getLogger("replyguard"), "level", logging.WARNING)
    verifier = Verifier(make_config(verifyAll=True, checks=checks), judge=RecordingJudge())
    outcome = await verifier.run(ScriptedAgent(["Done: the notes."]), TURN)
    assert outcome.status == "passed"
    assert built == []
