"""The measured scenarios, shared by ``run.py`` (full figures) and the CI guard test.

Every figure is measured against its reference in the same run: the two sides are
interleaved (ABBA order, so drift and warm-up hit both alike) and compared by medians.
Nothing here asserts: callers decide what a figure must be.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import json
import logging
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
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
    Verifier,
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


# -- statistics ------------------------------------------------------------------------------


def median(values: list[float]) -> float:
    return statistics.median(values)


def percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile (0-100), nearest rank."""
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[rank]


@dataclass
class Pair:
    """Interleaved samples of a measured side and its reference, in seconds."""

    measured: list[float] = field(default_factory=list)
    reference: list[float] = field(default_factory=list)

    @property
    def ratio(self) -> float:
        return median(self.measured) / median(self.reference)

    @property
    def difference(self) -> float:
        return median(self.measured) - median(self.reference)


async def interleaved(
    measured: Callable[[], Awaitable[Any]],
    reference: Callable[[], Awaitable[Any]],
    pairs: int,
    *,
    warmup: int = 20,
    before: Callable[[], None] | None = None,
) -> Pair:
    """Time ``pairs`` calls of each, alternating which goes first (ABBA); ``before`` (untimed)
    runs ahead of every timed call."""
    for _ in range(warmup):
        await reference()
        await measured()
    gc.collect()
    result = Pair()
    clock = time.perf_counter
    sides = ((result.reference, reference), (result.measured, measured))
    for i in range(pairs):
        for samples, call in sides[::-1] if i % 2 else sides:
            if before is not None:
                before()
            started = clock()
            await call()
            samples.append(clock() - started)
    return result


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


async def against_raw_call(
    measured: Callable[[], Awaitable[Any]],
    params: dict[str, Any],
    pairs: int,
    warmup: int,
    *,
    cleanup: Callable[[], Awaitable[Any]] | None = None,
) -> Any:
    """``measured`` interleaved with a raw litellm call of ``params`` (the reference); the
    clients are closed afterwards, and ``cleanup`` run."""

    async def reference() -> None:
        await raw_call(params)

    try:
        return await interleaved(measured, reference, pairs, warmup=warmup)
    finally:
        await close_clients()
        if cleanup is not None:
            await cleanup()


async def close_clients() -> None:
    module = sys.modules.get("litellm")
    if module is not None:
        await module.close_litellm_async_clients()
        with contextlib.suppress(Exception):
            module.in_memory_llm_clients_cache.flush_cache()


# -- scenarios ----------------------------------------------------------------------------------


_PRELOAD_WAIT_SECONDS = 900


async def settled_preload() -> None:
    """Wait for the preload a new ``Verifier`` starts (litellm and the tokenizer, imported
    on a thread of its own for seconds): measured while it runs, an in-process turn shares the
    GIL and the caches with an import."""
    # Under callgrind on a busy machine the preload (litellm, the tokenizer) takes minutes.
    if not await asyncio.to_thread(wait_for_preload, _PRELOAD_WAIT_SECONDS):
        raise RuntimeError(f"the preload still runs after {_PRELOAD_WAIT_SECONDS} s")


async def hot_path(kind: str, pairs: int, *, agent_work: int = 0, warmup: int = 200) -> Pair:
    """``verifier.run`` on a skipped (``skip``) or not-triggered (``quiet``) turn vs the agent.

    No judge is ever called: the verifier points at a closed port.
    """
    turn, reply = typical_turn()
    wire = WIRES["anthropic"]
    if kind == "skip":
        reply = reply.model_copy(update={"meta": RunMeta(pending_tool_calls=1)})
        cfg = config(wire, "http://127.0.0.1:9", verifyAll=True)
    else:  # no keyword in the reply, verifyAll off
        reply = Reply(text="The quarterly report is in reports/q3.pdf; revenue grew 4 %.")
        cfg = config(wire, "http://127.0.0.1:9")
    agent = working_agent(reply, agent_work) if agent_work else reply_agent(reply)
    verifier = Verifier(cfg)
    messages: list[dict[str, Any]] = [
        *turn.history,
        {"role": "user", "content": turn.user_message},
    ]
    expected = "skipped" if kind == "skip" else "not_triggered"
    await settled_preload()
    outcome = await verifier.run(agent, turn)
    if outcome.status != expected:
        raise RuntimeError(f"the {kind} path ended {outcome.status}, not {expected}")

    async def measured() -> None:
        await verifier.run(agent, turn)

    async def reference() -> None:
        await agent(messages)

    return await interleaved(measured, reference, pairs, warmup=warmup)


