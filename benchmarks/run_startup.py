"""``run.py``'s sections in fresh interpreters: ``import``, ``coldstart`` (the first verified
turn of a new process beside its first raw call; the first and second turns after
``warmup()``) and ``cli`` (``replyguard heartbeat``'s wall time)."""

from __future__ import annotations

import asyncio

import startup
from judge_server import JudgeServerProcess
from run_sizes import Sizes
from run_table import Row, ms, signed_ms, verdict
from sampling import median
from scenarios import WIRES


async def imports(sizes: Sizes, rows: list[Row]) -> None:
    ours, theirs, pulled = await asyncio.to_thread(startup.import_times, sizes.import_runs)
    ratio = median(ours) / median(theirs)
    rows.append(
        Row(
            "`import replyguard` vs `import litellm` (fresh interpreters)"
            + (" — replyguard imported litellm!" if pulled else ""),
            ms(median(ours), 0),
            ms(median(theirs), 0),
            f"{ratio:.3f}x",
            signed_ms(median(ours) - median(theirs), 0),
            "≤ 0.1x",
            verdict(ratio <= 0.1 and not pulled),
            {"replyguard_s": ours, "litellm_s": theirs, "pulls_litellm": pulled},
        )
    )


_COLLECTOR = {
    "on": "",
    "off": ", the garbage collector off in both",
    "frozen": ", `gc.freeze()` in both once their imports are done",
}


async def coldstart(sizes: Sizes, rows: list[Row], server: JudgeServerProcess) -> None:
    wire = WIRES["openai"]
    for collector in startup.COLLECTOR_MODES:
        ours, theirs, our_passes, their_passes = await asyncio.to_thread(
            startup.cold_start_times, wire, server.url, sizes.cold_runs, collector=collector
        )
        mine, raw = median(ours), median(theirs)
        passes = f"full collections {median(our_passes):g} vs {median(their_passes):g}"
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
    for wire in WIRES.values():
        first, second = await asyncio.to_thread(
            startup.warm_start_times, wire, server.url, sizes.cold_runs
        )
        one, two = median(first), median(second)
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
    ours, theirs = await asyncio.to_thread(startup.cli_wall_times, sizes.cli_runs)
    mine, bare = median(ours), median(theirs)
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
