"""The scenarios that run in this process alone, no network: the skip and not-triggered paths,
replyguard's own share of a verified turn (an instant in-process judge; warm, and with the CPU
caches emptied), the judge prompt's build, memory per turn in flight, and what logging at INFO
costs."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import logging
import time
import tracemalloc
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from sampling import Pair, interleaved
from scenarios import (
    WIRES,
    InstantJudge,
    config,
    reply_agent,
    settled_preload,
    sized_turn,
    typical_turn,
    working_agent,
)

from replyguard import Reply, RunMeta, ToolCallRecord, Verifier
from replyguard.context import ContextLimits, JudgePrompt, build_judge_prompt
from replyguard.judge import JudgeReply


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
