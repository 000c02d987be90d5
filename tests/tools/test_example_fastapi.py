"""The FastAPI chatbot backend of ``examples/fastapi_backend``, driven in-process over ASGI.

The app runs with its lifespan (the verifier is warmed up at startup and closed at shutdown);
the judge is a real litellm call to the loopback provider server; the agent is a plain async
function, or the example's own litellm agent pointed at the same server.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import API_KEY
from replyguard import Verifier, VerifierConfig
from support.example_app import APP_FILE, load_example
from support.provider_server import ANTHROPIC, OPENAI, ProviderServer, Seen, Step

QUESTION = "Plan a three-day trip to Lisbon."
SHORT = "Done: day 1 Alfama, day 2 Belém."
FIXED = "Done: day 1 Alfama, day 2 Belém, day 3 Sintra."
FAIL_ANSWER = "Only two days are planned.\nFAIL [incomplete]: add the third day."


example = load_example()


class TripAgent:
    """Plans two days, and the third once the feedback asks for it; records what it got."""

    def __init__(self) -> None:
        self.calls: list[list[dict[str, Any]]] = []

    async def __call__(self, messages: list[dict[str, Any]]) -> str:
        self.calls.append(messages)
        return FIXED if "third day" in str(messages[-1]["content"]) else SHORT


@pytest.fixture
def judge_config(provider: ProviderServer) -> dict[str, Any]:
    """An Anthropic judge at the loopback server that judges every reply."""
    return {
        "enabled": True,
        "verifyAll": True,
        "model": ANTHROPIC.judge_model,
        "agentModel": ANTHROPIC.agent_model,
        "apiKey": API_KEY,
        "apiBase": provider.url,
        "timeoutSeconds": 5,
    }


def app_with(judge_config: dict[str, Any], agent: Any) -> Any:
    """The example app with a verifier of ``judge_config`` and ``agent``."""
    return example.create_app(
        verifier=Verifier(VerifierConfig.from_dict(judge_config)), agent=agent
    )


@asynccontextmanager
async def running(app: Any) -> AsyncIterator[httpx.AsyncClient]:
    """The app with its lifespan started, and a client that talks to it in-process."""
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://chat.test") as client:
            yield client


async def chat(client: httpx.AsyncClient, conversation: str, message: str) -> dict[str, Any]:
    response = await client.post("/chat", json={"conversationId": conversation, "message": message})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def test_a_failed_reply_is_retried_and_the_fixed_one_delivered(
    provider: ProviderServer, judge_config: dict[str, Any]
) -> None:
    provider.push(Step(text=FAIL_ANSWER), Step(text="PASS"))
    agent = TripAgent()
    app = app_with(judge_config, agent)
    async with running(app) as client:
        body = await chat(client, "c1", QUESTION)
    assert body.pop("costUsd") > 0  # two judge calls, priced from litellm's bundled map
    assert body == {
        "conversationId": "c1",
        "reply": FIXED,
        "status": "passed",
        "reason": None,
        "attempts": 2,
    }
    assert [seen.path for seen in provider.seen] == [ANTHROPIC.path, ANTHROPIC.path]
    assert agent.calls[1][-2:] == [
        {"role": "assistant", "content": SHORT},
        {"role": "user", "content": agent.calls[1][-1]["content"]},
    ]
    assert "incomplete" in agent.calls[1][-1]["content"]


async def test_the_next_turn_of_a_conversation_sees_the_delivered_reply(
    provider: ProviderServer, judge_config: dict[str, Any]
) -> None:
    provider.push(Step(text=FAIL_ANSWER), Step(text="PASS"), Step(text="PASS"))
    agent = TripAgent()
    app = app_with(judge_config, agent)
    async with running(app) as client:
        await chat(client, "c1", QUESTION)
        await chat(client, "c1", "Thanks, that is all.")
    assert agent.calls[2] == [
        {"role": "user", "content": QUESTION},
        {"role": "assistant", "content": FIXED},
        {"role": "user", "content": "Thanks, that is all."},
    ]
    assert QUESTION in provider.seen[2].prompt and FIXED in provider.seen[2].prompt


async def test_a_judge_error_delivers_the_reply_as_failed_open(
    provider: ProviderServer, judge_config: dict[str, Any]
) -> None:
    provider.push(Step(text=None, status=500, body=ANTHROPIC.error(500, "overloaded")))
    agent = TripAgent()
    app = app_with(judge_config, agent)
    async with running(app) as client:
        body = await chat(client, "c1", QUESTION)
    assert (body["reply"], body["status"], body["reason"], body["attempts"]) == (
        SHORT,
        "failed_open",
        "judge_error",
        1,
    )
    assert len(agent.calls) == 1


class Rendezvous:
    """An agent whose calls all wait until ``count`` of them are in flight at once."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.arrived = 0
        self.all_here = asyncio.Event()
        self.calls: list[list[dict[str, Any]]] = []

    async def __call__(self, messages: list[dict[str, Any]]) -> str:
        self.calls.append(messages)
        self.arrived += 1
        if self.arrived == self.count:
            self.all_here.set()
        async with asyncio.timeout(5):  # a backend that serialised requests would stop here
            await self.all_here.wait()
        return f"Done: answer to {messages[-1]['content']}"


