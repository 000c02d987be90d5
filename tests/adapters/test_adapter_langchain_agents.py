"""The LangChain 1.x agent middleware, driven by langchain-core's fake chat models, a real
``create_agent`` graph, and the scripted judge."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import Field

from replyguard import Verifier
from replyguard.adapters.langchain_agents import FEEDBACK_ID_PREFIX, ReplyguardMiddleware
from replyguard.errors import VerificationExhausted
from replyguard.testing import ScriptedJudge

BAD = "Done: the report."
GOOD = "Done: the report, dated 2026-01-02."
FEEDBACK = "Add the report's date."
FAIL = f"FAIL [incomplete]: {FEEDBACK}"
ASK = "Write the weekly report."


class ToolingFakeModel(GenericFakeChatModel):
    """langchain-core's scripted chat model, accepting tools (the scripted replies call them)."""

    seen: list[list[BaseMessage]] = Field(default_factory=list)

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.seen.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


def fake_model(*replies: AIMessage | str) -> ToolingFakeModel:
    return ToolingFakeModel(messages=iter(replies))


def agent_for(
    model: ToolingFakeModel, verifier: Verifier, tools: Sequence[BaseTool] = (), **fields: Any
) -> Any:
    middleware = ReplyguardMiddleware(verifier, **fields)
    return create_agent(model, tools=list(tools), middleware=[middleware])


def outcome_of(state: dict[str, Any]) -> dict[str, Any]:
    return dict(state["messages"][-1].response_metadata["replyguard"])


async def test_a_fail_jumps_back_to_the_model_with_the_feedback(make_config: Any) -> None:
    judge, model = ScriptedJudge([FAIL, "PASS"]), fake_model(BAD, GOOD)
    agent = agent_for(model, Verifier(make_config(), judge=judge))
    state = await agent.ainvoke({"messages": [HumanMessage(ASK)]})
    messages = state["messages"]
    assert [type(m) for m in messages] == [HumanMessage, AIMessage, HumanMessage, AIMessage]
    assert (messages[1].text, messages[3].text) == (BAD, GOOD)
    assert FEEDBACK in messages[2].text and messages[2].id.startswith(FEEDBACK_ID_PREFIX)
    assert [m.text for m in model.seen[1]] == [ASK, BAD, messages[2].text]  # the retry's input
    judge.assert_exhausted()


async def test_the_final_message_carries_the_outcome_as_json(make_config: Any) -> None:
    judge = ScriptedJudge([FAIL, "PASS"], cost_usd=0.01)
    agent = agent_for(fake_model(BAD, GOOD), Verifier(make_config(), judge=judge))
    state = await agent.ainvoke({"messages": [HumanMessage(ASK)]})
    outcome = outcome_of(state)
    assert json.loads(json.dumps(outcome)) == outcome
    assert (outcome["status"], outcome["response"], outcome["judge_cost_usd"]) == (
        "passed",
        GOOD,
        0.02,
    )
    assert [a["reply"]["text"] for a in outcome["attempts"]] == [BAD, GOOD]
    assert outcome["attempts"][0]["verdict"]["feedback"] == FEEDBACK
    assert "replyguard" not in state["messages"][1].response_metadata  # only the final one


async def test_the_judge_sees_the_user_message_not_the_feedback(make_config: Any) -> None:
    judge = ScriptedJudge([FAIL, "PASS"])
    agent = agent_for(
        fake_model(BAD, GOOD), Verifier(make_config(), judge=judge), rules=["Use ISO dates."]
    )
    history = [HumanMessage("Our team is Atlas."), AIMessage("Noted.")]
    await agent.ainvoke({"messages": [*history, HumanMessage(ASK)]})
    retry_prompt = judge.calls[1].user
    assert ASK in retry_prompt and "Our team is Atlas." in retry_prompt
    assert "Use ISO dates." in retry_prompt and GOOD in retry_prompt


async def test_attempts_run_out_at_max_attempts_and_the_last_reply_is_delivered(
    make_config: Any,
) -> None:
    owner = "FAIL [incomplete]: Name the report's owner."
    judge = ScriptedJudge([FAIL, owner])
    model = fake_model("Draft one.", "Draft two.", "never asked for")
    state = await agent_for(model, Verifier(make_config(maxAttempts=2), judge=judge)).ainvoke(
        {"messages": [HumanMessage(ASK)]}
    )
    outcome = outcome_of(state)
    assert (state["messages"][-1].text, outcome["status"]) == ("Draft two.", "exhausted")
    assert len(outcome["attempts"]) == 2 and len(model.seen) == 2


