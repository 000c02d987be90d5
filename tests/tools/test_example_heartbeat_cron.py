"""The cron heartbeat script of ``examples/heartbeat_cron``, run as cron would run it.

``heartbeat.sh`` runs a fake agent (a small shell script) in a workspace holding HEARTBEAT.md,
pipes each reply to the real ``replyguard heartbeat`` command, and re-runs the agent with the
feedback after a FAIL. A ``HEARTBEAT_OK`` with open tasks is failed by the built-in heartbeat
check without any model call; a real report goes to the judge, played by the loopback provider
server through ``apiBase``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import API_KEY
from support.provider_server import ANTHROPIC, ProviderServer, Step

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "heartbeat_cron"
SCRIPT = EXAMPLE / "heartbeat.sh"  # run with `sh`, so POSIX sh (dash on Debian) is what runs it
REPLYGUARD = Path(sys.executable).parent / "replyguard"
TASK = "Rotate the logs in /var/log/app"
REPORT = "Rotated the logs in /var/log/app: 3 files compressed, 1 older than 30 days removed."
# Answers HEARTBEAT_OK until its prompt lists the open task (only the feedback does), then
# reports the work; STUBBORN=1 makes it answer HEARTBEAT_OK for ever, BREAK_ON=N makes run N
# fail. Every prompt is appended to prompts.log in the workspace.
FAKE_AGENT = f"""#!/bin/sh
prompt=$(cat)
printf '%s\\n---\\n' "$prompt" >>prompts.log
if [ "$HEARTBEAT_ATTEMPT" = "${{BREAK_ON:-0}}" ]; then echo "model unavailable" >&2; exit 3; fi
case "$STUBBORN$prompt" in
0*"{TASK}"*) echo "{REPORT}" ;;
*) echo HEARTBEAT_OK ;;
esac
"""


@dataclass
class Run:
    code: int
    stdout: str
    log: list[str]
    prompts: list[str]


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    folder = tmp_path / "workspace"
    folder.mkdir()
    (folder / "HEARTBEAT.md").write_text(
        f"# Every hour\n\n- [ ] {TASK}\n- [x] Renew the certificate\n", encoding="utf-8"
    )
    agent = folder / "agent.sh"
    agent.write_text(FAKE_AGENT, encoding="utf-8")
    agent.chmod(0o755)
    return folder


@pytest.fixture
def config_file(tmp_path: Path, provider: ProviderServer) -> Path:
    """Judge reports with an Anthropic judge at the loopback server."""
    path = tmp_path / "verifier.json"
    config = {
        "model": ANTHROPIC.judge_model,
        "apiKey": API_KEY,
        "apiBase": provider.url,
        "timeoutSeconds": 10,
    }
    path.write_text(json.dumps(config), encoding="utf-8")
    return path


def run_script(
    workspace: Path, *options: str, env: dict[str, str] | None = None, timeout: float = 60
) -> Run:
    log = workspace.parent / "heartbeat.log"
    result = subprocess.run(
        ["sh", str(SCRIPT), "-w", str(workspace), "-l", str(log), *options, "./agent.sh"],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "REPLYGUARD": str(REPLYGUARD), "STUBBORN": "0", **(env or {})},
        check=False,
    )
    prompts_file = workspace / "prompts.log"
    prompts = prompts_file.read_text(encoding="utf-8").split("\n---\n")[:-1]
    lines = log.read_text(encoding="utf-8").splitlines() if log.exists() else []
    # Drop the timestamps: "2026-05-03T06:00:04Z heartbeat attempt=1 ..." -> "attempt=1 ...".
    return Run(result.returncode, result.stdout, [line.split(" ", 2)[2] for line in lines], prompts)


def test_heartbeat_ok_with_open_tasks_is_sent_back_and_the_report_delivered(
    workspace: Path, config_file: Path, provider: ProviderServer
) -> None:
    provider.push(Step(text="The log rotation is reported as done.\nPASS"))
    run = run_script(workspace, "-c", str(config_file))
    assert (run.code, run.stdout) == (0, REPORT + "\n")
    assert run.log == [
        "attempt=1 status=failed category=goal_missed cost_usd=0.0",
        f"attempt=2 status=passed category=null cost_usd={cost_of(run.log[1])}",
        "final status=passed attempts=2",
    ]
    assert float(cost_of(run.log[1])) > 0
    first, second = run.prompts
    assert "HEARTBEAT.md" in first and TASK not in first
    assert "goal_missed" in second and TASK in second
    assert len(provider.seen) == 1  # HEARTBEAT_OK was failed by the check alone
    assert REPORT in provider.seen[0].prompt and TASK in provider.seen[0].prompt


def cost_of(line: str) -> str:
    match = re.search(r"cost_usd=(\S+)", line)
    assert match is not None, line
    return match.group(1)


def test_an_agent_that_keeps_answering_heartbeat_ok_runs_out_of_retries(
    workspace: Path, config_file: Path, provider: ProviderServer
) -> None:
    run = run_script(workspace, "-c", str(config_file), "-n", "1", env={"STUBBORN": "1"})
    assert (run.code, run.stdout) == (1, "HEARTBEAT_OK\n")
    assert run.log == [
        "attempt=1 status=failed category=goal_missed cost_usd=0.0",
        "attempt=2 status=failed category=goal_missed cost_usd=0.0",
        "final status=exhausted attempts=2",
    ]
    assert len(run.prompts) == 2
    assert provider.seen == []


def test_heartbeat_ok_with_nothing_open_passes_without_a_model_call(
    workspace: Path, config_file: Path, provider: ProviderServer
) -> None:
    (workspace / "HEARTBEAT.md").write_text("# Every hour\n\n- [x] Rotate the logs\n")
    run = run_script(workspace, "-c", str(config_file))
    assert (run.code, run.stdout) == (0, "HEARTBEAT_OK\n")
    assert run.log == [
        "attempt=1 status=passed category=null cost_usd=0.0",
        "final status=passed attempts=1",
    ]
    assert provider.seen == []


def test_a_judge_error_delivers_the_report_failed_open(
    workspace: Path, config_file: Path, provider: ProviderServer
) -> None:
    provider.push(Step(text=None, status=500, body=ANTHROPIC.error(500, "overloaded")))
    run = run_script(workspace, "-c", str(config_file))
    assert (run.code, run.stdout) == (0, REPORT + "\n")
    assert run.log[1] == "attempt=2 status=failed_open category=null cost_usd=0.0"
    assert run.log[2].startswith("attempt=2 replyguard heartbeat: failed open (judge_error, ")
    assert "overloaded" in run.log[2]
    assert run.log[3:] == ["final status=failed_open attempts=2"]


def test_an_agent_failing_on_a_retry_delivers_the_previous_reply(
    workspace: Path, config_file: Path
) -> None:
    run = run_script(workspace, "-c", str(config_file), env={"BREAK_ON": "2"})
    assert (run.code, run.stdout) == (0, "HEARTBEAT_OK\n")
    assert run.log[-1] == "final status=failed_open reason=agent_error attempts=2"


def test_an_agent_failing_its_first_run_stops_with_its_exit_status(
    workspace: Path, config_file: Path
) -> None:
    run = run_script(workspace, "-c", str(config_file), env={"BREAK_ON": "1"})
    assert (run.code, run.stdout, run.log) == (3, "", ["attempt=1 status=agent_failed exit=3"])


def test_a_config_error_stops_with_exit_2_and_logs_the_key(workspace: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"maxAtempts": 2}), encoding="utf-8")
    run = run_script(workspace, "-c", str(bad))
    assert (run.code, run.stdout, len(run.prompts)) == (2, "", 1)
    assert run.log[0].startswith("attempt=1 status=error exit=2: ")
    assert "maxAtempts" in run.log[0]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        pytest.param([], "usage: heartbeat.sh -w WORKSPACE", id="nothing"),
        pytest.param(["-w", "."], "usage: heartbeat.sh -w WORKSPACE", id="no-agent"),
        pytest.param(["-w", ".", "-n", "two", "true"], "-n takes a whole number", id="bad-n"),
    ],
)
def test_bad_usage_exits_2_with_a_message(arguments: list[str], message: str) -> None:
    result = subprocess.run(
        ["sh", str(SCRIPT), *arguments], capture_output=True, text=True, timeout=10, check=False
    )
    assert (result.returncode, result.stdout) == (2, "")
    assert message in result.stderr


def test_the_readme_crontab_line_runs_the_script_with_a_workspace_and_a_config() -> None:
    readme = (EXAMPLE / "README.md").read_text(encoding="utf-8")
    block = readme.split("```crontab\n", 1)[1].split("\n```", 1)[0]
    (line,) = block.splitlines()
    fields = line.split()
    assert all(re.fullmatch(r"[\d*/,-]+", field) for field in fields[:5])
    command = fields[5:]
    script = next(i for i, part in enumerate(command) if part.endswith("heartbeat.sh"))
    assert {"-w", "-c"} <= set(command[script:])


def test_a_judge_configuration_error_is_logged_and_the_report_delivered(
    workspace: Path, tmp_path: Path, provider: ProviderServer
) -> None:
    config = tmp_path / "unset-key.json"
    settings = {"model": ANTHROPIC.judge_model, "apiKey": "env:REPLYGUARD_TEST_NEVER_SET"}
    config.write_text(json.dumps({**settings, "apiBase": provider.url}), encoding="utf-8")
    (workspace / "HEARTBEAT.md").write_text("# Every hour\n\n- [x] done\n", encoding="utf-8")
    workspace.joinpath("agent.sh").write_text(f"#!/bin/sh\ncat >/dev/null\necho '{REPORT}'\n")
    (workspace / "prompts.log").write_text("")
    run = run_script(workspace, "-c", str(config))
    assert (run.code, run.stdout) == (0, REPORT + "\n")
    assert run.log[0].startswith("attempt=1 status=failed_open")
    # An unset key is found before any call (missing_credentials), and the line says so.
    assert run.log[1].startswith("attempt=1 replyguard heartbeat: failed open (missing_credentials")
    assert "REPLYGUARD_TEST_NEVER_SET is not set" in run.log[1]
    assert provider.seen == []
