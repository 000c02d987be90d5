"""Precision and recall of the claims check over its labelled corpus.

``tests/fixtures/claims_corpus.jsonl`` holds one reply a line: ``text``; ``claim``, whether it
claims an action; ``action``, the verb form the check must report for a claim (as written,
lower-cased), or the action a near-miss comes near to (``null`` when none); ``kind``, the group
of the first batch (``null`` in the later ones); ``written``, ``with`` the check, or after it
(``after-1``, ``after-2``: read by it once before it was tuned on them). Every reply is read
with an empty tool ledger, so a claim must be found and a near-miss must not.

Run with ``-s`` to see the figures and each miss:
``python -m pytest -s tests/checks/test_claims_corpus.py``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from replyguard.checks.claims import ClaimCheck

CORPUS = Path(__file__).parent.parent / "fixtures" / "claims_corpus.jsonl"
PRECISION_FLOOR = 0.98
RECALL_FLOOR = 0.95
SEEDS = ("Done. Note posted.", "PDF saved to <path>.", "Email sent.")


def rows() -> list[dict[str, Any]]:
    return [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines()]


def test_the_corpus_is_large_labelled_and_holds_the_seeds() -> None:
    corpus = rows()
    texts = [row["text"] for row in corpus]
    assert len(texts) >= 300 and len(set(texts)) == len(texts)
    assert all(row["action"] for row in corpus if row["claim"])
    assert {row["written"] for row in corpus} == {"with", "after-1", "after-2"}
    assert set(SEEDS) <= {row["text"] for row in corpus if row["claim"]}


def test_precision_and_recall_on_the_corpus() -> None:
    check = ClaimCheck()
    claims = [row for row in rows() if row["claim"]]
    near_misses = [row for row in rows() if not row["claim"]]
    found = [row for row in claims if row["action"] in _verbs(check, row["text"])]
    false = [row for row in near_misses if _verbs(check, row["text"])]
    precision = len(found) / max(1, len(found) + len(false))
    recall = len(found) / len(claims)
    print(
        f"\nclaims corpus: {len(claims)} claims, {len(near_misses)} near-misses; "
        f"precision {precision:.3f}, recall {recall:.3f}"
    )
    for row in claims:
        if row not in found:
            print(f"  missed: {row['text']!r}")
    for row in false:
        print(f"  false claim: {row['text']!r}")
    assert precision >= PRECISION_FLOOR and recall >= RECALL_FLOOR


def _verbs(check: ClaimCheck, text: str) -> list[str]:
    return [claim.verb for claim in check.find_claims(text)]
