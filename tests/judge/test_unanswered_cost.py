"""A judge request cut after it was sent is charged: the provider has its prompt and bills it.

A panel member cancelled once the panel decided, a call cut by its timeout, a verdict-first
stream cut mid-answer: each is charged at least its prompt's tokens (and the tokens of the text
it streamed before the cut) at litellm's price, in the verdict's and the outcome's cost and
tokens, the ledger, and the spend limits' settlement. The loopback provider holds the answers
that are cut; the proof of the cut is the server seeing the connection closed (``cut``).
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import litellm
import pytest

from conftest import API_KEY
from replyguard import Reason, Turn, Verdict, Verifier, VerifierConfig
from replyguard.context._prompt import JudgePrompt
from replyguard.judge._panel import NOT_WAITED_FOR
from replyguard.judge._protocol import JudgeReply
from replyguard.judge._unanswered import Charge, Unanswered, sending
from replyguard.testing import ScriptedAgent
from support.provider_server import ProviderServer, Step
from support.redis_server import REDIS_SERVER, RedisServer, redis_server

GPT, GEMINI, CLAUDE = "openai/gpt-4o-mini", "openai/gemini-2.0-flash", "openai/claude-3-5-haiku"
IN, OUT = 0.15e-6, 0.60e-6  # gpt-4o-mini's prices in litellm's map, per token
_prefixes = itertools.count()
HELD = Step(delay=30)  # an answer that comes only if the client waits 30 s for it
TURN = Turn(user_message="Write the weekly report, with its date.")
REPLY = "Done: the report is ready, dated 2026-11-27."


def by_model(answers: dict[str, Step]) -> Any:
    steps = {model.split("/", 1)[1]: step for model, step in answers.items()}
    return lambda seen: steps[seen.body["model"]]


def config(provider: ProviderServer, **keys: Any) -> VerifierConfig:
    base = {"apiKey": API_KEY, "apiBase": provider.url, "agentModel": "deepseek/deepseek-chat"}
    return VerifierConfig.from_dict({"enabled": True, **base, **keys})


def majority_panel(provider: ProviderServer, **keys: Any) -> VerifierConfig:
    """gpt-4o-mini (priced) held; the two others PASS, which decides a majority of three."""
    provider.respond_with(by_model({GPT: HELD, GEMINI: Step(), CLAUDE: Step()}))
    panel = {"models": [GPT, GEMINI, CLAUDE], "rule": "majority"}
    return config(provider, panel=panel, **keys)


async def verdict_of(config: VerifierConfig) -> Verdict:
    verifier = Verifier(config)
    try:
        return await verifier.verify(TURN, REPLY)
    finally:
        await verifier.aclose()


def sent_tokens(provider: ProviderServer, model: str) -> int:
    """litellm's count of the messages the provider received for ``model``."""
    body = next(s.body for s in provider.seen if s.body.get("model") == model.split("/", 1)[1])
    return int(litellm.token_counter(model=model, messages=body["messages"]))


def assert_prompt_charged(member: Verdict, provider: ProviderServer, model: str) -> None:
    """``member`` is charged its prompt, as many tokens as the request held, at the price."""
    assert member.prompt_tokens == pytest.approx(sent_tokens(provider, model), rel=0.1)
    assert member.cost_usd == pytest.approx(
        member.prompt_tokens * IN + member.completion_tokens * OUT
    )
    assert member.cost_usd > 0


