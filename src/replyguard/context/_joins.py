"""Exact token counts of joined texts, from the counts of the parts, where that is provable.

BPE counts do not add up in general: ``count(a + b)`` can differ from ``count(a) + count(b)``.
But tiktoken first splits a text into pieces with its pre-tokenizer's regular expression and
encodes each piece on its own, so the counts do add up across a point where the pieces of
the joined text split anyway: there the pieces of ``a + b`` are those of ``a`` followed by
those of ``b``. (A piece that ends at such a point ends there in ``a`` alone too: the one
thing that reads past a piece's end in ``o200k_base``'s expression is the ``\\s+(?!\\S)``
look-ahead, which the end of a text satisfies as well.)

``split`` names pairs of characters that ``o200k_base``'s expression always splits between,
whatever comes before or after them (``[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+('s|'t|…)?``,
``\\p{N}{1,3}``, `` ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*``, ``\\s*[\\r\\n]+``, ``\\s+(?!\\S)``,
``\\s+``):

- a letter, then anything but a letter, a combining mark or an apostrophe (a word piece
  holds only letters and marks after its first character, and a contraction such as 's);
- a digit, then anything but a digit;
- a line break, then a character that is neither white space nor ``/`` (a piece holding a
  line break goes on only with white space, or with line breaks and ``/`` after symbols);
- any other non-space character, then a space or a tab (no piece has a non-space character
  followed by a space but a word's leading space, which only starts a piece).

Classes are read conservatively: a character this Python's Unicode database does not know
is never taken for a split. The property tests (``tests/context/test_joins.py``) check
``count`` of the whole against the sum at every such point of texts of every kind.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Sequence

_APOSTROPHE = "'"
_SAFE_AFTER_LETTER = frozenset("PSNZC")  # categories never taken into a word piece
LOOK = 64
"""How far into a text to look for a split, in characters."""


def _category(char: str) -> str:
    return unicodedata.category(char)


def split(before: str, after: str) -> bool:
    """True when ``o200k_base``'s pre-tokenizer splits between these two characters in any
    text (so the token counts on either side add up)."""
    if before.isascii() and after.isascii():
        if before.isalpha():
            return not after.isalpha() and after != _APOSTROPHE
        if before.isdigit():
            return not after.isdigit()
        if before in "\r\n":
            return not after.isspace() and after != "/"
        if before.isspace():
            return False
        return after in " \t"
    if before.isalpha():  # \p{L}
        if after.isascii():
            return not after.isalpha() and after != _APOSTROPHE
        category = _category(after)
        return category[0] in _SAFE_AFTER_LETTER and category != "Cn"
    if before in "\r\n":
        return after.isalnum() and _category(after) != "Cn"
    category = _category(before)
    if category[0] == "N":
        return (after.isascii() and not after.isdigit()) or after.isalpha()
    if category[0] in "LMZC" or before.isspace():
        return False
    return after in " \t"


def first_split(text: str, after: int = 0, end: int | None = None) -> int | None:
    """The first point ``p`` with ``after`` < ``p`` < ``end`` (default: ``len(text)``), at
    most ``LOOK`` characters on, where ``split(text[p - 1], text[p])``; else None."""
    stop = min(len(text), after + LOOK + 1, len(text) if end is None else end)
    for point in range(max(after + 1, 1), stop):
        if split(text[point - 1], text[point]):
            return point
    return None


def last_split(text: str, floor: int = 0, end: int | None = None) -> int | None:
    """The last point ``p`` with ``floor`` < ``p`` < ``end`` (default: ``len(text)``), at most
    ``LOOK`` characters back, where ``split(text[p - 1], text[p])``; else None."""
    top = len(text) if end is None else min(end, len(text))
    for point in range(top - 1, max(floor, top - 1 - LOOK, 0), -1):
        if split(text[point - 1], text[point]):
            return point
    return None


def joined_count(parts: Sequence[tuple[str, int | None]], count: Callable[[str], int]) -> int:
    """The exact tokens of the parts' texts joined, given the exact tokens of some of them.

    ``parts``: (text, its exact token count or None). A part with a count is not tokenized
    again but at its edges: where it meets its neighbours at a point ``split`` does not
    vouch for, the few characters from the join to its nearest split point are tokenized
    together with the neighbour's (a part with no split point near an edge is tokenized
    whole). The parts with no count are tokenized with whatever they are joined to.
    """
    texts = [(text, known) for text, known in parts if text]
    total = 0
    pending: list[str] = []  # text not counted yet, up to where the current part starts
    for index, (text, known) in enumerate(texts):
        if pending and split(pending[-1][-1], text[0]):
            total += count("".join(pending))
            pending = []
        if known is None:
            pending.append(text)
            continue
        start = 0
        if pending:
            found = first_split(text)
            if found is None:
                pending.append(text)
                continue
            start = found
            pending.append(text[:start])
            total += count("".join(pending))
            pending = []
        end = len(text)
        following = texts[index + 1][0][0] if index + 1 < len(texts) else None
        if following is not None and not split(text[-1], following):
            found = last_split(text, start)
            if found is None:  # its end cannot be told apart: tokenized from ``start`` on
                pending = [text[start:]]
                continue
            end = found
            pending = [text[end:]]
        inner = known - (count(text[:start]) if start else 0)
        total += inner - (count(text[end:]) if end < len(text) else 0)
    if pending:
        total += count("".join(pending))
    return total
