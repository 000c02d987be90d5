"""The operator's file: the ``VerifierConfig`` schema, its loader and the parts it is made of.

Below every stage: it imports only ``types``, ``errors`` and the private helpers at the top.
"""

from replyguard.config._keys import ENV_PREFIX, MASK
from replyguard.config._schema import CircuitBreakerConfig, RunKind, VerifierConfig

__all__ = ["ENV_PREFIX", "MASK", "CircuitBreakerConfig", "RunKind", "VerifierConfig"]
