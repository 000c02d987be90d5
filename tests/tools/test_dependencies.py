"""The lock (``constraints.txt``) pins every declared dependency inside its declared range, and
the dependency script reads pyproject.toml and the lock as they are written."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

import check_dependencies

ROOT = check_dependencies.ROOT


def _declared() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    groups = [project["dependencies"], *project["optional-dependencies"].values()]
    return [Requirement(text) for group in groups for text in group]


LOCKED = check_dependencies.read_pins((ROOT / "constraints.txt").read_text(encoding="utf-8"))


@pytest.mark.parametrize("requirement", _declared(), ids=str)
def test_the_lock_pins_each_declared_dependency_inside_its_range(
    requirement: Requirement,
) -> None:
    name = check_dependencies.normalize(requirement.name)
    assert name in LOCKED, f"{name} is declared but not locked: refresh constraints.txt"
    assert requirement.specifier.contains(LOCKED[name], prereleases=True)


def test_the_script_lists_every_declared_dependency_once() -> None:
    names = [check_dependencies.normalize(r.name) for r in _declared()]
    assert check_dependencies.declared() == list(dict.fromkeys(names))


def test_the_script_reads_pins_and_skips_comments() -> None:
    text = "# header\nLiteLLM==1.110.2\nPyYAML==6.0.2  # a comment\n\nsome-tool @ file:///x\n"
    assert check_dependencies.read_pins(text) == {"litellm": "1.110.2", "pyyaml": "6.0.2"}


def test_the_table_has_a_row_per_dependency_and_the_results() -> None:
    runs = [
        check_dependencies.Run("newest", {"litellm": "1.110.2"}, True, "10 passed", 1.0),
        check_dependencies.Run("lowest", {"litellm": "1.80.0"}, False, "1 failed, 9 passed", 1.0),
    ]
    lines = check_dependencies.table(runs, {"litellm": "1.110.2"}).splitlines()
    assert lines[0].split(" | ")[0].strip() == "package"
    assert [c.strip() for c in lines[2].split("|")] == ["litellm", "1.110.2", "1.110.2", "1.80.0"]
    assert "FAILED: 1 failed, 9 passed" in lines[-1]
    assert len(lines) == 2 + len(check_dependencies.declared()) + 1
