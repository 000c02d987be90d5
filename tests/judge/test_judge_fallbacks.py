"""Fallback models, error classification and the circuit breaker of ``LiteLLMJudge``.

The judge is driven directly (``LiteLLMJudge(...).judge(prompt, time_left=...)``). respx plays
the providers at their public endpoints (OpenAI and Anthropic wire formats); the loopback
``ProviderServer`` plays them where a call must hang past its share of the time.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
import respx

from replyguard import Turn, Verifier, VerifierConfig
from replyguard.context import ContextLimits, JudgePrompt, build_judge_prompt
from replyguard.errors import CircuitOpenError, JudgeConfigError, JudgeError
from replyguard.judge import JudgeReply, LiteLLMJudge
from replyguard.judge._breaker import CircuitBreaker
from replyguard.telemetry import Events
from replyguard.types import Status
from support.provider_server import ANTHROPIC, OPENAI, ProviderServer, Step, Wire

pytestmark = pytest.mark.timing  # scripts/under_load.sh runs these beside CPU-bound work

WIRES = [pytest.param(OPENAI, id="openai"), pytest.param(ANTHROPIC, id="anthropic")]
# Three judge models per provider, tried in this order.
MODELS = {
    "openai": ("openai/gpt-4o-mini", "openai/gpt-4.1-mini", "openai/gpt-4.1-nano"),
    "anthropic": (
        "anthropic/claude-sonnet-4-5",
        "anthropic/claude-haiku-4-5",
        "anthropic/claude-opus-4-1",
    ),
}
# Not shaped like any known credential: only redaction of the configured key can hide it.
PLAIN_KEY = "3f9a1c7e5b2d4f608a1e9c3b7d5f2a64"
TIME_LEFT = 30.0
SHORT_TIME = 1.0  # for the loopback tests where a model hangs past its share
NO_VERDICT = "The reply looks reasonable to me."
VERDICT = "Only two points are given.\nFAIL [incomplete]: add the third bullet."

Answer = str | httpx.Response | Exception


def names(wire: Wire) -> tuple[str, ...]:
    """The judge models of ``wire`` as the provider sees them (no litellm prefix)."""
    return tuple(model.split("/", 1)[1] for model in MODELS[wire.name])


def config_of(wire: Wire, models: int = 2, **keys: Any) -> VerifierConfig:
    first, *fallbacks = MODELS[wire.name][:models]
    data = {
        "enabled": True,
        "verifyAll": True,
        "model": first,
        "fallbackModels": fallbacks,
        "agentModel": wire.agent_model,
        "apiKey": PLAIN_KEY,
        **keys,
    }
    return VerifierConfig.from_dict(data)


def prompt() -> JudgePrompt:
    return build_judge_prompt(
        Turn(user_message="Summarise the report in three bullets."),
        "Done: two bullets.",
        limits=ContextLimits(),
    )


def error(wire: Wire, status: int, **headers: str) -> httpx.Response:
    body = wire.error(status, f"something went wrong for key {PLAIN_KEY}")
    return httpx.Response(status, content=body, headers=headers)


def by_model(wire: Wire, answers: dict[str, Answer]) -> Callable[[httpx.Request], Any]:
    """A respx side effect answering each model (by its unprefixed name) as scripted."""

    def respond(request: httpx.Request) -> httpx.Response:
        model = json.loads(request.content)["model"]
        answer = answers[model]
        if isinstance(answer, Exception):
            raise answer
        if isinstance(answer, str):
            return httpx.Response(200, json=wire.answer(Step(text=answer), model))
        return answer

    return respond


def asked(route: respx.Route) -> list[str]:
    """The models a route was asked for, in order."""
    return [json.loads(call.request.content)["model"] for call in route.calls]


def models_tried(route: respx.Route) -> list[str]:
    """The models a route was asked for, in order, each once.

    On a connection error litellm's own HTTP handler sends the request once more at once, on a
    fresh connection (within the model's share, no wait): the model is still tried once.
    """
    return list(dict.fromkeys(asked(route)))


async def judge(
    config: VerifierConfig,
    *,
    breaker: CircuitBreaker | None = None,
    time_left: float = TIME_LEFT,
    events: Events | None = None,
) -> JudgeReply:
    return await LiteLLMJudge(config, events or Events(), breaker=breaker).judge(
        prompt(), time_left=time_left
    )


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def http(respx_litellm: None) -> Iterator[respx.MockRouter]:
    """respx in front of every provider; a request to an unmocked route is an error."""
    with respx.mock(assert_all_mocked=True, assert_all_called=False) as router:
        yield router


def script(http: respx.MockRouter, wire: Wire, *answers: Answer) -> respx.Route:
    """Answer ``wire``'s models in order with ``answers``."""
    return http.post(wire.url).mock(
        side_effect=by_model(wire, dict(zip(names(wire), answers, strict=False)))
    )


# --- fallback on a passing fault --------------------------------------------------------------


@pytest.mark.parametrize("wire", WIRES)
async def test_models_are_tried_in_the_configured_order(http: respx.MockRouter, wire: Wire) -> None:
    route = script(http, wire, error(wire, 503), error(wire, 500), VERDICT)
    reply = await judge(config_of(wire, models=3))
    assert asked(route) == list(names(wire))
    assert (reply.model, reply.text) == (names(wire)[2], VERDICT)


PASSING_FAULTS = [
    pytest.param(lambda w: error(w, 500), id="500"),
    pytest.param(lambda w: error(w, 502), id="502"),
    pytest.param(lambda w: error(w, 503), id="503"),
    pytest.param(lambda w: error(w, 504), id="504"),
    pytest.param(lambda w: error(w, 529), id="529-overloaded"),
    pytest.param(lambda w: error(w, 408), id="408"),
    pytest.param(lambda w: error(w, 409), id="409"),
    pytest.param(lambda w: error(w, 429), id="429"),
    pytest.param(lambda w: error(w, 429, **{"retry-after": "20"}), id="429-retry-after"),
    pytest.param(lambda w: httpx.ConnectError("connection refused"), id="connect-error"),
]


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize("fault", PASSING_FAULTS)
async def test_a_passing_fault_falls_back_to_the_next_model(
    http: respx.MockRouter, wire: Wire, fault: Callable[[Wire], Answer]
) -> None:
    route = script(http, wire, fault(wire), VERDICT)
    reply = await judge(config_of(wire))
    assert models_tried(route) == list(names(wire)[:2])
    assert (reply.model, reply.text) == (names(wire)[1], VERDICT)


@pytest.mark.parametrize("wire", WIRES)
async def test_retry_after_is_never_waited_for(http: respx.MockRouter, wire: Wire) -> None:
    script(http, wire, error(wire, 429, **{"retry-after": "20"}), VERDICT)
    started = time.monotonic()
    await judge(config_of(wire), time_left=TIME_LEFT)
    assert time.monotonic() - started < 5  # generous: waiting would take 20 s


async def test_a_503_that_litellm_reports_as_bad_request_still_falls_back(
    http: respx.MockRouter,
) -> None:
    """litellm picks ``BadRequestError`` from the body's text; the status is what counts."""
    body = json.dumps(
        {"error": {"message": "overloaded", "type": "invalid_request_error", "code": None}}
    )
    route = script(http, OPENAI, httpx.Response(503, content=body), VERDICT)
    reply = await judge(config_of(OPENAI))
    assert asked(route) == list(names(OPENAI)[:2])
    assert reply.text == VERDICT


async def test_when_every_model_fails_judge_error_lists_each_failure_redacted(
    http: respx.MockRouter,
) -> None:
    script(http, OPENAI, error(OPENAI, 500), error(OPENAI, 503))
    with pytest.raises(JudgeError) as raised:
        await judge(config_of(OPENAI))
    assert type(raised.value) is JudgeError
    assert all(name in str(raised.value) for name in names(OPENAI)[:2])
    assert PLAIN_KEY not in str(raised.value)
    assert raised.value.last_error_class == "ServiceUnavailableError"


# --- timeouts and time shares -----------------------------------------------------------------


@pytest.fixture
def loopback(provider: ProviderServer) -> Callable[..., VerifierConfig]:
    """A config whose judges talk to the loopback provider."""

    def build(wire: Wire, models: int = 2, **keys: Any) -> VerifierConfig:
        return config_of(wire, models, apiBase=provider.url, **keys)

    return build


@pytest.mark.parametrize("wire", WIRES)
async def test_a_model_that_hangs_past_its_share_gives_way_to_the_fallback_in_time(
    provider: ProviderServer, loopback: Callable[..., VerifierConfig], wire: Wire
) -> None:
    provider.push(Step(delay=SHORT_TIME * 5), Step(text=VERDICT))
    started = time.monotonic()
    reply = await judge(loopback(wire), time_left=SHORT_TIME)
    assert time.monotonic() - started < SHORT_TIME
    assert [seen.body["model"] for seen in provider.seen] == list(names(wire)[:2])
    assert (reply.model, reply.text) == (names(wire)[1], VERDICT)


async def test_a_timeout_as_the_last_failure_raises_timeout_error(
    provider: ProviderServer, loopback: Callable[..., VerifierConfig]
) -> None:
    provider.push(Step(status=500, text=None), Step(delay=SHORT_TIME * 5))
    with pytest.raises(TimeoutError):
        await judge(loopback(ANTHROPIC), time_left=SHORT_TIME)


class ShareRecorder(LiteLLMJudge):
    """The real judge, remembering the time share each model's call was given."""

    def __init__(self, config: VerifierConfig, breaker: CircuitBreaker | None = None) -> None:
        super().__init__(config, Events(), breaker=breaker)
        self.shares: list[float] = []
        self.timeouts: list[float] = []

    def share_of(self, index: int, remaining: float) -> float:
        share = super().share_of(index, remaining)
        self.shares.append(share)
        return share

    def request(
        self, model: str, prompt: JudgePrompt, *, timeout: float, api_key: str | None
    ) -> dict[str, Any]:
        self.timeouts.append(timeout)
        return super().request(model, prompt, timeout=timeout, api_key=api_key)


async def test_each_model_gets_an_even_share_of_the_time_left_and_the_last_all_of_it(
    http: respx.MockRouter,
) -> None:
    script(http, OPENAI, error(OPENAI, 500), error(OPENAI, 500), error(OPENAI, 500))
    recorder = ShareRecorder(config_of(OPENAI, models=3))
    with pytest.raises(JudgeError):
        await recorder.judge(prompt(), time_left=TIME_LEFT)
    assert recorder.shares == pytest.approx([TIME_LEFT / 3, TIME_LEFT / 2, TIME_LEFT], abs=0.5)
    assert max(recorder.shares) <= TIME_LEFT


async def test_litellm_gets_one_constant_timeout_so_its_clients_are_reused(
    http: respx.MockRouter,
) -> None:
    script(http, OPENAI, error(OPENAI, 500), error(OPENAI, 500), VERDICT)
    config = config_of(OPENAI, models=3)
    recorder = ShareRecorder(config)
    await recorder.judge(prompt(), time_left=TIME_LEFT)
    # One constant for every call, past the judgement's deadline (which decides first).
    assert recorder.timeouts == [recorder.client_timeout] * 3
    assert recorder.client_timeout > config.timeout_seconds


async def test_a_model_whose_circuit_is_open_takes_no_share_of_the_time(
    http: respx.MockRouter,
) -> None:
    script(http, OPENAI, error(OPENAI, 500), VERDICT)
    breaker = CircuitBreaker(1, 60)
    breaker.record_failure(MODELS["openai"][2])
    recorder = ShareRecorder(config_of(OPENAI, models=3), breaker)
    await recorder.judge(prompt(), time_left=TIME_LEFT)
    assert recorder.shares == pytest.approx([TIME_LEFT / 2, TIME_LEFT], abs=0.5)


async def test_no_time_left_raises_timeout_error_without_a_request(
    http: respx.MockRouter,
) -> None:
    route = script(http, OPENAI, VERDICT, VERDICT)
    with pytest.raises(TimeoutError):
        await judge(config_of(OPENAI), time_left=0)
    assert route.call_count == 0


# --- unreadable verdicts ----------------------------------------------------------------------


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize(
    "unreadable",
    [pytest.param(NO_VERDICT, id="no-verdict-line"), pytest.param(None, id="no-text")],
)
async def test_an_unreadable_verdict_falls_back_to_the_next_model(
    http: respx.MockRouter, wire: Wire, unreadable: str | None
) -> None:
    empty = httpx.Response(200, json=wire.answer(Step(text=unreadable), names(wire)[0]))
    route = script(http, wire, empty, VERDICT)
    reply = await judge(config_of(wire))
    assert asked(route) == list(names(wire)[:2])
    assert (reply.model, reply.text) == (names(wire)[1], VERDICT)


@pytest.mark.parametrize("wire", WIRES)
async def test_the_last_models_unreadable_verdict_is_returned(
    http: respx.MockRouter, wire: Wire
) -> None:
    script(http, wire, NO_VERDICT, "Hmm, hard to say.")
    reply = await judge(config_of(wire))
    assert (reply.model, reply.text) == (names(wire)[1], "Hmm, hard to say.")


async def test_an_unreadable_verdict_is_returned_when_the_fallback_then_fails(
    http: respx.MockRouter,
) -> None:
    script(http, OPENAI, NO_VERDICT, error(OPENAI, 503))
    reply = await judge(config_of(OPENAI))
    assert (reply.model, reply.text) == (names(OPENAI)[0], NO_VERDICT)


async def test_tokens_and_cost_add_up_over_every_answer(http: respx.MockRouter) -> None:
    def answer(text: str) -> httpx.Response:
        step = Step(text=text, prompt_tokens=1000, completion_tokens=10)
        return httpx.Response(200, json=OPENAI.answer(step, "gpt-4o-mini"))

    script(http, OPENAI, answer(NO_VERDICT), answer(VERDICT))
    reply = await judge(config_of(OPENAI))
    single = await judge(config_of(OPENAI, models=1))  # the first model's answer alone
    assert (reply.prompt_tokens, reply.completion_tokens) == (2000, 20)
    assert reply.cost_usd > single.cost_usd > 0


# --- configuration errors ---------------------------------------------------------------------

CONFIG_STATUSES = [pytest.param(s, id=str(s)) for s in (400, 401, 402, 403, 404, 413, 422)]


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize("status", CONFIG_STATUSES)
async def test_a_config_error_raises_without_trying_the_fallback(
    http: respx.MockRouter, wire: Wire, status: int
) -> None:
    route = script(http, wire, error(wire, status), VERDICT)
    with pytest.raises(JudgeConfigError):
        await judge(config_of(wire))
    assert asked(route) == [names(wire)[0]]


async def test_a_config_error_on_a_fallback_stops_there(http: respx.MockRouter) -> None:
    route = script(http, OPENAI, error(OPENAI, 500), error(OPENAI, 404), VERDICT)
    with pytest.raises(JudgeConfigError, match=r"gpt-4\.1-mini"):
        await judge(config_of(OPENAI, models=3))
    assert asked(route) == list(names(OPENAI)[:2])


@pytest.mark.parametrize("wire", WIRES)
async def test_a_config_error_is_logged_at_error_level_with_the_key_redacted(
    http: respx.MockRouter, wire: Wire, replyguard_logs: pytest.LogCaptureFixture
) -> None:
    script(http, wire, error(wire, 401))
    with pytest.raises(JudgeConfigError):
        await judge(config_of(wire))
    [record] = [
        r for r in replyguard_logs.records if r.replyguard["event"] == "judge_misconfigured"
    ]
    event = record.replyguard
    assert record.levelno == logging.ERROR
    assert (event["model"], event["status_code"]) == (MODELS[wire.name][0], 401)
    assert event["error_class"] in ("AuthenticationError", "BadRequestError")
    assert "[REDACTED]" in event["error"]
    assert PLAIN_KEY not in replyguard_logs.text


async def test_a_config_errors_message_has_the_key_redacted(http: respx.MockRouter) -> None:
    script(http, ANTHROPIC, error(ANTHROPIC, 401))
    with pytest.raises(JudgeConfigError) as raised:
        await judge(config_of(ANTHROPIC))
    assert PLAIN_KEY not in str(raised.value)
    assert "[REDACTED]" in str(raised.value)


async def test_an_unset_env_key_is_a_config_error_without_a_request(
    http: respx.MockRouter, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("REPLYGUARD_TEST_UNSET_KEY", raising=False)
    route = script(http, OPENAI, VERDICT, VERDICT)
    with pytest.raises(JudgeConfigError, match="REPLYGUARD_TEST_UNSET_KEY"):
        await judge(config_of(OPENAI, apiKey="env:REPLYGUARD_TEST_UNSET_KEY"))
    assert route.call_count == 0


# --- circuit breaker --------------------------------------------------------------------------


@pytest.mark.parametrize("wire", WIRES)
async def test_the_circuit_opens_after_threshold_failures_then_no_request_is_made(
    http: respx.MockRouter, wire: Wire
) -> None:
    route = script(http, wire, error(wire, 503))
    config, breaker = config_of(wire, models=1), CircuitBreaker(2, 60)
    for _ in range(2):
        with pytest.raises(JudgeError):
            await judge(config, breaker=breaker)
    with pytest.raises(CircuitOpenError):
        await judge(config, breaker=breaker)
    assert route.call_count == 2


async def test_an_open_circuit_goes_straight_to_the_fallback(http: respx.MockRouter) -> None:
    route = script(http, OPENAI, VERDICT, VERDICT)
    breaker = CircuitBreaker(1, 60)
    breaker.record_failure(MODELS["openai"][0])
    reply = await judge(config_of(OPENAI), breaker=breaker)
    assert asked(route) == [names(OPENAI)[1]]
    assert reply.model == names(OPENAI)[1]


async def test_an_open_circuit_is_logged_at_debug(
    http: respx.MockRouter, replyguard_logs: pytest.LogCaptureFixture
) -> None:
    script(http, OPENAI, VERDICT, VERDICT)
    breaker = CircuitBreaker(1, 60)
    breaker.record_failure(MODELS["openai"][0])
    await judge(config_of(OPENAI), breaker=breaker)
    [record] = [r for r in replyguard_logs.records if r.replyguard["event"] == "judge_circuit_open"]
    assert (record.levelno, record.replyguard["model"]) == (logging.DEBUG, MODELS["openai"][0])


async def test_a_skipped_model_and_a_failed_one_raise_judge_error_not_circuit_open(
    http: respx.MockRouter,
) -> None:
    script(http, OPENAI, VERDICT, error(OPENAI, 500))
    breaker = CircuitBreaker(1, 60)
    breaker.record_failure(MODELS["openai"][0])
    with pytest.raises(JudgeError) as raised:
        await judge(config_of(OPENAI), breaker=breaker)
    assert type(raised.value) is JudgeError


async def test_a_successful_half_open_probe_closes_the_circuit(http: respx.MockRouter) -> None:
    route = script(http, OPENAI, VERDICT)
    clock = FakeClock()
    breaker, model = CircuitBreaker(1, 60, clock=clock), MODELS["openai"][0]
    breaker.record_failure(model)
    clock.now += 60
    reply = await judge(config_of(OPENAI, models=1), breaker=breaker)
    assert (route.call_count, reply.text) == (1, VERDICT)
    assert breaker.state(model) == "closed"


async def test_a_failed_half_open_probe_reopens_the_circuit(http: respx.MockRouter) -> None:
    script(http, OPENAI, error(OPENAI, 500))
    clock = FakeClock()
    breaker, model = CircuitBreaker(1, 60, clock=clock), MODELS["openai"][0]
    breaker.record_failure(model)
    clock.now += 60
    with pytest.raises(JudgeError):
        await judge(config_of(OPENAI, models=1), breaker=breaker)
    assert breaker.state(model) == "open"


async def test_a_config_error_is_not_counted_by_the_breaker(http: respx.MockRouter) -> None:
    script(http, OPENAI, error(OPENAI, 401))
    breaker = CircuitBreaker(1, 60)
    with pytest.raises(JudgeConfigError):
        await judge(config_of(OPENAI, models=1), breaker=breaker)
    assert breaker.state(MODELS["openai"][0]) == "closed"


async def test_an_unreadable_answer_counts_as_a_success(http: respx.MockRouter) -> None:
    script(http, OPENAI, NO_VERDICT)
    breaker, model = CircuitBreaker(2, 60), MODELS["openai"][0]
    breaker.record_failure(model)
    await judge(config_of(OPENAI, models=1), breaker=breaker)
    breaker.record_failure(model)
    assert breaker.state(model) == "closed"


async def test_a_timeout_counts_as_a_failure(
    provider: ProviderServer, loopback: Callable[..., VerifierConfig]
) -> None:
    provider.push(Step(delay=SHORT_TIME * 5))
    breaker = CircuitBreaker(1, 60)
    with pytest.raises(TimeoutError):
        await judge(loopback(ANTHROPIC, models=1), breaker=breaker, time_left=SHORT_TIME)
    assert breaker.state(MODELS["anthropic"][0]) == "open"


async def test_a_hung_model_is_counted_even_when_the_caller_enforces_the_same_deadline(
    provider: ProviderServer, loopback: Callable[..., VerifierConfig]
) -> None:
    """The runner wraps the judge in ``asyncio.timeout(time_left)``: the judge's own share
    ends first, so the hang is recorded as the model's failure, not lost to a cancellation."""
    provider.push(Step(delay=SHORT_TIME * 5))
    breaker = CircuitBreaker(1, 60)
    hung = LiteLLMJudge(loopback(ANTHROPIC, models=1), Events(), breaker=breaker)
    # As the runner does: litellm's import and the prompt come before the deadline starts.
    await hung.warmup()
    request = prompt()
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(SHORT_TIME):
            await hung.judge(request, time_left=SHORT_TIME)
    assert breaker.state(MODELS["anthropic"][0]) == "open"


async def test_a_verifier_with_every_circuit_open_delivers_the_reply_without_a_request(
    http: respx.MockRouter,
) -> None:
    route = script(http, OPENAI, VERDICT, VERDICT)
    config, breaker = config_of(OPENAI), CircuitBreaker(1, 60)
    for model in config.judge_models:
        breaker.record_failure(model)
    verifier = Verifier(config, judge=LiteLLMJudge(config, Events(), breaker=breaker))
    outcome = await verifier.run(lambda messages: "Done: two bullets.", Turn(user_message="Go"))
    assert (outcome.status, outcome.response) == (Status.FAILED_OPEN, "Done: two bullets.")
    assert route.call_count == 0
