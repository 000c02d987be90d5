"""``RuleCheck``: lengths, required and forbidden patterns, forbidden phrases, named rules."""

from __future__ import annotations

import pytest

from replyguard.checks.base import Check, CheckResult
from replyguard.checks.rules import RuleCheck
from replyguard.types import FailCategory, Reply, Turn

TURN = Turn(user_message="Summarise the report.")


async def run(check: RuleCheck, text: str) -> CheckResult:
    return await check.check(TURN, Reply(text=text))


async def feedback(check: RuleCheck, text: str) -> str:
    result = await run(check, text)
    assert not result.passed
    return result.feedback or ""


def test_a_rule_check_is_a_check() -> None:
    check = RuleCheck(name="house-rules", required=True)
    assert (isinstance(check, Check), check.name, check.required) == (True, "house-rules", True)


async def test_a_check_without_rules_passes_anything() -> None:
    result = await run(RuleCheck(), "anything at all, as an AI")
    assert (result.passed, result.feedback, result.decisive) == (True, None, False)


# -- lengths ----------------------------------------------------------------------------------


async def test_a_reply_over_max_length_fails_with_both_numbers() -> None:
    text = await feedback(RuleCheck(max_length=2000), "x" * 5230)
    assert "max_length: The reply is 5,230 characters long; the limit is 2,000." in text


async def test_a_reply_at_max_length_passes() -> None:
    assert (await run(RuleCheck(max_length=10), "x" * 10)).passed


async def test_a_reply_under_min_length_fails_with_both_numbers() -> None:
    text = await feedback(RuleCheck(min_length=1000), "too short")
    assert "min_length: The reply is 9 characters long; it must be at least 1,000." in text


async def test_a_reply_at_min_length_passes() -> None:
    assert (await run(RuleCheck(min_length=3), "abc")).passed


async def test_length_counts_characters_not_bytes() -> None:
    assert (await run(RuleCheck(max_length=3), "héé")).passed


async def test_length_counts_whitespace_as_delivered() -> None:
    assert not (await run(RuleCheck(max_length=3), " ab ")).passed


