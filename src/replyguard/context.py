"""The judge prompt: a static rubric and a token-budgeted, nonce-fenced review request.

Order of the review request (critical parts at the edges): user request, user rules, the
agent's own instructions, conversation history, execution metadata, previous feedback,
heartbeat tasks, the reply last, then a one-line format reminder.

Budget: every section is first capped on its own (reply head and tail within
``responseTokenCap``, rules within ``rulesTokenCap``, the newest ``historyTurns`` messages).
Then the whole prompt, system message included, is rendered and counted with tiktoken; while it
is over ``contextTokenBudget`` the sections are cut in this order: agent instructions, history
(oldest first), rules, metadata, previous feedback, the reply's middle, heartbeat tasks, and
the user request's middle last of all. Cuts are always made from the cleaned whole text, so
markers never nest, and they never tokenize more than they keep.

Cleaning, before any cut, for every text that goes inside a section:

1. ``redact`` (when given) sees each caller-supplied text whole: the user message, the reply,
   each rules text, the agent instructions, the heartbeat tasks, each previous feedback, and in
   history and metadata each message's text and name and each tool call's name and arguments
   (before they are shortened, so a cut never leaves half a secret). Its exceptions propagate:
   a prompt that could not be redacted is never built, and the caller fails open.
2. ``injection.neutralise``: control, bidi, zero-width and other invisible characters become
   visible markers such as ``[U+202E]``.
3. ``injection.without_code``: any copy of this call's section code, look-alikes included,
   becomes ``[code removed]``, so no text can close or forge a fence.

This module does no I/O: rules and heartbeat texts arrive already read.
"""

from __future__ import annotations

import functools
import json
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from replyguard import tokens
from replyguard._prompts import render
from replyguard.injection import neutralise, without_code
from replyguard.types import RunMeta, Turn

# Per-message framing of a chat prompt, counted on top of the texts (OpenAI counts 3-4).
MESSAGE_OVERHEAD = 8
# What is always kept of the two edges, in tokens, however small the budget.
USER_FLOOR = 64
REPLY_FLOOR = 128
HISTORY_MESSAGE_CAP = 1000
METADATA_CAP = 600
FEEDBACK_CAP = 800
HEARTBEAT_MIN_CAP = 600
TOOL_LEDGER_ROWS = 30
_ARGUMENT_CHARS = 200
_ROUNDS = 8

Redact = Callable[[str], str]
"""Rewrites a text before the judge sees it (PII removal); must return a string."""


def _same(text: str) -> str:
    return text


@dataclass(frozen=True)
class ContextLimits:
    """The token limits of one judge prompt."""

    budget: int = 8000
    response_cap: int = 3000
    rules_cap: int = 2000
    history_turns: int = 5


@dataclass(frozen=True)
class RulesSource:
    """One block of user rules and where it came from (a file name, or code)."""

    origin: str
    text: str


