"""``judgeAnswer: "verdict_first"``: the judge's answer streamed, a PASS ending the call at once.

The loopback provider (``support.provider_server``) streams each answer in its wire's real
format (OpenAI chunks, Anthropic's events), a piece at a time; that the call ended at the
verdict is proved by the server seeing the client close the stream before its end
(``ProviderServer.cut``), never by a wall time.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from conftest import API_KEY
from replyguard import Turn, Verifier, VerifierConfig
from replyguard.judge._protocol import verdict_format
from replyguard.judge._streamed import as_read, early_pass
from replyguard.types import FailCategory, Reason, Verdict
from support.provider_server import ANTHROPIC, OPENAI, ProviderServer, Step, Wire

WIRES = [pytest.param(OPENAI, id="openai"), pytest.param(ANTHROPIC, id="anthropic")]
TEXT_MODEL = "openai/gpt-3.5-turbo"  # litellm says it takes no JSON schema: the text format
REASONING = tuple(f"word{i} " for i in range(40))


def pieces(text: str, size: int = 6) -> tuple[str, ...]:
    return tuple(text[i : i + size] for i in range(0, len(text), size))


def json_answer(verdict: str, **fields: Any) -> str:
    body = {"verdict": verdict, "category": None, "feedback": ""}
    body.update(fields)
    body["reasoning"] = "".join(REASONING)
    return json.dumps(body)


@pytest.fixture
def config_for(
    make_config: Callable[..., VerifierConfig], provider: ProviderServer
) -> Callable[..., VerifierConfig]:
    def build(wire: Wire, **keys: Any) -> VerifierConfig:
        base = {
            "model": wire.judge_model,
            "agentModel": wire.agent_model,
            "apiKey": API_KEY,
            "apiBase": provider.url,
            "judgeAnswer": "verdict_first",
        }
        return make_config(**{**base, **keys})

    return build


async def judge(config: VerifierConfig) -> Verdict:
    verifier = Verifier(config)
    try:
        return await verifier.verify(Turn(user_message="Email the summary to Ana."), "Sent.")
    finally:
        await verifier.aclose()


# --- what a stream's start decides ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("start", "decided"),
    [
        ('{"verdict": "PASS"', '{"verdict": "PASS", "awaitingUser": false}'),
        ('{"verdict":"PASS [awaiting_user]"', '{"verdict": "PASS", "awaitingUser": true}'),
        ('{"verdict": "PASS', None),  # not yet: the value may go on
        ('{"verdict": "PASS [await', None),
        ('{"verdict": "FAIL"', None),  # a FAIL is read to its end
        ('{"verdict": "PASSED"', None),
        ('{"verdict": "PA\\u0053S"', None),  # an escape: read whole, by the parser
        ('{"reasoning": "PASS", "verdict": "PASS"', None),
        ("PASS\n", "PASS"),
        ("**Verdict:** PASS [awaiting_user]\nThe", "**Verdict:** PASS [awaiting_user]"),
        ("PASS", None),  # the line is not finished
        ("> PASS\n", None),  # quoted
        ('"PASS"\n', None),
        ("```\nPASS\n", None),  # a fence first
        ("FAIL [incomplete]: send it\n", None),
        ("The reply passes.\nPASS\n", None),  # reasoning first: read to the end
        ("Passing the tests is fine\n", None),
    ],
)
def test_only_a_leading_pass_decides_early(start: str, decided: str | None) -> None:
    assert early_pass(start) == decided


def test_a_text_answer_led_by_its_verdict_is_read_with_the_lines_after_it_as_reasoning() -> None:
    text = "FAIL [incomplete]: Send it to Ana.\nThe user asked for an email."
    moved = "The user asked for an email.\n\nFAIL [incomplete]: Send it to Ana."
    assert as_read(text) == moved
    assert as_read("Reasoning.\nPASS") == "Reasoning.\nPASS"
    assert as_read('{"verdict": "PASS"}') == '{"verdict": "PASS"}'
    awaiting = json.loads(as_read('{"verdict": "pass [awaiting_user]", "reasoning": "Asks."}'))
    assert awaiting == {"verdict": "PASS", "awaitingUser": True, "reasoning": "Asks."}


def test_the_verdict_first_schema_leads_with_the_verdict_and_keeps_every_key() -> None:
    first = verdict_format((), True)["json_schema"]["schema"]
    plain = verdict_format(())["json_schema"]["schema"]
    assert next(iter(first["properties"])) == "verdict"
    assert first["properties"]["verdict"]["enum"] == ["PASS", "PASS [awaiting_user]", "FAIL"]
    assert list(first["properties"])[-1] == "reasoning"
    assert first["required"] == list(first["properties"])
    assert set(first["properties"]) == set(plain["properties"]) - {"awaitingUser"}
    assert next(iter(plain["properties"])) == "reasoning"  # the default order is unchanged


# --- a PASS ends the call -------------------------------------------------------------------------


@pytest.mark.parametrize("wire", WIRES)
async def test_a_pass_closes_the_stream_before_the_reasoning_and_counts_what_came(
    provider: ProviderServer, config_for: Callable[..., VerifierConfig], wire: Wire
) -> None:
    chunks = pieces(json_answer("PASS"))
    provider.push(Step(chunks=chunks, pace=0.05, completion_tokens=120))
    verdict = await judge(config_for(wire))
    assert verdict.passed and verdict.readable and not verdict.awaiting_user
    assert await provider.wait_for_cut(1) == 1
    events_before_text = 1 if wire is OPENAI else 3  # Anthropic opens with two events
    assert provider.cut[0].sent - events_before_text < len(chunks) // 2
    sent = provider.seen[0].body
    assert sent["stream"] is True
    assert "verdict first" in json.dumps(sent)
    assert 0 < verdict.completion_tokens < 120  # what was received, not the whole answer
    assert verdict.prompt_tokens > 0 and verdict.cost_usd > 0


async def test_a_text_pass_awaiting_the_user_ends_at_its_line(
    provider: ProviderServer, config_for: Callable[..., VerifierConfig]
) -> None:
    provider.push(Step(chunks=("PASS [awaiting_user]", "\n", *REASONING), pace=0.05))
    verdict = await judge(config_for(OPENAI, model=TEXT_MODEL))
    assert verdict.passed and verdict.awaiting_user
    assert await provider.wait_for_cut(1) == 1
    assert "response_format" not in provider.seen[0].body


# --- a FAIL is read to its end --------------------------------------------------------------------


@pytest.mark.parametrize("wire", WIRES)
async def test_a_fail_is_read_to_its_end_for_its_feedback(
    provider: ProviderServer, config_for: Callable[..., VerifierConfig], wire: Wire
) -> None:
    answer = json_answer("FAIL", category="incomplete", feedback="Send the email to Ana.")
    provider.push(Step(chunks=pieces(answer), completion_tokens=77))
    verdict = await judge(config_for(wire))
    assert not verdict.passed
    assert verdict.category is FailCategory.INCOMPLETE
    assert verdict.feedback == "Send the email to Ana."
    assert verdict.reasoning == "".join(REASONING).strip()
    assert verdict.completion_tokens == 77  # the provider's own usage
    assert provider.cut == []


@pytest.mark.parametrize(
    ("text", "category", "feedback", "reasoning"),
    [
        pytest.param(
            "FAIL [incomplete]: Send the email to Ana.\nNo email was sent.\n",
            FailCategory.INCOMPLETE, "Send the email to Ana.", "No email was sent.",
            id="verdict-first-text-fail",
        ),
        pytest.param(  # the judge reasoned first anyway: read whole, as before
            "The reply mentions PASS.\nFAIL [refusal]: Do it.",
            FailCategory.REFUSAL, "Do it.", "The reply mentions PASS.",
            id="reasoning-first",
        ),
        pytest.param(  # a quoted verdict first never ends the call
            "> PASS\nThe reply quotes a verdict.\nFAIL [rule_violation]: Do not address me.",
            FailCategory.RULE_VIOLATION, "Do not address me.", None,
            id="quoted-pass-first",
        ),
    ],
)  # fmt: skip
async def test_a_text_answer_that_decides_nothing_early_is_read_to_its_end(
    provider: ProviderServer,
    config_for: Callable[..., VerifierConfig],
    text: str,
    category: FailCategory,
    feedback: str,
    reasoning: str | None,
) -> None:
    provider.push(Step(chunks=pieces(text)))
    verdict = await judge(config_for(OPENAI, model=TEXT_MODEL))
    assert not verdict.passed and verdict.category is category
    assert verdict.feedback == feedback
    if reasoning is not None:
        assert verdict.reasoning == reasoning
    assert provider.cut == []


async def test_json_keys_in_another_order_are_read_whole(
    provider: ProviderServer, config_for: Callable[..., VerifierConfig]
) -> None:
    answer = json.dumps({"reasoning": "Fine.", "verdict": "PASS [awaiting_user]"})
    provider.push(Step(chunks=pieces(answer)))
    verdict = await judge(config_for(OPENAI))
    assert verdict.passed and verdict.awaiting_user and verdict.reasoning == "Fine."
    assert provider.cut == []


# --- every fault fails open -----------------------------------------------------------------------


@pytest.mark.parametrize("wire", WIRES)
async def test_a_stream_cut_mid_way_fails_open(
    provider: ProviderServer, config_for: Callable[..., VerifierConfig], wire: Wire
) -> None:
    answer = json_answer("FAIL", category="incomplete", feedback="Send it.")
    provider.push(Step(chunks=pieces(answer), cut_after=5))
    verdict = await judge(config_for(wire))
    assert verdict.passed and not verdict.readable
    assert verdict.fail_open_reason is Reason.JUDGE_ERROR


async def test_a_cut_stream_goes_on_to_the_fallback_model(
    provider: ProviderServer, config_for: Callable[..., VerifierConfig]
) -> None:
    answer = json_answer("FAIL", category="incomplete", feedback="Send it.")
    provider.push(Step(chunks=pieces(answer), cut_after=5), Step(chunks=pieces(answer)))
    config = config_for(OPENAI, fallbackModels=["openai/gpt-4o"])
    verdict = await judge(config)
    assert not verdict.passed and verdict.feedback == "Send it."
    assert [seen.body["model"] for seen in provider.seen] == ["gpt-4o-mini", "gpt-4o"]


@pytest.mark.parametrize(
    "garbage",
    [
        pytest.param(b"data: {not json\n\n", id="bad-json"),
        pytest.param(b'data: {"choices": "nope"}\n\n', id="wrong-shape"),
        pytest.param(b"\xff\xfe\x00garbage\n\n", id="bytes"),
    ],
)
async def test_a_garbled_stream_fails_open(
    provider: ProviderServer, config_for: Callable[..., VerifierConfig], garbage: bytes
) -> None:
    head = (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
    )
    body = f"{len(garbage):x}\r\n".encode() + garbage + b"\r\n0\r\n\r\n"
    provider.push(Step(raw=head + body))
    verdict = await judge(config_for(OPENAI))
    assert verdict.passed and not verdict.readable
    assert verdict.fail_open_reason in (Reason.JUDGE_ERROR, Reason.UNREADABLE_VERDICT)


@pytest.mark.timing
async def test_the_deadline_closes_a_stalled_stream_and_fails_open(
    provider: ProviderServer, config_for: Callable[..., VerifierConfig]
) -> None:
    provider.push(Step(chunks=pieces(json_answer("PASS")), stall_after=2))  # before "PASS"
    verdict = await judge(config_for(OPENAI, timeoutSeconds=0.5))
    assert verdict.passed and verdict.fail_open_reason is Reason.JUDGE_TIMEOUT
    assert await provider.wait_for_cut(1) == 1  # the client closed it: the server saw it


async def test_an_empty_stream_is_unreadable(
    provider: ProviderServer, config_for: Callable[..., VerifierConfig]
) -> None:
    provider.push(Step(chunks=()))
    verdict = await judge(config_for(OPENAI))
    assert verdict.passed and verdict.fail_open_reason is Reason.UNREADABLE_VERDICT


async def test_reasoning_first_stays_the_default_and_is_not_streamed(
    provider: ProviderServer, make_config: Callable[..., VerifierConfig]
) -> None:
    provider.push(Step(text="Fine.\nPASS"))
    config = make_config(
        model=OPENAI.judge_model, agentModel=OPENAI.agent_model, apiKey=API_KEY,
        apiBase=provider.url,
    )  # fmt: skip
    assert config.judge_answer == "reasoning_first"
    assert (await judge(config)).passed
    assert "stream" not in provider.seen[0].body


def test_an_unknown_judge_answer_is_an_error_naming_the_key(
    make_config: Callable[..., VerifierConfig],
) -> None:
    with pytest.raises(Exception, match="judgeAnswer"):
        make_config(judgeAnswer="as_read")


# --- at the httpx boundary (respx), litellm's other transport -------------------------------------


def sse_body(wire: Wire, text: str) -> bytes:
    from support.provider_server import anthropic_events, openai_chunks

    step = Step(chunks=pieces(text), completion_tokens=50)
    model = wire.judge_model.split("/", 1)[1]
    if wire is OPENAI:
        events = [f"data: {json.dumps(c)}\n\n" for c in openai_chunks(step, model, usage=True)]
        return ("".join(events) + "data: [DONE]\n\n").encode()
    return "".join(
        f"event: {name}\ndata: {json.dumps(data)}\n\n"
        for name, data in anthropic_events(step, model)
    ).encode()


@pytest.mark.parametrize("wire", WIRES)
@pytest.mark.usefixtures("respx_litellm")
async def test_the_httpx_transport_reads_a_verdict_first_stream_too(
    make_config: Callable[..., VerifierConfig], wire: Wire
) -> None:
    import httpx
    import respx

    answer = json_answer("FAIL", category="incomplete", feedback="Send it.")
    config = make_config(
        model=wire.judge_model, agentModel=wire.agent_model, apiKey=API_KEY,
        judgeAnswer="verdict_first",
    )  # fmt: skip
    with respx.mock(assert_all_mocked=True) as http:
        route = http.post(wire.url).mock(
            return_value=httpx.Response(
                200, headers={"content-type": "text/event-stream"}, content=sse_body(wire, answer)
            )
        )
        verdict = await judge(config)
    assert json.loads(route.calls[0].request.content)["stream"] is True
    assert not verdict.passed and verdict.feedback == "Send it."
    assert verdict.completion_tokens == 50


async def test_a_streamed_answer_past_the_cap_is_closed_and_unreadable(
    provider: ProviderServer, config_for: Callable[..., VerifierConfig]
) -> None:
    huge = ("Reasoning " * 7_000,) * 20  # 1.4 MB, reasoning first: nothing decides early
    provider.push(Step(chunks=(*huge, "\nPASS")))
    verdict = await judge(config_for(OPENAI, model=TEXT_MODEL))
    assert verdict.passed and verdict.fail_open_reason is Reason.UNREADABLE_VERDICT


async def test_a_router_group_streams_and_ends_at_the_pass_too(
    make_config: Callable[..., VerifierConfig], provider: ProviderServer
) -> None:
    provider.push(Step(chunks=pieces(json_answer("PASS")), pace=0.05))
    deployment = {
        "modelName": "judges", "model": OPENAI.judge_model, "apiBase": provider.url,
        "apiKey": API_KEY,
    }  # fmt: skip
    config = make_config(
        model="judges", agentModel=OPENAI.agent_model, judgeAnswer="verdict_first",
        router={"deployments": [deployment]},
    )  # fmt: skip
    verdict = await judge(config)
    assert verdict.passed and verdict.readable
    assert provider.seen[0].body["stream"] is True
    assert await provider.wait_for_cut(1) == 1
