"""Operator-supplied regular expressions, run with a real time limit.

A pattern from the config (``mustMatch``, ``mustNotMatch``, a JSON field's ``pattern``, a JSON
Schema's ``pattern`` / ``patternProperties``) meets text a user may steer: ``(a+)+$`` against
thirty a's and a "b" runs for half a minute with ``re``, on whatever thread runs it, and no
``asyncio`` timeout can interrupt it. So these patterns are compiled with the ``regex`` module
(``re``-compatible syntax, ``VERSION0``) and searched with its ``timeout``, sharing one budget,
``TIME_LIMIT`` seconds, per check of one reply; the checks run them in a worker thread
(``concurrent=True`` lets the search run without the GIL), so the event loop never waits on
them and the turn's deadline still holds. The budget starts in that thread, when the searches
do: a wait for a free thread (a burst of turns) is not taken from it. A pattern that runs out
of time raises ``PatternTimeout``; the check then fails open (it passes, its ``error`` says
which pattern).
"""

from __future__ import annotations

import contextvars
import functools
import re._parser as _re_parser  # type: ignore[import-not-found]  # no stubs; its width is exact
import time
from typing import Any

TIME_LIMIT = 1.0
"""Seconds the patterns of one check may take on one reply, all of them together."""


class PatternTimeout(Exception):
    """A pattern did not finish within the time limit on this text."""

    def __init__(self, source: str, seconds: float) -> None:
        shown = source if len(source) <= 80 else source[:79] + "…"
        super().__init__(
            f"the pattern {shown!r} did not finish within {seconds:g} s on this reply; "
            "the check was not applied"
        )


_UNTIL: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "replyguard_pattern_until", default=None
)


def compile_pattern(source: str, flags: int = 0) -> Any:
    """``source`` compiled (``regex.IGNORECASE`` and friends as flags); ValueError if invalid."""
    regex = _regex()
    try:
        return _compiled(source, flags)
    except regex.error as exc:
        raise ValueError(f"{source!r} is not a valid regular expression: {exc}") from None


@functools.cache
def _regex() -> Any:
    """The ``regex`` module, imported on first use (only configured patterns need it)."""
    import regex  # type: ignore[import-untyped]  # regex ships no type information

    return regex


@functools.lru_cache(maxsize=512)
def _compiled(source: str, flags: int) -> Any:
    regex = _regex()
    return regex.compile(source, flags | regex.VERSION0)


def deadline() -> float:
    """The monotonic time by which a check's patterns must be done, starting now."""
    return time.monotonic() + TIME_LIMIT


def search(
    pattern: Any, text: str, until: float | None = None, pos: int = 0, *, partial: bool = False
) -> Any:
    """``pattern.search(text, pos)`` by ``until`` (or the deadline set by ``within``, or a fresh
    ``TIME_LIMIT``); raises ``PatternTimeout`` when it runs out. Look-behinds see the text
    before ``pos``. ``partial``: when nothing matches, the leftmost match that the end of
    ``text`` cut short (``match.partial``: more text could complete it), as ``regex`` finds it."""
    until = until or _UNTIL.get() or deadline()
    left = until - time.monotonic()
    try:
        if left <= 0:
            raise TimeoutError
        return pattern.search(text, pos, partial=partial, timeout=left, concurrent=True)
    except TimeoutError:
        raise PatternTimeout(pattern.pattern, TIME_LIMIT) from None


def reach(source: str, flags: int = 0) -> tuple[int, int] | None:
    """How far a match of ``source`` can reach, for searching a text that arrives in pieces:
    ``(width, context)``, the longest match and the characters a look-around or word
    boundary may look at on either side of it; None when that is unbounded (``*``, ``+``, a
    look-around of unbounded length), when the pattern is anchored to the text's start or
    end (``^``, ``$``, ``\\A``, ``\\Z``), can match nothing at all, or is beyond what ``re``
    can read (then ``around`` says whether it can be searched over a window)."""
    parsed = _parsed(source, flags)
    if parsed is None:
        return None
    low, width = parsed.getwidth()
    if width >= _MAX_REACH or width == 0 or low == 0:
        return None
    looks = _looks(parsed.data)
    if looks is None or looks[2]:
        return None
    return width, max(1, looks[0], looks[1])


