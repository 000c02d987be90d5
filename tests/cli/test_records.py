"""A turn as JSON and an eval record: camelCase keys, strict types, errors naming file:line:key."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from replyguard._records import (
    MAX_REPORTED,
    DatasetError,
    EvalRecord,
    RecordError,
    TurnRecord,
    parse_dataset,
    read_dataset,
    read_record,
)
from replyguard.types import FailCategory, Reply, RunMeta, ToolCallRecord, Turn


def test_a_minimal_turn_takes_the_reply_as_a_string() -> None:
    record = read_record(TurnRecord, '{"userMessage": "Hi?", "reply": "Hello."}', path="t.json")
    assert record.turn() == Turn(user_message="Hi?")
    assert record.agent_reply() == Reply(text="Hello.")


def test_every_turn_key_and_the_reply_meta_read_in_camel_case() -> None:
    data = {
        "userMessage": "Send the report",
        "reply": {
            "text": "Sent.",
            "meta": {
                "stopReason": "stop",
                "pendingToolCalls": [{"id": "c1"}],
                "sentViaMessagingTool": True,
                "streamedBlockKeys": ["b1"],
                "durationMs": 1200,
                "toolCalls": [{"name": "mail", "arguments": {"to": "a@b.c"}, "succeeded": False}],
                "costUsd": 0.01,
            },
        },
        "history": [{"role": "user", "content": "Hello"}],
        "rules": ["Be brief."],
        "agentInstructions": "You are a mail bot.",
        "heartbeat": True,
        "agentModel": "openai/gpt-4o",
        "metadata": {"channel": "slack"},
        "id": "turn-7",
    }
    record = read_record(TurnRecord, json.dumps(data), path="t.json")
    assert record.turn() == Turn(
        user_message="Send the report",
        history=[{"role": "user", "content": "Hello"}],
        rules=["Be brief."],
        agent_instructions="You are a mail bot.",
        heartbeat=True,
        agent_model="openai/gpt-4o",
        metadata={"channel": "slack"},
        id="turn-7",
    )
    assert record.agent_reply().meta == RunMeta(
        stop_reason="stop",
        pending_tool_calls=1,
        sent_via_messaging_tool=True,
        streamed_block_keys=frozenset({"b1"}),
        duration_ms=1200,
        tool_calls=(ToolCallRecord(name="mail", arguments={"to": "a@b.c"}, succeeded=False),),
        cost_usd=0.01,
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"userMessage": "x", "reply": "y", "replyText": 1}', "replyText: unknown key"),
        ('{"userMessage": "x"}', "reply: required key missing"),
        ('{"reply": "y"}', "userMessage: required key missing"),
        ('{"userMessage": "x", "reply": {"txt": "y"}}', "reply.txt: unknown key"),
        ('{"userMessage": "x", "reply": "y", "heartbeat": "yes"}', "heartbeat: Input should be"),
        ('{"user_message": "x", "reply": "y"}', "user_message: unknown key"),
        (
            '{"userMessage": "x", "reply": {"text": "y", "meta": {"stop_reason": "stop"}}}',
            "reply.meta.stop_reason: unknown key",
        ),
        ('["x"]', "a record must be a JSON object"),
        ('{"userMessage": "x",', "not valid JSON"),
    ],
)
def test_a_bad_turn_is_an_error_naming_the_file_and_the_key(text: str, message: str) -> None:
    with pytest.raises(RecordError) as caught:
        read_record(TurnRecord, text, path="turn.json")
    assert str(caught.value).startswith("turn.json: invalid record: ")
    assert message in str(caught.value)


def test_an_eval_record_reads_its_label_category_and_judge_output() -> None:
    text = (
        '{"userMessage": "x", "reply": "y", "label": "FAIL", "labelCategory": "incomplete", '
        '"judgeOutput": "FAIL [incomplete]: more"}'
    )
    record = read_record(EvalRecord, text, path="d.jsonl", line=4)
    assert (record.label, record.label_category, record.judge_output) == (
        "FAIL",
        FailCategory.INCOMPLETE,
        "FAIL [incomplete]: more",
    )


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ('"label": "pass"', "label: Input should be 'PASS' or 'FAIL'"),
        ('"label": "FAIL", "labelCategory": "rude!"', "labelCategory: not a category name"),
        ('"label": "PASS", "labelCategory": "incomplete"', "only given with label FAIL"),
        ('"judgeOutput": 3', "judgeOutput: Input should be a valid string"),
    ],
)
def test_a_bad_label_is_an_error_naming_the_line(extra: str, message: str) -> None:
    with pytest.raises(RecordError) as caught:
        read_record(EvalRecord, f'{{"userMessage": "x", "reply": "y", {extra}}}', path="d", line=9)
    assert str(caught.value).startswith("d:9: invalid record: ")
    assert message in str(caught.value)


def test_a_dataset_keeps_line_numbers_and_ignores_blank_lines(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text('{"userMessage": "a", "reply": "b"}\n\n{"userMessage": "c", "reply": "d"}\n')
    assert [(n, r.user_message) for n, r in read_dataset(path)] == [(1, "a"), (3, "c")]


def test_a_bad_line_names_its_number(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text(
        '{"userMessage": "a", "reply": "b"}\n{"userMessage": "c", "reply": "d", "x": 1}\n'
    )
    with pytest.raises(RecordError, match=r"d\.jsonl:2: invalid record: x: unknown key"):
        read_dataset(path)


def test_replay_needs_a_judge_output_on_every_judged_record(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    judged = '{"userMessage": "a", "reply": "b", "judgeOutput": "PASS"}\n'
    path.write_text(judged + '{"userMessage": "c", "reply": "d"}\n')
    assert len(read_dataset(path)) == 2
    with pytest.raises(RecordError, match=r"d\.jsonl:2: invalid record: judgeOutput: required"):
        read_dataset(path, replay=True)


def test_replay_needs_no_judge_output_on_a_record_the_prechecks_skip(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    tool_call = {"userMessage": "a", "reply": {"text": "", "meta": {"pendingToolCalls": 1}}}
    path.write_text(json.dumps(tool_call) + "\n")
    assert [n for n, _ in read_dataset(path, replay=True)] == [1]


@pytest.mark.parametrize(("content", "message"), [(None, "file not found"), ("\n\n", "no records")])
def test_a_missing_or_empty_dataset_is_an_error(
    tmp_path: Path, content: str | None, message: str
) -> None:
    path = tmp_path / "d.jsonl"
    if content is not None:
        path.write_text(content)
    with pytest.raises(RecordError, match=message):
        read_dataset(path)


def test_raw_unicode_line_breaks_inside_strings_do_not_split_a_record(tmp_path: Path) -> None:
    texts = ["a\u2028b", "c\u2029d", "e\x85f", "g\x0bh\x0ci\x1cj\x1dk\x1el"]
    lines = [json.dumps({"userMessage": t, "reply": "ok"}, ensure_ascii=False) for t in texts]
    path = tmp_path / "d.jsonl"
    path.write_bytes(("\r\n".join(lines) + "\n" + '{"userMessage": 1}\n').encode("utf-8"))
    with pytest.raises(RecordError, match=r"d\.jsonl:5: invalid record: "):
        read_dataset(path)
    path.write_bytes(("\r\n".join(lines) + "\r\n").encode("utf-8"))
    assert [(n, r.user_message) for n, r in read_dataset(path)] == list(enumerate(texts, start=1))


def test_a_dataset_given_as_text_names_its_source_in_errors() -> None:
    text = '{"userMessage": "a", "reply": "b"}\n{"userMessage": "c"}\n'
    with pytest.raises(RecordError, match=r"<stdin>:2: invalid record: reply: required key"):
        parse_dataset(text, name="<stdin>")
    assert [n for n, _ in parse_dataset(text.splitlines()[0], name="<stdin>")] == [1]


def test_every_bad_line_of_a_dataset_is_reported_in_one_error(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    good = '{"userMessage": "a", "reply": "b"}\n'
    path.write_text(good + '{"userMessage": "c"}\n' + good + "not json\n" + good)
    with pytest.raises(DatasetError) as caught:
        read_dataset(path)
    assert ([e.line for e in caught.value.errors], caught.value.total) == ([2, 4], 2)
    assert str(caught.value).splitlines() == [
        f"{path}: 2 invalid records:",
        f"  {path}:2: invalid record: reply: required key missing",
        f"  {path}:4: invalid record: not valid JSON: Expecting value at column 1",
    ]


def test_a_dataset_error_lists_the_first_bad_lines_and_counts_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text('{"userMessage": "c"}\n' * (MAX_REPORTED + 5))
    with pytest.raises(DatasetError) as caught:
        read_dataset(path)
    assert (len(caught.value.errors), caught.value.total) == (MAX_REPORTED, MAX_REPORTED + 5)
    assert str(caught.value).endswith("\n  ... and 5 more invalid lines")


@pytest.mark.parametrize(
    ("record", "expected"),
    [
        (
            {"userMessage": "x", "reply": 5},
            'reply: must be a string or a JSON object {"text", "meta"}',
        ),
        (
            {"userMessage": "x", "reply": {"text": "a", "meta": 3}},
            "reply.meta: must be a JSON object",
        ),
        (
            {"userMessage": "x", "reply": "a", "histroy": []},
            "histroy: unknown key (did you mean `history`?)",
        ),
    ],
)
def test_record_errors_name_no_internal_class_and_hint_at_the_key(
    record: dict[str, Any], expected: str
) -> None:
    with pytest.raises(RecordError) as caught:
        read_record(TurnRecord, json.dumps(record), path="turn.json")
    assert str(caught.value).endswith(expected)
    assert "_Reply" not in str(caught.value) and "_Meta" not in str(caught.value)
