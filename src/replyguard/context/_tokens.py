"""Token counting and token-bounded cutting with tiktoken's ``o200k_base``.

Cutting never tokenizes more than it keeps (plus a margin): a 1M-character reply cut to 3,000
tokens costs about as much as a 3,000-token one. The cheap proof that a text fits is its size:
a text never has more tokens than UTF-8 bytes, and never more bytes than 4 per character.
Characters alone are not a bound (one emoji can be several tokens). User content is counted
with ``encode_ordinary`` so text such as ``<|endoftext|>`` is counted as text, never refused.

How much of a text to tokenize for ``n`` tokens is measured, not guessed: a first piece of
``_SAMPLE_CHARS`` characters gives the text's characters per token (prose runs at 4 to 6, JSON
at 3, CJK at about 1), and the next piece is sized for ``n`` tokens at that density with 5 %
to spare. A piece that grows tokenizes only what it adds: the tokens of the shorter piece are
kept up to a point near its end where the tokens on either side add up (``_joins``). Text
sparser than ``_CHARS_PER_TOKEN_CEILING`` characters a token is padding (long runs of one
character, which tiktoken also tokenizes in quadratic time), and a prefix that long is treated
as holding the limit.

A cut's head ends, and its tail starts, at such a point too (at most ``_joins.LOOK``
characters from where the tokens put it), so the tokens it reports are those of what it kept,
exactly (``Kept.exact``); with no such point near (emoji, one character repeated), the cut
stays where the tokens put it and reports a sum.
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from replyguard._forks import loading
from replyguard.context import _joins as joins

ENCODING_NAME = "o200k_base"
_CHARS_PER_TOKEN_CEILING = 16
_SAMPLE_CHARS = 384  # the first piece tokenized at an end: it measures the text's density
# Tokens kept free for a cut marker such as "[… 1,234 characters of the reply cut here …]".
_MARKER_ROOM = 24
# Tokens beyond a limit that two separately tokenized windows must hold to prove a text is
# over it (``Cutter._surely_over``).
_PROOF = 8


_load_lock = threading.Lock()
_loaded: list[Any] = []  # the encoding, once loaded
# Set where loading the encoding would block what must not wait (the event loop's own
# judge-prompt build): ``encoding()`` then raises ``NotLoaded`` instead of loading it.
_no_load: contextvars.ContextVar[bool] = contextvars.ContextVar("replyguard_no_load", default=False)


class NotLoaded(Exception):
    """The encoding is needed but not loaded, where loading it is not allowed
    (``without_loading``)."""


def encoding() -> Any:
    """The ``o200k_base`` encoding, loaded once per process (about half a second of CPU,
    most of it holding the GIL); a thread that asks while another loads it waits for that
    load."""
    if _loaded:
        return _loaded[0]
    if _no_load.get():
        raise NotLoaded(ENCODING_NAME)
    with loading(), _load_lock:
        if not _loaded:
            import tiktoken

            _loaded.append(tiktoken.get_encoding(ENCODING_NAME))
    return _loaded[0]


def loaded() -> bool:
    """Whether ``encoding()`` has already loaded the encoding (so calling it cannot block)."""
    return bool(_loaded)


@contextlib.contextmanager
def without_loading() -> Iterator[None]:
    """Within this block, ``encoding()`` raises ``NotLoaded`` rather than load the encoding:
    for work that needs tokens only sometimes, done where a load must not happen."""
    token = _no_load.set(True)
    try:
        yield
    finally:
        _no_load.reset(token)


def count(text: str) -> int:
    """The exact number of tokens in ``text``."""
    if not text:
        return 0
    return len(encoding().encode_ordinary(text))


def size_bound(text: str) -> int:
    """An upper bound on the tokens of ``text`` without tokenizing it: its UTF-8 length."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def surely_within(text: str, limit: int) -> bool:
    """True when ``text`` provably has at most ``limit`` tokens without tokenizing it."""
    return len(text) * 4 <= limit or (len(text) <= limit and size_bound(text) <= limit)


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


@dataclass(frozen=True, slots=True)
class _Scan:
    """The tokens of one end of a text: of its first (or last) ``size`` characters."""

    tokens: list[int]
    whole: bool
    size: int


