"""With ``state``, the judge Router keeps its rpm counters on the fleet's Redis, under
deployment ids that every process derives alike: two instances in two processes together
never send a deployment more requests a minute than its ``rpm``."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from replyguard.config._router import RouterConfig
from support.fleet import Instance, fleet_of
from support.provider_server import ProviderServer, Step
from support.redis_server import REDIS_PASSWORD, RedisServer, redis_server

RPM = 5


@pytest.fixture(scope="module")
def redis() -> Iterator[RedisServer]:
    with redis_server(REDIS_PASSWORD) as server:
        yield server


@pytest.fixture(scope="module")
def pair() -> Iterator[list[Instance]]:
    with fleet_of(2) as instances:
        yield instances


def test_a_deployment_has_the_same_id_in_every_process_and_its_key_never_in_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("JUDGE_KEY", "plainvalue-without-key-shape-123")
    judge = {"modelName": "judge", "model": "openai/gpt-4o-mini"}
    section = {
        "deployments": [
            {**judge, "apiKey": "sk-test-SECRETKEY-0123456789abcdef"},
            {**judge, "apiKey": "env:JUDGE_KEY"},
        ]
    }
    first = RouterConfig.model_validate(section, by_alias=True)
    second = RouterConfig.model_validate(section, by_alias=True)
    ids = [
        [d["model_info"]["id"] for d in config.router_arguments(name)[0]["model_list"]]
        for config, name in ((first, "replyguard-a"), (second, "replyguard-b"))
    ]
    assert ids[0] == ids[1]
    assert len(set(ids[0])) == 2
    assert "SECRETKEY" not in "".join(ids[0])


def test_two_processes_never_pass_a_deployments_rpm_together(
    redis: RedisServer, pair: list[Instance]
) -> None:
    second = datetime.now(UTC).second
    if second >= 55:  # litellm counts per clock minute: stay inside one
        time.sleep(61 - second)
    with ProviderServer(default=Step(text="PASS")) as server:
        config = {
            "enabled": True,
            "model": "judge",
            "router": {
                "deployments": [
                    {
                        "modelName": "judge",
                        "model": "openai/gpt-4o-mini",
                        "apiBase": f"{server.url}/v1",
                        "apiKey": "sk-test-SECRETKEY-0123456789abcdef",
                        "rpm": RPM,
                    }
                ],
                "routingStrategy": "usage-based-routing-v2",
            },
            "state": {"redisUrl": redis.url(), "timeoutMs": 3000},
            # The Router's refusals are not the model's failures: the circuit stays closed.
            "circuitBreaker": {"failureThreshold": 1},
        }
        first, other = pair
        first.send(config, turns=RPM - 2)  # most of the minute's requests
        assert [v["reason"] for v in first.answer()] == [None] * (RPM - 2)
        other.send(config, turns=4)
        reasons = [v["reason"] for v in other.answer()]
    # litellm refuses a deployment once one more request would reach its rpm; never past it.
    assert reasons[0] is None
    assert reasons[-1] == "judge_error"  # refused by the Router: a 429 that was never sent
    assert len(server.seen) == RPM - 2 + reasons.count(None) <= RPM


async def test_the_router_gets_the_fleets_redis_without_logging_its_password(
    redis: RedisServer,
) -> None:
    # litellm logs its Redis settings (the URL, password and all) at DEBUG: with its logger at
    # DEBUG, every record reaches handlers (and the secrets guard of conftest) redacted.
    from replyguard import Verifier, VerifierConfig

    config = VerifierConfig.from_dict(
        {
            "router": {"deployments": [{"modelName": "judge", "model": "openai/gpt-4o-mini"}]},
            "model": "judge",
            "state": {"redisUrl": redis.url()},
        }
    )
    logger = logging.getLogger("LiteLLM")
    seen: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: seen.append(record.getMessage())  # type: ignore[method-assign]
    level = logger.level
    logger.setLevel(logging.DEBUG)
    logger.addHandler(handler)
    try:
        verifier = Verifier(config, preload=False)
        await verifier.warmup()  # builds the Router, which opens its Redis pool
        await verifier.aclose()
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    about_redis = [text for text in seen if "redis" in text.lower()]
    assert about_redis, "litellm said nothing of its Redis: was the URL handed over?"
    assert not any(REDIS_PASSWORD in text for text in seen)
