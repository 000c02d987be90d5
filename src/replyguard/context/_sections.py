"""Each section's text as the judge reads it: history messages in any JSON shape, the run's
metadata and tool ledger, the rules and the previous feedback (``redact`` sees each piece)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from json.encoder import encode_basestring as _json_string
from typing import Any

from replyguard.context._prompt import TOOL_LEDGER_ROWS, Redact, RulesSource, _same
from replyguard.types import RunMeta, Turn

_ARGUMENT_CHARS = 200
_NO_CALLS: tuple[Any, ...] = (None, [], "")
"""``tool_calls`` values that show no call (compared as ``in`` compares)."""


def _content_text(content: Any) -> str:
    """A message's content as text: a string, content parts, or any other JSON value."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts: list[str] = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict):
                kind = _text(part.get("type", "part"))
                text = part.get("text")
                parts.append(_text(text) if kind == "text" and text is not None else f"[{kind}]")
            else:
                parts.append(f"[{type(part).__name__}]")
        return "\n".join(parts)
    return _text(content)


def _text(value: Any) -> str:
    """``value`` as text: itself when a string, else JSON, else its ``repr`` (never raises for
    an odd value: keys that are not strings, cycles, nesting too deep)."""
    if isinstance(value, str):
        return value
    if type(value) is dict:
        plain = _plain_object(value)
        if plain is not None:
            return plain
    try:
        return json.dumps(value, default=str, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        try:
            return repr(value)
        except Exception:  # a repr that fails (or recurses) itself
            return f"[{type(value).__name__}]"


def _plain_object(value: dict[Any, Any]) -> str | None:
    """``json.dumps(value, ensure_ascii=False)`` for a dict of strings (tool arguments, run
    metadata), written without an encoder (``json.dumps`` with ``default`` makes a new one on
    every call); None for any other dict."""
    items = []
    for key, item in value.items():
        if type(key) is not str or type(item) is not str:
            return None
        items.append(f"{_json_string(key)}: {_json_string(item)}")
    return "{" + ", ".join(items) + "}"


def _short(text: str) -> str:
    return text if len(text) <= _ARGUMENT_CHARS else text[:_ARGUMENT_CHARS] + "…"


def _tool_call(call: Any, redact: Redact) -> str:
    """One entry of ``tool_calls``: ``[calls tool name(arguments)]`` for an OpenAI-style call,
    the entry itself for anything else."""
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict):
        return f"[tool call: {_short(redact(_text(call)))}]"
    name = function.get("name", "?")
    arguments = function.get("arguments", "")
    return f"[calls tool {redact(_text(name))}({_short(redact(_text(arguments)))})]"


def render_message(message: Any, *, redact: Redact = _same) -> str:
    """One history message as text, whatever its JSON shape; ``redact`` sees each piece whole.

    A history comes from the caller as it is: ``tool_calls`` may be a list, one call or a
    number, ``content`` any JSON value, ``role`` and ``name`` anything. Each is shown, none
    stops the judgement.
    """
    if not isinstance(message, dict):
        return f"[unknown] {_short(redact(_text(message)))}"
    role = message.get("role") or "unknown"
    if not isinstance(role, str):
        role = _text(role)
    label = message.get("name") or message.get("tool_call_id")
    content = message.get("content")
    if type(content) is str:  # the usual message, without comparing it to four values
        lines = [redact(content)] if content else []
    else:
        lines = [redact(_content_text(content))] if content not in (None, "", [], {}) else []
    calls = message.get("tool_calls")
    if calls not in _NO_CALLS:
        for call in calls if isinstance(calls, list) else [calls]:
            lines.append(_tool_call(call, redact))
        body = "\n".join(filter(None, lines)) or "(no content)"
    else:  # the content alone (``join`` still refuses a redaction that is not text)
        body = "\n".join(lines) if lines and lines[0] else "(no content)"
    header = f"[{role} {redact(_text(label))}]" if label else f"[{role}]"
    return f"{header} {body}"


def render_metadata(meta: RunMeta | None, turn: Turn, *, redact: Redact = _same) -> str:
    """The execution metadata the judge may use to check claims; ``redact`` sees each value."""
    lines: list[str] = []
    if meta is not None:
        # Fields read from ``__dict__``: a read through pydantic's attribute hook costs a call.
        fields = meta.__dict__
        stop_reason = fields["stop_reason"]
        duration_ms = fields["duration_ms"]
        calls = fields["tool_calls"]
        if stop_reason:
            lines.append(f"stop reason: {redact(stop_reason)}")
        if duration_ms is not None:
            lines.append(f"agent time: {duration_ms:.0f} ms")
        if calls:
            lines.append(f"tool calls this turn ({len(calls)}):")
            for call in calls[:TOOL_LEDGER_ROWS]:
                record = call.__dict__
                succeeded, arguments = record["succeeded"], record["arguments"]
                status = "succeeded" if succeeded else "FAILED"
                if succeeded and record["side_effect"]:
                    status += " [done: a side effect that already happened; never to repeat]"
                shown = _short(redact(_text(arguments))) if arguments is not None else ""
                lines.append(f"- {redact(record['name'])}({shown}) {status}")
            if len(calls) > TOOL_LEDGER_ROWS:
                lines.append(f"- … {len(calls) - TOOL_LEDGER_ROWS} more")
        elif stop_reason is not None:
            lines.append("tool calls this turn: none recorded")
    metadata = turn.metadata
    if metadata:
        data = redact(_text(metadata))
        lines.append("run metadata: " + (data if len(data) <= 1000 else data[:1000] + "…"))
    return "\n".join(lines)


def _rules_text(sources: Sequence[RulesSource], redact: Redact) -> str:
    blocks = [
        f"## {source.origin}\n{redact(source.text).strip()}" for source in sources if source.text
    ]
    return "\n\n".join(blocks)


def _feedback_text(previous: Sequence[str], redact: Redact) -> str:
    if not previous:
        return ""
    return "\n".join(f"Attempt {i}: {redact(text)}" for i, text in enumerate(previous, start=1))
