"""Fitting the sections into the budget: each cut from its whole redacted text and cleaned,
history added newest first, and the trim order (see ``replyguard.context._build``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from replyguard._templates import filled_parts, literal_text
from replyguard.context import _joins as joins
from replyguard.context import _tokens as tokens
from replyguard.context._prompt import REPLY_FLOOR, USER_FLOOR


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
            self.shown = tokens.Kept(kept.text, tokens.count(kept.text), True, kept.cut, exact=True)
        return self.shown.tokens


_EMPTY = tokens.Kept("", 0, counted=True, exact=True)
_PLACEHOLDER = tokens.Kept("-", 1, counted=True, exact=True)
VIEW_EDGE = 1000
"""How far past a cut ``reply_in_view`` reads, in characters, to finish the line it cuts."""


def reply_in_view(text: str, limit: int) -> str:
    """What of a reply a judge prompt capping it at ``limit`` tokens can show (see
    ``view_of``)."""
    return view_of(tokens.Cutter(text), limit)


def view_of(reply: tokens.Cutter, limit: int) -> str:
    """What of a reply a judge prompt capping it at ``limit`` tokens can show: the whole text
    when it fits, else the start and the end a head-and-tail cut keeps, each read on past its
    cut to the end of the line the cut splits (at most ``VIEW_EDGE`` characters), joined by a
    line break.

    Every later cut of the reply in the prompt (the trim order) keeps less of the same start
    and end, so a screen of this text reads all the judge will be shown, and its cost scales
    with ``limit``, not with the reply. Tokenizes at most the two windows the cut needs, and
    ``reply`` keeps them: the prompt's own cut of the same text reuses them.
    """
    text = reply.text
    if tokens.surely_within(text, limit):  # whole by its size (what ``ends`` would keep)
        return text
    span = reply.ends(limit, "reply").span
    if span is None:
        return text
    kept_head, kept_tail = span
    head_end = text.find("\n", kept_head, kept_head + VIEW_EDGE)
    head_end = min(kept_head + VIEW_EDGE, len(text)) if head_end < 0 else head_end
    if not kept_tail:  # a cut too small for a marker keeps the start alone
        return text[:head_end]
    tail_cut = len(text) - kept_tail
    tail_start = text.rfind("\n", max(tail_cut - VIEW_EDGE, 0), tail_cut) + 1
    tail_start = max(tail_cut - VIEW_EDGE, 0) if tail_start == 0 else tail_start
    if head_end >= tail_start:
        return text
    return f"{text[:head_end]}\n{text[tail_start:]}"


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
    return tokens.Kept(
        again.text, again.tokens, again.counted, kept.cut or again.cut, exact=again.exact
    )


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
    evidence: _Part
    trimmed: set[str] = field(default_factory=set)
    categories: str = ""
    """The categories the format reminder names (``a|b|c``)."""

    def values(self, nonce: str) -> dict[str, str]:
        return {
            "nonce": nonce,
            "categories": self.categories,
            "user_message": self.user.text,
            "rules": self.rules.text,
            "instructions": self.instructions.text,
            "history": "\n\n".join(part.text for part in self.history),
            "metadata": self.metadata.text,
            "feedback": self.feedback.text,
            "heartbeat": self.heartbeat.text,
            "evidence": self.evidence.text,
            "reply": self.reply.text,
        }

    def parts(self) -> list[_Part]:
        singles = [
            self.rules,
            self.instructions,
            self.metadata,
            self.feedback,
            self.heartbeat,
            self.evidence,
        ]
        return [self.user, self.reply, *self.history, *singles]

    def estimate(self, nonce: str) -> int:
        """The review request's tokens as the sum of its parts' and the template's own.

        BPE may merge a token or so differently where the parts meet: the fitted prompt's
        exact count (``tokens``) decides before it is sent.
        """
        return (
            self.template_tokens(nonce)
            + sum(part.counted() for part in self.parts())
            + max(len(self.history) - 1, 0)
        )

    def tokens(self, nonce: str) -> int:
        """The review request's exact tokens, counting again only the template's text and
        the few characters where a section meets it (``_joins.joined_count``); a section
        whose count is not exact is counted with the text around it."""
        known = {
            "user_message": self.user,
            "rules": self.rules,
            "instructions": self.instructions,
            "metadata": self.metadata,
            "feedback": self.feedback,
            "heartbeat": self.heartbeat,
            "evidence": self.evidence,
            "reply": self.reply,
        }
        parts: list[tuple[str, int | None]] = []
        for text, name in filled_parts("judge_context.j2", **self.values(nonce)):
            if name == "history":
                for index, message in enumerate(self.history):
                    if index:
                        parts.append(("\n\n", None))
                    parts.append(_exact(message))
            elif name in known:
                parts.append(_exact(known[name]))
            else:
                parts.append((text, None))
        return joins.joined_count(parts, tokens.count)

    def template_tokens(self, nonce: str) -> int:
        """The tokens of the template's own text around the present sections."""
        return tokens.count(
            literal_text("judge_context.j2", ("nonce", "categories"), **self.values(nonce))
        )

    def recut(self, part: _Part, limit: int) -> int:
        """Cut ``part`` again, from its source, to ``limit`` tokens; return the tokens saved."""
        before = part.counted()
        part.shown = _fit(part.source, limit, part.what, part.ends)
        return before - part.counted()


