"""``replyguard verify`` and ``insights`` tell a FAIL delivered after side effects apart from
shadow mode's by its reason (``side_effects``); the judge is the loopback provider."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_cli_verify import config_file, turn_file, verify

from replyguard.cli import main
from support.provider_server import ProviderServer, Step

SENT = {"name": "send_email", "arguments": {"to": "ada@example.com"}}
TURN = {
    "userMessage": "Send Ada the invoice and tell me when it is due.",
    "reply": {"text": "Sent the invoice to Ada.", "meta": {"toolCalls": [SENT]}},
}
FAIL_TEXT = "FAIL [incomplete]: say when the invoice is due."


@pytest.mark.parametrize(
    ("keys", "status", "reason", "code"),
    [
        ({"sideEffectTools": ["send_*"], "onSideEffects": "deliver"}, "flagged", "side_effects", 0),
        ({"sideEffectTools": ["send_*"], "mode": "shadow"}, "flagged", None, 0),
        ({"sideEffectTools": ["send_*"]}, "failed", None, 1),
        ({"onSideEffects": "deliver"}, "failed", None, 1),  # no pattern: no side effect
    ],
)
def test_verify_flags_a_fail_after_side_effects_by_its_reason(
    tmp_path: Path,
    provider: ProviderServer,
    capsys: pytest.CaptureFixture[str],
    keys: dict[str, Any],
    status: str,
    reason: str | None,
    code: int,
) -> None:
    provider.push(Step(text=FAIL_TEXT))
    config = config_file(tmp_path, provider, **keys)
    exit_code, verdict, _ = verify(capsys, turn_file(tmp_path, TURN), "--config", config)
    assert (exit_code, verdict["status"], verdict["reason"]) == (code, status, reason)


def test_the_retry_message_lists_what_is_done_under_notice_only(
    tmp_path: Path, provider: ProviderServer, capsys: pytest.CaptureFixture[str]
) -> None:
    provider.push(Step(text=FAIL_TEXT), Step(text=FAIL_TEXT))
    turn = turn_file(tmp_path, TURN)
    notice = config_file(tmp_path, provider, sideEffectTools=["send_*"])
    _, verdict, _ = verify(capsys, turn, "--config", notice)
    assert '- send_email({"to":"ada@example.com"})' in verdict["retryMessage"]
    retry = config_file(tmp_path, provider, sideEffectTools=["send_*"], onSideEffects="retry")
    _, verdict, _ = verify(capsys, turn, "--config", retry)
    assert "Already done" not in verdict["retryMessage"]


def test_an_explicit_side_effect_false_wins_over_the_pattern(
    tmp_path: Path, provider: ProviderServer, capsys: pytest.CaptureFixture[str]
) -> None:
    provider.push(Step(text=FAIL_TEXT))
    turn = {
        **TURN,
        "reply": {"text": "Drafted.", "meta": {"toolCalls": [{**SENT, "sideEffect": False}]}},
    }
    config = config_file(tmp_path, provider, sideEffectTools=["send_*"], onSideEffects="deliver")
    code, verdict, _ = verify(capsys, turn_file(tmp_path, turn), "--config", config)
    assert (code, verdict["status"]) == (1, "failed")


def test_insights_counts_side_effect_deliveries_apart_from_shadow_flags(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ledger = tmp_path / "ledger.jsonl"
    entries = [
        {"status": "flagged", "reason": "side_effects", "attempts": 1, "runKind": "outbound"},
        {"status": "flagged", "reason": None, "attempts": 1, "runKind": "outbound"},
        {"status": "passed", "reason": None, "attempts": 1, "runKind": "outbound"},
        {"status": "passed", "reason": None, "attempts": 2, "runKind": "outbound"},
    ]
    ledger.write_text("".join(json.dumps(e) + "\n" for e in entries))
    assert main(["insights", str(ledger)]) == 0
    out = capsys.readouterr().out
    assert "25% flagged (shadow), 25% flagged (side effects, not retried)" in out
    assert "side_effects" in out  # among the reasons


def test_eval_tells_side_effect_flags_from_shadow_flags_by_reason(
    tmp_path: Path, provider: ProviderServer, capsys: pytest.CaptureFixture[str]
) -> None:
    provider.respond_with(lambda seen: Step(text=FAIL_TEXT))
    dataset = tmp_path / "dataset.jsonl"
    records = [
        {**TURN, "id": "acted", "label": "FAIL"},
        {**TURN, "id": "shadowed", "runKind": "watch", "label": "FAIL"},
    ]
    dataset.write_text("".join(json.dumps(r) + "\n" for r in records))
    config = config_file(
        tmp_path,
        provider,
        sideEffectTools=["send_*"],
        onSideEffects="deliver",
        runKinds={"watch": {"mode": "shadow"}},
    )
    out = tmp_path / "out"
    assert main(["eval", str(dataset), "--config", config, "--out", str(out)]) == 0
    report = json.loads((out / "report.json").read_text())
    rows = {row["id"]: (row["status"], row["reason"], row["judged"]) for row in report["results"]}
    assert rows == {
        "acted": ("flagged", "side_effects", "FAIL"),
        "shadowed": ("flagged", None, "FAIL"),
    }
    assert (report["statuses"], report["reasons"]) == ({"flagged": 2}, {"side_effects": 1})
