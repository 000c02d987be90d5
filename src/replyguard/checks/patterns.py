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
import time
from typing import Any

import regex  # type: ignore[import-untyped]  # regex ships no type information

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
    try:
        return _compiled(source, flags)
    except regex.error as exc:
        raise ValueError(f"{source!r} is not a valid regular expression: {exc}") from None


@functools.lru_cache(maxsize=512)
def _compiled(source: str, flags: int) -> Any:
    return regex.compile(source, flags | regex.VERSION0)


def deadline() -> float:
    """The monotonic time by which a check's patterns must be done, starting now."""
    return time.monotonic() + TIME_LIMIT


def search(pattern: Any, text: str, until: float | None = None) -> Any:
    """``pattern.search(text)`` by ``until`` (or the deadline set by ``within``, or a fresh
    ``TIME_LIMIT``); raises ``PatternTimeout`` when it runs out."""
    until = until or _UNTIL.get() or deadline()
    left = until - time.monotonic()
    try:
        if left <= 0:
            raise TimeoutError
        return pattern.search(text, timeout=left, concurrent=True)
    except TimeoutError:
        raise PatternTimeout(pattern.pattern, TIME_LIMIT) from None


def search_source(source: str, text: str) -> Any:
    """``search`` for a pattern given as text (a JSON Schema's), compiled once and cached."""
    return search(compile_pattern(source), text)


def within(until: float) -> contextvars.Token[float | None]:
    """Make ``until`` the deadline of ``search`` calls in this context (reset the token)."""
    return _UNTIL.set(until)


def reset(token: contextvars.Token[float | None]) -> None:
    _UNTIL.reset(token)
