"""The wheel ships the prompts and ``py.typed``, and an installed wheel loads its prompts."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(out),
            str(ROOT),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (built,) = out.glob("replyguard-*.whl")
    return built


@pytest.mark.slow  # builds the wheel with hatchling in a subprocess: .ci/run's slow step
def test_wheel_contains_prompts_and_type_marker(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    for template in ("judge_system.j2", "judge_context.j2", "feedback.j2"):
        assert f"replyguard/prompts/{template}" in names
    assert "replyguard/py.typed" in names


@pytest.mark.slow  # installs the wheel into a venv: .ci/run's slow step
def test_installed_wheel_renders_its_own_prompts(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "-q",
            "--target",
            str(target),
            str(wheel),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    script = (
        "import replyguard, replyguard._templates as p; "
        "print(p.prompts_dir()); print(len(p.render('judge_system.j2')) > 100)"
    )
    env = {**os.environ, "PYTHONPATH": str(target)}
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True
    )
    where, rendered = result.stdout.split()
    assert Path(where).is_relative_to(target) and rendered == "True"


def test_the_json_checks_schema_library_is_a_declared_dependency() -> None:
    """The JSON check imports jsonschema: it must not depend on litellm happening to need it."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    declared = {re.split(r"[\s<>=!~;\[]", dep, maxsplit=1)[0] for dep in project["dependencies"]}
    assert "jsonschema" in declared
    assert "from jsonschema import" in (ROOT / "src/replyguard/checks/json_check.py").read_text()
