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
import time
from collections.abc import AsyncGenerator, Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal, overload

from replyguard.checks.base import Check
from replyguard.config._schema import VerifierConfig
from replyguard.errors import VerificationExhausted
from replyguard.judge._protocol import Judge
from replyguard.runner._agents import (
    Agent,
    Messages,
    StreamingAgent,
    as_reply,
    call_agent,
)
from replyguard.runner._assembly import assemble
from replyguard.runner._assessed import assessed
from replyguard.runner._driver import AgentCalls, outcome_of
from replyguard.runner._hooks import Hook, Hooks
from replyguard.runner._lifecycle import Lifecycle
from replyguard.runner._policy import Assessed, PolicyStep
from replyguard.runner._preload import judged, start_preload
from replyguard.runner._request import Profile
from replyguard.runner._run import TurnParts, _Run
from replyguard.runner._sync import SyncLoop
from replyguard.runner._turn_scope import agent_attempt, with_turn_id
from replyguard.telemetry._tracing import (
    outcome_attributes,
    turn_attributes,
)
from replyguard.types import Outcome, Progress, Reply, StreamEvent, Turn, Verdict

if TYPE_CHECKING:  # loaded when a config asks for it: most verifiers need none
    from replyguard.state import SharedState


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
        hooks = Hooks(on_verdict, on_retry, on_exhausted, on_fail_open, on_skip)
        built = assemble(config, judge, checks, hooks, redact, tracer_provider)
        set_ = object.__setattr__
        set_(self, "_config", config)
        set_(self, "_life", built.life)
        set_(self, "_state", built.state)
        set_(self, "_profiles", built.profiles)
        set_(self, "_sync", built.life.sync)
        set_(self, "_parts", built.parts)
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
        return await assessed(self._parts, self._profile(turn), turn, reply, step or PolicyStep())

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
        turn_id = turn.id  # read once (a read through pydantic's hook costs a call)
        sample_key = turn_id if turn_id is not None else turn.user_message
        turn = with_turn_id(turn)
        tracing = self._parts.tracing
        if not tracing.enabled:  # no span to open, nothing to record
            return await self._turn(agent, turn, profile, started, sample_key)
        with tracing.span("replyguard.turn") as span:
            span.record(turn_attributes, turn, profile.name, profile.config.mode)
            try:
                outcome = await self._turn(agent, turn, profile, started, sample_key)
            except VerificationExhausted as exc:
                span.record(outcome_attributes, exc.outcome)
                raise
            span.record(outcome_attributes, outcome)
            return outcome

    async def _turn(
        self, agent: Agent, turn: Turn, profile: Profile, started: float, sample_key: str
    ) -> Outcome:
        """``run``'s turn (``turn`` with its id), from the agent's first call to the outcome."""
        parts = self._parts
        messages: Messages = [*turn.history, {"role": "user", "content": turn.user_message}]
        # A turn that may be judged reads its workspace files during the agent's call
        # (on replyguard's threads; wasted on a turn its reply does not trigger).
        ahead = profile.config.enabled and profile.triggers.may_judge(turn)
        reading = parts.assessor.read_workspace(profile, turn) if ahead else None
        with agent_attempt(turn, 1):
            reply = await call_agent(agent, messages, parts.agent_pool)
        run = _Run(
            parts, turn, profile, started, sample_key=sample_key, reading=reading, read_ahead=ahead
        )
        return await judged(outcome_of(run, AgentCalls(run, agent), messages, reply))

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
