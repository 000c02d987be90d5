"""replyguard's hot-path benchmarks: every figure against its reference, in the same run.

    python benchmarks/run.py [--quick] [--out DIR] [--only NAME ...]

Prints a markdown table (median figures, ratios, differences, targets with PASS/MISS) and
writes ``table.md`` and ``results.json`` after every section (a run cut short keeps what it
measured; a section that raises is a row saying so, and the run goes on), then ``chart.png``
(when matplotlib is installed) to DIR
(default ``benchmarks/out/``). The loopback judge (``judge_server.py``) runs in a child process
so it does not share the measured interpreter's GIL. No network beyond 127.0.0.1.

Sections (``--only``): hot, logging, verified, bigturns, context, concurrency, import,
coldstart, cli, memory, failopen, streaming, fleet, panel, figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import platform
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import scenarios as sc
import streaming as st
from judge_server import JudgeServerProcess

SECTIONS = (
    "hot",
    "logging",
    "verified",
    "bigturns",
    "context",
    "concurrency",
    "import",
    "coldstart",
    "cli",
    "memory",
    "failopen",
    "streaming",
    "fleet",
    "panel",
    "figures",
)
FAIL_OPEN_TIMEOUT = 0.5


@dataclass
class Row:
    """One line of the table."""

    name: str
    value: str
    reference: str = "—"
    ratio: str = "—"
    difference: str = "—"
    target: str = "—"
    result: str = "info"
    data: dict[str, Any] = field(default_factory=dict)


def verdict(ok: bool) -> str:
    return "PASS" if ok else "**MISS**"


def us(seconds: float) -> str:
    return f"{seconds * 1e6:.1f} µs"


def ms(seconds: float, digits: int = 2) -> str:
    return f"{seconds * 1e3:.{digits}f} ms"


def signed_ms(seconds: float, digits: int = 2) -> str:
    return f"{seconds * 1e3:+.{digits}f} ms"


@dataclass
class Sizes:
    hot_pairs: int
    verified_pairs: int
    cold_pairs: int
    context_reps: dict[int, int]
    concurrent: int
    concurrent_rounds: int
    import_runs: int
    memory_turns: int
    fail_open_runs: int
    big_pairs: int = 60
    cold_runs: int = 7
    cli_runs: int = 11
    log_pairs: int = 3000
    stream_runs: int = 200
    panel_pairs: int = 200


FULL = Sizes(
    20000, 2000, 1000, {8_000: 300, 32_000: 150, 128_000: 60, 1_000_000: 20}, 1000, 3, 7, 1000, 5
)
QUICK = Sizes(
    3000,
    300,
    200,
    {8_000: 60, 32_000: 30, 128_000: 15, 1_000_000: 5},
    1000,
    1,
    3,
    200,
    3,
    big_pairs=20,
    cold_runs=3,
    cli_runs=5,
    log_pairs=1000,
    stream_runs=40,
    panel_pairs=40,
)


# -- sections ---------------------------------------------------------------------------------


async def hot(sizes: Sizes, rows: list[Row]) -> None:
    for kind, label in (("skip", "skip path (pending tool call)"), ("quiet", "not-triggered path")):
        pair = await sc.hot_path(kind, sizes.hot_pairs)
        rows.append(
            Row(
                f"{label}: `verifier.run` vs bare `await agent(messages)`",
                us(sc.median(pair.measured)),
                us(sc.median(pair.reference)),
                f"{pair.ratio:.1f}x",
                f"+{us(pair.difference)}",
                "≤ +20 µs",
                verdict(pair.difference <= 20e-6),
                {
                    "kind": kind,
                    "measured_s": sc.median(pair.measured),
                    "reference_s": sc.median(pair.reference),
                    "pairs": sizes.hot_pairs,
                },
            )
        )
    own_cpu = (
        (
            "replyguard's own share of a verified turn: in-process instant judge vs bare agent",
            "≤ +0.1 ms",
            "in_process",
            await sc.in_process_verified(max(sizes.verified_pairs, 500)),
        ),
        (
            "the same, CPU caches emptied before each call (32 MiB written, untimed),"
            " as after a litellm call",
            "—",
            "in_process_cold",
            await sc.cold_in_process_verified(sizes.cold_pairs),
        ),
    )
    for label, target, kind, pair in own_cpu:
        rows.append(
            Row(
                label,
                us(sc.median(pair.measured)),
                us(sc.median(pair.reference)),
                f"{pair.ratio:.0f}x",
                f"+{us(pair.difference)}",
                target,
                verdict(pair.difference <= 0.1e-3) if kind == "in_process" else "info",
                {
                    "kind": kind,
                    "measured_s": sc.median(pair.measured),
                    "reference_s": sc.median(pair.reference),
                },
            )
        )


async def verified(sizes: Sizes, rows: list[Row], server: JudgeServerProcess) -> None:
    for wire in sc.WIRES.values():
        before = server.stats()
        by_hand, default, info = await sc.verified_vs_requests(
            wire, server.url, sizes.verified_pairs
        )
        after = server.stats()
        new_connections = after["connections"] - before["connections"]
        calls = 3 * (sizes.verified_pairs + 30) + 1
        for pair, reference, target, limit in (
            (by_hand, "the same judge request sent by hand", "≤ 1.08x", 1.08),
            (default, "a default `litellm.acompletion` (for information)", "—", None),
        ):
            rows.append(
                Row(
                    f"verified turn (PASS first time), {wire.judge_model} vs {reference}"
                    f" ({sizes.verified_pairs} rounds of the three rotated;"
                    f" {new_connections} TCP connections opened for {calls} calls)",
                    ms(sc.median(pair.measured), 3),
                    ms(sc.median(pair.reference), 3),
                    f"{pair.ratio:.3f}x",
                    signed_ms(pair.difference, 3),
                    target,
                    verdict(pair.ratio <= limit) if limit else "info",
                    {
                        "wire": wire.name,
                        "reference": "request" if limit else "default",
                        "measured_s": sc.median(pair.measured),
                        "reference_s": sc.median(pair.reference),
                        "measured_samples": pair.measured,
                        "reference_samples": pair.reference,
                        "new_connections": new_connections,
                        **info,
                    },
                )
            )


async def logging_section(sizes: Sizes, rows: list[Row]) -> None:
    pair = await sc.logging_on_vs_off(sizes.log_pairs)
    rows.append(
        Row(
            "verified turn (in-process instant judge) with the `replyguard` logger at INFO vs"
            " logging off (WARNING)",
            us(sc.median(pair.measured)),
            us(sc.median(pair.reference)),
            f"{pair.ratio:.2f}x",
            f"+{us(pair.difference)}",
            "≤ +0.1 ms",
            verdict(pair.difference <= 0.1e-3),
            {"kind": "logging", "measured_s": sc.median(pair.measured)},
        )
    )


async def bigturns(sizes: Sizes, rows: list[Row], server: JudgeServerProcess) -> None:
    wire = sc.WIRES["anthropic"]
    for chars, limit in ((128_000, 5e-3), (1_000_000, 8e-3)):
        pair, info = await sc.big_turn_vs_raw(wire, server.url, chars, sizes.big_pairs)
        label = "1M" if chars >= 1_000_000 else f"{chars // 1000}K"
        rows.append(
            Row(
                f"`verify()` end to end, {label}-char prose turn ({info['prompt_chars']:,} chars"
                f" sent), {wire.judge_model} vs raw `litellm.acompletion` with the same messages",
                ms(sc.median(pair.measured)),
                ms(sc.median(pair.reference)),
                f"{pair.ratio:.2f}x",
                signed_ms(pair.difference),
                f"≤ +{limit * 1e3:.0f} ms",
                verdict(pair.difference <= limit),
                {"big_chars": chars, "difference_s": pair.difference},
            )
        )


async def floor(sizes: Sizes, rows: list[Row], server: JudgeServerProcess) -> None:
    for wire in sc.WIRES.values():
        pair, info = await sc.bare_post_vs_raw(wire, server.url, sizes.verified_pairs)
        rows.append(
            Row(
                f"the floor: a bare HTTP POST of the same body ({info['body_bytes']:,} bytes,"
                f" one kept-alive connection), {wire.judge_model}, vs raw `litellm.acompletion`",
                ms(sc.median(pair.measured), 3),
                ms(sc.median(pair.reference), 3),
                f"{pair.ratio:.3f}x",
                signed_ms(pair.difference, 3),
                "—",
                "info",
                {"floor_wire": wire.name, "post_s": sc.median(pair.measured)},
            )
        )


_COLLECTOR = {
    "on": "",
    "off": ", the garbage collector off in both",
    "frozen": ", `gc.freeze()` in both once their imports are done",
}


async def coldstart(sizes: Sizes, rows: list[Row], server: JudgeServerProcess) -> None:
    wire = sc.WIRES["openai"]
    for collector in sc.COLLECTOR_MODES:
        ours, theirs, our_passes, their_passes = await asyncio.to_thread(
            sc.cold_start_times, wire, server.url, sizes.cold_runs, collector=collector
        )
        mine, raw = sc.median(ours), sc.median(theirs)
        passes = f"full collections {sc.median(our_passes):g} vs {sc.median(their_passes):g}"
        rows.append(
            Row(
                "first verified turn in a fresh interpreter (imports + turn) vs first raw"
                f" `litellm.acompletion` (`import litellm` + call), {wire.judge_model},"
                f" median of {len(ours)}{_COLLECTOR[collector]} ({passes})",
                ms(mine, 0),
                ms(raw, 0),
                f"{mine / raw:.3f}x",
                signed_ms(mine - raw, 0),
                "≤ +50 ms" if collector == "off" else "—",
                verdict(mine - raw <= 0.05) if collector == "off" else "info",
                {
                    "cold_s": ours,
                    "cold_raw_s": theirs,
                    "collector": collector,
                    "full_collections": our_passes,
                    "raw_full_collections": their_passes,
                },
            )
        )


async def warmstart(sizes: Sizes, rows: list[Row], server: JudgeServerProcess) -> None:
    for wire in sc.WIRES.values():
        first, second = await asyncio.to_thread(
            sc.warm_start_times, wire, server.url, sizes.cold_runs
        )
        one, two = sc.median(first), sc.median(second)
        rows.append(
            Row(
                f"first verified turn after `warmup()` in a fresh interpreter vs its second turn,"
                f" {wire.judge_model}, median of {len(first)}",
                ms(one, 1),
                ms(two, 1),
                f"{one / two:.2f}x",
                signed_ms(one - two, 1),
                data={"first_s": first, "second_s": second},
            )
        )


async def cli(sizes: Sizes, rows: list[Row]) -> None:
    ours, theirs = await asyncio.to_thread(sc.cli_wall_times, sizes.cli_runs)
    mine, bare = sc.median(ours), sc.median(theirs)
    rows.append(
        Row(
            "`replyguard heartbeat --workspace ws HEARTBEAT_OK` wall time, decided by the check"
            f" (open task, no model call), median of {len(ours)} vs `python -c pass`",
            ms(mine, 0),
            ms(bare, 0),
            f"{mine / bare:.1f}x",
            signed_ms(mine - bare, 0),
            "≤ 200 ms wall",
            verdict(mine <= 0.2),
            {"cli_s": ours, "python_s": theirs},
        )
    )


async def context(sizes: Sizes, rows: list[Row]) -> None:
    from replyguard.context import _tokens as tokens

    cases = [(n, "prose") for n in sizes.context_reps] + [(128_000, "cjk"), (128_000, "json")]
    encoding = tokens.encoding()
    for chars, kind in cases:
        reps = sizes.context_reps[chars]
        times, prompt = sc.sized_context(chars, kind, reps)
        turn, reply_text, _ = sc.sized_turn(chars, kind)
        whole = "\n".join([turn.user_message, *(m["content"] for m in turn.history), reply_text])
        counts = []
        for _ in range(max(3, reps // 5)):
            t0 = time.perf_counter()
            encoding.encode_ordinary(whole)
            counts.append(time.perf_counter() - t0)
        median, reference = sc.median(times), sc.median(counts)
        limit = 10e-3 if chars >= 1_000_000 else 5e-3 if chars >= 128_000 else None
        label = f"{chars // 1000}K" if chars < 1_000_000 else "1M"
        rows.append(
            Row(
                f"context `build_judge_prompt`, {label} chars {kind} → {prompt.tokens:,} tokens"
                f" sent (trimmed: {', '.join(prompt.trimmed) or 'nothing'})",
                ms(median),
                f"{ms(reference)} (tiktoken of the whole turn once)",
                f"{median / reference:.2f}x",
                signed_ms(median - reference),
                f"≤ {limit * 1e3:.0f} ms" if limit else "—",
                verdict(median <= limit) if limit else "info",
                {
                    "chars": chars,
                    "kind": kind,
                    "median_s": median,
                    "tokens": prompt.tokens,
                    "whole_count_s": reference,
                    "trimmed": list(prompt.trimmed),
                    "reps": reps,
                },
            )
        )


async def concurrency(sizes: Sizes, rows: list[Row], server: JudgeServerProcess) -> None:
    for frozen in (False, True):
        for wire in sc.WIRES.values():
            measured, reference = await sc.concurrent_vs_raw(
                wire, server.url, sizes.concurrent, 100, sizes.concurrent_rounds, frozen=frozen
            )
            rows.extend(_burst_rows(sizes, wire, measured, reference, frozen=frozen))


def _burst_rows(
    sizes: Sizes,
    wire: sc.Wire,
    measured: list[sc.Burst],
    reference: list[sc.Burst],
    *,
    frozen: bool = False,
) -> list[Row]:
    """The burst's wall-time row and its CPU-time row; turns that failed open are counted in
    both (a busy machine's result), never raised. ``frozen``: the host's recipe
    (``gc.freeze()`` once warm), rows for information beside the target's."""
    count = sizes.concurrent
    wall = sc.median([b.wall for b in measured])
    raw_wall = sc.median([b.wall for b in reference])
    p99 = sc.median([b.p99 for b in measured])
    raw_p99 = sc.median([b.p99 for b in reference])
    cpu = sc.median([b.cpu for b in measured]) / count
    raw_cpu = sc.median([b.cpu for b in reference]) / count
    failed = [b.failed for b in measured]
    raw_failed = [b.failed for b in reference]
    all_passed = not any(failed) and not any(raw_failed)
    failures = "" if all_passed else f"; not passed per burst: {failed}, raw {raw_failed}"
    ratio = wall / raw_wall
    full = [b.collections[2] for b in measured]
    raw_full = [b.collections[2] for b in reference]
    gc_cpu = sc.median([b.gc_seconds for b in measured]) / count
    raw_gc_cpu = sc.median([b.gc_seconds for b in reference]) / count
    data = {
        "wire": wire.name,
        "wall_s": wall,
        "raw_wall_s": raw_wall,
        "p99_s": p99,
        "raw_p99_s": raw_p99,
        "cpu_per_turn_s": cpu,
        "raw_cpu_per_turn_s": raw_cpu,
        "failed": failed,
        "raw_failed": raw_failed,
        "full_collections": full,
        "raw_full_collections": raw_full,
        "collections": [list(b.collections) for b in measured],
        "raw_collections": [list(b.collections) for b in reference],
        "gc_cpu_per_turn_s": gc_cpu,
        "raw_gc_cpu_per_turn_s": raw_gc_cpu,
        "rounds": sizes.concurrent_rounds,
        "latencies_s": measured[-1].latencies,
        "raw_latencies_s": reference[-1].latencies,
    }
    name = (
        f"{count} concurrent verified turns vs {count} raw calls of the same judge request,"
        f" judge answering after 100 ms, {wire.judge_model}, median of"
        f" {sizes.concurrent_rounds} bursts{failures}"
        f"{', `gc.freeze()` in both once warm (the host recipe)' if frozen else ''}"
    )
    return [
        Row(
            f"{name}: wall (p99 per turn)",
            f"{ms(wall, 0)} ({ms(p99, 0)})",
            f"{ms(raw_wall, 0)} ({ms(raw_p99, 0)}) raw",
            f"{ratio:.2f}x (p99 {p99 / raw_p99:.2f}x)",
            signed_ms(wall - raw_wall, 0),
            "—" if frozen else "≤ 1.08x",
            "info" if frozen else verdict(ratio <= 1.08 and all_passed),
            data,
        ),
        Row(
            f"{name}: process CPU time per turn (of it the garbage collector's:"
            f" {ms(gc_cpu, 3)} vs {ms(raw_gc_cpu, 3)} raw; full collections per burst"
            f" {full} vs {raw_full} raw)",
            ms(cpu, 3),
            f"{ms(raw_cpu, 3)} raw",
            f"{cpu / raw_cpu:.2f}x",
            signed_ms(cpu - raw_cpu, 3),
            "—" if frozen else "≤ raw + 0.5 ms",
            "info" if frozen else verdict(cpu - raw_cpu <= 0.5e-3 and all_passed),
            {
                "wire": wire.name,
                "cpu_per_turn_s": cpu,
                "raw_cpu_per_turn_s": raw_cpu,
                "gc_cpu_per_turn_s": gc_cpu,
                "raw_gc_cpu_per_turn_s": raw_gc_cpu,
                "full_collections": full,
                "raw_full_collections": raw_full,
            },
        ),
    ]


async def imports(sizes: Sizes, rows: list[Row]) -> None:
    ours, theirs, pulled = await asyncio.to_thread(sc.import_times, sizes.import_runs)
    ratio = sc.median(ours) / sc.median(theirs)
    rows.append(
        Row(
            "`import replyguard` vs `import litellm` (fresh interpreters)"
            + (" — replyguard imported litellm!" if pulled else ""),
            ms(sc.median(ours), 0),
            ms(sc.median(theirs), 0),
            f"{ratio:.3f}x",
            signed_ms(sc.median(ours) - sc.median(theirs), 0),
            "≤ 0.1x",
            verdict(ratio <= 0.1 and not pulled),
            {"replyguard_s": ours, "litellm_s": theirs, "pulls_litellm": pulled},
        )
    )


async def memory(sizes: Sizes, rows: list[Row]) -> None:
    found = await sc.memory_in_flight(sizes.memory_turns)
    kib = 1024
    rows.append(
        Row(
            f"memory per in-flight verified turn ({sizes.memory_turns} turns blocked on the"
            " judge, tracemalloc)",
            f"{found['verified'] / kib:.1f} KiB",
            f"{found['bare'] / kib:.1f} KiB (bare agent call held the same way)",
            f"{found['verified'] / found['bare']:.1f}x",
            f"+{(found['verified'] - found['bare']) / kib:.1f} KiB",
            "-",
            "info",
            {"verified_traced": found["verified"], "bare_traced": found["bare"]},
        )
    )


async def failopen(sizes: Sizes, rows: list[Row], server: JudgeServerProcess) -> None:
    for wire in sc.WIRES.values():
        times = await sc.fail_open(wire, server.url, sizes.fail_open_runs, FAIL_OPEN_TIMEOUT)
        worst = max(times)
        rows.append(
            Row(
                f"fail-open, judge hangs, timeoutSeconds {FAIL_OPEN_TIMEOUT}, {wire.judge_model}"
                f" (median, worst of {len(times)})",
                f"{ms(sc.median(times), 1)} (worst {ms(worst, 1)})",
                f"{ms(FAIL_OPEN_TIMEOUT, 0)} timeout",
                f"{worst / FAIL_OPEN_TIMEOUT:.3f}x",
                signed_ms(worst - FAIL_OPEN_TIMEOUT, 1),
                "≤ timeout + 100 ms",
                verdict(worst <= FAIL_OPEN_TIMEOUT + 0.1),
                {"wire": wire.name, "times_s": times},
            )
        )
    still_open = server.stats()["open"] - 1  # the stats request's own connection
    rows.append(
        Row(
            "connections still open at the hung judge after every fail-open turn ended",
            str(still_open),
            target="0",
            result=verdict(still_open == 0),
            data={"open": still_open},
        )
    )


async def streaming(sizes: Sizes, rows: list[Row], server: JudgeServerProcess) -> None:
    deltas, hold = 1000, 64
    measured, reference = await st.release_vs_raw(
        st.chunk_agent(deltas), sizes.stream_runs, hold, time.thread_time
    )
    raw, to_last = sc.median(reference.last), sc.median(measured.last)
    per_delta = (to_last - raw) / deltas
    rows.append(
        Row(
            f"streaming, release mode: per-delta overhead over iterating the raw litellm stream"
            f" ({deltas} `ModelResponseStream` chunks made in advance; rules with forbidden"
            " phrases scanned on every delta; CPU time of the thread)",
            us(per_delta),
            f"{ms(raw)} raw, {ms(to_last)} to the last delta",
            f"{to_last / raw:.2f}x",
            f"+{us(per_delta)} per delta",
            "≤ 5 µs per delta",
            verdict(per_delta <= 5e-6),
            {"measured_s": measured.last, "reference_s": reference.last, "deltas": deltas},
        )
    )
    try:
        runs = max(sizes.stream_runs // 4, 10)
        agent = st.litellm_agent(server.url, f"s{deltas}")
        measured, reference = await st.release_vs_raw(agent, runs, hold, settle=True)
        cpu = sc.median(measured.last_cpu) / sc.median(reference.last_cpu)
        wall = sc.median(measured.last) / sc.median(reference.last)
        paired, low, high = st.pair_ratios(measured.last_cpu, reference.last_cpu)
        rows.append(
            Row(
                f"streaming, release mode: a {deltas}-delta reply over the loopback (litellm's"
                " aiohttp path), to the last delta vs to the raw stream's end: CPU time of the"
                f" thread ({runs} pairs ABBA, a full collection before each stream; the pairs'"
                f" ratios: median {paired:.3f}x, quartiles {low:.3f}x-{high:.3f}x; wall time:"
                " the next row)",
                ms(sc.median(measured.last_cpu)),
                ms(sc.median(reference.last_cpu)),
                f"{cpu:.3f}x",
                signed_ms(sc.median(measured.last_cpu) - sc.median(reference.last_cpu)),
                "≤ 1.05x",
                verdict(cpu <= 1.05),
                {
                    "measured_cpu_s": measured.last_cpu,
                    "reference_cpu_s": reference.last_cpu,
                    "pair_ratios": {"median": paired, "q1": low, "q3": high},
                },
            )
        )
        rows.append(
            Row(
                f"the same {deltas}-delta reply, wall time (on a loaded machine it counts the"
                " turns other processes take)",
                ms(sc.median(measured.last)),
                ms(sc.median(reference.last)),
                f"{wall:.3f}x",
                signed_ms(sc.median(measured.last) - sc.median(reference.last)),
                "—",
                "info",
                {"measured_s": measured.last, "reference_s": reference.last},
            )
        )
        for window in (0, hold):
            agent = st.litellm_agent(server.url, "s200p1")
            measured, reference = await st.release_vs_raw(agent, runs, window)
            first, allowed = sc.median(measured.first), sc.median(reference.past_hold)
            rows.append(
                Row(
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
            )
        cut = await st.cut_short(server.url, 1000, 1, 20)
        rows.append(
            Row(
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
        )
    finally:
        await sc.close_clients()
    found = await st.memory_per_char((10_000, 100_000, 1_000_000))
    small, large = found[100_000], found[1_000_000]
    rows.append(
        Row(
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
    )


async def panel(sizes: Sizes, rows: list[Row], server: JudgeServerProcess) -> None:
    floor, versus_one = await sc.panel_sides(server.url, sizes.panel_pairs)
    members = len(sc.PANEL_MEMBERS)
    rows.append(
        Row(
            f"judge panel of {members} (every call answered after 50 ms), `verify` vs the same"
            f" {members} requests sent at once with raw `litellm.acompletion`"
            f" ({sizes.panel_pairs} pairs)",
            ms(sc.median(floor.measured), 2),
            ms(sc.median(floor.reference), 2),
            f"{floor.ratio:.3f}x",
            signed_ms(floor.difference, 2),
            "≤ +3 ms (the slowest member + a few ms)",
            verdict(floor.difference <= 3e-3),
            {"panel_samples": floor.measured, "raw_samples": floor.reference},
        )
    )
    rows.append(
        Row(
            f"judge panel of {members} vs one judge, `verify` (what the members' own calls add:"
            " litellm's CPU work per call shares one event loop)",
            ms(sc.median(versus_one.measured), 2),
            ms(sc.median(versus_one.reference), 2),
            f"{versus_one.ratio:.3f}x",
            signed_ms(versus_one.difference, 2),
            data={"panel_samples": versus_one.measured, "single_samples": versus_one.reference},
        )
    )


async def fleet_section(sizes: Sizes, rows: list[Row]) -> None:
    import fleet

    found = await fleet.measure(sizes.fail_open_runs * 200)
    timeout = found["timeout_s"]
    rows += [
        Row(
            f"shared breaker + spend limit per judged turn, loopback Redis"
            f" (median of {found['pairs'] - found['left_out']} pairs, {found['left_out']} left"
            f" out as degraded; p95 {ms(found['up_p95_s'], 3)})",
            ms(found["up_s"], 3),
            "the same turn without state",
            "—",
            signed_ms(found["up_s"], 3),
            "≤ 0.3 ms",
            verdict(found["up_s"] <= 0.0003),
            found,
        ),
        Row(
            "spend limit per judged turn, in-process (no state)",
            ms(found["local_s"], 3),
            "the same turn without limits",
            target="—",
        ),
        Row(
            f"Redis paused: the first turn's added time (timeoutMs {timeout * 1000:g})",
            ms(found["down_first_s"], 1),
            f"{ms(timeout, 0)} timeout",
            target="≤ timeoutMs + 10 ms",
            result=verdict(found["down_first_s"] <= timeout + 0.01),
        ),
        Row(
            "Redis paused: each later turn's added time (known down)",
            ms(found["down_later_s"], 3),
            target="≤ 0.1 ms",
            result=verdict(found["down_later_s"] <= 0.0001),
        ),
    ]
    admission = await fleet.measure_admission()
    for burst in admission["bursts"]:
        rows.append(_admission_row(burst))


async def figures_section(sizes: Sizes, rows: list[Row]) -> None:
    import figures

    found = await figures.measure(rounds=5 if sizes is FULL else 2)
    false_fail = found["false_fails"] / found["grounded"]
    catch = found["caught"] / found["altered"]
    rows += [
        Row(
            f"`figures` check, false FAILs on {found['grounded']} grounded replies (corpus)",
            f"{false_fail:.1%} ({found['false_fails']})",
            target="< 2 %",
            result=verdict(false_fail < 0.02),
            data=found,
        ),
        Row(
            f"`figures` check, altered figures caught and named, of {found['altered']} replies",
            f"{catch:.1%} ({found['caught']})",
            target="≥ 95 %",
            result=verdict(catch >= 0.95),
        ),
        Row(
            "`figures` check per reply (median), beside the `claims` check on the same replies",
            us(found["figures_s"]),
            us(found["claims_s"]),
            f"{found['figures_s'] / found['claims_s']:.2f}x",
            f"{(found['figures_s'] - found['claims_s']) * 1e6:+.1f} µs",
        ),
    ]


_BEFORE = {3: " (each held at its worst case: 0 admitted)", 25: " (worst case: 4)"}
"""What the same bursts got when every call was held at its worst case (measured in process
with the code before realistic estimates)."""


def _admission_row(burst: dict[str, Any]) -> Row:
    """Calls admitted out of a burst against a spend limit worth ``calls`` calls."""
    calls, limit, call = burst["calls"], burst["limit"], burst["call"]
    within = burst["spent"] <= limit + call
    if burst.get("unpriced"):
        name = f"spend limit ${limit:g}, unpriced judge ${call:g} a call, {burst['turns']} at once"
        name += f", {burst['home']}"
        value = f"spent ${burst['spent']:.2f}"
        target, ok = f"≤ ${limit + call:.2f} (limit + one call)", within
    else:
        name = (
            f"spend limit worth {calls} calls (+ half), {burst['turns']} turns at once,"
            f" {burst['home']}{_BEFORE.get(calls, '')}"
        )
        value = f"{burst['admitted']} admitted"
        target, ok = f"≥ {0.8 * calls:g}; spend ≤ limit + one call", within
        ok = ok and burst["admitted"] >= 0.8 * calls
    if burst["degraded"]:
        name += f" ({burst['degraded']} decided on local state)"
    return Row(name, value, f"spent ${burst['spent']:.6f} of ${limit:.6f}", target=target,
               result=verdict(ok), data=burst)  # fmt: skip


# -- output -----------------------------------------------------------------------------------


def table(rows: list[Row]) -> str:
    head = "| measurement | replyguard | reference | ratio | difference | target | result |"
    lines = [head, "|" + "---|" * 7]
    for r in rows:
        lines.append(
            f"| {r.name} | {r.value} | {r.reference} | {r.ratio} | {r.difference} | {r.target}"
            f" | {r.result} |"
        )
    return "\n".join(lines)


def chart(rows: list[Row], path: Path) -> str | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed: no chart (pip install 'matplotlib>=3.8,<4')"

    def pick(key: str, value: Any) -> list[Row]:
        return [r for r in rows if r.data.get(key) == value]

    fig, axes = plt.subplots(2, 3, figsize=(17, 9.5))
    fig.suptitle("replyguard hot-path benchmarks (medians; dashed lines are targets)")
    miss, ok = "#d9534f", "#5cb85c"

    ax = axes[0][0]
    hot = [r for r in rows if r.data.get("kind") in ("skip", "quiet")]
    if hot:
        names = ["skip", "not triggered"]
        over = [(r.data["measured_s"] - r.data["reference_s"]) * 1e6 for r in hot]
        ax.bar(names[: len(over)], over, color=[ok if o <= 20 else miss for o in over])
        ax.axhline(20, ls="--", color="k")
        ax.set_title("skip / not-triggered: µs over the bare agent call")
        ax.set_ylabel("µs")

    ax = axes[0][1]
    ver = [r for r in rows if "measured_samples" in r.data]
    if ver:
        for i, r in enumerate(ver):
            diffs = [
                (a - b) * 1e3
                for a, b in zip(
                    r.data["measured_samples"], r.data["reference_samples"], strict=True
                )
            ]
            diffs.sort()
            lo, hi = int(len(diffs) * 0.05), int(len(diffs) * 0.95)
            ax.boxplot(diffs[lo:hi], positions=[i], widths=0.5, showfliers=False)
        ax.set_xticks(range(len(ver)), [r.data["wire"] for r in ver])
        ax.axhline(0.15, ls="--", color="k")
        ax.set_title("verified turn - raw litellm, per interleaved pair (ms, p5-p95)")
        ax.set_ylabel("ms")

    ax = axes[0][2]
    ctx = [r for r in rows if "chars" in r.data]
    if ctx:
        labels = [
            f"{'1M' if r.data['chars'] >= 1e6 else str(r.data['chars'] // 1000) + 'K'}"
            f" {r.data['kind']}"
            for r in ctx
        ]
        values = [r.data["median_s"] * 1e3 for r in ctx]
        refs = [r.data["whole_count_s"] * 1e3 for r in ctx]
        limits = [
            10 if r.data["chars"] >= 1e6 else 5 if r.data["chars"] >= 128e3 else None for r in ctx
        ]
        xs = range(len(ctx))
        ax.bar(
            [x - 0.2 for x in xs],
            values,
            0.4,
            label="build_judge_prompt",
            color=[miss if lim and v > lim else ok for v, lim in zip(values, limits, strict=True)],
        )
        ax.bar([x + 0.2 for x in xs], refs, 0.4, label="tiktoken of the whole turn", color="#999")
        for x, lim in zip(xs, limits, strict=True):
            if lim:
                ax.hlines(lim, x - 0.45, x + 0.45, ls="--", color="k")
        ax.set_xticks(list(xs), labels, rotation=30, ha="right")
        ax.set_yscale("log")
        ax.set_title("context assembly (ms, log)")
        ax.legend(fontsize=8)

    ax = axes[1][0]
    conc = [r for r in rows if "raw_wall_s" in r.data]
    if conc:
        for r, colour in zip(conc, ("tab:blue", "tab:orange"), strict=False):
            for key, style in (("latencies_s", "-"), ("raw_latencies_s", ":")):
                lat = sorted(x * 1e3 for x in r.data[key])
                ax.plot(
                    lat,
                    [i / len(lat) for i in range(len(lat))],
                    style,
                    color=colour,
                    label=f"{r.data['wire']} {'verified' if key == 'latencies_s' else 'raw'}",
                )
        ax.set_title(f"{conc[0].name.split(' ')[0]} concurrent turns: latency CDF, last round (ms)")
        ax.set_xlabel("ms from launch")
        ax.legend(fontsize=8)

    ax = axes[1][1]
    imp = pick("pulls_litellm", False) + pick("pulls_litellm", True)
    if imp:
        r = imp[0]
        ours, theirs = sc.median(r.data["replyguard_s"]) * 1e3, sc.median(r.data["litellm_s"]) * 1e3
        ax.bar(
            ["import replyguard", "import litellm"],
            [ours, theirs],
            color=[ok if ours <= theirs * 0.1 else miss, "#999"],
        )
        ax.axhline(theirs * 0.1, ls="--", color="k")
        ax.set_title("import time (ms), target 0.1x litellm")

    ax = axes[1][2]
    fo = [r for r in rows if "times_s" in r.data]
    mem = [r for r in rows if "verified_traced" in r.data]
    if fo:
        for i, r in enumerate(fo):
            ax.scatter([i] * len(r.data["times_s"]), [t * 1e3 for t in r.data["times_s"]])
        ax.axhline((FAIL_OPEN_TIMEOUT + 0.1) * 1e3, ls="--", color="k")
        ax.axhline(FAIL_OPEN_TIMEOUT * 1e3, ls=":", color="#999")
        ax.set_xticks(range(len(fo)), [r.data["wire"] for r in fo])
        title = "fail-open turn time (ms), hung judge"
        if mem:
            m = mem[0].data
            title += f"\nmemory/in-flight turn {m['verified_traced'] / 1024:.1f} KiB"
            title += f" (bare {m['bare_traced'] / 1024:.1f} KiB)"
        ax.set_title(title)

    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return None


def _sections(
    sizes: Sizes, server: JudgeServerProcess
) -> dict[str, Callable[[list[Row]], Awaitable[None]]]:
    """Each section's measurement, appending its rows."""

    async def both(rows: list[Row], *parts: Callable[..., Awaitable[None]]) -> None:
        for part in parts:
            await part(sizes, rows, server)

    return {
        "hot": lambda rows: hot(sizes, rows),
        "logging": lambda rows: logging_section(sizes, rows),
        "verified": lambda rows: both(rows, verified, floor),
        "bigturns": lambda rows: bigturns(sizes, rows, server),
        "context": lambda rows: context(sizes, rows),
        "concurrency": lambda rows: concurrency(sizes, rows, server),
        "import": lambda rows: imports(sizes, rows),
        "coldstart": lambda rows: both(rows, coldstart, warmstart),
        "cli": lambda rows: cli(sizes, rows),
        "memory": lambda rows: memory(sizes, rows),
        "failopen": lambda rows: failopen(sizes, rows, server),
        "streaming": lambda rows: streaming(sizes, rows, server),
        "fleet": lambda rows: fleet_section(sizes, rows),
        "panel": lambda rows: panel(sizes, rows, server),
        "figures": lambda rows: figures_section(sizes, rows),
    }


async def main_async(args: argparse.Namespace, written: Callable[[list[Row]], None]) -> list[Row]:
    """Every section asked for, in order; ``written`` gets the rows so far after each one. A
    section that raises (a busy machine, a missing program) becomes a row saying so, and the
    run goes on."""
    sizes = QUICK if args.quick else FULL
    only = set(args.only or SECTIONS)
    rows: list[Row] = []
    logging.getLogger("replyguard").setLevel(logging.WARNING)
    with JudgeServerProcess() as server:
        measure = _sections(sizes, server)
        for name in SECTIONS:
            if name not in only:
                continue
            started = time.perf_counter()
            print(f"… {name}", file=sys.stderr, flush=True)
            section: list[Row] = []
            try:
                await measure[name](section)
            except Exception as exc:  # a section's failure is a row of the table
                failure = f"section `{name}` did not finish: {type(exc).__name__}: {exc}"
                section.append(Row(failure[:300], "—", result="**MISS**"))
            rows += section
            written(rows)
            print(f"  {name} took {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer samples (about a minute)")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "out")
    parser.add_argument("--only", nargs="*", choices=SECTIONS, help="run only these sections")
    args = parser.parse_args()
    from importlib.metadata import version

    started = time.strftime("%Y-%m-%d %H:%M")
    args.out.mkdir(parents=True, exist_ok=True)

    def written(rows: list[Row]) -> str:
        header = (
            f"replyguard {version('replyguard')}, litellm {version('litellm')},"
            f" Python {platform.python_version()}, {os.cpu_count()} CPUs, load average"
            f" {os.getloadavg()[0]:.1f} after the last section,"
            f" {'quick' if args.quick else 'full'} run started {started}"
        )
        text = f"{header}\n\n{table(rows)}\n"
        (args.out / "table.md").write_text(text, encoding="utf-8")
        (args.out / "results.json").write_text(
            json.dumps([r.__dict__ for r in rows], indent=1, default=str), encoding="utf-8"
        )
        return text

    rows = asyncio.run(main_async(args, written))
    print(written(rows))
    note = chart(rows, args.out / "chart.png")
    print(note or f"chart: {args.out / 'chart.png'}")
    misses = sum(r.result.endswith("MISS**") for r in rows)
    print(f"{misses} target(s) missed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
