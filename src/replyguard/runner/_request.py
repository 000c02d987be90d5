"""What a judgement is asked for: the ``Step`` record (the prompt's inputs, the deadline, the
agent and run kind) under a ``Profile``, whose model plan (``Seat``) is resolved once, when the
verifier is built, never in the middle of a call.

``Profile`` holds what a run kind may change (its config, judges, triggers, context limits and
rubric); each of its ``seats`` is one judge with the models it calls (a panel has a seat per
member). ``Budget`` is how long one step may take and what to call it when that runs out.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from replyguard._credentials import CredentialGate
from replyguard._deadlines import deadline_in
from replyguard.config._schema import VerifierConfig
from replyguard.context._prompt import DEFAULT_RUBRIC, ContextLimits, Rubric
from replyguard.gate._triggers import TriggerMatcher
from replyguard.judge._base import BaseJudge, as_base_judge
from replyguard.types import Reason, Reply, Turn

if TYPE_CHECKING:  # loaded when a config asks for a panel
    from replyguard.judge._panel import Panel


@dataclass(frozen=True)
class Seat:
    """One judge of a profile and the model plan its calls follow, resolved once."""

    name: str
    """The model that names it (a panel member's own, as configured)."""
    judge: BaseJudge
    config: VerifierConfig
    """Its own config: the profile's, or a panel member's (its model and fallbacks)."""
    models: tuple[str, ...]
    """The models it tries, in order (``judgeModels``): what admission and breakers count."""
    deployments: tuple[str, ...]
    """Every model behind them (router groups expanded): what a call's cost is estimated on."""
    categories: tuple[str, ...]
    """The custom FAIL categories its verdicts may name."""

    @classmethod
    def of(cls, name: str, judge: BaseJudge, config: VerifierConfig) -> Seat:
        models = config.judge_models
        deployments = tuple(m for n in models for m in config.underlying_models(n))
        return cls(name, judge, config, models, deployments, tuple(config.categories))


@dataclass(frozen=True)
class Profile:
    """The settings one turn runs under: the verifier's own, or a run kind's."""

    name: str | None
    config: VerifierConfig
    judge: BaseJudge
    triggers: TriggerMatcher
    limits: ContextLimits
    rubric: Rubric = DEFAULT_RUBRIC
    """The judge's system message: the built-in rubric, the operator's criteria, categories."""
    panel: Panel | None = None
    """The judge panel that judges in place of ``judge``, when the config names one."""
    seats: tuple[Seat, ...] = ()
    """The judge's seat, or one per panel member, in the panel's order."""
    credentials: CredentialGate | None = None
    """Its judge models found without a key (replyguard's own judge only), else None."""

    def with_credentials(self, owner: str) -> Profile:
        """This profile, its judge models' credentials checked (``owner``: the verifier's
        ``model``, whose provider its ``apiKey`` is for)."""
        return dataclasses.replace(self, credentials=CredentialGate.build(self.config, owner))

    @functools.cached_property
    def judges(self) -> tuple[BaseJudge, ...]:
        """Every judge a judgement may call: the panel's members, or the one judge."""
        return tuple(seat.judge for seat in self.seats)

    @functools.cached_property
    def rules_files(self) -> tuple[str, ...] | None:
        """The workspace's rules files a judgement shows, or None when it shows no file
        (``judgeAfterChecks: "never"``: nothing is judged)."""
        config = self.config
        return None if config.judge_after_checks == "never" else tuple(config.rules_files)

    @classmethod
    def build(
        cls,
        name: str | None,
        config: VerifierConfig,
        judge: BaseJudge,
        criteria: str = "",
        panel: Panel | None = None,
    ) -> Profile:
        """A profile from a (run kind's) config, the judge it uses, the operator's criteria
        (the rubric file's text) and its judge panel, if any."""
        limits = ContextLimits(
            budget=config.context_token_budget,
            response_cap=config.response_token_cap,
            rules_cap=config.rules_token_cap,
            history_turns=config.history_turns,
        )
        rubric = (
            Rubric(criteria, tuple(config.categories.items()))
            if criteria or config.categories
            else DEFAULT_RUBRIC
        )
        members = panel.members if panel is not None else ((config.model, judge, config),)
        seats = tuple(Seat.of(*member) for member in members)
        return cls(name, config, judge, TriggerMatcher(config), limits, rubric, panel, seats)


def build_profiles(
    config: VerifierConfig,
    judge: BaseJudge,
    sibling: Callable[[VerifierConfig], BaseJudge] | None = None,
) -> dict[str | None, Profile]:
    """The verifier's profile (``None``) and each run kind's, judged by ``judge``.

    ``sibling``: the judge of a run kind's or a panel member's config (the litellm judge's
    own, sharing its clients); without it, ``judge`` judges every run kind, and each panel
    member gets the judge ``judge.member(model)`` gives.
    """
    criteria = config.operator_rubric()  # read once: the rubric stays the same every call

    def member_judge(member_config: VerifierConfig) -> BaseJudge:
        if sibling is not None:
            return sibling(member_config)
        return as_base_judge(judge.member(member_config.model))

    def profile_for(name: str | None, profile_config: VerifierConfig) -> Profile:
        own = sibling(profile_config) if sibling is not None else judge
        spec = profile_config.panel
        if spec is None:
            return Profile.build(name, profile_config, own, criteria)
        from replyguard.judge._panel import Panel

        configs = [profile_config.member_config(m) for m in spec.members]
        members = tuple((c.model, member_judge(c), c) for c in configs)
        panel = Panel(members, spec.rule, spec.min_answers)
        return Profile.build(name, profile_config, members[0][1], criteria, panel)

    profiles: dict[str | None, Profile] = {None: profile_for(None, config)}
    for name in config.run_kinds:
        profiles[name] = profile_for(name, config.for_run_kind(name))
    return profiles


INLINE_CHARS = 50_000
"""A reply or answer longer than this is worked on off the event loop."""


class Budget(NamedTuple):
    """How long one step may take, and what to call it when that runs out."""

    seconds: float
    reason: Reason

    @classmethod
    def at(cls, own: float, deadline: float | None) -> Budget:
        """The step's own limit, or what is left of the turn when that is less."""
        if deadline is not None:
            left = deadline - time.monotonic()
            if left < own:
                return cls(max(left, 0.0), Reason.LATENCY_BUDGET)
        return cls(own, Reason.JUDGE_TIMEOUT)


Reading = asyncio.Future[tuple[str | None, ...]]
"""The workspace files' texts being read, in the order asked for (``read_workspace``)."""


class Step(NamedTuple):
    """One reply to assess: the request record of its judgement (the prompt's inputs, the
    turn's deadline, the agent and the run kind, the profile's model plan). A named tuple:
    made once per judgement, for less than a frozen dataclass costs."""

    profile: Profile
    turn: Turn
    reply: Reply
    previous_feedback: Sequence[str]
    attempt: int
    deadline: float | None
    """The turn's deadline (``time.monotonic``), or None when it has none."""
    reading: Reading | None = None
    """The workspace files' read the turn started (``Assessor.read_workspace``), or None:
    the assessment then starts its own, unless ``read`` says the turn asked already."""
    read: bool = False
    """The turn asked for its workspace read already: ``reading`` None then means nothing
    to read (not asked again on every attempt)."""

    def left(self) -> float | None:
        """Seconds left of the turn (never negative), or None without a deadline."""
        return None if self.deadline is None else max(self.deadline - time.monotonic(), 0.0)


_NOTHING = contextlib.nullcontext()
_T = TypeVar("_T")


def until(seconds: float | None) -> contextlib.AbstractAsyncContextManager[Any]:
    """``asyncio.timeout(seconds)``, or nothing to enter when there is no deadline."""
    return asyncio.timeout(seconds) if seconds is not None else _NOTHING


def bounded(work: Awaitable[_T], seconds: float | None) -> Awaitable[_T]:
    """What to await for ``work`` within ``asyncio.timeout(seconds)``: ``until`` around one
    await, for less (None: unbounded, ``work`` itself, no coroutine around it)."""
    if seconds is None:
        return work
    return _within(work, seconds)


async def _within(work: Awaitable[_T], seconds: float) -> _T:
    with deadline_in(seconds):
        return await work
