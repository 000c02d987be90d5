"""``run.py``'s ``concurrency`` section: bursts of concurrent verified turns beside bursts of raw
calls of the same judge request, with and without the host's ``gc.freeze()``: a wall-time row
and a CPU-time row a burst."""

from __future__ import annotations

from typing import Any

import loopback
from judge_server import JudgeServerProcess
from run_sizes import Sizes
from run_table import Row, ms, signed_ms, verdict
from sampling import Burst, median
from scenarios import WIRES, Wire


async def concurrency(sizes: Sizes, rows: list[Row], server: JudgeServerProcess) -> None:
    for frozen in (False, True):
        for wire in WIRES.values():
            measured, reference = await loopback.concurrent_vs_raw(
                wire, server.url, sizes.concurrent, 100, sizes.concurrent_rounds, frozen=frozen
            )
            rows.extend(_burst_rows(sizes, wire, measured, reference, frozen=frozen))


def _burst_data(
    sizes: Sizes, wire: Wire, measured: list[Burst], reference: list[Burst]
) -> dict[str, Any]:
    """The bursts' medians (per turn for the CPU times), each side's failures and full
    collections per burst, and the last burst's latencies."""
    count = sizes.concurrent
    return {
        "wire": wire.name,
        "wall_s": median([b.wall for b in measured]),
        "raw_wall_s": median([b.wall for b in reference]),
        "p99_s": median([b.p99 for b in measured]),
        "raw_p99_s": median([b.p99 for b in reference]),
        "cpu_per_turn_s": median([b.cpu for b in measured]) / count,
        "raw_cpu_per_turn_s": median([b.cpu for b in reference]) / count,
        "failed": [b.failed for b in measured],
        "raw_failed": [b.failed for b in reference],
        "full_collections": [b.collections[2] for b in measured],
        "raw_full_collections": [b.collections[2] for b in reference],
        "collections": [list(b.collections) for b in measured],
        "raw_collections": [list(b.collections) for b in reference],
        "gc_cpu_per_turn_s": median([b.gc_seconds for b in measured]) / count,
        "raw_gc_cpu_per_turn_s": median([b.gc_seconds for b in reference]) / count,
        "rounds": sizes.concurrent_rounds,
        "latencies_s": measured[-1].latencies,
        "raw_latencies_s": reference[-1].latencies,
    }


def _burst_rows(
    sizes: Sizes,
    wire: Wire,
    measured: list[Burst],
    reference: list[Burst],
    *,
    frozen: bool = False,
) -> list[Row]:
    """The burst's wall-time row and its CPU-time row; turns that failed open are counted in
    both (a busy machine's result), never raised. ``frozen``: the host's recipe
    (``gc.freeze()`` once warm), rows for information beside the target's."""
    count = sizes.concurrent
    data = _burst_data(sizes, wire, measured, reference)
    failed, raw_failed = data["failed"], data["raw_failed"]
    all_passed = not any(failed) and not any(raw_failed)
    failures = "" if all_passed else f"; not passed per burst: {failed}, raw {raw_failed}"
    name = (
        f"{count} concurrent verified turns vs {count} raw calls of the same judge request,"
        f" judge answering after 100 ms, {wire.judge_model}, median of"
        f" {sizes.concurrent_rounds} bursts{failures}"
        f"{', `gc.freeze()` in both once warm (the host recipe)' if frozen else ''}"
    )
    return [
        _wall_row(name, data, frozen=frozen, all_passed=all_passed),
        _cpu_row(name, data, frozen=frozen, all_passed=all_passed),
    ]


def _wall_row(name: str, data: dict[str, Any], *, frozen: bool, all_passed: bool) -> Row:
    wall, raw_wall = data["wall_s"], data["raw_wall_s"]
    p99, raw_p99 = data["p99_s"], data["raw_p99_s"]
    ratio = wall / raw_wall
    return Row(
        f"{name}: wall (p99 per turn)",
        f"{ms(wall, 0)} ({ms(p99, 0)})",
        f"{ms(raw_wall, 0)} ({ms(raw_p99, 0)}) raw",
        f"{ratio:.2f}x (p99 {p99 / raw_p99:.2f}x)",
        signed_ms(wall - raw_wall, 0),
        "—" if frozen else "≤ 1.08x",
        "info" if frozen else verdict(ratio <= 1.08 and all_passed),
        data,
    )


def _cpu_row(name: str, data: dict[str, Any], *, frozen: bool, all_passed: bool) -> Row:
    cpu, raw_cpu = data["cpu_per_turn_s"], data["raw_cpu_per_turn_s"]
    gc_cpu, raw_gc_cpu = data["gc_cpu_per_turn_s"], data["raw_gc_cpu_per_turn_s"]
    full, raw_full = data["full_collections"], data["raw_full_collections"]
    return Row(
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
            key: data[key]
            for key in (
                "wire",
                "cpu_per_turn_s",
                "raw_cpu_per_turn_s",
                "gc_cpu_per_turn_s",
                "raw_gc_cpu_per_turn_s",
                "full_collections",
                "raw_full_collections",
            )
        },
    )
