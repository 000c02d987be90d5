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
(``scenarios.DiscardingHandler``, a ``logging.Handler`` whose ``emit`` does nothing), as on a
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
cold-start script (``scenarios.cold_scripts``, the collector off) from its start until its
first call returns. Each wire's table has an ``x by hand`` column: the side over the judge's
request sent by hand through ``litellm.acompletion``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import scenarios as sc
from judge_options import sides_for
from judge_server import JudgeServerProcess

_WARM_CALLS = 50
IN_PROCESS = "in-process verified turn"
LOGGED = "in-process verified turn, logging at INFO"
SWITCHED = "in-process verified turn, logging at INFO, level switched per call"
BARE = "in-process bare agent"
BY_HAND = "request by hand"
SLOWED = "in-process verified turn, prompt build slowed"
PLUMBING = "in-process verified turn, screen and prompt build stubbed"
Side = Callable[[], Awaitable[object]]
_SETTLE_SECONDS = 1.0  # litellm's logging of the calls before, in its threads, under valgrind
_DUMP_WAIT_SECONDS = 300.0  # a controller that never answers (it died): the child gives up


def _ask(folder: Path, phase: str, index: int, name: str) -> None:
    """Have the controller dump (and zero) the counters as ``phase`` (start, end) of the
    ``index``-th side, ``name``, and wait until it has (the loop blocked: nothing of the
    process runs meanwhile but litellm's own threads)."""
    want = folder / "want"
    asking = folder / "want.part"
    asking.write_text(f"{phase}\t{index}\t{name}")
    asking.replace(want)  # whole: the controller never reads it half written
    given_up = time.monotonic() + _DUMP_WAIT_SECONDS
    while want.exists():
        if time.monotonic() > given_up:
            raise RuntimeError(f"no dump of {phase} {name!r} within {_DUMP_WAIT_SECONDS:g} s")
        time.sleep(0.02)


OWN = "own"
"""The child's wire for replyguard's own share alone (``--own-share``): no judge server."""
STREAM = "stream"
"""The child's wire for a streamed reply (``--stream``): a 1,000-delta stream from the
loopback server iterated raw, and streamed through ``Verifier.stream`` in ``release`` mode,
each also with the collector on during its calls."""
STREAM_DELTAS = 1000


async def _stream_sides(url: str) -> tuple[dict[str, Side], Side]:
    import streaming as st

    agent = st.litellm_agent(url, f"s{STREAM_DELTAS}")
    verifier = sc.Verifier(st.stream_config("release", 64), judge=sc.InstantJudge())

    async def raw() -> None:
        await st.raw_stream(agent, 64, st.Timings())

    read = st.Timings()
    await st.raw_stream(agent, 64, read)  # the reply's length: timed at its last delta alone

    async def streamed() -> None:
        await st.streamed_turn(verifier, agent, st.Timings(), chars=read.chars[0])

    def collecting(side: Side) -> Side:
        async def call() -> None:
            gc.enable()
            try:
                await side()
            finally:
                gc.disable()

        return call

    sides = {"raw stream": raw, "streamed turn": streamed}
    sides |= {f"{name}, collector on": collecting(side) for name, side in sides.items()}

    async def close() -> None:
        await verifier.aclose()
        await sc.close_clients()

    return sides, close


async def _nothing() -> None:
    return None


def _with_added_work(side: Side, iterations: int) -> Side:
    """``side`` with a loop of ``iterations`` passes added to each judge prompt build: a
    regression of known size, which the guard in the tests must see."""
    from replyguard.runner import _prompting

    build = getattr(_prompting, "build_judge_prompt")  # noqa: B009 - patched below, by name

    def slowed(*args: Any, **kwargs: Any) -> Any:
        for _ in range(iterations):
            pass
        return build(*args, **kwargs)

    async def call() -> None:
        setattr(_prompting, "build_judge_prompt", slowed)  # noqa: B010 - a module's name
        try:
            await side()
        finally:
            setattr(_prompting, "build_judge_prompt", build)  # noqa: B010

    return call


