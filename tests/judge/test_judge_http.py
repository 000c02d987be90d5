"""The judge at the httpx boundary: what litellm sends, and how each answer is read.

respx stands in for the providers at their public endpoints, speaking their real wire formats
(OpenAI chat completions, Anthropic messages). Every test uses the ``respx_litellm`` fixture,
which routes litellm through httpx so respx can see its requests.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
import respx

from conftest import API_KEY
from replyguard import FailCategory, Outcome, Turn, Verifier, VerifierConfig
from replyguard.context import ContextLimits, build_judge_prompt, system_prompt
from replyguard.judge import LiteLLMJudge
from replyguard.telemetry._events import Events
from replyguard.testing import ScriptedAgent
from replyguard.types import Reason, Status, Verdict
from support.provider_server import ANTHROPIC, OPENAI, Seen, Step, Wire, anthropic_body, openai_body

WIRES = [pytest.param(OPENAI, id="openai"), pytest.param(ANTHROPIC, id="anthropic")]
USER_MESSAGE = "Summarise the quarterly report in three bullet points."
REPLY = "Done: three bullet points on revenue, costs and hiring."

Responder = Callable[[httpx.Request], httpx.Response]


@pytest.fixture
def http(respx_litellm: None) -> Iterator[respx.MockRouter]:
    """respx in front of every provider; a request to an unmocked route is an error."""
    with respx.mock(assert_all_mocked=True, assert_all_called=False) as router:
        yield router


@pytest.fixture
def config_for(make_config: Callable[..., VerifierConfig]) -> Callable[..., VerifierConfig]:
    """A config whose judge speaks ``wire``, with the API key set and every reply judged."""

    def build(wire: Wire, **keys: Any) -> VerifierConfig:
        base = {"model": wire.judge_model, "agentModel": wire.agent_model, "apiKey": API_KEY}
        return make_config(**{"verifyAll": True, **base, **keys})

    return build


def answering(wire: Wire, text: str | None = "PASS", **usage: int) -> Responder:
    """A responder that answers ``text`` in ``wire``'s format, naming the requested model."""

    def respond(request: httpx.Request) -> httpx.Response:
        model = json.loads(request.content)["model"]
        return httpx.Response(200, json=wire.answer(Step(text=text, **usage), model))

    return respond


def sent(route: respx.Route, index: int = 0) -> Seen:
    """The ``index``-th request a route received, as the loopback server would record it."""
    request = route.calls[index].request
    return Seen(
        path=request.url.path, headers=dict(request.headers), body=json.loads(request.content)
    )


async def judge_once(config: VerifierConfig) -> Verdict:
    return await Verifier(config).verify(Turn(user_message=USER_MESSAGE), REPLY)


async def run_turn(config: VerifierConfig) -> Outcome:
    return await Verifier(config).run(ScriptedAgent([REPLY]), Turn(user_message=USER_MESSAGE))


# --- the request litellm sends ------------------------------------------------------------------


@pytest.mark.parametrize("wire", WIRES)
async def test_request_names_the_judge_model_without_its_provider_prefix(
    http: respx.MockRouter, config_for: Callable[..., VerifierConfig], wire: Wire
) -> None:
    route = http.post(wire.url).mock(side_effect=answering(wire))
    await judge_once(config_for(wire))
    assert sent(route).body["model"] == wire.judge_model.split("/", 1)[1]


@pytest.mark.parametrize("wire", WIRES)
async def test_request_sends_the_rubric_first_then_the_review_request(
    http: respx.MockRouter, config_for: Callable[..., VerifierConfig], wire: Wire
) -> None:
    route = http.post(wire.url).mock(side_effect=answering(wire))
    await judge_once(config_for(wire))
    rubric, review = sent(route).prompt_texts
    assert rubric == system_prompt()
    assert USER_MESSAGE in review
    assert REPLY in review
    assert review.index(USER_MESSAGE) < review.index(REPLY)


@pytest.mark.parametrize(
    ("wire", "roles"),
    [
        pytest.param(OPENAI, ["system", "user"], id="openai"),
        pytest.param(ANTHROPIC, ["user"], id="anthropic"),
    ],
)
async def test_rubric_travels_in_the_providers_system_slot(
    http: respx.MockRouter, config_for: Callable[..., VerifierConfig], wire: Wire, roles: list[str]
) -> None:
    route = http.post(wire.url).mock(side_effect=answering(wire))
    await judge_once(config_for(wire))
    body = sent(route).body
    assert [m["role"] for m in body["messages"]] == roles
    assert ("system" in body) is (wire is ANTHROPIC)


