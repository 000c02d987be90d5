"""scripts/newcomer.py: a newcomer's first hour on a clean clone, each step timed."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from conftest import API_KEY

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "newcomer.py"
STEPS = (
    "clone",
    "README command 1: install + demo",
    "Getting started, each block as a script",
    "check-config config.example.json",
    "FastAPI example offline, one message in Chromium",
    "eval report in Chromium",
)


def newcomer() -> ModuleType:
    spec = importlib.util.spec_from_file_location("newcomer", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_it_runs_the_readmes_first_command_as_written() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    command = newcomer().readme_first_command(ROOT)
    assert command in readme and command.endswith("replyguard demo")
    assert "-c constraints.txt" in command


def test_ci_runs_it_after_the_steps_it_already_had() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    steps = [line for line in ci if line and not line.startswith("#")]
    assert steps[-1] == "python3 scripts/newcomer.py"
    assert ci.index("NO_MKDOCS_2_WARNING=1 .venv/bin/mkdocs build --strict") < len(ci) - 1


def test_its_environment_holds_no_provider_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)  # a developer's own key
    env = newcomer().reader_env(EXTRA="1")
    assert "ANTHROPIC_API_KEY" not in env and env["EXTRA"] == "1"


@pytest.mark.slow
def test_a_newcomers_path_runs_end_to_end(tmp_path: Path) -> None:
    """Minutes: a fresh venv from the lock, the demo, every Getting started block as a script,
    check-config, the FastAPI example in Chromium, the eval report in Chromium."""
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--keep", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    table = done.stdout.split("\nstep", 1)[1].splitlines()
    assert [line[:52].rstrip() for line in table[1:-1]] == list(STEPS)
    assert "FAILED" not in "\n".join(table)
