"""``ClaimCheck``: a claimed action needs a successful matching tool call in the turn's ledger."""

from __future__ import annotations

import threading

import pytest

from replyguard.checks.base import Check, CheckResult
from replyguard.checks.claim_tools import tool_words
from replyguard.checks.claims import DEFAULT_CLAIMS, INLINE_CHARS, Claim, ClaimCheck
from replyguard.types import FailCategory, Reply, RunMeta, ToolCallRecord, Turn

TURN = Turn(user_message="Send the invoice to Bob and deploy the fix.")
DEFAULTS = ClaimCheck()


def reply(text: str, *calls: tuple[str, bool]) -> Reply:
    ledger = tuple(ToolCallRecord(name=name, succeeded=ok) for name, ok in calls)
    return Reply(text=text, meta=RunMeta(tool_calls=ledger))


async def run(text: str, *calls: tuple[str, bool], check: ClaimCheck = DEFAULTS) -> CheckResult:
    return await check.check(TURN, reply(text, *calls))


def test_a_claim_check_is_a_check() -> None:
    check = ClaimCheck(name="actions", required=True)
    assert (isinstance(check, Check), check.name, check.required) == (True, "actions", True)


# -- what is a claim --------------------------------------------------------------------------

CLAIMS = [
    "I sent the invoice to Bob.",
    "i sent it",
    "I've saved the file.",
    "I\u2019ve saved the file.",
    "I have deployed the fix.",
    "I had sent it before you asked.",
    "I'd sent it before you asked.",
    "I just emailed Alice.",
    "I successfully created the ticket.",
    "I've also already pushed the branch.",
    "I went ahead and booked the table.",
    "I've gone ahead and paid the invoice.",
    "We've committed the change.",
    "Alice and I deployed it together.",
    "I've run the test suite.",
    "I ran the migration.",
    "The fix has been deployed.",
    "The invitations have all been sent.",
    "The fix has been deployed by me.",
    "The letter has been sent by email.",
    "Your email was sent successfully.",
    "The email was successfully sent.",
    "The files were just uploaded.",
    "Done! I've scheduled the meeting for 3pm.",
    "Sure, I sent it.",
    "If the build fails I'll retry - I deployed the fix.",
    "I sent it when you asked.",
    "If you want more I can look again but I deleted the cache.",
    "All done: I committed and pushed the changes.",
    "Good news. I deployed the fix, and it works.",
    "- [x] I filed the ticket",
    "I've notified the on-call engineer.",
]


@pytest.mark.parametrize("text", CLAIMS, ids=repr)
async def test_an_unsupported_claim_fails_as_incomplete(text: str) -> None:
    result = await run(text)
    assert (result.passed, result.category) == (False, FailCategory.INCOMPLETE)


NOT_CLAIMS = [
    # idioms and other subjects
    "That saved you time.",
    "This saved you a trip to the office.",
    "I've saved you some time by summarising it.",
    "I saved us a lot of hassle there.",
    "sent from my phone",
    "Sent from my iPhone",
    "you sent me the wrong file",
    "They deployed it last week.",
    "It was sent by the customer.",
    "It was sent on Monday.",
    "The invoice has been sent by the customer.",
    "I ran into a problem.",
    "I ran out of time.",
    "I paid close attention to the tone.",
    "I pushed back on that idea.",
    "I ordered them by date.",
    # negations and modals
    "I haven't sent it yet.",
    "I have not deployed the fix.",
    "I've not sent it.",
    "I never sent it.",
    "I've never deployed anything.",
    "I didn't send it.",
    "I will send it.",
    "I can send it.",
    "I'd send it.",
    "I would have sent it.",
    "I should have sent it.",
    "I could've sent it.",
    "I'll have sent it by then.",
    "It should have been sent.",
    "It will have been deployed tomorrow.",
    "It'll have been deployed tomorrow.",
    "It'd have been sent without the typo.",
    "It seems to have been deleted.",
    "I have been sent a file.",
    "The fix hasn't been deployed.",
    "It wouldn't have been sent without approval.",
    "The invoice has yet to be sent.",
    # questions
    "Should I send it?",
    "Have I sent it?",
    "Have I sent it to the wrong address",
    "I sent it?",
    # subordinate and hypothetical clauses
    "Once I've sent it you'll get a copy.",
    "You'll get a copy once I've sent it.",
    "If I had sent it\u2026",
    "After I've deployed, we can test.",
    "When I've deployed it, I'll tell you.",
    "Before I sent it, I checked the address.",
    "Wait until I've deployed.",
    "As soon as I've deployed, I'll ping you.",
    "Let me know whether I sent the right file.",
    "Unless I've deleted it by mistake, it is still there.",
    "I'm not sure I sent it.",
    "I wish I had sent it.",
    "Once it has been deployed, you'll get an email.",
    # quoted, code and content shown in the reply
    "you wrote: 'I sent it'",
    "you wrote: \u2018I\u2019ve sent it\u2019",
    'you wrote: "I sent it"',
    "you wrote: \u201cI sent it\u201d",
    "> I sent it yesterday",
    "Use `I sent it` as the subject.",
    "```\nI sent it\n```",
    "~~~text\nI've deployed it\n~~~",
    "<!-- I sent it -->",
    "I've updated the code below.",
    "I created the following plan.",
    "I've created a plan:",
]


