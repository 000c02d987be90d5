"""``RuleCheck``: length limits, required and forbidden patterns, forbidden phrases, named rules.

Every rule runs on every reply and every violation is listed in one feedback, each line named
after its rule (``max_length``, ``min_length``, ``must_match``, ``must_not_match``,
``forbidden_phrases``, or a named rule's key), so the agent can fix them all in one retry.

- **Lengths** count the characters (code points) of the reply as delivered, whitespace
  included.
- **Patterns** (``must_match``, ``must_not_match``) are regular expressions (``re`` syntax),
  compiled once at construction with the ``regex`` module and searched with a time limit, in a
  worker thread (see ``replyguard.checks.patterns``); an invalid one raises ``ValueError``
  there. A pattern that runs out of time is not applied: if nothing else is wrong, the check
  passes with an ``error`` naming the pattern (it fails open).
- **Forbidden phrases** are literal text, found anywhere in the reply with any run of
  whitespace between their words, straight and curly apostrophes alike. A phrase whose edge is
  a letter, digit or underscore matches only as a whole word at that edge: "hell" does not
  fire in "hello", nor "as an AI" in "has an AIM"; an edge that is a symbol ("!!!") has no
  such condition.
- ``case_sensitive`` (default off) applies to patterns and phrases alike.
- **While a reply streams** (``scanner``), ``max_length``, forbidden phrases and every
  ``must_not_match`` pattern ``re`` can read are checked on each piece: one of bounded length
  with the overlap its matches can span, any other over the latest ``match_window_chars``
  characters (default 256; 0: at the end only), holding back text that may still become a
  match within them (``replyguard.checks.incremental.SlidingSearch``).
- **Named rules** get the reply's text and return ``(passed, message)``; the message is the
  feedback line on a failure. A named rule that raises, or returns anything else, is a
  violation of its own ("The rule 'X' could not be checked (IndexError)."), listed with the
  others: the reply may be what broke it, as with the JSON check's field rules, and the other
  rules' findings still count.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from replyguard.checks import patterns
from replyguard.checks.base import CheckResult, failed, passed
from replyguard.checks.incremental import Bounded, SlidingSearch
from replyguard.config._checks import DEFAULT_MATCH_WINDOW_CHARS, MAX_MATCH_WINDOW_CHARS
from replyguard.types import FailCategory, Reply, Turn

RuleFunction = Callable[[str], tuple[bool, str]]
"""A named rule: the reply's text in, ``(passed, message)`` out."""

_APOSTROPHE = "['\u2019]"
_EXCERPT_CHARS = 60
_WORD_CHAR = re.compile(r"\w")


