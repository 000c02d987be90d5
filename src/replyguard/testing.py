"""Shipped fakes for tests: a scripted judge and a scripted agent that fail loudly.

Each is given a script, one entry per expected call. An entry is the answer to give, an
exception to raise, or a callable computing the answer (sync or async; the judge's callables
get the ``JudgePrompt``, the agent's get the messages). Calling one more often than scripted
raises ``ScriptError``; ``assert_exhausted()`` raises when it was called fewer times. Both record
what they were called with.

    judge = ScriptedJudge(["FAIL [incomplete]: add the date", "PASS"])
    agent = ScriptedAgent(["Done: the report", "Done: the report, dated 2026-01-02"])
    outcome = await Verifier(config, judge=judge).run(agent, Turn(user_message="..."))
    judge.assert_exhausted(); agent.assert_exhausted()

``capture_events()`` records the library's log events as dicts, whatever level the
``replyguard`` logger is set to, as ``structlog.testing.capture_logs`` does:

    with capture_events() as events:
        outcome = await verifier.run(agent, turn)
    assert [e["event"] for e in events] == ["retry", "passed"]
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Generic, TypeVar

from replyguard.context._prompt import JudgePrompt
from replyguard.judge._base import BaseJudge
from replyguard.judge._protocol import JudgeReply
from replyguard.telemetry._events import LOGGER_NAME
from replyguard.types import Reply

A = TypeVar("A")
Entry = Any


class ScriptError(AssertionError):
    """A fake was called more or fewer times than its script allows."""


class _Script(Generic[A]):
    def __init__(self, name: str, entries: Sequence[Entry]) -> None:
        self._name = name
        self._entries = list(entries)
        self._lock = threading.Lock()
        self.calls: list[A] = []

    def _next(self, argument: A) -> Entry:
        with self._lock:
            if len(self.calls) >= len(self._entries):
                raise ScriptError(
                    f"{self._name} was called {len(self.calls) + 1} times but scripted for "
                    f"{len(self._entries)}"
                )
            entry = self._entries[len(self.calls)]
            self.calls.append(argument)
        return entry

    async def _resolve(self, entry: Entry, argument: A) -> Any:
        if isinstance(entry, BaseException) or (
            isinstance(entry, type) and issubclass(entry, BaseException)
        ):
            raise entry
        if callable(entry):
            result = entry(argument)
            if inspect.isawaitable(result):
                result = await result
            return result
        return entry

    @property
    def call_count(self) -> int:
        """How many times the fake was called."""
        return len(self.calls)

    def assert_exhausted(self) -> None:
        """Raise ``ScriptError`` unless every scripted entry was used."""
        if len(self.calls) != len(self._entries):
            raise ScriptError(
                f"{self._name} was called {len(self.calls)} times but scripted for "
                f"{len(self._entries)}"
            )


class ScriptedJudge(_Script[JudgePrompt], BaseJudge):
    """A ``Judge`` answering from a script: judge texts, ``JudgeReply`` values or exceptions.

    ``delay`` seconds pass before each answer (an ``asyncio.sleep``, so deadlines can cut it);
    ``cost_usd`` is the cost reported for each text answer.
    """

    def __init__(
        self,
        script: Sequence[str | JudgeReply | BaseException | Callable[[JudgePrompt], Any]],
        *,
        model: str = "scripted-judge",
        cost_usd: float = 0.0,
        delay: float = 0.0,
    ) -> None:
        super().__init__("ScriptedJudge", script)
        self.model = model
        self.cost_usd = cost_usd
        self.delay = delay
        self.timeouts: list[float] = []

    async def judge(self, prompt: JudgePrompt, *, time_left: float) -> JudgeReply:
        """Answer with the next scripted entry."""
        entry = self._next(prompt)
        self.timeouts.append(time_left)
        if self.delay:
            await asyncio.sleep(self.delay)
        result = await self._resolve(entry, prompt)
        if isinstance(result, JudgeReply):
            return result
        if not isinstance(result, str):
            raise ScriptError(f"a judge script entry gave {type(result).__name__}, not str")
        return JudgeReply(text=result, model=self.model, cost_usd=self.cost_usd)


class ScriptedAgent(_Script[list[dict[str, Any]]]):
    """An async agent answering from a script: reply texts, ``Reply`` values or exceptions.

    It records a copy of the messages of each call in ``calls``.
    """

    def __init__(self, script: Sequence[str | Reply | BaseException | Callable[..., Any]]) -> None:
        super().__init__("ScriptedAgent", script)

    async def __call__(self, messages: list[dict[str, Any]]) -> Reply | str:
        """Answer with the next scripted entry."""
        snapshot = [dict(m) for m in messages]
        entry = self._next(snapshot)
        result = await self._resolve(entry, snapshot)
        if not isinstance(result, Reply | str):
            raise ScriptError(f"an agent script entry gave {type(result).__name__}")
        return result


class ScriptedStreamAgent(_Script[list[dict[str, Any]]]):
    """A streaming agent (for ``Verifier.stream``) answering from a script: each entry is the
    sequence of pieces one call streams (``str`` deltas, stream chunks, a final ``RunMeta`` or
    ``Reply``; an exception among them is raised when its turn comes), or an exception the call
    itself raises.

    ``pulled`` counts the pieces handed out in each call's stream, and ``closed`` how many of
    the streams were closed (by the consumer or by running out), so a test can see that a
    stream cut short was closed at once.
    """

    def __init__(self, script: Sequence[Sequence[Any] | BaseException]) -> None:
        super().__init__("ScriptedStreamAgent", script)
        self.pulled: list[int] = []
        self.closed = 0

    async def __call__(self, messages: list[dict[str, Any]]) -> Any:
        """Start the next scripted stream."""
        snapshot = [dict(m) for m in messages]
        entry = self._next(snapshot)
        if isinstance(entry, BaseException):
            raise entry
        self.pulled.append(0)
        return self._pieces(len(self.pulled) - 1, list(entry))

    async def _pieces(self, call: int, pieces: list[Any]) -> Any:
        try:
            for piece in pieces:
                self.pulled[call] += 1
                if isinstance(piece, BaseException):
                    raise piece
                yield piece
                await asyncio.sleep(0)
        finally:
            self.closed += 1


class _EventsHandler(logging.Handler):
    def __init__(self, events: list[dict[str, Any]]) -> None:
        super().__init__(logging.NOTSET)
        self._events = events

    def emit(self, record: logging.LogRecord) -> None:
        fields = getattr(record, "replyguard", None)
        if isinstance(fields, dict):
            self._events.append({**fields, "log_level": record.levelname.lower()})


@contextlib.contextmanager
def capture_events() -> Iterator[list[dict[str, Any]]]:
    """Capture replyguard's log events, DEBUG included, whatever the logger's level.

    Each event is a dict: ``event`` (its name), its fields as logged (secrets redacted, content
    only with ``logContent``) and ``log_level`` (``"debug"`` ... ``"error"``). Inside the block
    the ``replyguard`` logger is set to DEBUG; its level and handlers are restored after it.
    """
    logger = logging.getLogger(LOGGER_NAME)
    events: list[dict[str, Any]] = []
    handler = _EventsHandler(events)
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield events
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