def around(source: str, flags: int = 0) -> tuple[int, int] | None:
    """What a match of ``source`` looks at beyond itself, for searching it over a window of
    recent text whatever its length: ``(behind, ahead)``, the characters a look-behind, a
    word boundary or an anchor may see before a match, and those a look-ahead, a word
    boundary or ``$`` may see after it (a match nearer than ``ahead`` to the end of the text
    so far is not decided yet). None when a look-around is unbounded, the pattern can match
    nothing at all, or it is beyond what ``re`` can read (then it is searched on the whole
    reply only)."""
    parsed = _parsed(source, flags)
    if parsed is None or parsed.getwidth()[0] == 0:
        return None
    looks = _looks(parsed.data)
    return None if looks is None else (looks[0], looks[1])


_MAX_REACH = 4096
_ANCHORS = {
    "AT_BOUNDARY": (1, 1, False),
    "AT_NON_BOUNDARY": (1, 1, False),
    "AT_BEGINNING": (1, 0, True),
    "AT_BEGINNING_STRING": (1, 0, True),
    "AT_END": (0, 2, True),  # ``$`` also matches before a newline that ends the text
    "AT_END_STRING": (0, 1, True),
}
"""Per anchor: (characters it looks at before, after, whether it ties a match to an end)."""


def _parsed(source: str, flags: int) -> Any:
    try:
        return _re_parser.parse(source, flags)
    except Exception:  # regex-only syntax, or anything else re cannot read
        return None


def _looks(items: Any) -> tuple[int, int, bool] | None:
    """What parsed ``items`` look at outside a match: (before, after, anchored); None when a
    look-around is unbounded or an anchor is one ``re`` has no rule for here."""
    behind = ahead = 0
    anchored = False
    for op, value in items:
        name = str(op)
        if name == "AT":
            found = _ANCHORS.get(str(value))
        elif name in ("ASSERT", "ASSERT_NOT"):
            found = _assertion(value)
        else:
            found = _combined([_looks(inner) for inner in _subpatterns(value)])
        if found is None:
            return None
        behind, ahead = max(behind, found[0]), max(ahead, found[1])
        anchored = anchored or found[2]
    return behind, ahead, anchored


def _assertion(value: Any) -> tuple[int, int, bool] | None:
    """A look-ahead (direction 1) or look-behind (-1): its width, plus what it looks at."""
    direction, sub = value
    width = sub.getwidth()[1]
    inner = _looks(sub.data)
    if width >= _MAX_REACH or inner is None:
        return None
    if direction < 0:
        return max(1, width + inner[0]), inner[1], inner[2]
    return inner[0], max(1, width + inner[1]), inner[2]


def _combined(found: list[tuple[int, int, bool] | None]) -> tuple[int, int, bool] | None:
    if any(item is None for item in found):
        return None
    known = [item for item in found if item is not None]
    return (
        max((item[0] for item in known), default=0),
        max((item[1] for item in known), default=0),
        any(item[2] for item in known),
    )


def _subpatterns(value: Any) -> list[Any]:
    """The nested parsed patterns inside one parsed item's value."""
    if isinstance(value, _re_parser.SubPattern):
        return [value.data]
    if isinstance(value, list | tuple):
        return [found for item in value for found in _subpatterns(item)]
    return []


def search_source(source: str, text: str) -> Any:
    """``search`` for a pattern given as text (a JSON Schema's), compiled once and cached."""
    return search(compile_pattern(source), text)


def within(until: float) -> contextvars.Token[float | None]:
    """Make ``until`` the deadline of ``search`` calls in this context (reset the token)."""
    return _UNTIL.set(until)


def reset(token: contextvars.Token[float | None]) -> None:
    _UNTIL.reset(token)