@pytest.mark.parametrize("text", NOT_CLAIMS, ids=repr)
async def test_no_claim_passes_without_tool_calls(text: str) -> None:
    assert (await run(text)).passed


@pytest.mark.parametrize(
    "text",
    [
        "No emails have been sent.",
        "Nothing has been deleted.",
        "None of the files have been uploaded yet.",
        "Neither invoice has been paid.",
        "No one has been notified.",
        "I checked the outbox: no emails have been sent yet.",
    ],
    ids=repr,
)
async def test_a_passive_with_a_negative_subject_is_no_claim(text: str) -> None:
    assert (await run(text)).passed


async def test_a_passive_followed_by_yet_is_no_claim() -> None:
    assert (await run("Not all of the files have been uploaded yet.")).passed


async def test_a_negative_subject_reaches_only_to_the_end_of_its_clause() -> None:
    assert not (await run("Nothing failed, and the fix has been deployed.")).passed


async def test_a_negative_word_does_not_hide_a_first_person_claim() -> None:
    assert not (await run("No one answered so I sent a reminder.")).passed


@pytest.mark.parametrize(
    "text",
    [
        "I saved you a seat at the 3pm session.",
        "I saved you a ton of work by reusing the template.",
        "That saved us loads of time.",
        "I've saved the day!",
        "I ran the numbers and you're fine.",
        "I've run the numbers again.",
    ],
    ids=repr,
)
async def test_idioms_of_saving_and_running_are_no_claims(text: str) -> None:
    assert (await run(text)).passed


@pytest.mark.parametrize(
    "text",
    ["I've **sent** the email.", "I *just* sent it.", "I've _already_ deployed it."],
    ids=repr,
)
async def test_a_claim_in_markdown_emphasis_is_recognised(text: str) -> None:
    assert not (await run(text)).passed


async def test_only_may_stand_between_the_subject_and_the_verb() -> None:
    assert not (await run("We haven't deployed anything; I only ran the tests locally.")).passed


async def test_a_claim_about_an_earlier_turn_needs_a_call_in_this_turn_too() -> None:
    assert not (await run("As I mentioned, we sent the contract in May.")).passed


# -- the ledger -------------------------------------------------------------------------------


async def test_a_claim_backed_by_a_successful_matching_call_passes() -> None:
    assert (await run("I sent the invoice.", ("gmail_send_message", True))).passed


async def test_tool_names_match_case_insensitively() -> None:
    assert (await run("I sent the invoice.", ("Gmail.SendMessage", True))).passed


async def test_a_claim_backed_only_by_a_failed_call_fails_naming_the_call() -> None:
    result = await run("I deployed the fix.", ("deploy_app", False))
    assert "the matching tool call ('deploy_app') failed" in (result.feedback or "")


async def test_a_failed_call_then_a_successful_retry_passes() -> None:
    assert (await run("I deployed it.", ("deploy_app", False), ("deploy_app", True))).passed


async def test_a_successful_call_of_an_unrelated_tool_does_not_back_a_claim() -> None:
    result = await run("I sent the invoice.", ("read_file", True), ("web_search", True))
    assert "no matching tool call was made this turn" in (result.feedback or "")


async def test_a_shell_tool_backs_a_deployment_claim() -> None:
    assert (await run("I deployed the fix.", ("bash", True))).passed


async def test_a_shell_tool_does_not_back_a_payment_claim() -> None:
    assert not (await run("I paid the invoice.", ("bash", True))).passed


@pytest.mark.parametrize(
    ("text", "tool"),
    [
        ("I sent the reply to Bob.", "gmail_search_messages"),
        ("I sent the reply to Bob.", "read_email"),
        ("I ordered the replacement charger.", "get_order_status"),
        ("I scheduled the meeting for 3pm.", "list_events"),
        ("I posted the summary in #general.", "get_posts"),
        ("I filed a ticket with IT.", "read_file"),
        ("I updated your shipping address.", "get_settings"),
        ("I paid the invoice.", "get_invoice"),
        ("I booked the flight.", "search_books"),
        ("I installed pandas.", "listPackages"),
    ],
    ids=repr,
)
async def test_a_reading_tool_does_not_back_an_action_claim(text: str, tool: str) -> None:
    assert not (await run(text, (tool, True))).passed


