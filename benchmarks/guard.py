"""The CI guard's measurements, in a fresh interpreter: prints one JSON object of ratios.

    python benchmarks/guard.py [--hot-bound R] [--verified-bound R] [--only hot|verified]
                               [--slow-precheck SECONDS] [--slow-prompt SECONDS]

Ratios (medians of interleaved pairs, several trials, stopping at the first trial within its
bound: noise only ever slows a trial down):

- ``skip`` / ``quiet``: ``verifier.run`` on a skipped / not-triggered turn over the agent call
  alone, for an agent doing ``AGENT_WORK`` units of Python work;
- ``verified``: a verified turn that passes first time over one raw ``litellm.acompletion``
  with the same parameters, both to the loopback judge in its own process.

``--slow-precheck`` / ``--slow-prompt`` add a busy-wait of that much CPU time to
``replyguard.runner._run.skip_reason`` / ``replyguard.runner._prompting.build_judge_prompt``
(CPU time, not wall time: on a busy machine the injected work slows down as much as the
reference does, like a real regression would). tests/tools/test_bench_guard.py runs this in a
subprocess so that pytest's log capture and fixtures do not weigh on either side of a ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import in_process
import loopback
import scenarios as sc
from judge_server import JudgeServerProcess

AGENT_WORK = 1000
"""Units of ``scenarios.agent_step`` per agent call (about 150 µs of Python on a 2-core VM)."""
HOT_PAIRS = 1500
VERIFIED_PAIRS = 100
TRIALS = 3


def slowed(function: Callable[..., Any], seconds: float) -> Callable[..., Any]:
    """``function`` after a busy-wait of ``seconds`` of this thread's CPU time."""

    def slow(*args: Any, **kwargs: Any) -> Any:
        end = time.thread_time() + seconds
        while time.thread_time() < end:
            pass
        return function(*args, **kwargs)

    return slow


async def trials(measure: Callable[[], Awaitable[float]], bound: float) -> list[float]:
    ratios: list[float] = []
    for _ in range(TRIALS):
        ratios.append(await measure())
        if ratios[-1] <= bound:
            break
    return ratios


async def main_async(args: argparse.Namespace) -> dict[str, list[float]]:
    import replyguard.runner._prompting
    import replyguard.runner._run

    slow = args.slow_precheck or args.slow_prompt
    if args.slow_precheck:
        replyguard.runner._run.skip_reason = slowed(  # type: ignore[assignment]
            replyguard.runner._run.skip_reason, args.slow_precheck
        )
    if args.slow_prompt:
        replyguard.runner._prompting.build_judge_prompt = slowed(  # type: ignore[assignment]
            replyguard.runner._prompting.build_judge_prompt, args.slow_prompt
        )
    # A slowed pipeline needs few pairs to show (and every trial runs, as each one fails).
    hot_pairs, hot_warmup = (50, 20) if slow else (HOT_PAIRS, 200)
    verified_pairs, verified_warmup = (30, 10) if slow else (VERIFIED_PAIRS, 30)
    result: dict[str, list[float]] = {}
    for kind in ("skip", "quiet") if args.only in (None, "hot") else ():

        async def hot(kind: str = kind) -> float:
            pair = await in_process.hot_path(
                kind, hot_pairs, agent_work=AGENT_WORK, warmup=hot_warmup
            )
            return pair.ratio

        result[kind] = await trials(hot, args.hot_bound)
    if args.only not in (None, "verified"):
        return result
    with JudgeServerProcess() as server:

        async def verified() -> float:
            pair, _ = await loopback.verified_vs_raw(
                sc.WIRES["anthropic"], server.url, verified_pairs, warmup=verified_warmup
            )
            return pair.ratio

        result["verified"] = await trials(verified, args.verified_bound)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hot-bound", type=float, default=1.6)
    parser.add_argument("--verified-bound", type=float, default=1.7)
    parser.add_argument("--slow-precheck", type=float, default=0.0)
    parser.add_argument("--slow-prompt", type=float, default=0.0)
    parser.add_argument("--only", choices=["hot", "verified"])
    args = parser.parse_args()
    print(json.dumps(asyncio.run(main_async(args))))


if __name__ == "__main__":
    main()
