"""Token counting and token-bounded cutting with tiktoken's ``o200k_base``: the face the
other modules use (``from replyguard.context import _tokens as tokens``).

The tokenizer and counting are ``_encoding``'s, the tokens of a text's ends ``_token_ends``'s;
this module cuts a text to a limit (``Cutter``: the head and tail with a marked gap, or the
head alone) and reports what it kept (``Kept``). A cut's tokens are those of what it kept,
exactly (``Kept.exact``), when its ends could be placed where the tokens add up.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from replyguard.context import _encoding
from replyguard.context import _joins as joins
from replyguard.context._encoding import (
    ENCODING_NAME,
    NotLoaded,
    count,
    encoding,
    loaded,
    size_bound,
    surely_within,
    without_loading,
)
from replyguard.context._token_ends import (
    SAMPLE_CHARS,
    Scan,
    aligned_head,
    aligned_tail,
    head,
    scan,
    tail,
    within,
)

__all__ = [
    "ENCODING_NAME",
    "Cutter",
    "Kept",
    "NotLoaded",
    "count",
    "encoding",
    "fit_ends",
    "fit_head",
    "head",
    "keep_ends",
    "keep_head",
    "loaded",
    "size_bound",
    "surely_within",
    "tail",
    "within",
    "without_loading",
]

# Tokens kept free for a cut marker such as "[… 1,234 characters of the reply cut here …]".
_MARKER_ROOM = 24
# Tokens beyond a limit that two separately tokenized windows must hold to prove a text is
# over it (``Cutter._surely_over``).
_PROOF = 8


@dataclass(frozen=True, slots=True)
class Kept:
    """What a cut kept, and its tokens.

    ``tokens`` is the exact count when ``exact``. Otherwise it is the UTF-8 bound when not
    ``counted`` (the text was proved to fit without tokenizing it), and for a cut whose ends
    could not be placed where the tokens add up (``_joins``), the sum of its head's, marker's
    and tail's tokens, which BPE may merge a token or so differently.
    """

    text: str
    tokens: int
    counted: bool
    cut: bool = False
    changed: bool = False
    """A ``Cutter``'s ``clean`` changed what was kept."""
    span: tuple[int, int] | None = None
    """For a cut: how many characters of the original's start and of its end were kept."""
    exact: bool = False
    """``tokens`` is the text's exact count."""


def _same(text: str) -> str:
    return text


