"""The injection screen: replies that address the judge rather than the user.

A pure function, linear in the text's length (the characters and the section code are
``replyguard.context._sanitise``'s; the phrase rules ``replyguard.context._phrases``'):

``suspected_injection(text)``
    Why a reply seems to address the judge rather than the user, as reason codes (keys of
    ``REASONS``, never the reply's own words, so they are safe to log). Empty when clean.
    Matching runs on a skeleton of the text: hidden characters dropped, NFKC (full-width and
    other compatibility forms), Cyrillic and Greek look-alikes mapped to Latin letters, spaces
    collapsed, lower case. Each phrase rule counts only when one of its anchor words occurs, and
    is tried only where one of its leading words stands (``_phrases._Rule``); the rules tried
    are those the needles found in the text let in (``_screen_gate``).
"""

from __future__ import annotations

import bisect
import functools
import re
import unicodedata
import zlib
from collections.abc import Iterable, Iterator, Sequence

from replyguard import _quoting as quoting
from replyguard._quoting import AtLineStart
from replyguard.context._phrases import (
    _HIDDEN_MARKUP,
    _HIDDEN_NOTE,
    _HIDDEN_WORDS,
    _INSTRUCTIONS,
    _MASTER_KEYS,
    _PADDING_LENGTH,
    _PADDING_RATIO,
    _SECTION_TAG,
    _SHOUTED_DEMAND,
    _SHOUTED_ROLE,
    _SHOUTED_ROLE_FIRSTS,
    _SHOUTED_VERDICT,
    _SYMBOL_LINE,
    _SYMBOL_LINE_FIRSTS,
    _TARGET_WORDS,
    _TEST_OUTPUT,
    _VERDICT_LINE,
    _VERDICT_WORD,
    _master_key_pattern,
    first_line_start,
)
from replyguard.context._sanitise import (
    _BIDI_OR_TAGS,
    _HEAVY,
    _HIDDEN_RUN,
    _SOFT,
    _SOFT_RANGE,
    _compiled,
    _hidden_runs,
    _latin,
    _lowered_visible_ascii,
    _visible_ascii,
)
from replyguard.context._screen_gate import (
    _FENCE_CHARS,
    _SECTION_WORDS,
    _VERDICT_WORDS,
    _any_found,
    _present,
    _tried,
)

__all__ = ["REASONS", "injection_feedback", "suspected_injection"]

REASONS: dict[str, str] = {
    "verdict_line": "a line shaped like a reviewer's verdict (PASS, FAIL [category], Verdict: ...)",
    "json_verdict": "a JSON object shaped like a reviewer's verdict",
    "judge_instruction": "instructions to the reviewer (ignore instructions, output PASS, rate it)",
    "role_marker": "a fake system or role marker, or chat-template tokens",
    "section_tag": "text imitating the review's section tags or their code",
    "master_key": "a lone token standing in for an answer (':', 'Solution', 'Thought process:')",
    "hidden_instruction": "reviewer-directed text hidden in an HTML comment or hidden markup",
    "invisible_characters": "bidi controls, tag characters or several invisible characters",
    "homoglyph_verdict": "PASS, FAIL or reviewer words spelled with look-alike letters",
    "padding": "very long repetitive padding",
}
"""Every reason code ``suspected_injection`` may return, in the order it returns them."""


# -- the skeleton ----------------------------------------------------------------------------

_LINE_BREAK = "[\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029]"  # compiled on first use (``_compiled``)
_SPACES = r"[^\S\n]{2,}|[^\S\n ]"  # runs, and any blank but a space


def _plain(text: str) -> str:
    """Every line break a ``\\n``, hidden characters dropped, NFKC applied (asked only of a
    text that is not plain visible ASCII: that one is its own skeleton)."""
    text = text.replace("\r\n", "\n")
    text = _compiled(_HIDDEN_RUN).sub("", _compiled(_LINE_BREAK).sub("\n", text))
    return text if text.isascii() else unicodedata.normalize("NFKC", text)


def _code_blocks(text: str) -> list[tuple[int, int]]:
    """The spans of fenced code blocks (``replyguard._quoting``; an unclosed one runs to the
    end)."""
    return [(block.start, block.end) for block in quoting.code_blocks(text)]


def _inside(spans: Sequence[tuple[int, int]], position: int) -> tuple[int, int] | None:
    """The code block holding ``position``, if any."""
    if not spans:
        return None
    index = bisect.bisect_right(spans, position, key=lambda span: span[0]) - 1
    if index >= 0 and spans[index][0] <= position < spans[index][1]:
        return spans[index]
    return None


