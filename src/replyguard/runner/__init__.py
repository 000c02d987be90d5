"""The verified turn: ``Verifier`` runs the agent, gates, checks and judges its reply, and
retries with feedback, failing open.

Also what a sync entry point of an adapter needs: ``blocked_context``, the context in which the
loop it blocks is never handed a ``run_sync`` turn.
"""

from replyguard.runner._sync import blocked_context
from replyguard.runner._verifier import Verifier

__all__ = ["Verifier", "blocked_context"]
