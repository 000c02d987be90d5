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

from replyguard.errors import VerificationExhausted
from replyguard.runner._agents import Agent, Messages, StreamingAgent
from replyguard.runner._driver import drive
from replyguard.runner._policy import Ending, settled
from replyguard.runner._run import TurnParts, _sampled_in
from replyguard.runner._stream_attempts import StreamAttempts
from replyguard.runner._stream_reading import Reading
from replyguard.runner._stream_run import StreamRun
from replyguard.runner._turn_scope import with_turn_id
from replyguard.telemetry._events import describe_error
from replyguard.types import (
    Attempt,
    Delta,
    Done,
    Outcome,
    Progress,
    Reason,
    Reply,
    Status,
    StreamEvent,
    Turn,
)


class StreamTurn:
    """The events of one streamed turn; lives for one ``Verifier.stream``. Its attempts are
    read by a ``StreamAttempts`` and decided by the turn's loop (``runner/_driver.drive``), as
    ``run``'s are; this class starts the turn and ends it."""

    def __init__(
        self,
        run: StreamRun,
        attempts: StreamAttempts,
        note_host: Callable[[asyncio.AbstractEventLoop], None],
    ) -> None:
        self.run = run
        self.attempts = attempts
        self.note_host = note_host

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
        run, attempts = self.run, self.attempts
        self.note_host(asyncio.get_running_loop())
        messages: Messages = [*run.turn.history, {"role": "user", "content": run.turn.user_message}]
        may_judge, surely = self._foreseen()
        first = attempts.first(surely=surely)
        if attempts.progress:
            yield Progress("writing", 1)
        # The agent's own error on the first attempt is the caller's, as in ``run``.
        await attempts.open_first(first, messages)
        outcome: Outcome | None = None
        try:
            async with contextlib.aclosing(attempts.read(first, guarded=may_judge)) as deltas:
                async for delta in deltas:
                    yield delta
            if first.failed is not None:
                raise first.failed.error
            reply = attempts.reply(first)
            async with contextlib.aclosing(drive(run, attempts, messages, reply)) as steps:
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
            async with contextlib.aclosing(self._fail_open(attempts.readings[-1], exc)) as rest:
                async for event in rest:
                    yield event
            return
        assert outcome is not None  # the loop ends with one
        for event in self._closing(outcome):
            yield event
        yield Done(outcome)

    # -- the end -------------------------------------------------------------------------------

    def _closing(self, outcome: Outcome) -> list[StreamEvent]:
        """What makes the deltas after the last ``Retract`` spell ``outcome.response``."""
        attempts = self.attempts
        response, shown = outcome.response, "".join(attempts.shown)
        if response == shown:
            return []
        events: list[StreamEvent] = []
        if not response.startswith(shown):
            events.append(attempts.retract(attempts.shown_attempt, outcome.status.value))
            shown = ""
        rest = response[len(shown) :]
        if not shown:
            for reading in reversed(attempts.readings):
                if reading.collected.length == len(rest) and reading.collected.text == rest:
                    events.extend(Delta(part) for part in reading.collected.parts if part)
                    return events
        if rest:
            events.append(Delta(rest))
        return events

    async def _fail_open(self, reading: Reading, exc: Exception) -> AsyncGenerator[StreamEvent]:
        """replyguard's own trouble: release what is held, pass the rest of the agent's stream
        through untouched, and end with a ``failed_open`` outcome."""
        run, attempts = self.run, self.attempts
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
        shown = "".join(attempts.shown)
        if shown and not text.startswith(shown):
            yield attempts.retract(attempts.shown_attempt, Status.FAILED_OPEN.value)
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
                await attempts.close(reading)
        earlier = [a for a in run.attempts if a.number != reading.number]
        earlier.append(Attempt(number=reading.number, reply=collected.reply()))
        delivered = Reply(text=text if fragment else collected.text)
        ending = Ending(Status.FAILED_OPEN, delivered, Reason.INTERNAL_ERROR)
        yield Done(settled(ending, earlier, (time.perf_counter() - run.started) * 1000))


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
    attempts = StreamAttempts(run, agent, parts.assessor.checks, progress)
    return StreamTurn(run, attempts, note_host).events()
