"""The judge prompt: a static rubric and a token-budgeted, nonce-fenced review request.

Order of the review request (critical parts at the edges): user request, user rules, the
agent's own instructions, conversation history, execution metadata, previous feedback,
heartbeat tasks, the reply last, then a one-line format reminder.

Budget: every section is first capped on its own (reply head and tail within
``responseTokenCap``, rules within ``rulesTokenCap``, the newest ``historyTurns`` messages, the
user request within what the system message and a quarter of the budget for the reply leave).
While the prompt, system message included, is over ``contextTokenBudget`` the sections are cut
in this order: agent instructions, history (oldest first), rules, metadata, previous feedback,
the reply's middle, heartbeat tasks, and the user request's middle last of all. Cuts are always
made from the redacted whole text, so markers never nest; a text is tokenized only near its cut
points (a head-and-tail cut tokenizes a head and a tail window, and a second, smaller cut of
the same text reuses them), never in the part that is cut away.

Measuring: a prompt whose UTF-8 size fits the budget fits (a text never has more tokens than
bytes), and is not tokenized at all; when every section's size also fits its own cap, the
prompt is filled at once from the whole sections, with no cutting machinery. Otherwise the
cuts are planned on the sections' own token counts plus the template's, with some slack, and
the rendered prompt is then counted whole with tiktoken (``o200k_base``), never judged by
adding up counts (BPE counts do not add exactly): only a prompt counted within the budget, or
proved within it by its size, is returned.

For every text that goes inside a section:

1. ``redact`` (when given) sees each caller-supplied text whole: the user message, the reply,
   each rules text, the agent instructions, the heartbeat tasks, each previous feedback, and in
   history and metadata each message's text and name and each tool call's name and arguments
   (before they are shortened, so a cut never leaves half a secret). Its exceptions propagate:
   a prompt that could not be redacted is never built, and the caller fails open.

Then, on what a cut kept only (each side of a cut on its own):

2. ``injection.neutralise``: control, bidi, zero-width and other invisible characters become
   visible markers such as ``[U+202E]``.
3. ``injection.without_code``: any copy of this call's section code, look-alikes included,
   becomes ``[code removed]``, so no text can close or forge a fence.

Cleaning can lengthen a text (a marker is longer than the character it shows): a cleaned text
over its cap is cut again, and a cut of a cleaned text is still clean.

This module does no I/O: rules and heartbeat texts arrive already read.
"""

from __future__ import annotations

import functools
import itertools
import json
import secrets
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from replyguard._templates import fill, literal_text, render
from replyguard.context import _tokens as tokens
from replyguard.context._injection import fenced
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


