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
import logging
import time
from collections.abc import AsyncGenerator, Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal, overload

from replyguard._workspace import Workspace
from replyguard.checks.base import Check, as_check
from replyguard.checks.registry import build_checks
from replyguard.config._schema import VerifierConfig
from replyguard.errors import VerificationExhausted
from replyguard.judge._base import BaseJudge, as_base_judge
from replyguard.judge._fallbacks import LiteLLMJudge
from replyguard.judge._limiter import ConcurrencyLimiter
from replyguard.judge._protocol import Judge
from replyguard.runner._agents import (
    Agent,
    Messages,
    StreamingAgent,
    as_reply,
    call_agent,
)
from replyguard.runner._assessment import Assessor
from replyguard.runner._family_guard import FamilyGuard
from replyguard.runner._hooks import Hook, Hooks
from replyguard.runner._lifecycle import Lifecycle
from replyguard.runner._policy import Assessed, PolicyStep
from replyguard.runner._preflight import config_findings, state_findings
from replyguard.runner._preload import judging, start_preload
from replyguard.runner._request import Profile, Step, build_profiles
from replyguard.runner._run import TurnParts, _Run
from replyguard.runner._side_effects import SideEffects
from replyguard.runner._sync import SyncLoop
from replyguard.runner._threads import ThreadPool
from replyguard.runner._turn_scope import agent_attempt, with_turn_id
from replyguard.telemetry._events import Events
from replyguard.telemetry._ledger import Ledger
from replyguard.telemetry._tracing import (
    build_tracing,
    outcome_attributes,
    turn_attributes,
    verdict_attributes,
)
from replyguard.types import Outcome, Progress, Reason, Reply, StreamEvent, Turn, Verdict

if TYPE_CHECKING:  # loaded when a config asks for it: most verifiers need none
    from replyguard.state import SharedState


def _checks_of(
    config: VerifierConfig, events: Events, checks: Sequence[Check | Callable[[Turn, Reply], Any]]
) -> tuple[Check, ...]:
    """The configured checks, then the given ones; their names must be unique."""
    all_checks = (*build_checks(config, events), *(as_check(c) for c in checks))
    names = [c.name for c in all_checks]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"check names must be unique; repeated: {', '.join(duplicates)}")
    return all_checks


def _shared_state(config: VerifierConfig, events: Events) -> SharedState | None:
    """The fleet's shared state and spend limits, when configured; a refusal of the ``state``
    section raises before anything connects or reads a key."""
    for finding in state_findings(config):
        if finding.refusal is not None:
            raise finding.refusal
    if not (config.state or config.spend_limits):
        return None
    from replyguard.state import SharedState

    return SharedState(config, events)


def _report_findings(
    config: VerifierConfig, events: Events, families: FamilyGuard, *, credentials: bool
) -> None:
    """What ``replyguard check-config`` reports, logged (a refusal raises); ``credentials``:
    whether judge models without a key are looked for (replyguard's own judge only)."""
    for finding in config_findings(config, credentials=credentials):
        if finding.refusal is not None:
            raise finding.refusal
        if finding.log_level >= logging.WARNING:
            families.warn_once(finding.event, **finding.fields)
        else:
            events.emit(finding.log_level, finding.event, **finding.fields)


def _judges_of(root: BaseJudge, profiles: dict[str | None, Profile]) -> tuple[BaseJudge, ...]:
    """The verifier's judge and every judge its profiles hold, each once: what ``warmup``,
    ``aclose`` and ``close`` reach."""
    judges = {id(j): j for j in (root, *(j for p in profiles.values() for j in p.judges))}
    return tuple(judges.values())


