"""``replyguard demo``: scripted turns through ``Verifier.run``, with no API key and no network.

The judge is the real ``LiteLLMJudge`` (real prompt, real ``litellm.acompletion``, real cost
from litellm's price map) with litellm's ``mock_response`` standing in for the provider's text.
Each turn prints the path it took: skip, not triggered, pass, fail → retry → pass, exhausted,
a heartbeat and a claim caught by deterministic checks without a judge call, a stagnant retry
stopped early, a run kind's budget, an operator's rubric and custom category, fail-open on a
judge timeout, a clarifying question that passes awaiting the user, two agents that acted (a
retry told what is already done, and a deploy that is not retried: ``onSideEffects``), and a
judge panel. It says first that the judge is scripted, shows each scenario's config keys and
the tool calls behind a claim, marks the cold first judge call, and ends with next steps.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from replyguard._cli.demo_scenarios import SCENARIOS
from replyguard.config._panel import PanelMember
from replyguard.config._schema import VerifierConfig
from replyguard.context._prompt import JudgePrompt
from replyguard.judge._fallbacks import LiteLLMJudge
from replyguard.runner._verifier import Verifier
from replyguard.telemetry._events import Events
from replyguard.testing import ScriptedAgent
from replyguard.types import Outcome, Reason, ToolCallRecord, Turn

JUDGE_MODEL = "anthropic/claude-sonnet-4-5"
AGENT_MODEL = "openai/gpt-4o"


class MockedJudge(LiteLLMJudge):
    """The real litellm judge, answering from a script through ``mock_response``."""

    def __init__(
        self,
        config: VerifierConfig,
        answers: Sequence[str],
        *,
        delay: float = 0.0,
        members: dict[str, list[str]] | None = None,
    ) -> None:
        super().__init__(config, Events())
        self._answers = list(answers)
        self._delay = delay
        self._members = members or {}

    def member(self, model: str) -> MockedJudge:
        """A judge panel member's own scripted judge (``Verifier`` asks for one per member)."""
        member = self._config.member_config(PanelMember(model=model))
        return MockedJudge(member, self._members[model], delay=self._delay)

    def request(
        self, model: str, prompt: JudgePrompt, *, timeout: float, api_key: str | None
    ) -> dict[str, Any]:
        params = super().request(model, prompt, timeout=timeout, api_key=api_key)
        params["mock_response"] = self._answers.pop(0)
        if self._delay:
            params["mock_delay"] = self._delay
        return params


HEARTBEAT_TASKS = (
    "# Heartbeat\n- [ ] Check the inbox and answer anything urgent\n- [ ] Rotate logs\n"
)
RULES = "# Rules\n- Never use emoji in status updates.\n"
RUBRIC = "- Never give a medicine dosage: point to a pharmacist or doctor instead.\n"


INTRO = (
    f"replyguard demo: {len(SCENARIOS)} scripted turns through the real verifier.",
    "The judge is scripted: litellm's mock_response answers in place of a model, so there is no",
    "API key and no network call; costs are priced from litellm's price map as if real.",
    "",
)
NEXT_STEPS = (
    "Next steps:",
    "  - judge a real turn: put your judge's key in the environment (ANTHROPIC_API_KEY for the",
    "    default judge) and run:",
    '      echo \'{"userMessage": "Refund order 12", "reply": "Done: refunded."}\' '
    "| replyguard verify",
    "  - configure it: copy config.example.json, then replyguard check-config verifier.json",
    "  - in code: Verifier(config).run(agent, Turn(...)): the README's example runs as it is,",
    "    and docs/getting-started.md goes on from there",
)


def _tool_call(record: ToolCallRecord) -> str:
    arguments = record.arguments
    if isinstance(arguments, dict):
        shown = ", ".join(f"{key}={value!r}" for key, value in arguments.items())
    else:
        shown = "" if arguments is None else repr(arguments)
    result = "" if record.result is None else f" → {json.dumps(record.result)}"
    return f"{record.name}({shown}) {'succeeded' if record.succeeded else 'failed'}{result}"