class JudgePrompt:
    """A rendered judge prompt and what it took. Immutable.

    ``tokens`` is the exact o200k_base count of the whole prompt (system message, review
    request and ``MESSAGE_OVERHEAD``). When the build proved the fit from the prompt's UTF-8
    size alone it did not tokenize the prompt, and ``tokens`` is counted on first use.
    """

    __slots__ = ("_tokens", "nonce", "system", "trimmed", "user")
    system: str
    user: str
    nonce: str
    trimmed: tuple[str, ...]
    _tokens: int | None

    def __init__(
        self,
        system: str,
        user: str,
        nonce: str,
        tokens: int | None = None,
        trimmed: tuple[str, ...] = (),
    ) -> None:
        set_ = object.__setattr__
        set_(self, "system", system)
        set_(self, "user", user)
        set_(self, "nonce", nonce)
        set_(self, "trimmed", tuple(trimmed))
        set_(self, "_tokens", tokens)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("a JudgePrompt is immutable")

    def __repr__(self) -> str:
        return (
            f"JudgePrompt(nonce={self.nonce!r}, user={len(self.user):,} characters,"
            f" trimmed={self.trimmed!r})"
        )

    @property
    def tokens(self) -> int:
        """The whole prompt's exact tokens (counted now if the build did not need to)."""
        if self._tokens is None:
            counted = tokens.count(self.system) + tokens.count(self.user) + MESSAGE_OVERHEAD
            object.__setattr__(self, "_tokens", counted)
            return counted
        return self._tokens

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
    try:
        return json.dumps(value, default=str, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        try:
            return repr(value)
        except Exception:  # a repr that fails (or recurses) itself
            return f"[{type(value).__name__}]"


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
    role = _text(message.get("role") or "unknown")
    label = message.get("name") or message.get("tool_call_id")
    content = message.get("content")
    lines = [redact(_content_text(content))] if content not in (None, "", [], {}) else []
    calls = message.get("tool_calls")
    if calls not in (None, [], ""):
        for call in calls if isinstance(calls, list) else [calls]:
            lines.append(_tool_call(call, redact))
    body = "\n".join(line for line in lines if line) or "(no content)"
    header = f"[{role} {redact(_text(label))}]" if label else f"[{role}]"
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
class _Part:
    """One section (or history message) as shown, with its tokens and what it was cut from."""

    source: tokens.Cutter
    """The redacted, uncleaned whole text; every cut starts from it, so markers never nest
    (and a second cut reuses the tokens the first one scanned)."""
    what: str
    ends: bool
    """Cut from the middle (head and tail kept) rather than from the end."""
    shown: tokens.Kept

    @property
    def text(self) -> str:
        return self.shown.text

    def counted(self) -> int:
        """Its exact tokens (counted now when only its size had been looked at)."""
        if not self.shown.counted:
            kept = self.shown
            self.shown = tokens.Kept(kept.text, tokens.count(kept.text), True, kept.cut)
        return self.shown.tokens


_EMPTY = tokens.Kept("", 0, counted=True)


def _fit(source: tokens.Cutter, limit: int, what: str, ends: bool) -> tokens.Kept:
    """``source`` cut to ``limit`` tokens and cleaned (only what is kept is cleaned).

    Cleaning can lengthen a text (a hidden character becomes a marker such as ``[U+200B]``):
    a cleaned text over the limit is cut again. A cut of a cleaned text is still clean: it
    holds no hidden character, and no copy of the code (its markers hold neither).
    """
    kept = source.ends(limit, what) if ends else source.head(limit, what)
    if not kept.changed or tokens.surely_within(kept.text, limit):
        return kept
    again = (
        tokens.fit_ends(kept.text, limit, what) if ends else tokens.fit_head(kept.text, limit, what)
    )
    return tokens.Kept(again.text, again.tokens, again.counted, kept.cut or again.cut)


@dataclass
class _Sections:
    """The review request's parts, each with the text it can be cut again from."""

    budget: int
    user: _Part
    reply: _Part
    rules: _Part
    instructions: _Part
    history: list[_Part]
    metadata: _Part
    feedback: _Part
    heartbeat: _Part
    trimmed: set[str] = field(default_factory=set)

    def values(self, nonce: str) -> dict[str, str]:
        return {
            "nonce": nonce,
            "user_message": self.user.text,
            "rules": self.rules.text,
            "instructions": self.instructions.text,
            "history": "\n\n".join(part.text for part in self.history),
            "metadata": self.metadata.text,
            "feedback": self.feedback.text,
            "heartbeat": self.heartbeat.text,
            "reply": self.reply.text,
        }

    def parts(self) -> list[_Part]:
        singles = [self.rules, self.instructions, self.metadata, self.feedback, self.heartbeat]
        return [self.user, self.reply, *self.history, *singles]

    def estimate(self, nonce: str) -> int:
        """The review request's tokens as the sum of its parts' and the template's own.

        BPE may merge a token or so differently where the parts meet: the fitted prompt is
        counted whole before it is sent.
        """
        return (
            self.template_tokens(nonce)
            + sum(part.counted() for part in self.parts())
            + max(len(self.history) - 1, 0)
        )

    def template_tokens(self, nonce: str) -> int:
        """The tokens of the template's own text around the present sections."""
        return tokens.count(literal_text("judge_context.j2", ("nonce",), **self.values(nonce)))

    def recut(self, part: _Part, limit: int) -> int:
        """Cut ``part`` again, from its source, to ``limit`` tokens; return the tokens saved."""
        before = part.counted()
        part.shown = _fit(part.source, limit, part.what, part.ends)
        return before - part.counted()


def _add_history(sections: _Sections, newest_first: Iterator[_Part], room: int, code: str) -> None:
    """Add the history messages, newest first, until the trim order would drop the rest.

    History goes right after the agent instructions, oldest first: a message is dropped when
    it and the newer ones do not fit beside every other section (instructions left out). The
    messages older than it are then dropped too, without being cut or tokenized at all.
    """
    kept: list[_Part] = []
    size = sum(tokens.size_bound(part.text) for part in sections.parts())
    used: int | None = None
    for part in newest_first:
        kept.append(part)
        size += tokens.size_bound(part.text)
        if size <= room:  # so far all fits by its size (the template aside): nothing to count
            continue  # yet; the measuring afterwards has the last word anyway
        if used is None:
            sections.history = [part]  # the template as it is with a history section
            others = [p for p in sections.parts() if p is not part]
            used = sections.template_tokens(code) + sum(p.counted() for p in others)
            if sections.instructions.text:  # they go before any history
                used -= sections.instructions.counted() + 8
            used += sum(p.counted() + 1 for p in kept[:-1])
        used += part.counted() + 1
        if used > room:
            kept.pop()
            sections.trimmed.add("history")
            break
    sections.history = kept[::-1]


def _shrink_head(sections: _Sections, name: str, over: int) -> int:
    """Cut the end of a free-text section by about ``over`` tokens; return what is left over."""
    part: _Part = getattr(sections, name)
    if not part.text or over <= 0:
        return over
    size = part.counted()
    keep = size - over
    if keep < 40:
        part.shown = tokens.Kept("", 0, True, True)
        sections.trimmed.add(name)
        return over - size
    sections.recut(part, keep)
    sections.trimmed.add(name)
    return 0


def _shrink_ends(sections: _Sections, name: str, over: int, floor: int) -> int:
    """Cut the middle of the reply or user request by about ``over`` tokens."""
    part: _Part = getattr(sections, name)
    if over <= 0:
        return over
    size = part.counted()
    keep = max(size - over, floor)
    if keep >= size:
        return over
    saved = sections.recut(part, keep)
    sections.trimmed.add("reply" if name == "reply" else "user_message")
    return over - saved


def _cut(sections: _Sections, over: int) -> bool:
    """Remove about ``over`` tokens, in the trim order; False when nothing was left to cut.

    The edges (reply, heartbeat tasks, user request) are only cut in a pass that cut nothing
    else: after cutting lower-priority sections the prompt is measured again first, so an
    estimate's slack never costs the parts that matter most.
    """
    before = over
    if sections.instructions.text:
        over -= sections.instructions.counted() + 8
        sections.instructions.shown = tokens.Kept("", 0, True, True)
        sections.trimmed.add("instructions")
    while over > 0 and sections.history:
        over -= sections.history.pop(0).counted() + 2
        sections.trimmed.add("history")
    over = _shrink_head(sections, "rules", over)
    over = _shrink_head(sections, "metadata", over)
    over = _shrink_head(sections, "feedback", over)
    if over != before:
        return True
    # The reply keeps a quarter of the budget before the user request is touched; only when
    # the request is down to its floor too does the reply shrink to its own.
    over = _shrink_ends(sections, "reply", over, max(REPLY_FLOOR, sections.budget // 4))
    over = _shrink_head(sections, "heartbeat", over)
    over = _shrink_ends(sections, "user", over, USER_FLOOR)
    return _shrink_ends(sections, "reply", over, REPLY_FLOOR) != before


def _cleaner(code: str) -> Redact:
    """Section text made safe to fence: invisible characters shown, the code removed."""

    def clean(text: str) -> str:
        return fenced(text, code)

    return clean


def _at_once(
    system: str,
    code: str,
    clean: Redact,
    room: int,
    sections: Sequence[tuple[str, str, int]],
    history: Iterable[str],
    history_cap: int,
    trimmed: tuple[str, ...],
) -> JudgePrompt | None:
    """The prompt with every section whole, when its size alone proves that nothing would be
    cut (each section within its own cap, the filled request within ``room``); else None.

    What it returns is what the cutting path would build (that path keeps a section whole when
    its size proves it fits, and history while the sections' sizes fit ``room``), without
    making a cutter per section. ``sections``: (name, redacted text, cap) per template value;
    ``history``: the rendered messages, newest first, taken only while they fit.
    """
    pieces = [(text, cap) for _, text, cap in sections]
    total = 0
    fitting: list[tuple[str, int]] = []  # sized first: nothing is cleaned for a turn that is cut
    for text, cap in itertools.chain(pieces, ((text, history_cap) for text in history)):
        if not tokens.surely_within(text, cap):  # first: it never encodes a long text
            return None
        total += tokens.size_bound(text)
        if total > room:
            return None
        fitting.append((text, cap))
    kept: list[str] = []
    for text, cap in fitting:
        shown = clean(text) if text else text
        if shown is not text and not tokens.surely_within(shown, cap):
            return None
        kept.append(shown)
    values = {name: shown for (name, _, _), shown in zip(sections, kept, strict=False)}
    values["history"] = "\n\n".join(reversed(kept[len(sections) :]))
    user = fill("judge_context.j2", nonce=code, **values)
    if tokens.size_bound(user) > room:
        return None
    return JudgePrompt(system, user, code, None, trimmed)


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
    clean = _cleaner(code)
    piecewise = redact or _same
    budget = limits.budget
    rules_cap = min(limits.rules_cap, budget)
    history_source = turn.history[-limits.history_turns :] if limits.history_turns else []
    history_cap = min(HISTORY_MESSAGE_CAP, budget // 8)
    rendered: list[str] = []  # history messages rendered so far, newest first

    def history(index: int) -> str:
        while len(rendered) <= index:
            message = history_source[-1 - len(rendered)]
            rendered.append(render_message(message, redact=piecewise))
        return rendered[index]

    def part(source: str, limit: int, what: str, *, ends: bool = False) -> _Part:
        if not source:
            return _Part(tokens.Cutter(""), what, ends, _EMPTY)
        cutter = tokens.Cutter(source, clean)
        return _Part(cutter, what, ends, _fit(cutter, limit, what, ends))

    fixed = _system_tokens()
    system = system_prompt()
    reply_source = piecewise(reply_text)
    reply_cap = min(limits.response_cap, budget)
    # The user request is cut last, after everything but the system message and a quarter of
    # the budget for the reply: it can never keep more than that, so it is not cut longer.
    user_source = piecewise(turn.user_message)
    rules_source = _rules_text(rules, piecewise)
    instructions_source = piecewise((turn.agent_instructions or "").strip())
    metadata_source = render_metadata(meta, turn, redact=piecewise)
    feedback_source = _feedback_text(previous_feedback, piecewise)
    heartbeat_source = piecewise((heartbeat_tasks or "").strip())
    heartbeat_cap = max(rules_cap, min(HEARTBEAT_MIN_CAP, budget))
    history_trimmed = len(turn.history) > len(history_source)
    named = (
        ("user_message", user_source, budget),
        ("rules", rules_source, rules_cap),
        ("instructions", instructions_source, rules_cap),
        ("metadata", metadata_source, METADATA_CAP),
        ("feedback", feedback_source, FEEDBACK_CAP),
        ("heartbeat", heartbeat_source, heartbeat_cap),
        ("reply", reply_source, reply_cap),
    )
    # Room for BPE merging differently where the pieces meet, and for rounding.
    slack = 8 + 2 * (len(named) + len(history_source))
    whole = _at_once(
        system,
        code,
        clean,
        budget - slack - fixed,
        named,
        (history(index) for index in range(len(history_source))),
        history_cap,
        ("history",) if history_trimmed else (),
    )
    if whole is not None:
        return whole
    reply = part(reply_source, reply_cap, "reply", ends=True)
    reply_share = max(REPLY_FLOOR, budget // 4)
    user_cap = budget - fixed - reply_share
    if not tokens.surely_within(user_source, user_cap):  # else no cap below the budget cuts it
        user_cap = budget - fixed - min(reply.counted(), reply_share)
    user_cap = max(user_cap, USER_FLOOR)
    sections = _Sections(
        budget=budget,
        user=part(user_source, user_cap, "user request", ends=True),
        reply=reply,
        rules=part(rules_source, rules_cap, "rules"),
        instructions=part(instructions_source, rules_cap, "instructions"),
        history=[],
        metadata=part(metadata_source, METADATA_CAP, "metadata"),
        feedback=part(feedback_source, FEEDBACK_CAP, "feedback"),
        heartbeat=part(heartbeat_source, heartbeat_cap, "heartbeat tasks"),
    )
    if sections.reply.shown.cut:
        sections.trimmed.add("reply")
    if sections.user.shown.cut:
        sections.trimmed.add("user_message")
    newest_first = (
        part(history(index), history_cap, "message", ends=True)
        for index in range(len(history_source))
    )
    _add_history(sections, newest_first, budget - slack - fixed, code)
    if history_trimmed:
        sections.trimmed.add("history")
    for round_number in range(_ROUNDS):
        user = fill("judge_context.j2", **sections.values(code))
        if fixed + tokens.size_bound(user) <= budget:  # fits by its size: no need to count
            return JudgePrompt(system, user, code, None, tuple(sorted(sections.trimmed)))
        estimate = fixed + sections.estimate(code)
        if estimate > budget - slack and _cut(sections, estimate - budget + slack):
            continue
        total = fixed + tokens.count(user)
        if total <= budget:
            return JudgePrompt(system, user, code, total, tuple(sorted(sections.trimmed)))
        # BPE counts do not add up exactly across pieces: leave more room, more each round.
        slack += total - estimate + 8 * (round_number + 1)
    raise ValueError(f"the judge prompt does not fit in {budget} tokens")
