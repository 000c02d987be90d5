"""The OpenAI Agents SDK adapter: the agent's model talks to the loopback provider server (OpenAI
wire format) through the SDK's own chat-completions model; the judge is the scripted judge."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from agents import (
    Agent,
    OpenAIChatCompletionsModel,
    OutputGuardrailTripwireTriggered,
    RunConfig,
    Runner,
    SQLiteSession,
    function_tool,
    set_tracing_disabled,
)
from openai import AsyncOpenAI

from conftest import API_KEY
from replyguard import FailCategory, Reason, Status, Verdict, Verifier
from replyguard.adapters.openai_agents import VerifiedRunner, judge_output_guardrail
from replyguard.testing import ScriptedJudge
from support.provider_server import ProviderServer, Seen, Step

set_tracing_disabled(True)

BAD = "Done: the report."
GOOD = "Done: the report, dated 2026-01-02."
FEEDBACK = "Add the report's date."
FAIL = f"FAIL [incomplete]: {FEEDBACK}"


def answer(seen: Seen) -> Step:
    """BAD until the judge's feedback reaches the model, GOOD after."""
    return Step(text=GOOD if FEEDBACK in seen.prompt else BAD)


@pytest.fixture
async def model(provider: ProviderServer) -> AsyncIterator[OpenAIChatCompletionsModel]:
    provider.respond_with(answer)
    async with AsyncOpenAI(base_url=provider.url, api_key=API_KEY, max_retries=0) as client:
        yield OpenAIChatCompletionsModel("gpt-4o", client)


def chat_messages(seen: Seen) -> list[tuple[str, str]]:
    return [(m["role"], m.get("content") or "") for m in seen.body["messages"]]


# -- VerifiedRunner ------------------------------------------------------------------------------


async def test_runner_retries_with_the_feedback_and_delivers_the_retry(
    make_config: Any, model: OpenAIChatCompletionsModel, provider: ProviderServer
) -> None:
    judge = ScriptedJudge([FAIL, "PASS"])
    agent = Agent(name="reporter", instructions="Write reports.", model=model)
    runner = VerifiedRunner(Verifier(make_config(verifyAll=True), judge=judge))
    result = await runner.run(agent, "Write the weekly report.")
    assert (result.outcome.status, result.final_output, result.response) == (
        Status.PASSED,
        GOOD,
        GOOD,
    )
    retry = chat_messages(provider.seen[1])
    assert ("assistant", BAD) in retry and any(FEEDBACK in text for _, text in retry[-1:])
    assert result.to_input_list()[-1]["content"][0]["text"] == GOOD  # type: ignore[index]
    assert "Write reports." in judge.calls[0].user
    judge.assert_exhausted()


async def test_runner_with_a_session_sends_the_feedback_alone_on_retry(
    make_config: Any, model: OpenAIChatCompletionsModel, provider: ProviderServer
) -> None:
    judge = ScriptedJudge([FAIL, "PASS"])
    runner = VerifiedRunner(Verifier(make_config(verifyAll=True), judge=judge))
    session = SQLiteSession("support-chat")
    try:
        result = await runner.run(
            Agent(name="a", model=model), "Write the weekly report.", session=session
        )
        stored = await session.get_items()
    finally:
        session.close()
    assert result.final_output == GOOD
    retry = chat_messages(provider.seen[1])
    assert [role for role, _ in retry] == ["user", "assistant", "user"]
    assert retry[1] == ("assistant", BAD) and FEEDBACK in retry[2][1]
    assert len(stored) == 4


async def test_runner_shows_the_judge_the_earlier_input(
    make_config: Any, model: OpenAIChatCompletionsModel
) -> None:
    judge = ScriptedJudge(["PASS"])
    runner = VerifiedRunner(Verifier(make_config(verifyAll=True), judge=judge))
    history: list[Any] = [
        {"role": "user", "content": "Use the metric system."},
        {"role": "assistant", "content": "Noted."},
        {"role": "user", "content": "How far is the moon?"},
    ]
    result = await runner.run(Agent(name="a", model=model), history)
    prompt = judge.calls[0].user
    assert result.outcome.status == Status.PASSED
    assert "Use the metric system." in prompt and "How far is the moon?" in prompt


