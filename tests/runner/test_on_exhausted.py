"""``onExhausted`` per FAIL category: the operator's fixed message instead of any attempt, a
reply, or an exception, decided by the last FAIL's category; verifier faults still fail open."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from replyguard import (
    ConfigError,
    Delta,
    Done,
    JudgeReply,
    Reason,
    Retract,
    Status,
    Turn,
    VerificationExhausted,
    Verifier,
    VerifierConfig,
)
from replyguard.testing import ScriptedAgent, ScriptedJudge, ScriptedStreamAgent

TURN = Turn(user_message="Refund order A-58812.")
MESSAGE = "I could not complete that; a colleague will follow up."
GROUNDING = "FAIL [grounding]: the tool refunded $1,200.00, not $1,300.00."
GROUNDING_OTHER = "FAIL [grounding]: name the order."
INCOMPLETE = "FAIL [incomplete]: say when the refund arrives."
FIRST, SECOND = "Refunded $1,300.00.", "Refunded $1,300.00 for A-58812."


async def _run(make_config: Any, answers: Sequence[Any], **keys: Any) -> Any:
    keys.setdefault("maxAttempts", 2)
    verifier = Verifier(make_config(verifyAll=True, **keys), judge=ScriptedJudge(answers))
    return await verifier.run(ScriptedAgent([FIRST, SECOND, "third"][:2]), TURN)


async def test_an_exhausted_grounding_fail_delivers_the_operators_message(
    make_config: Any,
) -> None:
    outcome = await _run(
        make_config, [GROUNDING, GROUNDING_OTHER], onExhausted={"grounding": MESSAGE}
    )
    assert (outcome.status, outcome.reason, outcome.response) == (
        Status.EXHAUSTED,
        Reason.OPERATOR_MESSAGE,
        MESSAGE,
    )
    assert [a.reply.text for a in outcome.attempts] == [FIRST, SECOND]  # still recorded


async def test_the_last_fails_category_decides(make_config: Any) -> None:
    outcome = await _run(make_config, [GROUNDING, INCOMPLETE], onExhausted={"grounding": MESSAGE})
    assert (outcome.status, outcome.reason, outcome.response) == (Status.EXHAUSTED, None, SECOND)


async def test_a_category_not_listed_follows_the_star_then_deliver(make_config: Any) -> None:
    listed = {"refusal": "no", "*": MESSAGE}
    outcome = await _run(make_config, [INCOMPLETE, INCOMPLETE + " now"], onExhausted=listed)
    assert outcome.response == MESSAGE
    first = await _run(
        make_config,
        [INCOMPLETE, INCOMPLETE + " now"],
        onExhausted={"refusal": "x"},
        deliver="first",
    )
    assert (first.reason, first.response) == (None, FIRST)


async def test_a_stagnant_turn_gets_the_message_too(make_config: Any) -> None:
    outcome = await _run(
        make_config, [GROUNDING, GROUNDING], maxAttempts=3, onExhausted={"*": MESSAGE}
    )
    assert (outcome.status, outcome.reason, outcome.response) == (
        Status.EXHAUSTED,
        Reason.OPERATOR_MESSAGE,
        MESSAGE,
    )


async def test_raise_per_category_raises_only_for_that_category(make_config: Any) -> None:
    with pytest.raises(VerificationExhausted) as raised:
        await _run(make_config, [GROUNDING, GROUNDING_OTHER], onExhausted={"grounding": "raise"})
    assert raised.value.outcome.status is Status.EXHAUSTED
    outcome = await _run(
        make_config, [INCOMPLETE, INCOMPLETE + "!"], onExhausted={"grounding": "raise"}
    )
    assert outcome.response == SECOND


async def test_a_verifier_fault_after_a_fail_still_fails_open_with_the_reply(
    make_config: Any,
) -> None:
    outcome = await _run(
        make_config, [GROUNDING, RuntimeError("judge down")], onExhausted={"*": MESSAGE}
    )
    assert (outcome.status, outcome.reason, outcome.response) == (
        Status.FAILED_OPEN,
        Reason.JUDGE_ERROR,
        SECOND,
    )


async def test_a_cost_budget_still_fails_open_with_the_reply(make_config: Any) -> None:
    costly = JudgeReply(text=GROUNDING, model="judge", cost_usd=0.01)
    verifier = Verifier(
        make_config(verifyAll=True, maxCostUsd=0.015, onExhausted={"*": MESSAGE}),
        judge=ScriptedJudge([costly]),
    )
    outcome = await verifier.run(ScriptedAgent([FIRST]), TURN)
    assert (outcome.status, outcome.reason, outcome.response) == (
        Status.FAILED_OPEN,
        Reason.COST_BUDGET,
        FIRST,
    )


async def test_a_deciding_checks_fail_is_its_category(make_config: Any) -> None:
    checks = [{"type": "rules", "maxLength": 5, "category": "rule_violation"}]
    verifier = Verifier(
        make_config(
            verifyAll=True, maxAttempts=2, checks=checks, onExhausted={"rule_violation": MESSAGE}
        ),
        judge=ScriptedJudge([]),
    )
    outcome = await verifier.run(ScriptedAgent([FIRST, SECOND]), TURN)
    assert (outcome.reason, outcome.response) == (Reason.OPERATOR_MESSAGE, MESSAGE)


async def _events(stream: AsyncIterator[Any]) -> list[Any]:
    return [event async for event in stream]


@pytest.mark.parametrize("mode", ["buffer", "release"])
async def test_a_streamed_turn_retracts_and_streams_the_message(
    make_config: Any, mode: str
) -> None:
    config = make_config(
        verifyAll=True,
        maxAttempts=2,
        streaming={"mode": mode, "holdBackChars": 4},
        onExhausted={"grounding": MESSAGE},
    )
    verifier = Verifier(config, judge=ScriptedJudge([GROUNDING, GROUNDING_OTHER]), preload=False)
    agent = ScriptedStreamAgent([["Refunded ", "$1,300.00."], ["Refunded ", "$1,300.00 again."]])
    events = await _events(verifier.stream(agent, TURN))
    done = events[-1]
    assert isinstance(done, Done) and done.outcome.response == MESSAGE
    last = max((i for i, e in enumerate(events) if isinstance(e, Retract)), default=-1)
    assert "".join(e.text for e in events[last + 1 :] if isinstance(e, Delta)) == MESSAGE
    assert done.outcome.reason is Reason.OPERATOR_MESSAGE


@pytest.mark.parametrize(
    ("value", "key"),
    [
        ({"nope": MESSAGE}, "onExhausted.nope"),
        ({}, "onExhausted"),
        ({"grounding": "  "}, "onExhausted"),
        ({"grounding": 3}, "onExhausted"),
        ("later", "onExhausted"),
        (["deliver"], "onExhausted"),
    ],
)
def test_a_bad_on_exhausted_is_refused_naming_the_key(value: Any, key: str) -> None:
    with pytest.raises(ConfigError) as refused:
        VerifierConfig.from_dict({"onExhausted": value})
    assert key in str(refused.value)


def test_a_custom_category_may_have_its_message() -> None:
    config = VerifierConfig.from_dict(
        {
            "categories": {"medical_advice": "Refer to a doctor."},
            "onExhausted": {"medical_advice": MESSAGE},
        }
    )
    assert config.on_exhausted == {"medical_advice": MESSAGE}


def test_a_run_kinds_on_exhausted_is_checked_against_the_categories() -> None:
    with pytest.raises(ConfigError) as refused:
        VerifierConfig.from_dict({"runKinds": {"support": {"onExhausted": {"medical": "x"}}}})
    assert "runKinds.support.onExhausted.medical" in str(refused.value)


def test_the_string_forms_keep_their_meaning() -> None:
    assert VerifierConfig().on_exhausted == "deliver"
    assert VerifierConfig.from_dict({"onExhausted": "raise"}).on_exhausted == "raise"


@pytest.mark.parametrize("where", ["top", "run kind"])
def test_a_null_on_exhausted_is_refused_with_one_message(where: str) -> None:
    data: dict[str, Any] = {"onExhausted": None}
    if where == "run kind":
        data = {"runKinds": {"k": data}}
    with pytest.raises(ConfigError) as refused:
        VerifierConfig.from_dict(data)
    assert 'must be "deliver", "raise", or an object' in str(refused.value)
    assert str(refused.value).count("onExhausted") == 1
