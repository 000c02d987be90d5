"""One verified turn, from the agent's first reply to the delivered one (``_Run``).

A ``_Run`` lives for one ``Verifier.run``: its attempts, its clock and its spend are its own.
What it uses of the verifier comes in one ``TurnParts`` record, built once per verifier.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from replyguard._frozen import assembled_from
from replyguard.config._schema import VerifierConfig
from replyguard.errors import VerificationExhausted
from replyguard.gate._prechecks import skip_reason
from replyguard.gate._triggers import TriggerKind
from replyguard.runner._assessment import Assessor, Profile, Reading, Step
from replyguard.runner._family_guard import FamilyGuard
from replyguard.runner._feedback import feedback_message
from replyguard.runner._hooks import Hooks
from replyguard.runner._policy import (
    Ending,
    feedback_line,
    judged_ending,
    raises,
    retry_ending,
    settled,
)
from replyguard.runner._policy import delivery as delivered_reply
from replyguard.runner._side_effects import SideEffects, done
from replyguard.runner._threads import ThreadPool
from replyguard.runner._turn_report import append_to_ledger, report_outcome
from replyguard.telemetry._events import Events
from replyguard.telemetry._ledger import Ledger
from replyguard.telemetry._tracing import Tracing, verdict_attributes
from replyguard.types import (
    Attempt,
    Outcome,
    Reason,
    Reply,
    SkipReason,
    Status,
    ToolCallRecord,
    Turn,
)


@dataclass(frozen=True, slots=True)
class TurnParts:
    """What a turn uses of its ``Verifier`` (shared, thread-safe helpers only)."""

    config: VerifierConfig
    events: Events
    assessor: Assessor
    hooks: Hooks
    ledger: Ledger | None
    agent_pool: ThreadPool
    tracing: Tracing
    families: FamilyGuard
    side_effects: SideEffects


_FINAL_HOOKS = {
    Status.EXHAUSTED: "on_exhausted",
    Status.FAILED_OPEN: "on_fail_open",
    Status.SKIPPED: "on_skip",
    Status.NOT_TRIGGERED: "on_skip",
}
"""The hook called when a turn ends with each status (none for the others)."""


def _sampled_in(sample_key: str, rate: float) -> bool:
    """Whether a turn is in the judged share: the same answer for the same key (the caller's
    turn id, else the user message), always."""
    if rate >= 1:
        return True
    draw = int.from_bytes(hashlib.sha256(sample_key.encode("utf-8")).digest()[:8], "big")
    return draw / 2**64 < rate


class _Run:
    """Everything about one turn: its attempts, its clock, its spend. Lives for one ``run``."""

    def __init__(
        self,
        parts: TurnParts,
        turn: Turn,
        profile: Profile,
        started: float,
        *,
        sample_key: str | None = None,
        reading: Reading | None = None,
        read_ahead: bool = False,
    ) -> None:
        """``turn`` carries its id (``with_turn_id``); ``sample_key`` is what ``sampleRate``
        draws on: the caller's own id, else the user message (never an assigned id);
        ``reading``: the workspace files' read, when the caller started it already;
        ``read_ahead``: the caller asked for that read (None: there was nothing to read)."""
        self.v = parts
        self.turn = turn
        self.sample_key = sample_key if sample_key is not None else turn.user_message
        self.profile = profile
        self.config = profile.config
        self.started = started
        self.attempts: list[Attempt] = []
        self.deadline: float | None = None
        self.verified = False
        self.tool_ledger: tuple[ToolCallRecord, ...] = ()
        """The turn's tool calls so far, every attempt's, side effects settled."""
        self.reading = reading
        """The workspace files' read, shared by every attempt (started once judged)."""
        self.read_ahead = read_ahead

    # -- clock and money ------------------------------------------------------------------

    def time_left(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.monotonic()

    # -- ending -----------------------------------------------------------------------------

    def delivery(self, latest: Reply) -> Reply:
        """What a turn that ran out of attempts, money or time delivers, per ``deliver``."""
        return delivered_reply(self.config.deliver, self.attempts, latest)

    async def finish(
        self,
        status: Status,
        delivered: Reply,
        reason: Reason | None = None,
        skip: SkipReason | None = None,
        *,
        awaiting: bool = False,
    ) -> Outcome:
        ending = Ending(status, delivered, reason, skip, awaiting)
        latency_ms = (time.perf_counter() - self.started) * 1000
        outcome = settled(ending, self.attempts, latency_ms)
        self.report(outcome)
        if self.verified and self.v.ledger is not None:
            await append_to_ledger(
                self.v.ledger,
                self.turn,
                outcome,
                self.profile,
                self.tool_ledger,
                self.time_left(),
            )
        hook = _FINAL_HOOKS.get(status)
        if hook is not None and getattr(self.v.hooks, hook) is not None:
            await self.hook(hook, outcome)
        if status == Status.EXHAUSTED and raises(self.config, outcome):
            raise VerificationExhausted(outcome, delivered)
        return outcome

    async def hook(self, name: str, *args: Any) -> None:
        """Run a hook (callers with nothing to run may skip this await); its time does not
        count against the turn's deadline."""
        v = self.v
        if getattr(v.hooks, name) is None:
            return
        paused = time.monotonic()
        await v.hooks.call(
            name, self.turn, *args, time_limit=v.config.hook_timeout_seconds, events=v.events
        )
        if self.deadline is not None:
            self.deadline += time.monotonic() - paused

    def report(self, outcome: Outcome) -> None:
        """The outcome's log event."""
        report_outcome(
            self.v.events,
            self.turn,
            self.profile.name,
            outcome,
            log_content=self.config.log_content,
        )

    # -- the steps of the turn's loop (``runner/_driver.drive``) ---------------------------

    async def gate(self, reply: Reply) -> Outcome | None:
        """The outcome of a turn whose first reply is not judged (disabled, skipped, not
        triggered, refused), or None when it is: then the turn's clock starts."""
        config, turn, v = self.config, self.turn, self.v
        unjudged = _unjudged(self, reply)
        if unjudged is not None:
            self.attempts.append(Attempt(number=1, reply=reply, skip_reason=unjudged.skip))
            return await self.finish(unjudged.status, reply, unjudged.reason, unjudged.skip)
        self.verified = True
        if v.families.refused(self.profile, turn):
            self.attempts.append(Attempt(number=1, reply=reply))
            return await self.finish(Status.FAILED_OPEN, reply, Reason.SAME_FAMILY)
        if config.max_latency_ms is not None:
            self.deadline = time.monotonic() + config.max_latency_ms / 1000
        if self.reading is None and not self.read_ahead:
            self.reading = v.assessor.read_workspace(self.profile, turn)
        return None

    async def judged(self, number: int, reply: Reply, feedback_so_far: Sequence[str]) -> Attempt:
        """Checks and judge on attempt ``number``, recorded."""
        earlier = [a.reply for a in self.attempts] if self.attempts else ()
        judged_reply = self.v.side_effects.with_turn_ledger(reply, earlier)
        self.tool_ledger = judged_reply.meta.tool_calls
        step = Step(
            self.profile,
            self.turn,
            judged_reply,
            tuple(feedback_so_far),
            number,
            self.deadline,
            self.reading,
            True,  # read: by ``gate`` or before the agent's call (None: nothing to read)
        )
        tracing = self.v.tracing
        if not tracing.enabled:  # no span to open, nothing to record
            verdict, results = await self.v.assessor.assess(step)
        else:
            with tracing.span("replyguard.attempt") as span:
                span.set({"replyguard.attempt": number})
                verdict, results = await self.v.assessor.assess(step)
                span.record(verdict_attributes, verdict, tracing.log_content)
        fields = {"number": number, "reply": reply, "verdict": verdict, "checks": results}
        return await self.record(assembled_from(Attempt, fields))

    async def record(self, attempt: Attempt) -> Attempt:
        """Add a decided attempt to the turn (and tell ``on_verdict``)."""
        self.attempts.append(attempt)
        if self.v.hooks.on_verdict is not None:
            await self.hook("on_verdict", attempt)
        return attempt

    async def settle(self, attempt: Attempt) -> Outcome | None:
        """The outcome the last recorded attempt's verdict ends the turn with, or None to retry."""
        previous = self.attempts[-2] if len(self.attempts) > 1 else None
        ending = self.ending(attempt, previous)
        if ending is None:
            return None
        return await self.finish(
            ending.status, ending.delivered, ending.reason, awaiting=ending.awaiting
        )

    def ending(self, attempt: Attempt, previous: Attempt | None) -> Ending | None:
        """How a judged ``attempt`` (after ``previous``) ends the turn, or None when a retry
        follows it (``_policy.judged_ending``). Decides, records nothing."""
        attempts = self.attempts
        if not attempts or attempts[-1] is not attempt:  # (recorded last, as ``drive`` does)
            attempts = [*(a for a in attempts if a is not attempt), attempt]
        assert previous is None or attempts[-2] is previous
        return judged_ending(self.config, attempts, self.tool_ledger)

    async def feedback(self, attempt: Attempt, feedback_so_far: list[str]) -> str:
        """The retry message for a failed attempt (noted in ``feedback_so_far``, logged, and
        given to ``on_retry``)."""
        verdict = attempt.verdict
        assert verdict is not None
        notice = done(self.tool_ledger) if self.config.on_side_effects == "notice" else ()
        feedback = feedback_message(
            verdict,
            heartbeat=self.turn.heartbeat,
            done=notice,
            categories=self.config.categories,
        )
        feedback_so_far.append(feedback_line(verdict))
        self.v.events.info(
            "retry",
            turn_id=self.turn.id,
            attempt=attempt.number + 1,
            category=verdict.category,
            **({"feedback": feedback} if self.config.log_content else {}),
        )
        await self.hook("on_retry", attempt, feedback)
        return feedback

    async def accept(self, retry: Reply, number: int, previous: Reply) -> Reply | Outcome:
        """A retry's reply to judge, or the outcome when what it is ends the turn (a tool-call
        step, an empty or error reply, the previous reply again)."""
        skip = skip_reason(retry)
        ending = retry_ending(self.config, self.attempts, retry, previous, skip)
        if ending is None:
            return retry
        self.attempts.append(Attempt(number=number, reply=retry, skip_reason=skip))
        return await self.finish(ending.status, ending.delivered, ending.reason, ending.skip)


def _unjudged(run: _Run, reply: Reply) -> Ending | None:
    """How a turn whose first reply is not judged ends (verification off, a skipped reply, no
    trigger, sampled out), or None when it is judged."""
    config = run.config
    if not config.enabled:
        return Ending(Status.DISABLED, reply)
    skip = skip_reason(reply)
    if skip is not None:
        return Ending(Status.SKIPPED, reply, skip=skip)
    trigger = run.profile.triggers.decide(run.turn, reply.text)
    if trigger is None:
        return Ending(Status.NOT_TRIGGERED, reply)
    rate = config.sample_rate
    if rate < 1 and trigger == TriggerKind.VERIFY_ALL and not _sampled_in(run.sample_key, rate):
        return Ending(Status.NOT_TRIGGERED, reply, Reason.SAMPLED_OUT)
    return None
