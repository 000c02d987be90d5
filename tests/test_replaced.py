"""``types.replaced``: the verified turn's cheap ``model_copy(update=...)`` gives what
``model_copy`` gives, for replyguard's models and for a host's subclass with private state."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, PrivateAttr, ValidationError

from replyguard._frozen import assembled, assembled_from
from replyguard.types import (
    Attempt,
    Outcome,
    Reason,
    Reply,
    RunMeta,
    Status,
    TokenUsage,
    ToolCallRecord,
    Verdict,
    replaced,
)

CASES = [
    pytest.param(Verdict(passed=True, model="m"), {"latency_ms": 2.5, "model": "x"}, id="verdict"),
    pytest.param(
        Verdict(passed=False, feedback="no"),
        {"fail_open_reason": Reason.UNREADABLE_VERDICT, "error": "e"},
        id="verdict-reason",
    ),
    pytest.param(
        ToolCallRecord(name="send", arguments={"to": "a"}), {"side_effect": True}, id="call"
    ),
    pytest.param(
        Reply(text="hi", meta=RunMeta(stop_reason="end")),
        {"meta": RunMeta(tool_calls=(ToolCallRecord(name="t"),))},
        id="reply",
    ),
]


def _state(model: BaseModel) -> tuple[Any, ...]:
    return (
        type(model),
        model.__dict__,
        model.model_fields_set,
        model.__pydantic_extra__,
        model.__pydantic_private__,
    )


@pytest.mark.parametrize(("model", "update"), CASES)
def test_replaced_gives_what_model_copy_gives(model: BaseModel, update: dict[str, Any]) -> None:
    fresh = replaced(model, update)
    assert _state(fresh) == _state(model.model_copy(update=update))
    assert fresh is not model and fresh.__dict__ is not model.__dict__


def test_the_original_is_left_as_it_was() -> None:
    verdict = Verdict(passed=True, model="m")
    replaced(verdict, {"model": "x"})
    assert verdict.model == "m"
    assert verdict.model_fields_set == {"passed", "model"}


class HostVerdict(Verdict):
    _seen: list[str] = PrivateAttr(default_factory=list)


def test_a_subclass_with_private_state_keeps_it() -> None:
    verdict = HostVerdict(passed=True)
    verdict._seen.append("judge")
    fresh = replaced(verdict, {"model": "x"})
    assert isinstance(fresh, HostVerdict)
    assert fresh._seen == ["judge"]
    assert fresh.model == "x"


# -- ``assembled``: the turn's cheap constructor of values made of valid parts ------------------

_REPLY = Reply(text="hi", meta=RunMeta(stop_reason="end"))
_VERDICT = Verdict(passed=True, raw="PASS", model="m", cost_usd=0.25)
_ATTEMPT = Attempt(number=1, reply=_REPLY, verdict=_VERDICT)
ASSEMBLED = [
    pytest.param(
        Attempt, {"number": 2, "reply": _REPLY, "verdict": _VERDICT, "checks": ()}, id="attempt"
    ),
    pytest.param(
        TokenUsage,
        {
            "agent_prompt_tokens": 3,
            "agent_completion_tokens": 4,
            "judge_prompt_tokens": 5,
            "judge_completion_tokens": 6,
        },
        id="usage",
    ),
    pytest.param(
        Outcome,
        {
            "response": "hi",
            "parsed": None,
            "status": Status.PASSED,
            "reason": None,
            "attempts": (_ATTEMPT,),
            "skip_reason": None,
            "awaiting_user": False,
            "cost_usd": 0.25,
            "judge_cost_usd": 0.25,
            "usage": TokenUsage(),
            "latency_ms": 1.5,
        },
        id="outcome",
    ),
    pytest.param(Outcome, {"response": "hi", "status": Status.SKIPPED}, id="outcome-defaults"),
    pytest.param(
        Verdict,
        {"passed": True, "feedback": None, "reasoning": "r", "raw": "PASS", "awaiting_user": True},
        id="verdict",
    ),
]


@pytest.mark.parametrize(("cls", "given"), ASSEMBLED)
def test_assembled_gives_what_validation_gives(cls: type[BaseModel], given: dict[str, Any]) -> None:
    made = assembled(cls, **given)
    validated = cls(**given)
    assert _state(made) == _state(validated)
    assert list(made.__dict__) == list(validated.__dict__)  # the fields' order: repr, iteration
    assert repr(made) == repr(validated)
    assert made.model_dump() == validated.model_dump()
    assert made.model_dump(exclude_unset=True) == validated.model_dump(exclude_unset=True)
    assert made == validated


def test_assembled_makes_each_default_factory_s_value_afresh() -> None:
    made = assembled(Outcome, response="hi", status=Status.SKIPPED)
    assert made.usage == TokenUsage()
    assert "usage" not in made.model_fields_set


def test_assembled_leaves_a_missing_field_to_validation() -> None:
    with pytest.raises(ValidationError, match="reply"):
        assembled(Attempt, number=1)


def test_assembled_leaves_an_unknown_field_to_validation() -> None:
    with pytest.raises(ValidationError, match="colour"):
        assembled(Attempt, number=1, reply=_REPLY, colour="blue")


@pytest.mark.parametrize(("cls", "given"), ASSEMBLED)
def test_assembled_from_a_dict_is_assembled_and_leaves_the_dict_alone(
    cls: type[BaseModel], given: dict[str, Any]
) -> None:
    held = dict(given)
    made = assembled_from(cls, held)
    assert held == given  # read, not changed
    expected = assembled(cls, **given)
    assert _state(made) == _state(expected)
    assert list(made.__dict__) == list(expected.__dict__)
    assert made.model_fields_set == expected.model_fields_set
    held["__extra__"] = 1  # nothing of the dict is kept by the model
    assert made.__dict__ is not held and "__extra__" not in made.__dict__
    assert made.model_fields_set is not expected.model_fields_set


def test_assembled_from_leaves_a_missing_or_unknown_field_to_validation() -> None:
    with pytest.raises(ValidationError, match="reply"):
        assembled_from(Attempt, {"number": 1})
    with pytest.raises(ValidationError, match="colour"):
        assembled_from(Attempt, {"number": 1, "reply": _REPLY, "colour": "blue"})