def _describe_attempts(outcome: Outcome) -> list[str]:
    lines = []
    for attempt in outcome.attempts:
        text = attempt.reply.text or "(empty)"
        verdict = attempt.verdict
        if attempt.skip_reason is not None:
            decision = f"skipped ({attempt.skip_reason.value})"
        elif verdict is None and outcome.reason == Reason.STAGNANT:
            decision = "repeats the previous reply: stopped"
        elif verdict is None:
            decision = "not judged"
        elif verdict.fail_open_reason is not None:
            decision = f"failed open ({verdict.fail_open_reason.value})"
        elif verdict.passed:
            decision = "PASS [awaiting_user]" if verdict.awaiting_user else "PASS"
        else:
            category = f" [{verdict.category}]" if verdict.category else ""
            by = " (by a check, no judge call)" if verdict.decisive else ""
            decision = f"FAIL{category}{by}: {verdict.feedback}"
        decision = decision.replace("\n", "\n        ")
        lines.append(f"    attempt {attempt.number}: {text!r} → {decision}")
        lines += [f"        tool call: {_tool_call(r)}" for r in attempt.reply.meta.tool_calls]
        if verdict is not None and verdict.members:
            votes = ", ".join(
                f"{m.model} {'PASS' if m.passed else 'FAIL'}" for m in verdict.members
            )
            lines.append(f"        panel: {votes}")
    return lines


def _notice(agent: ScriptedAgent) -> list[str]:
    """The "already done" part of the retry messages the agent got, if any."""
    lines: list[str] = []
    for messages in agent.calls[1:]:
        text = str(messages[-1].get("content") or "")
        start = text.find("Already done in this turn")
        if start >= 0:
            block = text[start:].split("\n\n")[0]
            lines += [f"    retry message: {line}" for line in block.splitlines()]
    return lines


def write_workspace(directory: str) -> None:
    """The demo agent's rules, heartbeat task list and the operator's rubric."""
    Path(directory, "AGENTS.md").write_text(RULES, encoding="utf-8")
    Path(directory, "HEARTBEAT.md").write_text(HEARTBEAT_TASKS, encoding="utf-8")
    Path(directory, "RUBRIC.md").write_text(RUBRIC, encoding="utf-8")


async def run_demo(workspace: str, out: Callable[[str], None] = print) -> list[Outcome]:
    """Run every scenario against ``workspace`` and print its path; returns the outcomes."""
    outcomes = []
    cold = True  # the first judge call loads litellm's HTTP machinery
    for line in INTRO:
        out(line)
    for number, scenario in enumerate(SCENARIOS, start=1):
        config = VerifierConfig.from_dict(
            {
                "enabled": True,
                "model": JUDGE_MODEL,
                "agentModel": AGENT_MODEL,
                "workspaceDir": workspace,
                **scenario.overrides,
            }
        )
        judge = MockedJudge(
            config,
            scenario.judge_answers,
            delay=scenario.judge_delay,
            members=scenario.panel_answers,
        )
        verifier = Verifier(config, judge=judge)
        if number == 1:
            await verifier.warmup()  # import litellm and the tokenizer before timing turns
        agent = ScriptedAgent(scenario.replies)
        turn = Turn(
            user_message=scenario.user_message,
            heartbeat=scenario.heartbeat,
            run_kind=scenario.run_kind,
            evidence=scenario.evidence,
        )
        outcome = await verifier.run(agent, turn)
        await verifier.aclose()
        outcomes.append(outcome)
        out(f"[{number}] {scenario.title}")
        if scenario.overrides:
            settings = ", ".join(f"{k}: {json.dumps(v)}" for k, v in scenario.overrides.items())
            out(f"    config: {settings}")
        out(f"    user: {scenario.user_message!r}")
        for line in _describe_attempts(outcome):
            out(line)
        for line in _notice(agent):
            out(line)
        reason = f" reason={outcome.reason.value}" if outcome.reason else ""
        reason += " awaiting_user=true" if outcome.awaiting_user else ""
        skip = f" skip_reason={outcome.skip_reason.value}" if outcome.skip_reason else ""
        called = any(v.model is not None for v in outcome.verdicts)
        note = " (cold start: the first judge call)" if called and cold else ""
        cold = cold and not called
        out(
            f"    → status={outcome.status.value}{reason}{skip}"
            f" attempts={len(outcome.attempts)} judge_cost=${outcome.judge_cost_usd:.5f}"
            f" latency={outcome.latency_ms:.0f} ms{note}"
        )
        out(f"    delivered: {outcome.response!r}")
        out("")
    for line in NEXT_STEPS:
        out(line)
    return outcomes


def main() -> int:
    """Entry point of ``replyguard demo``."""
    with tempfile.TemporaryDirectory(prefix="replyguard-demo-") as workspace:
        write_workspace(workspace)
        asyncio.run(run_demo(workspace))
    return 0
