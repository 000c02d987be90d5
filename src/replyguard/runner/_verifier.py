"""``Verifier``: run an agent turn, judge its reply, retry with feedback, always fail open.

One turn: call the agent; pre-checks may skip the reply; triggers (and ``sampleRate``) decide
whether it is judged; checks and the judge give a verdict; on FAIL the agent gets the feedback
(its previous reply as an assistant message, the feedback as a user message, on a copy of the
messages) and tries again, up to ``maxAttempts``, within ``maxCostUsd`` and ``maxLatencyMs``,
stopping early when it stagnates. Anything that goes wrong inside replyguard, or in the agent
on a retry, delivers the best reply so far.

A ``Verifier`` holds configuration and shared, thread-safe helpers only; everything about one
turn lives in a ``_Run`` made for that turn, so one instance serves any number of concurrent
turns, from any thread.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from replyguard.agents import Agent, AgentPool, Messages, as_reply, call_agent
from replyguard.answer_cap import AnswerSessions
from replyguard.assessment import Assessor, Profile, Step
from replyguard.breaker import CircuitBreaker
from replyguard.checks.base import Check, as_check
from replyguard.checks.registry import build_checks
from replyguard.clients import ClientScope, stop_logging_worker
from replyguard.config import VerifierConfig
from replyguard.errors import CrossFamilyError, VerificationExhausted
from replyguard.families import model_family
from replyguard.feedback import feedback_message
from replyguard.hooks import Hook, Hooks
from replyguard.judge import Judge, LiteLLMJudge, import_litellm
from replyguard.ledger import TIME_LIMIT as LEDGER_TIME_LIMIT
from replyguard.ledger import Ledger, ledger_record
from replyguard.limiter import ConcurrencyLimiter
from replyguard.prechecks import skip_reason
from replyguard.routing import JudgeRouter
from replyguard.synchronous import SyncLoop
from replyguard.telemetry import Events, describe_error
from replyguard.tracing import (
    Tracing,
    build_tracing,
    outcome_attributes,
    turn_attributes,
    verdict_attributes,
)
from replyguard.triggers import TriggerKind
from replyguard.types import Attempt, Outcome, Reason, Reply, SkipReason, Status, Turn, Verdict
from replyguard.workspace import Workspace

# How much longer than the longest judgement ``aclose`` waits for judge calls in flight.
_DRAIN_MARGIN = 1.0
# A retry is asked for a final answer: a tool-call step, an empty reply or an error report in
# its place is worse than the reply before it.
_BROKEN_RETRY = frozenset(
    {SkipReason.TOOL_CALLS, SkipReason.EMPTY_RESPONSE, SkipReason.ERROR_RESPONSE}
)


class Verifier:
    """Verifies agent replies with checks and a judge model. Immutable; share it freely."""

    __slots__ = (
        "_agent_pool",
        "_answer_sessions",
        "_assessor",
        "_clients",
        "_config",
        "_events",
        "_hooks",
        "_ledger",
        "_profiles",
        "_router",
        "_sync",
        "_tracing",
        "_warned",
        "_warned_lock",
    )
    _agent_pool: AgentPool
    _answer_sessions: AnswerSessions
    _assessor: Assessor
    _clients: ClientScope
    _config: VerifierConfig
    _events: Events
    _hooks: Hooks
    _ledger: Ledger | None
    _profiles: dict[str | None, Profile]
    _router: JudgeRouter | None
    _sync: SyncLoop
    _tracing: Tracing
    _warned: set[tuple[Any, ...]]
    _warned_lock: threading.Lock

    def __init__(
        self,
        config: VerifierConfig,
        *,
        judge: Judge | None = None,
        checks: Sequence[Check | Callable[[Turn, Reply], Any]] = (),
        on_verdict: Hook | None = None,
        on_retry: Hook | None = None,
        on_exhausted: Hook | None = None,
        on_fail_open: Hook | None = None,
        on_skip: Hook | None = None,
        redact: Callable[[str], str] | None = None,
        tracer_provider: Any = None,
    ) -> None:
        """``tracer_provider``: an OpenTelemetry ``TracerProvider`` to record spans with
        (whatever ``tracing`` says); without one, ``tracing: true`` uses the global provider."""
        events = Events(config.secrets())
        all_checks = (*build_checks(config, events), *(as_check(c) for c in checks))
        names = [c.name for c in all_checks]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"check names must be unique; repeated: {', '.join(duplicates)}")
        tracing = build_tracing(
            config.tracing, tracer_provider, events, log_content=config.log_content
        )
        limit = config.max_concurrent_judge_calls
        limiter = ConcurrencyLimiter(limit) if limit is not None else None
        workspace = Workspace(config.workspace_dir, events)
        breaker = CircuitBreaker(
            config.circuit_breaker.failure_threshold, config.circuit_breaker.cooldown_seconds
        )

        router = JudgeRouter(config.router) if config.router is not None and not judge else None
        kinds = [config.for_run_kind(name) for name in config.run_kinds]
        longest = max(c.timeout_seconds for c in (config, *kinds))
        clients = ClientScope(events, drain_seconds=longest + _DRAIN_MARGIN)
        answer_sessions = AnswerSessions()

        def judge_for(profile_config: VerifierConfig) -> Judge:
            return judge or LiteLLMJudge(
                profile_config,
                events,
                breaker=breaker,
                key_owner=config.model,
                tracing=tracing,
                router=router,
                clients=clients,
                sessions=answer_sessions,
            )

        profiles: dict[str | None, Profile] = {None: Profile.build(None, config, judge_for(config))}
        for name in config.run_kinds:
            kind_config = config.for_run_kind(name)
            profiles[name] = Profile.build(name, kind_config, judge_for(kind_config))
        set_ = object.__setattr__
        set_(self, "_config", config)
        set_(self, "_events", events)
        set_(self, "_assessor", Assessor(all_checks, workspace, events, limiter, redact, tracing))
        set_(self, "_profiles", profiles)
        set_(self, "_hooks", Hooks(on_verdict, on_retry, on_exhausted, on_fail_open, on_skip))
        set_(self, "_ledger", Ledger(config.ledger_path, events) if config.ledger_path else None)
        set_(self, "_clients", clients)
        set_(self, "_answer_sessions", answer_sessions)
        set_(self, "_agent_pool", AgentPool(config.agent_threads))
        set_(self, "_sync", SyncLoop(self._close_loop_clients))
        set_(self, "_tracing", tracing)
        set_(self, "_router", router)
        set_(self, "_warned", set())
        set_(self, "_warned_lock", threading.Lock())
        for profile in profiles.values():
            if config.agent_model is not None:
                self._family_conflict(
                    profile.config, config.agent_model, raise_error=config.require_cross_family
                )
            for model in profile.config.judge_deployment_models:
                if model_family(model) is None:
                    self._warn_once("judge_family_unknown", model=model)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("a Verifier is immutable; build a new one from a new config")

    def __repr__(self) -> str:
        return f"Verifier(model={self._config.model!r}, enabled={self._config.enabled})"

    @property
    def config(self) -> VerifierConfig:
        """The configuration this verifier was built with."""
        return self._config

    @property
    def checks(self) -> tuple[Check, ...]:
        """The checks run before the judge, in order (configured ones first)."""
        return self._assessor.checks

    # -- lifecycle -------------------------------------------------------------------------

    async def warmup(self) -> None:
        """Import litellm and load the tokenizer off the event loop, before the first turn."""
        from replyguard import tokens

        await import_litellm()
        await asyncio.to_thread(tokens.encoding)
        if self._router is not None:
            await self._router.router()

    async def aclose(self) -> None:
        """Close what this verifier alone owns; nothing of any other verifier.

        Its judge Router; its HTTP clients of the running loop, once its judge calls in flight
        there have finished (turns in flight go on); its ``run_sync`` loop, once the
        ``run_sync`` calls in flight have returned; its idle hook threads; its sync agents'
        thread pool (``agentThreads``; agents running there finish). A verifier used
        after ``aclose`` opens what it needs again and logs one ``verifier_reopened`` warning.
        """
        if self._router is not None:
            self._router.close()
        await self._close_loop_clients()
        await asyncio.to_thread(self._sync.close)
        self._hooks.close()
        self._agent_pool.close()

    def close(self) -> None:
        """Close the ``run_sync`` loop and its HTTP clients, the Router and the hook threads
        (for code without an event loop; ``aclose`` also closes the running loop's clients)."""
        self._sync.close()
        self._hooks.close()
        self._agent_pool.close()
        if self._router is not None:
            self._router.close()

    async def _close_loop_clients(self) -> None:
        await self._clients.aclose()
        await self._answer_sessions.aclose()
        await stop_logging_worker()

    # -- model families and run kinds --------------------------------------------------------

    def _warn_once(self, event: str, **fields: Any) -> None:
        key = (event, *sorted(fields.items()))
        with self._warned_lock:
            if key in self._warned:
                return
            self._warned.add(key)
        self._events.warning(event, **fields)

    def _family_conflict(
        self, config: VerifierConfig, agent_model: str, *, raise_error: bool
    ) -> bool:
        """True when a judge model (primary or fallback) shares the agent's family."""
        agent_family = model_family(agent_model)
        if agent_family is None:
            self._warn_once("agent_family_unknown", model=agent_model)
            return False
        same = [m for m in config.judge_deployment_models if model_family(m) == agent_family]
        if not same:
            return False
        if raise_error:
            raise CrossFamilyError(same[0], agent_model, agent_family)
        self._warn_once("judge_same_family", judge=same[0], agent=agent_model, family=agent_family)
        return True

    def _same_family_refused(self, profile: Profile, turn: Turn) -> bool:
        if turn.agent_model is None:
            return False
        same = self._family_conflict(profile.config, turn.agent_model, raise_error=False)
        return same and self._config.require_cross_family

    def _profile(self, turn: Turn) -> Profile:
        profile = self._profiles.get(turn.run_kind)
        if profile is None:
            self._warn_once("run_kind_unknown", run_kind=turn.run_kind)
            return self._profiles[None]
        return profile

    # -- public entry points -----------------------------------------------------------------

    async def verify(self, turn: Turn, reply: Reply | str) -> Verdict:
        """One verdict on ``reply`` (checks and judge), no retry; even when not ``enabled``.

        Never raises for the verifier's own trouble: a fail-open verdict (``passed=True``,
        ``fail_open_reason`` set) says what went wrong.
        """
        checked, profile = as_reply(reply), self._profile(turn)
        if self._same_family_refused(profile, turn):
            return Verdict(
                passed=True,
                readable=False,
                fail_open_reason=Reason.SAME_FAMILY,
                error=f"judge and agent model {turn.agent_model!r} are of the same family",
            )
        with self._tracing.span("replyguard.verify") as span:
            span.record(turn_attributes, turn, profile.name, profile.config.mode)
            verdict, _ = await self._assessor.assess(Step(profile, turn, checked, (), 1, None))
            span.record(verdict_attributes, verdict, self._tracing.log_content)
        return verdict

    def run_sync(self, agent: Agent, turn: Turn) -> Outcome:
        """``run`` for code without an event loop (safe from many threads at once)."""
        return self._sync.submit(self.run(agent, turn))

    async def run(self, agent: Agent, turn: Turn) -> Outcome:
        """Run ``agent`` for ``turn``, verify its reply, retry with feedback, deliver.

        ``agent`` receives OpenAI-style messages (a fresh deep copy on every call) and returns a
        ``Reply`` or a ``str``, sync or async. Its exception on the first attempt propagates;
        on a retry it fails open with the best reply so far. With ``onExhausted: "raise"`` an
        exhausted turn raises ``VerificationExhausted``.
        """
        started = time.perf_counter()
        profile = self._profile(turn)
        with self._tracing.span("replyguard.turn") as span:
            span.record(turn_attributes, turn, profile.name, profile.config.mode)
            messages: Messages = [*turn.history, {"role": "user", "content": turn.user_message}]
            try:
                reply = await call_agent(agent, messages, self._agent_pool)
                outcome = await _Run(self, turn, profile, started).verify(agent, messages, reply)
            except VerificationExhausted as exc:
                span.record(outcome_attributes, exc.outcome)
                raise
            span.record(outcome_attributes, outcome)
            return outcome


_REPORTED = {
    Status.FAILED_OPEN: (logging.WARNING, "failed_open"),
    Status.EXHAUSTED: (logging.WARNING, "exhausted"),
    Status.PASSED: (logging.INFO, "passed"),
    Status.FLAGGED: (logging.INFO, "flagged"),
    Status.SKIPPED: (logging.DEBUG, "skipped"),
    Status.NOT_TRIGGERED: (logging.DEBUG, "not_triggered"),
    Status.DISABLED: (logging.DEBUG, "disabled"),
}
"""The log level and event name of each outcome."""

_FINAL_HOOKS = {
    Status.EXHAUSTED: "on_exhausted",
    Status.FAILED_OPEN: "on_fail_open",
    Status.SKIPPED: "on_skip",
    Status.NOT_TRIGGERED: "on_skip",
}
"""The hook called when a turn ends with each status (none for the others)."""


def _normal(text: str) -> str:
    return " ".join(text.split()).casefold()


def _sampled_in(turn: Turn, rate: float) -> bool:
    """Whether ``turn`` is in the judged share: the same answer for the same turn id, always."""
    if rate >= 1:
        return True
    key = (turn.id if turn.id is not None else turn.user_message).encode("utf-8")
    draw = int.from_bytes(hashlib.sha256(key).digest()[:8], "big") / 2**64
    return draw < rate


def _with_turn_ledger(reply: Reply, earlier: Sequence[Attempt]) -> Reply:
    """``reply`` as checks and judge see it: with the tool calls of the whole turn.

    A retry's own ledger holds only its own calls; "I sent it" may rest on a call an earlier
    attempt made.
    """
    calls = tuple(c for a in earlier for c in a.reply.meta.tool_calls)
    if not calls:
        return reply
    meta = reply.meta.model_copy(update={"tool_calls": calls + reply.meta.tool_calls})
    return reply.model_copy(update={"meta": meta})


def _feedback_line(verdict: Verdict) -> str:
    category = f" [{verdict.category.value}]" if verdict.category is not None else ""
    return f"FAIL{category}: {verdict.feedback or 'no details'}"


class _Run:
    """Everything about one turn: its attempts, its clock, its spend. Lives for one ``run``."""

    def __init__(self, verifier: Verifier, turn: Turn, profile: Profile, started: float) -> None:
        self.v = verifier
        self.turn = turn
        self.profile = profile
        self.config = profile.config
        self.started = started
        self.attempts: list[Attempt] = []
        self.deadline: float | None = None
        self.verified = False
        self.last_judge_cost = 0.0

    # -- clock and money ------------------------------------------------------------------

    def time_left(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.monotonic()

    def spent(self) -> float:
        """Judge spend plus what the agent reported for its retries."""
        judged = sum(a.verdict.cost_usd for a in self.attempts if a.verdict is not None)
        retries = sum(a.reply.meta.cost_usd or 0.0 for a in self.attempts[1:])
        return judged + retries

    def can_afford_another(self) -> bool:
        """Whether one more judgement, at the last judge call's cost, fits the ceiling."""
        ceiling = self.config.max_cost_usd
        return ceiling is None or self.spent() + self.last_judge_cost <= ceiling

    # -- ending -----------------------------------------------------------------------------

    def delivery(self, latest: Reply) -> Reply:
        """What a turn that ran out of attempts, money or time delivers, per ``deliver``."""
        policy = self.config.deliver
        if policy == "first" and self.attempts:
            return self.attempts[0].reply
        if policy == "best":
            clean = [a for a in self.attempts if a.verdict and all(r.passed for r in a.checks)]
            if clean:
                return clean[-1].reply
        return latest

    async def finish(
        self,
        status: Status,
        delivered: Reply,
        reason: Reason | None = None,
        skip: SkipReason | None = None,
    ) -> Outcome:
        attempts = self.attempts
        if len(attempts) == 1 and attempts[0].verdict is None and not attempts[0].checks:
            # Nothing was judged or checked (disabled, skipped, not triggered, refused).
            judge_cost, response, parsed = 0.0, delivered.text, None
            agent_cost = attempts[0].reply.meta.cost_usd or 0.0
        else:
            judge_cost = sum(a.verdict.cost_usd for a in attempts if a.verdict is not None)
            agent_cost = sum(a.reply.meta.cost_usd or 0.0 for a in attempts)
            checks = next((a.checks for a in reversed(attempts) if a.reply is delivered), ())
            response = next((r.deliver_text for r in checks if r.deliver_text), delivered.text)
            parsed = next((r.value for r in checks if r.value is not None), None)
        outcome = Outcome(
            response=response,
            parsed=parsed,
            status=status,
            reason=reason,
            attempts=tuple(attempts),
            skip_reason=skip,
            cost_usd=judge_cost + agent_cost,
            judge_cost_usd=judge_cost,
            latency_ms=(time.perf_counter() - self.started) * 1000,
        )
        v = self.v
        self.report(outcome)
        if self.verified and v._ledger is not None:
            record = ledger_record(
                self.turn,
                outcome,
                run_kind=self.profile.name,
                with_content=self.config.log_content,
                configured_models=self.config.judge_models,
            )
            # Bounded: by the time the turn has left, at least a moment, at most the default.
            left = self.time_left()
            limit = LEDGER_TIME_LIMIT if left is None else min(LEDGER_TIME_LIMIT, max(left, 0.05))
            await v._ledger.append(record, time_limit=limit)
        hook = _FINAL_HOOKS.get(status)
        if hook is not None:
            await self.hook(hook, outcome)
        if status == Status.EXHAUSTED and self.config.on_exhausted == "raise":
            raise VerificationExhausted(outcome, delivered)
        return outcome

    async def hook(self, name: str, *args: Any) -> None:
        """Run a hook; its time does not count against the turn's deadline."""
        v = self.v
        if getattr(v._hooks, name) is None:
            return
        paused = time.monotonic()
        await v._hooks.call(
            name, self.turn, *args, time_limit=v._config.hook_timeout_seconds, events=v._events
        )
        if self.deadline is not None:
            self.deadline += time.monotonic() - paused

    def report(self, outcome: Outcome) -> None:
        events = self.v._events
        level, event = _REPORTED[outcome.status]
        if not events.enabled(level):  # nothing to build
            return
        fields: dict[str, Any] = {
            "turn_id": self.turn.id,
            "run_kind": self.profile.name,
            "status": outcome.status,
            "reason": outcome.reason,
            "skip_reason": outcome.skip_reason,
            "attempts": len(outcome.attempts),
            "cost_usd": outcome.cost_usd,
            "latency_ms": round(outcome.latency_ms, 2),
        }
        last = outcome.attempts[-1].verdict if outcome.attempts else None
        if last is not None and last.error:
            fields["error"] = last.error
        if self.config.log_content:
            fields["user_message"] = self.turn.user_message
            fields["response"] = outcome.response
        events.emit(level, event, **fields)

    # -- the loop ---------------------------------------------------------------------------

    async def verify(self, agent: Agent, messages: Messages, reply: Reply) -> Outcome:
        """From the first reply to the delivered one."""
        config, turn, v = self.config, self.turn, self.v
        if not config.enabled:
            self.attempts.append(Attempt(number=1, reply=reply))
            return await self.finish(Status.DISABLED, reply)
        skip = skip_reason(reply)
        if skip is not None:
            self.attempts.append(Attempt(number=1, reply=reply, skip_reason=skip))
            return await self.finish(Status.SKIPPED, reply, skip=skip)
        trigger = self.profile.triggers.decide(turn, reply.text)
        if trigger is None or (
            trigger == TriggerKind.VERIFY_ALL and not _sampled_in(turn, config.sample_rate)
        ):
            self.attempts.append(Attempt(number=1, reply=reply))
            reason = None if trigger is None else Reason.SAMPLED_OUT
            return await self.finish(Status.NOT_TRIGGERED, reply, reason)
        self.verified = True
        if v._same_family_refused(self.profile, turn):
            self.attempts.append(Attempt(number=1, reply=reply))
            return await self.finish(Status.FAILED_OPEN, reply, Reason.SAME_FAMILY)
        if config.max_latency_ms is not None:
            self.deadline = time.monotonic() + config.max_latency_ms / 1000
        return await self.loop(agent, messages, reply)

    async def loop(self, agent: Agent, messages: Messages, reply: Reply) -> Outcome:
        config, turn, events = self.config, self.turn, self.v._events
        feedback_so_far: list[str] = []
        for number in range(1, config.max_attempts + 1):
            left = self.time_left()
            if left is not None and left <= 0:
                return await self.finish(
                    Status.FAILED_OPEN, self.delivery(reply), Reason.LATENCY_BUDGET
                )
            judged_reply = _with_turn_ledger(reply, self.attempts)
            step = Step(
                self.profile, turn, judged_reply, tuple(feedback_so_far), number, self.deadline
            )
            tracing = self.v._tracing
            with tracing.span("replyguard.attempt") as span:
                span.set({"replyguard.attempt": number})
                verdict, results = await self.v._assessor.assess(step)
                span.record(verdict_attributes, verdict, tracing.log_content)
            if verdict.model is not None:
                self.last_judge_cost = verdict.cost_usd
            previous = self.attempts[-1] if self.attempts else None
            attempt = Attempt(number=number, reply=reply, verdict=verdict, checks=results)
            self.attempts.append(attempt)
            await self.hook("on_verdict", attempt)
            reason = verdict.fail_open_reason
            if reason is not None:
                delivered = self.delivery(reply) if reason == Reason.LATENCY_BUDGET else reply
                return await self.finish(Status.FAILED_OPEN, delivered, reason)
            if verdict.passed:
                return await self.finish(Status.PASSED, reply)
            if config.mode == "shadow":  # judged and logged; the reply goes out unchanged
                return await self.finish(Status.FLAGGED, reply)
            if _stagnant(previous, attempt):
                return await self.finish(Status.EXHAUSTED, self.delivery(reply), Reason.STAGNANT)
            if number == config.max_attempts:
                return await self.finish(Status.EXHAUSTED, self.delivery(reply))
            if not self.can_afford_another():
                return await self.finish(
                    Status.FAILED_OPEN, self.delivery(reply), Reason.COST_BUDGET
                )
            feedback = feedback_message(verdict)
            feedback_so_far.append(_feedback_line(verdict))
            events.info(
                "retry",
                turn_id=turn.id,
                attempt=number + 1,
                category=verdict.category,
                **({"feedback": feedback} if config.log_content else {}),
            )
            await self.hook("on_retry", attempt, feedback)
            messages = [
                *messages,
                {"role": "assistant", "content": reply.text},
                {"role": "user", "content": feedback},
            ]
            retried = await self.retry(agent, messages, number + 1, reply)
            if isinstance(retried, Outcome):
                return retried
            reply = retried
        raise AssertionError("unreachable: the loop returns on its last attempt")

    async def retry(
        self, agent: Agent, messages: Messages, number: int, previous: Reply
    ) -> Reply | Outcome:
        """The agent's next reply, or the outcome when the retry itself ends the turn."""
        events, left = self.v._events, self.time_left()
        try:
            async with asyncio.timeout(left):
                retry = await call_agent(agent, messages, self.v._agent_pool)
        except TimeoutError:
            events.warning("agent_retry_timed_out", turn_id=self.turn.id, attempt=number)
            delivered = self.delivery(previous)
            return await self.finish(Status.FAILED_OPEN, delivered, Reason.LATENCY_BUDGET)
        except Exception as exc:
            events.warning(
                "agent_retry_failed",
                turn_id=self.turn.id,
                attempt=number,
                error=describe_error(exc, events.secrets),
            )
            return await self.finish(Status.FAILED_OPEN, previous, Reason.AGENT_ERROR)
        skip = skip_reason(retry)
        if skip is not None:
            self.attempts.append(Attempt(number=number, reply=retry, skip_reason=skip))
            if skip in _BROKEN_RETRY:
                return await self.finish(Status.FAILED_OPEN, previous, Reason.AGENT_ERROR)
            return await self.finish(Status.SKIPPED, retry, skip=skip)
        if _normal(retry.text) == _normal(previous.text):
            self.attempts.append(Attempt(number=number, reply=retry))
            return await self.finish(Status.EXHAUSTED, self.delivery(retry), Reason.STAGNANT)
        return retry


def _stagnant(previous: Attempt | None, current: Attempt) -> bool:
    """The same category failed again with the same feedback: retrying will not help.

    The judge's FAIL repeated is enough. A deterministic FAIL (a check's, or the injection
    rule's: ``decisive``) may repeat a coarse message ("1 test failed") while the agent's
    replies change and get closer, so it counts only when the reply did not change either
    (the same text once whitespace is normalised).
    """
    if previous is None:
        return False
    before, now = previous.verdict, current.verdict
    if before is None or now is None or before.passed or now.passed:
        return False
    if before.category != now.category or _normal(before.feedback or "") != _normal(
        now.feedback or ""
    ):
        return False
    return not now.decisive or _spaced(previous.reply.text) == _spaced(current.reply.text)


def _spaced(text: str) -> str:
    """``text`` with every run of whitespace one space, and none at its ends."""
    return " ".join(text.split())