def _exact(part: _Part) -> tuple[str, int | None]:
    shown = part.shown
    return shown.text, shown.tokens if shown.exact else None


def _add_history(
    sections: _Sections, newest_first: Sequence[Callable[[], _Part]], room: int, code: str
) -> None:
    """Add the history messages, newest first, until the trim order would drop the rest.

    History goes right after the agent instructions, oldest first: a message is dropped when
    it and the newer ones do not fit beside every other section (instructions left out). The
    messages older than it are then dropped too, without being cut or tokenized at all, and
    so is every message once what is already there leaves no room for one (``newest_first``
    makes each message's part only when it is its turn).
    """
    kept: list[_Part] = []
    size = sum(tokens.size_bound(part.text) for part in sections.parts())
    used: int | None = None
    for make in newest_first:
        if used is None and size > room:  # so far all fits by its size: nothing to count yet
            used = _others(sections, code) + sum(p.counted() + 1 for p in kept)
        if used is not None and used + 2 > room:  # a message takes a token and a line break
            sections.trimmed.add("history")
            break
        part = make()
        kept.append(part)
        size += tokens.size_bound(part.text)
        if size <= room:  # the measuring afterwards has the last word anyway
            continue
        if used is None:
            used = _others(sections, code) + sum(p.counted() + 1 for p in kept[:-1])
        used += part.counted() + 1
        if used > room:
            kept.pop()
            sections.trimmed.add("history")
            break
    sections.history = kept[::-1]


def _others(sections: _Sections, code: str) -> int:
    """The tokens of every section but the history and the instructions, and of the template
    as it is with a history section."""
    sections.history = [_Part(tokens.Cutter("-"), "message", True, _PLACEHOLDER)]
    others = [p for p in sections.parts() if p is not sections.history[0]]
    used = sections.template_tokens(code) + sum(p.counted() for p in others)
    if sections.instructions.text:  # they go before any history
        used -= sections.instructions.counted() + 8
    sections.history = []
    return used


def _shrink_head(sections: _Sections, name: str, over: int) -> int:
    """Cut the end of a free-text section by about ``over`` tokens; return what is left over."""
    part: _Part = getattr(sections, name)
    if not part.text or over <= 0:
        return over
    size = part.counted()
    keep = size - over
    if keep < 40:
        part.shown = tokens.Kept("", 0, True, True, exact=True)
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
        sections.instructions.shown = tokens.Kept("", 0, True, True, exact=True)
        sections.trimmed.add("instructions")
    while over > 0 and sections.history:
        over -= sections.history.pop(0).counted() + 2
        sections.trimmed.add("history")
    over = _shrink_head(sections, "evidence", over)
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
