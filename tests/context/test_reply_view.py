"""``reply_in_view``: what of a reply the judge prompt can show, for the injection screen."""

from __future__ import annotations

from replyguard.context import VIEW_EDGE, ContextLimits, build_judge_prompt, reply_in_view
from replyguard.context._sanitise import fenced
from replyguard.types import Turn

LINE = "The quarterly numbers went up in every region and the team shipped the billing work.\n"


def test_a_reply_that_fits_its_cap_is_its_own_view() -> None:
    text = LINE * 10
    assert reply_in_view(text, 3000) is text


def test_a_long_reply_s_view_is_its_start_and_end_only() -> None:
    text = "START\n" + LINE * 20_000 + "END\n"
    view = reply_in_view(text, 3000)
    assert view.startswith("START\n") and view.endswith("END\n")
    assert len(view) < 2 * (3000 * 16 + VIEW_EDGE)  # bounded by the cap, not by the reply


def test_the_view_does_not_grow_with_the_reply() -> None:
    short = reply_in_view(LINE * 2_000, 3000)
    long = reply_in_view(LINE * 200_000, 3000)
    assert abs(len(long) - len(short)) <= 2 * len(LINE)


def test_the_view_finishes_the_lines_its_cuts_split() -> None:
    text = LINE * 20_000
    view = reply_in_view(text, 3000)
    assert view != text
    assert all(line in ("", LINE.rstrip("\n")) for line in view.split("\n"))


def test_everything_the_prompt_shows_of_the_reply_is_in_the_view() -> None:
    text = "".join(f"line {i}: {LINE}" for i in range(20_000))
    prompt = build_judge_prompt(
        Turn(user_message="Summarise."), text, limits=ContextLimits(), nonce="abc123"
    )
    view = reply_in_view(text, ContextLimits().response_cap)
    shown = prompt.user.split("line 0: ", 1)[1]
    start, _, rest = shown.partition("\n[…")
    end = rest.split("…]\n", 1)[1].split("\n\n", 1)[0]
    assert ("line 0: " + start) in view
    assert fenced(end, "abc123") in view


def test_a_reply_whose_size_proves_it_fits_is_its_own_view_and_scans_nothing() -> None:
    from replyguard.context import _tokens as tokens
    from replyguard.context._fitting import view_of

    for text in ("", "x", LINE * 10, "é" * 700, "語" * 300):
        cutter = tokens.Cutter(text)
        assert tokens.surely_within(text, 3000)
        assert view_of(cutter, 3000) is text
        assert cutter._head is None and cutter._tail is None  # the prompt's cut scans afresh
        assert view_of(tokens.Cutter(text), 3000) == tokens.Cutter(text).ends(3000, "r").text