class RuleCheck:
    """Length limits, regular expressions, forbidden phrases and named rules on the reply."""

    def __init__(
        self,
        *,
        rules: Mapping[str, RuleFunction] | None = None,
        max_length: int | None = None,
        min_length: int | None = None,
        must_match: Sequence[str] = (),
        must_not_match: Sequence[str] = (),
        forbidden_phrases: Sequence[str] = (),
        case_sensitive: bool = False,
        match_window_chars: int = DEFAULT_MATCH_WINDOW_CHARS,
        name: str = "rules",
        required: bool = False,
        category: FailCategory = FailCategory.RULE_VIOLATION,
    ) -> None:
        if max_length is not None and max_length < 1:
            raise ValueError(f"max_length must be at least 1, not {max_length}")
        if min_length is not None and min_length < 0:
            raise ValueError(f"min_length must not be negative, not {min_length}")
        if max_length is not None and min_length is not None and min_length > max_length:
            raise ValueError(f"min_length {min_length} is above max_length {max_length}")
        if not 0 <= match_window_chars <= MAX_MATCH_WINDOW_CHARS:
            raise ValueError(
                f"match_window_chars must be between 0 and {MAX_MATCH_WINDOW_CHARS:,}, "
                f"not {match_window_chars}"
            )
        flags = 0 if case_sensitive else re.IGNORECASE
        self.name = name
        self.required = required
        self.category = category
        self._rules = dict(rules or {})
        self._max_length = max_length
        self._min_length = min_length
        self._must_match = [(p, patterns.compile_pattern(p, flags)) for p in must_match]
        self._must_not_match = [(p, patterns.compile_pattern(p, flags)) for p in must_not_match]
        self._phrases = [(p, _phrase_pattern(p, flags)) for p in forbidden_phrases]
        self._phrase_scan = _phrase_scan([p for p, _ in self._phrases], flags)
        self._bounded = [
            (source, streamed)
            for source, pattern in self._must_not_match
            if (streamed := _streamed(source, pattern, flags, match_window_chars)) is not None
        ]

    def violations(self, text: str) -> list[tuple[str, str]]:
        """Every rule ``text`` breaks, as ``(rule name, message)``, in a fixed order.

        Raises ``PatternTimeout`` when a pattern runs out of time (``check`` fails open then).
        """
        found = self._length_violations(text)
        found += self._pattern_violations(text)
        found += self._phrase_and_named_violations(text)
        return found

    def _length_violations(self, text: str) -> list[tuple[str, str]]:
        found: list[tuple[str, str]] = []
        length = len(text)
        if self._max_length is not None and length > self._max_length:
            found.append(_too_long(length, self._max_length))
        if self._min_length is not None and length < self._min_length:
            found.append(
                (
                    "min_length",
                    f"The reply is {length:,} characters long; "
                    f"it must be at least {self._min_length:,}.",
                )
            )
        return found

    def _pattern_violations(self, text: str) -> list[tuple[str, str]]:
        # The patterns' time limit starts here, where the searches do (in a worker thread for
        # ``check``): a wait for a free thread, in a burst of turns, is not taken from it.
        until = patterns.deadline()
        found: list[tuple[str, str]] = []
        for source, pattern in self._must_match:
            if patterns.search(pattern, text, until) is None:
                found.append(
                    ("must_match", f"The reply does not match the required pattern '{source}'.")
                )
        for source, pattern in self._must_not_match:
            if (match := patterns.search(pattern, text, until)) is not None:
                found.append(_forbidden_match(source, match))
        return found

    def _phrase_and_named_violations(self, text: str) -> list[tuple[str, str]]:
        found: list[tuple[str, str]] = []
        for phrase, pattern in self._phrases:
            if pattern.search(text) is not None:
                found.append(_forbidden_phrase(phrase))
        for rule_name, rule in self._rules.items():
            message = _named_rule_violation(rule_name, rule, text)
            if message is not None:
                found.append((rule_name, message))
        return found

    async def check(self, turn: Turn, reply: Reply) -> CheckResult:
        """Fail ``reply`` with every rule it breaks; operator patterns run off the loop."""
        text = reply.text
        found = self._length_violations(text)
        timed_out: patterns.PatternTimeout | None = None
        if self._must_match or self._must_not_match:
            try:
                found += await asyncio.to_thread(self._pattern_violations, text)
            except patterns.PatternTimeout as exc:
                timed_out = exc
        found += self._phrase_and_named_violations(text)
        if not found:
            return passed(self.name, **_error(timed_out))
        return self._failure(found)

    def _failure(self, found: Sequence[tuple[str, str]]) -> CheckResult:
        count = "1 rule" if len(found) == 1 else f"{len(found)} rules"
        lines = "\n".join(f"- {rule}: {message}" for rule, message in found)
        return failed(self.name, self.category, f"The reply breaks {count}:\n{lines}")

    def scanner(self, turn: Turn) -> _RuleScanner | None:
        """The rules that can be decided on a prefix of a streamed reply (``max_length``,
        forbidden phrases, ``must_not_match`` patterns: bounded ones by their reach, the others
        over the window), or None."""
        if self._max_length is None and self._phrase_scan is None and not self._bounded:
            return None
        return _RuleScanner(self)