def _plumbing_only(side: Side) -> Side:
    """``side`` with the injection screen and the judge prompt's build stubbed out (the screen
    finds nothing, the build gives the prompt its first real call built): what is left is the
    turn's plumbing (``--plumbing``)."""
    from replyguard.runner import _assessment, _prompting

    build, screen = _prompting.build_judge_prompt, _assessment._suspicion
    built: list[Any] = []

    def rebuilt(*args: Any, **kwargs: Any) -> Any:
        if not built:
            built.append(build(*args, **kwargs))
        return built[0]

    async def clean(text: str, limits: Any) -> tuple[tuple[str, ...], None]:
        return (), None

    async def call() -> None:
        setattr(_prompting, "build_judge_prompt", rebuilt)  # noqa: B010 - a module's name
        setattr(_assessment, "_suspicion", clean)  # noqa: B010
        try:
            await side()
        finally:
            setattr(_prompting, "build_judge_prompt", build)  # noqa: B010
            setattr(_assessment, "_suspicion", screen)  # noqa: B010

    return call


def _switched(side: Side) -> Side:
    """``side`` with the ``replyguard`` logger set to INFO before each call and back to WARNING
    after it, as the wall-time row's logged side is and this row's was until issue 42's third
    round (each ``setLevel`` empties every logger's level cache,
    so the calls after it pay look-ups a host that sets its levels once does not pay). Its
    records reach the host's handler ``_child`` attaches for every side, which drops them:
    ``scenarios.DiscardingHandler``."""
    logger = logging.getLogger("replyguard")

    async def call() -> None:
        logger.setLevel(logging.INFO)
        try:
            await side()
        finally:
            logger.setLevel(logging.WARNING)

    return call


async def _sides(
    wire_name: str, url: str, added_work: int, plumbing: bool = False
) -> tuple[dict[str, Side], Side]:
    """The sides to count for ``wire_name`` (``OWN``: the own share alone), and what closes
    what they opened."""
    if wire_name == STREAM:
        return await _stream_sides(url)
    own, bare = await sc.instant_sides()
    in_process: dict[str, Side] = {
        IN_PROCESS: own,
        LOGGED: own,  # its counted block holds the level at INFO: ``_LEVEL_HELD``
        SWITCHED: _switched(own),
        BARE: bare,
    }
    if added_work:
        in_process[SLOWED] = _with_added_work(own, added_work)
    if plumbing:
        in_process[PLUMBING] = _plumbing_only(own)
    if wire_name == OWN:
        return in_process, _nothing
    sides, close = await sides_for(sc.WIRES[wire_name], url)
    return {**sides, **in_process}, close


_LEVEL_HELD = {IN_PROCESS: logging.WARNING, LOGGED: logging.INFO}
"""The ``replyguard`` logger's level held through each of these sides' warm-up and counted
block, set before the block's first dump (``sc.logger_level``): logging off and on as a host
that sets its levels once runs them."""


def _level(name: str) -> contextlib.AbstractContextManager[None]:
    level = _LEVEL_HELD.get(name)
    return contextlib.nullcontext() if level is None else sc.logger_level(level)


async def _child(
    wire_name: str, url: str, folder: Path, calls: int, added_work: int, plumbing: bool = False
) -> None:
    """The counted process: every side warmed, then each counted between two dumps."""
    sides, close = await _sides(wire_name, url, added_work, plumbing)
    settle = 0.0 if wire_name == OWN else _SETTLE_SECONDS  # in-process sides log nothing
    try:
        with sc.host_handler():  # as on a host that configured logging, whatever the level
            for name, side in sides.items():
                with _level(name):
                    for _ in range(_WARM_CALLS if wire_name != STREAM else 3):
                        await side()
            for index, (name, side) in enumerate(sides.items()):
                with _level(name):
                    if name in _LEVEL_HELD:
                        await side()  # the level's look-ups cached again before the count
                    await asyncio.sleep(settle)
                    gc.collect()
                    gc.disable()
                    _ask(folder, "start", index, name)
                    await _calls(side, calls)
                    await asyncio.sleep(settle)
                    _ask(folder, "end", index, name)
                    gc.enable()
    finally:
        await close()


