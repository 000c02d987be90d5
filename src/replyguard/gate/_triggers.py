"""Whether a turn is worth judging: verify-all, a keyword in the reply, or a heartbeat.

``TriggerMatcher(config)`` is built once (it compiles the keyword pattern) and is immutable,
so one instance can serve every turn, from any task or thread. ``decide(turn, reply_text)``:

- a heartbeat turn is judged only when ``verify_heartbeat`` is on, and then always
  (``HEARTBEAT``); ``verify_all`` and keywords do not apply to heartbeat turns;
- any other turn is judged when ``verify_all`` is on (``VERIFY_ALL``), else when the reply
  fires a keyword (``KEYWORD``); otherwise ``None``.

The runner asks about the first reply of a turn only: once a turn is judged, every retry of
it is judged too, keywords or not. That is the runner's rule, not this module's.

Keywords match whole words and phrases, case-insensitively, with any run of whitespace
between a phrase's words. "Whole word" means not glued to a letter, digit or underscore, nor
to a hyphenated neighbour: ``done`` fires in "Done!" and "done - shipping", not in "undone",
"doneness", "half-done" or "done-ness". A keyword's edge that is itself a symbol (``c++``,
``✅``) has no boundary condition. Keywords are literal text, never patterns.

A negated occurrence does not fire. An occurrence is negated when, walking back from it
within its clause over "filler" words only (auxiliaries, pronouns and degree words such as
``is``, ``been``, ``it's``, ``yet``, ``quite``, ``fully``), the first other word is a
negation: ``not``, ``no``, ``nor``, ``never``, ``nothing``, ``none``, ``nobody``,
``neither``, ``without``, ``cannot``, a word ending in ``n't`` (straight or curly
apostrophe), or ``yet to`` ("yet to be finished"). A clause ends at ``. ! ? ; : ,``, an
ellipsis, an en or em dash, a bracket, a line break, or a joining word (``but``, ``however``,
``though``, ``although``, ``and``, ``so``, ``whereas``). So "not done yet", "isn't finished",
"is not quite ready" and "nothing is ready" do not fire, while "It's not perfect, but it's
done", "There's no doubt it's done", "I can't believe it's finished" and "Done! Nothing else
to do" do. The reply fires when any occurrence of any keyword is not negated. When in doubt
the rule fires: a needless judgement costs money, a missed one lets a false claim through.

Matching is linear in the reply's length: one pass of the compiled pattern, plus a bounded
look back (``_LOOKBACK_CHARS``) at each occurrence.
"""

from __future__ import annotations

import re
from enum import StrEnum
from itertools import pairwise

from replyguard.config._schema import VerifierConfig
from replyguard.types import Turn

_NEGATIONS = frozenset(
    {"not", "no", "nor", "never", "nothing", "none", "nobody", "neither", "without", "cannot"}
)
_CLAUSE_WORDS = frozenset({"but", "however", "though", "although", "and", "so", "whereas"})
_FILLERS = frozenset(
    {
        "is", "are", "was", "were", "am", "be", "been", "being", "has", "have", "had",
        "get", "got", "gotten", "it", "it's", "its", "that", "that's", "this", "everything",
        "anything", "i", "i'm", "we", "we're", "you", "you're", "they", "they're", "he", "she",
        "the", "yet", "quite", "fully", "entirely", "completely", "totally", "really", "all",
        "even", "actually", "still", "properly", "exactly", "ever", "to",
    }
)  # fmt: skip
"""Words that may stand between a negation and the keyword it negates."""
_NEGATION_REACH = 6
"""How many words before a keyword are looked at."""
_LOOKBACK_CHARS = 80
"""How far back the negation words are looked for (three ordinary words fit easily)."""
_CLAUSE_BREAK = re.compile(r"[.!?;:,\n\r\u2026\u2013\u2014()\[\]{}]")
_LEADING_WORD = re.compile(r"^\w+")
_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)*")  # after _APOSTROPHES: "isn't" is one word
_APOSTROPHES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u02bc": "'"})


