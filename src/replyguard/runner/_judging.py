"""One judgement of one reply, by the turn's deadline: never raises for its own trouble.

In order: the judges' credentials (replyguard's own judge: a model litellm would call without a
key fails open with ``missing_credentials``), their warm-up (unless ``ready``), the prompt
(``runner._prompting``: the workspace files it shows, then the prompt itself), then each seat's
call: admission by the shared state (spend limits, the fleet's breaker), a slot of the
concurrency limit, the judge's call, its answer parsed (off the loop when long) and redacted; a
panel asks every member at once and decides. Every fault is a fail-open PASS verdict carrying
its ``fail_open_reason``; cancellation of the caller is the one exception that propagates.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

from replyguard._deadlines import deadline_in
from replyguard._frozen import assembled_from
from replyguard.context import _tokens as tokens
from replyguard.context._prompt import JudgePrompt, Redact
from replyguard.errors import CircuitOpenError, JudgeConfigError
from replyguard.judge._base import BaseJudge
from replyguard.judge._limiter import ConcurrencyLimiter
from replyguard.judge._prices import call_estimate
from replyguard.judge._protocol import JudgeReply, plain_pass
from replyguard.judge._unanswered import NO_CHARGE, Charge, Unanswered
from replyguard.runner._preload import judged
from replyguard.runner._prompting import INLINE_CHARS, prompt_of
from replyguard.runner._request import Budget, Reading, Seat, Step, bounded, until
from replyguard.runner._turn_report import report_verdict
from replyguard.telemetry._events import Events, describe_error, redact
from replyguard.types import Reason, Verdict, replaced

if TYPE_CHECKING:  # loaded when a config asks for a panel or shared state
    from replyguard.judge._panel import Panel
    from replyguard.state import SharedState, Ticket
    from replyguard.state._estimates import CallCost

_JUDGE_TEXTS = ("raw", "feedback", "reasoning", "model", "error")
"""The verdict's fields that hold text from the judge's answer."""
_NOTHING = contextlib.nullcontext()


def fail_open(reason: Reason, error: str, started: float, ticket: Ticket | None = None) -> Verdict:
    """A fail-open PASS for ``reason``, its latency from ``started`` (``time.perf_counter``)."""
    latency = (time.perf_counter() - started) * 1000
    return Verdict(
        passed=True,
        readable=False,
        fail_open_reason=reason,
        error=error,
        latency_ms=latency,
        shared_state=_shared_state(ticket),
    )


def _shared_state(ticket: Ticket | None) -> Literal["degraded"] | None:
    """``"degraded"`` when the judgement was decided on this instance's own state."""
    return "degraded" if ticket is not None and ticket.degraded else None


