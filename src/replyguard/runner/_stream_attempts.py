"""A streamed turn's attempts: each read from the agent's stream (``StreamAttempts``).

The attempt source of ``Verifier.stream`` for the turn's loop (``runner/_driver.py``): each
attempt's text is read as it comes and shown as the mode allows (``"buffer"``: nothing until
the turn is decided; ``"release"``: all but the last ``holdBackChars`` characters and what an
incremental check has not decided yet); the incremental checks scan each new piece and may cut
the stream short (``Reading``); a rejected attempt whose text was shown is withdrawn with a
``Retract``. It keeps what the user was shown since the last ``Retract`` (``shown``), for the
end of the turn to make the deltas spell the delivered reply (``StreamTurn``).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncGenerator, Sequence

from replyguard.checks.base import Check
from replyguard.runner._agents import Agent, Messages, StreamingAgent
from replyguard.runner._driver import DeadlinePassed, Retried, Told, by_deadline
from replyguard.runner._stream_reading import AgentFailed, Reading, scanners
from replyguard.runner._stream_run import StreamRun
from replyguard.runner._stream_source import close_stream, close_within, open_stream
from replyguard.runner._turn_scope import TurnContext, agent_attempt, enter_attempt, leave_attempt
from replyguard.types import Attempt, CheckResult, Delta, Progress, Reply, Retract


class StreamAttempts:
    """The attempts of one streamed turn, read from the agent's stream, and what was shown."""

    def __init__(
        self,
        run: StreamRun,
        agent: StreamingAgent | Agent,
        checks: tuple[Check, ...],
        progress: bool = False,
    ) -> None:
        self.run = run
        self.agent = agent
        self.checks = checks
        self.progress = progress  # a ``Progress`` event at each phase change
        settings = run.config.streaming
        self.release = settings.mode == "release"
        self.hold = settings.hold_back_chars
        self.shown: list[str] = []  # the deltas since the last Retract
        self.shown_attempt = 0
        self.readings: list[Reading] = []

    # -- the source of the turn's loop ----------------------------------------------------------

    def cut(self, number: int) -> CheckResult | None:
        reading = self.readings[-1]
        assert reading.number == number  # the loop asks about the attempt just read
        cut: CheckResult | None = reading.cut
        return cut

    def judging(self, number: int) -> Sequence[Told]:
        return (Progress("checking", number),) if self.progress else ()

    def withdraw(self, attempt: Attempt) -> tuple[Sequence[Told], bool]:
        """A ``Retract`` of what was shown of ``attempt``; its reply leaves the history when
        any of it was shown, or its stream was cut short."""
        reading = self.readings[-1]
        kept = not self.shown and reading.cut is None
        told = (self.retract(reading.number, _why(attempt)),) if self.shown else ()
        return told, kept

    async def retry(self, messages: Messages, number: int) -> AsyncGenerator[Told | Retried]:
        """Attempt ``number``: its stream opened within the turn's deadline and read, what it
        shows as it comes, then its ``Retried``."""
        run = self.run
        reading = Reading(number, scanners(run, self.checks, run.turn))
        self.readings.append(reading)
        if self.progress:
            yield Progress("revising", number)
        try:
            async with by_deadline(run.time_left()):
                with agent_attempt(run.turn, number):
                    reading.stream = await open_stream(self.agent, messages, run.v.agent_pool)
        except DeadlinePassed:
            yield Retried()
            return
        except Exception as exc:
            yield Retried(error=exc)
            return
        async with contextlib.aclosing(self.read(reading, guarded=True)) as deltas:
            async for delta in deltas:
                yield delta
        if reading.timed_out:
            yield Retried()
        elif reading.failed is not None:
            yield Retried(error=reading.failed.error)
        else:
            yield Retried(self.reply(reading))

    # -- one attempt ------------------------------------------------------------------------------

    def first(self, *, surely: bool) -> Reading:
        """The first attempt's reading; ``surely``: it will be judged, so its incremental
        checks scan it."""
        run = self.run
        first = Reading(1, scanners(run, self.checks, run.turn) if surely else [])
        self.readings.append(first)
        return first

    async def open_first(self, first: Reading, messages: Messages) -> None:
        """The first attempt's stream, opened (the agent's own error is the caller's, as in
        ``run``)."""
        with agent_attempt(self.run.turn, 1):
            first.stream = await open_stream(self.agent, messages, self.run.v.agent_pool)

    def reply(self, reading: Reading) -> Reply:
        """The attempt's reply; one cut short is noted as a fragment, never to be delivered."""
        reply = reading.collected.reply()
        if reading.fragment:
            self.run.cut_short(reply)
        return reply

    def retract(self, attempt: int, reason: str) -> Retract:
        self.shown = []
        return Retract(attempt, reason)

    async def read(self, reading: Reading, *, guarded: bool) -> AsyncGenerator[Delta]:
        """Read one attempt's stream, showing what the mode allows (everything at once when
        not ``guarded``: nothing to verify); stops early on a violation (``reading.cut``), an
        agent error (``reading.failed``) or the deadline, and closes the stream, unless
        replyguard's own trouble leaves it to the fail-open pass-through."""
        keep_open = False
        try:
            run = self.run
            collected, scans = reading.collected, reading.scanners
            release = self.release and guarded
            hold = self.hold if scans else 0
            scope = TurnContext(run.turn, reading.number)  # the agent's code runs in each read
            shown = self.shown
            self.shown_attempt = reading.number
            deadline = run.deadline if reading.number > 1 else None
            while (text := await _next_text(reading, scope, deadline)) is not None:
                if not text:
                    continue
                collected.add(text)
                if not guarded:
                    shown.append(text)
                    yield Delta(text)
                    continue
                if scans and not reading.frozen and reading.scan(run, text):
                    return
                if release and not reading.frozen and (out := reading.release(text, hold)):
                    shown.append(out)
                    yield Delta(out)
            if not reading.complete:  # the deadline, or the agent's error
                return
            if scans and not reading.frozen and reading.finish_scans(run):
                return
            if release and reading.held and not reading.frozen:
                out = reading.release_all()
                shown.append(out)
                yield Delta(out)
        except Exception:
            keep_open = True  # the fail-open pass-through reads on
            raise
        finally:
            if not keep_open:
                await self.close(reading)

    async def close(self, reading: Reading) -> None:
        """Close an agent's stream within the turn's deadline (at least a moment, at most a
        second: ``close_within``); one that does not close by then is left behind, logged.
        The agent's clean-up (its ``finally``) runs inside its turn: ``current_turn()`` is
        the attempt's, as while it streamed."""
        run = self.run
        token = enter_attempt(TurnContext(run.turn, reading.number))
        try:
            closed = await close_stream(reading.stream, within=close_within(run.time_left()))
        finally:
            leave_attempt(token)
        if not closed:
            run.v.events.warning("agent_stream_not_closed", turn_id=run.turn.id)


async def _next_text(reading: Reading, scope: TurnContext, deadline: float | None) -> str | None:
    """The text of the stream's next piece (``""`` for none), read inside the attempt's turn
    and by ``deadline``; None at its end (``complete``), at the deadline (``timed_out``) or on
    the agent's error (``failed``: its own ``TimeoutError`` too)."""
    token = enter_attempt(scope)
    try:
        if deadline is None:
            item = await reading.stream.__anext__()
        else:
            async with by_deadline(deadline - time.monotonic()):
                item = await reading.stream.__anext__()
        text: str = reading.collected.text_of(item)
        return text
    except StopAsyncIteration:
        reading.complete = True
    except DeadlinePassed:
        reading.timed_out = True
    except Exception as exc:
        reading.failed = AgentFailed(exc)
    finally:
        leave_attempt(token)
    return None


def _why(attempt: Attempt) -> str:
    """A retract's reason: the failing check's name, else the FAIL category."""
    verdict = attempt.verdict
    failing = [r.name for r in attempt.checks if not r.passed]
    if verdict is not None and verdict.decisive and failing:
        return failing[0]
    if verdict is not None and verdict.category is not None:
        return str(verdict.category)
    return "fail"
