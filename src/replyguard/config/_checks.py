"""The JSON config of the built-in checks: one model per ``"type"``, camelCase keys.

These are plain data; ``replyguard.checks.registry`` turns each into a check instance.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath, PureWindowsPath
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel

from replyguard.types import FailCategory

DEFAULT_MATCH_WINDOW_CHARS = 256
"""The longest ``mustNotMatch`` match of unbounded length looked for while a reply streams."""
MAX_MATCH_WINDOW_CHARS = 4096

JsonType = Literal["string", "number", "integer", "boolean", "object", "array", "null"]


def relative_inside(value: str, key: str) -> str:
    """``value`` if it is a path that stays inside ``workspaceDir``: relative (on POSIX and on
    Windows), without ``..``; else ``ValueError``."""
    if not value.strip():
        raise ValueError(f"{key} must not be empty")
    for flavour in (PurePosixPath(value), PureWindowsPath(value)):
        if flavour.is_absolute() or flavour.anchor:
            raise ValueError(f"{value!r} must be a path relative to workspaceDir")
        if ".." in flavour.parts:
            raise ValueError(f"{value!r} must not leave workspaceDir ('..')")
    return value


FILE_MODEL = ConfigDict(
    alias_generator=to_camel,
    validate_by_name=True,
    validate_by_alias=True,
    extra="forbid",
    frozen=True,
    strict=True,
    hide_input_in_errors=True,
    defer_build=True,
)
"""How every model of the config file reads: camelCase keys, unknown keys refused, strict types,
input never echoed in errors, frozen. Built on first use, not at import; the attribute docstrings
reach the JSON Schema through ``replyguard.config._field_docs``, not at import."""


def _regex(value: str) -> str:
    try:
        re.compile(value)
    except re.error as exc:
        # The pattern itself is not echoed: it may hold a secret, and the key names it.
        raise ValueError(f"not a valid regular expression: {exc}") from None
    return value


class _Model(BaseModel):
    model_config = FILE_MODEL


class FieldRule(_Model):
    """A rule for one field of a JSON reply, addressed by a dotted path (``items.0.name``)."""

    required: bool = True
    """The field must be present."""
    type: JsonType | None = None
    """The JSON type the value must have."""
    pattern: str | None = None
    """A regular expression a string value must match (``re.search``)."""
    minimum: float | None = None
    """The smallest allowed number."""
    maximum: float | None = None
    """The largest allowed number."""
    min_length: int | None = Field(default=None, ge=0)
    """The shortest allowed string or array."""
    max_length: int | None = Field(default=None, ge=0)
    """The longest allowed string or array."""
    enum: list[Any] | None = None
    """The allowed values."""

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        return _regex(value) if value is not None else None


class _CheckSpec(_Model):
    name: str | None = None
    """Shown in feedback and logs; defaults to the check's type."""
    required: bool = False
    """A crash of a required check counts as a FAIL (the agent retries); others are ignored."""


class RulesCheckSpec(_CheckSpec):
    """Length limits, required and forbidden patterns, forbidden phrases."""

    type: Literal["rules"]
    max_length: int | None = Field(default=None, ge=1)
    """The most characters a reply may have."""
    min_length: int | None = Field(default=None, ge=0)
    """The fewest characters a reply may have."""
    must_match: list[str] = Field(default_factory=list)
    """Regular expressions the reply must match (each, ``re.search``)."""
    must_not_match: list[str] = Field(default_factory=list)
    """Regular expressions the reply must not match."""
    forbidden_phrases: list[str] = Field(default_factory=list)
    """Phrases the reply must not contain."""
    case_sensitive: bool = False
    """Match patterns and phrases case-sensitively."""
    match_window_chars: int = Field(
        default=DEFAULT_MATCH_WINDOW_CHARS, ge=0, le=MAX_MATCH_WINDOW_CHARS
    )
    """While a reply streams, a ``mustNotMatch`` pattern whose matches have no bounded length
    (``*``, ``+``, ``{n,}``, an anchor) is searched over this many of the latest characters:
    a match up to this long is caught before any of it is shown, and text that could still
    become one is held back until it is decided. Longer matches are caught on the whole reply
    at the end. ``0`` checks such patterns at the end only."""
    category: FailCategory = Field(default=FailCategory.RULE_VIOLATION, strict=False)
    """The category of a failure."""

    @field_validator("must_match", "must_not_match")
    @classmethod
    def _all_compile(cls, values: list[str]) -> list[str]:
        return [_regex(value) for value in values]


