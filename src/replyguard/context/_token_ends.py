"""The tokens of a text's ends, tokenizing no more than a limit needs (plus a margin).

A 1M-character reply cut to 3,000 tokens costs about as much as a 3,000-token one. How much of
a text to tokenize for ``n`` tokens is measured, not guessed: a first piece of
``SAMPLE_CHARS`` characters gives the text's characters per token (prose runs at 4 to 6, JSON
at 3, CJK at about 1), and the next piece is sized for ``n`` tokens at that density with 5 %
to spare. A piece that grows tokenizes only what it adds: the tokens of the shorter piece are
kept up to a point near its end where the tokens on either side add up (``_joins``). Text
sparser than ``_CHARS_PER_TOKEN_CEILING`` characters a token is padding (long runs of one
character, which tiktoken also tokenizes in quadratic time), and a prefix that long is treated
as holding the limit.

A cut's head ends, and its tail starts, at such a point too (``aligned_head``,
``aligned_tail``: at most ``_joins.LOOK`` characters from where the tokens put it), so the
tokens it reports are those of what it kept, exactly; with no such point near (emoji, one
character repeated), the cut stays where the tokens put it.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass

from replyguard.context import _encoding
from replyguard.context import _joins as joins
from replyguard.context._encoding import size_bound, surely_within

_CHARS_PER_TOKEN_CEILING = 16
SAMPLE_CHARS = 384  # the first piece tokenized at an end: it measures the text's density


@dataclass(frozen=True, slots=True)
class Scan:
    """The tokens of one end of a text: of its first (or last) ``size`` characters."""

    tokens: list[int]
    whole: bool
    size: int


def scan(text: str, limit: int, *, from_end: bool, known: Scan | None = None) -> Scan:
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
    found = known
    if found is not None and found.tokens:  # its density sizes the next piece
        size = _next_size(found, wanted, ceiling)
    else:
        size = min(SAMPLE_CHARS, ceiling)  # a sample first: it tells the text's density
    while True:
        found = _grown(text, found, size, from_end=from_end)
        if found.whole or len(found.tokens) >= wanted or size >= ceiling:
            return found
        size = _next_size(found, wanted, ceiling)


def _next_size(scan: Scan, wanted: int, ceiling: int) -> int:
    """The next piece's size: ``wanted`` tokens at the density just measured, a little more
    (a piece short of them is grown again, tokenizing only what it adds)."""
    per_token = scan.size / max(len(scan.tokens), 1)
    return min(max(int(wanted * per_token * 1.05) + 32, scan.size + 128), ceiling)


def _grown(text: str, known: Scan | None, size: int, *, from_end: bool) -> Scan:
    """The tokens of the first (or last) ``size`` characters of ``text``, reusing ``known``'s
    (a shorter piece of the same end) up to the last point near its inner end where the
    tokens on either side add up (``_joins.split``): only what lies beyond is tokenized."""
    enc = _encoding.encoding()
    whole = size >= len(text)
    size = min(size, len(text))
    if known is not None and known.tokens and not known.whole:
        if from_end:
            start = len(text) - known.size  # ``known`` holds text[start:]
            point = joins.first_split(text, start, start + joins.LOOK)
            if point is not None:
                offset = size_bound(text[start:])
                wanted = offset - size_bound(text[start:point])
                dropped = _dropped(known.tokens[: joins.LOOK * 2], offset, wanted)
                if dropped is not None:
                    added = enc.encode_ordinary(text[len(text) - size : point])
                    return Scan(added + known.tokens[dropped:], whole, size)
        else:
            point = joins.last_split(text, known.size - joins.LOOK, known.size)
            if point is not None:
                offset = size_bound(text[: known.size])
                wanted = offset - size_bound(text[point : known.size])
                back = itertools.islice(reversed(known.tokens), joins.LOOK * 2)
                dropped = _dropped(back, offset, wanted)
                if dropped is not None:
                    kept = known.tokens[: len(known.tokens) - dropped]
                    return Scan(kept + enc.encode_ordinary(text[point:size]), whole, size)
    piece = text if whole else text[-size:] if from_end else text[:size]
    return Scan(enc.encode_ordinary(piece), whole, size)


def _decode(tokens: list[int]) -> str:
    # A token slice may end inside a multi-byte character; drop the partial character.
    data: bytes = _encoding.encoding().decode_bytes(tokens)
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
    single = _encoding.encoding().decode_single_token_bytes
    dropped = 0
    for token in tokens:
        if size <= wanted:
            break
        size -= len(single(token))
        dropped += 1
    return dropped if size == wanted else None


def aligned_head(text: str, tokens: list[int], limit: int) -> tuple[str, int | None]:
    """The start of ``text`` held by the first ``limit`` of ``tokens`` (the tokens of a
    prefix of ``text``), and its exact tokens.

    The cut is moved back, by at most ``_joins.LOOK`` characters, to the last point where
    the tokens on either side add up (``_joins.split``): the start's tokens are then exactly
    the tokens before that point. With no such point near, the start as cut, and None.
    """
    kept = min(limit, len(tokens))
    data: bytes = _encoding.encoding().decode_bytes(tokens[:kept])
    start = data.decode("utf-8", errors="ignore")
    point = joins.last_split(text, len(start) - joins.LOOK, len(start) + 1)
    if point is None:
        return start, None
    wanted = len(data) - _partial(data) - size_bound(start[point:])
    back = itertools.islice(reversed(tokens[:kept]), joins.LOOK * 2)
    dropped = _dropped(back, len(data), wanted)
    return (start, None) if dropped is None else (text[:point], kept - dropped)


def aligned_tail(text: str, tokens: list[int], limit: int) -> tuple[str, int | None]:
    """The end of ``text`` held by the last ``limit`` of ``tokens`` (the tokens of a suffix
    of ``text``), and its exact tokens: like ``aligned_head``, its start moved on to the
    first point where the tokens add up."""
    kept = max(min(limit, len(tokens)), 0)
    tail = tokens[len(tokens) - kept :] if kept else []
    data: bytes = _encoding.encoding().decode_bytes(tail)
    end = data.decode("utf-8", errors="ignore")
    while end and not text.endswith(end):  # debris of a character the first token splits
        end = end[1:]
    cut = len(text) - len(end)
    point = joins.first_split(text, cut - 1, cut + joins.LOOK)
    if point is None:
        return end, None
    wanted = size_bound(end) - size_bound(end[: point - cut])
    dropped = _dropped(tail[: joins.LOOK * 2], len(data), wanted)
    return (end, None) if dropped is None else (text[point:], kept - dropped)


def within(text: str, limit: int) -> bool:
    """True when ``text`` has at most ``limit`` tokens (tokenizing at most ``limit`` + 2)."""
    if surely_within(text, limit):
        return True
    found = scan(text, limit, from_end=False)
    return found.whole and len(found.tokens) <= limit


def head(text: str, limit: int) -> str:
    """The longest start of ``text`` with at most ``limit`` tokens (char-aligned)."""
    return _end(text, limit, from_end=False)


def tail(text: str, limit: int) -> str:
    """The longest end of ``text`` with at most ``limit`` tokens (char-aligned)."""
    return _end(text, limit, from_end=True)


def _end(text: str, limit: int, *, from_end: bool) -> str:
    if limit <= 0:
        return ""
    if surely_within(text, limit):
        return text
    found = scan(text, limit, from_end=from_end)
    if found.whole and len(found.tokens) <= limit:
        return text
    return _tail_of(text, found.tokens, limit) if from_end else _head_of(found.tokens, limit)
