"""Precision and recall of the claims check over its labelled corpus (``claims_corpus.py``).

Run with ``-s`` to see the figures:
``python -m pytest -s tests/checks/test_claims_corpus.py``.
"""

from __future__ import annotations

from claims_corpus import CLAIMS, NOT_CLAIMS

from replyguard.checks.claims import ClaimCheck

PRECISION_FLOOR = 0.98
RECALL_FLOOR = 0.95
SEEDS = ("Done. Note posted.", "PDF saved to <path>.", "Email sent.")


def test_the_corpus_is_large_and_holds_the_seeds() -> None:
    texts = [text for text, _ in CLAIMS + NOT_CLAIMS]
    assert len(texts) >= 300 and len(set(texts)) == len(texts)
    assert set(SEEDS) <= {text for text, _ in CLAIMS}


def test_precision_and_recall_on_the_corpus() -> None:
    check = ClaimCheck()
    found = [text for text, action in CLAIMS if action in _verbs(check, text)]
    missed = [text for text, _ in CLAIMS if text not in found]
    false = [text for text, _ in NOT_CLAIMS if _verbs(check, text)]
    precision = len(found) / max(1, len(found) + len(false))
    recall = len(found) / len(CLAIMS)
    print(
        f"\nclaims corpus: {len(CLAIMS)} claims, {len(NOT_CLAIMS)} near-misses; "
        f"precision {precision:.3f}, recall {recall:.3f}"
    )
    for text in missed:
        print(f"  missed: {text!r}")
    for text in false:
        print(f"  false claim: {text!r}")
    assert precision >= PRECISION_FLOOR and recall >= RECALL_FLOOR


def _verbs(check: ClaimCheck, text: str) -> list[str]:
    return [claim.verb for claim in check.find_claims(text)]
