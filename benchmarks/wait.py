"""The wait a user feels: how much later a verified reply can be delivered than an unverified one,
with a judge that answers at a hosted model's pace (``paced_provider.py``, its own process).

    python benchmarks/wait.py [--ttft S] [--prefill TOKENS_PER_S] [--decode TOKENS_PER_S]
                              [--repeat N] [--only run|stream|panel ...] [--out DIR]

Rows, each the median of ``--repeat`` turns, the orders and variants interleaved:

- ``run`` and ``stream`` (``"buffer"`` mode), a turn that passes first time and one that fails
  then passes, per wire (OpenAI, Anthropic) and per ``judgeAnswer`` order: the added wait is
  the time until the reply can be delivered (``run`` returns; the stream's ``Done``) minus the
  same without a verifier (the agent's call; its stream read to the end). The target row of
  ``"verdict_first"``: a first-time PASS adds at most the judge's time to first token (its
  TTFT plus the prompt's prefill) plus 10 tokens.
- ``panel``: one judgement by three OpenAI-wire members at their own published speeds, one of
  which fails (``paced_provider.FAIL_MODELS``), deciding early against waiting for every
  member (the same code with ``judge._panel.decided`` answering "not yet" until all answered):
  its wait, what replyguard accounted as its cost, and the output tokens the provider generated.

Prints a markdown table and writes it (``wait.md``) and the raw figures (``wait.json``) to DIR
(default ``benchmarks/out/``). Nothing here asserts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from paced_provider import Pace, PacedProviderProcess, pace_arguments

from replyguard import Done, Turn, Verifier, VerifierConfig

API_KEY = "sk-bench-0000000000000000"
WIRES = {"openai": "openai/gpt-4o-mini", "anthropic": "anthropic/claude-haiku-4-5"}
AGENT_MODELS = {"openai": "anthropic/claude-sonnet-4-5", "anthropic": "openai/gpt-4o"}
PANEL = ["openai/gpt-4o-mini", "openai/gpt-4.1-mini", "openai/gpt-4.1-nano"]
ORDERS = ("reasoning_first", "verdict_first")
REPLY = "Weekly report, 3 June: revenue up 4 %, costs flat, two hires in support."
DELTAS = 40  # the streaming agent's pieces, ``DELTA_GAP`` apart
DELTA_GAP = 0.005
TURN = Turn(user_message="Write the weekly report, with its date.")


def config(url: str, wire: str, order: str, mode: str, **keys: Any) -> VerifierConfig:
    return VerifierConfig.from_dict(
        {
            "enabled": True,
            "verifyAll": True,
            "model": WIRES[wire],
            "agentModel": AGENT_MODELS[wire],
            "apiKey": API_KEY,
            "apiBase": f"{url}/{mode}",
            "judgeAnswer": order,
            "timeoutSeconds": 30,
            "maxAttempts": 3,
            "streaming": {"mode": "buffer"},
            **keys,
        }
    )


def draft(messages: list[dict[str, Any]]) -> str:
    """The agent's reply: a new draft on each retry (a repeated one would be stagnant)."""
    retries = sum(message.get("role") == "assistant" for message in messages)
    return f"{REPLY} (draft {retries + 1})"


async def agent(messages: list[dict[str, Any]]) -> str:
    return draft(messages)


async def streaming_agent(messages: list[dict[str, Any]]) -> AsyncIterator[str]:
    words = draft(messages).split(" ")
    for index in range(DELTAS):
        await asyncio.sleep(DELTA_GAP)
        yield words[index % len(words)] + " "


async def bare_run() -> float:
    started = time.perf_counter()
    await agent([{"role": "user", "content": TURN.user_message}])
    return time.perf_counter() - started


async def bare_stream() -> float:
    started = time.perf_counter()
    async for _ in streaming_agent([{"role": "user", "content": TURN.user_message}]):
        pass
    return time.perf_counter() - started


async def verified_run(verifier: Verifier) -> tuple[float, Any]:
    started = time.perf_counter()
    outcome = await verifier.run(agent, TURN)
    return time.perf_counter() - started, outcome


