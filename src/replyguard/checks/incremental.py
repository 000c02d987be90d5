"""Checks that decide on a prefix of a reply, while it is streamed.

A check declares itself incremental by having a ``scanner(turn)`` method: it returns a fresh
``PrefixScanner`` for one streamed reply (or None when nothing it checks can be decided on a
prefix). ``Verifier.stream`` feeds the scanner each new piece of text as it arrives; a scanner
looks at that piece plus the few characters before it that a match can span (never the whole
text again), so the work is linear in the reply: ``scanned`` counts the characters it looked
at. The first failing ``CheckResult`` it returns cuts the stream short: the agent's stream is
closed and the retry starts with the feedback, without a judge call. The full check still runs
on every complete reply, as always.

A scanner may also hold text back: ``pending_from`` is the offset (in characters from the
start of the reply) of the first character that may belong to a violation not yet decided (a
forbidden phrase that has arrived up to its last letter, whose next character decides whether
it is a whole word). ``"release"`` mode shows nothing from there on until it is decided.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol, runtime_checkable

from replyguard.types import CheckResult, Turn

__all__ = ["IncrementalCheck", "PrefixScanner", "scanners_for"]


@runtime_checkable
class PrefixScanner(Protocol):
    """One streamed reply's incremental check."""

    scanned: int
    """Characters looked at so far (new text plus overlap), to show the work is linear."""
    pending_from: int | None
    """Offset of the first character that may belong to an undecided violation, or None."""

    def feed(self, text: str) -> CheckResult | None:
        """The next piece of the reply; a failing result when the reply so far breaks the
        check for certain (whatever follows), else None."""
        ...

    def finish(self) -> CheckResult | None:
        """The reply is complete: a failing result for any violation still undecided."""
        ...


@runtime_checkable
class IncrementalCheck(Protocol):
    """A check that can decide (part of) its verdict on a prefix of the reply."""

    name: str

    def scanner(self, turn: Turn) -> PrefixScanner | None:
        """A fresh scanner for one reply of ``turn``, or None when nothing applies."""
        ...


def scanners_for(checks: Iterable[Any], turn: Turn) -> list[tuple[str, PrefixScanner]]:
    """A fresh scanner, with its check's name, for every incremental check in ``checks``."""
    found: list[tuple[str, PrefixScanner]] = []
    for check in checks:
        make = getattr(check, "scanner", None)
        if not callable(make):
            continue
        scanner = make(turn)
        if scanner is not None:
            found.append((check.name, scanner))
    return found
