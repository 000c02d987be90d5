"""One streamed attempt being read (``Reading``), and its incremental checks' scan.

Each piece of an attempt that will surely be judged is fed to the incremental checks'
scanners (``replyguard.checks.incremental``). The first violation cuts the stream short when a
retry can follow (``StreamRun.may_cut``); otherwise the attempt is read whole and nothing more
of it is shown (``frozen``), for it to be judged whole as ``Verifier.run`` judges it. A scanner
that cannot start or crashes on a piece is left to the end checks (fail open).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from replyguard.checks.base import Check
from replyguard.checks.incremental import PrefixScanner, scanners_for
from replyguard.runner._stream_run import StreamRun
from replyguard.runner._stream_source import Collected
from replyguard.telemetry._events import describe_error
from replyguard.types import Turn


class AgentFailed(Exception):
    """The agent's stream raised (or yielded something that is not text): its error, kept."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


class Reading:
    """One attempt being read: its stream, text, scanners, and what of it has been shown."""

    __slots__ = (
        "collected",
        "complete",
        "cut",
        "failed",
        "frozen",
        "held",
        "number",
        "released",
        "scanners",
        "stream",
        "timed_out",
    )

    def __init__(self, number: int, scanners: list[tuple[str, PrefixScanner]]) -> None:
        self.number = number
        self.stream: Any = None
        self.collected = Collected()
        self.scanners = scanners
        self.held = ""  # read but not shown (release mode)
        self.released = 0  # characters shown
        self.cut: Any = None  # the failing CheckResult that cut the stream short
        self.frozen = False  # a violation no retry can follow: read on, show no more
        self.complete = False  # the stream ran to its end
        self.failed: AgentFailed | None = None
        self.timed_out = False

    @property
    def fragment(self) -> bool:
        """Whether the attempt's text is a fragment: its stream was cut short."""
        return self.cut is not None and not self.complete

    def release(self, text: str, hold: int) -> str:
        """Hold ``text``; what of the held text may be shown now (release mode): all but the
        last ``hold`` characters and what a scanner has not decided yet (``pending_from``)."""
        self.held += text
        limit = self.collected.length - hold
        for _, scanner in self.scanners:
            pending = scanner.pending_from
            if pending is not None and pending < limit:
                limit = pending
        if limit <= self.released:
            return ""
        count = limit - self.released
        out, self.held = self.held[:count], self.held[count:]
        self.released = limit
        return out

    def release_all(self) -> str:
        """The held text, all of it (the stream has ended, its checks passed)."""
        out, self.held = self.held, ""
        self.released = self.collected.length
        return out

    def scan(self, run: StreamRun, text: str) -> bool:
        """Feed ``text`` to the scanners; True when one of them cut the stream."""
        crashed: list[tuple[tuple[str, PrefixScanner], Exception]] | None = None
        found = None
        for entry in self.scanners:
            try:
                found = entry[1].feed(text)
            except Exception as exc:  # fail open: this check is left to the end
                crashed = [*(crashed or ()), (entry, exc)]
                continue
            if found is not None and not found.passed and not self.collected.asks_tools:
                break
            found = None
        for gone, problem in crashed or ():
            self.scanners.remove(gone)
            scanner_crashed(run, gone[0], problem)
        return found is not None and self._violated(run, entry[0], found)

    def finish_scans(self, run: StreamRun) -> bool:
        """The scanners' word on the complete text; True when one of them cut the attempt."""
        for entry in tuple(self.scanners):
            name, scanner = entry
            try:
                found = scanner.finish()
            except Exception as exc:
                self.scanners.remove(entry)
                scanner_crashed(run, name, exc)
                continue
            if found is not None and not found.passed and not self.collected.asks_tools:
                return self._violated(run, name, found)
        return False

    def _violated(self, run: StreamRun, name: str, found: Any) -> bool:
        """Cut the stream short for ``found`` when a retry can follow (True); else read the
        attempt whole, showing no more of it, for it to be judged whole as ``run`` judges it."""
        cuttable = run.may_cut(self.number, found, self.collected.text)
        if cuttable:
            self.cut = found
        else:
            self.frozen = True
        run.v.events.info(
            "stream_cut" if cuttable else "stream_read_whole",
            turn_id=run.turn.id,
            attempt=self.number,
            check=name,
            chars=self.collected.length,
        )
        return cuttable


def scanners(
    run: StreamRun, checks: Sequence[Check], turn: Turn
) -> list[tuple[str, PrefixScanner]]:
    """Fresh scanners of the incremental ``checks`` for one attempt (none when they cannot
    start: the end checks still run)."""
    try:
        return scanners_for(checks, turn)
    except Exception as exc:  # an incremental check that cannot start: end-only checks
        scanner_crashed(run, "", exc)
        return []


def scanner_crashed(run: StreamRun, name: str, exc: Exception) -> None:
    events = run.v.events
    events.warning(
        "incremental_check_crashed",
        turn_id=run.turn.id,
        check=name or None,
        error=describe_error(exc, events.secrets),
    )