class Judgements:
    """The judge side of an assessment; shared by every turn of a verifier."""

    def __init__(
        self,
        events: Events,
        limiter: ConcurrencyLimiter | None,
        redact: Redact | None,
        state: SharedState | None,
    ) -> None:
        """``state``: the spend limits and shared breaker (None: neither is configured)."""
        self._events = events
        self._limiter = limiter
        self._redact = redact
        self._state = state

    def judgement(
        self, step: Step, reply_scans: tokens.Cutter | None, reading: Reading | None
    ) -> Awaitable[Verdict]:
        """Judge one reply by the turn's deadline (and ``timeoutSeconds``); never raises.

        ``reply_scans``: the injection screen's cutter of the reply, whose tokenized ends the
        prompt reuses; ``reading``: the workspace files' read (``Assessor.read_workspace``).
        """
        # the tokenizer's background load waits for it
        return judged(self._judgement(step, reply_scans, reading))

    async def _judgement(
        self, step: Step, reply_scans: tokens.Cutter | None, reading: Reading | None
    ) -> Verdict:
        profile, started = step.profile, time.perf_counter()
        if profile.config.max_cost_usd == 0:
            error = "maxCostUsd is 0: no judge spend is allowed"
            return fail_open(Reason.COST_BUDGET, error, started)
        lacking = profile.credentials.blocking() if profile.credentials is not None else None
        if lacking is not None:  # before litellm's import: no judge model can be called
            return fail_open(Reason.MISSING_CREDENTIALS, lacking.message, started)
        for judge in profile.judges:
            if judge.ready:  # nothing to set up (no await)
                continue
            setup_failed = await self._setup(judge, step)
            if setup_failed is not None:
                return fail_open(*setup_failed, started)
        started = time.perf_counter()  # the judgement's latency starts after the setup
        prompt = await prompt_of(step, reply_scans, reading, self._redact, self._events)
        if isinstance(prompt, tuple):
            return fail_open(*prompt, started)
        # Unpacked: a named tuple kept across the judge call's await is one more object alive
        # per turn in flight (the collector does not track the numbers and the reason).
        seconds, late = Budget.at(profile.config.timeout_seconds, step.deadline)
        deadline = time.monotonic() + seconds  # every panel member's too
        if profile.panel is None:
            seat = profile.seats[0]
            verdict = await self._ask(seat, prompt, step, seconds, late, deadline, started)
        else:
            verdict = await self._ask_panel(profile.panel, prompt, step, seconds, late, deadline)
        if self._events.enabled(logging.INFO):
            report_verdict(self._events, step, verdict, prompt)
        return verdict

    async def _setup(self, judge: BaseJudge, step: Step) -> tuple[Reason, str] | None:
        """One-time setup, off the event loop: the judge's ``warmup`` (litellm's import)
        unless it says it is ``ready``. Not judgement time, but it counts against the turn's
        own deadline; once done it costs nothing (no await, no timeout). Returns why it
        failed, if it did. The tokenizer is not waited for here: only a prompt that needs
        tokens loads it (``_build_inline``)."""
        if judge.ready:
            return None
        try:
            async with until(step.left()):
                await judge.warmup()
        except TimeoutError:
            return Reason.LATENCY_BUDGET, "the turn's deadline passed during warm-up"
        except Exception as exc:
            return Reason.JUDGE_ERROR, describe_error(exc, self._events.secrets)
        return None

    async def _ask_panel(
        self,
        panel: Panel,
        prompt: JudgePrompt,
        step: Step,
        seconds: float,
        late: Reason,
        deadline: float,
    ) -> Verdict:
        """Every member asked at once, by the same deadline; the panel's decision, taken as
        soon as the members still to answer cannot change it (``judge._panel.decided``): their
        calls are then cancelled, which closes their connections."""
        from replyguard.judge._panel import decided, not_waited_for, panel_verdict

        started = time.perf_counter()
        seats = step.profile.seats
        sent = [Unanswered() for _ in seats]
        asks = [
            asyncio.ensure_future(
                self._ask(seat, prompt, step, seconds, late, deadline, started, out)
            )
            for seat, out in zip(seats, sent, strict=True)
        ]
        pending = set(asks)
        try:
            while pending:
                _, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                so_far = [ask.result() for ask in asks if ask.done()]
                rule, least = panel.rule, panel.min_answers
                if decided(so_far, len(pending), rule=rule, min_answers=least):
                    break
        finally:
            for ask in pending:
                ask.cancel()
            if pending:  # each cancelled call closes its connection before the turn goes on
                await asyncio.wait(pending)
        latency = (time.perf_counter() - started) * 1000
        members = [
            (
                ask.result()
                if not ask.cancelled()
                else charged(not_waited_for(latency), out.charge(prompt))
            ).model_copy(update={"model": seat.name})
            for seat, ask, out in zip(seats, asks, sent, strict=True)
        ]
        return panel_verdict(
            members, rule=panel.rule, min_answers=panel.min_answers, latency_ms=latency
        )

    async def _ask(
        self,
        seat: Seat,
        prompt: JudgePrompt,
        step: Step,
        seconds: float,
        late: Reason,
        deadline: float,
        started: float,
        sent: Unanswered | None = None,
    ) -> Verdict:
        """One seat's verdict on ``prompt`` by ``deadline`` (``time.monotonic``), in a slot
        of the concurrency limit and admitted by the shared state (per seat, so breakers and
        spend stay per panel member); a fail-open verdict for any fault. Never raises but for
        the caller's cancellation. Its latency runs from ``started`` (``time.perf_counter``);
        ``seconds`` and ``late`` are the judgement's ``Budget``.
        Requests sent and cut before their answer are charged in its cost and tokens (and
        its spend settlement), noted in ``sent`` (where a caller that cancels it reads them).
        """
        credentials = step.profile.credentials
        lacking = credentials.lacking(seat.config.model) if credentials is not None else None
        if lacking is not None:  # a panel member without a key, the others with one
            return fail_open(Reason.MISSING_CREDENTIALS, lacking.message, started)
        events, gate = self._events, self._state
        ticket: Ticket | None = None
        answer: JudgeReply | None = None
        failed: tuple[Reason, str] | None = None
        sent = sent or Unanswered()
        try:
            with sent.watching(), deadline_in(max(deadline - time.monotonic(), 0.0)):
                async with self._slot():
                    if gate is None:
                        time_left = max(deadline - time.monotonic(), 0.001)
                        answer = await seat.judge.judge(prompt, time_left=time_left)
                    else:
                        ticket = await self._admit(gate, seat, prompt, step, deadline)
                        refusal = _refusal(ticket)
                        if refusal is not None:
                            return fail_open(*refusal, started, ticket)
                        with ticket.active():
                            time_left = max(deadline - time.monotonic(), 0.001)
                            answer = await seat.judge.judge(prompt, time_left=time_left)
            if not isinstance(answer, JudgeReply):
                raise TypeError(f"the judge returned {type(answer).__name__}, not a JudgeReply")
        except Exception as exc:
            answer, failed = None, _failure(exc, Budget(seconds, late), events.secrets)
        finally:
            # What requests cut after their sending are charged (none noted: nothing).
            charge = sent.charge(prompt, replied=answer is not None) if sent.requests else NO_CHARGE
            if gate is not None and ticket is not None:
                await _settled(gate, ticket, answer, charge.cost_usd)
        if failed is not None:
            return charged(fail_open(*failed, started, ticket), charge)
        assert answer is not None  # set when nothing failed
        return charged(await self._read(answer, seat, step, started, ticket), charge)

    def _slot(self) -> contextlib.AbstractAsyncContextManager[Any]:
        return self._limiter.slot() if self._limiter is not None else _NOTHING

    async def _admit(
        self, gate: SharedState, seat: Seat, prompt: JudgePrompt, step: Step, deadline: float
    ) -> Ticket:
        """The shared state's ticket for one call of ``seat`` (spend limits, fleet breaker)."""
        return await gate.admit(
            seat.models,
            agent_id=step.turn.agent_id,
            run_kind=step.profile.name,
            call=_estimate(seat, prompt),
            timeout_seconds=seat.config.timeout_seconds,
            time_left=max(deadline - time.monotonic(), 0.001),
        )

    async def _read(
        self, answer: JudgeReply, seat: Seat, step: Step, started: float, ticket: Ticket | None
    ) -> Verdict:
        """The verdict ``answer`` gives: parsed (a long one off the loop, by the turn's
        deadline), with what it cost, and redacted; made once, of the parse's fields and
        these, when the answer is a plain PASS (``plain_pass``)."""
        fields = plain_pass(answer)
        verdict: Verdict | None = None
        if fields is None:
            try:
                verdict = await bounded(answer.parsed(seat.categories), step.left())
            except TimeoutError:
                error = "the turn's deadline passed reading the verdict"
                return fail_open(Reason.LATENCY_BUDGET, error, started, ticket)
            fields = verdict.__dict__
        update: dict[str, Any] = {
            "model": answer.model,
            "prompt_tokens": answer.prompt_tokens,
            "completion_tokens": answer.completion_tokens,
            "cost_usd": answer.cost_usd,
            "latency_ms": (time.perf_counter() - started) * 1000,
            "shared_state": _shared_state(ticket),
        }
        if verdict is not None and not verdict.readable:
            update["fail_open_reason"] = Reason.UNREADABLE_VERDICT
            update["error"] = answer.note or verdict.error
        # The one place a judge's answer becomes a verdict: from here on its words are stored,
        # sent to the agent, printed and logged, so every key is taken out of them now.
        secrets = (*self._events.secrets, *seat.config.secrets())
        if len(answer.text) > INLINE_CHARS:
            await asyncio.to_thread(redact_texts, fields, update, secrets)
        else:
            redact_texts(fields, update, secrets)
        if verdict is None:
            return assembled_from(Verdict, {**fields, **update})
        return replaced(verdict, update)


