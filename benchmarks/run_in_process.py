"""``run.py``'s in-process sections, no judge server: ``hot`` (the skip and not-triggered paths,
replyguard's own share of a verified turn), ``logging``, ``context`` (the judge prompt's
build) and ``memory`` (per turn in flight)."""

from __future__ import annotations

import time

import in_process
from run_sizes import Sizes
from run_table import Row, ms, pair_cells, signed_ms, verdict
from sampling import median
from scenarios import sized_turn


async def hot(sizes: Sizes, rows: list[Row]) -> None:
    for kind, label in (("skip", "skip path (pending tool call)"), ("quiet", "not-triggered path")):
        pair = await in_process.hot_path(kind, sizes.hot_pairs)
        rows.append(
            Row(
                f"{label}: `verifier.run` vs bare `await agent(messages)`",
                *pair_cells(pair, 1),
                "≤ +20 µs",
                verdict(pair.difference <= 20e-6),
                {
                    "kind": kind,
                    "measured_s": median(pair.measured),
                    "reference_s": median(pair.reference),
                    "pairs": sizes.hot_pairs,
                },
            )
        )
    own_cpu = (
        (
            "replyguard's own share of a verified turn: in-process instant judge vs bare agent",
            "≤ +0.1 ms",
            "in_process",
            await in_process.in_process_verified(max(sizes.verified_pairs, 500)),
        ),
        (
            "the same, CPU caches emptied before each call (32 MiB written, untimed),"
            " as after a litellm call",
            "—",
            "in_process_cold",
            await in_process.cold_in_process_verified(sizes.cold_pairs),
        ),
    )
    for label, target, kind, pair in own_cpu:
        rows.append(
            Row(
                label,
                *pair_cells(pair, 0),
                target,
                verdict(pair.difference <= 0.1e-3) if kind == "in_process" else "info",
                {
                    "kind": kind,
                    "measured_s": median(pair.measured),
                    "reference_s": median(pair.reference),
                },
            )
        )


async def logging_section(sizes: Sizes, rows: list[Row]) -> None:
    pair = await in_process.logging_on_vs_off(sizes.log_pairs)
    rows.append(
        Row(
            "verified turn (in-process instant judge) with the `replyguard` logger at INFO vs"
            " logging off (WARNING)",
            *pair_cells(pair, 2),
            "≤ +0.1 ms",
            verdict(pair.difference <= 0.1e-3),
            {"kind": "logging", "measured_s": median(pair.measured)},
        )
    )


async def context(sizes: Sizes, rows: list[Row]) -> None:
    from replyguard.context import _tokens as tokens

    cases = [(n, "prose") for n in sizes.context_reps] + [(128_000, "cjk"), (128_000, "json")]
    encoding = tokens.encoding()
    for chars, kind in cases:
        reps = sizes.context_reps[chars]
        times, prompt = in_process.sized_context(chars, kind, reps)
        turn, reply_text, _ = sized_turn(chars, kind)
        whole = "\n".join([turn.user_message, *(m["content"] for m in turn.history), reply_text])
        counts = []
        for _ in range(max(3, reps // 5)):
            t0 = time.perf_counter()
            encoding.encode_ordinary(whole)
            counts.append(time.perf_counter() - t0)
        built, reference = median(times), median(counts)
        limit = 10e-3 if chars >= 1_000_000 else 5e-3 if chars >= 128_000 else None
        label = f"{chars // 1000}K" if chars < 1_000_000 else "1M"
        rows.append(
            Row(
                f"context `build_judge_prompt`, {label} chars {kind} → {prompt.tokens:,} tokens"
                f" sent (trimmed: {', '.join(prompt.trimmed) or 'nothing'})",
                ms(built),
                f"{ms(reference)} (tiktoken of the whole turn once)",
                f"{built / reference:.2f}x",
                signed_ms(built - reference),
                f"≤ {limit * 1e3:.0f} ms" if limit else "—",
                verdict(built <= limit) if limit else "info",
                {
                    "chars": chars,
                    "kind": kind,
                    "median_s": built,
                    "tokens": prompt.tokens,
                    "whole_count_s": reference,
                    "trimmed": list(prompt.trimmed),
                    "reps": reps,
                },
            )
        )


async def memory(sizes: Sizes, rows: list[Row]) -> None:
    found = await in_process.memory_in_flight(sizes.memory_turns)
    kib = 1024
    rows.append(
        Row(
            f"memory per in-flight verified turn ({sizes.memory_turns} turns blocked on the"
            " judge, tracemalloc)",
            f"{found['verified'] / kib:.1f} KiB",
            f"{found['bare'] / kib:.1f} KiB (bare agent call held the same way)",
            f"{found['verified'] / found['bare']:.1f}x",
            f"+{(found['verified'] - found['bare']) / kib:.1f} KiB",
            "-",
            "info",
            {"verified_traced": found["verified"], "bare_traced": found["bare"]},
        )
    )
