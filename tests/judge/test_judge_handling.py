"""The judge's handling around its litellm call, made cheaper without changing what it does:
the per-model request template (``RequestPlan.params``), the literal key kept per config, the
answer read without validating its valid fields again (``read_response``), a plain PASS's
fields read once per answer (``plain_pass``, ``readable``), the lean shield around the call's
task (``shielded``) and the client scope's calls in flight (``_Calls``)."""

from __future__ import annotations

import asyncio
import gc
import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
import respx
from pydantic import ValidationError

from conftest import API_KEY
from replyguard import Turn, Verifier, VerifierConfig
from replyguard.context import ContextLimits, JudgePrompt, build_judge_prompt
from replyguard.judge import LiteLLMJudge
from replyguard.judge import _requests as requests_module
from replyguard.judge._clients import _Calls
from replyguard.judge._litellm import read_response
from replyguard.judge._protocol import JudgeReply, plain_pass, readable
from replyguard.judge._settling import shielded
from replyguard.judge._verdict import parse_verdict
from replyguard.telemetry import Events
from support.provider_server import ANTHROPIC, OPENAI, Step, Wire

WIRES = [pytest.param(OPENAI, id="openai"), pytest.param(ANTHROPIC, id="anthropic")]
REPLY = "Done: three bullet points on revenue, costs and hiring."


@pytest.fixture
def config_for(make_config: Callable[..., VerifierConfig]) -> Callable[..., VerifierConfig]:
    """A config judged by ``wire``'s model with the test key, every reply judged."""
    base = {"verifyAll": True, "apiKey": API_KEY}
    return lambda wire, **keys: make_config(
        **{**base, "model": wire.judge_model, "agentModel": wire.agent_model, **keys}
    )


def prompt_of(question: str) -> JudgePrompt:
    return build_judge_prompt(Turn(user_message=question), REPLY, limits=ContextLimits(budget=4000))


def params_of(judge: LiteLLMJudge, prompt: JudgePrompt, api_key: str | None = API_KEY) -> Any:
    model = judge._config.model
    return judge.request(model, prompt, timeout=judge.client_timeout, api_key=api_key)


def built_by_hand(judge: LiteLLMJudge, prompt: JudgePrompt, api_key: str | None) -> Any:
    """The options as the plan made them before it kept a template: built anew, in order."""
    plan, config = judge._plan, judge._config
    model = config.model
    params: dict[str, Any] = {
        "model": model,
        "messages": requests_module.with_cached_system(plan.models_behind(model), prompt.messages),
        "max_tokens": config.judge_max_tokens_for(model),
        "timeout": plan.client_timeout,
        "max_retries": 0,
        "num_retries": 0,
        "temperature": 0,
    }
    if plan._wants_structured(model):
        params.update(plan._format_params(model))
    if plan._own_credentials.get(model, False):
        params["api_base"] = config.api_base
        params["api_key"] = api_key
    return params


# --- the request template ---------------------------------------------------------------------


@pytest.mark.parametrize("wire", WIRES)
async def test_each_call_gets_its_own_messages_key_and_a_dict_of_its_own(
    config_for: Callable[..., VerifierConfig], wire: Wire
) -> None:
    judge = LiteLLMJudge(config_for(wire), Events())
    await judge.warmup()
    first_prompt, second_prompt = (
        prompt_of("Summarise the report."),
        prompt_of("Name three cities."),
    )
    first = params_of(judge, first_prompt, api_key="key-one")
    # A careless caller changes what it was given, nested values included.
    first["messages"].append({"role": "user", "content": "injected"})
    first["temperature"] = 1
    first["client"] = object()
    first.pop("max_tokens")
    second = params_of(judge, second_prompt, api_key="key-two")
    assert second == built_by_hand(judge, second_prompt, "key-two")
    assert list(second) == list(built_by_hand(judge, second_prompt, "key-two"))
    assert "Name three cities." in json.dumps(second["messages"])
    assert "Summarise the report." not in json.dumps(second["messages"])
    assert "client" not in second
    assert second["api_key"] == "key-two"


