"""One verified turn's loop, whatever its attempts come from (``drive``).

A turn's replies come from an ``AttemptSource``: ``AgentCalls`` calls the agent for each one
(``Verifier.run``, ``run_sync``); ``StreamAttempts`` reads the agent's stream
(``Verifier.stream``, both modes, ``runner/_stream_attempts.py``). The driver owns everything
between one reply and the next, the same for both: the gate, the turn's deadline, the checks
and the judge (or the incremental check that cut a stream short), the policy's decision
(``_Run.settle``), the retry's feedback and the history the retry sees, how a retry's reply
ends the turn before it is judged (``_Run.accept``: a broken reply, the previous one again)
and the outcome. A source only gets replies, and says what the user was shown of them.

``drive`` is an async generator: it yields what the source has to tell the caller (a
stream's ``Delta``, ``Retract`` and ``Progress`` events; nothing for ``AgentCalls``) and,
last, the turn's ``Outcome``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from replyguard.checks.running import checks_verdict
from replyguard.runner._agents import Agent, Messages, call_agent
from replyguard.runner._run import _Run
from replyguard.runner._turn_scope import agent_attempt
from replyguard.telemetry._events import describe_error
from replyguard.types import (
    Attempt,
    CheckResult,
    Outcome,
    Progress,
    Reason,
    Reply,
    Status,
    StreamEvent,
)

Told = StreamEvent | Progress
"""What a source tells the caller while the turn runs (a stream's events)."""


@dataclass(frozen=True, slots=True)
class Retried:
    """What a source got for a retry: its ``reply``, else the agent's ``error``, else
    (neither) the turn's deadline passed first."""

    reply: Reply | None = None
    error: Exception | None = None


class DeadlinePassed(Exception):
    """The turn's deadline (``maxLatencyMs``) passed while the agent wrote an attempt.

    Raised by ``by_deadline`` alone: a ``TimeoutError`` the agent raises itself (its HTTP
    client's, say) is the agent's error (``agent_error``), never the turn's deadline
    (``latency_budget``), whether or not ``maxLatencyMs`` is set."""


@contextlib.asynccontextmanager
async def by_deadline(left: float | None) -> AsyncIterator[None]:
    """Bound the agent's work inside to ``left`` seconds (None: unbounded), the turn's time
    left. The one place a retry's ``TimeoutError`` is told apart: ``DeadlinePassed`` when this
    bound expired, the agent's own error (re-raised as it is) otherwise."""
    bound = asyncio.timeout(left)
    try:
        async with bound:
            yield
    except TimeoutError as exc:
        if bound.expired():
            raise DeadlinePassed from exc
        raise


class AttemptSource(Protocol):
    """Where a turn's replies after the first come from, and what the caller is told."""

    def cut(self, number: int) -> CheckResult | None:
        """The failing check result that cut attempt ``number`` short (its stream closed
        before its end, a retry to follow), or None: the attempt is checked and judged."""
        ...

    def judging(self, number: int) -> Sequence[Told]:
        """What to tell the caller as attempt ``number`` is checked and judged."""
        ...

    def withdraw(self, attempt: Attempt) -> tuple[Sequence[Told], bool]:
        """A rejected ``attempt``, a retry to follow: what to tell the caller (a ``Retract``
        of what was shown), and whether its reply stays in the history the retry sees."""
        ...

    def retry(self, messages: Messages, number: int) -> AsyncGenerator[Told | Retried]:
        """Attempt ``number`` from ``messages``: what to tell the caller as it comes, then a
        ``Retried``, last."""
        ...


async def drive(
    run: _Run, source: AttemptSource, messages: Messages, reply: Reply
) -> AsyncGenerator[Told | Outcome]:
    """From the first reply to the outcome, which it yields last (see the module)."""
    decided = await run.gate(reply)
    if decided is not None:
        yield decided
        return
    feedback_so_far: list[str] = []
    number = 1
    while True:
        left = run.time_left()
        if left is not None and left <= 0:  # the deadline passed before the next judgement
            yield await run.finish(Status.FAILED_OPEN, run.delivery(reply), Reason.LATENCY_BUDGET)
            return
        cut = source.cut(number)
        if cut is not None:
            attempt = await run.record(_cut(number, reply, cut))
        else:
            for told in source.judging(number):
                yield told
            attempt = await run.judged(number, reply, feedback_so_far)
        ended = await run.settle(attempt)
        if ended is not None:
            yield ended
            return
        feedback = await run.feedback(attempt, feedback_so_far)
        withdrawn, kept = source.withdraw(attempt)
        for told in withdrawn:
            yield told
        # Withdrawn or cut-short text never enters the history the retry sees.
        earlier = [{"role": "assistant", "content": reply.text}] if kept else []
        messages = [*messages, *earlier, {"role": "user", "content": feedback}]
        previous, number = reply, number + 1
        retried = Retried()
        async with contextlib.aclosing(source.retry(messages, number)) as items:
            async for item in items:
                if isinstance(item, Retried):
                    retried = item
                else:
                    yield item
        if retried.reply is None:
            yield await _no_retry(run, retried.error, number, previous)
            return
        reply = retried.reply
        if source.cut(number) is None:
            accepted = await run.accept(reply, number, previous)
            if isinstance(accepted, Outcome):
                yield accepted
                return


async def _no_retry(run: _Run, error: Exception | None, number: int, previous: Reply) -> Outcome:
    """The outcome when retry ``number`` brought no reply, failing open: the turn's deadline
    passed (``error`` None: the delivery policy's reply) or the agent failed (the previous
    reply)."""
    events = run.v.events
    if error is None:
        events.warning("agent_retry_timed_out", turn_id=run.turn.id, attempt=number)
        return await run.finish(Status.FAILED_OPEN, run.delivery(previous), Reason.LATENCY_BUDGET)
    events.warning(
        "agent_retry_failed",
        turn_id=run.turn.id,
        attempt=number,
        error=describe_error(error, events.secrets),
    )
    return await run.finish(Status.FAILED_OPEN, previous, Reason.AGENT_ERROR)


def _cut(number: int, reply: Reply, found: CheckResult) -> Attempt:
    """The attempt an incremental check's violation cut short: the check decided it."""
    verdict = checks_verdict((found,))
    assert verdict is not None  # a cut is a failing result
    return Attempt(number=number, reply=reply, verdict=verdict, checks=(found,))


async def outcome_of(run: _Run, source: AttemptSource, messages: Messages, reply: Reply) -> Outcome:
    """The outcome ``drive`` ends with, for a source with nothing to tell (``AgentCalls``)."""
    steps = drive(run, source, messages, reply)
    try:  # contextlib.aclosing, without its calls
        async for step in steps:
            if isinstance(step, Outcome):
                return step
    finally:
        await steps.aclose()
    raise AssertionError("unreachable: the driver ends with an outcome")


class AgentCalls:
    """A turn's replies from calling the agent (``Verifier.run``, ``run_sync``): it shows the
    caller nothing, so nothing is withdrawn, and the rejected reply stays in the history."""

    __slots__ = ("agent", "run")

    def __init__(self, run: _Run, agent: Agent) -> None:
        self.run = run
        self.agent = agent

    def cut(self, number: int) -> None:
        return None

    def judging(self, number: int) -> Sequence[Told]:
        return ()

    def withdraw(self, attempt: Attempt) -> tuple[Sequence[Told], bool]:
        return (), True

    async def retry(self, messages: Messages, number: int) -> AsyncGenerator[Told | Retried]:
        """The agent's next reply, within the turn's deadline."""
        run = self.run
        try:
            async with by_deadline(run.time_left()):
                with agent_attempt(run.turn, number):
                    reply = await call_agent(self.agent, messages, run.v.agent_pool)
        except DeadlinePassed:
            retried = Retried()
        except Exception as exc:
            retried = Retried(error=exc)
        else:
            retried = Retried(reply)
        yield retried
