"""Deterministic pre-checks: replies that are delivered as they are, without a judgement.

``skip_reason(reply)`` runs on every reply before anything else, so it is pure and cheap: no
I/O, no regular expressions. The first matching reason wins, in this order:

1. ``TOOL_CALLS``: the reply asks for tool calls (``pending_tool_calls > 0``, or a stop
   reason of ``tool_calls``, ``tool_use`` or ``function_call``); it is not a final answer.
2. ``MESSAGING_TOOL_SENT``: the content already reached the user through a messaging tool.
3. ``BLOCK_STREAMING_SENT``: content blocks were already streamed to the user.
4. ``EMPTY_RESPONSE``: the text is empty, or only whitespace and invisible format characters
   (zero-width space, BOM, joiners, ...).
5. ``ERROR_RESPONSE``: the runtime flagged the reply as an error report (``meta.error`` not
   blank, or a stop reason of ``error``).

Stop reasons compare case-insensitively, surrounding whitespace ignored.
"""

from __future__ import annotations

import unicodedata

from replyguard.types import Reply, SkipReason

_TOOL_STOP_REASONS = frozenset({"tool_calls", "tool_use", "function_call"})
_ERROR_STOP_REASON = "error"
_FORMAT_CATEGORY = "Cf"  # invisible format characters: U+200B, U+200D, U+2060, U+FEFF, ...


def skip_reason(reply: Reply) -> SkipReason | None:
    """Why ``reply`` must be delivered without a judgement, or ``None`` to go on."""
    # The metadata's fields read from its ``__dict__`` (a read through pydantic's attribute
    # hook costs a call; these are read on every reply).
    meta = reply.meta.__dict__
    stop_reason = meta["stop_reason"]
    stop = stop_reason.strip().lower() if stop_reason else ""
    if meta["pending_tool_calls"] > 0 or stop in _TOOL_STOP_REASONS:
        return SkipReason.TOOL_CALLS
    if meta["sent_via_messaging_tool"]:
        return SkipReason.MESSAGING_TOOL_SENT
    if meta["streamed_block_keys"]:
        return SkipReason.BLOCK_STREAMING_SENT
    if _is_blank(reply.text):
        return SkipReason.EMPTY_RESPONSE
    if (meta["error"] or "").strip() or stop == _ERROR_STOP_REASON:
        return SkipReason.ERROR_RESPONSE
    return None


def _is_blank(text: str) -> bool:
    first = text[:1]
    if first and first.isprintable() and not first.isspace():
        return False  # an ordinary reply: a visible first character (Cf is not printable)
    # Stops at the first visible character, so a reply costs one or two steps.
    return all(ch.isspace() or unicodedata.category(ch) == _FORMAT_CATEGORY for ch in text)
