"""Where the time goes on replyguard's hot paths (cProfile), to find what to fix.

    python benchmarks/profile_paths.py [verified] [hot] [context] [stages] [--turns N] [--out DIR]

- ``verified``: a verified turn over the loopback judge minus a raw ``litellm.acompletion``
  with the same parameters, function by function (µs per turn; positive: replyguard's turn
  spends more there), for each wire format;
- ``hot``: the skip and not-triggered paths, own time per function;
- ``stages``: each stage of a verified turn (in-process instant judge), median µs per turn with
  warm CPU caches and with caches emptied before each turn (as after a litellm call), timed
  by wrapping the stage's function (no profiler overhead);
- ``context``: ``build_judge_prompt`` at 128K (prose, CJK, JSON) and 1M characters: the
  time spent tokenizing, by call site, and how many characters each site tokenized.

Each profile is also saved as ``<name>.prof`` in DIR (``python -m pstats`` or snakeviz).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import cProfile
import pstats
import sys
import time
import traceback
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import in_process
import sampling
import scenarios as sc
from judge_server import JudgeServerProcess

from replyguard import Verifier

Key = tuple[str, int, str]


def _where(key: Key) -> str:
    file, line, name = key
    for marker in ("site-packages/", "/src/", "python3.11/"):
        if marker in file:
            file = file.split(marker, 1)[1]
            break
    return f"{file}:{line}({name})"


async def _profiled(make: Callable[[], Awaitable[Any]], turns: int, path: Path) -> pstats.Stats:
    profile = cProfile.Profile()
    profile.enable()
    for _ in range(turns):
        await make()
    profile.disable()
    profile.dump_stats(path)
    return pstats.Stats(profile)


def _own(stats: pstats.Stats) -> dict[Key, tuple[int, float, float]]:
    raw: dict[Key, Any] = stats.stats  # type: ignore[attr-defined]
    return {key: (value[1], value[2], value[3]) for key, value in raw.items()}


def _print_top(stats: pstats.Stats, turns: int, limit: int, only: str | None = None) -> None:
    rows = sorted(_own(stats).items(), key=lambda kv: -kv[1][1])
    print(f"  {'own µs/turn':>11} {'cum µs/turn':>11} {'calls/turn':>10}  function")
    shown = 0
    for key, (calls, own, cum) in rows:
        if only and only not in key[0]:
            continue
        print(
            f"  {own / turns * 1e6:11.1f} {cum / turns * 1e6:11.1f} {calls / turns:10.1f}  "
            f"{_where(key)}"
        )
        shown += 1
        if shown == limit:
            break


async def verified(turns: int, out: Path, limit: int) -> None:
    with JudgeServerProcess() as server:
        for wire in sc.WIRES.values():
            turn, reply = sc.typical_turn()
            cfg = sc.config(wire, f"{server.url}/fast", verifyAll=True)
            verifier = Verifier(cfg)
            await verifier.warmup()
            agent = sc.reply_agent(reply)
            params = sc.default_params(sc.judge_params(cfg, turn, reply))

            async def run(verifier: Any = verifier, agent: Any = agent, turn: Any = turn) -> None:
                await verifier.run(agent, turn)

            async def raw(params: dict[str, Any] = params) -> None:
                await sc.raw_call(params)

            for _ in range(50):
                await run()
                await raw()
            t0 = time.perf_counter()
            theirs = await _profiled(raw, turns, out / f"raw_{wire.name}.prof")
            t1 = time.perf_counter()
            ours = await _profiled(run, turns, out / f"verified_{wire.name}.prof")
            t2 = time.perf_counter()
            await sc.close_clients()
            print(
                f"\n== verified turn vs raw litellm, {wire.judge_model}, {turns} turns each"
                f" (profiled: {(t2 - t1) / turns * 1e3:.2f} ms vs {(t1 - t0) / turns * 1e3:.2f}"
                " ms per turn)"
            )
            a, b = _own(ours), _own(theirs)
            diff = []
            for key in set(a) | set(b):
                calls_a, own_a, cum_a = a.get(key, (0, 0.0, 0.0))
                calls_b, own_b, cum_b = b.get(key, (0, 0.0, 0.0))
                diff.append((own_a - own_b, cum_a - cum_b, calls_a - calls_b, key))
            diff.sort(key=lambda d: -d[0])
            print(f"  {'+own µs/turn':>12} {'+cum µs/turn':>12} {'+calls/turn':>11}  function")
            for own, cum, calls, key in diff[:limit]:
                print(
                    f"  {own / turns * 1e6:12.1f} {cum / turns * 1e6:12.1f} "
                    f"{calls / turns:11.1f}  {_where(key)}"
                )
            print("  -- replyguard's own functions, by cumulative time per turn --")
            rows = sorted(
                ((k, v) for k, v in a.items() if "replyguard" in k[0]), key=lambda kv: -kv[1][2]
            )
            for key, (calls, own, cum) in rows[:limit]:
                print(
                    f"  {own / turns * 1e6:12.1f} {cum / turns * 1e6:12.1f} "
                    f"{calls / turns:11.1f}  {_where(key)}"
                )


async def hot(turns: int, out: Path, limit: int) -> None:
    from replyguard import Reply, RunMeta, Verifier

    turn, reply = sc.typical_turn()
    cases = {
        "skip": (reply.model_copy(update={"meta": RunMeta(pending_tool_calls=1)}), True),
        "not_triggered": (Reply(text="The report is in reports/q3.pdf; revenue grew 4 %."), False),
        "in_process_verified": (reply, True),
    }
    for name, (answer, verify_all) in cases.items():
        cfg = sc.config(sc.WIRES["anthropic"], "http://127.0.0.1:9", verifyAll=verify_all)
        judge = sc.InstantJudge() if name == "in_process_verified" else None
        verifier = Verifier(cfg, judge=judge) if judge else Verifier(cfg)
        agent = sc.reply_agent(answer)

        async def run(verifier: Any = verifier, agent: Any = agent) -> None:
            await verifier.run(agent, turn)

        for _ in range(200):
            await run()
        count = turns * 10 if name != "in_process_verified" else turns * 3
        stats = await _profiled(run, count, out / f"{name}.prof")
        print(f"\n== {name}: own time per turn ({count} turns)")
        _print_top(stats, count, limit)


_STAGES = (
    # (module, class ("" for a module function), function, is it async, label)
    (
        "replyguard.runner._verifier",
        "",
        "call_agent",
        True,
        "agent call (fresh copy of the messages)",
    ),
    ("replyguard.runner._run", "", "skip_reason", False, "pre-checks"),
    (
        "replyguard.runner._assessment",
        "Assessor",
        "assess",
        True,
        "assessment (checks, scan, judgement)",
    ),
    ("replyguard.runner._assessment", "", "run_checks", True, "  checks"),
    ("replyguard.runner._assessment", "", "suspected_injection", False, "  injection scan"),
    ("replyguard.runner._judging", "Judgements", "judgement", True, "  judgement"),
    ("replyguard.runner._prompting", "", "build_judge_prompt", False, "    judge prompt"),
    ("replyguard.runner._run", "_Run", "finish", True, "outcome"),
)


def _timed(function: Any, samples: list[float], is_async: bool) -> Any:
    clock = time.perf_counter
    if is_async:

        async def timed_async(*args: Any, **kwargs: Any) -> Any:
            started = clock()
            try:
                return await function(*args, **kwargs)
            finally:
                samples.append(clock() - started)

        return timed_async

    def timed(*args: Any, **kwargs: Any) -> Any:
        started = clock()
        try:
            return function(*args, **kwargs)
        finally:
            samples.append(clock() - started)

    return timed


async def stages(turns: int) -> None:
    import importlib

    timings: dict[str, list[float]] = {label: [] for *_, label in _STAGES}
    for module_name, class_name, name, is_async, label in _STAGES:
        module = importlib.import_module(module_name)
        owner = getattr(module, class_name) if class_name else module
        setattr(owner, name, _timed(getattr(owner, name), timings[label], is_async))
    verified_turn, _ = await in_process.instant_sides()
    for _ in range(100):
        await verified_turn()
    results: dict[str, dict[str, float]] = {}
    for mode in ("warm", "cold"):
        for samples in timings.values():
            samples.clear()
        whole: list[float] = []
        for _ in range(turns):
            if mode == "cold":
                in_process.evict_caches()
            started = time.perf_counter()
            await verified_turn()
            whole.append(time.perf_counter() - started)
        results[mode] = {"whole turn (verifier.run)": sampling.median(whole)}
        results[mode].update({label: sampling.median(v) for label, v in timings.items() if v})
    print(f"\n== stages of a verified turn, in-process instant judge, median of {turns} turns")
    print(f"  {'warm µs':>8} {'cold µs':>8}  stage")
    for label in results["warm"]:
        warm, cold = results["warm"][label], results["cold"][label]
        print(f"  {warm * 1e6:8.1f} {cold * 1e6:8.1f}  {label}")


def context(out: Path, limit: int) -> None:
    from replyguard.context import ContextLimits, build_judge_prompt
    from replyguard.context import _tokens as tokens
    from replyguard.types import RunMeta, ToolCallRecord

    meta = RunMeta(stop_reason="stop", tool_calls=(ToolCallRecord(name="search"),))
    real = tokens.encoding()

    class Recording:
        """The encoding, recording each tokenization's call site, size and time."""

        def __init__(self) -> None:
            self.log: list[tuple[str, int, float]] = []

        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

        def encode_ordinary(self, text: str) -> list[int]:
            t0 = time.perf_counter()
            result: list[int] = real.encode_ordinary(text)
            spent = time.perf_counter() - t0
            frames = traceback.extract_stack(limit=8)[:-1]
            site = " ← ".join(
                f"{Path(f.filename).name}:{f.lineno} {f.name}"
                for f in reversed(frames)
                if "replyguard" in f.filename
            )
            self.log.append((site, len(text), spent))
            return result

    for chars, kind in (
        (128_000, "prose"),
        (128_000, "cjk"),
        (128_000, "json"),
        (1_000_000, "prose"),
    ):
        turn, reply_text, rules = sc.sized_turn(chars, kind)

        def build(turn: Any = turn, reply_text: str = reply_text, rules: Any = rules) -> Any:
            return build_judge_prompt(
                turn, reply_text, limits=ContextLimits(), rules=rules, meta=meta
            )

        build()
        recording = Recording()
        original = tokens.encoding
        tokens.encoding = lambda recording=recording: recording  # type: ignore[assignment]
        try:
            t0 = time.perf_counter()
            prompt = build()
            total = time.perf_counter() - t0
        finally:
            tokens.encoding = original  # type: ignore[assignment]
        spent = sum(entry[2] for entry in recording.log)
        print(
            f"\n== context {chars // 1000}K {kind}: {total * 1e3:.1f} ms, of which tiktoken "
            f"{spent * 1e3:.1f} ms in {len(recording.log)} calls on "
            f"{sum(e[1] for e in recording.log):,} chars; {prompt.tokens} tokens sent"
        )
        sites: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0, 0.0])
        for site, size, took in recording.log:
            entry = sites[site]
            entry[0] += 1
            entry[1] += size
            entry[2] += took
        for site, (calls, size, took) in sorted(sites.items(), key=lambda kv: -kv[1][2])[:limit]:
            print(f"  {took * 1e3:7.2f} ms {calls:3.0f} calls {size:9,.0f} chars  {site}")
        profile = cProfile.Profile()
        profile.enable()
        for _ in range(5):
            build()
        profile.disable()
        profile.dump_stats(out / f"context_{kind}_{chars}.prof")


async def main_async(args: argparse.Namespace) -> None:
    what = args.what or ["verified", "hot", "context"]
    if "hot" in what:
        await hot(args.turns, args.out, args.limit)
    if "verified" in what:
        await verified(args.turns, args.out, args.limit)
    if "context" in what:
        context(args.out, args.limit)
    if "stages" in what:
        await stages(args.turns)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", nargs="*", choices=["verified", "hot", "context", "stages"])
    parser.add_argument("--turns", type=int, default=500)
    parser.add_argument("--limit", type=int, default=20)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "out")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
