"""Token counts that add up: where ``o200k_base``'s pre-tokenizer always splits, and the exact
count of joined texts from the counts of their parts (``replyguard.context._joins``)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replyguard.context import _joins as joins
from replyguard.context import _tokens as tokens

PROPERTY = settings(
    max_examples=400, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
# Characters on both sides of every rule, and the ones that bend a rule: apostrophes and
# contractions, "/" after a line break, combining marks, digits of every script, spaces that
# Python and the tokenizer's regex class differently, unassigned code points.
PIECES = st.sampled_from(
    [
        "a", "Z", "é", "ß", "Ж", "\u017f", "\u212a",
        "漢", "字", "。", "、", "「", "\uff01", "ー", "가",
        "0", "7", "٣", "²", "½", "Ⅻ", "123456",
        " ", "  ", "\t", "\n", "\r", "\r\n", "\n\n", " \n", "\x0b", "\x0c", "\x1c", "\x85",
        "\u00a0", "\u2028", "\u3000",
        "'", "'s", "'S", "'ll", "'re", "'\u017f", "\u2019",
        "/", ".", ",", ":", ";", "!", "?", "-", "_", "(", ")", "[", "]", "<", ">", '"', "`",
        "#", "$", "%", "&", "*", "+", "=", "|", "\\", "{", "}", "~", "...",
        "\u0301", "\u0308", "\u200b", "\u200d", "\ufeff", "\x00", "\U000e0001", "\U00030000",
        "🎉", "👩‍👧", "🇯🇵", "<|endoftext|>",
        "Hello", "hello", "HELLO", "don't", "IT'S", "the", " the",
    ]
)  # fmt: skip
TEXT = st.lists(
    st.one_of(PIECES, st.text(st.characters(exclude_categories=("Cs",)), max_size=6)),
    min_size=1,
    max_size=40,
).map("".join)


@PROPERTY
@given(TEXT)
def test_the_counts_add_up_at_every_point_split_vouches_for(text: str) -> None:
    whole = tokens.count(text)
    for point in range(1, len(text)):
        if joins.split(text[point - 1], text[point]):
            assert tokens.count(text[:point]) + tokens.count(text[point:]) == whole, point


@PROPERTY
@given(st.lists(st.tuples(TEXT, st.booleans()), min_size=1, max_size=8))
def test_a_joined_count_is_the_count_of_the_joined_text(parts: list[tuple[str, bool]]) -> None:
    given_parts = [(text, tokens.count(text) if known else None) for text, known in parts]
    joined = "".join(text for text, _ in parts)
    assert joins.joined_count(given_parts, tokens.count) == tokens.count(joined)


def test_prose_code_and_cjk_split_at_word_and_line_ends() -> None:
    assert joins.split("d", " ") and joins.split("d", "\n") and joins.split("d", ".")
    assert joins.split("\n", "d") and joins.split("\n", "<")
    assert joins.split(".", " ") and joins.split("7", " ")
    assert joins.split("字", "。")
    assert not joins.split("d", "e") and not joins.split("d", "'")
    assert not joins.split(" ", "d") and not joins.split(".", "\n") and not joins.split("\n", "/")
    assert not joins.split("e", "\u0301")


def test_a_known_part_is_tokenized_only_at_its_edges() -> None:
    seen: list[str] = []

    def count(text: str) -> int:
        seen.append(text)
        return tokens.count(text)

    middle = "The quick brown fox jumps over the lazy dog. " * 200
    parts = [("<reply>\n", None), (middle, tokens.count(middle)), ("\n</reply>", None)]
    total = joins.joined_count(parts, count)
    assert total == tokens.count("".join(text for text, _ in parts))
    assert max(len(text) for text in seen) < 100


def test_a_known_part_with_no_split_near_an_edge_is_tokenized_whole() -> None:
    blob = "x" * 500
    parts = [("'", None), (blob, tokens.count(blob)), ("y", None)]
    assert joins.joined_count(parts, tokens.count) == tokens.count("'" + blob + "y")
