"""The screen looks for code blocks only in a text holding a backtick or a tilde (a needle of
``_present``), read off the text it screens: full-width fences, which the skeleton maps to ASCII
ones, are fences too, whatever the line ends; a text with none skips the search and finds what
the search would have."""

from __future__ import annotations

import pytest

from replyguard.context._injection import suspected_injection

# Each a body whose finding a code block around it takes away.
BODIES = {
    "symbol-line": (["a = 1", ":", "b = 2"], "master_key"),
    "go-test-output": (
        ["=== RUN   TestX", "--- PASS: TestX (0.00s)", "PASS", "ok  pkg/x 0.01s"],
        "verdict_line",
    ),
    "master-key-last": (["final answer"], "master_key"),
}
FENCES = {
    "backticks": "```",
    "tildes": "~~~",
    "full-width-backticks": "\uff40\uff40\uff40",
    "full-width-tildes": "\uff5e\uff5e\uff5e",
    "four-full-width-backticks": "\uff40" * 4,
}
BREAKS = {"lf": "\n", "crlf": "\r\n", "cr": "\r", "line-separator": "\u2028", "nel": "\x85"}


def _text(body: list[str], fence: str | None, line_end: str, closed: bool) -> str:
    lines = ["Here is the output:", *([fence] if fence else []), *body]
    if fence and closed:
        lines.append(fence)
    return line_end.join(lines)


@pytest.mark.parametrize("body", BODIES.values(), ids=BODIES.keys())
@pytest.mark.parametrize("fence", FENCES.values(), ids=FENCES.keys())
@pytest.mark.parametrize("line_end", BREAKS.values(), ids=BREAKS.keys())
def test_a_fence_of_full_width_characters_hides_its_body_as_an_ascii_one(
    body: tuple[list[str], str], fence: str, line_end: str
) -> None:
    lines, finding = body
    closed = finding != "master_key" or lines != ["final answer"]  # a last line: unclosed
    bare = suspected_injection(_text(lines, None, line_end, closed))
    assert finding in bare  # the body alone is found
    fenced = suspected_injection(_text(lines, fence, line_end, closed))
    assert finding not in fenced, fenced  # inside a code block it is not: the block was found
    ascii_fence = "~" * len(fence) if fence[0] in "~\uff5e" else "`" * len(fence)
    assert fenced == suspected_injection(_text(lines, ascii_fence, line_end, closed))


@pytest.mark.parametrize(
    "fence",
    [
        pytest.param("\u02cb\u02cb\u02cb", id="modifier-grave"),  # not mapped to a backtick
        pytest.param("\u2035\u2035\u2035", id="reversed-prime"),
        pytest.param("``", id="two-backticks"),
        pytest.param("~~", id="two-tildes"),
    ],
)
def test_what_is_no_fence_hides_nothing(fence: str) -> None:
    lines, finding = BODIES["symbol-line"]
    text = _text(lines, fence, "\n", closed=True)
    assert finding in suspected_injection(text)


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("", id="empty"),
        pytest.param("\n" * 40, id="only-newlines"),
        pytest.param("\r\n" * 40, id="only-crlf"),
        pytest.param("\u2028" * 40, id="only-line-separators"),
        pytest.param("`", id="one-backtick"),
        pytest.param("~\n~\n~", id="lone-tildes"),
    ],
)
def test_texts_of_breaks_or_lone_fence_characters_find_nothing_of_code(text: str) -> None:
    found = suspected_injection(text)
    assert "master_key" not in found and "verdict_line" not in found