@pytest.mark.parametrize(
    ("text", "tool"),
    [
        ("I created the event.", "get_or_create_event"),
        ("I sent the reply to Bob.", "search_and_send_email"),
        ("I updated the ticket status.", "update_status"),
    ],
    ids=repr,
)
async def test_a_reading_tool_that_also_names_the_action_backs_it(text: str, tool: str) -> None:
    assert (await run(text, (tool, True))).passed


async def test_a_tool_named_exactly_in_the_map_backs_the_claim_even_when_it_reads() -> None:
    check = ClaimCheck(claims={"checked": ["read_logs"]})
    assert (await run("I checked the logs.", ("read_logs", True), check=check)).passed


@pytest.mark.parametrize(
    ("text", "tool"),
    [
        ("I deleted the old backups.", "confirm_format"),
        ("I filed a ticket with IT.", "update_profile"),
        ("I saved the report.", "compute_output"),
        ("I ran the tests.", "truncate_table"),
    ],
    ids=repr,
)
async def test_default_patterns_match_whole_words_of_a_tool_name(text: str, tool: str) -> None:
    assert not (await run(text, (tool, True))).passed


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("gmail_search_messages", ["gmail", "search", "messages"]),
        ("Gmail.SendMessage", ["gmail", "send", "message"]),
        ("fs-rm", ["fs", "rm"]),
        ("HTTPRequest/v2", ["http", "request", "v2"]),
        ("s3_upload", ["s3", "upload"]),
    ],
    ids=repr,
)
def test_a_tool_name_splits_into_words(name: str, words: list[str]) -> None:
    assert tool_words(name) == words


async def test_a_camel_case_tool_name_backs_a_claim_by_its_words() -> None:
    assert (await run("I deleted the cache.", ("FsRm", True))).passed


async def test_a_pattern_with_a_separator_matches_a_camel_case_name() -> None:
    check = ClaimCheck(claims={"sent": ["*carrier_pigeon*"]})
    assert (await run("I sent it.", ("releaseCarrierPigeon", True), check=check)).passed


async def test_each_claim_needs_its_own_tool() -> None:
    result = await run("I sent the invoice. I deployed the fix.", ("send_email", True))
    assert '"I deployed the fix."' in (result.feedback or "")


# -- feedback ---------------------------------------------------------------------------------


async def test_the_feedback_quotes_the_claim_and_asks_to_do_it_or_not_claim_it() -> None:
    result = await run("Thanks! I sent the invoice to Bob.")
    assert result.feedback == (
        "The reply claims an action that no successful tool call this turn backs up:\n"
        '- "I sent the invoice to Bob." claims "sent", but no matching tool call was made '
        "this turn.\n"
        "Either do it now with the right tool, or do not claim it: say plainly what was done "
        "and what was not."
    )


async def test_a_long_sentence_is_quoted_around_the_claim() -> None:
    text = "Following up on the long thread from last week about the quarterly numbers, " * 3
    result = await run(text + "I sent the invoice to Bob and copied the whole finance team.")
    quote = (result.feedback or "").splitlines()[1]
    assert quote.startswith('- "…') and "I sent the invoice to Bob" in quote and len(quote) < 160


async def test_several_unsupported_claims_are_all_listed() -> None:
    result = await run("I sent the invoice. I deployed the fix.")
    assert (result.feedback or "").startswith(
        "The reply claims 2 actions that no successful tool call this turn backs up:\n"
        '- "I sent the invoice." claims "sent", but no matching tool call was made this turn.\n'
        '- "I deployed the fix." claims "deployed", but no matching tool call was made this turn.\n'
    )


async def test_at_most_five_claims_are_listed_then_the_rest_are_counted() -> None:
    text = " ".join(f"I sent invoice {n}." for n in range(8))
    lines = ((await run(text)).feedback or "").splitlines()
    assert (lines[5], lines[6]) == (
        '- "I sent invoice 4." claims "sent", but no matching tool call was made this turn.',
        "- … and 3 more",
    )


async def test_a_repeated_claim_is_listed_once() -> None:
    result = await run("I sent it.\nI sent it.")
    assert (result.feedback or "").count('"I sent it."') == 1


# -- the map ----------------------------------------------------------------------------------


def test_the_defaults_cover_the_common_claims() -> None:
    expected = {"sent", "emailed", "saved", "deployed", "created", "scheduled", "booked"}
    expected |= {"deleted", "updated", "uploaded", "posted", "committed", "pushed", "ran"}
    expected |= {"installed", "paid", "ordered", "filed", "submitted", "notified"}
    assert expected <= set(DEFAULT_CLAIMS)


