"""Editors and type checkers see every field of the values users build: ``Turn``, ``Reply`` and
``RunMeta`` have typed keyword signatures, at run time (``help()``, IPython) and to mypy."""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import BaseModel

from replyguard import Reply, RunMeta, Turn

SNIPPET = """\
from replyguard import Reply, RunMeta, Turn

turn = Turn(user_mesage="Plan a trip to Lisbon.")
reply = Reply(text="Done.", meta=RunMeta(stop_reasn="stop"))
ok = Turn(user_message="Hi", history=[{"role": "user", "content": "Hello"}], heartbeat=True)
"""


@pytest.mark.parametrize("model", [Turn, Reply, RunMeta], ids=lambda m: m.__name__)
def test_the_signature_lists_every_field_as_a_typed_keyword(model: type[BaseModel]) -> None:
    parameters = inspect.signature(model).parameters
    assert list(parameters) == list(model.model_fields)
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in parameters.values())
    assert all(p.annotation is not inspect.Parameter.empty for p in parameters.values())


def test_the_signature_is_typed_before_pydantic_builds_the_model() -> None:
    """The models are built on first use; what help() shows before that is typed too."""
    program = (
        "import inspect, replyguard\n"
        "assert not replyguard.Turn.__pydantic_complete__\n"
        "print(inspect.signature(replyguard.Turn))\n"
        "print(inspect.signature(replyguard.Reply))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True, timeout=60
    )
    turn, reply = result.stdout.splitlines()
    assert turn.startswith("(*, user_message: str, history: list[dict[str, typing.Any]] = ")
    assert reply == "(*, text: str, meta: replyguard.RunMeta = <factory>) -> None"


@pytest.mark.slow  # a whole mypy run: about 30 s
def test_mypy_reports_a_misspelt_field(tmp_path: Path) -> None:
    snippet = tmp_path / "snippet.py"
    snippet.write_text(SNIPPET, encoding="utf-8")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--no-incremental",
            "--cache-dir",
            str(tmp_path / "cache"),
            "--config-file",
            "",
            str(snippet),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=tmp_path,
    )
    errors = [line for line in result.stdout.splitlines() if ": error:" in line]
    assert result.returncode == 1, result.stdout + result.stderr
    assert [line.split(": error: ", 1)[1] for line in errors] == [
        'Unexpected keyword argument "user_mesage" for "Turn"; did you mean "user_message"?  '
        "[call-arg]",
        'Unexpected keyword argument "stop_reasn" for "RunMeta"; did you mean "stop_reason"?  '
        "[call-arg]",
    ]


def _documented(page: str, first_column: str) -> list[str]:
    """The backticked names in the first column of the table headed by ``first_column``."""
    lines = (Path(__file__).resolve().parents[1] / "docs" / page).read_text("utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"| {first_column} |"))
    rows = lines[start + 2 :]
    table = rows[: next((i for i, row in enumerate(rows) if not row.startswith("|")), len(rows))]
    return [row.split("|")[1].strip().strip("`") for row in table]


@pytest.mark.parametrize(("model", "first_column"), [(Turn, "field"), (RunMeta, "`RunMeta` field")])
def test_the_docs_page_lists_every_field(model: type[BaseModel], first_column: str) -> None:
    assert _documented("turns.md", first_column) == list(model.model_fields)