class InstantJudge:
    """A judge that answers PASS at once: replyguard's in-process cost alone."""

    async def judge(self, prompt: JudgePrompt, *, time_left: float) -> JudgeReply:
        return JudgeReply(text="PASS", model="bench/instant")


_EVICTED_BYTES = 32 * 2**20  # the size of the largest CPU cache (L3) on common servers


@functools.cache
def _eviction_buffers() -> tuple[bytes, bytearray]:
    return bytes(_EVICTED_BYTES), bytearray(_EVICTED_BYTES)


def evict_caches() -> None:
    """Write 32 MiB, as the few milliseconds of a litellm call do: whatever runs next finds its
    code's data (objects, dicts, pydantic's validators) out of the CPU caches."""
    source, target = _eviction_buffers()
    target[:] = source


async def instant_sides(
    agent_work: int = 0,
) -> tuple[Callable[[], Awaitable[None]], Callable[[], Awaitable[None]]]:
    """A verified turn with an instant in-process judge, and the bare agent call it wraps."""
    turn, reply = typical_turn()
    cfg = config(WIRES["anthropic"], "http://127.0.0.1:9", verifyAll=True)
    verifier = Verifier(cfg, judge=InstantJudge())
    agent = working_agent(reply, agent_work) if agent_work else reply_agent(reply)
    messages = [*turn.history, {"role": "user", "content": turn.user_message}]
    await settled_preload()
    outcome = await verifier.run(agent, turn)
    if outcome.status != "passed":
        raise RuntimeError(f"the in-process verified turn ended {outcome.status}")

    async def measured() -> None:
        await verifier.run(agent, turn)

    async def reference() -> None:
        await agent(messages)

    return measured, reference


async def in_process_verified(pairs: int, *, agent_work: int = 0) -> Pair:
    """A verified turn with an instant in-process judge vs the bare agent: no network at all."""
    return await interleaved(*await instant_sides(agent_work), pairs, warmup=50)


async def cold_in_process_verified(pairs: int) -> Pair:
    """``in_process_verified`` with the CPU caches emptied (untimed) before every call of
    either side: replyguard's own cost where it really runs, right after a litellm call."""
    return await interleaved(*await instant_sides(), pairs, before=evict_caches)


async def rotated(
    sides: list[Callable[[], Awaitable[Any]]], rounds: int, *, warmup: int = 20
) -> list[list[float]]:
    """``interleaved`` for any number of sides: each round calls every side once, the order
    rotating from round to round; each side's times, in the order of ``sides``."""
    for _ in range(warmup):
        for side in sides:
            await side()
    gc.collect()
    samples: list[list[float]] = [[] for _ in sides]
    clock = time.perf_counter
    for i in range(rounds):
        for k in range(len(sides)):
            index = (i + k) % len(sides)
            started = clock()
            await sides[index]()
            samples[index].append(clock() - started)
    return samples


async def _passing_turn(
    wire: Wire, url: str
) -> tuple[Callable[[], Awaitable[None]], dict[str, Any]]:
    """A verified turn that passes first time against ``url``'s fast judge, and the judge's
    request for it (``judge_params``: the raw references are made from it)."""
    turn, reply = typical_turn()
    cfg = config(wire, f"{url}/fast", verifyAll=True)
    verifier = Verifier(cfg)
    await verifier.warmup()
    agent = reply_agent(reply)
    outcome = await verifier.run(agent, turn)
    if outcome.status != "passed":
        raise RuntimeError(f"the verified turn ended {outcome.status} ({outcome.reason})")

    async def measured() -> None:
        await verifier.run(agent, turn)

    return measured, judge_params(cfg, turn, reply)