def _scan(text: str, limit: int, *, from_end: bool, known: _Scan | None = None) -> _Scan:
    """Tokens of a prefix (or suffix) holding more than ``limit`` tokens, or of all of ``text``.

    ``whole`` is True when the whole text was tokenized. Sparse text stops the scan at
    ``_CHARS_PER_TOKEN_CEILING`` characters a token, with fewer tokens than asked for.
    ``known``: an earlier scan of the same end, reused when it already answers, and grown
    from when it does not.
    """
    wanted = limit + 2  # the token at the cut may be split; keep one spare token on that side
    ceiling = max(64, (limit + 1) * _CHARS_PER_TOKEN_CEILING)
    if known is not None and (known.whole or len(known.tokens) >= wanted or known.size >= ceiling):
        return known
    scan = known
    if scan is not None and scan.tokens:  # its density sizes the next piece
        size = _next_size(scan, wanted, ceiling)
    else:
        size = min(_SAMPLE_CHARS, ceiling)  # a sample first: it tells the text's density
    while True:
        scan = _grown(text, scan, size, from_end=from_end)
        if scan.whole or len(scan.tokens) >= wanted or size >= ceiling:
            return scan
        size = _next_size(scan, wanted, ceiling)


def _next_size(scan: _Scan, wanted: int, ceiling: int) -> int:
    """The next piece's size: ``wanted`` tokens at the density just measured, a little more
    (a piece short of them is grown again, tokenizing only what it adds)."""
    per_token = scan.size / max(len(scan.tokens), 1)
    return min(max(int(wanted * per_token * 1.05) + 32, scan.size + 128), ceiling)


def _grown(text: str, known: _Scan | None, size: int, *, from_end: bool) -> _Scan:
    """The tokens of the first (or last) ``size`` characters of ``text``, reusing ``known``'s
    (a shorter piece of the same end) up to the last point near its inner end where the
    tokens on either side add up (``_joins.split``): only what lies beyond is tokenized."""
    enc = encoding()
    whole = size >= len(text)
    size = min(size, len(text))
    if known is not None and known.tokens and not known.whole:
        if from_end:
            start = len(text) - known.size  # ``known`` holds text[start:]
            point = joins.first_split(text, start, start + joins.LOOK)
            if point is not None:
                offset = _byte_size(text[start:])
                wanted = offset - _byte_size(text[start:point])
                dropped = _dropped(known.tokens[: joins.LOOK * 2], offset, wanted)
                if dropped is not None:
                    added = enc.encode_ordinary(text[len(text) - size : point])
                    return _Scan(added + known.tokens[dropped:], whole, size)
        else:
            point = joins.last_split(text, known.size - joins.LOOK, known.size)
            if point is not None:
                offset = _byte_size(text[: known.size])
                wanted = offset - _byte_size(text[point : known.size])
                back = itertools.islice(reversed(known.tokens), joins.LOOK * 2)
                dropped = _dropped(back, offset, wanted)
                if dropped is not None:
                    kept = known.tokens[: len(known.tokens) - dropped]
                    return _Scan(kept + enc.encode_ordinary(text[point:size]), whole, size)
    piece = text if whole else text[-size:] if from_end else text[:size]
    return _Scan(enc.encode_ordinary(piece), whole, size)


def _decode(tokens: list[int]) -> str:
    # A token slice may end inside a multi-byte character; drop the partial character.
    data: bytes = encoding().decode_bytes(tokens)
    return data.decode("utf-8", errors="ignore")


def _head_of(tokens: list[int], limit: int) -> str:
    return _decode(tokens[:limit])


def _tail_of(text: str, tokens: list[int], limit: int) -> str:
    kept = _decode(tokens[-limit:]) if limit > 0 else ""
    # Decoding from a token boundary inside a character can leave replacement debris at the
    # start; the kept text must be a true suffix of the original.
    while kept and not text.endswith(kept):
        kept = kept[1:]
    return kept


