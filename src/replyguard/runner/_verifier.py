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
import functools
import logging
import time
from collections.abc import AsyncGenerator, Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal, overload

from replyguard._workspace import Workspace
from replyguard.checks.base import Check, as_check
from replyguard.checks.registry import build_checks
from replyguard.config._schema import VerifierConfig
from replyguard.errors import VerificationExhausted
from replyguard.judge._answer_cap import AnswerSessions
from replyguard.judge._breaker import CircuitBreaker
from replyguard.judge._clients import ClientScope, release_when_collected, stop_logging_worker
from replyguard.judge._fallbacks import LiteLLMJudge
from replyguard.judge._limiter import ConcurrencyLimiter
from replyguard.judge._litellm import import_litellm, load_routes
from replyguard.judge._protocol import Judge
from replyguard.runner._agents import (
    Agent,
    Messages,
    StreamingAgent,
    as_reply,
    call_agent,
)
from replyguard.runner._assessment import Assessor, Profile, Step
from replyguard.runner._family_guard import FamilyGuard
from replyguard.runner._hooks import Hook, Hooks
from replyguard.runner._loop_ends import LoopEnds
from replyguard.runner._policy import Assessed, PolicyStep
from replyguard.runner._preflight import config_findings, state_findings
from replyguard.runner._preload import judging, prepare_turn, start_preload
from replyguard.runner._run import TurnParts, _Run
from replyguard.runner._side_effects import SideEffects
from replyguard.runner._sync import SyncLoop
from replyguard.runner._threads import ThreadPool
from replyguard.runner._turn_scope import agent_attempt, with_turn_id
from replyguard.telemetry._events import Events
from replyguard.telemetry._ledger import Ledger
from replyguard.telemetry._tracing import (
    Tracing,
    build_tracing,
    outcome_attributes,
    turn_attributes,
    verdict_attributes,
)
from replyguard.types import Outcome, Progress, Reason, Reply, StreamEvent, Turn, Verdict

if TYPE_CHECKING:  # loaded when a config asks for them: most verifiers need none
    from replyguard.judge._router import JudgeRouter
    from replyguard.state import SharedState

# How much longer than the longest judgement ``aclose`` waits for judge calls in flight.
_DRAIN_MARGIN = 1.0


async def close_loop_parts(
    state: SharedState | None, clients: ClientScope, sessions: AnswerSessions, *, ending: bool
) -> None:
    """Close a verifier's clients of the running loop: its Redis client, its share of
    litellm's clients (``ending``: as the loop shuts down, the verifier staying open; else
    ``aclose``), its capped answer sessions, and litellm's logging worker there."""
    if state is not None:
        await state.aclose()
    await (clients.close_loop() if ending else clients.aclose())
    await sessions.aclose()
    await stop_logging_worker()


