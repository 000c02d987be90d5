"""The circuit breaker with ``state``: the fleet's decisions first, this process's breaker
when the shared state did not decide (Redis unavailable: the judgement's ticket is degraded).

Every report also reaches this process's own breaker, so it is current should Redis go away.
"""

from __future__ import annotations

from replyguard.judge._breaker import CircuitBreaker, State
from replyguard.state import current_ticket

__all__ = ["FleetBreaker"]


class FleetBreaker(CircuitBreaker):
    """A ``CircuitBreaker`` that defers to the current judgement's ``Ticket``."""

    def allow(self, model: str) -> bool:
        """The fleet's decision for ``model`` in this judgement, else the local breaker's."""
        ticket = current_ticket.get()
        allowed = ticket.allows(model) if ticket is not None else None
        return super().allow(model) if allowed is None else allowed

    def record_success(self, model: str) -> None:
        """``model`` answered: tell the ticket (for the fleet) and the local breaker."""
        ticket = current_ticket.get()
        if ticket is not None:
            ticket.report(model, answered=True)
        super().record_success(model)

    def record_failure(self, model: str) -> None:
        """``model`` failed: tell the ticket (for the fleet) and the local breaker."""
        ticket = current_ticket.get()
        if ticket is not None:
            ticket.report(model, answered=False)
        super().record_failure(model)

    def state(self, model: str) -> State:
        """``model``'s circuit as this judgement sees it (open when the fleet refused it)."""
        ticket = current_ticket.get()
        allowed = ticket.allows(model) if ticket is not None else None
        if allowed is None:
            return super().state(model)
        return "closed" if allowed else "open"
