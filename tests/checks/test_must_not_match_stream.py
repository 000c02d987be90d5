"""``mustNotMatch`` patterns of any length, checked while a reply streams (through
``Verifier.stream`` and the shipped fakes): a match that fits ``matchWindowChars`` is never
shown, ``"buffer"`` cuts the stream, a longer match is caught at the end, and the work is
counted, not timed."""

from __future__ import annotations

import json
import random
import re
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from replyguard import (
    ConfigError,
    Delta,
    Done,
    Outcome,
    Retract,
    RuleCheck,
    Status,
    Turn,
    Verifier,
    VerifierConfig,
)
from replyguard.checks import patterns, rules
from replyguard.testing import ScriptedJudge, ScriptedStreamAgent

TURN = Turn(user_message="How do I log in?")
SECRET_PATTERN = r"(?i)password:\s*\S+"
LEAK = ["Your account is ready. Pass", "word: ", "hunter2", " and keep it safe.", " Bye."]
CLEAN = "Your account is ready; the password is in the vault."


@pytest.fixture(autouse=True)
def _patient_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    """A piece's search may take 50 ms on the event loop; on a loaded test machine a stall of
    the process alone can pass that and leave the pattern to the end. Not what these test."""
    monkeypatch.setattr(rules, "_FEED_TIME_LIMIT", 5.0)


async def collect(stream: AsyncIterator[Any]) -> list[Any]:
    return [event async for event in stream]


def outcome_of(events: Sequence[Any]) -> Outcome:
    """The outcome, once the stream's rule holds: the deltas after the last Retract spell it."""
    assert isinstance(events[-1], Done)
    last = max((i for i, e in enumerate(events) if isinstance(e, Retract)), default=-1)
    shown = "".join(e.text for e in events[last + 1 :] if isinstance(e, Delta))
    assert shown == events[-1].outcome.response
    return events[-1].outcome


def first_attempt_shown(events: Sequence[Any]) -> str:
    """What the first reply showed: the deltas before the first Retract; a rejected reply that
    showed nothing is not retracted (a reply that was not rejected showed every delta)."""
    until = next((i for i, e in enumerate(events) if isinstance(e, Retract)), None)
    if until is None and len(outcome_of(events).attempts) > 1:
        return ""
    return "".join(e.text for e in events[:until] if isinstance(e, Delta))


def streamer(
    make_config: Any, mode: str, *, hold: int = 0, judge: Sequence[str] = ("PASS",), **rule: Any
) -> Verifier:
    config = make_config(
        verifyAll=True,
        checks=[{"type": "rules", **rule}],
        streaming={"mode": mode, "holdBackChars": hold},
    )
    return Verifier(config, judge=ScriptedJudge(list(judge)), preload=False)


# -- the secret of the issue ---------------------------------------------------------------------


@pytest.mark.parametrize("hold", [0, 64])
async def test_release_mode_never_shows_a_secret_a_pattern_of_unbounded_length_forbids(
    make_config: Any, hold: int
) -> None:
    agent = ScriptedStreamAgent([LEAK, [CLEAN]])
    verifier = streamer(make_config, "release", hold=hold, mustNotMatch=[SECRET_PATTERN])
    events = await collect(verifier.stream(agent, TURN))
    outcome = outcome_of(events)
    assert (outcome.status, outcome.response) == (Status.PASSED, CLEAN)
    assert not any("hunter2" in e.text for e in events if isinstance(e, Delta))
    # Not a letter of the match: "Pass" could begin one, so it was held from its arrival.
    assert "Pass" not in first_attempt_shown(events)
    assert agent.pulled[0] == 3 and agent.closed == 2  # cut at the piece that completed it
    first = outcome.attempts[0]
    assert first.verdict is not None and first.verdict.decisive and not first.verdict.passed
    assert "must_not_match" in (first.verdict.feedback or "")
    assert [m["role"] for m in agent.calls[1]] == ["user", "user"]  # cut: not in the history