class JsonCheckSpec(_CheckSpec):
    """The reply must be JSON (repaired for free when it can be), valid against a schema."""

    type: Literal["json"]
    expect: Literal["object", "array", "any"] = "any"
    """The top-level shape the reply must have."""
    json_schema: dict[str, Any] | None = Field(default=None, alias="schema")
    """A JSON Schema the value must satisfy."""
    fields: dict[str, FieldRule] = Field(default_factory=dict)
    """Rules per field, by dotted path."""
    deliver_repaired: bool = False
    """Deliver the repaired JSON text instead of the agent's original reply."""
    category: FailCategory = Field(default=FailCategory.RULE_VIOLATION, strict=False)
    """The category of a failure."""


class HttpRequestCheckSpec(_CheckSpec):
    """The reply is an HTTP request spec ``{"method", "url", "headers", "body"}``."""

    type: Literal["http_request"]
    allowed_schemes: list[str] = Field(default_factory=lambda: ["https"])
    """URL schemes allowed."""
    allowed_hosts: list[str] = Field(default_factory=list)
    """Hosts allowed (``*.example.com`` matches subdomains); empty allows any host."""
    allowed_methods: list[str] = Field(
        default_factory=lambda: ["GET", "POST", "PUT", "PATCH", "DELETE"]
    )
    """HTTP methods allowed."""
    required_headers: list[str] = Field(default_factory=list)
    """Headers that must be present (case-insensitive)."""
    category: FailCategory = Field(default=FailCategory.RULE_VIOLATION, strict=False)
    """The category of a failure."""


class CommandCheckSpec(_CheckSpec):
    """Run a command (lint, tests, build); a non-zero exit fails with its output's tail."""

    type: Literal["command"]
    command: list[str] | str
    """The argument list; a single string only with ``shell: true``."""
    shell: bool = False
    """Run ``command`` (a string) through the shell. Off unless you need it."""
    timeout_seconds: float = Field(default=60.0, gt=0, le=3600)
    """Kill the command after this long (the check then fails)."""
    cwd: str | None = None
    """Working directory inside ``workspaceDir`` (default: ``workspaceDir``): a relative path,
    no ``..``, no symbolic link out. Without ``workspaceDir``, relative to the process's."""
    env: dict[str, str] = Field(default_factory=dict)
    """Extra environment variables."""
    pass_reply: Literal["stdin", "file", "none"] = "stdin"
    """How the command gets the reply: on stdin, or as a file named by ``{reply_file}``."""
    tail_chars: int = Field(default=4000, ge=100, le=100_000)
    """How much of the end of the output goes into the feedback."""
    category: FailCategory = Field(default=FailCategory.INCOMPLETE, strict=False)
    """The category of a failure."""

    @field_validator("cwd")
    @classmethod
    def _cwd_inside(cls, value: str | None) -> str | None:
        return None if value is None else relative_inside(value, "cwd")

    @model_validator(mode="after")
    def _shell_needs_string(self) -> CommandCheckSpec:
        if isinstance(self.command, str) and not self.shell:
            raise ValueError("command must be a list of arguments unless shell is true")
        if isinstance(self.command, list) and not self.command:
            raise ValueError("command must not be empty")
        return self


class ClaimCheckSpec(_CheckSpec):
    """A claim of an action ("I sent", "Email sent.", "has been deployed", "Sending it now.")
    needs a successful matching tool call this turn."""

    type: Literal["claims"]
    claims: dict[str, list[str]] | None = None
    """Claimed verb → tool-name patterns (``*send*``); None uses the defaults."""


FigureKind = Literal["amount", "date", "id", "url", "email", "path"]
FIGURE_KINDS: tuple[FigureKind, ...] = ("amount", "date", "id", "url", "email", "path")


class FiguresCheckSpec(_CheckSpec):
    """Every amount, date, ID, URL, e-mail address and file path of the reply must occur in
    the turn's tool results, retrieved context, user message or history (``grounding``)."""

    type: Literal["figures"]
    kinds: list[FigureKind] = Field(default_factory=lambda: list(FIGURE_KINDS), min_length=1)
    """The kinds of figure checked."""


class HeartbeatCheckSpec(_CheckSpec):
    """HEARTBEAT_OK while HEARTBEAT.md has open tasks fails; with none open, it passes outright."""

    type: Literal["heartbeat"]


CheckSpec = Annotated[
    RulesCheckSpec
    | JsonCheckSpec
    | HttpRequestCheckSpec
    | CommandCheckSpec
    | ClaimCheckSpec
    | FiguresCheckSpec
    | HeartbeatCheckSpec,
    Field(discriminator="type"),
]
