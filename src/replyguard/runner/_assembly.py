"""What a ``Verifier`` is built of, assembled once (``assemble``).

The judge (replyguard's own ``LiteLLMJudge``, or the caller's wrapped as a ``BaseJudge``) and
its run kinds' profiles, the checks, the assessor, the shared state, the ledger, the agent
threads and the rest of what a turn uses (``TurnParts``), and the lifecycle that opens and
closes them. What ``replyguard check-config`` would report is logged as it is built; a
refusal raises before the verifier exists.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from replyguard._workspace import Workspace
from replyguard.checks.base import Check, as_check
from replyguard.checks.registry import build_checks
from replyguard.config._schema import VerifierConfig
from replyguard.judge._base import BaseJudge, as_base_judge
from replyguard.judge._fallbacks import LiteLLMJudge
from replyguard.judge._limiter import ConcurrencyLimiter
from replyguard.judge._protocol import Judge
from replyguard.runner._assessment import Assessor
from replyguard.runner._family_guard import FamilyGuard
from replyguard.runner._hooks import Hooks
from replyguard.runner._lifecycle import Lifecycle
from replyguard.runner._preflight import config_findings, state_findings
from replyguard.runner._request import Profile, build_profiles
from replyguard.runner._run import TurnParts
from replyguard.runner._side_effects import SideEffects
from replyguard.runner._threads import ThreadPool
from replyguard.telemetry._events import Events
from replyguard.telemetry._ledger import Ledger
from replyguard.telemetry._tracing import Tracing, build_tracing
from replyguard.types import Reply, Turn

if TYPE_CHECKING:  # loaded when a config asks for it: most verifiers need none
    from replyguard.state import SharedState


@dataclass(frozen=True, slots=True)
class Assembly:
    """A verifier's parts."""

    parts: TurnParts
    profiles: dict[str | None, Profile]
    life: Lifecycle
    state: SharedState | None


def assemble(
    config: VerifierConfig,
    judge: Judge | None,
    checks: Sequence[Check | Callable[[Turn, Reply], Any]],
    hooks: Hooks,
    redact: Callable[[str], str] | None,
    tracer_provider: Any,
) -> Assembly:
    """The parts of a verifier of ``config`` (see the module); ``judge`` None: replyguard's."""
    events = Events(config.secrets())
    tracing = build_tracing(config.tracing, tracer_provider, events, log_content=config.log_content)
    shared = _shared_state(config, events)
    root, profiles = _judged_by(config, judge, events, tracing, shared)
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
    ledger = Ledger(config.ledger_path, events) if config.ledger_path else None
    pool = ThreadPool(config.agent_threads, "replyguard-agent")
    families = FamilyGuard(config, events)
    side_effects = SideEffects(config.side_effect_tools)
    life = Lifecycle(_judges_of(root, profiles), shared, hooks, pool)
    parts = TurnParts(
        config, events, assessor, hooks, ledger, pool, tracing, families, side_effects
    )
    _report_findings(config, events, families, credentials=judge is None)
    return Assembly(parts, profiles, life, shared)


def _judged_by(
    config: VerifierConfig,
    judge: Judge | None,
    events: Events,
    tracing: Tracing,
    shared: SharedState | None,
) -> tuple[BaseJudge, dict[str | None, Profile]]:
    """The verifier's judge and its run kinds' profiles."""
    if judge is not None:
        root = as_base_judge(judge)
        return root, build_profiles(config, root)
    # replyguard's own: its Router routes locally while Redis is down
    down = shared.redis_down if shared is not None else None
    built = LiteLLMJudge.for_verifier(config, events, tracing=tracing, redis_down=down)
    profiles = build_profiles(config, built, built.sibling)
    # A turn that would call a judge model without a key fails open at once.
    return built, {name: p.with_credentials(config.model) for name, p in profiles.items()}


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
