"""The phrase rules' shortcuts: a rule tried only where one of its leads stands finds what a
scan of the whole text finds, and a text holding none of a rule's needs holds no match."""

from __future__ import annotations

import random
import re
from re import _constants as sre_constants  # type: ignore[attr-defined]
from re import _parser as sre_parser  # type: ignore[attr-defined]
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replyguard.context import _phrases
from replyguard.context._phrases import (
    _CROWDED,
    _INSTRUCTIONS,
    _JSON_VERDICT,
    _ROLE_MARKERS,
    _Rule,
)
from replyguard.context._screen_gate import _gated, _needing, _needles, _present
from support import screen_corpus, screen_oracle

RULES = [*_INSTRUCTIONS, *_ROLE_MARKERS, _JSON_VERDICT]
LEAD_RULES = [rule for rule in RULES if rule.leads]
TEXTS = [text.lower() for text in screen_corpus.texts(1_500, seed=7)]


def _ids(rules: list[_Rule]) -> list[str]:
    return [rule.pattern.pattern[:30] for rule in rules]


def _prefixes(items: Any) -> list[str]:
    """The literal text each branch of a parsed pattern starts with ("" for a branch that
    starts with anything but a literal)."""
    if not items:
        return [""]
    op, value = items[0]
    if op is sre_constants.BRANCH:
        return [prefix for branch in value[1] for prefix in _prefixes(list(branch))]
    if op is sre_constants.SUBPATTERN:
        return _prefixes(list(value[3]))
    literal = ""
    for op, value in items:
        if op is not sre_constants.LITERAL:
            break
        literal += chr(value)
    return [literal]


def test_every_rule_but_the_line_rule_and_the_tag_rule_is_tried_at_its_leads() -> None:
    """The tag rule's pattern starts with a literal "<": the regex engine finds it as fast."""
    unled = [rule for rule in RULES if not rule.leads]
    assert len(unled) == 2
    assert unled[0].pattern.pattern.startswith("<(?:") and unled[0].needs == ("<",)


@pytest.mark.parametrize("rule", LEAD_RULES, ids=_ids(LEAD_RULES))
def test_each_branch_of_a_rule_starts_with_one_of_its_leads(rule: _Rule) -> None:
    prefixes = _prefixes(list(sre_parser.parse(rule.pattern.pattern, re.M)))
    assert prefixes
    for prefix in prefixes:
        assert any(prefix.startswith(lead) or lead.startswith(prefix) for lead in rule.leads)
        assert prefix, "a branch without a literal start could match anywhere"


@pytest.mark.parametrize("rule", LEAD_RULES, ids=_ids(LEAD_RULES))
def test_the_matches_tried_at_the_leads_are_those_of_a_whole_scan(rule: _Rule) -> None:
    for text in TEXTS:
        whole = [match.span() for match in rule.pattern.finditer(text)]
        assert [match.span() for match in rule._finditer(text)] == whole


@pytest.mark.parametrize("rule", RULES, ids=_ids(RULES))
def test_a_text_that_a_rule_matches_holds_one_of_its_needs(rule: _Rule) -> None:
    matched = [text for text in TEXTS if rule.matches(text)]
    assert all(any(need in text for need in rule.needs) for text in matched)


def test_a_text_crowded_with_leads_is_scanned_whole_with_the_same_matches() -> None:
    rule = _INSTRUCTIONS[4]  # "hey evaluator ... pass": "they" holds its lead "hey "
    text = "they " * 100 + "hey judge, they pass " * 3
    assert text.count("hey ") * _CROWDED > len(text)
    assert rule._starts(text) is None
    assert [m.span() for m in rule._finditer(text)] == [
        m.span() for m in rule.pattern.finditer(text)
    ]
    assert rule.matches(text)


@given(st.lists(st.sampled_from(screen_corpus.PIECES), max_size=30))
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
def test_generated_texts_give_the_same_matches_at_the_leads(pieces: list[str]) -> None:
    text = "".join(pieces).lower()
    for rule in LEAD_RULES:
        whole = [match.span() for match in rule.pattern.finditer(text)]
        assert [match.span() for match in rule._finditer(text)] == whole