async def test_runner_records_the_tools_the_agent_called(
    make_config: Any, model: OpenAIChatCompletionsModel, provider: ProviderServer
) -> None:
    @function_tool
    def send_report(title: str) -> str:
        """Send the report."""
        return f"sent {title}"

    call = {"id": "call_1", "type": "function", "function": {"name": "send_report"}}
    call["function"]["arguments"] = json.dumps({"title": "weekly"})  # type: ignore[index]
    body = {
        "id": "chatcmpl-tool",
        "object": "chat.completion",
        "created": 0,
        "model": "gpt-4o",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": None, "tool_calls": [call]},
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }
    provider.push(Step(body=json.dumps(body).encode()), Step(text="I sent the weekly report."))
    judge = ScriptedJudge(["PASS"])
    agent = Agent(name="a", model=model, tools=[send_report])
    result = await VerifiedRunner(Verifier(make_config(verifyAll=True), judge=judge)).run(
        agent, "Send the weekly report."
    )
    ledger = result.outcome.attempts[0].reply.meta.tool_calls
    assert [(c.name, c.succeeded, c.result) for c in ledger] == [
        ("send_report", True, "sent weekly")
    ]
    assert chat_messages(provider.seen[1])[-1] == ("tool", "sent weekly")


async def test_runner_keeps_the_reply_when_the_judge_breaks(
    make_config: Any, model: OpenAIChatCompletionsModel
) -> None:
    judge = ScriptedJudge([RuntimeError("judge down")])
    runner = VerifiedRunner(Verifier(make_config(verifyAll=True), judge=judge))
    result = await runner.run(Agent(name="a", model=model), "Write the weekly report.")
    assert (result.outcome.status, result.final_output) == (Status.FAILED_OPEN, BAD)


async def test_runner_refuses_an_agent_carrying_the_guardrail(
    make_config: Any, model: OpenAIChatCompletionsModel, provider: ProviderServer
) -> None:
    judge = ScriptedJudge([FAIL, "PASS"])
    verifier = Verifier(make_config(verifyAll=True), judge=judge)
    guarded = Agent(
        name="support", model=model, output_guardrails=[judge_output_guardrail(verifier)]
    )
    triage = Agent(name="triage", model=model, handoffs=[guarded])
    runner = VerifiedRunner(verifier)
    with pytest.raises(ValueError, match="agent 'support' carries judge_output_guardrail"):
        await runner.run(guarded, "Write the weekly report.")
    with pytest.raises(ValueError, match="agent 'support' carries judge_output_guardrail"):
        runner.run_sync(triage, "Write the weekly report.")
    config = RunConfig(output_guardrails=[judge_output_guardrail(verifier)])
    with pytest.raises(ValueError, match="run_config carries judge_output_guardrail"):
        await runner.run(
            Agent(name="a", model=model), "Write the weekly report.", run_config=config
        )
    assert provider.seen == [] and judge.calls == []


def test_runner_run_sync(make_config: Any, provider: ProviderServer) -> None:
    provider.respond_with(answer)
    judge = ScriptedJudge([FAIL, "PASS"])
    verifier = Verifier(make_config(verifyAll=True), judge=judge)
    # The client lives on the verifier's run_sync loop: it keeps no connection open after a
    # request, so none outlives that loop.
    http = httpx.AsyncClient(limits=httpx.Limits(max_keepalive_connections=0))
    client = AsyncOpenAI(base_url=provider.url, api_key=API_KEY, max_retries=0, http_client=http)
    agent = Agent(name="a", model=OpenAIChatCompletionsModel("gpt-4o", client))
    try:
        result = VerifiedRunner(verifier).run_sync(agent, "Write the weekly report.")
    finally:
        verifier.close()
    assert (result.outcome.status, result.final_output) == (Status.PASSED, GOOD)


# -- the output guardrail ------------------------------------------------------------------------


