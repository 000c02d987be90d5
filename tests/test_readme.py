"""README's two commands come first, and CI runs the second one verbatim."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def readme_commands() -> list[str]:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    start = lines.index("```sh")
    end = lines.index("```", start + 1)
    assert all(not line.strip() or line.startswith("#") for line in lines[:start])
    return lines[start + 1 : end]


def test_readme_starts_with_exactly_two_commands() -> None:
    commands = readme_commands()
    assert len(commands) == 2
    assert commands[0].endswith("replyguard demo")
    assert "pytest" in commands[1]


def test_ci_runs_the_readme_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert readme_commands()[1] in ci
