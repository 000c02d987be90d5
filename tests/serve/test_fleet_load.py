"""200 concurrent clients against ``replyguard serve --workers 2`` sharing a real Redis
(``state``): every reply is delivered, the spend limit holds across both workers, the circuit
breaker one worker opened keeps the other from calling the judge, and the metrics of both
workers are summed."""

from __future__ import annotations

import asyncio
import math
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from support.provider_server import Step
from support.redis_server import REDIS_PASSWORD, RedisServer, redis_server
from support.serve_process import (
    CLIENT_KEY,
    judge_calls,
    provider,
    serve_env,
    served_config,
    serving,
)

pytestmark = pytest.mark.slow

CLIENTS = 200
JUDGE = "anthropic/claude-sonnet-4-5"
ASK = [{"role": "user", "content": "Write the weekly report."}]


@pytest.fixture(scope="module")
def redis() -> Iterator[RedisServer]:
    with redis_server(REDIS_PASSWORD) as server:
        yield server


def _judge_call_cost() -> float:
    """What one judge answer of the provider (900 tokens in, 12 out) costs in litellm's map."""
    import litellm

    prompt, completion = litellm.cost_per_token(
        model=JUDGE, prompt_tokens=900, completion_tokens=12
    )
    return float(prompt) + float(completion)


async def _clients(url: str, count: int) -> list[Any]:
    limits = httpx.Limits(max_connections=count, max_keepalive_connections=0)
    async with (
        httpx.AsyncClient(limits=limits, timeout=120) as http,
        openai.AsyncOpenAI(
            base_url=f"{url}/v1", api_key=CLIENT_KEY, max_retries=0, http_client=http
        ) as client,
    ):

        async def one(number: int) -> Any:
            messages = [{"role": "user", "content": f"Write weekly report {number}."}]
            return await client.chat.completions.create(model="gpt-4o", messages=messages)  # type: ignore[arg-type]

        return await asyncio.gather(*(one(n) for n in range(count)))


def _fleet_config(url: str, redis: RedisServer, prefix: str, **more: Any) -> dict[str, Any]:
    state = {"redisUrl": redis.url(REDIS_PASSWORD), "keyPrefix": prefix, "timeoutMs": 2000}
    return served_config(url, state=state, **more)


def _until_both_refuse(url: str, tries: int = 100) -> bool:
    """Ask one turn at a time (a new connection each, so both workers answer some) until ten
    in a row were refused by the open circuit: the failures one worker recorded have reached
    the shared state (they are written after the verdict, off the turn's path)."""
    refused = 0
    headers = {"authorization": f"Bearer {CLIENT_KEY}"}
    body = {"model": "gpt-4o", "messages": ASK}
    for _ in range(tries):
        answer = httpx.post(f"{url}/v1/chat/completions", json=body, headers=headers, timeout=60)
        refused = refused + 1 if answer.json()["replyguard"]["reason"] == "circuit_open" else 0
        if refused == 10:
            return True
    return False


def _worker_files(run_root: Path) -> set[str]:
    """The worker processes that counted a turn (one metrics file each)."""
    return {p.name for p in run_root.glob("replyguard-serve-*/metrics/counter_*.db")}


def test_200_clients_on_two_workers_get_every_reply_under_one_spend_limit(
    redis: RedisServer, tmp_path: Path
) -> None:
    limit = 12.5 * _judge_call_cost()  # room for 12 judge calls in all
    spend = [{"scope": "global", "window": "1d", "usd": limit}]
    run_root = tmp_path / "run"
    run_root.mkdir()
    with provider() as (server, scripts):
        scripts.agent_default = Step(text="Done: the report.", delay=0.05)
        config = _fleet_config(server.url, redis, "serve-spend:", spendLimits=spend)
        env = serve_env(TMPDIR=str(run_root))
        with serving(config, tmp_path, workers=2, env=env) as served:
            assert "(2 workers)" in served.ready_line
            answers = asyncio.run(_clients(served.url, CLIENTS))
            workers = _worker_files(run_root)
            metrics = httpx.get(
                f"{served.url}/metrics", headers={"authorization": f"Bearer {CLIENT_KEY}"}
            ).text
        judged = len(judge_calls(server))
    assert len(answers) == CLIENTS
    assert all(a.choices[0].message.content == "Done: the report." for a in answers)
    reasons = Counter(
        (a.model_extra["replyguard"]["status"], a.model_extra["replyguard"]["reason"])
        for a in answers
    )
    assert reasons[("failed_open", "spend_limit")] > 0
    assert reasons[("passed", None)] + reasons[("failed_open", "spend_limit")] == CLIENTS, reasons
    assert judged == reasons[("passed", None)]
    assert judged <= math.floor(limit / _judge_call_cost())  # held across both workers
    assert len(workers) == 2, "both workers served turns"
    refused = float(reasons[("failed_open", "spend_limit")])
    assert (
        f'replyguard_turns_total{{reason="spend_limit",status="failed_open"}} {refused}' in metrics
    )
    assert f'replyguard_turns_total{{reason="",status="passed"}} {float(judged)}' in metrics


def test_a_breaker_opened_on_one_worker_keeps_the_other_from_the_judge(
    redis: RedisServer, tmp_path: Path
) -> None:
    breaker = {"failureThreshold": 3, "cooldownSeconds": 600}
    run_root = tmp_path / "run"
    run_root.mkdir()
    with provider() as (server, scripts):
        scripts.judge_default = Step(text=None, status=503, body=b'{"error": "overloaded"}')
        config = _fleet_config(server.url, redis, "serve-breaker:", circuitBreaker=breaker)
        env = serve_env(TMPDIR=str(run_root))
        with serving(config, tmp_path, workers=2, env=env) as served:
            opening = asyncio.run(_clients(served.url, 3))
            settled = _until_both_refuse(served.url)
            before = len(judge_calls(server))
            answers = asyncio.run(_clients(served.url, CLIENTS))
            workers = _worker_files(run_root)
        after = len(judge_calls(server))
    assert [a.model_extra["replyguard"]["reason"] for a in opening] == ["judge_error"] * 3
    assert settled, "the fleet's circuit never opened for every worker"
    assert len(answers) == CLIENTS
    assert {a.model_extra["replyguard"]["reason"] for a in answers} == {"circuit_open"}
    assert all(a.choices[0].message.content == "Done: the report." for a in answers)
    assert after == before  # no worker asked the judge once the fleet's circuit was open
    assert len(workers) == 2, "both workers served turns"