async def verified_stream(verifier: Verifier) -> tuple[float, Any]:
    started = time.perf_counter()
    outcome = None
    async for event in verifier.stream(streaming_agent, TURN):
        if isinstance(event, Done):
            outcome = event.outcome
    return time.perf_counter() - started, outcome


def median_ms(values: list[float]) -> float:
    return statistics.median(values) * 1000


async def turn_rows(
    provider: PacedProviderProcess, kinds: list[str], repeat: int
) -> list[dict[str, Any]]:
    """The added wait of ``run`` and ``stream`` turns, per wire, outcome and order."""
    rows: list[dict[str, Any]] = []
    pace = provider.pace
    for kind in kinds:
        bare = bare_run if kind == "run" else bare_stream
        verified = verified_run if kind == "run" else verified_stream
        for mode, label in (("pass", "first-time PASS"), ("failfirst", "FAIL then PASS")):
            for wire in WIRES:
                verifiers = {o: Verifier(config(provider.url, wire, o, mode)) for o in ORDERS}
                for verifier in verifiers.values():
                    await verifier.warmup()
                    await verified(verifier)  # litellm's first call to the route
                times: dict[str, list[float]] = {o: [] for o in ORDERS}
                statuses: dict[str, set[str]] = {o: set() for o in ORDERS}
                references: list[float] = []
                prompt_tokens: list[float] = []
                for index in range(repeat):
                    references.append(await bare())
                    for order in ORDERS if index % 2 == 0 else ORDERS[::-1]:
                        before = provider.stats()
                        seconds, outcome = await verified(verifiers[order])
                        after = provider.stats()
                        calls = after["requests"] - before["requests"]
                        prompt_tokens.append(
                            (after["prompt_tokens"] - before["prompt_tokens"]) / max(calls, 1)
                        )
                        times[order].append(seconds)
                        statuses[order].add(outcome.status.value if outcome else "none")
                for verifier in verifiers.values():
                    await verifier.aclose()
                reference = median_ms(references)
                ttft_ms = (pace.ttft + statistics.median(prompt_tokens) / pace.prefill) * 1000
                bound = ttft_ms + 10 / pace.decode * 1000
                for order in ORDERS:
                    added = median_ms(times[order]) - reference
                    target = None
                    if order == "verdict_first" and mode == "pass":
                        target = {"bound_ms": bound, "met": added <= bound}
                    rows.append(
                        {
                            "kind": kind,
                            "case": label,
                            "wire": wire,
                            "order": order,
                            "added_ms": added,
                            "reference_ms": reference,
                            "judge_ttft_ms": ttft_ms,
                            "statuses": sorted(statuses[order]),
                            "target": target,
                        }
                    )
                    print_row(rows[-1])
    return rows


@contextmanager
def waiting_for_every_member() -> Any:
    """The panel as it was: no decision until every member has answered."""
    from replyguard.judge import _panel

    decided = _panel.decided

    def every_member(members: Any, pending: int, **keys: Any) -> bool:
        return pending == 0 and decided(members, pending, **keys)

    _panel.decided = every_member  # type: ignore[assignment]
    try:
        yield
    finally:
        _panel.decided = decided  # type: ignore[assignment]


