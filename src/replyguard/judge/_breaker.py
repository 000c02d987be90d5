"""A circuit breaker per judge model: rest a model after repeated failures, then probe it.

::

    closed ──(failureThreshold failures in a row)──▶ open ──(cooldownSeconds)──▶ half_open
      ▲                                               ▲                             │
      │                                               └──── the probe fails ────────┤
      └─────────────────────── the probe succeeds ──────────────────────────────────┘

Closed: every call may go. Open: none may. Half-open: exactly one caller (the probe) is let
through; the others are refused until the probe reports. A success closes the circuit and
resets the count, whoever reports it (the model answered); a failure while half-open re-opens it
for a new cool-down. A probe that never reports (its task was cancelled) stops blocking after
one more cool-down, and the next caller becomes the probe.

One breaker is shared by every task and thread of a verifier: every method takes a
``threading.Lock``. The clock is injectable so tests drive time without sleeping.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from replyguard.config._schema import CircuitBreakerConfig

State = Literal["closed", "open", "half_open"]

__all__ = ["CircuitBreaker", "State"]


@dataclass
class _Circuit:
    failures: int = 0
    """Consecutive failures since the last success."""
    open_until: float | None = None
    """When the cool-down ends (None: closed)."""
    probe_since: float | None = None
    """When the half-open probe was let through (None: no probe in flight)."""


class CircuitBreaker:
    """Per-model circuit breakers with one threshold and one cool-down."""

    def __init__(
        self,
        failure_threshold: int,
        cooldown_seconds: float,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if failure_threshold < 1:
            raise ValueError("failure_threshold must be at least 1")
        if cooldown_seconds <= 0:
            raise ValueError("cooldown_seconds must be positive")
        self._threshold = failure_threshold
        self._cooldown = cooldown_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._circuits: dict[str, _Circuit] = {}

    @classmethod
    def from_config(
        cls, config: CircuitBreakerConfig, *, clock: Callable[[], float] = time.monotonic
    ) -> CircuitBreaker:
        """A breaker with the config's ``failureThreshold`` and ``cooldownSeconds``."""
        return cls(config.failure_threshold, config.cooldown_seconds, clock=clock)

    def allow(self, model: str) -> bool:
        """Whether a call to ``model`` may go now (True makes a half-open caller the probe)."""
        with self._lock:
            circuit = self._circuits.get(model)
            if circuit is None or circuit.open_until is None:
                return True
            now = self._clock()
            if now < circuit.open_until:
                return False
            probing = circuit.probe_since is not None and now < circuit.probe_since + self._cooldown
            if probing:
                return False
            circuit.probe_since = now
            return True

    def record_success(self, model: str) -> None:
        """``model`` answered: close its circuit and reset its failure count."""
        with self._lock:
            self._circuits.pop(model, None)

    def record_failure(self, model: str) -> None:
        """``model`` failed (an error or a timeout): count it; open or re-open when due."""
        with self._lock:
            circuit = self._circuits.setdefault(model, _Circuit())
            circuit.failures += 1
            now = self._clock()
            if circuit.open_until is None:
                if circuit.failures >= self._threshold:
                    circuit.open_until = now + self._cooldown
            elif now >= circuit.open_until:  # half-open: the probe failed
                circuit.open_until = now + self._cooldown
                circuit.probe_since = None

    def state(self, model: str) -> State:
        """``model``'s circuit now: closed, open (cooling down), or half_open (probe allowed
        or in flight)."""
        with self._lock:
            circuit = self._circuits.get(model)
            if circuit is None or circuit.open_until is None:
                return "closed"
            return "open" if self._clock() < circuit.open_until else "half_open"
