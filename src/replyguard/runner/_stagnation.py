"""When a retry will not help: the same reply again, or the same failure again."""

from __future__ import annotations

from replyguard.types import Attempt


def normal(text: str) -> str:
    """``text`` with runs of whitespace one space, case folded: the same reply, compared."""
    return " ".join(text.split()).casefold()


def stagnant(previous: Attempt | None, current: Attempt) -> bool:
    """The same category failed again with the same feedback: retrying will not help.

    The judge's FAIL repeated is enough. A deterministic FAIL (a check's, or the injection
    rule's: ``decisive``) may repeat a coarse message ("1 test failed") while the agent's
    replies change and get closer, so it counts only when the reply did not change either
    (the same text once whitespace is normalised).
    """
    if previous is None:
        return False
    before, now = previous.verdict, current.verdict
    if before is None or now is None or before.passed or now.passed:
        return False
    if before.category != now.category or normal(before.feedback or "") != normal(
        now.feedback or ""
    ):
        return False
    return not now.decisive or spaced(previous.reply.text) == spaced(current.reply.text)


def spaced(text: str) -> str:
    """``text`` with every run of whitespace one space, and none at its ends."""
    return " ".join(text.split())