async def verified_vs_raw(
    wire: Wire, url: str, pairs: int, *, warmup: int = 30
) -> tuple[Pair, dict[str, Any]]:
    """A verified turn that passes first time vs one default ``litellm.acompletion`` of the
    same messages (``default_params``), same server."""
    measured, by_hand = await _passing_turn(wire, url)
    params = default_params(by_hand)
    pair = await against_raw_call(measured, params, pairs, warmup)
    info = {"prompt_chars": sum(len(m["content"]) for m in params["messages"])}
    return pair, info


async def verified_vs_requests(
    wire: Wire, url: str, rounds: int, *, warmup: int = 30
) -> tuple[Pair, Pair, dict[str, Any]]:
    """A verified turn that passes first time vs the same judge request sent by hand through
    ``litellm.acompletion`` (``judge_params``: model, messages, ``response_format``,
    ``temperature``, ``max_tokens``...), and vs a default call of the same messages
    (``default_params``), the three rotated in one loop, same server."""
    measured, by_hand = await _passing_turn(wire, url)
    default = default_params(by_hand)

    async def hand() -> None:
        await raw_call(by_hand)

    async def plain() -> None:
        await raw_call(default)

    try:
        turns, hands, plains = await rotated([measured, hand, plain], rounds, warmup=warmup)
    finally:
        await close_clients()
    info = {"prompt_chars": sum(len(m["content"]) for m in by_hand["messages"])}
    return Pair(turns, hands), Pair(turns, plains), info


@dataclass
class Burst:
    """One burst of concurrent calls: wall time, each call's latency from the launch, the
    process's CPU time over the burst, and how many calls did not end as expected (a turn
    that failed open, a raw call that raised): a busy machine's result, not a crash.

    ``collections``: the garbage collector's runs during the burst, per generation (0, 1, 2);
    ``gc_seconds``: the CPU time they took. A full (generation 2) collection walks the whole
    heap (litellm's modules: about half a million objects, about 0.3 s on this machine), and
    it runs once enough objects have survived into the oldest generation: a burst whose calls
    hold more objects while in flight meets it more often."""

    wall: float
    latencies: list[float]
    cpu: float = 0.0
    failed: int = 0
    collections: tuple[int, ...] = (0, 0, 0)
    gc_seconds: float = 0.0

    @property
    def p50(self) -> float:
        return percentile(self.latencies, 50)

    @property
    def p99(self) -> float:
        return percentile(self.latencies, 99)


