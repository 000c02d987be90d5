"""The ``serve`` section: how ``replyguard serve`` reaches the agent's model and who may call it.

``upstream`` names the OpenAI-compatible endpoint the agent calls go to (absent: litellm's
usual environment, ``OPENAI_API_KEY`` and the rest); ``apiKeys`` the bearer keys a client must
present (absent: anyone on the network may call). Every key is a secret: a literal is masked
when the config is dumped, an ``env:NAME`` reference is read when the server starts (an unset
variable refuses the start), and every value is redacted from every event.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, Field, PlainSerializer, SecretStr

from replyguard.config._checks import FILE_MODEL
from replyguard.config._keys import ApiKey, checked_key, key_values, masked_key, resolved_key

__all__ = ["DEFAULT_MAX_BODY_BYTES", "ServeConfig", "UpstreamConfig"]

DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024

ClientKey = Annotated[
    SecretStr,
    AfterValidator(checked_key),
    PlainSerializer(masked_key, return_type=str, when_used="json"),
]
"""A client's bearer key: a literal (masked when dumped) or ``"env:NAME"``."""


class UpstreamConfig(BaseModel):
    """Where ``replyguard serve`` sends the agent's model calls."""

    model_config = FILE_MODEL

    api_base: str | None = Field(default=None, min_length=1)
    """The OpenAI-compatible base URL (``https://api.openai.com/v1``, a gateway, a local
    server); absent: litellm picks the provider's own from the request's model name."""
    api_key: ApiKey = None
    """The key sent upstream (``"env:NAME"`` is read when the server starts); absent:
    litellm's usual environment variable for the provider. A client's own bearer is never
    forwarded."""

    def resolve_api_key(self) -> str | None:
        """The key to send, reading ``env:NAME`` now (``ConfigError`` when unset)."""
        return resolved_key(self.api_key, "serve.upstream.apiKey")


class ServeConfig(BaseModel):
    """``replyguard serve``: the upstream model endpoint, the clients' keys, request limits."""

    model_config = FILE_MODEL

    upstream: UpstreamConfig | None = None
    """The agent's model endpoint: ``apiBase`` and ``apiKey`` (absent: litellm's usual
    environment)."""
    api_keys: tuple[ClientKey, ...] = Field(default=(), strict=False)
    """Bearer keys a client must present (``Authorization: Bearer <key>``), each a literal or
    ``"env:NAME"`` (an unset variable refuses the start); empty: no key is asked for (a
    warning when the server binds to a non-loopback address)."""
    max_body_bytes: int = Field(default=DEFAULT_MAX_BODY_BYTES, ge=1024, le=1024**3)
    """The largest request body accepted, in bytes (larger: 413)."""

    def resolve_api_keys(self) -> tuple[str, ...]:
        """Every client key, reading ``env:NAME`` now (``ConfigError`` naming the entry and
        the variable when one is unset)."""
        keys: list[str] = []
        for index, key in enumerate(self.api_keys):
            value = resolved_key(key, f"serve.apiKeys[{index}]")
            if value is not None:
                keys.append(value)
        return tuple(keys)

    def secrets(self) -> tuple[str, ...]:
        """Every key of the section (env values read now), for redaction."""
        upstream = key_values(self.upstream.api_key) if self.upstream is not None else ()
        return (*upstream, *(value for key in self.api_keys for value in key_values(key)))
