"""``replyguard insights`` over a fleet's ledgers: several paths or a glob, merged so that the
totals are the sums of the single-file reports; a glob that matches nothing is a usage error."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from replyguard.cli import main

FIXTURES = Path(__file__).parents[1] / "fixtures"
LEDGERS = (FIXTURES / "ledger_support.jsonl", FIXTURES / "ledger_ops.jsonl")


def report(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main(["insights", "--json", *args]) == 0
    data: dict[str, Any] = json.loads(capsys.readouterr().out)
    return data


def test_several_ledgers_merge_into_totals_that_are_the_sums(
    capsys: pytest.CaptureFixture[str],
) -> None:
    singles = [report(capsys, str(path))["totals"] for path in LEDGERS]
    merged = report(capsys, *map(str, LEDGERS))
    totals = merged["totals"]
    assert totals["turns"] == sum(s["turns"] for s in singles)
    assert totals["feedbacks"] == sum(s["feedbacks"] for s in singles)
    for key in ("costUsd", "judgeCostUsd"):
        assert totals[key] == pytest.approx(sum(s[key] for s in singles), abs=2e-6)
    for key in ("byStatus", "reasons"):
        assert totals[key] == dict(sum((Counter(s[key]) for s in singles), Counter()))
    kinds = {k["name"]: k["turns"] for k in merged["runKinds"]}
    assert sum(kinds.values()) == totals["turns"]
    assert merged["ledger"] == ", ".join(map(str, LEDGERS))


def test_a_glob_reads_every_instance_ledger_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for index, path in enumerate(LEDGERS):
        shutil.copy(path, tmp_path / f"instance-{index}.jsonl")
    pattern = str(tmp_path / "instance-*.jsonl")
    by_glob = report(capsys, pattern)
    by_paths = report(capsys, *map(str, LEDGERS))
    assert by_glob["totals"] == by_paths["totals"]
    # A file named twice (by a path and by the glob) is read once.
    again = report(capsys, str(tmp_path / "instance-0.jsonl"), pattern)
    assert again["totals"] == by_paths["totals"]


def test_skipped_lines_name_their_file_when_there_are_several(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "broken.jsonl"
    broken.write_text("not json\n", encoding="utf-8")
    merged = report(capsys, str(LEDGERS[0]), str(broken))
    assert merged["skippedLineNumbers"] == [f"{broken}:1"]


def test_a_glob_that_matches_nothing_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pattern = str(tmp_path / "nothing-*.jsonl")
    assert main(["insights", str(LEDGERS[0]), pattern]) == 2
    assert f"no ledger file matches {pattern}" in capsys.readouterr().err
