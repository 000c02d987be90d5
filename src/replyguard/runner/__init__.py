"""The verified turn: ``Verifier`` runs the agent, gates, checks and judges its reply, and
retries with feedback, failing open.

Also what a sync entry point of an adapter needs: ``blocked_context``, the context in which the
loop it blocks is never handed a ``run_sync`` turn.

Both names load on first use: importing one of the runner's modules (the config's checks in
``_preflight``, the policy) does not build the whole runner.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from replyguard._public import lazy_package

if TYPE_CHECKING:
    from replyguard.runner._sync import blocked_context
    from replyguard.runner._verifier import Verifier

__all__ = ["Verifier", "blocked_context"]

_LAZY = {"Verifier": "_verifier", "blocked_context": "_sync"}


__getattr__, __dir__ = lazy_package(__name__, globals(), _LAZY)