class Verifier:
    """Verifies agent replies with checks and a judge model. Immutable; share it freely."""

    __slots__ = (
        "__weakref__",  # closing its clients when collected without aclose
        "_config",
        "_life",
        "_parts",
        "_profiles",
        "_state",
        "_sync",
    )
    _config: VerifierConfig
    _life: Lifecycle
    _parts: TurnParts
    """The shared helpers a turn uses (assessor, events, hooks, ledger, pool, tracing ...)."""
    _profiles: dict[str | None, Profile]
    _state: SharedState | None
    _sync: SyncLoop
    """Its ``run_sync`` loop (the lifecycle's; adapters submit to it)."""

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
        preload: bool = True,
    ) -> None:
        """``tracer_provider``: an OpenTelemetry ``TracerProvider`` to record spans with
        (whatever ``tracing`` says); without one, ``tracing: true`` uses the global provider.

        ``preload``: start importing litellm (when the judge is replyguard's own) and then
        loading the tokenizer (once no turn is being verified) in a background thread now,
        once per process, so the first judged turn waits only for what is left; ``False``
        leaves it to ``warmup()`` or the first judgement (a command that may not judge). A
        fork meanwhile waits for the load in flight, so a child never gets half of litellm."""
        events = Events(config.secrets())
        tracing = build_tracing(
            config.tracing, tracer_provider, events, log_content=config.log_content
        )
        shared = _shared_state(config, events)
        if judge is None:  # replyguard's own: its Router routes locally while Redis is down
            down = shared.redis_down if shared is not None else None
            built = LiteLLMJudge.for_verifier(config, events, tracing=tracing, redis_down=down)
            root: BaseJudge = built
            profiles = build_profiles(config, built, built.sibling)
            # A turn that would call a judge model without a key fails open at once.
            profiles = {name: p.with_credentials(config.model) for name, p in profiles.items()}
        else:
            root = as_base_judge(judge)
            profiles = build_profiles(config, root)
        limit = config.max_concurrent_judge_calls
        assessor = Assessor(
            _checks_of(config, events, checks),
            Workspace(config.workspace_dir, events),
            events,
            ConcurrencyLimiter(limit) if limit is not None else None,
            redact,
            tracing,
            shared,
        )
        hooks = Hooks(on_verdict, on_retry, on_exhausted, on_fail_open, on_skip)
        ledger = Ledger(config.ledger_path, events) if config.ledger_path else None
        pool = ThreadPool(config.agent_threads, "replyguard-agent")
        families = FamilyGuard(config, events)
        side_effects = SideEffects(config.side_effect_tools)
        set_ = object.__setattr__
        set_(self, "_config", config)
        life = Lifecycle(_judges_of(root, profiles), shared, hooks, pool)
        set_(self, "_life", life)
        set_(self, "_state", shared)
        set_(self, "_profiles", profiles)
        set_(self, "_sync", life.sync)
        parts = TurnParts(
            config, events, assessor, hooks, ledger, pool, tracing, families, side_effects
        )
        set_(self, "_parts", parts)
        _report_findings(config, events, families, credentials=judge is None)
        if preload:
            start_preload(litellm=judge is None, models=self._judge_models())

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
        return self._parts.assessor.checks

    # -- lifecycle -------------------------------------------------------------------------

    def _judge_models(self) -> tuple[str, ...]:
        """Every model a judgement of this verifier may call, each once (every run kind's)."""
        models = (m for p in self._profiles.values() for m in p.config.judge_deployment_models)
        return tuple(dict.fromkeys(models))

    async def warmup(self) -> None:
        """Load what a first turn would, off the event loop: the judge's ``warmup`` (litellm,
        with what its first call to each judge model's route would load), the tokenizer, and
        the shared state's connection."""
        await self._life.warmup()

    async def aclose(self) -> None:
        """Close what this verifier alone owns; nothing of any other verifier.

        Its judges (``aclose``: litellm's judge closes its Router, and its HTTP clients of the
        running loop once its judge calls in flight there have finished; turns in flight go
        on); its shared state's clients there; its ``run_sync`` loop, once the ``run_sync``
        calls in flight have returned; its idle hook threads; its sync agents' thread pool
        (``agentThreads``; agents running there finish). A verifier used after ``aclose``
        opens what it needs again and logs one ``verifier_reopened`` warning.
        """
        await self._life.aclose()

    def close(self) -> None:
        """Close the judges' Router, the ``run_sync`` loop and its HTTP clients, and the hook
        threads (for code without an event loop; ``aclose`` also closes the running loop's
        clients)."""
        self._life.close()

    # -- run kinds ----------------------------------------------------------------------------

    def _profile(self, turn: Turn) -> Profile:
        profile = self._profiles.get(turn.run_kind)
        if profile is None:
            self._parts.families.warn_once("run_kind_unknown", run_kind=turn.run_kind)
            return self._profiles[None]
        return profile

    # -- public entry points -----------------------------------------------------------------

    async def verify(self, turn: Turn, reply: Reply | str) -> Verdict:
        """One verdict on ``reply`` (checks and judge), no retry; even when not ``enabled``.

        Never raises for the verifier's own trouble: a fail-open verdict (``passed=True``,
        ``fail_open_reason`` set) says what went wrong.
        """
        return (await self._assess(turn, as_reply(reply))).verdict

    async def _assess(self, turn: Turn, reply: Reply, step: PolicyStep | None = None) -> Assessed:
        """``verify``, with what a door that drives its own attempts knows of the turn
        (``step``: the earlier replies, feedback, attempt number and deadline): the verdict,
        the check results and the turn's tool ledger, side effects settled, as ``run`` has
        them."""
        self._life.entered(asyncio.get_running_loop())
        step = step or PolicyStep()
        parts, profile = self._parts, self._profile(turn)
        judged = parts.side_effects.with_turn_ledger(reply, step.earlier)
        if parts.families.refused(profile, turn):
            refused = Verdict(
                passed=True,
                readable=False,
                fail_open_reason=Reason.SAME_FAMILY,
                error=f"judge and agent model {turn.agent_model!r} are of the same family",
            )
            return Assessed(refused, (), judged.meta.tool_calls)
        with parts.tracing.span("replyguard.verify") as span:
            span.record(turn_attributes, turn, profile.name, profile.config.mode)
            verdict, results = await parts.assessor.assess(
                Step(profile, turn, judged, step.feedback, step.number, step.deadline)
            )
            span.record(verdict_attributes, verdict, parts.tracing.log_content)
        return Assessed(verdict, results, judged.meta.tool_calls)

    def run_sync(self, agent: Agent, turn: Turn) -> Outcome:
        """``run`` for code without an event loop (safe from many threads at once)."""
        return self._sync.submit(lambda: self.run(agent, turn))

    async def run(self, agent: Agent, turn: Turn) -> Outcome:
        """Run ``agent`` for ``turn``, verify its reply, retry with feedback, deliver.

        ``agent`` receives OpenAI-style messages (a fresh deep copy on every call) and returns a
        ``Reply`` or a ``str``, sync or async. Its exception on the first attempt propagates;
        on a retry it fails open with the best reply so far. With ``onExhausted: "raise"`` an
        exhausted turn raises ``VerificationExhausted``.
        """
        started = time.perf_counter()
        self._life.entered(asyncio.get_running_loop())
        profile = self._profile(turn)
        sample_key = turn.id if turn.id is not None else turn.user_message
        turn = with_turn_id(turn)
        with self._parts.tracing.span("replyguard.turn") as span:
            span.record(turn_attributes, turn, profile.name, profile.config.mode)
            messages: Messages = [*turn.history, {"role": "user", "content": turn.user_message}]
            # A turn that may be judged reads its workspace files during the agent's call
            # (on replyguard's threads; wasted on a turn its reply does not trigger).
            ahead = profile.config.enabled and profile.triggers.may_judge(turn)
            reading = self._parts.assessor.read_workspace(profile, turn) if ahead else None
            try:
                with agent_attempt(turn, 1):
                    reply = await call_agent(agent, messages, self._parts.agent_pool)
                run = _Run(
                    self._parts, turn, profile, started, sample_key=sample_key, reading=reading
                )
                with judging():
                    outcome = await run.verify(agent, messages, reply)
            except VerificationExhausted as exc:
                span.record(outcome_attributes, exc.outcome)
                raise
            span.record(outcome_attributes, outcome)
            return outcome

    @overload
    def stream(
        self, agent: StreamingAgent | Agent, turn: Turn, *, progress: Literal[False] = False
    ) -> AsyncGenerator[StreamEvent, None]: ...
    @overload
    def stream(
        self, agent: StreamingAgent | Agent, turn: Turn, *, progress: bool
    ) -> AsyncGenerator[StreamEvent | Progress, None]: ...
    def stream(
        self, agent: StreamingAgent | Agent, turn: Turn, *, progress: bool = False
    ) -> AsyncGenerator[StreamEvent | Progress, None]:
        """Run a streaming ``agent`` for ``turn``; its reply as events, verified on the way.

        ``agent(messages)`` returns an async iterator of text deltas (``str``, or litellm /
        OpenAI stream chunks), and may yield a ``RunMeta`` or ``Reply`` after its text. The
        events are ``Delta(text)`` for the user, ``Retract(attempt, reason)`` when text already
        shown must go (the deltas after it replace it), and a last ``Done(outcome)`` with the
        ``Outcome`` that ``run`` gives: the deltas after the last ``Retract`` spell exactly its
        ``response``. ``streaming.mode`` (``"buffer"``, ``"release"``) decides what is shown
        before the reply is judged (docs/streaming.md). Closing the iterator (``aclose``, or
        cancelling its consumer) closes the agent's stream and any judge call in flight.
        With ``progress=True`` a ``Progress(phase, attempt)`` event (no text) also says when
        the agent starts writing, a reply is being checked, and a retry is being written.
        """
        from replyguard.runner._stream import stream_events

        parts, profile = self._parts, self._profile(turn)
        return stream_events(parts, turn, profile, agent, self._life.entered, progress)
