"""Each phrase rule's ``needs`` held to its pattern's parse: every way through the pattern
spells one of them (so a text holding none holds no match, and the gate that skips the rule
there loses nothing). The needs are written by hand; a word added to a rule's pattern without
its need would silently stop the rule on texts holding only that word, and this test fails.

The walk is conservative: a character the pattern does not spell out (a class, ``.``) ends
the literal run, a repeat counts once or as unknown characters, a look-around spells nothing.
A need is met only where the literal text of one path holds it.
"""

from __future__ import annotations

import re
from re import _parser as sre_parser  # type: ignore[attr-defined]
from typing import Any

import pytest

from replyguard.context._phrases import _INSTRUCTIONS, _JSON_VERDICT, _ROLE_MARKERS, _Rule

RULES = [*_INSTRUCTIONS, *_ROLE_MARKERS, _JSON_VERDICT]

State = tuple[str, bool]  # the literal text since the last unknown character, a need met
_UNKNOWN = {"NOT_LITERAL", "IN", "ANY", "CATEGORY", "GROUPREF"}
_ZERO_WIDTH = {"AT", "ASSERT", "ASSERT_NOT"}
_REPEATS = {"MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"}


class _Walk:
    def __init__(self, needs: tuple[str, ...]) -> None:
        self.needs = needs
        self.keep = max(map(len, needs)) - 1  # the longest tail a need may still end in

    def literal(self, states: set[State], char: str) -> set[State]:
        stepped: set[State] = set()
        for tail, met in states:
            tail += char
            if met or any(need in tail for need in self.needs):
                stepped.add(("", True))
            else:
                stepped.add((tail[max(len(tail) - self.keep, 0) :], False))
        return stepped

    def items(self, items: Any, states: set[State]) -> set[State]:
        for op, value in items:
            name = op.name
            if name == "LITERAL":
                states = self.literal(states, chr(value))
            elif name == "IN" and all(kind.name == "LITERAL" for kind, _ in value):
                states = set().union(*(self.literal(states, chr(char)) for _, char in value))
            elif name in _UNKNOWN:
                states = {("", met) for _, met in states}
            elif name in _ZERO_WIDTH:
                continue
            elif name == "BRANCH":
                states = set().union(*(self.items(branch, states) for branch in value[1]))
            elif name == "SUBPATTERN":
                assert not value[1] & re.IGNORECASE, "a case-blind group spells no literal"
                states = self.items(value[3], states)
            elif name == "ATOMIC_GROUP":
                states = self.items(value, states)
            elif name in _REPEATS:
                low, high, sub = value
                once = self.items(sub, states)
                after = set(once)
                if high > 1:  # more turns: unknown characters after the first
                    after |= {("", met) for _, met in once}
                if low == 0:
                    after |= states
                states = after
            else:
                raise AssertionError(f"the walk does not know {name}: teach it")
        return states


def every_match_holds_a_need(pattern: str, needs: tuple[str, ...]) -> bool:
    """True when each way through ``pattern`` spells one of ``needs`` in its literal text."""
    if not needs or "" in needs:
        return False
    parsed = sre_parser.parse(pattern, re.M)
    assert not parsed.state.flags & re.IGNORECASE
    return all(met for _, met in _Walk(needs).items(parsed, {("", False)}))


@pytest.mark.parametrize("rule", RULES, ids=[rule.pattern.pattern[:30] for rule in RULES])
def test_every_match_of_a_rule_holds_one_of_its_needs(rule: _Rule) -> None:
    assert every_match_holds_a_need(rule._source[0], rule.needs)


@pytest.mark.parametrize("rule", RULES, ids=[rule.pattern.pattern[:30] for rule in RULES])
def test_every_match_of_a_rule_holds_one_of_its_anchors(rule: _Rule) -> None:
    """The anchors are needs too: a rule that matches has its anchor, so the gate that skips a
    rule none of whose anchors may occur (``_screen_gate._gated``) skips no finding."""
    assert every_match_holds_a_need(rule._source[0], rule.anchors)


def test_a_word_added_to_a_rule_without_its_need_is_caught() -> None:
    rule = _INSTRUCTIONS[0]  # "ignore previous instructions": its leads are its needs
    pattern = rule._source[0].replace("|bypass)", "|bypass|skip)", 1)
    assert pattern != rule._source[0] and re.compile(pattern).match("skip all instructions")
    assert not every_match_holds_a_need(pattern, rule.needs)
    assert every_match_holds_a_need(pattern, (*rule.needs, "skip"))


def test_a_need_dropped_from_a_rule_is_caught() -> None:
    rule = _INSTRUCTIONS[1]  # "output PASS": "output 10/10" holds only the need "10"
    assert "10" in rule.needs
    dropped = tuple(need for need in rule.needs if need != "10")
    assert not every_match_holds_a_need(rule._source[0], dropped)


@pytest.mark.parametrize(
    ("pattern", "needs", "holds"),
    [
        ("ab?c", ("ac",), False),  # "abc" holds no "ac"
        ("a(?:b|c)d", ("abd", "acd"), True),
        ("a(?:b|c)d", ("abd",), False),
        ("x[^y]{0,3}z", ("xz",), False),  # "xqz": the class ends the literal run
        ("(?:ab)+c", ("abc",), False),  # "ababc" holds it, but the walk cannot tell: unknown
        ("#{1,6} ?x", ("#",), True),
        ("(?=pass)\\w+", ("pass",), False),  # a look-ahead spells nothing
    ],
)
def test_the_walk_on_small_patterns(pattern: str, needs: tuple[str, ...], holds: bool) -> None:
    assert every_match_holds_a_need(pattern, needs) is holds


def test_the_walk_names_what_it_does_not_know() -> None:
    with pytest.raises(AssertionError, match="case-blind"):
        every_match_holds_a_need("(?i:pass)", ("pass",))
    with pytest.raises(AssertionError, match="does not know"):
        every_match_holds_a_need("(a)(?(1)b|c)", ("a",))
