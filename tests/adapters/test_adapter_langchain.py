"""The LangChain adapter, driven by langchain-core's own fake chat models and the scripted judge."""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models.fake_chat_models import (
    FakeMessagesListChatModel,
    GenericFakeChatModel,
    ParrotFakeChatModel,
)
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.runnables import RunnableLambda

from replyguard import Reason, SkipReason, Status, Verifier
from replyguard.adapters.langchain import VerifiedRunnable
from replyguard.testing import ScriptedJudge

BAD = "Done: the report."
GOOD = "Done: the report, dated 2026-01-02."
FEEDBACK = "Add the report's date."
FAIL = f"FAIL [incomplete]: {FEEDBACK}"


class Recorder:
    """A step in front of the model that keeps every input the model was given."""

    def __init__(self) -> None:
        self.inputs: list[list[BaseMessage]] = []

    def __call__(self, messages: list[BaseMessage]) -> list[BaseMessage]:
        self.inputs.append(list(messages))
        return messages


def model(*replies: AIMessage | str) -> GenericFakeChatModel:
    return GenericFakeChatModel(messages=iter(replies))


async def test_a_fail_appends_the_reply_and_the_feedback_and_retries(make_config: Any) -> None:
    judge, recorder = ScriptedJudge([FAIL, "PASS"]), Recorder()
    chain = RunnableLambda(recorder) | model(BAD, GOOD)
    verified = VerifiedRunnable(chain, Verifier(make_config(verifyAll=True), judge=judge))
    reply = await verified.ainvoke(
        [SystemMessage("Date every report."), HumanMessage("Write the weekly report.")]
    )
    assert isinstance(reply, AIMessage) and reply.content == GOOD
    retry = recorder.inputs[1]
    assert [type(m) for m in retry] == [SystemMessage, HumanMessage, AIMessage, HumanMessage]
    assert retry[2].content == BAD and FEEDBACK in retry[3].text
    assert "Date every report." in judge.calls[0].user
    judge.assert_exhausted()


async def test_each_retry_sees_every_earlier_reply_and_feedback(make_config: Any) -> None:
    owner = "Name the report's owner."
    judge, recorder = ScriptedJudge([FAIL, f"FAIL [incomplete]: {owner}", "PASS"]), Recorder()
    chain = RunnableLambda(recorder) | model("Draft one.", "Draft two.", GOOD)
    verifier = Verifier(make_config(verifyAll=True, maxAttempts=3), judge=judge)
    reply = await VerifiedRunnable(chain, verifier).ainvoke("Write the weekly report.")
    assert isinstance(reply, AIMessage) and reply.content == GOOD
    third = recorder.inputs[2]
    assert [type(m) for m in third] == [HumanMessage, *[AIMessage, HumanMessage] * 2]
    assert (third[1].text, third[3].text) == ("Draft one.", "Draft two.")
    assert FEEDBACK in third[2].text and owner in third[4].text
    assert len(recorder.inputs[1]) == 3
    judge.assert_exhausted()


def test_invoke_works_without_an_event_loop(make_config: Any) -> None:
    judge = ScriptedJudge([FAIL, "PASS"])
    verifier = Verifier(make_config(verifyAll=True), judge=judge)
    chat = FakeMessagesListChatModel(responses=[AIMessage(BAD), AIMessage(GOOD)])
    try:
        reply = VerifiedRunnable(chat, verifier).invoke("Write the weekly report.")
    finally:
        verifier.close()
    assert isinstance(reply, AIMessage) and reply.content == GOOD
    judge.assert_exhausted()


def test_batch_comes_from_the_base_class(make_config: Any) -> None:
    judge = ScriptedJudge(["PASS", "PASS"])
    verifier = Verifier(make_config(verifyAll=True), judge=judge)
    try:
        replies = VerifiedRunnable(ParrotFakeChatModel(), verifier).batch(["Done: a", "Done: b"])
    finally:
        verifier.close()
    assert sorted(r.text for r in replies if isinstance(r, BaseMessage)) == ["Done: a", "Done: b"]
    judge.assert_exhausted()


