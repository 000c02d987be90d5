"""What the agent can know about the turn it is running in, and keys its tools can use.

``Verifier.run`` (and ``stream``) give every turn an id when the caller gave none
(``with_turn_id``), and set ``current_turn()`` around each call of the agent
(``agent_attempt``): the turn and the attempt number, readable anywhere inside the agent (its
tools included; a sync agent's thread gets a copy of the context).

``idempotency_key(tool_name, arguments)`` derives a key from the current turn's id, the tool's
name and the canonical JSON of its arguments: the same on every attempt of the turn, different
in another turn, never random. A tool that accepts such a key (a payment API, a mail queue, a
ticket system) then refuses a retry's repeat of a call it already carried out.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import uuid
from contextvars import ContextVar, Token
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from replyguard._randomness import token_bytes
from replyguard.types import Turn

__all__ = [
    "TurnContext",
    "agent_attempt",
    "canonical_arguments",
    "current_turn",
    "enter_attempt",
    "idempotency_key",
    "leave_attempt",
    "with_turn_id",
]


@dataclass(frozen=True, slots=True)
class TurnContext:
    """The turn the agent is running in, and which attempt of it this is."""

    turn: Turn
    """The turn, with its ``id`` (assigned at the start of the run when the caller gave none)."""
    attempt: int
    """1 for the first reply, 2 for the first retry, and so on."""

    @property
    def turn_id(self) -> str:
        """The turn's id (never None inside a run)."""
        return self.turn.id or ""


_CURRENT: ContextVar[TurnContext | None] = ContextVar("replyguard_current_turn", default=None)


def current_turn() -> TurnContext | None:
    """The turn and attempt the calling agent runs in, or None outside ``Verifier.run``."""
    return _CURRENT.get()


def with_turn_id(turn: Turn) -> Turn:
    """``turn`` itself when it has an id; else a copy with a fresh one (once per run). A blank
    id counts as none: turns sharing it would share every idempotency key."""
    turn_id = turn.id  # read once (a read through pydantic's hook costs a call)
    if turn_id is not None and turn_id.strip():
        return turn
    fresh = uuid.UUID(bytes=token_bytes(16), version=4)  # uuid4's, drawn from a batch
    return turn.model_copy(update={"id": f"turn-{fresh.hex}"})


def enter_attempt(scope: TurnContext) -> Token[TurnContext | None]:
    """Make ``scope`` the ``current_turn()`` until ``leave_attempt`` (for a streaming agent,
    whose code runs inside each read of its stream: cheaper per read than ``agent_attempt``)."""
    return _CURRENT.set(scope)


def leave_attempt(token: Token[TurnContext | None]) -> None:
    """Undo ``enter_attempt``. A coroutine destroyed unfinished is closed in whatever context
    collects it, where the token cannot be reset (and the value it would restore is not seen
    anyway): there, nothing."""
    try:  # noqa: SIM105 - contextlib.suppress costs a frame on every turn and stream read
        _CURRENT.reset(token)
    except ValueError:
        pass


class agent_attempt:
    """``current_turn()`` is ``(turn, attempt)`` inside the block, and what it was after it."""

    __slots__ = ("_scope", "_token")

    def __init__(self, turn: Turn, attempt: int) -> None:
        self._scope = TurnContext(turn, attempt)

    def __enter__(self) -> TurnContext:
        self._token = _CURRENT.set(self._scope)  # enter_attempt, without a call more
        return self._scope

    def __exit__(self, *exc: object) -> None:
        try:  # noqa: SIM105 - leave_attempt, without a call more
            _CURRENT.reset(self._token)
        except ValueError:
            pass


def canonical_arguments(arguments: Any) -> str:
    """The canonical JSON of a tool call's arguments: keys sorted, no spaces, a JSON string
    read as the value it holds (so ``'{"a": 1}'`` and ``{"a": 1}`` are the same call).

    Raises ``TypeError`` for a value JSON cannot hold (a set, an object): a key must never
    rest on an object's address."""
    if isinstance(arguments, str):
        with contextlib.suppress(ValueError, RecursionError):  # a plain string stands for itself
            arguments = json.loads(arguments)
    try:
        return json.dumps(
            arguments,
            sort_keys=True,
            separators=(",", ":"),
            ensure_ascii=False,
            allow_nan=False,
            default=_plain,
        )
    except ValueError as exc:  # NaN or infinity, or a cycle
        raise TypeError(f"tool arguments are not JSON: {exc}") from None
    except RecursionError:
        raise TypeError("tool arguments are nested too deep to write as JSON") from None


def _plain(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    raise TypeError(f"tool arguments must be JSON values, not {type(value).__name__}")


def idempotency_key(tool_name: str, arguments: Any = None) -> str:
    """A stable key for one tool call of the current turn: the same turn id, tool name and
    (canonical) arguments give the same key on every attempt; never random.

    Call it inside the agent (or a tool it calls) while ``Verifier.run`` runs it; outside a
    turn it raises ``RuntimeError``, and arguments JSON cannot hold raise ``TypeError``.
    """
    scope = _CURRENT.get()
    if scope is None:
        raise RuntimeError(
            "idempotency_key() needs the current turn: call it inside the agent while "
            "Verifier.run runs it"
        )
    material = json.dumps([scope.turn_id, tool_name, canonical_arguments(arguments)])
    return hashlib.sha256(material.encode("utf-8")).hexdigest()[:32]
