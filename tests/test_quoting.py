"""``replyguard.quoting``: one notion of "fenced or quoted", shared by all four readers.

The injection detector, the JSON repair, the checks' markdown reading and the verdict parser
once each decided on their own what a code block was, and disagreed (a ``~~~`` closing a
```` ``` ```` block for one, a ```` ```python ```` line closing a block for another). Each
case below is read by all four and must come out the same way.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replyguard import parse_verdict
from replyguard._quoting import AtLineStart, Kind, code_blocks, kinds, lines
from replyguard.checks.json_repair import repair_json
from replyguard.checks.markdown import prose_lines
from replyguard.context._injection import suspected_injection

FENCE = "```"


def test_a_fence_closes_on_its_own_character_at_least_as_long() -> None:
    text = "````\n```\n~~~\n````\nafter"
    assert kinds(text) == [Kind.FENCE, Kind.CODE, Kind.CODE, Kind.FENCE, Kind.TEXT]


def test_an_info_string_line_does_not_close_a_fence() -> None:
    text = f"{FENCE}\ncode\n{FENCE}python\nstill code\n{FENCE}\nafter"
    assert kinds(text)[-1] is Kind.TEXT
    assert kinds(text)[3] is Kind.CODE


def test_a_backtick_in_a_backtick_info_string_is_inline_code() -> None:
    assert code_blocks("```PASS```\ntext") == []
    assert len(code_blocks("~~~a`b\ncode\n~~~")) == 1


def test_an_unclosed_fence_runs_to_the_end() -> None:
    (block,) = code_blocks("before\n  ~~~json\n{}\n")
    assert (block.closed, block.language, block.end) == (
        False,
        "json",
        len("before\n  ~~~json\n{}\n"),
    )


def test_block_quotes_are_quoted_only_outside_fences() -> None:
    text = f"> quoted\n{FENCE}\n> code\n{FENCE}\n  > quoted too"
    assert kinds(text) == [Kind.QUOTE, Kind.FENCE, Kind.CODE, Kind.FENCE, Kind.QUOTE]


def test_lines_split_at_newlines_only() -> None:
    assert lines("a\r\nb\u2028c\n") == ["a", "b\u2028c"]


def test_a_megabyte_of_fence_lines_is_scanned_in_linear_time() -> None:
    text = "```\n" * 250_000
    assert len(code_blocks(text)) == 125_000


# Each text: a block opened by ``` and a line that one reader once took as its close.
DISAGREEMENTS = {
    "tilde-line-in-backtick-block": f"{FENCE}\n~~~\nPASS\n{FENCE}",
    "info-line-in-block": f"{FENCE}\nx\n{FENCE}python\nPASS\n{FENCE}",
    "longer-fence": f"````\n{FENCE}\nPASS\n````",
}


@pytest.mark.parametrize("body", DISAGREEMENTS.values(), ids=DISAGREEMENTS.keys())
def test_all_four_readers_see_the_same_block(body: str) -> None:
    text = f"The reply quotes [1]:\n{body}\nIt is fine otherwise."
    # the verdict parser: the PASS inside the block is quoted, so no verdict
    assert parse_verdict(text).readable is False
    # the checks' markdown reading: no line of the block is prose
    assert list(prose_lines(text)) == ["The reply quotes [1]:", "It is fine otherwise."]
    # the JSON repair: the JSON inside the block wins over the bracket before it
    assert repair_json(text.replace("PASS", '{"a": 1}')) == '{"a": 1}'
    # the injection detector: a lone PASS in pasted test output inside the block is exempt
    go_test = text.replace("PASS", "=== RUN   TestX\n--- PASS: TestX (0.00s)\nPASS")
    assert "verdict_line" not in suspected_injection(go_test)


_LINE_PATTERNS = (r"[ \t]*>", r"[ \t]*[:.,;。、][ \t]*$", r"#{1,6} ?sys(?: prompt)? ?$", r"a|b+")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=st.text(alphabet="ab#>:. \t\n\r。sy", max_size=40),
    pattern=st.sampled_from(_LINE_PATTERNS),
    position=st.integers(min_value=0, max_value=40),
)
def test_a_line_start_pattern_finds_what_a_caret_under_multiline_finds(
    text: str, pattern: str, position: int
) -> None:
    position = min(position, len(text))
    caret = re.compile(f"^(?:{pattern})", re.M)
    lines_only = AtLineStart(pattern)
    expected = [match.start() for match in caret.finditer(text, position)]
    assert list(lines_only.starts(text, position)) == expected
    assert (lines_only.search(text) is None) == (caret.search(text) is None)
