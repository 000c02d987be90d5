"""Instructions per call of each side of a judgement, counted by callgrind: figures that the
noise of a shared machine does not move.

    python benchmarks/instructions.py [--calls N] [--wire NAME ...] [--own-share] [--stream]
                                      [--cold] [--profile FOLDER]

On the 2-CPU machines this project runs on, a wall-time median moves by 10-15% between runs of
the same code, more than the gaps this benchmark is about (a few percent of a litellm call).
Callgrind counts the instructions the process executes, in every thread (litellm builds its
request in a worker thread and logs in another), and the counts repeat within about 0.2%.
They are not time: a cold cache or an idle wait costs no instruction. ``run.py`` measures the
time; this says where the work is.

Each wire's sides run in one interpreter under ``valgrind --tool=callgrind``, against the
loopback judge in its own process (not counted). This script, outside valgrind, zeroes the
counters when a side's counted calls start and reads them when they end (``callgrind_control``);
litellm's logging of the calls before is left to finish first. The collector is off during
the counted calls, so that a full collection does not land in one side's count.

Sides: those of ``judge_options.py`` (a default ``litellm.acompletion``, each option of the
judge's request added alone, the judge's whole request, ``LiteLLMJudge.judge``, a verified
turn), and replyguard's own share: a verified turn with an instant in-process judge against the
bare agent call it wraps. Every side runs with a host's handler on the ``replyguard`` logger
(``in_process.DiscardingHandler``, a ``logging.Handler`` whose ``emit`` does nothing), as on a
host that configured logging: an event only replyguard's ``NullHandler`` would receive is
dropped before it is built, so without it logging at INFO would count almost nothing; with it
each record reaches a handler, and no formatting or I/O of the host's is counted. Needs
valgrind (``apt-get install valgrind``); with the default 100 calls a side it takes about 8
minutes (the wires run side by side). ``--own-share`` counts only the own share and what
logging at INFO adds to it (about 40 s, no judge server; the logger's level held at WARNING
through the turn's count and at INFO through the logged turn's, as a host that sets its
levels once runs them, and, beside it, switched to INFO and back around every call as the
wall-time row does: each switch empties every logger's level cache, a cost that is not
replyguard's), ``--added-work N`` also the same turn
with a loop of N passes added to its prompt build, ``--plumbing`` also the same turn with the
injection screen and the prompt build stubbed out (what is left: the turn's plumbing),
``--json`` prints the shares as JSON: the suite's guard (``tests/tools/test_bench_guard.py``).
``--profile FOLDER`` keeps the dumps there and names the one holding each side's counted calls
alone (``callgrind_annotate --inclusive=yes DUMP``: where a side's instructions go, by function).
``--stream`` counts a 1,000-delta loopback stream iterated raw and through
``Verifier.stream`` (``--calls 3`` is enough: minutes under load); ``--cold`` counts each
cold-start script (``startup.cold_scripts``, the collector off) from its start until its
first call returns. Each wire's table has an ``x by hand`` column: the side over the judge's
request sent by hand through ``litellm.acompletion``.

The sides and the counted process are ``counted_sides.py``'s; the dumps, their counts and the
cold-start count are ``callgrind_runs.py``'s.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from callgrind_runs import control, count_cold, counted, print_dumps, stop
from counted_sides import BY_HAND, OWN, STREAM, STREAM_DELTAS, child, shares
from judge_server import JudgeServerProcess
from scenarios import WIRES


def _table(wire_name: str, per_call: dict[str, float], calls: int) -> None:
    base = per_call.get("default")
    by_hand = per_call.get(BY_HAND)
    if wire_name == STREAM:
        raw, raw_on = per_call["raw stream"], per_call["raw stream, collector on"]
        print(f"\n== a {STREAM_DELTAS}-delta stream: instructions per stream, {calls} a side")
        for name, count in per_call.items():
            reference = raw_on if name.endswith("collector on") else raw
            print(f"  {name:28} {count / 1e6:12.2f}M {count / reference:7.3f}x its raw stream")
        return
    title = "in-process only" if wire_name == OWN else WIRES[wire_name].judge_model
    print(f"\n== {title}: instructions per call, {calls} calls a side")
    if base is not None and by_hand is not None:
        print(
            f"  {'side':28} {'instructions':>13} {'x default':>9} {'over default':>13}"
            f" {'x by hand':>9}"
        )
    for name, count in per_call.items():
        if base is not None and by_hand is not None and not name.startswith("in-process"):
            over = (count - base) / 1e3
            print(
                f"  {name:28} {count / 1e6:12.2f}M {count / base:9.3f} {over:+12.0f}K"
                f" {count / by_hand:9.3f}"
            )
    for name, share in shares(per_call).items():
        what = {
            "logging_at_info": "over logging off, each level held through its count",
            "logging_at_info_level_switched": "over logging off, switched around each call",
            "plumbing": "screen and build stubbed",
        }.get(name, "in-process turn - bare agent")
        print(f"  {name.replace('_', ' ')} ({what}): {share / 1e3:.0f}K")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100, help="counted calls a side")
    parser.add_argument("--wire", action="append", choices=list(WIRES))
    parser.add_argument(
        "--own-share", action="store_true", help="only replyguard's own share (no judge server)"
    )
    parser.add_argument(
        "--added-work",
        type=int,
        default=0,
        help="also count the in-process turn with a loop of this many passes per prompt build",
    )
    parser.add_argument("--json", action="store_true", help="print the own shares as JSON")
    parser.add_argument(
        "--plumbing",
        action="store_true",
        help="also count the in-process turn with the screen and the prompt build stubbed out",
    )
    parser.add_argument(
        "--stream",
        action="store_true",
        help=f"count a {STREAM_DELTAS}-delta stream instead, raw and through Verifier.stream",
    )
    parser.add_argument(
        "--cold",
        action="store_true",
        help="count the cold start instead: each fresh script until its first call returns",
    )
    parser.add_argument(
        "--profile",
        metavar="FOLDER",
        help="keep callgrind's dumps in FOLDER (one per counted side, for callgrind_annotate)",
    )
    parser.add_argument(
        "--child", nargs=3, metavar=("WIRE", "URL", "FOLDER"), help=argparse.SUPPRESS
    )
    return parser


def main() -> int:
    args = _parser().parse_args()
    if args.child:
        wire_name, url, folder = args.child
        asyncio.run(child(wire_name, url, Path(folder), args.calls, args.added_work, args.plumbing))
        return 0
    for tool in ("valgrind", "callgrind_control"):
        if shutil.which(tool) is None:
            print(f"{tool} is not installed (apt-get install valgrind)", file=sys.stderr)
            return 2
    if args.cold:
        with JudgeServerProcess() as server, tempfile.TemporaryDirectory() as scratch:
            counts = count_cold(server.url, Path(scratch))
        ratio = counts["verified"] / counts["raw"]
        print(f"cold start, collector off, until the first call returns: verified turn"
              f" {counts['verified'] / 1e6:.1f}M, raw call {counts['raw'] / 1e6:.1f}M"
              f" instructions, {ratio:.4f}x")  # fmt: skip
        return 0
    wires = [OWN] if args.own_share else [STREAM] if args.stream else args.wire or list(WIRES)
    return _count(args, wires)


def _count(args: argparse.Namespace, wires: list[str]) -> int:
    """Each wire's sides counted in a process of their own under callgrind, side by side; each
    wire's table (or shares as JSON) printed."""
    with contextlib.ExitStack() as stack:
        url = "" if args.own_share else stack.enter_context(JudgeServerProcess()).url
        scratch = args.profile or stack.enter_context(tempfile.TemporaryDirectory())
        children: dict[str, tuple[subprocess.Popen[bytes], Path]] = {}
        stack.callback(stop, children)  # on any way out, before the folders go
        for wire_name in wires:
            folder = Path(scratch) / wire_name
            folder.mkdir()
            log = stack.enter_context((folder / "log").open("wb"))
            command = _child_command(args, wire_name, url, folder)
            children[wire_name] = (subprocess.Popen(command, stdout=log, stderr=log), folder)
        names = control(children)
        failed = False
        for wire_name, (process, folder) in children.items():
            if process.returncode != 0:
                failed = True
                tail = (folder / "log").read_text(errors="replace")[-3000:]
                print(f"\n== {wire_name}: the counted process failed\n{tail}", file=sys.stderr)
                continue
            found = counted(folder, names[wire_name])
            if args.profile:
                print_dumps(folder, names[wire_name])
            per_call = {name: total / args.calls for name, total in found.items()}
            if args.json:
                print(json.dumps({wire_name: shares(per_call)}))
            else:
                _table(wire_name, per_call, args.calls)
    return 1 if failed else 0


def _child_command(args: argparse.Namespace, wire_name: str, url: str, folder: Path) -> list[str]:
    """This script under callgrind as the counted process of ``wire_name``'s sides."""
    return [
        "valgrind",
        "--tool=callgrind",
        f"--callgrind-out-file={folder}/cg.out.%p",
        sys.executable,
        os.path.abspath(__file__),
        "--calls",
        str(args.calls),
        "--added-work",
        str(args.added_work),
        *(["--plumbing"] if args.plumbing else []),
        "--child",
        wire_name,
        url,
        str(folder),
    ]


if __name__ == "__main__":
    sys.exit(main())