async def test_a_chain_ending_in_a_string_delivers_a_string(make_config: Any) -> None:
    judge = ScriptedJudge([FAIL, "PASS"])
    chain = model(BAD, GOOD) | StrOutputParser()
    verified = VerifiedRunnable(chain, Verifier(make_config(verifyAll=True), judge=judge))
    assert await verified.ainvoke("Write the weekly report.") == GOOD


async def test_the_reply_is_kept_when_the_judge_breaks(make_config: Any) -> None:
    judge = ScriptedJudge([RuntimeError("judge down")])
    verified = VerifiedRunnable(model(BAD), Verifier(make_config(verifyAll=True), judge=judge))
    reply = await verified.ainvoke("Write the weekly report.")
    assert isinstance(reply, AIMessage) and reply.content == BAD


async def test_a_tool_call_step_is_delivered_unjudged(make_config: Any) -> None:
    call = {"name": "send_report", "args": {"title": "weekly"}, "id": "call_1"}
    step = AIMessage(content="", tool_calls=[call])
    judge = ScriptedJudge([])
    outcomes: list[Any] = []

    async def on_skip(turn: Any, outcome: Any) -> None:
        outcomes.append(outcome)

    verifier = Verifier(make_config(verifyAll=True), judge=judge, on_skip=on_skip)
    reply = await VerifiedRunnable(model(step), verifier).ainvoke("Send the weekly report.")
    assert isinstance(reply, AIMessage) and reply.tool_calls[0]["name"] == "send_report"
    assert (outcomes[0].status, outcomes[0].skip_reason) == (Status.SKIPPED, SkipReason.TOOL_CALLS)


async def test_the_judge_sees_the_earlier_messages_and_the_rules(make_config: Any) -> None:
    judge = ScriptedJudge(["PASS"])
    verifier = Verifier(make_config(verifyAll=True), judge=judge)
    verified = VerifiedRunnable(model(GOOD), verifier, rules=["Use ISO dates."])
    await verified.ainvoke(
        [
            HumanMessage("Our team is Atlas."),
            AIMessage("Noted."),
            HumanMessage("Write the weekly report."),
        ]
    )
    prompt = judge.calls[0].user
    assert "Our team is Atlas." in prompt and "Use ISO dates." in prompt and GOOD in prompt


async def test_a_retry_failure_fails_open_with_the_first_reply(make_config: Any) -> None:
    judge, outcomes = ScriptedJudge([FAIL]), []

    async def on_fail_open(turn: Any, outcome: Any) -> None:
        outcomes.append(outcome)

    verifier = Verifier(make_config(verifyAll=True), judge=judge, on_fail_open=on_fail_open)
    answered: list[int] = []

    def answer(messages: list[BaseMessage]) -> AIMessage:
        if answered:
            raise RuntimeError("model went away")
        answered.append(1)
        return AIMessage(BAD)

    chain = RunnableLambda(answer)
    reply = await VerifiedRunnable(chain, verifier).ainvoke("Write the weekly report.")
    assert isinstance(reply, AIMessage) and reply.content == BAD
    assert (outcomes[0].status, outcomes[0].reason) == (Status.FAILED_OPEN, Reason.AGENT_ERROR)


async def test_a_runnable_answering_something_else_is_the_callers_error(
    make_config: Any,
) -> None:
    verifier = Verifier(make_config(verifyAll=True), judge=ScriptedJudge([]))
    verified = VerifiedRunnable(RunnableLambda(lambda _: {"answer": 42}), verifier)
    with pytest.raises(TypeError, match="must return a message or a str, not dict"):
        await verified.ainvoke("Write the weekly report.")


