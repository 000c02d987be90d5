"""What each option of the judge's request costs a litellm call, per wire format.

    python benchmarks/judge_options.py [--pairs N] [--gap-ms MS] [--wire NAME ...]

``litellm.acompletion`` builds its request (``get_optional_params``, the provider's mapping of
each option) in a worker thread (``run_in_executor``) while the event loop waits in
``epoll.poll``: an option that is costly to map shows in no profile of the calling thread,
only as a longer wait in poll. So each call is measured three ways: wall time, the calling
thread's CPU, and the CPU the worker threads spent during the call.

Sides, interleaved in one process (the order rotates on every round), against the loopback
judge in its own process (``/fast/``):

- ``default``: model, messages, api_base and api_key only (the reference of ``run.py``'s
  verified figure);
- ``+ <option>``: the default call plus one option of the judge's request, alone;
- ``+ forced verdict tool``: the default call plus the verdict schema as the one tool the
  model must call (``tools`` + ``tool_choice``), the other way to have a provider enforce it;
- ``request by hand``: the judge's request for this turn (``scenarios.judge_params``) sent
  with ``litellm.acompletion`` as a host would write it, the reference of the verified turn;
- ``judge request``: ``LiteLLMJudge.request`` for this turn, with the byte-capped session
  (and, on Anthropic, the client over it) that the judge adds;
- ``judge, response_format``: the same, with the verdict schema as ``response_format`` (what
  litellm maps anew on every call) when the judge sends it in another form;
- ``LiteLLMJudge.judge``: the judge itself on this turn's prompt (its request, the call in
  the verifier's own client scope, reading the answer and its cost, parsing the verdict);
- ``verified turn``: ``verifier.run`` of an instant agent, judged by the same server.

``--gap-ms`` (default 2) waits between calls, so that litellm's logging of one call (a
thread of its own) is not counted in the next call's worker CPU.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures.thread as futures_thread
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import scenarios as sc
from judge_server import JudgeServerProcess

from replyguard import Verifier
from replyguard.judge import VERDICT_FORMAT, LiteLLMJudge
from replyguard.judge._answer_cap import AnswerSessions
from replyguard.judge._clients import ClientScope
from replyguard.telemetry import Events

_worker_cpu = [0.0]
"""CPU seconds the worker threads spent since the counter was last reset."""


def _count_worker_cpu() -> None:
    """Count the CPU of every work item the thread pools run (litellm's request building)."""
    run = futures_thread._WorkItem.run

    def counted(self: Any) -> None:
        started = time.thread_time()
        try:
            run(self)
        finally:
            _worker_cpu[0] += time.thread_time() - started

    futures_thread._WorkItem.run = counted  # type: ignore[method-assign]


async def sides_for(wire: sc.Wire, url: str) -> tuple[dict[str, Any], Callable[[], Any]]:
    """The calls to compare for ``wire``, and what closes what they opened."""
    import litellm

    turn, reply = sc.typical_turn()
    cfg = sc.config(wire, f"{url}/fast", verifyAll=True)
    verifier = Verifier(cfg)
    await verifier.warmup()
    agent = sc.reply_agent(reply)
    sessions, scope = AnswerSessions(), ClientScope(Events(), drain_seconds=1)
    judge = LiteLLMJudge(cfg, Events(), sessions=sessions, clients=scope)
    prompt = sc.prompt_of_turn(cfg, turn, reply)
    params = sc.judge_params(cfg, turn, reply)
    default = sc.default_params(params)
    capped = dict(params)
    judge._calls._capped(litellm, cfg.model, capped)

    def call(p: dict[str, Any]) -> Callable[[], Awaitable[Any]]:
        return lambda: litellm.acompletion(**p)

    sides: dict[str, Callable[[], Awaitable[Any]]] = {"default": call(default)}
    for key in params:
        if key not in default:
            sides[f"+ {key}"] = call({**default, key: params[key]})
    schema = VERDICT_FORMAT["json_schema"]
    tool = {"type": "function", "function": {"name": "verdict", "parameters": schema["schema"]}}
    forced = {"type": "function", "function": {"name": "verdict"}}
    sides["+ forced verdict tool"] = call({**default, "tools": [tool], "tool_choice": forced})
    sides["request by hand"] = call(params)
    sides["judge request"] = call(capped)
    if "response_format" not in params and "output_format" in params:
        as_before = {k: v for k, v in capped.items() if k != "output_format"}
        sides["judge, response_format"] = call({**as_before, "response_format": VERDICT_FORMAT})

    async def judged() -> None:
        answer = await judge.judge(prompt, time_left=cfg.timeout_seconds)
        await answer.parsed()

    async def verified() -> None:
        await verifier.run(agent, turn)

    sides["LiteLLMJudge.judge"] = judged
    sides["verified turn"] = verified

    async def close() -> None:
        await verifier.aclose()
        await sessions.aclose()
        await scope.aclose()
        await sc.close_clients()

    return sides, close


async def measure(wire: sc.Wire, server: JudgeServerProcess, pairs: int, gap: float) -> None:
    sides, close = await sides_for(wire, server.url)
    names = list(sides)
    wall: dict[str, list[float]] = {n: [] for n in names}
    own: dict[str, list[float]] = {n: [] for n in names}
    worker: dict[str, list[float]] = {n: [] for n in names}
    try:
        for _ in range(20):
            for name in names:
                await sides[name]()
        before = server.stats()["connections"]
        for i in range(pairs):
            shift = i % len(names)
            for name in names[shift:] + names[:shift]:
                if gap:
                    await asyncio.sleep(gap)
                _worker_cpu[0] = 0.0
                started, cpu = time.perf_counter(), time.thread_time()
                await sides[name]()
                wall[name].append(time.perf_counter() - started)
                own[name].append(time.thread_time() - cpu)
                worker[name].append(_worker_cpu[0])
        opened = server.stats()["connections"] - before
    finally:
        await close()
    med = statistics.median
    base = med(wall["default"])
    print(
        f"\n== {wire.judge_model}: medians of {pairs} calls per side, interleaved"
        f" ({opened} TCP connections opened for {pairs * len(names)} calls)"
    )
    print(f"  {'side':24} {'wall ms':>8} {'x default':>9} {'own CPU ms':>10} {'worker CPU ms':>13}")
    for name in names:
        print(
            f"  {name:24} {med(wall[name]) * 1e3:8.3f} {med(wall[name]) / base:9.3f}"
            f" {med(own[name]) * 1e3:10.3f} {med(worker[name]) * 1e3:13.3f}"
        )


async def main_async(args: argparse.Namespace) -> None:
    _count_worker_cpu()
    with JudgeServerProcess() as server:
        for name in args.wire or list(sc.WIRES):
            await measure(sc.WIRES[name], server, args.pairs, args.gap_ms / 1000)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=300)
    parser.add_argument("--gap-ms", type=float, default=2.0)
    parser.add_argument("--wire", action="append", choices=list(sc.WIRES))
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
