"""``Verifier.stream``: one verified turn whose replies are streamed to the user.

The turn is the one ``Verifier.run`` plays (a ``_Run``: the same gate, checks, judge, retries,
budgets and fail-open, and the same ``Outcome``); only how each reply is read and shown
differs. Each attempt's text is read from the agent's stream as it comes and:

- ``"buffer"`` mode holds it until the turn is decided, then releases the delivered reply;
- ``"release"`` mode shows it as it comes, but for the last ``holdBackChars`` characters (and
  any an incremental check has not decided yet); a reply rejected after some of it was shown
  is withdrawn with a ``Retract`` before the retry's text.

A turn whose reply cannot change (verification off, a trigger that cannot fire, a refused
judge, ``"shadow"`` mode) is passed through as it comes, in either mode. While an attempt that
will surely be judged streams, the incremental checks (``replyguard.checks.incremental``)
scan each new piece; the first violation closes the agent's stream at once and starts the
retry with the check's feedback, without a judge call, when a retry can follow. An attempt no
retry can follow is read whole instead (showing no more of it) and judged whole, as ``run``
judges it; a reply cut short is never the one delivered (``StreamRun``).

Whatever happens, the text of the ``Delta`` events after the last ``Retract`` is exactly the
``Outcome``'s ``response``: the end of the turn emits whatever is needed to make it so (the
held text, or a ``Retract`` and the delivered reply). Trouble inside replyguard fails open: the
text held is released and the rest of the agent's stream passes through. The caller closing
the stream (or being cancelled) closes the agent's stream and any judge call in flight; no
task is left behind, for none is started.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator, Callable
from typing import Any

from replyguard.checks.base import Check
from replyguard.checks.running import checks_verdict
from replyguard.errors import VerificationExhausted
from replyguard.runner._agents import Agent, Messages, StreamingAgent
from replyguard.runner._policy import Ending, settled
from replyguard.runner._run import TurnParts, _sampled_in
from replyguard.runner._stream_reading import AgentFailed, Reading, scanners
from replyguard.runner._stream_run import StreamRun
from replyguard.runner._stream_source import close_stream, close_within, open_stream
from replyguard.runner._turn_scope import (
    TurnContext,
    agent_attempt,
    enter_attempt,
    leave_attempt,
    with_turn_id,
)
from replyguard.telemetry._events import describe_error
from replyguard.types import (
    Attempt,
    Delta,
    Done,
    Outcome,
    Progress,
    Reason,
    Reply,
    Retract,
    Status,
    StreamEvent,
    Turn,
)


class StreamTurn:
    """The events of one streamed turn; lives for one ``Verifier.stream``."""

    def __init__(
        self,
        run: StreamRun,
        agent: StreamingAgent | Agent,
        checks: tuple[Check, ...],
        note_host: Callable[[asyncio.AbstractEventLoop], None],
        progress: bool = False,
    ) -> None:
        self.run = run
        self.progress = progress  # yield ``Progress`` at each phase change
        self.agent = agent
        self.checks = checks
        self.note_host = note_host
        settings = run.config.streaming
        self.release = settings.mode == "release"
        self.hold = settings.hold_back_chars
        self.shown: list[str] = []  # the deltas since the last Retract
        self.shown_attempt = 0
        self.readings: list[Reading] = []

    # -- what the turn will need -------------------------------------------------------------

    def _foreseen(self) -> tuple[bool, bool]:
        """(may the first reply be judged, will it surely be), known before it is read."""
        run = self.run
        config, turn = run.config, run.turn
        if not config.enabled or run.v.families.refused(run.profile, turn):
            return False, False
        if config.mode == "shadow":  # judged, but the reply goes out unchanged: as it comes
            return False, False
        if turn.heartbeat:
            return config.verify_heartbeat, config.verify_heartbeat
        if config.verify_all:
            sampled = _sampled_in(run.sample_key, config.sample_rate)
            return sampled, sampled
        return bool(config.trigger_keywords), False

    # -- the events --------------------------------------------------------------------------

    async def events(self) -> AsyncGenerator[StreamEvent | Progress, None]:
        """The turn's events; the last one is ``Done``."""
        run = self.run
        self.note_host(asyncio.get_running_loop())
        messages: Messages = [*run.turn.history, {"role": "user", "content": run.turn.user_message}]
        may_judge, surely = self._foreseen()
        first = Reading(1, scanners(run, self.checks, run.turn) if surely else [])
        self.readings.append(first)
        if self.progress:
            yield Progress("writing", 1)
        # The agent's own error on the first attempt is the caller's, as in ``run``.
        with agent_attempt(run.turn, 1):
            first.stream = await open_stream(self.agent, messages, run.v.agent_pool)
        outcome: Outcome | None = None
        try:
            async with contextlib.aclosing(self._read(first, guarded=may_judge)) as deltas:
                async for delta in deltas:
                    yield delta
            if first.failed is not None:
                raise first.failed.error
            reply = self._reply(first)
            outcome = await run.gate(reply)
            if outcome is None:
                async with contextlib.aclosing(self._loop(messages, first, reply)) as steps:
                    async for event in steps:
                        if isinstance(event, Outcome):
                            outcome = event
                        else:
                            yield event
        except VerificationExhausted:
            raise
        except Exception as exc:
            if first.failed is not None and exc is first.failed.error:
                raise
            async with contextlib.aclosing(self._fail_open(self.readings[-1], exc)) as rest:
                async for event in rest:
                    yield event
            return
        assert outcome is not None  # the loop ends with one
        for event in self._closing(outcome):
            yield event
        yield Done(outcome)

    async def _loop(
        self, messages: Messages, reading: Reading, reply: Reply
    ) -> AsyncGenerator[StreamEvent | Progress | Outcome]:
        """From the first reply (judged) to the outcome, which it yields last."""
        run = self.run
        feedback_so_far: list[str] = []
        while True:
            late = await run.out_of_time(reply)
            if late is not None:
                yield late
                return
            if reading.cut is not None:
                verdict = checks_verdict((reading.cut,))
                assert verdict is not None  # a cut is a failing result
                attempt = await run.record(
                    Attempt(
                        number=reading.number, reply=reply, verdict=verdict, checks=(reading.cut,)
                    )
                )
            else:
                if self.progress:
                    yield Progress("checking", reading.number)
                attempt = await run.judged(reading.number, reply, feedback_so_far)
            ended = await run.settle(attempt)
            if ended is not None:
                yield ended
                return
            feedback = await run.feedback(attempt, feedback_so_far)
            withdrawn = bool(self.shown) or reading.cut is not None
            if self.shown:
                yield self._retract(reading.number, _why(attempt))
            # Retracted or cut-short text never enters the history the retry sees.
            earlier = [] if withdrawn else [{"role": "assistant", "content": reply.text}]
            messages = [*messages, *earlier, {"role": "user", "content": feedback}]
            previous, number = reply, reading.number + 1
            reading = Reading(number, scanners(run, self.checks, run.turn))
            self.readings.append(reading)
            if self.progress:
                yield Progress("revising", number)
            try:
                async with asyncio.timeout(run.time_left()):
                    with agent_attempt(run.turn, number):
                        reading.stream = await open_stream(self.agent, messages, run.v.agent_pool)
            except TimeoutError:
                yield await run.retry_timed_out(number, previous)
                return
            except Exception as exc:
                yield await run.retry_failed(exc, number, previous)
                return
            async with contextlib.aclosing(self._read(reading, guarded=True)) as deltas:
                async for delta in deltas:
                    yield delta
            if reading.timed_out:
                yield await run.retry_timed_out(number, previous)
                return
            if reading.failed is not None:
                yield await run.retry_failed(reading.failed.error, number, previous)
                return
            reply = self._reply(reading)
            if reading.cut is None:
                accepted = await run.accept(reply, number, previous)
                if isinstance(accepted, Outcome):
                    yield accepted
                    return

    def _reply(self, reading: Reading) -> Reply:
        """The attempt's reply; one cut short is noted as a fragment, never to be delivered."""
        reply = reading.collected.reply()
        if reading.fragment:
            self.run.cut_short(reply)
        return reply

    def _retract(self, attempt: int, reason: str) -> Retract:
        self.shown = []
        return Retract(attempt, reason)

    async def _read(self, reading: Reading, *, guarded: bool) -> AsyncGenerator[Delta]:
        """Read one attempt's stream, showing what the mode allows; stops early on a
        violation (``reading.cut``), an agent error (``reading.failed``) or the deadline, and
        closes the stream, unless replyguard's own trouble leaves it to ``_fail_open``."""
        keep_open = False
        try:
            run = self.run
            collected, scanners = reading.collected, reading.scanners
            live = not guarded  # nothing to verify: every delta at once
            release = self.release and guarded
            hold = self.hold if scanners else 0
            next_item = reading.stream.__anext__
            scope = TurnContext(run.turn, reading.number)  # the agent's code runs in each read
            shown = self.shown
            self.shown_attempt = reading.number
            deadline = run.deadline if reading.number > 1 else None
            while True:
                token = enter_attempt(scope)
                try:
                    if deadline is None:
                        item = await next_item()
                    else:
                        async with asyncio.timeout_at(_loop_time(deadline)):
                            item = await next_item()
                    text = collected.text_of(item)
                except StopAsyncIteration:
                    reading.complete = True
                    break
                except TimeoutError:
                    reading.timed_out = True
                    return
                except Exception as exc:
                    reading.failed = AgentFailed(exc)
                    return
                finally:
                    leave_attempt(token)
                if not text:
                    continue
                collected.add(text)
                if live:
                    shown.append(text)
                    yield Delta(text)
                    continue
                if scanners and not reading.frozen and reading.scan(run, text):
                    return
                if release and not reading.frozen:
                    reading.held += text
                    limit = collected.length - hold
                    for _, scanner in scanners:
                        pending = scanner.pending_from
                        if pending is not None and pending < limit:
                            limit = pending
                    if limit > reading.released:
                        count = limit - reading.released
                        out, reading.held = reading.held[:count], reading.held[count:]
                        reading.released = limit
                        shown.append(out)
                        yield Delta(out)
            if scanners and not reading.frozen and reading.finish_scans(run):
                return
            if release and reading.held and not reading.frozen:
                out, reading.held = reading.held, ""
                reading.released = collected.length
                shown.append(out)
                yield Delta(out)
        except Exception:
            keep_open = True  # the fail-open pass-through reads on
            raise
        finally:
            if not keep_open:
                await self._close(reading)

    async def _close(self, reading: Reading) -> None:
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

    # -- the end -------------------------------------------------------------------------------

    def _closing(self, outcome: Outcome) -> list[StreamEvent]:
        """What makes the deltas after the last ``Retract`` spell ``outcome.response``."""
        response, shown = outcome.response, "".join(self.shown)
        if response == shown:
            return []
        events: list[StreamEvent] = []
        if not response.startswith(shown):
            events.append(self._retract(self.shown_attempt, outcome.status.value))
            shown = ""
        rest = response[len(shown) :]
        if not shown:
            for reading in reversed(self.readings):
                if reading.collected.length == len(rest) and reading.collected.text == rest:
                    events.extend(Delta(part) for part in reading.collected.parts if part)
                    return events
        if rest:
            events.append(Delta(rest))
        return events

    async def _fail_open(self, reading: Reading, exc: Exception) -> AsyncGenerator[StreamEvent]:
        """replyguard's own trouble: release what is held, pass the rest of the agent's stream
        through untouched, and end with a ``failed_open`` outcome."""
        run = self.run
        events = run.v.events
        events.error(
            "stream_failed_open",
            turn_id=run.turn.id,
            attempt=reading.number,
            error=describe_error(exc, events.secrets),
        )
        collected = reading.collected
        fragment = reading.fragment
        # A stream cut short is never delivered: the turn's complete reply stands in for it.
        text = run.whole().text if fragment else collected.text
        shown = "".join(self.shown)
        if shown and not text.startswith(shown):
            yield self._retract(self.shown_attempt, Status.FAILED_OPEN.value)
            shown = ""
        if text[len(shown) :]:
            yield Delta(text[len(shown) :])
        stream = reading.stream
        if stream is not None and reading.failed is None and reading.cut is None:
            try:
                async for item in stream:
                    piece = collected.text_of(item)
                    if piece:
                        collected.add(piece)
                        yield Delta(piece)
            except Exception as error:  # the agent's own: what came so far is the reply
                events.warning(
                    "agent_stream_failed",
                    turn_id=run.turn.id,
                    error=describe_error(error, events.secrets),
                )
            finally:
                await self._close(reading)
        attempts = [a for a in run.attempts if a.number != reading.number]
        attempts.append(Attempt(number=reading.number, reply=collected.reply()))
        delivered = Reply(text=text if fragment else collected.text)
        ending = Ending(Status.FAILED_OPEN, delivered, Reason.INTERNAL_ERROR)
        yield Done(settled(ending, attempts, (time.perf_counter() - run.started) * 1000))


def _loop_time(deadline: float) -> float:
    """A ``time.monotonic`` deadline on the running loop's clock."""
    return asyncio.get_running_loop().time() + (deadline - time.monotonic())


def _why(attempt: Attempt) -> str:
    """A retract's reason: the failing check's name, else the FAIL category."""
    verdict = attempt.verdict
    failing = [r.name for r in attempt.checks if not r.passed]
    if verdict is not None and verdict.decisive and failing:
        return failing[0]
    if verdict is not None and verdict.category is not None:
        return str(verdict.category)
    return "fail"


def stream_events(
    parts: TurnParts,
    turn: Turn,
    profile: Any,
    agent: StreamingAgent | Agent,
    note_host: Callable[[asyncio.AbstractEventLoop], None],
    progress: bool = False,
) -> AsyncGenerator[StreamEvent | Progress, None]:
    """The events of one streamed turn (see the module's docstring); with ``progress``, a
    ``Progress`` event at each phase change too."""
    sample_key = turn.id if turn.id is not None else turn.user_message
    run = StreamRun(parts, with_turn_id(turn), profile, time.perf_counter(), sample_key=sample_key)
    return StreamTurn(run, agent, parts.assessor.checks, note_host, progress).events()
