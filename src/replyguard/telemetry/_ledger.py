"""The ledger: one JSON line per verified turn, appended safely from many tasks and processes.

Lines are written by a writer thread: the lines waiting at that moment go in a single
``write`` on a file opened with ``O_APPEND`` under an exclusive ``flock``, so lines never
interleave or tear, across processes too, and a burst of turns costs a few writes. A failure to
write is logged and never reaches the turn. Feedback texts, and the turn's ``content`` (the
user message, each judged reply, the judge's raw answer and reasoning) are recorded only with
``logContent``; every line has ``judged``: each judged attempt's reply hash (SHA-256 of its
UTF-8 text) and vote, so verdicts on byte-identical replies can be compared across judge
models, rubrics and ``litellm`` versions (``litellm``) without keeping the text.

The ledger never delays delivery for long: what is not a regular file (a FIFO, a device) is
refused without blocking (opened ``O_NONBLOCK``), a lock held elsewhere is tried again without
blocking until the time limit, and the wait for the write is bounded by that limit too (a
write stuck in the kernel, say on a hung network mount, finishes or fails in its thread, after
the turn; a line whose turn stopped waiting is still written when the writer gets to it). Each
failure logs ``ledger_write_failed``. Every line is valid UTF-8 JSON whatever the characters:
lone surrogates (from a turn id, an agent id, feedback) become U+FFFD. Where ``fcntl`` does
not exist (Windows), lines are appended without the lock.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import json
import os
import re
import stat
import threading
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from replyguard._forks import forgotten_in_children
from replyguard.telemetry._events import Events, describe_error
from replyguard.types import Outcome, Turn, Verdict


def vote(verdict: Verdict) -> str | None:
    """``"PASS"`` or ``"FAIL"`` for a verdict that decided, None for a fail-open one."""
    if not verdict.readable or verdict.fail_open_reason is not None:
        return None
    return "PASS" if verdict.passed else "FAIL"


def member_votes(verdict: Verdict) -> dict[str, str | None]:
    """A panel verdict's vote of each member, by the member's name (None: it did not answer)."""
    return {member.model or "?": vote(member) for member in verdict.members}


def panel_record(outcome: Outcome) -> list[dict[str, Any]]:
    """Each judged attempt's panel: its decision and every member's vote (``None``: fail open,
    or left out), so ``insights`` can tell each member's agreement with the panel."""
    return [
        {"attempt": a.number, "decision": vote(a.verdict), "votes": member_votes(a.verdict)}
        for a in outcome.attempts
        if a.verdict is not None and a.verdict.members
    ]


def reply_hash(text: str) -> str:
    """The SHA-256 of a reply's UTF-8 text, in hex (lone surrogates as U+FFFD)."""
    return hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()


@functools.cache
def litellm_version() -> str | None:
    """The installed litellm's version (read from its metadata, never imported), or None."""
    import importlib.metadata  # on the first ledger record: a command that writes none skips it

    try:
        return importlib.metadata.version("litellm")
    except importlib.metadata.PackageNotFoundError:
        return None


def judged_record(outcome: Outcome) -> list[dict[str, Any]]:
    """Each judged attempt: its number, reply hash, vote (None: fail open) and category."""
    return [
        {
            "attempt": a.number,
            "replySha256": reply_hash(a.reply.text),
            "vote": vote(a.verdict),
            "category": str(a.verdict.category) if a.verdict.category is not None else None,
        }
        for a in outcome.attempts
        if a.verdict is not None
    ]


def content_record(turn: Turn, outcome: Outcome) -> dict[str, Any]:
    """What the turn said (only with ``logContent``): the user message, and each judged
    attempt's reply, the judge's raw answer, its reasoning and feedback."""
    return {
        "userMessage": turn.user_message,
        "attempts": [
            {
                "attempt": a.number,
                "reply": a.reply.text,
                "judgeOutput": a.verdict.raw,
                "reasoning": a.verdict.reasoning,
                "feedback": a.verdict.feedback,
            }
            for a in outcome.attempts
            if a.verdict is not None
        ],
    }