@pytest.mark.parametrize(
    ("min_length", "max_length", "message"),
    [
        (None, 0, "max_length must be at least 1"),
        (-1, None, "min_length must not be negative"),
        (10, 5, "min_length 10 is above max_length 5"),
    ],
    ids=["max-zero", "min-negative", "min-above-max"],
)
def test_impossible_lengths_are_refused_at_construction(
    min_length: int | None, max_length: int | None, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        RuleCheck(min_length=min_length, max_length=max_length)


# -- patterns ---------------------------------------------------------------------------------


async def test_a_reply_missing_a_required_pattern_fails_naming_it() -> None:
    text = await feedback(RuleCheck(must_match=[r"^Summary:"]), "Here it is.")
    assert "must_match: The reply does not match the required pattern '^Summary:'." in text


async def test_a_required_pattern_is_searched_anywhere() -> None:
    assert (await run(RuleCheck(must_match=[r"\bTL;DR\b"]), "Long text.\nTL;DR: fine")).passed


async def test_every_required_pattern_must_match() -> None:
    check = RuleCheck(must_match=["alpha", "beta"])
    assert "'beta'" in await feedback(check, "alpha only")


async def test_a_forbidden_pattern_fails_quoting_what_it_matched() -> None:
    text = await feedback(RuleCheck(must_not_match=[r"https?://\S+"]), "See http://x.test now")
    assert (
        "must_not_match: The reply matches the forbidden pattern 'https?://\\S+' "
        "(at 'http://x.test')." in text
    )


async def test_a_long_forbidden_match_is_shortened_in_the_feedback() -> None:
    text = await feedback(RuleCheck(must_not_match=["a+"]), "a" * 500)
    assert f"(at '{'a' * 59}…')" in text


async def test_a_reply_without_the_forbidden_pattern_passes() -> None:
    assert (await run(RuleCheck(must_not_match=[r"\d{16}"]), "card ending 4242")).passed


async def test_patterns_ignore_case_by_default() -> None:
    assert (await run(RuleCheck(must_match=["summary"]), "SUMMARY: ok")).passed


async def test_patterns_respect_case_when_asked() -> None:
    assert not (await run(RuleCheck(must_match=["summary"], case_sensitive=True), "SUMMARY")).passed


def test_an_invalid_pattern_is_refused_at_construction_naming_it() -> None:
    with pytest.raises(ValueError, match=r"'\(unclosed' is not a valid regular expression"):
        RuleCheck(must_not_match=["(unclosed"])


# -- forbidden phrases ------------------------------------------------------------------------


async def test_a_forbidden_phrase_fails_naming_the_phrase() -> None:
    text = await feedback(RuleCheck(forbidden_phrases=["as an AI"]), "Well, as an AI, I can't.")
    assert "forbidden_phrases: The reply contains the forbidden phrase 'as an AI'." in text


@pytest.mark.parametrize(
    ("phrase", "text"),
    [
        ("as an AI", "As An Ai, I think so."),
        ("as an AI", "as  an\nAI"),
        ("as an AI", "(as an AI)"),
        ("I'm sorry", "I\u2019m sorry about that."),
        ("I\u2019m sorry", "I'm sorry about that."),
        ("!!!", "wow!!!!"),
        ("hell", "hell, no"),
        ("e.g.", "fruit, e.g. apples"),
        ("great question", "What a GREAT question!"),
    ],
    ids=repr,
)
async def test_forbidden_phrase_fires(phrase: str, text: str) -> None:
    assert not (await run(RuleCheck(forbidden_phrases=[phrase]), text)).passed


@pytest.mark.parametrize(
    ("phrase", "text"),
    [
        ("hell", "hello there"),
        ("hell", "Michelle"),
        ("hell", "a seashell"),
        ("as an AI", "it has an AI"),
        ("as an AI", "it has an AIM"),
        ("as an AI", "as an AIR purifier"),
        ("sorry", "no apologies"),
        ("as an AI", "as a human"),
    ],
    ids=repr,
)
async def test_forbidden_phrase_does_not_fire(phrase: str, text: str) -> None:
    assert (await run(RuleCheck(forbidden_phrases=[phrase]), text)).passed


async def test_forbidden_phrases_respect_case_when_asked() -> None:
    check = RuleCheck(forbidden_phrases=["As an AI"], case_sensitive=True)
    assert (await run(check, "as an AI")).passed


def test_an_empty_forbidden_phrase_is_refused_at_construction() -> None:
    with pytest.raises(ValueError, match="must not be empty"):
        RuleCheck(forbidden_phrases=["  "])


# -- named rules ------------------------------------------------------------------------------


def no_emoji(text: str) -> tuple[bool, str]:
    return ("🙂" not in text, "Remove the emoji.")


async def test_a_failing_named_rule_gives_its_message_under_its_name() -> None:
    text = await feedback(RuleCheck(rules={"no_emoji": no_emoji}), "Sure 🙂")
    assert "- no_emoji: Remove the emoji." in text


async def test_a_passing_named_rule_passes() -> None:
    assert (await run(RuleCheck(rules={"no_emoji": no_emoji}), "Sure.")).passed


async def test_a_named_rule_gets_the_reply_text() -> None:
    seen: list[str] = []

    def record(text: str) -> tuple[bool, str]:
        seen.append(text)
        return True, ""

    await run(RuleCheck(rules={"record": record}), "the reply")
    assert seen == ["the reply"]


async def test_a_named_rule_failing_without_a_message_is_still_named() -> None:
    text = await feedback(RuleCheck(rules={"terse": lambda _: (False, "")}), "x")
    assert "- terse: The reply breaks the rule 'terse'." in text


def fifth_word_is_x(text: str) -> tuple[bool, str]:
    return text.split()[4] == "x", "The fifth word must be x."  # IndexError on short replies


async def test_a_named_rule_that_raises_is_a_violation_naming_the_error() -> None:
    text = await feedback(RuleCheck(rules={"fifth": fifth_word_is_x}), "too short")
    assert "- fifth: The rule 'fifth' could not be checked (IndexError)." in text


async def test_a_named_rule_that_raises_keeps_the_other_rules_findings() -> None:
    check = RuleCheck(
        rules={"fifth": fifth_word_is_x}, max_length=5, forbidden_phrases=["as an AI"]
    )
    text = await feedback(check, "As an AI, no.")
    assert text.startswith("The reply breaks 3 rules:\n- max_length: ")
    assert "- forbidden_phrases: " in text


async def test_a_named_rule_returning_the_wrong_shape_is_a_violation_naming_it() -> None:
    rule = lambda _: True  # noqa: E731 - the wrong shape is the point
    text = await feedback(RuleCheck(rules={"bare": rule}), "x")  # type: ignore[dict-item]
    assert "- bare: The rule 'bare' returned bool, not (passed, message): fix the rule." in text


# -- the result ---------------------------------------------------------------------------------


async def test_every_violation_is_listed_in_one_feedback_each_named() -> None:
    check = RuleCheck(
        rules={"no_emoji": no_emoji},
        max_length=5,
        must_match=["^Summary"],
        forbidden_phrases=["as an AI", "sorry"],
    )
    text = await feedback(check, "Sorry 🙂, as an AI")
    assert text == (
        "The reply breaks 5 rules:\n"
        "- max_length: The reply is 17 characters long; the limit is 5.\n"
        "- must_match: The reply does not match the required pattern '^Summary'.\n"
        "- forbidden_phrases: The reply contains the forbidden phrase 'as an AI'.\n"
        "- forbidden_phrases: The reply contains the forbidden phrase 'sorry'.\n"
        "- no_emoji: Remove the emoji."
    )


async def test_a_single_violation_says_one_rule() -> None:
    assert (await feedback(RuleCheck(max_length=1), "ab")).startswith("The reply breaks 1 rule:\n")


async def test_a_failure_is_a_rule_violation_by_default() -> None:
    assert (await run(RuleCheck(max_length=1), "ab")).category is FailCategory.RULE_VIOLATION


async def test_a_failure_has_the_configured_category() -> None:
    check = RuleCheck(max_length=1, category=FailCategory.TONE_MISMATCH)
    assert (await run(check, "ab")).category is FailCategory.TONE_MISMATCH


async def test_the_result_carries_the_check_name() -> None:
    assert (await run(RuleCheck(max_length=1, name="house"), "ab")).name == "house"


def test_violations_lists_rule_names_and_messages() -> None:
    assert RuleCheck(forbidden_phrases=["x"]).violations("a x b") == [
        ("forbidden_phrases", "The reply contains the forbidden phrase 'x'.")
    ]
