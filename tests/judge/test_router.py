"""The ``router`` section: judge deployments behind one litellm Router, with replyguard's own
deadline, fallbacks and circuit breaker in charge (the Router retries nothing).

Two loopback provider servers play two deployments of one model group and count the requests
they receive.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from typing import Any, get_args

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from conftest import AGENT_MODEL, API_KEY, SecretsGuard
from replyguard import CrossFamilyError, Status, Turn, Verifier, VerifierConfig
from replyguard.config._router import RoutingStrategy
from replyguard.context import JudgePrompt
from replyguard.errors import ConfigError, JudgeConfigError
from replyguard.judge import LiteLLMJudge
from replyguard.judge._breaker import CircuitBreaker
from replyguard.judge._router import JudgeRouter
from replyguard.telemetry import Events
from replyguard.testing import ScriptedAgent
from support.provider_server import OPENAI, ProviderServer, Step
from support.timing import Timed

PLAIN_KEY = "3f9a1c7e5b2d4f608a1e9c3b7d5f2a64"
# Keys no redaction pattern recognises: only knowing the value hides them.
UNSHAPED_KEYS = ("plainvalue-without-key-shape-123", PLAIN_KEY)
JUDGE_GROUP = "judge"
DEPLOYED = "openai/gpt-4o-mini"
REPLY = "Done: the report is attached."

MakeConfig = Callable[..., VerifierConfig]


@pytest.fixture
def second() -> Iterator[ProviderServer]:
    with ProviderServer() as server:
        yield server


def deployment(server: ProviderServer | None = None, **keys: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {"modelName": JUDGE_GROUP, "model": DEPLOYED}
    if server is not None:
        entry["apiBase"] = server.url
    return {**entry, **keys}


def routed(
    make_config: MakeConfig,
    *deployments: dict[str, Any],
    strategy: str = "simple-shuffle",
    **keys: Any,
) -> VerifierConfig:
    """An enabled config judging every reply through a router of ``deployments``."""
    base = {
        "model": JUDGE_GROUP,
        "agentModel": "anthropic/claude-sonnet-4-5",
        "verifyAll": True,
        "router": {"deployments": list(deployments), "routingStrategy": strategy},
        "circuitBreaker": {"failureThreshold": 1000},
    }
    return make_config(**{**base, **keys})


async def run_turns(config: VerifierConfig, count: int) -> list[Any]:
    verifier = Verifier(config)
    try:
        return [
            await verifier.run(ScriptedAgent([REPLY]), Turn(user_message=f"Send report {n}."))
            for n in range(count)
        ]
    finally:
        await verifier.aclose()


# -- configuration ---------------------------------------------------------------------------


def test_a_router_config_names_its_groups_and_their_models(make_config: MakeConfig) -> None:
    config = routed(
        make_config,
        deployment(rpm=60, tpm=100_000),
        deployment(model="azure/gpt-4o-mini", weight=2),
        strategy="least-busy",
    )
    assert config.router is not None
    assert config.router.groups == {JUDGE_GROUP: (DEPLOYED, "azure/gpt-4o-mini")}
    assert config.judge_deployment_models == (DEPLOYED, "azure/gpt-4o-mini")
    arguments, keys = config.router.router_arguments("cred")
    assert keys == {}
    assert (arguments["num_retries"], arguments["fallbacks"], arguments["max_fallbacks"]) == (
        0,
        [],
        0,
    )
    assert arguments["disable_cooldowns"] is True
    assert arguments["routing_strategy"] == "least-busy"
    first = arguments["model_list"][0]
    assert first == {
        "model_name": JUDGE_GROUP,
        "litellm_params": {"model": DEPLOYED, "max_retries": 0, "rpm": 60, "tpm": 100_000},
        "model_info": {"id": first["model_info"]["id"]},  # tests/state/test_fleet.py
    }
    assert "redis_url" not in arguments  # no state: the Router counts in this process


def test_model_must_be_a_group_of_the_router(make_config: MakeConfig) -> None:
    with pytest.raises(ConfigError) as caught:
        routed(make_config, deployment(), model="openai/gpt-4o-mini")
    assert [key for key, _ in caught.value.problems] == ["model"]
    assert "not a router group (one of: judge)" in str(caught.value)


def test_a_run_kinds_model_must_be_a_group_too(make_config: MakeConfig) -> None:
    with pytest.raises(ConfigError, match=r"runKinds\.cheap\.model"):
        routed(make_config, deployment(), runKinds={"cheap": {"model": "gpt-4o-mini"}})


@pytest.mark.parametrize(
    ("entry", "key", "message"),
    [
        ({"modelName": JUDGE_GROUP}, "router.deployments.0.model", "Field required"),
        ({"modelName": JUDGE_GROUP, "model": " "}, "router.deployments.0.model", "name a model"),
        (
            {"modelName": JUDGE_GROUP, "model": DEPLOYED, "model_name": "x"},
            "router.deployments.0.model_name",
            "unknown key",
        ),
        (
            {"modelName": JUDGE_GROUP, "model": DEPLOYED, "maxRetries": 2},
            "router.deployments.0.maxRetries",
            "unknown key",
        ),
        (
            {"modelName": JUDGE_GROUP, "model": DEPLOYED, "rpm": 0},
            "router.deployments.0.rpm",
            "greater than or equal to 1",
        ),
        (
            {"modelName": JUDGE_GROUP, "model": DEPLOYED, "apiKey": "env:"},
            "router.deployments.0.apiKey",
            "variable name",
        ),
    ],
)
def test_a_bad_deployment_is_an_error_naming_its_key(
    make_config: MakeConfig, entry: dict[str, Any], key: str, message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        routed(make_config, entry)
    problems = dict(caught.value.problems)
    assert key in problems
    assert message in problems[key]


def test_the_router_section_refuses_unknown_keys_and_empty_lists(make_config: MakeConfig) -> None:
    with pytest.raises(ConfigError) as caught:
        make_config(model=JUDGE_GROUP, router={"deployments": [], "fallbacks": ["x"]})
    assert dict(caught.value.problems) == {
        "router.deployments": "list at least one deployment",
        "router.fallbacks": "unknown key",
    }


def test_a_dumped_config_masks_literal_deployment_keys(make_config: MakeConfig) -> None:
    config = routed(
        make_config, deployment(apiKey=API_KEY), deployment(apiKey="env:JUDGE_KEY_EAST")
    )
    dumped = json.dumps(config.model_dump(mode="json", by_alias=True))
    assert API_KEY not in dumped
    keys = [d["apiKey"] for d in json.loads(dumped)["router"]["deployments"]]
    assert keys == ["**********", "env:JUDGE_KEY_EAST"]


def test_cross_family_looks_at_the_deployments_not_the_group_name(
    make_config: MakeConfig,
) -> None:
    lookalike = {"modelName": "claude-judge", "model": DEPLOYED}
    config = routed(
        make_config,
        lookalike,
        model="claude-judge",
        agentModel=AGENT_MODEL,
        requireCrossFamily=True,
    )
    with pytest.raises(CrossFamilyError, match="gpt-4o-mini"):
        Verifier(config)
    fine = routed(make_config, lookalike, model="claude-judge", requireCrossFamily=True)
    assert Verifier(fine).config.model == "claude-judge"


# -- through two loopback deployments ------------------------------------------------------------


async def test_requests_are_spread_across_the_deployments(
    make_config: MakeConfig, provider: ProviderServer, second: ProviderServer
) -> None:
    provider.respond_with(lambda seen: Step(text="PASS"))
    second.respond_with(lambda seen: Step(text="PASS"))
    config = routed(
        make_config, deployment(provider, apiKey=API_KEY), deployment(second, apiKey=API_KEY)
    )
    outcomes = await run_turns(config, 20)
    assert {o.status for o in outcomes} == {Status.PASSED}
    assert len(provider.seen) + len(second.seen) == 20
    assert len(provider.seen) > 0 and len(second.seen) > 0
    assert {s.body["model"] for s in provider.seen + second.seen} == {"gpt-4o-mini"}
    assert all(s.path.endswith(OPENAI.path) for s in provider.seen + second.seen)


async def test_a_failing_deployment_is_not_retried_by_the_router(
    make_config: MakeConfig, provider: ProviderServer, second: ProviderServer
) -> None:
    provider.respond_with(lambda seen: Step(text=None, status=500, body=b'{"error": "down"}'))
    second.respond_with(lambda seen: Step(text="PASS"))
    config = routed(
        make_config, deployment(provider, apiKey=API_KEY), deployment(second, apiKey=API_KEY)
    )
    outcomes = await run_turns(config, 20)
    failed_open = [o for o in outcomes if o.status == Status.FAILED_OPEN]
    assert len(provider.seen) + len(second.seen) == 20  # one request per turn, never two
    assert len(failed_open) == len(provider.seen) > 0
    assert {o.reason for o in failed_open} == {"judge_error"}
    assert sum(o.status == Status.PASSED for o in outcomes) == len(second.seen)


async def test_the_judgement_deadline_cancels_the_router_call(
    make_config: MakeConfig, provider: ProviderServer, second: ProviderServer
) -> None:
    """The one request, held by its deployment for 5 s, is cut at ``timeoutSeconds``. The
    verifier is warmed up first (litellm's import, the Router), as the deadline does not count
    that set-up; the turn is timed against a witness timer set for the same deadline, so a
    busy machine's late timers move both (without the cut it would take 5 s)."""
    provider.respond_with(lambda seen: Step(text="PASS", delay=5))
    second.respond_with(lambda seen: Step(text="PASS", delay=5))
    config = routed(
        make_config,
        deployment(provider, apiKey=API_KEY),
        deployment(second, apiKey=API_KEY),
        timeoutSeconds=1.0,
    )
    verifier = Verifier(config)
    try:
        await verifier.warmup()
        async with Timed(1.0) as timed:
            outcome = await verifier.run(ScriptedAgent([REPLY]), Turn(user_message="Send it."))
    finally:
        await verifier.aclose()
    assert timed.within(2.0), (timed.seconds, timed.late)
    assert (outcome.status, outcome.reason, outcome.response) == (
        Status.FAILED_OPEN,
        "judge_timeout",
        REPLY,
    )
    assert len(provider.seen) + len(second.seen) == 1


async def test_each_deployment_sends_its_own_key_read_from_the_environment(
    make_config: MakeConfig,
    provider: ProviderServer,
    second: ProviderServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("JUDGE_KEY_EAST", API_KEY)
    provider.respond_with(lambda seen: Step(text="PASS"))
    second.respond_with(lambda seen: Step(text="PASS"))
    config = routed(
        make_config,
        deployment(provider, apiKey="env:JUDGE_KEY_EAST"),
        deployment(second, apiKey=PLAIN_KEY),
    )
    await run_turns(config, 12)
    assert {s.headers["authorization"] for s in provider.seen} <= {f"Bearer {API_KEY}"}
    assert {s.headers["authorization"] for s in second.seen} <= {f"Bearer {PLAIN_KEY}"}
    assert provider.seen and second.seen


async def test_an_unset_deployment_key_fails_open_naming_the_key(
    make_config: MakeConfig, provider: ProviderServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("JUDGE_KEY_MISSING", raising=False)
    config = routed(make_config, deployment(provider, apiKey="env:JUDGE_KEY_MISSING"))
    [outcome] = await run_turns(config, 1)
    assert (outcome.status, outcome.reason) == (Status.FAILED_OPEN, "missing_credentials")
    error = outcome.attempts[0].verdict.error if outcome.attempts[0].verdict else ""
    assert "router.deployments.0.apiKey" in (error or "")
    assert "JUDGE_KEY_MISSING is not set" in (error or "")
    assert provider.seen == []


async def test_aclose_discards_the_router_and_its_keys(
    make_config: MakeConfig, provider: ProviderServer
) -> None:
    import litellm

    def held_keys() -> list[str]:
        return [
            c.credential_values.get("api_key")
            for c in litellm.credential_list
            if c.credential_name.startswith("replyguard-")
        ]

    provider.respond_with(lambda seen: Step(text="PASS"))
    verifier = Verifier(routed(make_config, deployment(provider, apiKey=PLAIN_KEY)))
    await verifier.warmup()
    assert held_keys() == [PLAIN_KEY]
    outcome = await verifier.run(ScriptedAgent([REPLY]), Turn(user_message="Send it."))
    await verifier.aclose()
    assert (outcome.status, len(provider.seen)) == (Status.PASSED, 1)
    assert provider.seen[0].headers["authorization"] == f"Bearer {PLAIN_KEY}"
    assert held_keys() == []


def test_a_router_without_a_model_is_an_error_naming_model() -> None:
    with pytest.raises(ConfigError) as caught:
        VerifierConfig.from_dict({"enabled": True, "router": {"deployments": [deployment()]}})
    assert [key for key, _ in caught.value.problems] == ["model"]
    assert "'anthropic/claude-sonnet-4-5' is not a router group" in str(caught.value)


async def test_a_deployment_key_set_after_the_verifier_is_built_is_redacted(
    make_config: MakeConfig,
    provider: ProviderServer,
    monkeypatch: pytest.MonkeyPatch,
    replyguard_logs: pytest.LogCaptureFixture,
    secrets_guard: SecretsGuard,
) -> None:
    # The key is not in the environment when the verifier is built (a secrets manager injects
    # it later), then rotated; the provider's error quotes whichever key it got.
    monkeypatch.delenv("JUDGE_KEY_EAST", raising=False)
    provider.respond_with(
        lambda seen: Step(
            text=None,
            status=500,
            body=OPENAI.error(500, f"bad credential {seen.headers['authorization'][7:]}"),
        )
    )
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    config = routed(make_config, deployment(provider, apiKey="env:JUDGE_KEY_EAST"))
    verifier = Verifier(config, tracer_provider=tracer_provider)
    errors = []
    for key in UNSHAPED_KEYS:
        monkeypatch.setenv("JUDGE_KEY_EAST", key)
        outcome = await verifier.run(ScriptedAgent([REPLY]), Turn(user_message="Send it."))
        await verifier.aclose()  # the next turn builds the Router again, reading the new key
        assert (outcome.status, outcome.reason) == (Status.FAILED_OPEN, "judge_error")
        assert provider.seen[-1].headers["authorization"] == f"Bearer {key}"
        errors.append(outcome.attempts[0].verdict.error if outcome.attempts[0].verdict else "")
    texts = [*errors, *(r.getMessage() for r in replyguard_logs.records)]
    for span in exporter.get_finished_spans():
        texts += [span.status.description or "", *(str(e.attributes) for e in span.events)]
    assert all("bad credential" in (error or "") for error in errors)
    assert any("judge_model_failed" in text for text in texts)
    assert [text for text in texts if any(key in text for key in UNSHAPED_KEYS)] == []
    # litellm's Router logs the provider's error text at INFO, beyond replyguard's reach.
    assert {leak.logger for leak in secrets_guard.forgive()} <= {"LiteLLM Router"}


@pytest.mark.parametrize("strategy", get_args(RoutingStrategy))
async def test_building_and_closing_the_router_leaves_nothing_behind(
    make_config: MakeConfig, strategy: str
) -> None:
    import litellm.router  # its import registers litellm's own callbacks

    def held() -> dict[str, list[int]]:
        """Every callback list of litellm's (``callbacks``, ``input_callback``, ...)."""
        lists = {name: getattr(litellm, name) for name in dir(litellm) if "callback" in name}
        return {
            name: [id(c) for c in value] for name, value in lists.items() if isinstance(value, list)
        }

    config = routed(make_config, deployment(apiKey=PLAIN_KEY), strategy=strategy)
    before = held()
    for _ in range(3):
        verifier = Verifier(config)
        await verifier.warmup()
        await verifier.aclose()
    await asyncio.sleep(0)  # a cancelled task ends on the loop's next turn
    assert held() == before
    pending = [t for t in asyncio.all_tasks() if "periodic_sync" in repr(t.get_coro())]
    assert pending == []


async def test_an_unbuildable_router_is_a_config_error_with_no_fallback(
    make_config: MakeConfig,
    provider: ProviderServer,
    monkeypatch: pytest.MonkeyPatch,
    replyguard_logs: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.delenv("JUDGE_KEY_MISSING", raising=False)
    provider.respond_with(lambda seen: Step(text="PASS"))
    backup = {"modelName": "backup", "model": DEPLOYED, "apiBase": provider.url}
    config = make_config(
        model=JUDGE_GROUP,
        fallbackModels=["backup"],
        router={
            "deployments": [
                deployment(provider, apiKey="env:JUDGE_KEY_MISSING"),
                {**backup, "apiKey": PLAIN_KEY},
            ]
        },
    )
    breaker = CircuitBreaker(1, 30)
    router = JudgeRouter(config.router) if config.router is not None else None
    judge = LiteLLMJudge(config, Events(), breaker=breaker, router=router)
    prompt = JudgePrompt(system="Judge.", user="<reply>Done.</reply>", nonce="ab12", tokens=0)
    with pytest.raises(JudgeConfigError, match="JUDGE_KEY_MISSING is not set"):
        await judge.judge(prompt, time_left=5)
    assert provider.seen == []  # the fallback was not tried
    assert breaker.state(JUDGE_GROUP) == "closed"
    events = [(r.levelname, r.getMessage().split()[0]) for r in replyguard_logs.records]
    assert events == [("ERROR", "judge_misconfigured")]
