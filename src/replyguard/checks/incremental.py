"""Checks that decide on a prefix of a reply, while it is streamed.

A check declares itself incremental by having a ``scanner(turn)`` method: it returns a fresh
``PrefixScanner`` for one streamed reply (or None when nothing it checks can be decided on a
prefix). ``Verifier.stream`` feeds the scanner each new piece of text as it arrives; a scanner
looks at that piece plus the few characters before it that a match can span (never the whole
text again; for a pattern of unbounded length, a window of the latest characters), so the work
is linear in the reply: ``scanned`` counts the characters it looked at. The first failing
``CheckResult`` it returns cuts the stream short: the agent's stream is closed and the retry
starts with the feedback, without a judge call. The full check still runs on every complete
reply, as always.

A scanner may also hold text back: ``pending_from`` is the offset (in characters from the start
of the reply) of the first character that may belong to a violation not yet decided (a
forbidden phrase that has arrived up to its last letter, whose next character decides whether
it is a whole word; the start of what may still become a match of a windowed pattern).
``"release"`` mode shows nothing from there on until it is decided.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from replyguard.types import CheckResult, Turn

__all__ = ["Bounded", "IncrementalCheck", "PrefixScanner", "SlidingSearch", "scanners_for"]


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


# -- searching bounded patterns in a text that arrives in pieces ------------------------------

_RUN = re.compile(r"\s\s+")
"""A run of whitespace that a collapsing window shortens to its first character (written with
a single ``\\s`` first, so ``re`` skips to a whitespace character at C speed)."""


@dataclass(frozen=True, slots=True)
class Bounded:
    """A pattern searched in a text that arrives in pieces, over the last ``width`` characters:
    all its matches when they have a known reach (``replyguard.checks.patterns.reach``), else
    those that fit there (a window of recent text)."""

    pattern: Any
    """Compiled (``re`` or ``regex``; ``regex`` when ``holds_partial``); searched with
    ``search(text, pos)``."""
    width: int
    """The longest match (looked for)."""
    context: int
    """Characters a look-around may see on either side of a match (at least 1); when ``ahead``
    is given, before it only (at least 1: then an anchor to the text's start never matches at
    the window's)."""
    ahead: int | None = None
    """Characters after a match that decide it (a look-ahead, a word boundary, ``$``); a match
    nearer the end of the text so far is pending. None: ``context``."""
    holds_partial: bool = False
    """Text that could still become the start of a match within ``width`` (``regex``'s partial
    match at the end of the text so far) is pending too, so no match that fits is released."""
    starts: Any = None
    """A compiled pattern that finds every character a match can begin with (a class without
    case folding, so ``re`` scans for it at C speed), or None: a window in which it finds none
    is not searched, and the search starts at the first it finds. Used by a search of one
    pattern that does not ``hold_partial``, with no ``search`` of its own."""


Search = Callable[..., Any]
"""How a pattern is searched: ``(pattern, text, pos, partial=False) -> match | None`` (may
raise); by default ``pattern.search(text, pos)`` (``partial`` only for ``holds_partial``
patterns, which are ``regex`` ones)."""


class SlidingSearch:
    """Bounded patterns searched in a text fed piece by piece, each piece with just the overlap
    a match can span: the window is the last ``width + context + ahead`` characters before the
    piece, plus the piece. A match counts once ``ahead`` characters follow it (they decide
    a look-ahead or a word boundary) or the text has ended; until then it is pending, and
    ``pending_from`` says where it starts. For a pattern that ``holds_partial``, so is a partial
    match at the end of the text (one that more text could complete).

    ``collapse``: search a view of the text in which every run of whitespace is its first
    character (so a pattern written for single spaces finds words however far apart); offsets
    reported are still those of the text itself.
    """

    __slots__ = (
        "_anchors",
        "_base",
        "_collapse",
        "_ends_in_space",
        "_keep",
        "_plain",
        "_plans",
        "_removed",
        "_search",
        "_seen",
        "_starts",
        "_tail",
        "pending_from",
        "scanned",
    )

    def __init__(
        self, patterns: Sequence[Bounded], *, collapse: bool = False, search: Search | None = None
    ) -> None:
        plans = [(p, p.context if p.ahead is None else p.ahead) for p in patterns]
        self._plans = tuple(
            (p.pattern, p.width + ahead, ahead, p.width if p.holds_partial else 0)
            for p, ahead in plans
        )
        self._keep = max(p.width + p.context + ahead for p, ahead in plans)
        # One pattern without partial matches, searched by itself (the forbidden phrases):
        # each piece is one search, with no loop over plans.
        self._plain = len(self._plans) == 1 and not self._plans[0][3] and search is None
        self._starts = patterns[0].starts if self._plain else None
        self._collapse = collapse
        self._search = search
        self._tail = ""
        self._base = 0  # view offset of the tail's first character
        self._seen = 0  # view characters fed so far
        self._ends_in_space = False
        self._removed = 0  # characters the view dropped so far
        self._anchors: list[tuple[int, int]] = []  # (view offset, dropped before it)
        self.scanned = 0
        self.pending_from: int | None = None

    def feed(self, text: str) -> tuple[int, Any] | None:
        """The next piece: ``(index of the pattern, match)`` for a match that counts."""
        if self._collapse and text:
            if (self._ends_in_space and text[0].isspace()) or _RUN.search(text) is not None:
                text = self._collapsed(text)
            else:
                self._ends_in_space = text[-1].isspace()
        window = self._tail + text
        before = self._seen
        self._seen = before + len(text)
        if self._plain:
            found = self._scan_plain(window, before)
        else:
            found = self._scan(window, before, final=False)
        cut = len(window) - self._keep
        if cut > 0:
            self._tail, self._base = window[cut:], self._base + cut
            if self._anchors and self._anchors[0][0] < self._base:
                self._prune()
        else:
            self._tail = window
        return found

    def finish(self) -> tuple[int, Any] | None:
        """The text has ended: any pending match counts."""
        return self._scan(self._tail, self._seen, final=True)

    def _scan(self, window: str, before: int, *, final: bool) -> tuple[int, Any] | None:
        self.pending_from = None
        end, base, search = len(window), self._base, self._search
        for index, (pattern, reach, ahead, span) in enumerate(self._plans):
            # Matches that counted earlier would have stopped the text; those left to find
            # end in what is new or in the last ``ahead`` characters before it.
            pos = before - reach - base
            if pos < 0:
                pos = 0
            self.scanned += end - pos
            if span and not final:
                match, held = self._partial(pattern, window, pos, ahead, span)
            else:
                held = None
                match = (
                    pattern.search(window, pos) if search is None else search(pattern, window, pos)
                )
                if match is not None and not final and match.end() + ahead > end:
                    held = match.start()
                    match = None
            if match is not None:
                return index, match
            if held is not None:
                offset = self._text_offset(base + held)
                if self.pending_from is None or offset < self.pending_from:
                    self.pending_from = offset
        return None

    def _scan_plain(self, window: str, before: int) -> tuple[int, Any] | None:
        """``_scan`` of a piece for the one pattern of a ``_plain`` search."""
        pattern, reach, ahead, _ = self._plans[0]
        pos = before - reach - self._base
        if pos < 0:
            pos = 0
        end = len(window)
        self.scanned += end - pos
        if self._starts is not None:  # no character a match begins with: no match
            first = self._starts.search(window, pos)
            if first is None:
                self.pending_from = None
                return None
            pos = first.start()
        match = pattern.search(window, pos)
        if match is not None and match.end() + ahead > end:
            self.pending_from = self._text_offset(self._base + match.start())
            return None
        self.pending_from = None
        return None if match is None else (0, match)

    def _find(self, pattern: Any, window: str, pos: int, *, partial: bool = False) -> Any:
        if self._search is not None:
            return self._search(pattern, window, pos, partial=partial)
        return pattern.search(window, pos, partial=True) if partial else pattern.search(window, pos)

    def _partial(
        self, pattern: Any, window: str, pos: int, ahead: int, span: int
    ) -> tuple[Any, int | None]:
        """(a match that counts, or None; where text that may still become one starts)."""
        end = len(window)
        match = self._find(pattern, window, pos, partial=True)
        if match is None:
            return None, None
        if match.partial:  # nothing matches; this may, with more text (at the end: nothing)
            return None, (match.start() if match.start() < end else None)
        pending = match.start()
        while match is not None:  # a pending match may hide a later one that counts
            if match.end() + ahead <= end:
                return match, None
            self.scanned += end - match.start() - 1
            match = self._find(pattern, window, match.start() + 1)
        # A partial match is not reported past a complete one: look for one before it alone.
        early = self._find(pattern, window[:pending], pos, partial=True)
        self.scanned += pending - pos
        if early is None or (early.partial and early.start() >= pending):
            return None, pending
        if early.partial:
            return None, early.start()
        return None, max(pos, min(early.start(), end - span))  # unknown: what may be one

    # -- the collapsed view --------------------------------------------------------------

    def _collapsed(self, text: str) -> str:
        if not text:
            return text
        continued = self._ends_in_space and text[0].isspace()
        self._ends_in_space = text[-1].isspace()
        if not continued and _RUN.search(text) is None:
            return text
        pieces: list[str] = []
        at = 0
        view = self._seen  # view offset of the piece's first character
        if continued:
            lead = len(text) - len(text.lstrip())
            self._drop(view, lead)
            at = lead
        for run in _RUN.finditer(text, at):
            pieces.append(text[at : run.start() + 1])
            view += run.start() + 1 - at
            self._drop(view, run.end() - run.start() - 1)
            at = run.end()
        pieces.append(text[at:])
        return "".join(pieces)

    def _drop(self, view: int, count: int) -> None:
        if count:
            self._removed += count
            self._anchors.append((view, self._removed))

    def _prune(self) -> None:
        """Forget the anchors before the window, but the last of them (its count holds)."""
        keep = 0
        while keep + 1 < len(self._anchors) and self._anchors[keep + 1][0] <= self._base:
            keep += 1
        del self._anchors[:keep]

    def _text_offset(self, view: int) -> int:
        """The offset in the text itself of view offset ``view``."""
        if not self._anchors:
            return view
        index = bisect.bisect_right(self._anchors, (view, float("inf"))) - 1
        return view + (self._anchors[index][1] if index >= 0 else 0)