async def test_guardrail_trips_on_a_fail_with_the_verdict_as_output_info(
    make_config: Any, model: OpenAIChatCompletionsModel
) -> None:
    judge = ScriptedJudge([FAIL])
    guardrail = judge_output_guardrail(Verifier(make_config(), judge=judge))
    agent = Agent(name="a", model=model, output_guardrails=[guardrail])
    with pytest.raises(OutputGuardrailTripwireTriggered) as tripped:
        await Runner.run(agent, "Write the weekly report.")
    verdict = tripped.value.guardrail_result.output.output_info
    assert isinstance(verdict, Verdict)
    assert (verdict.passed, verdict.category, verdict.feedback) == (
        False,
        FailCategory.INCOMPLETE,
        FEEDBACK,
    )


async def test_guardrail_lets_a_pass_through(
    make_config: Any, model: OpenAIChatCompletionsModel
) -> None:
    judge = ScriptedJudge(["PASS"])
    guardrail = judge_output_guardrail(Verifier(make_config(), judge=judge), rules=["Be brief."])
    agent = Agent(name="a", instructions="Date every report.", model=model)
    agent.output_guardrails = [guardrail]
    result = await Runner.run(agent, "Write the weekly report.")
    info = result.output_guardrail_results[0].output.output_info
    assert (result.final_output, info.passed) == (BAD, True)
    prompt = judge.calls[0].user
    assert "Date every report." in prompt and "Be brief." in prompt and BAD in prompt


@pytest.mark.parametrize(
    ("keys", "fields"),
    [
        ({"mode": "shadow"}, {}),
        ({"runKinds": {"trial": {"mode": "shadow"}}}, {"run_kind": "trial"}),
    ],
    ids=["config", "run-kind"],
)
async def test_guardrail_in_shadow_mode_reports_a_fail_without_tripping(
    make_config: Any,
    model: OpenAIChatCompletionsModel,
    keys: dict[str, Any],
    fields: dict[str, Any],
) -> None:
    verifier = Verifier(make_config(**keys), judge=ScriptedJudge([FAIL]))
    guardrail = judge_output_guardrail(verifier, **fields)
    agent = Agent(name="a", model=model, output_guardrails=[guardrail])
    result = await Runner.run(agent, "Write the weekly report.")
    info = result.output_guardrail_results[0].output
    assert (result.final_output, info.tripwire_triggered) == (BAD, False)
    assert (info.output_info.passed, info.output_info.feedback) == (False, FEEDBACK)


async def test_guardrail_shows_the_judge_the_tool_calls_after_the_last_user_message(
    make_config: Any, model: OpenAIChatCompletionsModel
) -> None:
    judge = ScriptedJudge(["PASS"])
    guardrail = judge_output_guardrail(Verifier(make_config(), judge=judge))
    agent = Agent(name="a", model=model, output_guardrails=[guardrail])
    arguments = json.dumps({"title": "weekly"})
    items: list[Any] = [
        {"role": "user", "content": "Send the weekly report."},
        {"type": "function_call", "call_id": "c1", "name": "send_report", "arguments": arguments},
        {"type": "function_call_output", "call_id": "c1", "output": "sent weekly"},
    ]
    await Runner.run(agent, items)
    prompt = judge.calls[0].user
    assert "tool calls this turn (1):" in prompt
    assert "send_report(" in prompt and ") succeeded" in prompt
    assert "succeeded]\nsent weekly" in prompt  # the output is the judge's evidence


async def test_guardrail_fails_open_when_the_judge_breaks(
    make_config: Any, model: OpenAIChatCompletionsModel
) -> None:
    judge = ScriptedJudge([RuntimeError("judge down")])
    guardrail = judge_output_guardrail(Verifier(make_config(), judge=judge))
    agent = Agent(name="a", model=model, output_guardrails=[guardrail])
    result = await Runner.run(agent, "Write the weekly report.")
    info = result.output_guardrail_results[0].output
    assert (result.final_output, info.tripwire_triggered) == (BAD, False)
    assert info.output_info.fail_open_reason == Reason.JUDGE_ERROR


async def test_guardrail_judges_nothing_when_the_config_is_disabled(
    make_config: Any, model: OpenAIChatCompletionsModel
) -> None:
    judge = ScriptedJudge([])
    guardrail = judge_output_guardrail(Verifier(make_config(enabled=False), judge=judge))
    agent = Agent(name="a", model=model, output_guardrails=[guardrail])
    result = await Runner.run(agent, "Write the weekly report.")
    assert result.output_guardrail_results[0].output.output_info is None
    judge.assert_exhausted()
