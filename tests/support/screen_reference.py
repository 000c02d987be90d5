"""A frozen copy of the injection screen (``suspected_injection``) as it stood before its
anchor search was rewritten (main 9b983fe6): the reference the differential tests
(``tests/context/test_screen_differential.py``) hold the shipped screen to, finding for finding.

Not to be edited to follow the shipped module: a change of behaviour shows as a difference.
"""

from __future__ import annotations

import bisect
import functools
import re
import unicodedata
import zlib
from collections.abc import Iterator, Sequence

from replyguard import _quoting as quoting
from support.screen_reference_vocabulary import (
    _BIDI_OR_TAGS,
    _HEAVY,
    _HIDDEN_MARKUP,
    _HIDDEN_NOTE,
    _HIDDEN_RUN,
    _HIDDEN_WORDS,
    _INSTRUCTIONS,
    _JSON_VERDICT,
    _MASTER_KEY,
    _PADDING_LENGTH,
    _PADDING_RATIO,
    _ROLE_MARKERS,
    _SECTION_TAG,
    _SHOUTED_DEMAND,
    _SHOUTED_ROLE,
    _SHOUTED_VERDICT,
    _SOFT,
    _SOFT_RANGE,
    _SYMBOL_LINE,
    _TARGET_WORDS,
    _TEST_OUTPUT,
    _VERDICT_LINE,
    _VERDICT_WORD,
    _hidden_runs,
    _latin,
    _Rule,
    _visible_ascii,
)

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

_LINE_BREAK = re.compile("[\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")
_SPACES = re.compile(r"[^\S\n]{2,}|[^\S\n ]")  # runs, and any blank but a space


def _plain(text: str) -> str:
    """Every line break a ``\\n``, hidden characters dropped, NFKC applied."""
    if _visible_ascii(text):
        return text  # no line break but \n, nothing hidden, nothing to normalise
    text = _HIDDEN_RUN.sub("", _LINE_BREAK.sub("\n", text.replace("\r\n", "\n")))
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


def _verdict_lines(skeleton: str, lowered: str, blocks: list[tuple[int, int]]) -> bool:
    if "pass" not in lowered and "fail" not in lowered:  # two scans, quicker than the regex
        return False
    checked = -1  # the end of the last line tried: each line is tried once
    for word in _VERDICT_WORD.finditer(lowered):
        if word.start() <= checked:
            continue
        start = lowered.rfind("\n", 0, word.start()) + 1
        checked = lowered.find("\n", word.start())
        checked = len(lowered) if checked < 0 else checked
        match = _VERDICT_LINE.match(lowered, start, checked)
        if match is None:
            continue
        bare = match.start("bare")
        if bare >= 0 and skeleton[bare : bare + 4].islower():
            continue  # a lone lower-case `pass` is Python, not a verdict
        block = _inside(blocks, start)
        if block and bare >= 0 and _TEST_OUTPUT.search(skeleton, block[0], block[1]):
            continue  # a lone PASS in pasted `go test` output
        return True
    return False


def _master_key(lowered: str, blocks: list[tuple[int, int]]) -> bool:
    """A symbol-only line anywhere, or a master key as the last line (outside code)."""
    for start in _SYMBOL_LINE.starts(lowered):
        if not _inside(blocks, start):
            return True
    stripped = lowered.rstrip()
    start = stripped.rfind("\n") + 1
    return not _inside(blocks, start) and bool(_MASTER_KEY.fullmatch(stripped, start))


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


def _hidden_instruction(flat: str, skeleton: str) -> bool:
    # A one-character search (memchr) first: most replies hold no "<" and no "]".
    comments = "<" in skeleton and "<!--" in skeleton
    if comments and any(map(_SHOUTED_VERDICT.search, _html_comments(skeleton))):
        return True
    angle, bracket = "<" in flat, "]" in flat
    hidden = list(_html_comments(flat)) if angle and "<!--" in flat else []
    if bracket and "]:" in flat:
        hidden += [match.group(1) for match in _HIDDEN_NOTE.finditer(flat)]
    if angle or (bracket and "](" in flat):
        hidden += [
            next(group for group in match.groups() if group is not None)
            for match in _HIDDEN_MARKUP.finditer(flat)
        ]
    if not hidden:
        return False
    return any(
        _HIDDEN_WORDS.search(text) or any(rule.search(text) for rule in _INSTRUCTIONS)
        for text in hidden
    )


def _invisible(text: str) -> bool:
    if _visible_ascii(text):
        return False
    if _BIDI_OR_TAGS.search(text):
        return True
    count = 0
    for match in _hidden_runs(text):
        count += sum(char not in _SOFT and not _SOFT_RANGE.match(char) for char in match.group())
        if count >= _HEAVY:
            return True
    return False


def _homoglyph(text: str, skeleton: str) -> bool:
    """A target word read in the skeleton more often than it is written in plain letters."""
    if text.isascii():
        return False
    read = skeleton.lower()
    written = _HIDDEN_RUN.sub("", text).lower()
    return any(read.count(word) > written.count(word) for word in _TARGET_WORDS)