async def test_a_member_not_waited_for_is_charged_its_prompt_in_the_outcome_and_ledger(
    provider: ProviderServer, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger.jsonl"
    verifier = Verifier(majority_panel(provider, verifyAll=True, ledgerPath=str(ledger)))
    try:
        outcome = await verifier.run(ScriptedAgent([REPLY]), TURN)
    finally:
        await verifier.aclose()
    assert outcome.response == REPLY and outcome.verdicts[0].passed
    assert await provider.wait_for_cut(1) == 1  # the held member's call was closed
    members = outcome.verdicts[0].members
    held = members[0]
    assert held.error == NOT_WAITED_FOR and held.completion_tokens == 0
    assert_prompt_charged(held, provider, GPT)
    # the charge reaches the panel's verdict, the outcome's cost, its token totals, the ledger
    assert outcome.verdicts[0].cost_usd == pytest.approx(sum(m.cost_usd for m in members))
    assert outcome.judge_cost_usd >= held.cost_usd
    assert outcome.usage.judge_prompt_tokens == held.prompt_tokens + 2 * 900
    record = json.loads(ledger.read_text(encoding="utf-8").splitlines()[-1])
    assert record["judgeCostUsd"] == pytest.approx(outcome.judge_cost_usd, abs=1e-8)
    assert record["usage"]["judgePromptTokens"] == outcome.usage.judge_prompt_tokens


@pytest.fixture(scope="module")
def redis() -> Iterator[RedisServer]:
    if not os.access(REDIS_SERVER, os.X_OK):
        pytest.skip(
            "redis-server is not installed (apt-get install redis-server; .ci/run installs it)"
        )
    with redis_server() as server:
        yield server


def fleet_spent(redis: RedisServer, prefix: str) -> float:
    """The fleet's spend counted on Redis under ``prefix`` (every spend counter's)."""
    import redis as redis_py

    client = redis_py.Redis.from_url(redis.url(), decode_responses=True)
    try:
        keys = [k for k in client.keys(f"{prefix}spend-v2:*") if not k.endswith(":held")]
        return sum(float(client.get(k) or 0) for k in keys)
    finally:
        client.close()


@pytest.mark.parametrize("where", ["local", "redis"])
async def test_the_spend_limit_settles_the_charge_of_the_member_not_waited_for(
    provider: ProviderServer, where: str, request: pytest.FixtureRequest
) -> None:
    keys: dict[str, Any] = {"spendLimits": [{"scope": "global", "window": "1h", "usd": 5}]}
    prefix = f"panel-cost-{next(_prefixes)}:"
    if where == "redis":
        server: RedisServer = request.getfixturevalue("redis")
        keys["state"] = {"redisUrl": server.url(), "keyPrefix": prefix, "timeoutMs": 3000}
    verifier = Verifier(majority_panel(provider, **keys))
    try:
        verdict = await verifier.verify(TURN, REPLY)
        assert await provider.wait_for_cut(1) == 1
        state = verifier._state
        assert state is not None
        await state.settled()  # the background settlements have landed
        windows = list(state._local._windows.values())
    finally:
        await verifier.aclose()
    held = verdict.members[0]
    assert held.error == NOT_WAITED_FOR
    assert_prompt_charged(held, provider, GPT)
    assert verdict.shared_state is None  # decided on the configured state
    # this instance's own count (the fleet's mirror, on Redis) and the fleet's hold the charge
    assert [w.spent for w in windows] == [pytest.approx(verdict.cost_usd)]
    assert not any(w.held for w in windows)  # every reservation settled
    if where == "redis":
        assert fleet_spent(server, prefix) == pytest.approx(verdict.cost_usd)


@pytest.mark.timing  # a deadline cuts the call
async def test_a_call_cut_by_its_timeout_is_charged_its_prompt(provider: ProviderServer) -> None:
    provider.respond_with(by_model({GPT: HELD}))
    verdict = await verdict_of(config(provider, model=GPT, timeoutSeconds=0.5))
    assert verdict.fail_open_reason is Reason.JUDGE_TIMEOUT
    assert await provider.wait_for_cut(1) == 1
    assert_prompt_charged(verdict, provider, GPT)


@pytest.mark.timing  # a deadline cuts the call
async def test_a_stream_cut_mid_answer_is_charged_its_prompt_and_the_text_received(
    provider: ProviderServer,
) -> None:
    words = tuple(f"word{i} " for i in range(30))
    provider.respond_with(by_model({GPT: Step(chunks=words, stall_after=20)}))
    keys = {"model": GPT, "timeoutSeconds": 1.0, "judgeAnswer": "verdict_first"}
    verdict = await verdict_of(config(provider, **keys))
    assert verdict.fail_open_reason is Reason.JUDGE_TIMEOUT
    received = litellm.token_counter(model=GPT, text="".join(words[:20]))
    assert verdict.completion_tokens == pytest.approx(received, abs=3)
    assert_prompt_charged(verdict, provider, GPT)


async def test_a_refused_request_is_charged_nothing(provider: ProviderServer) -> None:
    provider.respond_with(by_model({GPT: Step(status=503, text=None)}))
    verdict = await verdict_of(config(provider, model=GPT))
    assert verdict.fail_open_reason is Reason.JUDGE_ERROR
    assert (verdict.cost_usd, verdict.prompt_tokens) == (0, 0)


@pytest.mark.timing  # a deadline cuts the call
async def test_a_fallback_after_a_timed_out_model_carries_its_prompt_charge(
    provider: ProviderServer,
) -> None:
    provider.respond_with(by_model({GPT: HELD, GEMINI: Step()}))
    keys = {"model": GPT, "fallbackModels": [GEMINI], "timeoutSeconds": 1.0}
    verdict = await verdict_of(config(provider, **keys))
    assert verdict.passed and verdict.fail_open_reason is None  # the fallback's PASS
    assert await provider.wait_for_cut(1) == 1
    charged = verdict.prompt_tokens - 900  # the fallback's usage, and the cut call's prompt
    assert charged == pytest.approx(sent_tokens(provider, GPT), rel=0.1)
    assert verdict.cost_usd >= charged * IN > 0


async def test_an_answer_read_before_the_judge_raised_is_still_counted(
    provider: ProviderServer,
) -> None:
    # gpt-4o-mini answers unreadably (billed: 900 in, 12 out), then the fallback's 401 makes
    # the judge raise: the answer it read is counted all the same.
    unreadable = Step(text="I cannot decide this one.")
    provider.respond_with(by_model({GPT: unreadable, GEMINI: Step(status=401, text=None)}))
    verdict = await verdict_of(config(provider, model=GPT, fallbackModels=[GEMINI]))
    assert verdict.fail_open_reason is Reason.JUDGE_ERROR
    assert (verdict.prompt_tokens, verdict.completion_tokens) == (900, 12)
    assert verdict.cost_usd == pytest.approx(900 * IN + 12 * OUT)


def test_a_request_is_charged_by_its_answer_unless_the_reply_carries_it() -> None:
    prompt = JudgePrompt("Judge the reply.", "The reply: done.", "n0nce", tokens=40)
    sent = Unanswered()
    with sent.watching():
        answered, cut, refused = (sending((GPT,)) for _ in range(3))
    answered.replied(JudgeReply(text="PASS", model=GPT, prompt_tokens=40, cost_usd=0.5))
    cut.received.append("FAIL [incomplete]: no")
    refused.forget()
    sending((GPT,)).received.append("outside any judgement: noted nowhere")
    out = litellm.token_counter(model=GPT, text="FAIL [incomplete]: no")
    assert sent.charge(prompt, replied=True) == Charge(40, out, 40 * IN + out * OUT)
    again = sent.charge(prompt)  # the reply never reached the caller: its answer counts
    assert (again.prompt_tokens, again.completion_tokens) == (80, out)
    assert again.cost_usd == pytest.approx(0.5 + 40 * IN + out * OUT)
    assert Unanswered().charge(prompt) == Charge()