async def test_requests_of_different_conversations_run_concurrently(
    provider: ProviderServer, judge_config: dict[str, Any]
) -> None:
    provider.respond_with(lambda seen: Step(text="PASS"))
    agent = Rendezvous(8)
    app = app_with(judge_config, agent)
    async with running(app) as client:
        bodies = await asyncio.gather(*(chat(client, f"c{i}", f"question {i}") for i in range(8)))
    assert [(b["conversationId"], b["reply"], b["status"]) for b in bodies] == [
        (f"c{i}", f"Done: answer to question {i}", "passed") for i in range(8)
    ]
    assert len(provider.seen) == 8


async def test_turns_of_one_conversation_run_one_after_another(
    provider: ProviderServer, judge_config: dict[str, Any]
) -> None:
    provider.respond_with(lambda seen: Step(text="PASS"))
    agent = TripAgent()
    app = app_with(judge_config, agent)
    async with running(app) as client:
        await asyncio.gather(chat(client, "same", "first"), chat(client, "same", "second"))
    first, second = agent.calls
    assert len(first) == 1
    assert second[:2] == [first[0], {"role": "assistant", "content": SHORT}]


def agent_or_judge(seen: Seen) -> Step:
    """The agent speaks OpenAI's format, the judge Anthropic's: answer each its own way."""
    if seen.path == OPENAI.path:
        return Step(text="Done: day 1 Alfama, day 2 Belém, day 3 Sintra.")
    return Step(text="PASS")


async def test_the_litellm_agent_and_a_config_file_work_end_to_end(
    provider: ProviderServer, judge_config: dict[str, Any], tmp_path: Path
) -> None:
    config_file = tmp_path / "verifier.json"
    config_file.write_text(json.dumps({"agents": {"defaults": {"verifier": judge_config}}}))
    provider.respond_with(agent_or_judge)
    agent = example.litellm_agent(OPENAI.judge_model, api_base=provider.url, api_key=API_KEY)
    verifier = Verifier(VerifierConfig.load(config_file))
    app = example.create_app(verifier=verifier, agent=agent, agent_model=OPENAI.judge_model)
    async with running(app) as client:
        body = await chat(client, "c1", QUESTION)
    assert (body["reply"], body["status"]) == (FIXED, "passed")
    assert [seen.path for seen in provider.seen] == [OPENAI.path, ANTHROPIC.path]
    agent_request = provider.seen[0].body
    assert agent_request["messages"][0] == {"role": "system", "content": example.SYSTEM_PROMPT}
    assert agent_request["messages"][-1] == {"role": "user", "content": QUESTION}


async def test_startup_without_a_config_names_the_variable_to_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(example.CONFIG_ENV, raising=False)
    app = example.create_app(agent=TripAgent())
    with pytest.raises(RuntimeError, match=example.CONFIG_ENV):
        async with app.router.lifespan_context(app):
            pass


async def test_an_agent_that_fails_its_first_reply_gets_a_502(
    judge_config: dict[str, Any],
) -> None:
    def broken(messages: list[dict[str, Any]]) -> str:
        raise ConnectionError("the chat model is down")

    app = app_with(judge_config, broken)
    async with running(app) as client:
        response = await client.post("/chat", json={"conversationId": "c1", "message": "hi"})
    assert (response.status_code, response.json()) == (
        502,
        {"detail": "the chat model did not answer"},
    )


async def test_a_request_without_a_message_is_refused_with_422(
    judge_config: dict[str, Any],
) -> None:
    agent = TripAgent()
    app = app_with(judge_config, agent)
    async with running(app) as client:
        missing = await client.post("/chat", json={"conversationId": "c1"})
        empty = await client.post("/chat", json={"conversationId": "c1", "message": ""})
    for response in (missing, empty):
        assert response.status_code == 422
        assert response.json()["detail"][0]["loc"] == ["body", "message"]
    assert agent.calls == []


def test_the_readme_config_is_a_valid_verifier_config() -> None:
    readme = (APP_FILE.parent / "README.md").read_text(encoding="utf-8")
    block = readme.split("```json\n")[-1].split("\n```", 1)[0]
    config = VerifierConfig.from_dict(json.loads(block))
    assert (config.enabled, config.verify_all, config.api_key is not None) == (True, True, True)


def test_the_app_shows_replyguards_warnings_on_stderr() -> None:
    """Run as uvicorn runs it (no logging configured), a misconfiguration reaches stderr."""
    program = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('app', {str(APP_FILE)!r})\n"
        "app = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(app)\n"
        "app.show_replyguard_warnings()\n"
        "from replyguard import Verifier, VerifierConfig\n"
        "Verifier(VerifierConfig(api_key='env:REPLYGUARD_TEST_NEVER_SET')).close()\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=True
    )
    assert "WARNING replyguard: api_key_env_unset" in result.stderr
