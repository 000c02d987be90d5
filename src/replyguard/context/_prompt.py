"""The judge prompt's vocabulary: its limits and caps, the rubric (the system message), the
per-call section code, and ``JudgePrompt``, what a build returns."""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from replyguard._randomness import token_hex
from replyguard._templates import render
from replyguard.context import _tokens as tokens
from replyguard.types import FailCategory

# Per-message framing of a chat prompt, counted on top of the texts (OpenAI counts 3-4).
MESSAGE_OVERHEAD = 8
# What is always kept of the two edges, in tokens, however small the budget.
USER_FLOOR = 64
REPLY_FLOOR = 128
HISTORY_MESSAGE_CAP = 1000
METADATA_CAP = 600
FEEDBACK_CAP = 800
HEARTBEAT_MIN_CAP = 600
EVIDENCE_CAP = 2000
"""The evidence section's tokens at most (tool results and retrieved context): a quarter of
the budget when that is less."""
TOOL_LEDGER_ROWS = 30
Redact = Callable[[str], str]
"""Rewrites a text before the judge sees it (PII removal); must return a string."""


def _same(text: str) -> str:
    return text


@dataclass(frozen=True, slots=True)
class SectionCaps:
    """Each section's own cap in tokens (in ``context._build``'s section order: user request,
    rules, agent instructions, metadata, evidence, previous feedback, heartbeat tasks, reply),
    and a history message's."""

    sections: tuple[int, ...]
    history: int


@dataclass(frozen=True)
class ContextLimits:
    """The token limits of one judge prompt."""

    budget: int = 8000
    response_cap: int = 3000
    rules_cap: int = 2000
    history_turns: int = 5

    @functools.cached_property
    def _caps(self) -> SectionCaps:
        """The caps these limits give each section, worked out once (limits are immutable:
        a config reload makes new ones)."""
        budget = self.budget
        rules_cap = min(self.rules_cap, budget)
        sections = (
            budget,
            rules_cap,
            rules_cap,
            METADATA_CAP,
            min(EVIDENCE_CAP, budget // 4),
            FEEDBACK_CAP,
            max(rules_cap, min(HEARTBEAT_MIN_CAP, budget)),
            min(self.response_cap, budget),
        )
        return SectionCaps(sections, min(HISTORY_MESSAGE_CAP, budget // 8))


@dataclass(frozen=True)
class RulesSource:
    """One block of user rules and where it came from (a file name, or code)."""

    origin: str
    text: str


class JudgePrompt:
    """A rendered judge prompt and what it took. Immutable.

    ``tokens`` is the exact o200k_base count of the whole prompt (system message, review
    request and ``MESSAGE_OVERHEAD``). When the build proved the fit from the prompt's UTF-8
    size alone it did not tokenize the prompt, and ``tokens`` is counted on first use.
    """

    __slots__ = ("_tokens", "nonce", "system", "trimmed", "user")
    system: str
    user: str
    nonce: str
    trimmed: tuple[str, ...]
    _tokens: int | None

    def __init__(
        self,
        system: str,
        user: str,
        nonce: str,
        tokens: int | None = None,
        trimmed: tuple[str, ...] = (),
    ) -> None:
        _set_system(self, system)
        _set_user(self, user)
        _set_nonce(self, nonce)
        _set_trimmed(self, tuple(trimmed))
        _set_tokens(self, tokens)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("a JudgePrompt is immutable")

    def __repr__(self) -> str:
        return (
            f"JudgePrompt(nonce={self.nonce!r}, user={len(self.user):,} characters,"
            f" trimmed={self.trimmed!r})"
        )

    @property
    def tokens(self) -> int:
        """The whole prompt's exact tokens (counted now if the build did not need to)."""
        if self._tokens is None:
            counted = tokens.count(self.system) + tokens.count(self.user) + MESSAGE_OVERHEAD
            _set_tokens(self, counted)
            return counted
        return self._tokens

    @property
    def counted_tokens(self) -> int | None:
        """``tokens`` if the build (or an earlier read) counted them, else None: never counts."""
        return self._tokens

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The chat messages to send: the static rubric, then the review request."""
        return [{"role": "system", "content": self.system}, {"role": "user", "content": self.user}]


# Each slot set through its own descriptor, bound once (``JudgePrompt`` refuses
# ``__setattr__``): a third of what ``object.__setattr__`` costs, on every judge prompt.
_set_system = JudgePrompt.__dict__["system"].__set__
_set_user = JudgePrompt.__dict__["user"].__set__
_set_nonce = JudgePrompt.__dict__["nonce"].__set__
_set_trimmed = JudgePrompt.__dict__["trimmed"].__set__
_set_tokens = JudgePrompt.__dict__["_tokens"].__set__


def new_nonce() -> str:
    """A fresh random section code for one judge call."""
    return token_hex(6)


BUILT_IN_CATEGORIES = tuple(category.value for category in FailCategory)
"""The built-in FAIL categories, in the order the rubric lists them."""


@dataclass(frozen=True)
class Rubric:
    """The judge's standing instructions (the system message): the built-in rubric, the
    operator's criteria (``rubricFile``) and categories (``categories``). One per profile,
    identical on every call, so providers can cache it."""

    criteria: str = ""
    """The operator's criteria, added to the built-in ones."""
    categories: tuple[tuple[str, str], ...] = ()
    """Custom FAIL categories: (name, retry guidance), shown to the judge."""

    @functools.cached_property
    def custom(self) -> tuple[tuple[str, str], ...]:
        """The categories that are not built in (a config may give a later built-in, such as
        ``grounding``, its own retry guidance: the judge is shown it once, as a built-in)."""
        return tuple(item for item in self.categories if item[0] not in BUILT_IN_CATEGORIES)

    @functools.cached_property
    def system(self) -> str:
        """The system message."""
        return render("judge_system.j2", criteria=self.criteria, categories=self.custom)

    @functools.cached_property
    def tokens(self) -> int:
        """The system message's tokens, with its message framing."""
        return tokens.count(self.system) + MESSAGE_OVERHEAD

    @property
    def tokens_at_most(self) -> int:
        """``tokens`` once counted, else a bound on them that needs no tokenizer (the
        system message's UTF-8 size, with its message framing)."""
        counted = self.__dict__.get("tokens")
        return counted if counted is not None else self._size_bound

    @functools.cached_property
    def _size_bound(self) -> int:
        """``tokens_at_most`` before ``tokens`` is counted (the system message is fixed)."""
        return tokens.size_bound(self.system) + MESSAGE_OVERHEAD

    @functools.cached_property
    def digest(self) -> str:
        """A short hash of the system message: a change of rubric changes it."""
        return hashlib.sha256(self.system.encode("utf-8")).hexdigest()[:12]

    @functools.cached_property
    def category_names(self) -> str:
        """Every category the judge may name, for the format reminder (``a|b|c``)."""
        return "|".join((*BUILT_IN_CATEGORIES, *(name for name, _ in self.custom)))


DEFAULT_RUBRIC = Rubric()
"""The built-in rubric alone (no operator criteria, no custom categories)."""


def system_prompt() -> str:
    """The built-in rubric: identical on every call, so providers can cache it."""
    return DEFAULT_RUBRIC.system