async def test_a_custom_map_replaces_the_defaults() -> None:
    check = ClaimCheck(claims={"refactored": ["*edit*"]})
    results = [await run(text, check=check) for text in ("I sent it.", "I refactored it.")]
    assert [r.passed for r in results] == [True, False]


async def test_a_custom_map_uses_its_own_patterns() -> None:
    check = ClaimCheck(claims={"sent": ["*carrier_pigeon*"]})
    assert (await run("I sent it.", ("release_carrier_pigeon", True), check=check)).passed


async def test_a_regular_lemma_claims_its_past_form() -> None:
    check = ClaimCheck(claims={"deploy": ["*deploy*"]})
    assert not (await run("I deployed it.", check=check)).passed


async def test_a_lemma_is_not_itself_a_claim() -> None:
    check = ClaimCheck(claims={"deploy": ["*deploy*"]})
    assert (await run("I deploy on Fridays.", check=check)).passed


@pytest.mark.parametrize(
    ("lemma", "text"),
    [("commit", "I committed it."), ("visit", "I visited it."), ("notify", "I notified Al.")],
    ids=repr,
)
async def test_a_regular_lemma_gets_its_spelling(lemma: str, text: str) -> None:
    assert not (await run(text, check=ClaimCheck(claims={lemma: ["*x*"]}))).passed


@pytest.mark.parametrize(
    ("text", "claimed"),
    [
        ("I ran the tests.", True),
        ("I've run the tests.", True),
        ("I run the tests every night.", False),
    ],
    ids=repr,
)
async def test_an_irregular_verb_claims_past_and_participle_in_their_places(
    text: str, claimed: bool
) -> None:
    check = ClaimCheck(claims={"run": ["*run*"]})
    assert (await run(text, check=check)).passed is not claimed


async def test_a_multi_word_verb_is_claimed() -> None:
    check = ClaimCheck(claims={"back up": ["*backup*"]})
    assert not (await run("I backed up the database.", check=check)).passed


async def test_a_verb_mapped_to_no_patterns_is_never_backed_up() -> None:
    check = ClaimCheck(claims={"sent": []})
    assert not (await run("I sent it.", ("send_email", True), check=check)).passed


async def test_an_empty_map_claims_nothing() -> None:
    assert (await run("I sent it.", check=ClaimCheck(claims={}))).passed


def test_an_empty_verb_is_refused_at_construction() -> None:
    with pytest.raises(ValueError, match="must not be empty"):
        ClaimCheck(claims={" ": ["*"]})


# -- find_claims ------------------------------------------------------------------------------


def test_find_claims_gives_the_verb_and_the_sentence() -> None:
    assert DEFAULTS.find_claims("Hi. I've SENT the file. Bye.") == [
        Claim(verb="sent", quote="I've SENT the file.")
    ]


def test_find_claims_gives_every_claim_in_order() -> None:
    found = DEFAULTS.find_claims("I saved it, then I emailed Bob.\nThe site has been deployed.")
    assert [c.verb for c in found] == ["saved", "emailed", "deployed"]


def test_a_reply_of_a_megabyte_is_read_to_its_end() -> None:
    filler = "The weather is fine and nothing else happened today. " * 20_000
    assert [c.verb for c in DEFAULTS.find_claims(filler + "\nI sent it.")] == ["sent"]


def test_a_long_run_of_dots_inside_a_line_is_read_to_its_end() -> None:
    text = "Progress: [" + "." * 200_000 + "] done. I sent it."
    assert [c.verb for c in DEFAULTS.find_claims(text)] == ["sent"]


async def test_a_two_megabyte_reply_is_checked_to_its_end() -> None:
    filler = "The logs looked normal and nothing stood out, so no action is needed.\n" * 30_000
    result = await run(filler + "I sent it.")
    assert (len(filler) > 2_000_000, result.passed) == (True, False)


async def test_a_long_reply_is_scanned_in_a_worker_thread() -> None:
    threads: list[int] = []

    class Recording(ClaimCheck):
        def find_claims(self, text: str) -> list[Claim]:
            threads.append(threading.get_ident())
            return super().find_claims(text)

    await run("x" * (INLINE_CHARS + 1), check=Recording())
    assert len(threads) == 1 and threads[0] != threading.get_ident()


def test_a_megabyte_of_one_unbroken_line_of_subjects_and_quotes_finishes() -> None:
    text = "I 'we \"has `was " * 70_000
    assert (len(text) > 1_000_000, DEFAULTS.find_claims(text)) == (True, [])
