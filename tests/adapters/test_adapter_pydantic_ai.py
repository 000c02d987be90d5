"""The pydantic-ai adapter, driven by pydantic-ai's own offline models and the scripted judge."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
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
from pydantic_ai.models.test import TestModel

from replyguard import Status, Verifier
from replyguard.adapters.pydantic_ai import (
    VerifiedAgent,
    judge_output_validator,
    openai_messages,
    tool_ledger,
)
from replyguard.context import JudgePrompt
from replyguard.testing import ScriptedJudge

BAD = "Done: the report."
GOOD = "Done: the report, dated 2026-01-02."
FAIL = "FAIL [incomplete]: Add the report's date."


def request_texts(messages: list[ModelMessage]) -> list[str]:
    """Every text the model was sent, in order."""
    return [
        str(part.content)
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(getattr(part, "content", None), str)
    ]


def history_of(prompt: JudgePrompt) -> str | None:
    """The conversation history the judge was shown, or None when it was shown none."""
    opening, closing = (
        f"<conversation_history-{prompt.nonce}>",
        f"</conversation_history-{prompt.nonce}>",
    )
    if opening not in prompt.user:
        return None
    return prompt.user.split(opening, 1)[1].split(closing, 1)[0]


class Answerer:
    """A FunctionModel body: BAD first, GOOD once the judge's feedback reached the model."""

    def __init__(self) -> None:
        self.seen: list[list[str]] = []
        # FunctionModel names its model after the function (pydantic-ai 2.0 reads __name__).
        self.__name__ = "answerer"

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        texts = request_texts(messages)
        self.seen.append(texts)
        improved = any("Add the report's date." in text for text in texts)
        return ModelResponse(parts=[TextPart(GOOD if improved else BAD)])


def validated_agent(verifier: Verifier, answerer: Answerer, retries: int = 2) -> Agent[None, str]:
    agent = Agent(FunctionModel(answerer), retries=retries)
    agent.output_validator(judge_output_validator(verifier))
    return agent


# -- the output validator: pydantic-ai's own retry path ---------------------------------------


async def test_validator_feeds_the_feedback_back_and_delivers_the_retry(make_config: Any) -> None:
    judge, answerer = ScriptedJudge([FAIL, "PASS"]), Answerer()
    agent = validated_agent(Verifier(make_config(), judge=judge), answerer)
    result = await agent.run("Write the weekly report.")
    assert result.output == GOOD
    assert len(answerer.seen) == 2
    assert any("Add the report's date." in text for text in answerer.seen[1])
    assert "Write the weekly report." in judge.calls[1].user and GOOD in judge.calls[1].user
    judge.assert_exhausted()


async def test_validator_delivers_the_output_when_the_agents_retries_run_out(
    make_config: Any,
) -> None:
    judge = ScriptedJudge([FAIL, "FAIL [incomplete]: Still no date."])
    agent = validated_agent(Verifier(make_config(), judge=judge), Answerer(), retries=1)
    result = await agent.run("Write the weekly report.")
    assert result.output == GOOD
    judge.assert_exhausted()


async def test_validator_fails_open_when_the_judge_breaks(make_config: Any) -> None:
    judge, answerer = ScriptedJudge([RuntimeError("judge down")]), Answerer()
    agent = validated_agent(Verifier(make_config(), judge=judge), answerer)
    result = await agent.run("Write the weekly report.")
    assert (result.output, len(answerer.seen)) == (BAD, 1)
    judge.assert_exhausted()


async def test_validator_judges_nothing_when_the_config_is_disabled(make_config: Any) -> None:
    judge = ScriptedJudge([])
    agent = validated_agent(Verifier(make_config(enabled=False), judge=judge), Answerer())
    assert (await agent.run("Write the weekly report.")).output == BAD
    judge.assert_exhausted()


async def test_validator_in_shadow_mode_only_logs_a_fail(
    make_config: Any, replyguard_logs: pytest.LogCaptureFixture
) -> None:
    judge, answerer = ScriptedJudge([FAIL]), Answerer()
    agent = validated_agent(Verifier(make_config(mode="shadow"), judge=judge), answerer)
    assert ((await agent.run("Write the weekly report.")).output, len(answerer.seen)) == (BAD, 1)
    assert any(r.getMessage().startswith("flagged") for r in replyguard_logs.records)


