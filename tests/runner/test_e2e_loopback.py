"""End to end through litellm's real network path: a loopback server plays the provider.

``apiBase`` points litellm at ``ProviderServer``, which answers in the provider's own wire
format (Anthropic messages for the default judge, OpenAI chat completions for an OpenAI
judge). Nothing here switches litellm's transport: these turns go through aiohttp, the way
they do in production.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import copy
import gc
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from conftest import API_KEY
from replyguard import (
    FailCategory,
    Outcome,
    Reply,
    RunMeta,
    Turn,
    Verdict,
    Verifier,
    VerifierConfig,
)
from replyguard.context import _tokens as tokens
from replyguard.runner._feedback import feedback_message
from replyguard.testing import ScriptedAgent
from replyguard.types import Reason, Status
from support.ports import free_port
from support.provider_server import ANTHROPIC, OPENAI, ProviderServer, Seen, Step, Wire

WIRES = [pytest.param(ANTHROPIC, id="anthropic"), pytest.param(OPENAI, id="openai")]
USER_MESSAGE = "Summarise the quarterly report in three bullet points."
FIRST_REPLY = "Done: two bullet points on revenue and costs."
REVISED_REPLY = "Done: three bullet points on revenue, costs and hiring."
FEEDBACK = "add the third bullet on hiring."
FAIL_ANSWER = f"Only two points are given.\nFAIL [incomplete]: {FEEDBACK}"
HISTORY: list[dict[str, Any]] = [
    {"role": "system", "content": "You are the finance team's assistant."},
    {"role": "user", "content": "Where is the quarterly report?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "find", "arguments": "{}"}}
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "reports/q3.pdf"},
    {"role": "assistant", "content": [{"type": "text", "text": "Found reports/q3.pdf."}]},
]
# Not shaped like any known credential: only redaction of the configured key can hide it.
PLAIN_KEY = "3f9a1c7e5b2d4f608a1e9c3b7d5f2a64"


@pytest.fixture
def config_for(
    make_config: Callable[..., VerifierConfig], provider: ProviderServer
) -> Callable[..., VerifierConfig]:
    """A config whose judge speaks ``wire`` to the loopback server and judges every reply."""

    def build(wire: Wire = ANTHROPIC, **keys: Any) -> VerifierConfig:
        base = {
            "model": wire.judge_model,
            "agentModel": wire.agent_model,
            "apiKey": API_KEY,
            "apiBase": provider.url,
            "verifyAll": True,
        }
        return make_config(**{**base, **keys})

    return build


@pytest.fixture(scope="module")
def warm_providers() -> None:
    """Make one judgement per wire format before a deadline is measured.

    litellm's first call to each provider pays for lazy imports and client set-up (0.2-0.4 s
    here, even after ``Verifier.warmup()``), inside the judgement's deadline.
    """
    with ProviderServer(default=Step(text="PASS")) as server:
        for wire in (ANTHROPIC, OPENAI):
            config = VerifierConfig.from_dict(
                {
                    "enabled": True,
                    "model": wire.judge_model,
                    "agentModel": wire.agent_model,
                    "apiKey": API_KEY,
                    "apiBase": server.url,
                }
            )
            asyncio.run(_judge_on_a_fresh_loop(config))


async def _judge_on_a_fresh_loop(config: VerifierConfig) -> None:
    verifier = Verifier(config)
    try:
        await verifier.verify(Turn(user_message="Say hello."), "Hello.")
    finally:
        await verifier.aclose()


async def run_turn(config: VerifierConfig, reply: Reply | str = FIRST_REPLY) -> Outcome:
    return await Verifier(config).run(ScriptedAgent([reply]), Turn(user_message=USER_MESSAGE))


# --- a turn that passes, and one that is retried -------------------------------------------------


@pytest.mark.parametrize("wire", WIRES)
async def test_reply_that_passes_first_time_is_delivered_after_one_judge_call(
    provider: ProviderServer, config_for: Callable[..., VerifierConfig], wire: Wire
) -> None:
    provider.push(Step(text="All three points are there.\nPASS"))
    outcome = await run_turn(config_for(wire))
    assert (outcome.status, outcome.response, len(outcome.attempts)) == (
        Status.PASSED,
        FIRST_REPLY,
        1,
    )
    assert [seen.path for seen in provider.seen] == [wire.path]


@dataclass(frozen=True)
class Retried:
    """A turn judged FAIL [incomplete] once, then PASS."""

    turn: Turn
    agent: ScriptedAgent
    outcome: Outcome


@pytest.fixture
async def retried(provider: ProviderServer, config_for: Callable[..., VerifierConfig]) -> Retried:
    provider.push(Step(text=FAIL_ANSWER), Step(text="PASS"))
    turn = Turn(user_message=USER_MESSAGE, history=copy.deepcopy(HISTORY))
    agent = ScriptedAgent([FIRST_REPLY, REVISED_REPLY])
    outcome = await Verifier(config_for()).run(agent, turn)
    agent.assert_exhausted()
    return Retried(turn, agent, outcome)


async def test_retry_that_passes_delivers_the_revised_reply(retried: Retried) -> None:
    outcome = retried.outcome
    assert (outcome.status, outcome.response) == (Status.PASSED, REVISED_REPLY)
    assert [a.reply.text for a in outcome.attempts] == [FIRST_REPLY, REVISED_REPLY]


async def test_first_agent_call_gets_the_history_then_the_user_message(retried: Retried) -> None:
    assert retried.agent.calls[0] == [*HISTORY, {"role": "user", "content": USER_MESSAGE}]


async def test_retry_gets_the_previous_reply_then_the_categorized_feedback(
    retried: Retried,
) -> None:
    expected_feedback = feedback_message(
        Verdict(passed=False, category=FailCategory.INCOMPLETE, feedback=FEEDBACK)
    )
    assert retried.agent.calls[1] == [
        *HISTORY,
        {"role": "user", "content": USER_MESSAGE},
        {"role": "assistant", "content": FIRST_REPLY},
        {"role": "user", "content": expected_feedback},
    ]
    assert "incomplete" in expected_feedback
    assert FEEDBACK in expected_feedback


async def test_retry_leaves_the_callers_history_untouched(retried: Retried) -> None:
    assert retried.turn.history == HISTORY


class CarelessAgent:
    """An agent that edits the messages it is given, nested content included (many do)."""

    def __init__(self) -> None:
        self.received: list[list[dict[str, Any]]] = []

    def __call__(self, messages: list[dict[str, Any]]) -> str:
        self.received.append(copy.deepcopy(messages))
        for message in messages:
            content = message.get("content")
            if isinstance(content, list):
                content[0]["text"] = "edited by the agent"
                content.append({"type": "text", "text": "appended by the agent"})
            message["seen_by_agent"] = True
        messages.append({"role": "assistant", "content": "scratch"})
        return FIRST_REPLY if len(self.received) == 1 else REVISED_REPLY


@pytest.fixture
async def careless(
    provider: ProviderServer, config_for: Callable[..., VerifierConfig]
) -> tuple[Turn, CarelessAgent]:
    """A fail-then-pass turn run by a ``CarelessAgent``."""
    provider.push(Step(text=FAIL_ANSWER), Step(text="PASS"))
    turn = Turn(user_message=USER_MESSAGE, history=copy.deepcopy(HISTORY))
    agent = CarelessAgent()
    await Verifier(config_for()).run(agent, turn)
    return turn, agent


async def test_agent_editing_its_messages_cannot_reach_the_callers_history(
    careless: tuple[Turn, CarelessAgent],
) -> None:
    turn, _agent = careless
    assert turn.history == HISTORY


async def test_agent_editing_its_messages_cannot_reach_its_retry(
    careless: tuple[Turn, CarelessAgent],
) -> None:
    _turn, agent = careless
    retry_messages = agent.received[1]
    assert retry_messages[: len(HISTORY) + 1] == [
        *HISTORY,
        {"role": "user", "content": USER_MESSAGE},
    ]


async def test_two_fails_with_two_attempts_deliver_the_last_reply(
    provider: ProviderServer, config_for: Callable[..., VerifierConfig]
) -> None:
    second_fail = "Still short.\nFAIL [incomplete]: The closing date is missing too."
    provider.push(Step(text=FAIL_ANSWER), Step(text=second_fail))
    agent = ScriptedAgent([FIRST_REPLY, REVISED_REPLY])
    outcome = await Verifier(config_for(maxAttempts=2)).run(agent, Turn(user_message=USER_MESSAGE))
    assert (outcome.status, outcome.reason, outcome.response) == (
        Status.EXHAUSTED,
        None,
        REVISED_REPLY,
    )
    assert [v.passed for v in outcome.verdicts] == [False, False]
    assert len(provider.seen) == 2


# --- failing open -------------------------------------------------------------------------------


@pytest.mark.usefixtures("warm_providers")
@pytest.mark.parametrize("wire", WIRES)
async def test_slow_judge_fails_open_by_the_deadline(
    provider: ProviderServer, config_for: Callable[..., VerifierConfig], wire: Wire
) -> None:
    # A deadline of 1.5 s, not less: on a busy machine litellm's own preparation (a hop to a
    # worker thread) can outlast a shorter one before the request is even sent.
    provider.push(Step(text="PASS", delay=15))
    started = time.monotonic()
    outcome = await run_turn(config_for(wire, timeoutSeconds=1.5))
    elapsed = time.monotonic() - started
    assert (outcome.status, outcome.reason) == (Status.FAILED_OPEN, Reason.JUDGE_TIMEOUT)
    assert outcome.response == FIRST_REPLY
    assert elapsed < 8  # the deadline is 1.5 s; the provider would take 15 s
    assert len(provider.seen) == 1


TROUBLE = [
    pytest.param(lambda wire: Step(status=500, body=wire.error(500, "overloaded")), id="500"),
    pytest.param(
        lambda wire: Step(
            status=429, body=wire.error(429, "slow down"), headers={"retry-after": "30"}
        ),
        id="429-retry-after",
    ),
    pytest.param(lambda wire: Step(drop=True), id="dropped-connection"),
    pytest.param(lambda wire: Step(body=b"not json"), id="malformed-json"),
]


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize("trouble", TROUBLE)
async def test_provider_trouble_fails_open_with_the_reply_delivered(
    provider: ProviderServer,
    config_for: Callable[..., VerifierConfig],
    wire: Wire,
    trouble: Callable[[Wire], Step],
) -> None:
    provider.push(trouble(wire))
    outcome = await run_turn(config_for(wire))
    assert (outcome.status, outcome.reason) == (Status.FAILED_OPEN, Reason.JUDGE_ERROR)
    assert outcome.response == FIRST_REPLY


@pytest.mark.parametrize("wire", WIRES)
async def test_refused_connection_fails_open_with_the_reply_delivered(
    config_for: Callable[..., VerifierConfig], wire: Wire
) -> None:
    outcome = await run_turn(config_for(wire, apiBase=f"http://127.0.0.1:{free_port()}"))
    assert (outcome.status, outcome.reason) == (Status.FAILED_OPEN, Reason.JUDGE_ERROR)
    assert outcome.response == FIRST_REPLY


async def test_verdict_text_without_a_verdict_fails_open_as_unreadable(
    provider: ProviderServer, config_for: Callable[..., VerifierConfig]
) -> None:
    provider.push(Step(text="I think it's fine"))
    outcome = await run_turn(config_for())
    assert (outcome.status, outcome.reason) == (Status.FAILED_OPEN, Reason.UNREADABLE_VERDICT)
    assert outcome.response == FIRST_REPLY


@pytest.mark.parametrize(
    ("keys", "reply", "status"),
    [
        pytest.param(
            {},
            Reply(text="Done, fetching it now.", meta=RunMeta(pending_tool_calls=1)),
            Status.SKIPPED,
            id="skipped",
        ),
        pytest.param(
            {"verifyAll": False}, "It is sunny in Lisbon.", Status.NOT_TRIGGERED, id="not-triggered"
        ),
        pytest.param({"enabled": False}, "Done.", Status.DISABLED, id="disabled"),
    ],
)
async def test_unjudged_turn_makes_no_request(
    provider: ProviderServer,
    config_for: Callable[..., VerifierConfig],
    keys: dict[str, Any],
    reply: Reply | str,
    status: Status,
) -> None:
    outcome = await run_turn(config_for(**keys), reply)
    assert outcome.status is status
    assert provider.seen == []


# --- many turns at once -------------------------------------------------------------------------

TICKET = re.compile(r"ticket-(\d+)")


def _ticket_verdict(seen: Seen) -> Step:
    """PASS, FAIL until revised, or always FAIL, by the ticket number the request names."""
    review = seen.prompt_texts[-1]
    match = TICKET.search(review)
    assert match is not None
    number = int(match.group(1))
    passes = number % 3 == 0 or (number % 3 == 1 and "revised" in review)
    text = "PASS" if passes else f"FAIL [incomplete]: ticket-{number} lacks its total."
    return Step(text=text, delay=(number % 7) * 0.002)


async def test_concurrent_turns_on_one_verifier_each_get_their_own_verdicts(
    provider: ProviderServer, config_for: Callable[..., VerifierConfig]
) -> None:
    provider.respond_with(_ticket_verdict)
    verifier = Verifier(config_for(maxAttempts=2))
    numbers = range(100)
    agents = {
        n: ScriptedAgent([f"Done: ticket-{n} handled.", f"Done: ticket-{n} handled, revised."])
        for n in numbers
    }
    outcomes = await asyncio.gather(
        *(
            verifier.run(agents[n], Turn(user_message=f"Close ticket-{n}, please.", id=str(n)))
            for n in numbers
        )
    )
    expected = {
        0: (Status.PASSED, "Done: ticket-{n} handled."),
        1: (Status.PASSED, "Done: ticket-{n} handled, revised."),
        2: (Status.EXHAUSTED, "Done: ticket-{n} handled, revised."),
    }
    for n, outcome in zip(numbers, outcomes, strict=True):
        status, response = expected[n % 3]
        assert (outcome.status, outcome.response) == (status, response.format(n=n))
        for messages in agents[n].calls[1:]:
            assert f"ticket-{n} lacks its total" in messages[-1]["content"]
    assert len(provider.seen) == sum(1 if n % 3 == 0 else 2 for n in numbers)


# --- run_sync -----------------------------------------------------------------------------------


def _echo_ticket(messages: list[dict[str, Any]]) -> str:
    return f"Done: {messages[-1]['content']}"


def _left_on_a_closed_loop(unraisable: Any) -> bool:
    return isinstance(unraisable.exc_value, RuntimeError) and "Event loop is closed" in str(
        unraisable.exc_value
    )


def _close_and_collect_leftovers(
    verifier: Verifier, provider: ProviderServer, monkeypatch: pytest.MonkeyPatch
) -> list[Any]:
    """Close ``verifier``, then let litellm move on to a new loop; return what was left behind.

    litellm's background logging worker lives on the loop of its first call (here the
    ``run_sync`` loop) and is dropped when a call on another loop restarts it: a task that
    ``close()`` left pending on the closed loop is destroyed then, as an unraisable error.
    """
    leftovers: list[Any] = []
    monkeypatch.setattr(sys, "unraisablehook", leftovers.append)
    verifier.close()
    provider.push(Step(text="PASS"))
    asyncio.run(_judge_on_a_fresh_loop(verifier.config))
    gc.collect()
    monkeypatch.undo()
    return leftovers


@pytest.fixture
def sync_verifier(
    provider: ProviderServer,
    config_for: Callable[..., VerifierConfig],
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Verifier]:
    """A verifier for ``run_sync`` tests, closed afterwards.

    What ``close()`` leaves behind is reported by
    ``test_close_after_run_sync_leaves_no_task_behind``, not by every test that closes.
    """
    verifier = Verifier(config_for())
    yield verifier
    leftovers = _close_and_collect_leftovers(verifier, provider, monkeypatch)
    assert [u for u in leftovers if not _left_on_a_closed_loop(u)] == []


def test_run_sync_serves_turns_back_to_back(
    provider: ProviderServer, sync_verifier: Verifier
) -> None:
    provider.push(Step(text="PASS"), Step(text="PASS"), Step(text="PASS"))
    outcomes = [
        sync_verifier.run_sync(_echo_ticket, Turn(user_message=f"ticket-{n}")) for n in range(3)
    ]
    assert [(o.status, o.response) for o in outcomes] == [
        (Status.PASSED, f"Done: ticket-{n}") for n in range(3)
    ]
    assert len(provider.seen) == 3


def test_run_sync_serves_four_threads_at_once(
    provider: ProviderServer, sync_verifier: Verifier
) -> None:
    provider.push(*(Step(text="PASS") for _ in range(4)))
    together = threading.Barrier(4, timeout=10)  # every agent call is in flight at once

    def agent(messages: list[dict[str, Any]]) -> str:
        together.wait()
        return _echo_ticket(messages)

    def one_turn(n: int) -> Outcome:
        return sync_verifier.run_sync(agent, Turn(user_message=f"ticket-{n}"))

    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        outcomes = list(pool.map(one_turn, range(4)))
    assert [(o.status, o.response) for o in outcomes] == [
        (Status.PASSED, f"Done: ticket-{n}") for n in range(4)
    ]
    assert len(provider.seen) == 4


def test_close_after_run_sync_leaves_no_task_behind(
    provider: ProviderServer,
    config_for: Callable[..., VerifierConfig],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    provider.push(Step(text="PASS"))
    verifier = Verifier(config_for())
    verifier.run_sync(_echo_ticket, Turn(user_message="ticket-1"))
    leftovers = _close_and_collect_leftovers(verifier, provider, monkeypatch)
    assert [repr(u.object) for u in leftovers] == []


# --- secrets ------------------------------------------------------------------------------------

KEYS = [pytest.param(API_KEY, id="sk-shaped-key"), pytest.param(PLAIN_KEY, id="plain-key")]


async def _run_with_echoed_key(
    provider: ProviderServer, config: VerifierConfig, wire: Wire, message: str
) -> Outcome:
    provider.push(Step(status=401, body=wire.error(401, message)))
    return await run_turn(config)


def _logged_texts(records: list[Any]) -> list[str]:
    return [t for r in records for t in (r.getMessage(), repr(getattr(r, "replyguard", None)))]


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize("key", KEYS)
async def test_api_key_echoed_by_the_provider_is_in_no_log_record(
    provider: ProviderServer,
    config_for: Callable[..., VerifierConfig],
    replyguard_logs: pytest.LogCaptureFixture,
    wire: Wire,
    key: str,
) -> None:
    config = config_for(wire, apiKey=key)
    await _run_with_echoed_key(provider, config, wire, f"Incorrect API key provided: {key}.")
    texts = _logged_texts(replyguard_logs.records)
    assert any("judge_error" in text for text in texts)
    assert not [text for text in texts if key in text]


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize("key", KEYS)
async def test_api_key_echoed_by_the_provider_is_not_in_the_outcome(
    provider: ProviderServer, config_for: Callable[..., VerifierConfig], wire: Wire, key: str
) -> None:
    config = config_for(wire, apiKey=key)
    outcome = await _run_with_echoed_key(
        provider, config, wire, f"Incorrect API key provided: {key}."
    )
    error = outcome.verdicts[-1].error
    assert error
    assert outcome.reason is Reason.JUDGE_ERROR
    for text in (repr(outcome), str(outcome), outcome.model_dump_json(), error):
        assert key not in text


@pytest.mark.parametrize("wire", WIRES)
async def test_no_piece_of_an_echoed_key_survives_where_error_text_is_cut(
    provider: ProviderServer,
    config_for: Callable[..., VerifierConfig],
    replyguard_logs: pytest.LogCaptureFixture,
    wire: Wire,
) -> None:
    """Error text is shortened for logs and verdicts; the cut must not split the key open.

    The body repeats the key (period 33 characters); four paddings 8 characters apart make
    sure at least one of them puts the cut at least 8 characters into a copy of the key.
    """
    config = config_for(wire, apiKey=PLAIN_KEY)
    errors = []
    for padding in (0, 8, 16, 24):
        message = "x" * padding + " ".join([PLAIN_KEY] * 20)
        outcome = await _run_with_echoed_key(provider, config, wire, message)
        errors.append(outcome.verdicts[-1].error or "")
    texts = errors + _logged_texts(replyguard_logs.records)
    assert not [text for text in texts if PLAIN_KEY[:8] in text]


# --- awkward content ----------------------------------------------------------------------------


async def test_reply_with_a_special_token_is_judged(
    provider: ProviderServer, config_for: Callable[..., VerifierConfig]
) -> None:
    provider.push(Step(text="PASS"))
    reply = "Done: the tokenizer marks the end with <|endoftext|> and that is all."
    outcome = await run_turn(config_for(), reply)
    assert (outcome.status, outcome.reason) == (Status.PASSED, None)
    assert "<|endoftext|>" in provider.seen[0].prompt


HUGE = 1_000_000


def _huge(label: str) -> str:
    filler = "Quarterly figures, line by line, with notes. "
    middle = filler * (HUGE // len(filler))
    return f"{label}-HEAD {middle}{label}-TAIL"


@pytest.fixture
async def huge_turn_request(
    provider: ProviderServer, config_for: Callable[..., VerifierConfig]
) -> Seen:
    """The one request the judge got for a turn with a 1M-character message and reply."""
    provider.push(Step(text="PASS"))
    config = config_for(contextTokenBudget=4000)
    agent = ScriptedAgent(["Done: " + _huge("REPLY")])
    await Verifier(config).run(agent, Turn(user_message=_huge("REQUEST")))
    (seen,) = provider.seen
    return seen


async def test_huge_turn_is_sent_within_the_context_token_budget(
    huge_turn_request: Seen,
) -> None:
    assert sum(tokens.count(text) for text in huge_turn_request.prompt_texts) <= 4000


async def test_huge_turn_keeps_both_ends_of_the_request_and_the_reply(
    huge_turn_request: Seen,
) -> None:
    prompt = huge_turn_request.prompt
    for marker in ("REQUEST-HEAD", "REQUEST-TAIL", "REPLY-HEAD", "REPLY-TAIL"):
        assert marker in prompt
