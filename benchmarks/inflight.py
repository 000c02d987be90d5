"""Objects a verified turn keeps alive while its judge call is in flight, against a raw
``litellm.acompletion`` of the same judge request held the same way.

``python benchmarks/inflight.py [--turns 200] [--wire anthropic openai] [--top 25] [--repeat 3]``

Both sides send their request to the loopback judge's ``/hold/`` path (``judge_server.py``,
in a process of its own, so its objects are not counted here), which answers nothing until
``GET /_release``. Once the judge has all ``turns`` requests, a full collection runs and the
garbage collector's tracked objects are counted (``gc.get_objects()``) against the count
before the calls started: the difference, divided by ``turns``, is what each call in flight
keeps alive. The new objects are also counted by type (a coroutine and a bound method by
their function's name too). Each side is measured once to warm up (the connection pool, the
caches), then ``--repeat`` times; the median run is kept. The figures are
deterministic up to the odd object a pool or a cache keeps; the garbage collector runs a full
pass once the objects surviving into its oldest generation exceed a quarter of it, so a burst
whose turns hold more objects meets that pass sooner (``run.py --only concurrency``).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import scenarios as sc
from judge_server import JudgeServerProcess

from replyguard import Verifier


def _get(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url, timeout=5) as response:
        data: dict[str, Any] = json.loads(response.read())
        return data


def _requests_reach(server: JudgeServerProcess, count: int) -> None:
    """Block until the judge has had ``count`` requests in all (at most 60 s)."""
    ends = time.monotonic() + 60
    while _get(f"{server.url}/_stats")["requests"] < count:
        if time.monotonic() > ends:
            raise RuntimeError(f"the judge did not get {count} requests within 60 s")
        time.sleep(0.01)


def _kind(thing: object) -> str:
    """The type's name; a coroutine's or a bound method's also names its function."""
    name = type(thing).__name__
    if name == "coroutine":
        return f"coroutine {getattr(thing, '__qualname__', '?')}"
    if name == "method":
        return f"method {getattr(getattr(thing, '__func__', None), '__qualname__', '?')}"
    return name


async def held(
    server: JudgeServerProcess, make: Callable[[], Awaitable[Any]], turns: int
) -> tuple[float, Counter[str]]:
    """Objects per call alive while ``turns`` calls of ``make`` wait for the held judge, and
    the new objects by type name (all ``turns`` calls)."""
    arrived = (await asyncio.to_thread(_get, f"{server.url}/_stats"))["requests"]
    gc.collect()
    before = gc.get_objects()
    known = {id(thing) for thing in before}
    tasks = [asyncio.create_task(make()) for _ in range(turns)]
    await asyncio.to_thread(_requests_reach, server, arrived + turns)
    await asyncio.sleep(0.05)  # every call is now waiting for its answer
    gc.collect()
    during = gc.get_objects()
    kinds = Counter(_kind(thing) for thing in during if id(thing) not in known)
    count = len(during) - len(before)
    del during, before, known
    await asyncio.to_thread(_get, f"{server.url}/_release")
    results = await asyncio.gather(*tasks)
    if not all(results):
        raise RuntimeError("a held call did not end as expected")
    return count / turns, kinds


async def measure(
    server: JudgeServerProcess, wire: sc.Wire, turns: int, repeat: int
) -> dict[str, Any]:
    turn, reply = sc.typical_turn()
    cfg = sc.config(wire, f"{server.url}/hold", verifyAll=True, timeoutSeconds=60)
    verifier = Verifier(cfg)
    await verifier.warmup()
    agent = sc.reply_agent(reply)
    params = sc.judge_params(cfg, turn, reply)

    async def verified() -> bool:
        outcome = await verifier.run(agent, turn)
        return outcome.status == "passed"

    async def raw() -> bool:
        await sc.raw_call(params)
        return True

    found: dict[str, Any] = {}
    try:
        for name, make in (("raw", raw), ("verified", verified)):
            await held(server, make, turns)
            runs = [await held(server, make, turns) for _ in range(repeat)]
            runs.sort(key=lambda run: run[0])
            found[name] = runs[len(runs) // 2]  # the median run, with its types
    finally:
        await verifier.aclose()
        await sc.close_clients()
    return found


def table(wire: str, found: dict[str, Any], turns: int, top: int) -> str:
    (raw, raw_kinds), (ours, our_kinds) = found["raw"], found["verified"]
    lines = [
        f"## {wire}: gc-tracked objects alive per call in flight ({turns} calls held)",
        "",
        "| side | objects per call |",
        "|---|---:|",
        f"| verified turn | {ours:.1f} |",
        f"| raw litellm.acompletion | {raw:.1f} |",
        f"| difference | {ours - raw:+.1f} |",
        "",
        "| type | verified per call | raw per call | difference |",
        "|---|---:|---:|---:|",
    ]
    for detailed in (raw_kinds, our_kinds):  # the types' totals, then the named rows
        for name, count in list(detailed.items()):
            if " " in name:
                detailed[name.split(" ", 1)[0]] += count
    names = set(raw_kinds) | set(our_kinds)
    by_gap = sorted(names, key=lambda n: (-abs(our_kinds[n] - raw_kinds[n]), n))
    for name in by_gap[:top]:
        mine, theirs = our_kinds[name] / turns, raw_kinds[name] / turns
        lines.append(f"| {name} | {mine:.2f} | {theirs:.2f} | {mine - theirs:+.2f} |")
    return "\n".join(lines)


async def main_async(args: argparse.Namespace) -> None:
    with JudgeServerProcess() as server:
        for name in args.wire:
            found = await measure(server, sc.WIRES[name], args.turns, args.repeat)
            print(table(name, found, args.turns, args.top), flush=True)
            print(flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--wire", nargs="+", choices=sorted(sc.WIRES), default=["anthropic"])
    parser.add_argument("--top", type=int, default=25, help="types listed, largest gap first")
    parser.add_argument("--repeat", type=int, default=3, help="runs per side (the median kept)")
    asyncio.run(main_async(parser.parse_args()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
