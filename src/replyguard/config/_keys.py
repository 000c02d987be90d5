"""API keys in a config: a literal key or an ``env:NAME`` reference, validated, masked when
dumped, resolved at call time, and listed for redaction.

Used for the verifier's own ``apiKey`` and for each router deployment's.
"""

from __future__ import annotations

import os
from typing import Annotated

from pydantic import AfterValidator, PlainSerializer, SecretStr

from replyguard.errors import ConfigError

ENV_PREFIX = "env:"
MASK = "**********"


def checked_key(value: SecretStr | None) -> SecretStr | None:
    """``value``, refusing an ``env:`` without a name and a dumped mask given back as a key."""
    if value is not None:
        raw = value.get_secret_value()
        if raw.startswith(ENV_PREFIX) and not raw[len(ENV_PREFIX) :].strip():
            raise ValueError('"env:" must be followed by a variable name')
        if raw == MASK:
            raise ValueError("is the mask of a key, not a key (a dumped config hides it)")
    return value


def masked_key(value: SecretStr | None) -> str | None:
    """What a dumped config shows: an ``env:`` reference as it is, a literal key masked."""
    if value is None:
        return None
    raw = value.get_secret_value()
    return raw if raw.startswith(ENV_PREFIX) else MASK


def resolved_key(value: SecretStr | None, key: str) -> str | None:
    """The key to send, reading ``env:NAME`` now. Raises ``ConfigError`` naming ``key`` when the
    variable is not set."""
    if value is None:
        return None
    raw = value.get_secret_value()
    if not raw.startswith(ENV_PREFIX):
        return raw
    name = raw[len(ENV_PREFIX) :].strip()
    resolved = os.environ.get(name)
    if not resolved:
        raise ConfigError(None, [(key, f"environment variable {name} is not set")])
    return resolved


def literal_key(value: SecretStr | None) -> str | None:
    """The key itself when ``value`` is one (``resolved_key`` returns it as it is, on every
    call); None when it is unset or an ``env:NAME`` reference (read on each call)."""
    if value is None:
        return None
    raw = value.get_secret_value()
    return None if raw.startswith(ENV_PREFIX) else raw


def key_values(value: SecretStr | None) -> tuple[str, ...]:
    """The secret value ``value`` stands for, for redaction (an env value read now; none when
    the variable is unset)."""
    if value is None:
        return ()
    raw = value.get_secret_value()
    if not raw.startswith(ENV_PREFIX):
        return (raw,)
    resolved = os.environ.get(raw[len(ENV_PREFIX) :].strip())
    return (resolved,) if resolved else ()


ApiKey = Annotated[
    SecretStr | None,
    AfterValidator(checked_key),
    PlainSerializer(masked_key, return_type=str | None, when_used="json"),
]
"""An API key field: validated by ``checked_key``, dumped to JSON by ``masked_key``."""