@pytest.mark.parametrize("wire", WIRES)
async def test_request_asks_for_temperature_zero_and_judge_max_tokens(
    http: respx.MockRouter, config_for: Callable[..., VerifierConfig], wire: Wire
) -> None:
    route = http.post(wire.url).mock(side_effect=answering(wire))
    await judge_once(config_for(wire, judgeMaxTokens=300))
    body = sent(route).body
    assert body["temperature"] == 0
    assert body["max_tokens"] == 300


@pytest.mark.parametrize("wire", WIRES)
async def test_request_carries_the_api_key_in_the_providers_header(
    http: respx.MockRouter, config_for: Callable[..., VerifierConfig], wire: Wire
) -> None:
    route = http.post(wire.url).mock(side_effect=answering(wire))
    await judge_once(config_for(wire))
    assert sent(route).headers[wire.key_header] == f"{wire.key_prefix}{API_KEY}"


# --- reading the answer -------------------------------------------------------------------------


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize(
    ("text", "passed", "category", "feedback"),
    [
        pytest.param("The reply covers all three points.\nPASS", True, None, None, id="pass"),
        pytest.param(
            "Only two points are given.\nFAIL [incomplete]: add the third bullet on hiring.",
            False,
            FailCategory.INCOMPLETE,
            "add the third bullet on hiring.",
            id="fail",
        ),
    ],
)
async def test_verdict_is_read_from_the_answer(
    http: respx.MockRouter,
    config_for: Callable[..., VerifierConfig],
    wire: Wire,
    text: str,
    passed: bool,
    category: FailCategory | None,
    feedback: str | None,
) -> None:
    http.post(wire.url).mock(side_effect=answering(wire, text))
    verdict = await judge_once(config_for(wire))
    assert verdict.readable is True
    assert (verdict.passed, verdict.category, verdict.feedback) == (passed, category, feedback)


@pytest.mark.parametrize("wire", WIRES)
async def test_tokens_come_from_the_answers_usage(
    http: respx.MockRouter, config_for: Callable[..., VerifierConfig], wire: Wire
) -> None:
    http.post(wire.url).mock(side_effect=answering(wire, prompt_tokens=1234, completion_tokens=56))
    verdict = await judge_once(config_for(wire))
    assert (verdict.prompt_tokens, verdict.completion_tokens) == (1234, 56)


@pytest.mark.parametrize("wire", WIRES)
async def test_cost_is_priced_from_litellms_bundled_map(
    http: respx.MockRouter, config_for: Callable[..., VerifierConfig], wire: Wire
) -> None:
    priced_as = wire.judge_model.split("/", 1)[1]
    import litellm

    http.post(wire.url).mock(side_effect=answering(wire, prompt_tokens=1000, completion_tokens=100))
    verdict = await judge_once(config_for(wire))
    price = litellm.model_cost[priced_as]
    expected = 1000 * price["input_cost_per_token"] + 100 * price["output_cost_per_token"]
    assert verdict.cost_usd > 0
    assert verdict.cost_usd == pytest.approx(expected)


def _openai_with(message: dict[str, Any] | None) -> dict[str, Any]:
    body = openai_body(Step(), "gpt-4o-mini")
    if message is None:
        body["choices"] = []
    else:
        body["choices"][0]["message"] = message
    return body


def _anthropic_with(content: list[dict[str, Any]]) -> dict[str, Any]:
    body = anthropic_body(Step(), "claude-sonnet-4-5")
    body["content"] = content
    return body


TOOL_CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "submit_verdict", "arguments": '{"verdict": "PASS"}'},
}