class Cutter:
    """Cuts one text to a limit, and again to smaller ones, tokenizing each end once.

    A smaller cut of the same text takes its head and tail from the tokens the first cut
    scanned; only a larger limit scans again. ``clean`` (default: none) rewrites what is kept,
    the head and the tail each on its own, before the cut marker joins them; when it changes
    a piece, the result is ``Kept(..., counted=False, changed=True)`` with the UTF-8 bound as
    its tokens, and may be over the limit.
    """

    __slots__ = ("_clean", "_head", "_tail", "text")

    def __init__(self, text: str, clean: Callable[[str], str] = _same) -> None:
        self.text = text
        self._clean = clean
        self._head: Scan | None = None
        self._tail: Scan | None = None

    def cleaning(self, clean: Callable[[str], str]) -> Cutter:
        """A cutter of the same text with ``clean``, reusing the tokens this one scanned."""
        other = Cutter(self.text, clean)
        other._head, other._tail = self._head, self._tail
        return other

    def _scan(self, limit: int, *, from_end: bool) -> Scan:
        found = scan(
            self.text, limit, from_end=from_end, known=self._tail if from_end else self._head
        )
        if from_end:
            self._tail = found
        else:
            self._head = found
        return found

    def _kept(
        self, pieces: tuple[str, ...], size: int, *, counted: bool, cut: bool, exact: bool = False
    ) -> Kept:
        """``pieces`` (texts of the original, and markers at odd positions) cleaned and joined;
        ``exact``: ``size`` is the exact count of the pieces joined (before cleaning)."""
        clean = self._clean
        span = None
        if cut:  # the original's start, and (after a marker) its end
            span = (len(pieces[0]), len(pieces[2]) if len(pieces) > 2 else 0)
        if len(pieces) == 1:
            text = clean(pieces[0])
            if text is pieces[0] or text == pieces[0]:
                return Kept(text, size, counted=counted, cut=cut, span=span, exact=exact)
            return Kept(text, size_bound(text), counted=False, cut=cut, changed=True, span=span)
        shown = tuple(piece if index % 2 else clean(piece) for index, piece in enumerate(pieces))
        text = "".join(shown)
        if all(a is b or a == b for a, b in zip(shown, pieces, strict=True)):
            return Kept(text, size, counted=counted, cut=cut, span=span, exact=exact)
        return Kept(text, size_bound(text), counted=False, cut=cut, changed=True, span=span)

    def _fits(self, limit: int) -> Kept | None:
        """``Kept(text)`` when the text fits ``limit`` tokens."""
        text = self.text
        if surely_within(text, limit):
            return self._kept((text,), size_bound(text), counted=False, cut=False)
        found = self._scan(limit, from_end=False)
        if found.whole and len(found.tokens) <= limit:
            return self._kept((text,), len(found.tokens), counted=True, cut=False, exact=True)
        return None

    def ends(self, limit: int, what: str) -> Kept:
        """The text if it fits ``limit`` tokens, else its head and tail with a marked gap."""
        text = self.text
        if limit <= 0:
            return Kept("", 0, counted=True, cut=bool(text))
        if limit < _MARKER_ROOM * 2 or surely_within(text, limit):
            fits = self._fits(limit)
            if fits is not None:
                return fits
        if limit < _MARKER_ROOM * 2:  # no room for a marker: keep what fits
            return self._start(self._scan(limit, from_end=False).tokens, limit)
        budget = limit - _MARKER_ROOM
        tail_size = budget - budget // 2
        if self._likely_within(limit) or not self._surely_over(limit, tail_size):
            fits = self._fits(limit)
            if fits is not None:
                return fits
        tokens = self._scan(limit - tail_size + _PROOF, from_end=False).tokens
        start, start_size = aligned_head(text, tokens, budget // 2)
        end_tokens = self._scan(tail_size, from_end=True).tokens
        end, end_size = aligned_tail(text, end_tokens, budget - budget // 2)
        gap = max(len(text) - len(start) - len(end), 0)
        marker = f"\n[… {gap:,} characters of the {what} cut here …]\n"
        pieces = (start, marker, end)
        if start_size is not None and end_size is not None:
            size = joins.joined_count(((start, start_size), (marker, None), (end, end_size)), count)
            return self._kept(pieces, size, counted=True, cut=True, exact=True)
        size = min(len(tokens), budget // 2) + min(len(end_tokens), tail_size)
        return self._kept(pieces, size + count(marker), counted=True, cut=True)

    def _start(self, tokens: list[int], limit: int) -> Kept:
        """The start that the first ``limit`` of ``tokens`` hold, alone: a cut with no room
        for a marker."""
        start, size = aligned_head(self.text, tokens, limit)
        if size is not None:
            return self._kept((start,), size, counted=True, cut=True, exact=True)
        return self._kept((start,), min(len(tokens), limit), counted=True, cut=True)

    def _likely_within(self, limit: int) -> bool:
        """Whether the text's start (``SAMPLE_CHARS`` tokenized) suggests the whole is at most
        a quarter over ``limit``: then counting it is cheaper than proving it over."""
        if self._head is None:
            sample = self.text[:SAMPLE_CHARS]
            tokens = _encoding.encoding().encode_ordinary(sample)
            self._head = Scan(tokens, len(sample) == len(self.text), len(sample))
        head = self._head
        return head.whole or len(self.text) * len(head.tokens) <= head.size * limit * 1.25

    def _surely_over(self, limit: int, tail_size: int) -> bool:
        """True when the two windows a head-and-tail cut needs prove the text is over
        ``limit``: a head holding ``limit - tail_size + _PROOF`` tokens and a tail holding
        ``tail_size``, apart. Tokenizing the middle to learn that would cost as much again.

        Apart, they hold ``_PROOF`` tokens more than the limit; tokenizing the text whole can
        join a token or two where they were split from it, never that many.
        """
        head_wanted = limit - tail_size + _PROOF
        head = self._scan(head_wanted, from_end=False)
        if head.whole or len(head.tokens) < head_wanted + 2:
            return False
        tail = self._scan(tail_size, from_end=True)
        apart = head.size + tail.size <= len(self.text)
        return apart and not tail.whole and len(tail.tokens) >= tail_size + 2

    def head(self, limit: int, what: str) -> Kept:
        """The text if it fits ``limit`` tokens, else its start with a marked cut."""
        text = self.text
        if limit <= 0:
            return Kept("", 0, counted=True, cut=bool(text))
        fits = self._fits(limit)
        if fits is not None:
            return fits
        tokens = self._scan(limit, from_end=False).tokens
        if limit < _MARKER_ROOM * 2:
            return self._start(tokens, limit)
        keep = limit - _MARKER_ROOM
        start, start_size = aligned_head(text, tokens, keep)
        marker = f"\n[… {len(text) - len(start):,} more characters of the {what} cut here …]"
        if start_size is not None:
            size = joins.joined_count(((start, start_size), (marker, None)), count)
            return self._kept((start, marker), size, counted=True, cut=True, exact=True)
        size = min(len(tokens), keep) + count(marker)
        return self._kept((start, marker), size, counted=True, cut=True)


def fit_ends(text: str, limit: int, what: str) -> Kept:
    """``text`` if it fits ``limit`` tokens, else its head and tail with a marked gap."""
    return Cutter(text).ends(limit, what)


def fit_head(text: str, limit: int, what: str) -> Kept:
    """``text`` if it fits ``limit`` tokens, else its start with a marked cut."""
    return Cutter(text).head(limit, what)


def keep_ends(text: str, limit: int, what: str) -> str:
    """``text`` if it fits ``limit`` tokens, else its head and tail with a marked gap."""
    return fit_ends(text, limit, what).text


def keep_head(text: str, limit: int, what: str) -> str:
    """``text`` if it fits ``limit`` tokens, else its start with a marked cut."""
    return fit_head(text, limit, what).text