_FEW_LINES = 16  # up to this many lines, a line-start pattern is tried at each line start


def _line_starts(text: str) -> list[int] | None:
    """Where each line of ``text`` starts, or None for a text of more than ``_FEW_LINES``
    lines (each line-start pattern then scans it for newlines itself, ``AtLineStart``)."""
    starts = [0]
    at = text.find("\n")
    while at >= 0:
        if len(starts) > _FEW_LINES:
            return None
        starts.append(at + 1)
        at = text.find("\n", at + 1)
    return starts


@functools.cache
def _at_lines(pattern: str) -> AtLineStart:
    """A line rule's pattern (``_phrases``), compiled on first use."""
    return AtLineStart(pattern)


def _line_matches(pattern: str, firsts: str, text: str, starts: list[int] | None) -> Iterable[int]:
    """Where each line of ``text`` that the line rule ``pattern`` matches starts; tried only at
    the line ``starts`` when known (``_phrases.first_line_start``), else ``AtLineStart``'s."""
    if starts is None:
        return _at_lines(pattern).starts(text)
    compiled = _compiled(pattern, re.M)
    return [at for at in starts if text[at : at + 1] in firsts and compiled.match(text, at)]


def _verdict_lines(skeleton: str, lowered: str, blocks: list[tuple[int, int]]) -> bool:
    """A line shaped like a verdict (only asked of a text holding "pass" or "fail")."""
    checked = -1  # the end of the last line tried: each line is tried once
    for word in _compiled(_VERDICT_WORD).finditer(lowered):
        if word.start() <= checked:
            continue
        start = lowered.rfind("\n", 0, word.start()) + 1
        checked = lowered.find("\n", word.start())
        checked = len(lowered) if checked < 0 else checked
        match = _compiled(_VERDICT_LINE).match(lowered, start, checked)
        if match is None:
            continue
        bare = match.start("bare")
        if bare >= 0 and skeleton[bare : bare + 4].islower():
            continue  # a lone lower-case `pass` is Python, not a verdict
        block = _inside(blocks, start)
        if block and bare >= 0 and _compiled(_TEST_OUTPUT).search(skeleton, block[0], block[1]):
            continue  # a lone PASS in pasted `go test` output
        return True
    return False


_KEY_EDGES = " \t#>*_-:.。!"  # what may stand before and after a master key on its line
_LONGEST_KEY = max(map(len, _MASTER_KEYS))


def _master_key(lowered: str, blocks: list[tuple[int, int]], lines: list[int] | None) -> bool:
    """A symbol-only line anywhere, or a master key as the last line (outside code)."""
    for start in _line_matches(_SYMBOL_LINE, _SYMBOL_LINE_FIRSTS, lowered, lines):
        if not _inside(blocks, start):
            return True
    stripped = lowered.rstrip()
    start = stripped.rfind("\n") + 1
    if len(stripped[start:].strip(_KEY_EDGES)) > _LONGEST_KEY:
        return False  # stripped of its edges, a master key line is a part of the key at most
    return not _inside(blocks, start) and bool(_master_key_pattern().fullmatch(stripped, start))


def _html_comments(text: str) -> Iterator[str]:
    """The contents of HTML comments, found in one pass (an unclosed one runs to the end)."""
    position = 0
    while (start := text.find("<!--", position)) >= 0:
        end = text.find("-->", start + 4)
        if end < 0:
            yield text[start + 4 :]
            return
        yield text[start + 4 : end]
        position = end + 3


def _shouted_comment(skeleton: str) -> bool:
    """An upper-case PASS or FAIL in an HTML comment (asked of a text holding a "<")."""
    if "<!--" not in skeleton:
        return False
    return any(map(_compiled(_SHOUTED_VERDICT).search, _html_comments(skeleton)))


def _hidden_texts(flat: str, angle: bool) -> list[str]:
    """Texts hidden in ``flat``: HTML comments, link notes and titles, markup (``angle``: "<")."""
    bracket = "]" in flat  # a one-character search (memchr): most replies hold no "]"
    hidden = list(_html_comments(flat)) if angle and "<!--" in flat else []
    if bracket and "]:" in flat:
        hidden += [match.group(1) for match in _at_lines(_HIDDEN_NOTE).finditer(flat)]
    if angle or (bracket and "](" in flat):
        hidden += [
            next(group for group in match.groups() if group is not None)
            for match in _compiled(_HIDDEN_MARKUP).finditer(flat)
        ]
    return hidden


