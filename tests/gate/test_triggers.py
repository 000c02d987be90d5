"""``TriggerMatcher``: which turns are judged, and which replies fire a keyword."""

from __future__ import annotations

import pytest

from replyguard.config import VerifierConfig
from replyguard.gate._triggers import TriggerKind, TriggerMatcher
from replyguard.types import Turn

DEFAULTS = TriggerMatcher(VerifierConfig())
TURN = Turn(user_message="Migrate the database, please.")
HEARTBEAT = Turn(user_message="Work through HEARTBEAT.md.", heartbeat=True)
KEYWORD_REPLY = "All done."
PLAIN_REPLY = "Here is a summary of the options."


def _matcher(**config: object) -> TriggerMatcher:
    return TriggerMatcher(VerifierConfig.model_validate(config))


def test_trigger_kinds_are_the_contract_strings() -> None:
    assert [kind.value for kind in TriggerKind] == ["verify_all", "keyword", "heartbeat"]


# -- keywords ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "keyword"),
    [
        ("done", "done"),
        ("Done!", "done"),
        ("All DONE.", "done"),
        ("Completed the migration", "completed"),
        ("Here you go:", "here you go"),
        ("here  you\ngo", "here you go"),
        ("HERE\tYOU GO", "here you go"),
        ("finished.", "finished"),
        ("Your report is ready", "ready"),
        ("'done'", "done"),
        ("done - shipping it now", "done"),
        ("Step 3 done\u2014moving on", "done"),
        ("**Done**", "done"),
    ],
    ids=repr,
)
def test_default_keyword_fires_as_a_whole_word(text: str, keyword: str) -> None:
    assert DEFAULTS.matched_keyword(text) == keyword


@pytest.mark.parametrize(
    "text",
    [
        "undone",
        "abandoned",
        "doneness",
        "done-ness",
        "half-done",
        "ready-made",
        "unfinished",
        "refinished",
        "readiness",
        "already",
        "uncompleted",
        "here you went",
        "where you go",
        "done_flag",
        "done2",
        "",
    ],
    ids=repr,
)
def test_word_containing_a_keyword_does_not_fire(text: str) -> None:
    assert DEFAULTS.matched_keyword(text) is None


@pytest.mark.parametrize(
    "text",
    [
        "not done yet",
        "isn't finished",
        "isn\u2019t finished",
        "It is not ready",
        "not quite done",
        "never completed",
        "haven't finished",
        "I haven\u2019t finished",
        "not yet done",
        "nothing is ready",
        "no, not done",
        "neither finished nor ready",
        "The deploy is yet to be completed",
        "Without anything completed",
        "NOT DONE",
        "The job cannot be completed",
    ],
    ids=repr,
)
def test_negated_claim_does_not_fire(text: str) -> None:
    assert DEFAULTS.matched_keyword(text) is None


@pytest.mark.parametrize(
    ("text", "keyword"),
    [
        ("It's not perfect, but it's done", "done"),
        ("I'm not sure, but it is done", "done"),
        ("Done! Nothing else to do", "done"),
        ("No errors. Done.", "done"),
        ("No issues so done", "done"),
        ("Not tested yet; the build is finished", "finished"),
        ("- tests: not run\n- build: done", "done"),
        ("Not tested (sadly) ready", "ready"),
        ("I'm not sure it is done", "done"),  # "sure" is no filler word
        ("There is no doubt it's done.", "done"),
        ("I can't believe it's finished!", "finished"),
        ("Not only finished, but tested too.", "finished"),
    ],
    ids=repr,
)
def test_negation_not_bound_to_the_keyword_does_not_count(text: str, keyword: str) -> None:
    assert DEFAULTS.matched_keyword(text) == keyword


@pytest.mark.parametrize(
    ("text", "keyword"),
    [
        ("It isn't finished. Actually, it is done now.", "done"),
        ("Not ready yet, but here you go:", "here you go"),
        ("Not done. Not finished. Completed, though.", "completed"),
    ],
    ids=repr,
)
def test_first_non_negated_occurrence_is_reported(text: str, keyword: str) -> None:
    assert DEFAULTS.matched_keyword(text) == keyword


def test_negated_occurrences_alone_do_not_fire_in_a_long_reply() -> None:
    text = "The migration is not done. The tests haven't finished. Nothing is ready. " * 20
    assert DEFAULTS.matched_keyword(text) is None


def test_longer_phrase_is_reported_over_a_keyword_it_starts_with() -> None:
    matcher = _matcher(triggerKeywords=["here", "here you go"])
    assert matcher.matched_keyword("Here you go.") == "here you go"


