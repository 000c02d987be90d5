"""Token counting and token-bounded cutting with tiktoken's ``o200k_base``.

Cutting never tokenizes more than it keeps (plus a margin): a 1M-character reply cut to 3,000
tokens costs about as much as a 3,000-token one. The cheap proof that a text fits is its size:
a text never has more tokens than UTF-8 bytes, and never more bytes than 4 per character.
Characters alone are not a bound (one emoji can be several tokens). User content is counted
with ``encode_ordinary`` so text such as ``<|endoftext|>`` is counted as text, never refused.
"""

from __future__ import annotations

import functools
from typing import Any

ENCODING_NAME = "o200k_base"
# First guess of characters per token when scanning a prefix; doubles when wrong, up to the
# ceiling. Prose and code run at 3-5 characters a token; text sparser than the ceiling is
# padding (long runs of one character, which tiktoken also tokenizes in quadratic time), and
# a prefix that long is treated as holding the limit.
_CHARS_PER_TOKEN_GUESS = 4
_CHARS_PER_TOKEN_CEILING = 16
# Tokens kept free for a cut marker such as "[… 1,234 characters of the reply cut here …]".
_MARKER_ROOM = 24


@functools.cache
def encoding() -> Any:
    """The ``o200k_base`` encoding, loaded once per process."""
    import tiktoken

    return tiktoken.get_encoding(ENCODING_NAME)


def count(text: str) -> int:
    """The exact number of tokens in ``text``."""
    if not text:
        return 0
    return len(encoding().encode_ordinary(text))


def surely_within(text: str, limit: int) -> bool:
    """True when ``text`` provably has at most ``limit`` tokens without tokenizing it."""
    return len(text) * 4 <= limit or (len(text) <= limit and len(text.encode("utf-8")) <= limit)


def _scan(text: str, limit: int, *, from_end: bool) -> tuple[list[int], bool]:
    """Tokens of a prefix (or suffix) holding more than ``limit`` tokens, or of all of ``text``.

    The second value is True when the whole text was tokenized. Sparse text stops the scan
    at ``_CHARS_PER_TOKEN_CEILING`` characters a token, with fewer tokens than asked for.
    """
    enc = encoding()
    size = max(64, (limit + 1) * _CHARS_PER_TOKEN_GUESS)
    ceiling = max(64, (limit + 1) * _CHARS_PER_TOKEN_CEILING)
    while True:
        if size >= len(text):
            return enc.encode_ordinary(text), True
        piece = text[-size:] if from_end else text[:size]
        tokens = enc.encode_ordinary(piece)
        # The token at the cut may be split; keep one spare token on that side.
        if len(tokens) > limit + 1 or size >= ceiling:
            return tokens, False
        size = min(size * 2, ceiling)


def _decode(tokens: list[int]) -> str:
    # A token slice may end inside a multi-byte character; drop the partial character.
    data: bytes = encoding().decode_bytes(tokens)
    return data.decode("utf-8", errors="ignore")


def within(text: str, limit: int) -> bool:
    """True when ``text`` has at most ``limit`` tokens (tokenizing at most ``limit`` + 2)."""
    if surely_within(text, limit):
        return True
    tokens, whole = _scan(text, limit, from_end=False)
    return whole and len(tokens) <= limit


def head(text: str, limit: int) -> str:
    """The longest start of ``text`` with at most ``limit`` tokens (char-aligned)."""
    if limit <= 0:
        return ""
    if surely_within(text, limit):
        return text
    tokens, whole = _scan(text, limit, from_end=False)
    if whole and len(tokens) <= limit:
        return text
    return _decode(tokens[:limit])


def tail(text: str, limit: int) -> str:
    """The longest end of ``text`` with at most ``limit`` tokens (char-aligned)."""
    if limit <= 0:
        return ""
    if surely_within(text, limit):
        return text
    tokens, whole = _scan(text, limit, from_end=True)
    if whole and len(tokens) <= limit:
        return text
    kept = _decode(tokens[-limit:])
    # Decoding from a token boundary inside a character can leave replacement debris at the
    # start; the kept text must be a true suffix of the original.
    while kept and not text.endswith(kept):
        kept = kept[1:]
    return kept


def keep_ends(text: str, limit: int, what: str) -> str:
    """``text`` if it fits ``limit`` tokens, else its head and tail with a marked gap."""
    if within(text, limit):
        return text
    if limit < _MARKER_ROOM * 2:  # no room for a marker: keep what fits
        return head(text, limit)
    budget = limit - _MARKER_ROOM
    start = head(text, budget // 2)
    end = tail(text, budget - budget // 2)
    gap = max(len(text) - len(start) - len(end), 0)
    return f"{start}\n[… {gap:,} characters of the {what} cut here …]\n{end}"


def keep_head(text: str, limit: int, what: str) -> str:
    """``text`` if it fits ``limit`` tokens, else its start with a marked cut."""
    if within(text, limit):
        return text
    if limit < _MARKER_ROOM * 2:
        return head(text, limit)
    start = head(text, limit - _MARKER_ROOM)
    return f"{start}\n[… {len(text) - len(start):,} more characters of the {what} cut here …]"