def _refusal(ticket: Ticket) -> tuple[Reason, str] | None:
    """Why the shared state refused the call (a spend limit, every circuit open), if it did."""
    if ticket.refused is not None:
        limit = ticket.refused
        error = f"the {limit.scope} spend limit of ${limit.usd:g} per {limit.window} is reached"
        return Reason.SPEND_LIMIT, error
    if ticket.blocked:
        return Reason.CIRCUIT_OPEN, "every judge model's circuit is open (fleet-wide)"
    return None


def _failure(exc: Exception, budget: Budget, secrets: Sequence[str]) -> tuple[Reason, str]:
    """Why a judge call failed, and what to say of it."""
    if isinstance(exc, TimeoutError):
        # A provider's own timeout (408, 504) says more than our deadline would.
        said = describe_error(exc, secrets) if str(exc) else ""
        return budget.reason, said or f"no verdict within {budget.seconds:g} s"
    if isinstance(exc, CircuitOpenError):
        return Reason.CIRCUIT_OPEN, describe_error(exc, secrets)
    if isinstance(exc, JudgeConfigError):
        return Reason.JUDGE_ERROR, describe_error(exc, secrets)
    # litellm's own Timeout (its per-call timeout is the same deadline) is a timeout too.
    kind = getattr(exc, "last_error_class", None) or type(exc).__name__
    reason = budget.reason if "timeout" in kind.lower() else Reason.JUDGE_ERROR
    return reason, describe_error(exc, secrets)


