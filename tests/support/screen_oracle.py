"""A naive oracle for the injection screen (``replyguard.context._injection``): the shipped
skeleton, checks and rules, with every shortcut that decides *where* a rule is tried taken
out. Each phrase rule counts when one of its anchors occurs in the text and ``finditer`` of its
pattern over the whole text meets a match the rule accepts (``_Rule.accepts``); a line rule's
pattern is searched as ``^`` under ``re.M`` at every line. No leads, no needs, no first
characters, no line starts, no presence checks: what the gating must not change.
"""

from __future__ import annotations

import functools
import re

from replyguard.context._injection import (
    _SPACES,
    REASONS,
    _code_blocks,
    _hidden_texts,
    _homoglyph,
    _inside,
    _invisible,
    _padding,
    _plain,
    _shouted_comment,
    _verdict_lines,
)
from replyguard.context._phrases import (
    _HIDDEN_WORDS,
    _INSTRUCTIONS,
    _JSON_VERDICT,
    _ROLE_MARKERS,
    _SECTION_TAG,
    _SHOUTED_DEMAND,
    _SHOUTED_ROLE,
    _SYMBOL_LINE,
    _master_key_pattern,
    _Rule,
)
from replyguard.context._sanitise import _latin


@functools.cache
def _each_line(pattern: str) -> re.Pattern[str]:
    return re.compile(f"^(?:{pattern})", re.M)


def found(rule: _Rule, text: str) -> bool:
    """Whether ``rule`` counts in ``text``."""
    if not any(anchor in text for anchor in rule.anchors):
        return False
    if rule._lines:
        return _each_line(rule.pattern.pattern).search(text) is not None
    return any(rule.accepts(text, match) for match in rule.pattern.finditer(text))


RULES = (*_INSTRUCTIONS, *_ROLE_MARKERS, _JSON_VERDICT)


def by_rule(flat: str) -> list[bool]:
    """Whether each phrase rule (``RULES``, in order) counts in ``flat``."""
    return [found(rule, flat) for rule in RULES]


def shouted_role(skeleton: str) -> bool:
    """A line that opens as an upper-case role."""
    return _each_line(_SHOUTED_ROLE).search(skeleton) is not None


def master_key(lowered: str, blocks: list[tuple[int, int]]) -> bool:
    """A symbol-only line outside code, or a master key as the last line outside code."""
    for line in _each_line(_SYMBOL_LINE).finditer(lowered):
        if not _inside(blocks, line.start()):
            return True
    stripped = lowered.rstrip()
    start = stripped.rfind("\n") + 1
    return not _inside(blocks, start) and bool(_master_key_pattern().fullmatch(stripped, start))


def skeleton(text: str) -> tuple[str, str, str]:
    """The text as the screen reads it: the skeleton, in lower case, its blanks collapsed."""
    shown = _latin(_plain(text))
    lowered = shown.lower()
    if len(lowered) != len(shown):  # as the screen keeps positions (İ grows when lowered)
        lowered = "".join(char.lower()[:1] for char in shown)
    return shown, lowered, re.sub(_SPACES, " ", lowered)


def suspected_injection(text: str) -> list[str]:
    """The reason codes the screen must find in ``text``."""
    shown, lowered, flat = skeleton(text)
    blocks = _code_blocks(shown)
    reasons = {
        "verdict_line": _verdict_lines(shown, lowered, blocks),
        "json_verdict": found(_JSON_VERDICT, flat),
        "judge_instruction": any(found(rule, flat) for rule in _INSTRUCTIONS)
        or re.search(_SHOUTED_DEMAND, shown) is not None,
        "role_marker": any(found(rule, flat) for rule in _ROLE_MARKERS) or shouted_role(shown),
        "section_tag": re.search(_SECTION_TAG, flat) is not None,
        "master_key": master_key(lowered, blocks),
        "hidden_instruction": _shouted_comment(shown)
        or any(
            re.search(_HIDDEN_WORDS, part) or any(found(rule, part) for rule in _INSTRUCTIONS)
            for part in _hidden_texts(flat, "<" in flat)
        ),
        "invisible_characters": _invisible(text),
        "homoglyph_verdict": _homoglyph(text, shown),
        "padding": _padding(text),
    }
    return [reason for reason in REASONS if reasons[reason]]
