"""``replyguard verify``: one turn as JSON in, the verdict as JSON out, the exit code to act on.

The judge is the loopback provider server (real Anthropic wire format through ``apiBase``).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import API_KEY
from replyguard.cli import main
from support.provider_server import ANTHROPIC, ProviderServer, Step

TURN = {
    "userMessage": "List the three risks in the launch plan.",
    "reply": "Two risks: cost, time.",
}
FAIL_TEXT = "Only two risks are named.\nFAIL [incomplete]: name the third risk (hiring)."


def config_file(tmp_path: Path, provider: ProviderServer, **keys: Any) -> str:
    base = {"model": ANTHROPIC.judge_model, "apiKey": API_KEY, "apiBase": provider.url}
    path = tmp_path / "verifier.json"
    path.write_text(json.dumps({**base, **keys}))
    return str(path)


def turn_file(tmp_path: Path, turn: dict[str, Any] = TURN) -> str:
    path = tmp_path / "turn.json"
    path.write_text(json.dumps(turn))
    return str(path)


def verify(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any], str]:
    code = main(["verify", *args])
    out, err = capsys.readouterr()
    return code, json.loads(out) if out else {}, err


def test_a_pass_exits_zero_with_the_verdict_and_its_cost(
    tmp_path: Path, provider: ProviderServer, capsys: pytest.CaptureFixture[str]
) -> None:
    provider.push(Step(text="All three risks are there.\nPASS"))
    config = config_file(tmp_path, provider)
    code, verdict, _ = verify(capsys, turn_file(tmp_path), "--config", config)
    assert code == 0
    assert {k: verdict[k] for k in ("status", "reason", "passed", "category", "feedback")} == {
        "status": "passed",
        "reason": None,
        "passed": True,
        "category": None,
        "feedback": None,
    }
    assert verdict["costUsd"] > 0 and verdict["model"] == "claude-sonnet-4-5"
    assert TURN["reply"] in provider.seen[0].prompt


def test_a_fail_exits_one_with_category_feedback_and_the_retry_message(
    tmp_path: Path, provider: ProviderServer, capsys: pytest.CaptureFixture[str]
) -> None:
    provider.push(Step(text=FAIL_TEXT))
    code, verdict, _ = verify(
        capsys, turn_file(tmp_path), "--config", config_file(tmp_path, provider)
    )
    assert code == 1
    assert (verdict["status"], verdict["passed"], verdict["category"]) == (
        "failed",
        False,
        "incomplete",
    )
    assert verdict["feedback"] == "name the third risk (hiring)."
    assert "name the third risk (hiring)." in verdict["retryMessage"]


def test_shadow_mode_flags_a_fail_and_exits_zero(
    tmp_path: Path, provider: ProviderServer, capsys: pytest.CaptureFixture[str]
) -> None:
    provider.push(Step(text=FAIL_TEXT))
    config = config_file(tmp_path, provider, mode="shadow")
    code, verdict, _ = verify(capsys, turn_file(tmp_path), "--config", config)
    assert code == 0
    assert (verdict["status"], verdict["mode"], verdict["category"]) == (
        "flagged",
        "shadow",
        "incomplete",
    )


def test_a_judge_error_fails_open_with_its_reason_and_exits_zero(
    tmp_path: Path, provider: ProviderServer, capsys: pytest.CaptureFixture[str]
) -> None:
    provider.push(Step(status=500, text=None))
    code, verdict, _ = verify(
        capsys, turn_file(tmp_path), "--config", config_file(tmp_path, provider)
    )
    assert code == 0
    assert (verdict["status"], verdict["reason"], verdict["passed"]) == (
        "failed_open",
        "judge_error",
        True,
    )


def test_a_fail_open_prints_one_line_on_stderr_naming_its_reason(
    tmp_path: Path, provider: ProviderServer, capsys: pytest.CaptureFixture[str]
) -> None:
    provider.push(Step(text="Hard to say."))
    code, verdict, err = verify(
        capsys, turn_file(tmp_path), "--config", config_file(tmp_path, provider)
    )
    assert (code, verdict["status"]) == (0, "failed_open")
    assert err.count("\n") == 1
    assert err.startswith(
        "replyguard verify: failed open (unreadable_verdict, the reply is delivered as it is)"
    )


def test_an_unset_key_variable_fails_open_at_once_and_points_at_check_config(
    tmp_path: Path, provider: ProviderServer, capsys: pytest.CaptureFixture[str]
) -> None:
    config = config_file(tmp_path, provider, apiKey="env:REPLYGUARD_TEST_NEVER_SET")
    code, verdict, err = verify(capsys, turn_file(tmp_path), "--config", config)
    assert (code, verdict["status"], verdict["reason"]) == (0, "failed_open", "missing_credentials")
    assert err.count("\n") == 1
    assert err.startswith("replyguard verify: failed open (missing_credentials, ")
    assert "run replyguard check-config" in err
    assert "REPLYGUARD_TEST_NEVER_SET is not set (apiKey)" in err
    assert provider.seen == []


def test_a_refused_call_is_a_configuration_error_on_stderr(
    tmp_path: Path, provider: ProviderServer, capsys: pytest.CaptureFixture[str]
) -> None:
    provider.push(Step(status=401, text=None))
    code, _, err = verify(capsys, turn_file(tmp_path), "--config", config_file(tmp_path, provider))
    assert code == 0
    assert err.startswith("replyguard verify: judge configuration error (")


def test_an_unreadable_verdict_fails_open(
    tmp_path: Path, provider: ProviderServer, capsys: pytest.CaptureFixture[str]
) -> None:
    provider.push(Step(text="Hard to say."))
    code, verdict, _ = verify(
        capsys, turn_file(tmp_path), "--config", config_file(tmp_path, provider)
    )
    assert (code, verdict["status"], verdict["reason"]) == (0, "failed_open", "unreadable_verdict")


def test_a_tool_call_reply_is_skipped_without_a_judge_call(
    tmp_path: Path, provider: ProviderServer, capsys: pytest.CaptureFixture[str]
) -> None:
    turn = {**TURN, "reply": {"text": "", "meta": {"stopReason": "tool_calls"}}}
    config = config_file(tmp_path, provider)
    code, verdict, _ = verify(capsys, turn_file(tmp_path, turn), "--config", config)
    assert (code, verdict["status"], verdict["reason"]) == (0, "skipped", "tool_calls")
    assert provider.seen == []


def test_a_disabled_config_still_judges_and_triggers_do_not_apply(
    tmp_path: Path, provider: ProviderServer, capsys: pytest.CaptureFixture[str]
) -> None:
    provider.push(Step(text=FAIL_TEXT))
    config = config_file(tmp_path, provider, enabled=False, triggerKeywords=["nothing-matches"])
    code, verdict, _ = verify(capsys, turn_file(tmp_path), "--config", config)
    assert (code, verdict["status"]) == (1, "failed")
    assert len(provider.seen) == 1


@pytest.mark.parametrize("argument", [[], ["-"]])
def test_the_turn_is_read_from_stdin_without_a_file_or_with_a_dash(
    tmp_path: Path,
    provider: ProviderServer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    argument: list[str],
) -> None:
    provider.push(Step(text="PASS"))
    monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps(TURN)))
    code, verdict, _ = verify(capsys, *argument, "--config", config_file(tmp_path, provider))
    assert (code, verdict["status"]) == (0, "passed")


def test_an_unknown_key_is_exit_two_naming_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = turn_file(tmp_path, {**TURN, "answer": "x"})
    code, verdict, err = verify(capsys, path)
    assert (code, verdict) == (2, {})
    assert err == f"replyguard verify: {path}: invalid record: answer: unknown key\n"


@pytest.mark.parametrize(
    ("content", "shown"),
    [(None, "file not found"), ('{"maxAttempts": "3"}', "maxAttempts")],
)
def test_a_missing_or_bad_config_is_exit_two(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | None, shown: str
) -> None:
    config = tmp_path / "verifier.json"
    if content is not None:
        config.write_text(content)
    code, _, err = verify(capsys, turn_file(tmp_path), "--config", str(config))
    assert code == 2 and shown in err


def test_a_missing_turn_file_is_exit_two(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = verify(capsys, str(tmp_path / "nope.json"))
    assert code == 2 and "file not found" in err


def test_help_lists_every_status(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["verify", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert done.value.code == 0
    for status in ("passed", "skipped", "failed_open", "flagged", "failed (a FAIL) - exit 1"):
        assert status in shown
    assert "or an internal error - exit 2 (never 1)" in shown
    assert "--run-kind NAME" in shown


@pytest.mark.slow  # a fresh interpreter importing litellm: `.ci/run` runs it in its slow step
def test_the_installed_command_exits_zero_one_and_two(
    tmp_path: Path, provider: ProviderServer
) -> None:
    command = Path(sys.executable).parent / "replyguard"
    config = config_file(tmp_path, provider)
    provider.push(Step(text=FAIL_TEXT))

    def run(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(command), "verify", *args], input=stdin, capture_output=True, text=True, timeout=60
        )

    failed = run(turn_file(tmp_path), "--config", config)
    assert (failed.returncode, json.loads(failed.stdout)["status"]) == (1, "failed")
    skipped = run("--config", config, stdin=json.dumps({**TURN, "reply": ""}))
    assert (skipped.returncode, json.loads(skipped.stdout)["reason"]) == (0, "empty_response")
    bad = run("-", stdin="{not json")
    assert (bad.returncode, bad.stdout) == (2, "")
    assert "not valid JSON" in bad.stderr


SHADOW_KIND = {"runKinds": {"cron": {"mode": "shadow"}}}


def test_the_turns_run_kind_sets_the_mode(
    tmp_path: Path, provider: ProviderServer, capsys: pytest.CaptureFixture[str]
) -> None:
    provider.push(Step(text=FAIL_TEXT))
    config = config_file(tmp_path, provider, **SHADOW_KIND)
    turn = turn_file(tmp_path, {**TURN, "runKind": "cron"})
    code, verdict, _ = verify(capsys, turn, "--config", config)
    assert (code, verdict["status"], verdict["mode"]) == (0, "flagged", "shadow")


def test_the_run_kind_option_applies_over_the_turns_own(
    tmp_path: Path, provider: ProviderServer, capsys: pytest.CaptureFixture[str]
) -> None:
    provider.push(Step(text=FAIL_TEXT))
    provider.push(Step(text=FAIL_TEXT))
    config = config_file(tmp_path, provider, runKinds={"cron": {"mode": "shadow"}, "chat": {}})
    code, verdict, _ = verify(capsys, turn_file(tmp_path), "--config", config, "--run-kind", "cron")
    assert (code, verdict["status"], verdict["mode"]) == (0, "flagged", "shadow")
    turn = turn_file(tmp_path, {**TURN, "runKind": "cron"})
    code, verdict, _ = verify(capsys, turn, "--config", config, "--run-kind", "chat")
    assert (code, verdict["status"], verdict["mode"]) == (1, "failed", "enforce")


@pytest.mark.parametrize("where", ["option", "turn"])
def test_an_unknown_run_kind_is_exit_two_naming_it(
    tmp_path: Path, provider: ProviderServer, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    config = config_file(tmp_path, provider, **SHADOW_KIND)
    option = ["--run-kind", "nope"] if where == "option" else []
    turn = turn_file(tmp_path, {**TURN, "runKind": "nope"} if where == "turn" else TURN)
    code, verdict, err = verify(capsys, turn, "--config", config, *option)
    assert (code, verdict) == (2, {})
    assert "run kind 'nope' is not in the config's runKinds (known: cron)" in err
    assert provider.seen == []


class FailingStdout(io.StringIO):
    """A stdout that fails to write (a full disk, a dead terminal)."""

    def write(self, text: str) -> int:
        raise OSError(5, "Input/output error")


class BrokenPipe(io.StringIO):
    """A stdout whose reader has gone away (``| head``)."""

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")


def test_an_internal_error_exits_two_never_one(
    tmp_path: Path,
    provider: ProviderServer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    provider.push(Step(text=FAIL_TEXT))
    config = config_file(tmp_path, provider)
    monkeypatch.setattr(sys, "stdout", FailingStdout())
    code = main(["verify", turn_file(tmp_path), "--config", config])
    assert code == 2
    assert "replyguard verify: internal error: OSError" in capsys.readouterr().err


def test_a_reader_that_stops_reading_leaves_the_decisions_code(
    tmp_path: Path,
    provider: ProviderServer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``replyguard verify ... | head -c 0``: the FAIL stays a FAIL (exit 1), not an internal
    error (it was exit 2, with "internal error: BrokenPipeError")."""
    provider.push(Step(text=FAIL_TEXT))
    config = config_file(tmp_path, provider)
    monkeypatch.setattr(sys, "stdout", BrokenPipe())
    code = main(["verify", turn_file(tmp_path), "--config", config])
    assert code == 1
    assert "internal error" not in capsys.readouterr().err


