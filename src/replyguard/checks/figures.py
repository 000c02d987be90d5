"""``FigureCheck``: every figure of the reply must occur in what the turn was given.

Opt-in (``{"type": "figures"}`` in ``checks``, or ``FigureCheck()`` in code). Every amount,
date, ID, URL, e-mail address and file path the reply states (``figures_extract``) must occur,
in one of its forms, in the turn's sources: the tool calls' results and arguments
(``ToolCallRecord``), the retrieved context (``Turn.evidence``), the user's message, the
history (every message's text and tool calls), the rules and the agent's instructions. A
figure that occurs in none fails the reply as ``grounding``, naming the figures, before any
judge call. "$1,200.00" is found as "1200 USD" or "1.200,00 USD", not as "1200 EUR"; "March 5,
2026" as "2026-03-05".

It cannot know a figure the reply derives (a sum, a date a week later): such a reply fails
too, so the check is opt-in, and its ``kinds`` option narrows it (``["amount", "id"]``).

While a reply streams, the check holds back (``pending_from``, ``"release"`` mode) from the
first figure the turn's own sources do not hold, and the last few characters (a figure may
still be growing), until the agent's stream ends; it never cuts a stream short, because the
tool results arrive with the reply's ``RunMeta``, after its text. The complete check then
decides with them (a reply that fails is withdrawn with a ``Retract``); a figure the turn
already holds is released at once.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterable, Iterator, Sequence

from replyguard.checks.base import failed, passed
from replyguard.checks.figures_extract import (
    KINDS,
    Figure,
    bare_amounts,
    date_keys,
    figures,
    url_form,
)
from replyguard.context._sections import _content_text, _text
from replyguard.types import CheckResult, FailCategory, Reply, Turn

__all__ = ["FigureCheck"]

_SEPARATORS = re.compile(r"[-_#]")

INLINE_CHARS = 50_000
"""A reply and sources longer than this together are searched off the event loop."""
LISTED = 8
"""At most this many figures are named in the feedback."""
HOLD = 32
"""Characters at the end of a streamed prefix that may still be part of a growing figure."""
BACK = 48
"""Characters before the decided offset searched again (a figure may span a space)."""
MAX_WINDOW = 4096
"""A streamed window longer than this (one token that never ends) is held for the end."""


class Sources:
    """What a turn's figures may be found in: each kind's forms, and the texts themselves."""

    def __init__(self, texts: Iterable[str]) -> None:
        self.texts = [text for text in texts if text]
        self.folded = "\n".join(self.texts).casefold()
        self.compact = _SEPARATORS.sub("", self.folded)  # an ID's form is found in it
        self.slashed = "\n".join(self.texts).replace("\\", "/")
        self.forms: dict[str, set[str]] = {kind: set() for kind in KINDS}
        self.urls: list[str] = []
        for text in self.texts:
            self.forms["amount"] |= bare_amounts(text)
            for figure in figures(text):
                keys = date_keys(figure) if figure.kind == "date" else figure.forms
                self.forms[figure.kind] |= keys
                if figure.kind == "url":
                    self.urls.append(url_form(figure.text))

    def holds(self, figure: Figure) -> bool:
        """Whether ``figure`` occurs here in one of its forms."""
        if figure.forms & self.forms[figure.kind]:
            return True
        if figure.kind == "email":
            return figure.text.casefold() in self.folded
        if figure.kind == "id":  # "#4821" in a tool's {"ticket": 4821}; "INV20260042"
            (form,) = figure.forms
            return (
                re.search(rf"(?<![0-9a-z]){re.escape(form)}(?![0-9a-z])", self.compact) is not None
            )
        if figure.kind == "url":
            (form,) = figure.forms
            return any(url.startswith(form) for url in self.urls) or form in self.folded
        if figure.kind == "path":
            return figure.text.replace("\\", "/") in self.slashed
        return False


def turn_texts(turn: Turn) -> Iterator[str]:
    """The turn's own sources: the user's message, the history (each message's text, name and
    tool calls), the retrieved context, the rules and the agent's instructions."""
    yield turn.user_message
    for message in turn.history:
        if not isinstance(message, dict):
            yield _text(message)
            continue
        yield _content_text(message.get("content"))
        calls = message.get("tool_calls")
        if calls:
            yield _text(calls)
    yield from turn.evidence
    yield from turn.rules
    if turn.agent_instructions:
        yield turn.agent_instructions


def reply_texts(reply: Reply) -> Iterator[str]:
    """The reply's tool calls: each one's arguments and result."""
    for call in reply.meta.tool_calls:
        if call.arguments is not None:
            yield _text(call.arguments)
        if call.result is not None:
            yield _text(call.result)