async def panel_rows(provider: PacedProviderProcess, repeat: int) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for rule in ("any_fail", "majority"):
        for order in ORDERS:
            panel = {"panel": {"models": PANEL, "rule": rule}}
            verifier = Verifier(config(provider.url, "openai", order, "m", **panel))
            await verifier.warmup()
            await verifier.verify(TURN, REPLY)
            figures: dict[str, dict[str, list[float]]] = {
                variant: {"seconds": [], "cost": [], "generated": []}
                for variant in ("early", "every member")
            }
            decisions: set[str] = set()
            for index in range(repeat):
                variants = (
                    ("early", "every member") if index % 2 == 0 else ("every member", "early")
                )
                for variant in variants:
                    before = provider.stats()
                    started = time.perf_counter()
                    if variant == "early":
                        verdict = await verifier.verify(TURN, REPLY)
                    else:
                        with waiting_for_every_member():
                            verdict = await verifier.verify(TURN, REPLY)
                    seconds = time.perf_counter() - started
                    await asyncio.sleep(0.05)  # the provider counts a cut answer's tokens
                    after = provider.stats()
                    figures[variant]["seconds"].append(seconds)
                    figures[variant]["cost"].append(verdict.cost_usd)
                    figures[variant]["generated"].append(after["generated"] - before["generated"])
                    decisions.add(f"{variant}: {'PASS' if verdict.passed else 'FAIL'}")
            await verifier.aclose()
            early, every = figures["early"], figures["every member"]
            row = {
                "kind": "panel",
                "case": rule,
                "order": order,
                "early_ms": median_ms(early["seconds"]),
                "every_member_ms": median_ms(every["seconds"]),
                "early_cost_usd": statistics.median(early["cost"]),
                "every_member_cost_usd": statistics.median(every["cost"]),
                "early_generated": statistics.median(early["generated"]),
                "every_member_generated": statistics.median(every["generated"]),
                "decisions": sorted(decisions),
            }
            rows.append(row)
            print_row(row)
    return rows


def print_row(row: dict[str, Any]) -> None:
    print(json.dumps(row), file=sys.stderr, flush=True)


def table(pace: Pace, rows: list[dict[str, Any]]) -> str:
    lines = [
        f"Judge pace: TTFT {pace.ttft:g} s, prefill {pace.prefill:g} tokens/s, "
        f"decode {pace.decode:g} tokens/s. Medians.",
        "",
        "| turn | case | wire | judgeAnswer | added wait (ms) | judge TTFT (ms) "
        "| target | statuses |",
        "| --- | --- | --- | --- | ---: | ---: | --- | --- |",
    ]
    for row in rows:
        if row["kind"] == "panel":
            continue
        target = row["target"]
        said = "—"
        if target is not None:
            said = f"≤ {target['bound_ms']:.0f} ms: {'PASS' if target['met'] else 'MISS'}"
        lines.append(
            f"| {row['kind']} | {row['case']} | {row['wire']} | {row['order']} "
            f"| {row['added_ms']:.0f} | {row['judge_ttft_ms']:.0f} | {said} "
            f"| {', '.join(row['statuses'])} |"
        )
    panels = [row for row in rows if row["kind"] == "panel"]
    if panels:
        lines += [
            "",
            "| panel rule | judgeAnswer | wait: early (ms) | every member (ms) | ratio "
            "| cost: early ($) | every member ($) | tokens generated: early | every member |",
            "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        for row in panels:
            ratio = row["early_ms"] / row["every_member_ms"]
            lines.append(
                f"| {row['case']} | {row['order']} | {row['early_ms']:.0f} "
                f"| {row['every_member_ms']:.0f} | {ratio:.2f}x "
                f"| {row['early_cost_usd']:.6f} | {row['every_member_cost_usd']:.6f} "
                f"| {row['early_generated']:.0f} | {row['every_member_generated']:.0f} |"
            )
    return "\n".join(lines)


async def main(options: argparse.Namespace) -> None:
    pace = Pace(options.ttft, options.prefill, options.decode)
    only = options.only or ["run", "stream", "panel"]
    rows: list[dict[str, Any]] = []
    with PacedProviderProcess(pace) as provider:
        kinds = [kind for kind in ("run", "stream") if kind in only]
        if kinds:
            rows += await turn_rows(provider, kinds, options.repeat)
        if "panel" in only:
            rows += await panel_rows(provider, options.repeat)
    text = table(pace, rows)
    print(text)
    write(Path(options.out), text, {"pace": vars(pace), "rows": rows})


def write(out: Path, text: str, figures: dict[str, Any]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "wait.md").write_text(text + "\n")
    (out / "wait.json").write_text(json.dumps(figures, indent=2))


def run_main(entry: Callable[[argparse.Namespace], Awaitable[None]]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    pace_arguments(parser)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--only", nargs="*", choices=["run", "stream", "panel"])
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "out"))
    asyncio.run(entry(parser.parse_args()))


if __name__ == "__main__":
    run_main(main)