def test_keyword_is_reported_as_configured() -> None:
    matcher = _matcher(triggerKeywords=["All  Set"])
    assert matcher.matched_keyword("we are ALL\nSET") == "All Set"


@pytest.mark.parametrize(
    ("keyword", "fires", "silent"),
    [
        ("c++", "Ported it to C++.", "Ported it to c"),
        ("v1.0", "Tagged v1.0 today", "Tagged v1x0 today"),
        ("(beta)", "Released (beta) build", "Released beta build"),
        ("a|b", "Chose a|b", "Chose a or b"),
        ("x*", "Pattern x* works", "Pattern xxx works"),
        ("$5", "It costs $5 now", "It costs 5 now"),
        ("[ok]", "Status [ok]", "Status o"),
        ("\\d", "Use \\d here", "Use 7 here"),
        ("\u2705", "Deployed\u2705", "Deployed"),
    ],
    ids=repr,
)
def test_custom_keyword_is_literal_text(keyword: str, fires: str, silent: str) -> None:
    matcher = _matcher(triggerKeywords=[keyword])
    assert (matcher.matched_keyword(fires), matcher.matched_keyword(silent)) == (keyword, None)


def test_custom_keyword_can_be_negated() -> None:
    matcher = _matcher(triggerKeywords=["complete"])
    assert matcher.matched_keyword("I couldn't complete it") is None


def test_empty_keyword_list_never_fires() -> None:
    matcher = _matcher(triggerKeywords=[])
    assert (matcher.matched_keyword("done"), matcher.decide(TURN, "done")) == (None, None)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("not done " * 120_000, None),
        ("here  " * 200_000, None),
        (" " * 1_000_000 + "done", "done"),
        ("undone-" * 150_000, None),
        ("x" * 1_000_000 + " done", "done"),
    ],
    ids=["negated", "partial-phrase", "whitespace", "near-miss", "long-word"],
)
def test_one_megabyte_reply_is_decided(text: str, expected: str | None) -> None:
    assert DEFAULTS.matched_keyword(text) == expected


# -- the decision -----------------------------------------------------------------------------


def test_plain_reply_is_not_triggered() -> None:
    assert DEFAULTS.decide(TURN, PLAIN_REPLY) is None


def test_keyword_triggers_an_ordinary_turn() -> None:
    assert DEFAULTS.decide(TURN, KEYWORD_REPLY) is TriggerKind.KEYWORD


def test_verify_all_triggers_an_ordinary_turn_without_keyword() -> None:
    assert _matcher(verifyAll=True).decide(TURN, PLAIN_REPLY) is TriggerKind.VERIFY_ALL


def test_verify_heartbeat_does_not_trigger_an_ordinary_turn() -> None:
    assert _matcher(verifyHeartbeat=True).decide(TURN, PLAIN_REPLY) is None


@pytest.mark.parametrize(
    ("verify_all", "verify_heartbeat", "expected"),
    [
        (False, False, None),
        (True, False, None),
        (False, True, TriggerKind.HEARTBEAT),
        (True, True, TriggerKind.HEARTBEAT),
    ],
)
@pytest.mark.parametrize("reply", [KEYWORD_REPLY, PLAIN_REPLY, "HEARTBEAT_OK"])
def test_heartbeat_turn_is_judged_only_and_always_with_verify_heartbeat(
    verify_all: bool, verify_heartbeat: bool, expected: TriggerKind | None, reply: str
) -> None:
    matcher = _matcher(verifyAll=verify_all, verifyHeartbeat=verify_heartbeat)
    assert matcher.decide(HEARTBEAT, reply) is expected


# -- the quick look before the pattern ------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "keyword"),
    [
        ("ALL DONE.", "done"),
        ("It is Finished!", "finished"),
        ("Here\n\tyou   go: the file.", "here you go"),
        ("Nope? No: İt's done ✅", "done"),  # not ASCII: the pattern decides alone
        ("Nothing to report yet.", None),
        ("The undone tasks are listed.", None),
    ],
)
def test_keywords_are_found_in_any_case_with_or_without_the_quick_look(
    text: str, keyword: str | None
) -> None:
    assert DEFAULTS.matched_keyword(text) == keyword


def test_a_keyword_that_is_not_ascii_is_still_matched_in_ascii_and_other_text() -> None:
    matcher = _matcher(triggerKeywords=["fertig ✅", "ready"])
    assert matcher.matched_keyword("Alles fertig ✅.") == "fertig ✅"
    assert matcher.matched_keyword("The build is ready.") == "ready"
    assert matcher.matched_keyword("Nothing yet.") is None
