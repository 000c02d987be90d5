"""The judge prompt: a static rubric and a token-budgeted, nonce-fenced review request.

Order of the review request (critical parts at the edges): user request, user rules, the
agent's own instructions, conversation history, execution metadata, evidence (tool results
and retrieved context, ``_evidence``), previous feedback, heartbeat tasks, the reply last,
then a one-line format reminder.

Budget: every section is first capped on its own (reply head and tail within
``responseTokenCap``, rules within ``rulesTokenCap``, the newest ``historyTurns`` messages, the
user request within what the system message and a quarter of the budget for the reply leave,
the evidence within ``EVIDENCE_CAP`` or a quarter of the budget). While the prompt, system
message included, is over ``contextTokenBudget`` the sections are cut in this order: agent
instructions, history (oldest first), evidence (from its end), rules, metadata, previous
feedback, the reply's middle, heartbeat tasks, and the user request's middle last of all.
Cuts are always made from the redacted whole text, so markers never nest; a text is tokenized
only near its cut points (a head-and-tail cut tokenizes a head and a tail window, and a
second, smaller cut of the same text reuses them), never in the part that is cut away.

Measuring: a prompt whose UTF-8 size fits the budget fits (a text never has more tokens than
bytes), and is not tokenized at all; when every section's size also fits its own cap, the
prompt is filled at once from the whole sections, with no cutting machinery. Otherwise the
cuts are planned on the sections' own token counts plus the template's, with some slack, and
the rendered prompt's exact tiktoken count (``o200k_base``) is then taken: BPE counts do not
add up in general, but they do across a point where tiktoken's pre-tokenizer always splits
(``_joins``), so the sections' exact counts are reused and only the template's text and the
few characters where a section meets it are tokenized again (a section whose count is not
exact is tokenized with its surroundings). Only a prompt counted within the budget, or proved
within it by its size, is returned.

For every text that goes inside a section:

1. ``redact`` (when given) sees each caller-supplied text whole: the user message, the reply,
   each rules text, the agent instructions, the heartbeat tasks, each previous feedback, each
   evidence passage and tool result, and in history and metadata each message's text and
   name and each tool call's name and arguments
   (before they are shortened, so a cut never leaves half a secret). Its exceptions propagate:
   a prompt that could not be redacted is never built, and the caller fails open.

Then, on what a cut kept only (each side of a cut on its own):

2. ``_sanitise.neutralise``: control, bidi, zero-width and other invisible characters become
   visible markers such as ``[U+202E]``.
3. ``_sanitise.without_code``: any copy of this call's section code, look-alikes included,
   becomes ``[code removed]``, so no text can close or forge a fence.

Cleaning can lengthen a text (a marker is longer than the character it shows): a cleaned text
over its cap is cut again, and a cut of a cleaned text is still clean.

This module does no I/O: rules and heartbeat texts arrive already read.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from operator import le
from typing import Any

from replyguard._templates import Filler, fill
from replyguard.context import _tokens as tokens
from replyguard.context._evidence import render_evidence
from replyguard.context._fitting import _EMPTY, _add_history, _cut, _fit, _Part, _Sections
from replyguard.context._prompt import (
    DEFAULT_RUBRIC,
    REPLY_FLOOR,
    USER_FLOOR,
    ContextLimits,
    JudgePrompt,
    Redact,
    Rubric,
    RulesSource,
    SectionCaps,
    _same,
    new_nonce,
)
from replyguard.context._sanitise import fenced, nothing_to_fence
from replyguard.context._sections import (
    _feedback_text,
    _rules_text,
    render_message,
    render_metadata,
)
from replyguard.types import RunMeta, Turn

_ROUNDS = 8


_SECTIONS = (
    "user_message",
    "rules",
    "instructions",
    "metadata",
    "evidence",
    "feedback",
    "heartbeat",
    "reply",
)
"""The review request's values that are sections (all but the history), in ``_Sources``'
order."""
_WHERE = {name: index for index, name in enumerate(_SECTIONS)}
_REQUEST = Filler("judge_context.j2", ("nonce", "categories", *_SECTIONS, "history"))
"""Fills the review request from (code, categories, each section's text, the history)."""


def _cleaner(code: str) -> Redact:
    """Section text made safe to fence: invisible characters shown, the code removed."""

    def clean(text: str) -> str:
        return fenced(text, code)

    return clean


class _Sources:
    """The redacted whole texts of one prompt's sections, each with its cap, and the history
    messages rendered on demand, newest first (only as many as the fitting asks for)."""

    __slots__ = (
        "caps",
        "history_cap",
        "history_source",
        "history_trimmed",
        "redact",
        "rendered",
        "texts",
    )

    def __init__(
        self,
        texts: tuple[str, ...],
        caps: SectionCaps,
        history_source: list[Any],
        history_trimmed: bool,
        redact: Redact,
    ) -> None:
        self.texts = texts
        """Each section's redacted text, in ``_SECTIONS``' order."""
        self.caps = caps.sections
        self.history_cap = caps.history
        self.history_source = history_source
        self.history_trimmed = history_trimmed
        self.redact = redact
        self.rendered: list[str] = []

    def text(self, name: str) -> str:
        return self.texts[_WHERE[name]]

    def cap(self, name: str) -> int:
        return self.caps[_WHERE[name]]

    def history(self, index: int) -> str:
        """The ``index``-th newest history message, rendered (once)."""
        while len(self.rendered) <= index:
            message = self.history_source[-1 - len(self.rendered)]
            self.rendered.append(render_message(message, redact=self.redact))
        return self.rendered[index]

    def newest(self) -> Iterator[str]:
        """The history messages rendered (once each), newest first, as they are asked for."""
        rendered = self.rendered
        for index, message in enumerate(reversed(self.history_source)):
            if index == len(rendered):
                rendered.append(render_message(message, redact=self.redact))
            yield rendered[index]


def _sources(
    turn: Turn,
    reply_text: str,
    limits: ContextLimits,
    rules: Sequence[RulesSource],
    heartbeat_tasks: str | None,
    previous_feedback: Sequence[str],
    meta: RunMeta | None,
    redact: Redact,
) -> _Sources:
    """Every section's text, redacted whole (``redact`` sees each caller-supplied text)."""
    history = turn.history  # read once (a read through pydantic's hook costs a call)
    history_source = history[-limits.history_turns :] if limits.history_turns else []
    texts = (
        redact(turn.user_message),
        _rules_text(rules, redact),
        redact((turn.agent_instructions or "").strip()),
        render_metadata(meta, turn, redact=redact),
        render_evidence(meta, turn, redact=redact),
        _feedback_text(previous_feedback, redact),
        redact((heartbeat_tasks or "").strip()),
        redact(reply_text),
    )
    trimmed = len(history) > len(history_source)
    return _Sources(texts, limits._caps, history_source, trimmed, redact)


def _at_once(
    sources: _Sources, system: str, code: str, room: int, categories: str
) -> JudgePrompt | None:
    """The prompt with every section whole, when its size alone proves that nothing would be
    cut (each section within its own cap, the filled request within ``room``); else None.

    What it returns is what the cutting path would build (that path keeps a section whole when
    its size proves it fits, and history while the sections' sizes fit ``room``), without
    making a cutter per section. The history messages are rendered newest first, only while
    they fit. Nothing is cleaned for a turn that is cut.
    """
    texts, caps = sources.texts, sources.caps
    sizes = list(map(len, texts))  # a text has at least as many bytes as characters
    if not all(map(le, sizes, caps)):
        return None
    if not all(map(str.isascii, texts)):  # only texts within their caps are encoded
        sizes = list(map(tokens.size_bound, texts))
        if not all(map(le, sizes, caps)):
            return None
    total = sum(sizes)
    if total > room:
        return None
    history: list[str] = []
    cap = sources.history_cap
    for text in sources.newest():
        # tokens.size_bound, written out: only a text shorter than its cap is encoded.
        if text.isascii():
            bound = len(text)
        elif len(text) > cap:
            return None
        else:
            bound = len(text.encode("utf-8", "surrogatepass"))
        total += bound
        if bound > cap or total > room:
            return None
        history.append(text)
    kept = [*texts, *history]
    if not nothing_to_fence("\n".join(kept), code):  # one look at all: then none is cleaned
        cleaned = _cleaned(kept, [*caps, *(cap for _ in history)], code)
        if cleaned is None:
            return None
        kept = cleaned
    history_text = "\n\n".join(reversed(kept[len(texts) :]))
    user = _REQUEST((code, categories, *kept[: len(texts)], history_text))
    if tokens.size_bound(user) > room:
        return None
    trimmed = ("history",) if sources.history_trimmed else ()
    return JudgePrompt(system, user, code, None, trimmed)


def _cleaned(texts: list[str], caps: list[int], code: str) -> list[str] | None:
    """Each text cleaned; None when a cleaned text might be over its cap."""
    clean = _cleaner(code)
    kept = []
    for text, cap in zip(texts, caps, strict=True):
        shown = clean(text) if text else text
        if shown is not text and not tokens.surely_within(shown, cap):
            return None
        kept.append(shown)
    return kept


def _whole(
    sources: _Sources, rubric: Rubric, code: str, budget: int, slack: int
) -> tuple[JudgePrompt | None, int]:
    """The prompt with every section whole when its size proves it fits (else None), and the
    system message's tokens as far as they had to be counted (a bound when they did not)."""
    bound = rubric.tokens_at_most
    system, categories = rubric.system, rubric.category_names
    whole = _at_once(sources, system, code, budget - slack - bound, categories)
    if whole is not None:
        return whole, bound
    fixed = rubric.tokens
    if fixed < bound:
        whole = _at_once(sources, system, code, budget - slack - fixed, categories)
    return whole, fixed


def _part_maker(code: str, reply_scans: tokens.Cutter | None) -> Callable[..., _Part]:
    """Makes a section's part: its text cut to a limit and cleaned (the reply's cutter reused
    from ``reply_scans`` when it is the same text)."""
    clean = _cleaner(code)

    def part(source: str, limit: int, what: str, *, ends: bool = False) -> _Part:
        if not source:
            return _Part(tokens.Cutter(""), what, ends, _EMPTY)
        if reply_scans is not None and source is reply_scans.text:
            cutter = reply_scans.cleaning(clean)
        else:
            cutter = tokens.Cutter(source, clean)
        return _Part(cutter, what, ends, _fit(cutter, limit, what, ends))

    return part


def _capped(
    sources: _Sources,
    part: Callable[..., _Part],
    budget: int,
    fixed: int,
    categories: str,
) -> _Sections:
    """Every section cut to its own cap; the user request to what the system message and a
    quarter of the budget for the reply leave (it can never keep more, so it is not cut
    longer)."""
    text, cap = sources.text, sources.cap
    reply = part(text("reply"), cap("reply"), "reply", ends=True)
    reply_share = max(REPLY_FLOOR, budget // 4)
    user_cap = budget - fixed - reply_share
    if not tokens.surely_within(text("user_message"), user_cap):  # else no cap below cuts it
        user_cap = budget - fixed - min(reply.counted(), reply_share)
    user_cap = max(user_cap, USER_FLOOR)
    sections = _Sections(
        budget=budget,
        user=part(text("user_message"), user_cap, "user request", ends=True),
        reply=reply,
        rules=part(text("rules"), cap("rules"), "rules"),
        instructions=part(text("instructions"), cap("instructions"), "instructions"),
        history=[],
        metadata=part(text("metadata"), cap("metadata"), "metadata"),
        feedback=part(text("feedback"), cap("feedback"), "feedback"),
        heartbeat=part(text("heartbeat"), cap("heartbeat"), "heartbeat tasks"),
        evidence=part(text("evidence"), cap("evidence"), "evidence"),
        categories=categories,
    )
    for name, kept in (("reply", sections.reply), ("user_message", sections.user)):
        if kept.shown.cut:
            sections.trimmed.add(name)
    if sections.evidence.shown.cut:
        sections.trimmed.add("evidence")
    return sections


def _measured(
    sections: _Sections, system: str, code: str, budget: int, fixed: int, slack: int
) -> JudgePrompt:
    """The review request filled and measured, cut further in the trim order while over
    ``budget``: only a prompt counted (or proved by its size) within it is returned."""
    for round_number in range(_ROUNDS):
        user = fill("judge_context.j2", **sections.values(code))
        if fixed + tokens.size_bound(user) <= budget:  # fits by its size: no need to count
            return JudgePrompt(system, user, code, None, tuple(sorted(sections.trimmed)))
        estimate = fixed + sections.estimate(code)
        if estimate > budget - slack and _cut(sections, estimate - budget + slack):
            continue
        total = fixed + sections.tokens(code)
        if total <= budget:
            return JudgePrompt(system, user, code, total, tuple(sorted(sections.trimmed)))
        # The planned sum and the exact count can differ where pieces meet: leave more room.
        slack += total - estimate + 8 * (round_number + 1)
    raise ValueError(f"the judge prompt does not fit in {budget} tokens")


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
    rubric: Rubric = DEFAULT_RUBRIC,
    reply_scans: tokens.Cutter | None = None,
) -> JudgePrompt:
    """Assemble the judge prompt for one reply within ``limits.budget`` tokens.

    ``rubric``: the system message (the operator's criteria and categories included); the
    review request's format reminder names its categories. ``meta``: the reply's run metadata
    (its tool ledger, and the tool results the evidence section shows).

    ``redact`` rewrites every caller-supplied text before anything else happens to it (see the
    module doc); an exception it raises propagates, and no prompt is built.

    ``reply_scans``: a cutter of the reply that has already tokenized its ends (``view_of``'s,
    the injection screen's), reused when no redaction changed the reply.
    """
    code = nonce or new_nonce()
    budget = limits.budget
    sources = _sources(
        turn, reply_text, limits, rules, heartbeat_tasks, previous_feedback, meta, redact or _same
    )
    # Room for BPE merging differently where the pieces meet, and for rounding.
    slack = 8 + 2 * (len(sources.texts) + len(sources.history_source))
    # The system message's size bounds its tokens: a request that fits beside that bound
    # fits beside the exact count too, and is built the same, without the tokenizer.
    whole, fixed = _whole(sources, rubric, code, budget, slack)
    if whole is not None:
        return whole
    part = _part_maker(code, reply_scans)
    sections = _capped(sources, part, budget, fixed, rubric.category_names)

    def message(index: int) -> _Part:
        return part(sources.history(index), sources.history_cap, "message", ends=True)

    count = len(sources.history_source)
    newest_first = [functools.partial(message, index) for index in range(count)]
    _add_history(sections, newest_first, budget - slack - fixed, code)
    if sources.history_trimmed:
        sections.trimmed.add("history")
    return _measured(sections, rubric.system, code, budget, fixed, slack)