async def test_buffer_mode_cuts_the_stream_at_the_secret(make_config: Any) -> None:
    agent = ScriptedStreamAgent([LEAK, [CLEAN]])
    verifier = streamer(make_config, "buffer", mustNotMatch=[SECRET_PATTERN])
    events = await collect(verifier.stream(agent, TURN))
    outcome = outcome_of(events)
    assert (outcome.status, outcome.response) == (Status.PASSED, CLEAN)
    assert [e.text for e in events if isinstance(e, Delta)] == [CLEAN]
    assert agent.pulled[0] == 3  # the agent's stream was closed there: no more tokens paid
    assert outcome.attempts[0].reply.text == "".join(LEAK[:3])


async def test_a_window_of_zero_leaves_such_patterns_to_the_end(make_config: Any) -> None:
    agent = ScriptedStreamAgent([LEAK, [CLEAN]])
    verifier = streamer(make_config, "release", mustNotMatch=[SECRET_PATTERN], matchWindowChars=0)
    events = await collect(verifier.stream(agent, TURN))
    assert outcome_of(events).response == CLEAN
    assert agent.pulled[0] == len(LEAK)  # read to the end: not checked on the way
    assert "hunter2" in first_attempt_shown(events)  # shown, then retracted: the old way


@pytest.mark.parametrize("mode", ["buffer", "release"])
async def test_a_match_longer_than_the_window_is_still_caught_at_the_end(
    make_config: Any, mode: str
) -> None:
    long_one = ["BEGIN key ", "x" * 60, " and ", "y" * 60, " END", " done."]
    agent = ScriptedStreamAgent([long_one, [CLEAN]])
    verifier = streamer(make_config, mode, mustNotMatch=[r"BEGIN.*END"], matchWindowChars=32)
    events = await collect(verifier.stream(agent, TURN))
    outcome = outcome_of(events)
    assert (outcome.status, outcome.response) == (Status.PASSED, CLEAN)
    assert agent.pulled[0] == len(long_one)  # too long for the window: not cut on the way
    first = outcome.attempts[0]
    assert first.verdict is not None and not first.verdict.passed
    assert "forbidden pattern 'BEGIN.*END'" in (first.verdict.feedback or "")
    retracts = [e for e in events if isinstance(e, Retract)]
    assert retracts == ([Retract(1, "rules")] if mode == "release" else [])


async def test_anchored_patterns_are_checked_on_the_way_too(make_config: Any) -> None:
    agent = ScriptedStreamAgent(
        [["Note: the ", "word is ", "fine.\nSECRET ", "plans ahead"], ["ok"]]
    )
    verifier = streamer(make_config, "buffer", mustNotMatch=[r"(?m)^secret\b", r"^the"])
    outcome = outcome_of(await collect(verifier.stream(agent, TURN)))
    assert outcome.response == "ok"
    assert agent.pulled[0] == 3  # "^the" never matched mid-text; "SECRET " at a line start did
    assert "(?m)^secret" in (outcome.attempts[0].verdict.feedback or "")  # type: ignore[union-attr]


# -- never shown, whatever the pieces ------------------------------------------------------------

PATTERNS = [
    (SECRET_PATTERN, ["password: s3cr3t!", "PASSWORD:\thunter2", "Password:x"]),
    (r"(?i)api[_-]?key\s*[:=]\s*\w+", ["api_key = abc123", "APIKEY:zz9", "api-key=\tQ"]),
    (r"BEGIN.*?END", ["BEGIN private END", "BEGINEND", "BEGIN a b c d e f g END"]),
    (r"\bcard \d+(?:[ -]\d+)*", ["card 4242 4242 4242 4242", "card 1-2-3"]),
    (r"(?m)^token \w+$", ["\ntoken abc\n", "\ntoken Z9\n"]),
    (r"(?<=id=)\d+\b", ["id=12345 ", "id=7 "]),
    (r"\d{3}-\d{4}", ["555-1234", "call 212-5555"]),  # bounded: held all the same
]
FILLER = ["Sure. ", "pass ", "the word ", "api ", "BEG ", "card ", "token ", "id ", "\n", "ok, "]


