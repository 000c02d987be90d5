"""The OpenAI wire and a verified turn, without a server: what the judge sees of a request,
what the upstream is sent, and what the client gets back."""

from __future__ import annotations

import json
from typing import Any

import pytest

from replyguard.config import VerifierConfig
from replyguard.serve._app import serving_config
from replyguard.serve._auth import authorized
from replyguard.serve._wire import (
    WireError,
    answer_chunks,
    parse_chat,
    record_completion,
    tool_ledger,
    turn_of,
)
from support.serve_process import UPSTREAM_KEY

CALL = {
    "id": "c1",
    "type": "function",
    "function": {"name": "send_email", "arguments": '{"to": "team"}'},
}


def _request(messages: list[dict[str, Any]], **more: Any) -> bytes:
    return json.dumps({"model": "gpt-4o", "messages": messages, **more}).encode()


def test_system_messages_are_rules_and_the_last_user_message_is_the_turns() -> None:
    request = parse_chat(
        _request(
            [
                {"role": "system", "content": "Always date reports."},
                {"role": "user", "content": "Hello"},
                {"role": "assistant", "content": "Hi!"},
                {"role": "developer", "content": [{"type": "text", "text": "Be brief."}]},
                {"role": "user", "content": [{"type": "text", "text": "Write the report."}]},
            ],
            temperature=0.5,
        )
    )
    turn = turn_of(request)
    assert turn.user_message == "Write the report."
    assert turn.rules == ["Always date reports.", "Be brief."]
    assert [m["content"] for m in turn.history] == ["Hello", "Hi!"]
    assert turn.agent_model == "gpt-4o"
    assert request.params == {"temperature": 0.5}


def test_an_agent_loops_trailing_tool_calls_are_history_and_the_turns_tool_ledger() -> None:
    messages = [
        {"role": "user", "content": "Mail the team."},
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "c1", "content": "sent"},
    ]
    request = parse_chat(_request(messages))
    turn = turn_of(request)
    assert turn.user_message == "Mail the team."
    assert [m["role"] for m in turn.history] == ["assistant", "tool"]
    [record] = tool_ledger(request.messages)
    assert (record.name, record.arguments, record.succeeded) == ("send_email", {"to": "team"}, True)


def test_a_tool_call_without_its_result_did_not_succeed() -> None:
    messages = [
        {"role": "user", "content": "Mail the team."},
        {"role": "assistant", "content": None, "tool_calls": [CALL, {"bogus": 1}]},
    ]
    [record] = tool_ledger(parse_chat(_request(messages)).messages)
    assert record.succeeded is False


@pytest.mark.parametrize(
    ("more", "param"),
    [
        ({"n": 2}, "n"),
        ({"stream": "yes"}, "stream"),
        ({"api_key": UPSTREAM_KEY}, "api_key"),
        ({"base_url": "h"}, "base_url"),
    ],
)
def test_a_parameter_the_server_cannot_honour_is_refused_naming_it(
    more: dict[str, Any], param: str
) -> None:
    with pytest.raises(WireError) as caught:
        parse_chat(_request([{"role": "user", "content": "x"}], **more))
    assert (caught.value.status, caught.value.param) == (400, param)


def test_a_stream_carries_the_text_as_written_then_the_finish_then_replyguard() -> None:
    recorded = record_completion(
        {
            "id": "x1",
            "created": 7,
            "model": "gpt-4o",
            "choices": [{"message": {"content": "ab"}, "finish_reason": "stop"}],
        },
        None,
    )
    answer = {
        "id": "x1",
        "created": 7,
        "model": "gpt-4o",
        "choices": [{"index": 0, "message": recorded.message, "finish_reason": "stop"}],
        "usage": {"total_tokens": 3},
        "replyguard": {"status": "passed"},
    }
    chunks = list(answer_chunks(answer, ["a", "", "b"], include_usage=True))
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    assert deltas == [{"role": "assistant", "content": ""}, {"content": "a"}, {"content": "b"}, {}]
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1] == {
        "id": "x1",
        "created": 7,
        "model": "gpt-4o",
        "object": "chat.completion.chunk",
        "choices": [],
        "replyguard": {"status": "passed"},
        "usage": {"total_tokens": 3},
    }


def test_the_server_streams_in_buffer_mode_whatever_the_config_says() -> None:
    config = VerifierConfig.from_dict(
        {
            "streaming": {"mode": "release"},
            "runKinds": {"chat": {"streaming": {"mode": "release"}}},
        }
    )
    served = serving_config(config)
    assert served.streaming.mode == "buffer"
    assert served.for_run_kind("chat").streaming.mode == "buffer"


@pytest.mark.parametrize(
    ("header", "allowed"),
    [
        ("Bearer second-key", True),
        ("bearer first-key", True),
        ("Bearer first-key ", True),
        ("Bearer first-ke", False),
        ("Bearer first-keyy", False),
        ("Basic first-key", False),
        ("Bearer ", False),
        ("", False),
    ],
)
def test_only_a_configured_bearer_key_is_let_in(header: str, allowed: bool) -> None:
    headers = {"authorization": header} if header else {}
    assert authorized(("first-key", "second-key"), headers) is allowed
    assert authorized((), headers) is True
