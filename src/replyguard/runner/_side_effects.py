"""Which tool calls of a turn changed the world, and what a FAIL does once some did.

A call has a side effect when its record says so (``ToolCallRecord.side_effect``), or, when
the record leaves it open (``None``), when its name matches one of ``sideEffectTools`` (shell-
style globs, case-sensitive); an explicit ``side_effect=False`` wins over any pattern.
``SideEffects.resolved`` settles the flag of every call of the turn's ledger once, so the
checks, the judge prompt, the retry message and the ledger line read the same answer.

``done(calls)``: the successful side-effecting calls, each distinct call once (the same tool
with the same canonical arguments is one action, however often a retry repeated it).
"""

from __future__ import annotations

import fnmatch
import operator
import re
from collections.abc import Iterable, Sequence
from typing import Any

from replyguard.runner._turn_scope import canonical_arguments
from replyguard.types import Reply, ToolCallRecord, replaced

__all__ = ["SideEffects", "describe_call", "done"]

_SHOWN_CHARS = 200


class SideEffects:
    """Resolves the ``side_effect`` flag of tool calls from ``sideEffectTools``."""

    def __init__(self, patterns: Sequence[str]) -> None:
        self._match = (
            re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in patterns)).match
            if patterns
            else None
        )

    def changes_world(self, call: ToolCallRecord) -> bool:
        """Whether ``call`` has a side effect (its own flag first, then the patterns)."""
        if call.side_effect is not None:
            return call.side_effect
        return self._match is not None and self._match(call.name) is not None

    def resolved(self, calls: Iterable[ToolCallRecord]) -> tuple[ToolCallRecord, ...]:
        """``calls`` with every ``side_effect`` flag settled to True or False."""
        flagged: list[ToolCallRecord] = []
        for call in calls:
            if call.side_effect is None:
                call = replaced(call, {"side_effect": self.changes_world(call)})
            flagged.append(call)
        return tuple(flagged)

    def with_turn_ledger(self, reply: Reply, earlier: Sequence[Reply]) -> Reply:
        """``reply`` as checks and judge see it: with the tool calls of the whole turn (the
        earlier attempts' first: "I sent it" may rest on a call an earlier attempt made),
        their side effects settled."""
        meta = reply.meta  # read once (a read through pydantic's hook costs a call)
        own = meta.tool_calls
        if earlier:
            calls = self.resolved((*(c for r in earlier for c in r.meta.tool_calls), *own))
        else:
            calls = self.resolved(own)
        if not calls or (len(calls) == len(own) and all(map(operator.is_, calls, own))):
            return reply  # no earlier calls, each flag already settled: nothing to change
        return replaced(reply, {"meta": replaced(meta, {"tool_calls": calls})})


def _identity(call: ToolCallRecord) -> tuple[str, str]:
    """The call's name and its arguments as text: canonical JSON, else their ``repr``, else
    their type (never raises: an agent's odd arguments must not break the turn)."""
    try:
        return call.name, canonical_arguments(call.arguments)
    except TypeError:
        pass
    try:
        return call.name, repr(call.arguments)
    except Exception:  # a repr that fails or recurses too deep
        return call.name, f"[{type(call.arguments).__name__}]"


def done(calls: Iterable[ToolCallRecord]) -> tuple[ToolCallRecord, ...]:
    """The successful calls flagged as side effects, each distinct call once, in order."""
    seen: set[tuple[str, str]] = set()
    kept: list[ToolCallRecord] = []
    for call in calls:
        if call.side_effect is not True or not call.succeeded:
            continue
        identity = _identity(call)
        if identity not in seen:
            seen.add(identity)
            kept.append(call)
    return tuple(kept)


def describe_call(call: ToolCallRecord) -> str:
    """``name(arguments)``, the arguments as compact JSON cut at 200 characters."""
    arguments: Any = call.arguments
    if arguments is None:
        return f"{call.name}()"
    shown = _identity(call)[1]
    if len(shown) > _SHOWN_CHARS:
        shown = shown[:_SHOWN_CHARS] + "…"
    return f"{call.name}({shown})"
