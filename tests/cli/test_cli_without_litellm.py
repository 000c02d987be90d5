"""The CLI settles what a pre-check or a deciding check settles without importing litellm or
tiktoken (each case in a fresh interpreter: the suite's own process has them loaded)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

PROBE = (
    "import json, sys\n"
    "from replyguard.cli import main\n"
    "code = main(sys.argv[1:])\n"
    "loaded = sorted(m for m in ('litellm', 'tiktoken') if m in sys.modules)\n"
    "print(json.dumps({'code': code, 'loaded': loaded}), file=sys.stderr)\n"
)


def run(args: list[str], cwd: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The command's verdict JSON (stdout), and its exit code and loaded modules."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI")}
    result = subprocess.run(
        [sys.executable, "-c", PROBE, *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=120,
        check=False,
    )
    probe = json.loads(result.stderr.strip().splitlines()[-1])
    return json.loads(result.stdout), probe


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    (tmp_path / "HEARTBEAT.md").write_text("# Tasks\n\n- [ ] rotate the logs\n- [x] backup\n")
    return tmp_path


def test_heartbeat_ok_with_open_tasks_fails_without_litellm(workspace: Path) -> None:
    verdict, probe = run(["heartbeat", "--workspace", str(workspace), "HEARTBEAT_OK"], workspace)
    assert (verdict["status"], verdict["category"]) == ("failed", "goal_missed")
    assert probe == {"code": 1, "loaded": []}


def test_heartbeat_ok_with_every_task_done_passes_without_litellm(workspace: Path) -> None:
    (workspace / "HEARTBEAT.md").write_text("# Tasks\n\n- [x] backup\n")
    verdict, probe = run(["heartbeat", "--workspace", str(workspace), "HEARTBEAT_OK"], workspace)
    assert (verdict["status"], verdict["decisive"]) == ("passed", True)
    assert probe == {"code": 0, "loaded": []}


def test_verify_skips_a_pending_tool_call_without_litellm(tmp_path: Path) -> None:
    turn = {"userMessage": "q", "reply": {"text": "calling", "meta": {"pendingToolCalls": 1}}}
    (tmp_path / "turn.json").write_text(json.dumps(turn))
    verdict, probe = run(["verify", "turn.json"], tmp_path)
    assert verdict["status"] == "skipped"
    assert probe == {"code": 0, "loaded": []}


def test_verify_fails_on_a_deciding_check_without_litellm(tmp_path: Path) -> None:
    config = {"checks": [{"type": "rules", "maxLength": 5}]}
    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / "turn.json").write_text(json.dumps({"userMessage": "q", "reply": "far too long"}))
    verdict, probe = run(["verify", "turn.json", "--config", "config.json"], tmp_path)
    assert (verdict["status"], verdict["decisive"]) == ("failed", True)
    assert probe == {"code": 1, "loaded": []}


HEARTBEAT_PROBE = (
    "import sys\n"
    "from replyguard.cli import main\n"
    "main(sys.argv[1:])\n"
    "from replyguard._records import TurnRecord\n"
    "others = ('replyguard.evaluation', 'replyguard.insights')\n"
    "print(sorted(m for m in others if m in sys.modules),"
    " TurnRecord.__pydantic_complete__, file=sys.stderr)\n"
)


def heartbeat_probe(probe: str, workspace: Path, reply: str) -> subprocess.CompletedProcess[str]:
    """``replyguard heartbeat --workspace WORKSPACE REPLY`` run by ``probe`` in a fresh
    interpreter (no OpenAI key in its environment)."""
    return subprocess.run(
        [sys.executable, "-c", probe, "heartbeat", "--workspace", str(workspace), reply],
        capture_output=True,
        text=True,
        cwd=workspace,
        env={k: v for k, v in os.environ.items() if not k.startswith("OPENAI")},
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("reply", ["HEARTBEAT_OK", "Rotated the logs."])
def test_heartbeat_loads_no_other_commands_package_nor_the_record_schemas(
    workspace: Path, reply: str
) -> None:
    """What only ``eval``, ``insights`` and ``verify`` use is not loaded or built for a
    heartbeat, whatever it decides: the ``eval`` and ``insights`` packages, the turn
    record's validator."""
    result = heartbeat_probe(HEARTBEAT_PROBE, workspace, reply)
    assert result.stderr.strip().splitlines()[-1] == "[] False"


@pytest.mark.parametrize(
    ("argv", "shown"),
    [
        (["eval", "--help"], "--replay"),
        (["insights", "--help"], "--propose"),
        (["verify", "--help"], "--run-kind"),
        (["heartbeat", "--help"], "--workspace"),
        (["check-config", "--help"], "--show"),
        (["--help"], "heartbeat"),
    ],
)
def test_each_command_still_takes_its_own_arguments(
    argv: list[str], shown: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Only the command being run gets its arguments added to the parser."""
    from replyguard.cli import main

    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 0
    assert shown in capsys.readouterr().out


@pytest.mark.parametrize("tasks", ["- [ ] rotate the logs\n", "- [x] backup\n"])
def test_a_heartbeat_its_check_decides_loads_neither_the_judge_side_nor_the_tokenizer(
    workspace: Path, tasks: str
) -> None:
    """A heartbeat that the heartbeat check decides (a FAIL with its retry message, or a
    PASS) loads neither litellm, nor the tokenizer, nor the judge side of an assessment (the
    prompt build, the judge call), and a PASS not jinja2 either (only a FAIL renders the
    retry message's template, ``prompts/feedback.j2``): what it prints is all there all the
    same. (The injection screen does run: it screens every assessed reply, and its reasons
    are part of the verdict.)"""
    (workspace / "HEARTBEAT.md").write_text(f"# Tasks\n\n{tasks}")
    result = heartbeat_probe(UNUSED_PROBE, workspace, "HEARTBEAT_OK")
    *printed, probe = result.stderr.strip().splitlines()
    verdict = json.loads(result.stdout)
    failed = tasks.startswith("- [ ]")
    assert json.loads(probe) == {
        "code": 1 if failed else 0,
        "loaded": ["jinja2"] if failed else [],
    }
    assert verdict["decisive"] is True and verdict["passed"] is not failed
    if failed:
        assert verdict["retryMessage"] == "\n".join(printed)
        assert verdict["retryMessage"].startswith(
            "A reviewer checked your previous reply and it was not accepted (goal_missed)."
        )
        assert verdict["retryMessage"].endswith("not a note about the fix.")
    else:
        assert "retryMessage" not in verdict and printed == []


UNUSED_PROBE = (
    "import json, sys\n"
    "from replyguard.cli import main\n"
    "code = main(sys.argv[1:])\n"
    "unused = ('litellm', 'tiktoken', 'jinja2', 'replyguard.runner._judging',"
    " 'replyguard.context._build')\n"
    "print(json.dumps({'code': code, 'loaded': [m for m in unused if m in sys.modules]}),"
    " file=sys.stderr)\n"
)