class _RuleScanner:
    """A ``RuleCheck`` on a streamed reply: its length, its forbidden phrases (on a view of the
    text whose whitespace runs are one character, so the overlap is the longest phrase) and
    its ``must_not_match`` patterns, each piece searched with just that overlap (a pattern of
    unbounded length: with the window)."""

    __slots__ = ("_check", "_clock", "_length", "_only", "_patterns", "_phrases", "_searches")

    def __init__(self, check: RuleCheck) -> None:
        self._check = check
        self._length = 0
        phrases = check._phrase_scan
        self._phrases = SlidingSearch([phrases[0]], collapse=True) if phrases else None
        bounded = [b for _, b in check._bounded]
        self._clock = _PieceClock()
        self._patterns = SlidingSearch(bounded, search=self._clock.search) if bounded else None
        self._searches = tuple(s for s in (self._phrases, self._patterns) if s is not None)
        self._only = self._searches[0] if len(self._searches) == 1 else None

    @property
    def scanned(self) -> int:
        return sum(s.scanned for s in self._searches)

    @property
    def pending_from(self) -> int | None:
        if self._only is not None:
            return self._only.pending_from
        pending = [s.pending_from for s in self._searches if s.pending_from is not None]
        return min(pending) if pending else None

    def feed(self, text: str) -> CheckResult | None:
        self._length += len(text)
        phrase = self._phrases.feed(text) if self._phrases is not None else None
        pattern = None
        if self._patterns is not None:
            self._clock.start()
            pattern = self._patterns.feed(text)
        limit = self._check._max_length
        if phrase is None and pattern is None and (limit is None or self._length <= limit):
            return None
        return self._found(phrase, pattern)

    def finish(self) -> CheckResult | None:
        phrase = self._phrases.finish() if self._phrases is not None else None
        pattern = None
        if self._patterns is not None:
            self._clock.start()
            pattern = self._patterns.finish()
        return self._found(phrase, pattern)

    def _found(
        self, phrase: tuple[int, Any] | None, pattern: tuple[int, Any] | None
    ) -> CheckResult | None:
        check, found = self._check, []
        if check._max_length is not None and self._length > check._max_length:
            found.append(_too_long(self._length, check._max_length))
        if phrase and check._phrase_scan:
            match = phrase[1]
            which = check._phrase_scan[1][match.lastindex - 1]
            found.append(_forbidden_phrase(check._phrases[which][0]))
        if pattern:
            index, match = pattern
            found.append(_forbidden_match(check._bounded[index][0], match))
        return check._failure(found) if found else None


_FEED_TIME_LIMIT = 0.05
"""Seconds an operator's patterns may take on one piece of a streamed reply, all searches
together (on the event loop: the window is short); one that runs over is left to the check of
the whole reply."""


class _PieceClock:
    """The one deadline of the pattern searches on the piece in hand (its own object, so the
    search it lends a ``SlidingSearch`` holds no reference back to the scanner)."""

    __slots__ = ("until",)

    def __init__(self) -> None:
        self.until = 0.0

    def start(self) -> None:
        self.until = time.monotonic() + _FEED_TIME_LIMIT

    def search(self, pattern: Any, text: str, pos: int, *, partial: bool = False) -> Any:
        return patterns.search(pattern, text, self.until, pos, partial=partial)


def _streamed(source: str, pattern: Any, flags: int, window: int) -> Bounded | None:
    """How a ``must_not_match`` pattern is searched in a streamed reply, holding back what may
    still become a match: over its longest match when that is bounded, else over the last
    ``window`` characters; None: at the end only."""
    looks = patterns.around(source, flags)
    if looks is None:
        return None
    limits = patterns.reach(source, flags)
    width = window if limits is None else limits[0]
    if not width:
        return None
    behind, ahead = looks
    return Bounded(pattern, width, behind + 1, ahead=ahead, holds_partial=True)


def _phrase_scan(phrases: Sequence[str], flags: int) -> tuple[Bounded, list[int]] | None:
    """Every phrase in one pattern for the collapsed view (words one whitespace apart), and
    which phrase each of its groups is. Phrases sharing their edge conditions share them in
    the pattern, behind a look-ahead for their first characters: most positions of a text are
    then passed over at once; with their first characters' class (``_start_characters``), a
    window without any is not searched at all."""
    if not phrases:
        return None
    edged: dict[tuple[str, str], list[tuple[int, str, str]]] = {}
    firsts: set[str] = set()
    for index, phrase in enumerate(phrases):
        head, body, tail = _phrase_parts(phrase, r"\s")
        first = phrase.replace("\u2019", "'").split()[0][0]
        firsts.update(_APOSTROPHE[1:-1] if first == "'" else first)
        starts = _APOSTROPHE[1:-1] if first == "'" else re.escape(first)
        edged.setdefault((head, tail), []).append((index, body, starts))
    alternatives: list[str] = []
    order: list[int] = []
    for (head, tail), members in edged.items():
        starts = "".join(sorted({s for _, _, s in members}))
        bodies = "|".join(f"({body})" for _, body, _ in members)
        alternatives.append(f"(?=[{starts}]){head}(?:{bodies}){tail}")
        order.extend(index for index, _, _ in members)
    source = "|".join(alternatives)
    limits = patterns.reach(source, flags)
    if not limits:
        return None
    words = all(head for head, _ in edged)  # every phrase begins a word
    start_class = _start_characters("".join(sorted(firsts)), flags, words=words)
    return Bounded(re.compile(source, flags), *limits, starts=start_class), order