@pytest.mark.slow  # a fresh interpreter importing litellm: `.ci/run` runs it in its slow step
def test_the_output_is_ascii_json_whatever_the_stdout_encoding(
    tmp_path: Path, provider: ProviderServer
) -> None:
    provider.push(Step(text="FAIL [incomplete]: nommez le troisième risque (recrutement) — 招聘"))
    command = Path(sys.executable).parent / "replyguard"
    turn = turn_file(tmp_path, {**TURN, "reply": "Deux risques : coût, délai."})
    done = subprocess.run(
        [str(command), "verify", turn, "--config", config_file(tmp_path, provider)],
        capture_output=True,
        env={**os.environ, "PYTHONIOENCODING": "ascii"},
        timeout=60,
    )
    assert done.returncode == 1, done.stderr
    assert done.stdout.isascii()
    assert json.loads(done.stdout)["feedback"] == "nommez le troisième risque (recrutement) — 招聘"


@pytest.mark.slow  # a fresh interpreter importing litellm: `.ci/run` runs it in its slow step
def test_latency_leaves_out_the_cold_start(tmp_path: Path, provider: ProviderServer) -> None:
    # litellm's first import takes seconds; loaded before the judgement, it is not counted.
    provider.push(Step(text="PASS"))
    command = Path(sys.executable).parent / "replyguard"
    done = subprocess.run(
        [str(command), "verify", turn_file(tmp_path), "--config", config_file(tmp_path, provider)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    verdict = json.loads(done.stdout)
    assert (done.returncode, verdict["status"]) == (0, "passed")
    assert verdict["latencyMs"] < 2500  # about 0.5 s (a first request); 4 s more with the import


def test_a_turns_evidence_and_tool_results_reach_the_judge_and_the_figures_check(
    tmp_path: Path, provider: ProviderServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """``evidence`` and each tool call's ``result`` are part of a turn as JSON: the judge sees
    them, and the figures check grounds the reply's figures in them."""
    turn = {
        "userMessage": "Refund order A-58812.",
        "evidence": ["orders.db: A-58812 paid on 2026-03-05"],
        "reply": {
            "text": "Order A-58812 (paid March 5, 2026) is refunded: $1,200.00.",
            "meta": {
                "toolCalls": [
                    {"name": "refund", "result": {"refunded": "1200.00", "currency": "USD"}}
                ]
            },
        },
    }
    provider.push(Step(text="PASS"))
    config = config_file(tmp_path, provider, checks=[{"type": "figures"}])
    code, verdict, _ = verify(capsys, turn_file(tmp_path, turn), "--config", config)
    assert (code, verdict["status"]) == (0, "passed")
    assert "[retrieved 1]" in provider.seen[0].prompt
    assert '"refunded": "1200.00"' in provider.seen[0].prompt
    turn["reply"]["text"] = "Order A-58812 is refunded: $1,300.00."  # type: ignore[index]
    code, verdict, _ = verify(capsys, turn_file(tmp_path, turn), "--config", config)
    assert (code, verdict["category"]) == (1, "grounding")
    assert "$1,300.00 (amount)" in verdict["feedback"]
    assert len(provider.seen) == 1  # the check decided: no second judge call
