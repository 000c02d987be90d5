"""The cross-family rule between the agent's model and the judge's, and its warnings (each
given once per verifier)."""

from __future__ import annotations

import threading
from typing import Any

from replyguard.config._schema import VerifierConfig
from replyguard.errors import CrossFamilyError
from replyguard.runner._preflight import same_family
from replyguard.runner._request import Profile
from replyguard.telemetry._events import Events
from replyguard.types import Turn


class FamilyGuard:
    """One verifier's family checks; thread-safe."""

    __slots__ = ("_config", "_events", "_warned", "_warned_lock")

    def __init__(self, config: VerifierConfig, events: Events) -> None:
        self._config = config
        self._events = events
        self._warned: set[tuple[Any, ...]] = set()
        self._warned_lock = threading.Lock()

    def warn_once(self, event: str, **fields: Any) -> None:
        key = (event, *sorted(fields.items()))
        with self._warned_lock:
            if key in self._warned:
                return
            self._warned.add(key)
        self._events.warning(event, **fields)

    def conflict(self, config: VerifierConfig, agent_model: str, *, raise_error: bool) -> bool:
        """True when a judge model (primary or fallback) shares the agent's family."""
        agent_family, same = same_family(config, agent_model)
        if agent_family is None:
            self.warn_once("agent_family_unknown", model=agent_model)
            return False
        if not same:
            return False
        if raise_error:
            raise CrossFamilyError(same[0], agent_model, agent_family)
        self.warn_once("judge_same_family", judge=same[0], agent=agent_model, family=agent_family)
        return True

    def refused(self, profile: Profile, turn: Turn) -> bool:
        """Whether this turn's agent model makes the judge refuse it (``requireCrossFamily``)."""
        if turn.agent_model is None:
            return False
        same = self.conflict(profile.config, turn.agent_model, raise_error=False)
        return same and self._config.require_cross_family