class Verifier:
    """Verifies agent replies with checks and a judge model. Immutable; share it freely."""

    __slots__ = (
        "__weakref__",  # closing its clients when collected without aclose
        "_agent_pool",
        "_answer_sessions",
        "_assessor",
        "_clients",
        "_config",
        "_events",
        "_families",
        "_hooks",
        "_ledger",
        "_loop_ends",
        "_parts",
        "_profiles",
        "_router",
        "_state",
        "_sync",
        "_tracing",
    )
    _agent_pool: ThreadPool
    _answer_sessions: AnswerSessions
    _assessor: Assessor
    _clients: ClientScope
    _config: VerifierConfig
    _events: Events
    _families: FamilyGuard
    _hooks: Hooks
    _ledger: Ledger | None
    _loop_ends: LoopEnds
    _parts: TurnParts
    _profiles: dict[str | None, Profile]
    _router: JudgeRouter | None
    _state: SharedState | None
    _sync: SyncLoop
    _tracing: Tracing

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
        if config.state is not None:
            from replyguard.judge._fleet_breaker import FleetBreaker

            breaker: CircuitBreaker = FleetBreaker.from_config(config.circuit_breaker)
        else:
            breaker = CircuitBreaker.from_config(config.circuit_breaker)
        for finding in state_findings(config):  # before anything connects or reads a key
            if finding.refusal is not None:
                raise finding.refusal
        shared = None
        if config.state or config.spend_limits:
            from replyguard.state import SharedState

            shared = SharedState(config, events)

        router = None
        if config.router is not None and not judge:
            from replyguard.judge._router import JudgeRouter

            state = config.state
            router = JudgeRouter(
                config.router,
                redis_url=state.resolve_url() if state is not None else None,
                redis_timeout=state.timeout_ms / 1000 if state is not None else None,
                redis_down=shared.redis_down if shared is not None else None,
            )
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

        def member_judge(member_config: VerifierConfig) -> Judge:
            if judge is None:
                return judge_for(member_config)
            # A custom judge may give each panel member a judge of its own (``member(model)``);
            # otherwise it answers for every member.
            member = getattr(judge, "member", None)
            return member(member_config.model) if callable(member) else judge

        criteria = config.operator_rubric()  # read once: the rubric stays the same every call

        def profile_for(name: str | None, profile_config: VerifierConfig) -> Profile:
            spec = profile_config.panel
            if spec is None:
                return Profile.build(name, profile_config, judge_for(profile_config), criteria)
            from replyguard.judge._panel import Panel

            configs = [profile_config.member_config(m) for m in spec.members]
            members = tuple((c.model, member_judge(c), c) for c in configs)
            panel = Panel(members, spec.rule, spec.min_answers)
            return Profile.build(name, profile_config, members[0][1], criteria, panel)

        profiles: dict[str | None, Profile] = {None: profile_for(None, config)}
        for name in config.run_kinds:
            profiles[name] = profile_for(name, config.for_run_kind(name))
        if judge is None:  # replyguard's own judge: a turn without a key fails open at once
            profiles = {name: p.with_credentials(config.model) for name, p in profiles.items()}
        set_ = object.__setattr__
        set_(self, "_config", config)
        set_(self, "_events", events)
        set_(
            self,
            "_assessor",
            Assessor(all_checks, workspace, events, limiter, redact, tracing, shared),
        )
        set_(self, "_state", shared)
        set_(self, "_profiles", profiles)
        set_(self, "_hooks", Hooks(on_verdict, on_retry, on_exhausted, on_fail_open, on_skip))
        set_(self, "_ledger", Ledger(config.ledger_path, events) if config.ledger_path else None)
        set_(self, "_clients", clients)
        set_(self, "_answer_sessions", answer_sessions)
        set_(self, "_agent_pool", ThreadPool(config.agent_threads, "replyguard-agent"))
        set_(self, "_sync", SyncLoop(self._close_loop_clients))
        set_(self, "_tracing", tracing)
        set_(self, "_router", router)
        set_(self, "_families", FamilyGuard(config, events))
        set_(
            self,
            "_parts",
            TurnParts(
                config,
                events,
                self._assessor,
                self._hooks,
                self._ledger,
                self._agent_pool,
                tracing,
                self._families,
                SideEffects(config.side_effect_tools),
            ),
        )
        for finding in config_findings(config, credentials=judge is None):  # check-config's
            if finding.refusal is not None:
                raise finding.refusal
            if finding.log_level >= logging.WARNING:
                self._families.warn_once(finding.event, **finding.fields)
            else:
                events.emit(finding.log_level, finding.event, **finding.fields)
        release_when_collected(self, clients, answer_sessions)
        ending = functools.partial(close_loop_parts, shared, clients, answer_sessions, ending=True)
        set_(self, "_loop_ends", LoopEnds(ending))
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
        return self._assessor.checks

    # -- lifecycle -------------------------------------------------------------------------

    def _judge_models(self) -> tuple[str, ...]:
        """Every model a judgement of this verifier may call, each once (every run kind's)."""
        models = (m for p in self._profiles.values() for m in p.config.judge_deployment_models)
        return tuple(dict.fromkeys(models))

    async def warmup(self) -> None:
        """Import litellm (with what its first call to each judge model's route would load) and
        load the tokenizer off the event loop, before the first turn."""
        from replyguard.context import _tokens as tokens

        await asyncio.to_thread(prepare_turn)
        await import_litellm()
        await asyncio.to_thread(load_routes, self._judge_models())
        await asyncio.to_thread(tokens.encoding)
        if self._state is not None:
            await self._state.warmup()
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
            await self._router.aclose()
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
        await close_loop_parts(self._state, self._clients, self._answer_sessions, ending=False)

    def _entered(self, loop: asyncio.AbstractEventLoop) -> None:
        """The async API runs on ``loop``: ``run_sync`` may hand turns to it, and this
        verifier's clients there close as it shuts down."""
        self._sync.note_host(loop)
        self._loop_ends.watch(loop)

    # -- run kinds ----------------------------------------------------------------------------

    def _profile(self, turn: Turn) -> Profile:
        profile = self._profiles.get(turn.run_kind)
        if profile is None:
            self._families.warn_once("run_kind_unknown", run_kind=turn.run_kind)
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
        self._entered(asyncio.get_running_loop())
        step = step or PolicyStep()
        profile = self._profile(turn)
        judged = self._parts.side_effects.with_turn_ledger(reply, step.earlier)
        if self._families.refused(profile, turn):
            refused = Verdict(
                passed=True,
                readable=False,
                fail_open_reason=Reason.SAME_FAMILY,
                error=f"judge and agent model {turn.agent_model!r} are of the same family",
            )
            return Assessed(refused, (), judged.meta.tool_calls)
        with self._tracing.span("replyguard.verify") as span:
            span.record(turn_attributes, turn, profile.name, profile.config.mode)
            verdict, results = await self._assessor.assess(
                Step(profile, turn, judged, step.feedback, step.number, step.deadline)
            )
            span.record(verdict_attributes, verdict, self._tracing.log_content)
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
        self._entered(asyncio.get_running_loop())
        profile = self._profile(turn)
        sample_key = turn.id if turn.id is not None else turn.user_message
        turn = with_turn_id(turn)
        with self._tracing.span("replyguard.turn") as span:
            span.record(turn_attributes, turn, profile.name, profile.config.mode)
            messages: Messages = [*turn.history, {"role": "user", "content": turn.user_message}]
            # A turn that may be judged reads its workspace files during the agent's call
            # (on replyguard's threads; wasted on a turn its reply does not trigger).
            ahead = profile.config.enabled and profile.triggers.may_judge(turn)
            reading = self._assessor.read_workspace(profile, turn) if ahead else None
            try:
                with agent_attempt(turn, 1):
                    reply = await call_agent(agent, messages, self._agent_pool)
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
        return stream_events(parts, turn, profile, agent, self._entered, progress)
