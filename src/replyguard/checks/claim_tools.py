"""Which tool calls back up a claimed action: the claims check's map from verbs to tool names.

**Patterns** are ``fnmatch`` globs, compared case-insensitively with the tool's whole name and
with each *word* of it. Names split into words at ``_``, ``-``, ``.``, ``/``, ``:``, spaces
and camelCase: ``Gmail.SendMessage`` is gmail, send, message. So ``send*`` matches
``gmail_send_message`` and ``sendEmail``; ``rm`` matches ``rm`` and ``fs_rm`` but not
``confirm_format``; ``*send*`` still matches any name holding "send", as it always did.
A pattern holding a separator (``*pull_request*``) also matches the name respelt with ``_``
between its words (``createPullRequest`` → ``create_pull_request``).

**Reading tools back up no action.** A name with a read-only word (get, list, read, search,
fetch, find, query, lookup, look, view, show, describe, check, status) backs a claim only
when it also holds an action verb (send, create, update, delete, …) that a pattern of the
claim matches: ``get_order_status`` does not back "I ordered", ``get_or_create_event`` backs
"I created". Nouns that double as verbs (order, post, file, email, message, event, book) are
not action verbs here: a reading tool that names them reads them. The one exception is a
pattern that is a tool's exact name: a custom claim of reading ("checked") lists its tools
by name.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping
from types import MappingProxyType

_SHELL = ("bash", "sh", "zsh", "*shell", "exec*", "terminal*", "command*", "cmd", "subprocess")
_MESSAGING = ("send*", "*mail", "mail*", "message*", "msg", "slack", "sms", "notify", "reply")
_WRITING = ("write*", "save*", "edit*", "create*", "update*", "patch", "put", "store", "replace*")
_DELETING = ("delete*", "remove*", "rm", "destroy*", "drop", "trash*", "purge*", "unlink")
_GIT = ("git*", *_SHELL)
_PAYING = ("pay", "payment*", "paypal", "charge*", "checkout")
_BUYING = ("order*", "purchase*", "buy*", "cart", *_PAYING)
_CANCELLING = ("cancel*", "delete*", "remove*", "refund*")

DEFAULT_CLAIMS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "sent": _MESSAGING,
        "emailed": ("*mail", "mail*", "send*", "message*"),
        "messaged": ("message*", "msg", "send*", "slack", "sms", "chat*", "dm"),
        "texted": ("sms", "text", "send*", "message*"),
        "notified": (*_MESSAGING, "alert*", "page", "pagerduty"),
        "posted": ("post", "publish*", "tweet*", "comment*", "send*", "message*"),
        "published": ("publish*", "post", "release*", "deploy*", "upload*", *_SHELL),
        "saved": (*_WRITING, "upload*", *_SHELL),
        "created": (*_WRITING, "new", "add", "insert*", "generate*", *_SHELL),
        "updated": (*_WRITING, "set", "modify", "upsert*", "change*", *_SHELL),
        "deleted": (*_DELETING, *_SHELL),
        "uploaded": ("upload*", "put", "save*", "write*", "sync*", "push*", *_SHELL),
        "deployed": ("deploy*", "release*", "publish*", "rollout", "ship", *_SHELL),
        "committed": ("commit*", *_GIT),
        "pushed": ("push*", *_GIT),
        "merged": ("merge*", "*pull_request*", *_GIT),
        "ran": ("run*", "test*", "pytest", "invoke*", "*python*", "code", *_SHELL),
        "installed": ("install*", "pip", "npm", "apt", "brew", "package*", *_SHELL),
        "restarted": ("restart*", "reboot*", "reload*", *_SHELL),
        "scheduled": ("schedule*", "calendar*", "event*", "meeting*", "cron*", "remind*"),
        "booked": ("book", "booking*", "reserv*", "schedule*", "calendar*", "order*"),
        "paid": (*_PAYING, "transfer*", "invoice*", "purchase*"),
        "ordered": _BUYING,
        "purchased": _BUYING,
        "filed": ("file", "submit*", "ticket*", "issue*", "report*", "create*"),
        "submitted": ("submit*", "file", "send*", "post", "form", "forms", "create*"),
        "cancelled": _CANCELLING,
        "canceled": _CANCELLING,
        "refunded": ("refund*", "pay", "payment*", "charge*", "reverse*", "credit*"),
    }
)
"""Claimed verb → tool-name patterns used when ``claims`` is not given."""

_READ_ONLY_WORDS = frozenset(
    {"get", "list", "read", "search", "fetch", "find", "query", "lookup", "look", "view"}
    | {"show", "describe", "check", "status"}
)
"""Words that mark a tool as one that only reads."""

_ACTION_VERBS = frozenset(
    {"send", "reply", "forward", "notify", "create", "add", "insert", "generate", "update"}
    | {"set", "modify", "upsert", "patch", "put", "replace", "change", "edit", "write", "save"}
    | {"store", "delete", "remove", "rm", "destroy", "drop", "trash", "purge", "unlink"}
    | {"upload", "sync", "push", "commit", "merge", "deploy", "publish", "run", "exec"}
    | {"execute", "invoke", "install", "restart", "reboot", "reload", "reserve", "pay"}
    | {"charge", "transfer", "purchase", "buy", "checkout", "submit", "cancel", "refund"}
)
# Words: a run of capitals not followed by a small letter (HTTP), or a word with at most one
# leading capital (Send, message), each with the digits that follow it (s3, v2).
_WORD = re.compile(r"[A-Z]+(?![a-z])[0-9]*|[A-Z]?[a-z]+[0-9]*|[0-9]+")
_SEPARATOR = re.compile(r"[_\-./: ]")


def tool_words(name: str) -> list[str]:
    """The lowercase words of a tool's name: ``Gmail.SendMessage`` → gmail, send, message."""
    return [word.lower() for word in _WORD.findall(name)]


class ToolMatcher:
    """Decides whether a tool name backs one claimed verb, given the verb's patterns."""

    def __init__(self, patterns: Iterable[str]) -> None:
        unique = list(dict.fromkeys(pattern.lower() for pattern in patterns))
        self._exact = frozenset(p for p in unique if not any(c in p for c in "*?["))
        self._pattern = _any_of(unique)
        self._spelt = _any_of(p for p in unique if _SEPARATOR.search(p))

    def backs(self, name: str) -> bool:
        """Whether a successful call of ``name`` backs the claim (see the module docstring)."""
        lowered = name.lower()
        if lowered in self._exact:
            return True
        words = tool_words(name)
        matching = [word for word in words if self._pattern.fullmatch(word)]
        if not matching and not self._names_match(lowered, words):
            return False
        if _READ_ONLY_WORDS.isdisjoint(words):
            return True
        return any(word in _ACTION_VERBS for word in matching)

    def _names_match(self, lowered: str, words: list[str]) -> bool:
        return bool(self._pattern.fullmatch(lowered) or self._spelt.fullmatch("_".join(words)))


def _any_of(patterns: Iterable[str]) -> re.Pattern[str]:
    alternatives = [fnmatch.translate(pattern) for pattern in patterns]
    return re.compile("|".join(alternatives) or "(?!)", re.DOTALL)
