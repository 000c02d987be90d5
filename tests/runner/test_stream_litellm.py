"""``Verifier.stream`` over a real litellm stream (aiohttp, SSE) from the loopback provider."""

from __future__ import annotations

from typing import Any

import litellm

from conftest import API_KEY
from replyguard import Delta, Done, Retract, Status, Turn, Verifier, VerifierConfig
from replyguard.testing import ScriptedJudge
from support.provider_server import OPENAI, ProviderServer, Step

TURN = Turn(user_message="When is the meeting?")
WAIT = 5.0


def litellm_agent(provider: ProviderServer) -> Any:
    async def agent(messages: list[dict[str, Any]]) -> Any:
        return await litellm.acompletion(
            model=OPENAI.judge_model,
            messages=messages,
            api_base=provider.url,
            api_key=API_KEY,
            stream=True,
            stream_options={"include_usage": True},
            max_retries=0,
        )

    return agent


def config(mode: str, **keys: Any) -> VerifierConfig:
    return VerifierConfig.from_dict(
        {
            "enabled": True,
            "verifyAll": True,
            "agentModel": OPENAI.judge_model,
            "streaming": {"mode": mode, "holdBackChars": 8},
            **keys,
        }
    )


async def test_litellm_chunks_stream_through_with_their_usage(provider: ProviderServer) -> None:
    provider.push(Step(chunks=("The meeting ", "is on ", "Monday.")))
    streamed = Verifier(config("release"), judge=ScriptedJudge(["PASS"]), preload=False)
    events = [e async for e in streamed.stream(litellm_agent(provider), TURN)]
    assert "".join(e.text for e in events if isinstance(e, Delta)) == "The meeting is on Monday."
    done = events[-1]
    assert isinstance(done, Done) and done.outcome.status == Status.PASSED
    meta = done.outcome.attempts[0].reply.meta
    assert meta.stop_reason == "stop"
    assert meta.usage is not None and meta.usage["completion_tokens"] == 12
    # litellm prices the stream on its final chunk; the outcome counts it.
    assert meta.cost_usd is not None and meta.cost_usd > 0
    assert done.outcome.cost_usd == meta.cost_usd


async def test_a_cut_short_litellm_stream_closes_the_provider_call(
    provider: ProviderServer,
) -> None:
    # The first answer sends four pieces, then would stall until the client goes away.
    provider.push(
        Step(chunks=("Well, ", "as an ", "AI, ", "I think", " more", " and more"), stall_after=4),
        Step(chunks=("Monday ", "at 10.")),
    )
    rules = [{"type": "rules", "forbiddenPhrases": ["as an AI"]}]
    streamed = Verifier(
        config("release", checks=rules), judge=ScriptedJudge(["PASS"]), preload=False
    )
    events = [e async for e in streamed.stream(litellm_agent(provider), TURN)]
    assert Retract(1, "rules") in events
    done = events[-1]
    assert isinstance(done, Done)
    assert (done.outcome.status, done.outcome.response) == (Status.PASSED, "Monday at 10.")
    assert done.outcome.attempts[0].reply.text == "Well, as an AI, "
    # The cut closed the stalled first call's connection (no more tokens are paid for); the
    # retry's, finished, may stay in the pool.
    assert provider.connections == 2
    assert await provider.wait_for_open_connections(1, within=WAIT) == 1
    await litellm.close_litellm_async_clients()
    assert await provider.wait_for_open_connections(0, within=WAIT) == 0