@dataclass(frozen=True)
class JudgePrompt:
    """A rendered judge prompt and what it took."""

    system: str
    user: str
    nonce: str
    tokens: int
    trimmed: tuple[str, ...] = ()

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The chat messages to send: the static rubric, then the review request."""
        return [{"role": "system", "content": self.system}, {"role": "user", "content": self.user}]


def new_nonce() -> str:
    """A fresh random section code for one judge call."""
    return secrets.token_hex(6)


@functools.cache
def system_prompt() -> str:
    """The rubric: identical on every call, so providers can cache it."""
    return render("judge_system.j2")


@functools.cache
def _system_tokens() -> int:
    return tokens.count(system_prompt()) + MESSAGE_OVERHEAD


# -- rendering pieces ----------------------------------------------------------------------


def _content_text(content: Any) -> str:
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
                kind = str(part.get("type", "part"))
                text = part.get("text")
                parts.append(str(text) if kind == "text" and text is not None else f"[{kind}]")
            else:
                parts.append(f"[{type(part).__name__}]")
        return "\n".join(parts)
    return str(content)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)


def _short(text: str) -> str:
    return text if len(text) <= _ARGUMENT_CHARS else text[:_ARGUMENT_CHARS] + "…"


def render_message(message: Any, *, redact: Redact = _same) -> str:
    """One history message as text, whatever its shape; ``redact`` sees each piece whole."""
    if not isinstance(message, dict):
        return f"[unknown] {_short(redact(_text(message)))}"
    role = str(message.get("role") or "unknown")
    label = message.get("name") or message.get("tool_call_id")
    content = message.get("content")
    lines = [redact(_content_text(content))] if content else []
    for call in message.get("tool_calls") or []:
        function = call.get("function", {}) if isinstance(call, dict) else {}
        name = function.get("name", "?") if isinstance(function, dict) else "?"
        arguments = function.get("arguments", "") if isinstance(function, dict) else ""
        lines.append(f"[calls tool {redact(str(name))}({_short(redact(_text(arguments)))})]")
    body = "\n".join(line for line in lines if line) or "(no content)"
    header = f"[{role} {redact(str(label))}]" if label else f"[{role}]"
    return f"{header} {body}"


def render_metadata(meta: RunMeta | None, turn: Turn, *, redact: Redact = _same) -> str:
    """The execution metadata the judge may use to check claims; ``redact`` sees each value."""
    lines: list[str] = []
    if meta is not None:
        if meta.stop_reason:
            lines.append(f"stop reason: {redact(meta.stop_reason)}")
        if meta.duration_ms is not None:
            lines.append(f"agent time: {meta.duration_ms:.0f} ms")
        if meta.tool_calls:
            lines.append(f"tool calls this turn ({len(meta.tool_calls)}):")
            for call in meta.tool_calls[:TOOL_LEDGER_ROWS]:
                status = "succeeded" if call.succeeded else "FAILED"
                arguments = (
                    _short(redact(_text(call.arguments))) if call.arguments is not None else ""
                )
                lines.append(f"- {redact(call.name)}({arguments}) {status}")
            if len(meta.tool_calls) > TOOL_LEDGER_ROWS:
                lines.append(f"- … {len(meta.tool_calls) - TOOL_LEDGER_ROWS} more")
        elif meta.stop_reason is not None:
            lines.append("tool calls this turn: none recorded")
    if turn.metadata:
        data = redact(_text(turn.metadata))
        lines.append("run metadata: " + (data if len(data) <= 1000 else data[:1000] + "…"))
    return "\n".join(lines)


def _rules_text(sources: Sequence[RulesSource], redact: Redact) -> str:
    blocks = [
        f"## {source.origin}\n{redact(source.text).strip()}" for source in sources if source.text
    ]
    return "\n\n".join(blocks)


def _feedback_text(previous: Sequence[str], redact: Redact) -> str:
    return "\n".join(f"Attempt {i}: {redact(text)}" for i, text in enumerate(previous, start=1))


# -- fitting -------------------------------------------------------------------------------


@dataclass
class _Sections:
    """The review request's parts, with their cleaned whole texts for re-cutting."""

    budget: int
    user_original: str
    reply_original: str
    user: str
    reply: str
    rules: str
    instructions: str
    history: list[str]
    metadata: str
    feedback: str
    heartbeat: str
    trimmed: set[str] = field(default_factory=set)

    def values(self, nonce: str) -> dict[str, Any]:
        return {
            "nonce": nonce,
            "user_message": self.user,
            "rules": self.rules,
            "instructions": self.instructions,
            "history": "\n\n".join(self.history),
            "metadata": self.metadata,
            "feedback": self.feedback,
            "heartbeat": self.heartbeat,
            "reply": self.reply,
        }


def _shrink_head(sections: _Sections, name: str, over: int, what: str) -> int:
    """Cut the end of a free-text section by about ``over`` tokens; return what is left over."""
    text: str = getattr(sections, name)
    if not text or over <= 0:
        return over
    size = tokens.count(text)
    keep = size - over
    if keep < 40:
        setattr(sections, name, "")
        sections.trimmed.add(name)
        return over - size
    setattr(sections, name, tokens.keep_head(text, keep, what))
    sections.trimmed.add(name)
    return 0


def _shrink_ends(sections: _Sections, name: str, over: int, floor: int) -> int:
    """Cut the middle of the reply or user request by about ``over`` tokens, from the original."""
    text: str = getattr(sections, name)
    if over <= 0:
        return over
    size = tokens.count(text)
    keep = max(size - over, floor)
    if keep >= size:
        return over
    original: str = getattr(sections, f"{name}_original")
    what = "reply" if name == "reply" else "user request"
    setattr(sections, name, tokens.keep_ends(original, keep, what))
    sections.trimmed.add("reply" if name == "reply" else "user_message")
    return over - (size - keep)


