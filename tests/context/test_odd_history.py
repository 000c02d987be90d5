"""A history of any JSON shape is rendered for the judge and judged, never a fail-open.

``Turn.history`` is what the caller keeps (``tool_calls: 5``, content of any type); before,
such a message crashed the prompt build and the turn failed open as ``internal_error``,
unjudged.
"""

from __future__ import annotations

from typing import Any

import pytest

from replyguard import Turn, Verifier, VerifierConfig
from replyguard.testing import ScriptedAgent, ScriptedJudge
from support.injection_corpus import ODD_HISTORY

CONFIG = VerifierConfig.from_dict({"enabled": True, "verifyAll": True})
# Deeper than JSON parsers build: the agent's copy of the messages does not take it (yet).
NOT_FOR_AN_AGENT = {"nested-too-deep"}


@pytest.mark.parametrize("message", ODD_HISTORY.values(), ids=ODD_HISTORY.keys())
async def test_a_reply_after_an_odd_history_message_is_judged(message: dict[str, Any]) -> None:
    judge = ScriptedJudge(["FAIL [incomplete]: add the total"])
    verifier = Verifier(CONFIG, judge=judge)
    turn = Turn(user_message="Send the report.", history=[message])
    verdict = await verifier.verify(turn, "Sent.")
    await verifier.aclose()
    assert (verdict.readable, verdict.passed, verdict.fail_open_reason) == (True, False, None)
    assert "<conversation_history-" in judge.calls[0].user


@pytest.mark.parametrize(
    "message",
    [pytest.param(m, id=name) for name, m in ODD_HISTORY.items() if name not in NOT_FOR_AN_AGENT],
)
async def test_a_turn_with_an_odd_history_message_is_judged_and_retried(
    message: dict[str, Any],
) -> None:
    judge = ScriptedJudge(["FAIL [incomplete]: add the total", "PASS"])
    verifier = Verifier(CONFIG, judge=judge)
    turn = Turn(user_message="Send the report.", history=[message])
    outcome = await verifier.run(ScriptedAgent(["Sent.", "Sent, total 42."]), turn)
    await verifier.aclose()
    assert (outcome.status.value, outcome.reason, len(outcome.attempts)) == ("passed", None, 2)
    judge.assert_exhausted()