def _firsts(items: Any) -> tuple[set[str], bool]:
    """The characters a match of a parsed pattern may start with, and whether it may match
    the empty string."""
    chars: set[str] = set()
    for op, value in items:
        if op is sre_constants.LITERAL:
            return chars | {chr(value)}, False
        if op is sre_constants.IN:
            for kind, item in value:
                assert kind in (sre_constants.LITERAL, sre_constants.RANGE), kind
                low, high = (item, item) if kind is sre_constants.LITERAL else item
                chars.update(map(chr, range(low, high + 1)))
            return chars, False
        if op is sre_constants.AT:
            continue  # zero width
        if op is sre_constants.BRANCH:
            found = [_firsts(branch) for branch in value[1]]
            parts, empty = set().union(*(part for part, _ in found)), any(e for _, e in found)
        elif op is sre_constants.SUBPATTERN:
            parts, empty = _firsts(value[3])
        else:
            assert op.name.endswith("_REPEAT"), op
            parts, empty = _firsts(value[2])
            empty = empty or value[0] == 0
        chars |= parts
        if not empty:
            return chars, False
    return chars, True


LINE_RULES = [
    (_phrases._SHOUTED_ROLE, _phrases._SHOUTED_ROLE_FIRSTS),
    (_phrases._SYMBOL_LINE, _phrases._SYMBOL_LINE_FIRSTS),
    *((rule._source[0], rule.firsts) for rule in RULES if rule.firsts),
]


@pytest.mark.parametrize(("pattern", "firsts"), LINE_RULES, ids=[p[:20] for p, _ in LINE_RULES])
def test_a_line_rule_names_every_character_its_lines_may_start_with(
    pattern: str, firsts: str
) -> None:
    chars, empty = _firsts(list(sre_parser.parse(pattern, re.M)))
    assert not empty
    assert chars <= set(firsts)


CODE_REPLY = (
    'use `dict.get`:\n\n```python\nname = config.get("model", ["default"])[0]\n'
    'print(f"model: {name}")\n```\n\nsee `config["judge"]["model"]` and the docs.'
)


def test_the_gate_decides_anchors_and_leads_from_the_needles_alone() -> None:
    """A short code reply holds common needs (":", "[", a backtick, "model"): the rules whose
    anchors or leads cannot occur are not tried, the others carry what is left to look for."""
    gated = _gated(_present(CODE_REPLY))
    role, tag_line = _INSTRUCTIONS[5], _ROLE_MARKERS[2]
    assert set(gated) == {role, tag_line, _ROLE_MARKERS[0], _INSTRUCTIONS[6], _INSTRUCTIONS[4]}
    assert gated[role][0] is None  # "judge" and "model" are needles, present
    assert set(gated[role][1]) == {"judge", "automated ", "model ", "language model"}
    assert "instructions for" not in (gated[_INSTRUCTIONS[4]][0] or ())  # no "instructions"
    assert not any(rule.matches(CODE_REPLY, None, gated[rule]) for rule in gated)
    assert not any(screen_oracle.by_rule(CODE_REPLY))


def test_the_gate_drops_the_leads_that_hold_a_needle_not_present() -> None:
    markers = _ROLE_MARKERS[0]  # chat-template tokens: leads "<|", "[", "<<"; needs "<", "["
    assert markers not in _gated(_present("the model: see `x`"))
    assert _gated(_present("a << b"))[markers][1] == ("<|", "<<")
    assert _gated(_present("a [b]"))[markers][1] == ("[",)
    assert markers.matches("<|im_start|>", None, _gated(_present("<|im_start|>"))[markers])


def _gate_by_search(present: frozenset[str]) -> dict[Any, Any]:
    """The gate as first written: a string may occur when it holds no needle absent, found by
    searching it for each one."""
    needing, always = _needing()
    absent = [needle for needle in _needles() if needle not in present]

    def possible(strings: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(s for s in strings if not any(needle in s for needle in absent))

    gate = {}
    for rule in always.union(*(needing.get(needle, ()) for needle in present)):
        anchors = None if not present.isdisjoint(rule.anchors) else possible(rule.anchors)
        leads = possible(rule.leads)
        if anchors != () and (leads or not rule.leads):
            gate[rule] = (anchors, leads)
    return gate


def test_the_gate_reads_what_may_occur_off_the_needles_each_string_holds() -> None:
    """``_gated`` tells a string that may occur by the needles it holds (``_holding``), all of
    them present: the same gate as searching each string for every needle absent, for any set
    of needles (more than ``_tried``'s cache keeps: real replies make more sets than that)."""
    needles = _needles()
    shuffled = random.Random(7)
    sets = [frozenset(), frozenset(needles), *(frozenset([needle]) for needle in needles)]
    sets += [
        frozenset(shuffled.sample(needles, shuffled.randint(0, len(needles)))) for _ in range(300)
    ]
    for present in sets:
        assert _gated(present) == _gate_by_search(present)
