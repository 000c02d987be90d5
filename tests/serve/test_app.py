"""The app in this process (httpx's ASGI transport), on a scripted upstream: what the metrics
show of the judge's circuit breaker, and replyguard's own failure delivering the upstream's
reply unchanged. The judge is litellm's, on the loopback provider."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from replyguard.runner._verifier import Verifier
from replyguard.serve._app import Served, build_app
from support.provider_server import ProviderServer, Step
from support.serve_process import JUDGE_KEY
from support.turn_parity import Say, Scenario, ScriptedUpstream

ASK = {"model": "gpt-4o", "messages": [{"role": "user", "content": "Write the report."}]}


def _config(url: str) -> Any:
    from replyguard.config import VerifierConfig

    return VerifierConfig.from_dict(
        {
            "enabled": True,
            "model": "anthropic/claude-sonnet-4-5",
            "apiBase": url,
            "apiKey": JUDGE_KEY,
            "verifyAll": True,
            "maxAttempts": 1,
            "circuitBreaker": {"failureThreshold": 1, "cooldownSeconds": 600},
        }
    )


async def _ask(served: Served, count: int) -> list[httpx.Response]:
    transport = httpx.ASGITransport(app=build_app(served))
    async with httpx.AsyncClient(transport=transport, base_url="http://serve") as client:
        answers = [await client.post("/v1/chat/completions", json=ASK) for _ in range(count)]
        answers.append(await client.get("/metrics"))
    await served.verifier.aclose()
    return answers


async def test_the_breaker_gauge_shows_an_open_circuit_and_turns_fail_open() -> None:
    replies = Scenario("breaker", (Say("Done: one."), Say("Done: two.")), ())
    with ProviderServer(default=Step(text=None, status=500, body=b'{"error": "down"}')) as judge:
        served = Served.from_config(_config(judge.url), upstream=ScriptedUpstream(replies))
        first, second, metrics = await _ask(served, 2)
        judge_requests = len(judge.seen)
    assert first.json()["replyguard"]["reason"] == "judge_error"
    assert second.json()["replyguard"]["reason"] == "circuit_open"
    assert second.json()["choices"][0]["message"]["content"] == "Done: two."
    assert judge_requests == 1  # the open circuit asked no judge
    assert "replyguard_breaker_open 1.0" in metrics.text
    assert 'replyguard_fail_open_total{reason="circuit_open"} 1.0' in metrics.text


async def test_replyguards_own_failure_delivers_the_upstream_reply_unchanged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def broken(self: Verifier, agent: Any, turn: Any) -> Any:
        await agent([*turn.history, {"role": "user", "content": turn.user_message}])
        raise RuntimeError("a bug inside replyguard")

    monkeypatch.setattr(Verifier, "run", broken)
    replies = Scenario("bug", (Say("Done: as written."),), ())
    with ProviderServer() as judge:
        served = Served.from_config(_config(judge.url), upstream=ScriptedUpstream(replies))
        answer, metrics = await _ask(served, 1)
    assert answer.status_code == 200
    assert answer.headers["x-replyguard-status"] == "failed_open"
    assert answer.json()["choices"][0]["message"]["content"] == "Done: as written."
    assert answer.json()["replyguard"] == {
        "status": "failed_open",
        "reason": "internal_error",
        "attempts": 1,
        "verdict": None,
    }
    assert 'replyguard_fail_open_total{reason="internal_error"} 1.0' in metrics.text


async def test_an_upstream_that_fails_before_answering_gets_a_500_without_a_traceback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Exploding(ScriptedUpstream):
        async def complete(self, request: dict[str, Any]) -> tuple[dict[str, Any], float | None]:
            raise KeyError("not an upstream error")

        async def stream(self, request: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
            raise KeyError("not an upstream error")
            yield {}

    with ProviderServer() as judge:
        served = Served.from_config(_config(judge.url), upstream=Exploding(Scenario("x", (), ())))
        answer, _ = await _ask(served, 1)
    assert answer.status_code == 500
    assert set(answer.json()["error"]) == {"message", "type", "param", "code"}
    assert "Traceback" not in answer.text