async def _calls(side: Side, calls: int) -> None:
    for _ in range(calls):
        await side()


def _counted(folder: Path, names: dict[int, str]) -> dict[str, int]:
    """Each side's instructions (in the sides' order), from the dumps made at the end of its
    calls (each dump holds what ran since the one before: the side's counted calls)."""
    found: dict[int, int] = {}
    for dump in folder.glob("cg.out.*"):
        text = dump.read_text(errors="replace")
        trigger = re.search(r"^desc: Trigger: dump end-(\d+)$", text, re.M)
        total = re.search(r"^(?:summary|totals): (\d+)", text, re.M)
        if trigger is not None and total is not None:
            found[int(trigger.group(1))] = int(total.group(1))
    return {names[index]: found[index] for index in sorted(found)}


def _print_dumps(folder: Path, names: dict[int, str]) -> None:
    """Which kept dump (``--profile``) holds which side's counted calls, for
    ``callgrind_annotate --inclusive=yes DUMP``."""
    for dump in sorted(folder.glob("cg.out.*")):
        text = dump.read_text(errors="replace")
        trigger = re.search(r"^desc: Trigger: dump end-(\d+)$", text, re.M)
        if trigger is not None:
            print(f"{names[int(trigger.group(1))]}: {dump}")


def _control(
    children: dict[str, tuple[subprocess.Popen[bytes], Path]],
) -> dict[str, dict[int, str]]:
    """Serve the children's requests for dumps until they have all exited; each child's
    sides by index."""
    names: dict[str, dict[int, str]] = {wire_name: {} for wire_name in children}
    while any(process.poll() is None for process, _ in children.values()):
        for wire_name, (process, folder) in children.items():
            want = folder / "want"
            if process.poll() is None and want.exists():
                phase, index, name = want.read_text().split("\t")
                names[wire_name][int(index)] = name
                done = subprocess.run(
                    ["callgrind_control", "-d", f"{phase}-{index}", str(process.pid)],
                    capture_output=True,
                    text=True,
                )
                if "OK." not in done.stdout:  # its exit status is 0 whatever happened
                    raise RuntimeError(f"callgrind_control failed: {done.stdout}{done.stderr}")
                want.unlink()
        time.sleep(0.05)
    return names


def _shares(per_call: dict[str, float]) -> dict[str, float]:
    """replyguard's own share per turn (the in-process turn over the bare agent), and the
    slowed turn's when it was counted."""
    if IN_PROCESS not in per_call:
        return {}
    shares = {
        "own_share": per_call[IN_PROCESS] - per_call[BARE],
        "logging_at_info": per_call[LOGGED] - per_call[IN_PROCESS],
        "logging_at_info_level_switched": per_call[SWITCHED] - per_call[IN_PROCESS],
    }
    if SLOWED in per_call:
        shares["slowed_own_share"] = per_call[SLOWED] - per_call[BARE]
    if PLUMBING in per_call:
        shares["plumbing"] = per_call[PLUMBING] - per_call[BARE]
    return shares


def _stop(children: dict[str, tuple[subprocess.Popen[bytes], Path]]) -> None:
    """Kill the counted processes still running (the controller failed, or was interrupted):
    each would otherwise wait for its dumps under valgrind, orphaned."""
    for process, _ in children.values():
        if process.poll() is None:
            process.kill()
            process.wait()


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
    title = "in-process only" if wire_name == OWN else sc.WIRES[wire_name].judge_model
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
    for name, share in _shares(per_call).items():
        what = {
            "logging_at_info": "over logging off, each level held through its count",
            "logging_at_info_level_switched": "over logging off, switched around each call",
            "plumbing": "screen and build stubbed",
        }.get(name, "in-process turn - bare agent")
        print(f"  {name.replace('_', ' ')} ({what}): {share / 1e3:.0f}K")


