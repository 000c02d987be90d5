"""``replyguard serve``'s endpoints beyond the SDKs' happy path, over real HTTP to the
package's server (tests/serve/conftest.py): keys, body limits and bad requests, ``/v1/verify``,
``/healthz`` and ``/metrics``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from support.provider_server import ProviderServer, Step
from support.serve_process import ASK_MESSAGES as ASK
from support.serve_process import (
    CLIENT_KEY,
    FAIL,
    KEYS,
    Served,
    TwoScripts,
    agent_calls,
    client,
    fail_then_pass,
    judge_calls,
)

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
