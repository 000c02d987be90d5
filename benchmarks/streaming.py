"""The streaming scenarios: ``Verifier.stream`` against iterating the raw litellm stream.

Each measured stream and its reference read the very same loopback stream (the judge server's
``/s<N>...`` paths, in its own process), interleaved ABBA. ``release`` mode runs with a rules
check (forbidden phrases, so the incremental scan does its work on every delta) and an instant
in-process judge, so what is timed up to the last delta is replyguard's streaming path alone.
Nothing here asserts: ``run.py`` compares the figures with their targets.

Both sides are timed alike: each reads the thread's CPU clock at its start and once at its end
(the streamed turn at the delta that completes the reply's known length, never at every
delta: that clock is a system call, about 1 µs, which only one side would pay 1,000 times).
Over the loopback each stream starts after a full collection (``settle``): a full pass over
litellm's 400,000 objects costs a whole stream's CPU time, falls due every few streams (litellm
keeps each stream's chunks, about 25,000 objects promoted a stream, the same on either side),
and, with the sides alternating ABBA, fell on the same side every time (11 of 30 streamed
turns, none of the raw streams past the first rounds, in the run that found it).
"""

from __future__ import annotations

import gc
import statistics
import time
import tracemalloc
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import scenarios as sc

from replyguard import Delta, Done, Turn, Verifier, VerifierConfig

TURN = Turn(user_message="Write the release notes.")
PHRASES = ["as an AI", "I cannot help", "lorem ipsum"]
MODEL = "openai/gpt-4o-mini"
Clock = Callable[[], float]


def stream_config(mode: str, hold: int, **keys: Any) -> VerifierConfig:
    return VerifierConfig.from_dict(
        {
            "enabled": True,
            "verifyAll": True,
            "agentModel": "anthropic/claude-sonnet-4-5",
            "model": MODEL,
            "checks": [{"type": "rules", "forbiddenPhrases": PHRASES}],
            "streaming": {"mode": mode, "holdBackChars": hold},
            **keys,
        }
    )


def litellm_agent(url: str, path: str) -> Callable[[list[dict[str, Any]]], Any]:
    async def agent(messages: list[dict[str, Any]]) -> Any:
        import litellm

        return await litellm.acompletion(
            model=MODEL,
            messages=messages,
            api_base=f"{url}/{path}",
            api_key=sc.API_KEY,
            stream=True,
            stream_options={"include_usage": True},
            max_retries=0,
        )

    return agent


@dataclass
class Timings:
    """Seconds from the call to the first text, to the text passing ``hold`` characters, and
    to the last text (the raw stream: to its end), for each run."""

    first: list[float] = field(default_factory=list)
    past_hold: list[float] = field(default_factory=list)
    last: list[float] = field(default_factory=list)
    last_cpu: list[float] = field(default_factory=list)
    """CPU seconds of the thread to the last text: what wall time counts but for the turns
    other processes take on a loaded machine."""
    chars: list[int] = field(default_factory=list)
    """Characters of text read (the raw stream's: what the streamed turn's deltas add up to)."""


async def raw_stream(
    agent: Any, hold: int, into: Timings, clock: Clock = time.perf_counter
) -> None:
    started, cpu = clock(), time.thread_time()
    stream = await agent([{"role": "user", "content": TURN.user_message}])
    seen, first, past = 0, None, None
    async for chunk in stream:
        text = chunk.choices[0].delta.content if chunk.choices else None
        if text:
            now = clock()
            seen += len(text)
            first = first or now
            if past is None and seen > hold:
                past = now
    ended = clock()  # the stream's end: litellm's own work on its last chunk too
    into.last_cpu.append(time.thread_time() - cpu)
    into.chars.append(seen)
    into.first.append((first or ended) - started)
    into.past_hold.append((past or ended) - started)
    into.last.append(ended - started)


async def streamed_turn(
    verifier: Verifier,
    agent: Any,
    into: Timings,
    clock: Clock = time.perf_counter,
    *,
    chars: int | None = None,
) -> None:
    """One turn, timed to its last delta: the one whose text completes ``chars`` characters
    (the reply's length, read from the raw stream), where the CPU clock is read; without
    ``chars``, at every delta."""
    started, cpu = clock(), time.thread_time()
    first = last = last_cpu = None
    seen = 0
    async for event in verifier.stream(agent, TURN):
        if isinstance(event, Delta):
            last = clock()
            seen += len(event.text)
            if chars is None or seen >= chars:
                last_cpu = time.thread_time()
            first = first or last
        elif isinstance(event, Done) and event.outcome.status != "passed":
            raise RuntimeError(f"the streamed turn ended {event.outcome.status}")
    assert first is not None
    assert last is not None
    assert last_cpu is not None, f"the deltas spelled {seen} characters, not {chars}"
    into.chars.append(seen)
    into.first.append(first - started)
    into.past_hold.append(first - started)
    into.last.append(last - started)
    into.last_cpu.append(last_cpu - cpu)


