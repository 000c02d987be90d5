"""Is this reply judged at all? Pre-checks (skip reasons) and triggers, no I/O."""

from replyguard.gate._prechecks import skip_reason
from replyguard.gate._triggers import TriggerKind, TriggerMatcher

__all__ = ["TriggerKind", "TriggerMatcher", "skip_reason"]
