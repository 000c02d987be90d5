"""``FigureCheck``: a reply's amounts, dates, IDs, URLs, e-mail addresses and paths must occur in
the turn's sources, in one of their forms; otherwise a ``grounding`` FAIL, before any judge."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

import replyguard as rg
from replyguard import Delta, Done, Retract, RunMeta, Status, ToolCallRecord, Turn, Verifier
from replyguard.checks.figures import FigureScanner, Sources
from replyguard.checks.figures_extract import figures
from replyguard.checks.incremental import scanners_for
from replyguard.testing import ScriptedAgent, ScriptedJudge, ScriptedStreamAgent


def _reply(text: str, *results: Any) -> rg.Reply:
    calls = tuple(ToolCallRecord(name="lookup", result=r) for r in results)
    return rg.Reply(text=text, meta=RunMeta(tool_calls=calls))


async def _missing(text: str, *results: Any, **turn: Any) -> list[str]:
    turn.setdefault("user_message", "Check it for me.")
    result = await rg.FigureCheck().check(Turn(**turn), _reply(text, *results))
    if result.passed:
        return []
    assert result.category is rg.FailCategory.GROUNDING and result.feedback
    return [f.text for f in rg.FigureCheck().missing(Turn(**turn), _reply(text, *results))]


@pytest.mark.parametrize(
    ("source", "reply"),
    [
        ("1200 USD", "Refunded $1,200.00."),
        ('{"amount": 1200, "currency": "USD"}', "Refunded $1,200.00."),
        ("1.200,00 EUR", "Refunded €1,200.00."),
        ("$1,200.00", "Refunded 1200 USD."),
        ("EUR 49.99", "It costs 49,99 €."),
        ("2026-03-05", "It is due on March 5, 2026."),
        ("2026-03-05T14:00:00Z", "It is due on 5 March."),
        ("March 5, 2026", "It is due on 2026-03-05."),
        ("05/03/2026", "It is due on Mar 5, 2026."),
        ("order INV-2026-0042", "Invoice inv-2026-0042 is paid."),
        ("https://example.com/orders/7?sig=1", "Track it at https://example.com/orders/7."),
        ("https://status.acme.io", "See status.acme.io/ for updates."),
        ("Ada.Lovelace@Example.com", "Sent to ada.lovelace@example.com."),
        ("saved /home/ada/reports/q3.pdf", "PDF saved to reports/q3.pdf."),
        ("C:\\Users\\ada\\q3.pdf", "Saved to C:\\Users\\ada\\q3.pdf."),
    ],
)
async def test_a_figure_in_another_form_of_the_source_is_grounded(source: str, reply: str) -> None:
    assert await _missing(reply, source) == []


@pytest.mark.parametrize(
    ("source", "reply", "figure"),
    [
        ("1200 USD", "Refunded €1,200.00.", "€1,200.00"),  # the currency must match
        ("1200 USD", "Refunded $1,300.00.", "$1,300.00"),
        ("2026-03-05", "It is due on March 6, 2026.", "March 6, 2026"),
        ("INV-2026-0042", "Invoice INV-2026-0024 is paid.", "INV-2026-0024"),
        (
            "https://example.com/orders/7",
            "Track it at https://example.com/orders/8.",
            "https://example.com/orders/8",
        ),
        ("ada@example.com", "Sent to ada@example.org.", "ada@example.org"),
        ("/home/ada/reports/q3.pdf", "PDF saved to reports/q4.pdf.", "reports/q4.pdf"),
    ],
)
async def test_an_altered_figure_fails_and_is_named(source: str, reply: str, figure: str) -> None:
    assert await _missing(reply, source) == [figure]


async def test_the_seed_examples_fail_when_nothing_backs_their_figures() -> None:
    assert await _missing("PDF saved to reports/q3.pdf.") == ["reports/q3.pdf"]
    assert await _missing("Email sent to ada@example.com.") == ["ada@example.com"]
    assert await _missing("Done. Note posted.") == []  # no figure: the claims check's part


@pytest.mark.parametrize(
    "where",
    [
        {"user_message": "Refund order A-58812 please."},
        {"evidence": ["orders.db: A-58812 paid"]},
        {"history": [{"role": "tool", "tool_call_id": "c1", "content": "order A-58812"}]},
        {
            "history": [
                {
                    "role": "assistant",
                    "tool_calls": [{"function": {"arguments": '{"order": "A-58812"}'}}],
                }
            ]
        },
        {"rules": ["Quote order A-58812 in every answer."]},
        {"agent_instructions": "The demo order is A-58812."},
    ],
)
async def test_every_source_of_the_turn_counts(where: dict[str, Any]) -> None:
    assert await _missing("Order A-58812 is refunded.", **where) == []


async def test_a_tool_calls_arguments_count_too() -> None:
    call = ToolCallRecord(name="send_email", arguments={"to": "ada@example.com"})
    reply = rg.Reply(text="Email sent to ada@example.com.", meta=RunMeta(tool_calls=(call,)))
    assert (await rg.FigureCheck().check(Turn(user_message="Email Ada"), reply)).passed


@pytest.mark.parametrize(
    "text",
    [
        "Python 3.11, COVID-19, GPT-4o, 500ms, 24/7, 15%, 10:30, step 2 of 3, and/or, km/h.",
        "Node.js and ASP.NET are fine; it takes 3 to 5 days.",
        "Run this:\n```\ncurl https://example.com/x -o /tmp/out.json # 2026-01-01\n```\nThen wait.",
        "May I help? It is the 3 of us.",
    ],
)
async def test_what_is_not_a_figure_never_fails(text: str) -> None:
    assert await _missing(text) == []


async def test_kinds_narrow_the_check() -> None:
    check = rg.FigureCheck(kinds=["amount"])
    result = await check.check(Turn(user_message="Hi"), _reply("Order A-58812 cost $5.", "$5"))
    assert result.passed
    with pytest.raises(ValueError, match="kinds"):
        rg.FigureCheck(kinds=["money"])


async def test_the_feedback_names_at_most_eight_figures_and_counts_the_rest() -> None:
    text = " ".join(f"Order A-5881{i} failed." for i in range(10))
    result = await rg.FigureCheck().check(Turn(user_message="Hi"), rg.Reply(text=text))
    assert result.feedback is not None
    assert "A-58810 (id)" in result.feedback and "and 2 more" in result.feedback


def test_the_config_lists_it_and_refuses_unknown_kinds() -> None:
    config = rg.VerifierConfig.from_dict(
        {"checks": [{"type": "figures", "kinds": ["amount", "id"]}]}
    )
    assert config.checks[0].type == "figures"
    with pytest.raises(Exception, match=r"checks\.0\.kinds"):
        rg.VerifierConfig.from_dict({"checks": [{"type": "figures", "kinds": ["money"]}]})


async def test_it_fails_before_any_judge_call_and_the_retry_is_told_why(make_config: Any) -> None:
    config = make_config(verifyAll=True, maxAttempts=2, checks=[{"type": "figures"}])
    judge = ScriptedJudge(["PASS"])  # only the second reply reaches the judge
    bad = _reply("Refunded $1,300.00.", {"refunded": "1200.00", "currency": "USD"})
    good = _reply("Refunded $1,200.00.", {"refunded": "1200.00", "currency": "USD"})
    agent = ScriptedAgent([bad, good])
    outcome = await Verifier(config, judge=judge).run(agent, Turn(user_message="Refund it."))
    assert (outcome.status, outcome.response) == (Status.PASSED, good.text)
    first = outcome.attempts[0].verdict
    assert first is not None and first.category is rg.FailCategory.GROUNDING
    assert "$1,300.00" in agent.calls[1][-1]["content"]
    judge.assert_exhausted()


# -- streaming ------------------------------------------------------------------------------------


def test_a_scanner_holds_back_from_the_first_figure_the_turn_does_not_hold() -> None:
    turn = Turn(user_message="Refund order A-58812.")
    ((name, scanner),) = scanners_for([rg.FigureCheck()], turn)
    assert name == "figures"
    text = "Order A-58812 is refunded: $1,300.00 went back to your card. Thank you for waiting."
    for char in text:
        assert scanner.feed(char) is None  # never fails a prefix: the tool results come later
    assert scanner.pending_from == text.index("$1,300.00")
    assert scanner.finish() is None and scanner.pending_from == text.index("$1,300.00")


def test_a_scanner_releases_grounded_figures_and_works_linearly() -> None:
    sources = Sources(["order A-58812, 1200 USD"])
    scanner = FigureScanner(frozenset({"amount", "id"}), sources)
    text = "Order A-58812: $1,200.00 refunded. " * 400
    for at in range(0, len(text), 3):
        scanner.feed(text[at : at + 3])
    assert scanner.pending_from is not None and scanner.pending_from >= len(text) - 40
    assert scanner.finish() is None and scanner.pending_from is None
    assert scanner.scanned < 60 * len(text)  # a bounded window per piece, not the whole text


def test_one_endless_token_is_held_not_scanned_again_and_again() -> None:
    scanner = FigureScanner(frozenset({"url"}), Sources([]))
    scanner.feed("See https://example.com/")
    for _ in range(3000):
        scanner.feed("abcd")
    assert scanner.pending_from is not None and scanner.pending_from <= 4
    assert scanner.scanned < 10_000_000


async def _events(stream: AsyncIterator[Any]) -> list[Any]:
    return [event async for event in stream]


async def test_a_streamed_reply_is_grounded_by_the_results_its_run_meta_brings(
    make_config: Any,
) -> None:
    """Release mode shows nothing past an unknown figure; the complete check, with the tool
    results of the reply's RunMeta, passes it."""
    config = make_config(
        verifyAll=True,
        checks=[{"type": "figures"}],
        streaming={"mode": "release", "holdBackChars": 0},
    )
    meta = RunMeta(
        tool_calls=(ToolCallRecord(name="refund", result={"amount": "1200.00", "currency": "USD"}),)
    )
    pieces = ["Refunded ", "$1,200.00", " to your card.", meta]
    verifier = Verifier(config, judge=ScriptedJudge(["PASS"]), preload=False)
    events = await _events(
        verifier.stream(ScriptedStreamAgent([pieces]), Turn(user_message="Refund"))
    )
    done = events[-1]
    assert isinstance(done, Done) and done.outcome.status is Status.PASSED
    assert not any(isinstance(e, Retract) for e in events)
    shown_before_done = "".join(e.text for e in events if isinstance(e, Delta))
    assert shown_before_done == "Refunded $1,200.00 to your card."