async def release_vs_raw(
    agent: Any, runs: int, hold: int, clock: Clock = time.perf_counter, *, settle: bool = False
) -> tuple[Timings, Timings]:
    """``release`` mode (rules with forbidden phrases, an instant judge) vs iterating the raw
    stream ``agent`` gives, interleaved ABBA: (measured, reference), timed by ``clock`` (wall
    time, or ``time.thread_time`` for the CPU time alone: on a loaded machine a few
    milliseconds of work are preempted, and wall time then counts other processes' turns).
    ``settle``: a full collection before each stream (untimed; see the module's docstring)."""
    verifier = Verifier(stream_config("release", hold), judge=sc.InstantJudge())
    measured, reference, scratch = Timings(), Timings(), Timings()
    for _ in range(5):  # warm-up: litellm's import, clients, the tokenizer
        await raw_stream(agent, hold, scratch)
        await streamed_turn(verifier, agent, scratch)
    chars = scratch.chars[0]
    gc.collect()
    for i in range(runs):
        sides = [
            lambda: raw_stream(agent, hold, reference, clock),
            lambda: streamed_turn(verifier, agent, measured, clock, chars=chars),
        ]
        for side in sides[::-1] if i % 2 else sides:
            if settle:
                gc.collect()
            await side()
    return measured, reference


def pair_ratios(measured: list[float], reference: list[float]) -> tuple[float, float, float]:
    """The ratios of the runs paired in their rounds: (median, first quartile, third)."""
    ratios = [m / r for m, r in zip(measured, reference, strict=True) if r > 0]
    low, middle, high = statistics.quantiles(ratios, n=4)
    return middle, low, high


def chunk_agent(deltas: int) -> Callable[[list[dict[str, Any]]], Any]:
    """An agent streaming ``deltas`` litellm ``ModelResponseStream`` chunks made in advance:
    no network, so the difference is replyguard's per-delta work alone."""
    from litellm.types.utils import ModelResponseStream

    chunks = [
        ModelResponseStream(choices=[{"index": 0, "delta": {"content": f"w{i} "}}])
        for i in range(deltas)
    ]

    async def stream() -> AsyncIterator[Any]:
        for chunk in chunks:
            yield chunk

    async def agent(messages: list[dict[str, Any]]) -> Any:
        return stream()

    return agent


async def cut_short(url: str, chunks: int, pause_ms: int, at: int) -> dict[str, Any]:
    """A ``chunks``-long stream (one every ``pause_ms``) that says a forbidden phrase in chunk
    ``at``, cut short in ``release`` mode; the retry is a clean 20-chunk stream. What the first
    stream cost: the chunks the server wrote before it saw the client close."""
    import json
    import urllib.request

    def stats() -> dict[str, Any]:
        with urllib.request.urlopen(f"{url}/_stats", timeout=5) as response:
            data: dict[str, Any] = json.loads(response.read())
            return data

    calls = 0
    bad, clean = litellm_agent(url, f"s{chunks}p{pause_ms}x{at}"), litellm_agent(url, "s20")

    async def agent(messages: list[dict[str, Any]]) -> Any:
        nonlocal calls
        calls += 1
        return await (bad if calls == 1 else clean)(messages)

    verifier = Verifier(
        stream_config("release", 64, judgeAfterChecks="never"), judge=sc.InstantJudge()
    )
    before = stats()
    outcome = None
    async for event in verifier.stream(agent, TURN):
        if isinstance(event, Done):
            outcome = event.outcome
    after = stats()
    assert outcome is not None
    assert len(outcome.attempts) == 2
    return {
        "status": str(outcome.status),
        "chunks": chunks,
        "at": at,
        "chunks_sent": after["chunks"] - before["chunks"] - 20,
        "streams_cut": after["streams_cut"] - before["streams_cut"],
    }


async def _pieces(text: str, size: int) -> AsyncIterator[str]:
    for at in range(0, len(text), size):
        yield text[at : at + size]


async def memory_per_char(sizes: tuple[int, ...], mode: str = "buffer") -> dict[int, float]:
    """Peak traced bytes of one streamed turn, per character of its reply, by reply size."""
    verifier = Verifier(stream_config(mode, 64), judge=sc.InstantJudge())
    found: dict[int, float] = {}
    for size in sizes:
        text = sc.prose(size)

        async def agent(messages: list[dict[str, Any]], text: str = text) -> Any:
            return _pieces(text, 40)

        async for _ in verifier.stream(agent, TURN):  # warm: templates, tokenizer
            pass
        gc.collect()
        tracemalloc.start()
        try:
            tracemalloc.reset_peak()
            base = tracemalloc.get_traced_memory()[0]
            async for _ in verifier.stream(agent, TURN):
                pass
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        found[size] = (peak - base) / size
    return found