class TriggerKind(StrEnum):
    """Why a turn is judged."""

    VERIFY_ALL = "verify_all"
    KEYWORD = "keyword"
    HEARTBEAT = "heartbeat"


class TriggerMatcher:
    """The trigger decision for one config; build once, use for every turn."""

    def __init__(self, config: VerifierConfig) -> None:
        self._verify_all = config.verify_all
        self._verify_heartbeat = config.verify_heartbeat
        seen: dict[str, str] = {}
        for keyword in config.trigger_keywords:
            spaced = " ".join(keyword.split())
            seen.setdefault(spaced.casefold(), spaced)
        # Longest first, so a phrase wins over a keyword it starts with ("here you go", "here").
        self._keywords = tuple(sorted(seen.values(), key=len, reverse=True))
        self._pattern = (
            re.compile("|".join(f"({_keyword_pattern(k)})" for k in self._keywords), re.IGNORECASE)
            if self._keywords
            else None
        )
        # Each keyword's first word in lower case: ASCII text holding none of them cannot match,
        # and saying so takes a few substring searches instead of the pattern's look-behinds.
        # (Only for ASCII keywords: IGNORECASE matches some non-ASCII letters lower() keeps.)
        ascii_only = all(keyword.isascii() for keyword in self._keywords)
        self._needles = (
            tuple({keyword.split()[0].lower() for keyword in self._keywords})
            if ascii_only
            else None
        )

    def decide(self, turn: Turn, reply_text: str) -> TriggerKind | None:
        """Why ``turn`` (whose first reply is ``reply_text``) is judged, or ``None``."""
        if turn.heartbeat:
            return TriggerKind.HEARTBEAT if self._verify_heartbeat else None
        if self._verify_all:
            return TriggerKind.VERIFY_ALL
        if self.matched_keyword(reply_text) is not None:
            return TriggerKind.KEYWORD
        return None

    def may_judge(self, turn: Turn) -> bool:
        """Whether ``decide`` can judge ``turn`` for some reply (False: a heartbeat turn
        without ``verifyHeartbeat``, or no trigger at all), known before the reply is."""
        if turn.heartbeat:
            return self._verify_heartbeat
        return self._verify_all or self._pattern is not None

    def matched_keyword(self, text: str) -> str | None:
        """The keyword of the first non-negated occurrence in ``text`` (spaces collapsed)."""
        if self._pattern is None:
            return None
        if self._needles is not None and text.isascii():
            lowered = text.lower()
            if not any(needle in lowered for needle in self._needles):
                return None
        for match in self._pattern.finditer(text):
            if not _negated(text, match.start()):
                assert match.lastindex is not None  # every alternative is one group
                return self._keywords[match.lastindex - 1]
        return None


def _keyword_pattern(keyword: str) -> str:
    body = r"\s+".join(re.escape(word) for word in keyword.split())
    head = r"(?<!\w)(?<!\w-)" if _is_word_char(keyword[0]) else ""
    tail = r"(?!-?\w)" if _is_word_char(keyword[-1]) else ""
    return head + body + tail


def _is_word_char(char: str) -> bool:
    return char.isalnum() or char == "_"


def _negated(text: str, start: int) -> bool:
    lo = max(0, start - _LOOKBACK_CHARS)
    window = text[lo:start]
    if lo > 0 and _is_word_char(text[lo - 1]):
        window = _LEADING_WORD.sub("", window)  # the tail of a word cut in two is no word
    clause = _CLAUSE_BREAK.split(window)[-1]
    recent = _WORD.findall(clause.translate(_APOSTROPHES).lower())[-_NEGATION_REACH:]
    joins = [i for i, word in enumerate(recent) if word in _CLAUSE_WORDS]
    if joins:
        recent = recent[joins[-1] + 1 :]
    for before, word in pairwise(["", *reversed(recent)]):
        if word in _NEGATIONS or word.endswith("n't") or (word, before) == ("yet", "to"):
            return True
        if word not in _FILLERS:
            return False
    return False
