"""The figures check over its corpus: the false-FAIL rate on grounded replies and the catch rate
on the same replies with one figure altered.

``tests/fixtures/figures_corpus.jsonl`` is written by ``scripts/figures_corpus.py`` (seeded;
see its doc for what it varies). Run with ``-s`` to see the figures:
``python -m pytest -s tests/checks/test_figures_corpus.py``. The benchmark table
(``benchmarks/run.py --only figures``) prints the same figures.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

from replyguard._records import TurnRecord
from replyguard.checks.figures import FigureCheck
from replyguard.types import Reply, Turn

ROOT = Path(__file__).resolve().parent.parent.parent
CORPUS = ROOT / "tests" / "fixtures" / "figures_corpus.jsonl"
FALSE_FAIL_CEILING = 0.02
CATCH_FLOOR = 0.95


def rows() -> list[dict[str, Any]]:
    return [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines()]


def turn_and_reply(row: dict[str, Any]) -> tuple[Turn, Reply]:
    record = TurnRecord.model_validate(row["record"])
    turn = Turn(**{name: getattr(record, name) for name in Turn.model_fields})
    return turn, record.reply


def test_the_corpus_is_what_its_script_writes() -> None:
    spec = importlib.util.spec_from_file_location(
        "figures_corpus", ROOT / "scripts" / "figures_corpus.py"
    )
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    written = script.generated(260) + script.written()
    assert [json.loads(json.dumps(row, ensure_ascii=False)) for row in written] == rows()


def test_the_corpus_is_large_and_balanced() -> None:
    corpus = rows()
    labels = [row["label"] for row in corpus]
    assert labels.count("grounded") >= 250 and labels.count("altered") >= 250
    assert {row["group"] for row in corpus} == {"generated", "written", "written-after"}
    assert all(row["altered"] for row in corpus if row["label"] == "altered")


async def test_false_fails_stay_under_two_percent_and_the_catch_rate_is_high() -> None:
    check = FigureCheck()
    grounded = altered = false_fails = caught = 0
    for row in rows():
        turn, reply = turn_and_reply(row)
        result = await check.check(turn, reply)
        if row["label"] == "grounded":
            grounded += 1
            false_fails += not result.passed
        else:
            altered += 1
            caught += not result.passed and row["altered"] in (result.feedback or "")
    print(f"\nfalse FAIL {false_fails}/{grounded}, caught {caught}/{altered}")
    # One known false FAIL: "£58" for two £29 tickets, a figure the reply derives.
    assert false_fails / grounded < FALSE_FAIL_CEILING
    assert caught / altered >= CATCH_FLOOR
