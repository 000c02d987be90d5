"""The injection screen finds exactly what the frozen reference screen finds
(``support.screen_reference``, the screen as it stood before its anchor search was
rewritten): the same reason codes in the same order, for thousands of seeded texts."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replyguard.context._injection import suspected_injection
from support import screen_corpus
from support.screen_reference import suspected_injection as reference

CORPUS = list(screen_corpus.texts(4_000))


def _differences(texts: list[str]) -> list[tuple[str, list[str], list[str]]]:
    return [
        (text[:120], found, expected)
        for text in texts
        if (found := suspected_injection(text)) != (expected := reference(text))
    ]


def test_the_corpus_holds_thousands_of_texts_both_flagged_and_clean() -> None:
    flagged = sum(bool(reference(text)) for text in CORPUS)
    assert len(CORPUS) >= 4_000
    assert 500 < flagged < len(CORPUS) - 500


def test_every_reason_is_found_somewhere_in_the_corpus() -> None:
    from replyguard.context._injection import REASONS

    found = {reason for text in CORPUS for reason in reference(text)}
    assert found == set(REASONS)


def test_the_screen_finds_what_the_reference_finds_on_the_corpus() -> None:
    assert _differences(CORPUS) == []


def test_the_screen_finds_what_the_reference_finds_on_huge_texts() -> None:
    assert _differences(screen_corpus.huge_texts()) == []


@given(
    st.lists(
        st.one_of(st.sampled_from(screen_corpus.PIECES), st.text(max_size=4)),
        max_size=40,
    )
)
@settings(max_examples=600, suppress_health_check=[HealthCheck.too_slow], deadline=None)
def test_the_screen_finds_what_the_reference_finds_on_generated_texts(pieces: list[str]) -> None:
    text = "".join(pieces)
    assert suspected_injection(text) == reference(text)


@pytest.mark.parametrize("text", screen_corpus.RULE_EXAMPLES)
def test_each_rule_example_alone_and_surrounded(text: str) -> None:
    for variant in (text, text.upper(), f"x{text}x", f"\n{text}\n", f"{text} {text}"):
        assert suspected_injection(variant) == reference(variant)
