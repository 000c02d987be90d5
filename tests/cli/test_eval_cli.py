"""``replyguard eval``: replayed and live judging, report.json, report.html, progress, errors."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from test_cli_verify import BrokenPipe, FailingStdout

from conftest import API_KEY
from replyguard._cli.streams import PIPE_CLOSED
from replyguard.cli import main
from replyguard.evaluation.command import progress_printer
from support.provider_server import ANTHROPIC, ProviderServer, Step

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "examples" / "eval" / "sample.jsonl"


def record(label: str | None, judge_output: str | None, **keys: Any) -> dict[str, Any]:
    data: dict[str, Any] = {"userMessage": "Write the summary.", "reply": "Here it is.", **keys}
    if label is not None:
        data["label"] = label
    if judge_output is not None:
        data["judgeOutput"] = judge_output
    return data


def write_dataset(path: Path, records: list[dict[str, Any]]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return str(path)


def config_file(tmp_path: Path, data: dict[str, Any]) -> str:
    path = tmp_path / "verifier.json"
    path.write_text(json.dumps(data))
    return str(path)


def live_config(tmp_path: Path, provider: ProviderServer) -> str:
    return config_file(
        tmp_path, {"model": ANTHROPIC.judge_model, "apiKey": API_KEY, "apiBase": provider.url}
    )


def run_eval(
    capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[int, str, str, dict[str, Any] | None]:
    code = main(["eval", *args])
    out, err = capsys.readouterr()
    report_path = Path(args[args.index("--out") + 1]) / "report.json"
    report = json.loads(report_path.read_text()) if report_path.exists() else None
    return code, out, err, report


# The hand-computed fixture: ten labelled records, (label, judged):
#   1-4  PASS / PASS            5  PASS / FAIL [tone_mismatch]
#   6    FAIL incomplete / FAIL [incomplete]      7  FAIL incomplete / FAIL [goal_missed]
#   8    FAIL rule_violation / FAIL [rule_violation]
#   9    FAIL refusal / PASS    10 FAIL incomplete / an unreadable text (a fail-open PASS)
# Confusion: PP 4, PF 1, FP 2, FF 3 -> accuracy 7/10 = 0.7; pe = 0.5*0.6 + 0.5*0.4 = 0.5;
# kappa = (0.7 - 0.5) / 0.5 = 0.4; falseFailRate 1/5 = 0.2; falsePassRate 2/5 = 0.4.
TEN = [
    *[record("PASS", "PASS") for _ in range(4)],
    record("PASS", "FAIL [tone_mismatch]: be kinder"),
    record("FAIL", "FAIL [incomplete]: finish it", labelCategory="incomplete"),
    record("FAIL", "FAIL [goal_missed]: wrong topic", labelCategory="incomplete"),
    record("FAIL", "FAIL [rule_violation]: no emoji", labelCategory="rule_violation"),
    record("FAIL", "Looks fine.\nPASS", labelCategory="refusal"),
    record("FAIL", "I cannot tell.", labelCategory="incomplete"),
]


def test_replayed_figures_match_the_hand_computation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dataset = write_dataset(tmp_path / "ten.jsonl", TEN)
    code, out, _, report = run_eval(capsys, dataset, "--replay", "--out", str(tmp_path / "r"))
    assert code == 0 and report is not None
    assert {k: report[k] for k in ("records", "labelled", "accuracy", "kappa")} == {
        "records": 10,
        "labelled": 10,
        "accuracy": 0.7,
        "kappa": 0.4,
    }
    assert (report["falseFailRate"], report["falsePassRate"], report["unreadable"]) == (
        0.2,
        0.4,
        1,
    )
    assert report["confusion"] == {
        "labelPassJudgedPass": 4,
        "labelPassJudgedFail": 1,
        "labelFailJudgedPass": 2,
        "labelFailJudgedFail": 3,
    }
    assert report["byCategory"] == {
        "goal_missed": {"judged": 1, "labelled": 0, "agreed": 0},
        "incomplete": {"judged": 1, "labelled": 3, "agreed": 1},
        "refusal": {"judged": 0, "labelled": 1, "agreed": 0},
        "rule_violation": {"judged": 1, "labelled": 1, "agreed": 1},
        "tone_mismatch": {"judged": 1, "labelled": 0, "agreed": 0},
    }
    assert report["costUsd"] == 0.0
    assert report["latencyMs"]["p50"] <= report["latencyMs"]["p95"]
    assert re.search(r"\naccuracy +0\.700 +0\.397 to 0\.892 +10\n", out)
    assert re.search(r"\nkappa +0\.400 +-?\d\.\d{3} to \d\.\d{3} +10\n", out)


# The Wilson intervals of the ten, at z = 1.959964 (centre (p + z^2/2n) / (1 + z^2/n), half
# z sqrt(p(1 - p)/n + z^2/4n^2) / (1 + z^2/n)): accuracy 7/10 -> [0.3968, 0.8922], false FAIL
# 1/5 -> [0.0362, 0.6245], false PASS 2/5 -> [0.1176, 0.7693]. For +-5 points at the rates
# observed: 320 labels at 0.7 (310 more), 245 labelled PASS at 0.2, 366 labelled FAIL at 0.4.
def test_every_figure_carries_its_interval_and_the_labels_behind_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dataset = write_dataset(tmp_path / "ten.jsonl", TEN)
    _, out, _, report = run_eval(capsys, dataset, "--replay", "--out", str(tmp_path / "r"))
    assert report is not None
    intervals = report["intervals"]
    assert intervals["accuracy"] == {"value": 0.7, "low": 0.3968, "high": 0.8922, "n": 10}
    assert intervals["falseFailRate"] == {"value": 0.2, "low": 0.0362, "high": 0.6245, "n": 5}
    assert intervals["falsePassRate"] == {"value": 0.4, "low": 0.1176, "high": 0.7693, "n": 5}
    kappa = intervals["kappa"]
    assert (kappa["value"], kappa["n"]) == (0.4, 10)
    assert -1 <= kappa["low"] < 0.4 < kappa["high"] <= 1
    assert intervals["level"] == 0.95 and intervals["method"]["rates"] == "wilson"
    assert report["labelsFor5Points"] == {
        "accuracy": 310,
        "falseFailRate": 240,
        "falsePassRate": 361,
    }
    # per category, over the labelled records: incomplete was labelled 3 times, failed as such
    # once (recall 1/3); the judge failed 1 record as incomplete, rightly (precision 1/1)
    incomplete = intervals["byCategory"]["incomplete"]
    assert (incomplete["recall"]["value"], incomplete["recall"]["n"]) == (0.3333, 3)
    assert (incomplete["precision"]["value"], incomplete["precision"]["n"]) == (1.0, 1)
    assert "agreement needs 310 more labelled records (320 in all)" in out
    assert re.search(r"\nincomplete +1 +3 +1  1/3 0\.061 to 0\.792 +1/1 0\.20\d to 1\.000\n", out)
    # the bootstrap's seed is fixed: the same labels give the same kappa interval every time
    _, _, _, again = run_eval(capsys, dataset, "--replay", "--out", str(tmp_path / "again"))
    assert again is not None and again["intervals"] == intervals


def test_a_replayed_report_says_what_produced_the_verdicts_and_that_the_sample_is_synthetic(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, out, _, report = run_eval(capsys, str(SAMPLE), "--replay", "--out", str(tmp_path))
    assert report is not None
    # 26 records, 3 skipped by the pre-checks and carrying no judge text: 23 recorded outputs
    assert report["verdictSource"] == {
        "kind": "recorded",
        "modelCalled": None,
        "recordedBy": {},
        "recordedByUnknown": 23,
    }
    assert report["syntheticRecords"] == 26
    lines = out.splitlines()
    assert lines[2] == (
        "Verdicts: recorded judge outputs from the dataset (judgeOutput), parsed here; no model "
        "was called; the dataset does not say which model wrote them."
    )
    assert lines[3].startswith("SYNTHETIC DATA: all 26 records are marked synthetic")
    assert "anthropic/claude-sonnet-4-5" not in out  # the configured judge judged nothing


def test_a_replayed_report_names_the_models_that_wrote_the_judge_outputs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    records = [
        record("PASS", "PASS", judgeOutputModel="openai/gpt-4o"),
        record("FAIL", "FAIL: no", judgeOutputModel="openai/gpt-4o", synthetic=True),
        record("PASS", "PASS"),
    ]
    dataset = write_dataset(tmp_path / "d.jsonl", records)
    _, out, _, report = run_eval(capsys, dataset, "--replay", "--out", str(tmp_path / "r"))
    assert report is not None
    source = report["verdictSource"]
    assert (source["recordedBy"], source["recordedByUnknown"]) == ({"openai/gpt-4o": 2}, 1)
    assert report["syntheticRecords"] == 1
    assert "written by openai/gpt-4o (2); 1 record names no model." in out
    assert "SYNTHETIC DATA: 1 of 3 records is marked synthetic" in out
    page = (tmp_path / "r" / "report.html").read_text(encoding="utf-8")
    assert "openai/gpt-4o (2)" in page and "1 of 3 records is marked synthetic" in page


def test_synthetic_takes_a_boolean_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dataset = write_dataset(tmp_path / "d.jsonl", [record("PASS", "PASS", synthetic="yes")])
    code, _, err, _ = run_eval(capsys, dataset, "--replay", "--out", str(tmp_path / "r"))
    assert code == 2 and f"{dataset}:1: invalid record: synthetic:" in err


def test_a_skipped_record_counts_as_a_pass_and_has_no_latency(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    skipped = record("FAIL", None, reply={"text": "", "meta": {"stopReason": "tool_calls"}})
    dataset = write_dataset(tmp_path / "d.jsonl", [skipped])
    _, _, _, report = run_eval(capsys, dataset, "--replay", "--out", str(tmp_path / "r"))
    assert report is not None
    assert report["results"][0]["status"] == "skipped"
    assert report["results"][0]["reason"] == "tool_calls"
    assert report["confusion"]["labelFailJudgedPass"] == 1
    assert report["latencyMs"] == {"p50": None, "p95": None}


def test_an_unlabelled_dataset_reports_null_figures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dataset = write_dataset(tmp_path / "d.jsonl", [record(None, "FAIL [refusal]: answer it")])
    code, out, _, report = run_eval(capsys, dataset, "--replay", "--out", str(tmp_path / "r"))
    assert code == 0 and report is not None
    assert [report[k] for k in ("labelled", "accuracy", "kappa", "falseFailRate")] == [
        0,
        None,
        None,
        None,
    ]
    assert report["byCategory"] == {"refusal": {"judged": 1, "labelled": 0, "agreed": 0}}
    assert report["intervals"]["accuracy"] == {"value": None, "low": None, "high": None, "n": 0}
    assert report["labelsFor5Points"] == {
        "accuracy": None,
        "falseFailRate": None,
        "falsePassRate": None,
    }
    assert re.search(r"\naccuracy +- +- +0\n", out)
    assert re.search(r"\nkappa +- +- +0\n", out)


def test_shadow_mode_flags_a_fail_and_still_counts_it_as_judged_fail(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = config_file(tmp_path, {"mode": "shadow"})
    dataset = write_dataset(tmp_path / "d.jsonl", [record("FAIL", "FAIL: no")])
    args = [dataset, "--replay", "--config", config, "--out", str(tmp_path / "r")]
    _, _, _, report = run_eval(capsys, *args)
    assert report is not None
    assert (report["statuses"], report["mode"]) == ({"flagged": 1}, "shadow")
    assert report["confusion"]["labelFailJudgedFail"] == 1


def test_the_html_report_is_self_contained_and_escapes_dataset_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hostile = record(
        "PASS",
        "FAIL [goal_missed]: <img src=x onerror=alert(2)>",
        userMessage="<script>alert(1)</script>",
        reply='<a href="https://evil.example">x</a>',
    )
    dataset = write_dataset(tmp_path / "d.jsonl", [hostile, *TEN])
    run_eval(capsys, dataset, "--replay", "--out", str(tmp_path / "r"))
    page = (tmp_path / "r" / "report.html").read_text(encoding="utf-8")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&lt;img src=x onerror=alert(2)&gt;" in page
    assert "<script" not in page and "<img" not in page and "<link" not in page
    assert "https://evil.example" not in page.replace("&quot;https://evil.example&quot;", "")
    assert page.count("<svg") == 2  # confusion matrix, categories; no histogram under replay


def test_the_report_opens_with_a_headline_and_lists_disagreements_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _, report = run_eval(capsys, str(SAMPLE), "--replay", "--out", str(tmp_path))
    assert code == 0 and report is not None
    sentence = (
        "the judge agrees with the labels on 22 of 24 (91.7 %, 95 % interval 74.2 to 97.7 %; "
        "kappa 0.83, 95 % interval 0.57 to 1.00); 1 false FAIL, 1 false PASS; "
        "1 unreadable verdict counted as PASS"
    )
    assert report["headline"] == sentence
    assert out.splitlines()[1] == sentence[0].upper() + sentence[1:] + "."
    assert (report["replay"], report["judgeModel"], report["dataset"]) == (
        True,
        "anthropic/claude-sonnet-4-5",
        str(SAMPLE),
    )
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", report["createdAt"])
    disagreeing = [row["id"] for row in report["results"] if row["agrees"] is False]
    assert disagreeing == ["coding-refactor-disagreement", "refusal-dosage-disagreement"]
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert "The judge agrees with the labels on 22 of 24 (91.7 %" in page
    assert (
        "recorded judge outputs from the dataset (judgeOutput), parsed here; no model was " in page
    )
    assert "anthropic/claude-sonnet-4-5" not in page  # the configured judge judged nothing
    assert "<b>Synthetic data:</b> all 26 records are marked synthetic" in page
    assert 'interval <span class="nobreak">74.2 to 97.7 %</span>, 24 labels' in page  # a card
    assert "agreement needs 98 more labelled records (122 in all)" in page
    assert "<h2>By category</h2>" in page and "3 of 4: 75.0 %" in page  # goal_missed's recall
    disagreements, records = page.index("Disagreements (2)"), page.index("Records (26)")
    assert disagreements < page.index("Show the two functions calling validate_amount()") < records
    first_row = page.index("<tbody><tr", records)
    assert page.index("coding-refactor-disagreement", first_row) < page.index(
        "support-refund-window", first_row
    )
    assert "failed open" in page and "failed_open" not in page.replace('"failed_open"', "")


def test_a_long_text_is_clipped_in_the_table_with_the_whole_text_behind_a_toggle(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dataset = write_dataset(tmp_path / "d.jsonl", [record("PASS", "PASS", reply="x" * 1000)])
    run_eval(capsys, dataset, "--replay", "--out", str(tmp_path / "r"))
    page = (tmp_path / "r" / "report.html").read_text(encoding="utf-8")
    assert "show all 1000 characters" in page
    assert ">" + "x" * 160 + "…<" in page  # the table shows the first 160 characters
    assert ">" + "x" * 1000 + "<" in page  # and holds the whole text behind the toggle


def test_an_unlabelled_dataset_says_agreement_is_not_measured(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    records = [record(None, "FAIL [refusal]: answer it"), record(None, "PASS")]
    dataset = write_dataset(tmp_path / "d.jsonl", records)
    _, _, _, report = run_eval(capsys, dataset, "--replay", "--out", str(tmp_path / "r"))
    assert report is not None
    assert report["headline"] == (
        "no record is labelled, so agreement is not measured; the judge failed 1 of 2 records"
    )


def test_every_bad_line_is_reported_at_once_up_to_a_cap(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = [record("PASS", None), record("maybe", "PASS"), record("PASS", "PASS", runKind="x")]
    records = [record("PASS", "PASS"), *bad, *[record("PASS", None)] * 30]
    dataset = write_dataset(tmp_path / "d.jsonl", records)
    code, out, err, report = run_eval(capsys, dataset, "--replay", "--out", str(tmp_path / "r"))
    assert (code, out, report) == (2, "", None)
    lines = err.splitlines()
    assert lines[0] == f"replyguard eval: {dataset}: 33 invalid records:"
    assert lines[1:4] == [
        f"  {dataset}:2: invalid record: judgeOutput: required under --replay",
        f"  {dataset}:3: invalid record: label: Input should be 'PASS' or 'FAIL'",
        f"  {dataset}:4: invalid record: runKind: run kind 'x' is not in the config's runKinds "
        "(known: none)",
    ]
    assert len(lines) == 1 + 20 + 1
    assert lines[-1] == "  ... and 13 more invalid lines"


def test_replay_without_a_judge_output_names_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dataset = write_dataset(tmp_path / "d.jsonl", [record("PASS", "PASS"), record("PASS", None)])
    code, out, err, report = run_eval(capsys, dataset, "--replay", "--out", str(tmp_path / "r"))
    assert (code, out, report) == (2, "", None)
    assert f"{dataset}:2: invalid record: judgeOutput: required under --replay" in err


def test_a_bad_config_is_exit_two(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = config_file(tmp_path, {"maxAttempts": 0})
    dataset = write_dataset(tmp_path / "d.jsonl", [record("PASS", "PASS")])
    args = [dataset, "--replay", "--config", config, "--out", str(tmp_path / "r")]
    code, _, err, _ = run_eval(capsys, *args)
    assert code == 2
    assert "maxAttempts" in err


def test_a_sub_second_run_prints_one_progress_line_with_its_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dataset = write_dataset(tmp_path / "d.jsonl", TEN)
    _, _, err, _ = run_eval(capsys, dataset, "--replay", "--out", str(tmp_path / "r"))
    (line,) = err.splitlines()
    assert re.fullmatch(r"replyguard eval: 10/10 records judged in \d+\.\d s", line)


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


class Clock:
    """A clock that moves on by ``step`` seconds at each reading after the first (the printer
    reads it once when made, then once per record)."""

    def __init__(self, step: float) -> None:
        self.now, self.step, self.read = 0.0, step, False

    def __call__(self) -> float:
        if self.read:
            self.now += self.step
        self.read = True
        return self.now


def test_progress_is_a_bar_redrawn_in_place_on_a_terminal_with_elapsed_and_eta() -> None:
    stream = Terminal()
    show = progress_printer(stream, clock=Clock(2.0))
    for done in range(1, 4):
        show(done, 3)
    lines = [line.rstrip() for line in stream.getvalue().split("\r")[1:]]
    assert lines == [
        "[" + "#" * 10 + "-" * 20 + "] 1/3 2.0 s elapsed, about 4.0 s left",
        "[" + "#" * 20 + "-" * 10 + "] 2/3 4.0 s elapsed, about 2.0 s left",
        "[" + "#" * 30 + "] 3/3 in 6.0 s",
    ]
    assert stream.getvalue().endswith("\n")


def test_live_eval_calls_the_configured_judge_with_bounded_concurrency(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], provider: ProviderServer
) -> None:
    provider.respond_with(lambda seen: Step(text="FAIL [incomplete]: add the dates", delay=0.05))
    config = live_config(tmp_path, provider)
    records = [record("FAIL", None, labelCategory="incomplete") for _ in range(3)]
    records.append(record("PASS", None))
    dataset = write_dataset(tmp_path / "d.jsonl", records)
    args = [dataset, "--config", config, "--concurrency", "2", "--out", str(tmp_path / "r")]
    code, out, _, report = run_eval(capsys, *args)
    assert code == 0 and report is not None
    assert len(provider.seen) == 4
    assert provider.connections <= 2
    assert report["confusion"] == {
        "labelPassJudgedPass": 0,
        "labelPassJudgedFail": 1,
        "labelFailJudgedPass": 0,
        "labelFailJudgedFail": 3,
    }
    assert report["costUsd"] > 0  # priced by litellm's bundled map
    assert "judged live" in out
    assert report["verdictSource"] == {
        "kind": "live",
        "modelCalled": ANTHROPIC.judge_model,
        "recordedBy": {},
        "recordedByUnknown": 0,
    }
    assert report["syntheticRecords"] == 0 and "SYNTHETIC" not in out


def test_a_run_kinds_mode_applies_to_its_records_and_shows_in_each_row(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = config_file(tmp_path, {"runKinds": {"canary": {"mode": "shadow"}, "chat": {}}})
    records = [
        record("FAIL", "FAIL [incomplete]: no", runKind="canary"),
        record("FAIL", "FAIL [incomplete]: no", runKind="chat"),
        record("FAIL", "FAIL [incomplete]: no"),
    ]
    dataset = write_dataset(tmp_path / "d.jsonl", records)
    args = [dataset, "--replay", "--config", config, "--out", str(tmp_path / "r")]
    code, _, _, report = run_eval(capsys, *args)
    assert code == 0 and report is not None
    assert [(r["status"], r["mode"]) for r in report["results"]] == [
        ("flagged", "shadow"),
        ("failed", "enforce"),
        ("failed", "enforce"),
    ]
    assert (report["mode"], report["confusion"]["labelFailJudgedFail"]) == ("enforce", 3)


def test_an_unknown_run_kind_names_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    records = [record("PASS", "PASS"), record("PASS", "PASS", runKind="nightly")]
    dataset = write_dataset(tmp_path / "d.jsonl", records)
    code, _, err, report = run_eval(capsys, dataset, "--replay", "--out", str(tmp_path / "r"))
    assert (code, report) == (2, None)
    assert f"{dataset}:2: invalid record: runKind: run kind 'nightly' is not in the config" in err


@pytest.mark.parametrize("argument", [[], ["-"]])
def test_the_dataset_is_read_from_stdin_without_an_argument_or_with_a_dash(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    argument: list[str],
) -> None:
    lines = "".join(json.dumps(r) + "\n" for r in TEN)
    monkeypatch.setattr(sys, "stdin", io.StringIO(lines))
    code, _, _, report = run_eval(capsys, *argument, "--replay", "--out", str(tmp_path / "r"))
    assert code == 0 and report is not None
    assert (report["dataset"], report["records"], report["accuracy"]) == ("<stdin>", 10, 0.7)
    monkeypatch.setattr(sys, "stdin", io.StringIO(lines + '{"reply": "x"}\n'))
    code, _, err, _ = run_eval(capsys, *argument, "--replay", "--out", str(tmp_path / "s"))
    assert code == 2
    assert "<stdin>:11: invalid record: userMessage: required key missing" in err


@pytest.mark.parametrize(
    ("total", "shown"),
    [
        (26, [3, 6, 8, 11, 13, 16, 19, 21, 24, 26]),
        (3, [1, 2, 3]),
        (1000, list(range(100, 1001, 100))),
    ],
)
def test_plain_progress_prints_a_line_at_each_tenth_and_the_last(
    total: int, shown: list[int]
) -> None:
    stream = io.StringIO()
    show = progress_printer(stream, clock=Clock(1.0))  # one second a record
    for done in range(1, total + 1):
        show(done, total)
    assert [line.split(",")[0].split(" in ")[0] for line in stream.getvalue().splitlines()] == [
        f"replyguard eval: {n}/{total} records judged" for n in shown
    ]


def test_plain_progress_lines_give_the_time_elapsed_and_left() -> None:
    stream = io.StringIO()
    show = progress_printer(stream, clock=Clock(3.0), interval=1.0)
    for done in range(1, 3):
        show(done, 2)
    assert stream.getvalue().splitlines() == [
        "replyguard eval: 1/2 records judged, 3.0 s elapsed, about 3.0 s left",
        "replyguard eval: 2/2 records judged in 6.0 s",
    ]


def test_plain_progress_prints_at_most_a_line_per_interval() -> None:
    stream = io.StringIO()
    show = progress_printer(stream, clock=Clock(0.01), interval=1.0)
    for done in range(1, 11):
        show(done, 10)
    assert len(stream.getvalue().splitlines()) == 1


@pytest.mark.slow  # a fresh interpreter importing litellm: `.ci/run` runs it in its slow step
def test_live_latency_leaves_out_the_cold_start(tmp_path: Path, provider: ProviderServer) -> None:
    # litellm's first import takes seconds; loaded before the first record, it is not counted.
    provider.respond_with(lambda seen: Step(text="PASS"))
    config = live_config(tmp_path, provider)
    dataset = write_dataset(tmp_path / "d.jsonl", [record("PASS", None) for _ in range(4)])
    command = Path(sys.executable).parent / "replyguard"
    args = [dataset, "--config", config, "--concurrency", "1", "--out", str(tmp_path / "r")]
    done = subprocess.run(
        [str(command), "eval", *args], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    first, *others = [row["latencyMs"] for row in report["results"]]
    # The baseline, measured beside it under the same load: litellm's import in a fresh
    # interpreter (1.7-4 s). Counted in the first record, it would make up all of it; left
    # out, the first record pays a first request's set-up only (about a quarter of it here).
    importing = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import litellm"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
    )
    import_ms = _import_ms(importing.stderr, "litellm")
    print(f"first {first:.0f} ms, others at most {max(others):.0f} ms, import {import_ms:.0f} ms")
    assert first < 0.6 * import_ms + 3 * max(others)


def _import_ms(importtime: str, module: str) -> float:
    """The cumulative time of ``module``'s import, from ``python -X importtime``'s report."""
    for line in importtime.splitlines():
        parts = [part.strip() for part in line.removeprefix("import time:").split("|")]
        if len(parts) == 3 and parts[2] == module:
            return int(parts[1]) / 1000
    raise AssertionError(f"{module} not in the import-time report")


def test_an_internal_error_exits_two_never_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    dataset = write_dataset(tmp_path / "data.jsonl", TEN)
    monkeypatch.setattr(sys, "stdout", FailingStdout())
    code = main(["eval", dataset, "--replay", "--out", str(tmp_path / "out")])
    assert code == 2
    assert "replyguard eval: internal error: OSError" in capsys.readouterr().err
    monkeypatch.setattr(sys, "stdout", BrokenPipe())  # a reader that stopped: not an error
    code = main(["eval", dataset, "--replay", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == PIPE_CLOSED and "internal error" not in err and "Traceback" not in err


def test_a_live_run_on_synthetic_records_says_what_it_measures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], provider: ProviderServer
) -> None:
    provider.respond_with(lambda seen: Step(text="PASS"))
    dataset = write_dataset(tmp_path / "d.jsonl", [record("PASS", None, synthetic=True)])
    args = [dataset, "--config", live_config(tmp_path, provider), "--out", str(tmp_path / "r")]
    _, out, _, report = run_eval(capsys, *args)
    assert report is not None and report["syntheticRecords"] == 1
    assert (
        "SYNTHETIC DATA: the one record is marked synthetic (written, not recorded from real "
        "conversations): the figures measure the judge on these examples, not on real traffic."
    ) in out
