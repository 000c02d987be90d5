"""The streamed forbidden-phrase scan against the whole text searched at once.

Seeded random texts (benign prose and hostile ones: case variants that only Unicode case
folding pairs, whitespace runs and line breaks inside phrases, curly apostrophes, word edges,
symbols, text outside the BMP) are split at random (pieces of one character up to pieces
longer than the scan's overlap) and fed to ``RuleCheck.scanner``. After every piece the
scanner must agree with a reference that searches the whole prefix with the check's own
full-text phrase patterns: the same piece cuts the stream, for the same phrase, and the same
text is held back (``pending_from``); at the end, a violation iff the whole reply has one.
"""

from __future__ import annotations

import random
import re
from typing import Any

import pytest

from replyguard import RuleCheck, Turn
from replyguard.checks import rules

TURN = Turn(user_message="Tell me about it.")
PHRASE_SETS = [
    ["as an AI", "I cannot help", "lorem ipsum"],
    ["as an AI", "an", "as an"],
    ["hell", "!!!", "I can't", "👍🏽 deal", "stop"],
    ["\u017ftop", "Kelvin", "\u0130stanbul", "\u0131nk"],
    ["a", "AI"],
    ["'tis", "\u2019em", "stop"],
]
WORDS_TEXT = (
    "as As AS an AN AI ai AIM I \u0131 \u0130 i cannot CANNOT help helper hell shell hello"
    " lorem LOREM ipsum ip\u017fum stop \u017ftop STOP kelvin Kelvin \u212aELVIN istanbul"
    " \u0131nk ink can't can\u2019t CAN\u2019T !!! !! ! \U0001f44d\U0001f3fd deal e\u0301"
    " \u65e5\u672c\u8a9e _ x 'tis \u2019TIS 'em \u2019em"
)
WORDS = WORDS_TEXT.split()
GAPS = [" ", " ", " ", "  ", "\n", "\n\n", "\t", " \u00a0", "\u2028", "", ",", "  \n \t "]


def text_of(rng: random.Random, hostile: bool) -> str:
    words = WORDS if hostile else ["the", "notes", "list", "as", "an", "AI", "fix", "help"]
    gaps = GAPS if hostile else [" ", " ", ", ", "\n"]
    count = rng.randint(0, 30)
    parts = [rng.choice(words) + rng.choice(gaps) for _ in range(count)]
    end = rng.choice(words) if rng.random() < 0.3 else ""  # a phrase may end the reply
    return ("" if rng.random() < 0.5 else rng.choice(gaps)) + "".join(parts) + end


def split(rng: random.Random, text: str) -> list[str]:
    pieces: list[str] = []
    at = 0
    longest = rng.choice([1, 2, 5, 12, 40, 200])
    while at < len(text):
        size = rng.randint(1, longest)
        pieces.append(text[at : at + size])
        at += size
    return pieces


class Reference:
    """The check's own full-text phrase patterns, in the order the streamed scan tries them
    (an alternation takes its first alternative that matches at the leftmost start)."""

    def __init__(self, check: RuleCheck) -> None:
        phrases = check._phrases
        scan = check._phrase_scan
        assert scan is not None
        order = scan[1]
        self.phrases = [phrases[i][0] for i in order]
        flags = phrases[0][1].flags
        self.pattern = re.compile("|".join(f"({phrases[i][1].pattern})" for i in order), flags)

    def leftmost(self, text: str) -> tuple[str, int, int] | None:
        """(phrase, start, end) of the leftmost match in ``text``, or None."""
        match = self.pattern.search(text)
        if match is None:
            return None
        assert match.lastindex is not None
        return self.phrases[match.lastindex - 1], match.start(), match.end()


def phrase_named(found: Any) -> str:
    feedback: str = found.feedback
    named = re.search(r"the forbidden phrase '(.*)'\.", feedback, re.S)
    assert named is not None, feedback
    return named.group(1)


def agree(check: RuleCheck, reference: Reference, pieces: list[str]) -> str | None:
    """Feeds ``pieces`` and checks the scanner against the reference after each one; the
    phrase both found (None: neither did)."""
    scanner = check.scanner(TURN)
    assert scanner is not None
    prefix = ""
    for piece in pieces:
        prefix += piece
        found = scanner.feed(piece)
        leftmost = reference.leftmost(prefix)
        decided = leftmost is not None and leftmost[2] < len(prefix)
        context = f"{pieces!r} at {len(prefix)}"
        if decided:
            assert leftmost is not None
            assert found is not None, context
            assert phrase_named(found) == leftmost[0], context
            return leftmost[0]
        assert found is None, context
        expected = None if leftmost is None else leftmost[1]
        assert scanner.pending_from == expected, context
    found = scanner.finish()
    leftmost = reference.leftmost(prefix)
    if leftmost is None:
        assert found is None, pieces
        return None
    assert found is not None, pieces
    assert phrase_named(found) == leftmost[0], pieces
    return leftmost[0]


@pytest.mark.parametrize("case_sensitive", [False, True])
@pytest.mark.parametrize("phrases", PHRASE_SETS, ids=lambda p: p[0])
def test_streamed_scan_agrees_with_the_whole_text(phrases: list[str], case_sensitive: bool) -> None:
    check = RuleCheck(forbidden_phrases=phrases, case_sensitive=case_sensitive)
    reference = Reference(check)
    rng = random.Random(f"{phrases}{case_sensitive}")
    found = []
    for case in range(300):
        text = text_of(rng, hostile=case % 3 != 0)
        found.append(agree(check, reference, split(rng, text)))
    # The corpus exercises both outcomes: texts the scan cuts and texts it lets through.
    assert any(phrase is None for phrase in found)
    assert any(phrase is not None for phrase in found)


def test_a_huge_piece_and_one_character_pieces_agree() -> None:
    check = RuleCheck(forbidden_phrases=["lorem ipsum", "as an AI"])
    reference = Reference(check)
    body = "x " * 20_000 + "LOREM \n\t IP\u017fUM" + " tail"
    assert agree(check, reference, [body]) == "lorem ipsum"
    assert agree(check, reference, list(body[-200:])) == "lorem ipsum"
    assert agree(check, reference, [body[:-5], *body[-5:]]) == "lorem ipsum"


def test_the_start_characters_hold_every_case_variant_re_matches() -> None:
    """Over all of Unicode: a character ``re`` matches, ignoring case, to one the start
    characters' class may list is listed too (so the class leaves no match unsearched)."""
    everything = "".join(map(chr, range(0x110000)))
    listed = set(rules._START_CANDIDATES)
    variants = set(re.findall(f"[{re.escape(rules._START_CANDIDATES)}]", everything, re.I))
    assert variants == listed


@pytest.mark.parametrize(
    ("phrases", "listed"),
    [
        (["as an AI", "I cannot help"], True),
        (["\u017ftop", "\u212aelvin", "'tis"], True),
        (["\u65e5\u672c", "as"], False),
        (["\U0001f44d\U0001f3fd deal"], False),
    ],
)
def test_phrases_beginning_beyond_ascii_are_always_searched(
    phrases: list[str], listed: bool
) -> None:
    scan = RuleCheck(forbidden_phrases=phrases)._phrase_scan
    assert scan is not None
    assert (scan[0].starts is not None) is listed
