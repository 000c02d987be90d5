"""State that outlives one turn and may be shared by a fleet of instances: the judge's circuit
breaker and the spend limits over time.

``SharedState`` admits each judgement (one round trip: breaker and spend limits together)
and settles it after (at most one more). Without ``state`` in the config the spend limits are
kept in this process (``_local``); with it, on Redis (``_redis``, imported only then), falling
back to this process's own state while Redis is unavailable. ``Ticket`` carries one
judgement's decisions to the judge's breaker.
"""

from replyguard.state._shared import SharedState
from replyguard.state._ticket import Ticket, current_ticket

__all__ = ["SharedState", "Ticket", "current_ticket"]