async def test_an_exhausted_turn_delivers_what_the_deliver_policy_picks(make_config: Any) -> None:
    judge = ScriptedJudge([FAIL, "FAIL [incomplete]: Name the owner."])
    verifier = Verifier(make_config(maxAttempts=2, deliver="first"), judge=judge)
    state = await agent_for(fake_model("Draft one.", "Draft two."), verifier).ainvoke(
        {"messages": [HumanMessage(ASK)]}
    )
    assert state["messages"][-1].text == "Draft one."
    assert outcome_of(state)["response"] == "Draft one."


async def test_the_same_fail_twice_stops_as_stagnant(make_config: Any) -> None:
    judge = ScriptedJudge([FAIL, FAIL])
    state = await agent_for(
        fake_model("Draft one.", "Draft two."), Verifier(make_config(maxAttempts=5), judge=judge)
    ).ainvoke({"messages": [HumanMessage(ASK)]})
    outcome = outcome_of(state)
    assert (outcome["status"], outcome["reason"]) == ("exhausted", "stagnant")


async def test_a_broken_judge_fails_open_with_the_reply_as_it_is(make_config: Any) -> None:
    judge, model = ScriptedJudge([RuntimeError("judge down")]), fake_model(BAD)
    state = await agent_for(model, Verifier(make_config(), judge=judge)).ainvoke(
        {"messages": [HumanMessage(ASK)]}
    )
    outcome = outcome_of(state)
    assert (state["messages"][-1].text, outcome["status"]) == (BAD, "failed_open")
    assert outcome["reason"] == "judge_error" and len(model.seen) == 1


async def test_shadow_mode_flags_a_fail_and_delivers_it(make_config: Any) -> None:
    judge, model = ScriptedJudge([FAIL]), fake_model(BAD)
    state = await agent_for(model, Verifier(make_config(mode="shadow"), judge=judge)).ainvoke(
        {"messages": [HumanMessage(ASK)]}
    )
    assert (state["messages"][-1].text, outcome_of(state)["status"]) == (BAD, "flagged")
    assert len(model.seen) == 1


async def test_on_exhausted_raise_raises_from_the_agent(make_config: Any) -> None:
    judge = ScriptedJudge([FAIL])
    verifier = Verifier(make_config(maxAttempts=1, onExhausted="raise"), judge=judge)
    with pytest.raises(VerificationExhausted):
        await agent_for(fake_model(BAD), verifier).ainvoke({"messages": [HumanMessage(ASK)]})


async def test_a_disabled_config_judges_nothing_and_says_so(make_config: Any) -> None:
    judge = ScriptedJudge([])
    agent = agent_for(fake_model(BAD), Verifier(make_config(enabled=False), judge=judge))
    state = await agent.ainvoke({"messages": [HumanMessage(ASK)]})
    assert (state["messages"][-1].text, outcome_of(state)["status"]) == (BAD, "disabled")


@tool
def send_report(title: str) -> str:
    """Send the report with this title."""
    return f"sent {title}"


async def test_a_tool_step_is_not_judged_and_the_judge_sees_the_tool_calls_and_results(
    make_config: Any,
) -> None:
    call = {"name": "send_report", "args": {"title": "weekly"}, "id": "call_1"}
    judge = ScriptedJudge(["PASS"])
    model = fake_model(AIMessage("", tool_calls=[call]), "Sent the weekly report.")
    agent = agent_for(model, Verifier(make_config(), judge=judge), tools=[send_report])
    state = await agent.ainvoke({"messages": [HumanMessage("Send the weekly report.")]})
    assert isinstance(state["messages"][2], ToolMessage)
    assert outcome_of(state)["status"] == "passed"
    assert len(judge.calls) == 1 and "send_report" in judge.calls[0].user
    judge.assert_exhausted()
    # The tool message is the call's result in the ledger, and the judge's evidence.
    ledger = outcome_of(state)["attempts"][0]["reply"]["meta"]["tool_calls"]
    assert [(c["name"], c["result"]) for c in ledger] == [("send_report", "sent weekly")]
    prompt = judge.calls[0]
    assert f"<evidence-{prompt.nonce}>\n[tool send_report(" in prompt.user
    assert "succeeded]\nsent weekly" in prompt.user


