"""Anthropic prompt caching, seen on the wire: the rubric carries ``cache_control`` exactly when
the judge is an Anthropic model and the rubric is long enough for that model to cache.

The judge is driven directly with prompts whose system message is as long as each case needs
(the shipped rubric is shorter than any model's minimum); a loopback server records the body.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import API_KEY
from replyguard import VerifierConfig
from replyguard.context import JudgePrompt, system_prompt
from replyguard.context import _tokens as tokens
from replyguard.judge import LiteLLMJudge
from replyguard.judge._prompt_cache import CACHE_CONTROL, min_cacheable_tokens, with_cached_system
from replyguard.telemetry import Events
from support.provider_server import ANTHROPIC, OPENAI, ProviderServer, Step, Wire

SONNET = "anthropic/claude-sonnet-4-5"
HAIKU = "anthropic/claude-3-5-haiku-20241022"  # not in litellm's map: the name's rule applies


def rubric_of(token_count: int) -> str:
    """A static rubric of at least ``token_count`` tokens (``o200k_base``)."""
    line = "Judge whether the reply achieves the user's goal and follows every rule.\n"
    text = line * (token_count // 10 + 1)
    while tokens.count(text) < token_count:
        text += line
    return text


async def sent_body(
    provider: ProviderServer, wire: Wire, model: str, system: str
) -> dict[str, Any]:
    """The request body litellm sends for one judgement with ``system`` as the rubric."""
    provider.push(Step(text="PASS"))
    config = VerifierConfig.from_dict(
        {"enabled": True, "model": model, "apiKey": API_KEY, "apiBase": provider.url}
    )
    prompt = JudgePrompt(system=system, user="<reply>Done.</reply>", nonce="ab12", tokens=0)
    reply = await LiteLLMJudge(config, Events()).judge(prompt, time_left=10)
    assert reply.text == "PASS"
    assert provider.seen[-1].path.endswith(wire.path)
    return provider.seen[-1].body


def system_blocks(body: dict[str, Any]) -> list[dict[str, Any]]:
    system = body["system"]
    return [{"type": "text", "text": system}] if isinstance(system, str) else list(system)


async def test_a_long_rubric_is_marked_for_caching_for_sonnet(provider: ProviderServer) -> None:
    rubric = rubric_of(1100)
    body = await sent_body(provider, ANTHROPIC, SONNET, rubric)
    blocks = system_blocks(body)
    assert [b["text"] for b in blocks] == [rubric]
    assert blocks[0]["cache_control"] == {"type": "ephemeral"}
    assert all("cache_control" not in str(m) for m in body["messages"])


async def test_the_shipped_rubric_is_too_short_to_cache_and_goes_unmarked(
    provider: ProviderServer,
) -> None:
    assert tokens.count(system_prompt()) < min_cacheable_tokens(SONNET)
    body = await sent_body(provider, ANTHROPIC, SONNET, system_prompt())
    blocks = system_blocks(body)
    assert [b["text"] for b in blocks] == [system_prompt()]
    assert "cache_control" not in blocks[0]


@pytest.mark.parametrize(("length", "marked"), [(1500, False), (2100, True)])
async def test_haiku_needs_a_longer_rubric_than_sonnet(
    provider: ProviderServer, length: int, marked: bool
) -> None:
    assert min_cacheable_tokens(HAIKU) == 2048
    body = await sent_body(provider, ANTHROPIC, HAIKU, rubric_of(length))
    assert ("cache_control" in system_blocks(body)[0]) is marked


async def test_an_openai_judge_gets_the_rubric_as_a_plain_string(provider: ProviderServer) -> None:
    rubric = rubric_of(1100)
    body = await sent_body(provider, OPENAI, "openai/gpt-4o-mini", rubric)
    assert body["messages"][0] == {"role": "system", "content": rubric}
    assert "cache_control" not in str(body)


async def test_claude_behind_an_openai_compatible_proxy_is_not_marked(
    provider: ProviderServer,
) -> None:
    rubric = rubric_of(1100)
    body = await sent_body(provider, OPENAI, "openai/claude-sonnet-4-5", rubric)
    assert body["messages"][0] == {"role": "system", "content": rubric}


def test_claude_on_azure_ai_is_marked_like_anthropics_own() -> None:
    rubric = rubric_of(1100)
    messages = [{"role": "system", "content": rubric}, {"role": "user", "content": "Judge it."}]
    [system, user] = with_cached_system(["azure_ai/claude-sonnet-4-5"], messages)
    assert system["content"] == [{"type": "text", "text": rubric, "cache_control": CACHE_CONTROL}]
    assert user == messages[1]


def test_a_minimum_the_model_map_gives_as_a_float_is_used() -> None:
    import litellm

    name = "claude-replyguard-cache-probe"
    litellm.model_cost[name] = {
        "litellm_provider": "anthropic",
        "mode": "chat",
        "prompt_cache_min_tokens": 1500.0,
    }
    try:
        assert min_cacheable_tokens(f"anthropic/{name}") == 1500
    finally:
        del litellm.model_cost[name]


UNDECIDED = """
import asyncio, sys
from support.provider_server import ProviderServer, Step
from replyguard import VerifierConfig
from replyguard.context import JudgePrompt
from replyguard.context import _tokens as tokens
from replyguard.judge import LiteLLMJudge
from replyguard.telemetry import Events

rubric = "Judge whether the reply achieves the user's goal and follows every rule.\\n" * 300

async def main(server):
    config = VerifierConfig.from_dict(
        {"enabled": True, "model": "anthropic/claude-sonnet-4-5",
         "apiKey": "sk-test-cold-start-0000000000", "apiBase": server.url}
    )
    judge = LiteLLMJudge(config, Events())
    prompt = JudgePrompt(system=rubric, user="<reply>Done.</reply>", nonce="ab12", tokens=0)
    marked = []
    for _ in range(2):
        server.push(Step(text="PASS"))
        await judge.judge(prompt, time_left=10)
        marked.append("cache_control" in str(server.seen[-1].body["system"]))
        if not tokens.loaded():
            print("unloaded after the first call")
            await asyncio.to_thread(tokens.encoding)
    print(marked)

with ProviderServer() as server:
    asyncio.run(main(server))
"""


def test_a_rubric_that_needs_counting_goes_unmarked_until_the_tokenizer_is_loaded() -> None:
    """Counting a rubric longer in bytes than the minimum would load the tokenizer (half a
    second holding the GIL) on the event loop, inside the first judge call: that call sends it
    unmarked instead, and once the tokenizer is loaded the next one is marked."""
    done = subprocess.run(
        [sys.executable, "-c", UNDECIDED],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[1],
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == ["unloaded after the first call", "[False, True]"]