def _padding(text: str) -> bool:
    if len(text) < _PADDING_LENGTH:
        return False
    data = text.encode("utf-8", "surrogatepass")
    return len(data) >= _PADDING_RATIO * len(zlib.compress(data, 1))


_ANCHORS = frozenset(
    anchor for rule in (*_INSTRUCTIONS, *_ROLE_MARKERS, _JSON_VERDICT) for anchor in rule.anchors
)
# Letters from the rarest in English prose to the most common, then the space; any other
# character (a digit, punctuation) counts as rarer still.
_BY_RARITY = "zqxjkvbpygfwmucldrhsnioate "


def _rarity(char: str) -> int:
    return _BY_RARITY.find(char)  # -1, the rarest, for a character not listed


def _gate(anchor: str) -> str:
    """The anchor's rarest character but its last: a try at a place where that character
    stands then fails at the next one, mostly, before any look-behind is run."""
    return min(anchor[:-1] or anchor, key=_rarity)


@functools.cache
def _gates() -> tuple[tuple[str, re.Pattern[str], tuple[str, ...]], ...]:
    """The anchors grouped by a rare character of theirs (``_gate``), each group with one
    regex that matches where any of its anchors occurs: the regex starts with that character
    (the engine skips from one to the next at C speed) and checks the rest of each anchor from
    there, the part before it by a look-behind. One pass per group instead of one per anchor
    (a plain search is about as slow as a pass); compiled on first use."""
    groups: dict[str, list[str]] = {}
    for anchor in sorted(_ANCHORS):
        groups.setdefault(_gate(anchor), []).append(anchor)
    gates = []
    for char, anchors in sorted(groups.items(), key=lambda item: _rarity(item[0])):
        branches = []
        for anchor in anchors:
            at = anchor.index(char)
            behind = f"(?<={re.escape(anchor)})" if at else ""
            branches.append(re.escape(anchor[at + 1 :]) + behind)
        pattern = re.compile(f"{re.escape(char)}(?:{'|'.join(branches)})")
        gates.append((char, pattern, tuple(anchors)))
    return tuple(gates)


def _anchors_in(text: str) -> frozenset[str]:
    """The rules' anchor words that occur in ``text``: one search per group of anchors
    (``_gates``), then a plain search of each anchor of a group found."""
    found: list[str] = []
    for char, pattern, anchors in _gates():
        if char in text and pattern.search(text) is not None:
            found += [anchor for anchor in anchors if anchor in text]
    return frozenset(found)


@functools.cache
def _rules_of() -> dict[str, tuple[_Rule, ...]]:
    """Each anchor word's rules (those it lets be tried)."""
    rules: dict[str, list[_Rule]] = {}
    for rule in (*_INSTRUCTIONS, *_ROLE_MARKERS, _JSON_VERDICT):
        for anchor in rule.anchors:
            rules.setdefault(anchor, []).append(rule)
    return {anchor: tuple(found) for anchor, found in rules.items()}


def _gated_rules(anchors: frozenset[str]) -> set[_Rule]:
    """The phrase rules one of whose anchors occurs (``anchors``: ``_anchors_in``'s)."""
    if not anchors:
        return set()
    rules_of = _rules_of()
    return {rule for anchor in anchors for rule in rules_of[anchor]}


def _any_match(gated: set[_Rule], rules: tuple[_Rule, ...], flat: str) -> bool:
    """Whether one of ``rules`` that was let through (``gated``) matches, tried in order."""
    return bool(gated) and any(rule.matches(flat) for rule in rules if rule in gated)


def _section_tag(flat: str) -> bool:
    # Every form the pattern matches holds a "<" or the word "code".
    return ("<" in flat or "code" in flat) and _SECTION_TAG.search(flat) is not None


def suspected_injection(text: str) -> list[str]:
    """Reason codes (keys of ``REASONS``, in that order) why ``text`` addresses the judge."""
    visible = _visible_ascii(text)
    if visible:  # nothing to drop, normalise or map to Latin; lowering keeps every position
        skeleton, lowered = text, text.lower()
    else:
        skeleton = _latin(_plain(text))
        lowered = skeleton.lower()
        if len(lowered) != len(skeleton):  # a few letters grow when lowered (İ): keep positions
            lowered = "".join(char.lower()[:1] for char in skeleton)
    plain_spaces = (
        (visible or _visible_ascii(lowered)) and "\t" not in lowered and "  " not in lowered
    )
    flat = lowered if plain_spaces else _SPACES.sub(" ", lowered)
    blocks = _code_blocks(skeleton)
    gated = _gated_rules(_anchors_in(flat))
    found = {
        "verdict_line": _verdict_lines(skeleton, lowered, blocks),
        "json_verdict": _JSON_VERDICT in gated and _JSON_VERDICT.matches(flat),
        "judge_instruction": _any_match(gated, _INSTRUCTIONS, flat)
        or ("PASS" in skeleton and bool(_SHOUTED_DEMAND.search(skeleton))),
        "role_marker": _any_match(gated, _ROLE_MARKERS, flat)
        or bool(_SHOUTED_ROLE.search(skeleton)),
        "section_tag": _section_tag(flat),
        "master_key": _master_key(lowered, blocks),
        "hidden_instruction": _hidden_instruction(flat, skeleton),
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
