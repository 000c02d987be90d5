"""The review queue: which turns are shown, in which order, and the seeded stratified sample."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from support_review import SAMPLE_LEDGER, entry, write_ledger

from replyguard.review._queue import (
    QueueError,
    build_queue,
    read_ledgers,
    read_outcomes,
    stratified_sample,
)


def test_turns_worth_a_look_come_first_most_pressing_first(tmp_path: Path) -> None:
    split = entry(
        "split",
        "passed",
        "PASS",
        panel=[{"attempt": 1, "decision": "PASS", "votes": {"a": "PASS", "b": "FAIL"}}],
    )
    agreed = entry(
        "agreed",
        "passed",
        "PASS",
        panel=[{"attempt": 1, "decision": "PASS", "votes": {"a": "PASS", "b": None}}],
    )
    ledger = write_ledger(
        tmp_path / "l.jsonl",
        [
            entry("open", "failed_open", None, reason="judge_timeout"),
            entry("flag", "flagged", "FAIL", category="incomplete"),
            entry("ok", "passed", "PASS"),
            entry("done", "exhausted", "FAIL"),
            split,
            agreed,
            entry("skip", "skipped", None),
        ],
    )
    queue = build_queue(read_ledgers([ledger]), sample=0, seed=0, outcomes={"ok": "bad"})
    assert [(t.entry["turnId"], t.reasons) for t in queue] == [
        ("ok", ("outcome_disagrees",)),
        ("split", ("panel_split",)),
        ("done", ("exhausted",)),
        ("flag", ("flagged",)),
        ("open", ("failed_open",)),
    ]


def test_an_outcome_that_agrees_with_the_verdict_queues_nothing(tmp_path: Path) -> None:
    ledger = write_ledger(
        tmp_path / "l.jsonl", [entry("a", "passed", "PASS"), entry("b", "flagged", "FAIL")]
    )
    queue = build_queue(
        read_ledgers([ledger]), sample=0, seed=0, outcomes={"a": "good", "b": "bad"}
    )
    assert [(t.entry["turnId"], t.reasons) for t in queue] == [("b", ("flagged",))]
    good = build_queue(read_ledgers([ledger]), sample=0, seed=0, outcomes={"b": "good"})
    assert good[0].reasons == ("outcome_disagrees", "flagged")


def test_the_sample_of_passes_is_seeded_and_stratified_by_run_kind(tmp_path: Path) -> None:
    lines = [entry(f"s{i}", "passed", "PASS", run_kind="support") for i in range(90)]
    lines += [entry(f"b{i}", "passed", "PASS", run_kind="billing") for i in range(9)]
    lines += [entry("h0", "passed", "PASS", run_kind=None)]
    ledgers = read_ledgers([write_ledger(tmp_path / "l.jsonl", lines)])
    first = build_queue(ledgers, sample=10, seed=7)
    again = build_queue(ledgers, sample=10, seed=7)
    other = build_queue(ledgers, sample=10, seed=8)
    assert [t.key for t in first] == [t.key for t in again]
    assert [t.key for t in first] != [t.key for t in other]
    assert all(t.reasons == ("sample",) for t in first)
    strata = Counter(t.entry["runKind"] or "default" for t in first)
    # 90/9/1 of 10: support 9 by share, but every stratum gets one: 8, 1, 1
    assert strata == {"support": 8, "billing": 1, "default": 1}


def test_a_sample_larger_than_the_passes_takes_them_all_once(tmp_path: Path) -> None:
    ledgers = read_ledgers(
        [write_ledger(tmp_path / "l.jsonl", [entry(f"p{i}", "passed", "PASS") for i in range(3)])]
    )
    assert len(stratified_sample(ledgers.turns, 50, seed=1)) == 3
    assert stratified_sample(ledgers.turns, 0, seed=1) == []


def test_lines_that_are_not_turns_are_counted_not_fatal(tmp_path: Path) -> None:
    path = tmp_path / "l.jsonl"
    path.write_bytes(
        b'{"status": "flagged", "judged": []}\n[1, 2]\nnot json\n\xff\xfe\n{"no": "status"}\n'
    )
    read = read_ledgers([path])
    assert len(read.turns) == 1
    assert read.skipped == [f"{path}:{n}" for n in (2, 3, 4, 5)]


def test_an_unreadable_ledger_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(QueueError, match=r"missing\.jsonl: cannot read: FileNotFoundError"):
        read_ledgers([tmp_path / "missing.jsonl"])


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{", r"o.jsonl:1: not valid JSON"),
        ('{"turnId": "a", "outcome": "meh"}', r"o.jsonl:1: outcome: must be 'good' or 'bad'"),
        ('{"outcome": "bad"}', r"o.jsonl:1: turnId: required"),
        ('{"turnId": "a", "outcome": "bad", "score": 1}', r"o.jsonl:1: score: unknown key"),
        ("[]", r"o.jsonl:1: a line must be a JSON object"),
    ],
)
def test_a_bad_outcomes_line_names_the_file_line_and_key(
    tmp_path: Path, line: str, message: str
) -> None:
    path = tmp_path / "o.jsonl"
    path.write_text(line + "\n", encoding="utf-8")
    with pytest.raises(QueueError, match=message):
        read_outcomes(path)


def test_the_shipped_sample_ledger_queues_its_flagged_exhausted_and_failed_open_turns() -> None:
    queue = build_queue(read_ledgers([SAMPLE_LEDGER]), sample=5, seed=0)
    reasons = Counter(t.reasons[0] for t in queue)
    assert reasons == {"flagged": 7, "exhausted": 1, "failed_open": 1, "sample": 5}
