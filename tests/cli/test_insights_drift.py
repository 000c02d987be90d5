"""Drift in ``replyguard insights``: verdicts on byte-identical replies before and after a
change of judge model, rubric or litellm version, with the flip rate's 95 % interval."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from replyguard.cli import main
from replyguard.insights.drift import drift
from replyguard.insights.stats import Entry

ROOT = Path(__file__).resolve().parents[2]


def line(
    ts: str,
    reply: str,
    vote: str | None,
    *,
    model: str = "judge-a",
    rubric: str = "r1",
    litellm: str = "1.110.2",
) -> dict[str, Any]:
    return {
        "ts": ts,
        "status": "passed" if vote != "FAIL" else "flagged",
        "judgeModels": [model],
        "rubric": rubric,
        "litellm": litellm,
        "judged": [
            {
                "attempt": 1,
                "replySha256": hashlib.sha256(reply.encode()).hexdigest(),
                "vote": vote,
                "category": None,
            }
        ],
    }


def entries(*lines: dict[str, Any]) -> list[Entry]:
    return [Entry.model_validate(value) for value in lines]


def test_a_new_judge_model_that_flips_one_of_two_identical_replies() -> None:
    found = drift(
        entries(
            line("2026-01-01T00:00:00Z", "Refunds take 5 days.", "PASS"),
            line("2026-01-01T00:01:00Z", "Yes, we ship to Norway.", "PASS"),
            line("2026-01-01T00:02:00Z", "Refunds take 5 days.", "PASS"),  # noise: none
            line("2026-01-02T00:00:00Z", "Refunds take 5 days.", "PASS", model="judge-b"),
            line("2026-01-02T00:01:00Z", "Yes, we ship to Norway.", "FAIL", model="judge-b"),
            line("2026-01-02T00:02:00Z", "Only after.", "FAIL", model="judge-b"),
        )
    )
    (d,) = found
    assert d.changed == ["judgeModels"]
    assert (d.before.judge_models, d.after.judge_models) == (("judge-a",), ("judge-b",))
    assert d.since == "2026-01-02T00:00:00Z"
    assert (d.compared, d.flipped, d.flip_rate) == (2, 1, 0.5)
    assert (d.low, d.high) == (0.0945, 0.9055)  # Wilson, 1 of 2
    assert (d.same_setup_compared, d.same_setup_flipped) == (1, 0)
    assert d.flips == [f"PASS->FAIL {hashlib.sha256(b'Yes, we ship to Norway.').hexdigest()[:12]}"]


def test_the_last_vote_before_meets_the_first_after() -> None:
    (d,) = drift(
        entries(
            line("2026-01-01T00:00:00Z", "same", "FAIL"),
            line("2026-01-01T00:01:00Z", "same", "PASS"),  # the last before: PASS
            line("2026-01-02T00:00:00Z", "same", "PASS", litellm="1.111.0"),  # first after
            line("2026-01-02T00:01:00Z", "same", "FAIL", litellm="1.111.0"),
        )
    )
    assert d.changed == ["litellm"] and (d.compared, d.flipped) == (1, 0)
    assert (d.same_setup_compared, d.same_setup_flipped) == (1, 1)  # the judge's own noise


def test_a_rubric_change_is_drift_too_and_order_follows_time_not_file() -> None:
    (d,) = drift(
        entries(
            line("2026-01-02T00:00:00Z", "x", "FAIL", rubric="r2"),
            line("2026-01-01T00:00:00Z", "x", "PASS", rubric="r1"),
        )
    )
    assert (
        d.changed == ["rubric"] and d.before.rubric == "r1" and d.flips[0].startswith("PASS->FAIL")
    )


def test_fail_open_attempts_and_unshared_replies_are_not_compared() -> None:
    assert (
        drift(
            entries(
                line("2026-01-01T00:00:00Z", "a", None),
                line("2026-01-01T00:00:01Z", "b", "PASS"),
                line("2026-01-02T00:00:00Z", "a", "FAIL", model="judge-b"),
                line("2026-01-02T00:00:01Z", "c", "FAIL", model="judge-b"),
            )
        )
        == []
    )
    assert drift(entries()) == []


def test_ledger_lines_from_before_the_hashes_were_recorded_are_read_without_drift(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = {"status": "passed", "judgeModels": ["judge-a"], "ts": "2026-01-01T00:00:00Z"}
    ledger = tmp_path / "l.jsonl"
    ledger.write_text(json.dumps(old) + "\n", encoding="utf-8")
    assert main(["insights", str(ledger)]) == 0
    out = capsys.readouterr().out
    assert "DRIFT (verdicts on byte-identical replies" in out.split("SUGGESTIONS")[0]


def test_the_sample_ledger_shows_the_judge_change_in_text_and_json(
    capsys: pytest.CaptureFixture[str],
) -> None:
    sample = str(ROOT / "examples" / "review" / "ledger.jsonl")
    assert main(["insights", sample]) == 0
    text = capsys.readouterr().out
    assert "judgeModels judge-a -> judgeModels judge-b" in text
    assert "2 of 4 identical replies flipped (50.0%, 95 % interval 15.0% to 85.0%)" in text
    assert main(["insights", sample, "--json"]) == 0
    (d,) = json.loads(capsys.readouterr().out)["drift"]
    assert (d["compared"], d["flipped"], d["sameSetupCompared"], d["sameSetupFlipped"]) == (
        4,
        2,
        8,
        0,
    )
