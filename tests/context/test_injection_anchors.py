"""The detector's anchor search: the gated search (one regex per group of anchors) finds
exactly what a plain search of every anchor finds."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replyguard.context._injection import _ANCHORS, _anchors_in
from support.injection_corpus import BENIGN, HOSTILE

TEXTS = [sample.text.lower() for sample in (*HOSTILE, *BENIGN)]


def plain_search(text: str) -> frozenset[str]:
    return frozenset(anchor for anchor in _ANCHORS if anchor in text)


@pytest.mark.parametrize("text", TEXTS)
def test_the_gated_search_finds_the_anchors_of_every_corpus_text(text: str) -> None:
    assert _anchors_in(text) == plain_search(text)


@pytest.mark.parametrize("anchor", sorted(_ANCHORS))
def test_every_anchor_is_found_alone_and_inside_other_text(anchor: str) -> None:
    assert _anchors_in(anchor) == plain_search(anchor) >= {anchor}
    inside = f"zz{anchor}zz and more words"
    assert anchor in _anchors_in(inside)
    assert _anchors_in(inside) == plain_search(inside)


def test_text_without_any_anchor_finds_none() -> None:
    assert _anchors_in("zzz qqq xxx") == frozenset()


# Pieces that make and break anchors: each anchor, its halves, look-alike neighbours.
PIECES = sorted(
    {
        *_ANCHORS,
        *(anchor[:cut] for anchor in _ANCHORS for cut in range(1, len(anchor))),
        *(anchor[cut:] for anchor in _ANCHORS for cut in range(1, len(anchor))),
        " ",
        "\n",
        "<",
        "[",
        "|",
        "/",
        "1",
        "0",
        "x",
    }
)


@given(st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=3)), max_size=30))
@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
def test_the_gated_search_finds_what_a_plain_search_finds(pieces: list[str]) -> None:
    text = "".join(pieces)
    assert _anchors_in(text) == plain_search(text)