def ledger_record(
    turn: Turn,
    outcome: Outcome,
    *,
    run_kind: str | None,
    with_content: bool,
    configured_models: Sequence[str] = (),
    side_effects: Sequence[str] = (),
    rubric: str | None = None,
) -> dict[str, Any]:
    """The ledger line of one turn (camelCase keys, like the config).

    ``judgeModels`` names the models whose verdict counted (a readable PASS or FAIL: for a
    panel, the members that decided, never one left out); when none counted (a timeout, an
    outage, unreadable answers), the models that were asked (every panel member), else the
    configured ones, so a slow model can still be named. ``panel`` keeps every member's vote.
    ``sideEffects`` names the tools of the successful side-effecting calls of the turn (from
    the same tool ledger the checks and the judge saw), each distinct call once. ``rubric``:
    a short hash of the judge's system message in force (the operator's criteria and
    categories included), so a change of rubric shows in ``insights``.
    """
    asked = [m for v in outcome.verdicts for m in (v.members or (v,)) if m.model]
    counted = sorted({m.model for m in asked if vote(m) is not None and m.model})
    named = counted or sorted({m.model for m in asked if m.model})
    failed = [a for a in outcome.attempts if a.verdict is not None and not a.verdict.passed]
    record: dict[str, Any] = {
        "ts": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "turnId": turn.id,
        "agentId": turn.agent_id,
        "runKind": run_kind,
        "status": outcome.status.value,
        "reason": outcome.reason.value if outcome.reason is not None else None,
        "attempts": len(outcome.attempts),
        "costUsd": round(outcome.cost_usd, 8),
        "judgeCostUsd": round(outcome.judge_cost_usd, 8),
        "usage": {
            "agentPromptTokens": outcome.usage.agent_prompt_tokens,
            "agentCompletionTokens": outcome.usage.agent_completion_tokens,
            "judgePromptTokens": outcome.usage.judge_prompt_tokens,
            "judgeCompletionTokens": outcome.usage.judge_completion_tokens,
            "totalTokens": outcome.usage.total_tokens,
        },
        "latencyMs": round(outcome.latency_ms, 3),
        "rubric": rubric,
        "judgeModels": named or list(configured_models),
        "checks": sorted({r.name for a in outcome.attempts for r in a.checks}),
        "failedChecks": [r.name for a in outcome.attempts for r in a.checks if not r.passed],
        "categories": [
            str(a.verdict.category) if a.verdict and a.verdict.category else None for a in failed
        ],
        "awaitingUser": outcome.awaiting_user,
        "sideEffects": list(side_effects),
        "litellm": litellm_version(),
        "judged": judged_record(outcome),
    }
    if any(v.shared_state == "degraded" for v in outcome.verdicts):
        record["sharedState"] = "degraded"
    panels = panel_record(outcome)
    if panels:
        record["panel"] = panels
    if with_content:
        record["feedback"] = [a.verdict.feedback for a in failed if a.verdict]
        record["content"] = content_record(turn, outcome)
    return record


_SURROGATES = re.compile("[\ud800-\udfff]")
_LOCK_PAUSE = 0.005
"""Seconds between two tries of a lock held elsewhere."""
TIME_LIMIT = 0.5
"""The longest a ledger write may hold up a turn, in seconds."""


def _lock(descriptor: int, until: float) -> None:
    """Take the exclusive ``flock`` by ``until`` (``time.monotonic``), never blocking on it."""
    try:
        import fcntl
    except ImportError:  # no flock here (Windows): one O_APPEND write per line still
        return
    while True:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= until:
                raise BlockingIOError("the ledger is locked by another writer") from None
            time.sleep(_LOCK_PAUSE)


def append_locked(path: str, data: bytes, until: float) -> None:
    """Append ``data`` to the regular file at ``path`` in one ``O_APPEND`` write under an
    exclusive ``flock`` taken by ``until`` (``time.monotonic``); raises ``OSError``."""
    # O_NONBLOCK: opening a FIFO with no reader fails at once instead of waiting for one.
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NONBLOCK", 0)
    descriptor = os.open(path, flags, 0o600)
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise OSError(f"{path} is not a regular file")
        _lock(descriptor, until)
        view = memoryview(data)
        while view:
            view = view[os.write(descriptor, view) :]
    finally:
        os.close(descriptor)  # closing releases the lock


