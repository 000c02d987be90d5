"""The ``state`` section (where a fleet of instances shares its state: one Redis) and
``spendLimits`` (judge spend over UTC-aligned windows of time).

The Redis URL is a secret: a literal URL's password is masked when the config is dumped, an
``env:NAME`` reference is read when the verifier is built (``StateConfig.resolve_url``), and
both the URL and its password are redacted from every event.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal
from urllib.parse import unquote, urlsplit

from pydantic import AfterValidator, BaseModel, Field, PlainSerializer, SecretStr, field_validator

from replyguard.config._checks import FILE_MODEL
from replyguard.config._keys import ENV_PREFIX, MASK, key_values, resolved_key

__all__ = ["SpendLimit", "StateConfig", "url_password", "url_secrets", "window_seconds"]

_SCHEMES = ("redis", "rediss", "unix")
_WINDOW = re.compile(r"(?P<count>[1-9][0-9]*)(?P<unit>[mhd])")
_UNIT_SECONDS = {"m": 60, "h": 3600, "d": 86400}
_DAY = 86400


def window_seconds(window: str) -> int:
    """The length of a ``spendLimits`` window (``"15m"``, ``"1h"``, ``"1d"``) in seconds.

    Raises ``ValueError`` unless it is a whole number of minutes, hours or days that divides a
    day evenly (so every window starts on a UTC boundary: the hour, midnight)."""
    match = _WINDOW.fullmatch(window)
    if match is None:
        raise ValueError('a window is a count and a unit: "15m", "1h", "6h", "1d"')
    seconds = int(match["count"]) * _UNIT_SECONDS[match["unit"]]
    if _DAY % seconds:
        raise ValueError("a window must divide a day evenly (1m ... 1h ... 24h, 1d)")
    return seconds


def url_password(url: str) -> str | None:
    """The password in a Redis URL, if it has one."""
    try:
        return urlsplit(url).password
    except ValueError:
        return None


def url_secrets(url: str) -> tuple[str, ...]:
    """What to redact of a Redis URL: the URL, its password as written and as Redis receives
    it (redis-py percent-decodes it: ``%40`` is ``@``)."""
    password = url_password(url)
    found = (url, password, unquote(password)) if password else (url,)
    return tuple(dict.fromkeys(found))


def _checked_url(value: SecretStr) -> SecretStr:
    raw = value.get_secret_value()
    if raw.startswith(ENV_PREFIX):
        if not raw[len(ENV_PREFIX) :].strip():
            raise ValueError('"env:" must be followed by a variable name')
        return value
    scheme = raw.partition("://")[0].lower()
    if scheme not in _SCHEMES or "://" not in raw:
        raise ValueError('must be "env:NAME" or a redis://, rediss:// or unix:// URL')
    if url_password(raw) == MASK:
        raise ValueError("holds the mask of a password, not a password (a dumped config hides it)")
    return value


def _masked_url(value: SecretStr) -> str:
    """What a dumped config shows: an ``env:`` reference as it is, a URL without its password."""
    raw = value.get_secret_value()
    password = url_password(raw)
    if raw.startswith(ENV_PREFIX) or not password:
        return raw
    scheme, _, rest = raw.partition("://")
    userinfo, _, host = rest.rpartition("@")
    user = userinfo.partition(":")[0]
    return f"{scheme}://{user}:{MASK}@{host}"


RedisUrl = Annotated[
    SecretStr,
    AfterValidator(_checked_url),
    PlainSerializer(_masked_url, return_type=str, when_used="json"),
]


class StateConfig(BaseModel):
    """Where the instances of a fleet share their circuit breaker and spend limits: one Redis."""

    model_config = FILE_MODEL

    redis_url: RedisUrl
    """The Redis to share (``redis://[:password@]host:port/db``, ``rediss://``, ``unix://``);
    ``"env:NAME"`` reads the variable when the verifier is built. A secret: its password is
    never logged or shown (needs the ``redis`` extra)."""
    key_prefix: str = Field(default="replyguard:", min_length=1, max_length=200)
    """Every key replyguard writes starts with this (litellm's Router keeps keys of its own)."""
    timeout_ms: int = Field(default=50, ge=1, le=10000)
    """The longest one Redis call on a turn's path may take (the judge Router's own included);
    then the turn goes on with this instance's own state, and stops asking Redis until it
    answers again."""

    def resolve_url(self) -> str:
        """The URL to connect to, reading ``env:NAME`` now (``ConfigError`` when unset)."""
        url = resolved_key(self.redis_url, "state.redisUrl")
        assert url is not None
        return url

    def secrets(self) -> tuple[str, ...]:
        """The URL and its password (an env value read now), for redaction."""
        return tuple(secret for url in key_values(self.redis_url) for secret in url_secrets(url))


Scope = Literal["global", "agentId", "runKind"]


class SpendLimit(BaseModel):
    """A ceiling on judge spend over a window of time, fleet-wide with ``state``."""

    model_config = FILE_MODEL

    scope: Scope
    """What is counted together: all spend (``global``), each agent's (``agentId``; turns
    without one share a bucket), or each run kind's (``runKind``)."""
    window: str
    """The window: ``"15m"``, ``"1h"``, ``"1d"`` ...; windows start on UTC boundaries
    (the hour, midnight) and must divide a day evenly."""
    usd: float = Field(ge=0)
    """The most the scope may spend on judge calls in one window, in US dollars."""

    @field_validator("window")
    @classmethod
    def _known_window(cls, value: str) -> str:
        window_seconds(value)
        return value

    @property
    def seconds(self) -> int:
        """The window's length in seconds."""
        return window_seconds(self.window)