class ChainNames(BaseCallbackHandler):
    def __init__(self) -> None:
        self.started: list[str] = []

    def on_chat_model_start(self, serialized: Any, messages: Any, **kwargs: Any) -> None:
        self.started.append("chat_model")

    def on_chain_start(self, serialized: Any, inputs: Any, **kwargs: Any) -> None:
        self.started.append(str(kwargs.get("name")))


async def test_callbacks_see_one_chain_run_with_each_attempt_inside(make_config: Any) -> None:
    handler = ChainNames()
    verifier = Verifier(make_config(verifyAll=True), judge=ScriptedJudge([FAIL, "PASS"]))
    verified = VerifiedRunnable(model(BAD, GOOD), verifier)
    await verified.ainvoke("Write the weekly report.", {"callbacks": [handler]})
    assert handler.started == ["VerifiedRunnable", "chat_model", "chat_model"]


async def test_the_delivered_message_carries_the_outcome_as_json(make_config: Any) -> None:
    judge = ScriptedJudge([FAIL, "PASS"])
    verified = VerifiedRunnable(
        model(BAD, GOOD), Verifier(make_config(verifyAll=True), judge=judge)
    )
    reply = await verified.ainvoke("Write the weekly report.")
    assert isinstance(reply, AIMessage) and reply.content == GOOD
    outcome = reply.response_metadata["replyguard"]
    assert json.loads(json.dumps(outcome)) == outcome  # JSON-safe as it is
    assert (outcome["status"], outcome["response"]) == ("passed", GOOD)
    assert [a["verdict"]["passed"] for a in outcome["attempts"]] == [False, True]
    assert outcome["attempts"][0]["verdict"]["feedback"] == FEEDBACK


def test_a_sync_invoke_also_carries_the_outcome(make_config: Any) -> None:
    verifier = Verifier(make_config(verifyAll=True), judge=ScriptedJudge(["PASS"]))
    chat = FakeMessagesListChatModel(responses=[AIMessage(GOOD)])
    try:
        reply = VerifiedRunnable(chat, verifier).invoke("Write the weekly report.")
    finally:
        verifier.close()
    assert isinstance(reply, AIMessage)
    assert reply.response_metadata["replyguard"]["status"] == "passed"


async def test_invoke_works_while_an_event_loop_runs_in_the_calling_thread(
    make_config: Any,
) -> None:
    # As in a Jupyter cell, or sync code called from async code.
    judge = ScriptedJudge([FAIL, "PASS", "PASS"])
    verifier = Verifier(make_config(verifyAll=True), judge=judge)
    chat = FakeMessagesListChatModel(responses=[AIMessage(BAD), AIMessage(GOOD)])
    try:
        reply = VerifiedRunnable(chat, verifier).invoke("Write the weekly report.")
        batch = VerifiedRunnable(ParrotFakeChatModel(), verifier).batch(["Done: a"])
    finally:
        await verifier.aclose()
    assert isinstance(reply, AIMessage) and reply.content == GOOD
    assert [r.text for r in batch if isinstance(r, BaseMessage)] == ["Done: a"]
    judge.assert_exhausted()


async def test_the_inputs_tool_messages_are_the_judges_evidence(make_config: Any) -> None:
    from langchain_core.messages import ToolMessage

    judge = ScriptedJudge(["PASS"])
    verified = VerifiedRunnable(
        model("Invoice INV-2024-0042 is paid."),
        Verifier(make_config(verifyAll=True), judge=judge),
    )
    call = {"name": "find_invoice", "args": {"q": "march"}, "id": "call_9"}
    await verified.ainvoke(
        [
            HumanMessage("Is the March invoice paid?"),
            AIMessage("", tool_calls=[call]),
            ToolMessage('{"id": "INV-2024-0042", "paid": true}', tool_call_id="call_9"),
        ]
    )
    prompt = judge.calls[0]
    evidence = prompt.user.split(f"<evidence-{prompt.nonce}>")[1].split("</evidence")[0]
    assert "[tool call_9]" in evidence and "INV-2024-0042" in evidence
