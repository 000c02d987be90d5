"""What every framework adapter needs: the turn, the judged text, the delivered result.

An adapter calls its framework once per attempt and records each result here with the text it
was judged as; the ``Outcome`` then names the delivered text, and ``Attempts.delivered`` finds
the framework result that produced it. Guardrail-style adapters (one judgement, no loop of
their own) go through ``judge_output``, which fails open like the core.

A sync entry point (``invoke``, ``run_sync``, a sync hook) blocks through ``blocking``: where an
event loop already runs in the calling thread (a Jupyter cell, sync code called from async
code) the verifier's ``run_sync`` refuses to run, so the work moves to a worker thread and the
caller waits for it, as any sync call does.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import pydantic_core

from replyguard.config._schema import VerifierConfig
from replyguard.gate._prechecks import skip_reason
from replyguard.runner import blocked_context
from replyguard.runner._feedback import feedback_message
from replyguard.runner._policy import (
    Assessed,
    Ending,
    PolicyStep,
    delivery,
    feedback_so_far,
    judged_ending,
    retry_ending,
    settled,
    verdict_status,
)
from replyguard.runner._side_effects import done
from replyguard.telemetry._events import Events, describe_error
from replyguard.types import Attempt, Outcome, Reason, Reply, Status, StreamEvent, Turn, Verdict

if TYPE_CHECKING:
    from replyguard.runner._verifier import Verifier

R = TypeVar("R")
T = TypeVar("T")
AttemptFn = Callable[[list[dict[str, Any]]], Awaitable[Reply]]
"""One attempt of a framework run, as ``Verifier.run`` calls it."""
StreamingAttemptFn = Callable[[list[dict[str, Any]]], AsyncIterator[Any]]
"""One streamed attempt, as ``Verifier.stream`` calls it: text pieces, then a ``RunMeta``."""

_TURN_OWN_FIELDS = frozenset({"user_message", "history"})


def turn_defaults(fields: Mapping[str, Any]) -> dict[str, Any]:
    """``fields`` checked as extra ``Turn`` fields (rules, agent_instructions, ...), now.

    A misspelt field is an error at construction, naming the field, not on the first turn.
    """
    own = sorted(_TURN_OWN_FIELDS & fields.keys())
    if own:
        raise TypeError(f"turn fields set by the adapter itself cannot be given: {', '.join(own)}")
    Turn(user_message="", **fields)
    return dict(fields)


def make_turn(user_message: str, history: list[dict[str, Any]], fields: Mapping[str, Any]) -> Turn:
    """The ``Turn`` for one framework run."""
    return Turn(user_message=user_message, history=history, **fields)


def output_text(output: Any) -> str:
    """The text a framework's output is judged as: a string as it is, anything else as JSON."""
    if isinstance(output, str):
        return output
    return pydantic_core.to_json(output, fallback=str).decode()


