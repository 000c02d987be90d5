"""Panels decide early: once the members still to answer cannot change the outcome, their
calls are cancelled and their connections closed.

The loopback provider holds the answers of the members that are not waited for (a long
``delay``, or a slowly paced stream); the proof of cancellation is the server seeing each of
their connections closed before the answer (``ProviderServer.cut``), never a wall time.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from conftest import API_KEY
from replyguard import Reason, Turn, Verdict, Verifier, VerifierConfig
from replyguard.judge._panel import NOT_WAITED_FOR, decided, not_waited_for, panel_verdict
from support.provider_server import ProviderServer, Seen, Step

GPT, GEMINI, CLAUDE = "openai/gpt-4o-mini", "openai/gemini-2.0-flash", "openai/claude-3-5-haiku"
MEMBERS = [GPT, GEMINI, CLAUDE]
FAIL_TEXT = "The date is missing.\nFAIL [incomplete]: Add the report's date."
HELD = Step(delay=30)  # an answer that comes only if the client waits 30 s for it
TURN = Turn(user_message="Write the weekly report, with its date.")


def by_model(answers: dict[str, Step]) -> Any:
    steps = {model.split("/", 1)[1]: step for model, step in answers.items()}
    return lambda seen: steps[seen.body["model"]]


def config(provider: ProviderServer, panel: dict[str, Any], **keys: Any) -> VerifierConfig:
    """A verifier whose own judge is the panel (no run kind), on the loopback provider."""
    base = {"apiKey": API_KEY, "apiBase": provider.url, "agentModel": "deepseek/deepseek-chat"}
    panel = {"models": MEMBERS, **panel}
    return VerifierConfig.from_dict({"enabled": True, "panel": panel, **base, **keys})


async def verdict_of(provider: ProviderServer, panel: dict[str, Any], **keys: Any) -> Verdict:
    verifier = Verifier(config(provider, panel, **keys))
    try:
        return await verifier.verify(TURN, "Done: the report is ready.")
    finally:
        await verifier.aclose()


# -- when the rest cannot change the outcome (pure) ------------------------------------------------


def vote(passed: bool | None) -> Verdict:
    if passed is None:
        return Verdict(passed=True, readable=False, fail_open_reason=Reason.JUDGE_ERROR)
    return Verdict(passed=passed, category=None)


@pytest.mark.parametrize(
    ("votes", "pending", "rule", "min_answers", "settled"),
    [
        ((False,), 2, "any_fail", 1, True),  # the first FAIL decides
        ((True,), 2, "any_fail", 1, False),  # a PASS waits for the rest
        ((True, True), 0, "any_fail", 1, True),
        ((False,), 2, "any_fail", 2, False),  # one answer is not minAnswers yet
        ((False, None), 1, "any_fail", 2, False),
        ((False, True), 1, "any_fail", 2, True),
        ((True, True), 1, "majority", 1, True),  # 2 PASS of 3: the last cannot outnumber
        ((False, False), 1, "majority", 1, True),
        ((True, False), 1, "majority", 1, False),
        ((True,), 2, "majority", 1, False),
        ((True, True), 2, "majority", 1, False),  # 2:2 would be a tie, which fails
        ((True, True, True), 2, "majority", 1, True),
        ((None, None), 1, "majority", 2, True),  # minAnswers out of reach: fail open
        ((None,), 2, "majority", 2, False),
    ],
)
def test_the_panel_is_decided_only_when_no_later_answer_can_change_it(
    votes: tuple[bool | None, ...], pending: int, rule: Any, min_answers: int, settled: bool
) -> None:
    members = [vote(v) for v in votes]
    assert decided(members, pending, rule=rule, min_answers=min_answers) is settled


def test_a_member_not_waited_for_is_left_out_and_leaves_the_reason_to_the_others() -> None:
    fails = [Verdict(passed=True, readable=False, fail_open_reason=Reason.JUDGE_TIMEOUT)] * 2
    verdict = panel_verdict(
        [*fails, not_waited_for(3.0)], rule="majority", min_answers=2, latency_ms=3.0
    )
    assert verdict.fail_open_reason is Reason.JUDGE_TIMEOUT
    assert verdict.members[2].error == NOT_WAITED_FOR  # charged by the runner, not here


# -- over the loopback provider --------------------------------------------------------------------


async def test_any_fail_decides_on_the_first_fail_and_closes_the_others_calls(
    provider: ProviderServer,
) -> None:
    provider.respond_with(by_model({GPT: HELD, GEMINI: Step(text=FAIL_TEXT), CLAUDE: HELD}))
    verdict = await verdict_of(provider, {})
    assert not verdict.passed and verdict.feedback == f"[{GEMINI}] Add the report's date."
    assert await provider.wait_for_cut(2) == 2  # both held calls were closed by the client
    assert [m.error for m in verdict.members] == [NOT_WAITED_FOR, None, NOT_WAITED_FOR]
    # the answer received, and each held member charged its prompt (the provider had it)
    held = [verdict.members[0], verdict.members[2]]
    assert all(m.prompt_tokens > 0 and m.completion_tokens == 0 for m in held)
    assert verdict.prompt_tokens == 900 + sum(m.prompt_tokens for m in held)
    assert await provider.wait_for_open_connections(0, within=5) == 0


async def test_majority_decides_when_the_last_answer_cannot_change_it(
    provider: ProviderServer,
) -> None:
    provider.respond_with(by_model({GPT: Step(), GEMINI: HELD, CLAUDE: Step()}))
    verdict = await verdict_of(provider, {"rule": "majority"})
    assert verdict.passed and verdict.fail_open_reason is None
    assert await provider.wait_for_cut(1) == 1
    assert [m.error for m in verdict.members] == [None, NOT_WAITED_FOR, None]


async def test_majority_waits_while_the_last_answer_could_still_decide(
    provider: ProviderServer,
) -> None:
    provider.respond_with(
        by_model({GPT: Step(), GEMINI: Step(text=FAIL_TEXT, after_answers=2), CLAUDE: Step()})
    )
    verdict = await verdict_of(provider, {"rule": "majority", "minAnswers": 3})
    assert verdict.passed  # 2 PASS : 1 FAIL, every member waited for (minAnswers 3)
    assert provider.cut == []
    assert all(m.readable for m in verdict.members)


async def test_any_fail_waits_for_every_pass(provider: ProviderServer) -> None:
    provider.respond_with(
        by_model({GPT: Step(), GEMINI: Step(after_answers=2), CLAUDE: Step(after_answers=1)})
    )
    verdict = await verdict_of(provider, {})
    assert verdict.passed and provider.cut == []
    assert [m.readable for m in verdict.members] == [True, True, True]


async def test_a_streamed_member_is_cut_mid_answer_when_another_fails_first(
    provider: ProviderServer,
) -> None:
    passing = json.dumps(
        {"verdict": "PASS", "awaitingUser": False, "category": None, "feedback": ""}
    )
    slow = Step(chunks=("{", *(" " for _ in range(40)), passing[1:]), pace=0.2)
    failing = json.dumps(
        {"verdict": "FAIL", "awaitingUser": False, "category": "incomplete", "feedback": "Date."}
    )

    def answer(seen: Seen) -> Step:
        if seen.body["model"] == "gemini-2.0-flash":
            return Step(chunks=(failing,))
        return slow

    provider.respond_with(answer)
    verdict = await verdict_of(provider, {}, judgeAnswer="verdict_first")
    assert not verdict.passed and verdict.feedback == f"[{GEMINI}] Date."
    assert await provider.wait_for_cut(2) == 2
    assert all(cut.sent < 40 for cut in provider.cut)  # cut mid-stream, long before its end