_ASCII_FOLDS = "\u0130\u0131\u017f\u212a"
"""The characters beyond ASCII that ``re`` matches to an ASCII one when it ignores case
(dotted capital I, dotless i, long s, the Kelvin sign): a test checks this over all of
Unicode."""
_START_CANDIDATES = "".join(map(chr, range(128))) + _ASCII_FOLDS + "\u2019"


def _start_characters(firsts: str, flags: int, *, words: bool) -> re.Pattern[str] | None:
    """A class, without case folding, of every character that matches one of ``firsts`` (the
    phrases' first characters) under ``flags``: ``re`` scans for it at C speed; ``words``:
    only where a word begins (checked behind the character, so the scan stays fast). None
    when one of them has case variants beyond those listed here."""
    if any(c not in _START_CANDIDATES for c in firsts):
        return None
    first = re.compile(f"[{re.escape(firsts)}]", flags)
    found = [c for c in _START_CANDIDATES if first.fullmatch(c) is not None]
    edge = r"(?<!\w.)" if words else ""
    return re.compile(f"[{''.join(re.escape(c) for c in found)}]{edge}")


def _too_long(length: int, limit: int) -> tuple[str, str]:
    return "max_length", f"The reply is {length:,} characters long; the limit is {limit:,}."


def _forbidden_phrase(phrase: str) -> tuple[str, str]:
    return "forbidden_phrases", f"The reply contains the forbidden phrase '{phrase}'."


def _forbidden_match(source: str, match: Any) -> tuple[str, str]:
    return (
        "must_not_match",
        f"The reply matches the forbidden pattern '{source}' (at '{_shorten(match.group())}').",
    )


def _error(timed_out: Exception | None) -> dict[str, Any]:
    return {} if timed_out is None else {"error": str(timed_out)}


def _phrase_pattern(phrase: str, flags: int) -> re.Pattern[str]:
    return re.compile(_phrase_source(phrase, r"\s+"), flags)


def _phrase_source(phrase: str, gap: str) -> str:
    """The pattern of a forbidden phrase, its words ``gap`` apart."""
    return "".join(_phrase_parts(phrase, gap))


def _phrase_parts(phrase: str, gap: str) -> tuple[str, str, str]:
    """A forbidden phrase's pattern as (head condition, body, tail condition)."""
    words = phrase.replace("\u2019", "'").split()
    if not words:
        raise ValueError("a forbidden phrase must not be empty")
    body = gap.join(re.escape(word).replace("'", _APOSTROPHE) for word in words)
    head = r"(?<!\w)" if _WORD_CHAR.fullmatch(words[0][0]) else ""
    tail = r"(?!\w)" if _WORD_CHAR.fullmatch(words[-1][-1]) else ""
    return head, body, tail


def _shorten(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _EXCERPT_CHARS else flat[: _EXCERPT_CHARS - 1] + "…"


def _named_rule_violation(rule_name: str, rule: RuleFunction, text: str) -> str | None:
    """What a named rule finds wrong with ``text``, or None when ``text`` passes it."""
    try:
        outcome: object = rule(text)
    except Exception as exc:  # a bad reply must fail, not pass by crashing the check
        return f"The rule '{rule_name}' could not be checked ({type(exc).__name__})."
    if not (isinstance(outcome, tuple) and len(outcome) == 2 and isinstance(outcome[0], bool)):
        kind = type(outcome).__name__
        return f"The rule '{rule_name}' returned {kind}, not (passed, message): fix the rule."
    ok, message = outcome
    if ok:
        return None
    return str(message or "") or f"The reply breaks the rule '{rule_name}'."
