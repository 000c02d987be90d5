"""``replyguard eval --judge-answer``: live judging in either answer order, or both side by side.

The loopback provider answers by the order the request asks for (a verdict-first request is
streamed), so the two orders get different verdicts and the report shows each one's agreement.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import API_KEY
from replyguard.cli import main
from support.provider_server import ANTHROPIC, ProviderServer, Seen, Step

PASSING = json.dumps({"reasoning": "Fine.", "verdict": "PASS", "category": None, "feedback": ""})
FAILING = json.dumps({"verdict": "FAIL", "category": "incomplete", "feedback": "Add dates."})


def by_order(seen: Seen) -> Step:
    """Verdict-first requests fail every reply, reasoning-first ones pass it."""
    asked_first = "verdict first" in json.dumps(seen.body)
    return Step(text=FAILING) if asked_first else Step(text=PASSING)


def run_eval(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], provider: ProviderServer, *extra: str
) -> tuple[int, str, str, dict[str, Any] | None]:
    config = tmp_path / "verifier.json"
    config.write_text(
        json.dumps({"model": ANTHROPIC.judge_model, "apiKey": API_KEY, "apiBase": provider.url})
    )
    rows = [{"userMessage": "Write it.", "reply": "Done.", "label": label} for label in "PFF"]
    for row in rows:
        row["label"] = "PASS" if row["label"] == "P" else "FAIL"
    dataset = tmp_path / "d.jsonl"
    dataset.write_text("".join(json.dumps(row) + "\n" for row in rows))
    out = tmp_path / "r"
    code = main(["eval", str(dataset), "--config", str(config), "--out", str(out), *extra])
    printed, err = capsys.readouterr()
    path = out / "report.json"
    return code, printed, err, json.loads(path.read_text()) if path.exists() else None


def test_both_orders_are_judged_and_each_ones_agreement_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], provider: ProviderServer
) -> None:
    provider.respond_with(by_order)
    code, out, _, report = run_eval(tmp_path, capsys, provider, "--judge-answer", "both")
    assert code == 0 and report is not None
    assert len(provider.seen) == 6  # every record, once per order
    assert sum(seen.body.get("stream") is True for seen in provider.seen) == 3
    orders = report["byJudgeAnswer"]
    assert orders["reasoning_first"]["accuracy"] == pytest.approx(1 / 3, abs=1e-3)
    assert orders["verdict_first"]["accuracy"] == pytest.approx(2 / 3, abs=1e-3)
    assert report["accuracy"] == orders["reasoning_first"]["accuracy"]  # the config's order
    assert "judgeAnswer verdict_first: labelled 3, accuracy 0.667" in out


def test_one_order_overrides_the_configs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], provider: ProviderServer
) -> None:
    provider.respond_with(by_order)
    code, _, _, report = run_eval(tmp_path, capsys, provider, "--judge-answer", "verdict_first")
    assert code == 0 and report is not None
    assert all(seen.body.get("stream") is True for seen in provider.seen)
    assert report["accuracy"] == pytest.approx(2 / 3, abs=1e-3)
    assert "byJudgeAnswer" not in report


def test_an_order_with_replay_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], provider: ProviderServer
) -> None:
    code, _, err, _ = run_eval(tmp_path, capsys, provider, "--replay", "--judge-answer", "both")
    assert code == 2 and "--judge-answer needs live judging" in err
    assert provider.seen == []