class _CollectorClock:
    """The CPU time the garbage collector takes while it is installed (``gc.callbacks``),
    measured in the thread each collection runs on."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._start = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._start = time.thread_time()
        else:
            self.seconds += time.thread_time() - self._start

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        gc.callbacks.append(self)
        try:
            yield
        finally:
            gc.callbacks.remove(self)


def _collections() -> list[int]:
    return [generation["collections"] for generation in gc.get_stats()]


async def burst(make: Callable[[], Awaitable[bool]], count: int) -> Burst:
    """Launch ``count`` calls at once; each latency counts from the launch to its end. A call
    that returns False or raises counts as failed (its latency still counts)."""
    latencies: list[float] = []
    failed = 0
    clock = time.perf_counter
    collector = _CollectorClock()
    before = _collections()
    cpu = time.process_time()
    start = clock()

    async def one() -> None:
        nonlocal failed
        try:
            ok = await make()
        except Exception:
            ok = False
        failed += not ok
        latencies.append(clock() - start)

    with collector.installed():
        await asyncio.gather(*(one() for _ in range(count)))
    wall, cpu = clock() - start, time.process_time() - cpu
    runs = tuple(after - then for then, after in zip(before, _collections(), strict=True))
    return Burst(wall, latencies, cpu, failed, runs, collector.seconds)


async def concurrent_vs_raw(
    wire: Wire, url: str, count: int, delay_ms: int, rounds: int, *, frozen: bool = False
) -> tuple[list[Burst], list[Burst]]:
    """``count`` concurrent verified turns vs ``count`` concurrent raw calls of the judge's
    own request (``judge_params``), alternating. A turn that does not pass (it failed open:
    the machine was too busy for the judge's timeout) counts in its burst's ``failed``.
    ``frozen``: the host's recipe, ``gc.freeze()`` once both sides are warm, so no full
    collection walks the heap the imports left (undone after the bursts)."""
    turn, reply = typical_turn()
    cfg = config(wire, f"{url}/d{delay_ms}", verifyAll=True)
    verifier = Verifier(cfg)
    await verifier.warmup()
    agent = reply_agent(reply)
    params = judge_params(cfg, turn, reply)

    async def verified() -> bool:
        outcome = await verifier.run(agent, turn)
        return outcome.status == "passed"

    async def raw() -> bool:
        await raw_call(params)
        return True

    measured: list[Burst] = []
    reference: list[Burst] = []
    try:
        await burst(raw, count)  # opens the connection pool for both sides
        await burst(verified, count)
        if frozen:
            gc.collect()
            gc.freeze()
        for i in range(rounds):
            order = [(reference, raw), (measured, verified)]
            if i % 2:
                order.reverse()
            for sink, make in order:
                gc.collect()
                sink.append(await burst(make, count))
    finally:
        gc.unfreeze()
        await close_clients()
    return measured, reference


def sized_context(chars: int, kind: str, reps: int) -> tuple[list[float], JudgePrompt]:
    """Times of ``build_judge_prompt`` for a turn of ``chars`` characters (default limits)."""
    turn, reply_text, rules = sized_turn(chars, kind)
    meta = RunMeta(stop_reason="stop", tool_calls=(ToolCallRecord(name="search"),))
    limits = ContextLimits()

    def build() -> JudgePrompt:
        return build_judge_prompt(turn, reply_text, limits=limits, rules=rules, meta=meta)

    prompt = build()
    build()
    gc.collect()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        build()
        times.append(time.perf_counter() - t0)
    return times, prompt


@contextlib.contextmanager
def traced() -> Iterator[None]:
    tracemalloc.start()
    try:
        yield
    finally:
        tracemalloc.stop()


class Gate:
    """Counts arrivals; ``full`` is set when ``target`` have arrived."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.count = 0
        self.full = asyncio.Event()

    def arrive(self) -> None:
        self.count += 1
        if self.count >= self.target:
            self.full.set()


class EventJudge:
    """A judge that blocks until ``release`` is set, reporting each arrival at ``gate``."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.release.set()
        self.gate: Gate | None = None

    async def judge(self, prompt: JudgePrompt, *, time_left: float) -> JudgeReply:
        if self.gate is not None:
            self.gate.arrive()
        await self.release.wait()
        return JudgeReply(text="PASS", model="bench/event")


async def memory_in_flight(count: int) -> dict[str, float]:
    """Bytes (tracemalloc) held per verified turn in flight, blocked on a judge's event.

    The reference is the same agent call held in flight the same way (a task blocked on an
    event right after the agent answered), so the difference is what replyguard holds. Each
    figure is measured twice and the second kept (the first warms caches and pools). RSS is
    not used: freed pymalloc arenas are reused, so its delta reads 0 after any earlier work.
    """
    turn, reply = typical_turn()
    cfg = config(WIRES["anthropic"], "http://127.0.0.1:9", verifyAll=True)
    agent = reply_agent(reply)
    messages = [*turn.history, {"role": "user", "content": turn.user_message}]
    judge = EventJudge()
    verifier = Verifier(cfg, judge=judge)
    await verifier.run(agent, turn)  # templates, tokenizer, caches: not per-turn memory

    async def verified(gate: Gate, release: asyncio.Event) -> Any:
        return await verifier.run(agent, turn)

    async def bare(gate: Gate, release: asyncio.Event) -> Any:
        answer = await agent(messages)
        gate.arrive()
        await release.wait()
        return answer

    async def held(start: Callable[[Gate, asyncio.Event], Awaitable[Any]]) -> float:
        """Traced bytes held by ``count`` calls of ``start`` in flight, per call."""
        gate, release = Gate(count), asyncio.Event()
        judge.gate, judge.release = gate, release
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        tasks = [asyncio.create_task(start(gate, release)) for _ in range(count)]
        await gate.full.wait()
        gc.collect()
        during = tracemalloc.get_traced_memory()[0]
        release.set()
        await asyncio.gather(*tasks)
        judge.gate = None
        return (during - before) / count

    result: dict[str, float] = {}
    with traced():
        for name, start in (("bare", bare), ("verified", verified)):
            await held(start)
            result[name] = await held(start)
    return result


async def fail_open(wire: Wire, url: str, runs: int, timeout_seconds: float) -> list[float]:
    """Wall time of a turn whose judge hangs, with ``timeoutSeconds`` = ``timeout_seconds``."""
    turn, reply = typical_turn()
    agent = reply_agent(reply)
    times = []
    try:
        for _ in range(runs):
            cfg = config(wire, f"{url}/hang", verifyAll=True, timeoutSeconds=timeout_seconds)
            verifier = Verifier(cfg)  # a fresh circuit breaker: every run really waits
            await verifier.warmup()
            t0 = time.perf_counter()
            outcome = await verifier.run(agent, turn)
            times.append(time.perf_counter() - t0)
            if outcome.status != "failed_open":
                raise RuntimeError(f"a hung judge ended the turn {outcome.status}")
    finally:
        await close_clients()
    return times


_IMPORT = "import time; t = time.perf_counter(); import {0}; print(time.perf_counter() - t)"


def import_times(runs: int) -> tuple[list[float], list[float], bool]:
    """``import replyguard`` and ``import litellm`` in fresh interpreters, alternating.

    The third value says whether ``import replyguard`` pulled litellm in.
    """
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    env.pop("PYTHONPROFILEIMPORTTIME", None)
    # Both sides import from cached bytecode, as an installed package does (pip compiles it at
    # install): with writing it turned off, a source checkout would compile every module on
    # every import, and only replyguard's side would pay for it.
    env.pop("PYTHONDONTWRITEBYTECODE", None)

    def once(module: str) -> float:
        out = subprocess.run(
            [sys.executable, "-c", _IMPORT.format(module)],
            capture_output=True,
            text=True,
            env=env,
            check=True,
            timeout=120,
        )
        return float(out.stdout.strip().splitlines()[-1])

    ours: list[float] = []
    theirs: list[float] = []
    once("replyguard")  # warm the file and bytecode caches for both
    once("litellm")
    for i in range(runs):
        if i % 2:
            theirs.append(once("litellm"))
            ours.append(once("replyguard"))
        else:
            ours.append(once("replyguard"))
            theirs.append(once("litellm"))
    probe = subprocess.run(
        [sys.executable, "-c", "import sys, replyguard; print('litellm' in sys.modules)"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        timeout=120,
    )
    return ours, theirs, probe.stdout.strip() == "True"


async def big_turn_vs_raw(
    wire: Wire, url: str, chars: int, pairs: int, *, kind: str = "prose", warmup: int = 3
) -> tuple[Pair, dict[str, Any]]:
    """``verifier.verify()`` of a turn of ``chars`` characters (half of them the reply) vs one
    raw ``litellm.acompletion`` with the very messages the judge is sent: replyguard's whole
    end-to-end cost for a big turn (the prompt, the injection scan, the plumbing)."""
    turn, reply_text, _ = sized_turn(chars, kind)
    reply = Reply(text=reply_text, meta=RunMeta(stop_reason="stop"))
    cfg = config(wire, f"{url}/fast")
    verifier = Verifier(cfg)
    await verifier.warmup()
    params = judge_params(cfg, turn, reply)
    verdict = await verifier.verify(turn, reply)
    if not verdict.passed or verdict.fail_open_reason is not None:
        raise RuntimeError(f"the big turn was not passed: {verdict.fail_open_reason}")

    async def measured() -> None:
        await verifier.verify(turn, reply)

    pair = await against_raw_call(measured, params, pairs, warmup, cleanup=verifier.aclose)
    sent = sum(len(m["content"]) for m in params["messages"])
    return pair, {"chars": chars, "kind": kind, "prompt_chars": sent}


class DiscardingHandler(logging.Handler):
    """A host's handler that drops every record it is given: the records reach a handler, as
    on a host that configured logging, but no formatting or I/O of the host's is counted.
    (Without a handler other than replyguard's ``NullHandler`` an event is dropped before it
    is built, and logging at INFO would measure nothing.)"""

    def emit(self, record: logging.LogRecord) -> None:
        pass


@contextlib.contextmanager
def host_handler() -> Iterator[None]:
    """A ``DiscardingHandler`` on the ``replyguard`` logger for the block (a host's handler
    stays whatever the level: it is there for logging off as for logging on)."""
    logger = logging.getLogger("replyguard")
    handler = DiscardingHandler()
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)


@contextlib.contextmanager
def logger_level(level: int) -> Iterator[None]:
    """The ``replyguard`` logger at ``level`` for the block, then at its level before."""
    logger = logging.getLogger("replyguard")
    before = logger.level
    logger.setLevel(level)
    try:
        yield
    finally:
        logger.setLevel(before)


async def logging_on_vs_off(pairs: int, level: int = logging.INFO) -> Pair:
    """The in-process verified turn with the ``replyguard`` logger at ``level`` vs at WARNING
    (logging off): what building and emitting the turn's events costs. The records reach a
    host's handler that drops them (``DiscardingHandler``: no formatting or I/O of a host's
    handler is counted), attached for both sides."""
    measured_turn, _ = await instant_sides()
    logger = logging.getLogger("replyguard")
    before = logger.level

    async def on() -> None:
        logger.setLevel(level)
        try:
            await measured_turn()
        finally:
            logger.setLevel(logging.WARNING)

    async def off() -> None:
        logger.setLevel(logging.WARNING)
        await measured_turn()

    try:
        with host_handler():
            return await interleaved(on, off, pairs, warmup=50)
    finally:
        logger.setLevel(before)


async def bare_post_vs_raw(wire: Wire, url: str, pairs: int) -> tuple[Pair, dict[str, Any]]:
    """The floor: one HTTP POST of the very body litellm sends (raw asyncio streams, one
    kept-alive connection, ``TCP_NODELAY``) vs one raw ``litellm.acompletion``."""
    from urllib.parse import urlsplit

    turn, reply = typical_turn()
    cfg = config(wire, f"{url}/fast", verifyAll=True)
    params = judge_params(cfg, turn, reply)
    path = "/fast/v1/messages" if wire.name == "anthropic" else "/fast/chat/completions"
    body = json.dumps(
        {"model": wire.judge_model.split("/", 1)[1], "messages": params["messages"]}
    ).encode()
    parts = urlsplit(url)
    reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
    sock = writer.get_extra_info("socket")
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    head = (
        f"POST {path} HTTP/1.1\r\nhost: {parts.netloc}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\n\r\n"
    ).encode()

    async def post() -> None:
        writer.write(head + body)
        answer = await reader.readuntil(b"\r\n\r\n")
        length = int(answer.lower().split(b"content-length:")[1].split(b"\r\n")[0])
        await reader.readexactly(length)

    async def reference() -> None:
        await raw_call(params)

    try:
        pair = await interleaved(post, reference, pairs, warmup=30)
    finally:
        writer.close()
        await close_clients()
    return pair, {"body_bytes": len(body)}


_COLD_VERIFIED = """
import asyncio, gc, sys, time
started = time.perf_counter()
{prelude}
sys.path.insert(0, {here!r})
import scenarios as sc
from replyguard import Reply, Verifier
{after_imports}
async def main():
    turn, reply = sc.typical_turn()
    verifier = Verifier(sc.config(sc.WIRES[{wire!r}], {url!r}, verifyAll=True))
    outcome = await verifier.run(sc.reply_agent(reply), turn)
    took = time.perf_counter() - started
    passes = gc.get_stats()[2]["collections"]
    {ending}
    assert outcome.status == "passed", outcome
    await verifier.aclose()
    print(took, passes)
