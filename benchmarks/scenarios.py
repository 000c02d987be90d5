"""What every measured scenario is made of: the judge's wires, everyday and sized turns, agents,
configs, the judge's own request for a turn and the raw ``litellm.acompletion`` reference.

The scenarios themselves are grouped by where they run: ``in_process.py`` (no network),
``loopback.py`` (against the loopback judge, ``judge_server.py``) and ``startup.py`` (fresh
interpreters); ``sampling.py`` times two sides side by side. Nothing here asserts: callers
decide what a figure must be.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

# litellm fetches Anthropic's beta-header table from GitHub on its first Anthropic call (a
# blocking GET, 5 s timeout) unless told to use its bundled copy: loopback only, here.
os.environ.setdefault("LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS", "True")

import replyguard  # noqa: F401 - sets the offline env defaults before litellm is imported
from replyguard import (
    Reply,
    RunMeta,
    ToolCallRecord,
    Turn,
    VerifierConfig,
)
from replyguard.context import (
    ContextLimits,
    JudgePrompt,
    RulesSource,
    build_judge_prompt,
)
from replyguard.judge import JudgeReply, LiteLLMJudge
from replyguard.runner._preload import wait_for_preload
from replyguard.telemetry import Events

API_KEY = "sk-bench-0123456789abcdefghij"


@dataclass(frozen=True)
class Wire:
    """A judge model that makes litellm speak one provider's wire format."""

    name: str
    judge_model: str
    agent_model: str


WIRES = {
    "anthropic": Wire("anthropic", "anthropic/claude-sonnet-4-5", "openai/gpt-4o"),
    "openai": Wire("openai", "openai/gpt-4o-mini", "anthropic/claude-sonnet-4-5"),
}

# -- turns and agents --------------------------------------------------------------------------

_PHRASES = (
    "the report shows revenue growth across all regions while costs stayed flat and hiring "
    "slowed in the second half of the quarter because the team focused on shipping the new "
    "billing system which reduced churn among small customers and improved margins overall "
    "we should review the forecast next week with finance and update the board deck before "
    "friday including the risks around supply delays currency moves and the pending audit"
)
_WORDS = _PHRASES.split()
_CJK = "的一是不了人我在有他这为之大来以个中上们到说国和地也子时道出而要于就下得可你年生会自着去之过家学对可她里后小么心多天而能好都然没日于起还发成事只作当想看文无开手十用主行方又如前所本见经头面公同三已老从动两长知民样现分将外但身些与高意进把法此实回二理美点月明其种声全工己话儿者向情部正名定女问力机给等几很业最间新什打便位因重被走电四第门相次东政海口使教西再平真听世气信北少关并内加化由却代军产入先山五太水万市眼体别处总才场师书比住员九笑性通目华报立马命张活难神数件安表原车白应路期叫死常提感金何更反合放做系计或司利受光王果亲界及今京务制解各任至清物台象记边共风战干接它许八特觉望直服毛林题建南度统色字请交爱让认算论百吃义科怎元社术结六功指思非流每青管夫连远资队跟带花快条院变联言权往展该领传近留红治决周保达办运武半候七必城父强步完革深区即求品士转量空甚众技轻程告江语英基派满式李息写呢识极令黄德收脸钱党倒未持取设始版双历越史商千片容研像找友孩站广改议形委早房音火际则首单据导影失拿网香似斯专石若兵弟谁校读志飞观争究包组造落视济喜离虽坏兴切嘛消参底故仍众"  # noqa: E501


def prose(chars: int, seed: int = 0) -> str:
    """English-like prose of exactly ``chars`` characters."""
    rng = random.Random(seed)
    out: list[str] = []
    size = 0
    while size < chars:
        sentence = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(8, 20)))
        sentence = sentence[0].upper() + sentence[1:] + ". "
        out.append(sentence)
        size += len(sentence)
    return "".join(out)[:chars]


def cjk(chars: int, seed: int = 0) -> str:
    """Chinese-like text (common characters, full-width punctuation) of ``chars`` characters."""
    rng = random.Random(seed)
    out: list[str] = []
    size = 0
    while size < chars:
        sentence = "".join(rng.choice(_CJK) for _ in range(rng.randint(10, 30))) + "。"
        out.append(sentence)
        size += len(sentence)
    return "".join(out)[:chars]


def json_text(chars: int, seed: int = 0) -> str:
    """Pretty-printed JSON records, cut to ``chars`` characters."""
    rng = random.Random(seed)
    records: list[dict[str, Any]] = []
    size = 0
    while size < chars:
        record = {
            "id": rng.randint(10**8, 10**9),
            "name": " ".join(rng.choice(_WORDS) for _ in range(3)),
            "amount": round(rng.uniform(0, 10000), 2),
            "tags": [rng.choice(_WORDS) for _ in range(3)],
            "active": rng.random() > 0.5,
        }
        records.append(record)
        size += 130
    return json.dumps(records, indent=2)[:chars]


TEXTS: dict[str, Callable[[int, int], str]] = {"prose": prose, "cjk": cjk, "json": json_text}


