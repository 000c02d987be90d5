"""Retries that do not repeat actions: side-effecting tool calls, ``onSideEffects``, the
turn's id, ``current_turn()`` and ``idempotency_key`` (the judge is the loopback provider).

The fault-injection test at the end is the proof: an agent that repeats every tool call it
ever made on every retry, tools that honour the idempotency key, and executions counted at the
tool: none is repeated, under ``notice``, ``deliver`` and ``retry``.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from conftest import API_KEY
from replyguard import (
    ConfigError,
    Outcome,
    Reason,
    Reply,
    RunMeta,
    Status,
    ToolCallRecord,
    Turn,
    TurnContext,
    Verifier,
    VerifierConfig,
    current_turn,
    idempotency_key,
)
from replyguard.runner._side_effects import SideEffects, done
from replyguard.runner._turn_scope import canonical_arguments
from replyguard.testing import ScriptedAgent
from support.provider_server import ANTHROPIC, ProviderServer, Seen, Step

FAIL = "FAIL [incomplete]: also say when the invoice is due."
REQUEST = "Send the March invoice to Ada and open a ticket for the refund."


@pytest.fixture
def config(
    make_config: Callable[..., VerifierConfig], provider: ProviderServer
) -> Callable[..., VerifierConfig]:
    def build(**keys: Any) -> VerifierConfig:
        base = {
            "model": ANTHROPIC.judge_model,
            "agentModel": ANTHROPIC.agent_model,
            "apiKey": API_KEY,
            "apiBase": provider.url,
            "verifyAll": True,
            "sideEffectTools": ["send_*", "*_create", "deploy*"],
        }
        return make_config(**{**base, **keys})

    return build


async def run(config: VerifierConfig, agent: Any, turn: Turn | None = None) -> Outcome:
    verifier = Verifier(config)
    try:
        return await verifier.run(agent, turn or Turn(user_message=REQUEST))
    finally:
        await verifier.aclose()


def call(name: str, side_effect: bool | None = None, **arguments: Any) -> ToolCallRecord:
    return ToolCallRecord(name=name, arguments=arguments, side_effect=side_effect)


SENT = call("send_email", to="ada@example.com", subject="March invoice")
TICKET = call("ticket_create", title="Refund order 4471")
LOOKUP = call("lookup_order", order=4471)


def acting(text: str, *calls: ToolCallRecord) -> Reply:
    return Reply(text=text, meta=RunMeta(tool_calls=calls))


# -- which calls have side effects ------------------------------------------------------------


def test_patterns_are_case_sensitive_globs_and_an_explicit_false_wins() -> None:
    effects = SideEffects(("send_*", "*_create", "deploy*"))
    resolved = effects.resolved(
        [
            call("send_email"),
            call("Send_Email"),  # case-sensitive: no match
            call("ticket_create"),
            call("deploy_prod"),
            call("send_preview", side_effect=False),  # the agent says it changes nothing
            call("lookup_order", side_effect=True),  # the agent says it does
            call("lookup_order"),
        ]
    )
    assert [c.side_effect for c in resolved] == [True, False, True, True, False, True, False]


def test_the_turn_ledger_settles_each_flag_and_adds_the_earlier_attempts_calls() -> None:
    effects = SideEffects(("send_*",))
    settled = call("lookup_order", side_effect=False)
    first = Reply(text="a", meta=RunMeta(tool_calls=(call("send_email"),)))
    second = Reply(text="b", meta=RunMeta(tool_calls=(settled,)))
    assert effects.with_turn_ledger(second, []) is second  # every flag settled: unchanged
    seen = effects.with_turn_ledger(second, [first])
    assert [(c.name, c.side_effect) for c in seen.meta.tool_calls] == [
        ("send_email", True),
        ("lookup_order", False),
    ]
    assert effects.with_turn_ledger(first, []).meta.tool_calls[0].side_effect is True
    assert first.meta.tool_calls[0].side_effect is None  # the agent's reply is not changed


def test_done_keeps_successful_side_effects_once_each() -> None:
    failed = SENT.model_copy(update={"succeeded": False, "side_effect": True})
    ledger = SideEffects(("send_*",)).resolved(
        [failed, SENT, SENT, LOOKUP, call("send_email", to="bob@example.com")]
    )
    assert [(c.name, c.arguments) for c in done(ledger)] == [
        ("send_email", SENT.arguments),
        ("send_email", {"to": "bob@example.com"}),
    ]


@pytest.mark.parametrize(
    ("keys", "problem"),
    [
        ({"sideEffectTools": ["send_*", " "]}, "sideEffectTools"),
        ({"onSideEffects": "ask"}, "onSideEffects"),
        ({"runKinds": {"quick": {"onSideEffects": "never"}}}, "runKinds.quick.onSideEffects"),
    ],
)
def test_bad_side_effect_keys_are_config_errors_naming_the_key(
    tmp_path: Path, keys: dict[str, Any], problem: str
) -> None:
    path = tmp_path / "verifier.json"
    path.write_text(json.dumps(keys))
    with pytest.raises(ConfigError) as caught:
        VerifierConfig.load(path)
    assert str(path) in str(caught.value) and problem in str(caught.value)


# -- notice, deliver, retry ---------------------------------------------------------------------


async def test_notice_lists_what_is_done_and_the_judge_sees_it_marked_done(
    provider: ProviderServer, config: Callable[..., VerifierConfig]
) -> None:
    provider.push(Step(text=FAIL), Step(text="PASS"))
    agent = ScriptedAgent(
        [
            acting("Sent the invoice and opened the ticket.", SENT, TICKET, LOOKUP),
            "Sent the invoice (due 31 March) and opened the ticket.",
        ]
    )
    outcome = await run(config(), agent)
    assert (outcome.status, len(outcome.attempts)) == (Status.PASSED, 2)
    retry_message = agent.calls[1][-1]["content"]
    assert "Already done in this turn" in retry_message
    assert '- send_email({"subject":"March invoice","to":"ada@example.com"})' in retry_message
    assert '- ticket_create({"title":"Refund order 4471"})' in retry_message
    assert "lookup_order" not in retry_message  # reading is no side effect
    # The retry made no call itself; the judge still sees the turn's calls, marked done.
    second = provider.seen[1].prompt
    assert "send_email(" in second and "ticket_create(" in second
    marked = [line for line in second.splitlines() if "[done: a side effect" in line]
    assert [line.split("(")[0] for line in marked] == ["- send_email", "- ticket_create"]


async def test_deliver_does_not_retry_after_side_effects_and_flags_the_turn(
    provider: ProviderServer, config: Callable[..., VerifierConfig], tmp_path: Path
) -> None:
    provider.push(Step(text=FAIL))
    ledger = tmp_path / "ledger.jsonl"
    reply = acting("Sent the invoice.", SENT, LOOKUP)
    outcome = await run(
        config(onSideEffects="deliver", ledgerPath=str(ledger)), ScriptedAgent([reply])
    )
    assert (outcome.status, outcome.reason) == (Status.FLAGGED, Reason.SIDE_EFFECTS)
    assert (outcome.response, len(outcome.attempts)) == ("Sent the invoice.", 1)
    line = json.loads(ledger.read_text())
    assert (line["status"], line["reason"], line["sideEffects"]) == (
        "flagged",
        "side_effects",
        ["send_email"],
    )


async def test_deliver_retries_as_usual_when_nothing_was_done(
    provider: ProviderServer, config: Callable[..., VerifierConfig]
) -> None:
    provider.push(Step(text=FAIL), Step(text="PASS"))
    failed_send = SENT.model_copy(update={"succeeded": False})
    agent = ScriptedAgent([acting("Tried to send it.", failed_send, LOOKUP), "Due 31 March."])
    outcome = await run(config(onSideEffects="deliver"), agent)
    assert (outcome.status, len(outcome.attempts)) == (Status.PASSED, 2)
    assert "Already done" not in agent.calls[1][-1]["content"]


async def test_retry_retries_without_a_notice(
    provider: ProviderServer, config: Callable[..., VerifierConfig]
) -> None:
    provider.push(Step(text=FAIL), Step(text="PASS"))
    agent = ScriptedAgent([acting("Sent.", SENT), "Sent; due 31 March."])
    outcome = await run(config(onSideEffects="retry"), agent)
    assert (outcome.status, len(outcome.attempts)) == (Status.PASSED, 2)
    assert "Already done" not in agent.calls[1][-1]["content"]
    assert "[done: a side effect" in provider.seen[1].prompt  # the judge still knows


async def test_a_run_kind_may_choose_its_own_policy(
    provider: ProviderServer, config: Callable[..., VerifierConfig]
) -> None:
    provider.push(Step(text=FAIL))
    outcome = await run(
        config(runKinds={"outbound": {"onSideEffects": "deliver"}}),
        ScriptedAgent([acting("Sent.", SENT)]),
        Turn(user_message=REQUEST, run_kind="outbound"),
    )
    assert (outcome.status, outcome.reason) == (Status.FLAGGED, Reason.SIDE_EFFECTS)


async def test_the_claims_check_sees_a_send_an_earlier_attempt_made(
    provider: ProviderServer, config: Callable[..., VerifierConfig]
) -> None:
    provider.push(Step(text=FAIL), Step(text="PASS"))
    agent = ScriptedAgent([acting("Sent the invoice.", SENT), "I sent the invoice; due 31 March."])
    outcome = await run(config(checks=[{"type": "claims"}]), agent)
    assert outcome.status == Status.PASSED
    assert all(result.passed for result in outcome.attempts[1].checks)


# -- the turn's id, current_turn() and idempotency_key ------------------------------------------


async def test_a_turn_without_an_id_gets_one_and_the_agent_sees_turn_and_attempt(
    provider: ProviderServer, config: Callable[..., VerifierConfig]
) -> None:
    provider.push(Step(text=FAIL), Step(text="PASS"))
    seen: list[TurnContext | None] = []

    def agent(messages: list[dict[str, Any]]) -> str:  # sync: runs in a pool thread
        seen.append(current_turn())
        return f"Answer {len(seen)}, on {threading.current_thread().name}"

    outcome = await run(config(), agent)
    assert outcome.status == Status.PASSED and current_turn() is None
    assert [scope.attempt for scope in seen if scope] == [1, 2]
    ids = {scope.turn_id for scope in seen if scope}
    assert len(ids) == 1 and ids.pop().startswith("turn-")


async def test_the_key_is_stable_within_a_turn_and_differs_between_turns(
    provider: ProviderServer, config: Callable[..., VerifierConfig]
) -> None:
    provider.respond_with(lambda seen: Step(text=FAIL if "first" in seen.prompt else "PASS"))
    keys: list[tuple[int, str, str]] = []

    async def agent(messages: list[dict[str, Any]]) -> str:
        scope = current_turn()
        assert scope is not None
        keys.append(
            (
                scope.attempt,
                idempotency_key("send_email", {"to": "ada@example.com", "n": 1}),
                idempotency_key("send_email", '{"n": 1, "to": "ada@example.com"}'),
            )
        )
        return "first try" if scope.attempt == 1 else "second try"

    await run(config(), agent)
    await run(config(), agent)
    await run(config(), agent, Turn(user_message=REQUEST, id="order-4471"))
    await run(config(), agent, Turn(user_message=REQUEST, id="order-4471"))
    turn_keys = [key for attempt, key, _ in keys if attempt == 1]
    assert all(dict_key == json_key for _, dict_key, json_key in keys)
    assert [attempt for attempt, _, _ in keys] == [1, 2] * 4
    assert keys[0][1] == keys[1][1]  # the same on the retry
    assert turn_keys[0] != turn_keys[1]  # another turn, another key
    assert turn_keys[2] == turn_keys[3]  # the caller's own id: the same key again
    assert len(turn_keys[0]) == 32 and int(turn_keys[0], 16) >= 0


async def test_a_blank_turn_id_gets_a_fresh_one_so_keys_never_collide_between_turns(
    provider: ProviderServer, config: Callable[..., VerifierConfig]
) -> None:
    # A careless host passes "" (a missing header) for every turn: one shared key would make
    # a payment API refuse the next turn's real payment as a repeat.
    keys: list[str] = []
    ids: list[str] = []

    def agent(messages: list[dict[str, Any]]) -> str:
        scope = current_turn()
        assert scope is not None
        ids.append(scope.turn_id)
        keys.append(idempotency_key("send_email", {"to": "ada@example.com"}))
        return "Hello."

    for blank in ("", "", "  "):
        await run(config(verifyAll=False), agent, Turn(user_message=REQUEST, id=blank))
    assert len(set(keys)) == 3
    assert all(turn_id.startswith("turn-") for turn_id in ids)


def test_the_key_needs_a_turn_and_json_arguments() -> None:
    with pytest.raises(RuntimeError, match="inside the agent"):
        idempotency_key("send_email", {"to": "ada@example.com"})


async def test_arguments_json_cannot_hold_are_a_type_error(
    provider: ProviderServer, config: Callable[..., VerifierConfig]
) -> None:
    problems: list[str] = []

    def agent(messages: list[dict[str, Any]]) -> str:
        for bad in ({"to": {"ada", "bob"}}, {"x": float("nan")}, object()):
            try:
                idempotency_key("send_email", bad)
            except TypeError as exc:
                problems.append(str(exc))
        return "Hello."

    await run(config(verifyAll=False), agent)
    assert len(problems) == 3


async def test_current_turn_is_per_task_in_concurrent_turns(
    provider: ProviderServer, config: Callable[..., VerifierConfig]
) -> None:
    both_inside = asyncio.Barrier(2)

    async def agent(messages: list[dict[str, Any]]) -> str:
        await both_inside.wait()  # both turns are inside their agents at once
        scope = current_turn()
        assert scope is not None
        return f"{scope.turn.user_message} -> {scope.turn_id}"

    verifier = Verifier(config(verifyAll=False))
    try:
        first, second = await asyncio.gather(
            verifier.run(agent, Turn(user_message="a", id="t-a")),
            verifier.run(agent, Turn(user_message="b", id="t-b")),
        )
    finally:
        await verifier.aclose()
    assert (first.response, second.response) == ("a -> t-a", "b -> t-b")


# -- fault injection: an agent that repeats every call on every retry ---------------------------


class Tools:
    """Tools that honour the idempotency key, counting what they really execute."""

    def __init__(self) -> None:
        self.executed: Counter[tuple[str, str]] = Counter()
        self.calls = 0
        self._done: dict[str, str] = {}

    def invoke(self, name: str, arguments: dict[str, Any]) -> str:
        self.calls += 1
        key = idempotency_key(name, arguments)
        if key in self._done:
            return self._done[key]  # a repeat: the first result, nothing done again
        self.executed[(name, json.dumps(arguments, sort_keys=True))] += 1
        self._done[key] = result = f"{name} ok"
        return result


PLAN = [  # the calls the agent makes on each attempt (it adds one, and repeats all before)
    ("send_email", {"to": "ada@example.com", "subject": "March invoice"}),
    ("ticket_create", {"title": "Refund order 4471"}),
    ("deploy_hotfix", {"version": "2.4.1"}),
]


def repeating_agent(tools: Tools) -> Callable[[list[dict[str, Any]]], Reply]:
    def agent(messages: list[dict[str, Any]]) -> Reply:
        scope = current_turn()
        assert scope is not None
        records = []
        for name, arguments in PLAN[: scope.attempt]:  # every earlier call again, and one more
            tools.invoke(name, arguments)
            records.append(ToolCallRecord(name=name, arguments=arguments))
        return Reply(text=f"Reply #{scope.attempt}: all done.", meta=RunMeta(tool_calls=records))

    return agent


@pytest.mark.parametrize(
    ("policy", "status", "attempts"),
    [
        ("notice", Status.PASSED, 3),
        ("retry", Status.PASSED, 3),
        ("deliver", Status.FLAGGED, 1),
    ],
)
async def test_an_agent_repeating_every_call_on_every_retry_executes_each_once(
    provider: ProviderServer,
    config: Callable[..., VerifierConfig],
    policy: str,
    status: Status,
    attempts: int,
) -> None:
    def judge(seen: Seen) -> Step:
        if "Reply #3" in seen.prompt:
            return Step(text="PASS")
        missing = "the due date" if "Reply #1" in seen.prompt else "the hotfix deploy"
        return Step(text=f"FAIL [incomplete]: {missing} is missing.")

    provider.respond_with(judge)
    tools = Tools()
    outcome = await run(config(onSideEffects=policy), repeating_agent(tools))
    assert (outcome.status, len(outcome.attempts)) == (status, attempts)
    assert tools.calls == sum(range(1, attempts + 1))  # 1, 3 or 6 calls made
    assert sum(tools.executed.values()) == attempts  # each distinct call executed once
    assert max(tools.executed.values()) == 1  # 0 duplicates


# -- the same inside Verifier.stream ------------------------------------------------------------


async def test_a_streaming_agent_sees_its_turn_and_attempt_and_keys_stay_stable(
    provider: ProviderServer, config: Callable[..., VerifierConfig]
) -> None:
    provider.push(Step(text=FAIL), Step(text="PASS"))
    seen: list[tuple[int, str, str]] = []

    async def streaming(messages: list[dict[str, Any]]) -> Any:
        scope = current_turn()
        assert scope is not None
        key = idempotency_key("send_email", {"to": "ada@example.com"})
        seen.append((scope.attempt, scope.turn_id, key))
        yield f"Reply #{scope.attempt}: "
        scope = current_turn()  # still set between deltas
        assert scope is not None
        yield "sent."

    def threaded(messages: list[dict[str, Any]]) -> Any:  # a sync generator, read in threads
        scope = current_turn()
        assert scope is not None
        seen.append((scope.attempt, scope.turn_id, idempotency_key("ticket_create", {})))
        yield "Opened the ticket."

    verifier = Verifier(config())
    try:
        events = [event async for event in verifier.stream(streaming, Turn(user_message=REQUEST))]
        provider.push(Step(text="PASS"))
        events += [event async for event in verifier.stream(threaded, Turn(user_message="t"))]
    finally:
        await verifier.aclose()
    assert current_turn() is None
    assert [attempt for attempt, _, _ in seen] == [1, 2, 1]
    assert seen[0][1:] == seen[1][1:]  # the same turn id and key on the retry
    assert seen[2][1] != seen[0][1] and seen[2][1].startswith("turn-")
    assert sum(type(event).__name__ == "Done" for event in events) == 2


# -- careless agents ----------------------------------------------------------------------------


async def test_odd_and_many_arguments_never_break_the_turn_and_the_list_is_capped(
    provider: ProviderServer, config: Callable[..., VerifierConfig]
) -> None:
    provider.push(Step(text=FAIL), Step(text="PASS"))
    deep: Any = "x"
    for _ in range(5000):  # deeper than JSON can write back
        deep = [deep]
    odd = [
        ToolCallRecord(name="send_deep", arguments=deep),
        ToolCallRecord(name="send_set", arguments={"to": {"ada", "bob"}}),
        ToolCallRecord(name="send_text", arguments="not json {"),
        *(ToolCallRecord(name="send_email", arguments={"n": n}) for n in range(40)),
    ]
    agent = ScriptedAgent([acting("Sent them all.", *odd), "Sent them all; due 31 March."])
    outcome = await run(config(), agent)
    assert (outcome.status, len(outcome.attempts)) == (Status.PASSED, 2)
    listed = [line for line in agent.calls[1][-1]["content"].splitlines() if line.startswith("- ")]
    assert len(listed) == 21 and listed[-1] == "- … and 23 more"
    assert listed[2] == '- send_text("not json {")'
    with pytest.raises(TypeError, match="nested too deep"):
        canonical_arguments(deep)


async def test_a_frameworks_own_tools_read_the_key_through_an_adapter(
    make_config: Callable[..., VerifierConfig],
) -> None:
    from pydantic_ai import Agent
    from pydantic_ai.messages import (
        ModelMessage,
        ModelRequest,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
    )
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from replyguard.adapters.pydantic_ai import VerifiedAgent
    from replyguard.testing import ScriptedJudge

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        returned = isinstance(last, ModelRequest) and any(
            isinstance(part, ToolReturnPart) for part in last.parts
        )
        if not returned:  # every run (every attempt) sends the report again
            return ModelResponse(parts=[ToolCallPart("send_report", {"title": "weekly"})])
        runs = sum(isinstance(m, ModelResponse) for m in messages)
        return ModelResponse(parts=[TextPart(f"I sent the weekly report ({runs}).")])

    model.__name__ = "repeating"  # FunctionModel names its model after the function
    agent = Agent(FunctionModel(model))
    tools = Tools()
    attempts: list[int] = []

    @agent.tool_plain
    def send_report(title: str) -> str:
        scope = current_turn()
        assert scope is not None
        attempts.append(scope.attempt)
        return tools.invoke("send_report", {"title": title})

    judge = ScriptedJudge(["FAIL [incomplete]: add the date.", "PASS"])
    verifier = Verifier(make_config(verifyAll=True, maxAttempts=2), judge=judge)
    result = await VerifiedAgent(agent, verifier).run("Send the weekly report.")
    assert result.outcome.status == Status.PASSED
    assert attempts == [1, 2]  # the retry called the tool again
    assert tools.calls == 2 and sum(tools.executed.values()) == 1