@pytest.mark.parametrize("wire", WIRES)
async def test_the_options_sent_are_those_built_anew_on_every_call(
    config_for: Callable[..., VerifierConfig], wire: Wire
) -> None:
    judge = LiteLLMJudge(config_for(wire, judgeMaxTokens=321), Events())
    await judge.warmup()
    prompt = prompt_of("Summarise the report.")
    for _ in range(3):
        params = params_of(judge, prompt)
        expected = built_by_hand(judge, prompt, API_KEY)
        assert params == expected
        assert list(params) == list(expected)  # the same order too
        assert params["max_tokens"] == 321


async def test_verdict_first_calls_each_get_their_own_stream_options(
    config_for: Callable[..., VerifierConfig],
) -> None:
    judge = LiteLLMJudge(config_for(OPENAI, judgeAnswer="verdict_first"), Events())
    await judge.warmup()
    prompt = prompt_of("Summarise the report.")
    first = params_of(judge, prompt)
    first["stream_options"]["include_usage"] = False
    second = params_of(judge, prompt)
    assert second["stream"] is True
    assert second["stream_options"] == {"include_usage": True}
    assert list(second)[-2:] == ["stream", "stream_options"]


async def test_an_option_refused_is_left_out_of_the_template_from_then_on(
    config_for: Callable[..., VerifierConfig],
) -> None:
    judge = LiteLLMJudge(config_for(OPENAI), Events())
    await judge.warmup()
    prompt = prompt_of("Summarise the report.")
    assert "temperature" in params_of(judge, prompt)  # the template is kept

    class Refused(Exception):
        status_code = 400

    sent: list[dict[str, Any]] = []

    async def call(**params: Any) -> str:
        sent.append(params)
        if "temperature" in params:
            raise Refused("Unsupported value: 'temperature' does not support 0 with this model")
        return "answered"

    params = params_of(judge, prompt)
    assert await judge._plan.send(call, judge._config.model, params) == "answered"
    assert ["temperature" in p for p in sent] == [True, False]
    after = params_of(judge, prompt)
    assert "temperature" not in after
    assert after == {
        k: v for k, v in built_by_hand(judge, prompt, API_KEY).items() if k != "temperature"
    }