def typical_turn() -> tuple[Turn, Reply]:
    """An everyday verified turn: a short request, 4 history messages, a 1 KB reply."""
    history: list[dict[str, Any]] = [
        {"role": "system", "content": "You are the finance team's assistant."},
        {"role": "user", "content": "Where is the quarterly report? " + prose(300, 1)},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "find", "arguments": '{"q": "q3 report"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "reports/q3.pdf " + prose(400, 2)},
    ]
    turn = Turn(
        user_message="Summarise the quarterly report in three bullet points. " + prose(150, 3),
        history=history,
        rules=["Answer in English.", "Use bullet points for lists."],
        id="bench-turn",
    )
    reply = Reply(
        text="Here is the summary:\n- " + prose(1000, 4),
        meta=RunMeta(
            stop_reason="stop",
            duration_ms=850.0,
            tool_calls=(ToolCallRecord(name="find", arguments={"q": "q3 report"}),),
        ),
    )
    return turn, reply


def sized_turn(chars: int, kind: str = "prose") -> tuple[Turn, str, list[RulesSource]]:
    """A turn of about ``chars`` characters: 10 % request, 5 history messages of 8 %, 50 % reply."""
    make = TEXTS[kind]
    history = [
        {"role": "user" if i % 2 else "assistant", "content": make(chars * 8 // 100, 10 + i)}
        for i in range(5)
    ]
    turn = Turn(user_message=make(chars // 10, 1), history=history, id=f"ctx-{kind}-{chars}")
    rules = [RulesSource("AGENTS.md", prose(1500, 7))]
    return turn, make(chars // 2, 2), rules


def reply_agent(reply: Reply) -> Callable[[list[dict[str, Any]]], Awaitable[Reply]]:
    """An async agent that answers at once with ``reply``."""

    async def agent(messages: list[dict[str, Any]]) -> Reply:
        return reply

    return agent


def agent_step(work: int) -> int:
    """``work`` units of plain Python work: what an agent adapter does to shape a reply."""
    rows = [{"id": i, "name": f"row {i}", "keep": i % 3 == 0} for i in range(work)]
    return sum(row["id"] for row in rows if row["keep"])


def working_agent(reply: Reply, work: int) -> Callable[[list[dict[str, Any]]], Awaitable[Reply]]:
    """An async agent that does ``work`` units of Python work before answering.

    The work scales with the interpreter's speed like replyguard's own code does, so a ratio
    against it holds on a slow CI machine and a fast laptop alike.
    """

    async def agent(messages: list[dict[str, Any]]) -> Reply:
        agent_step(work)
        return reply

    return agent


def busy_wait(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


# -- configs and verifiers ------------------------------------------------------------------


def config(wire: Wire, api_base: str, **keys: Any) -> VerifierConfig:
    data: dict[str, Any] = {
        "enabled": True,
        "model": wire.judge_model,
        "agentModel": wire.agent_model,
        "apiBase": api_base,
        "apiKey": API_KEY,
    }
    data.update(keys)
    return VerifierConfig.from_dict(data)


def prompt_of_turn(cfg: VerifierConfig, turn: Turn, reply: Reply) -> JudgePrompt:
    """The judge prompt of this turn, with the config's limits and the turn's rules."""
    limits = ContextLimits(
        budget=cfg.context_token_budget,
        response_cap=cfg.response_token_cap,
        rules_cap=cfg.rules_token_cap,
        history_turns=cfg.history_turns,
    )
    rules = [RulesSource("rules for this turn", "\n".join(f"- {r}" for r in turn.rules))]
    return build_judge_prompt(turn, reply.text, limits=limits, rules=rules, meta=reply.meta)


def judge_params(cfg: VerifierConfig, turn: Turn, reply: Reply) -> dict[str, Any]:
    """The keyword arguments replyguard's judge sends for this turn, for the raw reference.

    Built by the judge's own ``request()`` on a prompt of this very turn, so model, messages
    (same size), temperature, max_tokens, the verdict schema, retries, api_base and api_key
    match; ``timeout`` is the configured one (the judge itself passes the time left). Not
    added: the judge's byte-capped session (``_capped``), which costs nothing measurable
    (``judge_options.py``).
    """
    prompt = prompt_of_turn(cfg, turn, reply)
    judge = LiteLLMJudge(cfg, Events())
    return judge.request(
        cfg.model, prompt, timeout=judge.client_timeout, api_key=cfg.resolve_api_key()
    )


def default_params(params: dict[str, Any]) -> dict[str, Any]:
    """A default ``litellm.acompletion`` of the same judgement: the same model, messages,
    endpoint and key, litellm's defaults for everything else (the options the judge adds are
    part of its cost)."""
    return {key: params[key] for key in ("model", "messages", "api_base", "api_key")}


async def raw_call(params: dict[str, Any]) -> Any:
    import litellm

    return await litellm.acompletion(**params)


async def close_clients() -> None:
    module = sys.modules.get("litellm")
    if module is not None:
        await module.close_litellm_async_clients()
        with contextlib.suppress(Exception):
            module.in_memory_llm_clients_cache.flush_cache()


_PRELOAD_WAIT_SECONDS = 900


async def settled_preload() -> None:
    """Wait for the preload a new ``Verifier`` starts (litellm and the tokenizer, imported
    on a thread of its own for seconds): measured while it runs, an in-process turn shares the
    GIL and the caches with an import."""
    # Under callgrind on a busy machine the preload (litellm, the tokenizer) takes minutes.
    if not await asyncio.to_thread(wait_for_preload, _PRELOAD_WAIT_SECONDS):
        raise RuntimeError(f"the preload still runs after {_PRELOAD_WAIT_SECONDS} s")


class InstantJudge:
    """A judge that answers PASS at once: replyguard's in-process cost alone."""

    async def judge(self, prompt: JudgePrompt, *, time_left: float) -> JudgeReply:
        return JudgeReply(text="PASS", model="bench/instant")
