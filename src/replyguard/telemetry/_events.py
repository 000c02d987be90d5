"""Structured log events, routed to the stdlib logger ``replyguard``.

replyguard never calls ``structlog.configure()``: its events go through a structlog logger
wrapped around ``logging.getLogger("replyguard")`` with one processor of its own (or, where
that logger would change nothing, no host context class configured, straight from their fields
to the same record: ``Events._direct``), so a host that
configured no logging sees nothing (stdlib's last-resort handler shows WARNING and above on
stderr only), and a host that did gets each event as one record whose message is
``event key=value ...`` (``failed_open status=failed_open reason=judge_error ...``: an enum by
its value, a string in double quotes only when it has a space, a quote or ``=``) and whose
``replyguard`` attribute holds the event as a dict.

Every string in an event passes through redaction of the configured secrets. Content (user
text, replies, feedback) is only added by callers when ``logContent`` is on.
"""

from __future__ import annotations

import contextlib
import enum
import functools
import json
import logging
import re
import sys
from collections.abc import Iterable, Mapping, MutableMapping
from typing import Any

LOGGER_NAME = "replyguard"
REDACTED = "[REDACTED]"
# Shapes of credentials worth hiding even when they are not the configured key, each tried
# only when one of its anchors occurs (a plain ``in`` is far quicker than the regex on a long
# text): OpenAI and Anthropic (sk-, sk-proj-, sk-ant-), Google (AIza), AWS access key ids
# (AKIA, ASIA), GitHub (ghp_ and its kin, github_pat_), Slack (xox?-), Hugging Face (hf_), Groq
# (gsk_), xAI (xai-), a bearer token, and the value after an api-key label ("x-api-key: ...",
# "api_key=...", '"apiKey": "..."', "secret_key", "access_key").
_KEY_SHAPES: tuple[tuple[tuple[str, ...], re.Pattern[str]], ...] = (
    (("sk-",), re.compile(r"sk-(?:ant-|proj-)?[A-Za-z0-9_\-]{12,}")),
    (("AIza",), re.compile(r"(?<![A-Za-z0-9])AIza[0-9A-Za-z_\-]{30,}")),
    (("AKIA", "ASIA"), re.compile(r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[0-9A-Z]{16}")),
    (
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "hf_", "gsk_", "xox", "xai-"),
        re.compile(
            r"(?<![A-Za-z0-9])(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}"
            r"|hf_[A-Za-z0-9]{30,}|gsk_[A-Za-z0-9]{20,}|xox[abposr]-[A-Za-z0-9\-]{10,}"
            r"|xai-[A-Za-z0-9]{20,})"
        ),
    ),
    (("Bearer ",), re.compile(r"(?<=Bearer )[A-Za-z0-9._\-]{12,}")),
    (
        ("key", "Key", "KEY"),
        re.compile(
            r"(?i:api[_-]?key|secret[_-]key|access[_-]key)[\"']?[ \t]*[:=][ \t]*[\"']?"
            r"(?P<value>[A-Za-z0-9._\-]{16,})"
        ),
    ),
)


def _hidden(match: re.Match[str]) -> str:
    """The match with its credential replaced (a label before the value is kept)."""
    if "value" not in match.re.groupindex:
        return REDACTED
    return match.group()[: match.start("value") - match.start()] + REDACTED


_ANY_ANCHOR = re.compile("|".join(re.escape(a) for anchors, _ in _KEY_SHAPES for a in anchors))
"""Whether any shape's anchor occurs: one search in place of a plain ``in`` per anchor, which
only a short text (``_GATED_BELOW``) pays off for (a verdict's raw answer, a model name)."""
_GATED_BELOW = 512


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with every given secret and anything shaped like an API key replaced."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, REDACTED)
    if len(text) < _GATED_BELOW and _ANY_ANCHOR.search(text) is None:
        return text
    for anchors, shape in _KEY_SHAPES:
        for anchor in anchors:  # a plain loop: no generator to build per shape and text
            if anchor in text:
                text = shape.sub(_hidden, text)
                break
    return text


def describe_error(exc: BaseException, secrets: Iterable[str] = (), limit: int = 300) -> str:
    """A short, redacted one-line description of an exception, safe to log or store.

    Never raises: an exception whose own text fails is described by its class name.
    """
    try:
        raw = str(exc)
    except Exception:
        raw = ""
    # Redact before cutting: a cut through a secret would leave a piece no pattern matches.
    text = redact(" ".join(raw.split()), secrets)
    if len(text) > limit:
        text = text[:limit] + "…"
    name = type(exc).__name__
    return f"{name}: {text}" if text else name


_SEQUENCES = (list, tuple)


def _scrubber(secrets: tuple[str, ...]) -> Any:
    def _scrub(value: Any) -> Any:
        if isinstance(value, str):
            return redact(value, secrets)
        if isinstance(value, dict):
            return {k: _scrub(v) for k, v in value.items()}
        if isinstance(value, _SEQUENCES):
            return [_scrub(v) for v in value]
        return value

    return _scrub


_AS_IS = frozenset((bool, int, float, type(None)))
"""Types of the values an event mostly holds, which redaction leaves as they are and which
are shown as their ``repr``: tried first, by exact type."""
_BARE = re.compile(r"[^\s\"'=\\]+")


def _shown(value: Any) -> str:
    """One ``key=value`` pair's value: an enum as its value (``status=failed_open``), a string
    bare when it needs no quotes, else in double quotes (JSON's escapes), anything else as
    ``repr``."""
    if isinstance(type(value), enum.EnumType):  # as ``isinstance(value, enum.Enum)``, quicker
        value = value.value
    if isinstance(value, str):
        return value if _BARE.fullmatch(value) else json.dumps(value, ensure_ascii=False)
    return repr(value)


_REMEMBERED = 512
"""How many values a ``_Renderer`` remembers (forgotten all at once beyond)."""
_REMEMBERED_LENGTH = 80


class _Renderer:
    """An event as its stdlib record's arguments: the message ``event key=value ...`` and the
    ``extra`` holding the event as the record's ``replyguard`` attribute, each value redacted
    (the secrets, anything shaped like a key). The one rendering, whether the event came
    through structlog's processor chain (``processor``) or straight from ``Events``.

    The ints, floats, bools and ``None`` an event mostly holds are shown as their ``repr`` by
    their exact type, without a call. A short string that redaction leaves as it is and an
    enum member (an event's name, a model, a turn's id, a status, which recur from event to
    event) are remembered with how they are shown, so the next event showing one neither
    redacts nor quotes it again.
    """

    def __init__(self, secrets: tuple[str, ...]) -> None:
        self._secrets = secrets
        self._scrub = _scrubber(secrets)
        self._plain: dict[str, str] = {}
        self._members: dict[tuple[type, enum.Enum], tuple[Any, str]] = {}

    def _value(self, value: Any) -> tuple[Any, str]:
        """A value not yet remembered: redacted, and as shown (``_shown``)."""
        if type(value) is str:
            redacted = redact(value, self._secrets)
            text = (
                redacted if _BARE.fullmatch(redacted) else json.dumps(redacted, ensure_ascii=False)
            )
            if redacted is value and len(value) <= _REMEMBERED_LENGTH:
                if len(self._plain) >= _REMEMBERED:
                    self._plain.clear()
                self._plain[value] = text
            return redacted, text
        if not isinstance(type(value), enum.EnumType):
            if type(value) in _SEQUENCES and not value:  # an empty list or tuple: nothing to redact
                return [], "[]"
            scrubbed = self._scrub(value)
            return scrubbed, _shown(scrubbed)
        member = (type(value), value)  # by its enum too: two enums' members may be equal
        known = self._members.get(member)
        if known is None:
            if len(self._members) >= _REMEMBERED:
                self._members.clear()
            scrubbed = self._scrub(value)
            known = self._members[member] = (scrubbed, _shown(scrubbed))
        return known

    def __call__(self, event: Any, fields: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
        """The record's message and ``extra``."""
        plain = self._plain
        if type(event) is not str or event not in plain:
            event = str(self._value(event)[0])
        shown = {"event": event, **fields}  # each value redaction changes is replaced below
        pairs = [event]
        for key, value in fields.items():
            kind = type(value)
            if kind in _AS_IS:
                pairs.append(f"{key}={value!r}")
                continue
            # One look-up: another thread's event may clear the memo between two.
            text = plain.get(value) if kind is str else None
            if text is None:
                shown[key], text = self._value(value)
            pairs.append(f"{key}={text}")
        return " ".join(pairs), {"replyguard": shown}

    def processor(self, _logger: Any, _name: str, event_dict: MutableMapping[str, Any]) -> Any:
        """As structlog's one processor: the stdlib call's arguments."""
        message, extra = self(event_dict.pop("event", ""), event_dict)
        return (message,), {"extra": extra}


@functools.cache
def _relays() -> frozenset[str]:
    """The files an event passes through on its way to ``_Records``: this module's and
    structlog's (loaded by then)."""
    import structlog._base
    import structlog.stdlib

    return frozenset((__file__, structlog._base.__file__, structlog.stdlib.__file__))


def _heard(logger: logging.Logger | None) -> bool:
    """Whether a record of ``logger`` would reach a handler other than a ``NullHandler``
    (through its ancestors while they propagate): with none, an event goes nowhere."""
    while logger is not None:
        if any(not isinstance(handler, logging.NullHandler) for handler in logger.handlers):
            return True
        logger = logger.parent if logger.propagate else None
    return False


_LEVELS = frozenset((logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR, logging.CRITICAL))
"""The levels ``_Records`` has a method for (structlog's stdlib names for them)."""


class _Records:
    """The stdlib logger as structlog's wrapped logger, making each record as ``Logger.log``
    does, except for its search of the stack for the caller (about a third of an event's
    cost: a path normalised per frame): the record names the function that emitted the event,
    found by the files its frames are in (``_relays``)."""

    def __init__(self, logger: logging.Logger) -> None:
        self._logger = logger

    def handle(self, level: int, msg: str, extra: Any) -> None:
        """Make the record and hand it to the logger's handlers."""
        relays = _relays()
        frame = sys._getframe(1)
        while frame.f_back is not None and frame.f_code.co_filename in relays:
            frame = frame.f_back
        code = frame.f_code
        logger = self._logger
        record = logger.makeRecord(
            logger.name, level, code.co_filename, frame.f_lineno, msg, (), None,
            code.co_name, extra,
        )  # fmt: skip
        logger.handle(record)

    def debug(self, msg: str, *, extra: Any) -> None:
        self.handle(logging.DEBUG, msg, extra)

    def info(self, msg: str, *, extra: Any) -> None:
        self.handle(logging.INFO, msg, extra)

    def warning(self, msg: str, *, extra: Any) -> None:
        self.handle(logging.WARNING, msg, extra)

    def error(self, msg: str, *, extra: Any) -> None:
        self.handle(logging.ERROR, msg, extra)

    def critical(self, msg: str, *, extra: Any) -> None:
        self.handle(logging.CRITICAL, msg, extra)


class Events:
    """One verifier's event emitter. Cheap when the level is disabled: nothing is built."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._stdlib = logging.getLogger(LOGGER_NAME)
        if not any(isinstance(h, logging.NullHandler) for h in self._stdlib.handlers):
            # The library convention: without it, stdlib's last-resort handler would print
            # warnings to stderr in a host that configured no logging.
            self._stdlib.addHandler(logging.NullHandler())
        self._secrets = tuple(s for s in secrets if s)
        self._render = _Renderer(self._secrets)
        self._records = _Records(self._stdlib)
        self._told = False  # whether a failure of the host's logging was reported

    @functools.cached_property
    def _logger(self) -> Any:
        """The structlog logger, made for the first event recorded (importing structlog takes
        longer than building a verifier: a process that records none never imports it)."""
        import structlog

        # Bound once: the lazy proxy ``wrap_logger`` returns binds a new logger per event.
        return structlog.wrap_logger(
            self._records,
            processors=[self._render.processor],
            wrapper_class=structlog.stdlib.BoundLogger,
        ).bind()

    @functools.cached_property
    def _direct(self) -> bool:
        """Whether an event may skip structlog's bound logger, which then changes nothing:
        its context is the empty ``dict`` it is unless the host configured a structlog
        ``context_class`` (whose context structlog adds to every event), so structlog would
        only pass the fields through its one processor (``_Renderer``) to ``_Records``, as
        ``emit`` does itself at a fraction of the cost."""
        import structlog

        context = structlog.get_context(self._logger)
        return type(context) is dict and not context

    @property
    def secrets(self) -> tuple[str, ...]:
        """The secrets this emitter redacts."""
        return self._secrets

    def enabled(self, level: int) -> bool:
        """Whether an event at ``level`` would be recorded (check before building content)."""
        return self._stdlib.isEnabledFor(level)

    def emit(self, level: int, event: str, /, **fields: Any) -> None:
        """Record one event when its level is enabled (``emit_fields``)."""
        self.emit_fields(level, event, fields)

    def emit_fields(self, level: int, event: str, fields: Mapping[str, Any]) -> None:
        """Record one event when its level is enabled, its fields given as one mapping (which
        is not kept: a caller that built them as a dict passes it as it is, where ``emit``'s
        keywords would copy it into a new dict, about 5K instructions for a ``verdict``).
        Never raises: a host's logging that does (a filter, or a handler of its own whose
        ``emit`` raises: stdlib's handlers catch their own errors, nothing catches those)
        loses that event, never the turn."""
        if not self._stdlib.isEnabledFor(level):
            return
        if "_logger" not in self.__dict__ and not _heard(self._stdlib):
            return  # nothing would receive it: structlog stays unloaded (checked until it is)
        try:
            if self._direct and level in _LEVELS:
                self._records.handle(level, *self._render(event, fields))
            else:
                self._logger.log(level, event, **fields)
        except Exception:
            self._logging_failed(event)

    def _logging_failed(self, event: str) -> None:
        """Say once per emitter, on stderr, that the host's logging raised (as stdlib says of
        a handler's error, and only where it would: ``logging.raiseExceptions``)."""
        if self._told or not logging.raiseExceptions:
            return
        self._told = True
        with contextlib.suppress(Exception):  # stderr closed or replaced by something odd
            kind = type(sys.exc_info()[1]).__name__
            sys.stderr.write(
                f"replyguard: the host's logging raised {kind} on the {event!r} event; "
                "this and later events it rejects are not logged (not said again)\n"
            )

    def debug(self, event: str, /, **fields: Any) -> None:
        """A decision at DEBUG."""
        self.emit_fields(logging.DEBUG, event, fields)

    def info(self, event: str, /, **fields: Any) -> None:
        """A decision at INFO."""
        self.emit_fields(logging.INFO, event, fields)

    def warning(self, event: str, /, **fields: Any) -> None:
        """A misconfiguration or a fail-open at WARNING."""
        self.emit_fields(logging.WARNING, event, fields)

    def error(self, event: str, /, **fields: Any) -> None:
        """A configuration error found at call time, at ERROR."""
        self.emit_fields(logging.ERROR, event, fields)