def ledger_line(record: dict[str, Any]) -> bytes:
    """One record as one line of UTF-8 JSON (lone surrogates become U+FFFD)."""
    line = json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=str)
    return (_SURROGATES.sub("\ufffd", line) + "\n").encode("utf-8")


class Ledger:
    """A JSONL file of verified turns, written by one writer thread at a time.

    Lines wait in a queue; a writer thread takes every line waiting and appends them in one
    locked write, then the lines that came meanwhile, until none is left. A burst of turns
    costs a few writes, not one thread hand-off each, and a line whose turn stopped waiting
    for it (its time limit, a cancelled turn) is still written, late. The queue holds at most
    ``QUEUE_LIMIT`` bytes (a line is always taken when it is empty): past that, behind a write
    that does not finish, a line is refused at once and logged.
    """

    def __init__(self, path: str, events: Events) -> None:
        self.path = path
        self._events = events
        self.forget()
        forgotten_in_children(self)

    def forget(self) -> None:
        """Start empty, with no writer (also in a forked child: its parent's writer thread,
        its lines and its lock, perhaps held then, stay the parent's)."""
        self._guard = threading.Lock()
        self._waiting: list[_Line] = []
        self._waiting_bytes = 0
        self._writing = False

    async def append(self, record: dict[str, Any], *, time_limit: float = TIME_LIMIT) -> None:
        """Append one record as one line; wait at most ``time_limit`` seconds for its write.
        Log, never raise, on failure (the line is then lost, or written late)."""
        try:
            line = _Line(ledger_line(record), asyncio.get_running_loop())
            self._queue(line)
        except (OSError, ValueError) as exc:
            self._failed(describe_error(exc, self._events.secrets))
            return
        done, _ = await asyncio.wait({line.written}, timeout=time_limit)
        if not done:
            self._failed(f"the write did not finish within {time_limit:g} s")
        elif (error := line.written.result()) is not None:
            self._failed(describe_error(error, self._events.secrets))

    def _failed(self, error: str) -> None:
        self._events.warning("ledger_write_failed", path=self.path, error=error)

    def _queue(self, line: _Line) -> None:
        with self._guard:
            if self._waiting and self._waiting_bytes + len(line.data) > QUEUE_LIMIT:
                raise OSError(
                    f"{self._waiting_bytes} bytes already wait for a write that has not finished"
                )
            self._waiting.append(line)
            self._waiting_bytes += len(line.data)
            if self._writing:
                return
            self._writing = True
        try:
            threading.Thread(target=self._write_waiting, name="replyguard-ledger").start()
        except RuntimeError:  # no new thread (the interpreter is shutting down)
            with self._guard:
                self._writing = False
                self._waiting.remove(line)
                self._waiting_bytes -= len(line.data)
            raise OSError("no thread could be started to write the ledger") from None

    def _write_waiting(self) -> None:
        """The writer thread: every line waiting, in one write a batch, until none is left."""
        while True:
            with self._guard:
                batch, self._waiting, self._waiting_bytes = self._waiting, [], 0
                if not batch:
                    self._writing = False
                    return
            error: Exception | None = None
            try:
                data = b"".join(line.data for line in batch)
                append_locked(self.path, data, time.monotonic() + TIME_LIMIT)
            except Exception as exc:  # every line of the batch learns why; never the thread
                error = exc
            for line in batch:
                line.settle(error)


QUEUE_LIMIT = 64 * 1024 * 1024
"""The most bytes of lines a ledger holds waiting for its writer thread."""


class _Line:
    """One line waiting for the writer, and the future its turn waits on (on its own loop)."""

    __slots__ = ("data", "loop", "written")

    def __init__(self, data: bytes, loop: asyncio.AbstractEventLoop) -> None:
        self.data = data
        self.loop = loop
        self.written: asyncio.Future[Exception | None] = loop.create_future()

    def settle(self, error: Exception | None) -> None:
        """From the writer thread: the write's outcome (None: written), on the line's loop."""
        with contextlib.suppress(RuntimeError):  # that loop has closed: nobody waits any more
            self.loop.call_soon_threadsafe(_set, self.written, error)


def _set(future: asyncio.Future[Exception | None], error: Exception | None) -> None:
    if not future.done():
        future.set_result(error)
