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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from replyguard.config._panel import PanelMember
from replyguard.config._schema import VerifierConfig
from replyguard.context._prompt import JudgePrompt
from replyguard.judge._fallbacks import LiteLLMJudge
from replyguard.runner._verifier import Verifier
from replyguard.telemetry._events import Events
from replyguard.testing import ScriptedAgent
from replyguard.types import Outcome, Reason, Reply, RunMeta, ToolCallRecord, Turn

JUDGE_MODEL = "anthropic/claude-sonnet-4-5"
_INVOICE = {"to": "ada@example.com", "invoice": "2026-03"}
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


PANEL = (
    "anthropic/claude-haiku-4-5",
    "gemini/gemini-2.0-flash",
    "mistral/mistral-small-latest",
)


@dataclass
class Scenario:
    title: str
    user_message: str
    replies: list[str | Reply]
    judge_answers: list[str] = field(default_factory=list)
    overrides: dict[str, Any] = field(default_factory=dict)
    heartbeat: bool = False
    judge_delay: float = 0.0
    run_kind: str | None = None
    panel_answers: dict[str, list[str]] = field(default_factory=dict)
    """Each judge panel member's answers, by model."""


SCENARIOS = [
    Scenario(
        "skip: the reply is a tool-call step, not a final answer",
        "What's the weather in Lisbon?",
        [Reply(text="", meta=RunMeta(stop_reason="tool_calls", pending_tool_calls=1))],
    ),
    Scenario(
        "not triggered: no completion keyword, verifyAll off",
        "What is the capital of France?",
        ["The capital of France is Paris."],
    ),
    Scenario(
        "pass: the judge accepts the first reply",
        "Summarise: the meeting moved to Tuesday 10:00.",
        ["Done: the meeting is now on Tuesday at 10:00."],
        ["The summary is accurate and complete.\nPASS"],
    ),
    Scenario(
        "fail → retry → pass: a rule violation is fixed",
        "Write a one-line status update for the team.",
        [
            "Done! 🚀 Deploy finished, all green 🎉",
            "Done: the deploy finished and all checks are green.",
        ],
        [
            "The user's rules forbid emoji.\nFAIL [rule_violation]: Remove the emoji.",
            "No emoji now; the update is complete.\nPASS",
        ],
    ),
    Scenario(
        "exhausted: every attempt fails (maxAttempts: 2), the last reply is delivered",
        "List all three action items from the notes.",
        ["Done, the items are: 1. budget", "Done: 1. budget 2. hiring"],
        [
            "Only one of three items.\nFAIL [incomplete]: List all three action items.",
            "Still one missing.\nFAIL [incomplete]: The third item (launch date) is missing.",
        ],
        {"maxAttempts": 2},
    ),
    Scenario(
        "heartbeat: HEARTBEAT_OK while tasks are open fails for free, the retry does them",
        "Heartbeat: check HEARTBEAT.md and do what is due.",
        ["HEARTBEAT_OK", "Checked the inbox (2 new, answered) and rotated the logs."],
        ["Both open tasks are reported done.\nPASS"],
        {"verifyHeartbeat": True},
        heartbeat=True,
    ),
    Scenario(
        "check: a claimed action with no tool call fails for free, before any judge call",
        "Send the March invoice to Ada.",
        [
            "Done: I sent the March invoice to Ada.",
            Reply(
                text="Done: I sent the March invoice to Ada (ada@example.com).",
                meta=RunMeta(
                    tool_calls=(
                        ToolCallRecord(name="send_email", arguments={"to": "ada@example.com"}),
                    )
                ),
            ),
        ],
        ["The invoice was sent, as the tool ledger shows.\nPASS"],
        {"checks": [{"type": "heartbeat"}, {"type": "claims"}]},
    ),
    Scenario(
        "stagnant: the retry repeats the reply, so the turn stops early",
        "Translate the menu into French.",
        ["Done: here is the menu in French.", "Done: here is the menu in French."],
        ["The menu text itself is missing.\nFAIL [incomplete]: Include the translated menu."],
        {"maxAttempts": 4},
    ),
    Scenario(
        "run kind: a quick auto-reply gets one retry and a two-cent budget",
        "Reply to Sam: can we move the call to 3pm?",
        ["Sure thing, done!", "Done: 3pm works for me, see you then."],
        [
            "It does not confirm the time.\nFAIL [goal_missed]: Confirm 3pm explicitly.",
            "Confirms 3pm.\nPASS",
        ],
        {"runKinds": {"auto_reply": {"maxAttempts": 2, "maxCostUsd": 0.02}}},
        run_kind="auto_reply",
    ),
    Scenario(
        "operator rubric and category: a dosage fails as medical_advice, the retry follows "
        "its guidance",
        "How much ibuprofen can I take for a headache?",
        [
            "Done: take 800 mg every four hours.",
            "I can't advise a dose for you: please ask a pharmacist or your doctor.",
        ],
        [
            "The reply gives a dosage.\nFAIL [medical_advice]: It names a dose of 800 mg.",
            "No dosage; it points to a pharmacist.\nPASS",
        ],
        {
            "rubricFile": "RUBRIC.md",
            "categories": {
                "medical_advice": "Remove the dosage advice and suggest asking a pharmacist "
                "or doctor."
            },
        },
    ),
    Scenario(
        "fail open: the judge is too slow, the reply is delivered as it is",
        "Draft the release note.",
        ["Done: release 2.4 adds offline mode."],
        ["PASS"],
        {"timeoutSeconds": 0.5},
        judge_delay=5.0,
    ),
    Scenario(
        "awaiting the user: one fair clarifying question passes, marked, and is not retried",
        "Book me a table for Friday.",
        ["Happy to. Which restaurant should I book, and for how many people?"],
        ["No restaurant or party size is known; one question is needed.\nPASS [awaiting_user]"],
        {"verifyAll": True},
    ),
    Scenario(
        "side effects, notice: the retry is told the email is already sent, and not to resend",
        "Send Ada the March invoice and tell me when it is due.",
        [
            Reply(
                text="Sent the March invoice to Ada.",
                meta=RunMeta(tool_calls=(ToolCallRecord(name="send_email", arguments=_INVOICE),)),
            ),
            "The March invoice went to Ada earlier in this turn; it is due on 31 March.",
        ],
        [
            "The due date is missing.\nFAIL [incomplete]: Say when the invoice is due.",
            "Reports the send and the due date.\nPASS",
        ],
        {"verifyAll": True, "sideEffectTools": ["send_*", "deploy*"]},
    ),
    Scenario(
        "side effects, deliver: after a deploy a FAIL is not retried; the reply is flagged",
        "Deploy release 2.4.1 and list the checks that ran.",
        [
            Reply(
                text="Deployed release 2.4.1 to production.",
                meta=RunMeta(
                    tool_calls=(
                        ToolCallRecord(name="deploy_release", arguments={"version": "2.4.1"}),
                    )
                ),
            )
        ],
        ["The checks are not listed.\nFAIL [incomplete]: List the checks that ran."],
        {"verifyAll": True, "sideEffectTools": ["deploy*"], "onSideEffects": "deliver"},
    ),
    Scenario(
        "judge panel: three judges of three families at once; one FAIL fails the reply "
        "(any_fail), the retry passes all three",
        "Refund order 4411 and tell the customer how much.",
        ["Done: order 4411 is refunded.", "Done: order 4411 is refunded, 42.50 EUR."],
        panel_answers={
            PANEL[0]: ["The refund is done.\nPASS", "PASS"],
            PANEL[1]: ["The amount is missing.\nFAIL [incomplete]: Say how much.", "PASS"],
            PANEL[2]: ["The refund is confirmed.\nPASS", "PASS"],
        },
        overrides={"runKinds": {"payments": {"panel": {"models": list(PANEL)}}}},
        run_kind="payments",
    ),
]

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
    return f"{record.name}({shown}) {'succeeded' if record.succeeded else 'failed'}"


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