def _feedback(missing: Sequence[Figure]) -> str:
    shown = ", ".join(f"{figure.text} ({figure.kind})" for figure in missing[:LISTED])
    more = f" and {len(missing) - LISTED} more" if len(missing) > LISTED else ""
    return (
        "These figures occur nowhere in the tool results, the retrieved context, the user's "
        f"message or the conversation: {shown}{more}. State only figures they contain "
        "(or say plainly that you do not have them)."
    )


class FigureCheck:
    """Every amount, date, ID, URL, e-mail address and file path of the reply must occur in
    the turn's tool results, retrieved context, user message or history (``grounding``)."""

    def __init__(
        self, *, name: str = "figures", required: bool = False, kinds: Sequence[str] = KINDS
    ) -> None:
        unknown = sorted(set(kinds) - set(KINDS))
        if unknown or not kinds:
            raise ValueError(f"kinds must be some of {', '.join(KINDS)} (got {unknown or '[]'})")
        self.name = name
        self.required = required
        self.kinds = frozenset(kinds)

    def missing(self, turn: Turn, reply: Reply) -> list[Figure]:
        """The reply's figures that its turn and tool calls do not hold."""
        return self._missing(reply.text, [*turn_texts(turn), *reply_texts(reply)])

    def _missing(self, text: str, texts: list[str]) -> list[Figure]:
        found = figures(text, self.kinds)
        if not found:
            return []
        sources = Sources(texts)
        missing: dict[str, Figure] = {}
        for figure in found:
            if figure.text not in missing and not sources.holds(figure):
                missing[figure.text] = figure
        return list(missing.values())

    async def check(self, turn: Turn, reply: Reply) -> CheckResult:
        """Fail ``reply`` naming each figure that occurs in none of the turn's sources (a
        long reply, or long sources, are searched off the event loop)."""
        texts = [*turn_texts(turn), *reply_texts(reply)]
        if len(reply.text) + sum(len(text) for text in texts) > INLINE_CHARS:
            missing = await asyncio.to_thread(self._missing, reply.text, texts)
        else:
            missing = self._missing(reply.text, texts)
        if not missing:
            return passed(self.name)
        return failed(self.name, FailCategory.GROUNDING, _feedback(missing))

    def scanner(self, turn: Turn) -> FigureScanner:
        """A fresh scanner for one streamed reply of ``turn``."""
        return FigureScanner(self.kinds, Sources(turn_texts(turn)))


class FigureScanner:
    """One streamed reply's figures, looked at as they arrive (see the module doc): it never
    fails a prefix (the tool results come after the text), it holds back what is not yet
    known to be grounded. It keeps only the text from a little before the first undecided
    offset, so its work is linear in the reply (``scanned``)."""

    def __init__(self, kinds: frozenset[str], sources: Sources) -> None:
        self._kinds = kinds
        self._sources = sources
        self._tail = ""  # the text from offset ``_base`` on
        self._base = 0
        self._decided = 0  # every figure starting before this offset was looked at
        self._held: int | None = None  # from here on, the complete check decides
        self.scanned = 0
        self.pending_from: int | None = None

    def feed(self, text: str) -> CheckResult | None:
        if self._held is None:
            self._tail += text
            self._look(final=False)
        return None

    def finish(self) -> CheckResult | None:
        if self._held is None:
            self._look(final=True)
        self.pending_from = self._held
        return None

    def _look(self, *, final: bool) -> None:
        end = self._base + len(self._tail)
        start = max(self._decided - BACK, self._base)
        space = self._tail.rfind(" ", 0, start - self._base)
        start = self._base + space + 1 if space >= 0 else self._base
        window = self._tail[start - self._base :]
        self.scanned += len(window)
        limit = end if final else end - HOLD
        decided = max(limit, self._decided)
        for figure in figures(window, self._kinds):
            begin = start + figure.start
            if begin + len(figure.text) > limit:  # it may still grow: looked at again
                decided = min(decided, begin)
                break
            if begin >= self._decided - BACK and not self._sources.holds(figure):
                self._held = begin
                break
        if self._held is None and len(window) > MAX_WINDOW:  # one endless token: hold it
            self._held = start
        self._decided = decided
        self.pending_from = self._held if self._held is not None else max(limit, 0)
        if final and self._held is None:
            self.pending_from = None
        keep = max(min(self._decided, end) - 2 * BACK, self._base)
        self._tail, self._base = self._tail[keep - self._base :], keep