async def test_validator_follows_the_mode_of_the_turns_run_kind(
    make_config: Any, replyguard_logs: pytest.LogCaptureFixture
) -> None:
    config = make_config(runKinds={"trial": {"mode": "shadow"}})
    judge, answerer = ScriptedJudge([FAIL]), Answerer()
    agent = Agent(FunctionModel(answerer), retries=2)
    agent.output_validator(judge_output_validator(Verifier(config, judge=judge), run_kind="trial"))
    assert ((await agent.run("Write the weekly report.")).output, len(answerer.seen)) == (BAD, 1)
    assert any(r.getMessage().startswith("flagged") for r in replyguard_logs.records)
    judge.assert_exhausted()


async def test_validator_enforces_for_a_run_kind_the_config_does_not_name(
    make_config: Any, replyguard_logs: pytest.LogCaptureFixture
) -> None:
    config = make_config(runKinds={"trial": {"mode": "shadow"}})
    judge, answerer = ScriptedJudge([FAIL, "PASS"]), Answerer()
    agent = Agent(FunctionModel(answerer), retries=2)
    agent.output_validator(judge_output_validator(Verifier(config, judge=judge), run_kind="cron"))
    assert ((await agent.run("Write the weekly report.")).output, len(answerer.seen)) == (GOOD, 2)
    assert any(r.getMessage().startswith("run_kind_unknown") for r in replyguard_logs.records)


async def test_validator_judges_only_the_final_output_of_a_stream(make_config: Any) -> None:
    judge = ScriptedJudge(["PASS"])
    agent = Agent(TestModel(custom_output_text=GOOD))
    agent.output_validator(judge_output_validator(Verifier(make_config(), judge=judge)))
    async with agent.run_stream("Write the weekly report.") as streamed:
        outputs = [output async for output in streamed.stream_output(debounce_by=None)]
    assert len(outputs) > 2 and outputs[-1] == GOOD
    judge.assert_exhausted()


async def test_validator_shows_the_judge_the_earlier_conversation(make_config: Any) -> None:
    judge = ScriptedJudge(["PASS", "PASS"])
    agent = Agent(TestModel(custom_output_text="Sure."))
    agent.output_validator(judge_output_validator(Verifier(make_config(), judge=judge)))
    first = await agent.run("My name is Ada.")
    await agent.run("What is my name?", message_history=first.all_messages())
    assert history_of(judge.calls[0]) is None
    assert "My name is Ada." in (history_of(judge.calls[1]) or "")


def test_validator_refuses_an_unknown_turn_field(make_config: Any) -> None:
    with pytest.raises(ValueError, match="rulez"):
        judge_output_validator(Verifier(make_config(), judge=ScriptedJudge([])), rulez=["x"])


# -- VerifiedAgent: Verifier.run around Agent.run ----------------------------------------------


async def test_verified_agent_retries_with_the_feedback_as_the_next_prompt(
    make_config: Any,
) -> None:
    judge, answerer = ScriptedJudge([FAIL, "PASS"]), Answerer()
    verified = VerifiedAgent(
        Agent(FunctionModel(answerer)),
        Verifier(make_config(verifyAll=True), judge=judge),
        rules=["Always date reports."],
    )
    result = await verified.run("Write the weekly report.")
    assert (result.outcome.status, result.output, result.response) == (Status.PASSED, GOOD, GOOD)
    assert any("Add the report's date." in text for text in answerer.seen[1])
    assert [m.kind for m in result.new_messages()] == ["request", "response"] * 2
    assert "Always date reports." in judge.calls[0].user
    judge.assert_exhausted()


async def test_verified_agent_continues_a_conversation(make_config: Any) -> None:
    judge = ScriptedJudge(["PASS"])
    model = TestModel(custom_output_text="Done: noted.")
    verified = VerifiedAgent(Agent(model), Verifier(make_config(verifyAll=True), judge=judge))
    earlier = (await Agent(model).run("Remember the number 7.")).all_messages()
    result = await verified.run("Which number?", message_history=earlier)
    assert result.all_messages()[: len(earlier)] == earlier
    assert len(result.new_messages()) == 2
    assert "Remember the number 7." in (history_of(judge.calls[0]) or "")


async def test_verified_agent_delivers_untouched_when_nothing_triggers(make_config: Any) -> None:
    judge = ScriptedJudge([])
    verified = VerifiedAgent(
        Agent(TestModel(custom_output_text="Hi! How can I help?")),
        Verifier(make_config(), judge=judge),
    )
    result = await verified.run("Hello there.")
    assert (result.outcome.status, result.output) == (Status.NOT_TRIGGERED, "Hi! How can I help?")
    judge.assert_exhausted()


