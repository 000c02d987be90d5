"""The screen's needle search (``_screen_gate._present``) held to its definition, the needles
that occur in the text (``{n for n in _needles() if n in text}``), over a seeded walk of texts
built to break a cleverer search: the needles themselves, each one cut at every position,
needles that overlap one another (a tail of one the head of the next, one inside another),
random mixes of all of these, the forms the screen maps (upper case, combining marks, full-width
letters, look-alike letters, taken raw and through the screen's skeleton), the empty text and a
long one. A search that reports each needle by finding its matches one after another (a regex
alternation) misses overlapped ones; the last tests show the walk catches that.
"""

from __future__ import annotations

import random
import re
import unicodedata
from collections.abc import Callable, Iterator

from replyguard.context._screen_gate import _needles, _present
from support import screen_corpus, screen_oracle

NEEDLES = _needles()
FILLER = ("", " ", "x", "a", "\n", ":", "s", "e", "  ", "é", "ß", "İ", "\u0301", "1", "0")


def naive(text: str) -> frozenset[str]:
    return frozenset(needle for needle in NEEDLES if needle in text)


def _overlaps() -> list[str]:
    """Each pair of needles joined where a tail of the first is the head of the second (each
    such overlap), and each needle inside a longer one that holds it."""
    joined = [
        first + second[size:]
        for first in NEEDLES
        for second in NEEDLES
        for size in range(1, min(len(first), len(second)))
        if first != second and first.endswith(second[:size])
    ]
    inside = [outer for outer in NEEDLES if any(n != outer and n in outer for n in NEEDLES)]
    return joined + inside


def _cuts() -> list[str]:
    """Each needle cut at every position: its heads and tails, never the whole needle."""
    return [piece for n in NEEDLES for i in range(1, len(n)) for piece in (n[:i], n[i:])]


def _forms(text: str, rng: random.Random) -> Iterator[str]:
    """``text`` as the screen may meet it: upper case, a combining mark inside it, full-width,
    look-alike letters; each raw and as the screen reads it (its skeleton, flattened)."""
    marked = "".join(char + ("\u0301" if rng.random() < 0.2 else "") for char in text)
    for form in (
        text.upper(),
        marked,
        unicodedata.normalize("NFC", marked),
        screen_corpus._fullwidth(text, rng),
        screen_corpus._look_alike(text, rng),
    ):
        yield form
        yield screen_oracle.skeleton(form)[2]


def walk(seed: int = 42) -> Iterator[str]:
    """The texts of the walk (seeded, about 12,000 of them)."""
    rng = random.Random(seed)
    overlaps, cuts = _overlaps(), _cuts()
    yield ""
    yield from NEEDLES
    yield from overlaps
    yield from cuts
    pieces = [*NEEDLES, *overlaps, *cuts, *FILLER]
    for _ in range(3_000):
        mix = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 8)))
        yield mix
        if rng.random() < 0.3:
            yield from _forms(mix, rng)
    yield "".join(rng.choice(pieces) for _ in range(20_000))  # a long text, ~100K characters
    yield screen_corpus.PROSE * 200 + "bypass"  # the only needle at the very end


def _misses(search: Callable[[str], frozenset[str]]) -> list[str]:
    return [text[:80] for text in walk() if search(text) != naive(text)]


def test_the_walk_meets_every_needle_and_overlap() -> None:
    texts = list(walk())
    assert len(texts) > 10_000
    assert all(any(needle in text for text in texts) for needle in NEEDLES)
    assert "bypass" in _overlaps() and "approverride" in _overlaps()  # inside; tail-head
    assert any(len(text) > 50_000 for text in texts)


def test_the_needle_search_finds_exactly_the_needles_that_occur() -> None:
    assert _misses(_present) == []


def _alternation(text: str) -> frozenset[str]:
    """A planted bug: one regex alternation of the needles (the longest first), its matches
    met one after another, so a needle overlapped by an earlier match goes unreported."""
    pattern = re.compile("|".join(map(re.escape, sorted(NEEDLES, key=len, reverse=True))))
    return frozenset(pattern.findall(text))


def test_the_walk_catches_a_search_that_misses_overlapped_needles() -> None:
    assert _alternation("bypass") == {"bypass"} != naive("bypass")
    assert _misses(_alternation)


def test_the_walk_catches_a_search_that_drops_a_needle() -> None:
    for dropped in ("pass", "10", "~", "if you are "):
        assert _misses(lambda text, dropped=dropped: _present(text) - {dropped})
