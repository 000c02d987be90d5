"""The injection screen's gate: which phrase rules may count in a text, decided from the
needles found in it (``_present``) before any rule is tried.

Every string a phrase rule needs (``_phrases._Rule.needs``) and the words the screen's other
checks look for first are the needles, each looked for once per text. A rule none of whose
needs is present cannot match, and one none of whose anchors or leads may occur cannot count:
most texts let in one rule or none (``_tried``), and the screen
(``replyguard.context._injection``) tries only those.
"""

from __future__ import annotations

import functools

from replyguard.context._phrases import (
    _INSTRUCTIONS,
    _JSON_VERDICT,
    _ROLE_MARKERS,
    Chance,
    _Rule,
)

_VERDICT_WORDS = ("pass", "fail")
_FENCE_CHARS = ("`", "~")  # a code fence's characters (``_quoting.code_blocks``)
_SECTION_WORDS = ("<", "code")  # every form the section-tag pattern matches holds one


@functools.cache
def _needles() -> tuple[str, ...]:
    """Every string a phrase rule needs (``_Rule.needs``), and the words the other checks
    look for first: each looked for once per text (``_present``)."""
    rules = (*_INSTRUCTIONS, *_ROLE_MARKERS, _JSON_VERDICT)
    words = {*_VERDICT_WORDS, *_SECTION_WORDS, *_FENCE_CHARS, *(n for r in rules for n in r.needs)}
    return tuple(sorted(words))


def _present(flat: str) -> frozenset[str]:
    """The needles (``_needles``) that occur in ``flat``."""
    return frozenset(needle for needle in _needles() if needle in flat)


@functools.cache
def _needing() -> tuple[dict[str, frozenset[_Rule]], frozenset[_Rule]]:
    """Each needle's phrase rules (those whose ``needs`` hold it), and the rules that need
    nothing (tried on every text)."""
    rules = (*_INSTRUCTIONS, *_ROLE_MARKERS, _JSON_VERDICT)
    needing: dict[str, set[_Rule]] = {}
    for rule in rules:
        for need in rule.needs:
            needing.setdefault(need, set()).add(rule)
    always = frozenset(rule for rule in rules if not rule.needs)
    return {need: frozenset(found) for need, found in needing.items()}, always


@functools.cache
def _holding() -> dict[str, frozenset[str]]:
    """Each anchor and lead of a phrase rule, with the needles it holds: it can occur only in
    a text where each of them is present (``_gated``), a subset test instead of a search of
    the string for every needle absent (a text's needles vary: real replies make hundreds of
    sets, more than ``_tried`` keeps)."""
    needles = _needles()
    rules = (*_INSTRUCTIONS, *_ROLE_MARKERS, _JSON_VERDICT)
    strings = {s for rule in rules for s in (*rule.anchors, *rule.leads)}
    return {s: frozenset(needle for needle in needles if needle in s) for s in strings}


@functools.cache
def _held() -> dict[_Rule, tuple[frozenset[str], frozenset[str]]]:
    """Each phrase rule's needles held by its anchors, and those held by its leads
    (``_holding``): the only needles that tell which of them may occur (``_possible``)."""
    holding = _holding()
    rules = (*_INSTRUCTIONS, *_ROLE_MARKERS, _JSON_VERDICT)
    return {
        rule: (
            frozenset().union(*(holding[s] for s in rule.anchors)),
            frozenset().union(*(holding[s] for s in rule.leads)),
        )
        for rule in rules
    }


@functools.cache
def _possible(strings: tuple[str, ...], present: frozenset[str]) -> tuple[str, ...]:
    """Those of a rule's anchors or leads (``strings``) that may occur in a text holding the
    needles ``present`` of those they hold (``_held``): each needle one holds is present.
    Made once for each: the needles a rule's strings hold are at most eight, so a few hundred
    sets in all, where the texts' sets of needles are thousands (``_tried``'s cache misses)."""
    holding = _holding()
    return tuple(s for s in strings if holding[s] <= present)


Gate = dict[_Rule, Chance]
"""The phrase rules that may count in a text, each with what its needles tell of it
(``_gated``)."""

Tried = tuple[tuple[_Rule, Chance], ...]
"""The phrase rules of one finding that may count in a text, with their chances, in the order
the finding lists them (``_tried``)."""

# The phrase rules by the finding they make: "json_verdict", "judge_instruction", "role_marker".
_FINDINGS = ((_JSON_VERDICT,), _INSTRUCTIONS, _ROLE_MARKERS)


@functools.lru_cache(maxsize=256)
def _tried(present: frozenset[str]) -> tuple[Tried, Tried, Tried]:
    """The phrase rules that may count in a text holding the needles ``present`` (and no
    other), for each finding of ``_FINDINGS``: those one of whose needs is there (a string one
    of which each of its matches holds), one of whose anchors may be (the anchors decide
    whether a match counts) and, for a rule tried at its leads, one of whose leads may be
    (each of its matches starts with one). Most texts let in one rule or none: each finding
    tries those only.

    Decided from the needles alone, no search of the text: a string that is a needle occurs
    exactly when it is present; one that holds a needle not present (``"instructions for"``
    holds ``"instructions"``) does not occur. Each rule comes with its ``Chance``: None for
    its anchors when one of them is known to occur, else those that may (``_Rule.matches``
    looks for them), and the leads that may stand in the text.
    """
    needing, always = _needing()
    held = _held()
    candidates = always.union(*(needing.get(needle, ()) for needle in present))

    def tried(rules: tuple[_Rule, ...]) -> Tried:
        found = []
        for rule in rules:
            if rule in candidates:
                in_anchors, in_leads = held[rule]
                anchors = (
                    None
                    if not present.isdisjoint(rule.anchors)
                    else _possible(rule.anchors, present & in_anchors)
                )
                leads = _possible(rule.leads, present & in_leads)
                if anchors != () and (leads or not rule.leads):
                    found.append((rule, (anchors, leads)))
        return tuple(found)

    json_verdict, instructions, role_markers = map(tried, _FINDINGS)
    return json_verdict, instructions, role_markers


def _gated(present: frozenset[str]) -> Gate:
    """The phrase rules that may count in a text holding the needles ``present``, each with
    its chance: every finding's (``_tried``) in one."""
    return {rule: chance for tried in _tried(present) for rule, chance in tried}


def _any_found(tried: Tried, flat: str, lines: list[int] | None = None) -> bool:
    """Whether one of the rules ``tried`` (``_tried``) matches ``flat`` while one of its
    anchors occurs in it (the anchors decide whether a rule counts). ``lines``: where the
    lines of ``flat`` start, when known."""
    for rule, chance in tried:  # noqa: SIM110 - no generator: most texts try one rule or none
        if rule.matches(flat, lines, chance):
            return True
    return False
