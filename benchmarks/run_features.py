"""``run.py``'s sections that a feature's own benchmark module measures: ``fleet`` (shared
state, ``fleet.py``) and ``figures`` (the ``figures`` check over its corpus, ``figures.py``)."""

from __future__ import annotations

from typing import Any

from run_sizes import FULL, Sizes
from run_table import Row, ms, signed_ms, us, verdict


async def fleet_section(sizes: Sizes, rows: list[Row]) -> None:
    import fleet

    found = await fleet.measure(sizes.fail_open_runs * 200)
    timeout = found["timeout_s"]
    rows += [
        Row(
            f"shared breaker + spend limit per judged turn, loopback Redis"
            f" (median of {found['pairs'] - found['left_out']} pairs, {found['left_out']} left"
            f" out as degraded; p95 {ms(found['up_p95_s'], 3)})",
            ms(found["up_s"], 3),
            "the same turn without state",
            "—",
            signed_ms(found["up_s"], 3),
            "≤ 0.3 ms",
            verdict(found["up_s"] <= 0.0003),
            found,
        ),
        Row(
            "spend limit per judged turn, in-process (no state)",
            ms(found["local_s"], 3),
            "the same turn without limits",
            target="—",
        ),
        Row(
            f"Redis paused: the first turn's added time (timeoutMs {timeout * 1000:g})",
            ms(found["down_first_s"], 1),
            f"{ms(timeout, 0)} timeout",
            target="≤ timeoutMs + 10 ms",
            result=verdict(found["down_first_s"] <= timeout + 0.01),
        ),
        Row(
            "Redis paused: each later turn's added time (known down)",
            ms(found["down_later_s"], 3),
            target="≤ 0.1 ms",
            result=verdict(found["down_later_s"] <= 0.0001),
        ),
    ]
    admission = await fleet.measure_admission()
    for burst in admission["bursts"]:
        rows.append(_admission_row(burst))


async def figures_section(sizes: Sizes, rows: list[Row]) -> None:
    import figures

    found = await figures.measure(rounds=5 if sizes is FULL else 2)
    false_fail = found["false_fails"] / found["grounded"]
    catch = found["caught"] / found["altered"]
    rows += [
        Row(
            f"`figures` check, false FAILs on {found['grounded']} grounded replies (corpus)",
            f"{false_fail:.1%} ({found['false_fails']})",
            target="< 2 %",
            result=verdict(false_fail < 0.02),
            data=found,
        ),
        Row(
            f"`figures` check, altered figures caught and named, of {found['altered']} replies",
            f"{catch:.1%} ({found['caught']})",
            target="≥ 95 %",
            result=verdict(catch >= 0.95),
        ),
        Row(
            "`figures` check per reply (median), beside the `claims` check on the same replies",
            us(found["figures_s"]),
            us(found["claims_s"]),
            f"{found['figures_s'] / found['claims_s']:.2f}x",
            f"{(found['figures_s'] - found['claims_s']) * 1e6:+.1f} µs",
        ),
    ]


_BEFORE = {3: " (each held at its worst case: 0 admitted)", 25: " (worst case: 4)"}
"""What the same bursts got when every call was held at its worst case (measured in process
with the code before realistic estimates)."""


def _admission_row(burst: dict[str, Any]) -> Row:
    """Calls admitted out of a burst against a spend limit worth ``calls`` calls."""
    calls, limit, call = burst["calls"], burst["limit"], burst["call"]
    within = burst["spent"] <= limit + call
    if burst.get("unpriced"):
        name = f"spend limit ${limit:g}, unpriced judge ${call:g} a call, {burst['turns']} at once"
        name += f", {burst['home']}"
        value = f"spent ${burst['spent']:.2f}"
        target, ok = f"≤ ${limit + call:.2f} (limit + one call)", within
    else:
        name = (
            f"spend limit worth {calls} calls (+ half), {burst['turns']} turns at once,"
            f" {burst['home']}{_BEFORE.get(calls, '')}"
        )
        value = f"{burst['admitted']} admitted"
        target, ok = f"≥ {0.8 * calls:g}; spend ≤ limit + one call", within
        ok = ok and burst["admitted"] >= 0.8 * calls
    if burst["degraded"]:
        name += f" ({burst['degraded']} decided on local state)"
    return Row(name, value, f"spent ${burst['spent']:.6f} of ${limit:.6f}", target=target,
               result=verdict(ok), data=burst)  # fmt: skip


# -- output -----------------------------------------------------------------------------------
