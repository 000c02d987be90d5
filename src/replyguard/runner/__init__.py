"""The verified turn: ``Verifier`` runs the agent, gates, checks and judges its reply, and
retries with feedback, failing open."""

from replyguard.runner._verifier import Verifier

__all__ = ["Verifier"]
