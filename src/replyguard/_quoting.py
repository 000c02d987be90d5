"""Where a markdown text quotes: fenced code blocks and block quotes, one definition for all.

The injection detector, the JSON repair, the checks' markdown reading and the verdict parser
all ask the same question, "is this line quoted or fenced?", and get the same answer here:

- A **fence** opens on a line of three or more backticks or tildes (any indentation before
  it), optionally followed by an info string; a backtick fence whose info string holds a
  backtick is inline code, not a fence (```` ```PASS``` ````). It closes on a line holding only
  the same character, at least as many times (surrounding blanks allowed), and otherwise runs
  to the end of the text. The opening and closing lines are the block's delimiters; the lines
  between are its body.
- A **block quote** is a line outside any fence whose first character other than blanks is
  ``>``.

Lines are the text split at ``\\n`` (a ``\\r`` before it is ignored). Every function is pure
and linear in the text's length: only lines that start with a fence character are looked at
more than once, and those once each.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = [
    "AtLineStart",
    "Block",
    "Kind",
    "closes",
    "code_blocks",
    "fence_opening",
    "is_block_quote",
    "kinds",
    "lines",
]


class AtLineStart:
    """A pattern tried at the start of each line only: what ``^`` under ``re.M`` does, at a
    fraction of the cost.

    Python's regex engine tries a ``^``-led pattern at every position of the text; this one
    searches for the newline before a line instead (a literal prefix the engine skips to at C
    speed) and matches the first line on its own. The pattern (``flags`` gain ``re.M``, for
    ``$``) must not match across a newline at its start: it is always tried right after one.
    """

    __slots__ = ("_after_newline", "_first", "pattern")

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self.pattern = pattern
        self._first = re.compile(pattern, flags | re.M)
        self._after_newline = re.compile(f"\n(?:{pattern})", flags | re.M)

    def search(self, text: str) -> re.Match[str] | None:
        """The first line (from its start) the pattern matches, or None. For the match of a
        line other than the first, ``start()`` is the newline before it."""
        return self._first.match(text) or self._after_newline.search(text)

    def finditer(self, text: str, position: int = 0) -> Iterator[re.Match[str]]:
        """Each line the pattern matches, from ``position`` on (as ``search``'s matches)."""
        if position == 0 or text[position - 1] == "\n":
            first = self._first.match(text, position)
            if first is not None:
                yield first
        yield from self._after_newline.finditer(text, position)

    def starts(self, text: str, position: int = 0) -> Iterator[int]:
        """Where each line the pattern matches starts, from ``position`` on."""
        for match in self.finditer(text, position):
            yield match.start() if match.re is self._first else match.start() + 1


_OPENING = re.compile(r"[ \t]*(`{3,}|~{3,})([^\n]*)")
_FENCE_LINE = AtLineStart(r"[ \t]*(?:`{3}|~{3})")  # where a fence may open or close


class Kind(enum.Enum):
    """What one line of a text is."""

    TEXT = "text"
    """Ordinary text (neither fenced nor quoted)."""
    FENCE = "fence"
    """A fence's opening or closing line."""
    CODE = "code"
    """A line inside a fenced block."""
    QUOTE = "quote"
    """A block-quote line (``> ...``) outside any fence."""


@dataclass(frozen=True)
class Block:
    """One fenced code block, as offsets into the text."""

    start: int
    """Where its opening line starts."""
    body_start: int
    """Where its body starts (after the opening line's newline)."""
    body_end: int
    """Where its body ends: the start of its closing line, or the end of the text."""
    end: int
    """Where its closing line ends (before any newline), or the end of the text."""
    marker: str
    """The opening fence (```` ``` ````, ``~~~~``, ...)."""
    info: str
    """The info string after the opening fence, stripped (``json``, ``python``, or "")."""
    closed: bool
    """False when the block runs to the end of the text."""

    @property
    def language(self) -> str:
        """The info string's first word in lower case ("" without one)."""
        words = self.info.split()
        return words[0].lower() if words else ""


def lines(text: str) -> list[str]:
    """The lines of ``text`` as this module reads them: split at ``\\n``, each without the
    ``\\r`` before it; no empty last line for a final newline."""
    split = text.split("\n")
    if split[-1] == "":
        split.pop()
    return [line[:-1] if line.endswith("\r") else line for line in split]


def fence_opening(line: str) -> tuple[str, str] | None:
    """``(marker, info)`` when ``line`` opens a fence, else None."""
    match = _OPENING.fullmatch(line.rstrip("\r"))
    if match is None:
        return None
    marker, info = match.groups()
    if marker[0] == "`" and "`" in info:
        return None  # ```PASS``` is inline code
    return marker, info.strip()


def closes(line: str, marker: str) -> bool:
    """Whether ``line`` closes a fence opened by ``marker``."""
    stripped = line.strip()
    return len(stripped) >= len(marker) and not stripped.strip(marker[0])


def is_block_quote(line: str) -> bool:
    """Whether ``line`` (outside a fence) is a block-quote line."""
    return line.lstrip(" \t").startswith(">")


def _lines_from(text: str, position: int) -> Iterator[tuple[int, int]]:
    """``(start, end)`` of each line that may open or close a fence, from ``position`` on."""
    for start in _FENCE_LINE.starts(text, position):
        end = text.find("\n", start)
        yield start, len(text) if end < 0 else end


def code_blocks(text: str, limit: int | None = None) -> list[Block]:
    """The fenced code blocks of ``text``, in order (at most ``limit`` of them)."""
    # A one-character search (memchr) before each three-character one.
    if ("`" not in text or "```" not in text) and ("~" not in text or "~~~" not in text):
        return []
    blocks: list[Block] = []
    opened: tuple[int, int, str, str] | None = None  # start, body start, marker, info
    for start, end in _lines_from(text, 0):
        line = text[start:end]
        if opened is None:
            opening = fence_opening(line)
            if opening is not None:
                opened = (start, min(end + 1, len(text)), *opening)
        elif closes(line, opened[2]):
            blocks.append(Block(opened[0], opened[1], start, end, opened[2], opened[3], True))
            opened = None
            if limit is not None and len(blocks) >= limit:
                return blocks
    if opened is not None:
        blocks.append(Block(opened[0], opened[1], len(text), len(text), *opened[2:], False))
    return blocks


_QUOTE_LINE = AtLineStart(r"[ \t]*>")


def kinds(text: str) -> list[Kind]:
    """The kind of each line of ``text`` (aligned with ``text.split("\\n")``)."""
    found = code_blocks(text)
    if not found and _QUOTE_LINE.search(text) is None:
        return [Kind.TEXT] * (text.count("\n") + 1)  # the common case, without a loop
    blocks = iter(found)
    block = next(blocks, None)
    result: list[Kind] = []
    position = 0
    for line in text.split("\n"):
        if block is not None and position >= block.start:
            if position == block.start or (block.closed and position == block.body_end):
                result.append(Kind.FENCE)
            else:
                result.append(Kind.CODE)
            if position >= block.body_end:  # its closing line (or past the end): next block
                block = next(blocks, None)
        else:
            result.append(Kind.QUOTE if is_block_quote(line) else Kind.TEXT)
        position += len(line) + 1
    return result
