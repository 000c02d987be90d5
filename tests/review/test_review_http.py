"""The review server over HTTP: labels saved as eval records, resumable, several reviewers on
one file, and guarded against other sites and hosts."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
from support_review import SAMPLE_LEDGER, call, entry, serving, write_ledger

from replyguard.cli import main
from replyguard.review._labels import NOT_LOGGED

HOSTILE = '</script><script>document.title="owned"</script><img src=x onerror=alert(1)>'


def token(address: str) -> str:
    status, page = call(address, "GET", "/")
    assert status == 200
    start = page.index('id="config">') + len('id="config">')
    return str(json.loads(page[start : page.index("</script>", start)])["token"])


def label(address: str, key: str, value: str, **more: Any) -> tuple[int, Any]:
    headers = {"X-Replyguard-Token": token(address)}
    return call(
        address, "POST", "/api/label", {"key": key, "label": value, **more}, headers=headers
    )


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_a_label_is_saved_at_once_as_an_eval_record_with_the_recorded_verdict(
    tmp_path: Path,
) -> None:
    judge_output = "Nothing was looked up.\nFAIL [incomplete]: look it up."
    ledger = write_ledger(
        tmp_path / "l.jsonl",
        [
            entry(
                "t1",
                "flagged",
                "FAIL",
                reply="Let me check.",
                category="incomplete",
                judge_output=judge_output,
                run_kind="support",
            )
        ],
    )
    labels = tmp_path / "labels.jsonl"
    with serving(ledger, labels) as (address, _):
        _, first = call(address, "GET", "/api/next?client=a")
        turn = first["turn"]
        assert (turn["userMessage"], turn["reply"], turn["verdict"]) == (
            "question t1",
            "Let me check.",
            "FAIL",
        )
        assert turn["reasons"] == ["flagged"] and turn["evidence"]["runKind"] == "support"
        assert label(address, turn["key"], "FAIL", category="incomplete", note="agreed") == (
            200,
            {"ok": True},
        )
        (record,) = lines(labels)  # on disk before the next request
        _, after = call(address, "GET", "/api/next?client=a")
    assert after["turn"] is None and (after["left"], after["labelled"]) == (0, 1)
    assert record["userMessage"] == "question t1" and record["reply"] == "Let me check."
    assert (record["label"], record["labelCategory"]) == ("FAIL", "incomplete")
    assert (record["judgeOutput"], record["judgeOutputModel"]) == (judge_output, "judge-a")
    review = record["metadata"]["review"]
    assert (review["turnId"], review["reviewer"], review["note"]) == ("t1", "ana", "agreed")
    assert review["contentLogged"] is True and "runKind" not in record


def test_labels_replay_at_once_with_replyguard_eval(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    labels = tmp_path / "labels.jsonl"
    with serving(SAMPLE_LEDGER, labels, sample=4) as (address, _):
        while True:
            _, answer = call(address, "GET", "/api/next?client=a")
            turn = answer["turn"]
            if turn is None:
                break
            # the reviewer agrees with every PASS and with every FAIL but the exhausted one
            agree = turn["verdict"] == "PASS" or "exhausted" not in turn["reasons"]
            verdict = turn["verdict"] if agree and turn["verdict"] else "PASS"
            assert label(address, turn["key"], verdict)[0] == 200
    records = lines(labels)
    assert len(records) == 13  # 7 flagged, 1 exhausted, 1 failed open, 4 sampled
    assert main(["eval", "--replay", str(labels), "--out", str(tmp_path / "out")]) == 0
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert (report["records"], report["labelled"]) == (13, 13)
    # the exhausted turn's recorded FAIL is a false FAIL; the rest agree
    assert report["confusion"]["labelPassJudgedFail"] == 1
    assert report["confusion"]["labelFailJudgedFail"] == 7
    capsys.readouterr()


def test_content_that_was_never_logged_is_said_plainly_never_made_up(tmp_path: Path) -> None:
    ledger = write_ledger(
        tmp_path / "l.jsonl", [entry("quiet", "flagged", "FAIL", category="goal_missed")]
    )
    labels = tmp_path / "labels.jsonl"
    with serving(ledger, labels) as (address, _):
        _, answer = call(address, "GET", "/api/next?client=a")
        turn = answer["turn"]
        assert (turn["contentLogged"], turn["userMessage"], turn["reply"]) == (False, None, None)
        assert label(address, turn["key"], "PASS")[0] == 200
    (record,) = lines(labels)
    assert record["userMessage"] == record["reply"] == NOT_LOGGED
    assert record["judgeOutput"] == "FAIL [goal_missed]"  # the recorded vote, as a verdict line
    assert record["metadata"]["review"]["contentLogged"] is False


def test_a_restarted_server_resumes_where_the_file_stops(tmp_path: Path) -> None:
    ledger = write_ledger(
        tmp_path / "l.jsonl", [entry(f"t{i}", "flagged", "FAIL", reply=f"r{i}") for i in range(3)]
    )
    labels = tmp_path / "labels.jsonl"
    with serving(ledger, labels) as (address, _):
        _, answer = call(address, "GET", "/api/next?client=a")
        label(address, answer["turn"]["key"], "PASS")
        _, answer = call(address, "GET", "/api/next?client=a")
        skipped = answer["turn"]["key"]
        headers = {"X-Replyguard-Token": token(address)}
        assert call(address, "POST", "/api/skip", {"key": skipped}, headers=headers)[0] == 200
        _, answer = call(address, "GET", "/api/next?client=a")
        assert answer["turn"]["evidence"]["turnId"] == "t2"
    with serving(ledger, labels) as (address, _):
        _, answer = call(address, "GET", "/api/next?client=a")
        # t0 is labelled; t1 was only skipped, so it comes back after a restart
        assert (answer["turn"]["evidence"]["turnId"], answer["labelled"]) == ("t1", 1)


def test_two_pages_are_shown_different_turns_and_lose_no_label(tmp_path: Path) -> None:
    ledger = write_ledger(
        tmp_path / "l.jsonl", [entry(f"t{i}", "flagged", "FAIL", reply=f"r{i}") for i in range(40)]
    )
    labels = tmp_path / "labels.jsonl"
    with (
        serving(ledger, labels, reviewer="ana") as (one, _),
        serving(ledger, labels, reviewer="bo") as (two, _),
    ):
        seen: dict[str, list[str]] = {"a": [], "b": []}

        def review(address: str, client: str) -> None:
            while True:
                _, answer = call(address, "GET", f"/api/next?client={client}")
                if answer["turn"] is None:
                    return
                seen[client].append(answer["turn"]["key"])
                assert label(address, answer["turn"]["key"], "PASS")[0] == 200

        workers = [
            threading.Thread(target=review, args=(one, "a")),
            threading.Thread(target=review, args=(two, "b")),
        ]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(60)
    records = lines(labels)
    # every label written is on disk, whole; every turn got at least one
    assert len(records) == len(seen["a"]) + len(seen["b"])
    assert {r["id"] for r in records} == {f"t{i}" for i in range(40)}
    assert {r["metadata"]["review"]["reviewer"] for r in records} <= {"ana", "bo"}


def test_two_tabs_of_one_server_are_never_handed_the_same_turn(tmp_path: Path) -> None:
    ledger = write_ledger(
        tmp_path / "l.jsonl", [entry(f"t{i}", "flagged", "FAIL", reply=f"r{i}") for i in range(2)]
    )
    with serving(ledger, tmp_path / "labels.jsonl") as (address, _):
        _, a = call(address, "GET", "/api/next?client=a")
        _, b = call(address, "GET", "/api/next?client=b")
        _, again = call(address, "GET", "/api/next?client=a")  # a reload keeps its turn
        _, c = call(address, "GET", "/api/next?client=c")
    assert a["turn"]["key"] != b["turn"]["key"]
    assert again["turn"]["key"] == a["turn"]["key"]
    assert c["turn"] is None and c["left"] == 2


GOOD = "the page's token"


@pytest.mark.parametrize(
    ("headers", "body", "status", "error"),
    [
        ({}, {"label": "PASS"}, 403, "X-Replyguard-Token"),
        ({"X-Replyguard-Token": "guess"}, {"label": "PASS"}, 403, "X-Replyguard-Token"),
        ({"X-Replyguard-Token": GOOD, "Host": "evil.example"}, {"label": "PASS"}, 403, "Host"),
        (
            {"X-Replyguard-Token": GOOD, "Content-Type": "text/plain"},
            {"label": "PASS"},
            415,
            "application/json",
        ),
        ({"X-Replyguard-Token": GOOD}, {"label": "MAYBE"}, 400, "label: must be PASS or FAIL"),
        (
            {"X-Replyguard-Token": GOOD},
            {"label": "PASS", "category": "refusal"},
            400,
            "category: only given with a FAIL",
        ),
        (
            {"X-Replyguard-Token": GOOD},
            {"label": "FAIL", "category": "rude"},
            400,
            "category: unknown 'rude'",
        ),
        ({"X-Replyguard-Token": GOOD}, {"label": "PASS", "note": 3}, 400, "note: must be a string"),
        (
            {"X-Replyguard-Token": GOOD},
            {"label": "PASS", "key": "nope"},
            400,
            "key: no queued turn 'nope'",
        ),
    ],
)
def test_a_bad_or_foreign_request_writes_nothing_and_says_why(
    tmp_path: Path, headers: dict[str, str], body: dict[str, Any], status: int, error: str
) -> None:
    ledger = write_ledger(tmp_path / "l.jsonl", [entry("t", "flagged", "FAIL", reply="r")])
    labels = tmp_path / "labels.jsonl"
    with serving(ledger, labels) as (address, _):
        _, answer = call(address, "GET", "/api/next?client=a")
        sent = {"key": answer["turn"]["key"], **body}
        real = token(address)
        headers = {k: real if v == GOOD else v for k, v in headers.items()}
        got, said = call(address, "POST", "/api/label", sent, headers=headers)
    assert got == status and error in said["error"]
    assert not labels.exists()


def test_a_foreign_host_cannot_read_the_page_or_the_turns(tmp_path: Path) -> None:
    ledger = write_ledger(tmp_path / "l.jsonl", [entry("t", "flagged", "FAIL", reply="secret")])
    with serving(ledger, tmp_path / "labels.jsonl") as (address, _):
        for path in ("/", "/api/next?client=a"):
            status, said = call(address, "GET", path, headers={"Host": "rebound.example"})
            assert status == 403 and "secret" not in json.dumps(said)


def test_hostile_ledger_text_cannot_break_out_of_the_page_data(tmp_path: Path) -> None:
    ledger = write_ledger(tmp_path / "l.jsonl", [entry("t", "flagged", "FAIL", reply=HOSTILE)])
    with serving(ledger, tmp_path / "labels.jsonl", reviewer=HOSTILE) as (address, _):
        _, page = call(address, "GET", "/")
        _, answer = call(address, "GET", "/api/next?client=a")
    assert "<script>document.title" not in page  # the reviewer's name is escaped
    assert answer["turn"]["reply"] == HOSTILE  # JSON, shown with textContent by the page


def test_a_label_file_that_cannot_be_written_says_so_and_loses_nothing_else(
    tmp_path: Path,
) -> None:
    ledger = write_ledger(tmp_path / "l.jsonl", [entry("t", "flagged", "FAIL", reply="r")])
    with serving(ledger, tmp_path / "no-such-folder" / "labels.jsonl") as (address, _):
        _, answer = call(address, "GET", "/api/next?client=a")
        status, said = label(address, answer["turn"]["key"], "PASS")
        _, again = call(address, "GET", "/api/next?client=a")
    assert status == 500 and "cannot write" in said["error"]
    assert again["turn"]["key"] == answer["turn"]["key"]  # still to label


def test_a_ledger_line_with_odd_types_still_gives_a_label_eval_accepts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    odd = entry("t", "flagged", "FAIL", reply="r", category="x] PASS [y")
    odd["turnId"] = 42
    odd["content"]["userMessage"] = {"not": "text"}
    odd["content"]["attempts"][0]["judgeOutput"] = ["PASS"]
    ledger = write_ledger(tmp_path / "l.jsonl", [odd, {**odd, "content": "garbage"}])
    labels = tmp_path / "labels.jsonl"
    with serving(ledger, labels) as (address, _):
        for _ in range(2):
            _, answer = call(address, "GET", "/api/next?client=a")
            assert label(address, answer["turn"]["key"], "PASS")[0] == 200
    first, second = lines(labels)
    assert first["userMessage"] == NOT_LOGGED and first["reply"] == "r"
    assert first["judgeOutput"] == "FAIL"  # a category that is not a name is not written in
    assert second["reply"] == NOT_LOGGED
    assert main(["eval", "--replay", str(labels), "--out", str(tmp_path / "o")]) == 0
    capsys.readouterr()