async def test_each_turn_of_a_thread_starts_its_own_attempts(make_config: Any) -> None:
    judge = ScriptedJudge([FAIL, "PASS", FAIL, "PASS"])
    model = fake_model(BAD, GOOD, "Second draft.", "Second, dated.")
    verifier = Verifier(make_config(maxAttempts=2), judge=judge)
    agent = create_agent(
        model, tools=[], middleware=[ReplyguardMiddleware(verifier)], checkpointer=InMemorySaver()
    )
    thread = {"configurable": {"thread_id": "t1"}}
    await agent.ainvoke({"messages": [HumanMessage(ASK)]}, thread)
    state = await agent.ainvoke({"messages": [HumanMessage("Now the next one.")]}, thread)
    outcome = outcome_of(state)
    assert (outcome["status"], len(outcome["attempts"])) == ("passed", 2)
    assert state["messages"][-1].text == "Second, dated."
    assert "Now the next one." in judge.calls[2].user


def test_a_sync_invoke_judges_on_the_verifiers_loop(make_config: Any) -> None:
    judge = ScriptedJudge([FAIL, "PASS"])
    verifier = Verifier(make_config(), judge=judge)
    try:
        state = agent_for(fake_model(BAD, GOOD), verifier).invoke({"messages": [HumanMessage(ASK)]})
    finally:
        verifier.close()
    assert (state["messages"][-1].text, outcome_of(state)["status"]) == (GOOD, "passed")


async def test_a_sync_invoke_works_while_an_event_loop_runs_in_the_calling_thread(
    make_config: Any,
) -> None:
    judge = ScriptedJudge([FAIL, "PASS"])
    verifier = Verifier(make_config(), judge=judge)
    try:
        state = agent_for(fake_model(BAD, GOOD), verifier).invoke({"messages": [HumanMessage(ASK)]})
    finally:
        await verifier.aclose()
    assert (state["messages"][-1].text, outcome_of(state)["status"]) == (GOOD, "passed")


class FailingRetryModel(ToolingFakeModel):
    """Answers once, then its provider fails."""

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        if self.seen:
            raise RuntimeError("provider down")
        return super()._generate(messages, *args, **kwargs)


@pytest.mark.parametrize("sync", [False, True], ids=["ainvoke", "invoke"])
async def test_a_model_error_on_a_retry_delivers_the_previous_reply(
    make_config: Any, sync: bool
) -> None:
    judge = ScriptedJudge([FAIL])
    model = FailingRetryModel(messages=iter([BAD]))
    agent = agent_for(model, Verifier(make_config(), judge=judge))
    request = {"messages": [HumanMessage(ASK)]}
    state = agent.invoke(request) if sync else await agent.ainvoke(request)
    outcome = outcome_of(state)
    assert (state["messages"][-1].text, outcome["status"], outcome["reason"]) == (
        BAD,
        "failed_open",
        "agent_error",
    )
    assert [a["reply"]["text"] for a in outcome["attempts"]] == [BAD]


async def test_a_model_error_on_the_first_call_is_the_callers(make_config: Any) -> None:
    model = FailingRetryModel(messages=iter([]))
    model.seen.append([])  # as if it had answered: its next call fails
    agent = agent_for(model, Verifier(make_config(), judge=ScriptedJudge([])))
    with pytest.raises(RuntimeError, match="provider down"):
        await agent.ainvoke({"messages": [HumanMessage(ASK)]})


async def test_max_latency_bounds_the_judge_call(make_config: Any) -> None:
    judge = ScriptedJudge(["PASS"], delay=30)
    agent = agent_for(fake_model(BAD), Verifier(make_config(maxLatencyMs=300), judge=judge))
    state = await asyncio.wait_for(agent.ainvoke({"messages": [HumanMessage(ASK)]}), timeout=10)
    outcome = outcome_of(state)
    assert (outcome["status"], outcome["reason"]) == ("failed_open", "latency_budget")
    assert state["messages"][-1].text == BAD