def _hidden_instruction(flat: str, skeleton: str, present: frozenset[str]) -> bool:
    angle = "<" in present  # a needle: in the skeleton exactly when in ``flat``
    if angle and _shouted_comment(skeleton):
        return True
    hidden = _hidden_texts(flat, angle)  # most replies hide nothing: no generator for them
    return bool(hidden) and any(
        _compiled(_HIDDEN_WORDS).search(text) or any(rule.search(text) for rule in _INSTRUCTIONS)
        for text in hidden
    )


def _invisible(text: str) -> bool:
    """Bidi controls, tag characters or several invisible characters (asked only of a text
    that is not plain visible ASCII)."""
    if _compiled(_BIDI_OR_TAGS).search(text):
        return True
    count = 0
    soft_range = _compiled(_SOFT_RANGE)
    for match in _hidden_runs(text):
        count += sum(char not in _SOFT and not soft_range.match(char) for char in match.group())
        if count >= _HEAVY:
            return True
    return False


def _homoglyph(text: str, skeleton: str) -> bool:
    """A target word read in the skeleton more often than it is written in plain letters."""
    if text.isascii():
        return False
    read = skeleton.lower()
    written = _compiled(_HIDDEN_RUN).sub("", text).lower()
    return any(read.count(word) > written.count(word) for word in _TARGET_WORDS)


def _padding(text: str) -> bool:
    if len(text) < _PADDING_LENGTH:
        return False
    data = text.encode("utf-8", "surrogatepass")
    return len(data) >= _PADDING_RATIO * len(zlib.compress(data, 1))


def _section_tag(flat: str, present: frozenset[str]) -> bool:
    return (
        not present.isdisjoint(_SECTION_WORDS) and _compiled(_SECTION_TAG).search(flat) is not None
    )


def _shouted_role(skeleton: str, lines: list[int] | None) -> bool:
    """A line that opens as an upper-case role ("SYSTEM:"); ``lines``: its line starts."""
    if lines is None:
        return next(_at_lines(_SHOUTED_ROLE).starts(skeleton), None) is not None
    pattern = _compiled(_SHOUTED_ROLE, re.M)  # the first line start it matches is enough
    return first_line_start(pattern, _SHOUTED_ROLE_FIRSTS, skeleton, lines) is not None


def suspected_injection(text: str) -> list[str]:
    """Reason codes (keys of ``REASONS``, in that order) why ``text`` addresses the judge."""
    shown = _lowered_visible_ascii(text)
    visible = shown is not None
    if shown is not None:  # nothing to drop, normalise or map to Latin; positions kept
        skeleton, lowered = text, shown
    else:
        skeleton = _latin(_plain(text))
        lowered = skeleton.lower()
        if len(lowered) != len(skeleton):  # a few letters grow when lowered (İ): keep positions
            lowered = "".join(char.lower()[:1] for char in skeleton)
    plain_spaces = (
        (visible or _visible_ascii(lowered)) and "\t" not in lowered and "  " not in lowered
    )
    flat = lowered if plain_spaces else _compiled(_SPACES).sub(" ", lowered)
    present = _present(flat)  # "pass" and "fail" are in flat exactly when they are in lowered
    blocks = [] if present.isdisjoint(_FENCE_CHARS) else _code_blocks(skeleton)  # no fence
    json_verdict, instructions, role_markers = _tried(present)
    lines = _line_starts(lowered)  # the same in the skeleton, and in flat when it is lowered
    flat_lines = lines if flat is lowered else None
    found = {
        "verdict_line": not present.isdisjoint(_VERDICT_WORDS)
        and _verdict_lines(skeleton, lowered, blocks),
        "json_verdict": _any_found(json_verdict, flat),
        "judge_instruction": _any_found(instructions, flat)
        or (
            "pass" in present
            and "PASS" in skeleton
            and bool(_compiled(_SHOUTED_DEMAND).search(skeleton))
        ),
        "role_marker": _any_found(role_markers, flat, flat_lines) or _shouted_role(skeleton, lines),
        "section_tag": _section_tag(flat, present),
        "master_key": _master_key(lowered, blocks, lines),
        "hidden_instruction": _hidden_instruction(flat, skeleton, present),
        "invisible_characters": not visible and _invisible(text),
        "homoglyph_verdict": _homoglyph(text, skeleton),
        "padding": _padding(text),
    }
    return [reason for reason in REASONS if found[reason]]


def injection_feedback(reasons: Sequence[str]) -> str:
    """The retry feedback for a reply that addressed the reviewer, naming what was found."""
    found = "; ".join(REASONS.get(reason, reason) for reason in reasons)
    return (
        "The reply contains text aimed at the reviewer rather than the user"
        f"{f' ({found})' if found else ''}. Remove it and answer the user's request itself."
    )
