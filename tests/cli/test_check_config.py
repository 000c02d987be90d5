"""``replyguard check-config FILE`` passes exactly what the verifier accepts: every finding the
verifier makes when it is built is printed, errors exit 2, warnings exit 0 unless ``--strict``,
one summary line ends the report, and the effective config is printed only with ``--show``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import API_KEY
from replyguard import CrossFamilyError, Verifier, VerifierConfig
from replyguard.cli import main
from replyguard.testing import capture_events

AGENT = "anthropic/claude-haiku-4-5"
OTHER_JUDGE = "openai/gpt-4o"


@pytest.fixture(autouse=True)
def _provider_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    """The judge providers' keys, set as a deployment sets them: these tests are about the
    other findings (test_check_config_credentials.py is about keys that are missing)."""
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)


def _check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], config: dict[str, Any], *options: str
) -> tuple[int, list[str], str]:
    path = tmp_path / "verifier.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    code = main(["check-config", *options, str(path)])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


def _workspace(tmp_path: Path, *files: str) -> str:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    for name in files:
        (workspace / name).write_text("- [ ] a task\n", encoding="utf-8")
    return str(workspace)


def test_a_sound_config_prints_one_summary_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = {
        "enabled": True,
        "model": OTHER_JUDGE,
        "agentModel": AGENT,
        "runKinds": {"a": {"maxAttempts": 2}, "b": {}, "c": {}},
        "checks": [{"type": "heartbeat"}, {"type": "claims"}],
    }
    code, lines, err = _check(tmp_path, capsys, config)
    assert (code, lines, err) == (
        0,
        ["OK: judge openai/gpt-4o, enabled, 3 run kinds, 2 checks"],
        "",
    )


def test_the_summary_says_when_the_verifier_is_off(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, lines, _ = _check(tmp_path, capsys, {})
    assert code == 0
    assert lines[-1].startswith("OK: judge anthropic/claude-sonnet-4-5, disabled")


def test_a_same_family_judge_with_require_cross_family_is_an_error_as_in_the_verifier(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = {"agentModel": AGENT, "requireCrossFamily": True}
    with pytest.raises(CrossFamilyError) as refused:
        Verifier(VerifierConfig.from_dict(config))
    code, lines, _ = _check(tmp_path, capsys, config)
    assert code == 2
    assert lines == [
        f"error: model: {refused.value}",
        "FAILED: 1 error in " + str(tmp_path / "verifier.json"),
    ]


def test_a_same_family_judge_without_require_cross_family_is_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, lines, _ = _check(tmp_path, capsys, {"agentModel": AGENT})
    assert code == 0
    assert lines[0].startswith("warning: model: judge model 'anthropic/claude-sonnet-4-5' is of")
    assert lines[-1].endswith("; 1 warning")


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("workspaceDir", "no-such-folder", "error: workspaceDir: "),
        ("ledgerPath", "no-such-folder/ledger.jsonl", "error: ledgerPath: the folder "),
        ("apiKey", "env:REPLYGUARD_TEST_NEVER_SET", "error: apiKey: environment variable "),
    ],
)
def test_what_every_turn_would_lose_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], key: str, value: str, expected: str
) -> None:
    code, lines, _ = _check(tmp_path, capsys, {"model": OTHER_JUDGE, key: value})
    assert code == 2
    assert [line for line in lines if line.startswith("error:")] == [
        next(line for line in lines if line.startswith(expected))
    ]
    assert lines[-1].startswith("FAILED: 1 error")


def test_an_unset_env_key_names_the_variable_but_never_a_value(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, lines, _ = _check(tmp_path, capsys, {"apiKey": "env:REPLYGUARD_TEST_NEVER_SET"})
    assert "REPLYGUARD_TEST_NEVER_SET is not set" in lines[0]


def test_missing_workspace_files_are_warnings_and_fail_only_under_strict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = {"model": OTHER_JUDGE, "workspaceDir": _workspace(tmp_path, "AGENTS.md")}
    code, lines, _ = _check(tmp_path, capsys, config)
    assert code == 0
    assert [line.split(":")[:2] for line in lines[:-1]] == [
        ["warning", " rulesFiles"],
        ["warning", " heartbeatFile"],
    ]
    assert "SOUL.md not found" in lines[0] and "no tasks" in lines[1]
    assert lines[-1].endswith("; 2 warnings")
    code, lines, _ = _check(tmp_path, capsys, config, "--strict")
    assert code == 2
    assert lines[-1].startswith("FAILED (--strict): 2 warnings")


def test_a_complete_workspace_passes_strict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    workspace = _workspace(tmp_path, "AGENTS.md", "SOUL.md", "HEARTBEAT.md")
    config = {"model": OTHER_JUDGE, "agentModel": AGENT, "workspaceDir": workspace}
    code, lines, _ = _check(tmp_path, capsys, config, "--strict")
    assert (code, len(lines)) == (0, 1)


def test_what_else_the_verifier_refuses_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    checks = [{"type": "rules", "name": "same"}, {"type": "rules", "name": "same"}]
    code, lines, _ = _check(tmp_path, capsys, {"checks": checks})
    assert code == 2
    assert lines[0] == "error: check names must be unique; repeated: same"


def test_show_prints_the_config_as_json_and_the_report_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, lines, err = _check(tmp_path, capsys, {"enabled": True}, "--show")
    assert code == 0
    assert json.loads("\n".join(lines))["enabled"] is True
    assert err.startswith("OK: judge ")


def test_the_verifier_logs_the_same_findings_when_built(tmp_path: Path) -> None:
    config = VerifierConfig.from_dict(
        {
            "model": OTHER_JUDGE,
            "apiKey": "env:REPLYGUARD_TEST_NEVER_SET",
            "workspaceDir": str(tmp_path / "gone"),
        }
    )
    with capture_events() as events:
        Verifier(config).close()
    warned = {e["event"] for e in events if e["log_level"] == "warning"}
    assert {"api_key_env_unset", "workspace_missing"} <= warned
