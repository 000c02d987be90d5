"""``types.replaced``: the verified turn's cheap ``model_copy(update=...)`` gives what
``model_copy`` gives, for replyguard's models and for a host's subclass with private state."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, PrivateAttr

from replyguard.types import Reason, Reply, RunMeta, ToolCallRecord, Verdict, replaced

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