def test_verified_agent_run_sync(make_config: Any) -> None:
    judge, answerer = ScriptedJudge([FAIL, "PASS"]), Answerer()
    verifier = Verifier(make_config(verifyAll=True), judge=judge)
    try:
        result = VerifiedAgent(Agent(FunctionModel(answerer)), verifier).run_sync("Report, please.")
    finally:
        verifier.close()
    assert (result.outcome.status, result.output, len(answerer.seen)) == (Status.PASSED, GOOD, 2)


async def test_verified_agent_keeps_the_reply_when_the_retry_breaks(make_config: Any) -> None:
    calls: list[int] = []

    def flaky(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        calls.append(1)
        if len(calls) > 1:
            raise RuntimeError("model went away")
        return ModelResponse(parts=[TextPart(BAD)])

    verified = VerifiedAgent(
        Agent(FunctionModel(flaky)),
        Verifier(make_config(verifyAll=True), judge=ScriptedJudge([FAIL])),
    )
    result = await verified.run("Write the weekly report.")
    assert (result.outcome.status, result.output) == (Status.FAILED_OPEN, BAD)


# -- messages and imports ----------------------------------------------------------------------


async def test_messages_convert_to_openai_style_with_tool_calls() -> None:
    agent = Agent(TestModel(custom_output_text="It is sunny."))

    @agent.tool_plain
    def weather(city: str) -> str:
        return f"sunny in {city}"

    messages = openai_messages((await agent.run("Weather?")).all_messages())
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert messages[1]["tool_calls"][0]["function"]["name"] == "weather"
    assert "sunny in" in messages[2]["content"] and messages[3]["content"] == "It is sunny."


async def test_messages_convert_the_retry_feedback_to_a_user_message(make_config: Any) -> None:
    judge = ScriptedJudge([FAIL, "PASS"])
    result = await validated_agent(Verifier(make_config(), judge=judge), Answerer()).run("Report?")
    messages = openai_messages(result.all_messages())
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant"]
    assert "Add the report's date." in messages[2]["content"] and messages[3]["content"] == GOOD


def test_tool_ledger_marks_a_call_succeeded_only_when_a_successful_return_answered_it() -> None:
    calls = ModelResponse(
        parts=[
            ToolCallPart("send_report", {"title": "weekly"}, tool_call_id="c1"),
            ToolCallPart("send_invite", {"to": "ada"}, tool_call_id="c2"),
            ToolCallPart("book_room", {"room": "4"}, tool_call_id="c3"),
        ]
    )
    returns = ModelRequest(
        parts=[
            ToolReturnPart("send_report", "sent", tool_call_id="c1"),
            ToolReturnPart("send_invite", "mail server down", tool_call_id="c2", outcome="failed"),
        ]
    )
    ledger = tool_ledger([ModelRequest.user_text_prompt("Go."), calls, returns])
    assert [(c.name, c.arguments, c.succeeded, c.result) for c in ledger] == [
        ("send_report", {"title": "weekly"}, True, "sent"),
        ("send_invite", {"to": "ada"}, False, "mail server down"),
        ("book_room", {"room": "4"}, False, None),
    ]


async def test_verified_agent_records_the_tools_the_run_called(make_config: Any) -> None:
    judge = ScriptedJudge(["PASS"])
    agent = Agent(TestModel(custom_output_text="I sent the weekly report."))

    @agent.tool_plain
    def send_report(title: str) -> str:
        return f"sent {title}"

    verifier = Verifier(make_config(verifyAll=True), judge=judge)
    result = await VerifiedAgent(agent, verifier).run("Send the weekly report.")
    ledger = result.outcome.attempts[0].reply.meta.tool_calls
    assert [(c.name, c.succeeded, c.result) for c in ledger] == [("send_report", True, "sent a")]
    assert "send_report" in judge.calls[0].user
    assert "succeeded]\nsent a" in judge.calls[0].user  # the return is the judge's evidence


IMPORT_CHECK = """
import sys
import replyguard, replyguard.adapters
print("loaded" if "{framework}" in sys.modules else "light")
sys.modules["{framework}"] = None
try:
    import replyguard.adapters.{module}
except ImportError as exc:
    print(exc)
"""


@pytest.mark.parametrize(
    ("framework", "module", "extra"),
    [
        ("pydantic_ai", "pydantic_ai", "pydantic-ai"),
        ("agents", "openai_agents", "openai-agents"),
        ("langchain_core", "langchain", "langchain"),
    ],
)
def test_an_adapter_names_its_extra_and_the_core_does_not_load_its_framework(
    framework: str, module: str, extra: str
) -> None:
    code = IMPORT_CHECK.format(framework=framework, module=module)
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    lines = done.stdout.splitlines()
    assert lines[0] == "light", done.stderr
    assert f"pip install 'replyguard[{extra}]'" in lines[1], done.stderr
