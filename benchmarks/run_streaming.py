"""``run.py``'s ``streaming`` section: ``Verifier.stream`` in ``release`` mode beside the raw
litellm stream (per delta, over the loopback, to the first delta), a bad stream cut short, and
``buffer`` mode's memory per character."""

from __future__ import annotations

import time

import streaming as st
from judge_server import JudgeServerProcess
from run_sizes import Sizes
from run_table import Row, ms, pair_cells, signed_ms, us, verdict
from sampling import Pair, median
from scenarios import close_clients

DELTAS = 1000
HOLD = 64


async def streaming(sizes: Sizes, rows: list[Row], server: JudgeServerProcess) -> None:
    rows.append(await _per_delta(sizes))
    try:
        runs = max(sizes.stream_runs // 4, 10)
        rows += await _over_loopback(server, runs)
        for window in (0, HOLD):
            rows.append(await _first_delta(server, runs, window))
        rows.append(await _cut_short(server))
    finally:
        await close_clients()
    rows.append(await _buffer_memory())


async def _per_delta(sizes: Sizes) -> Row:
    measured, reference = await st.release_vs_raw(
        st.chunk_agent(DELTAS), sizes.stream_runs, HOLD, time.thread_time
    )
    raw, to_last = median(reference.last), median(measured.last)
    per_delta = (to_last - raw) / DELTAS
    return Row(
        f"streaming, release mode: per-delta overhead over iterating the raw litellm stream"
        f" ({DELTAS} `ModelResponseStream` chunks made in advance; rules with forbidden"
        " phrases scanned on every delta; CPU time of the thread)",
        us(per_delta),
        f"{ms(raw)} raw, {ms(to_last)} to the last delta",
        f"{to_last / raw:.2f}x",
        f"+{us(per_delta)} per delta",
        "≤ 5 µs per delta",
        verdict(per_delta <= 5e-6),
        {"measured_s": measured.last, "reference_s": reference.last, "deltas": DELTAS},
    )


async def _over_loopback(server: JudgeServerProcess, runs: int) -> list[Row]:
    agent = st.litellm_agent(server.url, f"s{DELTAS}")
    measured, reference = await st.release_vs_raw(agent, runs, HOLD, settle=True)
    cpu = Pair(measured.last_cpu, reference.last_cpu)
    wall = Pair(measured.last, reference.last)
    paired, low, high = st.pair_ratios(measured.last_cpu, reference.last_cpu)
    return [
        Row(
            f"streaming, release mode: a {DELTAS}-delta reply over the loopback (litellm's"
            " aiohttp path), to the last delta vs to the raw stream's end: CPU time of the"
            f" thread ({runs} pairs ABBA, a full collection before each stream; the pairs'"
            f" ratios: median {paired:.3f}x, quartiles {low:.3f}x-{high:.3f}x; wall time:"
            " the next row)",
            *pair_cells(cpu, 3, 2),
            "≤ 1.05x",
            verdict(cpu.ratio <= 1.05),
            {
                "measured_cpu_s": measured.last_cpu,
                "reference_cpu_s": reference.last_cpu,
                "pair_ratios": {"median": paired, "q1": low, "q3": high},
            },
        ),
        Row(
            f"the same {DELTAS}-delta reply, wall time (on a loaded machine it counts the"
            " turns other processes take)",
            *pair_cells(wall, 3, 2),
            "—",
            "info",
            {"measured_s": measured.last, "reference_s": reference.last},
        ),
    ]


async def _first_delta(server: JudgeServerProcess, runs: int, window: int) -> Row:
    agent = st.litellm_agent(server.url, "s200p1")
    measured, reference = await st.release_vs_raw(agent, runs, window)
    first, allowed = median(measured.first), median(reference.past_hold)
    return Row(
        f"streaming, release mode, holdBackChars {window}: time to the first delta"
        " (one 3-4 character chunk a millisecond) vs the raw stream's first text"
        f" past {window} characters",
        ms(first),
        ms(allowed),
        f"{first / allowed:.2f}x",
        signed_ms(first - allowed),
        "≤ +1 ms",
        verdict(first - allowed <= 1e-3),
        {"measured_s": measured.first, "reference_s": reference.past_hold},
    )


async def _cut_short(server: JudgeServerProcess) -> Row:
    cut = await st.cut_short(server.url, 1000, 1, 20)
    return Row(
        "streaming: a bad stream cut short (forbidden phrase in chunk 20 of 1,000, one a"
        " millisecond): chunks the provider sent before the stream was closed",
        f"{cut['chunks_sent']} of {cut['chunks']}",
        f"{cut['chunks']} without the cut",
        f"{cut['chunks_sent'] / cut['chunks']:.3f}x",
        f"{cut['chunks'] - cut['chunks_sent']} chunks not paid for",
        "≤ 5% of the chunks sent",
        verdict(cut["chunks_sent"] <= 0.05 * cut["chunks"] and cut["streams_cut"] == 1),
        cut,
    )


async def _buffer_memory() -> Row:
    found = await st.memory_per_char((10_000, 100_000, 1_000_000))
    small, large = found[100_000], found[1_000_000]
    return Row(
        "streaming, buffer mode: peak memory of one turn per character of its reply"
        " (10K / 100K / 1M characters, tracemalloc)",
        " / ".join(f"{value:.1f} B" for value in found.values()),
        "—",
        f"{large / small:.2f}x (1M vs 100K)",
        "—",
        "linear: 1M ≤ 1.2x of 100K per character",
        verdict(large <= 1.2 * small),
        {"bytes_per_char": found},
    )
