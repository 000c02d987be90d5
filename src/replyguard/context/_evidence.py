"""The evidence section's text: what the tools returned and what was retrieved for the turn.

Three sources, in this order (the section is cut from its end, so the first survive longest):

1. the results of this reply's tool calls (``ToolCallRecord.result``), in the ledger's order;
2. the turn's retrieved context (``Turn.evidence``), most relevant first as the host gave it;
3. the tool messages of the history (``role: "tool"``), newest first. They also stay in the
   history section; here they survive the history's trimming, which comes before the
   evidence's.

Each entry is labelled (``[tool send_email(...) succeeded]``, ``[retrieved 2]``,
``[tool message call_7]``) and kept to ``ENTRY_CHARS`` characters (its head, marked), so one
huge tool result cannot take the section alone. ``redact`` sees each text whole, before it is
shortened. Fencing and cleaning are the prompt builder's, as for every section.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from replyguard.context._prompt import Redact, _same
from replyguard.context._sections import _content_text, _short, _text
from replyguard.types import RunMeta, Turn

ENTRY_CHARS = 4000
"""The most characters one evidence entry shows (its head, then a marker)."""
SECTION_CHARS = 200_000
"""Entries stop once this many characters are rendered: far more than the section's token cap
keeps (it is cut from its end), so a turn with thousands of passages is not rendered (or
redacted) whole for nothing."""


def _kept(text: str) -> str:
    if len(text) <= ENTRY_CHARS:
        return text
    return f"{text[:ENTRY_CHARS]}… [{len(text) - ENTRY_CHARS} more characters not shown]"


def _tool_results(meta: RunMeta | None, redact: Redact) -> Iterator[str]:
    if meta is None:
        return
    for call in meta.tool_calls:
        if call.result is None:
            continue
        arguments = _short(redact(_text(call.arguments))) if call.arguments is not None else ""
        status = "succeeded" if call.succeeded else "FAILED"
        label = f"[tool {redact(call.name)}({arguments}) {status}]"
        yield f"{label}\n{_kept(redact(_text(call.result)))}"


def _retrieved(turn: Turn, redact: Redact) -> Iterator[str]:
    for number, passage in enumerate(turn.evidence, start=1):
        text = redact(passage).strip()
        if text:
            yield f"[retrieved {number}]\n{_kept(text)}"


def _tool_messages(history: list[dict[str, Any]], redact: Redact) -> Iterator[str]:
    for message in reversed(history):
        if not isinstance(message, dict) or message.get("role") != "tool":
            continue
        text = redact(_content_text(message.get("content"))).strip()
        if not text:
            continue
        label = message.get("name") or message.get("tool_call_id")
        named = f" {redact(_text(label))}" if label else ""
        yield f"[tool message{named}]\n{_kept(text)}"


def render_evidence(meta: RunMeta | None, turn: Turn, *, redact: Redact = _same) -> str:
    """The evidence the judge checks the reply's claims and figures against ("" for none):
    entries in order until ``SECTION_CHARS`` is passed, then a count of those left out."""
    sources: list[Iterator[str]] = []  # only those with something to walk
    if meta is not None and meta.tool_calls:
        sources.append(_tool_results(meta, redact))
    if turn.evidence:
        sources.append(_retrieved(turn, redact))
    history = turn.history  # read once (a read through pydantic's hook costs a call)
    if history:
        sources.append(_tool_messages(history, redact))
    entries: list[str] = []
    size = 0
    for source in sources:
        for entry in source:
            if size > SECTION_CHARS:
                entries.append("[more evidence not shown]")
                return "\n\n".join(entries)
            entries.append(entry)
            size += len(entry)
    return "\n\n".join(entries)
