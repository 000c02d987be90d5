"""Operator-supplied regular expressions, run with a real time limit.

A pattern from the config (``mustMatch``, ``mustNotMatch``, a JSON field's ``pattern``, a JSON
Schema's ``pattern`` / ``patternProperties``) meets text a user may steer: ``(a+)+$`` against
thirty a's and a "b" runs for half a minute with ``re``, on whatever thread runs it, and no
``asyncio`` timeout can interrupt it. So these patterns are compiled with the ``regex`` module
(``re``-compatible syntax, ``VERSION0``) and searched with its ``timeout``, sharing one budget,
``TIME_LIMIT`` seconds, per check of one reply; the checks run them in a worker thread
(``concurrent=True`` lets the search run without the GIL), so the event loop never waits on
them and the turn's deadline still holds. A pattern that runs out of time raises
``PatternTimeout``; the check then fails open (it passes, its ``error`` says which pattern).
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


def search(pattern: Any, text: str, until: float | None = None, pos: int = 0) -> Any:
    """``pattern.search(text, pos)`` by ``until`` (or the deadline set by ``within``, or a fresh
    ``TIME_LIMIT``); raises ``PatternTimeout`` when it runs out. Look-behinds see the text
    before ``pos``."""
    until = until or _UNTIL.get() or deadline()
    left = until - time.monotonic()
    try:
        if left <= 0:
            raise TimeoutError
        return pattern.search(text, pos, timeout=left, concurrent=True)
    except TimeoutError:
        raise PatternTimeout(pattern.pattern, TIME_LIMIT) from None


def reach(source: str, flags: int = 0) -> tuple[int, int] | None:
    """How far a match of ``source`` can reach, for searching a text that arrives in pieces:
    ``(width, context)``, the longest match and the characters a look-around or word
    boundary may look at on either side of it; None when that is unbounded (``*``, ``+``, a
    look-around of unbounded length), when the pattern is anchored to the text's start or
    end (``^``, ``$``, ``\\A``, ``\\Z``), can match nothing at all, or is beyond what ``re``
    can read (then it is searched on the whole reply only)."""
    try:
        parsed = _re_parser.parse(source, flags)
        low, width = parsed.getwidth()
    except Exception:  # regex-only syntax, or anything else re cannot read
        return None
    if width >= _MAX_REACH or width == 0 or low == 0:
        return None
    context = _context(parsed.data)
    return None if context is None else (width, context)


_MAX_REACH = 4096
_BOUNDARIES = frozenset({"AT_BOUNDARY", "AT_NON_BOUNDARY"})


def _context(items: Any) -> int | None:
    """The widest look-around among parsed ``items`` (at least 1, for a word boundary or the
    character a lookahead needs), or None when one is unbounded or an anchor is met."""
    widest = 1
    for op, value in items:
        name = str(op)
        if name == "AT":
            if str(value) not in _BOUNDARIES:
                return None
            continue
        if name in ("ASSERT", "ASSERT_NOT"):
            width = value[1].getwidth()[1]
            if width >= _MAX_REACH:
                return None
            widest = max(widest, width)
        for inner in _subpatterns(value):
            found = _context(inner)
            if found is None:
                return None
            widest = max(widest, found)
    return widest


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