@pytest.mark.parametrize(
    ("wire", "body"),
    [
        pytest.param(OPENAI, _openai_with(None), id="openai-empty-choices"),
        pytest.param(
            OPENAI, _openai_with({"role": "assistant", "content": None}), id="openai-null-content"
        ),
        pytest.param(
            OPENAI,
            _openai_with({"role": "assistant", "content": None, "tool_calls": [TOOL_CALL]}),
            id="openai-tool-calls-only",
        ),
        pytest.param(
            OPENAI,
            _openai_with({"role": "assistant", "content": None, "refusal": "I can't help."}),
            id="openai-refusal",
        ),
        pytest.param(ANTHROPIC, _anthropic_with([]), id="anthropic-empty-content"),
        pytest.param(
            ANTHROPIC,
            _anthropic_with([{"type": "tool_use", "id": "t1", "name": "verdict", "input": {}}]),
            id="anthropic-tool-use-only",
        ),
    ],
)
async def test_answer_without_text_fails_open_as_unreadable(
    http: respx.MockRouter,
    config_for: Callable[..., VerifierConfig],
    wire: Wire,
    body: dict[str, Any],
) -> None:
    http.post(wire.url).mock(return_value=httpx.Response(200, json=body))
    outcome = await run_turn(config_for(wire))
    assert (outcome.status, outcome.reason) == (Status.FAILED_OPEN, Reason.UNREADABLE_VERDICT)
    assert outcome.response == REPLY


# --- provider errors ----------------------------------------------------------------------------

ERROR_STATUSES = [
    pytest.param(500, id="500"),
    pytest.param(429, id="429"),
    pytest.param(401, id="401"),
]


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize("status", ERROR_STATUSES)
async def test_provider_error_fails_open_with_the_reply_delivered(
    http: respx.MockRouter, config_for: Callable[..., VerifierConfig], wire: Wire, status: int
) -> None:
    http.post(wire.url).mock(
        return_value=httpx.Response(status, content=wire.error(status, "something went wrong"))
    )
    outcome = await run_turn(config_for(wire))
    assert (outcome.status, outcome.reason) == (Status.FAILED_OPEN, Reason.JUDGE_ERROR)
    assert outcome.response == REPLY


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.parametrize("status", [pytest.param(500, id="500"), pytest.param(429, id="429")])
async def test_retryable_provider_error_is_not_retried_behind_the_deadline(
    http: respx.MockRouter, config_for: Callable[..., VerifierConfig], wire: Wire, status: int
) -> None:
    route = http.post(wire.url).mock(
        return_value=httpx.Response(
            status, content=wire.error(status, "try later"), headers={"retry-after": "0"}
        )
    )
    await run_turn(config_for(wire))
    assert route.call_count == 1