def _cold(url: str, scratch: Path) -> dict[str, int]:
    """Instructions of each cold-start script (``scenarios.cold_scripts``, the collector off
    in both) from its start until its first verified turn / raw call returns, under
    callgrind, side by side."""
    wire = sc.WIRES["openai"]
    turn, reply = sc.typical_turn()
    params = sc.judge_params(sc.config(wire, f"{url}/fast", verifyAll=True), turn, reply)
    scripts = dict(
        zip(
            ("verified", "raw"),
            sc.cold_scripts(wire, url, "gc.disable()", ending="import os; os._exit(0)"),
            strict=True,
        )
    )
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    env.setdefault("LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS", "True")
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as an installed package: its bytecode cached
    for script in scripts.values():  # untimed: file and bytecode caches warm for both
        subprocess.run(
            [sys.executable, "-c", script],
            input=json.dumps(params),
            text=True,
            env=env,
            capture_output=True,
            check=True,
            timeout=300,
        )
    running = {}
    for name, script in scripts.items():
        counted = [sys.executable, "-c", script]
        out = f"--callgrind-out-file={scratch}/cold.{name}"
        running[name] = subprocess.Popen(
            ["valgrind", "--tool=callgrind", out, *counted],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
            text=True,
        )
    counts: dict[str, int] = {}
    for name, process in running.items():
        process.communicate(json.dumps(params), timeout=1800)
        text = (scratch / f"cold.{name}").read_text(errors="replace")
        total = re.search(r"^(?:summary|totals): (\d+)", text, re.M)
        if total is None:
            raise RuntimeError(f"no instruction count for the cold {name} script")
        counts[name] = int(total.group(1))
    return counts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100, help="counted calls a side")
    parser.add_argument("--wire", action="append", choices=list(sc.WIRES))
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
    args = parser.parse_args()
    if args.child:
        wire_name, url, folder = args.child
        asyncio.run(
            _child(wire_name, url, Path(folder), args.calls, args.added_work, args.plumbing)
        )
        return 0
    for tool in ("valgrind", "callgrind_control"):
        if shutil.which(tool) is None:
            print(f"{tool} is not installed (apt-get install valgrind)", file=sys.stderr)
            return 2
    wires = [OWN] if args.own_share else [STREAM] if args.stream else args.wire or list(sc.WIRES)
    if args.cold:
        with JudgeServerProcess() as server, tempfile.TemporaryDirectory() as scratch:
            counts = _cold(server.url, Path(scratch))
        ratio = counts["verified"] / counts["raw"]
        print(f"cold start, collector off, until the first call returns: verified turn"
              f" {counts['verified'] / 1e6:.1f}M, raw call {counts['raw'] / 1e6:.1f}M"
              f" instructions, {ratio:.4f}x")  # fmt: skip
        return 0
    with contextlib.ExitStack() as stack:
        url = "" if args.own_share else stack.enter_context(JudgeServerProcess()).url
        scratch = args.profile or stack.enter_context(tempfile.TemporaryDirectory())
        children: dict[str, tuple[subprocess.Popen[bytes], Path]] = {}
        stack.callback(_stop, children)  # on any way out, before the folders go
        for wire_name in wires:
            folder = Path(scratch) / wire_name
            folder.mkdir()
            command = [
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
            log = stack.enter_context((folder / "log").open("wb"))
            children[wire_name] = (subprocess.Popen(command, stdout=log, stderr=log), folder)
        names = _control(children)
        failed = False
        for wire_name, (process, folder) in children.items():
            if process.returncode != 0:
                failed = True
                tail = (folder / "log").read_text(errors="replace")[-3000:]
                print(f"\n== {wire_name}: the counted process failed\n{tail}", file=sys.stderr)
                continue
            counted = _counted(folder, names[wire_name])
            if args.profile:
                _print_dumps(folder, names[wire_name])
            per_call = {name: total / args.calls for name, total in counted.items()}
            if args.json:
                print(json.dumps({wire_name: _shares(per_call)}))
            else:
                _table(wire_name, per_call, args.calls)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