asyncio.run(main())
"""

_WARM_START = """
import asyncio, sys, time
sys.path.insert(0, {here!r})
import scenarios as sc
from replyguard import Verifier
async def main():
    turn, reply = sc.typical_turn()
    verifier = Verifier(sc.config(sc.WIRES[{wire!r}], {url!r}, verifyAll=True))
    await verifier.warmup()
    await sc.settled_preload()
    took = []
    for _ in range(2):
        started = time.perf_counter()
        outcome = await verifier.run(sc.reply_agent(reply), turn)
        took.append(time.perf_counter() - started)
        assert outcome.status == "passed", outcome
    await verifier.aclose()
    print(took[0], took[1])
asyncio.run(main())
"""

_COLD_RAW = """
import asyncio, gc, json, sys, time
started = time.perf_counter()
{prelude}
import litellm
{after_imports}
params = json.loads(sys.stdin.read())
async def main():
    await litellm.acompletion(**params)
    took = time.perf_counter() - started
    passes = gc.get_stats()[2]["collections"]
    {ending}
    await litellm.close_litellm_async_clients()
    print(took, passes)
asyncio.run(main())
"""


def _fresh_interpreter(script: str, stdin: str = "") -> str:
    """The last line ``script`` prints, run in a fresh interpreter (offline price map and beta
    headers; bytecode files written, as a user's installation has them)."""
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    env.setdefault("LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS", "True")
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    out = subprocess.run(
        [sys.executable, "-c", script],
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        check=True,
        timeout=120,
    )
    return out.stdout.strip().splitlines()[-1]


COLLECTOR_MODES = ("on", "off", "frozen")
"""The collector in both cold-start scripts: as the interpreter starts it, disabled before
any import, or on with ``gc.freeze()`` once the imports are done (a host's start-up recipe)."""


def cold_scripts(
    wire: Wire, url: str, prelude: str = "", after_imports: str = "", ending: str = ""
) -> tuple[str, str]:
    """The cold-start scripts: the first verified turn, the first raw call (its parameters on
    stdin: ``judge_params``); ``ending`` runs as soon as the turn's or call's time is taken."""
    here = os.path.dirname(os.path.abspath(__file__))
    blanks = {"prelude": prelude, "after_imports": after_imports, "ending": ending}
    ours = _COLD_VERIFIED.format(here=here, wire=wire.name, url=f"{url}/fast", **blanks)
    return ours, _COLD_RAW.format(**blanks)


def cold_start_times(
    wire: Wire, url: str, runs: int, *, collector: str = "on"
) -> tuple[list[float], list[float], list[int], list[int]]:
    """The first verified turn of a fresh interpreter (its imports included: replyguard,
    litellm, the tokenizer) vs the first raw ``litellm.acompletion`` of one (``import
    litellm`` included), same parameters, alternating. Each counts from its script's start.
    Also each script's full collections (generation 2) until then (``collector``:
    ``COLLECTOR_MODES``)."""
    turn, reply = typical_turn()
    params = judge_params(config(wire, f"{url}/fast", verifyAll=True), turn, reply)
    # The garbage collector off in both: what is left is the two scripts' own work, without
    # the full passes whose count and place shift with every allocation before them.
    prelude = "gc.disable()" if collector == "off" else ""
    after_imports = "gc.freeze()" if collector == "frozen" else ""
    ours_script, raw_script = cold_scripts(wire, url, prelude, after_imports)

    def once(script: str, sink: list[float], passes: list[int], stdin: str = "") -> None:
        took, full = _fresh_interpreter(script, stdin).split()
        sink.append(float(took))
        passes.append(int(full))

    raw_input = json.dumps(params)
    once(ours_script, [], [])  # file and bytecode caches warm for both
    once(raw_script, [], [], raw_input)
    ours: list[float] = []
    theirs: list[float] = []
    our_passes: list[int] = []
    their_passes: list[int] = []
    for i in range(runs):
        if i % 2:
            once(raw_script, theirs, their_passes, raw_input)
            once(ours_script, ours, our_passes)
        else:
            once(ours_script, ours, our_passes)
            once(raw_script, theirs, their_passes, raw_input)
    return ours, theirs, our_passes, their_passes


def warm_start_times(wire: Wire, url: str, runs: int) -> tuple[list[float], list[float]]:
    """In a fresh interpreter, after ``await verifier.warmup()`` (and the background preload):
    the first verified turn and the second one, each in its own process, ``runs`` times."""
    here = os.path.dirname(os.path.abspath(__file__))
    script = _WARM_START.format(here=here, wire=wire.name, url=f"{url}/fast")
    first: list[float] = []
    second: list[float] = []
    for _ in range(runs + 1):  # the first run warms the file and bytecode caches
        one, two = (float(x) for x in _fresh_interpreter(script).split())
        first.append(one)
        second.append(two)
    return first[1:], second[1:]


def cli_wall_times(runs: int) -> tuple[list[float], list[float]]:
    """Wall time of ``replyguard heartbeat --workspace WS HEARTBEAT_OK`` (HEARTBEAT.md lists an
    open task: the check decides, no model call) vs a bare ``python -c pass``, alternating."""
    with tempfile.TemporaryDirectory() as workspace:
        with open(os.path.join(workspace, "HEARTBEAT.md"), "w", encoding="utf-8") as file:
            file.write("# Tasks\n\n- [ ] rotate the logs\n")
        return _cli_wall_times(workspace, runs)


def _cli_wall_times(workspace: str, runs: int) -> tuple[list[float], list[float]]:
    command = [
        os.path.join(os.path.dirname(sys.executable), "replyguard"),
        "heartbeat",
        "--workspace",
        workspace,
        "HEARTBEAT_OK",
    ]
    bare = [sys.executable, "-c", "pass"]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}

    def once(argv: list[str]) -> float:
        started = time.perf_counter()
        subprocess.run(argv, capture_output=True, env=env, check=False, timeout=120)
        return time.perf_counter() - started

    once(command)
    once(bare)
    ours: list[float] = []
    theirs: list[float] = []
    for i in range(runs):
        first, second = ((command, ours), (bare, theirs))[:: -1 if i % 2 else 1]
        for argv, sink in (first, second):
            sink.append(once(argv))
    return ours, theirs


