"""``ClaimCheck`` on terse, passive and announced claims ("Email sent.", "Sending it now.")."""

from __future__ import annotations

import time

import pytest

from replyguard.checks.claims import Claim, ClaimCheck
from replyguard.types import FailCategory, Reply, RunMeta, ToolCallRecord, Turn

TURN = Turn(user_message="Email the report to Ada.")
DEFAULTS = ClaimCheck()


async def feedback(text: str, *calls: tuple[str, bool]) -> str | None:
    ledger = tuple(ToolCallRecord(name=name, succeeded=ok) for name, ok in calls)
    result = await DEFAULTS.check(TURN, Reply(text=text, meta=RunMeta(tool_calls=ledger)))
    assert result.passed or result.category is FailCategory.INCOMPLETE
    return None if result.passed else result.feedback


@pytest.mark.parametrize(
    ("text", "verb"),
    [
        ("Done. Note posted.", "posted"),
        ("PDF saved to <path>.", "saved"),
        ("Email sent.", "sent"),
        ("Deployed.", "deployed"),
        ("All set: invoice emailed to Ada.", "emailed"),
        ("Sending the report now.", "sending"),
        ("Sending it now; it should arrive in a minute.", "sending"),
        ("Booking the 9:40 train now.", "booking"),
        ("Done, the doc is saved.", "saved"),
        ("I'll send it right away.", "send"),
        ("I'm about to deploy it.", "deploy"),
        ("The email is being sent now.", "sent"),
    ],
    ids=repr,
)
def test_find_claims_names_the_verb_as_written(text: str, verb: str) -> None:
    assert [claim.verb for claim in DEFAULTS.find_claims(text)] == [verb]


@pytest.mark.parametrize(
    ("text", "tool"),
    [
        ("Email sent.", "send_email"),
        ("Done. Note posted.", "notion.post"),
        ("PDF saved to reports/q3.pdf.", "write_file"),
        ("Deployed.", "deploy_app"),
        ("Sending the report now.", "gmail_send_message"),
        ("I'll deploy it now.", "bash"),
        ("Let me book the table.", "book"),
    ],
    ids=repr,
)
async def test_a_successful_matching_call_backs_a_terse_or_announced_claim(
    text: str, tool: str
) -> None:
    assert await feedback(text, (tool, True)) is None


async def test_a_reading_tool_does_not_back_a_terse_claim() -> None:
    assert await feedback("Email sent.", ("read_email", True)) is not None


async def test_the_feedback_names_the_claimed_action_and_the_missing_call() -> None:
    assert (await feedback("Done. Note posted.") or "").splitlines()[1] == (
        '- "Note posted." claims "posted", but no matching tool call was made this turn.'
    )


async def test_the_feedback_names_an_announced_action_whose_call_failed() -> None:
    text = "Sending the report now."
    assert (await feedback(text, ("send_email", False)) or "").splitlines()[1] == (
        '- "Sending the report now." claims "sending", but the matching tool call '
        "('send_email') failed."
    )


@pytest.mark.parametrize(
    "text",
    [
        "Sent from my iPhone",
        "Done and dusted?",
        "If it's sent, tell me",
        "Not sent yet.",
        "> Email sent.",
        "Run `deploy` when ready.",
        "Well done!",
        "Done deal",
        "I'll send it tomorrow.",
        "I'll send it now if you confirm.",
        "Saved searches appear in the sidebar.",
        "Bob sent the invoice.",
        "Emails sent after 5pm are queued.",
        "Running late.",
        "Saving you some time: here is the summary.",
    ],
    ids=repr,
)
async def test_near_misses_pass(text: str) -> None:
    assert await feedback(text) is None


@pytest.mark.parametrize(
    "text",
    [
        "Run the tests before you merge.",  # an imperative: "run" is also the participle
        "Set the flag to true.",
        "The previous run's output is kept.",
        "The options sent.",  # a noun phrase
        "A long line of prose that a writer wrapped by hand at seventy characters,\n"
        "sent again after the reservation expired.",
        "the reply is\nsent to the judge with the rubric.",
    ],
    ids=repr,
)
def test_imperatives_noun_phrases_and_wrapped_lines_are_no_terse_claims(text: str) -> None:
    assert DEFAULTS.find_claims(text) == []


@pytest.mark.parametrize(
    "text",
    [
        "Status update\nEmail sent to Ada.",
        "## Done\nInvoice paid.",
        "All good.\nDeployed.",
        "Here is what I did:\n- Email sent\n- Fix deployed",
    ],
    ids=repr,
)
def test_a_terse_claim_at_the_start_of_a_line_after_a_title_or_a_stop_counts(text: str) -> None:
    assert DEFAULTS.find_claims(text) != []


def test_a_custom_lemma_claims_its_terse_and_announced_forms() -> None:
    check = ClaimCheck(claims={"deploy": ["deploy*"]})
    assert [c.verb for c in check.find_claims("Deployed. Deploying v2 now.")] == [
        "deployed",
        "deploying",
    ]


def test_claims_of_several_kinds_come_in_order_each_once() -> None:
    assert DEFAULTS.find_claims("I sent it. Note posted. Deploying now.") == [
        Claim("sent", "I sent it."),
        Claim("posted", "Note posted."),
        Claim("deploying", "Deploying now."),
    ]


@pytest.mark.parametrize(
    ("head", "unit", "count", "tail"),
    [
        ("", "I'll send it, ", 50_000, "now."),
        ("", "Sending ", 100_000, "now."),
        ("", "The email is being sent by ", 40_000, ""),
        ("", "Done, ", 100_000, "sent."),
        ("Sent to ", " ", 500_000, "x."),
    ],
    ids=["will-send", "sending", "being-sent", "done", "spaces"],
)
def test_a_long_sentence_of_claim_openings_is_read_in_linear_time(
    head: str, unit: str, count: int, tail: str
) -> None:
    """Four times the text takes about four times as long, never the sixteen times a
    quadratic reading would: each size timed twice, interleaved, the faster kept, so a busy
    machine slows both sides of the ratio alike."""
    quarter = head + unit * (count // 8) + tail
    whole = head + unit * (count // 2) + tail
    best = {quarter: float("inf"), whole: float("inf")}
    for text in (quarter, whole, quarter, whole):
        started = time.perf_counter()
        DEFAULTS.find_claims(text)
        best[text] = min(best[text], time.perf_counter() - started)
    assert best[whole] < 9 * best[quarter], best.values()