async def test_no_match_that_fits_the_window_is_ever_shown_on_random_streams(
    make_config: Any,
) -> None:
    rng = random.Random(35)
    for _ in range(240):
        source, secrets = rng.choice(PATTERNS)
        words = [rng.choice(FILLER) for _ in range(rng.randint(0, 14))]
        words.insert(rng.randint(0, len(words)), rng.choice(secrets))
        words.append(" and more text after it. ")
        text = "".join(words)
        match = re.search(source, text)
        assert match is not None, (source, text)
        pieces, at = [], 0
        while at < len(text):
            size = rng.randint(1, 9)
            pieces.append(text[at : at + size])
            at += size
        agent = ScriptedStreamAgent([pieces, [CLEAN]])
        verifier = streamer(make_config, "release", mustNotMatch=[source])
        events = await collect(verifier.stream(agent, TURN))
        assert outcome_of(events).response == CLEAN, (source, text)
        shown = first_attempt_shown(events)
        assert len(shown) <= match.start(), (source, text, shown)
        assert agent.pulled[0] < len(pieces), (source, text)  # cut before the end


async def test_text_that_never_becomes_a_match_is_released_in_full(make_config: Any) -> None:
    pieces = ["The pass ", "is free; ", "BEGIN here", " and there.", " The word: fine"]
    agent = ScriptedStreamAgent([pieces])
    verifier = streamer(make_config, "release", mustNotMatch=[SECRET_PATTERN, "BEGIN.*END"])
    events = await collect(verifier.stream(agent, TURN))
    assert outcome_of(events).status == Status.PASSED
    assert not any(isinstance(e, Retract) for e in events)
    assert first_attempt_shown(events) == "".join(pieces)


TRICKY = [
    r"foo(?!bar)",
    r"\bfoo\b",
    r"(?m)^x+$",
    r"^ab",
    r"a$",
    r"ab\Z",
    r"\Afo",
    r"(?<=a)b+",
    r"x.*?y",
    r"\d+(?:\.\d+)?%",
    r"(?i)pass:\s*\S+",
    r"b\w*\b",
    r"(?m)^fo+\b",
]


def test_a_scanner_never_cuts_a_clean_reply_nor_releases_a_match_that_fits() -> None:
    """Look-arounds, anchors and word edges, wherever a piece ends: a cut is a match of the
    reply so far and of every reply that begins so; a match that fits the window is always
    cut, and nothing from its start on is ever released (``pending_from`` held it)."""
    rng = random.Random(5)
    for _ in range(3000):
        source, window = rng.choice(TRICKY), rng.choice([4, 8, 16, 256])
        pattern = re.compile(source, re.IGNORECASE)
        text = "".join(rng.choice("abfoxy12.% :\nrP") for _ in range(rng.randint(0, 30)))
        scanner = RuleCheck(must_not_match=[source], match_window_chars=window).scanner(TURN)
        assert scanner is not None
        so_far, released, cut = "", 0, False
        while len(so_far) < len(text) and not cut:
            piece = text[len(so_far) : len(so_far) + rng.randint(1, 6)]
            so_far += piece
            cut = scanner.feed(piece) is not None
            pending = scanner.pending_from
            if not cut:  # what a stream may show: all but the undecided text
                released = max(released, len(so_far) if pending is None else pending)
        cut = cut or scanner.finish() is not None
        first = pattern.search(text)
        case = (source, window, text, so_far)
        if cut:
            assert pattern.search(so_far) is not None and first is not None, case
        elif first is not None:
            assert len(first.group()) > window, case
        if first is not None and len(first.group()) <= window:
            assert released <= first.start(), case


# -- the work is linear ----------------------------------------------------------------------------


