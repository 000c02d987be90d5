"""How a figure is sampled: two sides interleaved (ABBA order, so drift and warm-up hit both
alike) or more rotated, compared by medians; bursts of concurrent calls with the garbage
collector's runs and CPU time over each."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import statistics
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any


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
