"""``replyguard serve`` as a real process on 127.0.0.1, driven by the official OpenAI SDKs as
their users run them (Python sync and async, whole and streamed; Node's ``openai`` package),
against a loopback provider that plays the upstream (OpenAI wire) and the judge (Anthropic
wire). One server serves the package (tests/serve/conftest.py); each test scripts the provider
afresh."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import openai
import pytest

from support.ports import free_port
from support.provider_server import ProviderServer, Step
from support.serve_process import ASK_MESSAGES as ASK
from support.serve_process import (
    CLIENT_KEY,
    FAIL,
    UPSTREAM_KEY,
    Served,
    TwoScripts,
    agent_calls,
    async_client,
    client,
    fail_then_pass,
    judge_calls,
)

NODE_CLIENT = Path(__file__).with_name("node") / "client.mjs"
NODE_MODULES = NODE_CLIENT.parent / "node_modules" / "openai"
PLUGIN_CHECK = NODE_CLIENT.parent / "plugin_check.mjs"


def guard_of(model: Any) -> dict[str, Any]:
    extra = model.model_extra or {}
    guard: dict[str, Any] = extra["replyguard"]
    return guard


# -- the Python SDK ------------------------------------------------------------------------------


def test_a_failed_reply_is_retried_with_feedback_and_the_verified_one_delivered(
    served: Served, scripts: TwoScripts, provider_server: ProviderServer
) -> None:
    fail_then_pass(scripts)
    raw = client(served).chat.completions.with_raw_response.create(
        model="gpt-4o",
        messages=ASK,
        temperature=0.3,
        max_tokens=200,  # type: ignore[arg-type]
    )
    answer = raw.parse()
    assert raw.headers["x-replyguard-status"] == "passed"
    assert answer.choices[0].message.content == "Done: the report, dated."
    assert guard_of(answer) == {
        "status": "passed",
        "reason": None,
        "attempts": 2,
        "verdict": {"passed": True, "category": None, "feedback": None},
    }
    assert answer.usage is not None
    assert (answer.usage.prompt_tokens, answer.usage.completion_tokens) == (1800, 24)
    first, retry = agent_calls(provider_server)
    assert first.body["messages"] == ASK
    assert (first.body["temperature"], first.body["max_tokens"]) == (0.3, 200)
    assert retry.body["messages"][:2] == ASK
    assert retry.body["messages"][2] == {"role": "assistant", "content": "Done: the report."}
    assert "Add the report's date." in retry.body["messages"][3]["content"]
    assert first.headers["authorization"] == f"Bearer {UPSTREAM_KEY}"
    judged = judge_calls(provider_server)[0].prompt
    assert "Always date reports." in judged and "Write the weekly report." in judged


async def test_the_async_client_streams_only_the_verified_text(
    served: Served, scripts: TwoScripts
) -> None:
    fail_then_pass(scripts)
    async with async_client(served) as streaming:
        stream = await streaming.chat.completions.create(
            model="gpt-4o",
            messages=ASK,  # type: ignore[arg-type]
            stream=True,
            stream_options={"include_usage": True},
        )
        chunks = [chunk async for chunk in stream]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Done: the report, dated."
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    last = chunks[-1]
    assert guard_of(last)["status"] == "passed" and guard_of(last)["attempts"] == 2
    assert last.usage is not None and last.usage.total_tokens == 2 * 912


def test_the_sync_client_streams_and_the_async_client_answers_whole(
    served: Served, scripts: TwoScripts
) -> None:
    scripts.agent.extend([Step(text="Done: the report, dated.")] * 2)
    with client(served).chat.completions.create(
        model="gpt-4o",
        messages=ASK,  # type: ignore[arg-type]
        stream=True,
    ) as stream:
        chunks = list(stream)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == (
        "Done: the report, dated."
    )
    assert chunks[-1].usage is None  # not asked for

    async def whole() -> Any:
        async with async_client(served) as answering:
            return await answering.chat.completions.create(model="gpt-4o", messages=ASK)  # type: ignore[arg-type]

    answer = asyncio.run(whole())
    assert answer.choices[0].message.content == "Done: the report, dated."
    assert guard_of(answer)["status"] == "passed"


def test_a_reply_with_tool_calls_is_returned_as_it_is_unjudged(
    served: Served, scripts: TwoScripts, provider_server: ProviderServer
) -> None:
    call = {"id": "call_1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
    body = {
        "id": "chatcmpl-tools",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-4o",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": None, "tool_calls": [call]},
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8},
    }
    scripts.agent.append(Step(body=json.dumps(body).encode()))
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {}}}]
    answer = client(served).chat.completions.create(
        model="gpt-4o",
        messages=ASK,  # type: ignore[arg-type]
        tools=tools,  # type: ignore[list-item]
    )
    message = answer.choices[0].message
    assert message.tool_calls is not None and message.tool_calls[0].id == "call_1"
    assert answer.choices[0].finish_reason == "tool_calls"
    assert guard_of(answer)["status"] == "skipped"
    assert judge_calls(provider_server) == []
    assert agent_calls(provider_server)[0].body["tools"] == tools


def test_an_agent_loops_tool_results_reach_the_upstream_whole_and_the_judge_as_history(
    served: Served, scripts: TwoScripts, provider_server: ProviderServer
) -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": "{}"}}
    messages = [
        *ASK,
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "sales: 42 units"},
    ]
    answer = client(served).chat.completions.create(model="gpt-4o", messages=messages)  # type: ignore[arg-type]
    assert guard_of(answer)["status"] == "passed"

    def kept(ms: list[dict[str, Any]]) -> list[dict[str, Any]]:  # litellm drops a null content
        return [{k: v for k, v in m.items() if v is not None} for m in ms]

    assert kept(agent_calls(provider_server)[0].body["messages"]) == kept(messages)
    assert "sales: 42 units" in judge_calls(provider_server)[0].prompt


def test_a_judge_that_fails_delivers_the_upstream_reply_unchanged(
    served: Served, scripts: TwoScripts
) -> None:
    scripts.agent.append(Step(text="Done: as the model wrote it."))
    scripts.judge.append(Step(text=None, status=500, body=b'{"error": "judge down"}'))
    answer = client(served).chat.completions.create(model="gpt-4o", messages=ASK)  # type: ignore[arg-type]
    assert answer.choices[0].message.content == "Done: as the model wrote it."
    assert guard_of(answer)["status"] == "failed_open"
    assert guard_of(answer)["reason"] == "judge_error"


@pytest.mark.parametrize("status", [429, 503])
def test_an_upstream_failure_is_answered_with_its_status_and_no_key(
    served: Served, scripts: TwoScripts, status: int
) -> None:
    echoed = json.dumps({"error": {"message": f"bad key {UPSTREAM_KEY}", "type": "x"}})
    scripts.agent.append(Step(text=None, status=status, body=echoed.encode()))
    with pytest.raises(openai.APIStatusError) as caught:
        client(served).chat.completions.create(model="gpt-4o", messages=ASK)  # type: ignore[arg-type]
    assert caught.value.status_code == status
    body = caught.value.response.json()
    assert set(body["error"]) >= {"message", "type", "param", "code"}
    assert UPSTREAM_KEY not in caught.value.response.text
    assert "Traceback" not in caught.value.response.text


# -- Node's openai package -----------------------------------------------------------------------


def test_the_node_openai_package_gets_verified_answers(served: Served, scripts: TwoScripts) -> None:
    node = shutil.which("node")
    if node is None or not NODE_MODULES.is_dir():
        pytest.skip(
            "node or tests/serve/node/node_modules/openai is missing "
            "(npm ci --prefix tests/serve/node installs it)"
        )
    fail_then_pass(scripts)
    scripts.agent.append(Step(text="Done: streamed."))
    ran = subprocess.run(
        [node, str(NODE_CLIENT), f"{served.url}/v1", CLIENT_KEY],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "NODE_NO_WARNINGS": "1"},
    )
    assert ran.returncode == 0, ran.stderr
    seen = json.loads(ran.stdout)
    assert seen["whole"]["content"] == "Done: the report, dated."
    assert seen["whole"]["header"] == "passed"
    assert seen["whole"]["replyguard"]["attempts"] == 2
    assert seen["whole"]["usage"]["total_tokens"] == 2 * 912
    assert seen["streamed"]["content"] == "Done: streamed."
    assert seen["streamed"]["replyguard"]["status"] == "passed"
    assert seen["streamed"]["usage"]["total_tokens"] == 912
    assert seen["unauthorized"] == {
        "status": 401,
        "type": "invalid_request_error",
        "name": "AuthenticationError",
    }


# -- the OpenClaw plugin (examples/openclaw_plugin), its hook run by Node against the server -----


def test_the_openclaw_plugins_hook_asks_for_a_retry_on_fail_and_fails_open_otherwise(
    served: Served, scripts: TwoScripts, provider_server: ProviderServer
) -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed (apt-get install nodejs; .ci/run installs it)")
    scripts.judge.extend([Step(text=FAIL), Step(text="PASS"), Step(text=FAIL, delay=3)])
    dead_url = f"http://127.0.0.1:{free_port()}"  # nothing listens: connection refused
    ran = subprocess.run(
        [node, str(PLUGIN_CHECK), served.url, CLIENT_KEY, dead_url],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ran.returncode == 0, ran.stderr
    seen = json.loads(ran.stdout)
    assert seen["registered"] == ["handler", "options"] and seen["budget"] == 4000
    failed = seen["failed"]
    assert failed["action"] == "revise"
    assert "Add the report's date." in failed["retry"]["instruction"]
    assert failed["retry"]["maxAttempts"] == 2
    assert seen["passed"] is None
    assert seen["wrongKey"] is None and seen["unreachable"] is None and seen["slow"] is None
    assert any("401" in warning for warning in seen["warnings"])
    judged = judge_calls(provider_server)[0].prompt
    assert "Always date reports." in judged and "Write the weekly report." in judged