PANEL_MEMBERS = ("openai/gpt-4o-mini", "openai/gemini-2.0-flash", "openai/deepseek-chat")


async def panel_sides(url: str, pairs: int, delay_ms: int = 50) -> tuple[Pair, Pair]:
    """A verification by a three-member panel, every call answered after ``delay_ms``, against
    (1) the same three requests sent with raw ``litellm.acompletion`` at once (the floor: the
    slowest of three concurrent calls, whose CPU work shares one event loop) and (2) one
    verification by a single judge."""
    turn, reply = typical_turn()
    wire = WIRES["openai"]
    api_base = f"{url}/d{delay_ms}"
    agent = "mistral/mistral-large-latest"
    single = Verifier(config(wire, api_base, agentModel=agent))
    panel = Verifier(
        config(wire, api_base, agentModel=agent, panel={"models": list(PANEL_MEMBERS)})
    )
    params = judge_params(config(wire, api_base, agentModel=agent), turn, reply)
    import litellm

    try:
        for verifier in (single, panel):
            await verifier.warmup()

        async def by_panel() -> None:
            verdict = await panel.verify(turn, reply)
            if len(verdict.members) != len(PANEL_MEMBERS) or verdict.fail_open_reason:
                raise RuntimeError(f"the panel did not decide: {verdict.error}")

        async def by_one() -> None:
            verdict = await single.verify(turn, reply)
            if verdict.fail_open_reason:
                raise RuntimeError(f"the judge did not decide: {verdict.error}")

        async def raw_three() -> None:
            calls = (litellm.acompletion(**{**params, "model": m}) for m in PANEL_MEMBERS)
            await asyncio.gather(*calls)

        floor = await interleaved(by_panel, raw_three, pairs, warmup=10)
        versus_one = await interleaved(by_panel, by_one, pairs, warmup=5)
        return floor, versus_one
    finally:
        await single.aclose()
        await panel.aclose()
        await close_clients()
