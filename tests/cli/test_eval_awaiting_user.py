"""The awaiting-the-user dataset (``examples/eval/awaiting_user.jsonl``) and how ``eval``
counts the judge's ``PASS [awaiting_user]`` over it (a loopback judge)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from test_cli_verify import config_file, turn_file, verify
from test_eval_cli import live_config, run_eval

from replyguard._records import read_dataset
from support.provider_server import ProviderServer, Seen, Step

DATASET = Path(__file__).resolve().parents[2] / "examples" / "eval" / "awaiting_user.jsonl"
RECORDS = [record for _, record in read_dataset(DATASET)]


def kind(record_id: str | None) -> str:
    assert record_id is not None
    return record_id.split("-")[1]


def test_the_dataset_holds_at_least_fifty_labelled_turns_of_three_kinds() -> None:
    kinds = Counter(kind(record.id) for record in RECORDS)
    assert len(RECORDS) >= 50
    assert set(kinds) == {"question", "refusal", "lookalike"}
    assert min(kinds.values()) >= 10
    assert len({record.id for record in RECORDS}) == len(RECORDS)


def test_its_labels_say_fair_questions_and_justified_refusals_pass_and_look_alikes_fail() -> None:
    for record in RECORDS:
        expected = "FAIL" if kind(record.id) == "lookalike" else "PASS"
        assert record.label == expected, record.id
        assert (record.label_category is not None) == (expected == "FAIL"), record.id


def test_it_holds_labels_only_and_no_judge_outputs() -> None:
    assert all(record.judge_output is None for record in RECORDS)


def test_eval_counts_the_judges_awaiting_user_passes_and_the_false_fail_rate(
    tmp_path: Path, provider: ProviderServer, capsys: pytest.CaptureFixture[str]
) -> None:
    # A judge that marks every question and refusal awaiting the user, fails every look-alike,
    # and gets one fair question wrong: a false FAIL the report must count.
    by_reply = {record.reply.text: record for record in RECORDS}
    wrong = RECORDS[0].reply.text

    def answer(seen: Seen) -> Step:
        reply = next(text for text in by_reply if text in seen.prompt)
        if reply == wrong or kind(by_reply[reply].id) == "lookalike":
            return Step(text="FAIL [goal_missed]: answer what was asked.")
        return Step(text="PASS [awaiting_user]")

    provider.respond_with(answer)
    out = tmp_path / "out"
    code, printed, _, report = run_eval(
        capsys, str(DATASET), "--config", live_config(tmp_path, provider), "--out", str(out)
    )
    assert code == 0 and report is not None
    fair = sum(record.label == "PASS" for record in RECORDS)
    assert report["awaitingUser"] == fair - 1
    assert report["falseFailRate"] == round(1 / fair, 4)
    assert report["falsePassRate"] == 0
    rows = {row["id"]: row for row in report["results"]}
    assert rows[RECORDS[0].id]["awaitingUser"] is False
    assert rows[RECORDS[1].id]["awaitingUser"] is True
    assert f"awaiting the user {fair - 1}" in printed
    assert json.loads((out / "report.json").read_text())["awaitingUser"] == fair - 1


@pytest.mark.parametrize(
    ("answer", "status", "awaiting"),
    [
        ("PASS [awaiting_user]", "passed", True),
        ("PASS", "passed", False),
        ("FAIL [goal_missed]: the restaurant was named.\nPASS [awaiting_user]", "failed", False),
    ],
)
def test_verify_prints_whether_the_reply_waits_for_the_user(
    tmp_path: Path,
    provider: ProviderServer,
    capsys: pytest.CaptureFixture[str],
    answer: str,
    status: str,
    awaiting: bool,
) -> None:
    provider.push(Step(text=answer))
    turn = {"userMessage": "Book me a table for Friday.", "reply": "Which restaurant?"}
    config = config_file(tmp_path, provider)
    _, verdict, _ = verify(capsys, turn_file(tmp_path, turn), "--config", config)
    assert (verdict["status"], verdict["awaitingUser"]) == (status, awaiting)
