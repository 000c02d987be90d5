"""The trust gate of ``replyguard eval``: TRUSTED / UNTRUSTED / INCONCLUSIVE against the
operator's limits on the 95 % intervals, the labels still needed, and the exit codes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_eval_cli import record, run_eval, write_dataset

from replyguard.evaluation.gate import (
    INCONCLUSIVE,
    TRUSTED,
    UNTRUSTED,
    Threshold,
    labels_to_decide,
    trust,
    wilson_bounds,
)
from replyguard.evaluation.stats import wilson


def report_of(pp: int, pf: int, fp: int, ff: int) -> dict[str, Any]:
    return {
        "confusion": {
            "labelPassJudgedPass": pp,
            "labelPassJudgedFail": pf,
            "labelFailJudgedPass": fp,
            "labelFailJudgedFail": ff,
        }
    }


def dataset(tmp_path: Path, pp: int, pf: int, fp: int, ff: int) -> str:
    records = (
        [record("PASS", "PASS")] * pp
        + [record("PASS", "FAIL [incomplete]: more")] * pf
        + [record("FAIL", "PASS")] * fp
        + [record("FAIL", "FAIL [incomplete]: more")] * ff
    )
    return write_dataset(tmp_path / "labels.jsonl", records)


def test_the_wilson_bounds_at_a_rate_match_the_report_intervals() -> None:
    exact = wilson(8, 10)
    assert exact is not None
    assert wilson_bounds(0.8, 10) == pytest.approx((exact.low, exact.high))


def test_labels_to_decide_is_the_least_count_that_clears_the_limit() -> None:
    # 1 false FAIL in 40 labelled PASS: 2.5 %, upper bound 12.9 %: above a 5 % limit
    more = labels_to_decide(1 / 40, 40, 0.05)
    assert more is not None and more > 0
    assert wilson_bounds(1 / 40, 40 + more)[1] <= 0.05
    assert wilson_bounds(1 / 40, 40 + more - 1)[1] > 0.05
    # a rate above the limit is decided when the lower bound rises past it
    more = labels_to_decide(0.1, 20, 0.05)
    assert more is not None and wilson_bounds(0.1, 20 + more)[0] > 0.05
    assert labels_to_decide(0.05, 100, 0.05) is None  # on the limit: never decided
    assert labels_to_decide(0.0, 100, 0.05) == 0  # already clear


def test_no_limit_no_gate() -> None:
    assert trust(report_of(10, 0, 0, 10), []) is None


def test_every_interval_clear_of_its_limit_is_trusted() -> None:
    gate = trust(
        report_of(200, 0, 2, 98),
        [Threshold("falseFailRate", 0.05), Threshold("accuracy", 0.85)],
    )
    assert gate is not None and gate["verdict"] == TRUSTED and gate["exitCode"] == 0
    assert [t["status"] for t in gate["thresholds"]] == ["met", "met"]
    assert gate["moreLabels"] is None


def test_an_interval_wholly_past_a_limit_is_untrusted_whatever_else() -> None:
    # 30 false FAILs in 100 labelled PASS: lower bound 21.9 % is above 5 %
    gate = trust(
        report_of(70, 30, 0, 5),
        [Threshold("falseFailRate", 0.05), Threshold("falsePassRate", 0.5)],
    )
    assert gate is not None and gate["verdict"] == UNTRUSTED and gate["exitCode"] == 1
    assert gate["thresholds"][0]["status"] == "breached"


def test_a_straddling_interval_is_inconclusive_with_the_labels_that_would_decide_it() -> None:
    # 20 labelled PASS, none judged FAIL: 0 %, but the upper bound is 16.1 %
    gate = trust(report_of(20, 0, 0, 20), [Threshold("falseFailRate", 0.05)])
    assert gate is not None and gate["verdict"] == INCONCLUSIVE and gate["exitCode"] == 3
    (line,) = gate["thresholds"]
    # at 0 % the upper bound is z²/(n+z²): at most 5 % from n = 73 labelled PASS
    assert line["moreOfKind"] == 73 - 20
    assert line["moreLabels"] == 2 * (73 - 20)  # half the labels are PASS labels
    assert gate["moreLabels"] == line["moreLabels"]
    assert wilson_bounds(0.0, 73)[1] <= 0.05 < wilson_bounds(0.0, 72)[1]


def test_a_limit_with_no_label_of_its_kind_is_undecided() -> None:
    gate = trust(report_of(30, 0, 0, 0), [Threshold("falsePassRate", 0.1)])
    assert gate is not None and gate["verdict"] == INCONCLUSIVE
    assert gate["thresholds"][0]["low"] is None and gate["moreLabels"] is None


def test_a_bad_limit_names_itself() -> None:
    with pytest.raises(ValueError, match="between 0 and 1"):
        Threshold("accuracy", 1.5)
    with pytest.raises(ValueError, match="no limit can be set on 'kappa'"):
        Threshold("kappa", 0.5)


@pytest.mark.parametrize(
    ("counts", "flags", "code", "verdict"),
    [
        ((200, 0, 0, 60), ["--max-false-fail", "5%", "--min-agreement", "0.85"], 0, TRUSTED),
        ((70, 30, 0, 20), ["--max-false-fail", "0.05"], 1, UNTRUSTED),
        ((20, 0, 0, 20), ["--max-false-fail", "5%"], 3, INCONCLUSIVE),
    ],
)
def test_the_command_exits_with_the_gate_s_answer_and_writes_it_to_the_reports(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    counts: tuple[int, int, int, int],
    flags: list[str],
    code: int,
    verdict: str,
) -> None:
    out = tmp_path / "out"
    args = ["--replay", dataset(tmp_path, *counts), "--out", str(out), *flags]
    got, printed, _, report = run_eval(capsys, *args)
    assert got == code and report is not None
    assert report["trust"]["verdict"] == verdict
    assert f"trust gate: {verdict}" in printed
    assert f"trust gate: {verdict}" in (out / "report.html").read_text()


def test_without_limits_the_report_has_no_gate_and_exits_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["--replay", dataset(tmp_path, 1, 5, 5, 1), "--out", str(tmp_path / "o")]
    code, printed, _, report = run_eval(capsys, *args)
    assert code == 0 and report is not None and "trust" not in report
    assert "trust gate" not in printed


@pytest.mark.parametrize("value", ["105%", "-0.1", "lots", "1.01"])
def test_a_limit_that_is_not_a_share_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        run_eval(capsys, "--replay", dataset(tmp_path, 1, 0, 0, 1), "--out", str(tmp_path),
                 "--min-agreement", value)  # fmt: skip
    assert exited.value.code == 2
    assert "must be a share from 0 to 1" in capsys.readouterr().err


def test_inconclusive_prints_the_labels_still_needed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["--replay", dataset(tmp_path, 20, 0, 0, 20), "--out", str(tmp_path / "o")]
    _, printed, _, report = run_eval(capsys, *args, "--max-false-fail", "5%")
    assert report is not None
    assert "about 106 more labels would decide it" in printed
    assert json.loads((tmp_path / "o" / "report.json").read_text())["trust"]["moreLabels"] == 106