def retry_conversation(turn: Turn, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What ``Verifier.stream`` added after the turn's user message when it asks for a retry:
    the feedback last, and before it each earlier reply the user was not shown and its feedback
    (a reply withdrawn with a ``Retract``, or cut short, is left out: it never enters the
    history the retry sees)."""
    return messages[len(turn.history) + 1 :]


def retry_feedback(messages: list[dict[str, Any]]) -> str:
    """The feedback of a retry: the last message ``Verifier.run`` hands the agent."""
    content = messages[-1].get("content")
    return content if isinstance(content, str) else ""


class Attempts(Generic[R]):
    """The framework results of one verified turn, in order, each with its judged text."""

    def __init__(self) -> None:
        self._results: list[tuple[str, R]] = []

    def __len__(self) -> int:
        return len(self._results)

    def add(self, text: str, result: R) -> None:
        """Record the result of one attempt."""
        self._results.append((text, result))

    @property
    def last(self) -> R:
        """The newest result (there is one once the agent was called)."""
        return self._results[-1][1]

    def find(self, outcome: Outcome) -> R | None:
        """``delivered(outcome)``, or None when no attempt was recorded (a streamed attempt is
        recorded only once its stream ran to its end)."""
        return self.delivered(outcome) if self._results else None

    def delivered(self, outcome: Outcome) -> R:
        """The newest result whose text is the delivered response, else the newest result.

        The response differs from every attempt only when a check rewrote it (repaired JSON);
        the newest result is then the one it came from.
        """
        for text, result in reversed(self._results):
            if text == outcome.response:
                return result
        return self.last


def operator_message(outcome: Outcome) -> str | None:
    """The operator's fixed message the turn delivers instead of any attempt (``onExhausted``),
    or None: a door hands it out in place of the framework's own output."""
    return outcome.response if outcome.reason == Reason.OPERATOR_MESSAGE else None


@dataclass(frozen=True)
class VerifiedResult(Generic[R]):
    """A framework's result for the delivered attempt, and the ``Outcome`` of the turn."""

    result: R
    """The framework's result of the attempt whose output is delivered."""
    outcome: Outcome
    """What the verifier decided, with every attempt and verdict."""

    @property
    def response(self) -> str:
        """The text to deliver (``outcome.response``: the output's text, or a check's repair)."""
        return self.outcome.response


def stream_turn(
    verifier: Verifier, attempt: StreamingAttemptFn, turn: Turn
) -> AsyncGenerator[StreamEvent, None]:
    """``verifier.stream(attempt, turn)``, to be closed with ``aclose`` (``aclosing``)."""
    return verifier.stream(attempt, turn)


def blocking(work: Callable[[], T]) -> T:
    """``work()``, here, or on a worker thread when an event loop runs in this thread.

    The worker gets a copy of the caller's context variables (callbacks, tracing). The caller's
    loop is blocked while it waits, as by any sync call made on it; ``work`` must not need that
    loop.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return work()
    context = blocked_context()
    with concurrent.futures.ThreadPoolExecutor(1, "replyguard-blocking") as pool:
        return pool.submit(context.run, work).result()


def call_blocking(verifier: Verifier, make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """The coroutine ``make()`` run to its end on the verifier's ``run_sync`` loop, from sync
    code (through ``blocking``)."""
    return blocking(lambda: verifier._sync.submit(make))


@dataclass(frozen=True)
class PreparedRun(Generic[T]):
    """A framework run made ready for ``Verifier.run``: the attempt, the turn, and how the
    outcome becomes the adapter's result."""

    attempt: AttemptFn
    turn: Turn
    finish: Callable[[Outcome], T]

    async def run(self, verifier: Verifier) -> T:
        """Run it on the running event loop."""
        return self.finish(await verifier.run(self.attempt, self.turn))

    def run_sync(self, verifier: Verifier) -> T:
        """Run it on the verifier's ``run_sync`` loop (see ``blocking``)."""
        return self.finish(blocking(lambda: verifier.run_sync(self.attempt, self.turn)))


async def judge_output(verifier: Verifier, turn: Turn, reply: Reply) -> Assessed | None:
    """One judgement of a framework's final output, or None when nothing is to be judged.

    Nothing is judged when the config is not ``enabled`` or a pre-check skips the reply. The
    verifier's own trouble never fails the output: an unexpected error gives None too.
    """
    config = verifier.config
    if not config.enabled or skip_reason(reply) is not None:
        return None
    try:
        return await verifier._assess(turn, reply)
    except Exception as exc:
        Events(config.secrets()).warning(
            "adapter_verify_failed", error=describe_error(exc, config.secrets())
        )
        return None


def acts_on(verifier: Verifier, turn: Turn, assessed: Assessed | None) -> bool:
    """Whether the judgement is a FAIL the adapter acts on (a retry, a tripwire), as
    ``runner._policy.verdict_status`` decides for every door.

    In ``"shadow"`` mode (the config's, or the turn's run kind's) a FAIL is only logged
    (``flagged``) and the output goes out unchanged, and so is a FAIL after side effects under
    ``onSideEffects: "deliver"``. A run kind the config does not name means the config
    itself, as in ``Verifier.run`` (which warns about it).
    """
    if assessed is None:
        return False
    config = verifier.config.for_run_kind(turn.run_kind)
    verdict = assessed.verdict
    status, reason = verdict_status(
        verdict,
        config.mode,
        acted=bool(done(assessed.tool_calls)),
        on_side_effects=config.on_side_effects,
    )
    if status == Status.FLAGGED:
        Events(config.secrets()).info(
            "flagged",
            turn_id=turn.id,
            run_kind=turn.run_kind,
            category=verdict.category,
            reason=reason,
        )
    return status is None


_LEVELS = {
    Status.EXHAUSTED: logging.WARNING,
    Status.FAILED_OPEN: logging.WARNING,
    Status.PASSED: logging.INFO,
    Status.FLAGGED: logging.INFO,
}


class DrivenTurn:
    """A verified turn whose attempts a framework drives (an agent middleware, an output
    validator): each reply it hands over is decided as ``Verifier.run`` decides it, by
    ``runner._policy``. ``step`` gives the turn's ``Ending``, or the feedback of a retry."""

    def __init__(
        self,
        verifier: Verifier,
        turn: Turn,
        attempts: list[Attempt],
        started: float,
        *,
        config: VerifierConfig | None = None,
    ) -> None:
        self.verifier = verifier
        self.turn = turn
        self.config = config or verifier.config.for_run_kind(turn.run_kind)
        self.attempts = attempts
        self.started = started
        """When the turn's clock started (``time.monotonic``)."""
        self.events = Events(self.config.secrets())

    def deadline(self) -> float | None:
        budget = self.config.max_latency_ms
        return None if budget is None else self.started + budget / 1000

    async def step(self, reply: Reply) -> Ending | str:
        """The turn's ending with ``reply``, or the feedback the retry is asked with."""
        number = len(self.attempts) + 1
        ending = self._unjudged(reply, number)
        if ending is not None:
            return ending
        earlier = [a.reply for a in self.attempts]
        step = PolicyStep(earlier, feedback_so_far(self.attempts), number, self.deadline())
        assessed = await self._assess(reply, step)
        verdict = assessed.verdict
        self.attempts.append(
            Attempt(number=number, reply=reply, verdict=verdict, checks=assessed.checks)
        )
        ending = judged_ending(self.config, self.attempts, assessed.tool_calls)
        if ending is not None:
            return ending
        acted = done(assessed.tool_calls)
        self.events.info("retry", turn_id=self.turn.id, attempt=number + 1)
        return feedback_message(
            verdict,
            heartbeat=self.turn.heartbeat,
            done=acted if self.config.on_side_effects == "notice" else (),
            categories=self.config.categories,
        )

    def _unjudged(self, reply: Reply, number: int) -> Ending | None:
        """How the turn ends before ``reply`` is judged (disabled, skipped, a broken or a
        repeated retry, out of time), or None when it is judged."""
        skip = skip_reason(reply)
        if not self.verifier.config.enabled:
            ending: Ending | None = Ending(Status.DISABLED, reply)
        elif not self.attempts:
            ending = None if skip is None else Ending(Status.SKIPPED, reply, skip=skip)
        else:
            previous = self.attempts[-1].reply
            ending = retry_ending(self.config, self.attempts, reply, previous, skip)
        if ending is not None:
            self.attempts.append(Attempt(number=number, reply=reply, skip_reason=skip))
            return ending
        deadline = self.deadline()
        if deadline is not None and time.monotonic() >= deadline:
            latest = delivery(self.config.deliver, self.attempts, reply)
            return Ending(Status.FAILED_OPEN, latest, Reason.LATENCY_BUDGET)
        return None

    async def _assess(self, reply: Reply, step: PolicyStep) -> Assessed:
        """The judgement of ``reply``; the verifier's own trouble is a fail-open verdict."""
        try:
            return await self.verifier._assess(self.turn, reply, step)
        except Exception as exc:
            error = describe_error(exc, self.config.secrets())
            self.events.warning("adapter_verify_failed", error=error)
            verdict = Verdict(
                passed=True, readable=False, fail_open_reason=Reason.INTERNAL_ERROR, error=error
            )
            return Assessed(verdict, (), reply.meta.tool_calls)

    def retry_failed(self, exc: Exception) -> Ending:
        """The ending when the agent fails on a retry: the previous reply, failing open."""
        self.events.warning(
            "agent_retry_failed",
            turn_id=self.turn.id,
            attempt=len(self.attempts) + 1,
            error=describe_error(exc, self.config.secrets()),
        )
        return Ending(Status.FAILED_OPEN, self.attempts[-1].reply, Reason.AGENT_ERROR)

    def outcome(self, ending: Ending) -> Outcome:
        """The turn's ``Outcome`` (``runner._policy.settled``), logged."""
        outcome = settled(ending, self.attempts, (time.monotonic() - self.started) * 1000)
        level = _LEVELS.get(outcome.status, logging.DEBUG)
        if self.events.enabled(level):
            self.events.emit(
                level,
                str(outcome.status),
                turn_id=self.turn.id,
                reason=outcome.reason,
                skip_reason=outcome.skip_reason,
                attempts=len(self.attempts),
                cost_usd=outcome.cost_usd,
            )
        return outcome
