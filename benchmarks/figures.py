"""The ``figures`` check over its corpus: false-FAIL and catch rates, and its time per reply
beside the ``claims`` check's on the same replies (measured interleaved, in one run).

``tests/fixtures/figures_corpus.jsonl`` (``scripts/figures_corpus.py``): grounded replies, and
the same replies with one figure altered. A grounded reply that fails is a false FAIL; an
altered one is caught when it fails naming the altered figure.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from pathlib import Path
from typing import Any

from replyguard._records import TurnRecord
from replyguard.checks.claims import ClaimCheck
from replyguard.checks.figures import FigureCheck
from replyguard.types import Reply, Turn

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "figures_corpus.jsonl"


def _cases() -> list[tuple[str, str | None, Turn, Reply]]:
    cases = []
    for line in CORPUS.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        record = TurnRecord.model_validate(row["record"])
        turn = Turn(**{name: getattr(record, name) for name in Turn.model_fields})
        cases.append((row["label"], row["altered"], turn, record.reply))
    return cases


async def measure(rounds: int = 5) -> dict[str, Any]:
    """Rates over the corpus, and the median time per reply of each check (``rounds`` passes
    over the corpus, the two checks alternating reply by reply)."""
    cases = _cases()
    figures, claims = FigureCheck(), ClaimCheck()
    grounded = [c for c in cases if c[0] == "grounded"]
    altered = [c for c in cases if c[0] == "altered"]
    false_fails = 0
    for _, _, turn, reply in grounded:
        false_fails += not (await figures.check(turn, reply)).passed
    caught = 0
    for _, wrong, turn, reply in altered:
        result = await figures.check(turn, reply)
        caught += not result.passed and wrong is not None and wrong in (result.feedback or "")
    mine: list[float] = []
    theirs: list[float] = []
    for _ in range(rounds):
        for _, _, turn, reply in cases:
            started = time.perf_counter()
            await figures.check(turn, reply)
            mine.append(time.perf_counter() - started)
            started = time.perf_counter()
            await claims.check(turn, reply)
            theirs.append(time.perf_counter() - started)
    return {
        "grounded": len(grounded),
        "false_fails": false_fails,
        "altered": len(altered),
        "caught": caught,
        "figures_s": statistics.median(mine),
        "claims_s": statistics.median(theirs),
    }


if __name__ == "__main__":
    print(asyncio.run(measure()))
