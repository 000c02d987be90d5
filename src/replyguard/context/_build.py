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
the rendered prompt's exact tiktoken count (``o200k_base``) is then taken: BPE counts do not
add up in general, but they do across a point where tiktoken's pre-tokenizer always splits
(``_joins``), so the sections' exact counts are reused and only the template's text and the
few characters where a section meets it are tokenized again (a section whose count is not
exact is tokenized with its surroundings). Only a prompt counted within the budget, or proved
within it by its size, is returned.

For every text that goes inside a section:

1. ``redact`` (when given) sees each caller-supplied text whole: the user message, the reply,
   each rules text, the agent instructions, the heartbeat tasks, each previous feedback, and in
   history and metadata each message's text and name and each tool call's name and arguments
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
import itertools
from collections.abc import Iterable, Sequence

from replyguard._templates import fill
from replyguard.context import _tokens as tokens
from replyguard.context._fitting import _EMPTY, _add_history, _cut, _fit, _Part, _Sections
from replyguard.context._prompt import (
    DEFAULT_RUBRIC,
    FEEDBACK_CAP,
    HEARTBEAT_MIN_CAP,
    HISTORY_MESSAGE_CAP,
    METADATA_CAP,
    REPLY_FLOOR,
    USER_FLOOR,
    ContextLimits,
    JudgePrompt,
    Redact,
    Rubric,
    RulesSource,
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
    categories: str,
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
        if len(text) > cap:  # a text has at least as many bytes as characters
            return None
        # tokens.size_bound, written out: only a text shorter than its cap is encoded.
        bound = len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
        total += bound
        if bound > cap or total > room:
            return None
        fitting.append((text, cap))
    kept = [text for text, _ in fitting]
    if not nothing_to_fence("\n".join(kept), code):  # one look at all: then none is cleaned
        kept = []
        for text, cap in fitting:
            shown = clean(text) if text else text
            if shown is not text and not tokens.surely_within(shown, cap):
                return None
            kept.append(shown)
    values = {name: shown for (name, _, _), shown in zip(sections, kept, strict=False)}
    values["history"] = "\n\n".join(reversed(kept[len(sections) :]))
    user = fill("judge_context.j2", nonce=code, categories=categories, **values)
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
    rubric: Rubric = DEFAULT_RUBRIC,
    reply_scans: tokens.Cutter | None = None,
) -> JudgePrompt:
    """Assemble the judge prompt for one reply within ``limits.budget`` tokens.

    ``rubric``: the system message (the operator's criteria and categories included); the
    review request's format reminder names its categories.

    ``redact`` rewrites every caller-supplied text before anything else happens to it (see the
    module doc); an exception it raises propagates, and no prompt is built.

    ``reply_scans``: a cutter of the reply that has already tokenized its ends (``view_of``'s,
    the injection screen's), reused when no redaction changed the reply.
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
        if reply_scans is not None and source is reply_scans.text:
            cutter = reply_scans.cleaning(clean)
        else:
            cutter = tokens.Cutter(source, clean)
        return _Part(cutter, what, ends, _fit(cutter, limit, what, ends))

    system = rubric.system
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

    # The system message's size bounds its tokens: a request that fits beside that bound
    # fits beside the exact count too, and is built the same, without the tokenizer.
    def at_once(fixed: int) -> JudgePrompt | None:
        return _at_once(
            system,
            code,
            clean,
            budget - slack - fixed,
            named,
            (history(index) for index in range(len(history_source))),
            history_cap,
            ("history",) if history_trimmed else (),
            rubric.category_names,
        )

    bound = rubric.tokens_at_most
    whole = at_once(bound)
    fixed = rubric.tokens if whole is None else bound
    if whole is None and fixed < bound:
        whole = at_once(fixed)
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
        categories=rubric.category_names,
    )
    if sections.reply.shown.cut:
        sections.trimmed.add("reply")
    if sections.user.shown.cut:
        sections.trimmed.add("user_message")

    def message(index: int) -> _Part:
        return part(history(index), history_cap, "message", ends=True)

    newest_first = [functools.partial(message, index) for index in range(len(history_source))]
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
        total = fixed + sections.tokens(code)
        if total <= budget:
            return JudgePrompt(system, user, code, total, tuple(sorted(sections.trimmed)))
        # The planned sum and the exact count can differ where pieces meet: leave more room.
        slack += total - estimate + 8 * (round_number + 1)
    raise ValueError(f"the judge prompt does not fit in {budget} tokens")
