"""``skip_reason``: which replies are delivered without a judgement, and in which order."""

from __future__ import annotations

from typing import Any

import pytest

from replyguard.gate._prechecks import skip_reason
from replyguard.types import Reply, RunMeta, SkipReason


def _reply(text: str = "Here is the summary you asked for.", **meta: Any) -> Reply:
    return Reply(text=text, meta=RunMeta(**meta))


def test_clean_reply_is_not_skipped() -> None:
    assert skip_reason(_reply()) is None


@pytest.mark.parametrize("stop_reason", [None, "stop", "length", "end_turn", "STOP"])
def test_ordinary_stop_reasons_are_not_skipped(stop_reason: str | None) -> None:
    assert skip_reason(_reply(stop_reason=stop_reason)) is None


@pytest.mark.parametrize("pending", [1, 3, ["call_1"]])
def test_pending_tool_calls_skip_as_tool_calls(pending: Any) -> None:
    assert skip_reason(_reply(pending_tool_calls=pending)) is SkipReason.TOOL_CALLS


@pytest.mark.parametrize(
    "stop_reason",
    ["tool_calls", "tool_use", "function_call", "TOOL_CALLS", "Tool_Use", " function_call "],
)
def test_tool_stop_reasons_skip_as_tool_calls_in_any_case(stop_reason: str) -> None:
    assert skip_reason(_reply(stop_reason=stop_reason)) is SkipReason.TOOL_CALLS


def test_messaging_tool_delivery_skips() -> None:
    reply = _reply(sent_via_messaging_tool=True)
    assert skip_reason(reply) is SkipReason.MESSAGING_TOOL_SENT


def test_streamed_blocks_skip() -> None:
    reply = _reply(streamed_block_keys=frozenset({"block-1"}))
    assert skip_reason(reply) is SkipReason.BLOCK_STREAMING_SENT


@pytest.mark.parametrize(
    "text",
    [
        "",
        " ",
        "\n\t\r ",
        "\u00a0",  # no-break space
        "\u3000",  # ideographic space
        "\u200b",  # zero-width space
        "\ufeff",  # byte order mark
        "\u2060\u200d",  # word joiner, zero-width joiner
        " \u200b\n\ufeff\u00a0 ",
    ],
    ids=repr,
)
def test_blank_text_skips_as_empty(text: str) -> None:
    assert skip_reason(_reply(text)) is SkipReason.EMPTY_RESPONSE


@pytest.mark.parametrize(
    "text", ["\u200bok", ".", " \ufeff0 ", "ok", "漢字", "🎉 \u200b"], ids=repr
)
def test_one_visible_character_is_not_empty(text: str) -> None:
    assert skip_reason(_reply(text)) is None


@pytest.mark.parametrize(
    "meta",
    [{"error": "rate limited"}, {"stop_reason": "error"}, {"stop_reason": "ERROR"}],
    ids=repr,
)
def test_error_reports_skip_as_error(meta: dict[str, Any]) -> None:
    assert skip_reason(_reply(**meta)) is SkipReason.ERROR_RESPONSE


@pytest.mark.parametrize("error", ["", "  "], ids=repr)
def test_blank_error_field_is_no_error(error: str) -> None:
    assert skip_reason(_reply(error=error)) is None


_EVERYTHING: dict[str, Any] = {
    "pending_tool_calls": 1,
    "sent_via_messaging_tool": True,
    "streamed_block_keys": frozenset({"b"}),
    "error": "boom",
}


@pytest.mark.parametrize(
    ("text", "meta", "expected"),
    [
        ("", _EVERYTHING, SkipReason.TOOL_CALLS),
        ("", {**_EVERYTHING, "pending_tool_calls": 0}, SkipReason.MESSAGING_TOOL_SENT),
        (
            "",
            {**_EVERYTHING, "pending_tool_calls": 0, "sent_via_messaging_tool": False},
            SkipReason.BLOCK_STREAMING_SENT,
        ),
        ("", {"error": "boom", "stop_reason": "error"}, SkipReason.EMPTY_RESPONSE),
        ("text", {"error": "boom", "stop_reason": "error"}, SkipReason.ERROR_RESPONSE),
        ("", {"stop_reason": "tool_use", "error": "boom"}, SkipReason.TOOL_CALLS),
    ],
    ids=["tool_calls", "messaging", "streaming", "empty", "error", "tool_stop_reason"],
)
def test_first_matching_reason_wins_in_contract_order(
    text: str, meta: dict[str, Any], expected: SkipReason
) -> None:
    assert skip_reason(_reply(text, **meta)) is expected
