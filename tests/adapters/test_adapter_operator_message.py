"""``onExhausted``'s operator message reaches the host through every adapter's own result:
the framework's output is the message, not the last attempt's text."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from agents import Agent as AgentsAgent
from agents import OpenAIChatCompletionsModel
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from openai import AsyncOpenAI
from pydantic_ai import Agent
from pydantic_ai.models.test import TestModel

from conftest import API_KEY
from replyguard import Reason, Status, Verifier
from replyguard.adapters.langchain import METADATA_KEY, VerifiedRunnable
from replyguard.adapters.openai_agents import VerifiedRunner
from replyguard.adapters.pydantic_ai import VerifiedAgent
from replyguard.testing import ScriptedJudge
from support.provider_server import ProviderServer, Step

MESSAGE = "I could not complete that; a colleague will follow up."
FAILS = ["FAIL [grounding]: no tool saved it.", "FAIL [grounding]: still nothing saved."]
KEYS = {"verifyAll": True, "maxAttempts": 2, "onExhausted": {"grounding": MESSAGE}}


@pytest.fixture
async def agents_model(provider: ProviderServer) -> AsyncIterator[OpenAIChatCompletionsModel]:
    provider.respond_with(
        lambda seen: Step(text=f"PDF saved to reports/q{len(provider.seen)}.pdf.")
    )
    async with AsyncOpenAI(base_url=provider.url, api_key=API_KEY, max_retries=0) as client:
        yield OpenAIChatCompletionsModel("gpt-4o", client)


async def test_pydantic_ai_verified_agents_output_is_the_message(make_config: Any) -> None:
    verifier = Verifier(make_config(**KEYS), judge=ScriptedJudge(FAILS))
    agent = Agent(TestModel(custom_output_text="PDF saved to reports/q3.pdf."))
    result = await VerifiedAgent(agent, verifier).run("Save the report as PDF.")
    assert (result.outcome.status, result.outcome.reason) == (
        Status.EXHAUSTED,
        Reason.OPERATOR_MESSAGE,
    )
    assert result.output == MESSAGE


async def test_agents_sdk_verified_runners_final_output_is_the_message(
    make_config: Any, agents_model: OpenAIChatCompletionsModel
) -> None:
    verifier = Verifier(make_config(**KEYS), judge=ScriptedJudge(FAILS))
    agent = AgentsAgent(name="a", model=agents_model)
    result = await VerifiedRunner(verifier).run(agent, "Save the report as PDF.")
    assert result.outcome.reason is Reason.OPERATOR_MESSAGE
    assert result.final_output == MESSAGE


async def test_langchain_verified_runnables_message_carries_the_message(make_config: Any) -> None:
    verifier = Verifier(make_config(**KEYS), judge=ScriptedJudge(FAILS))
    model = GenericFakeChatModel(messages=iter(["PDF saved.", "PDF saved again."]))
    reply = await VerifiedRunnable(model, verifier).ainvoke([HumanMessage("Save it as PDF.")])
    assert isinstance(reply, AIMessage) and reply.content == MESSAGE
    assert reply.response_metadata[METADATA_KEY]["reason"] == "operator_message"
