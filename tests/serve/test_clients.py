"""``replyguard serve`` as a real process on 127.0.0.1, driven by the official OpenAI SDKs as
their users run them (Python sync and async, whole and streamed; Node's ``openai`` package),
against a loopback provider that plays the upstream (OpenAI wire) and the judge (Anthropic
wire). One server serves the module; each test scripts the provider afresh."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from support.ports import free_port
from support.provider_server import ProviderServer, Step
from support.serve_process import (
    CLIENT_KEY,
    KEYS,
    UPSTREAM_KEY,
    Served,
    TwoScripts,
    agent_calls,
    judge_calls,
    provider,
    served_config,
    serving,
)

FAIL = "FAIL [incomplete]: Add the report's date."
ASK = [
    {"role": "system", "content": "Always date reports."},
    {"role": "user", "content": "Write the weekly report."},
]
NODE_CLIENT = Path(__file__).with_name("node") / "client.mjs"
NODE_MODULES = NODE_CLIENT.parent / "node_modules" / "openai"
PLUGIN_CHECK = NODE_CLIENT.parent / "plugin_check.mjs"


@pytest.fixture(scope="module")
def loopback() -> Iterator[tuple[ProviderServer, TwoScripts]]:
    with provider() as pair:
        yield pair


@pytest.fixture(scope="module")
def served(
    loopback: tuple[ProviderServer, TwoScripts], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    server, _ = loopback
    config = served_config(server.url, serve={**served_config(server.url)["serve"]})
    config["serve"]["maxBodyBytes"] = 64 * 1024
    with serving(config, tmp_path_factory.mktemp("serve")) as running:
        assert running.ready_line.strip() == f"replyguard serve: ready on {running.url} (1 worker)"
        yield running
    for key in KEYS:  # nothing the server wrote names a key
        assert key not in running.stderr


@pytest.fixture
def scripts(loopback: tuple[ProviderServer, TwoScripts]) -> TwoScripts:
    server, two = loopback
    with two.lock:
        two.agent.clear()
        two.judge.clear()
    server.seen.clear()
    return two


@pytest.fixture
def provider_server(loopback: tuple[ProviderServer, TwoScripts]) -> ProviderServer:
    return loopback[0]


def client(served: Served, key: str = CLIENT_KEY) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{served.url}/v1", api_key=key, max_retries=0)


def async_client(served: Served) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=f"{served.url}/v1", api_key=CLIENT_KEY, max_retries=0)


def fail_then_pass(scripts: TwoScripts) -> None:
    scripts.agent.extend([Step(text="Done: the report."), Step(text="Done: the report, dated.")])
    scripts.judge.extend([Step(text=FAIL), Step(text="PASS")])


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


# -- keys, limits, bad requests ------------------------------------------------------------------


@pytest.mark.parametrize("key", [None, "not-the-key", CLIENT_KEY[:-1]])
def test_a_request_without_a_valid_key_is_refused_with_401(
    served: Served, scripts: TwoScripts, provider_server: ProviderServer, key: str | None
) -> None:
    headers = {"authorization": f"Bearer {key}"} if key else {}
    for path in ("/v1/chat/completions", "/v1/verify"):
        response = httpx.post(f"{served.url}{path}", json={}, headers=headers)
        assert response.status_code == 401
        assert response.json()["error"]["type"] == "invalid_request_error"
    assert httpx.get(f"{served.url}/metrics", headers=headers).status_code == 401
    assert provider_server.seen == []


def test_healthz_answers_without_a_key(served: Served) -> None:
    response = httpx.get(f"{served.url}/healthz")
    assert response.status_code == 200


def _post(served: Served, path: str, content: bytes) -> httpx.Response:
    headers = {"authorization": f"Bearer {CLIENT_KEY}", "content-type": "application/json"}
    return httpx.post(f"{served.url}{path}", content=content, headers=headers)


@pytest.mark.parametrize(
    ("body", "param"),
    [
        (b"{not json", None),
        (b"[]", None),
        (b'{"model": "gpt-4o"}', "messages"),
        (b'{"model": "gpt-4o", "messages": []}', "messages"),
        (b'{"messages": [{"role": "user", "content": "hi"}]}', "model"),
        (b'{"model": "gpt-4o", "messages": ["hi"]}', "messages[0]"),
        (b'{"model": "gpt-4o", "messages": [{"role": "system", "content": "x"}]}', "messages"),
        (
            b'{"model": "m", "messages": [{"role": "user", "content": "x"}], "api_base": "h"}',
            "api_base",
        ),
    ],
)
def test_a_bad_request_is_a_400_naming_the_field(
    served: Served,
    provider_server: ProviderServer,
    scripts: TwoScripts,
    body: bytes,
    param: str | None,
) -> None:
    response = _post(served, "/v1/chat/completions", body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["param"] == param and error["type"] == "invalid_request_error"
    assert provider_server.seen == []


def test_a_body_over_max_body_bytes_is_a_413(served: Served, scripts: TwoScripts) -> None:
    huge = json.dumps({"model": "gpt-4o", "messages": [{"role": "user", "content": "x" * 70000}]})
    assert _post(served, "/v1/chat/completions", huge.encode()).status_code == 413

    def chunked() -> Iterator[bytes]:  # no content-length: counted as it arrives
        yield huge.encode()

    headers = {"authorization": f"Bearer {CLIENT_KEY}"}
    response = httpx.post(f"{served.url}/v1/verify", content=chunked(), headers=headers)
    assert response.status_code == 413
    assert "error" in response.json()


# -- /v1/verify ----------------------------------------------------------------------------------


def _verify(served: Served, body: dict[str, Any]) -> httpx.Response:
    return _post(served, "/v1/verify", json.dumps(body).encode())


def test_verify_judges_a_hosts_reply_once_without_retry(
    served: Served, scripts: TwoScripts, provider_server: ProviderServer
) -> None:
    scripts.judge.append(Step(text=FAIL))
    turn = {"userMessage": "Write the weekly report.", "rules": ["Always date reports."]}
    response = _verify(served, {"turn": turn, "reply": "Done: the report."})
    assert response.status_code == 200
    assert response.headers["x-replyguard-status"] == "failed"
    body = response.json()
    assert {k: body[k] for k in ("status", "verdict", "category", "awaitingUser", "reason")} == {
        "status": "failed",
        "verdict": "FAIL",
        "category": "incomplete",
        "awaitingUser": False,
        "reason": None,
    }
    assert body["feedback"] == "Add the report's date."
    assert len(judge_calls(provider_server)) == 1 and agent_calls(provider_server) == []

    passed = _verify(served, {"turn": turn, "reply": {"text": "Done.", "meta": {}}}).json()
    assert (passed["status"], passed["verdict"]) == ("passed", "PASS")
    tools = {"text": "", "meta": {"pendingToolCalls": 1}}
    skipped = _verify(served, {"turn": turn, "reply": tools}).json()
    assert (skipped["status"], skipped["verdict"], skipped["reason"]) == (
        "skipped",
        None,
        "tool_calls",
    )


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"turn": {"userMessage": "x"}, "reply": "y", "extra": 1}, "extra"),
        ({"turn": {"userMessage": "x", "colour": "red"}, "reply": "y"}, "turn.colour"),
        ({"turn": {"userMessage": "x"}, "reply": {"text": "y", "wrong": 1}}, "reply.wrong"),
        ({"turn": {"user_message": "x"}, "reply": "y"}, "turn.user_message"),
        ({"reply": "y"}, "turn"),
        ({"turn": {"userMessage": "x"}}, "reply"),
    ],
)
def test_verify_refuses_an_unknown_or_missing_key_with_a_400_naming_it(
    served: Served, scripts: TwoScripts, body: dict[str, Any], param: str
) -> None:
    response = _verify(served, body)
    assert response.status_code == 400
    assert response.json()["error"]["param"] == param


# -- metrics -------------------------------------------------------------------------------------


def _sample(text: str, name: str, **labels: str) -> float:
    for line in text.splitlines():
        if line.startswith("#") or not line.startswith(name):
            continue
        metric, _, value = line.rpartition(" ")
        inside = metric.removeprefix(name)
        wanted = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
        found = ",".join(sorted(inside.strip("{}").split(","))) if inside else ""
        if found == wanted:
            return float(value)
    return 0.0


def test_metrics_count_turns_judge_calls_and_fail_opens(
    served: Served, scripts: TwoScripts
) -> None:
    headers = {"authorization": f"Bearer {CLIENT_KEY}"}
    before = httpx.get(f"{served.url}/metrics", headers=headers).text
    fail_then_pass(scripts)
    client(served).chat.completions.create(model="gpt-4o", messages=ASK)  # type: ignore[arg-type]
    scripts.judge.append(Step(text=None, status=500, body=b"{}"))
    client(served).chat.completions.create(model="gpt-4o", messages=ASK)  # type: ignore[arg-type]
    after = httpx.get(f"{served.url}/metrics", headers=headers).text

    def added(name: str, **labels: str) -> float:
        return _sample(after, name, **labels) - _sample(before, name, **labels)

    assert added("replyguard_turns_total", status="passed", reason="") == 1
    assert added("replyguard_turns_total", status="failed_open", reason="judge_error") == 1
    assert added("replyguard_fail_open_total", reason="judge_error") == 1
    assert added("replyguard_judge_seconds_count") == 2
    assert "replyguard_breaker_open" in after
    for key in KEYS:
        assert key not in after


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
        pytest.skip("node is not installed (.ci/run installs it)")
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