def _cut(sections: _Sections, over: int) -> None:
    """Remove about ``over`` tokens, in the trim order.

    The edges (reply, heartbeat tasks, user request) are only cut in a pass that cut nothing
    else: after cutting lower-priority sections the prompt is measured again first, so an
    estimate's slack never costs the parts that matter most.
    """
    before = over
    if sections.instructions:
        over -= tokens.count(sections.instructions) + 8
        sections.instructions = ""
        sections.trimmed.add("instructions")
    while over > 0 and sections.history:
        over -= tokens.count(sections.history.pop(0)) + 2
        sections.trimmed.add("history")
    over = _shrink_head(sections, "rules", over, "rules")
    over = _shrink_head(sections, "metadata", over, "metadata")
    over = _shrink_head(sections, "feedback", over, "previous feedback")
    if over != before:
        return
    # The reply keeps a quarter of the budget before the user request is touched; only when
    # the request is down to its floor too does the reply shrink to its own.
    over = _shrink_ends(sections, "reply", over, max(REPLY_FLOOR, sections.budget // 4))
    over = _shrink_head(sections, "heartbeat", over, "heartbeat tasks")
    over = _shrink_ends(sections, "user", over, USER_FLOOR)
    _shrink_ends(sections, "reply", over, REPLY_FLOOR)


def _cleaner(code: str, redact: Redact | None) -> Redact:
    """Section text made safe to fence: redacted, invisible characters shown, the code removed.

    Only the (caller-supplied) texts pass through ``redact``; the rendered history and metadata
    were redacted piece by piece and are only neutralised here.
    """

    def clean(text: str) -> str:
        return without_code(neutralise(redact(text) if redact else text), code)

    return clean


def build_judge_prompt(
    turn: Turn,
    reply_text: str,
    *,
    limits: ContextLimits,
    rules: Sequence[RulesSource] = (),
    heartbeat_tasks: str | None = None,
    previous_feedback: Sequence[str] = (),
    meta: RunMeta | None = None,
    nonce: str | None = None,
    redact: Redact | None = None,
) -> JudgePrompt:
    """Assemble the judge prompt for one reply within ``limits.budget`` tokens.

    ``redact`` rewrites every caller-supplied text before anything else happens to it (see the
    module doc); an exception it raises propagates, and no prompt is built.
    """
    code = nonce or new_nonce()
    clean = _cleaner(code, redact)
    shown = _cleaner(code, None)  # for texts rendered from already-redacted pieces
    piecewise = redact or _same
    system = system_prompt()
    budget = limits.budget
    rules_cap = min(limits.rules_cap, budget)
    user_text = clean(turn.user_message)
    reply_clean = clean(reply_text)
    user = tokens.keep_ends(user_text, budget, "user request")
    reply = tokens.keep_ends(reply_clean, min(limits.response_cap, budget), "reply")
    history_source = turn.history[-limits.history_turns :] if limits.history_turns else []
    history_cap = min(HISTORY_MESSAGE_CAP, budget // 8)
    rules_text = shown(_rules_text(rules, piecewise))
    sections = _Sections(
        budget=budget,
        user_original=user_text,
        reply_original=reply_clean,
        user=user,
        reply=reply,
        rules=tokens.keep_head(rules_text, rules_cap, "rules") if rules_cap else "",
        instructions=tokens.keep_head(
            clean((turn.agent_instructions or "").strip()), rules_cap, "instructions"
        ),
        history=[
            tokens.keep_ends(shown(render_message(m, redact=piecewise)), history_cap, "message")
            for m in history_source
        ],
        metadata=tokens.keep_head(
            shown(render_metadata(meta, turn, redact=piecewise)), METADATA_CAP, "metadata"
        ),
        feedback=tokens.keep_head(
            shown(_feedback_text(previous_feedback, piecewise)), FEEDBACK_CAP, "feedback"
        ),
        heartbeat=tokens.keep_head(
            clean((heartbeat_tasks or "").strip()),
            max(rules_cap, min(HEARTBEAT_MIN_CAP, budget)),
            "heartbeat tasks",
        ),
    )
    if reply != reply_clean:
        sections.trimmed.add("reply")
    if user != user_text:
        sections.trimmed.add("user_message")
    if len(turn.history) > len(history_source):
        sections.trimmed.add("history")
    fixed = _system_tokens()
    for round_number in range(_ROUNDS):
        user = render("judge_context.j2", **sections.values(code))
        total = fixed + tokens.count(user)
        if total <= budget:
            return JudgePrompt(system, user, code, total, tuple(sorted(sections.trimmed)))
        # BPE counts do not add up exactly across pieces: overshoot a little, more each round.
        _cut(sections, total - budget + 8 * (round_number + 1) + (total - budget) // 20)
    raise ValueError(f"the judge prompt does not fit in {budget} tokens")
