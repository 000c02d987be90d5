"""Write ``tests/fixtures/figures_corpus.jsonl``: grounded replies, and the same replies with
one figure altered, for the ``figures`` check's false-FAIL and catch rates.

    python scripts/figures_corpus.py

Each line: ``label`` (``grounded`` or ``altered``), ``altered`` (the altered figure as the
reply writes it, or null), ``group`` (``generated`` or ``written``) and ``record``: a turn as
JSON (the CLI's format: ``userMessage``, ``history``, ``evidence``, ``reply`` with its
``meta.toolCalls`` and their ``result``).

The generated part varies where each fact lives (a tool result as JSON or text, retrieved
context, the user's message, a tool message of the history) and how the reply writes it (a
different currency notation or date format than the source's, a shortened link, a relative
path, an ID in another case). The written part is replies written by hand around distractors
that are not figures (versions, times, counts, percentages, "24/7", "COVID-19", code). Each
altered reply changes one figure the way a model gets one wrong: a digit, a day, the currency,
a character of an ID or an address. Seeded: the same file every run.

The generator is ``figures_generated.py``'s; the hand-written replies are kept as data in
``figures_written.toml``.
"""

from __future__ import annotations

import json
import random
import sys
import tomllib
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import figures_generated as gen

OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "figures_corpus.jsonl"
WRITTEN = Path(__file__).resolve().with_name("figures_written.toml")


def generated(count: int, seed: int = 40) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    rows: list[dict[str, Any]] = []
    for _ in range(count):
        facts = gen.facts(rng)
        place = gen.place(facts, rng)
        reply = gen.write(facts, random.Random(rng.random()))
        rows.append(_row("grounded", None, "generated", place, reply))
        victim = rng.choice(facts)
        wrong = gen.altered(victim, rng)
        bad = reply.replace(victim["reply"], wrong, 1)
        if bad != reply:
            rows.append(_row("altered", wrong, "generated", place, bad))
    return rows


def _row(
    label: str, altered: str | None, group: str, place: dict[str, Any], reply: str
) -> dict[str, Any]:
    record = {k: v for k, v in place.items() if k != "calls"}
    record["reply"] = {"text": reply, "meta": {"toolCalls": place["calls"]}}
    return {"label": label, "altered": altered, "group": group, "record": record}


def written() -> list[dict[str, Any]]:
    tables = tomllib.loads(WRITTEN.read_text(encoding="utf-8"))
    rows: list[dict[str, Any]] = []
    for group in ("written", "written-after"):
        for entry in tables[group]:
            place: dict[str, Any] = {"userMessage": entry["user"], "history": []}
            if entry["evidence"]:
                place["evidence"] = entry["evidence"]
            place["calls"] = [
                {"name": "lookup", "arguments": {}, "result": r} for r in entry["results"]
            ]
            reply, figure, wrong = entry["reply"], entry["figure"], entry["wrong"]
            rows.append(_row("grounded", None, group, place, reply))
            rows.append(_row("altered", wrong, group, place, reply.replace(figure, wrong, 1)))
    return rows


def main() -> None:
    rows = generated(260) + written()
    OUT.write_text(
        "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8"
    )
    labels = [row["label"] for row in rows]
    print(f"wrote {OUT}: {labels.count('grounded')} grounded, {labels.count('altered')} altered")


if __name__ == "__main__":
    main()
