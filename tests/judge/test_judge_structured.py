"""Structured output: a JSON schema ``response_format`` for judge models that support it.

respx stands in for OpenAI and Anthropic at their public endpoints, through the
``respx_litellm`` fixture.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
import respx

from conftest import API_KEY
from replyguard import FailCategory, Turn, Verifier, VerifierConfig
from replyguard.judge import VERDICT_FORMAT
from replyguard.types import Verdict
from support.provider_server import ANTHROPIC, OPENAI, Step

SUPPORTING = "openai/gpt-4o-mini"
NOT_SUPPORTING = "openai/gpt-3.5-turbo"
JSON_FAIL = json.dumps(
    {
        "reasoning": "The user asked for an email; none was sent.",
        "verdict": "FAIL",
        "category": "incomplete",
        "feedback": "Send the summary to Ana.",
    }
)


@pytest.fixture
def http(respx_litellm: None) -> Iterator[respx.MockRouter]:
    with respx.mock(assert_all_mocked=True, assert_all_called=False) as router:
        yield router


@pytest.fixture
def judge_with(make_config: Callable[..., VerifierConfig]) -> Callable[[str], VerifierConfig]:
    def build(model: str) -> VerifierConfig:
        return make_config(model=model, agentModel="anthropic/claude-sonnet-4-5", apiKey=API_KEY)

    return build


def answering(text: str) -> Callable[[httpx.Request], httpx.Response]:
    def respond(request: httpx.Request) -> httpx.Response:
        model = json.loads(request.content)["model"]
        return httpx.Response(200, json=OPENAI.answer(Step(text=text), model))

    return respond


async def judge(config: VerifierConfig) -> Verdict:
    return await Verifier(config).verify(Turn(user_message="Email the summary to Ana."), "Done.")


def sent(route: respx.Route) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(route.calls[0].request.content)
    return body


async def test_a_supporting_model_is_asked_for_the_verdict_schema(
    http: respx.MockRouter, judge_with: Callable[[str], VerifierConfig]
) -> None:
    route = http.post(OPENAI.url).mock(side_effect=answering(JSON_FAIL))
    await judge(judge_with(SUPPORTING))
    assert sent(route)["response_format"] == VERDICT_FORMAT


async def test_a_model_without_schema_support_gets_the_text_format(
    http: respx.MockRouter, judge_with: Callable[[str], VerifierConfig]
) -> None:
    route = http.post(OPENAI.url).mock(side_effect=answering("PASS"))
    await judge(judge_with(NOT_SUPPORTING))
    assert "response_format" not in sent(route)


async def test_a_failing_support_check_falls_back_to_the_text_format(
    http: respx.MockRouter,
    judge_with: Callable[[str], VerifierConfig],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import litellm

    def broken(**_: Any) -> bool:
        raise KeyError("model map")

    monkeypatch.setattr(litellm, "supports_response_schema", broken)
    route = http.post(OPENAI.url).mock(side_effect=answering("PASS"))
    await judge(judge_with(SUPPORTING))
    assert "response_format" not in sent(route)


async def test_the_schema_changes_no_other_request_parameter(
    http: respx.MockRouter, judge_with: Callable[[str], VerifierConfig]
) -> None:
    route = http.post(OPENAI.url).mock(side_effect=answering("PASS"))
    await judge(judge_with(SUPPORTING))
    await judge(judge_with(NOT_SUPPORTING))
    with_schema = json.loads(route.calls[0].request.content)
    without = json.loads(route.calls[1].request.content)
    del with_schema["response_format"]
    for body in (with_schema, without):  # the model differs, and each prompt has its own code
        del body["model"], body["messages"]
    assert with_schema == without


async def test_a_json_verdict_answer_is_parsed(
    http: respx.MockRouter, judge_with: Callable[[str], VerifierConfig]
) -> None:
    http.post(OPENAI.url).mock(side_effect=answering(JSON_FAIL))
    verdict = await judge(judge_with(SUPPORTING))
    assert (verdict.passed, verdict.category, verdict.feedback, verdict.readable) == (
        False,
        FailCategory.INCOMPLETE,
        "Send the summary to Ana.",
        True,
    )
    assert verdict.reasoning == "The user asked for an email; none was sent."


async def test_a_tool_call_only_answer_stays_unreadable_with_the_schema(
    http: respx.MockRouter, judge_with: Callable[[str], VerifierConfig]
) -> None:
    body = OPENAI.answer(Step(text=None), "gpt-4o-mini")
    body["choices"][0]["message"]["tool_calls"] = [
        {"id": "c1", "type": "function", "function": {"name": "verdict", "arguments": "{}"}}
    ]
    http.post(OPENAI.url).mock(return_value=httpx.Response(200, json=body))
    verdict = await judge(judge_with(SUPPORTING))
    assert (verdict.passed, verdict.readable) == (True, False)


# -- Anthropic: the schema in its native form ----------------------------------------------------

ANTHROPIC_NATIVE = "anthropic/claude-sonnet-4-5"  # litellm sends the schema as ``output_format``
ANTHROPIC_TOOL = "anthropic/claude-opus-4-1"  # litellm sends the schema as a forced JSON tool


def anthropic_answering(text: str) -> Callable[[httpx.Request], httpx.Response]:
    def respond(request: httpx.Request) -> httpx.Response:
        model = json.loads(request.content)["model"]
        return httpx.Response(200, json=ANTHROPIC.answer(Step(text=text), model))

    return respond


@pytest.mark.parametrize("model", [ANTHROPIC_NATIVE, ANTHROPIC_TOOL])
async def test_an_anthropic_judge_sends_what_litellm_makes_of_the_schema(
    http: respx.MockRouter, make_config: Callable[..., VerifierConfig], model: str
) -> None:
    """Whatever form the judge hands litellm the schema in, the request on the wire is the one
    litellm makes of ``response_format`` (body and headers, the beta header included)."""
    import litellm

    route = http.post(ANTHROPIC.url).mock(side_effect=anthropic_answering(JSON_FAIL))
    config = make_config(model=model, agentModel="openai/gpt-4o", apiKey=API_KEY)
    verdict = await judge(config)
    judged = route.calls[0].request
    params = {
        key: value
        for key, value in json.loads(judged.content).items()
        if key in ("temperature", "max_tokens")
    }
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    await litellm.acompletion(
        model=model,
        messages=messages,
        api_key=API_KEY,
        response_format=VERDICT_FORMAT,
        max_retries=0,
        **params,
    )
    raw = route.calls[1].request
    judged_body, raw_body = json.loads(judged.content), json.loads(raw.content)
    for body in (judged_body, raw_body):  # the prompts differ
        del body["messages"], body["system"]
    assert judged_body == raw_body
    assert judged.headers.get("anthropic-beta") == raw.headers.get("anthropic-beta")
    assert ("output_format" in judged_body) is (model == ANTHROPIC_NATIVE)
    assert ("tools" in judged_body) is (model == ANTHROPIC_TOOL)
    assert (verdict.passed, verdict.category, verdict.readable) == (
        False,
        FailCategory.INCOMPLETE,
        True,
    )


async def test_an_anthropic_judge_that_refuses_the_schema_is_asked_without_it_from_then_on(
    http: respx.MockRouter, make_config: Callable[..., VerifierConfig]
) -> None:
    def respond(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        if "output_format" in body:
            message = "output_format: Extra inputs are not permitted"
            return httpx.Response(400, content=ANTHROPIC.error(400, message))
        return httpx.Response(200, json=ANTHROPIC.answer(Step(text="PASS"), body["model"]))

    route = http.post(ANTHROPIC.url).mock(side_effect=respond)
    config = make_config(model=ANTHROPIC_NATIVE, agentModel="openai/gpt-4o", apiKey=API_KEY)
    verifier = Verifier(config)
    turn = Turn(user_message="Email the summary to Ana.")
    verdicts = [await verifier.verify(turn, "Done."), await verifier.verify(turn, "Done.")]
    assert [("output_format" in sent_at(route, i)) for i in range(3)] == [True, False, False]
    for verdict in verdicts:
        assert (verdict.passed, verdict.readable, verdict.fail_open_reason) == (True, True, None)


def sent_at(route: respx.Route, index: int) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(route.calls[index].request.content)
    return body
