"""``Ticket``: what the shared state decided for one judgement, and what the judgement reports
back (which models failed or answered, what it cost).

The runner gets a ticket before the judge call (one round trip), makes it the current one
for the call (``active``: a context variable, so concurrent judgements never see each other's),
and hands it back after (at most one more round trip). The judge's circuit breaker reads the
current ticket's decisions (``replyguard.judge._shared_breaker``).
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

from replyguard.config._state import SpendLimit
from replyguard.state._estimates import CallCost

__all__ = ["Reservation", "Ticket", "current_ticket"]

Decision = Literal["closed", "failing", "probe", "refused"]
"""A model's circuit for this judgement: closed (no failures since the last success), closed
with failures counted, half-open with this judgement as the fleet's one probe, or refused
(open, or half-open with a probe elsewhere)."""


@dataclass(frozen=True)
class Reservation:
    """Spend held for one judgement until it is settled (or expires)."""

    member: str
    """Its unique name (and amount) in each window's reservations."""
    amount: float
    """The estimate held."""
    windows: tuple[tuple[str, int], ...]
    """Each limit's counter (its key) and window length in seconds."""
    expires_ms: int = 0
    """When it expires on Redis (Redis's clock, ms; 0: held in this process)."""


@dataclass
class Ticket:
    """One judgement's admission: breaker decisions per model, the spend held, and reports."""

    decisions: dict[str, Decision] | None = None
    """Per judge model, what the shared breaker decided (None: the local breaker decides)."""
    refused: SpendLimit | None = None
    """The spend limit the judgement would pass (it is then not made)."""
    degraded: bool = False
    """Decided on this instance's own state because the shared one did not answer."""
    reservation: Reservation | None = None
    """The spend held (None without spend limits)."""
    shared: bool = False
    """The reservation and decisions are Redis's (settled there), not this process's."""
    mirror: Reservation | None = None
    """The shared reservation, held in this process's own windows too (settled with it), so
    that they count the judgements in flight should Redis go away."""
    call: CallCost | None = None
    """What was known of the call's cost before it (its estimate's source; None once settled,
    or without spend limits)."""
    scout: bool = False
    """The call is its chain's first measured one (``replyguard.state._estimates``)."""
    reports: dict[str, bool] = field(default_factory=dict)
    """Per model called: True when it answered, False when it failed (the last report wins)."""

    @property
    def blocked(self) -> bool:
        """Every model's circuit is open: no judge call may go."""
        return self.decisions is not None and all(d == "refused" for d in self.decisions.values())

    def allows(self, model: str) -> bool | None:
        """Whether ``model`` may be called (None: the shared state did not decide it)."""
        if self.decisions is None or model not in self.decisions:
            return None
        return self.decisions[model] != "refused"

    def report(self, model: str, *, answered: bool) -> None:
        """``model`` answered (True) or failed (False)."""
        self.reports[model] = answered

    def pending_reports(self) -> dict[str, bool]:
        """What the shared breaker must hear: every failure, and each answer of a model that
        had failures counted or was the probe (an answer of a clean model changes nothing)."""
        decisions = self.decisions or {}
        return {
            model: answered
            for model, answered in self.reports.items()
            if not answered or decisions.get(model, "closed") != "closed"
        }

    @contextlib.contextmanager
    def active(self) -> Iterator[Ticket]:
        """Make this the current ticket (for the judge's breaker) while the block runs."""
        token = current_ticket.set(self)
        try:
            yield self
        finally:
            current_ticket.reset(token)


current_ticket: contextvars.ContextVar[Ticket | None] = contextvars.ContextVar(
    "replyguard_ticket", default=None
)
"""The ticket of the judgement running in this task (None outside one, or without state)."""