async def test_provider_error_prints_nothing(
    http: respx.MockRouter,
    config_for: Callable[..., VerifierConfig],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A library prints nothing to a host that configured no logging, errors included."""
    http.post(OPENAI.url).mock(return_value=httpx.Response(500, content=OPENAI.error(500, "x")))
    await run_turn(config_for(OPENAI))
    assert capsys.readouterr() == ("", "")


# --- fallback models ----------------------------------------------------------------------------


ANTHROPIC_OWN_KEY = "anthropic-own-key-0000"


async def _judge_with_failing_primary(
    http: respx.MockRouter,
    config_for: Callable[..., VerifierConfig],
    monkeypatch: pytest.MonkeyPatch,
    fallback_answer: str,
) -> tuple[respx.Route, respx.Route, Any]:
    """An OpenAI judge answering 500, then an Anthropic fallback with its own env key."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_OWN_KEY)
    first = http.post(OPENAI.url).mock(
        return_value=httpx.Response(500, content=OPENAI.error(500, "overloaded"))
    )
    fallback = http.post(ANTHROPIC.url).mock(side_effect=answering(ANTHROPIC, fallback_answer))
    config = config_for(
        OPENAI, agentModel="gemini/gemini-2.5-pro", fallbackModels=["anthropic/claude-haiku-4-5"]
    )
    return first, fallback, await judge_once(config)


async def test_fallback_model_gives_the_verdict_when_the_first_model_errors(
    http: respx.MockRouter,
    config_for: Callable[..., VerifierConfig],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    first, fallback, verdict = await _judge_with_failing_primary(
        http, config_for, monkeypatch, "FAIL [rule_violation]: use bullet points."
    )
    assert (first.call_count, fallback.call_count) == (1, 1)
    assert sent(fallback).body["model"] == "claude-haiku-4-5"
    assert verdict.model == "claude-haiku-4-5"
    assert (verdict.passed, verdict.category) == (False, FailCategory.RULE_VIOLATION)


async def test_configured_key_is_never_sent_to_a_fallback_of_another_provider(
    http: respx.MockRouter,
    config_for: Callable[..., VerifierConfig],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    first, fallback, _ = await _judge_with_failing_primary(http, config_for, monkeypatch, "PASS")
    assert sent(first).headers["authorization"] == f"Bearer {API_KEY}"
    assert sent(fallback).headers["x-api-key"] == ANTHROPIC_OWN_KEY


# --- reasoning (o-series) judges ----------------------------------------------------------------


@pytest.mark.parametrize("model", ["openai/o3-mini", "openai/gpt-5"])
async def test_a_reasoning_judge_gets_no_temperature_and_still_judges(
    http: respx.MockRouter, config_for: Callable[..., VerifierConfig], model: str
) -> None:
    route = http.post(OPENAI.url).mock(side_effect=answering(OPENAI, "PASS"))
    verdict = await judge_once(config_for(OPENAI, model=model))
    assert route.call_count == 1  # litellm refused temperature=0 before sending anything
    assert "temperature" not in sent(route).body
    assert (verdict.readable, verdict.passed, verdict.fail_open_reason) == (True, True, None)


def refusing(wire: Wire, option: str) -> Responder:
    """A provider that answers 400 naming ``option`` to any request carrying it."""

    def respond(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        if option in body:
            message = f"Unsupported value: '{option}' does not support this value with this model."
            return httpx.Response(400, content=wire.error(400, message))
        return httpx.Response(200, json=wire.answer(Step(text="PASS"), body["model"]))

    return respond


@pytest.mark.parametrize("wire", WIRES)
async def test_a_judge_that_refuses_temperature_still_judges_and_is_not_sent_it_again(
    http: respx.MockRouter, config_for: Callable[..., VerifierConfig], wire: Wire
) -> None:
    route = http.post(wire.url).mock(side_effect=refusing(wire, "temperature"))
    verifier = Verifier(config_for(wire))
    turn = Turn(user_message=USER_MESSAGE)
    first = await verifier.verify(turn, REPLY)
    second = await verifier.verify(turn, REPLY)
    assert [("temperature" in sent(route, i).body) for i in range(3)] == [True, False, False]
    for verdict in (first, second):
        assert (verdict.readable, verdict.passed, verdict.fail_open_reason) == (True, True, None)


@pytest.mark.parametrize("wire", WIRES)
async def test_a_400_naming_no_option_sent_is_still_a_configuration_error(
    http: respx.MockRouter, config_for: Callable[..., VerifierConfig], wire: Wire
) -> None:
    message = "Unsupported parameter: 'top_k' is not supported with this model."
    route = http.post(wire.url).mock(
        return_value=httpx.Response(400, content=wire.error(400, message))
    )
    verdict = await judge_once(config_for(wire))
    assert route.call_count == 1
    assert (verdict.passed, verdict.fail_open_reason) == (True, Reason.JUDGE_ERROR)


def test_the_judge_request_leaves_litellms_drop_params_alone(
    config_for: Callable[..., VerifierConfig],
) -> None:
    config = config_for(OPENAI)
    prompt = build_judge_prompt(
        Turn(user_message=USER_MESSAGE), REPLY, limits=ContextLimits(budget=4000)
    )
    params = LiteLLMJudge(config, Events()).request(
        config.model, prompt, timeout=1.0, api_key=API_KEY
    )
    assert "drop_params" not in params
    assert params["temperature"] == 0


@pytest.mark.parametrize(
    ("keys", "limit"),
    [
        pytest.param({}, 4096, id="default-rises-for-reasoning"),
        pytest.param({"judgeMaxTokens": 300}, 300, id="explicit-kept"),
    ],
)
async def test_o_series_judge_gets_its_token_limit_as_max_completion_tokens(
    http: respx.MockRouter,
    config_for: Callable[..., VerifierConfig],
    keys: dict[str, Any],
    limit: int,
) -> None:
    route = http.post(OPENAI.url).mock(side_effect=answering(OPENAI, "PASS"))
    await judge_once(config_for(OPENAI, model="openai/o3-mini", **keys))
    body = sent(route).body
    assert body["max_completion_tokens"] == limit
    assert "max_tokens" not in body
