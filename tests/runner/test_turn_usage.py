"""A turn's tokens are summed once, for every attempt: the agent's (each reply's
``RunMeta.usage``, OpenAI's or pydantic-ai's names) and the judge's, into ``Outcome.usage`` and
the ledger line, as its cost is into ``Outcome.cost_usd``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from replyguard import JudgeReply, Reply, RunMeta, TokenUsage, Turn, Verifier
from replyguard.testing import ScriptedAgent, ScriptedJudge

FAIL = "FAIL [incomplete]: Add the date."


def judged(text: str) -> JudgeReply:
    return JudgeReply(
        text=text, model="judge-m", prompt_tokens=300, completion_tokens=20, cost_usd=0.01
    )


def reply(text: str, usage: dict[str, Any] | None, cost: float | None = None) -> Reply:
    return Reply(text=text, meta=RunMeta(usage=usage, cost_usd=cost))


async def test_usage_sums_the_agent_and_the_judge_over_every_attempt(make_config: Any) -> None:
    agent = ScriptedAgent(
        [
            reply("Done: the report.", {"prompt_tokens": 50, "completion_tokens": 7}),
            reply("Done: dated.", {"input_tokens": 80, "output_tokens": 9}, cost=0.002),
        ]
    )
    judge = ScriptedJudge([judged(FAIL), judged("PASS")])
    outcome = await Verifier(make_config(verifyAll=True), judge=judge).run(
        agent, Turn(user_message="Report, please.")
    )
    assert outcome.usage == TokenUsage(
        agent_prompt_tokens=130,
        agent_completion_tokens=16,
        judge_prompt_tokens=600,
        judge_completion_tokens=40,
    )
    assert (outcome.usage.prompt_tokens, outcome.usage.completion_tokens) == (730, 56)
    assert outcome.usage.total_tokens == 786
    assert round(outcome.cost_usd, 6) == 0.022


async def test_an_unjudged_turn_counts_the_agents_tokens(make_config: Any) -> None:
    agent = ScriptedAgent([reply("Hello!", {"prompt_tokens": 5, "completion_tokens": 2})])
    outcome = await Verifier(make_config(), judge=ScriptedJudge([])).run(
        agent, Turn(user_message="Hi")
    )
    assert (outcome.status, outcome.usage.agent_tokens, outcome.usage.judge_tokens) == (
        "not_triggered",
        7,
        0,
    )


async def test_usage_the_agent_does_not_report_counts_nothing(make_config: Any) -> None:
    agent = ScriptedAgent([reply("Done.", None), reply("Done, dated.", {"total_tokens": 9})])
    judge = ScriptedJudge([judged(FAIL), judged("PASS")])
    outcome = await Verifier(make_config(verifyAll=True), judge=judge).run(
        agent, Turn(user_message="Report, please.")
    )
    assert (outcome.usage.agent_tokens, outcome.usage.judge_tokens) == (0, 640)


async def test_the_ledger_line_carries_the_turns_usage(make_config: Any, tmp_path: Path) -> None:
    ledger = tmp_path / "ledger.jsonl"
    agent = ScriptedAgent([reply("Done.", {"prompt_tokens": 50, "completion_tokens": 7})])
    verifier = Verifier(
        make_config(verifyAll=True, ledgerPath=str(ledger)),
        judge=ScriptedJudge([judged("PASS")]),
    )
    await verifier.run(agent, Turn(user_message="Report, please."))
    [line] = [json.loads(text) for text in ledger.read_text(encoding="utf-8").splitlines()]
    assert line["usage"] == {
        "agentPromptTokens": 50,
        "agentCompletionTokens": 7,
        "judgePromptTokens": 300,
        "judgeCompletionTokens": 20,
        "totalTokens": 377,
    }