async def test_no_template_is_kept_while_litellm_is_not_loaded(
    config_for: Callable[..., VerifierConfig], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before litellm is loaded, whether the schema is sent is a guess: not kept."""
    judge = LiteLLMJudge(config_for(OPENAI), Events())
    prompt = prompt_of("Summarise the report.")
    monkeypatch.setattr(requests_module, "_loaded_litellm", lambda: None)
    monkeypatch.setattr(requests_module, "supports_structured_verdict", lambda model: False)
    assert "response_format" not in params_of(judge, prompt)
    monkeypatch.undo()
    await judge.warmup()
    assert "response_format" in params_of(judge, prompt)  # asked again, now known


async def test_a_new_config_gets_a_plan_of_its_own(
    config_for: Callable[..., VerifierConfig],
) -> None:
    judge = LiteLLMJudge(config_for(OPENAI, judgeMaxTokens=300), Events())
    await judge.warmup()
    prompt = prompt_of("Summarise the report.")
    assert params_of(judge, prompt)["max_tokens"] == 300
    reloaded = judge.sibling(config_for(OPENAI, judgeMaxTokens=500))
    assert params_of(reloaded, prompt)["max_tokens"] == 500
    assert params_of(judge, prompt)["max_tokens"] == 300


def test_an_env_key_is_read_on_every_call_a_literal_one_kept(
    config_for: Callable[..., VerifierConfig], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RG_TEST_JUDGE_KEY", "sk-first-0123456789")
    from_env = LiteLLMJudge(config_for(OPENAI, apiKey="env:RG_TEST_JUDGE_KEY"), Events())
    assert from_env._plan.api_key() == "sk-first-0123456789"
    monkeypatch.setenv("RG_TEST_JUDGE_KEY", "sk-second-0123456789")
    assert from_env._plan.api_key() == "sk-second-0123456789"
    literal = LiteLLMJudge(config_for(OPENAI), Events())
    assert literal._plan.api_key() == API_KEY
    unset = LiteLLMJudge(config_for(OPENAI, apiKey=None), Events())
    assert unset._plan.api_key() is None


@pytest.fixture
def http(respx_litellm: None) -> Iterator[respx.MockRouter]:
    with respx.mock(assert_all_mocked=True, assert_all_called=False) as router:
        yield router


@pytest.mark.parametrize("wire", WIRES)
async def test_two_turns_send_each_their_own_prompt_on_the_wire(
    http: respx.MockRouter, config_for: Callable[..., VerifierConfig], wire: Wire
) -> None:
    def respond(request: httpx.Request) -> httpx.Response:
        model = json.loads(request.content)["model"]
        return httpx.Response(200, json=wire.answer(Step(text="PASS"), model))

    route = http.post(wire.url).mock(side_effect=respond)
    verifier = Verifier(config_for(wire))
    await verifier.verify(Turn(user_message="Summarise the report."), REPLY)
    await verifier.verify(Turn(user_message="Name three cities."), REPLY)
    first, second = (json.loads(call.request.content) for call in route.calls)
    assert "Summarise the report." in json.dumps(first) and "Name three" not in json.dumps(first)
    assert "Name three cities." in json.dumps(second) and "Summarise" not in json.dumps(second)
    assert {k: v for k, v in first.items() if k not in ("messages", "system")} == {
        k: v for k, v in second.items() if k not in ("messages", "system")
    }


# --- reading the answer -----------------------------------------------------------------------


def litellm_response(content: Any, prompt_tokens: int = 900, cost: float = 0.001) -> Any:
    from litellm.types.utils import ModelResponse

    response = ModelResponse(
        id="x",
        created=1,
        model="gpt-4o-mini",
        choices=[{"index": 0, "message": {"role": "assistant", "content": content}}],
        usage={"prompt_tokens": prompt_tokens, "completion_tokens": 12, "total_tokens": 912},
    )
    response._hidden_params["response_cost"] = cost
    return response


def validated(reply: JudgeReply) -> JudgeReply:
    return JudgeReply(**reply.model_dump())


@pytest.mark.parametrize(
    "response",
    [
        pytest.param(lambda: litellm_response("The reply does.\nPASS"), id="model-response"),
        pytest.param(lambda: litellm_response(None), id="no-content"),
        pytest.param(
            lambda: {
                "model": "m",
                "choices": [{"message": {"content": "FAIL"}}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 4},
            },
            id="dict",
        ),
        pytest.param(lambda: {"choices": []}, id="no-choices"),
    ],
)
def test_the_answer_read_is_the_one_validation_makes(response: Callable[[], Any]) -> None:
    reply = read_response(response(), "openai/gpt-4o-mini", set())
    again = validated(reply)
    assert reply == again
    assert reply.__dict__ == again.__dict__
    assert reply.model_fields_set == again.model_fields_set
    assert [type(v) for v in reply.__dict__.values()] == [type(v) for v in again.__dict__.values()]


@pytest.mark.parametrize(
    "response",
    [
        pytest.param(lambda: litellm_response("PASS", prompt_tokens=-5), id="negative-tokens"),
        pytest.param(lambda: litellm_response("PASS", cost=-0.5), id="negative-cost"),
        pytest.param(lambda: litellm_response("PASS", cost=float("nan")), id="nan-cost"),
    ],
)
def test_an_answer_with_invalid_usage_is_refused_as_before(response: Callable[[], Any]) -> None:
    with pytest.raises(ValidationError):
        read_response(response(), "openai/gpt-4o-mini", set())


def test_a_text_of_a_str_subclass_is_validated_to_a_plain_str() -> None:
    class Text(str):
        pass

    answer = {"model": "m", "choices": [{"message": {"content": Text("PASS")}}]}
    reply = read_response(answer, "m", set())
    assert reply == JudgeReply(text=Text("PASS"), model="m")
    assert reply.model_fields_set == JudgeReply(text="PASS", model="m", note=None,
        prompt_tokens=0, completion_tokens=0, cost_usd=0.0).model_fields_set  # fmt: skip


# --- a plain PASS read once -------------------------------------------------------------------


PLAIN = "The reply answers the question.\nPASS"


async def test_a_plain_pass_is_readable_without_keeping_a_verdict() -> None:
    reply = JudgeReply(text=PLAIN, model="m")
    assert await readable(reply) is True
    assert "verdict" not in reply.__dict__  # the runner makes the turn's verdict once
    fields = plain_pass(reply)
    assert fields is not None
    verdict = reply.verdict  # made of the fields read
    expected = parse_verdict(PLAIN)
    assert verdict == expected
    assert verdict.model_fields_set == expected.model_fields_set


@pytest.mark.parametrize(
    ("text", "is_readable"),
    [
        pytest.param("It lacks the third point.\nFAIL [incomplete]: add it", True, id="fail"),
        pytest.param('{"verdict": "PASS", "reasoning": "ok"}', True, id="json"),
        pytest.param("I cannot tell.", False, id="unreadable"),
        pytest.param("   ", False, id="blank"),
    ],
)
async def test_any_other_answer_is_parsed_and_its_verdict_kept(
    text: str, is_readable: bool
) -> None:
    reply = JudgeReply(text=text, model="m")
    assert await readable(reply) is is_readable
    assert reply.__dict__["verdict"] == parse_verdict(text)


async def test_the_fields_kept_are_handed_out_as_a_copy() -> None:
    reply = JudgeReply(text=PLAIN, model="m")
    assert await readable(reply) is True
    assert "plain_pass" in reply.__dict__
    first = plain_pass(reply)
    assert first is not None
    first["passed"] = False
    first["reasoning"] = "tampered"
    second = plain_pass(reply)
    assert second is not None and second["passed"] is True
    assert second["reasoning"] == "The reply answers the question."
    assert reply.verdict == parse_verdict(PLAIN)


async def test_a_copy_with_another_text_is_read_anew() -> None:
    reply = JudgeReply(text=PLAIN, model="m")
    assert await readable(reply) is True
    changed = reply.model_copy(update={"text": "It lacks a point.\nFAIL [incomplete]: add it"})
    assert plain_pass(changed) is None
    assert changed.verdict.passed is False
    assert changed.verdict == parse_verdict(changed.text)


# --- the call's shield ------------------------------------------------------------------------


async def test_the_shield_passes_on_a_result_an_error_and_a_cancellation() -> None:
    async def answer() -> str:
        await asyncio.sleep(0)
        return "answer"

    async def fail() -> str:
        await asyncio.sleep(0)
        raise ValueError("no")

    async def cancelled() -> str:
        asyncio.current_task().cancel()  # type: ignore[union-attr]
        await asyncio.sleep(0)
        return "never"

    assert await shielded(asyncio.create_task(answer())) == "answer"
    with pytest.raises(ValueError, match="no"):
        await shielded(asyncio.create_task(fail()))
    with pytest.raises(asyncio.CancelledError):
        await shielded(asyncio.create_task(cancelled()))


async def test_cancelling_the_waiter_leaves_the_call_running_and_its_error_read() -> None:
    release = asyncio.Event()
    unhandled: list[dict[str, Any]] = []
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _, context: unhandled.append(context))

    async def call() -> str:
        await release.wait()
        raise ValueError("late")

    task = asyncio.create_task(call())
    waiter = asyncio.create_task(asyncio.wait_for(shielded(task), None))
    await asyncio.sleep(0)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert not task.done()  # the call goes on: only ``let_go`` cancels it
    release.set()
    with pytest.raises(ValueError, match="late"):
        await task
    del task
    gc.collect()
    loop.set_exception_handler(None)
    assert unhandled == []


# --- calls in flight --------------------------------------------------------------------------


async def test_calls_in_flight_are_waited_for_only_when_someone_waits() -> None:
    calls = _Calls()
    calls.enter(0)
    calls.leave(0)
    assert calls.counts == {} and calls.idle == {}  # no event made for a call nobody awaited
    calls.enter(0)
    calls.enter(0)
    calls.enter(1)
    waiting = calls.before(1)
    assert len(waiting) == 1 and not waiting[0].is_set()
    assert calls.before(1) == waiting  # the same event for the same generation
    calls.leave(0)
    assert not waiting[0].is_set()
    calls.leave(0)
    assert waiting[0].is_set()
    await asyncio.wait_for(waiting[0].wait(), 1)
    assert calls.before(2) == [calls.idle[1]]
    calls.leave(1)
    assert calls.counts == {} and calls.idle == {}
