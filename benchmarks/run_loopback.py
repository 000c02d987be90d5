"""``run.py``'s sections against the loopback judge: ``verified`` (a verified turn beside the
judge's request sent by hand and a default call; the floor, a bare HTTP POST), ``bigturns``,
``failopen`` (a hung judge) and ``panel`` (a judge panel)."""

from __future__ import annotations

import loopback
from judge_server import JudgeServerProcess
from run_sizes import Sizes
from run_table import Row, ms, pair_cells, signed_ms, verdict
from sampling import median
from scenarios import WIRES

FAIL_OPEN_TIMEOUT = 0.5


async def verified(sizes: Sizes, rows: list[Row], server: JudgeServerProcess) -> None:
    for wire in WIRES.values():
        before = server.stats()
        by_hand, default, info = await loopback.verified_vs_requests(
            wire, server.url, sizes.verified_pairs
        )
        after = server.stats()
        new_connections = after["connections"] - before["connections"]
        calls = 3 * (sizes.verified_pairs + 30) + 1
        for pair, reference, target, limit in (
            (by_hand, "the same judge request sent by hand", "≤ 1.08x", 1.08),
            (default, "a default `litellm.acompletion` (for information)", "—", None),
        ):
            rows.append(
                Row(
                    f"verified turn (PASS first time), {wire.judge_model} vs {reference}"
                    f" ({sizes.verified_pairs} rounds of the three rotated;"
                    f" {new_connections} TCP connections opened for {calls} calls)",
                    *pair_cells(pair, 3, 3),
                    target,
                    verdict(pair.ratio <= limit) if limit else "info",
                    {
                        "wire": wire.name,
                        "reference": "request" if limit else "default",
                        "measured_s": median(pair.measured),
                        "reference_s": median(pair.reference),
                        "measured_samples": pair.measured,
                        "reference_samples": pair.reference,
                        "new_connections": new_connections,
                        **info,
                    },
                )
            )


async def bigturns(sizes: Sizes, rows: list[Row], server: JudgeServerProcess) -> None:
    wire = WIRES["anthropic"]
    for chars, limit in ((128_000, 5e-3), (1_000_000, 8e-3)):
        pair, info = await loopback.big_turn_vs_raw(wire, server.url, chars, sizes.big_pairs)
        label = "1M" if chars >= 1_000_000 else f"{chars // 1000}K"
        rows.append(
            Row(
                f"`verify()` end to end, {label}-char prose turn ({info['prompt_chars']:,} chars"
                f" sent), {wire.judge_model} vs raw `litellm.acompletion` with the same messages",
                *pair_cells(pair, 2, 2),
                f"≤ +{limit * 1e3:.0f} ms",
                verdict(pair.difference <= limit),
                {"big_chars": chars, "difference_s": pair.difference},
            )
        )


async def floor(sizes: Sizes, rows: list[Row], server: JudgeServerProcess) -> None:
    for wire in WIRES.values():
        pair, info = await loopback.bare_post_vs_raw(wire, server.url, sizes.verified_pairs)
        rows.append(
            Row(
                f"the floor: a bare HTTP POST of the same body ({info['body_bytes']:,} bytes,"
                f" one kept-alive connection), {wire.judge_model}, vs raw `litellm.acompletion`",
                *pair_cells(pair, 3, 3),
                "—",
                "info",
                {"floor_wire": wire.name, "post_s": median(pair.measured)},
            )
        )


async def failopen(sizes: Sizes, rows: list[Row], server: JudgeServerProcess) -> None:
    for wire in WIRES.values():
        times = await loopback.fail_open(wire, server.url, sizes.fail_open_runs, FAIL_OPEN_TIMEOUT)
        worst = max(times)
        rows.append(
            Row(
                f"fail-open, judge hangs, timeoutSeconds {FAIL_OPEN_TIMEOUT}, {wire.judge_model}"
                f" (median, worst of {len(times)})",
                f"{ms(median(times), 1)} (worst {ms(worst, 1)})",
                f"{ms(FAIL_OPEN_TIMEOUT, 0)} timeout",
                f"{worst / FAIL_OPEN_TIMEOUT:.3f}x",
                signed_ms(worst - FAIL_OPEN_TIMEOUT, 1),
                "≤ timeout + 100 ms",
                verdict(worst <= FAIL_OPEN_TIMEOUT + 0.1),
                {"wire": wire.name, "times_s": times},
            )
        )
    still_open = server.stats()["open"] - 1  # the stats request's own connection
    rows.append(
        Row(
            "connections still open at the hung judge after every fail-open turn ended",
            str(still_open),
            target="0",
            result=verdict(still_open == 0),
            data={"open": still_open},
        )
    )


async def panel(sizes: Sizes, rows: list[Row], server: JudgeServerProcess) -> None:
    floor, versus_one = await loopback.panel_sides(server.url, sizes.panel_pairs)
    members = len(loopback.PANEL_MEMBERS)
    rows.append(
        Row(
            f"judge panel of {members} (every call answered after 50 ms), `verify` vs the same"
            f" {members} requests sent at once with raw `litellm.acompletion`"
            f" ({sizes.panel_pairs} pairs)",
            *pair_cells(floor, 3, 2),
            "≤ +3 ms (the slowest member + a few ms)",
            verdict(floor.difference <= 3e-3),
            {"panel_samples": floor.measured, "raw_samples": floor.reference},
        )
    )
    rows.append(
        Row(
            f"judge panel of {members} vs one judge, `verify` (what the members' own calls add:"
            " litellm's CPU work per call shares one event loop)",
            *pair_cells(versus_one, 3, 2),
            data={"panel_samples": versus_one.measured, "single_samples": versus_one.reference},
        )
    )