def searched(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Characters handed to the regex engine per search (from ``pos`` to the end)."""
    sizes: list[int] = []
    real = patterns.search

    def counting(pattern: Any, text: str, until: Any = None, pos: int = 0, **kw: Any) -> Any:
        sizes.append(len(text) - pos)
        return real(pattern, text, until, pos, **kw)

    monkeypatch.setattr(patterns, "search", counting)
    return sizes


@pytest.mark.parametrize("piece_size", [1, 7, 200])
@pytest.mark.parametrize(
    "filler",
    [
        "lorem ipsum dolor sit amet, the pass is free ",  # partial matches come and go
        "BEGIN lorem ipsum dolor sit amet, no finish ",  # always a partial match to hold
    ],
)
def test_the_characters_searched_grow_linearly_with_the_reply(
    monkeypatch: pytest.MonkeyPatch, piece_size: int, filler: str
) -> None:
    window = 64
    sizes = searched(monkeypatch)
    check = RuleCheck(must_not_match=[SECRET_PATTERN, "BEGIN.*END"], match_window_chars=window)
    totals = []
    for size in (4_000, 8_000, 16_000):
        sizes.clear()
        text = (filler * (size // len(filler) + 1))[:size]
        pieces = [text[i : i + piece_size] for i in range(0, size, piece_size)]
        scanner = check.scanner(TURN)
        assert scanner is not None
        for piece in pieces:
            assert scanner.feed(piece) is None
        assert scanner.finish() is None
        # One search per pattern per piece, each over at most the window plus the piece.
        assert len(sizes) <= 2 * (len(pieces) + 1)
        assert max(sizes) <= window + piece_size + 4
        assert sum(sizes) == scanner.scanned
        totals.append(sum(sizes))
    assert totals[2] / totals[0] == pytest.approx(4, rel=0.05)  # linear, not quadratic


def test_a_scanner_holds_back_from_where_a_match_may_still_begin() -> None:
    scanner = RuleCheck(must_not_match=[SECRET_PATTERN]).scanner(TURN)
    assert scanner is not None
    assert scanner.feed("All set. Pass") is None
    assert scanner.pending_from == len("All set. ")
    assert scanner.feed("word: ") is None
    assert scanner.pending_from == len("All set. ")
    assert scanner.feed("x") is not None  # a match no further text can undo: cut at once


def test_a_match_a_look_ahead_decides_waits_for_the_next_character() -> None:
    scanner = RuleCheck(must_not_match=[r"secret\w*\b"]).scanner(TURN)
    assert scanner is not None
    assert scanner.feed("a secret") is None
    assert scanner.pending_from == 2
    assert scanner.feed("ive") is None  # "secretive": still a match, still undecided
    assert scanner.pending_from == 2
    assert scanner.feed(" one") is not None


# -- the setting -----------------------------------------------------------------------------------


def test_the_window_has_a_documented_default() -> None:
    config = VerifierConfig.from_dict({"checks": [{"type": "rules"}]})
    assert config.checks[0].match_window_chars == 256  # type: ignore[union-attr]
    reference = Path(__file__).parents[2] / "docs" / "config-reference.md"
    assert "`matchWindowChars` | integer | `256` | ≥ 0, ≤ 4096" in reference.read_text("utf-8")


@pytest.mark.parametrize("value", [-1, 4097, "256", 1.5])
def test_a_bad_window_is_refused_naming_the_file_and_key(tmp_path: Path, value: Any) -> None:
    path = tmp_path / "verifier.json"
    path.write_text(json.dumps({"checks": [{"type": "rules", "matchWindowChars": value}]}))
    with pytest.raises(ConfigError) as raised:
        VerifierConfig.load(path)
    assert str(path) in str(raised.value)
    assert [key for key, _ in raised.value.problems] == ["checks.0.matchWindowChars"]


def test_a_bad_window_in_code_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="match_window_chars must be between 0 and 4,096"):
        RuleCheck(must_not_match=["a+"], match_window_chars=-1)


# -- failing open --------------------------------------------------------------------------------


async def test_a_catastrophic_windowed_pattern_is_left_to_the_end_and_fails_open(
    make_config: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rules, "_FEED_TIME_LIMIT", 0.05)
    reply = ["a" * 20, "a" * 20, "b", " and the rest."]
    agent = ScriptedStreamAgent([reply])
    verifier = streamer(make_config, "release", mustNotMatch=["(a|a)+$"])
    events = await collect(verifier.stream(agent, TURN))
    outcome = outcome_of(events)
    assert (outcome.status, outcome.response) == (Status.PASSED, "".join(reply))
    assert agent.pulled[0] == len(reply)  # the scanner gave up; the stream was not cut
    assert "did not finish within" in (outcome.attempts[0].checks[0].error or "")
