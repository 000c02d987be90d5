"""Token counting and token-bounded cutting (tiktoken ``o200k_base``)."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from replyguard.context import _token_ends as token_ends
from replyguard.context import _tokens as tokens

MILLION = 1_000_000
Cut = Callable[[str, int], str]


def _repeat(unit: str, chars: int) -> str:
    return (unit * (chars // len(unit) + 1))[:chars]


# Long texts of very different densities; each is far over every limit used below.
LONG_TEXTS = {
    "prose": _repeat("The quick brown fox jumps over the lazy dog. ", 60_000),
    "cjk": _repeat("漢字仮名交じり文の例です。中文文本测试。", 30_000),
    "emoji": _repeat("🎉👩‍👩‍👧‍👦🇯🇵🏳️‍🌈", 30_000),
    "combining": _repeat("e\u0301a\u0308o\u0303 ", 30_000),
    "special-tokens": _repeat("text <|endoftext|> more <|fim_prefix|> ", 30_000),
    "one-character": "a" * 60_000,
    "code": _repeat('def f(x):\n    return {"k": [x, x * 2]}\n', 60_000),
}
LIMITS = [1, 8, 16, 32, 100, 1000]
CUTTERS: dict[str, Cut] = {
    "keep_ends": lambda text, limit: tokens.keep_ends(text, limit, "reply"),
    "keep_head": lambda text, limit: tokens.keep_head(text, limit, "rules"),
}
GAP = re.compile(r"\[… ([\d,]+) characters of the reply cut here …\]")
MORE = re.compile(r"\[… ([\d,]+) more characters of the rules cut here …\]")

long_texts = pytest.mark.parametrize("text", list(LONG_TEXTS.values()), ids=list(LONG_TEXTS))
limits = pytest.mark.parametrize("limit", LIMITS)
cutters = pytest.mark.parametrize("cut", list(CUTTERS.values()), ids=list(CUTTERS))


# -- count ----------------------------------------------------------------------------------------


def test_count_of_empty_text_is_zero() -> None:
    assert tokens.count("") == 0


def test_count_is_exact() -> None:
    text = "Hello, world! 漢字 🎉"
    assert tokens.count(text) == len(tokens.encoding().encode_ordinary(text))


@pytest.mark.parametrize("text", ["<|endoftext|>", "a <|endoftext|> b <|fim_prefix|>"])
def test_count_treats_special_tokens_as_ordinary_text(text: str) -> None:
    assert tokens.count(text) == len(tokens.encoding().encode_ordinary(text))
    assert tokens.count("<|endoftext|>") > 1  # not the single special token


# -- within ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "limit"),
    [("", 0), ("word", 1), ("one two three", 3), ("🎉" * 10, 100), ("a" * 1000, 1000)],
)
def test_within_is_true_when_the_text_fits(text: str, limit: int) -> None:
    assert tokens.count(text) <= limit
    assert tokens.within(text, limit) is True


@long_texts
@limits
def test_within_is_false_when_the_text_does_not_fit(text: str, limit: int) -> None:
    assert tokens.within(text, limit) is False


def test_within_is_exact_at_the_boundary() -> None:
    text = LONG_TEXTS["prose"][:2000]
    size = tokens.count(text)
    assert (tokens.within(text, size), tokens.within(text, size - 1)) == (True, False)


# -- head and tail -------------------------------------------------------------------------------


@long_texts
@limits
def test_head_is_a_prefix_within_the_limit(text: str, limit: int) -> None:
    start = tokens.head(text, limit)
    assert text.startswith(start)
    assert tokens.count(start) <= limit


@long_texts
@limits
def test_tail_is_a_suffix_within_the_limit(text: str, limit: int) -> None:
    end = tokens.tail(text, limit)
    assert text.endswith(end)
    assert tokens.count(end) <= limit


@pytest.mark.parametrize("edge", [tokens.head, tokens.tail], ids=["head", "tail"])
def test_head_and_tail_fill_the_limit_of_dense_text(edge: Cut) -> None:
    kept = edge(LONG_TEXTS["prose"], 500)
    assert 495 <= tokens.count(kept) <= 500


@pytest.mark.parametrize("edge", [tokens.head, tokens.tail], ids=["head", "tail"])
@pytest.mark.parametrize("limit", [0, -5])
def test_head_and_tail_of_no_room_are_empty(edge: Cut, limit: int) -> None:
    assert edge("some text", limit) == ""


@pytest.mark.parametrize("edge", [tokens.head, tokens.tail], ids=["head", "tail"])
@pytest.mark.parametrize(
    "text", ["", "short", "<|endoftext|>", "🎉" * 20, "e\u0301" * 20, "漢字" * 20], ids=repr
)
def test_head_and_tail_return_a_text_that_fits_unchanged(edge: Cut, text: str) -> None:
    assert edge(text, tokens.count(text)) == text


# -- keep_ends and keep_head ---------------------------------------------------------------------


@cutters
@pytest.mark.parametrize(
    "text",
    ["", "short", "<|endoftext|>", LONG_TEXTS["cjk"][:300]],
    ids=["empty", "short", "eot", "cjk"],
)
def test_cutters_return_a_text_that_fits_unchanged(cut: Cut, text: str) -> None:
    assert cut(text, max(tokens.count(text), 1)) == text


@cutters
@long_texts
@pytest.mark.parametrize("limit", [32, 100, 1000])
def test_cutters_never_exceed_the_limit(cut: Cut, text: str, limit: int) -> None:
    assert tokens.count(cut(text, limit)) <= limit


@cutters
@pytest.mark.parametrize("limit", [1, 8])
def test_cutters_never_exceed_a_limit_smaller_than_their_marker(cut: Cut, limit: int) -> None:
    assert tokens.count(cut(LONG_TEXTS["prose"], limit)) <= limit


@long_texts
def test_keep_ends_keeps_a_head_and_a_tail_around_a_gap_marker(text: str) -> None:
    kept = tokens.keep_ends(text, 200, "reply")
    start, end = GAP.split(kept)[::2]
    assert start.endswith("\n")
    assert end.startswith("\n")
    assert start[:-1]
    assert end[1:]
    assert text.startswith(start[:-1])
    assert text.endswith(end[1:])


@long_texts
def test_keep_ends_gap_marker_states_the_characters_cut(text: str) -> None:
    kept = tokens.keep_ends(text, 200, "reply")
    start, gap, end = GAP.split(kept)
    assert int(gap.replace(",", "")) == len(text) - len(start[:-1]) - len(end[1:])


@long_texts
def test_keep_head_keeps_a_prefix_and_states_the_characters_cut(text: str) -> None:
    kept = tokens.keep_head(text, 200, "rules")
    start, cut, rest = MORE.split(kept)
    assert rest == ""
    assert start.endswith("\n")
    assert start[:-1]
    assert text.startswith(start[:-1])
    assert int(cut.replace(",", "")) == len(text) - len(start[:-1])


def test_markers_name_what_was_cut() -> None:
    text = LONG_TEXTS["prose"]
    assert "of the user request cut here" in tokens.keep_ends(text, 100, "user request")
    assert "of the heartbeat tasks cut here" in tokens.keep_head(text, 100, "heartbeat tasks")


# -- very large inputs ---------------------------------------------------------------------------

MILLION_TEXTS = {
    "prose": _repeat("Lorem ipsum dolor sit amet, consectetur adipiscing elit. ", MILLION),
    "cjk": _repeat("漢字仮名交じり文の例です。", MILLION),
    "emoji": "🎉" * MILLION,
    "one-character": "a" * MILLION,
}


@pytest.mark.parametrize("text", list(MILLION_TEXTS.values()), ids=list(MILLION_TEXTS))
def test_million_character_inputs_are_cut_within_the_limit(text: str) -> None:
    limit = 3000
    start, end = tokens.head(text, limit), tokens.tail(text, limit)
    assert text.startswith(start)
    assert text.endswith(end)
    assert tokens.within(text, limit) is False
    results = [
        start,
        end,
        tokens.keep_ends(text, limit, "reply"),
        tokens.keep_head(text, limit, "rules"),
    ]
    assert max(tokens.count(result) for result in results) <= limit


# -- one cutter, many cuts; windows instead of the whole text -------------------------------------

EDGE_SIZES = [60, 200, 1000]


@long_texts
@pytest.mark.parametrize("size", EDGE_SIZES)
def test_a_text_of_exactly_the_limit_is_kept_whole_and_one_token_less_cuts_it(
    text: str, size: int
) -> None:
    exact = tokens.head(text, size)
    limit = tokens.count(exact)
    assert tokens.keep_ends(exact, limit, "reply") == exact
    assert tokens.keep_head(exact, limit, "rules") == exact
    cut = tokens.fit_ends(exact, limit - 1, "reply")
    assert cut.cut
    assert tokens.count(cut.text) <= limit - 1


@long_texts
def test_smaller_cuts_of_one_cutter_stay_within_their_limits(text: str) -> None:
    cutter = tokens.Cutter(text)
    for limit in (3000, 1000, 300, 60):
        ends, start = cutter.ends(limit, "reply"), cutter.head(limit, "rules")
        assert tokens.count(ends.text) <= limit
        assert tokens.count(start.text) <= limit
        pieces = GAP.split(ends.text)
        head, tail = pieces[0], pieces[-1]
        assert len(pieces) == 3
        assert text.startswith(head.removesuffix("\n"))
        assert text.endswith(tail.removeprefix("\n"))


@long_texts
@pytest.mark.parametrize("limit", [100, 1000, 3000])
def test_a_cut_reports_its_tokens_within_a_few_of_the_exact_count(text: str, limit: int) -> None:
    for kept in (tokens.fit_ends(text, limit, "reply"), tokens.fit_head(text, limit, "rules")):
        assert kept.counted
        assert abs(kept.tokens - tokens.count(kept.text)) <= 4
        if kept.exact:
            assert kept.tokens == tokens.count(kept.text)


@pytest.mark.parametrize("name", ["prose", "cjk", "code", "special-tokens"])
@pytest.mark.parametrize("limit", [1, 16, 47, 48, 100, 1000, 3000])
def test_a_cut_of_text_with_word_or_line_ends_reports_its_exact_tokens(
    name: str, limit: int
) -> None:
    """Its head ends and its tail starts where the counts add up, so what it reports is the
    count of what it kept, not a sum that BPE may merge differently."""
    text = LONG_TEXTS[name]
    cutter = tokens.Cutter(text)
    for kept in (cutter.ends(limit, "reply"), cutter.head(limit, "rules")):
        if name == "cjk" and limit < 48:  # a sentence can be longer than the whole cut
            continue
        assert kept.cut and kept.exact
        assert kept.tokens == tokens.count(kept.text) <= limit


def test_a_text_that_fits_by_its_size_is_not_tokenized_and_says_so() -> None:
    kept = tokens.fit_ends("short text", 100, "reply")
    assert (kept.text, kept.counted, kept.tokens) == ("short text", False, len("short text"))
    assert kept.tokens >= tokens.count(kept.text)


def test_the_size_bound_is_the_utf8_length_and_bounds_the_tokens() -> None:
    for text in ["plain", "漢字", "🎉" * 10, "e\u0301" * 10, "\ud800 lone surrogate"]:
        assert tokens.size_bound(text) == len(text.encode("utf-8", "surrogatepass"))
    for text in ["plain", "漢字", "🎉" * 10, "e\u0301" * 10]:
        assert tokens.count(text) <= tokens.size_bound(text)


def test_a_cutter_cleans_the_head_and_the_tail_but_never_the_marker() -> None:
    text = LONG_TEXTS["prose"]
    kept = tokens.Cutter(text, str.upper).ends(200, "reply")
    start, end = GAP.split(kept.text)[0], GAP.split(kept.text)[-1]
    assert start.isupper() and end.isupper()
    assert "characters of the reply cut here" in kept.text
    assert kept.changed
    assert (kept.counted, kept.tokens) == (False, tokens.size_bound(kept.text))


@long_texts
@pytest.mark.parametrize("from_end", [False, True], ids=["head", "tail"])
@pytest.mark.parametrize(("first", "then"), [(10, 100), (100, 3000), (1000, 5000), (5, MILLION)])
def test_a_grown_scan_holds_the_tokens_of_its_whole_piece(
    text: str, from_end: bool, first: int, then: int
) -> None:
    """A scan grown from a shorter one tokenizes only what it adds past a point where the
    tokens add up: its tokens are still exactly those of the whole piece it covers."""
    shorter = token_ends.scan(text, first, from_end=from_end)
    grown = token_ends.scan(text, then, from_end=from_end, known=shorter)
    piece = text if grown.whole else text[-grown.size :] if from_end else text[: grown.size]
    assert grown.tokens == tokens.encoding().encode_ordinary(piece)