async def test_a_streamed_invented_figure_is_held_while_written_then_retracted(
    make_config: Any,
) -> None:
    """Release mode shows the text before the unknown figure while the agent writes; the
    complete reply fails (no tool result holds it) and is withdrawn; the turn ends as
    ``onExhausted`` says."""
    config = make_config(
        verifyAll=True,
        maxAttempts=2,
        checks=[{"type": "figures"}],
        streaming={"mode": "release", "holdBackChars": 0},
        onExhausted={"grounding": "A colleague will follow up."},
    )
    pieces = ["Refunded ", "$1,300.00", " to your card.", " It may take a few days."]
    agent = ScriptedStreamAgent([pieces, pieces])
    verifier = Verifier(config, judge=ScriptedJudge([]), preload=False)
    events = await _events(verifier.stream(agent, Turn(user_message="Refund 1200 USD")))
    first_retract = next(i for i, e in enumerate(events) if isinstance(e, Retract))
    deltas = [e.text for e in events[:first_retract] if isinstance(e, Delta)]
    assert deltas[0] == "Refunded "  # shown at once; the rest only once the agent is done
    assert deltas[1:] == ["$1,300.00 to your card. It may take a few days."]
    done = events[-1]
    assert isinstance(done, Done) and done.outcome.reason is rg.Reason.OPERATOR_MESSAGE
    assert done.outcome.response == "A colleague will follow up."
    last = max(i for i, e in enumerate(events) if isinstance(e, Retract))
    tail = "".join(e.text for e in events[last + 1 :] if isinstance(e, Delta))
    assert tail == "A colleague will follow up."


def test_figures_are_found_in_order_without_overlaps() -> None:
    found = figures(
        "Mail ada@example.com the file reports/q3.pdf from https://x.io/a, $5 on May 2, 2026."
    )
    assert [f.kind for f in found] == ["email", "path", "url", "amount", "date"]


async def test_long_sources_are_searched_off_the_event_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import asyncio

    moved: list[object] = []
    real = asyncio.to_thread

    async def to_thread(function: Any, *args: Any) -> Any:
        moved.append(function)
        return await real(function, *args)

    monkeypatch.setattr(asyncio, "to_thread", to_thread)
    passages = ["order A-58812 " + "filler " * 10_000]
    turn = Turn(user_message="Check it", evidence=passages)
    result = await rg.FigureCheck().check(turn, rg.Reply(text="Order A-58812 is paid."))
    assert result.passed and moved


async def test_a_hash_id_is_found_as_its_digits_but_not_inside_a_longer_number() -> None:
    assert await _missing("Ticket #4821 is closed.", {"ticket": 4821}) == []
    assert await _missing("Ticket #4821 is closed.", {"ticket": 48210}) == ["#4821"]