def _byte_size(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def _partial(data: bytes) -> int:
    """How many bytes at the end of ``data`` are an unfinished UTF-8 character."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 == 0x80:  # a continuation byte: its lead is further back
            continue
        if byte < 0xC0:
            return 0
        return back if back < (2 if byte < 0xE0 else 3 if byte < 0xF0 else 4) else 0
    return 0


def _dropped(tokens: Iterable[int], size: int, wanted: int) -> int | None:
    """How many of ``tokens`` (taken in turn, from the end of ``size`` bytes of text) to drop
    to leave ``wanted`` bytes, or None when no token boundary is there."""
    single = encoding().decode_single_token_bytes
    dropped = 0
    for token in tokens:
        if size <= wanted:
            break
        size -= len(single(token))
        dropped += 1
    return dropped if size == wanted else None


def _aligned_head(text: str, tokens: list[int], limit: int) -> tuple[str, int | None]:
    """The start of ``text`` held by the first ``limit`` of ``tokens`` (the tokens of a
    prefix of ``text``), and its exact tokens.

    The cut is moved back, by at most ``_joins.LOOK`` characters, to the last point where
    the tokens on either side add up (``_joins.split``): the start's tokens are then exactly
    the tokens before that point. With no such point near, the start as cut, and None.
    """
    kept = min(limit, len(tokens))
    data: bytes = encoding().decode_bytes(tokens[:kept])
    start = data.decode("utf-8", errors="ignore")
    point = joins.last_split(text, len(start) - joins.LOOK, len(start) + 1)
    if point is None:
        return start, None
    wanted = len(data) - _partial(data) - _byte_size(start[point:])
    back = itertools.islice(reversed(tokens[:kept]), joins.LOOK * 2)
    dropped = _dropped(back, len(data), wanted)
    return (start, None) if dropped is None else (text[:point], kept - dropped)


def _aligned_tail(text: str, tokens: list[int], limit: int) -> tuple[str, int | None]:
    """The end of ``text`` held by the last ``limit`` of ``tokens`` (the tokens of a suffix
    of ``text``), and its exact tokens: like ``_aligned_head``, its start moved on to the
    first point where the tokens add up."""
    kept = max(min(limit, len(tokens)), 0)
    tail = tokens[len(tokens) - kept :] if kept else []
    data: bytes = encoding().decode_bytes(tail)
    end = data.decode("utf-8", errors="ignore")
    while end and not text.endswith(end):  # debris of a character the first token splits
        end = end[1:]
    cut = len(text) - len(end)
    point = joins.first_split(text, cut - 1, cut + joins.LOOK)
    if point is None:
        return end, None
    wanted = _byte_size(end) - _byte_size(end[: point - cut])
    dropped = _dropped(tail[: joins.LOOK * 2], len(data), wanted)
    return (end, None) if dropped is None else (text[point:], kept - dropped)


def within(text: str, limit: int) -> bool:
    """True when ``text`` has at most ``limit`` tokens (tokenizing at most ``limit`` + 2)."""
    if surely_within(text, limit):
        return True
    scan = _scan(text, limit, from_end=False)
    return scan.whole and len(scan.tokens) <= limit


def head(text: str, limit: int) -> str:
    """The longest start of ``text`` with at most ``limit`` tokens (char-aligned)."""
    if limit <= 0:
        return ""
    if surely_within(text, limit):
        return text
    scan = _scan(text, limit, from_end=False)
    if scan.whole and len(scan.tokens) <= limit:
        return text
    return _head_of(scan.tokens, limit)


def tail(text: str, limit: int) -> str:
    """The longest end of ``text`` with at most ``limit`` tokens (char-aligned)."""
    if limit <= 0:
        return ""
    if surely_within(text, limit):
        return text
    scan = _scan(text, limit, from_end=True)
    if scan.whole and len(scan.tokens) <= limit:
        return text
    return _tail_of(text, scan.tokens, limit)


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
        self._head: _Scan | None = None
        self._tail: _Scan | None = None

    def cleaning(self, clean: Callable[[str], str]) -> Cutter:
        """A cutter of the same text with ``clean``, reusing the tokens this one scanned."""
        other = Cutter(self.text, clean)
        other._head, other._tail = self._head, self._tail
        return other

    def _scan(self, limit: int, *, from_end: bool) -> _Scan:
        scan = _scan(
            self.text, limit, from_end=from_end, known=self._tail if from_end else self._head
        )
        if from_end:
            self._tail = scan
        else:
            self._head = scan
        return scan

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
        scan = self._scan(limit, from_end=False)
        if scan.whole and len(scan.tokens) <= limit:
            return self._kept((text,), len(scan.tokens), counted=True, cut=False, exact=True)
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
        start, start_size = _aligned_head(text, tokens, budget // 2)
        end_tokens = self._scan(tail_size, from_end=True).tokens
        end, end_size = _aligned_tail(text, end_tokens, budget - budget // 2)
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
        start, size = _aligned_head(self.text, tokens, limit)
        if size is not None:
            return self._kept((start,), size, counted=True, cut=True, exact=True)
        return self._kept((start,), min(len(tokens), limit), counted=True, cut=True)

    def _likely_within(self, limit: int) -> bool:
        """Whether the text's start (``_SAMPLE_CHARS`` tokenized) suggests the whole is at most
        a quarter over ``limit``: then counting it is cheaper than proving it over."""
        if self._head is None:
            sample = self.text[:_SAMPLE_CHARS]
            tokens = encoding().encode_ordinary(sample)
            self._head = _Scan(tokens, len(sample) == len(self.text), len(sample))
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
        start, start_size = _aligned_head(text, tokens, keep)
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
