"""``replyguard heartbeat``: a cron agent's reply judged against the workspace's HEARTBEAT.md."""

from __future__ import annotations

import io
import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from test_cli_verify import BrokenPipe, FailingStdout, config_file

from replyguard.cli import main
from support.provider_server import ProviderServer, Step

OPEN_TASKS = (
    "# Heartbeat\n\n- [ ] Rotate the logs\n- [x] Check the backup job\n- [ ] Renew the TLS cert\n"
)
ALL_DONE = "# Heartbeat\n\n- [x] Rotate the logs\n- [x] Check the backup job\n"
REPORT = "Rotated the logs (3 archived) and renewed the TLS cert (valid to 2027-02-01)."


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    folder = tmp_path / "agent"
    folder.mkdir()
    (folder / "HEARTBEAT.md").write_text(OPEN_TASKS)
    return folder


def heartbeat(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any], str]:
    code = main(["heartbeat", *args])
    out, err = capsys.readouterr()
    return code, json.loads(out) if out else {}, err


def test_heartbeat_ok_with_open_tasks_fails_without_a_judge_call(
    tmp_path: Path, workspace: Path, provider: ProviderServer, capsys: pytest.CaptureFixture[str]
) -> None:
    config = config_file(tmp_path, provider)
    code, verdict, err = heartbeat(
        capsys, "--workspace", str(workspace), "HEARTBEAT_OK", "--config", config
    )
    assert code == 1
    assert (verdict["status"], verdict["category"]) == ("failed", "goal_missed")
    assert "Rotate the logs" in verdict["feedback"] and "Renew the TLS cert" in verdict["feedback"]
    assert "Check the backup job" not in verdict["feedback"]
    assert "Renew the TLS cert" in err  # the retry message, for the cron script to pass on
    assert provider.seen == []


