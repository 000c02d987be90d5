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

This file runs the sections and writes the files; each section's rows are made by a
``run_*.py`` module of its kind (``run_in_process``, ``run_loopback``, ``run_concurrency``,
``run_startup``, ``run_streaming``, ``run_features``), from the scenarios of the same kind
(``in_process.py``, ``loopback.py``, ``startup.py``, ``streaming.py``); ``run_table.py`` makes
the table, ``run_chart.py`` the chart, ``run_sizes.py`` says how many samples each section takes.
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
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from judge_server import JudgeServerProcess
from run_chart import chart
from run_concurrency import concurrency
from run_features import figures_section, fleet_section
from run_in_process import context, hot, logging_section, memory
from run_loopback import bigturns, failopen, floor, panel, verified
from run_sizes import FULL, QUICK, Sizes
from run_startup import cli, coldstart, imports, warmstart
from run_streaming import streaming
from run_table import Row, table

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
