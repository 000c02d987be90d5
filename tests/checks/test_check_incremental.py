"""Incremental rules: ``RuleCheck.scanner`` decides on a prefix, agrees with the whole-reply
check, and scans each piece with a bounded overlap only (counted, not timed)."""

from __future__ import annotations

import random
import re

import pytest

from replyguard import Reply, RuleCheck, Turn
from replyguard.checks.incremental import IncrementalCheck, PrefixScanner
from replyguard.checks.patterns import reach

TURN = Turn(user_message="Tell me about it.")
PHRASES = ["as an AI", "hell", "!!!", "I can't", "👍🏽 deal"]
FILLER = [
    "Sure, ",
    "hello ",
    "shell ",
    "the model ",
    "👍🏽 ",
    "As an ",
    "AIM ",
    "e\u0301 ",
    "\n\n",
    "  ",
]


def scan(check: RuleCheck, pieces: list[str]) -> tuple[str | None, int, int]:
    """(the feedback of the first violation, pieces read, characters scanned)."""
    scanner = check.scanner(TURN)
    assert scanner is not None
    for count, piece in enumerate(pieces, 1):
        found = scanner.feed(piece)
        if found is not None:
            return found.feedback, count, scanner.scanned
    found = scanner.finish()
    return (found.feedback if found else None), len(pieces), scanner.scanned


def chunked(text: str, rng: random.Random, longest: int = 7) -> list[str]:
    pieces, at = [], 0
    while at < len(text):
        size = rng.randint(1, longest)
        pieces.append(text[at : at + size])
        at += size
    return pieces


def case_variant(text: str, rng: random.Random) -> str:
    return "".join(c.upper() if rng.random() < 0.5 else c.lower() for c in text)


def test_a_rule_check_declares_itself_incremental() -> None:
    check = RuleCheck(forbidden_phrases=["hell"])
    assert isinstance(check, IncrementalCheck)
    assert isinstance(check.scanner(TURN), PrefixScanner)


def test_only_rules_that_decide_on_a_prefix_make_a_scanner() -> None:
    end_only = RuleCheck(min_length=3, must_match=["x"], must_not_match=["x*", r"\p{L}+"])
    assert end_only.scanner(TURN) is None  # matches nothing at all; syntax re cannot read
    no_window = RuleCheck(must_not_match=["^a", "b.*c"], match_window_chars=0)
    assert no_window.scanner(TURN) is None
    assert RuleCheck(must_not_match=["^a", "b.*c"]).scanner(TURN) is not None  # windowed
    assert RuleCheck(max_length=10).scanner(TURN) is not None
    assert RuleCheck(must_not_match=[r"\d{3}-\d{4}"]).scanner(TURN) is not None


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("as an", (5, 1)),
        (r"\bfoo\b", (3, 1)),
        (r"\d{3}-\d{4}", (8, 1)),
        (r"(?<=abc)x", (1, 3)),
        (r"a.*b", None),
        (r"a+", None),
        ("^foo", None),
        ("foo$", None),
        (r"x*", None),
    ],
)
def test_a_patterns_reach_is_known_only_when_bounded(
    source: str, expected: tuple[int, int] | None
) -> None:
    assert reach(source, re.IGNORECASE) == expected


def test_a_phrase_split_across_pieces_is_caught_in_the_piece_that_decides_it() -> None:
    check = RuleCheck(forbidden_phrases=["as an AI"])
    feedback, read, _ = scan(check, ["I am a", "s a", "n A", "I model", " and more"])
    assert feedback is not None and "as an AI" in feedback
    assert read == 4  # "I" ends the phrase; the space after it decides the whole word


def test_a_word_edge_waits_for_the_next_character_and_holds_the_phrase_back() -> None:
    scanner = RuleCheck(forbidden_phrases=["hell"]).scanner(TURN)
    assert scanner is not None
    assert scanner.feed("oh hell") is None
    assert scanner.pending_from == 3
    assert scanner.feed("o there") is None  # "hello": no violation
    assert scanner.pending_from is None
    assert scanner.feed(" hell") is None
    found = scanner.finish()
    assert found is not None and not found.passed


def test_whitespace_runs_between_words_do_not_hide_a_phrase_and_offsets_stay_true() -> None:
    scanner = RuleCheck(forbidden_phrases=["as an AI"]).scanner(TURN)
    assert scanner is not None
    text = "x" + " " * 40 + "as" + "\n \t " * 30 + "an     AI"
    assert scanner.feed(text) is None
    assert scanner.pending_from == text.index("as")
    assert scanner.finish() is not None


def test_max_length_cuts_as_soon_as_it_is_passed() -> None:
    feedback, read, _ = scan(RuleCheck(max_length=10), ["12345", "67890", "1", "more"])
    assert read == 3 and feedback is not None and "11 characters" in feedback


def test_the_feedback_is_the_whole_reply_checks() -> None:
    check = RuleCheck(forbidden_phrases=["hell"], must_not_match=[r"\d{3}-\d{4}"])
    for text in ("what the hell.", "call 555-1234."):
        streamed, _, _ = scan(check, [text])
        assert streamed is not None
        whole = RuleCheck(forbidden_phrases=["hell"], must_not_match=[r"\d{3}-\d{4}"])
        assert whole.violations(text)
        assert streamed.splitlines()[-1].removeprefix("- ") in "\n".join(
            f"{rule}: {message}" for rule, message in whole.violations(text)
        )


async def test_scanning_agrees_with_the_whole_reply_check_on_random_text() -> None:
    rng = random.Random(21)
    check = RuleCheck(forbidden_phrases=PHRASES, must_not_match=[r"\d{3}-\d{4}"])
    for _ in range(600):
        words = [rng.choice(FILLER) for _ in range(rng.randint(0, 12))]
        if rng.random() < 0.5:
            phrase = rng.choice([*PHRASES, "555-1234"])
            words.insert(rng.randint(0, len(words)), case_variant(phrase, rng) + " ")
        text = "".join(words)
        streamed, _, _ = scan(check, chunked(text, rng))
        whole = await check.check(TURN, Reply(text=text))
        assert (streamed is None) == whole.passed, text


@pytest.mark.parametrize("piece_size", [1, 7, 200])
def test_the_characters_scanned_grow_linearly_with_the_reply(piece_size: int) -> None:
    check = RuleCheck(forbidden_phrases=PHRASES, must_not_match=[r"\d{3}-\d{4}"])
    overlap = max(len(p) for p in PHRASES) + 2 + 8 + 2  # longest phrase, pattern, contexts
    counts = []
    for size in (4_000, 8_000, 16_000):
        text = ("lorem ipsum dolor sit amet " * (size // 27 + 1))[:size]
        pieces = [text[i : i + piece_size] for i in range(0, size, piece_size)]
        feedback, _, scanned = scan(check, pieces)
        assert feedback is None
        # Each piece is scanned with at most the overlap before it, per search.
        assert scanned <= 2 * (size + len(pieces) * overlap)
        counts.append(scanned)
    assert counts[2] / counts[0] == pytest.approx(4, rel=0.05)  # linear, not quadratic


def test_an_operator_pattern_too_slow_for_a_piece_raises_for_the_stream_to_fall_back() -> None:
    from replyguard.checks.patterns import PatternTimeout

    check = RuleCheck(must_not_match=[r"(a|a|aa){1,40}b"])
    scanner = check.scanner(TURN)
    assert scanner is not None
    with pytest.raises(PatternTimeout):
        scanner.feed("a" * 40)