def test_heartbeat_ok_fails_even_with_defaults_and_a_config_without_the_check(
    tmp_path: Path, workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "bare.json"
    config.write_text('{"checks": []}')
    for extra in ([], ["--config", str(config)]):
        code, verdict, _ = heartbeat(capsys, "--workspace", str(workspace), "HEARTBEAT_OK", *extra)
        assert (code, verdict["status"], verdict["category"]) == (1, "failed", "goal_missed")


def test_heartbeat_ok_with_every_task_done_passes_without_a_judge_call(
    tmp_path: Path, workspace: Path, provider: ProviderServer, capsys: pytest.CaptureFixture[str]
) -> None:
    (workspace / "HEARTBEAT.md").write_text(ALL_DONE)
    config = config_file(tmp_path, provider)
    code, verdict, err = heartbeat(
        capsys, "--workspace", str(workspace), "HEARTBEAT_OK", "--config", config
    )
    assert (code, verdict["status"], verdict["decisive"], err) == (0, "passed", True, "")
    assert provider.seen == []


def test_a_report_is_judged_with_the_heartbeat_tasks_in_the_prompt(
    tmp_path: Path, workspace: Path, provider: ProviderServer, capsys: pytest.CaptureFixture[str]
) -> None:
    provider.push(Step(text="Both open tasks are reported done.\nPASS"))
    config = config_file(tmp_path, provider)
    code, verdict, _ = heartbeat(capsys, "--workspace", str(workspace), REPORT, "--config", config)
    assert (code, verdict["status"]) == (0, "passed")
    prompt = provider.seen[0].prompt
    assert "Renew the TLS cert" in prompt and REPORT in prompt
    assert "Heartbeat run: read HEARTBEAT.md" in prompt
    assert "run metadata" not in prompt


def test_a_failed_report_exits_one_with_the_judges_feedback(
    tmp_path: Path, workspace: Path, provider: ProviderServer, capsys: pytest.CaptureFixture[str]
) -> None:
    provider.push(Step(text="FAIL [incomplete]: the TLS cert was not renewed."))
    reply_file = tmp_path / "reply.txt"
    reply_file.write_text("Rotated the logs.")
    args = ["--workspace", str(workspace), "--reply-file", str(reply_file)]
    code, verdict, err = heartbeat(capsys, *args, "--config", config_file(tmp_path, provider))
    assert (code, verdict["category"]) == (1, "incomplete")
    assert "the TLS cert was not renewed." in err


def test_the_reply_is_read_from_stdin(
    tmp_path: Path,
    workspace: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("HEARTBEAT_OK\n"))
    code, verdict, _ = heartbeat(capsys, "--workspace", str(workspace), "-")
    assert (code, verdict["category"]) == (1, "goal_missed")


def test_shadow_mode_flags_and_exits_zero(
    tmp_path: Path, workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "shadow.json"
    config.write_text('{"mode": "shadow"}')
    args = ["--workspace", str(workspace), "HEARTBEAT_OK", "--config", str(config)]
    code, verdict, _ = heartbeat(capsys, *args)
    assert (code, verdict["status"]) == (0, "flagged")


def test_a_missing_workspace_is_exit_two(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = heartbeat(capsys, "--workspace", str(tmp_path / "nowhere"), "HEARTBEAT_OK")
    assert code == 2 and "not a folder" in err


def test_a_workspace_without_heartbeat_md_has_no_tasks_with_a_notice(
    tmp_path: Path, workspace: Path, provider: ProviderServer, capsys: pytest.CaptureFixture[str]
) -> None:
    (workspace / "HEARTBEAT.md").unlink()
    config = config_file(tmp_path, provider)
    code, verdict, err = heartbeat(
        capsys, "--workspace", str(workspace), "HEARTBEAT_OK", "--config", config
    )
    assert (code, verdict["status"]) == (0, "passed")
    assert err == (
        f"replyguard heartbeat: notice: {workspace / 'HEARTBEAT.md'} not found: no tasks\n"
    )
    assert provider.seen == []


def test_the_retry_message_speaks_of_the_task_list_not_a_users_request(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, verdict, err = heartbeat(capsys, "--workspace", str(workspace), "HEARTBEAT_OK")
    assert (code, verdict["category"]) == (1, "goal_missed")
    for message in (err, verdict["retryMessage"]):
        assert "user" not in message.lower()
        assert "open task in the heartbeat task list" in message


def test_reply_text_and_reply_file_cannot_both_be_given(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as done:
        main(["heartbeat", "--workspace", str(workspace), "HEARTBEAT_OK", "--reply-file", "r.txt"])
    assert done.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


@pytest.mark.parametrize("reply", ["", " \n"])
def test_an_empty_reply_with_open_tasks_fails_naming_them(
    tmp_path: Path,
    workspace: Path,
    provider: ProviderServer,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    reply: str,
) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(reply))  # the agent crashed, printed nothing
    config = config_file(tmp_path, provider)
    code, verdict, err = heartbeat(capsys, "--workspace", str(workspace), "--config", config)
    assert (code, verdict["status"], verdict["category"]) == (1, "failed", "goal_missed")
    assert verdict["feedback"].startswith("The reply is empty, but HEARTBEAT.md still lists 2")
    assert "Rotate the logs" in verdict["feedback"] and "Renew the TLS cert" in verdict["feedback"]
    assert "Check the backup job" not in verdict["feedback"]
    assert "Renew the TLS cert" in err
    assert provider.seen == []


def test_an_empty_reply_with_no_open_task_is_skipped(
    tmp_path: Path, workspace: Path, provider: ProviderServer, capsys: pytest.CaptureFixture[str]
) -> None:
    (workspace / "HEARTBEAT.md").write_text(ALL_DONE)
    config = config_file(tmp_path, provider)
    code, verdict, err = heartbeat(capsys, "--workspace", str(workspace), "", "--config", config)
    assert (code, verdict["status"], verdict["reason"], err) == (0, "skipped", "empty_response", "")


def test_the_run_kind_option_sets_the_mode(
    tmp_path: Path, workspace: Path, provider: ProviderServer, capsys: pytest.CaptureFixture[str]
) -> None:
    config = config_file(tmp_path, provider, runKinds={"cron": {"mode": "shadow"}})
    args = ["--workspace", str(workspace), "--config", config]
    for reply in ("HEARTBEAT_OK", ""):
        code, verdict, _ = heartbeat(capsys, *args, "--run-kind", "cron", reply)
        assert (code, verdict["status"], verdict["mode"]) == (0, "flagged", "shadow")
    code, verdict, _ = heartbeat(capsys, *args, "HEARTBEAT_OK")
    assert (code, verdict["status"], verdict["mode"]) == (1, "failed", "enforce")
    code, _, err = heartbeat(capsys, *args, "--run-kind", "nightly", "HEARTBEAT_OK")
    assert code == 2 and "run kind 'nightly' is not in the config's runKinds" in err


def test_the_output_is_ascii_json_and_an_internal_error_exits_two(
    workspace: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (workspace / "HEARTBEAT.md").write_text("- [ ] Vérifier les sauvegardes 备份\n")
    code = main(["heartbeat", "--workspace", str(workspace), "HEARTBEAT_OK"])
    out = capsys.readouterr().out
    assert code == 1 and out.isascii()
    assert "Vérifier les sauvegardes 备份" in json.loads(out)["feedback"]
    monkeypatch.setattr(sys, "stdout", FailingStdout())
    code = main(["heartbeat", "--workspace", str(workspace), "HEARTBEAT_OK"])
    assert code == 2
    assert "replyguard heartbeat: internal error: OSError" in capsys.readouterr().err
    monkeypatch.setattr(sys, "stdout", BrokenPipe())  # a reader that stopped: still a FAIL
    code = main(["heartbeat", "--workspace", str(workspace), "HEARTBEAT_OK"])
    assert code == 1 and "internal error" not in capsys.readouterr().err


@pytest.mark.slow  # the replyguard command in fresh interpreters: run in .ci/run's slow step
def test_closed_standard_streams_and_a_reader_that_stops(workspace: Path) -> None:
    """As a service manager or a shell pipeline runs it: stdin closed is an input error
    (it was "internal error: AttributeError"); stderr closed keeps the JSON alone on stdout;
    ``| head`` on ``demo`` ends quietly with 141 (it printed a traceback)."""
    (workspace / "HEARTBEAT.md").write_text("- [ ] Send the weekly report\n")
    command = shlex.quote(str(Path(sys.executable).parent / "replyguard"))
    heartbeat = f"{command} heartbeat --workspace {shlex.quote(str(workspace))}"

    def shell(line: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", "-c", line], capture_output=True, text=True, timeout=120, check=False
        )

    closed_stdin = shell(f"{heartbeat} <&-")
    assert closed_stdin.returncode == 2
    assert "reply <stdin>: stdin is closed" in closed_stdin.stderr
    assert "internal error" not in closed_stdin.stderr
    closed_stderr = shell(f"{heartbeat} HEARTBEAT_OK 2>&-")
    assert closed_stderr.returncode == 1
    assert json.loads(closed_stderr.stdout)["status"] == "failed"  # the JSON alone
    demo = shell(f'{command} demo | head -n 1; exit "${{PIPESTATUS[0]}}"')
    assert demo.returncode == 141
    assert demo.stdout.startswith("replyguard demo:")
    assert demo.stderr == ""


def test_the_defaults_without_a_config_file_are_the_validated_defaults() -> None:
    """A command given no ``--config`` runs with ``VerifierConfig()``'s values, made without
    building the config's validator: the same config, field for field."""
    from replyguard._commands import load_config
    from replyguard.config import VerifierConfig

    made, validated = load_config(None), VerifierConfig()
    assert made == validated
    assert made.model_fields_set == validated.model_fields_set == set()
    assert made.model_dump(mode="json", by_alias=True) == validated.model_dump(
        mode="json", by_alias=True
    )
    assert [type(getattr(made, name)) for name in VerifierConfig.model_fields] == [
        type(getattr(validated, name)) for name in VerifierConfig.model_fields
    ]


def test_a_caller_passing_arguments_keeps_its_collector(
    capsys: pytest.CaptureFixture[str], workspace: Path
) -> None:
    """Only the process's own command line freezes what it loaded at its end (its exit then
    skips them); a caller that passes ``argv`` keeps its collector as it was."""
    import gc

    frozen = gc.get_freeze_count()
    code, _, _ = heartbeat(capsys, "--workspace", str(workspace), "HEARTBEAT_OK")
    assert code == 1
    assert gc.get_freeze_count() == frozen


def test_the_command_run_as_a_program_decides_and_prints_as_before(workspace: Path) -> None:
    """``python -m replyguard heartbeat``: its decision, output and exit code, with the
    collector frozen at its end."""
    ran = subprocess.run(
        [
            sys.executable,
            "-m",
            "replyguard",
            "heartbeat",
            "--workspace",
            str(workspace),
            "HEARTBEAT_OK",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert ran.returncode == 1, ran.stderr
    assert json.loads(ran.stdout)["status"] == "failed"
    assert ran.stderr.startswith("A reviewer checked your previous reply")
    assert "Exception ignored" not in ran.stderr