def _estimate(seat: Seat, prompt: JudgePrompt) -> CallCost | None:
    """What is known of the cost of one judge call of this prompt (for spend limits)."""
    config = seat.config
    if not config.spend_limits:
        return None
    from replyguard.state._estimates import CallCost  # loaded with the shared state

    tokens_in = prompt.counted_tokens
    if tokens_in is None:  # bounded by the budget and by its UTF-8 size, never counted here
        size = tokens.size_bound(prompt.system) + tokens.size_bound(prompt.user)
        tokens_in = min(config.context_token_budget, size)
    models = [(model, 0) for model in seat.deployments]
    return CallCost(seat.models, tokens_in, call_estimate(models, tokens_in))


async def _settled(
    gate: SharedState, ticket: Ticket, answer: JudgeReply | None, unanswered: float
) -> None:
    """Hand the ticket back with what the judgement cost (its answer's cost, plus what its
    ``unanswered`` requests are charged); a cancelled turn does not wait for Redis (its
    reservation there expires by itself)."""
    cost = answer.cost_usd if isinstance(answer, JudgeReply) else None
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        gate.abandon(ticket, cost, unanswered)
    else:
        await gate.settle(ticket, cost, unanswered)


def charged(verdict: Verdict, charge: Charge) -> Verdict:
    """``verdict`` with ``charge`` (requests sent and never answered) added to its tokens
    and cost."""
    if charge is NO_CHARGE:  # what ``Unanswered.charge`` gives for nothing to charge
        return verdict
    update = {
        "prompt_tokens": verdict.prompt_tokens + charge.prompt_tokens,
        "completion_tokens": verdict.completion_tokens + charge.completion_tokens,
        "cost_usd": verdict.cost_usd + charge.cost_usd,
    }
    return replaced(verdict, update)


def redact_texts(values: Mapping[str, Any], update: dict[str, Any], secrets: Sequence[str]) -> None:
    """Redact, into ``update``, every text of a verdict (its field ``values``) updated by
    ``update`` that came from the judge's answer (its raw text, feedback, reasoning, model
    name, and the note on an empty answer): ``secrets`` (the configured and ``env:`` keys, the
    router's keys) and anything shaped like a key. A text redaction leaves as it is stays out
    of ``update`` unless it was there already, so the verdict made of ``values`` and
    ``update`` is the updated verdict redacted (its ``model_fields_set`` too) in one copy."""
    for name in _JUDGE_TEXTS:
        value = update[name] if name in update else values.get(name)
        if isinstance(value, str):
            text = redact(value, secrets)
            if text != value:
                update[name] = text
