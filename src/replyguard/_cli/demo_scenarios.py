"""The demo's scripted turns (``replyguard demo``): each one's user message, the agent's
replies, the judge's answers and the config keys it sets."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from replyguard.types import Reply, RunMeta, ToolCallRecord

_INVOICE = {"to": "ada@example.com", "invoice": "2026-03"}
_SENT = ToolCallRecord(
    name="send_email", arguments={"to": "ada@example.com", "attach": "q3.pdf"}, result="queued"
)
_REFUNDED = RunMeta(
    tool_calls=(
        ToolCallRecord(
            name="issue_refund",
            arguments={"order": "A-58812"},
            result={"order": "A-58812", "refunded": "1200.00", "currency": "USD"},
        ),
    )
)


def _after(text: str, *calls: ToolCallRecord) -> Reply:
    """A reply made after ``calls``."""
    return Reply(text=text, meta=RunMeta(tool_calls=calls))


ON_EXHAUSTED = "I could not complete that; a colleague will follow up."

PANEL = (
    "anthropic/claude-haiku-4-5",
    "gemini/gemini-2.0-flash",
    "mistral/mistral-small-latest",
)


@dataclass
class Scenario:
    """One scripted turn of the demo."""

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
    evidence: list[str] = field(default_factory=list)
    """The turn's retrieved context (``Turn.evidence``)."""


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
            _after(
                "Done: I sent the March invoice to Ada (ada@example.com).",
                ToolCallRecord(name="send_email", arguments={"to": "ada@example.com"}),
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
            _after(
                "Deployed release 2.4.1 to production.",
                ToolCallRecord(name="deploy_release", arguments={"version": "2.4.1"}),
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
    Scenario(
        'claims, as people write them: "Email sent." with no tool call fails for free',
        "Email Ada the Q3 report.",
        [
            "Email sent.",
            Reply(
                text="Email sent to ada@example.com with the Q3 report attached.",
                meta=RunMeta(tool_calls=(_SENT,)),
            ),
        ],
        ["The send_email call succeeded, to the address the reply names.\nPASS"],
        {"verifyAll": True, "checks": [{"type": "claims"}]},
    ),
    Scenario(
        "evidence: the judge sees the tool's result; a refund amount it contradicts fails as "
        "grounding",
        "Refund order A-58812.",
        [
            Reply(text="Done: order A-58812 is refunded, $1,300.00.", meta=_REFUNDED),
            Reply(text="Done: order A-58812 is refunded, $1,200.00.", meta=_REFUNDED),
        ],
        [
            "The tool refunded 1200.00 USD.\nFAIL [grounding]: The refund was $1,200.00, "
            "not $1,300.00.",
            "The amount matches the tool's result.\nPASS",
        ],
        {"verifyAll": True},
    ),
    Scenario(
        "figures: a date that no source holds fails for free, before any judge call",
        "When is my next invoice?",
        [
            "Your next invoice is on April 11, 2026, for 49,99 EUR.",
            "Your next invoice is on April 1, 2026, for 49,99 EUR.",
        ],
        ["The date and amount match the billing record.\nPASS"],
        {"verifyAll": True, "checks": [{"type": "figures"}]},
        evidence=["billing.db: next invoice 2026-04-01, plan Pro, 49.99 EUR / month"],
    ),
    Scenario(
        "onExhausted: a grounding failure that persists delivers the operator's message",
        "Save the Q3 report as a PDF.",
        ["PDF saved to reports/q3.pdf.", "Saved: reports/q3.pdf is ready."],
        [
            "No tool saved a file.\nFAIL [grounding]: No tool call saved reports/q3.pdf.",
            "Still no save.\nFAIL [grounding]: Nothing was saved; say so.",
        ],
        {"verifyAll": True, "maxAttempts": 2, "onExhausted": {"grounding": ON_EXHAUSTED}},
    ),
]
